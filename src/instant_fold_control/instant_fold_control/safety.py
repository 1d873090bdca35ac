"""The one safety layer between the policy and the drivers.

Every chunk the controller accepts and every target it sends passes through `SafetyLayer`, so
the limits are enforced in exactly one place:

- non-finite values: a chunk with any NaN/inf is refused whole, and a non-finite output target
  is replaced by the last safe one (it never reaches a driver);
- workspace box (camera frame): waypoints outside are clamped onto the box (the box is convex,
  so interpolated paths between clamped waypoints stay inside), and so are outputs;
- maximum Cartesian speed per arm: the commanded target moves at most `max_speed * dt` per tick;
- minimum distance between the grippers: a chunk whose path brings them closer is refused, and
  an output that would bring them closer (and closer than before) holds both arms;
- stale chunks (observation older than `max_chunk_age`) and chunks during an e-stop are refused.

Each event is logged and counted in `counts` (the node reports them; tests read them).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import numpy as np

from instant_fold_control.config import ARMS, SafetyConfig

#: Events counted by the safety layer (and the controller's watchdog / e-stop).
EVENTS = (
    "clamped",
    "speed_limited",
    "refused_nonfinite",
    "refused_malformed",
    "refused_stale",
    "refused_distance",
    "refused_estop",
    "held_distance",
    "held_nonfinite",
    "watchdog_hold",
    "estop",
)


class SafetyLayer:
    """Applies the limits of a `SafetyConfig`; `log(level, text)` receives every event."""

    def __init__(self, config: SafetyConfig, log: Callable[[str, str], None]) -> None:
        self.config = config
        self.counts: Counter[str] = Counter({name: 0 for name in EVENTS})
        self._log = log
        self._output_clamping = False

    def event(self, name: str, text: str, level: str = "warn") -> None:
        self.counts[name] += 1
        self._log(level, f"[safety:{name} #{self.counts[name]}] {text}")

    def clamp_waypoints(self, positions: np.ndarray) -> np.ndarray:
        """Clamp [k, 2, 3] camera-frame waypoints into the workspace box, logging each clamp."""
        lo, hi = self.config.workspace_min, self.config.workspace_max
        clamped = np.clip(positions, lo, hi)
        moved = np.any(clamped != positions, axis=-1)
        for step, arm in np.argwhere(moved):
            self.event(
                "clamped",
                f"{ARMS[arm]} arm step {step}: {np.round(positions[step, arm], 4).tolist()} outside workspace "
                f"[{lo.tolist()}, {hi.tolist()}] -> {np.round(clamped[step, arm], 4).tolist()}",
            )
        return clamped

    def filter_output(self, previous: np.ndarray, desired: np.ndarray, dt: float) -> np.ndarray:
        """The next commanded [2, 3] positions given the previous ones and what the plan wants."""
        if not np.isfinite(desired).all():
            self.event("held_nonfinite", f"non-finite target {desired.tolist()} replaced by the last safe one", "error")
            return previous.copy()
        target = np.clip(desired, self.config.workspace_min, self.config.workspace_max)
        clamping = bool(np.any(target != desired))
        if clamping and not self._output_clamping:  # e.g. an arm starting outside the box: log once per episode
            self.event("clamped", f"output {np.round(desired, 4).tolist()} clamped to the workspace", "warn")
        elif clamping:
            self.counts["clamped"] += 1
        self._output_clamping = clamping
        step = target - previous
        dist = np.linalg.norm(step, axis=-1)
        max_step = self.config.max_speed * max(dt, 0.0)
        over = dist > max_step + 1e-12
        if over.any():
            scale = np.where(over, max_step / np.maximum(dist, 1e-12), 1.0)
            target = previous + step * scale[:, None]
            self.counts["speed_limited"] += 1  # routine while catching up: counted, logged at debug
            self._log("debug", f"speed limited to {self.config.max_speed} m/s ({ARMS[int(np.argmax(dist))]} arm)")
        new_gap = float(np.linalg.norm(target[0] - target[1]))
        old_gap = float(np.linalg.norm(previous[0] - previous[1]))
        if new_gap < self.config.min_gripper_distance and new_gap < old_gap:
            self.event(
                "held_distance",
                f"grippers would be {new_gap:.3f} m apart (< {self.config.min_gripper_distance} m): holding both arms",
            )
            return previous.copy()
        return target
