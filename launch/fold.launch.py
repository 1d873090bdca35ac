"""ros2 launch instant_fold fold.launch.py robot:=sim|dobot|franka camera:=realsense|sim|playback|bag
segmentation:=sam2|plane|sim demo:=<file> checkpoint:=<policy dir> — the fold graph
(see src/instant_fold/instant_fold/fold_graph.py; without ros2 launch:
`python -m instant_fold.runner fold robot:=sim ...`)."""

from instant_fold.launching import fold_launch_description


def generate_launch_description():
    return fold_launch_description()
