"""Faults: the shell wrappers (issue 29, items 2, 7 and 13).

Before: `scripts/run_main.sh` ran the main job as a child of bash, so SIGTERM or SIGKILL to the
script ended bash and left `python -m instant_fold.sim_fold` (and its four nodes) folding; relative
`--demo`/`--out` paths were taken relative to the repository root (the wrapper entered it), not to
where the script was called from; and a Ctrl-C during `scripts/bootstrap.sh` just after the virtual
environment was created left one without pip, on which every later bootstrap failed until `.venv`
was deleted by hand. Now the wrapper `exec`s the job from the caller's directory, and the bootstrap
rebuilds an incomplete environment.

The wrapper runs here in a stand-in checkout: its `workspace.sh` only enters the root, as the real
one does once the workspace is set up (the real one may rebuild the workspace, which a test must
not do), and its `python` reports its pid, directory and arguments, then waits to be killed.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
#: Longest wait for a process to go (s): a bound on a hang, never a measured time.
GONE_WITHIN_S = 30.0

WORKSPACE_STAND_IN = """\
# shellcheck shell=bash
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PATH="$ROOT/bin:$PATH"
cd "$ROOT" || exit 1
"""
PYTHON_STAND_IN = """\
#!/usr/bin/env bash
echo "pid $$"
echo "cwd $PWD"
echo "args $*"
exec sleep 300
"""


def _checkout(tmp_path: Path) -> Path:
    """A stand-in checkout holding the real `scripts/run_main.sh`."""
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    (root / "bin").mkdir()
    shutil.copy(REPO / "scripts" / "run_main.sh", root / "scripts" / "run_main.sh")
    (root / "scripts" / "workspace.sh").write_text(WORKSPACE_STAND_IN)
    python = root / "bin" / "python"
    python.write_text(PYTHON_STAND_IN)
    python.chmod(0o755)
    return root


def _start(root: Path, cwd: Path, *args: str) -> tuple[subprocess.Popen[str], dict[str, str]]:
    """Run the wrapper from `cwd`; returns it and what its `python` reported."""
    wrapper = subprocess.Popen(
        ["bash", str(root / "scripts" / "run_main.sh"), *args], cwd=cwd, stdout=subprocess.PIPE, text=True
    )
    assert wrapper.stdout is not None
    report = dict(wrapper.stdout.readline().rstrip("\n").split(" ", 1) for _ in range(3))
    return wrapper, report


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting for its reaper has stopped running)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_killing_the_main_job_wrapper_ends_the_job(tmp_path: Path, sig: signal.Signals) -> None:
    root = _checkout(tmp_path)
    wrapper, report = _start(root, root)
    job = int(report["pid"])
    try:
        wrapper.send_signal(sig)
        wrapper.wait(timeout=GONE_WITHIN_S)
        deadline = time.monotonic() + GONE_WITHIN_S
        while _alive(job) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(job), f"the job (pid {job}) outlived its wrapper ({sig.name})"
    finally:
        if _alive(job):
            os.kill(job, signal.SIGKILL)  # the orphan the old wrapper left
        if wrapper.poll() is None:
            wrapper.kill()
            wrapper.wait()


def test_relative_paths_are_relative_to_where_the_wrapper_was_called(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    caller = tmp_path / "elsewhere"
    caller.mkdir()
    wrapper, report = _start(root, caller, "--demo", "mine.safetensors", "--out", "run")
    for pid in {wrapper.pid, int(report["pid"])}:  # the job, and the wrapper if it did not exec
        os.kill(pid, signal.SIGKILL)
    wrapper.wait()
    assert report["cwd"] == str(caller)  # where python resolves --demo mine.safetensors and --out run
    assert report["args"].endswith("--demo mine.safetensors --out run")  # the caller's --out comes last: it wins


def test_bootstrap_rebuilds_a_virtual_environment_left_without_pip(tmp_path: Path) -> None:
    """`python -m venv` installs pip last: a venv without it is what a Ctrl-C there leaves."""
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "bootstrap.sh", root / "scripts" / "bootstrap.sh")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / ".venv")], check=True)
    assert subprocess.run([str(root / ".venv" / "bin" / "python"), "-m", "pip", "--version"]).returncode != 0
    step = subprocess.run(
        ["bash", "-c", f"source {root / 'scripts' / 'bootstrap.sh'} && ensure_venv"],
        capture_output=True,
        text=True,
    )
    assert step.returncode == 0, step.stderr
    assert "removing the incomplete" in step.stdout
    pip = subprocess.run([str(root / ".venv" / "bin" / "python"), "-m", "pip", "--version"], capture_output=True)
    assert pip.returncode == 0, pip.stderr
    again = subprocess.run(
        ["bash", "-c", f"source {root / 'scripts' / 'bootstrap.sh'} && ensure_venv"], capture_output=True, text=True
    )
    assert again.returncode == 0 and again.stdout == ""  # a complete environment is kept as it is
