"""How far a demonstrated grasp lands when it is carried onto another start's cloth (offline).

The demonstration event targets (`instant_fold_learning.policy.event_targets`) and registration
replay map each demonstrated grasp onto the current cloth through a rigid planar registration of
the demonstration keyframe (`replay.register_keyframe`, `replay.map_grasp`). This measures that
mapping without a simulator: for every tokenised episode of a query folder and the k = 0 episode of
the same garment and fold (the demonstration, from the demonstration folder), each grasp is mapped
from the demonstration's grasp frame onto the query's grasp frame (an arm's n-th grasp is paired
with the same arm's n-th in the demonstration, as the demonstration event targets pair them), and
the x, y distance to where the query's expert grasped is reported, per grasp of an arm (its first,
its second) and per local-refinement window (`ReplayConfig.grasp_refinement_m`, 0 = the rigid fit
alone). The expert's own grasp noise is part of every number (the scripted folds grasp a keypoint
with noise). With `--keypoints DETECTOR`, one more row: the rigid fit, and a grasp the demonstration
made at a named keypoint (within `--match-m` of the detector's prediction) carried to that keypoint
(when that moves it at least `--min-shift-m`)
on the query's cloth (`keypoints.mapping.keypoint_shift`); it also reports the share of grasps carried so.

    python benchmarks/bench_grasp_mapping.py --queries WORK/tokens_heldout \\
        --demos WORK/tokens_train --windows 0 0.08 0.12 0.16 --out grasp_mapping.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from instant_fold_learning.keypoints.mapping import (
    DEFAULT_MATCH_M,
    DEFAULT_MIN_SHIFT_M,
    KeypointCarrier,
    keypoint_shift,
)
from instant_fold_learning.keypoints.modeling import KeypointDetector
from instant_fold_learning.policy.data import TokenizedEpisode
from instant_fold_learning.policy.replay import Event, ReplayConfig, demo_stages, map_grasp, register_keyframe

#: Grasps per arm reported (later ones are too few to say anything).
STAGES = 2


def demonstration_of(query: Path, demos: Path) -> Path | None:
    """The k = 0 episode of the query's garment and fold, if it is another episode."""
    demo = demos / (query.stem.rsplit("__", 1)[0] + "__e000.npz")
    return demo if demo.is_file() and demo.resolve() != query.resolve() else None


def arm_grasps(arm_state: np.ndarray) -> list[list[int]]:
    """Per arm, the keyframes of its grasps in order (`replay.demo_stages`' events)."""
    grasps: list[list[int]] = [[], []]
    for stage in demo_stages(arm_state):
        for arm, event in stage.events.items():
            if event is Event.GRASP:
                grasps[arm].append(stage.keyframe)
    return grasps


def episode_errors(
    query: TokenizedEpisode,
    demo: TokenizedEpisode,
    windows: list[float],
    detector: KeypointDetector | None = None,
    match_m: float = DEFAULT_MATCH_M,
    min_shift_m: float = DEFAULT_MIN_SHIFT_M,
) -> tuple[list[list[list[float]]], list[list[bool]]]:
    """[window][n] -> x, y errors (m) of each arm's (n + 1)-th grasp, the query's against the
    demonstration's same arm's (n + 1)-th (how the demonstration event targets pair them); with a
    `detector`, one more row after the windows (the rigid fit, keypoint grasps carried by keypoint),
    and per n whether each grasp matched a keypoint."""
    arrays = (
        demo.cloth_positions.astype(np.float64),
        demo.cloth_features.astype(np.float32),
        demo.cloth_valid,
        demo.arm_state.astype(np.float64),
    )
    configs = [ReplayConfig(grasp_refinement_m=w) for w in windows]
    rows = len(windows) + (detector is not None)
    errors: list[list[list[float]]] = [[[] for _ in range(STAGES)] for _ in range(rows)]
    matched: list[list[bool]] = [[] for _ in range(STAGES)]
    for arm, (at_query, at_demo) in enumerate(
        zip(arm_grasps(query.arm_state), arm_grasps(demo.arm_state), strict=True)
    ):
        for n, (t, k) in enumerate(zip(at_query[:STAGES], at_demo[:STAGES], strict=False)):
            cloth = (
                query.cloth_positions[t].astype(np.float64),
                query.cloth_features[t].astype(np.float32),
                query.cloth_valid[t],
            )
            fit = register_keyframe(configs[0], arrays, k, cloth)
            truth = query.arm_state[t, arm, :2]
            for i, cfg in enumerate(configs):
                mapped, _ = map_grasp(cfg, fit, arrays, k, arm, cloth)
                errors[i][n].append(float(np.linalg.norm(mapped[:2] - truth)))
            if detector is not None:
                shift = keypoint_shift(KeypointCarrier(detector, match_m, min_shift_m), fit, arrays, k, arm, cloth)
                mapped, _ = map_grasp(configs[0], fit, arrays, k, arm, cloth, shift)
                errors[-1][n].append(float(np.linalg.norm(mapped[:2] - truth)))
                matched[n].append(shift is not None)
    return errors, matched


def stats(errors: list[float]) -> dict[str, float | int]:
    e = np.asarray(errors) * 100
    return {
        "grasps": int(e.size),
        "mean_cm": round(float(e.mean()), 2),
        "median_cm": round(float(np.median(e)), 2),
        "p90_cm": round(float(np.percentile(e, 90)), 2),
        "within_5cm": round(float((e < 5).mean()), 4),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--queries", required=True, help="tokenised episodes (.npz) to map the demonstrations onto")
    p.add_argument("--demos", required=True, help="the folder holding each garment and fold's __e000 episode")
    p.add_argument("--windows", type=float, nargs="+", default=[0.0, 0.08, 0.12, 0.16])
    p.add_argument("--keypoints", help="a keypoint detector (KeypointDetector.save_pretrained directory)")
    p.add_argument("--match-m", type=float, default=DEFAULT_MATCH_M, help="keypoint match distance (m)")
    p.add_argument("--min-shift-m", type=float, default=DEFAULT_MIN_SHIFT_M, help="least keypoint shift taken (m)")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    windows: list[float] = args.windows
    detector = KeypointDetector.from_pretrained(args.keypoints) if args.keypoints else None
    rows = len(windows) + (detector is not None)
    pooled: list[list[list[float]]] = [[[] for _ in range(STAGES)] for _ in range(rows)]
    matched: list[list[bool]] = [[] for _ in range(STAGES)]
    pairs = 0
    for path in sorted(Path(args.queries).glob("*.npz")):
        demo = demonstration_of(path, Path(args.demos))
        if demo is None:
            continue
        pairs += 1
        errors, hits = episode_errors(
            TokenizedEpisode.load(path), TokenizedEpisode.load(demo), windows, detector, args.match_m, args.min_shift_m
        )
        for i, per_stage in enumerate(errors):
            for s in range(STAGES):
                pooled[i][s] += per_stage[s]
        for s in range(STAGES):
            matched[s] += hits[s]
    if not pairs:
        raise SystemExit(f"--queries {args.queries}: no episode with a k = 0 demonstration in --demos {args.demos}")
    report = {
        "what": "demonstrated grasps mapped onto other starts' grasp frames (replay.map_grasp), x, y error",
        "queries": args.queries,
        "demos": args.demos,
        "pairs": pairs,
        "windows": [
            {"grasp_refinement_m": w, **{f"grasp {s + 1}": stats(pooled[i][s]) for s in range(STAGES)}}
            for i, w in enumerate(windows)
        ],
    }
    if detector is not None:
        report["keypoints"] = {
            "detector": args.keypoints,
            "match_m": args.match_m,
            "min_shift_m": args.min_shift_m,
            **{
                f"grasp {s + 1}": {**stats(pooled[-1][s]), "carried": round(float(np.mean(matched[s])), 4)}
                for s in range(STAGES)
            },
        }
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    for row in report["windows"]:
        print(row)
    if detector is not None:
        print(report["keypoints"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
