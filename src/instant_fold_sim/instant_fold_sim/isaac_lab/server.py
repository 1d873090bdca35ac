"""The simulator side of the bridge: one process, one loopback socket, one client, one backend.

Started by the ROS-side adapter (`client.BridgeClient`) as

    <python> -m instant_fold_sim.isaac_lab.server --backend isaac_lab|newton_stand_in [--device cpu|cuda:0]
        [--grasp fingers|commanded]

with `<python>` the Isaac Lab environment's interpreter (.venv-isaaclab, Python 3.12) for
`isaac_lab`, or the workspace's own for the stand-in. It binds 127.0.0.1 on a free port, prints
`INSTANT_FOLD_BRIDGE <port>` on stdout, serves the one client that connects, and exits when that
client says `close` or goes away. Requests and replies (`protocol` module framing):

    hello   {protocol}                           -> hello {protocol, backend, stand_in, device, compute_threads, detail}
    reset   SceneSpec (spec module)              -> state
    step    target [2,3] f64, openness [2] f64   -> state          (one control frame, bridge frame)
    observe                                      -> observation {frame} rgb [H,W,3] u8, depth [H,W] f32, mask [H,W] bool
    close                                        -> closed
    state = {frame, cloth_speed} positions [V,3] f32, grippers [2,4] f64 (measured x, y, z, openness)

A request the backend cannot honour (or with invalid content) is answered `error {message}` and
the session goes on; a malformed frame, or a `hello` in another protocol version, ends it. The server loop and the message handling are the same for every
backend, so a test against the Newton stand-in exercises exactly what the Isaac Lab process runs,
except the `Backend` implementation.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
import traceback
from typing import Any

import numpy as np

from instant_fold_core.compute_threads import pin_compute_threads

from . import protocol
from .backend import Backend, BackendError
from .grasp import DEFAULT_GRASP, GRASP_MODELS
from .protocol import PROTOCOL_VERSION, ProtocolError, require
from .spec import SceneSpec

READY_LINE = "INSTANT_FOLD_BRIDGE"
BACKENDS = ("isaac_lab", "newton_stand_in")
#: The arrays each request with fixed shapes may carry, checked before their bytes are read (a
#: `step` cannot make the server read 256 MB to find out its target is not [2, 3]); `reset`
#: carries a mesh of any size, bounded by the protocol's limits.
REQUEST_ARRAYS: protocol.Expected = {
    "hello": {},
    "step": {"target": (2, 3), "openness": (2,)},
    "observe": {},
    "close": {},
}


def make_backend(name: str, device: str, grasp: str = DEFAULT_GRASP) -> Backend:
    """The named backend; imports its simulator only now (the Isaac Lab one exists only in its venv).
    `grasp`: what the cloth a Franka holds follows (`grasp.GRASP_MODELS`); the stand-in's grippers
    are kinematic points, where the measured and the commanded pose are one."""
    if name == "isaac_lab":
        from .isaac_env import IsaacLabBackend

        return IsaacLabBackend(device=device, grasp=grasp)
    if name == "newton_stand_in":
        from .standin import NewtonStandIn

        return NewtonStandIn(device=device)
    raise ValueError(f"unknown backend {name!r}; expected one of {BACKENDS}")


class Session:
    """Answers one client's requests with one backend."""

    def __init__(self, backend: Backend, message_deadline_s: float = protocol.MESSAGE_DEADLINE_S) -> None:
        self.backend = backend
        self.message_deadline_s = message_deadline_s
        self.frame = 0
        self.has_scene = False

    def _state_reply(self, kind: str = "state") -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        s = self.backend.state()
        header = {
            "type": kind,
            "frame": self.frame,
            "cloth_speed": float(s.cloth_speed),
            "timings": self.backend.timings(),
        }
        return header, {
            "positions": np.asarray(s.positions, np.float32),
            "grippers": np.asarray(s.grippers, np.float64),
        }

    def handle(
        self, header: dict[str, Any], arrays: dict[str, np.ndarray]
    ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        kind = header["type"]
        if kind == "hello":
            if header.get("protocol") != PROTOCOL_VERSION:
                raise ProtocolError(f"client speaks protocol {header.get('protocol')}, this server {PROTOCOL_VERSION}")
            return {
                "type": "hello",
                "protocol": PROTOCOL_VERSION,
                "backend": self.backend.name,
                "stand_in": self.backend.stand_in,
                "device": self.backend.device,
                # what the process computes with (`main` fixes it before the backend loads)
                "compute_threads": os.environ.get("OMP_NUM_THREADS", ""),
                "detail": self.backend.detail(),
            }, {}
        if kind == "reset":
            spec = SceneSpec.from_message(header, arrays)
            t0 = time.perf_counter()
            self.backend.reset(spec)
            self.frame, self.has_scene = 0, True
            reply, out = self._state_reply()
            reply["build_s"] = time.perf_counter() - t0
            return reply, out
        if not self.has_scene and kind in ("step", "observe"):
            raise BackendError(f"{kind}: no scene yet (send reset first)")
        if kind == "step":
            target = require(arrays, "target", (2, 3)).astype(np.float64)
            openness = require(arrays, "openness", (2,)).astype(np.float64)
            t0 = time.perf_counter()
            self.backend.step(target, openness)
            self.frame += 1
            reply, out = self._state_reply()
            reply["step_s"] = time.perf_counter() - t0
            return reply, out
        if kind == "observe":
            t0 = time.perf_counter()
            rgb, depth, mask = self.backend.observe()
            return {"type": "observation", "frame": self.frame, "render_s": time.perf_counter() - t0}, {
                "rgb": np.asarray(rgb, np.uint8),
                "depth": np.asarray(depth, np.float32),
                "mask": np.asarray(mask, bool),
            }
        raise ProtocolError(f"unknown request type {kind!r}")

    def serve(self, conn: socket.socket) -> None:
        """Answer requests until `close` or the client goes away. A malformed frame (arrays of
        other shapes than `REQUEST_ARRAYS` included, refused before their bytes are read) or a
        client that stalls in the middle of a message ends the session with one line (the stream
        cannot be trusted any more); a request that cannot be honoured, or whose content is
        invalid, is answered `error` and the session goes on, except a `hello` in another
        protocol version."""
        try:
            self._serve(conn)
        except protocol.PeerClosed:
            return
        except (ProtocolError, OSError) as exc:
            print(f"server: ending the session: {exc}", file=sys.stderr)

    def _serve(self, conn: socket.socket) -> None:
        while True:
            header, arrays = protocol.recv(conn, REQUEST_ARRAYS, self.message_deadline_s)
            if header["type"] == "close":
                protocol.send(conn, {"type": "closed"})
                return
            try:
                reply, out = self.handle(header, arrays)
            except Exception as exc:  # any simulator failure goes back to the caller, named
                if not isinstance(exc, (ProtocolError, BackendError)):
                    traceback.print_exc(file=sys.stderr)
                protocol.send(conn, {"type": "error", "message": f"{type(exc).__name__}: {exc}"})
                if header["type"] == "hello":
                    return
                continue
            protocol.send(conn, reply, out)


_announce_fd: int | None = None


def keep_stdout_for_announcement() -> None:
    """Point fd 1 at stderr and keep the real stdout for the one READY line: simulators print
    on stdout (Warp's kernel cache lines), and nobody reads the pipe after the port is known,
    so a chatty backend would otherwise fill it and block."""
    global _announce_fd
    if _announce_fd is None:
        sys.stdout.flush()
        _announce_fd = os.dup(1)
        os.dup2(2, 1)


def announce(line: str) -> None:
    """Write the READY line to the real stdout (see `keep_stdout_for_announcement`) and close it."""
    global _announce_fd
    if _announce_fd is None:
        print(line, flush=True)
        return
    os.write(_announce_fd, (line + "\n").encode())
    os.close(_announce_fd)
    _announce_fd = None


def serve(backend: Backend, host: str = "127.0.0.1", port: int = 0, accept_timeout_s: float = 120.0) -> None:
    """Bind, announce the port on stdout, serve one client, close."""
    if host not in ("127.0.0.1", "localhost", "::1"):
        raise ValueError(f"the bridge listens on loopback only, not {host!r}")
    with socket.create_server((host, port)) as listener:
        listener.settimeout(accept_timeout_s)
        announce(f"{READY_LINE} {listener.getsockname()[1]}")
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            print(f"server: no client connected within {accept_timeout_s:g} s", file=sys.stderr)
            return
    with conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.settimeout(None)
        try:
            Session(backend).serve(conn)
        finally:
            backend.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=BACKENDS, required=True)
    parser.add_argument("--device", default="cpu", help="cpu | cuda:0 (Warp/torch device of the simulator)")
    parser.add_argument(
        "--grasp", choices=GRASP_MODELS, default=DEFAULT_GRASP, help="what held cloth follows (isaac_lab)"
    )
    parser.add_argument("--port", type=int, default=0, help="0: any free port (announced on stdout)")
    parser.add_argument("--accept-timeout", type=float, default=120.0)
    args = parser.parse_args(argv)
    keep_stdout_for_announcement()
    # Before the backend loads torch and Warp: the simulation must not depend on the thread count
    # of the caller's environment (the determinism contract of instant_fold_core.compute_threads).
    pin_compute_threads()
    try:
        backend = make_backend(args.backend, args.device, args.grasp)
    except ImportError as exc:
        print(f"server: backend {args.backend} cannot be loaded in {sys.executable}: {exc}", file=sys.stderr)
        return 2
    serve(backend, port=args.port, accept_timeout_s=args.accept_timeout)
    # The session is over and the backend released: end now. Isaac Lab's interpreter teardown
    # (its simulation singletons, USD, Warp) took longer on a loaded CPU than the sim node may
    # wait for it while stopping (client.CLOSE_BUDGET_S).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
