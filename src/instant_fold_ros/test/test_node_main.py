"""How a node process tells a requested stop (Ctrl-C) from a real error out of its executor."""

from __future__ import annotations

import pytest
import rclpy
from rclpy.executors import ExternalShutdownException

from instant_fold_ros.node_main import is_shutdown_error

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
