"""Dobot arm driver over the TCP/IP protocol V4 (see `dobot_protocol` for the wire format).

Three threads of activity per arm:
- the caller (control tick) sets targets and gripper states, and reads the latest measurement;
- a feedback reader on port 30004 decodes every 1440-byte packet (8 ms) into the measurement;
  a malformed packet is skipped and counted (as Dobot's own ROS 2 driver does), and the feedback
  timeout decides when too many were missing;
- a servo streamer sends `ServoP` on port 29999 at `servo_rate_hz` (>= 33 Hz), interpolating
  linearly from the last streamed pose to the newest target over the observed command period,
  so the arm sees a smooth, evenly timed stream even when control ticks are late or slower.

The tool orientation is fixed: `rotation_deg` from the config, or the orientation measured at
connect when it is not given. The gripper is a digital output (`DOInstant`) or a tool output
(`ToolDOInstant`) as configured; the immediate variants are used so a gripper event is not
queued behind motion commands.

Only `safety.max_speed` (the spacing of the streamed points) limits how fast the arm moves:
ServoP reaches each point in its `t`, so the controller's global SpeedFactor is not a speed limit
for this driver and is not sent. ServoP needs firmware >= 4.5.0, and before 4.6.0 its `t` must be
at least 0.02 s (<= 50 Hz streaming); no V4 command reports the firmware version, so the config
states it (`firmware_version`) and an unknown firmware gets the stricter bound.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from instant_fold_control.config import RobotConfig
from instant_fold_control.drivers import dobot_protocol as proto
from instant_fold_control.drivers.base import (
    ArmDriver,
    ArmMeasurement,
    DriverConnectionError,
    DriverError,
    RobotDrivers,
)
from instant_fold_core.config import check_keys
from instant_fold_core.contracts import gripper_closed
from instant_fold_core.errors import ConfigError

MIN_SERVO_RATE_HZ = 33.0
MAX_SERVO_RATE_HZ = 125.0  # the controller's servo cycle is 8 ms
GRIPPER_IO = ("do", "tool_do")


@dataclass(frozen=True)
class DobotParams:
    """Per-arm parameters (`arms.<arm>.driver` in config/robots/dobot.yaml)."""

    host: str
    dashboard_port: int = proto.DASHBOARD_PORT
    feedback_port: int = proto.FEEDBACK_PORT
    servo_rate_hz: float = 50.0
    servo_time_s: float = 0.0  # ServoP `t`; 0 = one stream period
    rotation_deg: tuple[float, float, float] | None = None
    gripper_io: str = "tool_do"
    gripper_index: int = 1
    gripper_close_level: int = 1
    firmware_version: str | None = None  # controller firmware, e.g. "4.5.2"; None = assume < 4.6.0
    connect_timeout_s: float = 2.0
    response_timeout_s: float = 1.0
    enable_timeout_s: float = 10.0
    feedback_timeout_s: float = 0.5
    disable_on_close: bool = False

    @classmethod
    def from_mapping(cls, arm: str, values: Mapping[str, Any]) -> DobotParams:
        where = f"arms.{arm}.driver"
        if "speed_factor" in values:
            raise DriverError(
                f"{where}.speed_factor: not supported: the global SpeedFactor does not limit ServoP streaming; "
                "limit the arm's speed with safety.max_speed"
            )
        try:
            check_keys(where, values, optional=cls.__dataclass_fields__)
        except ConfigError as exc:
            raise DriverError(f"Dobot parameters: {exc}") from None
        if "host" not in values:
            raise DriverError(f"{where}.host: required (the arm controller's IP address)")
        kwargs = dict(values)
        if kwargs.get("rotation_deg") is not None:
            rot = kwargs["rotation_deg"]
            if not isinstance(rot, list | tuple) or len(rot) != 3:
                raise DriverError(f"{where}.rotation_deg: expected [rx, ry, rz] in degrees, got {rot!r}")
            kwargs["rotation_deg"] = tuple(float(v) for v in rot)
        params = cls(**kwargs)
        if not MIN_SERVO_RATE_HZ <= params.servo_rate_hz <= MAX_SERVO_RATE_HZ:
            raise DriverError(
                f"{where}.servo_rate_hz: must be in [{MIN_SERVO_RATE_HZ}, {MAX_SERVO_RATE_HZ}], got {params.servo_rate_hz}"
            )
        _check_servo_time(where, params)
        if params.gripper_io not in GRIPPER_IO:
            raise DriverError(f"{where}.gripper_io: must be one of {GRIPPER_IO}, got {params.gripper_io!r}")
        if params.gripper_close_level not in (0, 1):
            raise DriverError(f"{where}.gripper_close_level: must be 0 or 1, got {params.gripper_close_level}")
        return params

    @property
    def servo_time(self) -> float:
        """ServoP `t` (s) sent with every point."""
        return self.servo_time_s or 1.0 / self.servo_rate_hz


def _check_servo_time(where: str, params: DobotParams) -> None:
    """Refuse a ServoP stream the controller's firmware would reject (every point, then an e-stop)."""
    firmware = None
    if params.firmware_version is not None:
        try:
            firmware = proto.parse_firmware_version(params.firmware_version)
        except ValueError as exc:
            raise DriverError(f"{where}.firmware_version: {exc}") from None
        if firmware < proto.SERVO_MIN_FIRMWARE:
            raise DriverError(
                f"{where}.firmware_version: {params.firmware_version} has no ServoP (needs firmware >= 4.5.0); "
                "update the controller"
            )
    t_min = proto.servo_time_min(firmware)
    if params.servo_time < t_min - 1e-9:
        which = (
            f"firmware {params.firmware_version}" if firmware else "firmware before 4.6.0 (firmware_version not set)"
        )
        raise DriverError(
            f"{where}: ServoP t = {params.servo_time:.4f} s (servo_rate_hz {params.servo_rate_hz:g}, servo_time_s "
            f"{params.servo_time_s:g}) is below the {t_min} s that {which} accepts; stream at <= {1 / t_min:g} Hz, "
            "or set firmware_version if the controller runs 4.6.0 or newer"
        )


class CommandRefused(DriverError):
    """The controller answered a command with a non-zero ErrorID."""

    def __init__(self, message: str, error_id: int) -> None:
        super().__init__(message)
        self.error_id = error_id


class DashboardClient:
    """Request/response on port 29999; one request in flight at a time."""

    def __init__(self, label: str, host: str, port: int, connect_timeout: float, timeout: float) -> None:
        self.label, self.host, self.port = label, host, port
        self._connect_timeout, self._timeout = connect_timeout, timeout
        self._sock: socket.socket | None = None
        self._buffer = b""
        self._lock = threading.Lock()

    def connect(self) -> None:
        self._sock = _connect(self.label, "dashboard", self.host, self.port, self._connect_timeout)
        self._sock.settimeout(self._timeout)

    def request(self, command: str) -> proto.Response:
        """Send one command and wait for its answer; DriverError unless ErrorID is 0.

        A plain-text answer (no ErrorID, no `;`, e.g. `Control Mode Is Not Tcp`) is reported as
        what it says at once, instead of waiting for a `;` that never comes.
        """
        with self._lock:
            if self._sock is None:
                raise DriverConnectionError(f"{self.label}: dashboard not connected")
            try:
                self._sock.sendall(command.encode("ascii"))
                while b";" not in self._buffer:
                    received = self._buffer.decode("ascii", errors="replace")
                    if received and not proto.is_response_prefix(received):
                        self._buffer = b""
                        raise DriverError(self._plain_reply(command, received))
                    chunk = self._sock.recv(4096)
                    if not chunk:
                        raise ConnectionError("connection closed by the controller")
                    self._buffer += chunk
            except (OSError, ConnectionError) as exc:
                partial = (
                    f" (received so far: {self._buffer.decode('ascii', errors='replace')!r})" if self._buffer else ""
                )
                raise DriverConnectionError(
                    f"{self.label}: {command} -> {self.host}:{self.port}: {exc}{partial}"
                ) from exc
            line, _, self._buffer = self._buffer.partition(b";")
        try:
            response = proto.parse_response(line.decode("ascii", errors="replace") + ";")
        except proto.ProtocolError as exc:
            raise DriverError(f"{self.label}: {command}: {exc}") from exc
        if response.echo.partition("(")[0].strip() != command.partition("(")[0]:
            # An answer to another command (e.g. one that timed out earlier): the stream is out of step.
            raise DriverError(f"{self.label}: sent {command} but the controller answered {response.echo!r}")
        if not response.ok:
            raise CommandRefused(
                f"{self.label}: {command} failed with ErrorID {response.error_id} "
                f"({proto.describe_error(response.error_id)})",
                response.error_id,
            )
        return response

    def _plain_reply(self, command: str, text: str) -> str:
        if "not tcp" in text.lower():
            return (
                f"{self.label}: the controller answered {command} with {text.strip()!r}: it is not in TCP/IP mode. "
                "Switch it to TCP/IP mode in DobotStudio Pro (Settings > Remote control), or send "
                "RequestControl() while the arm is disabled"
            )
        return f"{self.label}: the controller answered {command} with plain text {text.strip()!r} (no V4 answer)"

    def close(self) -> None:
        with self._lock:
            if self._sock is not None:
                self._sock.close()
                self._sock = None


def _connect(label: str, what: str, host: str, port: int, timeout: float) -> socket.socket:
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except OSError as exc:
        raise DriverConnectionError(
            f"{label}: cannot reach the Dobot {what} port at {host}:{port} ({exc}); "
            "is the controller powered, reachable and in TCP/IP mode?"
        ) from exc
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


class DobotDriver(ArmDriver):
    """One Dobot 6-axis arm streamed with ServoP."""

    def __init__(self, arm: str, params: DobotParams) -> None:
        super().__init__(arm)
        self.params = params
        self.label = f"{arm} arm (Dobot {params.host})"
        self._dashboard = DashboardClient(
            self.label, params.host, params.dashboard_port, params.connect_timeout_s, params.response_timeout_s
        )
        self._feedback_sock: socket.socket | None = None
        self._latest: tuple[float, proto.Feedback] | None = None
        self._state_lock = threading.Lock()
        self._first_feedback = threading.Event()
        self._stop_threads = threading.Event()
        self._threads: list[threading.Thread] = []
        self._error: BaseException | None = None
        self._rotation = np.zeros(3)
        # streamer state (guarded by _state_lock)
        self._streaming = False
        self._holding = False
        self._segment_start = np.zeros(3)
        self._target = np.zeros(3)
        self._target_time = 0.0
        self._command_period = 1.0 / params.servo_rate_hz
        self._last_sent = np.zeros(3)
        self._gripper_closed: bool | None = None
        self.servo_count = 0
        self.malformed_packets = 0
        self.last_malformed: str = ""

    # --- lifecycle ----------------------------------------------------------------------------

    def connect(self) -> None:
        p = self.params
        self._dashboard.connect()
        self._feedback_sock = _connect(self.label, "feedback", p.host, p.feedback_port, p.connect_timeout_s)
        self._feedback_sock.settimeout(0.2)
        self._start(self._read_feedback, "feedback")
        self._dashboard.request("ClearError()")
        self._dashboard.request("EnableRobot()")
        if not self._first_feedback.wait(p.connect_timeout_s):
            raise DriverConnectionError(
                f"{self.label}: no status packet on port {p.feedback_port} within {p.connect_timeout_s} s"
            )
        deadline = time.monotonic() + p.enable_timeout_s
        while not self._feedback().enabled:
            if time.monotonic() > deadline:
                raise DriverError(
                    f"{self.label}: not enabled {p.enable_timeout_s} s after EnableRobot (mode {self._feedback().robot_mode})"
                )
            time.sleep(proto.FEEDBACK_PERIOD_S)
        fb = self._feedback()
        self._rotation = np.asarray(p.rotation_deg if p.rotation_deg is not None else fb.rotation_deg, dtype=np.float64)
        with self._state_lock:
            self._segment_start = self._target = self._last_sent = fb.position.copy()
            self._target_time = time.monotonic()
            self._streaming = True
        self._start(self._stream, "servo")

    def close(self) -> None:
        self._stop_threads.set()
        for thread in self._threads:
            thread.join(timeout=2.0)
        self._threads.clear()
        if self.params.disable_on_close:
            with contextlib.suppress(DriverError):
                self._dashboard.request("DisableRobot()")
        self._dashboard.close()
        if self._feedback_sock is not None:
            self._feedback_sock.close()
            self._feedback_sock = None

    # --- ArmDriver ----------------------------------------------------------------------------

    def read_state(self) -> ArmMeasurement:
        self._raise_thread_error()
        with self._state_lock:
            latest = self._latest
        if latest is None:
            raise DriverConnectionError(f"{self.label}: no feedback yet")
        stamp, fb = latest
        age = time.monotonic() - stamp
        if age > self.params.feedback_timeout_s:
            skipped = (
                f"; {self.malformed_packets} malformed packets skipped, last: {self.last_malformed}"
                if self.malformed_packets
                else ""
            )
            raise DriverConnectionError(
                f"{self.label}: feedback stale ({age:.2f} s without a valid status packet{skipped})"
            )
        return ArmMeasurement(fb.position.copy(), self._openness(fb), stamp, fb.joints.copy())

    def command_cartesian(self, position: np.ndarray) -> None:
        target = self.checked_position(self.label, position)
        self._raise_thread_error()
        now = time.monotonic()
        with self._state_lock:
            if self._streaming and not self._holding:
                # Smooth the command period (EMA) so one late tick does not stretch the ramp.
                observed = min(max(now - self._target_time, 1.0 / self.params.servo_rate_hz), 0.25)
                self._command_period = 0.8 * self._command_period + 0.2 * observed
            self._segment_start = self._last_sent.copy()
            self._target = target
            self._target_time = now
            self._streaming = True
            self._holding = False

    def set_gripper(self, openness: float) -> None:
        closed = bool(gripper_closed(float(openness)))
        if closed == self._gripper_closed:
            return
        level = self.params.gripper_close_level if closed else 1 - self.params.gripper_close_level
        name = "ToolDOInstant" if self.params.gripper_io == "tool_do" else "DOInstant"
        self._dashboard.request(proto.format_command(name, self.params.gripper_index, level))
        self._gripper_closed = closed

    def hold(self) -> None:
        """Finish the ramp to the last target and stay there; the pause does not count as a
        command period, so streaming resumes with a normal ramp when commands come back."""
        with self._state_lock:
            self._segment_start = self._last_sent.copy()
            self._target_time = time.monotonic()
            self._holding = True

    def stop(self) -> None:
        with self._state_lock:
            self._streaming = False
            self._segment_start = self._target = self._last_sent.copy()
        self._dashboard.request("Stop()")

    # --- internals ----------------------------------------------------------------------------

    def _start(self, target: Any, name: str) -> None:
        thread = threading.Thread(target=target, name=f"dobot-{self.arm}-{name}", daemon=True)
        thread.start()
        self._threads.append(thread)

    def _feedback(self) -> proto.Feedback:
        with self._state_lock:
            assert self._latest is not None
            return self._latest[1]

    def _openness(self, fb: proto.Feedback) -> float:
        if self.params.gripper_io == "do":
            bit = (fb.digital_outputs >> (self.params.gripper_index - 1)) & 1
            return 0.0 if bit == self.params.gripper_close_level else 1.0
        # Tool outputs are not in the status packet: report the last commanded state.
        return 0.0 if self._gripper_closed else 1.0

    def _raise_thread_error(self) -> None:
        if self._error is not None:
            raise DriverConnectionError(f"{self.label}: {self._error}") from self._error

    def _read_feedback(self) -> None:
        assert self._feedback_sock is not None
        buffer = bytearray()
        try:
            while not self._stop_threads.is_set():
                try:
                    chunk = self._feedback_sock.recv(65536)
                except TimeoutError:
                    continue
                if not chunk:
                    raise ConnectionError(f"feedback port {self.params.feedback_port} closed by the controller")
                buffer += chunk
                packet = None
                while len(buffer) >= proto.FEEDBACK_PACKET_SIZE:
                    packet = bytes(buffer[: proto.FEEDBACK_PACKET_SIZE])
                    del buffer[: proto.FEEDBACK_PACKET_SIZE]
                if packet is not None:
                    try:
                        fb = proto.parse_feedback(packet)
                    except proto.ProtocolError as exc:
                        # One bad packet is no reason to stop: the feedback timeout decides.
                        self.malformed_packets += 1
                        self.last_malformed = str(exc)
                        continue
                    with self._state_lock:
                        self._latest = (time.monotonic(), fb)
                    self._first_feedback.set()
        except (OSError, ConnectionError) as exc:
            if not self._stop_threads.is_set():
                self._error = exc

    def _stream(self) -> None:
        period = 1.0 / self.params.servo_rate_hz
        servo_t = self.params.servo_time
        next_time = time.monotonic()
        try:
            while not self._stop_threads.is_set():
                now = time.monotonic()
                with self._state_lock:
                    streaming = self._streaming
                    alpha = min(1.0, (now - self._target_time) / self._command_period)
                    position = self._segment_start + alpha * (self._target - self._segment_start)
                if streaming:
                    self._servo(proto.servo_p(position, self._rotation, servo_t))
                    with self._state_lock:
                        self._last_sent = position
                    self.servo_count += 1
                next_time += period
                delay = next_time - time.monotonic()
                if delay > 0:
                    self._stop_threads.wait(delay)
                else:
                    next_time = time.monotonic()  # fell behind: restart the schedule, do not burst
        except DriverError as exc:
            if not self._stop_threads.is_set():
                self._error = exc

    def _servo(self, command: str) -> None:
        """One ServoP; a refusal that points at the firmware says so."""
        try:
            self._dashboard.request(command)
        except CommandRefused as exc:
            if exc.error_id == proto.ERROR_UNKNOWN_COMMAND:
                raise DriverError(f"{exc}: ServoP needs controller firmware >= 4.5.0") from exc
            if proto.ERROR_OPTIONAL_RANGE - 9 <= exc.error_id <= proto.ERROR_OPTIONAL_RANGE - 1:
                raise DriverError(
                    f"{exc}: the firmware rejects t = {self.params.servo_time:.4f} s (before 4.6.0 t must be >= 0.02 s); "
                    "check firmware_version and lower servo_rate_hz"
                ) from exc
            raise


def make_robot(config: RobotConfig) -> RobotDrivers:
    """Driver factory registered as `dobot`: one DobotDriver per arm."""
    left, right = (DobotDriver(arm.name, DobotParams.from_mapping(arm.name, arm.driver)) for arm in config.arms)
    return RobotDrivers(left, right)
