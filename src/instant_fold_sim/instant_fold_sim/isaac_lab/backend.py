"""The simulator interface behind the bridge: what `server` serves and every backend implements.

A module of its own so that the backends (`isaac_env`, `standin`) and the server that picks one
import it from here, not from each other.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any

import numpy as np

from .spec import SceneSpec


class BackendError(RuntimeError):
    """A request the simulator cannot honour (no scene yet, a failed build); sent back as `error`."""


@dataclass
class BackendState:
    """What a backend reports after reset and every step (bridge frame, real metres)."""

    positions: np.ndarray  # float32 [V, 3] cloth particles
    grippers: np.ndarray  # float64 [2, 4] measured (x, y, z, openness) of the arms' grasp points
    cloth_speed: float  # 95th-percentile particle speed, m/s: the cloth is at rest when small


class Backend(abc.ABC):
    """One simulator behind the bridge. Implementations: `isaac_env.IsaacLabBackend` (Isaac Lab 3,
    kit-less, Newton backend, two Frankas) and `standin.NewtonStandIn` (the project's Newton scene)."""

    name: str = "?"
    stand_in: bool = False
    device: str = "cpu"

    def detail(self) -> dict[str, Any]:
        """Versions and settings worth logging on the ROS side."""
        return {}

    def timings(self) -> dict[str, float]:
        """Latest build/step/render timings (s), sent with every state for the ROS side to report."""
        return {}

    @abc.abstractmethod
    def reset(self, spec: SceneSpec) -> None:
        """Build (or rebuild) the scene at the spec's start state."""

    @abc.abstractmethod
    def step(self, target: np.ndarray, openness: np.ndarray) -> None:
        """One control frame: apply gripper commands (close grasps, open releases), then move the
        grasp points to `target` ([2, 3], bridge frame) over the frame."""

    @abc.abstractmethod
    def state(self) -> BackendState:
        """Cloth and measured gripper state now."""

    @abc.abstractmethod
    def observe(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The overhead camera now: rgb uint8 [H, W, 3], depth float32 [H, W] (real m along the
        optical axis), cloth mask bool [H, W]."""

    def close(self) -> None:  # noqa: B027  (optional hook: most backends hold nothing to release)
        """Release the simulator (the process ends right after)."""
