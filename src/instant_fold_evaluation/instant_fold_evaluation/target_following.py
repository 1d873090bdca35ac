"""Target following: does the trajectory go where the target it is conditioned on lies?

The anchored head reads each arm's next grasp from the cloth and conditions the trajectory branch
on it, and inference may hold a target instead (`event_targets`: a demonstrated grasp mapped onto
the current cloth). Either steers the arm only if the trajectory follows the target it is given;
a trajectory that finds its way from the scene alone goes where it believes the grasp is, whatever
target it is told, and a held target changes nothing.

Measured offline on recorded episodes: at frames where an arm approaches its next grasp (open, the
grasp at least `MIN_LEAD_FRAMES` ahead, the expert moving at least `MIN_MOVE_M` over the chunk), the
chunk is sampled with that arm's target held at the true grasp, then at the grasp moved sideways
(camera x, then y, by each shift with both signs), with the same sampler noise, cloth and other
arm; the slope |Δ chunk end| / |Δ target| of that arm is reported. A trajectory that ignores its
target has slope 0. One that moves straight to it at the expert's pace covers the expert's
progress of the distance to the target within the chunk, so its slope is about
min(1, progress / distance): `follower_slope_median`, the reference the measured slope is read
against.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from instant_fold_core.contracts import gripper_closed
from instant_fold_evaluation.arm_sensitivity import batched_context, pooled_slopes, shift_variants
from instant_fold_learning.policy.data import ObservationTokens, PolicyDataError, TokenizedEpisode, as_tensor
from instant_fold_learning.policy.inference import PolicyRunner, absolute_actions, sample_cached
from instant_fold_learning.policy.progress import episode_event_counts

#: (cloth_positions [B, N, 3], cloth_features [B, N, D], cloth_valid [B, N], arm_state [B, 2, 4],
#: event_count [B, 2], targets [B, 2, 3], held [B, 2]) -> the chunk's last position per arm
#: [B, 2, 3], with the same sampler noise on every call.
ChunkEndFn = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray], np.ndarray]

#: An approach probe's grasp lies at least this many frames ahead (the arm is on its way, not there).
MIN_LEAD_FRAMES = 6
#: ... and the expert's arm moves at least this far over the chunk (it approaches, it does not wait).
MIN_MOVE_M = 0.02


class NotAnchoredError(PolicyDataError):
    """The policy's trajectory is conditioned on no target (not the anchored head): nothing to probe."""


def approach_probes(
    arm_state: np.ndarray, horizon: int, per_arm: int
) -> list[tuple[int, int, np.ndarray, float, float]]:
    """(arm, frame, grasp position, expert progress over the chunk, distance to the grasp): up to
    `per_arm` frames per arm, evenly spread over the frames at which it approaches its next grasp."""
    state = np.asarray(arm_state, np.float64)
    closed = gripper_closed(state[:, :, 3])
    frames_total = len(state)
    probes = []
    for arm in range(2):
        candidates = []
        for f in range(frames_total):
            ahead = np.flatnonzero(closed[f:, arm])
            if closed[f, arm] or not len(ahead) or ahead[0] < MIN_LEAD_FRAMES:
                continue
            grasp = f + int(ahead[0])
            end = min(f + horizon, grasp)
            progress = float(np.linalg.norm(state[end, arm, :3] - state[f, arm, :3]))
            if progress >= MIN_MOVE_M:
                distance = float(np.linalg.norm(state[grasp, arm, :3] - state[f, arm, :3]))
                candidates.append((arm, f, state[grasp, arm, :3].astype(np.float32), progress, distance))
        if candidates:
            pick = np.unique(np.linspace(0, len(candidates) - 1, min(per_arm, len(candidates))).round().astype(int))
            probes += [candidates[i] for i in pick]
    return probes


def target_slopes(
    chunk_end: ChunkEndFn, episode: TokenizedEpisode, horizon: int, shifts_m: Sequence[float], per_arm: int
) -> tuple[np.ndarray, np.ndarray]:
    """[P, V] slopes |Δend| / |Δtarget| of the probed arm for the P probes (`approach_probes`) and
    V shifts (`shift_variants` order), and [P] the straight follower's slopes min(1, progress /
    distance); one batched call per shift."""
    variants = shift_variants(shifts_m)
    probes = approach_probes(episode.arm_state, horizon, per_arm)
    if not probes:
        return np.zeros((0, len(variants))), np.zeros(0)
    rows = np.arange(len(probes))
    arms = np.array([p[0] for p in probes])
    frames = np.array([p[1] for p in probes])
    cloth = (episode.cloth_positions[frames], episode.cloth_features[frames], episode.cloth_valid[frames])
    state = episode.arm_state[frames].astype(np.float32)
    counts = episode_event_counts(episode.arm_state)[frames]
    targets = np.zeros((len(probes), 2, 3), np.float32)
    targets[rows, arms] = np.stack([p[2] for p in probes])
    held = np.zeros((len(probes), 2), bool)
    held[rows, arms] = True
    base = np.asarray(chunk_end(*cloth, state, counts, targets, held))[rows, arms]
    slopes = np.empty((len(probes), len(variants)))
    for j, (axis, shift) in enumerate(variants):
        moved_targets = targets.copy()
        moved_targets[rows, arms, axis] += shift
        moved = np.asarray(chunk_end(*cloth, state, counts, moved_targets, held))[rows, arms]
        slopes[:, j] = np.linalg.norm(moved - base, axis=-1) / abs(shift)
    follower = np.array([min(1.0, progress / max(distance, 1e-9)) for *_, progress, distance in probes])
    return slopes, follower


def policy_chunk_end(runner: PolicyRunner, demo: TokenizedEpisode, seed: int) -> ChunkEndFn:
    """The runner's policy's chunk end with the given arms' targets held (the deployed sampling
    path, `sample_cached` with a target override), conditioned on `demo`'s keyframes, sampled with
    a generator seeded with `seed` on every call."""
    if runner.cfg.keypose_head != "anchored":
        raise NotAnchoredError(
            f"target following: the trajectory of a {runner.cfg.keypose_head!r} keypose head takes no target"
        )
    policy, device, dtype = runner.policy, runner.device, runner.dtype
    context = batched_context(runner, demo)

    @torch.inference_mode()
    def chunk_end(
        positions: np.ndarray,
        features: np.ndarray,
        valid: np.ndarray,
        arm: np.ndarray,
        counts: np.ndarray,
        targets: np.ndarray,
        held: np.ndarray,
    ) -> np.ndarray:
        obs = ObservationTokens(*(as_tensor(a, device, dtype) for a in (positions, features, valid, arm, counts)))
        override = (torch.as_tensor(targets, device=device), torch.as_tensor(held, device=device))
        generator = torch.Generator().manual_seed(seed)
        sampled = sample_cached(policy, obs, context(len(arm)), generator, override)
        ends, _, _ = absolute_actions(policy, sampled, obs.arm_state)
        return ends[:, -1].float().cpu().numpy()

    return chunk_end


def target_following(
    runner: PolicyRunner,
    pairs: Sequence[tuple[TokenizedEpisode, TokenizedEpisode]],
    seed: int,
    shifts_m: Sequence[float],
    per_arm: int,
) -> dict[str, Any]:
    """Slopes of every (query, demonstration) pair pooled: median and mean over all probes and
    shifts, the median per shift, and the straight follower's median slope on the same probes."""
    horizon = runner.cfg.horizon
    measured = [
        target_slopes(policy_chunk_end(runner, demo, seed), query, horizon, shifts_m, per_arm) for query, demo in pairs
    ]
    out = pooled_slopes([m[0] for m in measured], shifts_m, per_arm)
    if out["probes"]:
        out["follower_slope_median"] = float(np.median(np.concatenate([m[1] for m in measured])))
    return out
