"""A fold's Rerun recording, written through `FoldRecording` and read back with Rerun's own reader:
every entity of the layout is there, with the shapes logged; bad input is refused by name."""

from __future__ import annotations

import io
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image
from test_demonstration import make_demo

from instant_fold_core.contracts import ActionChunk
from instant_fold_core.fold_recording import ENTITIES, FoldRecording, FoldRecordingError

rerun_chunk = pytest.importorskip("rerun.chunk", reason="rerun-sdk is pinned in requirements/python.lock")

W, H, TOKENS, HORIZON, QUERIES = 16, 12, 8, 5, 3
K = np.array([[20.0, 0, 8], [0, 20, 6], [0, 0, 1]])


def read_back(path: Path) -> dict[str, dict[str, list[Any]]]:
    """entity -> component column (`Archetype:field`) -> one value per row, over all chunks."""
    out: dict[str, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
    for chunk in rerun_chunk.RrdReader(path).stream():
        batch = chunk.to_record_batch()
        for name in batch.schema.names:
            if ":" in name and not name.startswith("rerun."):
                out[chunk.entity_path][name] += batch.column(name).to_pylist()
    return out


def write_fold(path: Path) -> FoldRecording:
    rng = np.random.default_rng(0)
    with FoldRecording(path) as rec:
        rec.camera(K, W, H)
        rec.demonstration(make_demo(k=3, size=16))
        for q in range(QUERIES):
            t = 0.1 * q
            rgb = np.zeros((H, W, 3), np.uint8)
            rgb[..., 0] = 200
            rec.observation(t, rgb, np.ones((H, W), bool))
            rec.tokens(t, rng.normal(size=(TOKENS, 3)), np.arange(TOKENS) < TOKENS - 2)
            keypose = np.concatenate([rng.normal(size=(2, 3)), [[1.0], [0.0]]], axis=1)
            chunk = ActionChunk(rng.normal(size=(HORIZON, 2, 3)), np.ones((HORIZON, 2)), 2, 0.05, keypose=keypose)
            rec.query(q, t, chunk, {"tokens_to_command": 12.5 + q, "frame_to_tokens": 3.0})
            for tick in range(2):
                rec.arm_state(t + 0.05 * tick, rng.uniform(size=(2, 4)))
            rec.arm_state(t, rng.uniform(size=(2, 4)))  # a repeated stamp (the state topic at rest) is skipped
        rec.keypoints(rng.normal(size=(7, 3)), rng.normal(size=(7, 3)))
        rec.event(0.3, "fold completed")
    return rec


def test_every_entity_is_written_with_the_shapes_logged(tmp_path: Path) -> None:
    path = write_fold(tmp_path / "fold.rrd").path
    data = read_back(path)
    logged = {e.lstrip("/") for e in data}
    assert {e for e in ENTITIES if e != "latency"} <= logged
    assert {"latency/tokens_to_command", "latency/frame_to_tokens"} <= logged

    def column(entity: str, name: str) -> list[Any]:
        return data[f"/{entity}"][name]

    assert column("camera", "Pinhole:resolution") == [[[W, H]]]
    rgb = column("camera/rgb", "EncodedImage:blob")
    assert len(rgb) == QUERIES and Image.open(io.BytesIO(bytes(rgb[0][0]))).size == (W, H)
    assert [(f["width"], f["height"]) for [f] in column("camera/mask", "SegmentationImage:format")] == [
        (W, H)
    ] * QUERIES
    assert [len(p) for p in column("cloth/tokens", "Points3D:positions")] == [TOKENS - 2] * QUERIES  # valid ones
    assert [len(p) for p in column("policy/keypose", "Points3D:positions")] == [2] * QUERIES
    chunks = column("policy/chunk", "LineStrips3D:strips")
    assert [[len(strip) for strip in row] for row in chunks] == [[HORIZON, HORIZON]] * QUERIES
    assert column("latency/tokens_to_command", "Scalars:scalars") == [[12.5], [13.5], [14.5]]
    assert len(column("arms/position", "Points3D:positions")) == 2 * QUERIES  # repeated stamps skipped
    assert [len(s) for s in column("arms/path", "LineStrips3D:strips")[0]] == [2 * QUERIES] * 2
    demo = Image.open(io.BytesIO(bytes(column("demonstration/keyframes", "EncodedImage:blob")[0][0])))
    assert demo.size == (3 * 16, 16)  # three keyframes side by side
    labels = column("demonstration/keyposes", "Points3D:labels")[0]
    assert labels[:2] == ["k0 left GRASP", "k0 right GRASP"] and len(labels) == 6
    assert len(column("oracle/keypoints", "Points3D:positions")[0]) == 7
    assert len(column("cloth/final_keypoints", "Points3D:positions")[0]) == 7
    texts = [line for row in column("events", "TextLog:text") for line in row]
    assert "fold completed" in texts and any("3 keyframes" in t for t in texts)


def test_bad_input_is_refused_by_name(tmp_path: Path) -> None:
    rec = FoldRecording(tmp_path / "bad.rrd")
    chunk = ActionChunk(np.zeros((2, 2, 3)), np.ones((2, 2)), 1, 0.05)
    rec.camera(K, W, H)
    with pytest.raises(FoldRecordingError, match="rgb: 8x8 image, the camera's are 16x12"):
        rec.observation(0.0, np.zeros((8, 8, 3), np.uint8))
    with pytest.raises(FoldRecordingError, match=r"tokens: expected points \[N, 3\], got shape \(4, 2\)"):
        rec.tokens(0.0, np.zeros((4, 2)))
    with pytest.raises(FoldRecordingError, match="stamp_s: expected a finite time"):
        rec.arm_state(float("nan"), np.zeros((2, 4)))
    with pytest.raises(FoldRecordingError, match="latency 'Policy ms'"):
        rec.query(0, 0.0, chunk, {"Policy ms": 1.0})
    with pytest.raises(FoldRecordingError, match=r"oracle keypoints: expected points \[7, 3\]"):
        rec.keypoints(np.zeros((6, 3)))
    with pytest.raises(FoldRecordingError, match="ends in .rrd"):
        FoldRecording(tmp_path / "fold.mp4")
    rec.close()
    with pytest.raises(FoldRecordingError, match="the recording is closed"):
        rec.event(None, "late")
