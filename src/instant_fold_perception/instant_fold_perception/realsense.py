"""Intel RealSense colour + depth (aligned to colour), live or from a recording.

Live: the device with the given serial (or the first one) streams colour and depth at the
requested resolution and rate; depth is aligned to the colour image, so both share the colour
intrinsics (pinhole matrix, distortion model and coefficients), which are read from the stream.
Playback: a recording replays through the same pipeline. Verified with pyrealsense2 2.59.1 (the
pinned version): its recorder writes rosbag2 SQLite files and only with a `.db3` name (it
refuses `.bag`); such recordings, distortion included, play back. Playing a ROS 1 `.bag`
recording (older SDKs and the viewer) goes through the same call but was not tried (no file).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from instant_fold_core.distortion import NO_DISTORTION, Distortion
from instant_fold_core.errors import ExternalError
from instant_fold_core.rgbd import RGBDFrame
from instant_fold_core.validation import ValidationError


class CameraUnavailableError(ExternalError):
    """No device (or recording) to stream from; the message says which and what to check."""


@dataclass(frozen=True)
class RealSenseConfig:
    serial: str = ""  # empty: the first device found
    width: int = 640
    height: int = 480
    fps: int = 30
    playback_file: str = ""  # non-empty: replay this recording instead of a live device
    playback_realtime: bool = True  # replay at the recorded rate (False: as fast as consumed)
    playback_repeat: bool = False


def _intrinsics_matrix(intr) -> np.ndarray:
    return np.array([[intr.fx, 0.0, intr.ppx], [0.0, intr.fy, intr.ppy], [0.0, 0.0, 1.0]], dtype=np.float32)


def _distortion(intr) -> Distortion:
    """The stream's distortion; a model this package cannot undo is an error unless it is all zeros."""
    coeffs = tuple(float(c) for c in intr.coeffs)
    if not any(coeffs):
        return NO_DISTORTION
    try:
        return Distortion(intr.model.name, coeffs)
    except ValidationError as exc:
        raise CameraUnavailableError(f"colour stream intrinsics: {exc}") from exc


class RealSenseCamera:
    """Context manager yielding aligned `RGBDFrame`s from a RealSense device or recording."""

    def __init__(self, config: RealSenseConfig) -> None:
        import pyrealsense2 as rs

        self._rs = rs
        self.config = config
        self._pipeline = None
        self._align = rs.align(rs.stream.color)
        self._depth_scale = 0.001
        self.intrinsics: np.ndarray | None = None
        self.distortion = NO_DISTORTION

    def open(self) -> RealSenseCamera:
        rs, cfg = self._rs, self.config
        rs_config = rs.config()
        if cfg.playback_file:
            path = Path(cfg.playback_file)
            if not path.is_file():
                raise CameraUnavailableError(f"recording {path} does not exist")
            rs_config.enable_device_from_file(str(path), repeat_playback=cfg.playback_repeat)
        else:
            devices = rs.context().query_devices()
            serials = [d.get_info(rs.camera_info.serial_number) for d in devices]
            if not serials:
                raise CameraUnavailableError("no RealSense device connected (check the USB 3 cable and udev rules)")
            if cfg.serial and cfg.serial not in serials:
                raise CameraUnavailableError(f"RealSense {cfg.serial} not connected (connected: {', '.join(serials)})")
            if cfg.serial:
                rs_config.enable_device(cfg.serial)
            rs_config.enable_stream(rs.stream.color, cfg.width, cfg.height, rs.format.rgb8, cfg.fps)
            rs_config.enable_stream(rs.stream.depth, cfg.width, cfg.height, rs.format.z16, cfg.fps)
        pipeline = rs.pipeline()
        try:
            profile = pipeline.start(rs_config)
        except RuntimeError as exc:
            source = cfg.playback_file or f"device {cfg.serial or '(first)'}"
            raise CameraUnavailableError(f"cannot start RealSense streaming from {source}: {exc}") from exc
        device = profile.get_device()
        if cfg.playback_file:
            device.as_playback().set_real_time(cfg.playback_realtime)
        self._depth_scale = float(device.first_depth_sensor().get_depth_scale())
        color_profile = profile.get_stream(rs.stream.color).as_video_stream_profile()
        color_intrinsics = color_profile.get_intrinsics()
        self.intrinsics = _intrinsics_matrix(color_intrinsics)
        try:
            self.distortion = _distortion(color_intrinsics)
        except CameraUnavailableError:
            pipeline.stop()
            raise
        self._pipeline = pipeline
        return self

    def read(self, timeout_ms: int = 1000) -> RGBDFrame | None:
        """The next aligned frame, or None when none arrived in time (or a recording ended).

        Framesets missing a stream (the SDK emits some while it synchronises at start-up) are
        skipped, so a recording's first frame or two may not be replayed.
        """
        if self._pipeline is None:
            raise CameraUnavailableError("camera is not open")
        deadline = time.monotonic() + timeout_ms / 1000.0
        while True:
            remaining_ms = max(0, int((deadline - time.monotonic()) * 1000))
            ok, frames = self._pipeline.try_wait_for_frames(remaining_ms)
            if not ok:
                return None
            if frames.get_color_frame() and frames.get_depth_frame():
                break
            if remaining_ms == 0:
                return None
        frames = self._align.process(frames)
        color, depth = frames.get_color_frame(), frames.get_depth_frame()
        depth_m = np.asanyarray(depth.get_data()).astype(np.float32) * self._depth_scale
        assert self.intrinsics is not None
        return RGBDFrame(
            color=np.array(color.get_data(), dtype=np.uint8, copy=True),
            depth=depth_m,
            intrinsics=self.intrinsics,
            stamp_ns=int(color.get_timestamp() * 1e6),
            frame_number=int(color.get_frame_number()),
            distortion=self.distortion,
        )

    @property
    def playback_finished(self) -> bool:
        """True once a (non-repeating) recording has been played to its end."""
        if self._pipeline is None or not self.config.playback_file:
            return False
        playback = self._pipeline.get_active_profile().get_device().as_playback()
        return playback.current_status() == self._rs.playback_status.stopped

    def close(self) -> None:
        if self._pipeline is not None:
            self._pipeline.stop()
            self._pipeline = None

    def __enter__(self) -> RealSenseCamera:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()
