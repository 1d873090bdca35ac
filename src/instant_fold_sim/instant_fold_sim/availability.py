"""Can the chosen simulator run on this machine? Answered before any node or process starts.

Why: without these checks `--sim-backend isaac_lab` on a machine without the Isaac Lab
environment, or `--sim-device cuda:0` on one without that GPU, started the whole fold graph and
failed 36-70 s later with only "node 'sim' exited with code 1" (the reason deep in graph.log),
and a device the Newton backend could not use was ignored. The main job
(`instant_fold.sim_fold`) and the sim node both ask here, so the answer is one line whichever
starts the simulator. No ROS imports (the main job asks before rclpy is loaded).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from instant_fold_core.errors import ConfigError

from .isaac_lab.client import BridgeError, find_isaaclab_python

#: Simulators behind the sim node: the embedded scene and the bridge's backends.
SIM_BACKENDS = ("newton", "isaac_lab", "newton_stand_in")
#: How long the Isaac Lab interpreter may take to say whether it has `isaaclab` (s): a spec
#: look-up, no import, but a cold interpreter on a loaded machine.
ENVIRONMENT_PROBE_TIMEOUT_S = 60.0
#: Asks an interpreter whether `isaaclab` is installed without importing it (an import takes
#: seconds and prints): exit 0 yes, 1 no.
_HAS_ISAACLAB = "import importlib.util, sys; sys.exit(importlib.util.find_spec('isaaclab') is None)"


class SimulatorUnavailable(ConfigError):
    """The simulator backend or device asked for cannot run here; the message says what to do."""


def check_sim_device(device: str) -> str:
    """The simulator device to use for `device` ("" or "cpu": the CPU; "cuda", "cuda:N"; "auto":
    CUDA when present): refused with SimulatorUnavailable when this machine has no such device.

    The Warp/torch device names agree for these, so the answer serves both the Newton scene and
    Isaac Lab. The GPU count comes from torch (`instant_fold_core.device.resolve_device`), which
    asks the CUDA driver: a machine without the driver has none."""
    from instant_fold_core.device import resolve_device

    name = device.strip() or "cpu"
    try:
        resolved = resolve_device(name)
    except ConfigError as exc:
        raise SimulatorUnavailable(f"--sim-device {name}: {exc}") from None
    return str(resolved) if name == "auto" else name


def check_isaaclab_environment(python: str = "") -> Path:
    """The Isaac Lab environment's interpreter (`find_isaaclab_python`'s look-up: `python`, else
    $ISAACLAB_PYTHON, else the nearest .venv-isaaclab), refused when it is missing or has no
    `isaaclab` installed (a bootstrap interrupted half way)."""
    try:
        exe = find_isaaclab_python(python)
    except BridgeError as exc:
        raise SimulatorUnavailable(str(exc)) from None
    try:
        probe = subprocess.run(
            [str(exe), "-c", _HAS_ISAACLAB],
            capture_output=True,
            timeout=ENVIRONMENT_PROBE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SimulatorUnavailable(f"isaac_lab: interpreter {exe} cannot be run: {exc}") from None
    if probe.returncode != 0:
        raise SimulatorUnavailable(
            f"isaac_lab: {exe} has no isaaclab installed (exit {probe.returncode}); run scripts/bootstrap_isaaclab.sh"
        )
    return exe


def check_simulator(backend: str, device: str, isaaclab_python: str = "") -> str:
    """Refuse a simulator that cannot run here (SimulatorUnavailable, one line); return the device
    the backend will be given."""
    if backend not in SIM_BACKENDS:
        raise SimulatorUnavailable(f"--sim-backend {backend}: expected one of {', '.join(SIM_BACKENDS)}")
    resolved = check_sim_device(device)
    if backend == "isaac_lab":
        check_isaaclab_environment(isaaclab_python)
    return resolved
