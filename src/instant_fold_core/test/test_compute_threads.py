"""The determinism contract's thread count (issue 31): fixed by the program, whatever the caller's
environment says, for this process and every process it starts."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from instant_fold_core.compute_threads import NUMERIC_PACKAGES, THREAD_VARIABLES, machine_record, pin_compute_threads


def test_the_callers_thread_count_is_overwritten_here_and_in_children(monkeypatch) -> None:
    for name in THREAD_VARIABLES:
        monkeypatch.setenv(name, "8")
    threads = torch.get_num_threads()
    try:
        assert pin_compute_threads() == dict.fromkeys(THREAD_VARIABLES, "1")
        assert torch.get_num_threads() == 1
        child = "import os, torch; print(os.environ['OMP_NUM_THREADS'], torch.get_num_threads())"
        out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120, check=True)
        assert out.stdout.split() == ["1", "1"]
    finally:
        torch.set_num_threads(threads)
    assert all(os.environ[name] == "1" for name in THREAD_VARIABLES)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_a_thread_count_that_is_no_positive_integer_is_refused(bad) -> None:
    with pytest.raises(ValueError, match="positive integer"):
        pin_compute_threads(bad)


def test_the_machine_record_names_the_cpu_and_the_numeric_libraries() -> None:
    """What a run records beside its numbers: the same in every process of this machine (so two runs
    of it compare), with the CPU's model and flags and the versions a fold's numbers depend on."""
    record = machine_record()
    assert record["cpu"] and len(record["cpu_flags_sha256"]) == 12 and record["python"].count(".") == 2
    assert record["torch"] == torch.__version__.split("+")[0] and set(NUMERIC_PACKAGES) <= set(record)
    child = "from instant_fold_core.compute_threads import machine_record; print(machine_record())"
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == str(record)
