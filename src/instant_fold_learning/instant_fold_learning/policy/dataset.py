"""Training samples from tokenised episodes: context-demo pairing, normaliser calibration, augmentation.

For every sample a context demonstration is drawn at random among the *other* episodes of the
same garment and folding context (mode and execution variant; appendix D); when an episode has no such sibling it serves as its own
context. `draw_batch` can instead let a few demonstrations serve a whole batch (each the context
of several samples of its garment and mode), which is what makes a CPU step cheap. Augmentations:
recovery (perturbed gripper state with a relabelled chunk that converges back to the expert) and
gripper occlusion of the current observation (appendix E), and an SE(2) transform about the
camera's optical axis (layouts for free; the paper does not use it, docs/policy.md measures it).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import torch

from instant_fold_core.dataset.keyframes import arm_events, gripper_events
from instant_fold_core.dataset.schema import folding_context
from instant_fold_learning.policy.configuration import TrainingConfig
from instant_fold_learning.policy.data import (
    EventTargets,
    PolicyBatch,
    PolicyDataError,
    PolicySample,
    TokenizedEpisode,
    approaching_grasp,
    chunk_targets,
    collate,
    event_targets,
    straight_approach,
)
from instant_fold_learning.policy.instruction import Vocabulary, instruction_text
from instant_fold_learning.policy.normalization import ActionNormalizers
from instant_fold_learning.policy.progress import episode_event_counts


@dataclass(frozen=True)
class DemoArrays:
    """The keyframes of one context demonstration: positions [K, N, 3], features [K, N, D],
    validity [K, N], arm states [K, 2, 4]."""

    cloth_positions: np.ndarray
    cloth_features: np.ndarray
    cloth_valid: np.ndarray
    arm_state: np.ndarray


@dataclass(frozen=True)
class PlanarTransform:
    """x' = R x + t: a rotation about the camera's optical axis (z) and a shift in the image plane.

    Under a top-down camera this moves the garment on the table; depths (z) are unchanged.
    """

    rotation: np.ndarray  # [3, 3]
    shift: np.ndarray  # [3], shift[2] = 0

    @classmethod
    def draw(cls, rng: np.random.Generator, max_rotation_deg: float, max_shift_m: float) -> PlanarTransform:
        a = np.deg2rad(rng.uniform(-max_rotation_deg, max_rotation_deg))
        c, s = np.cos(a), np.sin(a)
        rotation = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]], np.float32)
        shift = np.zeros(3, np.float32)
        shift[:2] = rng.uniform(-max_shift_m, max_shift_m, size=2)
        return cls(rotation, shift)

    def points(self, p: np.ndarray) -> np.ndarray:
        return (p @ self.rotation.T + self.shift).astype(np.float32)

    def vectors(self, v: np.ndarray) -> np.ndarray:
        return (v @ self.rotation.T).astype(np.float32)

    def states(self, state: np.ndarray) -> np.ndarray:
        """Arm states [..., 2, 4]: positions transformed, openness kept."""
        out = state.astype(np.float32).copy()
        out[..., :3] = self.points(state[..., :3])
        return out


class PolicyDataset:
    """Indexes every (episode, frame) pair; `sample(i, rng)` builds one `PolicySample`."""

    def __init__(
        self,
        episodes: list[TokenizedEpisode],
        horizon: int,
        train: TrainingConfig | None = None,
        instructions: bool = False,
    ) -> None:
        """`instructions`: give every sample its episode's instruction (the language variant's
        condition); without, episodes whose meta says no fold in words train a demonstration-
        conditioned policy all the same."""
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
        #: With `instructions`: every episode's instruction, the words of them all, and their ids.
        self.instructions = [instruction_text(e.meta) for e in episodes] if instructions else []
        self.vocabulary = Vocabulary.of(self.instructions)
        self.instruction_ids = [self.vocabulary.encode(text) for text in self.instructions] or [
            np.zeros(0, np.int64) for _ in episodes
        ]
        groups: dict[tuple[str, str], list[int]] = defaultdict(list)
        for i, e in enumerate(episodes):
            groups[demonstration_key(e)].append(i)
        self.siblings = [[j for j in groups[demonstration_key(e)] if j != i] or [i] for i, e in enumerate(episodes)]
        select = moving_frames if self.train.frames == "moving" else (lambda e: np.arange(e.num_frames))
        stride = self.train.frame_stride
        self.index = [(i, int(t)) for i, e in enumerate(episodes) for t in select(e)[::stride]]
        if not self.index:
            raise PolicyDataError(f"PolicyDataset: no training frame left (train.frames={self.train.frames!r})")
        self.frames_of: list[list[int]] = [[] for _ in episodes]
        for pos, (i, _) in enumerate(self.index):
            self.frames_of[i].append(pos)
        # Episodes whose context draw can give demonstration d (its garment and context, d excluded).
        self.contexts_of: list[list[int]] = [[] for _ in episodes]
        for i, sib in enumerate(self.siblings):
            for d in sib:
                if self.frames_of[i]:
                    self.contexts_of[d].append(i)
        self.arm_events = [arm_events(e.arm_state) for e in episodes]
        self.event_counts = [episode_event_counts(e.arm_state) for e in episodes]
        # SE(2) leaves the return home alone: from the last gripper event on, targets are robot poses.
        self.homing_from = [last_gripper_event(e) for e in episodes]
        # Decision frames (before the first gripper event) weigh train.decision_weight in every draw.
        first_event = [first_gripper_event(e) for e in episodes]
        weight = np.array([self.train.decision_weight if t < first_event[i] else 1.0 for i, t in self.index])
        self._cum_weight = np.cumsum(weight)
        self._cum_weight_of = [np.cumsum(weight[pos]) for pos in self.frames_of]

    def __len__(self) -> int:
        return len(self.index)

    def calibrate(self, normalizers: ActionNormalizers) -> ActionNormalizers:
        """Fit both min-max normalisers on every target of the dataset's frames (without augmentation).

        Rotations of the SE(2) augmentation can turn a delta to any in-plane direction, so with it
        the x and y ranges are widened to the largest in-plane length on either side.
        """
        deltas, keyposes = [], []
        for i, t in self.index:
            d, _, k, _ = chunk_targets(self.episodes[i], t, self.horizon)
            deltas.append(d.reshape(-1, 3))
            keyposes.append(k.reshape(-1, 3))
        # Relabelled chunks: recovery ones move back by up to the perturbation spread over the
        # horizon; a move to the true target (`to_target`) or to a moved one (target shifts) goes at
        # least at the minimum recovery speed.
        speeds = []
        if self.train.recovery_prob > 0:
            speeds.append(self.train.recovery_noise_m / self.horizon)
            if self.train.recovery_mode == "to_target":
                speeds.append(self.train.recovery_min_speed_m)
        if self.train.anchor_teacher_shift_m > 0:
            speeds.append(self.train.recovery_min_speed_m)
        if speeds:
            r = max(speeds)
            deltas.append(np.array([[-r, -r, -r], [r, r, r]], np.float32))
        delta, keypose = np.concatenate(deltas), np.concatenate(keyposes)
        if self.train.se2_prob > 0:
            delta, keypose = (np.concatenate([x, planar_envelope(x)]) for x in (delta, keypose))
        normalizers.delta.calibrate(delta)
        normalizers.keypose.calibrate(keypose)
        return normalizers

    def draw_demo(self, ep_idx: int, rng: np.random.Generator) -> int:
        """A context demonstration for episode `ep_idx`: one of its siblings at random."""
        sib = self.siblings[ep_idx]
        return sib[int(rng.integers(len(sib)))]

    def demo(self, demo_idx: int, rng: np.random.Generator, augment: bool = True) -> DemoArrays:
        """Keyframes of episode `demo_idx` as a context demonstration (own SE(2) draw when augmenting)."""
        d = self.episodes[demo_idx]
        kf = d.keyframes
        positions, state = d.cloth_positions[kf], d.arm_state[kf]
        if self._se2(augment, rng):
            tf = self._draw_transform(rng)
            positions, state = tf.points(positions), tf.states(state)
        return DemoArrays(positions, d.cloth_features[kf], d.cloth_valid[kf], state)

    def sample(
        self, i: int, rng: np.random.Generator, augment: bool = True, demo: DemoArrays | None = None
    ) -> PolicySample:
        """Sample i of the index, with a drawn context demonstration unless `demo` is given."""
        ep_idx, t = self.index[i]
        episode = self.episodes[ep_idx]
        if demo is None:
            demo = self.demo(self.draw_demo(ep_idx, rng), rng, augment)
        state = episode.arm_state[t].copy()
        positions, valid = episode.cloth_positions[t], episode.cloth_valid[t]
        event = event_targets(episode.arm_state, self.arm_events[ep_idx], t)
        if augment and rng.random() < self.train.recovery_prob:
            state, (traj_delta, traj_grip, kp_delta, kp_grip) = recovery_targets(
                episode, t, self.horizon, rng, self.train.recovery_noise_m
            )
            if self.train.recovery_mode == "to_target":
                approaching = approach_arms(episode, t, self.horizon, event)
                if approaching.any():
                    state, traj_delta, kp_delta = retarget_recovery(
                        episode, t, self.horizon, rng, state, traj_delta, kp_delta, event, approaching, self.train
                    )
        else:
            traj_delta, traj_grip, kp_delta, kp_grip = chunk_targets(episode, t, self.horizon)
        if augment and rng.random() < self.train.occlusion_prob:
            valid = occlude_tokens(positions, valid, state[:, :3], self.train.occlusion_radius_m)
        event_position = event.position
        if t < self.homing_from[ep_idx] and self._se2(augment, rng):
            tf = self._draw_transform(rng)
            positions, state, event_position = tf.points(positions), tf.states(state), tf.points(event_position)
            traj_delta, kp_delta = tf.vectors(traj_delta), tf.vectors(kp_delta)
        return PolicySample(
            demo.cloth_positions,
            demo.cloth_features,
            demo.cloth_valid,
            demo.arm_state,
            positions,
            episode.cloth_features[t],
            valid,
            state.astype(np.float32),
            traj_delta,
            traj_grip,
            kp_delta,
            kp_grip,
            event_position.astype(np.float32),
            event.openness,
            event.valid,
            self.instruction_ids[ep_idx],
            self.event_counts[ep_idx][t],
        )

    def draw_batch(self, rng: np.random.Generator, size: int, augment: bool = True) -> PolicyBatch:
        """A training batch of `size` samples.

        With `train.demos_per_batch` = G > 0, G demonstrations are drawn (each from the siblings of
        a uniformly drawn sample's episode) and each serves about size / G samples drawn from the
        episodes it is a valid context for; the batch then holds every demonstration once.
        """
        groups = min(self.train.demos_per_batch, size)
        if not groups:
            uniform = self.train.decision_weight == 1.0
            picks = rng.integers(len(self), size=size) if uniform else [self._draw(rng) for _ in range(size)]
            return collate([self.sample(int(i), rng, augment) for i in picks])
        samples: list[PolicySample] = []
        owner: list[int] = []
        for g, members in enumerate(np.array_split(np.arange(size), groups)):
            anchor = self._draw(rng)
            demo_idx = self.draw_demo(self.index[anchor][0], rng)
            demo = self.demo(demo_idx, rng, augment)
            picks = [anchor]
            users = self.contexts_of[demo_idx]
            for _ in range(len(members) - 1):
                picks.append(self._draw(rng, users[int(rng.integers(len(users)))]))
            samples += [self.sample(i, rng, augment, demo) for i in picks]
            owner += [g] * len(picks)
        return collate(samples, owner)

    def _draw(self, rng: np.random.Generator, episode: int | None = None) -> int:
        """A sample of the index (of one episode's frames, when given), decision frames weighted by
        `train.decision_weight`; with weight 1 the draw is uniform and uses the same random stream
        as before the option existed."""
        frames = self.frames_of[episode] if episode is not None else None
        count = len(frames) if frames is not None else len(self)
        if self.train.decision_weight == 1.0:
            k = int(rng.integers(count))
        else:
            cum = self._cum_weight_of[episode] if episode is not None else self._cum_weight
            k = min(int(np.searchsorted(cum, rng.random() * cum[-1], side="right")), count - 1)
        return frames[k] if frames is not None else k

    def _se2(self, augment: bool, rng: np.random.Generator) -> bool:
        """Whether to apply an SE(2) transform (draws nothing when the augmentation is off, so
        configurations without it keep their random streams)."""
        return augment and self.train.se2_prob > 0 and rng.random() < self.train.se2_prob

    def _draw_transform(self, rng: np.random.Generator) -> PlanarTransform:
        return PlanarTransform.draw(rng, self.train.se2_rotation_deg, self.train.se2_translation_m)


def first_gripper_event(episode: TokenizedEpisode) -> int:
    """First frame of the first gripper change (the first grasp); the episode length if none."""
    events = gripper_events(episode.arm_state)
    return int(events[0]) if events.size else episode.num_frames


def last_gripper_event(episode: TokenizedEpisode) -> int:
    """First frame of the last gripper change (grasp or release); the episode length if none."""
    events = gripper_events(episode.arm_state)
    return int(events[-1]) if events.size else episode.num_frames


def planar_envelope(x: np.ndarray) -> np.ndarray:
    """Two corner points whose x and y ranges cover every in-plane rotation of the vectors x [M, 3]."""
    r = float(np.linalg.norm(x[:, :2], axis=1).max(initial=0.0))
    return np.array([[-r, -r, x[:, 2].min(initial=0.0)], [r, r, x[:, 2].max(initial=0.0)]], np.float32)


def moving_frames(episode: TokenizedEpisode, tol_m: float = 1e-3) -> np.ndarray:
    """Frames t < T - 1 from which some arm moves by more than `tol_m` or changes its gripper by frame t + 1.

    Of a hold (consecutive frames with the same arm state) only the last frame is kept: its chunk
    starts the next move, and no kept frame shares its state with a different chunk.
    """
    gs = episode.arm_state
    moved = np.linalg.norm(np.diff(gs[:, :, :3], axis=0), axis=-1) > tol_m
    toggled = np.diff(gs[:, :, 3], axis=0) != 0
    return np.flatnonzero((moved | toggled).any(axis=1))


def demonstration_key(episode: TokenizedEpisode) -> tuple[str, str]:
    """(garment, folding context): the episodes that can serve as each other's demonstration."""
    return str(episode.meta["garment_id"]), folding_context(episode.meta)


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
    state = episode.arm_state[t].copy()
    state[:, :3] += offset
    idx = np.minimum(np.arange(t, t + horizon), episode.num_frames - 1)
    fade = (1 - (np.arange(horizon) + 1) / horizon).astype(np.float32)
    targets = episode.action[idx, :, :3] + fade[:, None, None] * offset
    prev = np.concatenate([state[None, :, :3], targets[:-1]], 0)
    _, grip, kp_delta, kp_grip = chunk_targets(episode, t, horizon, state)
    return state, ((targets - prev).astype(np.float32), grip, kp_delta, kp_grip)


def approach_arms(episode: TokenizedEpisode, t: int, horizon: int, event: EventTargets) -> np.ndarray:
    """bool [2]: arms approaching their next grasp at frame t (`approaching_grasp` over the chunk
    from t): the phase in which a closed loop drifts."""
    idx = np.minimum(np.arange(t, t + horizon), episode.num_frames - 1)
    return approaching_grasp(episode.arm_state[t, :, 3], episode.action[idx, :, 3], event.valid, event.openness)


def retarget_recovery(
    episode: TokenizedEpisode,
    t: int,
    horizon: int,
    rng: np.random.Generator,
    state: np.ndarray,
    traj_delta: np.ndarray,
    keypose_delta: np.ndarray,
    event: EventTargets,
    arms: np.ndarray,
    train: TrainingConfig,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Drift-sized recovery for the approaching `arms`: displace each by up to `recovery_drift_m` in
    the image plane (and `recovery_noise_m` in depth) from the expert's state, and relabel its chunk
    as a straight move to the true grasp at the expert's pace (at least `recovery_min_speed_m` per
    step), stopping there. The keypose target keeps its absolute position. `state`, `traj_delta`,
    `keypose_delta` are the rejoin recovery's; other arms keep them. Returns the three, updated."""
    state, traj_delta, keypose_delta = state.copy(), traj_delta.copy(), keypose_delta.copy()
    idx = np.minimum(np.arange(t, t + horizon + 1), episode.num_frames - 1)
    for a in np.flatnonzero(arms):
        expert = episode.arm_state[t, a, :3]
        angle = rng.uniform(0.0, 2 * np.pi)
        radius = train.recovery_drift_m * np.sqrt(rng.uniform())  # uniform over the disc
        offset = np.array(
            [radius * np.cos(angle), radius * np.sin(angle), rng.uniform(-1, 1) * train.recovery_noise_m], np.float32
        )
        start = expert + offset
        pace = np.linalg.norm(np.diff(episode.action[idx, a, :3], axis=0), axis=-1).mean()
        speed = torch.tensor(max(float(pace), train.recovery_min_speed_m), dtype=torch.float64)
        goal = torch.from_numpy(event.position[a].astype(np.float64))
        traj_delta[:, a] = straight_approach(torch.from_numpy(start.astype(np.float64)), goal, speed, horizon).numpy()
        keypose_delta[a] = keypose_delta[a] + state[a, :3] - start
        state[a, :3] = start
    return state, traj_delta.astype(np.float32), keypose_delta.astype(np.float32)


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
