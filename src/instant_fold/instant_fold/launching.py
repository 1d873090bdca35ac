"""Turn a graph file into a `ros2 launch` description (used only where ROS 2 launch is installed).

The launch files stay one-liners over the same graph files the process runner reads, so the two
ways of starting the system cannot drift apart.
"""

from __future__ import annotations

from instant_fold.graph import find_graph, load_graph


def graph_launch_description(graph_name: str):
    """LaunchDescription with one launch_ros Node per graph node; a required node's exit shuts down."""
    from launch.actions import Shutdown
    from launch_ros.actions import Node

    from launch import LaunchDescription

    graph = load_graph(find_graph(graph_name))
    nodes = [
        Node(
            package=spec.package,
            executable=spec.executable,
            name=spec.name,
            parameters=[str(p) for p in spec.parameters],
            remappings=list(spec.remappings),
            arguments=list(spec.arguments),
            output="screen",
            on_exit=Shutdown() if spec.required else None,
        )
        for spec in graph.nodes
    ]
    return LaunchDescription(nodes)
