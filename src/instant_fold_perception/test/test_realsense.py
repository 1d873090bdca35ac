"""RealSense playback through librealsense's own recorder and pipeline; no-device errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from perception_scenes import table_scene

from instant_fold_core.rgbd import RGBDFrame
from instant_fold_perception.realsense import CameraUnavailableError, RealSenseCamera, RealSenseConfig
from instant_fold_perception.recording import write_recording


def _frames(n: int = 6) -> list[RGBDFrame]:
    frames = []
    for i in range(n):
        frame, _ = table_scene(size=(48, 64), noise=0.0, seed=i)
        color = frame.color.copy()
        color[0, 0] = (i, i, i)  # mark each frame
        frames.append(RGBDFrame(color, frame.depth, frame.intrinsics, frame_number=i))
    return frames


def test_recording_plays_back_aligned_frames_with_intrinsics(tmp_path: Path) -> None:
    frames = _frames()
    path = write_recording(tmp_path / "demo.db3", frames)
    played = []
    with RealSenseCamera(RealSenseConfig(playback_file=str(path), playback_realtime=False)) as camera:
        np.testing.assert_allclose(camera.intrinsics, frames[0].intrinsics, rtol=1e-6)
        while (frame := camera.read(timeout_ms=2000)) is not None:
            played.append(frame.validate())
    # the SDK's pipeline may skip the first frame or two while it synchronises the streams;
    # everything after that replays in order
    markers = [int(f.color[0, 0, 0]) for f in played]
    assert len(markers) >= len(frames) - 2 and markers == list(range(markers[0], len(frames))), markers
    for original, replay in zip(frames[markers[0] :], played, strict=True):
        np.testing.assert_array_equal(replay.color, original.color)
        valid = replay.depth > 0
        assert valid.mean() > 0.9  # alignment keeps (almost) every pixel
        np.testing.assert_allclose(replay.depth[valid], original.depth[valid], atol=0.0006)  # mm quantisation


def test_missing_device_or_recording_is_a_clear_error(tmp_path: Path) -> None:
    import pyrealsense2 as rs

    if len(rs.context().query_devices()) == 0:
        with pytest.raises(CameraUnavailableError, match="no RealSense device connected"):
            RealSenseCamera(RealSenseConfig()).open()
    with pytest.raises(CameraUnavailableError, match="RealSense 0000 not connected|no RealSense device"):
        RealSenseCamera(RealSenseConfig(serial="0000")).open()
    with pytest.raises(CameraUnavailableError, match="does not exist"):
        RealSenseCamera(RealSenseConfig(playback_file=str(tmp_path / "missing.db3"))).open()
    with pytest.raises(CameraUnavailableError, match="not open"):
        RealSenseCamera(RealSenseConfig()).read()
