"""Demonstration files round-trip; bad demonstrations are refused with the keyframe named."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_validation import make_episode

from instant_fold_core.demonstration import (
    Demonstration,
    DemonstrationError,
    KeyframeEvent,
    from_episode,
    load_demonstration,
)


def make_demo(k: int = 3, size: int = 16) -> Demonstration:
    rng = np.random.default_rng(0)
    mask = np.zeros((k, size, size), bool)
    mask[:, 4:12, 4:12] = True
    return Demonstration(
        color=rng.integers(0, 255, (k, size, size, 3), dtype=np.uint8),
        depth=np.full((k, size, size), 1.0, np.float32),
        mask=mask,
        intrinsics=np.array([[20, 0, 8], [0, 20, 8], [0, 0, 1]], np.float32),
        keypose=rng.normal(size=(k, 2, 4)).astype(np.float32),
        events=np.array([[1, 1], [2, 2], [4, 4]], np.uint8)[:k],
        frame_index=np.arange(k, dtype=np.int32) * 10,
        name="demo",
        mode="sleeves_down+bottom_up",
        description="fold the sleeves down, then fold the bottom up",
    )


def test_file_round_trip_is_exact(tmp_path: Path) -> None:
    demo = make_demo()
    loaded = load_demonstration(demo.save(tmp_path / "demo.safetensors"))
    for name in ("color", "depth", "mask", "intrinsics", "keypose", "events", "frame_index"):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(demo, name))
    assert (loaded.name, loaded.mode, loaded.description) == (demo.name, demo.mode, demo.description)
    assert loaded.frame(1).validate().frame_number == 10


def test_bad_files_and_keyframes_are_reported(tmp_path: Path) -> None:
    with pytest.raises(DemonstrationError, match="does not exist"):
        load_demonstration(tmp_path / "missing.safetensors")
    corrupt = tmp_path / "corrupt.safetensors"
    corrupt.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not a header")
    with pytest.raises(DemonstrationError, match="not a valid demonstration"):
        load_demonstration(corrupt)
    demo = make_demo()
    demo.mask[1] = False
    with pytest.raises(DemonstrationError, match="keyframe 1: empty cloth mask"):
        demo.validate()
    demo = make_demo()
    demo.depth[2] = 0.0
    with pytest.raises(DemonstrationError, match="keyframe 2: no valid depth"):
        demo.validate()
    demo = make_demo()
    demo.keypose[0, 0, 0] = np.nan
    with pytest.raises(DemonstrationError, match="keypose: contains"):
        demo.validate()


def test_episode_keyframes_become_a_demonstration() -> None:
    episode = make_episode(t=6)
    episode.mask[:, 2:5, 2:5] = True
    episode.arm_state[:, :, 3] = 1.0
    episode.arm_state[2:4, 0, 3] = 0.0  # left closes at frame 2, opens at frame 4
    episode.keyframes = np.array([2, 4, 5], np.int32)
    demo = from_episode(episode, name="ep")
    assert demo.events.tolist() == [
        [KeyframeEvent.GRASP, KeyframeEvent.MOTION],
        [KeyframeEvent.RELEASE, KeyframeEvent.MOTION],
        [KeyframeEvent.TERMINAL, KeyframeEvent.TERMINAL],
    ]
    np.testing.assert_array_equal(demo.keypose, episode.arm_state[[2, 4, 5]])
