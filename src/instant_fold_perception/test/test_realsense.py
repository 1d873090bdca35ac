"""RealSense playback through librealsense's own recorder and pipeline; no-device errors; lens
distortion checked against the SDK's own deprojection."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from perception_scenes import table_scene

from instant_fold_core.distortion import NO_DISTORTION, Distortion, rectify
from instant_fold_core.rgbd import RGBDFrame
from instant_fold_core.validation import ValidationError
from instant_fold_perception.realsense import CameraUnavailableError, RealSenseCamera, RealSenseConfig
from instant_fold_perception.recording import write_recording
from instant_fold_perception.segmentation.plane import backproject_all


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


DISTORTED = Distortion("inverse_brown_conrady", (0.1, -0.05, 0.002, -0.003, 0.01))


def test_distortion_is_read_from_the_stream_and_carried_on_every_frame(tmp_path: Path) -> None:
    """Item 10: the colour stream's distortion model and coefficients reach the frames (were dropped)."""
    frames = [replace(f, distortion=DISTORTED) for f in _frames(4)]
    path = write_recording(tmp_path / "distorted.db3", frames)
    with RealSenseCamera(RealSenseConfig(playback_file=str(path), playback_realtime=False)) as camera:
        frame = camera.read(timeout_ms=2000)
    assert frame is not None and frame.distortion.model == "inverse_brown_conrady"
    np.testing.assert_allclose(frame.distortion.coeffs, DISTORTED.coeffs, rtol=1e-6)  # float32 in the SDK


def test_recordings_need_a_db3_name_with_pyrealsense2_2_59(tmp_path: Path) -> None:
    """What docs state about recording formats: 2.59.1 writes rosbag2 SQLite and refuses `.bag`."""
    path = write_recording(tmp_path / "frames.db3", _frames(2))
    assert path.read_bytes()[:16] == b"SQLite format 3\x00"
    with pytest.raises(RuntimeError, match=r"\.db3"):
        write_recording(tmp_path / "frames.bag", _frames(2))


@pytest.mark.parametrize("model", ["brown_conrady", "inverse_brown_conrady"])
def test_back_projection_undoes_distortion_as_the_sdk_does(model: str) -> None:
    """Our undistortion and projection agree with pyrealsense2's own deproject/project functions."""
    import pyrealsense2 as rs

    distortion = Distortion(model, DISTORTED.coeffs)
    k = np.array([[600.0, 0.0, 320.0], [0.0, 605.0, 240.0], [0.0, 0.0, 1.0]], dtype=np.float32)
    intr = rs.intrinsics()
    intr.width, intr.height, intr.fx, intr.fy, intr.ppx, intr.ppy = 640, 480, 600.0, 605.0, 320.0, 240.0
    intr.model, intr.coeffs = getattr(rs.distortion, model), list(distortion.coeffs)
    depth = np.full((480, 640), 0.8, dtype=np.float32)
    points = backproject_all(depth, k, distortion)
    for u, v in ((600, 50), (20, 460), (330, 250), (639, 479)):
        expected = rs.rs2_deproject_pixel_to_point(intr, [float(u), float(v)], 0.8)
        np.testing.assert_allclose(points[v, u], expected, atol=2e-5)
        xd, yd = distortion.distort(*distortion.undistort(np.array((u - 320.0) / 600.0), np.array((v - 240.0) / 605.0)))
        pixel = rs.rs2_project_point_to_pixel(intr, list(expected))
        np.testing.assert_allclose([xd * 600.0 + 320.0, yd * 605.0 + 240.0], pixel, atol=1e-3)
    assert abs(points[50, 600, 0] - backproject_all(depth, k)[50, 600, 0]) > 0.005  # 7 mm at 0.8 m: it matters


def test_rectify_resamples_to_the_distortion_free_camera() -> None:
    k = np.array([[60.0, 0.0, 32.0], [0.0, 60.0, 24.0], [0.0, 0.0, 1.0]], dtype=np.float32)
    rng = np.random.default_rng(0)
    color = rng.integers(0, 255, (48, 64, 3), dtype=np.uint8)
    depth = rng.uniform(0.5, 1.0, (48, 64)).astype(np.float32)
    mask = rng.random((48, 64)) > 0.5
    assert rectify(color, depth, mask, k, NO_DISTORTION)[1] is depth
    c2, d2, m2 = rectify(color, depth, mask, k, DISTORTED)
    u, v = 5, 40  # a corner pixel of the rectified image comes from where the lens puts its ray
    xd, yd = DISTORTED.distort(np.array((u - 32.0) / 60.0), np.array((v - 24.0) / 60.0))
    su, sv = int(np.rint(xd * 60.0 + 32.0)), int(np.rint(yd * 60.0 + 24.0))
    assert (su, sv) != (u, v)
    assert d2[v, u] == depth[sv, su] and m2[v, u] == mask[sv, su] and (c2[v, u] == color[sv, su]).all()
    assert set(np.unique(d2)) <= set(np.unique(depth)) | {0.0}  # nearest neighbour: measured values only
    with pytest.raises(ValidationError, match="kannala_brandt4"):
        Distortion("kannala_brandt4", (0.1, 0, 0, 0, 0))
