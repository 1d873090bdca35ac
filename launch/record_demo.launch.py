"""ros2 launch instant_fold record_demo.launch.py — camera + recorder (see config/graphs/record_demo.yaml)."""

from instant_fold.launching import graph_launch_description


def generate_launch_description():
    return graph_launch_description("record_demo")
