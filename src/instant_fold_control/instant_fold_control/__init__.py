"""instant_fold_control: dual-arm Cartesian control for Instant-Fold.

Plain modules hold the logic (no rclpy): `transforms` (camera <-> base extrinsics), `config`
(robot config files), `chunk` (action chunks -> interpolated trajectories), `safety` (the one
safety layer), `controller` (the controller core) and `drivers` (the driver interface, Dobot
TCP/IP V4, Franka via franky). `controller_node` is the thin ROS adapter.
"""
