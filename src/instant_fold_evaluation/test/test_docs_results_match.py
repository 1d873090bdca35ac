"""docs/evaluation.md's "The demonstrated grasp taken wherever the policy aims" tables and prose are
the measured JSONs: v6 with the demonstration event targets taking an arm's demonstrated grasp only
when the policy aims within 8 cm of it (the default) or within 50 cm (measured, not adopted)."""

from __future__ import annotations

from typing import Any

from docs_quotes import assert_quoted, cpu_flags, doc, flat_doc, issue_28_bars, result, row_of, successes
from test_docs_results_tracking import table_spec, tracking_table

#: As `test_docs_results_tracking.TABLES`: (title, benchmark, held-out garments, references, rows).
TABLES = (
    table_spec(
        "cpu",
        (
            ("v6, grasp match 8 cm (the default)", "eval_cpu_v6_tracked.json", "eval_cpu_garments_v6_tracked.json"),
            ("v6, grasp match 50 cm", "eval_cpu_v6_match50.json", "eval_cpu_garments_v6_match50.json"),
        ),
    ),
    table_spec(
        "cpu_sleeve",
        (
            (
                "v6, grasp match 8 cm (the default)",
                "eval_cpu_sleeve_v6_tracked.json",
                "eval_cpu_garments_sleeve_v6_tracked.json",
            ),
            ("v6, grasp match 50 cm", "eval_cpu_sleeve_v6_match50.json", "eval_cpu_garments_sleeve_v6_match50.json"),
        ),
    ),
)

#: The old starts' second draws (`--seed 1`: match 8 cm, match 50 cm) and the 20 cm run (seed 0).
SEED1 = ("eval_cpu_v6_tracked_seed1.json", "eval_cpu_v6_match50_seed1.json")
MATCH20 = "eval_cpu_v6_match20.json"


def _heldout(name: str) -> dict[str, Any]:
    return result(name)["rows"]["policy"]["heldout"]


def test_the_match_tables_are_the_measured_ones() -> None:
    text = doc("docs/evaluation.md")
    for table in TABLES:
        assert tracking_table(*table) in text, tracking_table(*table)


def test_the_runs_differ_in_the_match_distance_alone() -> None:
    """Per benchmark, the v6 runs share checkpoint, event targets, conflict rule, bank and machine;
    the match distance is recorded where it is not the old default (8 cm)."""
    machine = cpu_flags("eval_cpu_sleeve_v6.json")
    runs = [
        (row[column], spec)
        for _, *specs, _, rows in TABLES
        for row in rows[:2]
        for column, spec in ((1, specs[0]), (2, specs[1]))
    ]
    runs += [(name, "cpu") for name in (*SEED1, MATCH20)]
    expected = {"eval_cpu_v6_match20.json": (0.2,)}
    for name, spec in runs:
        run = result(name)
        assert run["benchmark"]["name"] == spec and cpu_flags(run) == machine, name
        assert run["checkpoint"] == "models/policy" and run["event_targets"] == "demonstration", name
        assert run["grasp_conflict_m"] == 0.1 and run["bank_runs"] == 10, name
        # Runs made before the flag existed do not record it (they ran with 8 cm).
        assert run.get("grasp_match_m") in expected.get(name, (0.5,) if "match50" in name else (None, 0.08)), name
        # The flow sampler's seed is recorded since these runs (0, the default, before).
        assert run.get("seed") in ((1,) if "seed1" in name else (None, 0)), name


def _garment(name: str, garment: str = "proc_00003") -> dict[str, Any]:
    return result(name)["garments"]["seen"][garment]["policy"]


def test_the_match_prose_is_the_measured_one() -> None:
    (old, hem) = (rows for *_, rows in TABLES)
    before, after = row_of(old[0][1]), row_of(old[1][1])
    g_before, g_after = row_of(old[0][2]), row_of(old[1][2])
    h_before, h_after = row_of(hem[0][1]), row_of(hem[1][1])
    hg_before, hg_after = row_of(hem[0][2]), row_of(hem[1][2])
    s_before, s_after = (row_of(name) for name in SEED1)
    mid = row_of(MATCH20)
    bars = issue_28_bars()
    hem_bars = issue_28_bars("eval_cpu_sleeve_reference.json", "eval_cpu_garments_sleeve_reference.json")
    held = [_heldout(name) for name in (old[0][1], old[1][1])]
    worst = [_garment(name) for name in (old[0][1], old[1][1])]
    assert worst[0]["csr95"] == worst[1]["csr95"] and worst[0]["folds"] == 9
    assert after["geom"]["mean"] <= bars["geom"] and s_after["geom"]["mean"] <= bars["geom"]  # "in both draws"
    second = [100 * run["events"]["grasp 2"]["xy_m"]["mean"] for run in (h_before, h_after)]
    quotes = [
        f"Geom. {before['geom']['mean']:.2f} to {after['geom']['mean']:.2f} on the old starts",
        f"(its Geom. {worst[0]['geom']:.2f} to {worst[1]['geom']:.2f} over its 9 seen folds, "
        f"{round(worst[0]['csr95'] * 9 / 100)} of them passing C-SR@95 either way)",
        f"{successes(before)} and {successes(after)} of 63 (second draw, `--seed 1`: {successes(s_before)} and "
        f"{successes(s_after)}; Geom. {s_before['geom']['mean']:.2f} and {s_after['geom']['mean']:.2f})",
        f"With 50 cm, Geom. {after['geom']['mean']:.2f} meets its bar ({bars['geom']:.2f}) in both draws",
        f"C-SR@95 {after['csr95']['mean']:.1f} % under its bar ({bars['csr']:.2f}), as 8 cm's "
        f"{before['csr95']['mean']:.1f} % is by {bars['csr'] - before['csr95']['mean']:.2f} points",
        f"Within 20 cm: {successes(mid)} of 63, Geom. {mid['geom']['mean']:.2f}",
        f"The held-out folds' context {held[0]['ctx_acc']['mean']:.1f} to {held[1]['ctx_acc']['mean']:.1f} %",
        f"held-out garments {successes(g_before)} to {successes(g_after)} of 18 (Geom. {g_before['geom']['mean']:.2f} "
        f"to {g_after['geom']['mean']:.2f})",
        f"hem-rigid starts {successes(h_before)} to {successes(h_after)} of 63 (Geom. {h_before['geom']['mean']:.2f} to "
        f"{h_after['geom']['mean']:.2f}), their held-out garments {successes(hg_before)} to {successes(hg_after)} of 18 "
        f"(Geom. {hg_before['geom']['mean']:.2f} to {hg_after['geom']['mean']:.2f})",
        f"second grasps {second[0]:.2f} to {second[1]:.2f} cm mean",
        f"hem-rigid held-out garments {successes(hg_after)} of 18 against the bar's {hem_bars['garments_csr']:.1f} %",
    ]
    assert_quoted(flat_doc("docs/evaluation.md"), quotes)
    assert successes(held[0]) == successes(held[1]) == 0  # "none folds to C-SR@95 either way"
