"""Keyframe extraction on a synthetic recording with a known answer: a table, a cloth, one hand
(scripted landmarks, its fingertips drawn into the depth image) that pinches the cloth at frame 10
and lets go at frame 20, with a one-frame flicker in between; real bag, real plane segmenter."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scripted_hands import ScriptedHands

from instant_fold_core.contracts import KeyframeEvent
from instant_fold_core.demonstration import load_demonstration
from instant_fold_core.rgbd import RGBDFrame
from instant_fold_demo.extract import demonstration_from_bag, save
from instant_fold_demo.files import events_path
from instant_fold_demo.hands import backproject
from instant_fold_demo.keyframes import ExtractionConfig, ExtractionError
from instant_fold_demo.rgbd_bag import write_rgbd_bag
from instant_fold_perception.segmentation.plane import PlaneSegmenter, PlaneSegmenterConfig

H, W = 96, 128
K = np.array([[115.0, 0, 64], [0, 115.0, 48], [0, 0, 1]], np.float32)
TABLE, CLOTH = 1.0, 0.99
GRASP_PX, RELEASE_PX = np.array([50.0, 45.0]), np.array([80.0, 45.0])


def _script(frames: int = 30) -> dict[int, tuple[np.ndarray, float, float]]:
    """frame -> (grasp pixel, pinch, fingertip height above the cloth) of the left hand."""
    out: dict[int, tuple[np.ndarray, float, float]] = {}
    for t in range(5, min(frames, 25)):
        if t < 10:  # approach, open, hovering
            px, pinch, height = np.array([10.0, 50.0]) + (GRASP_PX - [10, 50]) * (t - 5) / 5, 0.9, 0.12 - 0.02 * (t - 5)
        elif t < 20:  # holding; frame 17 flickers open for one frame (hysteresis ignores it)
            px = GRASP_PX + (RELEASE_PX - GRASP_PX) * (t - 10) / 10
            pinch, height = (0.9 if t == 17 else 0.45 if t == 15 else 0.1), 0.0
        else:  # released, retreating
            px, pinch, height = RELEASE_PX + (np.array([10.0, 15.0]) - RELEASE_PX) * (t - 20) / 5, 0.9, 0.02 * (t - 20)
        out[t] = (px, pinch, height)
    return out


def _frames(script: dict[int, tuple[np.ndarray, float, float]], frames: int = 30) -> list[RGBDFrame]:
    u, v = np.meshgrid(np.arange(W), np.arange(H))
    cloth = (v >= 30) & (v < 70) & (u >= 40) & (u < 100)
    out = []
    for t in range(frames):
        depth = np.where(cloth, CLOTH, TABLE).astype(np.float32)
        color = np.where(cloth[..., None], np.uint8([200, 40, 40]), np.uint8([90, 90, 90])).astype(np.uint8)
        if t in script:
            (cx, cy), _, height = script[t]
            tips = (u - cx) ** 2 + (v - cy) ** 2 <= 9
            depth[tips] = CLOTH - height
        out.append(RGBDFrame(color, depth, K, stamp_ns=(t + 1) * 33_000_000, frame_number=t))
    return out


def _detector(script: dict[int, tuple[np.ndarray, float, float]]) -> ScriptedHands:
    return ScriptedHands({(t + 1) * 33: [(0, px, pinch)] for t, (px, pinch, _) in script.items()})


def _extract(tmp_path: Path, script, frames: int = 30, **config):
    bag = write_rgbd_bag(tmp_path / "demo_bag", _frames(script, frames))
    segmenter = PlaneSegmenter(PlaneSegmenterConfig(ransac_iterations=16, sample_points=1000))  # a flat table
    return demonstration_from_bag(bag, _detector(script), segmenter, ExtractionConfig(**config))


def test_grasp_and_release_are_recovered_with_their_evidence(tmp_path: Path) -> None:
    demo, report = _extract(tmp_path, _script())
    events = report["events"]
    assert [(e["arm"], e["kind"], e["frame"]) for e in events] == [("left", "grasp", 10), ("left", "release", 20)]
    grasp, release = events
    assert grasp["image_frame"] < 10 and report["frames"] == 30  # projected onto a clean frame before the hand
    assert np.allclose(grasp["position"], backproject(*GRASP_PX, CLOTH, K), atol=2e-3)
    assert np.allclose(release["position"], backproject(*RELEASE_PX, CLOTH, K), atol=2e-3)
    assert release["image_frame"] > 20 and grasp["evidence"]["contact"] and grasp["evidence"]["pinch"] < 0.35
    assert report["warnings"] == ["the right hand was never detected"]
    # home, grasp, release, home: no retraction (the arm does not grasp again)
    assert demo.frame_index.tolist() == [0, 10, 20, 29]
    assert demo.events[:, 0].tolist() == [
        KeyframeEvent.MOTION,
        KeyframeEvent.GRASP,
        KeyframeEvent.RELEASE,
        KeyframeEvent.TERMINAL,
    ]
    assert demo.events[:, 1].tolist() == [KeyframeEvent.MOTION] * 3 + [KeyframeEvent.TERMINAL]
    assert demo.keypose[:, 0, 3].tolist() == [1.0, 0.0, 1.0, 1.0]
    home = np.array(ExtractionConfig().home, np.float32)
    assert np.allclose(demo.keypose[0, :, :3], home) and np.allclose(demo.keypose[-1, :, :3], home)
    assert not demo.mask[1][int(GRASP_PX[1]) - 10 :, :5].any()  # the clean frame's mask is the cloth only
    out = tmp_path / "demo.safetensors"
    save(demo, report, out)
    assert load_demonstration(out).num_keyframes == 4
    assert json.loads(events_path(out).read_text())["events"][0]["kind"] == "grasp"


def test_a_second_grasp_of_the_same_arm_gets_a_retraction_keyframe(tmp_path: Path) -> None:
    first = _script()
    second = {t + 30: (px, pinch, height) for t, (px, pinch, height) in first.items()}
    demo, report = _extract(tmp_path, {**first, **second}, frames=60)
    assert [e["frame"] for e in report["events"]] == [10, 20, 40, 50]
    assert demo.frame_index.tolist() == [0, 10, 20, 25, 40, 50, 59]
    release, retraction = demo.keypose[2, 0], demo.keypose[3, 0]
    assert np.allclose(retraction[:2], release[:2]) and retraction[2] == pytest.approx(release[2] - 0.08)


def test_bad_recordings_are_refused_clearly(tmp_path: Path) -> None:
    with pytest.raises(ExtractionError, match="no hand was detected"):
        _extract(tmp_path / "a", {})
    never = {t: s for t, s in _script().items() if t < 18}
    with pytest.raises(ExtractionError, match="left arm grasps at frame 10 and never releases"):
        _extract(tmp_path / "b", never)
    hover = {t: (px, 0.9, 0.1) for t, (px, _, _) in _script().items()}
    with pytest.raises(ExtractionError, match="never grasped the cloth"):
        _extract(tmp_path / "c", hover)
