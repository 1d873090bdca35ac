"""Up-front checks of the simulator a run asks for (issue 31): a missing Isaac Lab environment or
an absent device is one clear line before anything starts, for every backend."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from instant_fold_core.errors import ConfigError
from instant_fold_sim.availability import (
    SimulatorUnavailable,
    check_isaaclab_environment,
    check_sim_device,
    check_simulator,
)

NO_GPU = pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: cuda:0 is available here")


def test_a_missing_isaac_lab_environment_is_refused_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / ".venv-isaaclab" / "bin" / "python"
    with pytest.raises(SimulatorUnavailable, match=f"interpreter {missing} does not exist") as info:
        check_simulator("isaac_lab", "cpu", isaaclab_python=str(missing))
    assert isinstance(info.value, ConfigError) and "\n" not in str(info.value)


def test_an_environment_without_isaaclab_is_refused() -> None:
    """An interpreter that runs but has no isaaclab (a bootstrap stopped half way): this one."""
    with pytest.raises(
        SimulatorUnavailable, match=r"has no isaaclab installed \(exit 1\); run scripts/bootstrap_isaaclab.sh"
    ):
        check_isaaclab_environment(sys.executable)


def test_the_isaac_lab_environment_is_found_from_the_working_directory(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("ISAACLAB_PYTHON", raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SimulatorUnavailable, match="no .venv-isaaclab found in or above"):
        check_simulator("isaac_lab", "cpu")


@NO_GPU
@pytest.mark.parametrize("backend", ["newton", "newton_stand_in", "isaac_lab"])
@pytest.mark.parametrize("device", ["cuda:0", "cuda", "cuda:1"])
def test_a_gpu_this_machine_lacks_is_refused_for_every_backend(backend: str, device: str, tmp_path: Path) -> None:
    # the device is checked first: no Isaac Lab environment is needed to hear about it
    with pytest.raises(SimulatorUnavailable, match=f"--sim-device {device}: .*CUDA is not available"):
        check_simulator(backend, device, isaaclab_python=str(tmp_path / "none"))


def test_devices_this_machine_has_pass() -> None:
    assert check_sim_device("") == "cpu" and check_sim_device("cpu") == "cpu"
    assert check_sim_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    assert check_simulator("newton", "") == "cpu"


def test_a_device_name_no_simulator_knows_and_an_unknown_backend_are_refused() -> None:
    with pytest.raises(SimulatorUnavailable, match="--sim-device tpu"):
        check_sim_device("tpu")
    with pytest.raises(SimulatorUnavailable, match="--sim-backend gazebo: expected one of newton, isaac_lab"):
        check_simulator("gazebo", "cpu")
