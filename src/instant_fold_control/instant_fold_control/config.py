"""Robot configuration files (`config/robots/<robot>.yaml`): driver, extrinsics, safety limits.

One file describes one dual-arm setup: which driver talks to it, each arm's calibrated
camera -> base extrinsics and driver parameters, and the safety limits the controller enforces.
Limits live with the robot (not with the node) because they depend on the table, the arms'
reach and the calibration, not on how the controller is run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from instant_fold_control.transforms import Extrinsics, TransformError
from instant_fold_core.config import check_keys, read_yaml
from instant_fold_core.errors import ConfigError
from instant_fold_ros.bringup_share import config_dir

#: Arm order everywhere (messages, arrays): index 0 = left, 1 = right.
ARMS: tuple[str, str] = ("left", "right")
#: Default `safety.max_chunk_steps`: eight times the longest horizon a policy sends (8 steps on
#: the real robot, 4 in simulation), and small enough that validating, clamping and checking one
#: chunk takes milliseconds, so a chunk can never hold the controller's thread.
DEFAULT_MAX_CHUNK_STEPS = 64


@dataclass(frozen=True)
class SafetyConfig:
    """Limits enforced by the safety layer; positions in the camera optical frame (m)."""

    workspace_min: np.ndarray
    workspace_max: np.ndarray
    max_speed: float  # m/s, per arm, Cartesian
    min_gripper_distance: float  # m, between the two commanded gripper positions
    watchdog_timeout: float  # s without a new chunk before the arms hold
    max_chunk_age: float  # s between the observation a chunk answers and its arrival
    max_chunk_steps: int = DEFAULT_MAX_CHUNK_STEPS  # steps (horizon) a chunk may carry; longer ones are refused

    def __post_init__(self) -> None:
        if np.any(self.workspace_min >= self.workspace_max):
            raise ConfigError(
                f"safety.workspace: min {self.workspace_min.tolist()} must be below max {self.workspace_max.tolist()}"
            )
        for name in ("max_speed", "watchdog_timeout", "max_chunk_age"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"safety.{name}: must be positive, got {getattr(self, name)}")
        if self.min_gripper_distance < 0:
            raise ConfigError(f"safety.min_gripper_distance: must be >= 0, got {self.min_gripper_distance}")
        if self.max_chunk_steps < 1:
            raise ConfigError(f"safety.max_chunk_steps: must be >= 1, got {self.max_chunk_steps}")


@dataclass(frozen=True)
class ArmConfig:
    """One arm: its base frame name, extrinsics, and the driver's own parameters."""

    name: str
    base_frame: str
    extrinsics: Extrinsics
    driver: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RobotConfig:
    """A dual-arm setup."""

    name: str
    driver: str
    camera_frame: str
    safety: SafetyConfig
    arms: tuple[ArmConfig, ArmConfig]  # (left, right)
    source: Path | None = None

    def arm(self, name: str) -> ArmConfig:
        return self.arms[ARMS.index(name)]


def find_robot_config(robot: str) -> Path:
    """Resolve `config/robots/<robot>.yaml` in the bringup's installed config folder
    (`instant_fold_ros.bringup_share`; looked up at run time, so this package does not depend on
    the bringup, which depends on it)."""
    path = config_dir() / "robots" / f"{robot}.yaml"
    if not path.is_file():
        raise ConfigError(f"robot '{robot}': no config file {path.name} in {path.parent}")
    return path


def load_robot_config(path: str | Path) -> RobotConfig:
    """Read and validate a robot config file."""
    path = Path(path)
    data = read_yaml(path, "robot config")
    try:
        return parse_robot_config(data, name=path.stem, source=path)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def parse_robot_config(data: Any, name: str = "robot", source: Path | None = None) -> RobotConfig:
    """Validate a robot config given as a mapping (what the YAML file holds)."""
    check_keys("", data, {"driver", "camera_frame", "safety", "arms"}, {"name"})
    safety = check_keys(
        "safety",
        data["safety"],
        {"workspace_min", "workspace_max", "max_speed", "min_gripper_distance", "watchdog_timeout", "max_chunk_age"},
        {"max_chunk_steps"},
    )
    arms = check_keys("arms", data["arms"], set(ARMS))
    return RobotConfig(
        name=str(data.get("name", name)),
        driver=_string("driver", data["driver"]),
        camera_frame=_string("camera_frame", data["camera_frame"]),
        safety=SafetyConfig(
            workspace_min=_vector("safety.workspace_min", safety["workspace_min"]),
            workspace_max=_vector("safety.workspace_max", safety["workspace_max"]),
            max_speed=_number("safety.max_speed", safety["max_speed"]),
            min_gripper_distance=_number("safety.min_gripper_distance", safety["min_gripper_distance"]),
            watchdog_timeout=_number("safety.watchdog_timeout", safety["watchdog_timeout"]),
            max_chunk_age=_number("safety.max_chunk_age", safety["max_chunk_age"]),
            max_chunk_steps=_integer("safety.max_chunk_steps", safety.get("max_chunk_steps", DEFAULT_MAX_CHUNK_STEPS)),
        ),
        arms=(_arm("left", arms["left"]), _arm("right", arms["right"])),
        source=source,
    )


def _arm(name: str, entry: Any) -> ArmConfig:
    where = f"arms.{name}"
    entry = check_keys(where, entry, {"base_frame", "base_from_camera"}, {"driver"})
    try:
        extrinsics = Extrinsics.from_config(f"{where}.base_from_camera", entry["base_from_camera"])
    except TransformError as exc:
        raise ConfigError(str(exc)) from None
    driver = entry.get("driver", {})
    if not isinstance(driver, Mapping):
        raise ConfigError(f"{where}.driver: expected a mapping of driver parameters")
    return ArmConfig(name, _string(f"{where}.base_frame", entry["base_frame"]), extrinsics, dict(driver))


def _string(where: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: expected a non-empty string, got {value!r}")
    return value


def _number(where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not np.isfinite(value):
        raise ConfigError(f"{where}: expected a finite number, got {value!r}")
    return float(value)


def _integer(where: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{where}: expected an integer, got {value!r}")
    return value


def _vector(where: str, value: Any) -> np.ndarray:
    if not isinstance(value, list | tuple) or len(value) != 3:
        raise ConfigError(f"{where}: expected [x, y, z], got {value!r}")
    return np.array([_number(f"{where}[{i}]", v) for i, v in enumerate(value)])
