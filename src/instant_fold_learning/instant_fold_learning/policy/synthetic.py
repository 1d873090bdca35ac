"""Synthetic tokenised folding episodes for tests and smoke training before the simulator's data.

A rectangular "garment" of 8 x 8 cloth tokens lies on a table under a top-down camera. Two arms
grasp two corners and fold one half of the sheet over the other (the moving half rotates about
the fold line, lifting towards the camera), release and retract. The fold side is the *mode*, so
episodes of different modes share their start state exactly and differ only in what is done:
only the context demonstration can tell the policy which fold to perform. Token features are a
fixed function of the material coordinates (so tokens carry correspondence, like the pretrained
tokenizer's) and token order is shuffled per frame (like FPS).
"""

from __future__ import annotations

import numpy as np

from instant_fold_learning.policy.data import TokenizedEpisode

TABLE_DEPTH_M = 0.8
HOME_HEIGHT_M = 0.2
GRID = 8

#: mode -> (fold axis: 0 = u, 1 = v; moving side sign; material (u, v) grasped by left, right arm)
MODES: dict[str, tuple[int, float, tuple[tuple[float, float], tuple[float, float]]]] = {
    "right_over_left": (0, 1.0, ((0.5, -0.5), (0.5, 0.5))),
    "bottom_up": (1, 1.0, ((-0.5, 0.5), (0.5, 0.5))),
    "left_over_right": (0, -1.0, ((-0.5, -0.5), (-0.5, 0.5))),
    "top_down": (1, -1.0, ((-0.5, -0.5), (0.5, -0.5))),
}
PHASES = {"approach": 8, "fold": 12, "retract": 6}


def _features(uv: np.ndarray, dim: int) -> np.ndarray:
    """Deterministic 'semantic' features of material coordinates (same for every episode)."""
    proj = np.random.default_rng(1234).normal(size=(8, dim))
    freq = np.concatenate([np.sin(np.pi * uv * k) for k in (1, 2)] + [np.cos(np.pi * uv * k) for k in (1, 2)], -1)
    return np.tanh(freq @ proj).astype(np.float32)


def _sheet(uv: np.ndarray, size: np.ndarray, rot: float, centre: np.ndarray, mode: str, progress: float) -> np.ndarray:
    """Camera-frame positions of material points uv [M, 2] with the fold at `progress` in [0, 1]."""
    axis, side, _ = MODES[mode]
    local = np.concatenate([uv * size, np.zeros((len(uv), 1))], -1)  # x, y in plane, height 0
    d = side * local[:, axis]  # distance beyond the fold line (moving side > 0)
    moving = d > 0
    phi = np.pi * progress
    local[moving, axis] = side * d[moving] * np.cos(phi)
    local[moving, 2] = d[moving] * np.sin(phi) + 0.004 * progress  # lift towards camera, then lie on top
    c, s = np.cos(rot), np.sin(rot)
    xy = local[:, :2] @ np.array([[c, s], [-s, c]]) + centre
    return np.concatenate([xy, TABLE_DEPTH_M - local[:, 2:3]], -1).astype(np.float32)


def make_episode(
    garment_id: int, mode: str, start_seed: int, feature_dim: int, num_tokens: int = GRID * GRID
) -> TokenizedEpisode:
    """One episode; equal (garment_id, start_seed) give the same start state for every mode.

    With `num_tokens` < 64 each frame keeps a random subset of the material grid, like FPS picking
    different surface points in every frame.
    """
    if not 0 < num_tokens <= GRID * GRID:
        raise ValueError(f"num_tokens: expected 1..{GRID * GRID}, got {num_tokens}")
    g_rng = np.random.default_rng([garment_id, 7])
    size = g_rng.uniform([0.25, 0.3], [0.4, 0.45])
    s_rng = np.random.default_rng([garment_id, start_seed, 11])
    rot = s_rng.uniform(-0.2, 0.2)
    centre = s_rng.uniform(-0.03, 0.03, 2)
    home = np.array([[-0.15, 0.0, TABLE_DEPTH_M - HOME_HEIGHT_M], [0.15, 0.0, TABLE_DEPTH_M - HOME_HEIGHT_M]])
    start = home + s_rng.uniform(-0.05, 0.05, (2, 3))
    u = np.linspace(-0.5, 0.5, GRID)
    uv = np.stack(np.meshgrid(u, u, indexing="ij"), -1).reshape(-1, 2)
    grasp_uv = np.array(MODES[mode][2])

    frames_progress, states = [], []
    corner0 = _sheet(grasp_uv, size, rot, centre, mode, 0.0)
    for k in range(PHASES["approach"] + 1):  # approach, open
        a = k / PHASES["approach"]
        frames_progress.append(0.0)
        states.append(np.concatenate([(1 - a) * start + a * corner0, np.ones((2, 1))], -1))
    frames_progress.append(0.0)  # grasp: close
    states.append(np.concatenate([corner0, np.zeros((2, 1))], -1))
    grasp_frame = len(states) - 1
    for k in range(1, PHASES["fold"] + 1):
        p = k / PHASES["fold"]
        frames_progress.append(p)
        states.append(np.concatenate([_sheet(grasp_uv, size, rot, centre, mode, p), np.zeros((2, 1))], -1))
    corner1 = states[-1][:, :3]
    frames_progress.append(1.0)  # release: open
    states.append(np.concatenate([corner1, np.ones((2, 1))], -1))
    release_frame = len(states) - 1
    for k in range(1, PHASES["retract"] + 1):
        a = k / PHASES["retract"]
        frames_progress.append(1.0)
        states.append(np.concatenate([(1 - a) * corner1 + a * home, np.ones((2, 1))], -1))

    state = np.stack(states).astype(np.float32)
    action = np.concatenate([state[1:], state[-1:]], 0)
    feats = _features(uv, feature_dim)
    positions, features = [], []
    for t, p in enumerate(frames_progress):
        perm = np.random.default_rng([garment_id, start_seed, t]).permutation(len(uv))[:num_tokens]
        positions.append(_sheet(uv, size, rot, centre, mode, p)[perm])
        features.append(feats[perm])
    n_frames = len(states)
    return TokenizedEpisode(
        np.stack(positions),
        np.stack(features),
        np.ones((n_frames, num_tokens), bool),
        state,
        action,
        np.array([0, grasp_frame, release_frame, n_frames - 1], np.int32),
        {
            "garment_id": f"synthetic_{garment_id}",
            "mode": mode,
            "mode_id": list(MODES).index(mode),
            "start_seed": start_seed,
        },
    ).validate()


def synthetic_episodes(
    num_garments: int,
    modes: tuple[str, ...],
    starts_per_garment: int,
    feature_dim: int,
    num_tokens: int = GRID * GRID,
) -> list[TokenizedEpisode]:
    """Every (garment, start, mode) combination: each start state appears once per mode."""
    return [
        make_episode(g, m, s, feature_dim, num_tokens)
        for g in range(num_garments)
        for s in range(starts_per_garment)
        for m in modes
    ]
