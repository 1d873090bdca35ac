"""The one way every Instant-Fold node process starts and stops.

Ctrl-C / SIGINT (what the process runner and `ros2 launch` send) ends spinning, the node's
`close()` hook runs (to stop arms, close bags), and the context is shut down; the process exits
0 on such a requested stop. A node whose work has an end (a probe, a one-shot tool) sets
`self.finished = True` and its `exit_code`; the process then exits with that code.

Nodes spin single-threaded. A node with callbacks that block (a fold's loop, a lock-stepped
control tick) serves the requests that must not wait for them on a `SideNode`: an internal node
with an executor thread of its own. Why not rclpy's multi-threaded executor over the whole node:
beside a blocked callback it woke about 18 times per arriving message (a subscription stays
ready until a worker thread has taken its sample) and kept a core busy; with the GIL, the policy
server's queries took up to a second instead of ~20 ms (docs/architecture.md, "Latency").
"""

from __future__ import annotations

import faulthandler
import threading
from collections.abc import Callable, Sequence

import rclpy
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor, SingleThreadedExecutor
from rclpy.node import Node

from instant_fold_ros.dds_profile import use_project_dds_profile

SPIN_PERIOD_S = 0.1


def is_shutdown_error(exc: BaseException) -> bool:
    """Whether an exception out of an executor only means the context was shut down (Ctrl-C).

    SIGINT's handler shuts the context down, then raises KeyboardInterrupt wherever Python runs
    next. Between rclpy's `ok()` check and its wait that surfaces as RCLError ("context is not
    valid"); inside a pybind11 call (a subscription's `take_message` converting its arguments) as
    a plain RuntimeError ("Unable to convert call argument"). Both are a stop once the context is
    down (a CI run, 2026-11-28, exited 1 on the second).
    """
    if isinstance(exc, KeyboardInterrupt | ExternalShutdownException):
        return True
    return isinstance(exc, RuntimeError) and not rclpy.ok()  # RCLError is a RuntimeError


class ExecutorThread:
    """An executor spun on a thread of its own until `stop()` or the context's shutdown (Ctrl-C).

    Why not `executor.spin()` ended by `executor.shutdown()` from the stopping thread: shutdown
    destroys the executor's guard conditions while the spinning thread may still wait on a wait
    set that holds them (ros2/rclpy#968, open). After Ctrl-C it segfaulted the controller in a CI
    run (2026-11-28), and 5 of 210 processes that closed a side node after SIGINT while the fuzz
    tests ran beside them; with this class none of 960 (300 beside the same tests). This thread
    waits in short spins, leaves when asked (woken at once), and the executor is shut down only
    after it has left.
    """

    def __init__(self, executor: SingleThreadedExecutor | MultiThreadedExecutor, name: str) -> None:
        self.executor = executor
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def _spin(self) -> None:
        try:
            while not self._stop.is_set() and self.executor.context.ok():
                self.executor.spin_once(timeout_sec=SPIN_PERIOD_S)
        except (ExternalShutdownException, RuntimeError) as exc:
            if not is_shutdown_error(exc):
                raise

    def stop(self, node: Node | None = None) -> None:
        """End the thread (never started is fine), then shut the executor down and destroy `node`.
        A callback still running after 2 s keeps its thread: executor and node are then left to
        the process's end, since destroying a node that another thread spins is a known crash of
        rclpy (ros2/rclpy#663, a segfault)."""
        self._stop.set()
        if self._thread.is_alive():
            self.executor.wake()  # out of its wait now, not after SPIN_PERIOD_S
            self._thread.join(timeout=2.0)
            if self._thread.is_alive():
                return
        self.executor.shutdown(timeout_sec=1.0)
        if node is not None:
            node.destroy_node()


def wait_for_future(future, timeout_s: float) -> bool:
    """Block until a future that another thread's executor completes is done; False on timeout
    (the future is then cancelled). For service and action calls made outside the spinning thread."""
    done = threading.Event()
    future.add_done_callback(lambda _: done.set())
    if done.wait(timeout_s):
        return True
    future.cancel()
    return False


class SideNode:
    """An internal node `<owner>_<suffix>` in the owner's namespace and context, spun by an executor
    of its own on a thread of its own (`threads` > 1: a multi-threaded one, for callbacks that block
    each other, such as an action's execute loop). Create its entities, then `start()`; the
    owner's `close()` calls `close()`."""

    def __init__(self, owner: Node, suffix: str, threads: int = 1) -> None:
        # Not the process's global arguments: those would rename it to the owner's name.
        self.node = rclpy.create_node(
            f"{owner.get_name()}_{suffix}",
            namespace=owner.get_namespace(),
            context=owner.context,
            use_global_arguments=False,
            start_parameter_services=False,
        )
        executor: SingleThreadedExecutor | MultiThreadedExecutor = (
            SingleThreadedExecutor(context=owner.context)
            if threads == 1
            else MultiThreadedExecutor(num_threads=threads, context=owner.context)
        )
        executor.add_node(self.node)
        self._spinner = ExecutorThread(executor, suffix)

    def start(self) -> None:
        self._spinner.start()

    def close(self) -> None:
        """Stop spinning, destroy the node (`ExecutorThread.stop`: a callback still running leaves
        both to end with the process)."""
        self._spinner.stop(self.node)


def run_node(factory: Callable[[], Node], args: Sequence[str] | None = None, threads: int = 1) -> int:
    """Create the node with `factory` after rclpy.init, spin it until shutdown, clean up.

    `threads` > 1 spins a multi-threaded executor; the project's nodes use one thread and a
    `SideNode` for what must not wait (module docstring).
    """
    faulthandler.enable()  # a crash in native code (DDS, a simulator) prints the Python stacks to the log
    use_project_dds_profile()
    rclpy.init(args=list(args) if args is not None else None)
    node: Node | None = None
    executor: SingleThreadedExecutor | MultiThreadedExecutor | None = None
    interrupted = False
    try:
        node = factory()
        executor = SingleThreadedExecutor() if threads == 1 else MultiThreadedExecutor(num_threads=threads)
        executor.add_node(node)
        while rclpy.ok() and not getattr(node, "finished", False):
            executor.spin_once(timeout_sec=SPIN_PERIOD_S)
    except (KeyboardInterrupt, ExternalShutdownException, RuntimeError) as exc:
        if not is_shutdown_error(exc):
            raise
        interrupted = True
    finally:
        if node is not None:
            close = getattr(node, "close", None)
            if callable(close):
                close()
            node.destroy_node()
        interrupted = interrupted or not rclpy.ok()
        if executor is not None:
            # Now, while the context lives: left to the garbage collector after shutdown, the
            # executor's __del__ destroyed its guard condition on a dead context and printed a
            # traceback (InvalidHandle) into the node's log.
            executor.shutdown(timeout_sec=0)
        rclpy.try_shutdown()
    if node is None:
        return 1
    if interrupted and not getattr(node, "finished", False):
        return 0  # stopped on request: a clean exit
    return int(getattr(node, "exit_code", 0))
