"""sim_node: the simulated garment scene behind the real camera's topics and the `sim` driver.

The simulator is the embedded Newton scene (`backend: newton`), or another one stepped over the
loopback bridge of `instant_fold_sim.isaac_lab` (`backend: isaac_lab`: Isaac Lab 3, kit-less on
its Newton backend, in its own Python 3.12 process; `newton_stand_in`: that bridge with the
project's Newton scene behind it, for machines without Isaac Lab). Topics and services are the
same for every backend, so the fold graph runs unchanged on any of them.

Publishes what the RealSense camera node publishes (`camera/color` rgb8, `camera/depth` 32FC1
metres, `camera/camera_info`) plus the simulator's exact cloth mask on `cloth/mask` (the `sim`
segmentation; set `publish_mask: false` to segment the rendered images with a real backend
instead), and `/clock`, so nodes with `use_sim_time` live on simulated time. The arms' home
poses (where the scripted programs end, in this episode's camera frame) are published once on
`arms/home` (latched: a late subscriber still gets them); the policy server ends a fold there.

Simulated time only moves when the controller's `sim` driver calls `sim/step` (SimStep): the
controller sends both arms' targets and the time to reach, the node simulates those frames,
publishes the new frame stamped with its simulated time and answers the measured arm state.
Between steps the latest frame is re-published every `republish_period_s` of wall time (same
stamp), so late subscribers get it; a slow CPU only slows the whole loop down, it never changes
what happens. `sim/evaluate` (EvaluateFold) scores the cloth against the oracle program run from
the same start (same-init) and optionally writes the rollout video, keyframe strip and metrics
into `output_dir`, which must lie under the `file_roots` parameter's folders (default `outputs`
in the working directory). Every request is answered (a bad one with `success=False` and the
reason), never by the node's end (`instant_fold_ros.services`).
"""

from __future__ import annotations

import json
import sys

import numpy as np
from rclpy.node import Node
from rclpy.qos import QoSDurabilityPolicy, QoSProfile, QoSReliabilityPolicy
from rclpy.time import Time
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image

from instant_fold_core.errors import ConfigError
from instant_fold_core.paths import PathNotAllowed, resolve_under
from instant_fold_core.rgbd import RGBDFrame
from instant_fold_interfaces.msg import DualArmState
from instant_fold_interfaces.srv import EvaluateFold, SimStep
from instant_fold_ros.conversions import home_pose_to_msg, make_header, rgbd_to_msgs
from instant_fold_ros.node_main import run_node
from instant_fold_ros.params import declare_file_roots
from instant_fold_ros.qos import LATCHED_QOS, OBSERVATION_QOS
from instant_fold_ros.services import create_guarded_service
from instant_fold_ros.standins.image_bridge import image_to_msg

from .availability import check_simulator
from .garments import GarmentError
from .isaac_lab.client import BridgeClient, BridgeError
from .isaac_lab.grasp import DEFAULT_GRASP
from .keypoints import KeypointError
from .rollout import EpisodeFailed, GenerationConfig, preset
from .sim_world import SimWorld, SimWorldError

STEP_SERVICE = "sim/step"
EVALUATE_SERVICE = "sim/evaluate"
HOME_TOPIC = "arms/home"
CLOCK_QOS = QoSProfile(
    depth=1, reliability=QoSReliabilityPolicy.RELIABLE, durability=QoSDurabilityPolicy.TRANSIENT_LOCAL
)


class SimNode(Node):
    def __init__(self) -> None:
        super().__init__("sim")
        p = self.declare_parameter
        garment = str(p("garment", "proc:1").value)
        seed = int(p("seed", 0).value)
        preset_name = str(p("preset", "cpu-small").value)
        self.mode = str(p("mode", "sleeves_down__bottom_up").value)
        self.variant = str(p("variant", "S").value)
        self.frame_id = str(p("frame_id", "camera_color_optical_frame").value)
        publish_mask = bool(p("publish_mask", True).value)
        republish = float(p("republish_period_s", 0.5).value)
        self.file_roots = declare_file_roots(self, ["outputs"])
        # `newton`: the embedded Newton scene; `isaac_lab`: Isaac Lab 3 (kit-less, Newton backend,
        # two Frankas) in its own Python 3.12 process over the loopback bridge;
        # `newton_stand_in`: the bridge's protocol-faithful stand-in (tests, no Isaac Lab).
        backend = str(p("backend", "newton").value)
        device = str(p("backend_device", "cpu").value)
        isaaclab_python = str(p("isaaclab_python", "").value)
        grasp = str(p("grasp", DEFAULT_GRASP).value)  # what held cloth follows (isaac_lab)
        start_timeout = float(p("backend_start_timeout_s", 600.0).value)
        self.bridge: BridgeClient | None = None
        # A device or an Isaac Lab environment this machine lacks is one line and exit 1 now,
        # not a Warp traceback from the scene build or the simulator process.
        device = check_simulator(backend, device, isaaclab_python)
        world_config: GenerationConfig | str = preset_name
        if backend == "newton":  # the embedded scene runs where it is told (it took CUDA when present)
            world_config = preset(preset_name)
            world_config.sim.device = device
        else:
            self.bridge = BridgeClient(backend, device, isaaclab_python, start_timeout_s=start_timeout, grasp=grasp)
            detail = self.bridge.hello
            self.get_logger().info(
                f"simulator backend {detail['backend']} on {detail['device']} (pid {self.bridge.process.pid}): "
                f"{json.dumps(detail.get('detail', {}), sort_keys=True)}"
            )
            if self.bridge.stand_in:
                self.get_logger().warning(
                    f"backend {backend}: a stand-in (the project's Newton scene behind the bridge), not Isaac Lab"
                )
        try:
            self.world = SimWorld(garment, seed, world_config, bridge=self.bridge)
        except BaseException:
            self.close()
            raise
        self._color = self.create_publisher(Image, "camera/color", OBSERVATION_QOS)
        self._depth = self.create_publisher(Image, "camera/depth", OBSERVATION_QOS)
        self._info = self.create_publisher(CameraInfo, "camera/camera_info", OBSERVATION_QOS)
        self._mask = self.create_publisher(Image, "cloth/mask", OBSERVATION_QOS) if publish_mask else None
        self._clock_pub = self.create_publisher(Clock, "/clock", CLOCK_QOS)
        # Refusals the callbacks expect are answered by them; any other error by the guard.
        create_guarded_service(self, SimStep, STEP_SERVICE, self._on_step)
        create_guarded_service(self, EvaluateFold, EVALUATE_SERVICE, self._on_evaluate)
        self.create_timer(republish, self._publish)
        self._frame = self._render()
        self._publish()
        self._home_pub = self.create_publisher(DualArmState, HOME_TOPIC, LATCHED_QOS)
        self._home_pub.publish(home_pose_to_msg(self.world.home(), self._frame[0].header))
        self.get_logger().info(
            f"simulating {self.world.garment.garment_id} (seed {seed}, {preset_name}, "
            f"{self.world.scene.num_particles} particles) at {self.world.fps:g} fps with {backend} on {device}"
        )

    def close(self) -> None:
        """Stop the backend's process (run_node calls this before destroying the node)."""
        if self.bridge is not None:
            self.bridge.close()
            self.bridge = None

    def _render(self) -> tuple[Image, ...]:
        """Messages of the current frame, stamped with its simulated time."""
        obs = self.world.observe()
        header = make_header(self.frame_id, Time(nanoseconds=self.world.stamp_ns(obs.frame)).to_msg())
        frame = RGBDFrame(obs.rgb, obs.depth, obs.intrinsics.astype(np.float32), frame_number=obs.frame)
        msgs = rgbd_to_msgs(frame, header)
        return (*msgs, image_to_msg(obs.mask.astype(np.uint8) * 255, "mono8", header))

    def _publish(self) -> None:
        color, depth, info, mask = self._frame
        self._clock_pub.publish(Clock(clock=color.header.stamp))
        self._info.publish(info)
        self._color.publish(color)
        self._depth.publish(depth)
        if self._mask is not None:
            self._mask.publish(mask)

    def _on_step(self, request: SimStep.Request, response: SimStep.Response) -> SimStep.Response:
        try:
            frames = self.world.step(
                np.asarray(request.target, dtype=np.float64).reshape(2, 3),
                np.asarray(request.openness, dtype=np.float64),
                float(request.until),
            )
            if frames:
                self._frame = self._render()
                self._publish()
        except (SimWorldError, BridgeError) as exc:
            response.success, response.message = False, str(exc)
            self.get_logger().error(f"step refused: {exc}")
        else:
            response.success = True
        response.sim_time = self.world.sim_time
        response.state = self.world.arm_state().astype(np.float64).ravel().tolist()
        return response

    def _on_evaluate(self, request: EvaluateFold.Request, response: EvaluateFold.Response) -> EvaluateFold.Response:
        from .viewer import keyframe_strip, video

        try:
            out = resolve_under(request.output_dir, self.file_roots, "output_dir") if request.output_dir else None
        except PathNotAllowed as exc:
            response.success, response.message = False, str(exc)
            return response
        try:
            if out is not None:  # before the oracle run: a folder that cannot be written is told at once
                out.mkdir(parents=True, exist_ok=True)
            metrics = self.world.evaluate(self.mode, self.variant)
            # What the paper's metrics need (instant_fold_evaluation.oracle_bank.Family.score).
            metrics["record"] = self.world.record().to_json()
            if out is not None:
                # The frames of the camera the policy saw: Isaac Lab's (Frankas in view) with that backend.
                episode = self.world.episode(f"policy rollout ({self.mode})", self.variant)
                metrics["video_camera"] = episode.meta["camera"]
                metrics["video"] = str(video(episode, out / "rollout.mp4"))
                metrics["rollout_keyframes"] = str(keyframe_strip(episode, out / "rollout_keyframes.png"))
                (out / "sim_metrics.json").write_text(json.dumps(metrics, indent=2, sort_keys=True))
        except OSError as exc:  # an unwritable folder is the caller's mistake, not the simulator's end
            response.success, response.message = False, f"output_dir {out}: {exc}"
            self.get_logger().error(f"evaluation not written: {response.message}")
            return response
        except (SimWorldError, BridgeError, KeyError) as exc:
            response.success, response.message = False, str(exc)
            return response
        response.success, response.metrics_json = True, json.dumps(metrics, sort_keys=True)
        response.message = (
            f"keypoint error max {metrics['keypoint_error_max']:.3f} (start {metrics['start_error_max']:.3f}), "
            f"{'success' if metrics['success'] else 'no success'}"
        )
        self.get_logger().info(f"evaluation: {response.message}")
        return response


def main(args: list[str] | None = None) -> int:
    try:
        return run_node(SimNode, args)
    except (GarmentError, KeypointError, EpisodeFailed, BridgeError, ConfigError) as exc:
        # A start state that cannot be simulated (unknown garment or preset, bad mesh, no layout
        # in view): a clear message and exit code 1, not a traceback.
        print(f"sim_node: {exc}", file=sys.stderr)
        return 1
