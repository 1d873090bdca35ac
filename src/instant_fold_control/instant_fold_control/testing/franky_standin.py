"""A stand-in for franky's hardware classes, at the Franka driver's module boundary.

No Franka arm is here, so the driver is tested against `FrankyStandIn`: it looks like the
`franky` module to `FrankaDriver` (real franky value types, motions and exceptions come from the
installed library) but `Robot` and `Gripper` simulate the arm, the hand and the parts of franky
2.0.0's behaviour that decide whether a deployment works (read from its source, tag v2.0.0):

- dynamics factors multiply: a motion's limit is `motion factor x robot factor x the robot's
  translation velocity limit` (`PositionWaypointMotion::setInputLimits`; the limit is 1.7 m/s
  on an FR3 and 3.0 m/s on a Panda, `src/robot.cpp`); the simulated end effector moves to the
  target at that speed (the FR3 limit);
- `Gripper.width` / `max_width` / `is_grasped` are blocking reads of the hand's state
  (`readOnce`; about 0.1 s each on hardware, franky issue #35), here `read_s` long;
- `Gripper.grasp_async` / `move_async` first wait for the previous gripper future
  (`Gripper::setCurrentFuture`), so a second command blocks its caller until the first is done;
  `grasp` succeeds when the final width is within [width - epsilon_inner, width + epsilon_outer];
- a control exception (a reflex, or `Robot.stop()` pre-empting a running motion) is stored and
  re-raised by the next `move` that starts a motion or by `join_motion`
  (`Robot::joinMotionUnsafe`); `recover_from_errors()` clears the reflex, not the stored exception;
- `franky.GripperException` does not derive from `franky.Exception`.

Test hooks: `Robot.collide()` (a collision reflex), `Gripper.hold_motions()` /
`release_motions()` (keep gripper motions from finishing), `Gripper.fail_next` (an exception for
the next gripper command) and `Gripper.object_width` (what is between the fingers).
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from typing import Any

import numpy as np

#: franky 2.0.0's translation velocity limit of an FR3 (m/s; 3.0 on a Panda), `src/robot.cpp`.
TRANSLATION_VELOCITY_LIMIT = 1.7
#: One blocking gripper state read on hardware (franky issue #35).
GRIPPER_READ_S = 0.1


class FrankyStandIn:
    """The `franky` module as the driver sees it, with simulated `Robot` and `Gripper`."""

    def __init__(self, franky: Any, gripper_read_s: float = GRIPPER_READ_S, max_width: float = 0.08) -> None:
        self._franky = franky
        self.gripper_read_s = gripper_read_s
        self.max_width = max_width
        self.robots: dict[str, StandInRobot] = {}
        self.grippers: dict[str, StandInGripper] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._franky, name)

    def Robot(self, fci_hostname: str) -> StandInRobot:
        robot = self.robots[fci_hostname] = StandInRobot(self._franky, fci_hostname)
        return robot

    def Gripper(self, fci_hostname: str) -> StandInGripper:
        gripper = self.grippers[fci_hostname] = StandInGripper(self._franky, self.gripper_read_s, self.max_width)
        return gripper


class StandInRobot:
    """A Franka arm whose end effector moves straight to the latest target at the franky speed limit."""

    def __init__(self, franky: Any, fci_hostname: str) -> None:
        self._franky = franky
        self.fci_hostname = fci_hostname
        self.relative_dynamics_factor: float = 1.0
        self.translation_velocity_limit = TRANSLATION_VELOCITY_LIMIT
        self.position = np.array([0.4, 0.0, 0.3])
        self.quaternion = np.array([1.0, 0.0, 0.0, 0.0])
        self.target = self.position.copy()
        self.effective_dynamics_factor = 1.0  # of the running motion
        self.has_errors = False
        self.moves = 0
        self._running = False
        self._stored: BaseException | None = None
        self._updated = time.monotonic()
        self._lock = threading.Lock()

    # --- franky's Robot -----------------------------------------------------------------------

    def move(self, motion: Any, asynchronous: bool = False) -> None:
        if motion.reference_type != self._franky.ReferenceType.Absolute:
            raise ValueError("the stand-in models absolute Cartesian motions only")
        with self._lock:
            self._advance()
            if not self._running:  # a new control thread starts: the previous one's exception surfaces
                self._rethrow_stored()
                if self.has_errors:
                    self._stored = self._franky.CommandException(
                        'libfranka: Move command rejected: command not possible in the current mode ("Reflex")!'
                    )
                    return
            self.moves += 1
            factor = _velocity(motion.relative_dynamics_factor) * _velocity(self.relative_dynamics_factor)
            self.effective_dynamics_factor = factor
            pose = motion.target.pose.end_effector_pose
            self.target = np.asarray(pose.translation, dtype=np.float64).ravel().copy()
            self.quaternion = np.asarray(pose.quaternion, dtype=np.float64).ravel().copy()
            self._running = True
        if not asynchronous:
            self.join_motion()

    def join_motion(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                self._advance()
                if not self._running:
                    self._rethrow_stored()
                    return True
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(0.001)

    def stop(self) -> None:
        with self._lock:
            self._advance()
            if self._running:
                self._running = False
                self._stored = self._franky.ControlException("libfranka: motion aborted by stop()")

    def recover_from_errors(self) -> bool:
        with self._lock:
            self.has_errors = False
        return True

    @property
    def current_pose(self) -> Any:
        with self._lock:
            self._advance()
            affine = self._franky.Affine(self.position.copy(), self.quaternion.copy())
        return self._franky.RobotPose(affine)

    @property
    def current_joint_positions(self) -> np.ndarray:
        return np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])

    # --- test hooks ---------------------------------------------------------------------------

    @property
    def speed_limit(self) -> float:
        """The running motion's translation speed limit (m/s)."""
        return self.effective_dynamics_factor * self.translation_velocity_limit

    def collide(self) -> None:
        """A collision reflex: the motion aborts, the arm is in reflex mode, the exception is stored."""
        with self._lock:
            self._advance()
            self._running = False
            self.has_errors = True
            self._stored = self._franky.ControlException(
                'libfranka: Move command aborted: motion aborted by reflex! ["cartesian_reflex"]'
            )

    # --- internals ----------------------------------------------------------------------------

    def _rethrow_stored(self) -> None:
        if self._stored is not None:
            stored, self._stored = self._stored, None
            raise stored

    def _advance(self) -> None:
        now = time.monotonic()
        dt, self._updated = now - self._updated, now
        if not self._running:
            return
        step = self.target - self.position
        distance = float(np.linalg.norm(step))
        reach = self.speed_limit * dt
        if distance <= reach:
            self.position = self.target.copy()
            self._running = False  # the motion finished
        else:
            self.position = self.position + step * (reach / distance)


class StandInGripper:
    """A Franka Hand: blocking state reads, serialised asynchronous commands, libfranka's grasp rule."""

    def __init__(self, franky: Any, read_s: float, max_width: float) -> None:
        self._franky = franky
        self._read_s = read_s
        self._max_width = max_width
        self._width = max_width
        self._is_grasped = False
        self.object_width = 0.0  # an object (or cloth) this thick stops the fingers; 0 = nothing
        self.fail_next: BaseException | None = None  # raised by the next gripper command
        self.commands: list[tuple[str, float]] = []
        self.width_reads: list[int] = []  # thread id of every blocking state read
        self._future: Future[bool] | None = None
        self._future_lock = threading.Lock()
        self._motions_may_finish = threading.Event()
        self._motions_may_finish.set()

    # --- franky's Gripper ---------------------------------------------------------------------

    @property
    def width(self) -> float:
        self._read_state()
        return self._width

    @property
    def max_width(self) -> float:
        self._read_state()
        return self._max_width

    @property
    def is_grasped(self) -> bool:
        self._read_state()
        return self._is_grasped

    def move(self, width: float, speed: float) -> bool:
        self._begin("move", width)
        self._travel(min(max(width, self.object_width), self._max_width), speed)
        self._is_grasped = False
        return True

    def grasp(
        self, width: float, speed: float, force: float, epsilon_inner: float = 0.005, epsilon_outer: float = 0.005
    ) -> bool:
        self._begin("grasp", width)
        self._travel(min(max(width, self.object_width), self._max_width), speed)
        self._is_grasped = width - epsilon_inner <= self._width <= width + epsilon_outer
        return self._is_grasped

    def move_async(self, width: float, speed: float) -> Future[bool]:
        return self._start(self.move, width, speed)

    def grasp_async(
        self, width: float, speed: float, force: float, epsilon_inner: float = 0.005, epsilon_outer: float = 0.005
    ) -> Future[bool]:
        return self._start(self.grasp, width, speed, force, epsilon_inner, epsilon_outer)

    # --- test hooks ---------------------------------------------------------------------------

    def hold_motions(self) -> None:
        """Gripper motions started from now on do not finish until `release_motions()`."""
        self._motions_may_finish.clear()

    def release_motions(self) -> None:
        self._motions_may_finish.set()

    # --- internals ----------------------------------------------------------------------------

    def _read_state(self) -> None:
        self.width_reads.append(threading.get_ident())
        time.sleep(self._read_s)

    def _begin(self, name: str, width: float) -> None:
        self.commands.append((name, width))
        failure, self.fail_next = self.fail_next, None
        if failure is not None:
            raise failure

    def _travel(self, width: float, speed: float) -> None:
        time.sleep(abs(width - self._width) / max(speed, 1e-6))
        self._motions_may_finish.wait()
        self._width = width

    def _start(self, command: Any, *args: Any) -> Future[bool]:
        """franky's setCurrentFuture: wait for the previous command, then run this one on its own thread."""
        with self._future_lock:
            if self._future is not None:
                self._future.exception()  # waits; franky waits the same way and ignores the outcome
            future: Future[bool] = Future()

            def run() -> None:
                try:
                    future.set_result(command(*args))
                except BaseException as exc:  # delivered through the future, as franky's futures do
                    future.set_exception(exc)

            threading.Thread(target=run, daemon=True).start()
            self._future = future
            return future


def _velocity(factor: Any) -> float:
    """The velocity part of a franky RelativeDynamicsFactor or a plain float."""
    return float(factor.velocity if hasattr(factor, "velocity") else factor)
