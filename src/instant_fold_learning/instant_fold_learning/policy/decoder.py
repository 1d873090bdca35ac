"""Flow-matching action decoder: noisy keypose + trajectory tokens -> velocities and gripper logits.

Token layout: [2 keypose tokens (left, right)] + [2H trajectory tokens, step-major]. All tokens
go through one shared linear action tokenizer plus hand-identity and step embeddings, cross-attend
to the scene context, then split into a keypose branch and a trajectory branch. Each branch runs
a joint self-attention block over [scene context ; branch tokens] and a second self-attention
block over its own tokens, then its position and gripper heads. AdaLN conditioning = timestep
MLP + compressed proprioception.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from instant_fold_learning.policy.attention import AdaBlock, Angles, KeyValue, Rope3D, mlp, sinusoidal
from instant_fold_learning.policy.configuration import PolicyConfig


@dataclass
class DecoderOutput:
    """Velocity (eps - x) for the normalised positions and gripper-openness logits."""

    traj_velocity: torch.Tensor  # [B, H, 2, 3]
    traj_gripper_logit: torch.Tensor  # [B, H, 2]
    keypose_velocity: torch.Tensor | None  # [B, 2, 3]
    keypose_gripper_logit: torch.Tensor | None  # [B, 2]


class _Branch(nn.Module):
    """Joint self-attention with the scene context, then self-attention, then position/gripper heads."""

    def __init__(self, cfg: PolicyConfig, rope: Rope3D) -> None:
        super().__init__()
        w = cfg.width
        self.joint = AdaBlock(w, cfg.num_heads, cfg.mlp_ratio, rope, attend_self=True, uses_context=True)
        self.refine = AdaBlock(w, cfg.num_heads, cfg.mlp_ratio, rope, attend_self=True, uses_context=False)
        self.norm = nn.LayerNorm(w)
        self.position_head = mlp(w, 1.0, 3)
        self.gripper_head = mlp(w, 1.0, 1)

    def forward(
        self, x: torch.Tensor, angles: Angles, modulations: list[torch.Tensor], context_kv: KeyValue
    ) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.refine(self.joint(x, angles, modulations[0], context_kv), angles, modulations[1], None)
        x = self.norm(x)
        return self.position_head(x), self.gripper_head(x)[..., 0]


@dataclass
class TargetCondition:
    """What the trajectory branch is told about each arm's next target (anchored head): position
    [B, 2, 3] (camera frame) and its kind, valid bool [B, 2] (True: a grasp/place, False: home once
    the arm has no event left). In training,
    `forced` [B] says which samples are teacher-forced with this position; the others take the
    head's own (detached) prediction."""

    position: torch.Tensor
    valid: torch.Tensor
    forced: torch.Tensor | None = None

    def overridden(self, position: torch.Tensor, mask: torch.Tensor) -> TargetCondition:
        """This condition with the targets of the arms in `mask` [B, 2] replaced by `position`
        [B, 2, 3], as grasp/place targets: inference holds a carrying arm's release target fixed
        (`policy/event_targets.py`), and an arm that holds cloth always has its release left."""
        kept = torch.where(mask[..., None], position.to(self.position.dtype), self.position)
        return TargetCondition(kept, self.valid | mask, self.forced)


#: Offsets to the target are given to the action tokens in units of this length (a sub-fold's size).
TARGET_SCALE_M = 0.1


class ActionDenoiser(nn.Module):
    def __init__(self, cfg: PolicyConfig, rope: Rope3D) -> None:
        super().__init__()
        w = cfg.width
        self.horizon = cfg.horizon
        self.width = w
        self.rope = rope
        self.use_keypose = cfg.flow_keypose
        # Anchored head: each trajectory token is told where its arm's target is relative to it,
        # and whether that target is home (the arm has no event left).
        self.anchored = cfg.keypose_head == "anchored"
        if self.anchored:
            self.target_offset = nn.Sequential(nn.Linear(3, w), nn.GELU(approximate="tanh"), nn.Linear(w, w))
            self.home_target = nn.Parameter(torch.zeros(w))
        self.action_tokenizer = nn.Linear(3, w)
        self.hand = nn.Embedding(2, w)
        self.step = nn.Embedding(cfg.horizon + 1, w)  # 0 = keypose, 1..H = trajectory step
        self.time_mlp = nn.Sequential(nn.Linear(w, w), nn.SiLU(), nn.Linear(w, w))
        self.proprio_mlp = nn.Sequential(nn.Linear(2 * w, w), nn.SiLU(), nn.Linear(w, w))
        self.cross = AdaBlock(w, cfg.num_heads, cfg.mlp_ratio, rope, attend_self=False, uses_context=True)
        self.trajectory = _Branch(cfg, rope)
        self.keypose = _Branch(cfg, rope) if self.use_keypose else None
        hand = torch.arange(2).repeat(cfg.horizon)
        step = torch.arange(1, cfg.horizon + 1).repeat_interleave(2)
        if self.use_keypose:
            hand, step = (
                torch.cat((torch.arange(2), hand)),
                torch.cat((torch.zeros(2, dtype=torch.long), step)),
            )
        self.register_buffer("hand_ids", hand, persistent=False)
        self.register_buffer("step_ids", step, persistent=False)

    def target_embedding(self, target: TargetCondition, traj_pos: torch.Tensor) -> torch.Tensor:
        """[B, 2H, W]: each trajectory token's offset to its arm's target (+ a "home" embedding)."""
        per_token = target.position[:, self.hand_ids].to(traj_pos.dtype)  # [B, 2H, 3]
        offset = self.target_offset((per_token - traj_pos.flatten(1, 2)) / TARGET_SCALE_M)
        home = (~target.valid[:, self.hand_ids, None]).to(offset.dtype)
        return offset + home * self.home_target.to(offset.dtype)

    def context_kv(self, context: torch.Tensor, pos: torch.Tensor, valid: torch.Tensor) -> list[KeyValue]:
        """Keys/values of the scene context for every block that reads it (fixed across Euler steps)."""
        blocks = [self.cross, self.trajectory.joint] + ([self.keypose.joint] if self.keypose is not None else [])
        return [b.context_kv(context, pos, valid) for b in blocks]

    def proprio_condition(self, robot_tokens: torch.Tensor) -> torch.Tensor:
        """[B, 2, W] state-encoder tokens of the current arms -> one AdaLN vector [B, W]."""
        return self.proprio_mlp(robot_tokens.flatten(1))

    @property
    def ada_blocks(self) -> list[AdaBlock]:
        blocks = [self.cross, self.trajectory.joint, self.trajectory.refine]
        return blocks + ([self.keypose.joint, self.keypose.refine] if self.keypose is not None else [])

    def modulations(self, t: torch.Tensor, proprio: torch.Tensor) -> list[torch.Tensor]:
        """AdaLN signals of every block for timesteps t [B] (cond = timestep MLP + proprio)."""
        cond = self.time_mlp(sinusoidal(t * 1000, self.width).to(proprio.dtype)) + proprio
        return [block.modulation(cond) for block in self.ada_blocks]

    def forward(
        self,
        z_traj: torch.Tensor,
        traj_pos: torch.Tensor,
        z_keypose: torch.Tensor | None,
        keypose_pos: torch.Tensor | None,
        modulations: list[torch.Tensor],
        context_kv: list[KeyValue],
        target: TargetCondition | None = None,
    ) -> DecoderOutput:
        """z_traj/traj_pos [B, H, 2, 3] (normalised values, absolute 3D positions); `modulations` from
        `self.modulations`, `context_kv` from `self.context_kv`; `target` (anchored head only) the
        arms' next grasp/place targets."""
        z, pos = z_traj.flatten(1, 2), traj_pos.flatten(1, 2)
        if self.use_keypose:
            z, pos = torch.cat((z_keypose, z), 1), torch.cat((keypose_pos, pos), 1)
        x = self.action_tokenizer(z) + self.hand(self.hand_ids) + self.step(self.step_ids)
        if self.anchored:
            assert target is not None, "the anchored head's trajectory branch needs its target"
            x = x + self.target_embedding(target, traj_pos).to(x.dtype)
        cos, sin = self.rope.angles(pos, x.dtype)  # shared by every block of this step
        x = self.cross(x, (cos, sin), modulations[0], context_kv[0])
        n_kp = 2 if self.use_keypose else 0
        traj_angles = (cos[:, :, n_kp:], sin[:, :, n_kp:])
        traj_v, traj_g = self.trajectory(x[:, n_kp:], traj_angles, modulations[1:3], context_kv[1])
        out = DecoderOutput(traj_v.unflatten(1, (self.horizon, 2)), traj_g.unflatten(1, (self.horizon, 2)), None, None)
        if self.keypose is not None:
            out.keypose_velocity, out.keypose_gripper_logit = self.keypose(
                x[:, :n_kp], (cos[:, :, :n_kp], sin[:, :, :n_kp]), modulations[3:5], context_kv[2]
            )
        return out
