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
limit or execute anything.
"""

from __future__ import annotations

import json
import socket
import struct
from typing import Any

import numpy as np

#: Protocol version, exchanged in `hello`; both sides refuse a peer speaking another one.
PROTOCOL_VERSION = 1
MAGIC = b"IFB1"
#: Largest JSON header (bytes) and largest single array (bytes) accepted from a peer.
MAX_HEADER_BYTES = 1 << 20
MAX_ARRAY_BYTES = 1 << 28
#: dtypes that may cross the bridge (little-endian, fixed size).
ALLOWED_DTYPES = ("uint8", "bool", "int32", "int64", "float32", "float64")


class ProtocolError(RuntimeError):
    """A malformed, oversized or unexpected message; the message says what was wrong."""


class PeerClosed(ProtocolError):
    """The peer closed the connection (at a message boundary or in the middle of one)."""


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise PeerClosed(f"connection closed after {got} of {n} bytes")
        got += k
    return bytes(buf)


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


def recv(sock: socket.socket) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Receive one message: (header without its array table, {name: array})."""
    prefix = _recv_exact(sock, 8)
    if prefix[:4] != MAGIC:
        raise ProtocolError(f"bad magic {prefix[:4]!r} (expected {MAGIC!r}): not an Instant-Fold bridge peer")
    (length,) = struct.unpack(">I", prefix[4:])
    if length > MAX_HEADER_BYTES:
        raise ProtocolError(f"header of {length} bytes exceeds the limit of {MAX_HEADER_BYTES}")
    try:
        header = json.loads(_recv_exact(sock, length))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"header is not JSON: {exc}") from exc
    if not isinstance(header, dict) or not isinstance(header.get("type"), str):
        raise ProtocolError("header must be a JSON object with a string 'type'")
    specs = header.pop("arrays", [])
    if not isinstance(specs, list):
        raise ProtocolError("header 'arrays' must be a list")
    arrays: dict[str, np.ndarray] = {}
    for spec in specs:
        try:
            name, dtype, shape = str(spec["name"]), str(spec["dtype"]), tuple(int(s) for s in spec["shape"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ProtocolError(f"bad array entry {spec!r}: {exc}") from exc
        if dtype not in ALLOWED_DTYPES:
            raise ProtocolError(f"array {name!r}: dtype {dtype!r} not allowed (allowed: {ALLOWED_DTYPES})")
        if any(s < 0 for s in shape):
            raise ProtocolError(f"array {name!r}: negative dimension in {shape}")
        dt = np.dtype(dtype).newbyteorder("<") if np.dtype(dtype).itemsize > 1 else np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        if nbytes > MAX_ARRAY_BYTES:
            raise ProtocolError(f"array {name!r}: {nbytes} bytes exceeds the limit of {MAX_ARRAY_BYTES}")
        arrays[name] = np.frombuffer(_recv_exact(sock, nbytes), dtype=dt).reshape(shape).astype(dtype, copy=True)
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
