"""One control tick over a robot's drivers: measure, step the controller, command, advance time.

`ControlLoop` owns the controller's read -> update -> write sequence (ros2_control's
read/update/write over a hardware interface; here the `ArmDriver`s): the node only converts
messages and calls one method per event (`tick()` per timer tick, `submit()` per chunk,
`estop()`/`reset()` per service call, `summary()` per log period); the in-process evaluator
calls the same methods in a plain loop over a simulator. Time comes from the robot's `Lockstep`
when it has one (simulated time, which this loop advances once per tick) and from the monotonic
clock otherwise.

Under lockstep a tick commands where the arms must be at its *end* (`now + period`) and then
asks the simulator to get there; between chunks (`plan_finished`) it does nothing, so simulated
time stands still while the policy thinks and a slow CPU never changes the outcome. A refused
chunk is the exception: the arms hold for the steps it would have executed, because on a robot time
would pass meanwhile and the policy would see a new observation; a simulator paused at the
refused chunk's instant would send none, and the fold would stall.
A driver failure latches the e-stop and stops both arms.

Threads: `tick`, `submit` and `reset` take turns (one lock); `estop` may come from another thread
at any time and waits for none of them: it latches the controller's e-stop, then stops the
drivers as soon as no driver command is being sent (a second, short lock; a tick that has not
sent its commands yet sees the latch and sends none).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np

from instant_fold_control.controller import ControlOutput, DualArmController, Mode, stderr_log
from instant_fold_control.drivers.base import DriverError, RobotDrivers
from instant_fold_control.safety import LOG_PERIOD_S
from instant_fold_core.contracts import ActionChunk


class ControlLoop:
    """The controller core wired to a robot's drivers."""

    def __init__(
        self,
        controller: DualArmController,
        drivers: RobotDrivers,
        period_s: float,
        log: Callable[[str, str], None] = stderr_log,
    ) -> None:
        if not (np.isfinite(period_s) and period_s > 0):
            raise ValueError(f"period_s: must be positive, got {period_s}")
        self.controller = controller
        self.drivers = drivers
        self.period_s = period_s
        self._log = log
        self.measured_at = 0.0  # controller time of the latest measurement
        self._last_mode = Mode.WAITING
        self._gripper_sent: list[float | None] = [None, None]
        self._hold_until = -np.inf  # under lockstep: simulated time a refused chunk holds the arms to
        self._lock = threading.Lock()  # ticks, chunks and resets
        self._command_lock = threading.Lock()  # driver commands and stops

    @property
    def lockstep(self):
        return self.drivers.lockstep

    def now(self) -> float:
        """Controller time: simulated time for lock-stepped drivers, the monotonic clock otherwise."""
        return self.lockstep.now() if self.lockstep is not None else time.monotonic()

    def read(self) -> bool:
        """Feed both arms' measurements to the controller; False (e-stop latched) on a driver failure."""
        try:
            measurements = [driver.read_state() for driver in self.drivers.arms]
        except DriverError as exc:
            self.driver_failed(exc)
            return False
        self.measured_at = self.now()
        self.controller.update_measurement(
            (measurements[0].position, measurements[1].position),
            np.array([m.openness for m in measurements]),
            self.measured_at,
        )
        return True

    def tick(self) -> None:
        """One control period (under lockstep: simulated time advances by one period unless the plan is done)."""
        with self._lock:
            self._tick()

    def submit(self, chunk: ActionChunk, observation_time: float | None) -> bool:
        """Hand a chunk to the controller now (between ticks); False when it is refused."""
        with self._lock:
            now = self.now()
            accepted = self.controller.submit_chunk(chunk, now, observation_time)
            if not accepted and self.lockstep is not None and not self.controller.estopped:
                steps = min(chunk.steps_to_execute, self.controller.robot.safety.max_chunk_steps)
                self._hold_until = now + steps * chunk.step_duration
            return accepted

    def idle(self, now: float) -> bool:
        """Under lockstep: nothing to execute at `now` (the plan is done and no refused chunk's hold
        runs), so simulated time waits for the next chunk."""
        return self.controller.plan_finished(now) and now >= self._hold_until - 1e-6

    def reset(self) -> bool:
        """Release the e-stop at the measured position; False (still latched) when the drivers
        report no state."""
        with self._lock:
            if not self.read():
                return False
            self.controller.reset()
            self._hold_until = -np.inf
            return True

    def estop(self, reason: str) -> None:
        """Latch the e-stop and stop both arms, from any thread, without waiting for a tick."""
        self.controller.estop(reason)
        self.stop()

    def _tick(self) -> None:
        now = self.now()
        if not self.read():
            return
        if self.lockstep is not None:
            if self.idle(now):
                return
            now += self.period_s
        out = self.controller.step(now)
        if out is None:
            return
        entering_hold = out.mode == Mode.HOLD and self._last_mode != Mode.HOLD
        self._last_mode = out.mode
        try:
            with self._command_lock:
                if self.controller.estopped:  # latched now, or by the e-stop service meanwhile
                    return
                self._command(out, entering_hold)
            if self.lockstep is None:
                return
            self.lockstep.advance(now)
        except DriverError as exc:
            self.driver_failed(exc)
            return
        self.read()  # the state of the new simulated instant, before anyone reads it

    def _command(self, out: ControlOutput, entering_hold: bool) -> None:
        for i, driver in enumerate(self.drivers.arms):
            if out.mode == Mode.TRACKING:
                driver.command_cartesian(out.base_positions[i])
            if self._gripper_sent[i] != out.openness[i]:
                driver.set_gripper(float(out.openness[i]))
                self._gripper_sent[i] = float(out.openness[i])
            if entering_hold:
                driver.hold()

    def summary(self) -> str:
        """One line for the periodic log: the mode, the safety events so far and how many lines
        the log limit kept back since the last summary (taken: the next summary counts anew)."""
        safety = self.controller.safety
        counts = {k: v for k, v in safety.counts.items() if v}
        suppressed = safety.take_suppressed()
        unlogged = f"; lines not logged (limit per {LOG_PERIOD_S:g} s) {suppressed}" if suppressed else ""
        return f"mode {self.controller.mode.value}; safety events {counts or 'none'}{unlogged}"

    def driver_failed(self, exc: DriverError) -> None:
        """Latch the e-stop and stop both arms (once)."""
        if not self.controller.estopped:
            self.estop(f"driver failure: {exc}")

    def stop(self) -> None:
        """Stop both arms (never while a tick is sending commands)."""
        with self._command_lock:
            for driver in self.drivers.arms:
                try:
                    driver.stop()
                except DriverError as exc:
                    self._log("error", f"{driver.arm} arm: stop failed: {exc}")
