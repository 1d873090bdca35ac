"""The execute-fold loop as one state machine, independent of ROS, of the policy model and of time.

The loop is: fresh cloth tokens + arm state -> action chunk -> the controller executes its first
k steps -> repeat. `FoldLoop` holds every decision of it, and its hosts only move data:

- the policy server node feeds it the observations arriving over DDS (`on_tokens`, `on_state`),
  asks `next()` whenever something arrived, and publishes the chunks it is told to compute;
- the in-process evaluator (`instant_fold_evaluation.closed_loop`) feeds it the simulator's frames
  and states directly and runs the controller itself.

So what is evaluated offline is exactly what a robot runs. The machine decides what "fresh" means
(an observation taken after the last chunk had time to execute, paired with an arm state no older
than it), counts the gripper events the arms actually performed, and says when the fold is over:
both arms are home with open grippers after performing the demonstration's grasps and releases
(paper: every demonstration ends with both grippers at home), the step limit is reached, the goal
is cancelled, or no fresh observation arrived in time. Cancel and timeout finish with `hold=True`:
the host commands the arms to stay where they are.

The return home is the policy's decision and the host's motion (`steer`): once every grasp and
release of the demonstration has been executed, the grippers are open and the policy's next
keypose is home (open, within `home_capture_m`), the host replaces the policy's chunks from then
on by the steps of a straight move home at `home_speed_m_s`. Why: home is a fixed pose of the
robot, but where it lies in the camera frame depends on the camera's extrinsics, which vary
between the simulated episodes (and between robots) and which no observation shows the policy; a
learned return therefore stops a few centimetres off (measured: 3-9 cm, against a 3 cm
tolerance). The robot knows its home exactly.

Time: observation stamps are nanoseconds on the observations' clock (simulated time under a
simulator); `now_s` passed to `next()` is any monotonic clock of the host, used only for the
observation timeout (the policy server passes simulated time under a simulator: wall time would
abort a lock-stepped fold whenever the machine is slow).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np

from instant_fold_core.config import at_least_zero
from instant_fold_core.contracts import ActionChunk, ChunkRepresentation, FoldOutcome, FoldPhase, gripper_closed
from instant_fold_policy.event_order import EventSchedule, first_event_steps

NANOSECONDS = 1_000_000_000

#: Whatever the host uses for cloth tokens (a ROS message, `TokenArrays`); the loop only stores it.
Tokens = TypeVar("Tokens")


@dataclass(frozen=True)
class FoldLoopConfig:
    max_steps: int = 150  # policy queries per fold (config/policy.yaml: why)
    observation_timeout_s: float = 10.0  # no fresh observation for this long aborts the fold
    home_tolerance_m: float = 0.03  # both arms this close to home (and open) = returned home
    min_events: int = 2  # gripper events (grasps + releases) before returning home ends the fold
    home_capture_m: float = 0.25  # policy's next keypose this close to home (per arm) = it is going home
    home_speed_m_s: float = 0.5  # speed of the host's straight moves (home; with `event_order_call`, to an event)
    #: After the demonstration's events with open grippers, the host moves home whatever the
    #: policy's next keypose (registration replay's end; docs/policy.md, "Home after the events").
    home_after_events: bool = False
    #: An arm that let go stays open until it has moved this far (x, y) from where it let go: a
    #: close there picks the cloth it just placed up again (docs/policy.md, "Re-grasp guard"). 0: off.
    regrasp_guard_m: float = 0.0
    #: An open arm closes only at steps within this (x, y) of the grasp its chunk's keypose reports:
    #: a close elsewhere grasps whatever cloth lies under the arm on its way (docs/policy.md,
    #: "Grasp gate"). 0: off; needs chunks that report a keypose.
    grasp_gate_m: float = 0.0
    #: Each arm's gripper events wait for the other arm's as the demonstration orders them (both
    #: arms' events of one keyframe made together; `event_order`, docs/policy.md, "Event order").
    #: Needs the demonstration's `EventSchedule`; off without one.
    event_order: bool = False
    #: Queries an arm waits at an event before it makes it whatever the other arm does; the rest of
    #: the fold then goes in the policy's order (in the simulator a carry of the other arm takes 15-20).
    event_order_wait: int = 30
    #: With `event_order`: an open arm the other waits for (both arms' grasps in one keyframe, the
    #: other arm's chunk making its own) is sent straight to the grasp its chunk's keypose reports
    #: and closes there (`FoldLoop._call_partners`; docs/policy.md, "Event order").
    event_order_call: bool = False

    def __post_init__(self) -> None:
        at_least_zero("regrasp_guard_m", self.regrasp_guard_m, "metres, 0: off")
        at_least_zero("grasp_gate_m", self.grasp_gate_m, "metres, 0: off")
        at_least_zero("event_order_wait", self.event_order_wait, "queries")


@dataclass(frozen=True)
class Steer:
    """What the host sends for one query: the chunk, and the phase to report."""

    chunk: ActionChunk
    phase: FoldPhase


@dataclass(frozen=True)
class Wait:
    """No fresh observation yet: call `next()` again when one arrives, at the latest after `timeout_s`."""

    timeout_s: float


@dataclass(frozen=True)
class Query(Generic[Tokens]):
    """Predict a chunk from this observation now, then report it with `chunk_sent`."""

    tokens: Tokens
    tokens_ns: int
    arm_state: np.ndarray  # [2, 4] camera frame


@dataclass(frozen=True)
class Finish:
    """The fold is over; with `hold`, the host commands the arms to stay where they are."""

    outcome: FoldOutcome
    message: str
    hold: bool


Decision = Wait | Query | Finish


class FoldLoop(Generic[Tokens]):
    """State of one fold: latest observations, queries made, events executed, and every decision."""

    def __init__(
        self,
        config: FoldLoopConfig,
        home: np.ndarray,
        expected_events: int | None = None,
        now_s: float = 0.0,
        schedule: EventSchedule | None = None,
    ) -> None:
        """`home`: [2, 3] home positions (camera frame) until `on_home` tells the robot's own;
        `expected_events`: events the demonstration performs (the loop requires
        min(config.min_events, expected_events) of them; a demonstration with none folds nothing,
        so the loop aborts at once instead of "completing" where it starts); `now_s`: the host's
        clock at the start (the observation timeout counts from there); `schedule`: the order of
        the demonstration's events, which `config.event_order` holds the arms to."""
        self.config = config
        self.schedule = schedule if config.event_order else None
        self.on_home(home)
        self.required_events = config.min_events if expected_events is None else min(config.min_events, expected_events)
        # The host's move home waits for all of the demonstration's events, not just the minimum.
        self.demonstrated_events = config.min_events if expected_events is None else expected_events
        self._returning = False
        self.step = 0
        self.finished: Finish | None = None
        self._last_open: np.ndarray | None = None
        self._released_at = np.full((2, 2), np.nan)  # per arm: x, y of its last release while guarded
        self.regrasps_guarded = 0  # queries in which the guard held an arm's close open
        self.grasps_gated = 0  # queries in which the grasp gate held an arm's close open
        self.arm_events = np.zeros(2, np.int64)  # gripper events each arm made
        self._order_waits = np.zeros(2, np.int64)  # queries each arm was held at its next event
        self._waited_at = np.zeros(2, np.int64)  # the arm's event count when those queries were counted
        self.events_ordered = 0  # queries in which `event_order` held an arm at its next event
        self.partners_called = 0  # queries in which `event_order_call` sent an arm to the grasp the other waits for
        self.order_waits_expired = 0  # 1 once a hold ran out (`event_order_wait`) and the order was let go
        self._next_observation_ns = 0
        self._queried_ns = -1  # stamp of the observation the last `Query` answers
        self._waiting_since = now_s
        self._tokens: Tokens | None = None
        self._tokens_ns = -1
        self._state: np.ndarray | None = None
        self._state_ns = -1
        if expected_events == 0:
            self._finish(FoldOutcome.ABORTED, "the demonstration performs no grasp or release: nothing to fold", False)

    # -- inputs ---------------------------------------------------------------------------------

    def on_state(self, state: np.ndarray, stamp_ns: int) -> None:
        """A measured arm state [2, 4] (x, y, z, openness; camera frame): count open<->closed
        transitions per arm and keep it as the latest state. A state older than the latest is
        ignored (callbacks of a multi-threaded host may deliver out of order; counting it would
        count events twice)."""
        if stamp_ns < self._state_ns:
            return
        is_open = ~gripper_closed(state[:, 3])
        if self._last_open is not None:
            self.arm_events += is_open != self._last_open
            if self.config.regrasp_guard_m > 0:
                released = is_open & ~self._last_open
                self._released_at[released] = state[released, :2]
        self._last_open = is_open
        moved = np.linalg.norm(state[:, :2] - self._released_at, axis=1) > self.config.regrasp_guard_m
        self._released_at[moved | ~is_open] = np.nan  # unguarded (a nan distance is never "moved")
        self._state, self._state_ns = state, stamp_ns

    def on_home(self, home: np.ndarray) -> None:
        """The arms' home positions [2, 3] (camera frame), where the fold must end. The robot's
        home may arrive after the fold started (a latched topic reaches a subscriber once discovery
        has matched them); it is used only once the required gripper events are executed."""
        home = np.asarray(home, dtype=np.float64)
        if home.shape != (2, 3) or not np.isfinite(home).all():
            raise ValueError(f"home: expected finite [2, 3] positions, got {home.shape}")
        self.home = home

    def on_tokens(self, tokens: Tokens, stamp_ns: int) -> None:
        """Cloth tokens of the camera frame taken at `stamp_ns` (ignored if older than the latest)."""
        if stamp_ns < self._tokens_ns:
            return
        self._tokens, self._tokens_ns = tokens, stamp_ns

    @property
    def events_executed(self) -> int:
        """Gripper events (grasps and releases) both arms made in the fold."""
        return int(self.arm_events.sum())

    @property
    def latest_state(self) -> np.ndarray | None:
        return self._state

    # -- decisions ------------------------------------------------------------------------------

    def next(self, now_s: float, cancel_requested: bool = False) -> Decision:
        """What the host must do now. A `Finish` is final: it is returned again on later calls."""
        if self.finished is not None:
            return self.finished
        if cancel_requested:
            return self._finish(FoldOutcome.CANCELED, "canceled; arms hold", hold=True)
        if self._fresh():
            assert self._tokens is not None and self._state is not None
            if self.events_executed >= self.required_events and self.at_home(self._state):
                return self._finish(FoldOutcome.COMPLETED, f"{self.events_executed} gripper events", hold=False)
            if self.step >= self.config.max_steps:
                return self._finish(FoldOutcome.STEP_LIMIT, f"{self.events_executed} gripper events", hold=False)
            self._queried_ns = self._tokens_ns
            return Query(self._tokens, self._tokens_ns, self._state)
        waited = now_s - self._waiting_since
        if waited >= self.config.observation_timeout_s:
            return self._finish(
                FoldOutcome.ABORTED,
                f"no fresh cloth tokens and arm state for {self.config.observation_timeout_s:g} s",
                hold=True,
            )
        return Wait(self.config.observation_timeout_s - waited)

    def chunk_sent(self, sent_ns: int, steps: int, step_duration_s: float, now_s: float) -> None:
        """The chunk answering the last `Query` was sent at `sent_ns` (observation clock): it starts
        executing then, and never before the observation it answers (under a simulator's clock both
        are the same instant: simulated time waits for the policy). The next observation must be
        taken after its `steps` steps are executed."""
        self.step += 1
        start_ns = max(sent_ns, self._queried_ns)
        self._next_observation_ns = start_ns + round(steps * step_duration_s * NANOSECONDS)
        self._waiting_since = now_s

    def fail(self, message: str) -> Finish:
        """The host could not serve the last `Query` (prediction failed): abort, arms hold."""
        return self._finish(FoldOutcome.ABORTED, message, hold=True)

    # -- predicates -----------------------------------------------------------------------------

    def _fresh(self) -> bool:
        """Tokens taken after the last chunk executed, and an arm state no older than them: the
        pair the policy sees must describe one instant, which matters most in simulation, where
        the arms jump a whole frame at a time."""
        return (
            self._tokens is not None
            and self._state is not None
            and self._tokens_ns >= self._next_observation_ns
            and self._state_ns >= self._tokens_ns
        )

    def at_home(self, state: np.ndarray) -> bool:
        return self._open_near_home(state, self.config.home_tolerance_m)

    def _open_near_home(self, pose: np.ndarray, tolerance_m: float) -> bool:
        """Both arms of `pose` [2, 4] open and within `tolerance_m` of home."""
        near = np.linalg.norm(pose[:, :3] - self.home, axis=1) <= tolerance_m
        return bool(near.all() and not gripper_closed(pose[:, 3]).any())

    def phase_after(self, keypose: np.ndarray | None) -> FoldPhase:
        """RETURNING_HOME from the query on which the policy's next keypose [2, 4] is home (open,
        within `home_capture_m`) after all of the demonstration's events with open grippers; the
        decision is kept for the rest of the fold. EXECUTING before. With `home_after_events`, the
        keypose is not consulted: all of the demonstration's events, grippers open, is enough."""
        if self._returning:
            return FoldPhase.RETURNING_HOME
        if self._state is None or self.events_executed < self.demonstrated_events:
            return FoldPhase.EXECUTING
        open_now = not gripper_closed(self._state[:, 3]).any()
        if self.config.home_after_events:
            heading_home = True
        else:
            heading_home = keypose is not None and self._open_near_home(keypose, self.config.home_capture_m)
        self._returning = open_now and heading_home
        return FoldPhase.RETURNING_HOME if self._returning else FoldPhase.EXECUTING

    def steer(self, chunk: ActionChunk) -> Steer:
        """The chunk to send for the last `Query`: the policy's own (ABSOLUTE), or, once the policy
        is returning home (`phase_after` its keypose), the next H steps of a straight move from the
        latest state to home at `home_speed_m_s` with open grippers (home repeated past its end).
        The cadence stays the policy's (H steps, the first `steps_to_execute` executed, its
        `step_duration`), so every chunk stays within the controller's watchdog and each starts
        from a fresh measurement."""
        phase = self.phase_after(chunk.keypose)
        if phase is not FoldPhase.RETURNING_HOME:
            return Steer(self._order_events(self._gate_grasps(self._guard_regrasps(chunk))), phase)
        assert self._state is not None
        path, _ = self._straight(self._state[:, :3].astype(np.float64), self.home, chunk)
        move = ActionChunk(
            path.astype(np.float32),
            np.ones((chunk.horizon, 2), np.float32),
            chunk.steps_to_execute,
            chunk.step_duration,
            keypose=chunk.keypose,
        )
        return Steer(move, phase)

    def _straight(self, start: np.ndarray, end: np.ndarray, chunk: ActionChunk) -> tuple[np.ndarray, int]:
        """The `chunk.horizon` steps of a straight move from `start` to `end` (same shape, metres)
        at `home_speed_m_s`, `end` repeated past its arrival, and the steps it takes to arrive."""
        distance = float(np.linalg.norm(end - start, axis=-1).max())
        # Replanned from a float32 measured state, a whole number of steps must stay whole.
        steps = max(1, math.ceil(distance / (self.config.home_speed_m_s * chunk.step_duration) - 1e-3))
        fraction = np.minimum(np.arange(1, chunk.horizon + 1), steps) / steps
        return start + fraction.reshape(-1, *[1] * start.ndim) * (end - start), steps

    def _guard_regrasps(self, chunk: ActionChunk) -> ActionChunk:
        """`chunk` with the grippers of guarded arms (`regrasp_guard_m`) held open where it closes them."""
        guarded = np.isfinite(self._released_at[:, 0])
        closes = gripper_closed(chunk.openness).any(axis=0) & guarded
        if not closes.any():
            return chunk
        self.regrasps_guarded += 1
        openness = chunk.openness.copy()
        openness[:, closes] = 1.0
        return dataclasses.replace(chunk, openness=openness)

    def _gate_grasps(self, chunk: ActionChunk) -> ActionChunk:
        """`chunk` with the closes of arms measured open held open at the steps whose position is
        farther than `grasp_gate_m` (x, y) from the grasp the chunk's keypose reports for that arm
        (every step, when the keypose does not report a grasp for it)."""
        if self.config.grasp_gate_m <= 0 or chunk.keypose is None or self._state is None:
            return chunk
        positions = chunk.absolute_positions(self._state[:, :3])
        keypose = np.asarray(chunk.keypose, np.float64)
        away = np.linalg.norm(positions[:, :, :2] - keypose[None, :, :2], axis=-1) > self.config.grasp_gate_m
        aims = gripper_closed(keypose[:, 3])  # the keypose is a grasp
        is_open = ~gripper_closed(self._state[:, 3])
        gated = gripper_closed(chunk.openness) & is_open[None] & (away | ~aims[None])
        if not gated.any():
            return chunk
        self.grasps_gated += 1
        openness = chunk.openness.copy()
        openness[gated] = 1.0
        return dataclasses.replace(chunk, openness=openness)

    def _order_events(self, chunk: ActionChunk) -> ActionChunk:
        """`chunk` with each arm the schedule holds (`EventSchedule.held`) kept, from the step at
        which the chunk would make its next event, where that step puts it, gripper as measured.
        An arm held `event_order_wait` queries at one event makes it, and the fold goes on in the
        policy's order: its event counts no longer pair with the demonstration's."""
        if self.schedule is None or self._state is None:
            return chunk
        closed = gripper_closed(self._state[:, 3])
        chunk = self._call_partners(chunk, closed)
        first = first_event_steps(chunk.openness[: chunk.steps_to_execute], closed)
        held = self.schedule.held(self.arm_events, first >= 0)
        # A wait counts the queries an arm is held at one event: it starts over at the arm's next.
        self._order_waits = np.where(self.arm_events == self._waited_at, self._order_waits, 0) + held
        self._waited_at = self.arm_events.copy()
        if (self._order_waits > self.config.event_order_wait).any():
            self.order_waits_expired += 1
            self.schedule = None
            return chunk
        if not held.any():
            return chunk
        self.events_ordered += 1
        positions = chunk.absolute_positions(self._state[:, :3])
        openness = chunk.openness.copy()
        for arm in np.flatnonzero(held):
            step = first[arm]
            positions[step:, arm] = positions[step, arm]
            openness[step:, arm] = 0.0 if closed[arm] else 1.0
        return dataclasses.replace(
            chunk,
            positions=positions.astype(np.float32),
            openness=openness,
            representation=ChunkRepresentation.ABSOLUTE,
        )

    def _call_partners(self, chunk: ActionChunk, closed: np.ndarray) -> ActionChunk:
        """`chunk` with each open arm the other arm waits for (`EventSchedule.partners`: both arms'
        grasps in one demonstration keyframe, only the other's made now) sent in a straight line at
        `home_speed_m_s` to the grasp its chunk's keypose reports for it, closing there. A partner
        whose keypose is no grasp is left to the policy (the hold's wait still runs)."""
        assert self.schedule is not None and self._state is not None
        if not self.config.event_order_call or chunk.keypose is None:
            return chunk
        firing = first_event_steps(chunk.openness[: chunk.steps_to_execute], closed) >= 0
        keypose = np.asarray(chunk.keypose, np.float64)
        # Grasps only: a release ends a carry the policy is making anyway, at its own pace.
        due = self.schedule.partners(self.arm_events, firing) & ~closed & gripper_closed(keypose[:, 3])
        if not due.any():
            return chunk
        self.partners_called += 1
        start = self._state[:, :3].astype(np.float64)
        positions = chunk.absolute_positions(start)
        openness = chunk.openness.copy()
        for arm in np.flatnonzero(due):
            positions[:, arm], steps = self._straight(start[arm], keypose[arm, :3], chunk)
            openness[:, arm] = 1.0
            openness[steps - 1 :, arm] = 0.0
        return dataclasses.replace(
            chunk,
            positions=positions.astype(np.float32),
            openness=openness,
            representation=ChunkRepresentation.ABSOLUTE,
        )

    def _finish(self, outcome: FoldOutcome, message: str, hold: bool) -> Finish:
        self.finished = Finish(outcome, message, hold)
        return self.finished
