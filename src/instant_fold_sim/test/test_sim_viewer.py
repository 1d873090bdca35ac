"""The viewer's Rerun recording (`--format rrd`), read back with Rerun's own RRD reader."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from instant_fold_core.dataset.schema import Episode
from instant_fold_learning.testing import random_episode

zarr_store = pytest.importorskip(
    "instant_fold_core.dataset.zarr_store", reason="episode stores need zarr 3 (Python >= 3.11)"
)
rerun_chunk = pytest.importorskip("rerun.chunk", reason="rerun-sdk is pinned in requirements/python.lock")


def _episode(frames: int = 9, res: int = 32) -> Episode:
    """Both grippers close at frame 3 and open at frame 6."""
    intrinsics = np.array([[40, 0, 16], [0, 40, 16], [0, 0, 1]])
    return random_episode(frames, res, intrinsics, meta={"mode": "sleeves_down__bottom_up", "variant": "S"})


def test_rrd_holds_every_frame_and_a_line_per_keyframe(tmp_path, capsys):
    from instant_fold_sim import viewer

    store = tmp_path / "sim.zarr"
    zarr_store.EpisodeStore(store, mode="a").write("e", _episode())
    assert viewer.main(["--store", str(store), "--out", str(tmp_path / "view"), "--format", "rrd"]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "view.rrd")
    rows: Counter[str] = Counter()
    static = set()
    texts = []
    for chunk in rerun_chunk.RrdReader(tmp_path / "view.rrd").stream():
        rows[chunk.entity_path] += chunk.num_rows
        if chunk.is_static:
            static.add(chunk.entity_path)
        batch = chunk.to_record_batch()
        texts += [
            v for name in batch.schema.names if name.endswith("TextLog:text") for v in batch.column(name).to_pylist()
        ]
    per_frame = ["/camera/rgb", "/camera/depth", "/camera/mask", "/cloth/particles", "/cloth/keypoints"]
    per_frame += ["/arms/state", "/arms/target", "/openness/left", "/openness/right"]
    assert {name: rows[name] for name in per_frame} == dict.fromkeys(per_frame, 9)
    assert {"/camera", "/arms/path"} <= static
    flat = [t for v in texts for t in (v if isinstance(v, list) else [v])]
    assert flat == [
        "keyframe at frame 0: left MOTION, right MOTION",
        "keyframe at frame 3: left GRASP, right GRASP",
        "keyframe at frame 6: left RELEASE, right RELEASE",
        "keyframe at frame 8: left TERMINAL, right TERMINAL",
    ]
