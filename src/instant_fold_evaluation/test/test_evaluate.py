"""The `evaluate` CLI end to end on the tiny benchmark: outputs, reference rows, resume, bad input."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from instant_fold_core.compute_threads import machine_record
from instant_fold_evaluation.benchmark import BenchmarkSpec
from instant_fold_evaluation.evaluate import main, merge_tables
from instant_fold_evaluation.oracle_bank import BankEntry, OracleBank, OracleBankError
from instant_fold_ros.bringup_share import models_dir
from instant_fold_sim.rollout import ExecutionNoise


def _summary(run: Path) -> dict:
    return json.loads((run / "out" / "summary.json").read_text())


def test_evaluate_writes_rollouts_scores_summary_and_table(tiny_run: Path) -> None:
    out = tiny_run / "out"
    rollouts = [json.loads(line) for line in (out / "rollouts.jsonl").read_text().splitlines()]
    spec = BenchmarkSpec.load("tiny")
    assert sorted(r["id"] for r in rollouts) == sorted(j.id for j in spec.jobs())
    for r in rollouts:  # 4 queries of 2 executed steps each, one frame per step
        assert r["outcome"] == "step_limit" and r["queries"] == 4 and r["frames"] == 8
        assert len(r["record"]["final_keypoints"]) == 7
    scores = [json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines()]
    assert {s["row"] for s in scores} == {"policy", "wrong-demo", "oracle", "do-nothing"}
    assert sum(s["row"] == "oracle" for s in scores) == 2 * 2  # contexts x oracle executions
    # Every policy rollout has its first-grasp error against the oracle's executions of its context.
    assert all(
        set(s["first_grasp"]) == {"expected", "grasped", "xy_m", "xyz_m"} for s in scores if s["row"] == "policy"
    )
    summary = _summary(tiny_run)
    assert set(summary["rows"]) == {"policy", "wrong-demo", "oracle", "do-nothing"}
    assert summary["bank_runs"] == 2  # oracle executions per context
    assert summary["machine"] == machine_record()  # what its numbers also depend on
    assert summary["rows"]["policy"]["seen"]["ctx_acc"]["garments"] == 1
    assert summary["rows"]["policy"]["seen"]["first_grasp"]["arms"] > 0
    # ... and broken down by garment: the one garment's cell holds every seen policy fold.
    ((garment, cell),) = summary["garments"]["seen"].items()
    assert (
        garment in {s["garment"] for s in scores}
        and cell["policy"]["folds"] == summary["rows"]["policy"]["seen"]["rollouts"]
    )
    # Two executions per context: none can be left out of its calibration, and the summary says so.
    assert [n for n in summary["notes"] if "out-of-sample" in n and "has 2" in n]
    table = (out / "table.md").read_text()
    assert "Ctx. Acc." in table and "| oracle (in-sample) |" in table and "| do-nothing |" in table
    assert "| policy |" in table and "| first grasp, xy (cm) |" in table


def test_the_per_context_table_breaks_the_rows_down_by_the_scores_of_each_context(tiny_run: Path) -> None:
    out = tiny_run / "out"
    scores = [json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines()]
    contexts = _summary(tiny_run)["contexts"]
    labels = [c.label for c in BenchmarkSpec.load("tiny").contexts]
    assert sorted(contexts) == sorted(labels)
    table = (out / "table.md").read_text()
    for label, c in contexts.items():
        assert c["split"] == "seen" and "oracle-out-of-sample" not in c  # 2 executions: no such row
        for row in ("policy", "do-nothing"):
            folds = [s for s in scores if s["row"] == row and s["context"] == label]
            assert c[row]["folds"] == len(folds) == 1
            assert c[row]["geom"] == pytest.approx(sum(s["geom"] for s in folds) / len(folds))
            assert c[row]["csr95"] == 100.0 * sum(s["success"] for s in folds) / len(folds)
        policy = c["policy"]
        line = (
            f"| {label} | seen | 1 | {policy['ctx_acc']:.1f} | {policy['csr95']:.1f} | {policy['geom']:.2f} | – | – |"
        )
        assert line in table
    assert [table.index(f"| {label} |") for label in labels] == sorted(table.index(f"| {label} |") for label in labels)


def test_oracle_classifies_its_own_context_and_do_nothing_never_succeeds(tiny_run: Path) -> None:
    rows = _summary(tiny_run)["rows"]
    oracle, nothing = rows["oracle"]["seen"], rows["do-nothing"]["seen"]
    assert oracle["ctx_acc"]["mean"] == 100.0
    # By construction the runs at or under their own 95th percentile pass: (K - 1) / K = 1 / 2 for K = 2.
    assert oracle["csr95"]["mean"] == 50.0
    assert oracle["w1"] == 0.0
    assert nothing["ctx_acc"]["mean"] == 0.0 and nothing["csr95"]["mean"] == 0.0
    assert nothing["geom"]["mean"] > oracle["geom"]["mean"]


def test_a_finished_evaluation_resumes_without_simulating_again(tiny_run: Path) -> None:
    before = _summary(tiny_run)
    args = ["--benchmark", "tiny", "--checkpoint", str(models_dir() / "policy")]
    args += ["--bank", str(tiny_run / "bank"), "--demo-dir", str(tiny_run / "demos"), "--out", str(tiny_run / "out")]
    assert main(args) == 0
    after = _summary(tiny_run)
    assert after["timing"]["rollouts_run"] == 0
    assert after["timing"]["bank_s"] < 5.0  # loads the bank, builds nothing
    assert after["rows"] == before["rows"]


def test_the_module_runs_its_rollouts_on_ray_workers(tiny_run: Path, tmp_path: Path) -> None:
    """As users run it (`python -m`, two Ray workers): the workers must find the job functions."""
    out = tmp_path / "ray"
    cmd = [sys.executable, "-m", "instant_fold_evaluation.evaluate", "--benchmark", "tiny", "--workers", "2"]
    cmd += ["--checkpoint", str(models_dir() / "policy"), "--max-steps", "1", "--out", str(out)]
    cmd += ["--bank", str(tiny_run / "bank"), "--demo-dir", str(tiny_run / "demos")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rollouts = [json.loads(line) for line in (out / "rollouts.jsonl").read_text().splitlines()]
    assert len(rollouts) == 2 and all(r["queries"] == 1 and r["frames"] == 2 for r in rollouts)


def test_a_results_directory_of_another_configuration_is_refused(tiny_run: Path, capsys) -> None:
    args = ["--benchmark", "tiny", "--checkpoint", str(models_dir() / "policy"), "--seed", "1"]
    args += ["--bank", str(tiny_run / "bank"), "--demo-dir", str(tiny_run / "demos"), "--out", str(tiny_run / "out")]
    assert main(args) == 2  # its rollouts were sampled with seed 0: never mixed with seed 1's
    err = capsys.readouterr().err
    assert "another configuration" in err and "'seed'" in err
    run = tiny_run / "out" / "run.json"
    fingerprint = json.loads(run.read_text())
    assert fingerprint["seed"] == 0
    # Written before the encoder had one name, the encoder's id was `tokenizer_id`: the same run.
    fingerprint["tokenizer_id"] = fingerprint.pop("encoder_id")
    run.write_text(json.dumps(fingerprint))
    assert main([arg if arg != "1" else "0" for arg in args]) == 0  # seed 0 again
    assert _summary(tiny_run)["timing"]["rollouts_run"] == 0


def test_a_bank_resumes_run_by_run_and_reruns_identically(tiny_run: Path, tmp_path: Path) -> None:
    spec = BenchmarkSpec.load("tiny")
    key = spec.bank_keys()[0]
    bank = OracleBank(tiny_run / "bank", spec.preset, spec.oracle_runs)
    full = bank.load(key)
    assert full is not None and len(full.runs) == 2
    # Seeded noise: the two executions differ, and a lost execution is rebuilt exactly.
    assert not (full.runs[0].final_keypoints == full.runs[1].final_keypoints).all()
    copy = OracleBank(tmp_path / "bank", spec.preset, spec.oracle_runs)
    partial = BankEntry(full.init, full.context_keypoints, full.runs[:1])
    copy.path(key).parent.mkdir(parents=True)
    copy.path(key).write_text(json.dumps(partial.to_json()))
    assert copy.load(key) is None  # incomplete
    rebuilt = copy.build(key)
    assert rebuilt.to_json() == full.to_json()


def test_a_bank_of_another_configuration_is_refused(tiny_run: Path) -> None:
    with pytest.raises(OracleBankError, match="another configuration"):
        OracleBank(tiny_run / "bank", "cpu-small", runs=2, noise=ExecutionNoise(grasp_sigma=0.05))
    with pytest.raises(OracleBankError, match=r"bank of 2 executions per context; asked for 3\. Grow it"):
        OracleBank(tiny_run / "bank", "cpu-small", runs=3)


def test_a_grown_bank_keeps_its_executions_and_adds_the_next_ones(tiny_run: Path, tmp_path: Path) -> None:
    """Raising K (`evaluate --grow-bank`): run k uses noise seed k, so the executions a bank has are
    the first ones of the larger bank and only the missing ones are simulated."""
    spec = BenchmarkSpec.load("tiny")
    key = spec.bank_keys()[0]
    shutil.copytree(tiny_run / "bank", tmp_path / "bank")
    bank = OracleBank(tmp_path / "bank", spec.preset, 3, grow=True)
    assert json.loads((tmp_path / "bank" / "bank.json").read_text())["runs"] == 3
    assert bank.load(key) is None  # 2 of 3 executions
    before = OracleBank.open(tiny_run / "bank").load(key)
    grown = bank.build(key)
    assert before is not None and len(grown.runs) == 3
    assert [r.to_json() for r in grown.runs[:2]] == [r.to_json() for r in before.runs]
    assert not (grown.runs[2].final_keypoints == grown.runs[1].final_keypoints).all()  # noise seed 2
    with pytest.raises(OracleBankError, match="another configuration"):  # never shrunk
        OracleBank(tmp_path / "bank", spec.preset, 2, grow=True)


def test_merged_table_lists_each_run_and_the_reference_rows_once(tiny_run: Path) -> None:
    text = merge_tables([str(tiny_run / "out"), str(tiny_run / "out")])
    # Table 1, first grasps, fold halves recognised: one policy line each (the same run twice is listed once)
    assert text.count("| oracle (in-sample) |") == 1 and text.count("| policy |") == 3


def test_bad_benchmark_and_checkpoint_are_clear_errors(tmp_path: Path, capsys) -> None:
    assert main(["--benchmark", "no_such_benchmark", "--out", str(tmp_path / "a")]) == 2
    assert "no_such_benchmark" in capsys.readouterr().err
    bad = tmp_path / "bench.yaml"
    bad.write_text("name: x\n")
    assert main(["--benchmark", str(bad), "--out", str(tmp_path / "b")]) == 2
    assert "benchmark spec: <root>: missing ['demo_k', 'garments'," in capsys.readouterr().err
    empty = tmp_path / "empty_checkpoint"
    empty.mkdir()
    args = ["--benchmark", "tiny", "--checkpoint", str(empty), "--out", str(tmp_path / "c")]
    assert main([*args, "--bank", str(tmp_path / "bank")]) == 2
    assert "missing model.safetensors" in capsys.readouterr().err
    # A fold-loop option that the options it needs leave unused is refused, not recorded as run.
    assert main(["--benchmark", "tiny", "--event-order-call", "--out", str(tmp_path / "d")]) == 2
    assert "--event-order-call: the arms' events are ordered only with --event-order" in capsys.readouterr().err


def test_rollouts_run_on_a_bridge_backend_scored_against_the_newton_bank(tiny_run: Path, tmp_path: Path) -> None:
    """`--sim-backend` rolls the policy out in another simulator behind the bridge (here the Newton
    stand-in; Isaac Lab the same way), one simulator process per rollout, scored with the same
    bank; its results never mix with the embedded simulator's."""
    args = ["--benchmark", "tiny", "--checkpoint", str(models_dir() / "policy"), "--max-steps", "1"]
    args += ["--bank", str(tiny_run / "bank"), "--demo-dir", str(tiny_run / "demos")]
    assert main([*args, "--sim-backend", "newton_stand_in", "--out", str(tmp_path / "bridge")]) == 0
    summary = json.loads((tmp_path / "bridge" / "summary.json").read_text())
    assert summary["sim_backend"] == "newton_stand_in" and summary["rollouts"] == 2
    rollouts = [json.loads(line) for line in (tmp_path / "bridge" / "rollouts.jsonl").read_text().splitlines()]
    assert all(r["queries"] == 1 and r["frames"] == 2 and len(r["record"]["final_keypoints"]) == 7 for r in rollouts)
    assert set(summary["rows"]) == {"policy", "wrong-demo", "oracle", "do-nothing"}
    # the same results directory with the embedded simulator is another configuration
    assert main([*args, "--out", str(tmp_path / "bridge")]) == 2


@pytest.mark.slow  # one oracle fold per rollout besides the rollouts (~1 min)
def test_rrd_writes_a_rerun_recording_per_rollout_with_the_oracle_keypoints(tiny_run: Path, tmp_path: Path) -> None:
    rerun_chunk = pytest.importorskip("rerun.chunk", reason="rerun-sdk is pinned in requirements/python.lock")
    args = ["--benchmark", "tiny", "--checkpoint", str(models_dir() / "policy"), "--max-steps", "1"]
    args += ["--bank", str(tiny_run / "bank"), "--demo-dir", str(tiny_run / "demos"), "--out", str(tmp_path / "r")]
    assert main([*args, "--rrd"]) == 0
    rollouts = [json.loads(line) for line in (tmp_path / "r" / "rollouts.jsonl").read_text().splitlines()]
    assert [Path(r["rrd"]).name for r in rollouts] == [f"{r['id']}.rrd" for r in rollouts]
    for rollout in rollouts:
        entities = {chunk.entity_path for chunk in rerun_chunk.RrdReader(Path(rollout["rrd"])).stream()}
        wanted = {"/camera/rgb", "/cloth/tokens", "/policy/chunk", "/arms/path", "/demonstration/keyposes"}
        assert wanted | {"/oracle/keypoints", "/cloth/final_keypoints", "/latency/predict_ms"} <= entities


def _language_checkpoint(directory: Path, contexts: list[str], unknown: str = "") -> Path:
    """A language-conditioned policy (random weights) whose vocabulary is the words of `contexts`
    but `unknown`."""
    import torch

    from instant_fold_learning.policy.configuration import preset
    from instant_fold_learning.policy.dataset import PolicyDataset
    from instant_fold_learning.policy.instruction import Vocabulary, words
    from instant_fold_learning.policy.modeling import InstantFoldPolicy
    from instant_fold_learning.policy.synthetic import MODES as SYNTHETIC
    from instant_fold_learning.policy.synthetic import synthetic_episodes
    from instant_fold_sim.programs import instruction

    cfg = preset("cpu-small")
    cfg.model.conditioning = "language"
    torch.manual_seed(0)
    policy = InstantFoldPolicy(cfg.validate().model)
    episodes = synthetic_episodes(1, tuple(SYNTHETIC)[:2], 2, cfg.model.cloth_feature_dim, cfg.model.num_cloth_tokens)
    PolicyDataset(episodes, cfg.model.horizon, cfg.train).calibrate(policy.normalizers)  # metre-scale actions
    known = []
    for context in contexts:
        known += [w for w in words(instruction(*context.split("/"))) if w != unknown]
    policy.vocabulary = Vocabulary(known)
    policy.save_pretrained(directory, cfg)
    return directory


def test_a_language_policy_is_told_each_context_in_words(tiny_run: Path, tmp_path: Path) -> None:
    """Rollouts of a language-conditioned checkpoint: each context's instruction is read (the fold
    runs its queries); told a context in a word it never learned, the rollout does not start."""
    labels = [c.label for c in BenchmarkSpec.load("tiny").contexts]
    args = ["--benchmark", "tiny", "--max-steps", "1", "--bank", str(tiny_run / "bank")]
    for name, unknown in (("all", ""), ("no_hem", "hem")):
        checkpoint = _language_checkpoint(tmp_path / f"ckpt_{name}", labels, unknown)
        assert main([*args, "--checkpoint", str(checkpoint), "--out", str(tmp_path / name)]) == 0
        rollouts = [json.loads(line) for line in (tmp_path / name / "rollouts.jsonl").read_text().splitlines()]
        assert sorted(r["context"] for r in rollouts) == sorted(labels)
        for r in rollouts:  # both contexts' descriptions say "the hem up to the shoulders"
            if unknown:
                assert r["queries"] == 0 and r["outcome"] == "aborted", r
                assert "never learned: ['hem']" in r["message"]
            else:
                assert r["queries"] == 1 and r["outcome"] == "step_limit", r
