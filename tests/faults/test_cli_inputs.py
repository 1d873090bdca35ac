"""Faults: bad command-line input that ended in a traceback instead of one line (issue 29, item 9).

Before: `train_policy --device banana` and `--device cuda` without a GPU raised torch's
RuntimeError; `--out` naming an existing file raised FileExistsError or NotADirectoryError from
`train_policy`, `generate` and `sim_fold`; `evaluate table` on a folder without a summary raised
FileNotFoundError; `generate --garments banana` raised GarmentError (`proc:x` a ValueError);
`viewer --store` on a missing or empty folder raised StoreError; `ROS_DOMAIN_ID=abc` raised
ValueError from the main job; `sim_fold --max-steps -1` started the whole graph before the goal
message refused the value; and a second `generate` into a store another run was filling deleted
that run's episodes in progress as "partial". Now each is refused with one line naming the input,
and a non-zero exit, before anything is started or written.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from instant_fold import sim_fold
from instant_fold_core.output_dir import claimed_output_dir
from instant_fold_evaluation import evaluate
from instant_fold_learning import train_policy
from instant_fold_learning.policy import training as policy_training
from instant_fold_sim import generate, viewer


def _one_line(err: str) -> str:
    """The message of a CLI that refused its input: exactly one line on stderr."""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def _a_file(tmp_path: Path) -> Path:
    path = tmp_path / "taken"
    path.write_text("not a folder\n")
    return path


@pytest.mark.parametrize("device", ["banana", "cuda:x", "mps"])
def test_train_policy_names_a_device_torch_cannot_use(tmp_path, capsys, device):
    out = tmp_path / "run"
    assert train_policy.main(["--synthetic", "1", "--steps", "1", "--out", str(out), "--device", device]) == 2
    assert f"device {device!r}" in _one_line(capsys.readouterr().err)
    assert not (out / policy_training.CHECKPOINT_DIR).exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")
def test_train_policy_on_cuda_without_a_gpu_says_so(tmp_path, capsys):
    out = tmp_path / "run"
    assert train_policy.main(["--synthetic", "1", "--steps", "1", "--out", str(out), "--device", "cuda"]) == 2
    assert "CUDA is not available" in _one_line(capsys.readouterr().err)


def test_train_policy_refuses_an_out_that_is_a_file(tmp_path, capsys):
    taken = _a_file(tmp_path)
    assert train_policy.main(["--synthetic", "1", "--steps", "1", "--out", str(taken), "--device", "cpu"]) == 2
    assert "is not a directory" in _one_line(capsys.readouterr().err)
    assert taken.read_text() == "not a folder\n"


def test_generate_refuses_an_out_that_is_a_file(tmp_path, capsys):
    taken = _a_file(tmp_path)
    assert generate.main(["--out", str(taken), "--garments", "proc:0", "--modes", "1"]) == 1
    assert "is not a directory" in _one_line(capsys.readouterr().err)
    assert taken.read_text() == "not a folder\n"


@pytest.mark.parametrize("garments", ["banana", "proc:x", "proc:1:b"])
def test_generate_names_a_garment_spec_it_cannot_read(tmp_path, capsys, garments):
    store = tmp_path / "store.zarr"
    with pytest.raises(SystemExit) as exc:
        generate.main(["--out", str(store), "--garments", garments, "--modes", "1"])
    assert exc.value.code == 2
    assert "--garments" in capsys.readouterr().err
    assert not store.exists()


def test_a_second_generate_into_a_store_in_use_is_refused(tmp_path, capsys):
    store = tmp_path / "store.zarr"
    with claimed_output_dir(store):  # the first run, filling the store
        assert generate.main(["--out", str(store), "--garments", "proc:0", "--modes", "1"]) == 1
        assert f"in use by another run (pid {os.getpid()})" in _one_line(capsys.readouterr().err)
    assert not (store / "zarr.json").exists()  # the second run wrote nothing, deleted nothing


def test_evaluate_table_of_a_folder_without_a_summary_says_so(tmp_path, capsys):
    empty = tmp_path / "eval"
    empty.mkdir()
    assert evaluate.main(["table", str(empty)]) == 2
    assert "no summary.json" in _one_line(capsys.readouterr().err)


@pytest.mark.parametrize("flag", ["--regrasp-guard-m", "--grasp-gate-m"])
@pytest.mark.parametrize("guard", ["nan", "-0.05"])
def test_evaluate_refuses_a_fold_loop_distance_that_is_not_a_distance_before_anything_runs(
    tmp_path, capsys, flag, guard
):
    """The re-grasp guard and the grasp gate: the flag named, nothing written."""
    out = tmp_path / "eval"
    name = flag[2:].replace("-", "_")
    assert evaluate.main(["--benchmark", "tiny", "--out", str(out), flag, guard]) == 2
    assert f"{flag}: {name}: expected a finite number >= 0 (metres, 0: off)" in _one_line(capsys.readouterr().err)
    assert not out.exists()


@pytest.mark.parametrize(
    "flag", ["--grasp-refinement-m", "--grasp-conflict-m", "--grasp-match-m", "--first-grasp-match-m"]
)
@pytest.mark.parametrize("window", ["nan", "-0.1", "inf"])
def test_evaluate_refuses_a_grasp_distance_that_is_not_a_distance_before_anything_runs(tmp_path, capsys, flag, window):
    out = tmp_path / "eval"
    assert evaluate.main(["--benchmark", "tiny", "--out", str(out), flag, window]) == 2
    line = _one_line(capsys.readouterr().err)
    assert f"{flag}: {flag[2:].replace('-', '_')}: expected a finite number >= 0 (metres)" in line
    assert not out.exists()


@pytest.mark.parametrize("kind", ["missing", "empty"])
def test_viewer_names_a_store_it_cannot_read(tmp_path, capsys, kind):
    store = tmp_path / "store.zarr"
    if kind == "empty":
        store.mkdir()
    assert viewer.main(["--store", str(store), "--out", str(tmp_path / "view")]) == 1
    assert str(store) in _one_line(capsys.readouterr().err)


def test_sim_fold_refuses_an_out_that_is_a_file(tmp_path, capsys):
    taken = _a_file(tmp_path)
    assert sim_fold.main(["--out", str(taken), "--no-evaluate"]) == 1
    assert "is not a directory" in _one_line(capsys.readouterr().err)


@pytest.mark.parametrize("domain", ["abc", "-1", "233"])
def test_sim_fold_names_a_ros_domain_id_dds_cannot_use(tmp_path, capsys, monkeypatch, domain):
    monkeypatch.setenv("ROS_DOMAIN_ID", domain)
    assert sim_fold.main(["--out", str(tmp_path / "run"), "--no-evaluate"]) == 1
    assert f"ROS_DOMAIN_ID={domain!r}" in _one_line(capsys.readouterr().err)
    assert not (tmp_path / "run" / "graph.log").exists()  # refused before the graph started


@pytest.mark.parametrize(
    ("option", "value"),
    [("--max-steps", "-1"), ("--max-steps", "0"), ("--max-steps", str(2**32)), ("--fold-timeout", "nan")],
)
def test_sim_fold_refuses_bad_limits_before_starting_the_graph(tmp_path, capsys, option, value):
    with pytest.raises(SystemExit) as exc:
        sim_fold.main(["--out", str(tmp_path / "run"), option, value])
    assert exc.value.code == 2
    assert option in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
