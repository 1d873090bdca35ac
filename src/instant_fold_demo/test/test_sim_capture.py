"""The capture pipeline without a camera, end to end (issue 30 item 1), as docs/demonstrations.md
tells a newcomer to run it: `sim_recording` (the sim node as camera and robot, the
`sim_demonstrator` replaying the bundled demonstration with the simulated arms, the recorder:
three processes over DDS) -> a real rosbag2 MCAP bag -> `extract --events arm-state --mask
recorded` -> a demonstration whose grasps and releases are the replayed ones, which the
correction page opens and saves.

What is real: processes, DDS, the simulator (Newton cloth), the bag, the extraction and the page's
server. What is not tested here: hands (the simulator renders none; MediaPipe is `test_hands.py`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from instant_fold_core.contracts import KeyframeEvent
from instant_fold_core.demonstration import load_demonstration
from instant_fold_demo.bag import bag_topics
from instant_fold_demo.correction import apply_edits
from instant_fold_demo.extract import main as extract_main
from instant_fold_demo.files import events_path
from instant_fold_demo.rgbd_bag import read_rgbd_frames
from instant_fold_demo.sim_demonstrator import BUNDLED_DEMO, SIM_FPS, waypoints
from instant_fold_ros.bringup_share import models_dir

pytestmark = pytest.mark.ros
POSITION_TOLERANCE_M = 0.005


def _record_and_extract(tmp_path: Path, env: dict[str, str], keyframes: int) -> tuple[Path, dict]:
    """The docs' two commands; the extracted demonstration file and its events JSON."""
    bag = tmp_path / "recordings" / "sim_demo"
    record = [sys.executable, "-m", "instant_fold_demo.sim_recording", str(bag), "--keyframes", str(keyframes)]
    done = subprocess.run(record, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"recorded {bag}" in done.stdout
    topics = bag_topics(bag)
    assert {"/camera/color", "/camera/depth", "/camera/camera_info", "/cloth/mask", "/arms/state", "/arms/home"} <= set(
        topics
    )
    out = tmp_path / "demos" / "sim_demo.safetensors"
    assert extract_main([str(bag), "--out", str(out), "--events", "arm-state", "--mask", "recorded"]) == 0
    return out, json.loads(events_path(out).read_text())


def _replayed_events(keyframes: int) -> list[tuple[str, str, int, np.ndarray]]:
    """(arm, kind, simulated frame, position) of every grasp and release the demonstrator
    performs: simulated frame t is the state after the t-th step of its plan."""
    demo = load_demonstration(models_dir() / BUNDLED_DEMO)
    keypose = demo.keypose[:keyframes] if keyframes else demo.keypose
    plan = waypoints(keypose, demo.frame_index[: len(keypose)], keypose[0])
    closed = np.array([command < 0.5 for _, command in plan])
    out = []
    for step in range(1, len(plan)):
        for arm in np.flatnonzero(closed[step] != closed[step - 1]):
            kind = "grasp" if closed[step, arm] else "release"
            out.append((("left", "right")[arm], kind, step + 1, plan[step][0][arm]))
    return out


def _check(out: Path, report: dict, keyframes: int) -> None:
    expected = _replayed_events(keyframes)
    # by simulated frame (the header stamp): the bag's frame numbers start where the recording did
    sim_frame = [round(f.stamp_ns * SIM_FPS / 1e9) for f in read_rgbd_frames(report["bag"])]
    found = [(e["arm"], e["kind"], sim_frame[e["frame"]], np.array(e["position"])) for e in report["events"]]
    assert [f[:3] for f in found] == [e[:3] for e in expected]
    for (_, _, _, position), (_, _, _, replayed) in zip(found, expected, strict=True):
        assert np.linalg.norm(position - replayed) <= POSITION_TOLERANCE_M
    demo = load_demonstration(out)
    assert demo.events[-1].tolist() == [KeyframeEvent.TERMINAL] * 2
    grasps = [(i, a) for i, a in zip(*np.nonzero(demo.events == KeyframeEvent.GRASP), strict=True)]
    assert all(demo.mask[i].any() for i, _ in grasps)
    # the correction page accepts it as extracted (its rules: alternating events, grasps on the cloth)
    from test_correction_page import _edits

    assert apply_edits(demo, _edits(out)).num_keyframes == demo.num_keyframes


def test_a_short_simulated_recording_gives_back_the_replayed_grasps(tmp_path: Path, ros_env: dict[str, str]) -> None:
    """Both arms grasp and release once (the bundled demonstration's first 4 keyframes)."""
    out, report = _record_and_extract(tmp_path, ros_env, keyframes=4)
    assert [(e["arm"], e["kind"]) for e in report["events"]] == [
        ("left", "grasp"),
        ("right", "grasp"),
        ("left", "release"),
        ("right", "release"),
    ]
    _check(out, report, keyframes=4)


@pytest.mark.slow
def test_the_whole_simulated_fold_gives_back_every_replayed_grasp(tmp_path: Path, ros_env: dict[str, str]) -> None:
    """The bundled demonstration replayed whole (8 grasps and releases, about 160 frames)."""
    out, report = _record_and_extract(tmp_path, ros_env, keyframes=0)
    assert len(report["events"]) == 8
    _check(out, report, keyframes=0)
