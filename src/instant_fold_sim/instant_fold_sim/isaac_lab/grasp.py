"""Which pose the cloth a gripper holds follows: the simulated fingers, or the commanded target.

Why: the first Isaac Lab scene moved the held particles with the *commanded* TCP target, so the
garment went where the policy commanded even when the Franka lagged behind or could not reach
(issue 31): the sim-to-sim row did not test the arms. `fingers` (the default) moves them with the
simulated hand's measured pose, offsets kept in the hand's frame, so tracking error, reach and
joint limits now change the fold; `commanded` is the first model, kept to compare with (the
numbers measured with it state so).

Both models grasp the same particles: on close, those within the grasp radius of the measured
TCP (not held by the other gripper), or the nearest one when none is; on open they are free
again. Plain numpy: it runs in the Isaac Lab process and is tested without it.
"""

from __future__ import annotations

import numpy as np

#: `fingers`: held particles follow the simulated hand (measured); `commanded`: the commanded target.
GRASP_MODELS = ("fingers", "commanded")
DEFAULT_GRASP = "fingers"


class HeldCloth:
    """The particles one gripper holds, and where they are to be each frame."""

    def __init__(self, model: str = DEFAULT_GRASP) -> None:
        if model not in GRASP_MODELS:
            raise ValueError(f"grasp model {model!r}: expected one of {', '.join(GRASP_MODELS)}")
        self.model = model
        self.ids = np.zeros(0, np.int64)
        # `fingers`: in the hand's frame at the grasp; `commanded`: in the world frame (as before).
        self.offsets = np.zeros((0, 3))

    def grasp(
        self, positions: np.ndarray, tcp: np.ndarray, rotation: np.ndarray, radius: float, taken: np.ndarray
    ) -> None:
        """Hold the particles within `radius` of the measured `tcp` that `taken` (the other
        gripper's) does not hold, else the nearest one. `rotation`: the hand's world rotation [3, 3]."""
        d = np.linalg.norm(positions - tcp, axis=1)
        held = np.setdiff1d(np.flatnonzero(d <= radius), taken)
        self.ids = held if held.size else np.array([int(np.argmin(d))])
        offsets = positions[self.ids] - tcp
        self.offsets = offsets @ np.asarray(rotation, np.float64) if self.model == "fingers" else offsets

    def release(self) -> None:
        self.ids, self.offsets = np.zeros(0, np.int64), np.zeros((0, 3))

    def targets(self, tcp: np.ndarray, rotation: np.ndarray, commanded: np.ndarray) -> np.ndarray:
        """Where the held particles are to be (float32 [k, 3]): with the measured hand (`tcp`,
        `rotation`) for `fingers`, at the commanded target plus their offsets for `commanded`."""
        if self.model == "fingers":
            return (np.asarray(tcp, np.float64) + self.offsets @ np.asarray(rotation, np.float64).T).astype(np.float32)
        return np.asarray(commanded, np.float32) + self.offsets.astype(np.float32)
