"""Bag -> demonstration: `python -m instant_fold_demo.extract BAG --out demo.safetensors`.

Reads the camera topics of a recorded bag (never writes to it), segments the cloth (table-plane
segmenter by default), tracks the hands (MediaPipe), extracts the keyframes (`keyframes`) and
writes the `Demonstration` file the policy server loads plus `<out>.events.json` with every
event's evidence. `--review` then opens the correction page on the result.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from instant_fold_core.demonstration import Demonstration, DemonstrationError
from instant_fold_core.rgbd import RGBDFrame
from instant_fold_demo.bag import BagError
from instant_fold_demo.hands import HandDetector, HandTrackingError, MediaPipeHandDetector
from instant_fold_demo.keyframes import (
    ExtractionConfig,
    ExtractionError,
    build_demonstration,
    events_json,
    extract_events,
    observe,
    plan_keyframes,
)
from instant_fold_demo.rgbd_bag import CameraTopics, read_rgbd_frames
from instant_fold_perception.segmentation import Segmenter


def events_path(demo_path: Path) -> Path:
    """Where the events JSON of a demonstration file lives."""
    return demo_path.with_name(demo_path.name.removesuffix(".safetensors") + ".events.json")


def demonstration_from_bag(
    bag: str | Path,
    detector: HandDetector,
    segmenter: Segmenter,
    config: ExtractionConfig | None = None,
    topics: CameraTopics | None = None,
    name: str = "",
) -> tuple[Demonstration, dict]:
    """The demonstration and the events JSON of a recorded bag (see `keyframes`)."""
    config = config or ExtractionConfig()
    topics = topics or CameraTopics()
    obs = observe(read_rgbd_frames(bag, topics), detector, segmenter, config)

    def read_frame(i: int) -> RGBDFrame:
        return next(read_rgbd_frames(bag, topics, indices=[i]))

    events = extract_events(obs, read_frame, config)
    plans = plan_keyframes(events, len(obs), config)
    needed = sorted({p.image_frame for p in plans})
    frames = {f.frame_number: f for f in read_rgbd_frames(bag, topics, indices=needed)}
    masks = {i: obs[i].mask for i in needed}
    demo = build_demonstration(plans, frames, masks, name or Path(bag).name)
    report = events_json(events, obs, config)
    report["bag"] = str(bag)
    return demo, report


def save(demo: Demonstration, report: dict, out: Path) -> None:
    demo.save(out)
    events_path(out).write_text(json.dumps(report, indent=2))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m instant_fold_demo.extract", description=__doc__.splitlines()[0])
    p.add_argument("bag", type=Path, help="recorded bag folder (record_demo)")
    p.add_argument("--out", type=Path, required=True, help="demonstration file to write (.safetensors)")
    p.add_argument("--name", default="", help="demonstration name (default: the bag's)")
    p.add_argument("--mirror", action="store_true", help="the demonstrator faces the robot: swap arms")
    p.add_argument("--hand-model", type=Path, default=None, help="MediaPipe hand_landmarker.task (default: set-up's)")
    p.add_argument("--force", action="store_true", help="replace an existing demonstration file")
    p.add_argument("--review", action="store_true", help="open the correction page afterwards")
    args = p.parse_args(argv)
    if args.out.exists() and not args.force:
        print(f"error: {args.out} exists (use --force to replace it)", file=sys.stderr)
        return 2
    from instant_fold_perception.segmentation.plane import PlaneSegmenter

    try:
        with MediaPipeHandDetector(args.hand_model) as detector:
            demo, report = demonstration_from_bag(
                args.bag, detector, PlaneSegmenter(), replace(ExtractionConfig(), mirror=args.mirror), name=args.name
            )
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

        serve(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
