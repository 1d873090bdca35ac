"""Release latch: each arm's place target read once per carry, then held until the arm lets go.

Why: the cloth-anchored head (`policy/anchor.py`) reads each arm's next target from the current
cloth at every query. Its first grasps land well, but its releases land off (measured on v5:
release medians 3.4 / 4.2 cm against the oracle's own spread of 2.3 / 3.1 cm, while registration
replay, which fixes each release target once per stage, releases as precisely as the oracle;
`docs/results/event_errors_v5.json`). While an arm carries, the lifted part of the garment hangs
over the cloth around the place point and moves it, so the target read from those tokens drifts.

What it does: an arm whose measured gripper is closed (a grasp executed, by the threshold the fold
loop counts events with) keeps the target the policy reported at the first query after the grasp
(for a carrying arm, its release); later queries of that carry condition the trajectory on, and
report, the latched target (`PolicyRunner.predict`'s `target_override`). Measured open again (the
release executed), the arm's latch is cleared and its targets are read from the cloth as before.

A latch belongs to one stream of queries, a fold: `PolicyServer` keeps one per fold (and starts it
empty), so the fold loop's hosts, the policy server node and the in-process evaluator, run the
same code. Off by default (docs/policy.md, "Inference", "Latched release targets").
"""

from __future__ import annotations

import numpy as np

from instant_fold_core.policy.inference import _array

#: Openness above this is "open" (`FoldLoopConfig.open_threshold`'s default: the latch sees a grasp
#: where the fold loop counts one).
OPEN_THRESHOLD = 0.5


class ReleaseLatch:
    """Per-arm targets held while the arm's gripper is measured closed (state of one fold)."""

    def __init__(self, open_threshold: float = OPEN_THRESHOLD) -> None:
        self.open_threshold = open_threshold
        self.target = np.zeros((2, 3), np.float32)
        self.latched = np.zeros(2, bool)

    def _closed(self, arm_state: np.ndarray) -> np.ndarray:
        """bool [2]: the arms whose measured gripper is closed (a malformed state is the
        `PolicyInputError` the runner would raise, before any latch changes)."""
        return _array("arm_state", arm_state, (2, 4))[:, 3] <= self.open_threshold

    def targets(self, arm_state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Before a query with measured arm state [2, 4]: clear the arms measured open (their
        release is executed), then the held targets [2, 3] and which arms hold one [2] (bool), as
        `PolicyRunner.predict` takes them."""
        self.latched &= self._closed(arm_state)
        return self.target.copy(), self.latched.copy()

    def latch(self, arm_state: np.ndarray, keypose: np.ndarray) -> None:
        """After that query: the closed arms that hold no target yet (its first query since the
        grasp) keep the target the policy reported, `keypose` [2, 4] (x, y, z, openness after)."""
        first = self._closed(arm_state) & ~self.latched
        self.target[first] = keypose[first, :3]
        self.latched |= first
