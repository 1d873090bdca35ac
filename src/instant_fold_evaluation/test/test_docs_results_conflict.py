"""docs/evaluation.md's "Two arms sent to one point" and "The hem-rigid benchmark" tables are the
measured JSONs: v6 with and without the demonstration targets' conflict rule on the CPU benchmark,
its held-out garments and the quick yardstick on hem-rigid starts."""

from __future__ import annotations

from typing import Any

from docs_quotes import (
    assert_quoted,
    count,
    cpu_flags,
    csr_cell,
    doc,
    flat_doc,
    issue_28_bars,
    result,
    row_of,
    successes,
)
from test_docs_results_keypoints import start_subset

#: v6 on one machine (AMD EPYC): (label, CPU benchmark, held-out garments).
CONFLICT_RUNS = (
    (
        "two arms sent to one point stay there (`--grasp-conflict-m 0`)",
        "eval_cpu_v6_amd.json",
        "eval_cpu_garments_v6_amd.json",
    ),
    (
        "each arm to its own demonstrated grasp (0.10, the default)",
        "eval_cpu_v6_conflict.json",
        "eval_cpu_garments_v6_conflict.json",
    ),
)

#: v6 on the quick yardstick of hem-rigid starts, without and with the rule.
SLEEVE_RUNS = (
    ("two arms sent to one point stay there", "quick_sleeve_v6.json"),
    ("each arm to its own demonstrated grasp (the default)", "quick_sleeve_v6_conflict.json"),
)


#: The full hem-rigid benchmarks: (label, cpu_sleeve run, cpu_garments_sleeve run); the oracle's
#: out-of-sample row comes from the reference runs that built their banks.
HEM_RIGID_RUNS = (
    ("v6, demonstration event targets (the default)", "eval_cpu_sleeve_v6.json", "eval_cpu_garments_sleeve_v6.json"),
    (
        "registration replay",
        "eval_cpu_sleeve_registration_replay.json",
        "eval_cpu_garments_sleeve_registration_replay.json",
    ),
)
HEM_RIGID_REFERENCE = ("eval_cpu_sleeve_reference.json", "eval_cpu_garments_sleeve_reference.json")


def conflict_table() -> str:
    lines = [
        "| v6, demonstration event targets (AMD EPYC) | Seen: Ctx. Acc. | C-SR@95 | Geom. | grasp 1 within 5 cm (%) | "
        "quick yardstick's 21 (start k = 3) | Held-out garments: C-SR@95 | Geom. |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label, cpu, garments in CONFLICT_RUNS:
        seen, other = row_of(cpu), row_of(garments)
        wins, _, n = start_subset(result(cpu))
        lines.append(
            f"| {label} | {seen['ctx_acc']['mean']:.1f} | {csr_cell(seen)} | "
            f"{seen['geom']['mean']:.2f} | {100 * seen['events']['grasp 1']['within_5cm']:.1f} | {wins} of {n} | "
            f"{csr_cell(other)} | {other['geom']['mean']:.2f} |"
        )
    return "\n".join(lines)


def sleeve_row(label: str, row: dict[str, Any]) -> str:
    first = row["first_grasp"]
    return (
        f"| {label} | {row['ctx_acc']['mean']:.1f} ({count(row, 'ctx_acc')}/{row['rollouts']}) | "
        f"{csr_cell(row)} | {row['geom']['mean']:.2f} | "
        f"{100 * first['xy_m']['mean']:.1f} / {100 * first['within_5cm']:.1f} |"
    )


def sleeve_table() -> str:
    lines = [
        "| `cpu_quick_sleeve` (21 rollouts, AMD EPYC) | Ctx. Acc. | C-SR@95 | Geom. | first grasps: mean (cm) / within 5 cm (%) |",
        "|---|---|---|---|---|",
    ]
    lines += [sleeve_row(f"v6, {label}", row_of(name)) for label, name in SLEEVE_RUNS]
    lines.append(sleeve_row("oracle (out-of-sample)", row_of(SLEEVE_RUNS[0][1], "oracle-out-of-sample")))
    return "\n".join(lines)


def test_the_conflict_and_hem_rigid_tables_are_the_measured_ones() -> None:
    text = doc("docs/evaluation.md")
    for table in (conflict_table(), sleeve_table()):
        assert table in text, table


def test_the_runs_differ_in_the_rule_alone() -> None:
    """Same checkpoint, event targets, jobs and machine; the rule off (recorded as none: those runs
    predate it) in the first of each pair and at 0.10 m in the second."""
    machine = cpu_flags("eval_cpu_v6_amd.json")
    for names in ([c for _, c, _ in CONFLICT_RUNS], [g for _, _, g in CONFLICT_RUNS], [n for _, n in SLEEVE_RUNS]):
        off, on = (result(n) for n in names)
        assert off.get("grasp_conflict_m") is None and on["grasp_conflict_m"] == 0.1
        for run in (off, on):
            assert run["event_targets"] == "demonstration" and run["checkpoint"] == "models/policy"
            assert cpu_flags(run) == machine and run.get("keypoints") is None
        assert off["benchmark"] == on["benchmark"]
    assert result(SLEEVE_RUNS[0][1])["benchmark"]["preset"] == "cpu-small-sleeve"


def test_the_prose_is_the_measured_one() -> None:
    off, on = (row_of(n) for _, n in SLEEVE_RUNS)
    cpu_off, cpu_on = (row_of(c) for _, c, _ in CONFLICT_RUNS)
    assert_quoted(
        flat_doc("docs/evaluation.md"),
        [
            f"{successes(off)} of 21 to {successes(on)} of 21",
            f"{successes(cpu_off)} to {successes(cpu_on)} of 63",
            f"v6's first grasps land closer than on the old starts ({100 * on['first_grasp']['xy_m']['mean']:.1f} cm mean "
            f"against {100 * cpu_off['first_grasp']['xy_m']['mean']:.1f} cm on the whole old benchmark",
        ],
    )
    minutes = round(result(SLEEVE_RUNS[0][1])["timing"]["bank_s"] / 60)
    assert_quoted(
        flat_doc("docs/evaluation.md"), [f"the first 21 of `cpu_sleeve`'s 84 contexts, {minutes} min with 2 workers"]
    )
    assert_quoted(flat_doc("models/oracle_banks/cpu_sleeve/README.md"), [f"the first 21 took {minutes} min"])


def hem_rigid_row(label: str, seen: dict[str, Any], other: dict[str, Any]) -> str:
    first = seen["first_grasp"]
    return (
        f"| {label} | {seen['ctx_acc']['mean']:.1f} | {csr_cell(seen)} | "
        f"{seen['geom']['mean']:.2f} | {100 * first['xy_m']['mean']:.1f} / {100 * first['within_5cm']:.1f} | "
        f"{csr_cell(other)} | {other['geom']['mean']:.2f} |"
    )


def hem_rigid_table() -> str:
    lines = [
        "| hem-rigid benchmarks (AMD EPYC) | `cpu_sleeve` seen: Ctx. Acc. | C-SR@95 | Geom. | first grasps: mean (cm) / "
        "within 5 cm (%) | `cpu_garments_sleeve`: C-SR@95 | Geom. |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [hem_rigid_row(label, row_of(cpu), row_of(garments)) for label, cpu, garments in HEM_RIGID_RUNS]
    reference = [row_of(name, "oracle-out-of-sample") for name in HEM_RIGID_REFERENCE]
    lines.append(hem_rigid_row("oracle (out-of-sample)", *reference))
    bars = issue_28_bars(*HEM_RIGID_REFERENCE)
    lines.append(
        f"| issue 28's bar | >= 95 | >= {bars['csr']:.1f} | <= {bars['geom']:.2f} | <= 4 / >= 75 | "
        f">= {bars['garments_csr']:.1f} | – |"
    )
    return "\n".join(lines)


def test_the_full_hem_rigid_table_is_the_measured_one() -> None:
    assert hem_rigid_table() in doc("docs/evaluation.md"), hem_rigid_table()
    bank = {result(name)["bank"] for name in HEM_RIGID_REFERENCE}
    for _, cpu, garments in HEM_RIGID_RUNS:
        for name, spec in ((cpu, "cpu_sleeve"), (garments, "cpu_garments_sleeve")):
            run = result(name)
            assert run["benchmark"]["name"] == spec and run["benchmark"]["preset"] == "cpu-small-sleeve"
            assert cpu_flags(run) == cpu_flags(HEM_RIGID_REFERENCE[0])
            assert run["bank"] in bank


def _garment(name: str, garment: str) -> dict[str, Any]:
    """The policy row of a run on one garment (folds, csr95, geom)."""
    return result(name)["garments"]["seen"][garment]["policy"]


def test_the_hem_rigid_prose_is_the_measured_one() -> None:
    (v6, v6_garments), (replay, replay_garments) = (
        (row_of(cpu), row_of(garments)) for _, cpu, garments in HEM_RIGID_RUNS
    )
    reference = [row_of(name, "oracle-out-of-sample") for name in HEM_RIGID_REFERENCE]
    old, old_garments = row_of(CONFLICT_RUNS[1][1]), row_of(CONFLICT_RUNS[1][2])
    held_v6, held_replay = (result(cpu)["rows"]["policy"]["heldout"] for _, cpu, _ in HEM_RIGID_RUNS)
    bars = issue_28_bars(*HEM_RIGID_REFERENCE)
    oracle_old = result("eval_cpu_k10_reference.json")["rows"]["oracle-out-of-sample"]["seen"]
    assert_quoted(
        flat_doc("docs/evaluation.md"),
        [
            f"context accuracy by one rollout: {count(v6, 'ctx_acc')} of 63",
            f"({old['csr95']['mean']:.1f} %, Geom. {old['geom']['mean']:.2f}, {old['ctx_acc']['mean']:.1f} % above)",
            f"({reference[0]['csr95']['mean']:.1f} % against {oracle_old['csr95']['mean']:.1f} %)",
            f"({successes(v6_garments)} of 18 against a bar of {bars['garments_csr']:.1f} %; "
            f"{successes(old_garments)} of 18 on the old starts)",
            f"Registration replay folds {successes(replay_garments)} of 18 here",
            f"({successes(v6)} against {successes(replay)} of 63) at about the same Geom. "
            f"({v6['geom']['mean']:.2f} against {replay['geom']['mean']:.2f})",
            f"replay folds {successes(replay_garments) - successes(v6_garments)} more of 18",
            f"follows its demonstration in {count(held_v6, 'ctx_acc')} of 21 rollouts and folds "
            f"{'none' if successes(held_v6) == 0 else successes(held_v6)}; replay, which needs no training, "
            f"{successes(held_replay)} of 21",
            f"about {round(result(HEM_RIGID_RUNS[0][1])['timing']['rollouts_s'] / 60)} min of rollouts",
        ],
    )
    hard = [_garment(name, "proc_00005") for name in (HEM_RIGID_RUNS[0][2], CONFLICT_RUNS[1][2])]
    assert all(g["folds"] == 6 and g["csr95"] == 0 for g in hard)
    assert_quoted(flat_doc("docs/evaluation.md"), [f"(Geom. {hard[0]['geom']:.2f} there, on hem-rigid starts)"])
    others = [_garment(HEM_RIGID_RUNS[0][2], g) for g in ("proc_00011", "proc_00017")]
    assert sum(round(g["csr95"] * g["folds"] / 100) for g in others) == successes(v6_garments) == 7
    minutes = round(result(HEM_RIGID_REFERENCE[1])["timing"]["bank_s"] / 60)
    assert_quoted(flat_doc("models/oracle_banks/cpu_garments_sleeve/README.md"), [f"{minutes} min with 2 Ray workers"])


def test_the_policy_card_quotes_the_hem_rigid_runs() -> None:
    (v6, v6_garments), (replay, replay_garments) = (
        (row_of(cpu), row_of(garments)) for _, cpu, garments in HEM_RIGID_RUNS
    )
    oracle = row_of(HEM_RIGID_REFERENCE[0], "oracle-out-of-sample")
    bars = issue_28_bars(*HEM_RIGID_REFERENCE)
    first = v6["first_grasp"]
    assert_quoted(
        flat_doc("models/policy/README.md"),
        [
            f"seen folds Ctx. Acc. {v6['ctx_acc']['mean']:.1f} %, C-SR@95 {v6['csr95']['mean']:.1f} % "
            f"({successes(v6)} of 63; the oracle out of sample: {oracle['csr95']['mean']:.1f} %), Geom. "
            f"{v6['geom']['mean']:.2f}, first grasps {100 * first['xy_m']['mean']:.1f} cm mean, "
            f"{100 * first['within_5cm']:.1f} % within 5 cm",
            f"held-out garments {v6_garments['csr95']['mean']:.1f} % ({successes(v6_garments)} of 18), short of "
            f"their bar ({bars['garments_csr']:.1f} %)",
            f"Registration replay there: {replay['csr95']['mean']:.1f} % ({successes(replay)} of 63), Geom. "
            f"{replay['geom']['mean']:.2f}; {replay_garments['csr95']['mean']:.1f} % ({successes(replay_garments)} "
            "of 18)",
        ],
    )
    assert v6["csr95"]["mean"] >= bars["csr"] and v6["geom"]["mean"] <= bars["geom"] and v6["ctx_acc"]["mean"] >= 95
