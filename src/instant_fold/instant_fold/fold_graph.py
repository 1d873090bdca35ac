"""The fold graph: camera -> segmentation -> tokenizer -> policy server -> controller -> driver.

One function builds it from the user's choices (the arguments of `fold.launch.py`, also
accepted by the process runner as `name:=value`), so `ros2 launch` and the runner start exactly
the same nodes with the same parameter files. Choices:

- `robot:=sim|dobot|franka` (any `config/robots/<name>.yaml`); `sim` are the simulator's grippers.
- `camera:=realsense|playback|bag|sim` (`playback_file:=` names the recording: a RealSense
  recording for `playback`, a rosbag2 bag from `record_demo` for `bag`, which the bag player of
  `instant_fold_demo` publishes); `sim` is the sim node, which is camera and robot at once, so
  `camera:=sim` and `robot:=sim` go together.
- `segmentation:=sam2|plane|sim` (default `sim` with the simulator, `plane` otherwise).
- `demo:=` demonstration file, `checkpoint:=` policy directory, `encoder:=` cloth encoder directory
  (defaults: the models in `models/`, found as `instant_fold_ros.bringup_share.models_dir()`);
  `keypoints:=` a keypoint detector directory (e.g. `models/keypoints`; default none): the policy
  server's `keypoint_detector` (docs/registration.md, "Grasps carried by keypoints").
- with the simulator: `garment:=`, `seed:=`, `mode:=`, `variant:=` (the start state and the mode
  the evaluation compares with); observations are stamped with simulated time and the policy
  server reads the simulator's `/clock` (`use_sim_time`).
- with the simulator: `sim_backend:=newton|isaac_lab|newton_stand_in` (default `newton`, the
  embedded scene; `isaac_lab`: Isaac Lab 3 with two Frankas in its own Python 3.12 process,
  docs/isaac_lab.md; `newton_stand_in`: the Isaac Lab bridge with the Newton scene behind it) and
  `sim_device:=cpu|cuda:0` (the backend's device; default cpu); `sim_grasp:=fingers|commanded`
  (Isaac Lab: held cloth follows the simulated fingers, default, or the commanded target).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import yaml

from instant_fold_core.errors import ConfigError
from instant_fold_ros.bringup_share import config_dir, models_dir
from instant_fold_ros.graph_spec import GraphSpec, NodeSpec

ROBOTS_WITH_CAMERA = {"sim"}
CAMERAS = ("realsense", "playback", "bag", "sim")
SEGMENTATIONS = ("sam2", "plane", "sim")
#: Simulators behind the sim node (`sim_backend:=`); the bridge's are listed in
#: instant_fold_sim.isaac_lab.server.BACKENDS (not imported: the bringup stays light).
SIM_BACKENDS = ("newton", "isaac_lab", "newton_stand_in")
#: What cloth a simulated Franka holds follows (instant_fold_sim.isaac_lab.grasp.GRASP_MODELS).
SIM_GRASPS = ("fingers", "commanded")
#: Steps of the simulator's actions: one 20 fps frame (the demonstrations' frame period).
SIM_STEP_DURATION = 0.05
SIM_CONTROL_RATE_HZ = 20.0


@dataclass(frozen=True)
class FoldOptions:
    """The launch arguments of the fold graph (strings, as launch arguments are)."""

    robot: str = "sim"
    camera: str = ""
    segmentation: str = ""
    demo: str = ""
    checkpoint: str = ""
    encoder: str = ""
    keypoints: str = ""
    playback_file: str = ""
    garment: str = ""
    seed: str = ""
    mode: str = ""
    variant: str = ""
    max_steps: str = ""
    sim_backend: str = ""
    sim_device: str = ""
    sim_grasp: str = ""

    @classmethod
    def from_arguments(cls, arguments: Mapping[str, str]) -> FoldOptions:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(arguments) - known)
        if unknown:
            raise ConfigError(f"fold graph: unknown arguments {unknown}; known: {sorted(known)}")
        return cls(**{k: str(v) for k, v in arguments.items()})

    def resolved(self) -> FoldOptions:
        """Fill defaults and check that the choices fit together."""
        camera = self.camera or ("sim" if self.robot in ROBOTS_WITH_CAMERA else "realsense")
        segmentation = self.segmentation or ("sim" if camera == "sim" else "plane")
        if camera not in CAMERAS:
            raise ConfigError(f"camera:={camera}: expected one of {list(CAMERAS)}")
        if segmentation not in SEGMENTATIONS:
            raise ConfigError(f"segmentation:={segmentation}: expected one of {list(SEGMENTATIONS)}")
        if (camera == "sim") != (self.robot == "sim"):
            raise ConfigError(
                f"camera:={camera} with robot:={self.robot}: the simulator is camera and robot at once "
                "(use both or neither)"
            )
        if segmentation == "sim" and camera != "sim":
            raise ConfigError("segmentation:=sim needs camera:=sim (the mask comes from the simulator)")
        if camera in ("playback", "bag") and not self.playback_file:
            raise ConfigError(f"camera:={camera} needs playback_file:=<recording>")
        if camera != "sim" and any((self.garment, self.seed, self.mode, self.variant)):
            raise ConfigError("garment/seed/mode/variant choose the simulated start state: they need camera:=sim")
        if camera != "sim" and (self.sim_backend or self.sim_device or self.sim_grasp):
            raise ConfigError("sim_backend/sim_device/sim_grasp choose the simulator: they need robot:=sim")
        if self.sim_grasp and self.sim_grasp not in SIM_GRASPS:
            raise ConfigError(f"sim_grasp:={self.sim_grasp}: expected one of {list(SIM_GRASPS)}")
        if self.sim_backend and self.sim_backend not in SIM_BACKENDS:
            raise ConfigError(f"sim_backend:={self.sim_backend}: expected one of {list(SIM_BACKENDS)}")
        models = models_dir()
        return FoldOptions(
            robot=self.robot,
            camera=camera,
            segmentation=segmentation,
            demo=self.demo,
            checkpoint=self.checkpoint or str(models / "policy"),
            encoder=self.encoder or str(models / "encoder"),
            keypoints=self.keypoints,
            playback_file=self.playback_file,
            garment=self.garment,
            seed=self.seed,
            mode=self.mode,
            variant=self.variant,
            max_steps=self.max_steps,
            sim_backend=self.sim_backend,
            sim_device=self.sim_device,
            sim_grasp=self.sim_grasp,
        )


def _config_file(name: str) -> Path:
    path = config_dir() / name
    if not path.is_file():
        raise ConfigError(f"config file {name} not found in {path.parent}")
    return path


def _node(name: str, package: str, executable: str, config: str, required: bool = False) -> NodeSpec:
    return NodeSpec(name, package, executable, parameters=(_config_file(config),), required=required)


def build_fold_graph(options: FoldOptions) -> tuple[GraphSpec, dict[str, dict[str, Any]]]:
    """The nodes and, per node name, the parameters the choices set (on top of the config files)."""
    o = options.resolved()
    sim = o.camera == "sim"
    nodes: list[NodeSpec] = []
    params: dict[str, dict[str, Any]] = {}
    if sim:
        nodes.append(_node("sim", "instant_fold_sim", "sim_node", "sim.yaml", required=True))
        sim_params: dict[str, Any] = {"publish_mask": o.segmentation == "sim"}
        for key in ("garment", "mode", "variant"):
            if getattr(o, key):
                sim_params[key] = getattr(o, key)
        if o.seed:
            sim_params["seed"] = int(o.seed)
        if o.sim_backend:
            sim_params["backend"] = o.sim_backend
        if o.sim_device:
            sim_params["backend_device"] = o.sim_device
        if o.sim_grasp:
            sim_params["grasp"] = o.sim_grasp
        params["sim"] = sim_params
    elif o.camera == "bag":
        nodes.append(_node("bag_player", "instant_fold_demo", "bag_player", "demo.yaml"))
        params["bag_player"] = {"bag": o.playback_file}
    else:
        nodes.append(_node("camera", "instant_fold_perception", "camera_node", "perception.yaml"))
        if o.camera == "playback":
            params["camera"] = {"playback_file": o.playback_file}
    if o.segmentation != "sim":
        nodes.append(_node("segmentation", "instant_fold_perception", "segmentation_node", "perception.yaml"))
        params["segmentation"] = {"backend": o.segmentation}
    nodes.append(_node("tokenizer", "instant_fold_perception", "tokenizer_node", "perception.yaml"))
    params["tokenizer"] = {"encoder_checkpoint": o.encoder}
    nodes.append(_node("policy_server", "instant_fold_policy", "policy_server_node", "policy.yaml"))
    params["policy_server"] = {"policy_checkpoint": o.checkpoint, "encoder_checkpoint": o.encoder}
    if o.demo:
        params["policy_server"]["demonstration"] = o.demo
    if o.keypoints:
        params["policy_server"]["keypoint_detector"] = o.keypoints
    if o.max_steps:
        params["policy_server"]["fold"] = {"max_steps": int(o.max_steps)}
    nodes.append(_node("controller_node", "instant_fold_control", "controller_node", "control.yaml", required=True))
    params["controller_node"] = {"robot": o.robot}
    if sim:
        params["policy_server"]["step_duration"] = SIM_STEP_DURATION
        params["controller_node"]["control_rate_hz"] = SIM_CONTROL_RATE_HZ
        # Stamps are simulated time; the policy server compares them with its clock, so it reads
        # the simulator's /clock. The sim node and the controller keep wall-clock timers: their
        # ticks are what advances simulated time.
        params["policy_server"]["use_sim_time"] = True
    return GraphSpec("fold", tuple(nodes)), params


def parameters_yaml(params: Mapping[str, Mapping[str, Any]]) -> str:
    """A ROS parameter file with one section per node."""
    return yaml.safe_dump({name: {"ros__parameters": dict(values)} for name, values in params.items()}, sort_keys=True)


def parse_launch_arguments(argv: list[str]) -> dict[str, str]:
    """`name:=value` pairs (the `ros2 launch` argument syntax) into a mapping."""
    out: dict[str, str] = {}
    for arg in argv:
        name, sep, value = arg.partition(":=")
        if not sep or not name:
            raise ConfigError(f"argument {arg!r}: expected name:=value")
        out[name] = value
    return out
