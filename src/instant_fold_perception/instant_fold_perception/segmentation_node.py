"""Segmentation node: cloth mask for every aligned colour/depth pair.

Subscribes `camera/color`, `camera/depth`, `camera/camera_info`; publishes `cloth/mask` (mono8,
255 = cloth) with the images' header. Backends: `plane` (table plane + largest blob on it) and
`sam2` (video tracking from a box prompt, given as the `sam2.box` parameter or through the
`segmentation/set_box_prompt` service). Frames that cannot be segmented (no valid depth, nothing on
the table, no prompt yet, lost track, malformed images) are logged and counted, never published
as garbage masks.
"""

from __future__ import annotations

import os

import numpy as np
from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, Image

from instant_fold_core.errors import ConfigError
from instant_fold_interfaces.srv import SetBoxPrompt
from instant_fold_perception.segmentation import SegmentationError, Segmenter
from instant_fold_perception.segmentation.plane import PlaneSegmenter, PlaneSegmenterConfig
from instant_fold_perception.segmentation.sam2_tracker import Sam2Config, Sam2Tracker
from instant_fold_ros.conversions import MessageConversionError, rgbd_from_msgs
from instant_fold_ros.node_main import run_node
from instant_fold_ros.params import declare_config
from instant_fold_ros.qos import OBSERVATION_QOS
from instant_fold_ros.services import create_guarded_service
from instant_fold_ros.standins.exact_sync import ExactTimeSync
from instant_fold_ros.standins.image_bridge import image_to_msg

BACKENDS = ("plane", "sam2")


class SegmentationNode(Node):
    def __init__(self) -> None:
        super().__init__("segmentation")
        backend = str(self.declare_parameter("backend", "plane").value)
        if backend not in BACKENDS:
            raise ConfigError(f"segmentation backend '{backend}' unknown (available: {', '.join(BACKENDS)})")
        self.segmenter: Segmenter = self._make_plane() if backend == "plane" else self._make_sam2()
        self.masks_published = 0
        self.rejected = 0
        self._info: CameraInfo | None = None
        self._sync = ExactTimeSync(("color", "depth"), self._on_pair)
        self._mask = self.create_publisher(Image, "cloth/mask", OBSERVATION_QOS)
        self.create_subscription(CameraInfo, "camera/camera_info", self._on_info, OBSERVATION_QOS)
        self.create_subscription(Image, "camera/color", lambda m: self._sync.add("color", m), OBSERVATION_QOS)
        self.create_subscription(Image, "camera/depth", lambda m: self._sync.add("depth", m), OBSERVATION_QOS)
        create_guarded_service(self, SetBoxPrompt, "segmentation/set_box_prompt", self._on_prompt, (SegmentationError,))
        self.get_logger().info(f"segmenting with the '{backend}' backend")

    def _make_plane(self) -> PlaneSegmenter:
        return PlaneSegmenter(PlaneSegmenterConfig(**declare_config(self, "plane", PlaneSegmenterConfig())))

    def _make_sam2(self) -> Sam2Tracker:
        values = declare_config(self, "sam2", Sam2Config())
        box: list[float] = list(self.declare_parameter("sam2.box", [0.0, 0.0, 0.0, 0.0]).value)
        allow_random = bool(self.declare_parameter("sam2.allow_random_weights", False).value)
        if not values["checkpoint"] and not allow_random:
            raise ValueError(
                "sam2.checkpoint is empty: give the path of a SAM2 checkpoint (random weights segment nothing)"
            )
        tracker = Sam2Tracker(Sam2Config(**values))
        if box[2] > box[0] and box[3] > box[1]:
            tracker.prompt((float(box[0]), float(box[1]), float(box[2]), float(box[3])))
        return tracker

    def _on_prompt(self, request: SetBoxPrompt.Request, response: SetBoxPrompt.Response) -> SetBoxPrompt.Response:
        prompt = getattr(self.segmenter, "prompt", None)
        if prompt is None:
            response.success, response.message = False, "this segmentation backend takes no prompt"
            return response
        prompt((request.x_min, request.y_min, request.x_max, request.y_max))  # a bad box: answered by the guard
        response.success, response.message = True, "tracking restarts from the next frame"
        return response

    def _on_info(self, msg: CameraInfo) -> None:
        self._info = msg

    def _on_pair(self, msgs: dict[str, Image]) -> None:
        if self._info is not None:
            self._segment(msgs["color"], msgs["depth"], self._info)

    def _segment(self, color: Image, depth: Image, info: CameraInfo) -> None:
        try:
            mask = self.segmenter.segment(rgbd_from_msgs(color, depth, info))
        except (MessageConversionError, SegmentationError) as exc:
            self.rejected += 1
            self.get_logger().warning(f"frame rejected ({self.rejected} so far): {exc}", throttle_duration_sec=2.0)
            return
        self._mask.publish(image_to_msg(np.where(mask, 255, 0).astype(np.uint8), "mono8", color.header))
        self.masks_published += 1


def main(args: list[str] | None = None) -> int:
    os.environ.setdefault("TQDM_DISABLE", "1")  # SAM2 draws a progress bar per propagated frame
    return run_node(SegmentationNode, args)
