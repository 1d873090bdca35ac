"""CLI: action error and first-grasp rollouts of a trained policy (see `instant_fold_core.policy.evaluation`)."""

from instant_fold_core.policy.evaluation import main

if __name__ == "__main__":
    raise SystemExit(main())
