"""Reference rows on hand-made oracle families (no simulation): the out-of-sample oracle row leaves
each execution out of its own calibration, first-grasp and event errors are per fold and
summarised, and a results directory is re-scored from its rollouts."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from instant_fold_core.errors import ConfigError
from instant_fold_core.fold_record import FoldRecord, GraspEpisode, InitInfo
from instant_fold_evaluation.benchmark import BenchmarkSpec
from instant_fold_evaluation.evaluate import default_bank, main, merge_tables, row_labels, tables
from instant_fold_evaluation.metrics import OracleReference, RolloutScore
from instant_fold_evaluation.oracle_bank import BankEntry, Family, OracleBank, OracleBankError
from instant_fold_evaluation.scoring import (
    OUT_OF_SAMPLE,
    notes,
    primitive_table,
    primitives_recognised,
    score_line,
    score_rows,
    summarize_contexts,
    summarize_garments,
    summarize_rows,
)
from instant_fold_sim.rollout import preset

# A 0.4 x 0.6 garment of size 1 centred at the origin, shoulders at +y: garment uv = world xy.
START = np.array(
    [[-0.2, 0.3, 0], [0.2, 0.3, 0], [-0.2, -0.3, 0], [0.2, -0.3, 0], [-0.2, 0.25, 0], [0.2, 0.25, 0], [0, 0, 0]]
)
INIT = InitInfo(START, 1.0, 30.0)
SPEC = BenchmarkSpec.load("tiny")  # contexts A, B below; preset cpu-small
A, B = (c.label for c in SPEC.contexts)
SCALE = preset(SPEC.preset).obs_scale


def _fold(arm: int, grasp_xy: tuple[float, float], moved_u: float = 0.0) -> FoldRecord:
    """One grasp of `arm` at `grasp_xy` (release 10 cm further in y); top_left ends `moved_u` off."""
    g = np.array([*grasp_xy, 0.0])
    final = START.copy()
    final[0, 0] += moved_u
    return FoldRecord((GraspEpisode(arm, 10, 20, g, g + np.array([0, 0.1, 0]), True),), final, 0.5, 30)


def _family(a_runs: list[FoldRecord], b_runs: list[FoldRecord]) -> Family:
    return Family.build({A: BankEntry(INIT, [0], a_runs), B: BankEntry(INIT, [0], b_runs)})


def _geometry_family() -> Family:
    """A's execution 0 is the outlier: top_left 0.2 off and its grasp 10 cm off; 1 and 2 at +-0.02 / +-1 cm."""
    a = [_fold(0, (0.1, 0.0), 0.2), _fold(0, (0.01, 0.0), 0.02), _fold(0, (-0.01, 0.0), -0.02)]
    b = [_fold(1, (-0.5, 0.0), d) for d in (0.0, 0.01, -0.01)]
    return _family(a, b)


def _oracle_scores(fam: Family):
    """The in-sample and out-of-sample oracle rows' (split, score, extra) of `fam`."""
    rows = score_rows(SPEC, {SPEC.inits()[0]: fam}, None)
    return rows["oracle"], rows[OUT_OF_SAMPLE]


def test_leave_out_recalibrates_on_the_other_executions_only():
    fam = _geometry_family()
    held = fam.leave_out(A, 0)
    runs = fam.entries[A].runs
    assert [id(r) for r in held.entries[A].runs] == [id(r) for r in runs[1:]]
    assert held.entries[B] is fam.entries[B]
    expected = OracleReference.from_runs(np.stack([r.final_keypoints[:, :2] for r in runs[1:]]), [0.5, 0.5], [0])
    np.testing.assert_allclose(held.references[A].target, expected.target)
    assert held.references[A].envelope == expected.envelope
    assert len(held.classifier.labels) == len(fam.classifier.labels) - 1
    np.testing.assert_allclose(held.events[A].first_grasps().position[0], [0, 0, 0], atol=1e-12)
    assert len(fam.entries[A].runs) == 3  # the family itself is left as it was
    with pytest.raises(OracleBankError, match="no execution 3"):
        fam.leave_out(A, 3)


def test_the_left_out_execution_does_not_calibrate_its_own_geometry_or_grasp():
    """In sample, execution 0 pulls the target and the median error towards itself (Geom. 0.18 /
    0.04 = 4.5); left out, the target is the others' median 0 and their median error 0.02: Geom.
    0.2 / 0.02 = 10 exactly, and its grasp is 10 cm (times obs_scale) from theirs, not 9."""
    inside, outside = _oracle_scores(_geometry_family())
    assert inside[0][1].geom == pytest.approx(4.5) and outside[0][1].geom == pytest.approx(10.0)
    assert not outside[0][1].success  # the others' envelope is their quality, 1
    grasp = outside[0][2]["first_grasp"]
    assert grasp.xy[0] == pytest.approx(0.1 * SCALE) and grasp.expected == (True, False)
    # The scores are exactly those of the left-out family's own scoring path.
    fam = _geometry_family()
    for k, (_, score, _) in enumerate(outside[:3]):
        same = fam.leave_out(A, k).score(SPEC.inits()[0].garment_id, A, fam.entries[A].runs[k])
        assert (score.geom, score.quality, score.predicted, score.success) == (
            same.geom,
            same.quality,
            same.predicted,
            same.success,
        )
    assert len(outside) == len(inside) == 6 and "first_grasp" not in inside[0][2]


def test_the_left_out_execution_does_not_vote_for_its_own_context():
    """3-NN along one line of grasp positions: A0 at 0, B at 0.5, A at 1, B at 1.5, A at 2, B at 3.
    In sample A0 votes for itself (A0, B, A: context A); left out its neighbours are B, A, B."""
    a = [_fold(0, (u, 0.0), d) for u, d in ((0.0, 0.0), (1.0, 0.01), (2.0, -0.01))]
    b = [_fold(0, (u, 0.0), d) for u, d in ((0.5, 0.0), (1.5, 0.01), (3.0, -0.01))]
    inside, outside = _oracle_scores(_family(a, b))
    assert inside[0][1].predicted == A and inside[0][1].context_correct
    assert outside[0][1].predicted == B and not outside[0][1].context_correct


def test_summary_table_and_lines_of_the_out_of_sample_row(tmp_path: Path):
    fam = _geometry_family()
    init = SPEC.inits()[0]
    # The policy grasps with the left arm 3 cm from the oracle's median of A and never with the right.
    rollouts = {(init, A): _fold(0, (0.01 + 0.03 / SCALE, 0.0)), (init, B): _fold(0, (0.0, 0.0))}
    rows = score_rows(SPEC, {init: fam}, rollouts)
    summaries = summarize_rows(rows, {A: np.zeros((1, 7, 2)), B: np.zeros((1, 7, 2))})
    oos = summaries[OUT_OF_SAMPLE]["seen"]
    assert oos["w1"] is None and oos["rollouts"] == 6 and oos["first_grasp"]["arms"] == 6
    policy = summaries["policy"]["seen"]["first_grasp"]
    # A: left arm expected and 3 cm off; B: right arm expected, the policy used the left: missed.
    assert (policy["arms"], policy["measured"], policy["missed"]) == (2, 1, 1)
    assert policy["xy_m"]["median"] == pytest.approx(0.03) and policy["within_5cm"] == pytest.approx(0.5)
    assert "first_grasp" not in summaries["oracle"]["seen"] and "first_grasp" not in summaries["wrong-demo"]["seen"]
    # Every event: A's release is 3 cm off as its grasp; B's left-arm grasp and release are extra.
    events = summaries["policy"]["seen"]["events"]
    assert list(events) == ["grasp 1", "release 1"] and events["release 1"]["xy_m"]["mean"] == pytest.approx(0.03)
    assert (events["release 1"]["missed"], events["release 1"]["extra"]) == (1, 1)
    assert summaries[OUT_OF_SAMPLE]["seen"]["events"]["grasp 1"]["expected"] == 6
    assert "events" not in summaries["oracle"]["seen"] and "events" not in summaries["wrong-demo"]["seen"]
    line = json.loads(json.dumps(score_line("policy", "seen", *rows["policy"][0][1:])))
    assert line["first_grasp"]["xy_m"][0] == pytest.approx(0.03)
    assert [(e["event"], e["arm"], e["performed"]) for e in line["events"]] == [
        ("grasp 1", 0, True),
        ("release 1", 0, True),
    ]
    assert notes({init: fam}, summaries) == []
    # B's fold was taken for A: the same two halves in the other order, so both halves count as recognised.
    assert [s.predicted for _, s, _ in rows["policy"]] == [A, A]
    contexts = summarize_contexts(rows)
    assert contexts[B]["policy"]["classified_as"] == {A: 1} and contexts[A]["policy"]["classified_as"] == {A: 1}
    assert contexts[A]["do-nothing"]["classified_as"] == {}  # no fold, nothing classified
    garments = summarize_garments(rows)  # one garment: its cell is the row's whole seen split
    ((garment, cell),) = garments["seen"].items()
    assert garment == rows["policy"][0][1].garment and set(garments) == {"seen"}
    assert cell["policy"]["folds"] == 2 and cell["policy"]["classified_as"] == {A: 2}
    assert cell["policy"]["ctx_acc"] == summaries["policy"]["seen"]["ctx_acc"]["mean"]
    assert cell["policy"]["csr95"] == summaries["policy"]["seen"]["csr95"]["mean"]
    ((k, start),) = cell["starts"].items()  # one start: its cell is the garment's
    assert k == str(SPEC.inits()[0].k) and start["policy"] == cell["policy"]
    assert summaries["policy"]["seen"]["primitives"] == {"sleeve": 100.0, "body": 100.0, "both": 100.0, "folds": 2}
    assert "primitives" not in summaries["oracle"]["seen"] and "primitives" not in summaries["wrong-demo"]["seen"]

    summary = {"label": "p", "checkpoint": None, "rows": summaries}
    text = tables(row_labels(summary))
    assert "| oracle (in-sample) |" in text and "| oracle (out-of-sample) |" in text
    oos_line = next(line for line in text.splitlines() if line.startswith("| oracle (out-of-sample) |"))
    assert oos_line.split(" | ")[4] == "–"  # no W1
    assert "| first grasp, xy (cm) |" in text and "| p | 3.0 | 3.0 | 50.0 | 1/2 |" in text
    assert "| grasps and releases, xy (cm) |" in text and "| p: release 1 | 3.0 | 3.0 | 50.0 | 1/2 | 1 | – |" in text
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "summary.json").write_text(json.dumps(summary))
    merged = merge_tables([str(tmp_path / "run"), str(tmp_path / "run")])
    # Table 1, the first-grasp and the fold-halves table, once each
    assert merged.count("| oracle (out-of-sample) |") == 3 and "| p | 100.0 | 100.0 | 100.0 | – | – | – |" in merged
    assert merged.count("| oracle (out-of-sample): grasp 1 |") == 1


def test_two_executions_per_context_give_no_out_of_sample_row_and_say_why():
    fam = _family([_fold(0, (0, 0)), _fold(0, (0.01, 0))], [_fold(1, (0.5, 0)), _fold(1, (0.51, 0))])
    rows = score_rows(SPEC, {SPEC.inits()[0]: fam}, None)
    assert OUT_OF_SAMPLE not in rows and "oracle" in rows
    with pytest.raises(OracleBankError, match="at least 3"):
        fam.leave_out(A, 0)
    (note,) = notes({SPEC.inits()[0]: fam}, summarize_rows(rows, {A: np.zeros((1, 7, 2)), B: np.zeros((1, 7, 2))}))
    assert "out-of-sample" in note and "has 2" in note


def _finished_run(root: Path) -> Path:
    """A results directory as `evaluate` leaves it (run.json, rollouts.jsonl, summary.json), scored
    against a bank written here from `_geometry_family`'s executions: no simulation."""
    bank = OracleBank(root / "bank", SPEC.preset, 3)
    fam = _geometry_family()
    for key in SPEC.bank_keys():
        bank.path(key).parent.mkdir(parents=True, exist_ok=True)
        bank.path(key).write_text(json.dumps(fam.entries[key.context.label].to_json()))
    run = root / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"benchmark": SPEC.to_dict(), "checkpoint_id": "p"}))
    folds = {A: _fold(0, (0.01 + 0.03 / SCALE, 0.0)), B: _fold(1, (-0.5, 0.0))}
    lines = [{"id": j.id, "outcome": "completed", "record": folds[j.context.label].to_json()} for j in SPEC.jobs()]
    (run / "rollouts.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    summary = {"bank": str(root / "bank"), "checkpoint": "p", "label": "p", "rows": {}, "notes": [], "rollouts": 2}
    (run / "summary.json").write_text(json.dumps(summary))
    return run


def test_rescore_scores_a_runs_rollouts_into_another_folder_and_leaves_the_run_alone(tmp_path: Path, capsys):
    run = _finished_run(tmp_path)
    before = {p.name: p.read_text() for p in run.iterdir()}
    out = tmp_path / "rescored"
    assert main(["rescore", str(run), "--out", str(out)]) == 0
    assert {p.name: p.read_text() for p in run.iterdir()} == before
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rescored_from"] == str(run) and summary["rollouts"] == 2 and summary["label"] == "p"
    assert summary["bank_runs"] == 3  # the bank's executions per context, what the rows were scored against
    events = summary["rows"]["policy"]["seen"]["events"]
    assert events["grasp 1"]["xy_m"]["median"] == pytest.approx(0.015) and events["release 1"]["missed"] == 0
    assert set(summary["rows"]) == {"policy", "wrong-demo", "oracle", OUT_OF_SAMPLE, "do-nothing"}
    assert {g["policy"]["folds"] for g in summary["garments"]["seen"].values()} == {2}  # the breakdown too
    assert (out / "rollouts.jsonl").read_text() == before["rollouts.jsonl"]
    assert json.loads((out / "run.json").read_text()) == json.loads(before["run.json"])
    assert "| p: release 1 |" in (out / "table.md").read_text()
    assert (
        sum(1 for _ in (out / "scores.jsonl").open()) == 2 + 2 + 6 + 6 + 2
    )  # policy, wrong-demo, oracle x2, do-nothing
    # Never over the run itself; a run with a rollout missing is refused, not half-scored.
    assert main(["rescore", str(run), "--out", str(run)]) == 2
    (run / "rollouts.jsonl").write_text(before["rollouts.jsonl"].splitlines()[0] + "\n")
    assert main(["rescore", str(run), "--out", str(tmp_path / "other")]) == 2
    err = capsys.readouterr().err
    assert "never over the run it reads" in err and "1 of 2 rollouts missing" in err


@pytest.mark.parametrize("name", ["cpu_folds", "cpu_folds_garments", "cpu_folds_quick"])
def test_the_breadth_benchmarks_score_the_fold_split(name: str):
    """Seen folds are exactly the training contexts and held-out folds the held-out ones, with 10
    oracle executions each: the per-context table then covers every fold of the split."""
    from instant_fold_sim.fold_split import HELDOUT_CONTEXTS, TRAINING_CONTEXTS
    from instant_fold_sim.garments import split_of_seed

    spec = BenchmarkSpec.load(name)
    assert tuple(c.label for c in spec.seen) == TRAINING_CONTEXTS
    assert tuple(c.label for c in spec.heldout) == HELDOUT_CONTEXTS
    assert spec.oracle_runs == 10
    garment_split = "heldout" if name == "cpu_folds_garments" else "train"
    assert {split_of_seed(int(g.split(":")[1])) for g in spec.garments} == {garment_split}
    assert spec.max_steps == 220  # sequential sleeve folds run up to ~280 frames scripted (2 per query)
    if name == "cpu_folds_quick":  # the full benchmark's first garment: its bank and demonstrations
        full = BenchmarkSpec.load("cpu_folds")
        assert spec.garments == full.garments[:1] and set(spec.bank_keys()) <= set(full.bank_keys())
        assert spec.store == "cpu_folds"


@pytest.mark.parametrize(
    ("name", "of"), [("cpu_sleeve", "cpu"), ("cpu_garments_sleeve", "cpu_garments"), ("cpu_quick_sleeve", "cpu_quick")]
)
def test_the_hem_rigid_benchmarks_are_their_namesakes_on_the_sleeve_preset(name: str, of: str):
    """Same garments, starts, folds and executions as the benchmark they remake; only the simulator
    preset differs, so their banks can never be mixed with the old ones (a bank records its preset)."""
    spec, old = BenchmarkSpec.load(name), BenchmarkSpec.load(of)
    assert (spec.preset, old.preset) == ("cpu-small-sleeve", "cpu-small")
    assert dataclasses.replace(spec, name=old.name, preset=old.preset, part_of=old.part_of) == old
    if name == "cpu_quick_sleeve":  # its bank and demonstrations are the full benchmark's
        assert spec.store == "cpu_sleeve" and old.store == "cpu"


def _classified(context: str, predicted: str | None) -> RolloutScore:
    return RolloutScore("proc_00000", context, predicted, predicted == context, 5.0, 5.0, False, np.zeros((7, 2)), 0.5)


def test_primitives_say_which_half_of_a_missed_fold_went_to_a_trained_neighbour():
    held_out = "sleeves_diagonal__bottom_up/R"
    scores = [
        _classified(held_out, "sleeves_diagonal__side_fold/RR"),  # sleeves right, body wrong
        _classified(held_out, "body_bottom_up__sleeves_down/S"),  # body right (other order), sleeves wrong
        _classified(held_out, "sleeves_diagonal__bottom_up/L"),  # both halves, wrong variant
        _classified(held_out, None),  # unclassified: neither
    ]
    found = primitives_recognised(scores)
    assert found == {"sleeve": 50.0, "body": 50.0, "both": 25.0, "folds": 4}
    assert primitives_recognised([_classified("random_drag_1/S", None)]) is None  # not a fold: no claim
    text = primitive_table([("p", {"heldout": {"primitives": found}}), ("q", {"seen": {}})])
    assert "| p | – | – | – | 50.0 | 50.0 | 25.0 |" in text and "| q |" not in text
    assert primitive_table([("q", {"seen": {}})]) == ""


@pytest.mark.parametrize(("name", "whole"), [("cpu_quick", "cpu"), ("cpu_quick_sleeve", "cpu_sleeve")])
def test_a_quick_yardstick_scores_against_its_whole_benchmarks_bank(name: str, whole: str):
    """A cut (`part_of`) keeps no bank or demonstrations of its own: a copy could drift from the
    executions the full benchmark is scored against."""
    spec, full = BenchmarkSpec.load(name), BenchmarkSpec.load(whole)
    assert default_bank(spec) == default_bank(full) and spec.store == whole
    assert set(spec.bank_keys()) < set(full.bank_keys()) and set(spec.jobs()) < set(full.jobs())


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("oracle_runs: 4", r"\['oracle_runs'\] differ"),
        ("garments: [proc:0, proc:5]", r"garments \['proc:5'\] are not in 'cpu'"),
        ("seen: [sleeves_down__shoulders_down/S, sleeves_cross__side_fold/LL]", r"folds \['sleeves_cross"),
        ("part_of: cpu_quick", "itself part of 'cpu'"),
    ],
)
def test_a_cut_that_needs_executions_its_whole_lacks_is_refused(tmp_path, change: str, message: str):
    data = {**BenchmarkSpec.load("cpu_quick").to_dict(), **yaml.safe_load(change)}
    path = tmp_path / "cut.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=message):
        BenchmarkSpec.load(str(path))
