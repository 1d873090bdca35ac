"""Small real checkpoints and demonstrations for the policy-server tests (random weights)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from instant_fold_core.demonstration import Demonstration, KeyframeEvent
from instant_fold_core.encoder.configuration import preset as encoder_preset
from instant_fold_core.encoder.modeling import ClothTokenizer
from instant_fold_core.policy.configuration import preset as policy_preset
from instant_fold_core.policy.dataset import PolicyDataset
from instant_fold_core.policy.modeling import InstantFoldPolicy
from instant_fold_core.policy.synthetic import MODES, synthetic_episodes
from instant_fold_core.rgbd import RGBDFrame

K = np.array([[110.0, 0, 64], [0, 110.0, 48], [0, 0, 1]], np.float32)


def make_checkpoints(root: Path) -> tuple[Path, Path]:
    """A cpu-small tokenizer and a cpu-small policy with normalisers calibrated on synthetic data."""
    torch.manual_seed(0)
    tokenizer_dir = ClothTokenizer(encoder_preset("cpu-small")).save_pretrained(root / "tokenizer")
    config = policy_preset("cpu-small")
    policy = InstantFoldPolicy(config.model)
    episodes = synthetic_episodes(1, tuple(MODES)[:2], 1, config.model.cloth_feature_dim, config.model.num_cloth_tokens)
    dataset = PolicyDataset(episodes, config.model.horizon, config.train)
    dataset.calibrate(policy.normalizers)
    policy.mode_ids = dataset.mode_ids
    policy_dir = policy.save_pretrained(root / "policy", config)
    return Path(policy_dir), Path(tokenizer_dir)


def cloth_frame(shift: float = 0.0) -> tuple[RGBDFrame, np.ndarray]:
    """A 96x128 view of a rectangular cloth 1 m below the camera (table at 1.01 m)."""
    depth = np.full((96, 128), 1.01, np.float32)
    mask = np.zeros((96, 128), bool)
    x0 = 30 + int(shift)
    mask[25:70, x0 : x0 + 60] = True
    depth[mask] = 1.0
    color = np.full((96, 128, 3), 80, np.uint8)
    color[mask] = (200, 60, 60)
    return RGBDFrame(color, depth, K), mask


HOME = np.array([[-0.25, 0.05, 0.9, 1.0], [0.25, 0.05, 0.9, 1.0]], np.float32)


def make_demonstration() -> Demonstration:
    frames = [cloth_frame(s) for s in (0.0, 5.0, 10.0)]
    grasp = HOME.copy()
    grasp[0, :3], grasp[0, 3] = (-0.1, 0.0, 1.0), 0.0
    return Demonstration(
        color=np.stack([f.color for f, _ in frames]),
        depth=np.stack([f.depth for f, _ in frames]),
        mask=np.stack([m for _, m in frames]),
        intrinsics=K,
        keypose=np.stack([grasp, HOME, HOME]),
        events=np.array([[KeyframeEvent.GRASP, 0], [KeyframeEvent.RELEASE, 0], [4, 4]], np.uint8),
        frame_index=np.array([0, 10, 20], np.int32),
        name="test-demo",
    )
