"""docs/evaluation.md's "The recipe trained on hem-rigid starts" tables and prose are the measured
JSONs: v6's recipe (its encoder, 16 starts per garment and fold, 10,000 steps, seed 0) trained on
the hem-rigid simulator preset's starts, beside v6 (the default), on both start sets."""

from __future__ import annotations

import numpy as np
from docs_quotes import (
    assert_quoted,
    count,
    counted,
    cpu_flags,
    doc,
    flat_doc,
    issue_28_bars,
    result,
    row_of,
    successes,
)
from test_docs_results_tracking import table_spec, tracking_table

from instant_fold_evaluation.compare import assert_comparable

V6, HEM = "v6 (the default)", "v6's recipe trained on hem-rigid starts"
V7 = "v7 candidate: the recipe from nothing on hem-rigid starts"

#: As `test_docs_results_tracking.TABLES`: (title, benchmark, held-out garments, references, rows).
TABLES = (
    table_spec(
        "cpu_sleeve",
        (
            (V6, "eval_cpu_sleeve_v6_first50.json", "eval_cpu_garments_sleeve_v6_first50.json"),
            (HEM, "eval_cpu_sleeve_hemtrained.json", "eval_cpu_garments_sleeve_hemtrained.json"),
            (V7, "eval_cpu_sleeve_v7.json", "eval_cpu_garments_sleeve_v7.json"),
        ),
    ),
    table_spec(
        "cpu",
        (
            (V6, "eval_cpu_v6_first50.json", "eval_cpu_garments_v6_first50.json"),
            (HEM, "eval_cpu_hemtrained.json", "eval_cpu_garments_hemtrained.json"),
            (V7, "eval_cpu_v7.json", "eval_cpu_garments_v7.json"),
        ),
    ),
)

#: Second draws (`--seed 1`) on the hem-rigid seen folds: v6, then the hem-rigid-trained policy.
SEED1 = ("eval_cpu_sleeve_v6_first50_seed1.json", "eval_cpu_sleeve_hemtrained_seed1.json")


def test_the_hem_training_tables_are_the_measured_ones() -> None:
    text = doc("docs/evaluation.md")
    for table in TABLES:
        assert tracking_table(*table) in text, tracking_table(*table)


def _pairs(label: str) -> list[tuple[str, str]]:
    """(v6's JSON, the `label` row's JSON) per benchmark column of both tables."""
    pairs = []
    for *_, rows in TABLES:
        v6, other = rows[0], next(row for row in rows if row[0] == label)
        pairs += [(v6[c], other[c]) for c in (1, 2)]
    return pairs


def _same_but(v6: str, other: str, checkpoint: str, encoder: str, machine: str, seed: int = 0) -> None:
    """`other` is v6's run (`v6`) with another checkpoint and encoder: what `compare` would compare
    (benchmark, bank, targets, seed, machine), on the same bank folder, this machine and seed."""
    a, b = result(v6), result(other)
    assert a["checkpoint"] == "models/policy" and b["checkpoint"] == checkpoint, other
    assert a["encoder"] == "models/encoder" and b["encoder"] == encoder, other
    assert_comparable(a, b)
    assert a["bank"] == b["bank"] and cpu_flags(b) == machine and b["seed"] == seed, other


def test_the_runs_differ_in_the_checkpoint_alone() -> None:
    """Per benchmark, v6's and the hem-rigid-trained policy's runs share the benchmark, encoder,
    event targets and their distances, bank, sampler seed and machine; the checkpoint is the shipped
    one or the training run's, whose weights are not the shipped ones."""
    training = result("hem_training.json")
    assert training["checkpoint_model_sha256"] != training["shipped_model_sha256"]
    assert training["policy_end"]["ranks_in_sync"] and training["policy_end"]["world_size"] == 2
    machine = cpu_flags("eval_cpu_sleeve_v6_first50.json")
    for v6, hem in _pairs(HEM):
        _same_but(v6, hem, training["checkpoint"], "models/encoder", machine)
    _same_but(*SEED1, training["checkpoint"], "models/encoder", machine, seed=1)


def _trained_here(label: str, training_json: str) -> dict:
    """A from-nothing candidate's runs: the same benchmarks, targets, banks, seed and machine as v6's,
    with the pipeline run's own encoder and policy (neither of them the shipped weights), trained on
    both processes to the end. Returns the training run's JSON."""
    training = result(training_json)
    assert training["checkpoint_model_sha256"] != training["shipped_model_sha256"]
    assert training["encoder_model_sha256"] != training["shipped_encoder_sha256"]
    assert training["policy_end"]["ranks_in_sync"] and training["policy_end"]["world_size"] == 2
    machine = cpu_flags("eval_cpu_sleeve_v6_first50.json")
    for v6, other in _pairs(label):
        _same_but(v6, other, training["checkpoint"], training["encoder_dir"], machine)
    return training


def test_the_v7_runs_differ_in_the_checkpoint_and_the_encoder() -> None:
    """v7 is trained on the same episodes as the hem-rigid-trained policy (the same store and oracle
    filter)."""
    training = _trained_here(V7, "v7_training.json")
    hem = result("hem_training.json")["policy_start"]
    assert (training["policy_start"]["episodes"], training["policy_start"]["samples"]) == (
        hem["episodes"],
        hem["samples"],
    )


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


def _missed_by_garment(name: str, metric: str) -> dict[str, int]:
    """Per garment of an evaluation JSON, the policy's folds a percentage metric did not count
    (C-SR@95: failures; Ctx. Acc.: misread contexts)."""
    garments = result(name)["garments"]["seen"]
    return {
        g: row["policy"]["folds"] - counted(row["policy"][metric], row["policy"]["folds"])
        for g, row in garments.items()
    }


def test_the_v7_prose_is_the_measured_one() -> None:
    training = result("v7_training.json")
    minutes, encoder = training["stage_minutes"], training["encoder"]
    hem_rows, old_rows = (rows for *_, rows in TABLES)
    v7_hem, v7_old = (next(row for row in rows if row[0] == V7) for rows in (hem_rows, old_rows))
    hem, hem_garments, old, old_garments = (row_of(name) for name in (*v7_hem[1:], *v7_old[1:]))
    v6 = [row_of(name) for row in (hem_rows[0], old_rows[0]) for name in row[1:]]
    hem_bars = issue_28_bars("eval_cpu_sleeve_reference.json", "eval_cpu_garments_sleeve_reference.json")
    start = training["policy_start"]
    quotes = [
        f"Encoder {minutes['2/6']} min (loss {encoder['first_loss']:.2f} -> {encoder['last']['loss']:.2f}), "
        f"tokenising {minutes['3/6']} min, keypoint detector {minutes['4/6']} min, policy {minutes['5/6']} min "
        f"({start['episodes']} episodes, {start['samples']:,} samples",
        f"offline evaluation {minutes['6/6']} min",
        f"seen folds {successes(hem)} of 63 (Geom. {hem['geom']['mean']:.2f}, first grasps "
        f"{100 * hem['first_grasp']['xy_m']['mean']:.1f} cm), held-out garments {successes(hem_garments)} of 18 "
        f"({hem_garments['csr95']['mean']:.1f} % against {hem_bars['garments_csr']:.1f} %)",
        f"context accuracy {old['ctx_acc']['mean']:.1f} % ({count(old, 'ctx_acc')} of 63)**, below the 95 % bar v6 "
        f"meets ({v6[2]['ctx_acc']['mean']:.1f} %), seen folds {successes(old)} of 63 (Geom. {old['geom']['mean']:.2f}), "
        f"held-out garments {successes(old_garments)} of 18",
        f"{sum(map(successes, (hem, hem_garments, old, old_garments)))} successes over the four benchmarks against "
        f"v6's {sum(map(successes, v6))}",
    ]
    assert old["ctx_acc"]["mean"] < 95 <= v6[2]["ctx_acc"]["mean"]
    assert hem_garments["csr95"]["mean"] >= hem_bars["garments_csr"]
    lost = _missed_by_garment(v7_hem[2], "csr95")
    assert lost["proc_00005"] == 6 and sum(lost.values()) == 18 - successes(hem_garments) == 7
    misread, v6_misread = (_missed_by_garment(name, "ctx_acc") for name in (v7_old[1], old_rows[0][1]))
    assert sum(misread.values()) == 6 and sum(n > 0 for n in misread.values()) == 4 and misread["proc_00004"] == 3
    assert {garment for garment, n in v6_misread.items() if n} == {"proc_00004"}
    draw, v6_draw = row_of("eval_cpu_v7_seed1.json"), row_of("eval_cpu_v6_first50_seed1.json")
    main_job = result("main_job_v7.json")
    assert (main_job["policy"], main_job["encoder"]) == (training["checkpoint"], training["encoder_dir"])
    job = main_job["same_init"]
    quotes += [
        f"context {draw['ctx_acc']['mean']:.1f} % ({count(draw, 'ctx_acc')} of 63), {successes(draw)} of 63 (Geom. "
        f"{draw['geom']['mean']:.2f}), where v6's second draw folds {successes(v6_draw)} of 63 (Geom. "
        f"{v6_draw['geom']['mean']:.2f}): v7 folds the old starts worse than v6 in both draws",
        f"Geom. {job['geom']:.2f} against its envelope of {job['envelope']:.2f}, a success",
    ]
    assert successes(draw) < successes(v6_draw) and successes(old) < successes(v6[2]) and job["csr95_success"]
    _same_but(
        "eval_cpu_v6_first50_seed1.json",
        "eval_cpu_v7_seed1.json",
        training["checkpoint"],
        training["encoder_dir"],
        cpu_flags("eval_cpu_v6_first50_seed1.json"),
        seed=1,
    )
    assert_quoted(flat_doc("docs/evaluation.md"), quotes)


def test_the_held_out_garments_are_the_shortest() -> None:
    """docs/evaluation.md: every held-out garment of the benchmarks is shorter along the body (the
    mesh's y extent) than every training garment, and `proc_00005` is the shortest of the ten."""
    from instant_fold_sim.garments import resolve_garment

    def lengths(name: str) -> dict[str, float]:
        """The y extent of every garment a scored benchmark (hem-rigid v7 run) names."""
        return {
            spec: float(np.ptp(np.asarray(resolve_garment(spec).vertices)[:, 1]))
            for spec in result(name)["benchmark"]["garments"]
        }

    (_, seen, garments), _ = (next(row for row in rows if row[0] == V7) for *_, rows in TABLES)
    training, held_out = lengths(seen), lengths(garments)
    assert len(training) == 7 and len(held_out) == 3
    assert max(held_out.values()) < min(training.values())
    assert min(held_out, key=held_out.__getitem__) == "proc:5"
