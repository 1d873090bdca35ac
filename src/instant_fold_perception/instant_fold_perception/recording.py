"""Write RGB-D frames into a RealSense recording through the SDK's own software device.

The SDK's recorder produces the very file format a D4xx camera recording has, so playback,
alignment and intrinsics go through the same librealsense code paths as real recordings. Used to
turn simulated or captured frames into replayable recordings, and by the tests (no camera here).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from instant_fold_core.rgbd import RGBDFrame

DEPTH_UNITS_M = 0.001


def write_recording(path: str | Path, frames: Iterable[RGBDFrame], fps: int = 30) -> Path:
    """Record frames (all with the same size, intrinsics and distortion) to `path`.

    pyrealsense2 2.59.1 writes rosbag2 SQLite files and requires a `.db3` name. Depth is stored
    as z16 millimetres, colour as rgb8; depth and colour share one optical frame.
    """
    import pyrealsense2 as rs

    frames = list(frames)
    if not frames:
        raise ValueError("write_recording: no frames")
    first = frames[0].validate()
    h, w = first.color.shape[:2]
    k = first.intrinsics
    intr = rs.intrinsics()
    intr.width, intr.height = w, h
    intr.fx, intr.fy, intr.ppx, intr.ppy = float(k[0, 0]), float(k[1, 1]), float(k[0, 2]), float(k[1, 2])
    intr.model, intr.coeffs = getattr(rs.distortion, first.distortion.model), list(first.distortion.coeffs)

    device = rs.software_device()
    sensors, profiles = [], []
    for uid, (name, stream, fmt, bpp) in enumerate(
        (("Depth", rs.stream.depth, rs.format.z16, 2), ("Color", rs.stream.color, rs.format.rgb8, 3))
    ):
        sensor = device.add_sensor(name)
        vs = rs.video_stream()
        vs.type, vs.index, vs.uid, vs.width, vs.height, vs.fps, vs.bpp, vs.fmt = stream, 0, uid, w, h, fps, bpp, fmt
        vs.intrinsics = intr
        sensors.append(sensor)
        profiles.append(sensor.add_video_stream(vs))
    sensors[0].add_read_only_option(rs.option.depth_units, DEPTH_UNITS_M)
    identity = rs.extrinsics()
    identity.rotation, identity.translation = [1.0, 0, 0, 0, 1.0, 0, 0, 0, 1.0], [0.0, 0.0, 0.0]
    profiles[0].register_extrinsics_to(profiles[1], identity)

    path = Path(path)
    recorder = rs.recorder(str(path), device)
    syncer = rs.syncer()
    for sensor, profile in zip(sensors, profiles, strict=True):
        sensor.open(profile)
        sensor.start(syncer)
    time.sleep(0.1)  # the recorder attaches to the streams asynchronously
    for index, frame in enumerate(frames):
        frame.validate()
        depth_mm = np.round(frame.depth / DEPTH_UNITS_M).clip(0, 65535).astype(np.uint16)
        for sensor, profile, pixels, bpp in zip(sensors, profiles, (depth_mm, frame.color), (2, 3), strict=True):
            sw = rs.software_video_frame()
            sw.pixels, sw.bpp, sw.stride = np.ascontiguousarray(pixels), bpp, w * bpp
            sw.timestamp, sw.domain, sw.frame_number = index * 1000.0 / fps, rs.timestamp_domain.hardware_clock, index
            sw.profile = profile.as_video_stream_profile()
            sensor.on_video_frame(sw)
        time.sleep(0.02)  # the recorder writes asynchronously
    time.sleep(0.1)
    for sensor in sensors:
        sensor.stop()
        sensor.close()
    del recorder  # flushes and closes the file
    return path
