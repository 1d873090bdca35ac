"""Instant-Fold core library.

Pure Python + PyTorch: everything here runs without ROS so it can be tested, trained and
benchmarked anywhere. ROS nodes in the other packages are thin adapters around this library.
"""

__version__ = "0.1.0"
