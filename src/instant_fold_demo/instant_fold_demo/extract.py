"""Bag -> demonstration: `python -m instant_fold_demo.extract BAG --out demo.safetensors`.

Reads the camera topics of a recorded bag (never writes to it), segments the cloth (table-plane
segmenter by default, or the mask recorded beside the images with `--mask recorded`), finds the
grasps and releases and writes the `Demonstration` file the policy server loads plus
`<out>.events.json` with every event's evidence. `--review` then opens the correction page.

Grasps and releases come from the demonstrator's hands (MediaPipe, `--events hands`, default) or,
for a demonstration the robot itself performed (the simulated arms, a teleoperated robot), from
the recorded arm state (`--events arm-state`: the gripper openness of `arms/state`); the
simulator renders no hands, so its recordings use the latter.

Everything that can be refused is refused before the extraction starts (an existing output or
events JSON without `--force`, an output folder that cannot be created or written); a failure at
the end (a full disk) leaves no partial file and says so. One line on stderr, exit status 1 (2
for a refused command line), never a traceback.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
from safetensors import SafetensorError

from instant_fold_core.demonstration import Demonstration, DemonstrationError
from instant_fold_core.errors import InvalidInputError
from instant_fold_core.rgbd import RGBDFrame
from instant_fold_demo.bag import BagError, bag_topics
from instant_fold_demo.files import events_path, user_file_mode
from instant_fold_demo.hands import HandDetector, HandTrackingError, MediaPipeHandDetector, quiet_native_logs
from instant_fold_demo.keyframes import (
    ExtractionConfig,
    ExtractionError,
    build_demonstration,
    events_from_arm_states,
    events_json,
    extract_events,
    hand_details,
    observe,
    plan_keyframes,
)
from instant_fold_demo.rgbd_bag import CameraTopics, Stamps, read_arm_states, read_masks, read_rgbd_frames
from instant_fold_perception.segmentation import Segmenter

#: Where the simulated robot's (and the controller's) arm state and the simulator's mask are recorded.
ARM_STATE_TOPIC, HOME_TOPIC, MASK_TOPIC = "/arms/state", "/arms/home", "/cloth/mask"
#: An arm state belongs to a frame when stamped at most this much after it (the simulator stamps
#: both from one frame counter; the two roundings may differ by a nanosecond).
STAMP_TOLERANCE_NS = 1_000_000
#: The OS errors of a full disk, a quota or a file-size limit.
NO_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


class RecordedMasks:
    """`Segmenter` answering with the cloth mask recorded beside each frame (same header stamp):
    the simulator's exact mask, where the plane segmenter cannot separate its single-layer cloth
    from the table (docs/demonstrations.md)."""

    def __init__(self, bag: str | Path, topic: str = MASK_TOPIC) -> None:
        self.topic = topic
        self._masks = read_masks(bag, topic)

    def segment(self, frame: RGBDFrame) -> np.ndarray:
        packed = self._masks.get(frame.stamp_ns)
        if packed is None:
            raise ExtractionError(
                f"frame {frame.frame_number} (stamp {frame.stamp_ns} ns) has no recorded mask on {self.topic}"
            )
        h, w = frame.depth.shape
        return np.unpackbits(packed, count=h * w).reshape(h, w).astype(bool)


def _recorded_home(bag: str | Path, first: np.ndarray) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
    """The robot's home as it published it (latched `arms/home`), else where the arms started."""
    if HOME_TOPIC in bag_topics(bag):
        _, homes = read_arm_states(bag, HOME_TOPIC)
        first = homes[-1]
    left, right = ((float(first[a, 0]), float(first[a, 1]), float(first[a, 2])) for a in (0, 1))
    return left, right


def states_per_frame(stamps: list[int], state_stamps: np.ndarray, states: np.ndarray, topic: str) -> np.ndarray:
    """[T, 2, 4]: for each frame the latest arm state stamped at or before it."""
    at = np.searchsorted(state_stamps, np.asarray(stamps, np.int64) + STAMP_TOLERANCE_NS, side="right") - 1
    if at[0] < 0:
        raise ExtractionError(
            f"no arm state on {topic} at or before the first frame (stamp {stamps[0]} ns; the first state is "
            f"stamped {int(state_stamps[0])} ns): were the images and the arm state stamped by one clock?"
        )
    return states[at]


def demonstration_from_bag(
    bag: str | Path,
    detector: HandDetector | None,
    segmenter: Segmenter,
    config: ExtractionConfig | None = None,
    topics: CameraTopics | None = None,
    name: str = "",
    arm_state_topic: str = ARM_STATE_TOPIC,
    stamps: Stamps = "header",
) -> tuple[Demonstration, dict]:
    """The demonstration and the events JSON of a recorded bag (see `keyframes`): events from the
    hands `detector` sees, or with `detector=None` from the arm state recorded on `arm_state_topic`."""
    config = config or ExtractionConfig()
    topics = topics or CameraTopics()

    def read_frame(i: int) -> RGBDFrame:
        return next(read_rgbd_frames(bag, topics, indices=[i], stamps=stamps))

    if detector is not None:
        obs = observe(read_rgbd_frames(bag, topics, stamps=stamps), detector, segmenter, config)
        events = extract_events(obs, read_frame, config)
        num_frames, masks_of = len(obs), (lambda i: obs[i].mask)
        details = hand_details(obs)
    else:
        frames = [(f.stamp_ns, f.intrinsics) for f in read_rgbd_frames(bag, topics, stamps=stamps)]
        state_stamps, states = read_arm_states(bag, arm_state_topic)
        per_frame = states_per_frame([s for s, _ in frames], state_stamps, states, arm_state_topic)
        events = events_from_arm_states(per_frame, frames[0][1], arm_state_topic)
        config = replace(config, home=_recorded_home(bag, per_frame[0]))
        num_frames, details = len(frames), {"arm_state_topic": arm_state_topic}
        masks_of = None
    plans = plan_keyframes(events, num_frames, config)
    needed = sorted({p.image_frame for p in plans})
    images = {f.frame_number: f for f in read_rgbd_frames(bag, topics, indices=needed, stamps=stamps)}
    masks = {i: (masks_of(i) if masks_of else np.asarray(segmenter.segment(images[i]), bool)) for i in needed}
    demo = build_demonstration(plans, images, masks, name or Path(bag).name)
    report = events_json(events, num_frames, config, **details)
    report["bag"] = str(bag)
    return demo, report


def save(demo: Demonstration, report: dict, out: Path) -> None:
    """Write the demonstration and its events JSON with the user's permissions; on failure (a
    full disk) remove what was half written and raise `DemonstrationError` saying so."""
    written: list[Path] = []
    try:
        demo.save(out)
        written.append(out)
        events_path(out).write_text(json.dumps(report, indent=2))
        written.append(events_path(out))
        for path in written:
            path.chmod(user_file_mode())
    except (OSError, SafetensorError) as exc:
        for path in (*written, out.with_name(out.name + ".tmp")):
            path.unlink(missing_ok=True)
        # safetensors reports the OS error in its message only ("... (os error 28)").
        full = any(getattr(exc, "errno", None) == n or f"(os error {n})" in str(exc) for n in NO_SPACE)
        cause = "no space left on the device: free disk space or write elsewhere" if full else str(exc)
        raise DemonstrationError(f"cannot write {out} ({cause}); nothing was written") from exc


class OutputRefused(InvalidInputError):
    """`--out` cannot be written: it exists (exit status 2, as a refused command line) or its
    folder cannot be created or written (1)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def check_output(out: Path, force: bool) -> None:
    """Refuse, before any work, an output that exists (or whose events JSON exists) without
    `force`, or whose folder cannot be created or written; create the folder otherwise."""
    for path in (out, events_path(out)):
        if (path.exists() or path.is_symlink()) and not force:
            raise OutputRefused(f"{path} exists (use --force to replace it)", 2)
    if out.is_dir():
        raise OutputRefused(f"{out} is a folder: --out names the demonstration file to write", 2)
    existing = out.parent
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise OutputRefused(f"cannot write {out}: {existing} is not a folder", 1)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputRefused(f"cannot create the folder {out.parent} for {out.name}: {exc.strerror}", 1) from exc
    if not os.access(out.parent, os.W_OK | os.X_OK):
        raise OutputRefused(f"cannot write {out}: no write permission in {out.parent}", 1)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m instant_fold_demo.extract", description=__doc__.splitlines()[0])
    p.add_argument("bag", type=Path, help="recorded bag folder (record_demo)")
    p.add_argument("--out", type=Path, required=True, help="demonstration file to write (.safetensors)")
    p.add_argument("--name", default="", help="demonstration name (default: the bag's)")
    p.add_argument(
        "--events",
        choices=("hands", "arm-state"),
        default="hands",
        help="grasps and releases from the demonstrator's hands (MediaPipe) or from the recorded "
        f"robot arm state ({ARM_STATE_TOPIC}; a simulated or teleoperated demonstration)",
    )
    p.add_argument(
        "--mask",
        choices=("plane", "recorded"),
        default="plane",
        help=f"cloth mask from the table-plane segmenter or recorded beside the images ({MASK_TOPIC}; the simulator's)",
    )
    p.add_argument(
        "--stamps",
        choices=("header", "receive"),
        default="header",
        help="order frames by their header stamps, or by when the recorder received them (a camera whose "
        "stamps do not increase)",
    )
    p.add_argument("--mirror", action="store_true", help="the demonstrator faces the robot: swap arms")
    p.add_argument("--hand-model", type=Path, default=None, help="MediaPipe hand_landmarker.task (default: set-up's)")
    p.add_argument("--force", action="store_true", help="replace an existing demonstration file and events JSON")
    p.add_argument("--review", action="store_true", help="open the correction page afterwards")
    p.add_argument("--host", default="127.0.0.1", help="with --review: address the page listens on")
    p.add_argument("--port", type=int, default=8765, help="with --review: port of the page")
    args = p.parse_args(argv)
    if args.stamps == "receive" and (args.mask == "recorded" or args.events == "arm-state"):
        p.error("--stamps receive pairs nothing by header stamp: use it with --events hands --mask plane")
    try:
        check_output(args.out, args.force)
    except OutputRefused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.status
    try:
        demo, report = _extract(args)
        save(demo, report, args.out)
    except (BagError, HandTrackingError, ExtractionError, DemonstrationError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for warning in report["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    print(
        f"{args.out}: {demo.num_keyframes} keyframes from {len(report['events'])} events; evidence in {events_path(args.out)}"
    )
    if args.review:
        from instant_fold_demo.correction import serve

        serve(args.out, args.host, args.port)
    return 0


def _extract(args: argparse.Namespace) -> tuple[Demonstration, dict]:
    """The extraction `main` asked for (MediaPipe's native log lines kept off the terminal)."""
    from instant_fold_perception.segmentation.plane import PlaneSegmenter

    segmenter: Segmenter = RecordedMasks(args.bag) if args.mask == "recorded" else PlaneSegmenter()
    config = replace(ExtractionConfig(), mirror=args.mirror)

    def run(detector: HandDetector | None) -> tuple[Demonstration, dict]:
        return demonstration_from_bag(args.bag, detector, segmenter, config, name=args.name, stamps=args.stamps)

    if args.events == "arm-state":
        return run(None)
    with quiet_native_logs(), MediaPipeHandDetector(args.hand_model) as detector:
        return run(detector)


if __name__ == "__main__":
    sys.exit(main())
