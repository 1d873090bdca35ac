"""Read a LeRobotDataset folder with LeRobot's own `LeRobotDataset`; print what it saw as JSON.

Run by `test_lerobot_dataset.py` with the Python of the isolated `.venv-lerobot` (lerobot pins
another torch and numpy than the workspace, docs/lerobot.md), so it imports nothing of ours.
Usage: python lerobot_reader.py DATASET_DIR
"""

from __future__ import annotations

import json
import sys


def main(root: str) -> None:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    dataset = LeRobotDataset("local/instant_fold_export", root=root)
    frames = [dataset[i] for i in range(len(dataset))]
    print(
        json.dumps(
            {
                "num_frames": dataset.num_frames,
                "num_episodes": dataset.num_episodes,
                "len": len(dataset),
                "camera_keys": dataset.meta.camera_keys,
                "episode_index": [int(f["episode_index"]) for f in frames],
                "frame_index": [int(f["frame_index"]) for f in frames],
                "task": [f["task"] for f in frames],
                "action": [f["action"].tolist() for f in frames],
                "state": [f["observation.state"].tolist() for f in frames],
                "keyframe": [bool(f["keyframe"]) for f in frames],
                "gripper_event": [f["gripper_event"].tolist() for f in frames],
                # LeRobot hands images out as float [3, H, W] in [0, 1]: back to uint8 sums per frame
                "image_sum": [int((f["observation.images.overhead"] * 255).round().long().sum()) for f in frames],
                "image_shape": list(frames[0]["observation.images.overhead"].shape),
                "depth_sum": [float(f["observation.depth"].double().sum()) for f in frames],
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1])
