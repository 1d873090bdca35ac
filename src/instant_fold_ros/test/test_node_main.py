"""How a node process tells a requested stop (Ctrl-C) from a real error out of its executor, and
how a thread that spins an executor is stopped without crashing rclpy."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

import pytest
import rclpy
from rclpy.context import Context
from rclpy.exceptions import InvalidHandle
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor, SingleThreadedExecutor
from rclpy.node import Node

from instant_fold_ros.node_main import ExecutorThread, is_shutdown_error

pytestmark = pytest.mark.ros


def test_runtime_errors_are_a_stop_only_once_the_context_is_down() -> None:
    """SIGINT shuts the context down first; the KeyboardInterrupt it then raises can surface inside a
    pybind11 call as a plain RuntimeError (CI, 2026-11-28). While the context lives, that is a bug."""
    pybind = RuntimeError("Unable to convert call argument '0' to Python object")
    rclpy.init()
    try:
        assert not is_shutdown_error(pybind)
    finally:
        rclpy.shutdown()
    assert is_shutdown_error(pybind)
    assert is_shutdown_error(KeyboardInterrupt()) and is_shutdown_error(ExternalShutdownException())
    assert not is_shutdown_error(ValueError("a real bug"))


class _RecordingExecutor(SingleThreadedExecutor):
    """Records whether its spinning thread (named "spun") was still alive when it was shut down."""

    def __init__(self, context: Context) -> None:
        super().__init__(context=context)
        self.alive_at_shutdown: list[bool] = []

    def shutdown(self, timeout_sec: float | None = None) -> bool:
        alive = any(t.name == "spun" and t.is_alive() for t in threading.enumerate())
        self.alive_at_shutdown = [*self.alive_at_shutdown, alive]
        return super().shutdown(timeout_sec)


@pytest.fixture
def context() -> Iterator[Context]:
    ctx = Context()
    rclpy.init(context=ctx)
    yield ctx
    rclpy.try_shutdown(context=ctx)


def _spun_node(context: Context, executor_type: type = _RecordingExecutor) -> tuple[Node, ExecutorThread]:
    node = rclpy.create_node("spun", context=context, start_parameter_services=False)
    executor = executor_type(context=context)
    executor.add_node(node)
    return node, ExecutorThread(executor, "spun")


def _until(condition: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    """Poll `condition` (a hang guard, not a timing requirement)."""
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    return condition()


def test_the_executor_is_shut_down_only_after_its_thread_has_left(context: Context) -> None:
    """Shut down under a thread waiting on its guard conditions, the executor segfaulted the
    controller on Ctrl-C (CI, 2026-11-28; ros2/rclpy#968): now the thread leaves first."""
    node, spinner = _spun_node(context)
    ticks = threading.Event()
    node.create_timer(0.01, ticks.set)
    spinner.start()
    assert ticks.wait(10.0), "the thread spins the node"
    spinner.stop(node)
    assert spinner.executor.alive_at_shutdown == [False]  # type: ignore[attr-defined]
    with pytest.raises(InvalidHandle):  # the node is destroyed
        node.get_name()


def test_a_callback_still_running_keeps_its_node_and_executor(context: Context) -> None:
    """Destroying a node that another thread spins is a crash (ros2/rclpy#663): both are left to the
    process's end while a callback runs, and stopped once it has returned."""
    node, spinner = _spun_node(context)
    entered, release = threading.Event(), threading.Event()

    def blocking() -> None:
        entered.set()
        release.wait(30.0)

    timer = node.create_timer(0.01, blocking)
    spinner.start()
    assert entered.wait(10.0)
    spinner.stop(node)
    assert spinner.is_alive() and spinner.executor.alive_at_shutdown == []  # type: ignore[attr-defined]
    timer.cancel()  # not destroyed: its entities still work
    release.set()
    assert _until(lambda: not spinner.is_alive()), "the thread leaves once its callback returns"
    spinner.stop(node)
    assert spinner.executor.alive_at_shutdown == [False]  # type: ignore[attr-defined]


@pytest.mark.parametrize("executor_type", [SingleThreadedExecutor, MultiThreadedExecutor])
def test_the_thread_ends_with_the_context(context: Context, executor_type: type) -> None:
    """Ctrl-C shuts the context down before the node's close() stops its side threads."""
    node, spinner = _spun_node(context, executor_type)
    spinner.start()
    rclpy.shutdown(context=context)
    assert _until(lambda: not spinner.is_alive())
    spinner.stop(node)  # a thread already gone: the executor is shut down, no error


@pytest.mark.slow
def test_side_nodes_stopped_after_sigint_never_crash(tmp_path) -> None:
    """The CI crash, reproduced: a process with a side node gets SIGINT and closes it as run_node
    does. Before, 5 of 210 such processes died of SIGSEGV while the fuzz tests ran beside them (a
    rare crash: this test could pass with the old code; the ordering test above is the one that
    cannot)."""
    script = tmp_path / "side.py"
    script.write_text(SIGINT_SCRIPT)
    for run in range(30):
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and done.stdout.strip() == "closed", (run, done.returncode, done.stderr[-3000:])


SIGINT_SCRIPT = """
import faulthandler, os, signal, time
import rclpy
from instant_fold_ros.node_main import SideNode
faulthandler.enable()
rclpy.init()
owner = rclpy.create_node("owner")
side = SideNode(owner, "side")
side.node.create_timer(0.001, lambda: None)
side.start()
time.sleep(0.1)
try:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(1.0)
except KeyboardInterrupt:
    pass
side.close()
owner.destroy_node()
rclpy.try_shutdown()
print("closed")
"""
