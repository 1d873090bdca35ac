"""ros2 launch instant_fold graph_check.launch.py — the graph check (see config/graphs/graph_check.yaml)."""

from instant_fold.launching import graph_launch_description


def generate_launch_description():
    return graph_launch_description("graph_check")
