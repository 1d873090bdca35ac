"""The bridge's wire format: length-prefixed JSON headers followed by raw numpy arrays.

Why a socket protocol and not ROS in the Isaac Lab process: Isaac Lab 3.0 needs Python 3.12 and
pins its own torch/warp/newton, while the workspace's ROS 2 Kilted wheels are built for the
workspace's interpreter (cp311 here) and its numpy; a small loopback protocol keeps the two
environments apart and keeps ROS (topics, services, message conversion) in one place, the
ROS-side adapter. This module is imported by both processes, so it depends on numpy and the
standard library only (no ROS, no simulator, no project imports).

Frame layout (all integers big-endian):

    b"IFB1"  uint32 header_length  header (UTF-8 JSON object)  array payloads, in header order

The header is an object with a `type` string and an `arrays` list of
`{"name", "dtype", "shape"}` entries; each array's bytes (C order, little-endian) follow the
header in that order. Only plain numeric dtypes are accepted (no object arrays, no pickle), and
sizes are bounded, so a confused or hostile peer cannot make the other side allocate without
limit or execute anything: array sizes are computed exactly (a shape of [2^32, 2^32] once wrapped
numpy's int64 product to 0 and slipped past the bound), the whole message is bounded as well as
each array, the header's JSON may nest only `MAX_HEADER_DEPTH` deep (a nesting bomb once ended the
server with a RecursionError), a receiver may give the shapes it expects per message type, checked
before any payload is read, and once a message has begun the rest must arrive within a deadline
(a peer that stalled mid-array once held its 256 MB buffer forever).
"""

from __future__ import annotations

import json
import math
import socket
import struct
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

#: Protocol version, exchanged in `hello`; both sides refuse a peer speaking another one.
PROTOCOL_VERSION = 1
MAGIC = b"IFB1"
#: Largest JSON header (bytes), largest single array and largest sum of a message's arrays (bytes)
#: accepted from a peer.
MAX_HEADER_BYTES = 1 << 20
MAX_ARRAY_BYTES = 1 << 28
MAX_MESSAGE_BYTES = 1 << 29
#: Deepest nesting of JSON objects and lists in a header (the protocol's own headers nest 3 deep).
MAX_HEADER_DEPTH = 16
#: Most dimensions of an array.
MAX_NDIM = 8
#: Seconds the rest of a message may take once its first bytes arrived (`recv`): 512 MB over
#: loopback take about a second, so only a stalled or hostile peer runs into it.
MESSAGE_DEADLINE_S = 60.0
#: dtypes that may cross the bridge (little-endian, fixed size).
ALLOWED_DTYPES = ("uint8", "bool", "int32", "int64", "float32", "float64")


class ProtocolError(RuntimeError):
    """A malformed, oversized or unexpected message; the message says what was wrong."""


class PeerClosed(ProtocolError):
    """The peer closed the connection (at a message boundary or in the middle of one)."""


#: Array shapes a receiver expects, per message type: {type: {array name: shape}}, None = any length.
Expected = Mapping[str, Mapping[str, tuple[int | None, ...]]]


def _recv_exact(sock: socket.socket, n: int, deadline: float | None = None) -> bytes:
    """`n` bytes; with a `deadline` (time.monotonic()) they must all have arrived by then."""
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ProtocolError(f"peer stalled: {got} of {n} bytes arrived within the message deadline")
            sock.settimeout(left)
        try:
            k = sock.recv_into(view[got:], n - got)
        except TimeoutError:
            if deadline is None:
                raise
            continue  # the deadline check above names the stall
        if k == 0:
            raise PeerClosed(f"connection closed after {got} of {n} bytes")
        got += k
    return bytes(buf)


def _depth(value: Any) -> int:
    """Deepest nesting of lists and dicts in a parsed JSON value (iterative: no recursion limit)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def _array_spec(spec: Any) -> tuple[str, str, tuple[int, ...]]:
    """(name, dtype, shape) of one array-table entry, checked: JSON integers only (no floats, no
    Infinity, no strings), at most `MAX_NDIM` dimensions, none negative."""
    if not isinstance(spec, dict) or not isinstance(spec.get("shape"), list):
        raise ProtocolError(f"bad array entry {str(spec)[:200]}: expected {{name, dtype, shape}}")
    name, dtype, shape = str(spec.get("name")), str(spec.get("dtype")), spec["shape"]
    if len(shape) > MAX_NDIM or not all(type(s) is int and s >= 0 for s in shape):
        raise ProtocolError(f"array {name!r}: shape must be at most {MAX_NDIM} non-negative integers, got {shape}")
    if dtype not in ALLOWED_DTYPES:
        raise ProtocolError(f"array {name!r}: dtype {dtype!r} not allowed (allowed: {ALLOWED_DTYPES})")
    return name, dtype, tuple(shape)


def _check_expected(kind: str, name: str, shape: tuple[int, ...], expected: Expected | None) -> None:
    """Refuse an array the receiver does not expect in a message of type `kind` (before its bytes are read)."""
    if expected is None or kind not in expected:
        return
    want = expected[kind].get(name)
    if want is None:
        raise ProtocolError(f"{kind}: unexpected array {name!r} (expected {sorted(expected[kind])})")
    if len(want) != len(shape) or any(w is not None and w != s for s, w in zip(shape, want, strict=True)):
        raise ProtocolError(f"{kind}: array {name!r} declared with shape {list(shape)}, expected {want}")


def encode(header: dict[str, Any], arrays: dict[str, np.ndarray] | None = None) -> list[bytes]:
    """The byte chunks of one message (`header` must be JSON-serialisable and have a `type`)."""
    if not isinstance(header.get("type"), str):
        raise ProtocolError(f"header needs a string 'type', got {header.get('type')!r}")
    specs, payloads = [], []
    for name, value in (arrays or {}).items():
        a = np.asarray(value)
        dtype = "bool" if a.dtype == np.bool_ else a.dtype.name
        if dtype not in ALLOWED_DTYPES:
            raise ProtocolError(f"array {name!r}: dtype {a.dtype} cannot cross the bridge (allowed: {ALLOWED_DTYPES})")
        a = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<") if a.dtype.itemsize > 1 else a.dtype)
        if a.nbytes > MAX_ARRAY_BYTES:
            raise ProtocolError(f"array {name!r}: {a.nbytes} bytes exceeds the limit of {MAX_ARRAY_BYTES}")
        specs.append({"name": name, "dtype": dtype, "shape": list(a.shape)})
        payloads.append(a.tobytes())
    if "arrays" in header:
        raise ProtocolError("header key 'arrays' is reserved for the array table")
    text = json.dumps({**header, "arrays": specs}, allow_nan=False).encode()
    if len(text) > MAX_HEADER_BYTES:
        raise ProtocolError(f"header of {len(text)} bytes exceeds the limit of {MAX_HEADER_BYTES}")
    return [MAGIC + struct.pack(">I", len(text)), text, *payloads]


def send(sock: socket.socket, header: dict[str, Any], arrays: dict[str, np.ndarray] | None = None) -> None:
    """Send one message."""
    sock.sendall(b"".join(encode(header, arrays)))


def recv(
    sock: socket.socket, expected: Expected | None = None, deadline_s: float = MESSAGE_DEADLINE_S
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Receive one message: (header without its array table, {name: array}).

    Waiting for a message to begin is the socket's own timeout; once its first bytes are in, the
    rest must arrive within `deadline_s`. `expected`: array shapes per message type, checked with
    the sizes before any payload is read. Every refusal is a `ProtocolError`; after one, the
    stream is out of step and the session must end. The socket's timeout is restored."""
    timeout = sock.gettimeout()
    try:
        first = _recv_exact(sock, 1)
        deadline = time.monotonic() + deadline_s
        return _recv_rest(sock, first + _recv_exact(sock, 7, deadline), expected, deadline)
    finally:
        sock.settimeout(timeout)


def _recv_rest(
    sock: socket.socket, prefix: bytes, expected: Expected | None, deadline: float
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    if prefix[:4] != MAGIC:
        raise ProtocolError(f"bad magic {prefix[:4]!r} (expected {MAGIC!r}): not an Instant-Fold bridge peer")
    (length,) = struct.unpack(">I", prefix[4:])
    if length > MAX_HEADER_BYTES:
        raise ProtocolError(f"header of {length} bytes exceeds the limit of {MAX_HEADER_BYTES}")
    try:
        # ValueError covers JSONDecodeError and integers of more digits than Python converts.
        header = json.loads(_recv_exact(sock, length, deadline))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProtocolError(f"header is not JSON: {exc}") from exc
    except RecursionError as exc:
        raise ProtocolError(f"header nests deeper than {MAX_HEADER_DEPTH} levels") from exc
    if _depth(header) > MAX_HEADER_DEPTH:
        raise ProtocolError(f"header nests deeper than {MAX_HEADER_DEPTH} levels")
    if not isinstance(header, dict) or not isinstance(header.get("type"), str):
        raise ProtocolError("header must be a JSON object with a string 'type'")
    specs = header.pop("arrays", [])
    if not isinstance(specs, list):
        raise ProtocolError("header 'arrays' must be a list")
    table = [_array_spec(spec) for spec in specs]
    total = 0
    for name, dtype, shape in table:
        _check_expected(header["type"], name, shape, expected)
        nbytes = math.prod(shape) * np.dtype(dtype).itemsize  # Python integers: exact, never wraps
        if nbytes > MAX_ARRAY_BYTES:
            raise ProtocolError(f"array {name!r}: {nbytes} bytes exceeds the limit of {MAX_ARRAY_BYTES}")
        total += nbytes
    if total > MAX_MESSAGE_BYTES:
        raise ProtocolError(f"arrays of {total} bytes in all exceed the message limit of {MAX_MESSAGE_BYTES}")
    arrays: dict[str, np.ndarray] = {}
    for name, dtype, shape in table:
        dt = np.dtype(dtype).newbyteorder("<") if np.dtype(dtype).itemsize > 1 else np.dtype(dtype)
        data = _recv_exact(sock, math.prod(shape) * dt.itemsize, deadline)
        arrays[name] = np.frombuffer(data, dtype=dt).reshape(shape).astype(dtype, copy=True)
    return header, arrays


def require(arrays: dict[str, np.ndarray], name: str, shape: tuple[int | None, ...], kind: str = "f") -> np.ndarray:
    """`arrays[name]`, checked: present, of `shape` (None = any length), dtype kind, finite if float."""
    if name not in arrays:
        raise ProtocolError(f"missing array {name!r} (got {sorted(arrays)})")
    a = arrays[name]
    if a.ndim != len(shape) or any(want is not None and got != want for got, want in zip(a.shape, shape, strict=True)):
        raise ProtocolError(f"array {name!r}: expected shape {shape}, got {a.shape}")
    if a.dtype.kind not in kind:
        raise ProtocolError(f"array {name!r}: expected dtype kind {kind!r}, got {a.dtype}")
    if a.dtype.kind == "f" and not np.isfinite(a).all():
        raise ProtocolError(f"array {name!r}: not finite")
    return a
