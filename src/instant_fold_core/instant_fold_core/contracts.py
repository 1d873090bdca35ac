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

from enum import IntEnum


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
