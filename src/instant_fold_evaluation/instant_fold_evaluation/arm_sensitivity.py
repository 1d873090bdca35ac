"""Arm sensitivity: does the policy's next keypose follow the cloth or the arm?

Before an arm's first grasp its next keypose is where it will grasp, a point on the cloth, which
stays where it is when the arm is somewhere else. A policy whose keypose is an offset from the arm
that barely depends on where the arm is carries every error in the arm's position into its grasp;
closed loop, where the arm is never exactly where the expert's was, that is a grasp off target.

Measured offline on recorded episodes: for frames before each arm's first grasp the arm's state is
shifted sideways in the image plane (camera x, then y, by default by -6, -3, +3 and +6 cm) with the
cloth tokens and the other arm unchanged; the keypose is predicted with the same sampler noise for
the unshifted and every shifted state (one generator seed per call, same batch layout), and the
slope |Δkeypose| / |Δarm| of that arm's keypose position is reported: 0 = the target ignores the
arm (a grasp point on a still cloth), 1 = the target moves with the arm (a fixed offset from it).

`keypose_slopes` works on any `KeyposeFn` (the tests give it ones with a known answer);
`policy_keypose` is the policy's, through `inference.sample_cached` and `absolute_actions`, the
deployed sampling path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from instant_fold_core.contracts import gripper_closed
from instant_fold_learning.policy.data import (
    ObservationTokens,
    PolicyDataError,
    TokenizedEpisode,
    as_tensor,
    instruction_tokens,
    keyframe_tokens,
)
from instant_fold_learning.policy.inference import PolicyRunner, absolute_actions, sample_cached
from instant_fold_learning.policy.instruction import InstructionError, instruction_text
from instant_fold_learning.policy.progress import episode_event_counts

#: (cloth_positions [B, N, 3], cloth_features [B, N, D], cloth_valid [B, N], arm_state [B, 2, 4],
#: event_count [B, 2]) -> keypose [B, 2, >= 3] (position first), with the same sampler noise on
#: every call.
KeyposeFn = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray], np.ndarray]

#: Sideways shifts (m) of the arm, each applied with both signs along camera x and y.
DEFAULT_SHIFTS_M = (0.03, 0.06)
#: Frames probed per arm and episode, evenly spread before its first grasp.
DEFAULT_FRAMES_PER_ARM = 8


class NoKeyposeError(PolicyDataError):
    """The policy predicts no keypose (no keypose output configured): nothing to probe."""


def shift_variants(shifts_m: Sequence[float]) -> list[tuple[int, float]]:
    """(axis, signed shift) pairs: x then y, each shift with both signs."""
    if not shifts_m or any(not np.isfinite(s) or s <= 0 for s in shifts_m):
        raise PolicyDataError(f"arm shifts: expected positive distances, got {list(shifts_m)}")
    return [(axis, sign * float(s)) for axis in (0, 1) for s in sorted(shifts_m) for sign in (-1, 1)]


def variant_label(axis: int, shift: float) -> str:
    return f"{'xy'[axis]}{shift:+.3f}"


def probe_frames(arm_state: np.ndarray, frames_per_arm: int) -> list[tuple[int, int]]:
    """(arm, frame) pairs: up to `frames_per_arm` frames evenly spread before each arm's first
    closure (`gripper_closed`); none for an arm that never closes or is closed from the start."""
    closed = gripper_closed(np.asarray(arm_state)[:, :, 3])
    pairs = []
    for arm in range(closed.shape[1]):
        if not closed[:, arm].any() or closed[0, arm]:
            continue
        first = int(np.argmax(closed[:, arm]))
        frames = np.unique(np.linspace(0, first - 1, min(frames_per_arm, first)).round().astype(int))
        pairs += [(arm, int(f)) for f in frames]
    return pairs


def keypose_slopes(
    keypose: KeyposeFn,
    episode: TokenizedEpisode,
    shifts_m: Sequence[float] = DEFAULT_SHIFTS_M,
    frames_per_arm: int = DEFAULT_FRAMES_PER_ARM,
) -> np.ndarray:
    """[P, V] slopes |Δkeypose| / |Δarm| of the shifted arm's keypose position for the P probes
    (`probe_frames`) and V shifts (`shift_variants` order); one batched call per shift."""
    variants = shift_variants(shifts_m)
    probes = probe_frames(episode.arm_state, frames_per_arm)
    if not probes:
        return np.zeros((0, len(variants)))
    arms = np.array([a for a, _ in probes])
    frames = np.array([f for _, f in probes])
    rows = np.arange(len(probes))
    cloth = (episode.cloth_positions[frames], episode.cloth_features[frames], episode.cloth_valid[frames])
    state = episode.arm_state[frames].astype(np.float32)
    counts = episode_event_counts(episode.arm_state)[frames]
    base = np.asarray(keypose(*cloth, state, counts))[rows, arms, :3]
    slopes = np.empty((len(probes), len(variants)))
    for j, (axis, shift) in enumerate(variants):
        shifted = state.copy()
        shifted[rows, arms, axis] += shift
        moved = np.asarray(keypose(*cloth, shifted, counts))[rows, arms, :3]
        slopes[:, j] = np.linalg.norm(moved - base, axis=-1) / abs(shift)
    return slopes


def batched_context(runner: PolicyRunner, demo: TokenizedEpisode) -> Callable[[int], Any]:
    """batch size -> the runner's policy's context of `demo` (its keyframes; a language-conditioned
    policy: its instruction), encoded once per batch size, one copy per batch element."""
    policy, device = runner.policy, runner.device
    instruction = None
    if runner.cfg.conditioning == "language":
        try:
            instruction = policy.instruction_ids(instruction_text(demo.meta))
        except InstructionError as exc:
            raise PolicyDataError(str(exc)) from None
    contexts: dict[int, Any] = {}

    def context(batch: int) -> Any:
        if batch not in contexts:
            if instruction is not None:
                tokens = instruction_tokens(instruction, batch, device)
            else:
                kf = demo.keyframes
                tokens = keyframe_tokens(
                    demo.cloth_positions[kf],
                    demo.cloth_features[kf],
                    demo.cloth_valid[kf],
                    demo.arm_state[kf],
                    batch,
                    device,
                    runner.dtype,
                )
            contexts[batch] = policy.encode_context(tokens)
        return contexts[batch]

    return context


def policy_keypose(runner: PolicyRunner, demo: TokenizedEpisode, seed: int) -> KeyposeFn:
    """The runner's policy's next keypose, conditioned on `demo` (`batched_context`), sampled with
    a generator seeded with `seed` on every call, so calls of one batch size draw the same noise."""
    policy, device = runner.policy, runner.device
    context = batched_context(runner, demo)

    @torch.inference_mode()
    def keypose(
        positions: np.ndarray, features: np.ndarray, valid: np.ndarray, arm: np.ndarray, counts: np.ndarray
    ) -> np.ndarray:
        obs = ObservationTokens(
            *(as_tensor(a, device, runner.dtype) for a in (positions, features, valid, arm, counts))
        )
        generator = torch.Generator().manual_seed(seed)
        sampled = sample_cached(policy, obs, context(len(arm)), generator)
        _, _, kp = absolute_actions(policy, sampled, obs.arm_state)
        if kp is None:
            raise NoKeyposeError("the policy predicts no keypose (model.use_keypose_aux off): no arm sensitivity")
        return kp.float().cpu().numpy()

    return keypose


def arm_sensitivity(
    runner: PolicyRunner,
    pairs: Sequence[tuple[TokenizedEpisode, TokenizedEpisode]],
    seed: int = 0,
    shifts_m: Sequence[float] = DEFAULT_SHIFTS_M,
    frames_per_arm: int = DEFAULT_FRAMES_PER_ARM,
) -> dict[str, Any]:
    """Slopes of every (query, demonstration) pair pooled: median and mean over all probes and
    shifts, and the median per shift (`x-0.060` ...: whether the answer depends on the size)."""
    slopes = [
        keypose_slopes(policy_keypose(runner, demo, seed), query, shifts_m, frames_per_arm) for query, demo in pairs
    ]
    return pooled_slopes(slopes, shifts_m, frames_per_arm)


def pooled_slopes(slopes: Sequence[np.ndarray], shifts_m: Sequence[float], frames_per_arm: int) -> dict[str, Any]:
    """[P, V] slope tables (`shift_variants` order) pooled: the probe count, and with probes the
    median and mean over all probes and shifts and the median per shift (`x-0.060` ...)."""
    variants = shift_variants(shifts_m)
    table = np.concatenate(slopes) if slopes else np.zeros((0, len(variants)))
    out: dict[str, Any] = {"shifts_m": sorted(float(s) for s in shifts_m), "frames_per_arm": frames_per_arm}
    out["probes"] = len(table)
    if not len(table):
        return out
    return out | {
        "slope_median": float(np.median(table)),
        "slope_mean": float(np.mean(table)),
        "by_shift": {variant_label(*v): float(np.median(table[:, j])) for j, v in enumerate(variants)},
    }
