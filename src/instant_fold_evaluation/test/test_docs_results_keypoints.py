"""docs/registration.md's keypoint tables ("Grasps carried by keypoints") and the model card of
models/keypoints are the measured JSONs: the detector's errors, the offline grasp mapping, the
closed-loop runs."""

from __future__ import annotations

from typing import Any

from docs_quotes import assert_quoted, counted, cpu_flags, csr_cell, doc, flat_doc, result, successes

#: The closed-loop runs of the keypoint carry on the quick yardstick, in the order they were made.
QUICK_RUNS = (
    ("quick_keypoints_v2.json", "carried at every query"),
    ("quick_keypoints_v2_latch.json", "+ latched once the arm is within 10 cm"),
    ("quick_keypoints_v2_aim.json", "+ the policy names the grasp near either point"),
    ("quick_keypoints_v2_min5.json", "+ taken only when it moves the grasp >= 5 cm"),
)


def errors_cell(row: dict[str, Any]) -> str:
    """mean / median (cm), share within 3 and 5 cm (%)."""
    return (
        f"{row['mean_cm']:.2f} / {row['median_cm']:.2f} | {100 * row['within_3cm']:.1f} | {100 * row['within_5cm']:.1f}"
    )


def detector_table() -> str:
    """The detector's held-out errors: three recipes on the 8-start store, the shipped one on the 16-start store."""
    report = result("keypoint_detector.json")
    lines = [
        "| detector (training store) | training frames: mean (cm) | held-out starts: mean / median (cm) | "
        "within 3 cm (%) | within 5 cm (%) | visibility right (%) |",
        "|---|---|---|---|---|---|",
    ]
    for name, run in report["recipes_on_8_starts"]["runs"].items():
        lines.append(
            f"| {name}: {run['recipe']} (8 starts) | {run['train']['mean_cm']:.2f} | {errors_cell(run['heldout'])} | "
            f"{100 * run['heldout_visibility_accuracy']:.1f} |"
        )
    end = report["shipped"]["end"]
    lines.append(
        f"| shipped, the preset (16 starts) | {end['train']['all']['mean_cm']:.2f} | {errors_cell(end['eval']['all'])} | "
        f"{100 * end['eval']['visibility_accuracy']:.1f} |"
    )
    return "\n".join(lines)


def mapping_cell(row: dict[str, Any]) -> str:
    return f"{row['mean_cm']:.1f} / {row['median_cm']:.1f}, {100 * row['within_5cm']:.0f} %"


def mapping_table() -> str:
    """Offline grasp mapping on the held-out starts: the registration alone, then the keypoint carry."""
    report = result("grasp_mapping_keypoints.json")
    lines = [
        "| mapping | grasp 1: mean / median (cm), within 5 cm | grasp 2 | grasps carried by a keypoint (1 / 2) |",
        "|---|---|---|---|",
        f"| registration alone | {mapping_cell(report['rigid']['grasp 1'])} | {mapping_cell(report['rigid']['grasp 2'])} | – |",
    ]
    for row in report["keypoints"]:
        least = f"carry >= {100 * row['min_shift_m']:.0f} cm" if row["min_shift_m"] else "every carry"
        lines.append(
            f"| keypoints, {least} | {mapping_cell(row['grasp 1'])} | {mapping_cell(row['grasp 2'])} | "
            f"{100 * row['grasp 1']['carried']:.0f} % / {100 * row['grasp 2']['carried']:.0f} % |"
        )
    return "\n".join(lines)


def start_subset(summary: dict[str, Any], k: str = "3") -> tuple[int, float, int]:
    """A full CPU benchmark run's seen-fold rollouts from start `k` (the quick yardstick's jobs):
    successes, Geom. (mean over garments) and rollouts."""
    per_garment = [g["starts"][k]["policy"] for g in summary["garments"]["seen"].values()]
    wins = sum(counted(p["csr95"], p["folds"]) for p in per_garment)
    return wins, sum(p["geom"] for p in per_garment) / len(per_garment), sum(p["folds"] for p in per_garment)


def quick_table() -> str:
    """The quick yardstick (21 seen-fold rollouts from k = 3): v6 as shipped, then each keypoint variant."""
    wins, geom, n = start_subset(result("eval_cpu_v6_amd.json"))
    lines = [
        "| v6 on the quick yardstick's 21 rollouts (AMD EPYC) | C-SR@95 successes | Geom. | first grasps within 5 cm (%) |",
        "|---|---|---|---|",
        f"| registration alone (`eval_cpu_v6_amd.json`, its start k = 3) | {wins} of {n} | {geom:.2f} | – |",
    ]
    for name, what in QUICK_RUNS:
        row = result(name)["rows"]["policy"]["seen"]
        lines.append(
            f"| keypoints (8-start detector), {what} | {successes(row)} of {row['rollouts']} | {row['geom']['mean']:.2f} | "
            f"{100 * row['first_grasp']['within_5cm']:.1f} |"
        )
    return "\n".join(lines)


def test_the_keypoint_tables_are_the_measured_ones() -> None:
    text = doc("docs/registration.md")
    for table in (detector_table(), mapping_table(), quick_table()):
        assert table in text, table


def test_the_quick_runs_are_what_the_table_says() -> None:
    """Each quick run used a keypoint detector, the demonstration event targets and v6, on the same
    21 jobs as the v6 run's start k = 3."""
    v6 = result("eval_cpu_v6_amd.json")
    for name, _ in QUICK_RUNS:
        run = result(name)
        assert run["keypoints"] and run["event_targets"] == "demonstration" and run["checkpoint"] == v6["checkpoint"]
        assert run["benchmark"]["name"] == "cpu_quick" and run["benchmark"]["start_ks"] == [3]
        assert cpu_flags(run) == cpu_flags(v6)
        assert run["rows"]["policy"]["seen"]["rollouts"] == start_subset(v6)[2] == 21


def test_the_keypoint_card_quotes_the_shipped_detector() -> None:
    heldout = result("keypoint_detector.json")["shipped"]["end"]["eval"]["all"]
    train = result("keypoint_detector.json")["shipped"]["end"]["train"]["all"]
    assert_quoted(
        flat_doc("models/keypoints/README.md"),
        [
            f"mean {heldout['mean_cm']:.2f} cm, median {heldout['median_cm']:.2f} cm, "
            f"{100 * heldout['within_5cm']:.1f} % within 5 cm (training frames: {train['mean_cm']:.2f} cm)",
        ],
    )


def test_the_offline_gain_quoted_in_prose_is_the_measured_one() -> None:
    report = result("grasp_mapping_keypoints.json")
    every, floor = report["keypoints"]

    def pct(row: dict[str, Any]) -> str:
        return f"{100 * row['within_5cm']:.0f}"

    assert_quoted(
        flat_doc("docs/registration.md"),
        [
            f"from {pct(report['rigid']['grasp 1'])} to {pct(every['grasp 1'])} % for an arm's first grasp and "
            f"from {pct(report['rigid']['grasp 2'])} to {pct(every['grasp 2'])} % for its second",
            f"{pct(floor['grasp 1'])} % within 5 cm for both grasps",
        ],
    )
    assert pct(floor["grasp 1"]) == pct(floor["grasp 2"])


#: v6 on the full benchmarks of one machine (AMD EPYC), without and with the keypoint carry.
FULL_RUNS = (
    ("registration alone", "eval_cpu_v6_amd.json", "eval_cpu_garments_v6_amd.json"),
    ("keypoints (shipped detector, 5 cm floor)", "eval_cpu_v6_keypoints.json", "eval_cpu_garments_v6_keypoints.json"),
)


def full_table() -> str:
    """Seen folds of `cpu` (with the split by how far a rigid transfer reaches) and of `cpu_garments`."""
    from test_docs_results_start_deformation import _split_by_transfer

    lines = [
        "| v6, demonstration event targets | Ctx. Acc. | C-SR@95 | Geom. | C-SR@95 at starts within / beyond the grasp radius | "
        "grasp 1 / grasp 2 within 5 cm (%) | held-out garments: C-SR@95 | Geom. |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label, cpu, garments in FULL_RUNS:
        seen, other = result(cpu)["rows"]["policy"]["seen"], result(garments)["rows"]["policy"]["seen"]
        (wi, wn), (bi, bn) = _split_by_transfer([("cpu", cpu)], "policy")
        events = seen["events"]
        lines.append(
            f"| {label} | {seen['ctx_acc']['mean']:.1f} | {csr_cell(seen)} | "
            f"{seen['geom']['mean']:.2f} | {wi} of {wn} / {bi} of {bn} | "
            f"{100 * events['grasp 1']['within_5cm']:.1f} / {100 * events['grasp 2']['within_5cm']:.1f} | "
            f"{csr_cell(other)} | {other['geom']['mean']:.2f} |"
        )
    return "\n".join(lines)


def test_the_full_keypoint_runs_are_the_measured_ones() -> None:
    assert full_table() in doc("docs/registration.md")
    for _, cpu, garments in FULL_RUNS:
        for name in (cpu, garments):
            run = result(name)
            assert run["event_targets"] == "demonstration" and run["checkpoint"] == "models/policy"
            assert cpu_flags(run) == cpu_flags("eval_cpu_v6_amd.json")
    assert result("eval_cpu_v6_keypoints.json")["keypoints"] == "models/keypoints"


def test_the_prose_of_the_full_runs_is_the_measured_one() -> None:
    from test_docs_results_start_deformation import _split_by_transfer

    words = {3: "three", 5: "five"}
    (w0, _), (b0, _) = _split_by_transfer([("cpu", FULL_RUNS[0][1])], "policy")
    (w1, _), (b1, _) = _split_by_transfer([("cpu", FULL_RUNS[1][1])], "policy")
    shipped = result("keypoint_detector.json")["shipped"]["end"]
    ratio = shipped["eval"]["all"]["mean_cm"] / shipped["train"]["all"]["mean_cm"]
    assert_quoted(
        flat_doc("docs/registration.md"),
        [
            f"{words[b1 - b0]} more folds at the starts beyond the grasp radius",
            f"{words[w0 - w1]} fewer folds at the starts within the radius",
            f"its held-out mean is {ratio:.1f} times its training mean",
        ],
    )
    seen = [result(cpu)["rows"]["policy"]["seen"] for _, cpu, _ in FULL_RUNS]
    garments = [result(g)["rows"]["policy"]["seen"] for _, _, g in FULL_RUNS]
    assert successes(seen[1]) < successes(seen[0]) and successes(garments[1]) < successes(
        garments[0]
    )  # "off by default"
