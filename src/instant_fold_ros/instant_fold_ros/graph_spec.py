"""A node graph as data: which nodes, with which parameter files and remappings.

Shared by the bringup's graph files and `ros2 launch` descriptions (`instant_fold.graph`,
`instant_fold.launching`), the process runner that stands in for `ros2 launch`
(`standins.process_runner`) and the node packages' tests, which start their nodes with it; it
lives here so that none of them depends on the bringup.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class NodeSpec:
    """One node of a graph."""

    name: str
    package: str
    executable: str
    parameters: tuple[Path, ...] = ()
    remappings: tuple[tuple[str, str], ...] = ()
    arguments: tuple[str, ...] = ()
    required: bool = False

    def ros_arguments(self, extra_parameters: tuple[Path, ...] = ()) -> list[str]:
        """Command-line arguments that give the node its name, parameter files and remappings."""
        args = [*self.arguments, "--ros-args", "-r", f"__node:={self.name}"]
        for params in (*self.parameters, *extra_parameters):
            args += ["--params-file", str(params)]
        for src, dst in self.remappings:
            args += ["-r", f"{src}:={dst}"]
        return args


@dataclass(frozen=True)
class GraphSpec:
    """A named set of nodes."""

    name: str
    nodes: tuple[NodeSpec, ...] = field(default_factory=tuple)
