"""Instant-Fold core library: the contracts every package shares, no rclpy.

Messages' numpy forms (`contracts`, `tokens`, `rgbd`), the fold record (`fold_record`), the episode
and demonstration formats (`dataset`, `demonstration`), errors, configuration, checkpoints,
geometry and registration, and small utilities. The learned models live in
`instant_fold_learning`, the evaluation in `instant_fold_evaluation`; ROS nodes in the other
packages are thin adapters around these libraries.
"""

__version__ = "0.1.0"
