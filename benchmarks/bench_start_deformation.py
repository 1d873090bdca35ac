"""How far the start states of one garment differ beyond a rigid motion (the layout's sleeve disturbance).

A same-init benchmark rollout carries the demonstration (the scripted fold from the start of
`demo_k`) onto another start of the same garment; a rigid map can do that only as far as the two
starts differ by a rigid motion. The layout randomisation (`randomization.initial_layout`) is a
rigid pose plus two non-rigid parts: the wrinkle field and the sleeve disturbance, which rotates the
particles whose x lies beyond a shoulder's about that shoulder (±30°) and shifts them (4-8 cm sim).
In every preset that selection is by x, not by sleeve: on a garment whose hem is wider than its
shoulders it takes the hem corners too; `--sleeve-selection sleeve` measures the same starts with
the sleeve's own particles selected (`DRRanges.sleeve_selection`, the fix). This measures it for the starts of benchmark specs, built exactly as the
evaluation builds them (`BenchmarkSpec.inits` / `demo_seed` seeds, `rollout.start_state`, keypoints
`keypoints.detect_keypoints`), per garment and start k:

- the share of particles the sleeve disturbance moved, per side (each drawn side alone, from the
  canonical garment, as `initial_layout` moves it) and together, the drawn angles, and which named
  keypoints it moved;
- the hem width (bottom_left - bottom_right) of the flat garment and of the start;
- against the demonstration's start (k = `demo_k`): the best rigid 2D map with known particle
  correspondences (least squares over all particles, proper rotation), the residual of each named
  keypoint after it, the largest, and whether that exceeds the simulated gripper's grasp radius
  (`ClothSimConfig.grasp_radius`; a grasp pins the particles within it of the gripper).

Every number is given for the pre-drop layout (`initial_layout` of the accepted draw, x, y) and for
the settled start state (after the drop, as every episode and rollout begins); lengths are camera
centimetres (simulation metres x `GenerationConfig.obs_scale`). Where the spec's oracle bank
exists, each settled start is checked against the bank's stored start keypoints.

    OMP_NUM_THREADS=1 nice -n 19 python benchmarks/bench_start_deformation.py \\
        --benchmarks cpu cpu_garments --out docs/results/start_deformation.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from instant_fold_evaluation.benchmark import BenchmarkSpec
    from instant_fold_sim.randomization import Randomization
    from instant_fold_sim.rollout import GenerationConfig

#: Where a spec's oracle bank is looked for (`<root>/<spec name>`), to check the rebuilt starts.
BANK_ROOT = Path("models/oracle_banks")


def rigid_fit(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The proper 2D rotation R and translation t minimising sum |R src_i + t - dst_i|^2 over
    corresponding points [N, 2] (Kabsch; no reflection)."""
    ms, md = src.mean(0), dst.mean(0)
    u, _, vt = np.linalg.svd((src - ms).T @ (dst - md))
    d = np.diag([1.0, np.sign(np.linalg.det(vt.T @ u.T))])
    rotation = vt.T @ d @ u.T
    return rotation, md - rotation @ ms


def rigid_residuals(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, float]:
    """Per point, the distance left after the best rigid map of `src` onto `dst` (x, y), and its
    rotation angle in degrees."""
    rotation, shift = rigid_fit(src, dst)
    mapped = src @ rotation.T + shift
    return np.linalg.norm(mapped - dst, axis=1), float(np.degrees(np.arctan2(rotation[1, 0], rotation[0, 0])))


def disturbance_only(dr: Randomization, sides: list[str]) -> Randomization:
    """`dr` reduced to the sleeve disturbance of `sides`: no pose, wrinkles or drop height."""
    return dataclasses.replace(
        dr,
        translation=(0.0, 0.0),
        rotation_deg=0.0,
        drop_height=0.0,
        sleeve_amplitude={s: dr.sleeve_amplitude[s] for s in sides},
        sleeve_direction_deg={s: dr.sleeve_direction_deg[s] for s in sides},
        sleeve_rotation_deg={s: dr.sleeve_rotation_deg[s] for s in sides},
        wrinkle=False,
    )


def moved_mask(
    canonical: np.ndarray, kp_ids: np.ndarray, dr: Randomization, sides: list[str], labels: np.ndarray | None
) -> np.ndarray:
    """The particles `initial_layout` moves in x, y for the sleeve disturbance of `sides` of `dr`
    (measured by running it, so the selection is the code's, not a copy of it)."""
    from instant_fold_sim.randomization import initial_layout

    layout = initial_layout(canonical, kp_ids, disturbance_only(dr, sides), labels)
    return np.linalg.norm(layout[:, :2] - canonical[:, :2], axis=1) > 1e-9


def state_numbers(
    xy: np.ndarray, demo_xy: np.ndarray | None, kp_ids: np.ndarray, names: tuple[str, ...], cm: float, radius_cm: float
) -> dict[str, Any]:
    """Hem width of one state, and (for a start other than the demonstration's) its rigid-fit
    residuals against the demonstration's start."""
    bl, br = kp_ids[names.index("bottom_left")], kp_ids[names.index("bottom_right")]
    out: dict[str, Any] = {"hem_width_cm": round(float(np.linalg.norm(xy[bl] - xy[br])) * cm, 2)}
    if demo_xy is not None:
        residual, angle = rigid_residuals(demo_xy, xy)
        per_kp = residual[kp_ids] * cm
        worst = int(per_kp.argmax())
        out["vs_demo"] = {
            "rotation_deg": round(angle, 2),
            "rms_all_particles_cm": round(float(np.sqrt((residual**2).mean())) * cm, 2),
            "keypoint_residual_cm": {n: round(float(e), 2) for n, e in zip(names, per_kp, strict=True)},
            "max_keypoint": names[worst],
            "max_keypoint_residual_cm": round(float(per_kp[worst]), 2),
            "exceeds_grasp_radius": bool(per_kp[worst] > radius_cm),
        }
    return out


def bank_check(spec: BenchmarkSpec, garment: str, seed: int, keypoints: np.ndarray) -> float | None:
    """Largest distance (sim m) between this start's settled keypoints and the ones the spec's
    oracle bank stored for it; None without a bank entry."""
    from instant_fold_evaluation.oracle_bank import BankKey, OracleBank

    root = BANK_ROOT / spec.name
    if not (root / "bank.json").is_file():
        return None
    entry = OracleBank.open(root).load(BankKey(garment, seed, spec.seen[0]))
    if entry is None:
        return None
    return float(np.abs(entry.init.start_keypoints - keypoints).max())


def measure_garment(spec: BenchmarkSpec, garment_spec: str, config: GenerationConfig) -> dict[str, Any]:
    from instant_fold_core.dataset.schema import KEYPOINT_NAMES
    from instant_fold_sim.garments import resolve_garment
    from instant_fold_sim.keypoints import detect_keypoints
    from instant_fold_sim.randomization import initial_layout
    from instant_fold_sim.rollout import sleeve_labels, start_state

    names = tuple(KEYPOINT_NAMES)
    cm = 100.0 * config.obs_scale
    radius_cm = config.sim.grasp_radius * cm
    garment = resolve_garment(garment_spec, spacing=config.garment_spacing, max_particles=config.max_particles)
    kp_ids = detect_keypoints(garment.vertices)
    canonical = garment.vertices * config.sim.garment_scale
    labels = sleeve_labels(garment, config)
    beyond = {s: moved_mask(canonical, kp_ids, pure_shift(config, s), [s], labels) for s in ("left", "right")}
    flat = state_numbers(canonical[:, :2], None, kp_ids, names, cm, radius_cm)
    result: dict[str, Any] = {
        "garment": garment_spec,
        "garment_id": garment.garment_id,
        "particles": int(garment.num_particles),
        "flat_hem_width_cm": flat["hem_width_cm"],
        "flat_shoulder_width_cm": round(
            float(
                np.linalg.norm(
                    canonical[kp_ids[names.index("left_shoulder")], :2]
                    - canonical[kp_ids[names.index("right_shoulder")], :2]
                )
            )
            * cm,
            2,
        ),
        "selectable_share": {s: round(float(m.mean()), 4) for s, m in beyond.items()},
        "selectable_keypoints": {s: [n for n, i in zip(names, kp_ids, strict=True) if m[i]] for s, m in beyond.items()},
        "starts": [],
    }
    seeds = {spec.demo_k: spec.demo_seed(garment_spec)} | {
        i.k: i.seed for i in spec.inits() if i.garment == garment_spec
    }
    demo: dict[str, np.ndarray] = {}
    scene = None
    for k, seed in seeds.items():
        t0 = time.perf_counter()
        start = start_state(garment, seed, config, kp_ids, scene=scene)
        scene = start.scene
        dr = start.dr
        sides = sorted(dr.sleeve_amplitude)
        masks = {s: moved_mask(canonical, kp_ids, dr, [s], labels) for s in sides}
        together = moved_mask(canonical, kp_ids, dr, sides, labels) if sides else np.zeros(len(canonical), bool)
        states = {"pre_drop": initial_layout(canonical, kp_ids, dr, labels)[:, :2]}
        states["settled"] = start.scene.positions()[:, :2].astype(np.float64)
        if k == spec.demo_k:
            demo = states
        row: dict[str, Any] = {
            "k": k,
            "role": "demonstration" if k == spec.demo_k else "rollout start",
            "seed": int(seed),
            "layout_attempts": int(start.layout_attempts),
            "sleeve_mode": dr.sleeve_mode,
            "sleeve_rotation_deg": {s: round(dr.sleeve_rotation_deg[s], 2) for s in sides},
            "sleeve_shift_cm": {s: round(dr.sleeve_amplitude[s] * cm, 2) for s in sides},
            "pose_rotation_deg": round(dr.rotation_deg, 2),
            "wrinkle": dr.wrinkle,
            "moved_share": {
                **{s: round(float(masks[s].mean()), 4) if s in masks else 0.0 for s in ("left", "right")},
                "total": round(float(together.mean()), 4),
            },
            "moved_keypoints": [n for n, i in zip(names, kp_ids, strict=True) if together[i]],
        }
        for label, xy in states.items():
            row[label] = state_numbers(xy, None if k == spec.demo_k else demo[label], kp_ids, names, cm, radius_cm)
        if k != spec.demo_k and labels is None:  # the banks were built with the starts selected by x
            diff = bank_check(spec, garment_spec, seed, start.scene.positions()[kp_ids].astype(np.float64))
            row["bank_start_keypoints_max_diff_m"] = None if diff is None else float(f"{diff:.3g}")
        row["seconds"] = round(time.perf_counter() - t0, 2)
        result["starts"].append(row)
    return result


def pure_shift(config: GenerationConfig, side: str) -> Randomization:
    """A draw whose only effect is a shift of `side`'s disturbance (no rotation, pose or wrinkles):
    it moves exactly the particles that side's disturbance selects on the canonical garment."""
    from instant_fold_sim.randomization import sample_randomization

    dr = sample_randomization(np.random.default_rng(0), config.dr, config.resolution)
    return dataclasses.replace(
        dr, sleeve_amplitude={side: 0.05}, sleeve_direction_deg={side: 0.0}, sleeve_rotation_deg={side: 0.0}
    )


def table(garments: list[dict[str, Any]], radius_cm: float) -> str:
    """One line per start: draws, moved share, hem width, the largest keypoint residual of the best
    rigid map from the demonstration's start (settled; pre-drop in brackets)."""
    lines = [
        f"{'garment':<11} {'k':>2} {'mode':>4} {'rot L/R deg':>11} {'moved L/R/all %':>15} "
        f"{'hem cm flat/pre/set':>19}  max kp residual cm, settled (pre-drop); * > grasp radius {radius_cm:.1f} cm",
    ]
    for g in garments:
        for s in g["starts"]:
            drawn = s["sleeve_rotation_deg"]
            rot = "/".join(f"{drawn[side]:+.0f}" if side in drawn else "-" for side in ("left", "right"))
            ms = s["moved_share"]
            moved = f"{100 * ms['left']:.0f}/{100 * ms['right']:.0f}/{100 * ms['total']:.0f}"
            hem = f"{g['flat_hem_width_cm']:.0f}/{s['pre_drop']['hem_width_cm']:.0f}/{s['settled']['hem_width_cm']:.0f}"
            res = "demonstration"
            if "vs_demo" in s["settled"]:
                set_, pre = s["settled"]["vs_demo"], s["pre_drop"]["vs_demo"]
                star = "*" if set_["exceeds_grasp_radius"] else " "
                res = (
                    f"{set_['max_keypoint_residual_cm']:5.1f}{star} {set_['max_keypoint']:<14}"
                    f"({pre['max_keypoint_residual_cm']:.1f} {pre['max_keypoint']})"
                )
            lines.append(
                f"{g['garment_id']:<11} {s['k']:>2} {s['sleeve_mode']:>4} {rot:>11} {moved:>15} {hem:>19}  {res}"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from instant_fold_sim.randomization import SLEEVE_SELECTIONS

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--benchmarks", nargs="+", default=["cpu", "cpu_garments"], help="spec names or files")
    p.add_argument("--out", default="docs/results/start_deformation.json")
    p.add_argument(
        "--sleeve-selection",
        choices=SLEEVE_SELECTIONS,
        default="x",
        help="DRRanges.sleeve_selection of the starts (x: as the benchmarks' banks were built; sleeve: the fix)",
    )
    args = p.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # every start is seeded by its episode seed

    from instant_fold_evaluation.benchmark import BenchmarkSpec
    from instant_fold_sim.rollout import preset

    t0 = time.perf_counter()
    benches = []
    radius_cm = 0.0
    for name in args.benchmarks:
        spec = BenchmarkSpec.load(name)
        config = preset(spec.preset)
        config = dataclasses.replace(config, dr=dataclasses.replace(config.dr, sleeve_selection=args.sleeve_selection))
        cm = 100.0 * config.obs_scale
        radius_cm = config.sim.grasp_radius * cm
        garments = []
        for g in spec.garments:
            garments.append(measure_garment(spec, g, config))
            print(f"[{spec.name}] {g}: {sum(s['seconds'] for s in garments[-1]['starts']):.1f} s", file=sys.stderr)
        benches.append(
            {
                "benchmark": spec.name,
                "preset": spec.preset,
                "demo_k": spec.demo_k,
                "start_ks": list(spec.start_ks),
                "camera_cm_per_sim_m": cm,
                "grasp_radius_sim_m": config.sim.grasp_radius,
                "grasp_radius_cm": round(radius_cm, 2),
                "garments": garments,
            }
        )
    given = sys.argv[1:] if argv is None else argv
    report = {
        "what": "non-rigid difference between benchmark start states of one garment (sleeve disturbance of "
        "randomization.initial_layout): moved particles, hem width, residual of the best rigid map from the "
        "demonstration's start (all particles, known correspondences) at the named keypoints",
        "command": f"OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']} python benchmarks/bench_start_deformation.py "
        + " ".join(given),
        "states": {
            "pre_drop": "initial_layout(canonical, keypoints, accepted draw), x, y: before the drop simulation",
            "settled": "rollout.start_state(...).scene.positions(), x, y: the start every episode and rollout has",
        },
        "units": "camera cm = simulation m x GenerationConfig.obs_scale x 100; angles in degrees",
        "moved_share": "share of the garment's particles the drawn sleeve disturbance moves: each drawn side alone "
        "(from the canonical garment) and all drawn sides together",
        "selectable_share": "share of particles a side's disturbance would move if drawn",
        "sleeve_selection": args.sleeve_selection,
        "exceeds_grasp_radius": "max keypoint residual (x, y) > ClothSimConfig.grasp_radius of the preset (a grasp "
        "pins the particles within it of the gripper, 3D distance)",
        "bank_start_keypoints_max_diff_m": f"settled start keypoints vs those stored in {BANK_ROOT}/<benchmark> "
        "(null: no bank entry; absent: starts selected by sleeve, which no bank was built with)",
        "wall_s": round(time.perf_counter() - t0, 1),
        "machine": platform.processor() or platform.machine(),
        "benchmarks": benches,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    for b in benches:
        print(f"== {b['benchmark']} (demo k = {b['demo_k']}, starts {b['start_ks']})")
        print(table(b["garments"], b["grasp_radius_cm"]))
    print(f"wall {report['wall_s']} s -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
