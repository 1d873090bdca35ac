"""docs/evaluation.md's "First grasps where the demonstration made them" tables and prose are the
measured JSONs: v6 with the demonstration event targets taking each arm's first grasp where the
demonstration made it (within 50 cm, the default since), beside every grasp matched within 8 cm
(before) and the grasp gate (measured, not adopted)."""

from __future__ import annotations

from docs_quotes import assert_quoted, cpu_flags, doc, flat_doc, issue_28_bars, result, row_of, successes
from test_docs_results_tracking import table_spec, tracking_table

from instant_fold_learning.policy.event_targets import FIRST_GRASP_MATCH_M, GRASP_MATCH_M

BEFORE, FIRST, GATE = (
    "v6, every grasp matched within 8 cm (before)",
    "v6, first grasps within 50 cm (the default)",
    "v6, first grasps within 50 cm, grasp gate 8 cm",
)

#: As `test_docs_results_tracking.TABLES`: (title, benchmark, held-out garments, references, rows).
TABLES = (
    table_spec(
        "cpu",
        (
            (BEFORE, "eval_cpu_v6_tracked.json", "eval_cpu_garments_v6_tracked.json"),
            (FIRST, "eval_cpu_v6_first50.json", "eval_cpu_garments_v6_first50.json"),
            (GATE, "eval_cpu_v6_first50_gate8.json", "eval_cpu_garments_v6_first50_gate8.json"),
        ),
    ),
    table_spec(
        "cpu_sleeve",
        (
            (BEFORE, "eval_cpu_sleeve_v6_tracked.json", "eval_cpu_garments_sleeve_v6_tracked.json"),
            (FIRST, "eval_cpu_sleeve_v6_first50.json", "eval_cpu_garments_sleeve_v6_first50.json"),
            (GATE, "eval_cpu_sleeve_v6_first50_gate8.json", "eval_cpu_garments_sleeve_v6_first50_gate8.json"),
        ),
    ),
)

#: Second draws (`--seed 1`) per benchmark: every grasp within 8 cm, then first grasps within 50 cm.
SEED1 = {
    "cpu": ("eval_cpu_v6_tracked_seed1.json", "eval_cpu_v6_first50_seed1.json"),
    "cpu_sleeve": ("eval_cpu_sleeve_v6_tracked_seed1.json", "eval_cpu_sleeve_v6_first50_seed1.json"),
}


def _second_grasps(name: str) -> float:
    return 100 * row_of(name)["events"]["grasp 2"]["xy_m"]["mean"]


def test_the_first_grasp_tables_are_the_measured_ones() -> None:
    text = doc("docs/evaluation.md")
    for table in TABLES:
        assert tracking_table(*table) in text, tracking_table(*table)


def test_the_runs_differ_in_the_first_grasp_distance_and_the_gate_alone() -> None:
    """Per benchmark, the v6 runs share checkpoint, event targets, conflict rule, later-grasp match
    distance, bank and machine; the first-grasp distance and the gate are recorded where set, and
    the documented default is the code's."""
    assert FIRST_GRASP_MATCH_M == 0.5 and GRASP_MATCH_M == 0.08
    machine = cpu_flags("eval_cpu_sleeve_v6.json")
    runs = [(row[c], specs[c - 1], row[0]) for _, *specs, _, rows in TABLES for row in rows[:3] for c in (1, 2)]
    runs += [(name, spec, FIRST if "first50" in name else BEFORE) for spec, names in SEED1.items() for name in names]
    for name, spec, label in runs:
        run = result(name)
        assert run["benchmark"]["name"] == spec and cpu_flags(run) == machine, name
        assert run["checkpoint"] == "models/policy" and run["event_targets"] == "demonstration", name
        assert run["grasp_conflict_m"] == 0.1 and run["bank_runs"] == 10, name
        assert run.get("grasp_match_m") in (None, GRASP_MATCH_M), name  # None: run before the flag
        assert run.get("first_grasp_match_m") == (None if label == BEFORE else FIRST_GRASP_MATCH_M), name
        assert run.get("grasp_gate_m") in ((0.08,) if label == GATE else (None, 0.0)), name
        # The flow sampler's seed is recorded since 2026-11-28; the hem-rigid 8 cm second draw is older.
        unrecorded = (None,) if name == "eval_cpu_sleeve_v6_tracked_seed1.json" else ()
        assert run.get("seed") in ((1, *unrecorded) if "seed1" in name else (None, 0)), name


def test_the_first_grasp_prose_is_the_measured_one() -> None:
    (old, hem) = (rows for *_, rows in TABLES)
    seen = {label: (row_of(cpu), row_of(garments)) for label, cpu, garments in old}
    hem_seen = {label: (row_of(cpu), row_of(garments)) for label, cpu, garments in hem}
    draw2 = {spec: [row_of(name) for name in names] for spec, names in SEED1.items()}
    bars = issue_28_bars()
    hem_bars = issue_28_bars("eval_cpu_sleeve_reference.json", "eval_cpu_garments_sleeve_reference.json")
    worst = [result(old[i][1])["garments"]["seen"]["proc_00003"]["policy"]["geom"] for i in (0, 1)]
    (before, g_before), (first, g_first), (gate, _) = (seen[label] for label in (BEFORE, FIRST, GATE))
    (h_before, hg_before), (h_first, hg_first), (h_gate, _) = (hem_seen[label] for label in (BEFORE, FIRST, GATE))
    held = [result(old[i][1])["rows"]["policy"]["heldout"]["ctx_acc"]["mean"] for i in (1,)]
    held_all = result("eval_cpu_v6_match50.json")["rows"]["policy"]["heldout"]["ctx_acc"]["mean"]
    folded = [
        sum(successes(row) for row in rows)
        for rows in (
            (before, g_before, h_before, hg_before, draw2["cpu"][0], draw2["cpu_sleeve"][0]),
            (first, g_first, h_first, hg_first, draw2["cpu"][1], draw2["cpu_sleeve"][1]),
        )
    ]
    quotes = [
        f"Old starts: Geom. {before['geom']['mean']:.2f} to {first['geom']['mean']:.2f} with the same "
        f"{successes(first)} of 63 folded",
        f"second draw {successes(draw2['cpu'][0])} to {successes(draw2['cpu'][1])} of 63, Geom. "
        f"{draw2['cpu'][0]['geom']['mean']:.2f} to {draw2['cpu'][1]['geom']['mean']:.2f}",
        f"the old starts' bars ({bars['csr']:.2f} %, {bars['geom']:.2f}) are met in the second draw, and in the "
        f"first but for one fold ({first['csr95']['mean']:.2f} %)",
        f"`proc_00003`'s Geom. over its 9 seen folds {worst[0]:.2f} to {worst[1]:.2f}",
        f"Second grasps {_second_grasps(old[0][1]):.2f} to {_second_grasps(old[1][1]):.2f} cm mean (50 cm for every "
        f"grasp: {_second_grasps('eval_cpu_v6_match50.json'):.2f})",
        f"The held-out folds' context stays {held[0]:.1f} % (50 cm for every grasp: {held_all:.1f} %)",
        f"{successes(h_before)} to {successes(h_first)} of 63, Geom. {h_before['geom']['mean']:.2f} to "
        f"{h_first['geom']['mean']:.2f}; second draw {successes(draw2['cpu_sleeve'][0])} to "
        f"{successes(draw2['cpu_sleeve'][1])}, Geom. {draw2['cpu_sleeve'][0]['geom']['mean']:.2f} to "
        f"{draw2['cpu_sleeve'][1]['geom']['mean']:.2f} (against the bar's {hem_bars['geom']:.2f})",
        f"their held-out garments {successes(hg_before)} to {successes(hg_first)} of 18, Geom. "
        f"{hg_before['geom']['mean']:.2f} to {hg_first['geom']['mean']:.2f}, still short of the bar "
        f"({hem_bars['garments_csr']:.1f} %)",
        f"{successes(g_before)} of 18 either way, Geom. {g_before['geom']['mean']:.2f} to {g_first['geom']['mean']:.2f}",
        f"{folded[0]} folds against {folded[1]} pass C-SR@95 with the wider first radius",
        f"The main job's start folds as before (Geom. {result('main_job_amd_first50.json')['same_init']['geom']:.2f}, "
        "a success",
        f"old starts {successes(first)} to {successes(gate)} of 63 (Geom. {first['geom']['mean']:.2f} to "
        f"{gate['geom']['mean']:.2f}), hem-rigid {successes(h_first)} to {successes(h_gate)} "
        f"({h_first['geom']['mean']:.2f} to {h_gate['geom']['mean']:.2f})",
    ]
    assert_quoted(flat_doc("docs/evaluation.md"), quotes)
    assert successes(g_before) == successes(g_first)  # "either way"
    better = [
        a["geom"]["mean"] < b["geom"]["mean"]
        for a, b in ((first, before), (g_first, g_before), (h_first, h_before), (hg_first, hg_before))
    ]
    assert better == [True, True, False, True]  # "better on three of the four benchmarks"
    assert successes(first) == successes(before) and first["geom"]["mean"] <= bars["geom"]
    assert successes(draw2["cpu"][1]) >= bars["csr"] * 63 / 100 and draw2["cpu"][1]["geom"]["mean"] <= bars["geom"]
    main = result("main_job_amd_first50.json")
    assert main["same_init"] == result("main_job_amd_tracked.json")["same_init"]  # "as before"
    assert cpu_flags(main) == cpu_flags("main_job_amd_tracked.json")


def test_the_policy_card_quotes_the_first_grasp_runs() -> None:
    def cell(name: str) -> str:
        row = row_of(name)
        return f"{row['csr95']['mean']:.1f} % ({successes(row)} of {row['rollouts']})"

    (old, hem) = (rows for *_, rows in TABLES)
    old_seen, hem_seen = row_of(old[1][1]), row_of(hem[1][1])
    draw2 = [row_of(SEED1[spec][1]) for spec in ("cpu", "cpu_sleeve")]
    assert_quoted(
        flat_doc("models/policy/README.md"),
        [
            f"old starts Ctx. Acc. {old_seen['ctx_acc']['mean']:.1f} %, C-SR@95 {cell(old[1][1])}, Geom. "
            f"{old_seen['geom']['mean']:.2f}, held-out garments {cell(old[1][2])}",
            f"hem-rigid starts {cell(hem[1][1])}, Geom. {hem_seen['geom']['mean']:.2f}, held-out garments {cell(hem[1][2])}",
            f"old starts {cell(SEED1['cpu'][1])}, Geom. {draw2[0]['geom']['mean']:.2f}; hem-rigid "
            f"{cell(SEED1['cpu_sleeve'][1])}, Geom. {draw2[1]['geom']['mean']:.2f}",
        ],
    )
