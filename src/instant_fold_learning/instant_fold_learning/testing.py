"""Small real checkpoints for tests and smoke runs of the online graph (random weights), and a
random episode for tests of what stores, views and exports episodes.

The nodes load models from directories exactly as users' trained ones; these are cpu-small models
(paper-configuration ones for latency benchmarks) with random weights and action normalisers
calibrated on synthetic episodes, so every path (loading, tokenising, predicting, executing) runs
for real without training first.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import torch

from instant_fold_core.dataset.schema import Episode
from instant_fold_learning.encoder.configuration import preset as encoder_preset
from instant_fold_learning.encoder.modeling import ClothEncoder
from instant_fold_learning.policy.configuration import preset as policy_preset
from instant_fold_learning.policy.dataset import PolicyDataset
from instant_fold_learning.policy.modeling import InstantFoldPolicy
from instant_fold_learning.policy.synthetic import MODES, synthetic_episodes

#: The cloth-anchored model, beyond the paper: grasps read from the cloth (`keypose_head`),
#: demonstrations registered onto it and cloth tokens with metric geometry. Read-only, so a test
#: that adds settings (`{**ANCHORED, "event_progress": True}`) cannot change it for the others.
ANCHORED: Mapping[str, Any] = MappingProxyType(
    {"keypose_head": "anchored", "demo_alignment": "registration", "cloth_geometry": True}
)


def untrained_policy(
    episodes: list | None = None, seed: int | None = 0, preset: str = "cpu-small", **model: Any
) -> tuple[InstantFoldPolicy, Any]:
    """(policy, its configuration): random weights (torch seeded with `seed`; None: as it stands),
    configuration `preset` with `model` overriding fields of its model configuration (e.g.
    `keypose_head="anchored"`), action normalisers, modes and vocabulary from `episodes` (by default
    one synthetic episode of each of two modes)."""
    if seed is not None:
        torch.manual_seed(seed)
    config = policy_preset(preset)
    config.model = dataclasses.replace(config.model, **model).validate()
    policy = InstantFoldPolicy(config.model)
    if episodes is None:
        m = config.model
        episodes = synthetic_episodes(1, tuple(MODES)[:2], 1, m.cloth_feature_dim, m.num_cloth_tokens)
    dataset = PolicyDataset(
        episodes, config.model.horizon, config.train, instructions=config.model.conditioning == "language"
    )
    dataset.calibrate(policy.normalizers)
    policy.mode_ids, policy.vocabulary = dataset.mode_ids, dataset.vocabulary
    return policy, config


def untrained_checkpoints(
    root: str | Path, seed: int = 0, preset: str = "cpu-small", **model: Any
) -> tuple[Path, Path]:
    """(policy_dir, encoder_dir): a cloth encoder and a policy of configuration `preset` under `root`;
    `model` overrides fields of the policy's model configuration (e.g. `keypose_head="anchored"`)."""
    root = Path(root)
    torch.manual_seed(seed)
    encoder_dir = ClothEncoder(encoder_preset(preset)).save_pretrained(root / "encoder")
    policy, config = untrained_policy(None, None, preset, **model)
    policy_dir = policy.save_pretrained(root / "policy", config)
    return Path(policy_dir), Path(encoder_dir)


def random_episode(frames: int, res: int, intrinsics: np.ndarray, seed: int = 0, meta: dict | None = None) -> Episode:
    """An episode of random images, arm states, particles and keypoints (`res` x `res`, 12 particles,
    7 keypoints; the action is the arm state) in which both grippers close at frame 3 and open at
    frame 6; keyframes 0, 3, 6 and the last."""
    rng = np.random.default_rng(seed)
    state = rng.uniform(-0.3, 0.9, (frames, 2, 4)).astype(np.float32)
    state[:, :, 3] = 1.0
    state[3:6, :, 3] = 0.0
    return Episode(
        rgb=rng.integers(0, 255, (frames, res, res, 3), dtype=np.uint8),
        depth=rng.uniform(0.5, 1.2, (frames, res, res)).astype(np.float32),
        mask=rng.random((frames, res, res)) > 0.4,
        intrinsics=np.asarray(intrinsics, np.float32),
        extrinsics=np.eye(4, dtype=np.float32),
        arm_state=state,
        action=state,
        particles=rng.random((frames, 12, 3)).astype(np.float32),
        particle_visible=rng.random((frames, 12)) > 0.3,
        keypoints=rng.random((frames, 7, 3)).astype(np.float32),
        keypoint_particle_ids=np.arange(7, dtype=np.int32),
        keyframes=np.array([0, 3, 6, frames - 1], dtype=np.int32),
        meta=meta or {},
    )
