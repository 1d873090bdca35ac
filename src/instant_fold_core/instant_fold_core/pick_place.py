"""The scripted pick-and-place motion, shared by the simulator's oracle and the registration replay.

Why here: the simulator's scripted programs (`instant_fold_sim.rollout`) make the demonstrations
and the oracle executions, and the registration replay (`instant_fold_learning.policy.replay`)
executes a demonstration's grasps and releases on another cloth with the same approach height,
release height, speeds and carrying arc. The core cannot import the simulator, so the numbers
and the arc live here once and both read them.

Lengths are in the units of the points they are used with: `SCRIPTED` is in simulation space (as
the simulator plans), `SCRIPTED.scaled(SIM_TO_REAL)` in real metres (the camera frame).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import numpy as np

#: Simulation space -> real metres: the simulator's nominal 2 m camera height is 1.13 m real.
SIM_TO_REAL = 1.13 / 2.0


@dataclass(frozen=True)
class PickPlaceProfile:
    """Heights (lengths) and speeds (lengths per second) of one scripted pick and place."""

    hover: float = 0.15  # approach / retract height above pick and place points
    place_height: float = 0.03  # release this far above the target
    move_speed: float = 1.5  # free-space moves
    arc_speed: float = 0.9  # carrying cloth along the fold arc
    min_lift: float = 0.08  # the arc's apex rises half the carried distance, within these bounds
    max_lift: float = 0.6

    def scaled(self, factor: float) -> PickPlaceProfile:
        """The same motion in units `factor` times larger (every field is a length or a speed)."""
        return replace(self, **{f.name: getattr(self, f.name) * factor for f in fields(self)})

    def lift(self, distance: float) -> float:
        """Apex height of the carrying arc over a horizontal `distance`."""
        return float(np.clip(0.5 * distance, self.min_lift, self.max_lift))

    def arc_point(self, pick: np.ndarray, drop: np.ndarray, u: float, up: np.ndarray) -> np.ndarray:
        """The carrying arc at progress `u` in [0, 1]: the straight line from `pick` to `drop`,
        raised along the unit vector `up` by a half sine of height `lift(horizontal distance)`."""
        up = np.asarray(up, dtype=float)
        span = drop - pick
        horizontal = float(np.linalg.norm(span - np.dot(span, up) * up))
        return pick + span * u + up * (self.lift(horizontal) * np.sin(np.pi * u))


#: The simulator's scripted programs' motion (simulation space).
SCRIPTED = PickPlaceProfile()
