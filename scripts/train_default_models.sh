#!/usr/bin/env bash
# Train the default models of models/ from nothing (generate, pretrain, tokenise, train, evaluate
# offline, install): the training pipeline with the recipe of config/pipelines/cpu-small.yaml
# (docs/policy.md, "Default models"). Run from the workspace root, inside its environment
# (`source scripts/env.sh`); rerunning on the same WORK resumes every stage. Options:
#   scripts/train_default_models.sh [WORK] [--recipe paper] [--set STAGE.KEY=VALUE ...] [--only|--skip STAGE ...]
exec "${PYTHON:-python}" -m instant_fold.pipeline "$@"
