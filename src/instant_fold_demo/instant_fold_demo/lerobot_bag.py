"""A recorded demonstration (a rosbag2 MCAP bag and the keyframes `extract` found in it) as one
LeRobotDataset episode: every RGB-D frame of the bag, its keyframes flagged.

The bag side of `instant_fold_learning.lerobot_dataset export --bag`; the episode's layout (state,
action, flags, what `import` gives back) is `instant_fold_core.dataset.lerobot_format.recording_frames`.
A bag can be larger than memory (a minute of 640x480 RGB-D at 30 Hz is 4 GB), so its frames are
streamed once into memory-mapped files in a scratch folder and written from there in batches.

What each frame gets, from the bag (the same sources `extract` uses):
- colour, depth and intrinsics: the camera topics paired by stamp (`rgbd_bag.read_rgbd_frames`);
- cloth mask: the one recorded beside the images (`/cloth/mask`, the simulator's) when the bag
  has that topic, else the table-plane segmenter's (extract's default), run over every frame;
- arm state: the recorded `/arms/state` (a robot's, or the simulated demonstrator's) when the bag
  has it; a human demonstration has none, and its episode holds the keyposes instead.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from instant_fold_core.dataset.lerobot_format import LeRobotEpisode, LeRobotFormatError, recording_frames
from instant_fold_core.demonstration import load_demonstration
from instant_fold_demo.bag import BagError, bag_topics
from instant_fold_demo.extract import ARM_STATE_TOPIC, MASK_TOPIC, RecordedMasks, states_per_frame
from instant_fold_demo.files import events_path
from instant_fold_demo.rgbd_bag import CameraTopics, read_arm_states, read_rgbd_frames
from instant_fold_perception.segmentation import Segmenter


def _frames_to_disk(
    bag: Path, segmenter: Segmenter, files: dict[str, BinaryIO]
) -> tuple[list[int], np.ndarray, tuple[int, int]]:
    """Append every frame's colour, depth and mask bytes to `files`; return the frames' stamps,
    the intrinsics and the image size (one size and one camera per recording)."""
    stamps: list[int] = []
    intrinsics: np.ndarray | None = None
    size: tuple[int, int] | None = None
    for frame in read_rgbd_frames(bag, CameraTopics()):
        if size is None:
            size, intrinsics = frame.depth.shape, frame.intrinsics.astype(np.float32)
        elif frame.depth.shape != size:
            raise BagError(f"bag {bag}: frame {frame.frame_number} is {frame.depth.shape}, the first was {size}")
        files["color"].write(np.ascontiguousarray(frame.color, np.uint8).tobytes())
        files["depth"].write(np.ascontiguousarray(frame.depth, np.float32).tobytes())
        files["mask"].write(np.asarray(segmenter.segment(frame), bool).tobytes())
        stamps.append(frame.stamp_ns)
    if intrinsics is None or size is None:  # read_rgbd_frames refuses a bag without frames first
        raise BagError(f"bag {bag}: no RGB-D frames")
    return stamps, intrinsics, size


@contextmanager
def bag_episode(bag: str | Path, keyframes: str | Path, scratch: str | Path | None = None) -> Iterator[LeRobotEpisode]:
    """The episode of `bag` with the keyframes of the demonstration file `keyframes` (what
    `python -m instant_fold_demo.extract BAG --out KEYFRAMES` wrote, corrected or not), valid
    inside the `with` block (its frames are memory maps in a temporary folder under `scratch`).

    Refused with one line: a missing keyframes file, keyframes of another recording (its events
    JSON counts other frames, or a keyframe lies past the bag's end), a bag that is damaged,
    unfinished or lacks a camera topic, the mask or arm-state topics with the wrong type.
    """
    bag, keyframes = Path(bag), Path(keyframes)
    if not keyframes.is_file():
        raise LeRobotFormatError(
            f"no keyframes file {keyframes} for bag {bag}: extract them first "
            f"(python -m instant_fold_demo.extract {bag} --out {keyframes})"
        )
    demo = load_demonstration(keyframes)
    topics = bag_topics(bag)
    segmenter: Segmenter
    if MASK_TOPIC in topics:
        segmenter, mask_source = RecordedMasks(bag, MASK_TOPIC), f"recorded {MASK_TOPIC}"
    else:
        from instant_fold_perception.segmentation.plane import PlaneSegmenter

        segmenter, mask_source = PlaneSegmenter(), "table-plane segmenter"
    with tempfile.TemporaryDirectory(prefix=".lerobot-bag-", dir=scratch) as tmp:
        folder = Path(tmp)
        paths = {key: folder / f"{key}.bin" for key in ("color", "depth", "mask")}
        with open(paths["color"], "wb") as c, open(paths["depth"], "wb") as d, open(paths["mask"], "wb") as m:
            stamps, intrinsics, (h, w) = _frames_to_disk(bag, segmenter, {"color": c, "depth": d, "mask": m})
        t = len(stamps)
        report = events_path(keyframes)
        if report.is_file():
            counted = json.loads(report.read_text()).get("frames")
            if counted is not None and counted != t:
                raise LeRobotFormatError(
                    f"{keyframes} was extracted from a recording of {counted} frames, bag {bag} has {t} "
                    "(keyframes of another recording?)"
                )
        state = None
        if ARM_STATE_TOPIC in topics:
            state_stamps, states = read_arm_states(bag, ARM_STATE_TOPIC)
            state = states_per_frame(stamps, state_stamps, states, ARM_STATE_TOPIC)
        info: dict[str, Any] = {
            "source": "bag", "bag": str(bag), "keyframes_file": str(keyframes), "mask": mask_source,
            "state": f"recorded {ARM_STATE_TOPIC}" if state is not None else "keyposes (no arm state recorded)",
            "first_stamp_ns": stamps[0], "last_stamp_ns": stamps[-1],
        }  # fmt: skip
        yield recording_frames(
            color=np.memmap(paths["color"], np.uint8, "r", shape=(t, h, w, 3)),
            depth=np.memmap(paths["depth"], np.float32, "r", shape=(t, h, w)),
            mask=np.memmap(paths["mask"], np.bool_, "r", shape=(t, h, w)),
            intrinsics=intrinsics,
            state=state,
            demo=demo,
            info=info,
        )
