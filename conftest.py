"""Workspace-wide pytest fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture
def ros_env() -> Iterator[dict[str, str]]:
    """Environment for child processes with a ROS domain reserved for this test alone."""
    from instant_fold_ros.domains import isolated_ros_env

    with isolated_ros_env() as env:
        yield env


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip `gpu` tests where no CUDA device is present (CI and the development machines)."""
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items:
        return
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in gpu_items:
        item.add_marker(skip)
