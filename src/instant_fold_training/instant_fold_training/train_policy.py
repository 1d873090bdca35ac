"""`python -m instant_fold_training.train_policy`: train the in-context policy; works under torchrun.

The one command path of this CLI (also the `train_policy` console script); its arguments and logic
are `instant_fold_core.policy.training.main`, kept in the core so the core's tests drive it without
this package.
"""

from instant_fold_core.policy.training import main

if __name__ == "__main__":
    raise SystemExit(main())
