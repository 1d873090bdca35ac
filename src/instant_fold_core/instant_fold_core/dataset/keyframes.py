"""Semantic keyframes of an episode (paper, appendix A "Keyframe Extraction").

Candidates are gripper-state transitions (each grasp and release), motion-transition frames
that capture sequential coordination (one arm starting or finishing its motion while the other
does not, e.g. one gripper completing its motion before the other begins), the first frame
(the initial state a demonstration starts from) and, always, the terminal frame.
"""

from __future__ import annotations

import itertools

import numpy as np

from instant_fold_core.contracts import gripper_closed


def _close_gaps(flags: np.ndarray, min_run: int) -> np.ndarray:
    """Fill idle gaps shorter than `min_run` inside motion (a grasp pause is not a stop)."""
    out = flags.copy()
    idx = np.flatnonzero(flags)
    for a, b in itertools.pairwise(idx):
        if 1 < b - a <= min_run:
            out[a:b] = True
    return out


def arm_events(arm_state: np.ndarray) -> list[np.ndarray]:
    """Per arm of [T, 2, 4] arm states, the frames (int, increasing) whose open/closed state
    (`gripper_closed`) differs from the previous frame's: that arm's grasps and releases."""
    closed = gripper_closed(np.asarray(arm_state)[:, :, 3])
    return [np.flatnonzero(closed[1:, a] != closed[:-1, a]) + 1 for a in range(closed.shape[1])]


def gripper_events(arm_state: np.ndarray) -> np.ndarray:
    """Frames (int, increasing) of every grasp and release of [T, 2, 4] arm states, any arm: the
    union of the `arm_events`."""
    return np.unique(np.concatenate(arm_events(arm_state)))


def extract_keyframes(
    arm_state: np.ndarray, move_tol: float = 1e-3, min_run: int = 6, min_separation: int = 3
) -> np.ndarray:
    """Keyframe indices (int32, increasing) from per-frame arm states [T, 2, 4].

    A grasp/release keyframe is the first frame whose openness differs from the previous
    frame. An arm is "moving" at frame t when its position changes by more than `move_tol`
    (metres) towards t + 1, with pauses shorter than `min_run` frames bridged; a motion
    transition is a frame where exactly one arm starts or stops moving. Grasp/release events
    are always kept; motion transitions closer than `min_separation` frames to an already
    chosen keyframe are redundant and dropped.
    """
    gs = np.asarray(arm_state, dtype=np.float64)
    if gs.ndim != 3 or gs.shape[1:] != (2, 4) or gs.shape[0] == 0:
        raise ValueError(f"arm_state: expected [T, 2, 4], got {gs.shape}")
    t = gs.shape[0]
    events = gripper_events(gs).tolist()
    motion: list[int] = []
    if t > 2:
        step = np.linalg.norm(np.diff(gs[:, :, :3], axis=0), axis=2)  # [T-1, 2]
        moving = np.stack([_close_gaps(step[:, a] > move_tol, min_run) for a in range(2)], axis=1)
        changed = moving[1:] != moving[:-1]
        motion = (np.flatnonzero(changed.sum(axis=1) == 1) + 1).tolist()
    chosen = [0, t - 1, *events]
    for cand in motion:
        if all(abs(cand - c) >= min_separation for c in chosen):
            chosen.append(cand)
    return np.array(sorted(set(chosen)), dtype=np.int32)
