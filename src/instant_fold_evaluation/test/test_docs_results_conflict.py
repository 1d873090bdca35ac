"""docs/evaluation.md's "Two arms sent to one point" and "The hem-rigid benchmark" tables are the
measured JSONs: v6 with and without the demonstration targets' conflict rule on the CPU benchmark,
its held-out garments and the quick yardstick on hem-rigid starts."""

from __future__ import annotations

from typing import Any

from docs_quotes import assert_quoted, count, doc, flat_doc, result, successes
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


def _seen(name: str, row: str = "policy") -> dict[str, Any]:
    return result(name)["rows"][row]["seen"]


def conflict_table() -> str:
    lines = [
        "| v6, demonstration event targets (AMD EPYC) | Seen: Ctx. Acc. | C-SR@95 | Geom. | grasp 1 within 5 cm (%) | "
        "quick yardstick's 21 (start k = 3) | Held-out garments: C-SR@95 | Geom. |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label, cpu, garments in CONFLICT_RUNS:
        seen, other = _seen(cpu), _seen(garments)
        wins, _, n = start_subset(result(cpu))
        lines.append(
            f"| {label} | {seen['ctx_acc']['mean']:.1f} | {seen['csr95']['mean']:.1f} ({successes(seen)}/{seen['rollouts']}) | "
            f"{seen['geom']['mean']:.2f} | {100 * seen['events']['grasp 1']['within_5cm']:.1f} | {wins} of {n} | "
            f"{other['csr95']['mean']:.1f} ({successes(other)}/{other['rollouts']}) | {other['geom']['mean']:.2f} |"
        )
    return "\n".join(lines)


def sleeve_row(label: str, row: dict[str, Any]) -> str:
    first = row["first_grasp"]
    return (
        f"| {label} | {row['ctx_acc']['mean']:.1f} ({count(row, 'ctx_acc')}/{row['rollouts']}) | "
        f"{row['csr95']['mean']:.1f} ({successes(row)}/{row['rollouts']}) | {row['geom']['mean']:.2f} | "
        f"{100 * first['xy_m']['mean']:.1f} / {100 * first['within_5cm']:.1f} |"
    )


def sleeve_table() -> str:
    lines = [
        "| `cpu_quick_sleeve` (21 rollouts, AMD EPYC) | Ctx. Acc. | C-SR@95 | Geom. | first grasps: mean (cm) / within 5 cm (%) |",
        "|---|---|---|---|---|",
    ]
    lines += [sleeve_row(f"v6, {label}", _seen(name)) for label, name in SLEEVE_RUNS]
    lines.append(sleeve_row("oracle (out-of-sample)", _seen(SLEEVE_RUNS[0][1], "oracle-out-of-sample")))
    return "\n".join(lines)


def test_the_conflict_and_hem_rigid_tables_are_the_measured_ones() -> None:
    text = doc("docs/evaluation.md")
    for table in (conflict_table(), sleeve_table()):
        assert table in text, table


def test_the_runs_differ_in_the_rule_alone() -> None:
    """Same checkpoint, event targets, jobs and machine; the rule off (recorded as none: those runs
    predate it) in the first of each pair and at 0.10 m in the second."""
    machine = result("eval_cpu_v6_amd.json")["machine"]["cpu_flags_sha256"]
    for names in ([c for _, c, _ in CONFLICT_RUNS], [g for _, _, g in CONFLICT_RUNS], [n for _, n in SLEEVE_RUNS]):
        off, on = (result(n) for n in names)
        assert off.get("grasp_conflict_m") is None and on["grasp_conflict_m"] == 0.1
        for run in (off, on):
            assert run["event_targets"] == "demonstration" and run["checkpoint"] == "models/policy"
            assert run["machine"]["cpu_flags_sha256"] == machine and run.get("keypoints") is None
        assert off["benchmark"] == on["benchmark"]
    assert result(SLEEVE_RUNS[0][1])["benchmark"]["preset"] == "cpu-small-sleeve"


def test_the_prose_is_the_measured_one() -> None:
    off, on = (_seen(n) for _, n in SLEEVE_RUNS)
    cpu_off, cpu_on = (_seen(c) for _, c, _ in CONFLICT_RUNS)
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
