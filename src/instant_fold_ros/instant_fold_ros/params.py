"""ROS parameters shared by the nodes: configuration dataclasses (one `<prefix>.<field>`
parameter per field) and the folders service requests may name files under (`file_roots`).

Core configs are frozen dataclasses with typed defaults; nodes expose them as ROS parameters so a
YAML params file can set any field, and the values come back with the dataclass's types.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rclpy.node import Node

from instant_fold_core.paths import allowed_roots


def declare_config(node: Node, prefix: str, defaults: Any) -> dict[str, Any]:
    """Declare `<prefix>.<field>` for each scalar field of `defaults`; return field -> value."""
    values: dict[str, Any] = {}
    for f in dataclasses.fields(defaults):
        default = getattr(defaults, f.name)
        if isinstance(default, (bool, int, float, str)):
            values[f.name] = type(default)(node.declare_parameter(f"{prefix}.{f.name}", default).value)
    return values


def declare_file_roots(node: Node, default: Sequence[str]) -> tuple[Path, ...]:
    """The `file_roots` parameter: the folders under which the node's service requests may name
    files (see `instant_fold_core.paths`); relative ones are taken from the working directory."""
    roots = allowed_roots(node.declare_parameter("file_roots", list(default)).value)
    node.get_logger().info(f"service requests may name files under: {', '.join(map(str, roots)) or 'nothing'}")
    return roots
