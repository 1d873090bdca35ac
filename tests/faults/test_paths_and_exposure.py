"""Faults: requests that opened or created any path, a config that reached timm's file loading,
and a Ray cluster open to the network.

Before (issue "faults and bad input", item 9): `LoadDemonstration` (and an ExecuteFold goal) opened
any path, and its error said whether a file existed there ("does not exist" vs a format error);
`sim/evaluate` created its output folder anywhere; an encoder config's `backbone_kwargs` went to
`timm.create_model` as they were, so `checkpoint_path` made timm load an arbitrary file (and a
`hf-hub:` backbone name fetches from the network); `generate --workers > 1` started Ray on the
machine's network address. Now paths must lie under the node's `file_roots` and the refusal reads
the same for existing and missing files, `backbone_kwargs` are limited to the ViT's size, and a
local Ray cluster is bound to 127.0.0.1. (The sim node's refusal of an output folder outside its
roots is checked over DDS in test_sim_requests.py, which starts the sim node anyway.)
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from instant_fold import sim_fold
from instant_fold_core.checkpoint import CheckpointError
from instant_fold_core.errors import ConfigError
from instant_fold_core.paths import PathNotAllowed, allowed_roots, resolve_under
from instant_fold_learning.encoder.configuration import EncoderConfig, preset
from instant_fold_ros.bringup_share import models_dir

DEMO = models_dir() / sim_fold.DEFAULT_DEMO


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path]:
    """(allowed, outside): a demonstration in each; in the allowed one also a link to the outside one."""
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    for folder in (allowed, outside):
        folder.mkdir()
        shutil.copy(DEMO, folder / "demo.safetensors")
    (allowed / "link.safetensors").symlink_to(outside / "demo.safetensors")
    return allowed, outside


def _refusal(path: Path | str, roots: tuple[Path, ...]) -> str:
    with pytest.raises(PathNotAllowed) as info:
        resolve_under(path, roots, "demonstration")
    return str(info.value).replace(str(path), "<path>")


def test_paths_outside_the_roots_are_refused_alike(folders: tuple[Path, Path]) -> None:
    allowed, outside = folders
    roots = allowed_roots([str(allowed)])
    assert resolve_under(allowed / "demo.safetensors", roots, "demonstration") == allowed / "demo.safetensors"
    assert resolve_under(allowed / "new" / "folder", roots, "output_dir") == allowed / "new" / "folder"
    existing = _refusal(outside / "demo.safetensors", roots)
    assert "not under the allowed folders" in existing and str(allowed) in existing
    for path in (
        outside / "missing.safetensors",  # the same words whether a file is there or not
        allowed / ".." / "outside" / "demo.safetensors",
        allowed / "link.safetensors",  # a link out of the root
        "/etc/passwd",
        "demo\0.safetensors",
    ):
        assert _refusal(path, roots) == existing, path
    assert _refusal("anything", ()) == existing.replace(str(allowed), "none")


def test_an_encoder_config_cannot_hand_timm_a_file(tmp_path: Path) -> None:
    data = preset("cpu-small").to_dict()
    for kwargs in ({"checkpoint_path": str(DEMO)}, {"pretrained_cfg_overlay": {"file": str(DEMO)}}):
        with pytest.raises(ConfigError, match="backbone_kwargs: .* not allowed"):
            EncoderConfig.from_dict({**data, "backbone_kwargs": {**data["backbone_kwargs"], **kwargs}})
    with pytest.raises(ConfigError, match="backbone_kwargs.depth: expected a number"):
        EncoderConfig.from_dict({**data, "backbone_kwargs": {**data["backbone_kwargs"], "depth": "/etc/passwd"}})
    for name in ("hf-hub:timm/vit_small_plus_patch16_dinov3.lvd1689m", "local-dir:/tmp/model", "../model"):
        with pytest.raises(ConfigError, match="backbone: expected a timm model name"):
            EncoderConfig.from_dict({**data, "backbone": name})


def test_a_checkpoint_config_cannot_hand_timm_a_file(tmp_path: Path) -> None:
    """A downloaded encoder checkpoint whose config.json names a file for timm is refused unread."""
    from instant_fold_learning.encoder.modeling import ClothEncoder

    directory = ClothEncoder(preset("cpu-small")).save_pretrained(tmp_path / "tokenizer")
    config_path = Path(directory) / "config.json"
    config = json.loads(config_path.read_text())
    config["encoder"]["backbone_kwargs"]["checkpoint_path"] = str(tmp_path / "planted.pth")
    config_path.write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="checkpoint_path"):
        ClothEncoder.from_pretrained(directory)


def test_a_local_ray_cluster_is_bound_to_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    ray = pytest.importorskip("ray")
    from instant_fold_core.parallel import SINGLE_NODE_ENV, run_jobs

    calls: list[dict] = []

    class Stop(Exception):
        pass

    def init(**kwargs):
        calls.append({**kwargs, SINGLE_NODE_ENV: os.environ.get(SINGLE_NODE_ENV)})
        raise Stop

    monkeypatch.delenv(SINGLE_NODE_ENV, raising=False)  # restored after the test
    monkeypatch.setattr(ray, "init", init)
    with pytest.raises(Stop):
        next(run_jobs(os.path.basename, ["a/b", "c/d"], workers=2))
    monkeypatch.delenv(SINGLE_NODE_ENV)
    with pytest.raises(Stop):
        next(run_jobs(os.path.basename, ["a/b", "c/d"], workers=2, address="10.0.0.5:6379"))
    local, joined = calls
    assert local[SINGLE_NODE_ENV] == "0" and local["include_dashboard"] is False
    assert joined["address"] == "10.0.0.5:6379" and joined[SINGLE_NODE_ENV] is None


#: Run in a fresh interpreter (Ray must not be imported before `run_jobs` starts it): every socket
#: the cluster's processes listen on, and the addresses Ray reports.
RAY_PROBE = """
import os
from instant_fold_core.parallel import run_jobs
jobs = run_jobs(os.path.basename, ["a/b"], workers=2)
next(jobs)
import ray
import psutil  # Ray's own copy, importable once ray is
worker = ray.get(ray.remote(lambda: ray.util.get_node_ip_address()).remote())
mine = {os.getpid()} | {p.pid for p in psutil.Process().children(recursive=True)}
listening = sorted({c.laddr.ip for c in psutil.net_connections("inet") if c.status == "LISTEN" and c.pid in mine})
print(ray.get_runtime_context().gcs_address, ray.util.get_node_ip_address(), worker, ",".join(listening))
jobs.close()
"""


@pytest.mark.slow
def test_a_local_ray_cluster_listens_on_loopback_only() -> None:
    """A real local cluster (about 40 s on two cores): its control store, node and workers are on
    127.0.0.1, and so is every socket its processes listen on (before: raylet and workers on all
    interfaces, the runtime-env agent on the machine's address)."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"}
    done = subprocess.run([sys.executable, "-c", RAY_PROBE], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    gcs, node, worker, listening = done.stdout.split()[-4:]
    assert gcs.startswith("127.0.0.1:") and node == worker == "127.0.0.1", done.stdout
    assert set(listening.split(",")) <= {"127.0.0.1", "::ffff:127.0.0.1"}, listening


@pytest.mark.ros
def test_the_policy_server_opens_demonstrations_under_its_roots_only(
    tmp_path: Path, folders: tuple[Path, Path], ros_env: dict[str, str]
) -> None:
    from policy_server_rig import policy_server_rig

    from instant_fold_interfaces.srv import LoadDemonstration
    from instant_fold_ros.standins.process_runner import ProcessRunner
    from instant_fold_ros.testing import TopicProbe

    allowed, outside = folders
    (outside / "garbage.safetensors").write_bytes(os.urandom(64))
    graph = policy_server_rig(tmp_path, [allowed]).graph
    paths = {
        "inside": allowed / "demo.safetensors",
        "inside_missing": allowed / "missing.safetensors",
        "outside": outside / "demo.safetensors",
        "outside_garbage": outside / "garbage.safetensors",
        "outside_missing": outside / "missing.safetensors",
        "link": allowed / "link.safetensors",
    }
    answers: dict = {}
    log = io.StringIO()
    with TopicProbe(ros_env) as probe:
        runner = ProcessRunner(graph, env=ros_env, output=log)
        runner.start()
        try:
            for name, path in paths.items():
                request = LoadDemonstration.Request(path=str(path))
                answers[name] = probe.call(LoadDemonstration, "policy/load_demonstration", request, 60.0)
        finally:
            code = runner.shutdown()
    assert code == 0 and all(answers.values()), log.getvalue()
    assert answers["inside"].success, answers["inside"].message
    assert not answers["inside_missing"].success and "does not exist" in answers["inside_missing"].message
    refusals = {
        name: answers[name].message.replace(str(paths[name]), "<path>")
        for name in ("outside", "outside_garbage", "outside_missing", "link")
    }
    assert not any(answers[name].success for name in refusals)
    assert len(set(refusals.values())) == 1 and "not under the allowed folders" in refusals["outside"], refusals
