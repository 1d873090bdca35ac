"""Run a node graph as separate processes: the stand-in for `ros2 launch` (not available as a wheel).

Each node runs as its own OS process (its own DDS participant, exactly as under `ros2 launch`),
with the graph's parameter files. Output lines are prefixed with the node name. On Ctrl-C, SIGTERM
or SIGHUP every node receives one SIGINT (rclpy shuts down cleanly, bags get closed), then SIGTERM
and SIGKILL after grace periods. When a node marked `required` exits, the others are stopped and
the runner returns that node's exit code. Nodes never outlive the process that started them: on
Linux each gets SIGTERM when it dies, however it dies (SIGKILL, a second Ctrl-C mid-shutdown).

Its command line is the bringup's `python -m instant_fold.runner`; node tests start their nodes
with `ProcessRunner` directly. On an apt-installed ROS, `ros2 launch instant_fold <graph>.launch.py`
replaces it (the launch files read the same graph files).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from instant_fold_core.errors import ExternalError
from instant_fold_ros.graph_spec import GraphSpec, NodeSpec


class RunnerError(ExternalError):
    """The graph cannot be started (e.g. an executable is not installed)."""


def find_executable(node: NodeSpec) -> Path:
    """Locate a node's executable the way `ros2 run` does: <prefix>/lib/<package>/<executable>."""
    from ament_index_python.packages import PackageNotFoundError, get_package_prefix

    try:
        prefix = Path(get_package_prefix(node.package))
    except PackageNotFoundError as exc:
        raise RunnerError(
            f"node '{node.name}': package '{node.package}' not found; build the workspace and source scripts/env.sh"
        ) from exc
    exe = prefix / "lib" / node.package / node.executable
    if not os.access(exe, os.X_OK):
        raise RunnerError(f"node '{node.name}': package '{node.package}' has no executable '{node.executable}'")
    return exe


#: prctl(2) option: the signal a process gets when its parent dies (Linux).
PR_SET_PDEATHSIG = 1
#: Signals that stop a graph the way Ctrl-C does (SIGHUP: the terminal closed).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _parent_death_signal() -> Callable[[], None] | None:
    """A pre-exec hook that ties a child to this process: SIGTERM when the thread that started it
    ends (rclpy stops on SIGTERM as on Ctrl-C). Nodes run in sessions of their own (they get no
    terminal signal), so without it a runner killed by SIGKILL or SIGHUP left them running under
    PID 1. None where prctl does not exist (not Linux)."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def hook() -> None:
        prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM))
        if os.getppid() != parent:  # the parent died before the hook ran
            os.kill(os.getpid(), signal.SIGTERM)

    return hook


def describe_exit(code: int) -> str:
    """An exit status in words: "code 3", or "signal SIGSEGV (-11)" for a process a signal ended."""
    if code >= 0:
        return f"code {code}"
    try:
        return f"signal {signal.Signals(-code).name} ({code})"
    except ValueError:
        return f"code {code}"


@dataclass
class _Running:
    spec: NodeSpec
    process: subprocess.Popen[bytes]
    pump: threading.Thread


def _pump(name: str, stream: IO[bytes], out: IO[str]) -> None:
    for raw in iter(stream.readline, b""):
        out.write(f"[{name}] {raw.decode(errors='replace')}")
        out.flush()


class ProcessRunner:
    """Start, supervise and stop the processes of one graph."""

    def __init__(
        self,
        graph: GraphSpec,
        extra_parameters: Sequence[Path] = (),
        env: dict[str, str] | None = None,
        output: IO[str] = sys.stdout,
        sigint_grace: float = 10.0,
        sigterm_grace: float = 5.0,
    ) -> None:
        self.graph = graph
        self.extra_parameters = tuple(extra_parameters)
        self.env = env
        self.output = output
        self.sigint_grace = sigint_grace
        self.sigterm_grace = sigterm_grace
        self._running: list[_Running] = []
        self._stop = threading.Event()

    def start(self) -> None:
        executables = [find_executable(node) for node in self.graph.nodes]  # fail before starting any
        try:
            for node, exe in zip(self.graph.nodes, executables, strict=True):
                self._spawn(node, exe)
        except OSError:
            self.shutdown()
            raise

    def _spawn(self, node: NodeSpec, exe: Path) -> None:
        process = subprocess.Popen(
            [str(exe), *node.ros_arguments(self.extra_parameters)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=self.env,
            start_new_session=True,  # we forward exactly one SIGINT ourselves
            preexec_fn=_parent_death_signal(),  # one prctl call in the child: takes no lock
        )
        assert process.stdout is not None
        pump = threading.Thread(target=_pump, args=(node.name, process.stdout, self.output), daemon=True)
        pump.start()
        self._running.append(_Running(node, process, pump))
        self.output.write(f"[runner] started {node.name} (pid {process.pid})\n")

    def exited_required(self) -> tuple[str, int] | None:
        """(name, exit code) of a required node that has exited, for callers that supervise
        the graph themselves instead of calling `wait`."""
        for r in self._running:
            rc = r.process.poll()
            if rc is not None and r.spec.required:
                return r.spec.name, rc
        return None

    def kill(self) -> None:
        """SIGKILL every node now (a crash, as tests of the graph's fault handling need)."""
        for r in self._running:
            if r.process.poll() is None:
                r.process.kill()
                r.process.wait()

    def request_stop(self) -> None:
        """Ask `wait` to stop the graph (safe to call from a signal handler)."""
        self._stop.set()

    def wait(self, poll: float = 0.1) -> int:
        """Supervise until a required node exits, every node exits, or a stop is requested."""
        code = 0
        while not self._stop.is_set():
            alive = False
            for r in self._running:
                rc = r.process.poll()
                if rc is None:
                    alive = True
                elif r.spec.required:
                    self.output.write(
                        f"[runner] required node {r.spec.name} exited with {describe_exit(rc)}; stopping the graph\n"
                    )
                    self.shutdown()
                    return rc
                elif rc != 0:
                    code = rc
            if not alive:
                return code
            time.sleep(poll)
        return self.shutdown()

    def shutdown(self) -> int:
        """SIGINT every node once, then escalate; return the first non-zero exit code (or 0)."""
        for sig, grace in ((signal.SIGINT, self.sigint_grace), (signal.SIGTERM, self.sigterm_grace)):
            pending = [r for r in self._running if r.process.poll() is None]
            for r in pending:
                r.process.send_signal(sig)
            deadline = time.monotonic() + grace
            for r in pending:
                try:
                    r.process.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    self.output.write(f"[runner] {r.spec.name} did not stop after {sig.name}\n")
        for r in self._running:
            if r.process.poll() is None:
                r.process.kill()
                r.process.wait()
        for r in self._running:
            r.pump.join(timeout=1.0)
        # An interrupted node exiting with -SIGINT / 130 stopped as asked.
        failures = [r for r in self._running if r.process.returncode not in (0, -signal.SIGINT, 130, -signal.SIGTERM)]
        for r in failures:
            self.output.write(
                f"[runner] {r.spec.name} exited with {describe_exit(r.process.returncode)} while stopping\n"
            )
        return failures[0].process.returncode if failures else 0
