"""A fold's Rerun recording from its hosts: the in-process rollout (what `evaluate --rrd` writes;
the CLI itself in `test_evaluate.py`) and the main job over the ROS graph (`sim_fold --rrd`, checked
here, run by `test_closed_loop.py`). Each writes the entities of
`instant_fold_core.fold_recording.ENTITIES`, read back with Rerun's own reader."""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from instant_fold.sim_fold import DEFAULT_DEMO
from instant_fold_core.demonstration import load_demonstration
from instant_fold_core.fold_recording import ENTITIES, FoldRecording
from instant_fold_evaluation.closed_loop import load_condition, run_rollout
from instant_fold_policy.server import PolicyServer
from instant_fold_ros.bringup_share import models_dir
from instant_fold_sim.sim_world import SimWorld

rerun_chunk = pytest.importorskip("rerun.chunk", reason="rerun-sdk is pinned in requirements/python.lock")

MODELS = models_dir()
SEED = 1469361038825727794  # the main job's start
QUERIES = 4
#: Entities every host writes (the latency series are named per host; the final keypoints need an evaluation).
COMMON = {e for e in ENTITIES if e not in ("latency", "cloth/final_keypoints", "oracle/keypoints")}


def rows(path: Path) -> tuple[Counter[str], dict[str, list]]:
    """Rows per entity, and the first value of each component column (`entity:Archetype:field`)."""
    counts: Counter[str] = Counter()
    first: dict[str, list] = {}
    for chunk in rerun_chunk.RrdReader(path).stream():
        entity = chunk.entity_path.lstrip("/")
        counts[entity] += chunk.num_rows
        batch = chunk.to_record_batch()
        for name in batch.schema.names:
            if ":" in name and not name.startswith("rerun."):
                first.setdefault(f"{entity}:{name}", batch.column(name)[0].as_py())
    return counts, first


def test_an_in_process_rollout_records_what_the_policy_saw_and_did(tmp_path: Path) -> None:
    server = PolicyServer.from_checkpoints(MODELS / "policy", MODELS / "encoder", "cpu", seed=0)
    demo = load_demonstration(MODELS / DEFAULT_DEMO)
    load_condition(server, demo, "")
    world = SimWorld("proc:1", SEED, "cpu-small", record=False)
    with FoldRecording(tmp_path / "fold.rrd") as recording:
        recording.demonstration(demo)
        result = run_rollout(world, server, QUERIES, recording=recording)
    counts, first = rows(recording.path)
    assert set(counts) >= COMMON
    per_query = ["policy/chunk", "policy/keypose", "latency/observe_ms", "latency/predict_ms"]
    assert {e: counts[e] for e in per_query} == dict.fromkeys(per_query, QUERIES)
    seen = ["camera/rgb", "camera/mask", "cloth/tokens"]  # each query's, and the last frame's
    assert {e: counts[e] for e in seen} == dict.fromkeys(seen, QUERIES + 1)
    assert counts["arms/position"] == result.frames + 1  # every tick's state, and the start
    h, w = world.observe().rgb.shape[:2]
    assert Image.open(io.BytesIO(bytes(first["camera/rgb:EncodedImage:blob"][0]))).size == (w, h)
    assert len(first["cloth/tokens:Points3D:positions"]) <= server.runner.cfg.num_cloth_tokens
    assert [len(s) for s in first["policy/chunk:LineStrips3D:strips"]] == [server.horizon] * 2
    assert len(first["demonstration/keyposes:Points3D:positions"]) == 2 * demo.num_keyframes


def check_main_job_recording(out: Path, metrics: dict) -> None:
    """The recording of a main job run with `--rrd` into `out` (`test_closed_loop.py` runs one, and
    checks the fold is the in-process one: recording from the topics does not change the fold)."""
    queries = metrics["fold"]["policy_queries"]
    assert metrics["outputs"]["rrd"] == str(out / "fold.rrd")
    assert metrics["recording"] == {"queries": queries, "refused_messages": 0}
    counts, first = rows(out / "fold.rrd")
    assert set(counts) >= COMMON | {"oracle/keypoints", "cloth/final_keypoints"}
    assert counts["policy/chunk"] == queries
    # the job's probe times frames from the goal on and only the frames it received (latest-message
    # QoS): under load fewer commands have a latency (1 of 4 in one loaded run), never more
    assert 1 <= counts["latency/tokens_to_command"] <= queries
    # each frame at most once; the observation topics keep only their latest message, so on a loaded
    # machine the tap can miss a frame (a fresh-clone CI run recorded 8 and 7 of 9)
    for entity in ("camera/rgb", "cloth/tokens"):
        assert metrics["sim"]["frames"] // 2 < counts[entity] <= metrics["sim"]["frames"] + 1, entity
    assert counts["arms/position"] == queries  # the state of each query, from the fold's feedback
    np.testing.assert_allclose(
        first["oracle/keypoints:Points3D:positions"], metrics["sim"]["oracle_keypoints"], atol=1e-6
    )
