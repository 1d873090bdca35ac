"""Dual-arm Cartesian controller core: chunks in, safe per-arm targets out (no ROS, no I/O).

The node feeds it measurements and chunks and calls `step(now)` at the control rate; it returns
the commanded positions in the camera frame and in each arm's base frame. Time is always passed
in (`now`, seconds on any monotonic clock), so a lock-stepped simulator can drive it with
simulated time and CPU slowness never changes the outcome.

Modes: WAITING (no measurement yet), HOLD (no plan, or the watchdog fired: the arms keep the
last commanded position), TRACKING (following a chunk), ESTOP (latched until `reset`).

Threads: `estop` may be called from another thread while a chunk or a step is being processed
(the node serves the e-stop on its own thread so that nothing queued can delay it). It sets the
latch first, and `step` and `submit_chunk` read the latch before they act, so nothing in progress
can undo it. Everything else is called from one thread at a time.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from instant_fold_control.chunk import Trajectory
from instant_fold_control.config import RobotConfig
from instant_fold_control.safety import SafetyLayer
from instant_fold_core.contracts import ActionChunk
from instant_fold_core.errors import InvalidInputError, NonFiniteError

#: Measured states kept to resolve the state a DELTA chunk was predicted from.
HISTORY_LENGTH = 512


class Mode(enum.Enum):
    WAITING = "waiting"
    HOLD = "hold"
    TRACKING = "tracking"
    ESTOP = "estop"


@dataclass(frozen=True)
class ControlOutput:
    """What the drivers should do now."""

    mode: Mode
    positions: np.ndarray  # [2, 3] commanded, camera frame
    openness: np.ndarray  # [2]
    base_positions: tuple[np.ndarray, np.ndarray]  # per-arm commanded position in its base frame


def stderr_log(level: str, text: str) -> None:
    if level != "debug":
        print(f"[{level}] {text}")


class DualArmController:
    """Executes action chunks on two arms through one safety layer."""

    def __init__(self, robot: RobotConfig, log: Callable[[str, str], None] = stderr_log) -> None:
        self.robot = robot
        self.safety = SafetyLayer(robot.safety, log)
        self._log = log
        self._extrinsics = tuple(arm.extrinsics for arm in robot.arms)
        self._history: deque[tuple[float, np.ndarray]] = deque(maxlen=HISTORY_LENGTH)
        self._measured: np.ndarray | None = None  # [2, 4] camera frame
        self._commanded: np.ndarray | None = None  # [2, 3]
        self._openness: np.ndarray | None = None  # [2]
        self._trajectory: Trajectory | None = None
        self._last_chunk_time = -np.inf
        self._last_step_time: float | None = None
        self._estopped = False

    # --- inputs -------------------------------------------------------------------------------

    def update_measurement(
        self, base_positions: tuple[np.ndarray, np.ndarray], openness: np.ndarray, now: float
    ) -> None:
        """Record each arm's measured position (its base frame, m) and gripper openness."""
        cam = np.stack(
            [
                ext.to_camera(np.asarray(p, dtype=np.float64))
                for ext, p in zip(self._extrinsics, base_positions, strict=True)
            ]
        )
        state = np.concatenate([cam, np.clip(np.asarray(openness, dtype=np.float64), 0, 1)[:, None]], axis=1)
        if not np.isfinite(state).all():
            self._log("error", f"driver reported a non-finite state {state.tolist()}; ignored")
            return
        self._measured = state
        self._history.append((now, state))

    def refuse_chunk(self, exc: InvalidInputError) -> None:
        """Count and log a chunk that broke its contract before it could be built (e.g. a message
        with NaN positions): NaN/inf as `refused_nonfinite`, anything else as `refused_malformed`."""
        name = "refused_nonfinite" if isinstance(exc, NonFiniteError) else "refused_malformed"
        self.safety.event(name, f"chunk refused: {exc}", "error")

    def submit_chunk(self, chunk: ActionChunk, now: float, observation_time: float | None = None) -> bool:
        """Start executing a chunk; returns False (logged and counted) when it is refused.

        Args:
            chunk: camera-frame chunk (valid by construction; see `refuse_chunk` for one that was not).
            now: current time.
            observation_time: time of the observation the chunk answers (same clock as `now`);
                None when the chunk carries no stamp (then DELTA is relative to the latest state).
        """
        if self._estopped:
            self.safety.event("refused_estop", "chunk refused: e-stop is latched (call reset)")
            return False
        if chunk.horizon > self.robot.safety.max_chunk_steps:
            self.safety.event(
                "refused_long",
                f"chunk refused: {chunk.horizon} steps, more than safety.max_chunk_steps "
                f"({self.robot.safety.max_chunk_steps})",
                "error",
            )
            return False
        if not self._ensure_commanded():
            self.safety.event("refused_malformed", "chunk refused: no arm state measured yet")
            return False
        assert self._commanded is not None
        # A stamp as far in the future as max_chunk_age is no observation of this clock either.
        if observation_time is not None and abs(now - observation_time) > self.robot.safety.max_chunk_age:
            age = now - observation_time
            when = f"{age:.3f} s old" if age > 0 else f"stamped {-age:.3f} s in the future"
            self.safety.event(
                "refused_stale",
                f"chunk refused: its observation is {when} (> max_chunk_age {self.robot.safety.max_chunk_age} s)",
            )
            return False
        reference = self._state_at(observation_time)[:, :3]
        positions, openness = chunk.waypoints(reference)
        positions = self.safety.clamp_waypoints(positions)
        trajectory = Trajectory(now, self._commanded.copy(), positions, openness, chunk.step_duration)
        gap = trajectory.min_arm_distance()
        start_gap = float(np.linalg.norm(self._commanded[0] - self._commanded[1]))
        if gap < self.robot.safety.min_gripper_distance and gap < start_gap:
            self.safety.event(
                "refused_distance",
                f"chunk refused: grippers would come {gap:.3f} m close (< {self.robot.safety.min_gripper_distance} m)",
            )
            return False
        if self._estopped:  # latched from another thread while this chunk was being checked
            self.safety.event("refused_estop", "chunk refused: e-stop is latched (call reset)")
            return False
        self._trajectory = trajectory
        self._last_chunk_time = now
        return True

    def estop(self, reason: str = "e-stop requested") -> None:
        """Latch the e-stop: the arms hold and chunks are refused until `reset` (any thread)."""
        latched_before, self._estopped = self._estopped, True
        self._trajectory = None
        if not latched_before:
            self.safety.event("estop", reason, "error")

    def reset(self) -> None:
        """Release the e-stop; the arms hold at their measured position until the next chunk."""
        self._estopped = False
        self._trajectory = None
        if self._measured is not None:
            self._commanded = self._measured[:, :3].copy()
        self._log("info", "e-stop reset: holding at the measured position")

    # --- outputs ------------------------------------------------------------------------------

    @property
    def mode(self) -> Mode:
        if self._estopped:
            return Mode.ESTOP
        if self._commanded is None:
            return Mode.WAITING
        return Mode.TRACKING if self._trajectory is not None else Mode.HOLD

    @property
    def estopped(self) -> bool:
        return self._estopped

    def state(self) -> np.ndarray | None:
        """Latest measured [2, 4] camera-frame state (x, y, z, openness), None before the first."""
        return None if self._measured is None else self._measured.copy()

    def plan_finished(self, now: float) -> bool:
        """True without a plan, or once its last waypoint is due by `now`.

        A lock-stepped simulator pauses simulated time then, until the next chunk arrives, so
        the time a policy takes to answer never shows in the simulation. Due, not reached: a
        speed-limited arm that lags stops where the limit got it, as a real one would be there
        at that time, and the next chunk continues from there; waiting for it to catch up would
        let simulated time run while the policy thinks and make the outcome depend on the CPU.
        """
        return self._trajectory is None or now >= self._trajectory.end_time - 1e-6

    def step(self, now: float) -> ControlOutput | None:
        """Advance the plan to `now` and return the safe commanded targets (None while WAITING)."""
        if not self._ensure_commanded():
            return None
        assert self._commanded is not None
        dt = 0.0 if self._last_step_time is None else max(0.0, now - self._last_step_time)
        self._last_step_time = now
        trajectory = self._trajectory  # read once: an e-stop from another thread may drop it meanwhile
        if trajectory is not None and now - self._last_chunk_time > self.robot.safety.watchdog_timeout:
            self.safety.event(
                "watchdog_hold",
                f"no chunk for {now - self._last_chunk_time:.3f} s (> watchdog_timeout "
                f"{self.robot.safety.watchdog_timeout} s): holding",
            )
            self._trajectory = trajectory = None
        if trajectory is not None and not self._estopped:
            desired, reached = trajectory.sample(now)
            if reached:
                self._openness = trajectory.openness[reached - 1].copy()
            self._commanded = self.safety.filter_output(self._commanded, desired, dt)
        return self._output()

    def _ensure_commanded(self) -> bool:
        """Start commanding from the measured state; False while nothing was measured."""
        if self._measured is None:
            return False
        if self._commanded is None or self._openness is None:
            self._commanded = self._measured[:, :3].copy()
            self._openness = self._measured[:, 3].copy()
        return True

    def _output(self) -> ControlOutput:
        assert self._commanded is not None and self._openness is not None
        base = tuple(ext.to_base(p) for ext, p in zip(self._extrinsics, self._commanded, strict=True))
        return ControlOutput(self.mode, self._commanded.copy(), self._openness.copy(), (base[0], base[1]))

    def _state_at(self, t: float | None) -> np.ndarray:
        assert self._measured is not None
        if t is None or not self._history:
            return self._measured
        times = np.fromiter((h[0] for h in self._history), dtype=np.float64)
        return self._history[int(np.argmin(np.abs(times - t)))][1]
