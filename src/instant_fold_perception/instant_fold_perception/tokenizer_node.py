"""Tokenizer node: cloth tokens for every colour/depth/mask triple.

Subscribes `camera/color`, `camera/depth`, `camera/camera_info` and `cloth/mask` (matched by
header stamp) and publishes `cloth/tokens` (ClothTokens, camera optical frame) computed by the
cloth encoder checkpoint: centre crop to square with adjusted intrinsics, near/far depth
filter, farthest point sampling (deterministic start), bilinear feature sampling. Empty or tiny
masks and masks without valid depth are logged and counted as rejections, never published.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, Image

from instant_fold_core.checkpoint import checkpoint_id
from instant_fold_core.device import resolve_device
from instant_fold_core.validation import ValidationError
from instant_fold_interfaces.msg import ClothTokens
from instant_fold_learning.encoder.tokenize import tokenize_frame
from instant_fold_ros.conversions import MessageConversionError, rgbd_from_msgs, tokens_to_msg
from instant_fold_ros.node_main import run_node
from instant_fold_ros.qos import OBSERVATION_QOS
from instant_fold_ros.standins.exact_sync import ExactTimeSync
from instant_fold_ros.standins.image_bridge import image_from_msg


class TokenizerNode(Node):
    def __init__(self) -> None:
        super().__init__("tokenizer")
        from instant_fold_learning.encoder.modeling import ClothEncoder

        checkpoint = str(self.declare_parameter("encoder_checkpoint", "").value)
        device = resolve_device(str(self.declare_parameter("device", "auto").value))
        self.min_mask_pixels = int(self.declare_parameter("min_mask_pixels", 50).value)
        self.encoder = ClothEncoder.from_pretrained(checkpoint, device=device)
        self.encoder_id = checkpoint_id(checkpoint)
        self.published = 0
        self.rejected = 0
        self._info: CameraInfo | None = None
        self._sync = ExactTimeSync(("color", "depth", "mask"), self._tokenize)
        self._pub = self.create_publisher(ClothTokens, "cloth/tokens", OBSERVATION_QOS)
        self.create_subscription(CameraInfo, "camera/camera_info", self._on_info, OBSERVATION_QOS)
        for key, topic in (("color", "camera/color"), ("depth", "camera/depth"), ("mask", "cloth/mask")):
            self.create_subscription(Image, topic, lambda m, k=key: self._sync.add(k, m), OBSERVATION_QOS)
        self.get_logger().info(f"tokenizing with {checkpoint} (encoder {self.encoder_id}) on {device}")

    def _on_info(self, msg: CameraInfo) -> None:
        self._info = msg

    def _reject(self, reason: str) -> None:
        self.rejected += 1
        self.get_logger().warning(f"frame rejected ({self.rejected} so far): {reason}", throttle_duration_sec=2.0)

    def _tokenize(self, msgs: dict[str, Any]) -> None:
        if self._info is None:
            return self._reject("no camera_info received yet")
        try:
            frame = rgbd_from_msgs(msgs["color"], msgs["depth"], self._info)
            mask = image_from_msg(msgs["mask"], ("mono8", "8UC1")) > 0
            if mask.shape != frame.depth.shape:
                raise MessageConversionError(f"cloth/mask: {mask.shape} does not match the images {frame.depth.shape}")
            if int(np.count_nonzero(mask & (frame.depth > 0))) < self.min_mask_pixels:
                raise ValidationError(f"mask has fewer than {self.min_mask_pixels} cloth pixels with valid depth")
            tokens = tokenize_frame(self.encoder, frame, mask)
            msg = tokens_to_msg(*tokens, header=msgs["color"].header, encoder_id=self.encoder_id)  # checks the tokens
        except (MessageConversionError, ValidationError) as exc:
            return self._reject(str(exc))
        self._pub.publish(msg)
        self.published += 1


def main(args: list[str] | None = None) -> int:
    return run_node(TokenizerNode, args)
