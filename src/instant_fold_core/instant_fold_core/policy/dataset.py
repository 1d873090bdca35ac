"""Training samples from tokenised episodes: context-demo pairing, normaliser calibration, augmentation.

For every sample a context demonstration is drawn at random among the *other* episodes of the
same garment and mode (appendix D); when an episode has no such sibling it serves as its own
context. Two augmentations follow appendix E: recovery (perturbed gripper state with a relabelled
chunk that converges back to the expert) and gripper occlusion of the current observation.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from instant_fold_core.policy.configuration import TrainingConfig
from instant_fold_core.policy.data import PolicyDataError, PolicySample, TokenizedEpisode, chunk_targets
from instant_fold_core.policy.normalization import ActionNormalizers


class PolicyDataset:
    """Indexes every (episode, frame) pair; `sample(i, rng)` builds one `PolicySample`."""

    def __init__(self, episodes: list[TokenizedEpisode], horizon: int, train: TrainingConfig | None = None) -> None:
        if not episodes:
            raise PolicyDataError("PolicyDataset: no episodes")
        for e in episodes:
            e.validate()
        shapes = {e.cloth_features.shape[1:] for e in episodes}
        if len(shapes) != 1:
            raise PolicyDataError(f"cloth_features: episodes disagree on (tokens, feature dim): {sorted(shapes)}")
        self.episodes = episodes
        self.horizon = horizon
        self.train = train or TrainingConfig()
        self.mode_ids = mode_ids(episodes)
        groups: dict[tuple[str, str], list[int]] = defaultdict(list)
        for i, e in enumerate(episodes):
            groups[(str(e.meta["garment_id"]), str(e.meta["mode"]))].append(i)
        self.siblings = [
            [j for j in groups[(str(e.meta["garment_id"]), str(e.meta["mode"]))] if j != i] or [i]
            for i, e in enumerate(episodes)
        ]
        select = moving_frames if self.train.frames == "moving" else (lambda e: np.arange(e.num_frames))
        self.index = [(i, int(t)) for i, e in enumerate(episodes) for t in select(e)]
        if not self.index:
            raise PolicyDataError(f"PolicyDataset: no training frame left (train.frames={self.train.frames!r})")

    def __len__(self) -> int:
        return len(self.index)

    def calibrate(self, normalizers: ActionNormalizers) -> ActionNormalizers:
        """Fit both min-max normalisers on every target of the dataset's frames (without augmentation)."""
        deltas, keyposes = [], []
        for i, t in self.index:
            d, _, k, _ = chunk_targets(self.episodes[i], t, self.horizon)
            deltas.append(d)
            keyposes.append(k)
        if self.train.recovery_prob > 0:
            # Recovery chunks move back by up to the perturbation spread over the horizon.
            r = self.train.recovery_noise_m / self.horizon
            deltas.append(np.array([[-r, -r, -r], [r, r, r]], np.float32))
        normalizers.delta.calibrate(np.concatenate([d.reshape(-1, 3) for d in deltas]))
        normalizers.keypose.calibrate(np.concatenate([k.reshape(-1, 3) for k in keyposes]))
        return normalizers

    def sample(self, i: int, rng: np.random.Generator, augment: bool = True) -> PolicySample:
        ep_idx, t = self.index[i]
        episode = self.episodes[ep_idx]
        demo = self.episodes[self.siblings[ep_idx][rng.integers(len(self.siblings[ep_idx]))]]
        kf = demo.keyframes
        state = episode.gripper_state[t].copy()
        positions, valid = episode.cloth_positions[t], episode.cloth_valid[t]
        if augment and rng.random() < self.train.recovery_prob:
            state, (traj_delta, traj_grip, kp_delta, kp_grip) = recovery_targets(
                episode, t, self.horizon, rng, self.train.recovery_noise_m
            )
        else:
            traj_delta, traj_grip, kp_delta, kp_grip = chunk_targets(episode, t, self.horizon)
        if augment and rng.random() < self.train.occlusion_prob:
            valid = occlude_tokens(positions, valid, state[:, :3], self.train.occlusion_radius_m)
        return PolicySample(
            demo.cloth_positions[kf],
            demo.cloth_features[kf],
            demo.cloth_valid[kf],
            demo.gripper_state[kf],
            positions,
            episode.cloth_features[t],
            valid,
            state.astype(np.float32),
            traj_delta,
            traj_grip,
            kp_delta,
            kp_grip,
            self.mode_ids[str(episode.meta["mode"])],
        )


def moving_frames(episode: TokenizedEpisode, tol_m: float = 1e-3) -> np.ndarray:
    """Frames t < T - 1 from which some arm moves by more than `tol_m` or changes its gripper by frame t + 1.

    Of a hold (consecutive frames with the same arm state) only the last frame is kept: its chunk
    starts the next move, and no kept frame shares its state with a different chunk.
    """
    gs = episode.gripper_state
    moved = np.linalg.norm(np.diff(gs[:, :, :3], axis=0), axis=-1) > tol_m
    toggled = np.diff(gs[:, :, 3], axis=0) != 0
    return np.flatnonzero((moved | toggled).any(axis=1))


def mode_ids(episodes: list[TokenizedEpisode]) -> dict[str, int]:
    """Mode name -> id: the episodes' `meta["mode_id"]` when all carry one (the generator's own
    numbering), else the sorted mode names. Used by the language-conditioned variant."""
    if all("mode_id" in e.meta for e in episodes):
        ids: dict[str, int] = {}
        for e in episodes:
            name, idx = str(e.meta["mode"]), int(e.meta["mode_id"])
            if ids.setdefault(name, idx) != idx:
                raise PolicyDataError(f"meta.mode_id: mode {name!r} has ids {ids[name]} and {idx}")
        if len(set(ids.values())) != len(ids):
            raise PolicyDataError(f"meta.mode_id: two modes share an id ({ids})")
        return ids
    return {m: i for i, m in enumerate(sorted({str(e.meta["mode"]) for e in episodes}))}


def recovery_targets(
    episode: TokenizedEpisode, t: int, horizon: int, rng: np.random.Generator, noise_m: float
) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """Perturb the arm positions by up to `noise_m` and relabel a chunk that returns to the expert.

    The perturbed state is s' = s + offset; the relabelled absolute targets are the expert's
    a[t+k] + offset * (1 - (k + 1) / H), so the error shrinks linearly and the chunk rejoins the
    expert path at its last step. The keypose target is unchanged in absolute terms.
    Returns the perturbed state and the relabelled (deltas, gripper, keypose delta, keypose gripper).
    """
    offset = rng.uniform(-noise_m, noise_m, size=(2, 3)).astype(np.float32)
    state = episode.gripper_state[t].copy()
    state[:, :3] += offset
    idx = np.minimum(np.arange(t, t + horizon), episode.num_frames - 1)
    fade = (1 - (np.arange(horizon) + 1) / horizon).astype(np.float32)
    targets = episode.action[idx, :, :3] + fade[:, None, None] * offset
    prev = np.concatenate([state[None, :, :3], targets[:-1]], 0)
    _, grip, kp_delta, kp_grip = chunk_targets(episode, t, horizon, state)
    return state, ((targets - prev).astype(np.float32), grip, kp_delta, kp_grip)


def occlude_tokens(positions: np.ndarray, valid: np.ndarray, grippers: np.ndarray, radius: float) -> np.ndarray:
    """Token-level gripper occlusion under a top-down camera.

    A cloth token is hidden when it lies behind a gripper (farther from the camera) and its
    viewing ray passes within `radius` of the gripper centre, i.e. inside the disc template
    projected at the gripper's depth. The paper occludes the mask before token sampling; here the
    tokens are dropped (marked invalid) instead. At least one token always stays valid.
    """
    z = np.clip(positions[:, 2:3], 1e-6, None)
    out = valid.copy()
    for g in grippers:
        gz = max(float(g[2]), 1e-6)
        ray = positions[:, :2] / z * gz  # token's ray at the gripper's depth
        hidden = (np.linalg.norm(ray - g[None, :2], axis=-1) < radius) & (positions[:, 2] > gz)
        out &= ~hidden
    return out if out.any() else valid
