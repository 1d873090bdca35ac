"""The runtime contracts between model, policy server, messages and controller, each defined once.

Why a module of its own: the core never imports rclpy or the generated messages, yet the policy,
the controller, the fold loop and the main job all speak in the messages' terms. Each concept that
crosses a boundary is written here once, and `instant_fold_ros.conversions` converts between it
and its message (exactly two forms per concept).

Enums mirror the constants of `instant_fold_interfaces` (`msg/`, `srv/`, `action/`) by name and
value; `tests/test_interface_mirrors.py` reads the interface files and fails when a constant is added,
renamed or renumbered there without being mirrored here.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Protocol, TypeVar, overload

import numpy as np
from numpy.typing import ArrayLike

from instant_fold_core.errors import InvalidInputError, NonFiniteError

#: One arm state per arm (left, right): x, y, z (metres, camera optical frame) and gripper
#: openness (1 open, 0 closed). The policy's proprioception, a demonstration keypose and the
#: controller's measurement are all this [2, 4] array.
ARM_STATE_SHAPE = (2, 4)

#: Openness below this is a closed gripper: the one rule of the simulators' grasps, the datasets'
#: gripper events, demonstration keyframes, the policy's event counts, the fold loop and the drivers
#: (two readers with their own thresholds would disagree about a half-open gripper).
GRIPPER_CLOSED_BELOW = 0.5


class ChunkRepresentation(IntEnum):
    """How an action chunk's positions are meant (`ActionChunk.msg` ABSOLUTE / DELTA)."""

    ABSOLUTE = 0  # end-effector targets
    DELTA = 1  # per-step displacements: step 0 from the state the chunk answers, step h from step h-1


class KeyframeEvent(IntEnum):
    """Why a frame is a keyframe, per arm (`Keyframe.msg` EVENT_*)."""

    NONE = 0
    GRASP = 1
    RELEASE = 2
    MOTION = 3
    TERMINAL = 4


class FoldOutcome(IntEnum):
    """How a fold ended (`ExecuteFold.action` result OUTCOME_*)."""

    COMPLETED = 0
    STEP_LIMIT = 1
    CANCELED = 2
    ABORTED = 3


class FoldPhase(IntEnum):
    """What a fold is doing (`ExecuteFold.action` feedback PHASE_*)."""

    LOADING_DEMONSTRATION = 0
    WAITING_FOR_OBSERVATION = 1
    PREDICTING = 2
    EXECUTING = 3
    RETURNING_HOME = 4


class _Tensor(Protocol):
    """A torch tensor as `gripper_closed` reads it (the core does not import torch)."""

    def __lt__(self, other: float, /) -> _Tensor: ...

    def long(self) -> _Tensor: ...


_T = TypeVar("_T", bound=_Tensor)


@overload
def gripper_closed(openness: _T) -> _T: ...


@overload
def gripper_closed(openness: ArrayLike) -> np.ndarray: ...


def gripper_closed(openness: object) -> object:
    """Elementwise `openness < GRIPPER_CLOSED_BELOW`: a bool array (a numpy bool for one number), or
    a bool tensor of a tensor, on its device (the training batches read the rule in torch).
    Openness must be finite (NaN would read as open): every boundary refuses it before it gets here."""
    value: Any = openness if hasattr(openness, "long") else np.asarray(openness)
    return value < GRIPPER_CLOSED_BELOW


def _steps_with(bad: np.ndarray) -> list[int]:
    """Indices of the leading axis (steps) where `bad` [H, ...] is set anywhere."""
    return sorted({int(i) for i in np.argwhere(bad)[:, 0]})


def _frozen(name: str, value: object) -> np.ndarray:
    """A read-only copy (dtype kept): a validated chunk must stay valid, whoever held the array."""
    arr = np.array(value)
    if arr.dtype.kind not in "fiu":
        raise InvalidInputError(f"ActionChunk.{name}: expected numbers, got dtype {arr.dtype}")
    arr.flags.writeable = False
    return arr


@dataclass(frozen=True)
class ActionChunk:
    """H dual-arm steps from the policy to the controller (camera optical frame, metres), the one
    form of an action chunk on either side of `ActionChunk.msg` (`instant_fold_ros.conversions`
    packs and unpacks it).

    A chunk that exists is valid: the constructor checks every invariant once and raises
    `NonFiniteError` for NaN/inf values and `InvalidInputError` for any other violation, naming
    the field. Arrays are kept as read-only copies in the dtype given.

    Attributes:
        positions: [H, 2, 3] per step and arm (left, right): targets (ABSOLUTE) or per-step
            displacements (DELTA: step 0 from the state the chunk answers, step h from step h-1).
        openness: [H, 2] gripper openness targets in [0, 1] (1 open, 0 closed).
        steps_to_execute: how many leading steps run before the next query (1..H, receding horizon).
        step_duration: seconds between consecutive steps (> 0); the controller interpolates linearly.
        representation: how `positions` are meant.
        keypose: the policy's predicted next keypose, an absolute arm state [2, 4] (`ARM_STATE_SHAPE`), or None.
    """

    positions: np.ndarray
    openness: np.ndarray
    steps_to_execute: int
    step_duration: float
    representation: ChunkRepresentation | int = ChunkRepresentation.ABSOLUTE  # stored as the enum
    keypose: np.ndarray | None = None

    def __post_init__(self) -> None:
        pos, opn = _frozen("positions", self.positions), _frozen("openness", self.openness)
        if pos.ndim != 3 or pos.shape[1:] != (2, 3) or pos.shape[0] < 1:
            raise InvalidInputError(f"ActionChunk.positions: expected shape (H, 2, 3) with H >= 1, got {pos.shape}")
        if opn.shape != pos.shape[:2]:
            raise InvalidInputError(f"ActionChunk.openness: expected shape {pos.shape[:2]}, got {opn.shape}")
        for name, arr in (("positions", pos), ("openness", opn)):
            bad = ~np.isfinite(arr)
            if bad.any():
                raise NonFiniteError(f"ActionChunk.{name}: NaN or infinite values at step(s) {_steps_with(bad)}")
        if ((opn < 0) | (opn > 1)).any():
            raise InvalidInputError("ActionChunk.openness: values must be in [0, 1]")
        try:
            representation = ChunkRepresentation(self.representation)
        except ValueError:
            raise InvalidInputError(f"ActionChunk.representation: unknown value {self.representation}") from None
        h = pos.shape[0]
        if not 1 <= self.steps_to_execute <= h:
            raise InvalidInputError(f"ActionChunk.steps_to_execute: must be in [1, {h}], got {self.steps_to_execute}")
        if not (np.isfinite(self.step_duration) and self.step_duration > 0):
            raise InvalidInputError(f"ActionChunk.step_duration: must be positive, got {self.step_duration}")
        keypose = None if self.keypose is None else _frozen("keypose", self.keypose)
        if keypose is not None:
            if keypose.shape != ARM_STATE_SHAPE:
                raise InvalidInputError(f"ActionChunk.keypose: expected shape {ARM_STATE_SHAPE}, got {keypose.shape}")
            if not np.isfinite(keypose).all():
                raise NonFiniteError("ActionChunk.keypose: NaN or infinite values")
            if ((keypose[:, 3] < 0) | (keypose[:, 3] > 1)).any():
                raise InvalidInputError("ActionChunk.keypose: openness must be in [0, 1]")
        object.__setattr__(self, "positions", pos)
        object.__setattr__(self, "openness", opn)
        object.__setattr__(self, "steps_to_execute", int(self.steps_to_execute))
        object.__setattr__(self, "step_duration", float(self.step_duration))
        object.__setattr__(self, "representation", representation)
        object.__setattr__(self, "keypose", keypose)

    @property
    def horizon(self) -> int:
        """H, the number of steps."""
        return int(self.positions.shape[0])

    @property
    def targets(self) -> np.ndarray:
        """[H, 2, 4] (x, y, z, openness) per step and arm; absolute poses only for ABSOLUTE chunks."""
        return np.concatenate([self.positions, self.openness[..., None]], axis=-1)

    def absolute_positions(self, reference: np.ndarray) -> np.ndarray:
        """Absolute float64 positions of every step [H, 2, 3].

        Args:
            reference: [2, 3] positions of the state the chunk was predicted from (used by DELTA).
        """
        steps = np.asarray(self.positions, dtype=np.float64)
        if self.representation == ChunkRepresentation.DELTA:
            steps = np.asarray(reference, dtype=np.float64)[None] + np.cumsum(steps, axis=0)
        return steps

    def waypoints(self, reference: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Absolute float64 targets of the executed steps: positions [k, 2, 3], openness [k, 2]
        (`reference`: as `absolute_positions` takes it)."""
        k = self.steps_to_execute
        return self.absolute_positions(reference)[:k], np.asarray(self.openness, dtype=np.float64)[:k]
