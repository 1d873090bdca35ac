"""Garments and semantic keypoints on procedural, Newton and OBJ meshes."""

from __future__ import annotations

import numpy as np
import pytest

from instant_fold_core.dataset.schema import KEYPOINT_NAMES
from instant_fold_sim.garments import (
    MAX_PARTICLES,
    GarmentError,
    load_obj_folder,
    load_obj_garment,
    make_procedural_garment,
    newton_tshirt,
    split_of_seed,
    validate_mesh,
)
from instant_fold_sim.keypoints import detect_keypoints

KP = {n: i for i, n in enumerate(KEYPOINT_NAMES)}


def _assert_semantic_layout(xyz: np.ndarray, ids: np.ndarray) -> None:
    p = xyz[ids, :2]
    assert ids.dtype == np.int32 and len(set(ids.tolist())) == 7
    # Left keypoints on the left, sleeve tips outermost, hem below shoulders, centre inside.
    assert p[KP["top_left"], 0] < p[KP["left_shoulder"], 0] < 0 < p[KP["right_shoulder"], 0] < p[KP["top_right"], 0]
    assert p[KP["bottom_left"], 0] < 0 < p[KP["bottom_right"], 0]
    assert max(p[KP["bottom_left"], 1], p[KP["bottom_right"], 1]) < p[KP["center"], 1]
    assert p[KP["center"], 1] < min(p[KP["left_shoulder"], 1], p[KP["right_shoulder"], 1])
    # Shoulders are mirror images of each other.
    assert abs(p[KP["left_shoulder"], 0] + p[KP["right_shoulder"], 0]) < 0.05
    assert abs(p[KP["left_shoulder"], 1] - p[KP["right_shoulder"], 1]) < 0.05


@pytest.mark.parametrize("spacing", [0.016, 0.035])
def test_procedural_keypoints_match_construction(spacing):
    for seed in range(12):
        g = make_procedural_garment(seed, spacing=spacing)
        assert g.num_particles <= MAX_PARTICLES
        ids = detect_keypoints(g.vertices)
        _assert_semantic_layout(g.vertices, ids)
        # The shoulder keypoint sits at the generator's shoulder point (within a mesh cell or two).
        shoulder = g.vertices[ids[KP["left_shoulder"]]]
        assert abs(abs(shoulder[0]) - g.params["shoulder_width"] / 2) < 2.5 * spacing


def test_procedural_garments_differ_and_split_is_fixed():
    a, b = make_procedural_garment(1), make_procedural_garment(2)
    assert a.params != b.params and a.garment_id != b.garment_id
    assert make_procedural_garment(1).params == a.params  # deterministic
    splits = [split_of_seed(s) for s in range(360)]
    assert splits.count("train") == 300 and splits.count("heldout") == 60


def test_newton_tshirt_keypoints():
    g = newton_tshirt()
    assert g.source == "newton" and 500 < g.num_particles <= MAX_PARTICLES
    validate_mesh(g.vertices, g.faces)
    _assert_semantic_layout(g.vertices, detect_keypoints(g.vertices))


def _write_obj(path, verts, faces):
    lines = [f"v {x} {y} {z}" for x, y, z in verts] + [f"f {a + 1} {b + 1} {c + 1}" for a, b, c in faces]
    path.write_text("\n".join(lines))


def test_obj_meshes_load_and_bad_ones_are_rejected_with_reason(tmp_path):
    good = make_procedural_garment(5, spacing=0.03)
    # Standing garment as a user would export it: y up, in metres.
    _write_obj(tmp_path / "good.obj", good.vertices, good.faces)
    loaded = load_obj_garment(tmp_path / "good.obj")
    assert loaded.num_particles == good.num_particles
    _assert_semantic_layout(loaded.vertices, detect_keypoints(loaded.vertices))

    quad = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0], [0.5, 0.5, 1.0]], dtype=float)
    _write_obj(tmp_path / "nonmanifold.obj", quad, [[0, 1, 2], [0, 1, 3], [0, 1, 4]])
    _write_obj(tmp_path / "degenerate.obj", quad, [[0, 1, 2], [1, 3, 2], [0, 0, 4]])
    _write_obj(tmp_path / "sliver.obj", np.vstack([quad, [[2, 0, 0]]]), [[0, 1, 2], [1, 3, 2], [0, 1, 5]])
    dense = np.random.default_rng(0).random((MAX_PARTICLES + 10, 3))
    _write_obj(tmp_path / "dense.obj", dense, [[i, i + 1, i + 2] for i in range(0, MAX_PARTICLES + 8, 3)])
    (tmp_path / "broken.obj").write_text("v 0 0 zero\n")
    garments, rejected = load_obj_folder(tmp_path)
    assert [g.garment_id for g in garments] == ["obj_good"]
    assert "non-manifold" in rejected["nonmanifold.obj"]
    assert "degenerate" in rejected["degenerate.obj"] and "degenerate" in rejected["sliver.obj"]
    assert "too many particles" in rejected["dense.obj"]
    assert "malformed" in rejected["broken.obj"]
    with pytest.raises(GarmentError, match="no such OBJ"):
        load_obj_garment(tmp_path / "missing.obj")
