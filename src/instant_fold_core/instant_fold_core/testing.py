"""Small real checkpoints for tests and smoke runs of the online graph (random weights).

The nodes load models from directories exactly as users' trained ones; these are cpu-small models
(paper-configuration ones for latency benchmarks) with random weights and action normalisers
calibrated on synthetic episodes, so every path (loading, tokenising, predicting, executing) runs
for real without training first.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import torch

from instant_fold_core.encoder.configuration import preset as encoder_preset
from instant_fold_core.encoder.modeling import ClothTokenizer
from instant_fold_core.policy.configuration import preset as policy_preset
from instant_fold_core.policy.dataset import PolicyDataset
from instant_fold_core.policy.modeling import InstantFoldPolicy
from instant_fold_core.policy.synthetic import MODES, synthetic_episodes


def untrained_checkpoints(
    root: str | Path, seed: int = 0, preset: str = "cpu-small", **model: Any
) -> tuple[Path, Path]:
    """(policy_dir, tokenizer_dir): a tokenizer and policy of configuration `preset` under `root`;
    `model` overrides fields of the policy's model configuration (e.g. `keypose_head="anchored"`)."""
    root = Path(root)
    torch.manual_seed(seed)
    tokenizer_dir = ClothTokenizer(encoder_preset(preset)).save_pretrained(root / "tokenizer")
    config = policy_preset(preset)
    config.model = dataclasses.replace(config.model, **model).validate()
    policy = InstantFoldPolicy(config.model)
    episodes = synthetic_episodes(1, tuple(MODES)[:2], 1, config.model.cloth_feature_dim, config.model.num_cloth_tokens)
    dataset = PolicyDataset(episodes, config.model.horizon, config.train)
    dataset.calibrate(policy.normalizers)
    policy.mode_ids = dataset.mode_ids
    policy_dir = policy.save_pretrained(root / "policy", config)
    return Path(policy_dir), Path(tokenizer_dir)
