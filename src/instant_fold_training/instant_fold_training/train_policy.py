"""CLI: train the in-context policy (see `instant_fold_core.policy.training`); works under torchrun."""

from instant_fold_core.policy.training import main

if __name__ == "__main__":
    raise SystemExit(main())
