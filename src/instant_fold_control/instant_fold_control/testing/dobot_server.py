"""A protocol-faithful Dobot V4 controller on loopback, for tests and benchmarks.

It speaks the same wire protocol as a Dobot CR/Nova controller: ASCII commands on the
dashboard port answered with `ErrorID,{values},Cmd(...);`, and 1440-byte status packets pushed
every 8 ms on the feedback port. The arm model is ideal: the actual tool pose is the last
ServoP target, the joints are not modelled (fixed), digital outputs follow DO/DOInstant.

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
_LEN, _DO, _MODE, _TIMESTAMP = (0, "<H"), (16, "<Q"), (24, "<Q"), (32, "<Q")
_Q_TARGET, _Q_ACTUAL, _TOOL_ACTUAL, _TOOL_TARGET = (192, "<6d"), (432, "<6d"), (624, "<6d"), (768, "<6d")
_ENABLE, _ERROR, _COMMAND_ID = (1026, "<b"), (1029, "<b"), (1112, "<Q")

#: Commands understood -> accepted argument counts.
_ARITY: dict[str, tuple[int, ...]] = {
    "EnableRobot": (0, 1, 4, 5),
    "DisableRobot": (0,),
    "ClearError": (0,),
    "RobotMode": (0,),
    "GetPose": (0, 2),
    "GetAngle": (0,),
    "GetErrorID": (0,),
    "SpeedFactor": (1,),
    "ServoP": (6, 7, 8, 9),
    "DO": (2, 3),
    "DOInstant": (2,),
    "ToolDO": (2,),
    "ToolDOInstant": (2,),
    "Stop": (0,),
    "EmergencyStop": (1,),
}


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
    enabled: bool = False
    error: bool = False
    estop: bool = False
    digital_outputs: int = 0
    tool_outputs: dict[int, int] = field(default_factory=dict)
    speed_factor: int = 100
    command_id: int = 0

    @property
    def mode(self) -> int:
        if self.error or self.estop:
            return proto.MODE_ERROR
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
    ) -> None:
        self.model = ArmModel() if initial_pose is None else ArmModel(pose=list(initial_pose))
        self.commands: list[RecordedCommand] = []
        self.feedback_period = feedback_period
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

    # --- protocol -----------------------------------------------------------------------------

    def handle(self, text: str) -> str:
        """Answer one command line exactly as the controller would."""
        try:
            name, args = proto.parse_command(text)
        except proto.ProtocolError:
            return proto.format_response(proto.ERROR_UNKNOWN_COMMAND, [], text)
        with self._lock:
            self.commands.append(RecordedCommand(time.monotonic(), name, args))
            if name not in _ARITY:
                return proto.format_response(proto.ERROR_UNKNOWN_COMMAND, [], text)
            if len(args) not in _ARITY[name]:
                return proto.format_response(proto.ERROR_PARAMETER_COUNT, [], text)
            try:
                error, values = self._execute(name, args)
            except ValueError:
                error, values = proto.ERROR_PARAMETER_TYPE, []
            return proto.format_response(error, values, text)

    def _execute(self, name: str, args: list[str]) -> tuple[int, list[str]]:
        m = self.model
        m.command_id += 1
        if name == "EnableRobot":
            if m.estop:
                return proto.ERROR_EXECUTION_FAILED, []
            m.enabled = True
        elif name == "DisableRobot":
            m.enabled = False
        elif name == "ClearError":
            m.error = False
        elif name == "RobotMode":
            return 0, [str(m.mode)]
        elif name == "GetPose":
            return 0, [f"{v:.6f}" for v in m.pose]
        elif name == "GetAngle":
            return 0, [f"{v:.6f}" for v in m.joints_deg]
        elif name == "GetErrorID":
            return 0, ["[[],[],[],[],[],[],[]]"]
        elif name == "SpeedFactor":
            m.speed_factor = int(args[0])
        elif name == "ServoP":
            pose = [float(a) for a in args[:6]]
            for extra in args[6:]:
                key, _, value = extra.partition("=")
                if key.strip() not in ("t", "aheadtime", "gain"):
                    raise ValueError(extra)
                float(value)
            if not m.enabled or m.mode == proto.MODE_ERROR:
                return proto.ERROR_EXECUTION_FAILED, []
            m.pose = pose
        elif name in ("DO", "DOInstant"):
            index, status = int(args[0]), int(args[1])
            if status:
                m.digital_outputs |= 1 << (index - 1)
            else:
                m.digital_outputs &= ~(1 << (index - 1))
        elif name in ("ToolDO", "ToolDOInstant"):
            m.tool_outputs[int(args[0])] = int(args[1])
        elif name == "EmergencyStop":
            m.estop = args[0] == "1"
            m.enabled = m.enabled and not m.estop
        return 0, []

    def packet(self) -> bytes:
        """The current 1440-byte status packet."""
        buf = bytearray(proto.FEEDBACK_PACKET_SIZE)
        with self._lock:
            m = self.model
            struct.pack_into(_LEN[1], buf, _LEN[0], proto.FEEDBACK_PACKET_SIZE)
            struct.pack_into(_DO[1], buf, _DO[0], m.digital_outputs)
            struct.pack_into(_MODE[1], buf, _MODE[0], m.mode)
            struct.pack_into(_TIMESTAMP[1], buf, _TIMESTAMP[0], int((time.monotonic() - self._started) * 1000))
            for off_fmt in (_Q_TARGET, _Q_ACTUAL):
                struct.pack_into(off_fmt[1], buf, off_fmt[0], *m.joints_deg)
            for off_fmt in (_TOOL_ACTUAL, _TOOL_TARGET):
                struct.pack_into(off_fmt[1], buf, off_fmt[0], *m.pose)
            struct.pack_into(_ENABLE[1], buf, _ENABLE[0], int(m.enabled))
            struct.pack_into(_ERROR[1], buf, _ERROR[0], int(m.error or m.estop))
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
