"""docs/evaluation.md's "The recipe trained on hem-rigid starts" tables and prose are the measured
JSONs: v6's recipe (its encoder, 16 starts per garment and fold, 10,000 steps, seed 0) trained on
the hem-rigid simulator preset's starts, beside v6 (the default), on both start sets."""

from __future__ import annotations

from docs_quotes import assert_quoted, doc, flat_doc, issue_28_bars, result, row_of, successes
from test_docs_results_tracking import table_spec, tracking_table

V6, HEM = "v6 (the default)", "v6's recipe trained on hem-rigid starts"

#: As `test_docs_results_tracking.TABLES`: (title, benchmark, held-out garments, references, rows).
TABLES = (
    table_spec(
        "cpu_sleeve",
        (
            (V6, "eval_cpu_sleeve_v6_first50.json", "eval_cpu_garments_sleeve_v6_first50.json"),
            (HEM, "eval_cpu_sleeve_hemtrained.json", "eval_cpu_garments_sleeve_hemtrained.json"),
        ),
    ),
    table_spec(
        "cpu",
        (
            (V6, "eval_cpu_v6_first50.json", "eval_cpu_garments_v6_first50.json"),
            (HEM, "eval_cpu_hemtrained.json", "eval_cpu_garments_hemtrained.json"),
        ),
    ),
)

#: Second draws (`--seed 1`) on the hem-rigid seen folds: v6, then the hem-rigid-trained policy.
SEED1 = ("eval_cpu_sleeve_v6_first50_seed1.json", "eval_cpu_sleeve_hemtrained_seed1.json")


def test_the_hem_training_tables_are_the_measured_ones() -> None:
    text = doc("docs/evaluation.md")
    for table in TABLES:
        assert tracking_table(*table) in text, tracking_table(*table)


def test_the_runs_differ_in_the_checkpoint_alone() -> None:
    """Per benchmark, both policies' runs share the benchmark, encoder, event targets and their
    distances, bank, sampler seed and machine; the checkpoint is the shipped one or the training
    run's, whose weights are not the shipped ones."""
    training = result("hem_training.json")
    assert training["checkpoint_model_sha256"] != training["shipped_model_sha256"]
    assert training["policy_end"]["ranks_in_sync"] and training["policy_end"]["world_size"] == 2
    machine = result("eval_cpu_sleeve_v6_first50.json")["machine"]["cpu_flags_sha256"]
    keys = ("benchmark", "encoder", "event_targets", "first_grasp_match_m", "grasp_match_m", "grasp_conflict_m", "bank")
    pairs = [(row[c], other[c]) for *_, (row, other, _replay) in TABLES for c in (1, 2)] + [SEED1]
    for v6, hem in pairs:
        a, b = result(v6), result(hem)
        assert a["checkpoint"] == "models/policy" and b["checkpoint"] == training["checkpoint"], hem
        assert all(a.get(k) == b.get(k) for k in keys), hem
        assert a["machine"]["cpu_flags_sha256"] == b["machine"]["cpu_flags_sha256"] == machine, hem
        assert (a.get("seed") or 0) == b["seed"] == (1 if "seed1" in hem else 0), hem


def test_the_hem_training_prose_is_the_measured_one() -> None:
    training = result("hem_training.json")
    (hem_rows, old_rows) = (rows for *_, rows in TABLES)
    (hv6, hg_v6), (hem, hg_hem) = ((row_of(a), row_of(b)) for _, a, b in hem_rows[:2])
    (ov6, og_v6), (old, og_hem) = ((row_of(a), row_of(b)) for _, a, b in old_rows[:2])
    d_v6, d_hem = (row_of(name) for name in SEED1)
    hem_bars = issue_28_bars("eval_cpu_sleeve_reference.json", "eval_cpu_garments_sleeve_reference.json")
    total_v6 = sum(map(successes, (hv6, hg_v6, ov6, og_v6)))
    total_hem = sum(map(successes, (hem, hg_hem, old, og_hem)))
    start = training["policy_start"]
    quotes = [
        f"{training['generation']['episodes_this_run']} episodes in {training['generation']['minutes_this_run']} min",
        f"policy {training['minutes']} min ({start['episodes']} episodes, {start['samples']:,} samples)",
        f"Hem-rigid starts: {successes(hv6)} to {successes(hem)} of 63 (Geom. {hv6['geom']['mean']:.2f} to "
        f"{hem['geom']['mean']:.2f})",
        f"second draw (`--seed 1`) {successes(d_v6)} to {successes(d_hem)} (Geom. {d_v6['geom']['mean']:.2f} to "
        f"{d_hem['geom']['mean']:.2f})",
        f"held-out garments {successes(hg_v6)} to {successes(hg_hem)} of 18 (bar {hem_bars['garments_csr']:.1f} %)",
        f"Old starts: {successes(ov6)} to {successes(old)} of 63 (Geom. {ov6['geom']['mean']:.2f} to "
        f"{old['geom']['mean']:.2f}), held-out garments {successes(og_v6)} to {successes(og_hem)} of 18",
        f"{total_v6} against {total_hem} successes over the four benchmarks",
    ]
    assert_quoted(flat_doc("docs/evaluation.md"), quotes)
