"""Instant-Fold cloth simulation on Newton: garments, keypoints, folding programs, rendering, data.

Entry points: `rollout.run_episode` (one simulated demonstration as an `Episode`),
`generate` (the dataset CLI), `viewer` (MP4/GIF + keyframe strips). No ROS imports here.
"""

__version__ = "0.1.0"
