"""Offline checks of a trained policy on tokenised episodes: where do its first grasps land?

The first grasps decide a fold: an arm that closes on the wrong keypoint folds the wrong part.
`rollout_first_grasp` runs the policy the way the simulator loop does (H-step chunks, the first
`execute_steps` executed, the arm state fed back) from a frame before any contact, until each arm
closes its gripper. Before the first contact the cloth does not depend on the arms, so the
episode's own recorded cloth frames are exactly what the policy would observe; no simulator is
needed. The result is compared with the expert's grasp points (and, where the episode's semantic
keypoints are at hand, with the keypoints the mode grasps). `arm_sensitivity` (its own module)
asks why a grasp lands off: whether the predicted keypose follows the cloth or the arm;
`target_following` (its own module) whether the trajectory goes where its target is.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from instant_fold_core.contracts import gripper_closed
from instant_fold_evaluation.arm_sensitivity import (
    DEFAULT_FRAMES_PER_ARM,
    DEFAULT_SHIFTS_M,
    NoKeyposeError,
    arm_sensitivity,
)
from instant_fold_evaluation.target_following import NotAnchoredError, target_following
from instant_fold_learning.policy.data import PolicyDataError, TokenizedEpisode
from instant_fold_learning.policy.dataset import demonstration_key
from instant_fold_learning.policy.inference import PolicyRunner
from instant_fold_learning.policy.instruction import instruction_text
from instant_fold_learning.policy.progress import EventCounter

#: Target following is probed on this many (query, demonstration) pairs per split at most, evenly
#: spread (a median over up to 16 probes each: ample; every pair would double the offline stage).
FOLLOWING_PAIRS = 64


def first_close_frames(arm_state: np.ndarray) -> np.ndarray:
    """Per arm, the first frame whose gripper is closed (`gripper_closed`), -1 if it never closes."""
    closed = gripper_closed(np.asarray(arm_state)[:, :, 3])
    return np.array([int(np.argmax(c)) if c.any() else -1 for c in closed.T])


def expert_first_grasp(episode: TokenizedEpisode) -> np.ndarray:
    """[2, 3] position of each arm when it first closes in the recorded episode (NaN if never)."""
    frames = first_close_frames(episode.arm_state)
    out = np.full((2, 3), np.nan, np.float32)
    for arm, f in enumerate(frames):
        if f >= 0:
            out[arm] = episode.arm_state[f, arm, :3]
    return out


#: Frames after the first contact within which another arm's first grasp still counts as made on the
#: untouched cloth (scripted two-handed grasps close on the same frame).
PROBE_TOLERANCE_FRAMES = 5


def probed_arms(episode: TokenizedEpisode) -> np.ndarray:
    """bool [2]: the arms whose first grasp the frozen-cloth probe (`rollout_first_grasp`) can score:
    those the expert closes with the first contact. In a sequential fold the other arm grasps after
    the first arm's fold has changed the cloth, which the probe never shows (it holds the cloth at the
    first contact); counting that arm as "not closed" measured the probe, not the policy."""
    frames = first_close_frames(episode.arm_state)
    closed = frames >= 0
    if not closed.any():
        return closed
    return closed & (frames - frames[closed].min() < PROBE_TOLERANCE_FRAMES)


def first_moving_frame(episode: TokenizedEpisode, tol_m: float = 1e-3) -> int:
    """The first frame from which an arm moves (the end of the initial hold), 0 if none moves."""
    step = np.linalg.norm(np.diff(episode.arm_state[:, :, :3], axis=0), axis=-1)
    moving = np.flatnonzero((step > tol_m).any(axis=1))
    return int(moving[0]) if moving.size else 0


@dataclass
class GraspRollout:
    """grasp [2, 3]: executed target at which each arm first closed (NaN if it did not within the
    budget); frames [2]: frame of that closure (-1); path [F, 2, 4]: every executed target."""

    grasp: np.ndarray
    frames: np.ndarray
    path: np.ndarray


def rollout_first_grasp(
    runner: PolicyRunner,
    episode: TokenizedEpisode,
    start: int | None = None,
    max_frames: int = 80,
    generator: torch.Generator | None = None,
    arms: np.ndarray | None = None,
) -> GraspRollout:
    """Run the loaded policy from `episode`'s frame `start` (default: the end of the initial hold)
    until the `arms` (bool [2], default both) have closed once or `max_frames` frames were executed.

    Cloth observation at rollout frame f: the episode's frame min(f, c - 1), c = the expert's first
    closure (the cloth is untouched until then, so this is what the policy would see). The arm state
    is the previous executed target, as in the simulator loop where targets are reached next frame.
    """
    closes = first_close_frames(episode.arm_state)
    contact = int(closes[closes >= 0].min()) if (closes >= 0).any() else episode.num_frames
    start = first_moving_frame(episode) if start is None else start
    if not 0 <= start < contact:
        raise PolicyDataError(f"start: frame {start} is not before the first grasp (frame {contact})")
    state = episode.arm_state[start].astype(np.float32).copy()
    grasp = np.full((2, 3), np.nan, np.float32)
    frames = np.full(2, -1)
    path: list[np.ndarray] = []
    frame = start
    wait = np.ones(2, bool) if arms is None else np.asarray(arms, bool)
    counter = EventCounter()
    while frame - start < max_frames and (frames[wait] < 0).any():
        c = min(frame, contact - 1)
        chunk = runner.predict(
            episode.cloth_positions[c],
            episode.cloth_features[c],
            state,
            episode.cloth_valid[c],
            generator=generator,
            event_count=counter.observe(state),
        )
        for target in chunk.targets[: chunk.steps_to_execute]:
            frame += 1
            path.append(target)
            for arm in np.flatnonzero((frames < 0) & gripper_closed(target[:, 3])):
                grasp[arm], frames[arm] = target[arm, :3], frame
            state = target.astype(np.float32)
    return GraspRollout(grasp, frames, np.stack(path))


#: Where a first-grasp rollout's demonstration comes from (`first_grasp_errors`).
DEMO_SOURCES = ("other", "self")


def nearest_keypoints(points: np.ndarray, keypoints: np.ndarray, names: tuple[str, ...]) -> list[str]:
    """Name of the keypoint ([K, 3], `names` order) nearest to each point ([P, 3]); '-' for NaN points."""
    out = []
    for p in np.asarray(points):
        out.append("-" if np.isnan(p).any() else names[int(np.argmin(np.linalg.norm(keypoints - p, axis=-1)))])
    return out


def demonstration_pairs(
    queries: list[TokenizedEpisode], demos: list[TokenizedEpisode], demo_source: str = "other"
) -> list[tuple[TokenizedEpisode, TokenizedEpisode]]:
    """(query, demonstration) for every query with another episode of its garment and context in
    `demos` (a different start state); with `demo_source="self"` the query itself (why: see
    `first_grasp_errors`). Queries without such an episode are left out."""
    if demo_source not in DEMO_SOURCES:
        raise PolicyDataError(f"demo_source: one of {DEMO_SOURCES}, got {demo_source!r}")
    pairs = []
    for query in queries:
        key = demonstration_key(query)
        pool = [d for d in demos if demonstration_key(d) == key and d is not query]
        if pool:
            pairs.append((query, query if demo_source == "self" else pool[0]))
    return pairs


def first_grasp_errors(
    runner: PolicyRunner,
    queries: list[TokenizedEpisode],
    demos: list[TokenizedEpisode],
    seed: int = 0,
    max_frames: int = 80,
    demo_source: str = "other",
) -> list[dict[str, Any]]:
    """Roll out every query episode with a demonstration of its garment and mode taken from `demos`
    (another episode: a different start state), and compare the first grasps with the expert's. A
    language-conditioned policy is told the fold in words instead (and scored on the same queries).

    `demo_source="self"` shows each query its own episode as the demonstration: the same layout, so
    the demonstration holds everything about where to grasp. An error that stays as large as with
    another layout's demonstration is the policy's own closed-loop drift, not a failure to carry the
    demonstration over to a new layout.
    """
    results = []
    for query, demo in demonstration_pairs(queries, demos, demo_source):
        name = query.meta.get("episode_name")
        if runner.cfg.conditioning == "language":
            runner.load_instruction(instruction_text(query.meta))  # told the fold in words; the same queries
        else:
            kf = demo.keyframes
            runner.load_demonstration(
                demo.cloth_positions[kf], demo.cloth_features[kf], demo.arm_state[kf], demo.cloth_valid[kf]
            )
        probed = probed_arms(query)
        rollout = rollout_first_grasp(
            runner, query, max_frames=max_frames, generator=torch.Generator().manual_seed(seed), arms=probed
        )
        error = np.linalg.norm(rollout.grasp - expert_first_grasp(query), axis=-1)
        results.append(
            {
                "query": name,
                "demo": demo.meta.get("episode_name"),
                "mode": query.meta["mode"],
                "grasp_error_cm": [None if np.isnan(e) else round(float(e) * 100, 2) for e in error],
                "closed_at_frame": rollout.frames.tolist(),
                "probed": probed.tolist(),
            }
        )
    return results


def summarize_grasps(results: list[dict[str, Any]]) -> dict[str, float]:
    """Over the probed arms (`probed_arms`): mean first-grasp error of those that closed, closure
    rate and share within 5 / 10 cm."""
    errors = np.array(
        [
            np.nan if e is None else e
            for r in results
            for e, probed in zip(r["grasp_error_cm"], r.get("probed", [True, True]), strict=True)
            if probed
        ],
        float,
    )
    if errors.size == 0:
        return {"arms": 0}
    closed = ~np.isnan(errors)
    return {
        "arms": int(errors.size),
        "closed": float(closed.mean()),
        "mean_error_cm": float(np.nanmean(errors)) if closed.any() else float("nan"),
        "within_5cm": float((np.nan_to_num(errors, nan=np.inf) < 5).mean()),
        "within_10cm": float((np.nan_to_num(errors, nan=np.inf) < 10).mean()),
    }


def evaluate(
    checkpoint: str | Path,
    train_dir: str | Path,
    heldout_dir: str | Path | None = None,
    samples: int = 256,
    seed: int = 0,
    max_frames: int = 80,
    demo_source: str = "other",
    sensitivity_frames: int = DEFAULT_FRAMES_PER_ARM,
    shifts_m: tuple[float, ...] = DEFAULT_SHIFTS_M,
) -> dict[str, Any]:
    """Action error (as `training.action_error`, every frame, no augmentation), first-grasp rollouts
    and, unless `sensitivity_frames` is 0, the arm sensitivity of the keypose (`arm_sensitivity`,
    up to that many frames per arm and episode, arm shifts `shifts_m`) and the target following of
    the trajectory (`target_following`: as many approach frames, target shifts `shifts_m`, on up to
    `FOLLOWING_PAIRS` episodes) on the training episodes
    and, when given, on held-out episodes (demonstrations from training)."""
    from instant_fold_learning.policy.configuration import TrainingConfig
    from instant_fold_learning.policy.dataset import PolicyDataset
    from instant_fold_learning.policy.modeling import InstantFoldPolicy
    from instant_fold_learning.policy.training import action_error, load_episodes

    if samples < 1:  # an action error over no frame is no number (it divided by zero)
        raise PolicyDataError(f"--samples: must be at least 1, got {samples}")
    policy, cfg = InstantFoldPolicy.from_pretrained(checkpoint)
    train_eps = load_episodes(str(train_dir), None, cfg)
    held = load_episodes(str(heldout_dir), None, cfg) if heldout_dir else []
    dataset = PolicyDataset(train_eps + held, cfg.model.horizon, TrainingConfig())
    rng = np.random.default_rng(seed)
    runner = PolicyRunner(policy)
    out: dict[str, Any] = {"checkpoint": str(checkpoint), "seed": seed, "demo_source": demo_source}
    for split, episodes in (("train", train_eps), ("heldout", held)):
        if not episodes:
            continue
        ids = {id(e) for e in episodes}
        frames = [i for i, (e, _) in enumerate(dataset.index) if id(dataset.episodes[e]) in ids]
        pick = sorted(rng.choice(frames, min(samples, len(frames)), replace=False).tolist())
        if not pick:
            raise PolicyDataError(f"{split}: no frame to evaluate ({len(frames)} frames, samples={samples})")
        # Held-out samples take their context demonstration among the other episodes of the same
        # garment and mode, i.e. from training episodes (other start states).
        errors = [action_error(policy, dataset, pick[i : i + 64], seed) for i in range(0, len(pick), 64)]
        weights = [len(pick[i : i + 64]) for i in range(0, len(pick), 64)]
        grasps = first_grasp_errors(runner, episodes, train_eps, seed, max_frames, demo_source)
        out[split] = {
            "episodes": len(episodes),
            "action_error_cm": float(np.average(errors, weights=weights)) * 100,
            "action_error_frames": len(pick),
            "first_grasp": summarize_grasps(grasps),
            "first_grasp_episodes": grasps,
        }
        if sensitivity_frames > 0:
            pairs = demonstration_pairs(episodes, train_eps, demo_source)
            try:
                out[split]["arm_sensitivity"] = arm_sensitivity(runner, pairs, seed, shifts_m, sensitivity_frames)
            except NoKeyposeError as exc:  # the other numbers still stand
                out[split]["arm_sensitivity"] = {"skipped": str(exc)}
            spread = pairs[:: max(1, -(-len(pairs) // FOLLOWING_PAIRS))]
            try:
                out[split]["target_following"] = target_following(runner, spread, seed, shifts_m, sensitivity_frames)
            except NotAnchoredError as exc:
                out[split]["target_following"] = {"skipped": str(exc)}
    return out
