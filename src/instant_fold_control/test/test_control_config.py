"""Robot config files: the shipped ones load, broken ones are rejected with the field named."""

from __future__ import annotations

import pytest

from instant_fold_control.config import find_robot_config, load_robot_config, parse_robot_config
from instant_fold_core.errors import ConfigError


@pytest.mark.parametrize("robot", ["dobot", "franka", "sim"])
def test_shipped_robot_configs_load(robot: str) -> None:
    config = load_robot_config(find_robot_config(robot))
    assert config.driver == robot
    assert [a.name for a in config.arms] == ["left", "right"]
    assert (config.safety.workspace_min < config.safety.workspace_max).all()


def test_unknown_robot_lists_where_it_looked() -> None:
    with pytest.raises(ConfigError, match=r"robot 'nope': no config file nope.yaml in .*config/robots"):
        find_robot_config("nope")


def test_errors_name_the_field(robot_dict) -> None:
    data = robot_dict()
    del data["safety"]["max_speed"]
    with pytest.raises(ConfigError, match=r"safety: missing \['safety.max_speed'\]"):
        parse_robot_config(data)
    with pytest.raises(ConfigError, match=r"safety\.workspace: min"):
        parse_robot_config(robot_dict(workspace_min=[0.5, 0.0, 0.0]))
    with pytest.raises(ConfigError, match=r"safety\.watchdog_timeout: must be positive"):
        parse_robot_config(robot_dict(watchdog_timeout=0))
    data = robot_dict()
    data["arms"]["left"]["base_from_camera"] = {"translation": [0, 0, 0], "quaternion": [0, 0, 0, 2]}
    with pytest.raises(ConfigError, match=r"arms.left.base_from_camera.quaternion"):
        parse_robot_config(data)
    data = robot_dict()
    data["arms"]["right"]["extra"] = 1
    with pytest.raises(ConfigError, match=r"arms.right: unknown keys \['arms.right.extra'\]"):
        parse_robot_config(data)
