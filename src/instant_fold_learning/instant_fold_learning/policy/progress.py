"""Progress through a fold: how many gripper events (grasps and releases) each arm has made so far.

Why: the policy reads one observation per query, and two moments of a fold can look alike to it:
an arm that has made its sleeve fold imprecisely and one that has yet to make it, or the scene
before and after one arm's carry while the other waits. Measured on the breadth benchmark
(docs/policy.md, "Target following"): 15 of 57 rollouts of the three-start policy stop mid-fold
with an arm that never makes its next grasp, and most misrecognised folds go wrong in their second
half. With `model.event_progress` every robot-state token carries its arm's event count: the
current scene's (counted by whoever runs the fold, `EventCounter`) and each demonstration
keyframe's (counted along the keyframes, which keep every gripper event), so the policy can match
"one carry done" to the demonstration's keyframe after its first carry. Grippers are taken to
start open everywhere (a start closed counts one event). Not in the paper: a choice
(docs/policy.md, "Progress through the fold").
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from instant_fold_core.contracts import ARM_STATE_SHAPE, gripper_closed
from instant_fold_core.validation import check_array

#: Counts above this share its embedding (the benchmarks' folds make at most 3 carries per arm).
MAX_EVENT_COUNT = 7

#: `ProgressBias`: keyframes more events than this ahead of (or behind) an arm's current count share
#: one bias (a fold's carries are 2-4 events apart, 1 before the next grasp).
PROGRESS_SPAN = 3


def event_counts(arm_state: torch.Tensor) -> torch.Tensor:
    """[..., T, 2, 4] arm states in time order (an episode's frames or a demonstration's keyframes,
    the first one the start) -> [..., T, 2] long: per arm, the open/closed changes up to and
    including each step, from open grippers."""
    closed = gripper_closed(arm_state[..., 3]).long()
    start_open = torch.zeros_like(closed[..., :1, :])
    return (torch.cat((start_open, closed), -2).diff(dim=-2) != 0).long().cumsum(-2)


def episode_event_counts(arm_state: np.ndarray) -> np.ndarray:
    """`event_counts` of an episode's [T, 2, 4] arm states as a [T, 2] int64 array (training
    samples and the offline probes read their frame's row)."""
    return event_counts(torch.from_numpy(np.asarray(arm_state))).numpy()


class EventCounter:
    """The event counts of one stream of queries (a fold), from the arm states it is shown in order:
    `event_counts` as it goes. A grasp and its release inside one query interval are not seen,
    as they are not by anyone reading states."""

    def __init__(self) -> None:
        self.closed = np.zeros(2, bool)
        self.counts = np.zeros(2, np.int64)

    def observe(self, arm_state: np.ndarray) -> np.ndarray:
        """The counts [2] including this query's measured state [2, 4] (`check_array`'s
        ValidationError for another shape or a non-finite value, counting nothing)."""
        state = check_array("arm_state", np.asarray(arm_state), ARM_STATE_SHAPE)
        closed = gripper_closed(state[:, 3])
        self.counts += closed != self.closed
        self.closed = closed
        return self.counts.copy()


class ProgressBias(nn.Module):
    """A learned attention logit per head for the tokens of each demonstration keyframe, by how many
    events each arm's count at that keyframe is ahead of (or behind) the arm's current count.

    Why: with `event_progress` only the robot-state tokens carry counts, so a cloth token of the
    current scene cannot tell which keyframe shows the step it is at, and the policy has to infer
    from the cloth which part of the demonstration comes next; measured on the breadth benchmark,
    most misrecognised folds go wrong at the body fold after the sleeves (docs/evaluation.md,
    "Many folds"). With the bias every query of the scene can single out "the keyframe of an arm's
    next event" by stage alone. The table starts at zero, so a policy starts as it would without it.
    Not in the paper: a choice (`model.progress_bias`, docs/policy.md, "Progress through the fold").
    """

    def __init__(self, num_heads: int, span: int = PROGRESS_SPAN) -> None:
        super().__init__()
        self.span = span
        self.table = nn.Parameter(torch.zeros(2, num_heads, 2 * span + 1))

    def forward(self, keyframe_counts: torch.Tensor, current: torch.Tensor) -> torch.Tensor:
        """keyframe_counts [B, K, 2] (each keyframe's `event_counts`), current [B, 2] -> [B, heads, K]:
        the sum over the arms of the table's entry for (arm, head, keyframe count - current count)."""
        ahead = (keyframe_counts - current[:, None]).clamp(-self.span, self.span) + self.span  # [B, K, 2]
        left, right = (self.table[a][:, ahead[..., a]].transpose(0, 1) for a in range(2))
        return left + right

    def tokens(
        self, keyframe_counts: torch.Tensor, current: torch.Tensor, per_keyframe: int, before: int, after: int
    ) -> torch.Tensor:
        """The bias as an additive attention mask [B, heads, 1, before + K * per_keyframe + after] over
        keys laid out as `before` other tokens (no bias), each keyframe's `per_keyframe` tokens in
        keyframe order, then `after` others."""
        per_token = self(keyframe_counts, current).repeat_interleave(per_keyframe, -1)
        return F.pad(per_token, (before, after))[:, :, None]
