"""The graph check over real DDS: two OS processes, a custom message topic and a custom service."""

from __future__ import annotations

import io
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from instant_fold.graph import find_graph, load_graph
from instant_fold_ros.standins.process_runner import ProcessRunner

pytestmark = pytest.mark.ros


def _params(tmp_path: Path, samples: int, report: Path | None = None, timeout_s: float = 45.0) -> Path:
    path = tmp_path / "probe.yaml"
    path.write_text(
        f"graph_check_probe:\n  ros__parameters:\n    samples: {samples}\n    timeout_s: {timeout_s}\n"
        f"    report: '{report or ''}'\n"
    )
    return path


def test_two_processes_exchange_tokens_and_service_calls(tmp_path: Path, ros_env: dict[str, str]) -> None:
    report = tmp_path / "report.json"
    out = io.StringIO()
    runner = ProcessRunner(
        load_graph(find_graph("graph_check")), [_params(tmp_path, 20, report)], env=ros_env, output=out
    )
    runner.start()
    code = runner.wait()
    log = out.getvalue()
    assert code == 0, log
    result = json.loads(report.read_text())
    assert result["samples"] == 20 and result["failures"] == [], log
    # every sample's tokens crossed the topic and came back bit-exact through the service
    assert result["service_round_trip_ms"]["median"] > 0
    pids = {line.split("pid ")[1].rstrip(")") for line in log.splitlines() if line.startswith("[runner] started")}
    assert len(pids) == 2, "the two nodes must be separate processes"


def test_probe_fails_without_a_source(tmp_path: Path, ros_env: dict[str, str]) -> None:
    """No peer on the domain -> the probe times out and reports failure (exit code 1)."""
    params = _params(tmp_path, samples=1, timeout_s=3.0)
    graph = load_graph(find_graph("graph_check"))
    probe_only = type(graph)(name="probe_only", nodes=tuple(n for n in graph.nodes if n.name == "graph_check_probe"))
    runner = ProcessRunner(probe_only, [params], env=ros_env, output=io.StringIO())
    runner.start()
    assert runner.wait() == 1


def test_ctrl_c_stops_every_node_cleanly(tmp_path: Path, ros_env: dict[str, str]) -> None:
    """SIGINT to the runner reaches each node once; all exit cleanly and the runner returns 0."""
    endless = _params(tmp_path, samples=10**9)
    proc = subprocess.Popen(
        [sys.executable, "-m", "instant_fold.runner", "graph_check", "--params-file", str(endless)],
        env=ros_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    seen: list[str] = []
    deadline = time.monotonic() + 60.0
    assert proc.stdout is not None
    while time.monotonic() < deadline and not (_has(seen, "publishing cloth/tokens") and _has(seen, "probing")):
        seen.append(proc.stdout.readline())
    time.sleep(1.0)  # let them exchange a few samples
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=30)
    output = "".join(seen) + rest
    assert proc.returncode == 0, output
    assert output.count("[runner] started") == 2, output
    assert "did not stop" not in output, output
    assert "required node" not in output, "the probe must have been interrupted, not finished"


def _has(lines: list[str], text: str) -> bool:
    return any(text in line for line in lines)
