"""Faults: frames that slipped past the simulator bridge's bounds, stalled it or ended its server.

Before (issue "Faults and bad input, round two", items 10 and 16): an array declared [2^32, 2^32]
wrapped numpy's int64 size product to 0, passed the size bound and ended the server with a
reshape traceback; a client that stopped in the middle of an array held its buffer (up to 256 MB)
and the server forever; a header nested 100,000 deep ended the server with a RecursionError
traceback; and a `step` whose target was declared 4096 x 4096 was read in full (128 MB) before its
shape was looked at. Now each is refused with one line, before any payload is read where the
header already says what is wrong, and the server's session ends cleanly.
"""

from __future__ import annotations

import json
import socket
import struct
import threading

import numpy as np
import pytest

from instant_fold_sim.isaac_lab import protocol
from instant_fold_sim.isaac_lab.backend import Backend, BackendState
from instant_fold_sim.isaac_lab.protocol import ProtocolError
from instant_fold_sim.isaac_lab.server import REQUEST_ARRAYS, Session
from instant_fold_sim.isaac_lab.spec import SceneSpec

#: Longest a test waits on a socket: a hang guard, long past every deadline the tests set.
GUARD_S = 20.0


def _frame(header: bytes | dict, payload: bytes = b"") -> bytes:
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    return protocol.MAGIC + struct.pack(">I", len(text)) + text + payload


def _step(target_shape: list[int]) -> dict:
    return {
        "type": "step",
        "arrays": [
            {"name": "target", "dtype": "float64", "shape": target_shape},
            {"name": "openness", "dtype": "float64", "shape": [2]},
        ],
    }


def _refusal(data: bytes, **recv_args) -> str:
    """What `recv` refuses `data` with, the sender keeping its end open (a peer that sends no more)."""
    a, b = socket.socketpair()
    with a, b:
        b.settimeout(GUARD_S)
        a.sendall(data)
        with pytest.raises(ProtocolError) as info:
            protocol.recv(b, **recv_args)
        assert b.gettimeout() == GUARD_S  # restored for the next message
    return str(info.value)


@pytest.mark.parametrize(
    ("shape", "reason"),
    [
        ([2**32, 2**32], "exceeds the limit"),  # int64 product wrapped to 0 before
        ([2**62, 4], "exceeds the limit"),
        ([3, -1], "non-negative integers"),
        ([1.5], "non-negative integers"),
        ([True], "non-negative integers"),
        (["7"], "non-negative integers"),
        ([1] * 9, "at most 8"),
    ],
)
def test_declared_shapes_are_checked_exactly(shape: list, reason: str) -> None:
    header = {"type": "x", "arrays": [{"name": "a", "dtype": "float64", "shape": shape}]}
    assert reason in _refusal(_frame(header))


def test_infinite_or_endless_numbers_in_a_header_are_refused() -> None:
    infinite = b'{"type": "x", "arrays": [{"name": "a", "dtype": "uint8", "shape": [Infinity]}]}'
    assert "non-negative integers" in _refusal(_frame(infinite))
    digits = b'{"type": "x", "n": ' + b"9" * 10_000 + b"}"  # more digits than Python converts
    assert "not JSON" in _refusal(_frame(digits))


def test_the_arrays_of_one_message_are_bounded_together() -> None:
    big = {"name": "a", "dtype": "uint8", "shape": [protocol.MAX_ARRAY_BYTES]}
    header = {"type": "x", "arrays": [big, {**big, "name": "b"}, {**big, "name": "c"}]}
    assert "message limit" in _refusal(_frame(header))


@pytest.mark.parametrize("depth", [protocol.MAX_HEADER_DEPTH + 1, 100_000])
def test_nesting_bombs_are_refused(depth: int) -> None:
    bomb = b'{"type": "x", "v": ' + b"[" * depth + b"]" * depth + b"}"
    assert "nests deeper" in _refusal(_frame(bomb))


def test_a_peer_that_stalls_mid_array_runs_into_the_deadline() -> None:
    chunks = protocol.encode({"type": "x"}, {"a": np.zeros(1 << 11)})  # 16 kB of float64, half of it sent
    data = b"".join(chunks)
    assert "stalled" in _refusal(data[: len(data) // 2], deadline_s=0.5)


def test_a_step_of_the_wrong_shape_is_refused_before_its_payload_is_read() -> None:
    """The header alone arrives (the 128 MB it announces never do): refused at once."""
    reason = _refusal(_frame(_step([4096, 4096])), expected=REQUEST_ARRAYS)
    assert "declared with shape [4096, 4096], expected (2, 3)" in reason
    assert "unexpected array 'x'" in _refusal(
        _frame({"type": "observe", "arrays": [{"name": "x", "dtype": "uint8", "shape": [1]}]}),
        expected=REQUEST_ARRAYS,
    )


def test_well_formed_requests_still_pass_the_checks() -> None:
    a, b = socket.socketpair()
    with a, b:
        protocol.send(a, {"type": "step"}, {"target": np.ones((2, 3)), "openness": np.ones(2)})
        header, arrays = protocol.recv(b, REQUEST_ARRAYS)
    assert header["type"] == "step" and arrays["target"].shape == (2, 3) and arrays["openness"].shape == (2,)


class _StillBackend(Backend):
    """A backend with nothing to simulate: the session's handling is all the tests exercise."""

    name = "still"

    def reset(self, spec: SceneSpec) -> None:
        pass

    def step(self, target: np.ndarray, openness: np.ndarray) -> None:
        pass

    def state(self) -> BackendState:
        return BackendState(np.zeros((4, 3), np.float32), np.zeros((2, 4)), 0.0)

    def observe(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return np.zeros((2, 2, 3), np.uint8), np.zeros((2, 2), np.float32), np.zeros((2, 2), bool)


@pytest.mark.parametrize(
    "hostile",
    [
        _frame(b'{"type": "hello", "v": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
        _frame({"type": "step", "arrays": [{"name": "target", "dtype": "uint8", "shape": [2**32, 2**32]}]}),
        _frame(_step([4096, 4096])),
        b"".join(protocol.encode({"type": "step"}, {"target": np.ones((2, 3)), "openness": np.ones(2)}))[:-8],
    ],
    ids=["nesting_bomb", "wrapping_shape", "wrong_step_shape", "stalled_mid_array"],
)
def test_the_server_ends_a_hostile_session_in_one_line(hostile: bytes, capsys: pytest.CaptureFixture) -> None:
    """Over a socket, as the server runs it: the session ends (no traceback, the server's
    process would go on to close its backend and exit 0), the hostile client still connected."""
    server_end, client = socket.socketpair()
    errors: list[BaseException] = []

    def serve() -> None:
        try:
            Session(_StillBackend(), message_deadline_s=0.5).serve(server_end)
        except BaseException as exc:
            errors.append(exc)

    with server_end, client:
        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        client.sendall(hostile)
        thread.join(GUARD_S)
        assert not thread.is_alive(), "the session must end, not wait for the rest of the message"
    assert errors == []
    err = capsys.readouterr().err
    assert err.count("server: ending the session:") == 1 and "Traceback" not in err, err
