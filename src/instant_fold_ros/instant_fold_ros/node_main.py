"""The one way every Instant-Fold node process starts and stops.

Ctrl-C / SIGINT (what the process runner and `ros2 launch` send) ends spinning, the node's
`close()` hook runs (to stop arms, close bags), and the context is shut down; the process exits
0 on such a requested stop. A node whose work has an end (a probe, a one-shot tool) sets
`self.finished = True` and its `exit_code`; the process then exits with that code.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import rclpy
from rclpy._rclpy_pybind11 import RCLError
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor, SingleThreadedExecutor
from rclpy.node import Node

SPIN_PERIOD_S = 0.1


def is_shutdown_error(exc: BaseException) -> bool:
    """Whether an exception out of an executor only means the context was shut down (Ctrl-C).

    SIGINT's handler can shut the context down between rclpy's `ok()` check and its wait; rclpy
    then raises RCLError ("context is not valid") instead of a shutdown exception.
    """
    if isinstance(exc, KeyboardInterrupt | ExternalShutdownException):
        return True
    return isinstance(exc, RCLError) and not rclpy.ok()


def spin_until_shutdown(executor) -> None:
    """Spin in a helper thread until the context is shut down, without a traceback on Ctrl-C."""
    try:
        executor.spin()
    except (ExternalShutdownException, RCLError) as exc:
        if not is_shutdown_error(exc):
            raise


def wait_for_future(future, timeout_s: float) -> bool:
    """Block until a future that another thread's executor completes is done; False on timeout
    (the future is then cancelled). For service and action calls made outside the spinning thread."""
    done = threading.Event()
    future.add_done_callback(lambda _: done.set())
    if done.wait(timeout_s):
        return True
    future.cancel()
    return False


def run_node(factory: Callable[[], Node], args: Sequence[str] | None = None, threads: int = 1) -> int:
    """Create the node with `factory` after rclpy.init, spin it until shutdown, clean up.

    `threads` > 1 spins a multi-threaded executor (nodes whose callbacks block, such as an action
    server's execute loop, need one).
    """
    rclpy.init(args=list(args) if args is not None else None)
    node: Node | None = None
    interrupted = False
    try:
        node = factory()
        executor = SingleThreadedExecutor() if threads == 1 else MultiThreadedExecutor(num_threads=threads)
        executor.add_node(node)
        while rclpy.ok() and not getattr(node, "finished", False):
            executor.spin_once(timeout_sec=SPIN_PERIOD_S)
    except (KeyboardInterrupt, ExternalShutdownException, RCLError) as exc:
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
        rclpy.try_shutdown()
    if node is None:
        return 1
    if interrupted and not getattr(node, "finished", False):
        return 0  # stopped on request: a clean exit
    return int(getattr(node, "exit_code", 0))
