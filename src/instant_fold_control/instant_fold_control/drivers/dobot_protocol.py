"""Dobot TCP/IP remote-control protocol V4 (6-axis CR/Nova controllers, firmware 4.x): pure codec.

Written from Dobot's public "TCP/IP Remote Control Interface Guide" V4 and its Python V4 SDK
(Dobot-Arm/TCP-IP-Protocol-6AXis-V4, Dobot-Arm/TCP-IP-Python-V4); no code was taken from them.

- Port 29999 takes every command (settings, I/O and motion are merged in V4) as ASCII text
  `Name(arg1,arg2,...)` and answers each with `ErrorID,{values},Name(arg1,...);` where ErrorID 0
  means success, the braces hold the return values and the command is echoed.
- Port 30004 pushes one 1440-byte little-endian status packet every 8 ms. The offsets below are
  the fields this package uses (the rest of the packet is reserved/other data). A packet is only
  trusted when its length field is 1440 and its TestValue is 0x0123456789ABCDEF (Dobot's own
  clients drop packets that fail either check).
- A controller that is not in TCP/IP mode answers every command with the bare text
  `Control Mode Is Not Tcp` (no ErrorID, no `;`); `is_response_prefix` tells such plain text
  from the start of a V4 answer.
- ServoP/ServoJ exist from firmware 4.5.0; their point time `t` must be in [0.02, 3600] s before
  4.6.0 and in [0.004, 3600] s from 4.6.0 (guide change log, V4.6.0 of 2024-11-25).
- Units on the wire: millimetres and degrees (the controller works in metres).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from instant_fold_core.errors import InvalidInputError

DASHBOARD_PORT = 29999
FEEDBACK_PORT = 30004
FEEDBACK_PACKET_SIZE = 1440
FEEDBACK_PERIOD_S = 0.008

#: Error ids of the V4 guide's error table (0 = success).
ERROR_EXECUTION_FAILED = -1
ERROR_ALARM = -2
ERROR_ESTOP = -3
ERROR_POWER_OFF = -4
ERROR_UNKNOWN_COMMAND = -10000
ERROR_PARAMETER_COUNT = -20000
#: Families: base - n = the n-th (1-based) parameter; named parameters always use n = 1.
ERROR_REQUIRED_TYPE = -30000
ERROR_REQUIRED_RANGE = -40000
ERROR_OPTIONAL_TYPE = -50000
ERROR_OPTIONAL_RANGE = -60000

_ERROR_TEXT = {
    ERROR_EXECUTION_FAILED: "execution failed",
    ERROR_ALARM: "the controller is in an alarm (error) state: clear the alarm (ClearError) first",
    ERROR_ESTOP: "the emergency stop is pressed: release it, then clear the alarm",
    ERROR_POWER_OFF: "the arm is powered off: power it on (PowerOn or DobotStudio Pro)",
    -5: "a script is running: stop it",
    -6: "MoveJog axis and coordinate type do not match",
    -7: "a script is paused: stop it",
    -8: "the controller's licence has expired",
    ERROR_UNKNOWN_COMMAND: "unknown command (not supported by this firmware?)",
    ERROR_PARAMETER_COUNT: "wrong number of parameters",
}
_ERROR_FAMILIES = (
    (ERROR_REQUIRED_TYPE, "wrong type of required parameter"),
    (ERROR_REQUIRED_RANGE, "required parameter out of range"),
    (ERROR_OPTIONAL_TYPE, "wrong type of optional parameter"),
    (ERROR_OPTIONAL_RANGE, "optional parameter out of range"),
)

#: RobotMode values (dashboard `RobotMode()` and feedback byte 24).
MODE_POWER_OFF = 3
MODE_DISABLED = 4
MODE_ENABLED = 5
MODE_RUNNING = 7
MODE_ERROR = 9

#: The bare answer of a controller that is not in TCP/IP mode (SDK demo and README).
NOT_TCP_REPLY = "Control Mode Is Not Tcp"
#: TestValue of every valid status packet.
FEEDBACK_TEST_VALUE = 0x0123456789ABCDEF

#: Firmware that introduced ServoP/ServoJ, and the one that widened their `t` range.
SERVO_MIN_FIRMWARE = (4, 5, 0)
SERVO_FAST_FIRMWARE = (4, 6, 0)
SERVO_T_MAX_S = 3600.0

#: Byte offsets of the feedback fields used (name -> (offset, numpy dtype, count)).
FEEDBACK_FIELDS: dict[str, tuple[int, str, int]] = {
    "len": (0, "<u2", 1),
    "digital_inputs": (8, "<u8", 1),
    "digital_outputs": (16, "<u8", 1),
    "robot_mode": (24, "<u8", 1),
    "timestamp_ms": (32, "<u8", 1),
    "test_value": (48, "<u8", 1),
    "q_target": (192, "<f8", 6),
    "q_actual": (432, "<f8", 6),
    "tool_vector_actual": (624, "<f8", 6),
    "tool_vector_target": (768, "<f8", 6),
    "enable_status": (1026, "i1", 1),
    "error_status": (1029, "i1", 1),
    "current_command_id": (1112, "<u8", 1),
}

FEEDBACK_DTYPE = np.dtype(
    {
        "names": list(FEEDBACK_FIELDS),
        "formats": [(dt, (n,)) if n > 1 else dt for _, dt, n in FEEDBACK_FIELDS.values()],
        "offsets": [off for off, _, _ in FEEDBACK_FIELDS.values()],
        "itemsize": FEEDBACK_PACKET_SIZE,
    }
)

_RESPONSE = re.compile(r"^\s*(-?\d+)\s*,\s*\{([^}]*)\}\s*,\s*(.*?)\s*;?\s*$", re.DOTALL)
_COMMAND = re.compile(r"^\s*([A-Za-z][A-Za-z0-9]*)\s*\((.*)\)\s*$", re.DOTALL)


def describe_error(error_id: int) -> str:
    """The V4 guide's meaning of an ErrorID (families -3000n..-6000n name the parameter)."""
    if error_id in _ERROR_TEXT:
        return _ERROR_TEXT[error_id]
    for base, text in _ERROR_FAMILIES:
        if base - 9 <= error_id <= base - 1:
            return f"{text} #{base - error_id}"
    return "error not listed in the V4 guide"


def parse_firmware_version(text: str) -> tuple[int, int, int]:
    """`"4.5.2"` or `"V4.6.5.0"` -> (4, 5, 2) / (4, 6, 5): the first three numbers."""
    numbers = re.findall(r"\d+", str(text))
    if len(numbers) < 2:
        raise ValueError(f"not a firmware version: {text!r} (expected e.g. '4.5.2')")
    major, minor, patch = (int(n) for n in [*numbers, "0"][:3])
    return major, minor, patch


def servo_time_min(firmware: tuple[int, int, int] | None) -> float:
    """Smallest ServoP/ServoJ `t` (s) a firmware accepts; unknown firmware gets the older, stricter bound."""
    return 0.004 if firmware is not None and firmware >= SERVO_FAST_FIRMWARE else 0.02


def is_response_prefix(text: str) -> bool:
    """Could `text` (received so far, no `;` yet) still become `ErrorID,{...},Cmd(...);`?"""
    return re.match(r"^\s*(-?\d*|-?\d+\s*,.*)$", text, re.DOTALL) is not None


class ProtocolError(InvalidInputError):
    """A malformed command, response or feedback packet."""


@dataclass(frozen=True)
class Response:
    """A parsed dashboard answer."""

    error_id: int
    values: tuple[str, ...]
    echo: str

    @property
    def ok(self) -> bool:
        return self.error_id == 0


@dataclass(frozen=True)
class Feedback:
    """The fields of one status packet that the driver uses (SI units: m, rad)."""

    robot_mode: int
    enabled: bool
    error: bool
    digital_outputs: int
    timestamp_ms: int
    joints: np.ndarray  # [6] rad
    position: np.ndarray  # [3] m (tool vector actual)
    rotation_deg: np.ndarray  # [3] rx, ry, rz (deg)


def format_command(name: str, *args: float | int | str) -> str:
    """`Name(a,b,...)` with floats written in fixed notation (the controller rejects exponents)."""
    parts = []
    for a in args:
        if isinstance(a, (bool, int)):
            parts.append(str(int(a)))
        elif isinstance(a, float):
            if not np.isfinite(a):
                raise ProtocolError(f"{name}: refusing to send non-finite argument {a}")
            parts.append(f"{a:.6f}")
        else:
            parts.append(str(a))
    return f"{name}({','.join(parts)})"


def servo_p(position_m: np.ndarray, rotation_deg: np.ndarray, t: float) -> str:
    """ServoP for a Cartesian target (m -> mm), fixed tool rotation, point running time t (s)."""
    x, y, z = (float(v) * 1000.0 for v in position_m)
    rx, ry, rz = (float(v) for v in rotation_deg)
    return format_command("ServoP", x, y, z, rx, ry, rz, f"t={t:.4f}")


def parse_response(text: str) -> Response:
    """Parse `ErrorID,{v1,v2,...},Cmd(...);`."""
    m = _RESPONSE.match(text)
    if not m:
        raise ProtocolError(f"malformed Dobot response {text!r} (expected 'ErrorID,{{...}},Cmd(...);')")
    inner = m.group(2).strip()
    values = tuple(v.strip() for v in inner.split(",")) if inner else ()
    return Response(int(m.group(1)), values, m.group(3))


def parse_command(text: str) -> tuple[str, list[str]]:
    """Split `Name(a,b,key=v)` into the name and its raw argument strings (server side)."""
    m = _COMMAND.match(text)
    if not m:
        raise ProtocolError(f"malformed Dobot command {text!r}")
    inner = m.group(2).strip()
    args = [a.strip() for a in _split_top_level(inner)] if inner else []
    return m.group(1), args


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside braces (pose={x,y,...} arguments)."""
    out: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return out


def format_response(error_id: int, values: list[str] | tuple[str, ...], echo: str) -> str:
    return f"{error_id},{{{','.join(values)}}},{echo};"


def parse_feedback(packet: bytes) -> Feedback:
    """Decode one 1440-byte status packet."""
    if len(packet) != FEEDBACK_PACKET_SIZE:
        raise ProtocolError(f"feedback packet: expected {FEEDBACK_PACKET_SIZE} bytes, got {len(packet)}")
    rec = np.frombuffer(packet, dtype=FEEDBACK_DTYPE, count=1)[0]
    if int(rec["len"]) != FEEDBACK_PACKET_SIZE:
        raise ProtocolError(f"feedback packet: length field is {int(rec['len'])}, expected {FEEDBACK_PACKET_SIZE}")
    if int(rec["test_value"]) != FEEDBACK_TEST_VALUE:
        raise ProtocolError(
            f"feedback packet: TestValue is {int(rec['test_value']):#x}, expected {FEEDBACK_TEST_VALUE:#x}"
        )
    tool = np.asarray(rec["tool_vector_actual"], dtype=np.float64)
    return Feedback(
        robot_mode=int(rec["robot_mode"]),
        enabled=bool(rec["enable_status"]),
        error=bool(rec["error_status"]),
        digital_outputs=int(rec["digital_outputs"]),
        timestamp_ms=int(rec["timestamp_ms"]),
        joints=np.deg2rad(np.asarray(rec["q_actual"], dtype=np.float64)),
        position=tool[:3] / 1000.0,
        rotation_deg=tool[3:].copy(),
    )
