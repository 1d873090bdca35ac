"""Fast inference: demonstration cache, per-query scene fusion, 10-step Euler sampler, receding horizon.

Per query only the action branch runs inside the Euler loop: the demonstration is encoded once
(`load_demonstration`), and each `predict` fuses the current scene with that cached context and
projects the scene-context keys/values once before the denoising steps. Inputs are validated up
front so a bad observation is a clear `PolicyInputError`, never garbage actions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

from instant_fold_core.contracts import ActionChunk
from instant_fold_core.errors import InvalidInputError
from instant_fold_learning.policy.data import (
    DemoTokens,
    ObservationTokens,
    as_tensor,
    instruction_tokens,
    keyframe_tokens,
)
from instant_fold_learning.policy.decoder import DecoderOutput
from instant_fold_learning.policy.instruction import InstructionError
from instant_fold_learning.policy.modeling import DemoContext, InstantFoldPolicy, euler_times
from instant_fold_learning.policy.progress import event_counts

#: Seconds between chunk steps unless the deployment says otherwise (the policy server's
#: `step_duration` parameter default; the sim graph sets its frame period).
DEFAULT_STEP_DURATION = 0.1

#: Arrays accepted at the policy boundary (numpy or torch, any float dtype; converted and checked).
Array = np.ndarray | torch.Tensor


class PolicyInputError(InvalidInputError):
    """An observation/demonstration given to the policy is unusable; the message names the field."""


@dataclass
class SampledActions:
    """Raw sampler output in normalised space plus gripper logits (batched)."""

    traj: torch.Tensor  # [B, H, 2, 3]
    traj_gripper_logit: torch.Tensor  # [B, H, 2]
    keypose: torch.Tensor | None  # [B, 2, 3]
    keypose_gripper_logit: torch.Tensor | None  # [B, 2]
    #: Anchored head: each arm's next grasp/place target, absolute [B, 2, 3], and its openness logit.
    anchor: torch.Tensor | None = None
    anchor_openness_logit: torch.Tensor | None = None


def euler_sample(
    velocity: Callable[[torch.Tensor, torch.Tensor | None, torch.Tensor, int], DecoderOutput],
    noise_traj: torch.Tensor,
    noise_keypose: torch.Tensor | None,
    steps: int,
) -> SampledActions:
    """Integrate dz/dt = v from t = 1 (noise) to t = 0 (data) in `steps` equal Euler steps.

    With z_t = (1 - t) x + t eps the velocity is eps - x, so z_{t - dt} = z_t - dt * v. Gripper
    logits come from the last evaluation (t = 1/steps), the closest to clean data.
    """
    z_traj, z_kp = noise_traj, noise_keypose
    b = z_traj.shape[0]
    out = None
    for i, t in enumerate(euler_times(steps, z_traj.device, z_traj.dtype)):
        out = velocity(z_traj, z_kp, t.expand(b), i)
        z_traj = z_traj - out.traj_velocity / steps
        if z_kp is not None:
            z_kp = z_kp - out.keypose_velocity / steps
    assert out is not None, "steps must be >= 1"
    return SampledActions(z_traj, out.traj_gripper_logit, z_kp, out.keypose_gripper_logit)


def sample_cached(
    policy: InstantFoldPolicy,
    obs: ObservationTokens,
    context: DemoContext,
    generator: torch.Generator | None = None,
    override: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> SampledActions:
    """The fast path: the demonstration `context` is already encoded; the scene is fused and its
    keys/values and the AdaLN schedule are computed once, then only the action branch runs per step.
    `override` (anchored head): targets held for some arms (`InstantFoldPolicy.prepare_scene`); the
    targets reported are the ones the trajectory was conditioned on."""
    steps = policy.cfg.num_inference_steps
    scene = policy.prepare_scene(obs, context, steps, override=override)
    noise_traj, noise_kp = draw_noise(policy, obs.arm_state.shape[0], scene.proprio, generator)
    sampled = euler_sample(partial(policy.velocity, scene), noise_traj, noise_kp, steps)
    if scene.anchor is not None and scene.target is not None:
        # An arm with no event left reports home, open: what the fold loop's return rule looks for.
        done = ~scene.target.valid
        sampled.anchor = scene.target.position
        sampled.anchor_openness_logit = scene.anchor.openness_logit.masked_fill(done, 10.0)
    return sampled


def sample_naive(
    policy: InstantFoldPolicy,
    demo: DemoTokens,
    obs: ObservationTokens,
    generator: torch.Generator | None = None,
    steps: int | None = None,
) -> SampledActions:
    """Reference path that recomputes everything (demo encoding, fusion, K/V) at every step."""
    b = obs.arm_state.shape[0]
    noise_traj, noise_kp = draw_noise(policy, b, obs.arm_state, generator)

    def velocity(z: torch.Tensor, zk: torch.Tensor | None, t: torch.Tensor, step: int) -> DecoderOutput:
        return policy.velocity(policy.prepare_scene(obs, policy.encode_context(demo)), z, zk, t)

    return euler_sample(velocity, noise_traj, noise_kp, steps or policy.cfg.num_inference_steps)


def draw_noise(
    policy: InstantFoldPolicy, batch: int, like: torch.Tensor, generator: torch.Generator | None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Start noise of the sampler for trajectory and keypose, scaled by `cfg.noise_scale` (the
    draws are the same for every scale, so a fixed generator compares scales on equal terms)."""
    h, scale = policy.cfg.horizon, policy.cfg.noise_scale
    traj = torch.randn(batch, h, 2, 3, generator=generator).to(like.device, like.dtype) * scale
    kp = (
        torch.randn(batch, 2, 3, generator=generator).to(like.device, like.dtype) * scale
        if policy.cfg.flow_keypose
        else None
    )
    return traj, kp


def absolute_actions(
    policy: InstantFoldPolicy, sampled: SampledActions, arm_state: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Sampled (normalised) actions -> absolute ones from the current arm state [B, 2, 4]:
    positions [B, H, 2, 3] (cumulative sum of the per-step deltas), openness [B, H, 2]
    (thresholded at 0.5) and the next keypose [B, 2, 4] (the anchored head's target, else the flow's;
    None without either).
    Tensors, unchecked: training measures them as they are, deployment builds chunks from them."""
    norm = policy.normalizers
    cur = arm_state[..., :3].float()
    deltas = norm.delta.unnormalize(sampled.traj.float())
    positions = cur[:, None] + torch.cumsum(deltas, 1)
    openness = (torch.sigmoid(sampled.traj_gripper_logit.float()) > 0.5).float()
    keypose = None
    if sampled.anchor is not None:
        after = (sampled.anchor_openness_logit.float() > 0).float()[..., None]
        keypose = torch.cat((sampled.anchor.float(), after), -1)
    elif sampled.keypose is not None:
        kp_pos = cur + norm.keypose.unnormalize(sampled.keypose.float())
        keypose = torch.cat((kp_pos, (sampled.keypose_gripper_logit.float() > 0).float()[..., None]), -1)
    return positions, openness, keypose


# ---------------------------------------------------------------------- validated runner


def _array(name: str, value: Array, shape: tuple[int | None, ...]) -> np.ndarray:
    arr = value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
    if arr.ndim != len(shape) or any(s is not None and a != s for a, s in zip(arr.shape, shape, strict=True)):
        want = "[" + ", ".join("*" if s is None else str(s) for s in shape) + "]"
        raise PolicyInputError(f"{name}: expected shape {want}, got {list(arr.shape)}")
    if arr.dtype.kind == "f" and not np.isfinite(arr).all():
        raise PolicyInputError(f"{name}: contains NaN or infinite values")
    return arr


def checked_cloth(
    cfg: Any,
    prefix: str,
    positions: Array,
    features: Array,
    valid: Array | None,
    lead: tuple[int | None, ...],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cloth tokens at a runner's boundary, checked against `cfg` (its `num_cloth_tokens` and
    `cloth_feature_dim`): positions [*lead, N, 3], features [*lead, N, D], validity [*lead, N]
    (all valid when None), every frame with a valid token; else a `PolicyInputError` naming the
    field (`prefix` + name)."""
    n, d = cfg.num_cloth_tokens, cfg.cloth_feature_dim
    pos = _array(f"{prefix}cloth_positions", positions, (*lead, n, 3))
    feat = _array(f"{prefix}cloth_features", features, (*lead, n, d))
    val = np.ones(pos.shape[:-1], bool) if valid is None else _array(f"{prefix}cloth_valid", valid, (*lead, n))
    if val.dtype != np.bool_:
        raise PolicyInputError(f"{prefix}cloth_valid: expected bool, got {val.dtype}")
    if not val.reshape(-1, n).any(-1).all():
        raise PolicyInputError(f"{prefix}cloth_valid: a frame has no valid cloth token")
    return pos, feat, val


class PolicyRunner:
    """Stateful policy for a robot: load a demonstration once, then answer observation queries."""

    #: A load only caches the demonstration's context (no progress through a fold to restart), so
    #: a server may skip loading the same demonstration again.
    RESTARTS_ON_LOAD = False

    def __init__(
        self,
        policy: InstantFoldPolicy,
        device: str | torch.device = "cpu",
        dtype: torch.dtype = torch.float32,
        compile: bool = False,
        step_duration: float = DEFAULT_STEP_DURATION,
    ) -> None:
        """`step_duration`: seconds between the steps of the chunks it returns. The model itself is
        time-free; deployment sets it to the cadence the policy was trained at (the controller
        interpolates between steps at this pace)."""
        if not policy.normalizers.calibrated:
            raise PolicyInputError("policy: normalisers are not calibrated (load a trained checkpoint)")
        self.device = torch.device(device)
        self.dtype = dtype
        self.policy = policy.to(self.device, dtype).eval()
        self.policy.normalizers.float()  # statistics stay float32: actions are rebuilt in float32
        self.cfg = policy.cfg
        if compile:
            # Only the per-step action branch is compiled; it sees fixed shapes for a given demo length.
            self.policy.denoiser.compile(dynamic=False)
        self.step_duration = step_duration
        self._context: DemoContext | None = None

    @classmethod
    def from_checkpoint(
        cls,
        directory: str | Path,
        device: str | torch.device = "cpu",
        dtype: torch.dtype = torch.float32,
        compile: bool = False,
        step_duration: float = DEFAULT_STEP_DURATION,
    ) -> PolicyRunner:
        policy, _ = InstantFoldPolicy.from_pretrained(directory, "cpu")
        return cls(policy, device, dtype, compile, step_duration)

    def _tensor(self, arr: np.ndarray) -> torch.Tensor:
        return as_tensor(arr, self.device, self.dtype)

    @torch.inference_mode()
    def load_demonstration(
        self,
        cloth_positions: Array,
        cloth_features: Array,
        arm_state: Array,
        cloth_valid: Array | None = None,
    ) -> None:
        """Encode and cache the K context keyframes ([K, N, 3], [K, N, D], [K, 2, 4], [K, N])."""
        if self.cfg.conditioning != "demo":
            raise PolicyInputError("policy is language-conditioned: use load_instruction(text)")
        pos, feat, val = checked_cloth(self.cfg, "demo.", cloth_positions, cloth_features, cloth_valid, (None,))
        k = pos.shape[0]
        if k == 0:
            raise PolicyInputError("demo: needs at least one keyframe")
        state = _array("demo.arm_state", arm_state, (k, 2, 4))
        demo = keyframe_tokens(pos, feat, val, state, 1, self.device, self.dtype)
        self._context = self.policy.encode_context(demo)
        # Warm-up: the first query after a model's first use pays one-off costs (allocations,
        # oneDNN primitives: 0.25 s for cpu-small, seconds for the paper configuration on a CPU),
        # which would fall on a fold's first query. A query on the first keyframe, with noise of
        # its own, pays them here; the runner keeps no state from it.
        first = ObservationTokens(
            demo.cloth_positions[:, 0],
            demo.cloth_features[:, 0],
            demo.cloth_valid[:, 0],
            demo.arm_state[:, 0],
            event_counts(demo.arm_state)[:, 0],
        )
        sample_cached(self.policy, first, self._context, torch.Generator().manual_seed(0))

    @torch.inference_mode()
    def load_instruction(self, text: str) -> None:
        """Language-conditioned variant: condition on a fold said in words (`policy/instruction.py`:
        the words must be among those of its training instructions)."""
        if self.cfg.conditioning != "language":
            raise PolicyInputError("policy is demonstration-conditioned: use load_demonstration(...)")
        try:
            ids = self.policy.instruction_ids(text)
        except InstructionError as exc:
            raise PolicyInputError(str(exc)) from None
        self._context = self.policy.encode_context(instruction_tokens(ids, 1, self.device))

    def clear_demonstration(self) -> None:
        self._context = None

    @property
    def has_demonstration(self) -> bool:
        return self._context is not None

    @torch.inference_mode()
    def predict(
        self,
        cloth_positions: Array,
        cloth_features: Array,
        arm_state: Array,
        cloth_valid: Array | None = None,
        generator: torch.Generator | None = None,
        target_override: Array | None = None,
        override_mask: Array | None = None,
        event_count: Array | None = None,
    ) -> ActionChunk:
        """One query: [N, 3] positions, [N, D] features, [2, 4] arm states -> an ABSOLUTE `ActionChunk`.

        `event_count` [2]: each arm's gripper events so far in this fold (`progress.EventCounter`),
        required by a policy with `model.event_progress` and ignored by others.

        Anchored head only: `target_override` [2, 3] with `override_mask` [2] (bool) holds the
        masked arms' next targets at the given grasp/place points instead of the ones read from
        this observation's cloth: the trajectory is conditioned on them and the chunk's keypose
        reports them (`policy/event_targets.py` holds a carrying arm's release target this way)."""
        if self._context is None:
            raise PolicyInputError("no demonstration loaded: call load_demonstration() (or load_instruction()) first")
        pos, feat, val = checked_cloth(self.cfg, "", cloth_positions, cloth_features, cloth_valid, ())
        state = _array("arm_state", arm_state, (2, 4))
        obs = ObservationTokens(
            self._tensor(pos[None]),
            self._tensor(feat[None]),
            self._tensor(val[None]),
            self._tensor(state[None]),
            self._event_count(event_count),
        )
        override = self._override(target_override, override_mask)
        sampled = sample_cached(self.policy, obs, self._context, generator, override)
        positions, openness, keypose = absolute_actions(self.policy, sampled, obs.arm_state)
        # The contract refuses a diverged model's NaN here (`NonFiniteError`), before any sending.
        return ActionChunk(
            positions[0].cpu().numpy(),
            openness[0].cpu().numpy(),
            self.policy.cfg.execute_steps,
            self.step_duration,
            keypose=None if keypose is None else keypose[0].cpu().numpy(),
        )

    def _event_count(self, event_count: Array | None) -> torch.Tensor | None:
        """`predict`'s event counts as a [1, 2] tensor where the policy reads them, checked."""
        if not self.cfg.event_progress:
            return None
        if event_count is None:
            raise PolicyInputError(
                "event_count: this policy reads each arm's gripper events so far in the fold "
                "(model.event_progress); count them with progress.EventCounter"
            )
        counts = _array("event_count", event_count, (2,))
        if counts.dtype.kind not in "iu" or (counts < 0).any():
            raise PolicyInputError(f"event_count: expected two non-negative integers, got {counts.tolist()}")
        return torch.from_numpy(counts.astype(np.int64))[None].to(self.device)

    def _override(
        self, target_override: Array | None, override_mask: Array | None
    ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """`predict`'s target override as batched tensors (None without one), checked."""
        if target_override is None and override_mask is None:
            return None
        if target_override is None or override_mask is None:
            raise PolicyInputError("target_override and override_mask: give both or neither")
        if self.cfg.keypose_head != "anchored":
            raise PolicyInputError(
                f"target_override: only the anchored keypose head takes target overrides "
                f"(this policy's keypose_head is {self.cfg.keypose_head!r})"
            )
        target = _array("target_override", target_override, (2, 3))
        mask = _array("override_mask", override_mask, (2,))
        if mask.dtype != np.bool_:
            raise PolicyInputError(f"override_mask: expected bool, got {mask.dtype}")
        return self._tensor(target[None]), self._tensor(mask[None])
