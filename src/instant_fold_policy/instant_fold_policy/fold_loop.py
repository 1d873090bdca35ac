"""Decisions of the execute-fold loop, independent of ROS and of the policy model.

The loop is: fresh cloth tokens + arm state -> action chunk -> the controller executes its first
k steps -> repeat. This module decides what "fresh" means (an observation taken after the last
chunk had time to execute), counts the gripper events the arms actually performed, and says when
the fold is over: the policy has brought both arms home with open grippers after performing the
demonstration's grasps and releases (paper: every demonstration ends with both grippers at home),
or the step limit is reached.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np

NANOSECONDS = 1_000_000_000


class Outcome(IntEnum):
    """ExecuteFold result outcomes (values match instant_fold_interfaces/action/ExecuteFold)."""

    COMPLETED = 0
    STEP_LIMIT = 1
    CANCELED = 2
    ABORTED = 3


class Phase(IntEnum):
    """ExecuteFold feedback phases (values match the action's PHASE_* constants)."""

    LOADING_DEMONSTRATION = 0
    WAITING_FOR_OBSERVATION = 1
    PREDICTING = 2
    EXECUTING = 3
    RETURNING_HOME = 4


@dataclass(frozen=True)
class FoldLoopConfig:
    max_steps: int = 100  # policy queries per fold
    observation_timeout_s: float = 10.0  # no fresh observation for this long aborts the fold
    home_tolerance_m: float = 0.03  # both arms this close to home (and open) = returned home
    open_threshold: float = 0.5  # openness above this is "open"
    min_events: int = 2  # gripper events (grasps + releases) before returning home ends the fold


class FoldLoop:
    """State of one fold: queries made, events executed, and the termination test."""

    def __init__(self, config: FoldLoopConfig, home: np.ndarray, expected_events: int | None = None) -> None:
        """`home`: [2, 3] home positions (camera frame); `expected_events`: events the demonstration
        performs (the loop requires min(config.min_events, expected_events) of them)."""
        if home.shape != (2, 3) or not np.isfinite(home).all():
            raise ValueError(f"home: expected finite [2, 3] positions, got {home.shape}")
        self.config = config
        self.home = home.astype(np.float64)
        self.required_events = config.min_events if expected_events is None else min(config.min_events, expected_events)
        self.step = 0
        self.events_executed = 0
        self._last_open: np.ndarray | None = None
        self._next_observation_ns = 0

    def observe_state(self, state: np.ndarray) -> None:
        """Track measured gripper openness [2, 4] -> count open<->closed transitions per arm."""
        is_open = state[:, 3] > self.config.open_threshold
        if self._last_open is not None:
            self.events_executed += int(np.count_nonzero(is_open != self._last_open))
        self._last_open = is_open

    def is_fresh(self, observation_stamp_ns: int) -> bool:
        """Whether an observation was taken after the last chunk's steps had time to execute."""
        return observation_stamp_ns >= self._next_observation_ns

    def chunk_sent(self, sent_stamp_ns: int, steps: int, step_duration_s: float) -> None:
        """Record a query: the next observation must be taken after its k steps are executed."""
        self.step += 1
        self._next_observation_ns = sent_stamp_ns + int(steps * step_duration_s * NANOSECONDS)

    def at_home(self, state: np.ndarray) -> bool:
        near = np.linalg.norm(state[:, :3] - self.home, axis=1) <= self.config.home_tolerance_m
        return bool(near.all() and (state[:, 3] > self.config.open_threshold).all())

    def outcome(self, state: np.ndarray) -> Outcome | None:
        """COMPLETED / STEP_LIMIT when the fold is over, None while it goes on."""
        if self.events_executed >= self.required_events and self.at_home(state):
            return Outcome.COMPLETED
        if self.step >= self.config.max_steps:
            return Outcome.STEP_LIMIT
        return None

    def phase_after(self, keypose: np.ndarray | None) -> Phase:
        """EXECUTING, or RETURNING_HOME when the events are done and the next keypose is home."""
        if keypose is not None and self.events_executed >= self.required_events:
            near = np.linalg.norm(keypose[:, :3] - self.home, axis=1) <= self.config.home_tolerance_m
            if near.all():
                return Phase.RETURNING_HOME
        return Phase.EXECUTING
