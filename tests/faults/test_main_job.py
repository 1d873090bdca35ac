"""Faults: the main job's report and supervision (issue 29, items 3, 4 and 12).

Before: a demonstration the policy server refuses (metadata `meta` a list, an event value of 200)
aborted the fold, and then the keyframe strip loaded it again and raised DemonstrationError: exit
1, a traceback and no metrics.json, where the README promises exit 3 and metrics.json. A node
killed mid-fold (SIGKILL of the sim node) left the job waiting out the whole fold timeout, to end
with "execute_fold result: no answer" without naming the dead node. Two main jobs into one
output folder both wrote and claimed `metrics.json`, the video and the strip. Now the strip says the
demonstration is unreadable and the report is written; a dead node ends the job at once, named;
and a second job on a folder in use is refused with the first one's pid.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from concurrent.futures import Future
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

from instant_fold import sim_fold
from instant_fold_ros.bringup_share import models_dir

DEMO = (models_dir() / sim_fold.DEFAULT_DEMO).resolve()  # the source file behind a --symlink-install
#: Longest wait for a process (s): a bound on a hang, never a measured time.
GONE_WITHIN_S = 120.0


def _refused_demo(tmp_path: Path, kind: str) -> Path:
    """The bundled demonstration with its metadata's `meta` a list, or an event value of 200."""
    arrays = load_file(str(DEMO))
    with safe_open(str(DEMO), "np") as f:
        metadata = dict(f.metadata())
    header = json.loads(metadata["instant_fold_demonstration"])
    if kind == "meta_list":
        header["meta"] = [1, 2]
    else:
        arrays["events"] = arrays["events"].copy()
        arrays["events"][2, 0] = 200
    metadata["instant_fold_demonstration"] = json.dumps(header)
    path = tmp_path / f"{kind}.safetensors"
    save_file(arrays, str(path), metadata=metadata)
    return path


@pytest.mark.parametrize("kind", ["meta_list", "event_200"])
def test_the_strip_of_a_fold_with_an_unreadable_demonstration_is_still_drawn(tmp_path: Path, kind: str) -> None:
    rollout = tmp_path / "rollout_keyframes.png"
    Image.fromarray(np.full((48, 96, 3), 128, np.uint8)).save(rollout)
    strip = sim_fold.fold_strip(_refused_demo(tmp_path, kind), rollout, tmp_path / "fold_strip.png")
    image = Image.open(strip)
    assert image.width == 96 and image.height > 48  # a caption panel above the rollout's keyframes


class _Runner:
    """A process runner whose node `name` has exited with `code`."""

    def __init__(self, name: str, code: int) -> None:
        self.exited = (name, code)

    def exited_required(self) -> tuple[str, int]:
        return self.exited


def test_a_node_that_dies_ends_the_wait_for_the_fold_naming_it(tmp_path: Path) -> None:
    never: Future[object] = Future()  # a fold result that will never come
    runner = _Runner("sim", -signal.SIGKILL)
    with pytest.raises(sim_fold.SimFoldError, match=r"execute_fold result: node 'sim' exited with code -9"):
        sim_fold._wait(never, 3600.0, "execute_fold result", runner, tmp_path / "graph.log")  # type: ignore[arg-type]
    assert never.cancelled()


@pytest.mark.ros
def test_the_fold_waits_until_every_topic_it_listens_to_is_matched(ros_env: dict[str, str]) -> None:
    """A fresh-clone CI run recorded no cloth tokens at all: its 4-query fold lasted 1.5 s and ended
    before discovery matched the job's subscription to the tokenizer, the node that started last."""
    import rclpy
    from sensor_msgs.msg import Image as ImageMsg

    from instant_fold_ros.qos import OBSERVATION_QOS

    ready = SimpleNamespace(server_is_ready=lambda: True, service_is_ready=lambda: True)
    contexts = [rclpy.Context(), rclpy.Context()]  # two participants, as two processes would be
    for context in contexts:
        rclpy.init(context=context, domain_id=int(ros_env["ROS_DOMAIN_ID"]))
    try:
        job, graph = (rclpy.create_node(name, context=c) for name, c in zip(("job", "graph"), contexts, strict=True))
        listening = [job.create_subscription(ImageMsg, "cloth/mask", lambda _: None, OBSERVATION_QOS)]
        assert sim_fold._unready(ready, SimpleNamespace(service_is_ready=lambda: False), listening) == [
            "sim/step",
            "/cloth/mask",
        ]
        graph.create_publisher(ImageMsg, "cloth/mask", OBSERVATION_QOS)
        deadline = time.monotonic() + GONE_WITHIN_S
        while sim_fold._unready(ready, ready, listening) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert sim_fold._unready(ready, ready, listening) == []
    finally:
        for context in contexts:
            rclpy.shutdown(context=context)


def test_every_node_of_the_main_job_is_supervised() -> None:
    from instant_fold.fold_graph import FoldOptions, build_fold_graph

    graph, _ = build_fold_graph(FoldOptions(robot="sim"))
    assert {n.name for n in sim_fold._supervised(graph).nodes if n.required} == {n.name for n in graph.nodes}


def test_a_second_main_job_on_an_output_folder_in_use_is_refused(tmp_path: Path, capsys) -> None:
    out = tmp_path / "sim_fold"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom instant_fold_core.output_dir import claimed_output_dir\n"
            f"with claimed_output_dir({str(out)!r}):\n    print('held', flush=True)\n    time.sleep(300)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        (out / "metrics.json").write_text('{"the first job": true}')
        assert sim_fold.main(["--out", str(out), "--no-evaluate"]) == 1
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and f"in use by another run (pid {holder.pid})" in err
        assert sorted(p.name for p in out.iterdir()) == [".lock", "metrics.json"]  # nothing written, nothing claimed
        assert json.loads((out / "metrics.json").read_text()) == {"the first job": True}
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.slow
@pytest.mark.ros
def test_a_refused_demonstration_still_gets_its_report(tmp_path: Path, ros_env, monkeypatch, capsys) -> None:
    for key, value in ros_env.items():
        monkeypatch.setenv(key, value)
    out = tmp_path / "run"
    code = sim_fold.main(["--demo", str(_refused_demo(tmp_path, "meta_list")), "--out", str(out)])
    assert code == sim_fold.EXIT_FOLD_FAILED
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["fold"]["outcome"] == "aborted" and "'meta' is not a dict" in metrics["fold"]["message"]
    assert (out / "fold_strip.png").is_file()


@pytest.mark.slow
@pytest.mark.ros
def test_killing_the_sim_node_mid_fold_ends_the_job_naming_it(tmp_path: Path, ros_env: dict[str, str]) -> None:
    from main_job_rig import start_untrained_main_job

    job, out = start_untrained_main_job(tmp_path, ros_env)
    try:
        assert job.stdout is not None
        for line in job.stdout:
            if "folding with" in line:
                break
        else:
            raise AssertionError("the fold never started")
        (sim,) = re.findall(r"\[runner\] started sim \(pid (\d+)\)", (out / "graph.log").read_text())
        os.kill(int(sim), signal.SIGKILL)
        rest = job.stdout.read()
        assert job.wait(timeout=GONE_WITHIN_S) == 1
        assert "node 'sim' exited with code -9" in rest
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
