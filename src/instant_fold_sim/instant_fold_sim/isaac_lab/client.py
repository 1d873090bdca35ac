"""The ROS-side end of the bridge: start the simulator process, talk to it, look like a ClothScene.

`BridgeClient` starts `server.py` under the right interpreter (the Isaac Lab environment's
Python 3.12 for `isaac_lab`, this interpreter for the Newton stand-in), connects over loopback
and exchanges `protocol` messages. `RemoteScene` gives `SimWorld` the part of `ClothScene`'s
interface it and the rollout bookkeeping use (positions, grippers, command_gripper, step_frame,
cloth_speed), in simulation-space metres, so the sim node, the evaluator's same-init score, the
oracle bank's records and the episode recording run unchanged on top of another simulator. No
ROS imports here (the sim node is the only ROS code of the backend).
"""

from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from instant_fold_control import transforms
from instant_fold_core import errors
from instant_fold_core.errors import ExternalError

from . import protocol
from .grasp import DEFAULT_GRASP, GRASP_MODELS
from .protocol import PROTOCOL_VERSION, ProtocolError, require
from .server import BACKENDS, READY_LINE
from .spec import SceneSpec

if TYPE_CHECKING:
    from ..rollout import GenerationConfig, StartState

#: Folders holding the `instant_fold_sim` package (src/instant_fold_sim), the plain-numpy
#: `instant_fold_control.transforms` its scene geometry uses and `instant_fold_core` (the
#: `errors` root those transforms' errors derive from, the gripper rule of `contracts`, numpy only): the only paths the Isaac Lab process gets on
#: PYTHONPATH (symlink installs resolve to the sources, plain installs to their site-packages
#: folders: package-relative import roots, not a look-up of the repository).
PACKAGE_ROOT = Path(__file__).resolve().parents[2]
CONTROL_ROOT = Path(transforms.__file__).resolve().parents[1]
CORE_ROOT = Path(errors.__file__).resolve().parents[1]
ISAAC_PROCESS_PATHS = tuple(dict.fromkeys(map(str, (PACKAGE_ROOT, CONTROL_ROOT, CORE_ROOT))))
ISAACLAB_VENV_NAME = ".venv-isaaclab"
#: How long `close` may take in all (s): inside the process runner's SIGINT grace (10 s), so a
#: sim node stopped with Ctrl-C has let its simulator go before the runner kills it (it waited up
#: to 35 s, and the runner's SIGKILL at 15 s made the graph exit -9 in 1 of 3 runs).
CLOSE_BUDGET_S = 6.0


class BridgeError(ExternalError):
    """The simulator process could not be started or reached, or refused a request."""


def find_isaaclab_python(explicit: str = "") -> Path:
    """The Isaac Lab environment's interpreter: `explicit`, else $ISAACLAB_PYTHON, else
    `.venv-isaaclab/bin/python` in the working directory or the nearest folder above it (the
    checkout that scripts/bootstrap_isaaclab.sh set up; not looked up from this file's location,
    which a plain install moves out of the checkout)."""
    candidate = explicit or os.environ.get("ISAACLAB_PYTHON", "")
    if candidate:
        path = Path(candidate)
        if not path.is_file():
            raise BridgeError(f"isaac_lab: interpreter {path} does not exist")
        return path
    for folder in [Path.cwd(), *Path.cwd().parents]:
        path = folder / ISAACLAB_VENV_NAME / "bin" / "python"
        if path.is_file():
            return path
    raise BridgeError(
        f"isaac_lab: no {ISAACLAB_VENV_NAME} found in or above {Path.cwd()}; "
        "run scripts/bootstrap_isaaclab.sh (or set ISAACLAB_PYTHON / the node's isaaclab_python parameter)"
    )


def server_environment(python: Path, backend: str) -> dict[str, str]:
    """The server's environment. The stand-in runs on this interpreter with the workspace's
    paths (package first). The Isaac Lab process gets PYTHONPATH = the package only (the
    workspace's ROS/colcon paths name another interpreter's site-packages) and the local asset
    root made by the bootstrap (no asset server at run time)."""
    env = dict(os.environ)
    env.pop("PYTHONHOME", None)
    if backend != "isaac_lab":
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PACKAGE_ROOT), env.get("PYTHONPATH", "")) if p)
    else:
        env["PYTHONPATH"] = os.pathsep.join(ISAAC_PROCESS_PATHS)
        env.setdefault("ISAACSIM_ASSET_ROOT", str(python.parent.parent / "assets"))
        env.setdefault("OMNI_KIT_ACCEPT_EULA", "YES")
    return env


class BridgeClient:
    """One simulator process and its socket."""

    def __init__(
        self,
        backend: str,
        device: str = "cpu",
        python: str = "",
        start_timeout_s: float = 600.0,
        request_timeout_s: float = 600.0,
        grasp: str = DEFAULT_GRASP,
    ) -> None:
        """Start the server and say hello. `start_timeout_s` covers interpreter start and imports
        (Isaac Lab and Warp's first kernel compilation take minutes on a CPU). `grasp`: what the
        cloth a Franka holds follows (`grasp.GRASP_MODELS`; Isaac Lab only)."""
        if grasp not in GRASP_MODELS:
            raise BridgeError(f"grasp model {grasp!r}: expected one of {', '.join(GRASP_MODELS)}")
        if backend not in BACKENDS:
            raise BridgeError(f"unknown simulator backend {backend!r}; expected one of {BACKENDS}")
        self.backend = backend
        exe = find_isaaclab_python(python) if backend == "isaac_lab" else Path(python or sys.executable)
        self.python = exe
        cmd = [str(exe), "-m", "instant_fold_sim.isaac_lab.server", "--backend", backend, "--device", device]
        cmd += ["--grasp", grasp]
        self.process = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=None,  # the simulator's log goes where the node's goes
            env=server_environment(exe, backend),
            text=True,
        )
        self.sock: socket.socket | None = None
        self.request_timeout_s = request_timeout_s
        try:
            port = self._await_port(start_timeout_s)
            self.sock = socket.create_connection(("127.0.0.1", port), timeout=request_timeout_s)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.hello = self.request({"type": "hello", "protocol": PROTOCOL_VERSION})[0]
        except BaseException:
            self.close()
            raise
        if self.hello.get("protocol") != PROTOCOL_VERSION:
            self.close()
            raise BridgeError(f"server speaks protocol {self.hello.get('protocol')}, this client {PROTOCOL_VERSION}")

    def _await_port(self, timeout_s: float) -> int:
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.process.stdout], [], [], 0.5)
            if ready:
                line = self.process.stdout.readline()
                if line.startswith(READY_LINE):
                    return int(line.split()[1])
                if line:
                    print(line, end="", file=sys.stderr)  # a backend printing on stdout: pass it on
                    continue
            if self.process.poll() is not None:
                raise BridgeError(
                    f"{self.backend} simulator exited with code {self.process.returncode} before listening "
                    f"({self.python}; its error is in the log above)"
                )
        raise BridgeError(f"{self.backend} simulator did not announce its port within {timeout_s:g} s")

    @property
    def stand_in(self) -> bool:
        return bool(self.hello.get("stand_in"))

    def request(
        self, header: dict[str, Any], arrays: dict[str, np.ndarray] | None = None
    ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Send one request, return the reply; `error` replies raise BridgeError with its message."""
        if self.sock is None:
            raise BridgeError("bridge closed")
        try:
            protocol.send(self.sock, header, arrays)
            reply, out = protocol.recv(self.sock)
        except (OSError, ProtocolError) as exc:
            code = self.process.poll()
            raise BridgeError(
                f"{self.backend} simulator: {header['type']} failed: {exc}"
                + (f" (process exited with code {code})" if code is not None else "")
            ) from exc
        if reply["type"] == "error":
            raise BridgeError(f"{self.backend} simulator refused {header['type']}: {reply.get('message')}")
        return reply, out

    def close(self, budget_s: float = CLOSE_BUDGET_S) -> None:
        """Say close, then make sure the process is gone within `budget_s` (idempotent): the
        server exits right after its `closed` reply (no interpreter teardown), a server that
        does not is terminated, then killed."""
        deadline = time.monotonic() + budget_s
        if self.sock is not None:
            try:
                self.sock.settimeout(max(0.1, 0.4 * budget_s))
                protocol.send(self.sock, {"type": "close"})
                protocol.recv(self.sock)
            except (OSError, ProtocolError):
                pass
            self.sock.close()
            self.sock = None
        if self.process.poll() is None:
            try:
                self.process.wait(timeout=max(0.1, deadline - time.monotonic() - 1.0))
            except subprocess.TimeoutExpired:
                self.process.terminate()
                try:
                    self.process.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()

    def __enter__(self) -> BridgeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def scene_spec(start: StartState, config: GenerationConfig, physics_preset: str) -> SceneSpec:
    """The bridge's description of a project start state (bridge frame: sim space x `obs_scale`)."""
    scene, camera = start.scene, start.dr.camera
    s = config.obs_scale
    _, qd = scene.batch.snapshot()
    t = camera.T_world_camera.copy()
    t[:3, 3] *= s
    return SceneSpec(
        garment_id=scene.garment.garment_id,
        rest_positions=(scene.garment.vertices * config.sim.garment_scale * s).astype(np.float32),
        faces=scene.garment.faces.astype(np.int32),
        positions=(scene.positions() * s).astype(np.float32),
        velocities=(qd[scene.first : scene.end] * s).astype(np.float32),
        keypoint_ids=np.asarray(start.keypoint_ids, np.int64),
        intrinsics=camera.intrinsics,
        T_world_camera=t,
        resolution=int(camera.resolution),
        grippers=np.concatenate([scene.arm_states()[:, :3] * s, scene.arm_states()[:, 3:]], axis=1),
        home=np.asarray(config.motion.home, np.float64) * s,
        fps=float(scene.config.fps),
        world_scale=float(s),
        grasp_radius=float(config.sim.grasp_radius * s),
        physics_preset=physics_preset,
        camera=asdict(camera),
        appearance=asdict(start.dr.appearance),
    )


class _GripperView:
    """`Gripper`'s position/openness as the rollout bookkeeping reads them (sim m)."""

    def __init__(self, position: np.ndarray, openness: float) -> None:
        self.position = np.asarray(position, np.float64)
        self.openness = float(openness)


class RemoteScene:
    """A `ClothScene` look-alike whose physics runs behind the bridge (simulation-space metres).

    `garment` and `config` are the local start scene's (the same mesh and frame rate); state is
    what the simulator reported after the last reset or step. Gripper commands are kept until
    the next `step_frame`, which sends them with the targets (one round trip per frame).
    """

    def __init__(self, client: BridgeClient, start: StartState, config: GenerationConfig, physics_preset: str) -> None:
        self.client = client
        local = start.scene
        self.garment, self.config = local.garment, local.config
        self.scale = float(config.obs_scale)
        self.sim_time = 0.0
        self.spec = scene_spec(start, config, physics_preset)
        header, arrays = self.spec.to_message()
        reply, out = client.request(header, arrays)
        self.build_s = float(reply.get("build_s", 0.0))
        self._openness = self.spec.grippers[:, 3].copy()
        self._observation: tuple[int, tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None
        self._apply(reply, out)

    def _apply(self, reply: dict[str, Any], out: dict[str, np.ndarray]) -> None:
        n = self.garment.num_particles
        try:
            positions = require(out, "positions", (n, 3))
            grippers = require(out, "grippers", (2, 4))
        except ProtocolError as exc:
            raise BridgeError(f"{self.client.backend} simulator sent a bad state: {exc}") from exc
        self._positions = positions.astype(np.float32) / self.scale
        self.grippers = [_GripperView(grippers[a, :3] / self.scale, grippers[a, 3]) for a in range(2)]
        self._speed = float(reply.get("cloth_speed", 0.0)) / self.scale
        self.frame = int(reply.get("frame", 0))

    @property
    def num_particles(self) -> int:
        return self.garment.num_particles

    def positions(self) -> np.ndarray:
        return self._positions.copy()

    def arm_states(self) -> np.ndarray:
        return np.array([[*g.position, g.openness] for g in self.grippers], dtype=np.float64)

    def command_gripper(self, arm: int, openness: float) -> None:
        self._openness[arm] = float(openness)

    def step_frame(self, targets: np.ndarray | list[np.ndarray] | None = None) -> None:
        goal = self.arm_states()[:, :3] if targets is None else np.array([np.asarray(t, np.float64) for t in targets])
        if goal.shape != (2, 3) or not np.isfinite(goal).all():
            raise ValueError(f"targets: expected finite [2, 3] gripper positions, got {goal.shape}")
        reply, out = self.client.request(
            {"type": "step"}, {"target": goal * self.scale, "openness": self._openness.astype(np.float64)}
        )
        self._apply(reply, out)
        self.sim_time += 1.0 / self.config.fps

    def cloth_speed(self) -> float:
        return self._speed

    def observe(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The simulator's camera: rgb, depth (real m), mask; rendered once per simulated frame
        (the sim node publishes it and the rollout records it: Isaac Lab renders 0.5 s a frame on
        a CPU). The arrays are shared between callers: read them, do not write."""
        if self._observation is None or self._observation[0] != self.frame:
            _, out = self.client.request({"type": "observe"})
            self._observation = (self.frame, (out["rgb"], out["depth"], out["mask"].astype(bool)))
        return self._observation[1]
