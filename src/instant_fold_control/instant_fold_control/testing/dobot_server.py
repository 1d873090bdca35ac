"""A protocol-faithful Dobot V4 controller on loopback, for tests and benchmarks.

It speaks the same wire protocol as a Dobot CR/Nova controller, as strictly as the V4 guide
describes it: ASCII commands on the dashboard port answered with `ErrorID,{values},Cmd(...);`,
with the guide's error ids (-2 alarm, -3 e-stop, -4 powered off for commands those states refuse;
-10000 unknown command, -20000 parameter count, -3000n/-5000n wrong type and -6000n out of range
of the n-th required/optional parameter), the bare `Control Mode Is Not Tcp` answer when the
controller is not in TCP/IP mode, ServoP/ServoJ only from firmware 4.5.0 and with the firmware's
range of `t`; and 1440-byte status packets pushed every 8 ms on the feedback port, carrying the
TestValue that Dobot's own clients check. The arm model is ideal: the actual tool pose is the last
ServoP target, ServoJ sets the joints (no kinematics), digital outputs follow DO/DOInstant;
SpeedFactor is stored and, as for ServoP on the real controller, does not change servo motion.

The feedback packets are written field by field with `struct.pack_into` at the offsets of the
published V4 layout, independently of the driver's numpy decoder, so a wrong offset on either
side shows up in the tests. Every command is recorded with its server-side receive time.
Ports default to 0 (ephemeral) so tests never collide with each other or with a real robot.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from instant_fold_control.drivers import dobot_protocol as proto

#: (offset, struct format) of the fields written, from the V4 real-time feedback table.
_LEN, _DO, _MODE, _TIMESTAMP, _TEST = (0, "<H"), (16, "<Q"), (24, "<Q"), (32, "<Q"), (48, "<Q")
_Q_TARGET, _Q_ACTUAL, _TOOL_ACTUAL, _TOOL_TARGET = (192, "<6d"), (432, "<6d"), (624, "<6d"), (768, "<6d")
_ENABLE, _ERROR, _COMMAND_ID = (1026, "<b"), (1029, "<b"), (1112, "<Q")


@dataclass(frozen=True)
class _Spec:
    """A command's accepted positional-argument counts, their type, and its named optional parameters."""

    arity: tuple[int, ...]
    kind: type = float
    named: tuple[str, ...] = ()


_SERVO = _Spec((6,), float, ("t", "aheadtime", "gain"))
#: Commands understood.
_SPECS: dict[str, _Spec] = {
    "PowerOn": _Spec((0,)),
    "RequestControl": _Spec((0,)),
    "EnableRobot": _Spec((0, 1, 4, 5)),
    "DisableRobot": _Spec((0,)),
    "ClearError": _Spec((0,)),
    "RobotMode": _Spec((0,)),
    "GetPose": _Spec((0, 2), int),
    "GetAngle": _Spec((0,)),
    "GetErrorID": _Spec((0,)),
    "SpeedFactor": _Spec((1,), int),
    "ServoP": _SERVO,
    "ServoJ": _SERVO,
    "DO": _Spec((2, 3), int),
    "DOInstant": _Spec((2,), int),
    "ToolDO": _Spec((2,), int),
    "ToolDOInstant": _Spec((2,), int),
    "Stop": _Spec((0,)),
    "EmergencyStop": _Spec((1,), int),
}
#: Ranges of named optional parameters other than `t` (whose range depends on the firmware).
_NAMED_RANGES = {"aheadtime": (20.0, 100.0), "gain": (200.0, 1000.0)}
#: What each refusing state still accepts (V4 guide, note under the error table).
_ALARM_ALLOWED = frozenset({"ClearError", "GetErrorID", "EmergencyStop", "RobotMode"})
_ESTOP_ALLOWED = _ALARM_ALLOWED
_POWER_OFF_ALLOWED = _ALARM_ALLOWED | {"PowerOn", "RequestControl"}


class _Refused(Exception):
    """A command answered with a non-zero ErrorID before it is executed."""

    def __init__(self, error_id: int) -> None:
        super().__init__(error_id)
        self.error_id = error_id


@dataclass
class RecordedCommand:
    time: float  # time.monotonic() at receipt
    name: str
    args: list[str]


@dataclass
class ArmModel:
    """The simulated controller state (pose in mm/deg as on the wire)."""

    pose: list[float] = field(default_factory=lambda: [300.0, 0.0, 300.0, 180.0, 0.0, 0.0])
    joints_deg: list[float] = field(default_factory=lambda: [0.0, 0.0, 90.0, 0.0, -90.0, 0.0])
    firmware: tuple[int, int, int] = (4, 6, 5)
    tcp_mode: bool = True
    powered: bool = True
    enabled: bool = False
    alarm: bool = False
    estop: bool = False
    digital_outputs: int = 0
    tool_outputs: dict[int, int] = field(default_factory=dict)
    speed_factor: int = 100
    command_id: int = 0

    @property
    def mode(self) -> int:
        if self.alarm or self.estop:
            return proto.MODE_ERROR
        if not self.powered:
            return proto.MODE_POWER_OFF
        return proto.MODE_ENABLED if self.enabled else proto.MODE_DISABLED


class LoopbackDobotServer:
    """Dashboard + feedback servers of one simulated Dobot arm on 127.0.0.1."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        dashboard_port: int = 0,
        feedback_port: int = 0,
        initial_pose: list[float] | None = None,
        feedback_period: float = proto.FEEDBACK_PERIOD_S,
        firmware: str = "4.6.5",
    ) -> None:
        self.model = ArmModel(firmware=proto.parse_firmware_version(firmware))
        if initial_pose is not None:
            self.model.pose = list(initial_pose)
        self.commands: list[RecordedCommand] = []
        self.feedback_period = feedback_period
        self._corrupt_packets = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._clients: list[socket.socket] = []
        self._started = time.monotonic()
        self._dashboard = self._listen(host, dashboard_port)
        self._feedback = self._listen(host, feedback_port)
        self.host = host
        self.dashboard_port = self._dashboard.getsockname()[1]
        self.feedback_port = self._feedback.getsockname()[1]

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self) -> LoopbackDobotServer:
        self._spawn(self._accept, self._dashboard, self._serve_dashboard)
        self._spawn(self._accept, self._feedback, self._serve_feedback)
        return self

    def stop(self) -> None:
        self._stop.set()
        for sock in (self._dashboard, self._feedback, *self._clients):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        for thread in self._threads:
            thread.join(timeout=2.0)

    def __enter__(self) -> LoopbackDobotServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def driver_params(self) -> dict[str, object]:
        """`arms.<arm>.driver` entries that point a DobotDriver at this server."""
        return {"host": self.host, "dashboard_port": self.dashboard_port, "feedback_port": self.feedback_port}

    def recorded(self, name: str) -> list[RecordedCommand]:
        with self._lock:
            return [c for c in self.commands if c.name == name]

    def corrupt_next_packets(self, count: int) -> None:
        """Send the next `count` status packets with a wrong TestValue (a glitch on the wire)."""
        with self._lock:
            self._corrupt_packets = count

    # --- protocol -----------------------------------------------------------------------------

    def handle(self, text: str) -> str:
        """Answer one command exactly as the controller would (not-TCP answers have no `;`)."""
        try:
            name, args = proto.parse_command(text)
        except proto.ProtocolError:
            name, args = "", []
        with self._lock:
            if not self.model.tcp_mode and name != "RequestControl":
                return proto.NOT_TCP_REPLY
            if not name:
                return proto.format_response(proto.ERROR_UNKNOWN_COMMAND, [], text)
            self.commands.append(RecordedCommand(time.monotonic(), name, args))
            try:
                positional, named = self._check(name, args)
                values = self._execute(name, positional, named)
            except _Refused as refused:
                return proto.format_response(refused.error_id, [], text)
            return proto.format_response(0, values, text)

    def _check(self, name: str, args: list[str]) -> tuple[list[float], dict[str, float]]:
        """Validate like the controller: command, state, parameter count, types, ranges."""
        m = self.model
        spec = _SPECS.get(name)
        if spec is None or (spec is _SERVO and m.firmware < proto.SERVO_MIN_FIRMWARE):
            raise _Refused(proto.ERROR_UNKNOWN_COMMAND)
        if m.estop and name not in _ESTOP_ALLOWED:
            raise _Refused(proto.ERROR_ESTOP)
        if m.alarm and name not in _ALARM_ALLOWED:
            raise _Refused(proto.ERROR_ALARM)
        if not m.powered and name not in _POWER_OFF_ALLOWED:
            raise _Refused(proto.ERROR_POWER_OFF)
        plain = [a for a in args if "=" not in a]
        pairs = [a.partition("=") for a in args if "=" in a]
        if len(plain) not in spec.arity or len(pairs) > len(spec.named):
            raise _Refused(proto.ERROR_PARAMETER_COUNT)
        positional = []
        for i, arg in enumerate(plain, start=1):
            try:
                positional.append(float(spec.kind(arg)))
            except ValueError:
                raise _Refused(proto.ERROR_REQUIRED_TYPE - i) from None
        named: dict[str, float] = {}
        for key, _, raw in pairs:
            key = key.strip()
            try:
                value = float(raw)
            except ValueError:
                raise _Refused(proto.ERROR_OPTIONAL_TYPE - 1) from None
            if key not in spec.named:
                raise _Refused(proto.ERROR_OPTIONAL_TYPE - 1)  # not in the guide; the closest family
            low, high = (proto.servo_time_min(m.firmware), proto.SERVO_T_MAX_S) if key == "t" else _NAMED_RANGES[key]
            if not low <= value <= high:
                raise _Refused(proto.ERROR_OPTIONAL_RANGE - 1)
            named[key] = value
        return positional, named

    def _execute(self, name: str, args: list[float], named: dict[str, float]) -> list[str]:
        m = self.model
        m.command_id += 1
        if name == "PowerOn":
            m.powered = True  # the real arm takes about 10 s before it can be enabled
        elif name == "RequestControl":
            if m.enabled:  # the guide allows the switch only while powered off or disabled
                raise _Refused(proto.ERROR_EXECUTION_FAILED)
            m.tcp_mode = True
        elif name == "EnableRobot":
            m.enabled = True
        elif name == "DisableRobot":
            m.enabled = False
        elif name == "ClearError":
            m.alarm = False
        elif name == "RobotMode":
            return [str(m.mode)]
        elif name == "GetPose":
            return [f"{v:.6f}" for v in m.pose]
        elif name == "GetAngle":
            return [f"{v:.6f}" for v in m.joints_deg]
        elif name == "GetErrorID":
            return ["[[],[],[],[],[],[],[]]"]
        elif name == "SpeedFactor":
            m.speed_factor = int(args[0])
        elif name in ("ServoP", "ServoJ"):
            if not m.enabled:
                raise _Refused(proto.ERROR_EXECUTION_FAILED)
            if name == "ServoP":
                m.pose = args
            else:
                m.joints_deg = args
            return [str(m.command_id)]
        elif name in ("DO", "DOInstant"):
            index, status = int(args[0]), int(args[1])
            if status:
                m.digital_outputs |= 1 << (index - 1)
            else:
                m.digital_outputs &= ~(1 << (index - 1))
        elif name in ("ToolDO", "ToolDOInstant"):
            m.tool_outputs[int(args[0])] = int(args[1])
        elif name == "EmergencyStop":
            pressed = int(args[0]) == 1
            m.estop = pressed
            m.alarm = m.alarm or pressed  # after release the alarm still needs ClearError
            m.enabled = m.enabled and not pressed
        return []

    def packet(self) -> bytes:
        """The current 1440-byte status packet."""
        buf = bytearray(proto.FEEDBACK_PACKET_SIZE)
        with self._lock:
            m = self.model
            struct.pack_into(_LEN[1], buf, _LEN[0], proto.FEEDBACK_PACKET_SIZE)
            struct.pack_into(_DO[1], buf, _DO[0], m.digital_outputs)
            struct.pack_into(_MODE[1], buf, _MODE[0], m.mode)
            struct.pack_into(_TIMESTAMP[1], buf, _TIMESTAMP[0], int((time.monotonic() - self._started) * 1000))
            corrupt = self._corrupt_packets > 0
            self._corrupt_packets -= int(corrupt)
            struct.pack_into(_TEST[1], buf, _TEST[0], 0 if corrupt else proto.FEEDBACK_TEST_VALUE)
            for off_fmt in (_Q_TARGET, _Q_ACTUAL):
                struct.pack_into(off_fmt[1], buf, off_fmt[0], *m.joints_deg)
            for off_fmt in (_TOOL_ACTUAL, _TOOL_TARGET):
                struct.pack_into(off_fmt[1], buf, off_fmt[0], *m.pose)
            struct.pack_into(_ENABLE[1], buf, _ENABLE[0], int(m.enabled))
            struct.pack_into(_ERROR[1], buf, _ERROR[0], int(m.alarm or m.estop))
            struct.pack_into(_COMMAND_ID[1], buf, _COMMAND_ID[0], m.command_id)
        return bytes(buf)

    # --- sockets ------------------------------------------------------------------------------

    @staticmethod
    def _listen(host: str, port: int) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(4)
        return sock

    def _spawn(self, target: Callable[..., None], *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _accept(self, listener: socket.socket, serve: Callable[[socket.socket], None]) -> None:
        while not self._stop.is_set():
            try:
                client, _ = listener.accept()
            except OSError:
                return
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._clients.append(client)
            self._spawn(serve, client)

    def _serve_dashboard(self, client: socket.socket) -> None:
        buffer = b""
        try:
            while not self._stop.is_set():
                data = client.recv(4096)
                if not data:
                    return
                buffer += data
                # Commands are not delimited on the wire: each ends with its closing parenthesis.
                while (end := _command_end(buffer)) is not None:
                    line, buffer = buffer[:end], buffer[end:]
                    client.sendall(self.handle(line.decode("ascii", errors="replace").strip()).encode("ascii"))
        except OSError:
            return

    def _serve_feedback(self, client: socket.socket) -> None:
        next_time = time.monotonic()
        try:
            while not self._stop.is_set():
                client.sendall(self.packet())
                next_time += self.feedback_period
                self._stop.wait(max(0.0, next_time - time.monotonic()))
        except OSError:
            return


def _command_end(buffer: bytes) -> int | None:
    """Index just past the first complete `Name(...)` command in the buffer (parentheses balanced)."""
    depth = 0
    for i, byte in enumerate(buffer):
        if byte == ord("("):
            depth += 1
        elif byte == ord(")"):
            depth -= 1
            if depth == 0:
                return i + 1
    return None
