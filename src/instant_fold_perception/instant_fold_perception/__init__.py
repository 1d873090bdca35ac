"""Perception: RGB-D cameras (RealSense live or recorded), cloth segmentation, cloth tokens.

Device access and segmentation algorithms are plain modules; `*_node.py` files adapt them to ROS.
"""
