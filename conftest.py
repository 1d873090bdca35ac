"""Workspace-wide pytest fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture
def ros_env() -> Iterator[dict[str, str]]:
    """Environment for child processes with a ROS domain reserved for this test alone."""
    from instant_fold_ros.testing import isolated_ros_env

    with isolated_ros_env() as env:
        yield env
