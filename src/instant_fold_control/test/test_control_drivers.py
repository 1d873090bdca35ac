"""Driver selection by name, and the shipped configs build their drivers."""

from __future__ import annotations

import pytest

from instant_fold_control.config import find_robot_config, load_robot_config
from instant_fold_control.drivers import BUILTIN, available_drivers, find_factory, make_robot_drivers
from instant_fold_control.drivers.base import DriverError
from instant_fold_control.drivers.dobot import DobotDriver
from instant_fold_control.drivers.franka import FrankaDriver


def test_builtin_drivers_are_listed() -> None:
    assert {"dobot", "franka"} <= set(available_drivers())


@pytest.mark.parametrize(("robot", "driver_type"), [("dobot", DobotDriver), ("franka", FrankaDriver)])
def test_shipped_configs_build_their_drivers(robot: str, driver_type: type) -> None:
    drivers = make_robot_drivers(load_robot_config(find_robot_config(robot)))
    assert isinstance(drivers.left, driver_type) and isinstance(drivers.right, driver_type)
    assert drivers.left.arm == "left" and drivers.lockstep is None


def test_sim_driver_comes_from_the_simulator_package_by_entry_point() -> None:
    """The controller does not depend on the simulator: `sim` is found through the entry point."""
    assert "sim" not in BUILTIN and "sim" in available_drivers()
    assert find_factory("sim").__module__ == "instant_fold_sim.sim_driver"
    with pytest.raises(
        DriverError, match=r"driver 'nope' is not available; known drivers: \['dobot', 'franka', 'sim'\]"
    ):
        find_factory("nope")
