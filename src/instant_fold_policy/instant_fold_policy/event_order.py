"""The two arms' gripper events in the order the demonstration makes them.

Why: the learned policy decides when each arm grasps and lets go, and on the breadth benchmark
that decision is where most misrecognised folds go wrong (docs/policy.md, "The order of the
arms' events"): a fold whose body part the demonstration makes with both arms at once is made one
arm after the other, or a shoulders-down fold (left shoulder carried, then the right) with both
arms at once, and the fold made is another fold of the benchmark (its event descriptor's order
dimension, `instant_fold_evaluation.events`). The demonstration shows the order: each arm's n-th
gripper event (grasps and releases counted alike, as `policy.progress` counts them) lies in some
keyframe, after some of the other arm's events and possibly together with one of them.

`EventSchedule` reads that order from the demonstration's keyframe arm states; the fold loop
(`FoldLoopConfig.event_order`) holds an arm at the step where its chunk would make an event the
schedule says comes later: until the other arm has made the events the demonstration shows before
it, and, for an event the demonstration makes with both arms in one keyframe, until the other arm's
chunk makes its event too (so the two grasps or releases happen together). The policy still
decides where and how the arms move and which event comes next; a hold ends after
`event_order_wait` queries whatever the other arm does, so a policy that means another order is
slowed, never stopped. Not in the paper: a choice (docs/policy.md, "Event order").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from instant_fold_core.contracts import ARM_STATE_SHAPE, gripper_closed
from instant_fold_core.validation import check_array
from instant_fold_learning.policy.progress import episode_event_counts


@dataclass(frozen=True)
class EventSchedule:
    """Each arm's gripper events as the demonstration orders them: `counts` [K, 2], the events of
    each arm up to and including each keyframe (`policy.progress.episode_event_counts`, as the
    policy reads a demonstration's)."""

    counts: np.ndarray

    @classmethod
    def from_keypose(cls, keypose: np.ndarray) -> EventSchedule:
        """The schedule of a demonstration's keyframe arm states [K, 2, 4] (K >= 1, finite)."""
        state = np.asarray(keypose, np.float64)
        if state.ndim != 3 or state.shape[1:] != ARM_STATE_SHAPE or len(state) == 0:
            raise ValueError(f"keypose: expected [K >= 1, 2, 4] keyframe arm states, got {state.shape}")
        check_array("keypose", state, state.shape)
        return cls(episode_event_counts(state))

    def _keyframe(self, arm: int, event: int) -> int | None:
        """The keyframe of `arm`'s `event`-th event (1-based); None past the demonstration's."""
        hits = np.flatnonzero(self.counts[:, arm] >= event)
        return int(hits[0]) if len(hits) else None

    def held(self, made: np.ndarray, firing: np.ndarray) -> np.ndarray:
        """bool [2]: the arms whose next event must wait, with `made` [2] the events each arm has
        made so far and `firing` [2] whether its chunk makes its next event now. An arm waits when
        the demonstration makes that event after an event of the other arm it has not made yet, or
        together with the other arm's next event while the other's chunk does not make it now. An
        event past the demonstration's (a retried grasp) never waits."""
        held = np.zeros(2, bool)
        for arm in (0, 1):
            other = 1 - arm
            k = self._keyframe(arm, int(made[arm]) + 1)
            if not firing[arm] or k is None:
                continue
            before = int(self.counts[k - 1, other]) if k > 0 else 0
            together = int(self.counts[k, other]) > before  # the other arm's event in the same keyframe
            behind = made[other] < before  # the other arm has events to make first
            alone = together and made[other] == before and not firing[other]  # its partner does not come now
            held[arm] = behind or alone
        return held

    def partners(self, made: np.ndarray, firing: np.ndarray) -> np.ndarray:
        """bool [2]: the arms the other arm waits for, with `made` and `firing` as in `held`: an arm
        whose chunk does not make its next event now, while the other's chunk makes its own next
        event, which the demonstration makes in the same keyframe."""
        due = np.zeros(2, bool)
        for arm in (0, 1):
            other = 1 - arm
            if firing[arm] or not firing[other]:
                continue
            k = self._keyframe(arm, int(made[arm]) + 1)
            due[arm] = k is not None and k == self._keyframe(other, int(made[other]) + 1)
        return due


def first_event_steps(openness: np.ndarray, closed: np.ndarray) -> np.ndarray:
    """Per arm, the first step of `openness` [S, 2] whose gripper differs from `closed` [2] (the
    measured state), or -1 when none does."""
    changes = gripper_closed(np.asarray(openness)) != np.asarray(closed, bool)[None]
    return np.where(changes.any(axis=0), changes.argmax(axis=0), -1)
