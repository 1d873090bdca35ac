"""The main job refuses a simulator this machine cannot run before any node starts (issue 31):
one line on stderr and exit 2, in seconds, instead of "node 'sim' exited with code 1" after the
graph's 36-70 s start-up; and it fixes its compute threads before it starts anything."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from instant_fold.sim_fold import EXIT_SIM_UNAVAILABLE, main
from instant_fold_core.compute_threads import THREAD_VARIABLES


def _refused(args: list[str], out: Path, capsys) -> str:
    assert main([*args, "--out", str(out)]) == EXIT_SIM_UNAVAILABLE == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert not out.exists()  # refused before the output folder, the parameters or any node
    return err


def test_isaac_lab_without_its_environment_is_refused_before_the_graph(tmp_path: Path, capsys, monkeypatch) -> None:
    missing = tmp_path / "no-env" / "bin" / "python"
    monkeypatch.setenv("ISAACLAB_PYTHON", str(missing))
    err = _refused(["--sim-backend", "isaac_lab"], tmp_path / "run", capsys)
    assert err.startswith("[sim_fold] error: isaac_lab: interpreter") and str(missing) in err


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: cuda:0 is available here")
@pytest.mark.parametrize("backend", ["newton", "isaac_lab", "newton_stand_in"])
def test_a_gpu_this_machine_lacks_is_refused_before_the_graph(backend: str, tmp_path: Path, capsys) -> None:
    """Also for the Newton backend, which ignored --sim-device while metrics.json recorded it."""
    err = _refused(["--sim-backend", backend, "--sim-device", "cuda:0"], tmp_path / "run", capsys)
    assert "--sim-device cuda:0" in err and "CUDA is not available" in err


def test_the_main_job_fixes_its_compute_threads_first(tmp_path: Path, capsys, monkeypatch) -> None:
    """Whatever the caller's OMP_NUM_THREADS: the job and the nodes it would start compute with one."""
    for name in THREAD_VARIABLES:
        monkeypatch.setenv(name, "7")
    threads = torch.get_num_threads()
    try:
        _refused(["--sim-device", "cuda:9"], tmp_path / "run", capsys)  # stops right after the pinning
        assert all(os.environ[name] == "1" for name in THREAD_VARIABLES)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(threads)
