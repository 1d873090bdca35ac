"""ROS parameters from configuration dataclasses: one `<prefix>.<field>` parameter per field.

Core configs are frozen dataclasses with typed defaults; nodes expose them as ROS parameters so a
YAML params file can set any field, and the values come back with the dataclass's types.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from rclpy.node import Node


def declare_config(node: Node, prefix: str, defaults: Any) -> dict[str, Any]:
    """Declare `<prefix>.<field>` for each scalar field of `defaults`; return field -> value."""
    values: dict[str, Any] = {}
    for f in dataclasses.fields(defaults):
        default = getattr(defaults, f.name)
        if isinstance(default, (bool, int, float, str)):
            values[f.name] = type(default)(node.declare_parameter(f"{prefix}.{f.name}", default).value)
    return values
