"""Graph check: two processes exchange cloth tokens on a topic and action chunks over a service.

This is the smallest real thing the workspace does end to end, and what the main job runs until
the sim-in-the-loop fold lands: it proves that the custom interfaces build, that two separate
processes discover each other over DDS, and it measures topic latency and service round trips.

- `graph_check_source` publishes synthetic cloth tokens (a planar sheet of N points in front of
  the camera, features drawn from a generator seeded by the message sequence number) on
  `cloth/tokens`, and serves `policy/predict_action_chunk` with a *hold* chunk (zero deltas, grippers
  unchanged: what the controller executes when it has nothing better). It only answers for tokens
  it actually published, bit for bit, so the service also verifies the topic's payload.
- `graph_check_probe` subscribes, sends each received token message back through the service with
  a fixed arm state, checks the answer, and writes a JSON report; it exits 0 when every sample
  passed, 1 otherwise (or on timeout).
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from pathlib import Path

import numpy as np
from rclpy.client import Client
from rclpy.node import Node

from instant_fold_core.contracts import ActionChunk, ChunkRepresentation
from instant_fold_interfaces.msg import ClothTokens
from instant_fold_interfaces.srv import PredictActionChunk
from instant_fold_ros.conversions import (
    MessageConversionError,
    action_chunk_from_msg,
    action_chunk_to_msg,
    dual_arm_state_from_msg,
    dual_arm_state_to_msg,
    make_header,
    tokens_from_msg,
    tokens_to_msg,
)
from instant_fold_ros.node_main import run_node
from instant_fold_ros.qos import OBSERVATION_QOS

TOKENS_TOPIC = "cloth/tokens"
PREDICT_SERVICE = "policy/predict_action_chunk"
#: Arm state the probe sends (camera frame, m): left open, right closed.
PROBE_STATE = np.array([[-0.2, 0.05, 1.0, 1.0], [0.2, 0.05, 1.0, 0.0]], dtype=np.float32)


def synthetic_tokens(seq: int, num_tokens: int, feature_dim: int) -> tuple[np.ndarray, np.ndarray]:
    """A flat 0.5 m sheet 1 m in front of the camera, with features seeded by `seq`."""
    side = int(np.ceil(np.sqrt(num_tokens)))
    u, v = np.meshgrid(np.linspace(-0.25, 0.25, side), np.linspace(-0.25, 0.25, side))
    positions = np.stack([u.ravel(), v.ravel(), np.ones(side * side)], axis=1)[:num_tokens]
    features = np.random.default_rng(seq).standard_normal((num_tokens, feature_dim))
    return positions.astype(np.float32), features.astype(np.float32)


def hold_chunk(state: np.ndarray, horizon: int) -> tuple[np.ndarray, np.ndarray]:
    """Zero per-step deltas and unchanged grippers: positions [H, 2, 3], openness [H, 2]."""
    return np.zeros((horizon, 2, 3), np.float32), np.repeat(state[None, :, 3], horizon, axis=0)


class GraphCheckSource(Node):
    """Publishes synthetic cloth tokens and answers predictions with a hold chunk."""

    def __init__(self) -> None:
        super().__init__("graph_check_source")
        self.rate_hz = float(self.declare_parameter("rate_hz", 30.0).value)
        self.num_tokens = int(self.declare_parameter("num_tokens", 64).value)
        self.feature_dim = int(self.declare_parameter("feature_dim", 384).value)
        self.frame_id = str(self.declare_parameter("frame_id", "camera_color_optical_frame").value)
        self.horizon = int(self.declare_parameter("horizon", 8).value)
        self.steps_to_execute = int(self.declare_parameter("steps_to_execute", 4).value)
        self.step_duration = float(self.declare_parameter("step_duration", 0.1).value)
        self._published: OrderedDict[tuple[int, int], int] = OrderedDict()  # stamp -> seq
        self._seq = 0
        self._pub = self.create_publisher(ClothTokens, TOKENS_TOPIC, OBSERVATION_QOS)
        self.create_service(PredictActionChunk, PREDICT_SERVICE, self._predict)
        self.create_timer(1.0 / self.rate_hz, self._publish)
        self.get_logger().info(f"publishing {TOKENS_TOPIC} at {self.rate_hz:g} Hz, serving {PREDICT_SERVICE}")

    def _publish(self) -> None:
        stamp = self.get_clock().now().to_msg()
        positions, features = synthetic_tokens(self._seq, self.num_tokens, self.feature_dim)
        self._pub.publish(tokens_to_msg(positions, features, header=make_header(self.frame_id, stamp)))
        self._published[(stamp.sec, stamp.nanosec)] = self._seq
        while len(self._published) > 256:
            self._published.popitem(last=False)
        self._seq += 1

    def _predict(self, request: PredictActionChunk.Request, response: PredictActionChunk.Response):
        start = time.perf_counter()
        try:
            tokens = tokens_from_msg(request.tokens, expected_tokens=self.num_tokens)
            state = dual_arm_state_from_msg(request.state)
        except MessageConversionError as exc:
            response.success, response.message = False, str(exc)
            return response
        stamp = request.tokens.header.stamp
        seq = self._published.get((stamp.sec, stamp.nanosec))
        if seq is None:
            response.success, response.message = False, "tokens were not published by this source"
            return response
        positions, features = synthetic_tokens(seq, self.num_tokens, self.feature_dim)
        if not (np.array_equal(tokens.positions, positions) and np.array_equal(tokens.features, features)):
            response.success, response.message = False, f"tokens of message {seq} arrived altered"
            return response
        steps = request.steps_to_execute or self.steps_to_execute
        delta, openness = hold_chunk(state, self.horizon)
        hold = ActionChunk(delta, openness, steps, self.step_duration, ChunkRepresentation.DELTA)
        response.chunk = action_chunk_to_msg(hold, request.tokens.header)
        response.success, response.message = True, f"hold chunk for message {seq}"
        response.inference_time = time.perf_counter() - start
        return response


class GraphCheckProbe(Node):
    """Receives tokens, round-trips them through the predict service, reports latencies."""

    def __init__(self) -> None:
        super().__init__("graph_check_probe")
        self.samples = int(self.declare_parameter("samples", 20).value)
        self.timeout_s = float(self.declare_parameter("timeout_s", 60.0).value)
        self.report_path = str(self.declare_parameter("report", "").value)
        self.exit_code = 1
        self.finished = False
        self._topic_latency_ms: list[float] = []
        self._rtt_ms: list[float] = []
        self._failures: list[str] = []
        self._in_flight = False
        self._started = time.monotonic()
        self._client: Client = self.create_client(PredictActionChunk, PREDICT_SERVICE)
        self.create_subscription(ClothTokens, TOKENS_TOPIC, self._on_tokens, OBSERVATION_QOS)
        self.create_timer(0.5, self._check_timeout)
        self.get_logger().info(f"probing {TOKENS_TOPIC} and {PREDICT_SERVICE} for {self.samples} samples")

    def _on_tokens(self, msg: ClothTokens) -> None:
        if self._in_flight or self._done() or not self._client.service_is_ready():
            return
        now = self.get_clock().now().nanoseconds
        sent = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        self._topic_latency_ms.append((now - sent) / 1e6)
        request = PredictActionChunk.Request(tokens=msg, state=dual_arm_state_to_msg(PROBE_STATE, msg.header))
        self._in_flight = True
        start = time.perf_counter()
        self._client.call_async(request).add_done_callback(lambda f: self._on_answer(f, start))

    def _on_answer(self, future, start: float) -> None:
        self._rtt_ms.append((time.perf_counter() - start) * 1e3)
        self._in_flight = False
        response: PredictActionChunk.Response = future.result()
        if not response.success:
            self._failures.append(response.message)
        else:
            chunk = action_chunk_from_msg(response.chunk)
            expected = hold_chunk(PROBE_STATE, int(response.chunk.horizon))
            if chunk.representation != ChunkRepresentation.DELTA or not (
                np.array_equal(chunk.positions, expected[0]) and np.array_equal(chunk.openness, expected[1])
            ):
                self._failures.append("service answered with something other than the hold chunk")
        if self._done():
            self._finish()

    def _done(self) -> bool:
        return len(self._rtt_ms) >= self.samples

    def _check_timeout(self) -> None:
        if time.monotonic() - self._started > self.timeout_s:
            self._failures.append(f"timed out after {self.timeout_s:.0f} s with {len(self._rtt_ms)} samples")
            self._finish()

    def _finish(self) -> None:
        report = {
            "samples": len(self._rtt_ms),
            "failures": self._failures,
            "topic_latency_ms": _stats(self._topic_latency_ms),
            "service_round_trip_ms": _stats(self._rtt_ms),
        }
        text = json.dumps(report, indent=2)
        self.get_logger().info(f"graph check report:\n{text}")
        if self.report_path:
            Path(self.report_path).write_text(text)
        self.exit_code = 0 if not self._failures and self._done() else 1
        self.finished = True


def _stats(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    arr = np.asarray(values)
    return {"median": float(np.median(arr)), "p95": float(np.percentile(arr, 95)), "max": float(arr.max())}


def main_source(args: list[str] | None = None) -> int:
    return run_node(GraphCheckSource, args)


def main_probe(args: list[str] | None = None) -> int:
    return run_node(GraphCheckProbe, args)
