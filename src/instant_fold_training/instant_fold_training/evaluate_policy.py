"""`python -m instant_fold_training.evaluate_policy`: action error and first-grasp rollouts of a
trained policy.

The one command path of this CLI (also the `evaluate_policy` console script); its arguments and
logic are `instant_fold_core.policy.evaluation.main`, kept in the core so the core's tests drive it
without this package.
"""

from instant_fold_core.policy.evaluation import main

if __name__ == "__main__":
    raise SystemExit(main())
