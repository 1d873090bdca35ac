"""CLI: temporal contrastive pretraining of the cloth encoder (logic in instant_fold_core)."""

from instant_fold_core.encoder.training import main

if __name__ == "__main__":
    raise SystemExit(main())
