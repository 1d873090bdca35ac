"""`evaluate_policy` (`python -m instant_fold_evaluation.evaluate_policy`): offline checks of a trained policy
on tokenised episodes: action error, first grasps, arm sensitivity, target following
(`instant_fold_evaluation.offline`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from instant_fold_core.checkpoint import CheckpointError
from instant_fold_evaluation import offline as library
from instant_fold_evaluation.arm_sensitivity import (
    DEFAULT_FRAMES_PER_ARM,
    DEFAULT_SHIFTS_M,
)
from instant_fold_evaluation.offline import DEMO_SOURCES, evaluate
from instant_fold_learning.policy.data import PolicyDataError


def main(argv: list[str] | None = None) -> int:
    """The `evaluate_policy` CLI; 2 when the checkpoint or data cannot be read, 1 when the predictions are not finite."""
    parser = argparse.ArgumentParser(prog="evaluate_policy", description=library.__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", required=True, help="InstantFoldPolicy.save_pretrained directory")
    parser.add_argument("--data", required=True, help="tokenised training episodes (*.npz)")
    parser.add_argument("--heldout", help="tokenised held-out episodes (*.npz)")
    parser.add_argument("--samples", type=int, default=256, help="frames per split for the action error")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-frames", type=int, default=80, help="rollout budget (frames) for the first grasps")
    parser.add_argument(
        "--demo-source",
        choices=DEMO_SOURCES,
        default="other",
        help="first grasps: a demonstration from another start of the query's garment and mode, or the query's own "
        "episode (its own layout: separates closed-loop drift from carrying the demonstration to a new layout)",
    )
    parser.add_argument(
        "--sensitivity-frames",
        type=int,
        default=DEFAULT_FRAMES_PER_ARM,
        help="arm sensitivity of the keypose: frames probed per arm and episode before its first grasp (0: skip)",
    )
    parser.add_argument(
        "--sensitivity-shifts-cm",
        type=float,
        nargs="+",
        default=[100 * s for s in DEFAULT_SHIFTS_M],
        help="arm sensitivity: sideways arm shifts (cm), each along camera x and y with both signs",
    )
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args(argv)
    if args.sensitivity_frames < 0:
        parser.error("--sensitivity-frames must be >= 0")
    try:
        result = evaluate(
            args.checkpoint,
            args.data,
            args.heldout,
            args.samples,
            args.seed,
            args.max_frames,
            args.demo_source,
            args.sensitivity_frames,
            tuple(s / 100 for s in args.sensitivity_shifts_cm),
        )
    except (PolicyDataError, CheckpointError) as exc:
        print(f"evaluate_policy: {exc}", file=sys.stderr)
        return 2
    for split in ("train", "heldout"):
        if split in result:
            r = result[split]
            print(
                f"{split}: {r['episodes']} episodes, action error {r['action_error_cm']:.2f} cm "
                f"({r['action_error_frames']} frames), first grasp {json.dumps(r['first_grasp'])}"
            )
            if "slope_median" in r.get("arm_sensitivity", {}):
                a = r["arm_sensitivity"]
                print(
                    f"{split}: keypose arm sensitivity |Δkeypose|/|Δarm| median {a['slope_median']:.2f}, "
                    f"mean {a['slope_mean']:.2f} ({a['probes']} frames x {len(a['by_shift'])} shifts; "
                    "0 = follows the cloth, 1 = moves with the arm)"
                )
            if "slope_median" in r.get("target_following", {}):
                f = r["target_following"]
                print(
                    f"{split}: trajectory target following |Δchunk end|/|Δtarget| median {f['slope_median']:.2f}, "
                    f"mean {f['slope_mean']:.2f} ({f['probes']} approach frames x {len(f['by_shift'])} shifts; "
                    f"0 = ignores its target, a straight follower: {f['follower_slope_median']:.2f})"
                )
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    nonfinite = [s for s in ("train", "heldout") if s in result and not np.isfinite(result[s]["action_error_cm"])]
    if nonfinite:
        print(f"evaluate_policy: the policy's predictions are not finite ({', '.join(nonfinite)})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
