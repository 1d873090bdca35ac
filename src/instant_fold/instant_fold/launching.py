"""Turn graphs into `ros2 launch` descriptions (used only where ROS 2 launch is installed).

The launch files stay one-liners over the same graph files and graph builder the process runner
reads, so the two ways of starting the system cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from instant_fold.fold_graph import FoldOptions, build_fold_graph, parameters_yaml
from instant_fold.graph import find_graph, load_graph
from instant_fold_ros.graph_spec import GraphSpec


def launch_nodes(graph: GraphSpec, extra_parameters: Sequence[Any] = ()) -> list:
    """One launch_ros Node per graph node (parameter files, then `extra_parameters` dicts/files);
    a required node's exit shuts the launch down."""
    from launch.actions import Shutdown
    from launch_ros.actions import Node

    return [
        Node(
            package=spec.package,
            executable=spec.executable,
            name=spec.name,
            parameters=[*(str(p) for p in spec.parameters), *extra_parameters],
            remappings=list(spec.remappings),
            arguments=list(spec.arguments),
            output="screen",
            on_exit=Shutdown() if spec.required else None,
        )
        for spec in graph.nodes
    ]


def graph_launch_description(graph_name: str):
    """LaunchDescription of a graph file under config/graphs/."""
    from launch import LaunchDescription

    return LaunchDescription(launch_nodes(load_graph(find_graph(graph_name))))


def fold_launch_description():
    """fold.launch.py: one launch argument per `FoldOptions` field, the graph built at launch time."""
    import tempfile

    from launch.actions import DeclareLaunchArgument, OpaqueFunction
    from launch.substitutions import LaunchConfiguration

    from launch import LaunchDescription

    names = [f.name for f in fields(FoldOptions)]

    def build(context, *_args, **_kwargs):
        options = FoldOptions(**{n: LaunchConfiguration(n).perform(context) for n in names})
        graph, params = build_fold_graph(options)
        with tempfile.NamedTemporaryFile("w", prefix="fold_params_", suffix=".yaml", delete=False) as f:
            f.write(parameters_yaml(params))
        return launch_nodes(graph, [f.name])

    defaults = FoldOptions()
    arguments = [DeclareLaunchArgument(n, default_value=str(getattr(defaults, n))) for n in names]
    return LaunchDescription([*arguments, OpaqueFunction(function=build)])
