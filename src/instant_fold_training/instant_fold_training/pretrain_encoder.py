"""`python -m instant_fold_training.pretrain_encoder`: temporal contrastive pretraining of the cloth
encoder; works under torchrun.

The one command path of this CLI (also the `pretrain_encoder` console script); its arguments and
logic are `instant_fold_core.encoder.training.main`, kept in the core so the core's tests drive it
without this package.
"""

from instant_fold_core.encoder.training import main

if __name__ == "__main__":
    raise SystemExit(main())
