"""Camera node: RealSense colour + aligned depth + CameraInfo, live or from a recording.

Publishes `camera/color` (rgb8), `camera/depth` (32FC1, metres, 0 = invalid, aligned to colour)
and `camera/camera_info`, all with one header per frame (stamp: ROS time at capture, frame_id:
the colour optical frame). Without a device it logs a clear error and retries every
`retry_period_s`; a finished recording is reported once.
"""

from __future__ import annotations

import time

from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, Image

from instant_fold_perception.realsense import CameraUnavailableError, RealSenseCamera, RealSenseConfig
from instant_fold_ros.conversions import make_header, rgbd_to_msgs
from instant_fold_ros.node_main import run_node
from instant_fold_ros.qos import OBSERVATION_QOS


class CameraNode(Node):
    def __init__(self) -> None:
        super().__init__("camera")
        p = self.declare_parameter
        self.config = RealSenseConfig(
            serial=str(p("serial", "").value),
            width=int(p("width", 640).value),
            height=int(p("height", 480).value),
            fps=int(p("fps", 30).value),
            playback_file=str(p("playback_file", "").value),
            playback_realtime=bool(p("playback_realtime", True).value),
            playback_repeat=bool(p("playback_repeat", False).value),
        )
        self.frame_id = str(p("frame_id", "camera_color_optical_frame").value)
        self.retry_period_s = float(p("retry_period_s", 2.0).value)
        self.frames_published = 0
        self.open_failures = 0
        self._camera: RealSenseCamera | None = None
        self._next_attempt = 0.0
        self._ended = False
        self._color = self.create_publisher(Image, "camera/color", OBSERVATION_QOS)
        self._depth = self.create_publisher(Image, "camera/depth", OBSERVATION_QOS)
        self._info = self.create_publisher(CameraInfo, "camera/camera_info", OBSERVATION_QOS)
        self.create_timer(0.5 / max(1, self.config.fps), self._poll)

    def _connect(self) -> None:
        if time.monotonic() < self._next_attempt:
            return
        try:
            self._camera = RealSenseCamera(self.config).open()
            source = self.config.playback_file or self.config.serial or "first device"
            self.get_logger().info(f"streaming from {source}")
        except CameraUnavailableError as exc:
            self.open_failures += 1
            self._next_attempt = time.monotonic() + self.retry_period_s
            self.get_logger().error(f"{exc}; retrying in {self.retry_period_s:g} s")

    def _poll(self) -> None:
        if self._camera is None:
            self._connect()
            return
        frame = self._camera.read(timeout_ms=1)
        if frame is None:
            if self._camera.playback_finished and not self._ended:
                self._ended = True
                self.get_logger().info(f"recording ended after {self.frames_published} frames")
            return
        header = make_header(self.frame_id, self.get_clock().now().to_msg())
        for publisher, msg in zip((self._color, self._depth, self._info), rgbd_to_msgs(frame, header), strict=True):
            publisher.publish(msg)
        self.frames_published += 1

    def close(self) -> None:
        if self._camera is not None:
            self._camera.close()


def main(args: list[str] | None = None) -> int:
    return run_node(CameraNode, args)
