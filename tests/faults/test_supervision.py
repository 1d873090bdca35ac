"""Faults: nodes that outlived their supervisor, and a main job that swallowed SIGTERM.

Before (issue "faults and bad input", item 1): nodes run in sessions of their own, so SIGHUP (the
terminal closed) or SIGKILL to the process runner left every node running under PID 1, and so did
a second Ctrl-C that interrupted the main job's shutdown; SIGTERM to the main job during a fold was
taken by rclpy's handler, which only stopped spinning, and the job waited on. Now the runner stops
the graph on SIGHUP as on Ctrl-C, every node gets SIGTERM when the process that started it dies,
and the main job stops its graph and exits 130 on SIGTERM.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from instant_fold_ros.bringup_share import config_dir

pytestmark = pytest.mark.ros

#: Longest wait for a process to go (s): a bound on a hang, never a measured time.
GONE_WITHIN_S = 60.0
CONFIG = config_dir()


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting for a reaper has stopped running)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def _gone(pids: list[int]) -> bool:
    deadline = time.monotonic() + GONE_WITHIN_S
    while any(_alive(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _started_pids(proc: subprocess.Popen[str], count: int, until: str | None = None) -> list[int]:
    """Read the runner's "[runner] started NAME (pid N)" lines (and on to a line containing `until`)."""
    assert proc.stdout is not None
    pids: list[int] = []
    for line in proc.stdout:
        if match := re.search(r"\[runner\] started \S+ \(pid (\d+)\)", line):
            pids.append(int(match.group(1)))
        if len(pids) >= count and (until is None or until in line):
            return pids
    raise AssertionError(f"the process ended before starting {count} nodes")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal is Linux only")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGHUP])
def test_nodes_end_with_their_runner(tmp_path: Path, ros_env: dict[str, str], sig: signal.Signals) -> None:
    graph = tmp_path / "one_node.yaml"
    graph.write_text(
        "name: one_node\nnodes:\n  - name: graph_check_source\n    package: instant_fold\n"
        f"    executable: graph_check_source\n    parameters: [{CONFIG / 'graph_check.yaml'}]\n"
    )
    runner = subprocess.Popen(
        [sys.executable, "-m", "instant_fold.runner", str(graph)],
        env=ros_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        (node,) = _started_pids(runner, 1, until="serving policy/predict_action_chunk")  # up and spinning
        runner.send_signal(sig)
        runner.wait(timeout=GONE_WITHIN_S)
        gone = _gone([node])
        if not gone:
            os.kill(node, signal.SIGKILL)  # the orphan this test made
        assert gone, f"node {node} outlived its runner ({sig.name})"
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()


@pytest.mark.slow
@pytest.mark.parametrize("signals", [(signal.SIGTERM,), (signal.SIGINT, signal.SIGINT)], ids=["sigterm", "two_ctrl_c"])
def test_signals_stop_the_main_job_during_a_fold(
    tmp_path: Path, ros_env: dict[str, str], signals: tuple[signal.Signals, ...]
) -> None:
    """SIGTERM stops the job and its graph; so do two quick Ctrl-Cs (the second one interrupts the
    graph's shutdown: the nodes still go, by the parent-death signal)."""
    from main_job_rig import start_untrained_main_job

    job, out = start_untrained_main_job(tmp_path, ros_env)
    pids: list[int] = []
    try:
        assert job.stdout is not None
        for line in job.stdout:
            if "folding with" in line:
                break
        else:
            raise AssertionError("the fold never started")
        pids = [int(p) for p in re.findall(r"\[runner\] started \S+ \(pid (\d+)\)", (out / "graph.log").read_text())]
        assert len(pids) == 4
        for sig in signals:
            job.send_signal(sig)
            time.sleep(0.2)  # "quick": well inside the runner's shutdown grace periods
        code = job.wait(timeout=GONE_WITHIN_S)
        assert _gone(pids), "nodes outlived the main job"
        assert code == 130
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
        for pid in pids:  # orphans the old code left behind
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
