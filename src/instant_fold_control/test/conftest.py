"""Fixtures shared by the control tests."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from instant_fold_control.config import RobotConfig, parse_robot_config

#: A small robot: both bases at table height 0.95 m below the camera, 1.2 m apart (as in config/robots).
ROBOT: dict[str, Any] = {
    "driver": "dobot",
    "camera_frame": "camera_color_optical_frame",
    "safety": {
        "workspace_min": [-0.45, -0.35, 0.55],
        "workspace_max": [0.45, 0.35, 0.93],
        "max_speed": 0.5,
        "min_gripper_distance": 0.12,
        "watchdog_timeout": 0.5,
        "max_chunk_age": 1.0,
    },
    "arms": {
        "left": {
            "base_frame": "left_base_link",
            "base_from_camera": {"translation": [0.6, 0.0, 0.95], "quaternion": [1.0, 0.0, 0.0, 0.0]},
        },
        "right": {
            "base_frame": "right_base_link",
            "base_from_camera": {"translation": [0.6, 0.0, 0.95], "quaternion": [0.0, 1.0, 0.0, 0.0]},
        },
    },
}


def _robot_dict(**safety: Any) -> dict[str, Any]:
    data = copy.deepcopy(ROBOT)
    data["safety"].update(safety)
    return data


@pytest.fixture
def robot_dict() -> Callable[..., dict[str, Any]]:
    """Factory: the test robot as a config mapping, with safety entries overridden by keyword."""
    return _robot_dict


@pytest.fixture
def robot() -> RobotConfig:
    return parse_robot_config(_robot_dict())
