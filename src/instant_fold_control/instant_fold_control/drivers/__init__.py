"""Robot drivers, selected by name (`driver:` in the robot config).

Built in: `dobot` (TCP/IP protocol V4) and `franka` (franky). Other packages add drivers without
this package depending on them by registering a factory `(RobotConfig) -> RobotDrivers` under
the entry-point group `instant_fold_control.drivers` (the simulator's lock-stepped `sim` driver
is meant to arrive that way).
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

from instant_fold_control.config import RobotConfig
from instant_fold_control.drivers.base import DriverError, DriverFactory, RobotDrivers

ENTRY_POINT_GROUP = "instant_fold_control.drivers"
BUILTIN: dict[str, str] = {
    "dobot": "instant_fold_control.drivers.dobot:make_robot",
    "franka": "instant_fold_control.drivers.franka:make_robot",
}


def available_drivers() -> list[str]:
    return sorted({*BUILTIN, *(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))})


def find_factory(name: str) -> DriverFactory:
    """The factory registered under `name`; DriverError listing the known ones otherwise."""
    if name in BUILTIN:
        module, _, attr = BUILTIN[name].partition(":")
        return getattr(importlib.import_module(module), attr)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            return ep.load()
    hint = " (the sim driver is provided by the simulator package when it is installed)" if name == "sim" else ""
    raise DriverError(f"driver '{name}' is not available{hint}; known drivers: {available_drivers()}")


def make_robot_drivers(config: RobotConfig) -> RobotDrivers:
    """Build (not connect) the drivers of a robot config."""
    return find_factory(config.driver)(config)
