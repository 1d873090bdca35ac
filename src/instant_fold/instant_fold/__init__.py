"""Instant-Fold bringup: node graphs, launch files, default configuration and the process runner.

A graph is described once in YAML (config/graphs/*.yaml). `ros2 launch` reads it through the
launch files in launch/, and where ROS 2 is installed from wheels (no `ros2 launch`) the process
runner starts the very same nodes, with the same parameter files, as separate processes.
"""
