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
- stale chunks (observation older than `max_chunk_age`), chunks longer than `max_chunk_steps`
  and chunks during an e-stop are refused.

Each event is counted in `counts` (the node summarises them; tests read them) and logged, at most
`LOG_BURST` lines per kind of event every `LOG_PERIOD_S`: a faulty policy can send bad chunks as
fast as it likes, and one log line per clamped step once made a single chunk cost a minute of the
control thread. Lines not logged are counted in `suppressed` until the next summary takes them.
"""

from __future__ import annotations

import math
import threading
import time
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
    "refused_long",
    "refused_estop",
    "held_distance",
    "held_nonfinite",
    "watchdog_hold",
    "estop",
)
#: Log lines each kind of event may write per `LOG_PERIOD_S` (the rest are counted).
LOG_BURST = 5
#: Window of the log limit, and how often the controller node summarises the counts (s).
LOG_PERIOD_S = 10.0


class LogLimiter:
    """At most `burst` lines per kind of event in each `period_s` window of `clock` (wall time:
    what is limited is the log's volume, whatever clock the controller runs on)."""

    def __init__(
        self, burst: int = LOG_BURST, period_s: float = LOG_PERIOD_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.burst, self.period_s, self._clock = burst, period_s, clock
        self._windows: dict[str, tuple[float, int]] = {}  # kind -> (window start, lines logged in it)
        self.suppressed: Counter[str] = Counter()

    def allow(self, name: str) -> bool:
        """Whether a line of this kind may be logged now; counts it in `suppressed` if not."""
        now = self._clock()
        start, used = self._windows.get(name, (-math.inf, 0))
        if now - start >= self.period_s:
            start, used = now, 0
        allowed = used < self.burst
        self._windows[name] = (start, used + allowed)
        if not allowed:
            self.suppressed[name] += 1
        return allowed


class SafetyLayer:
    """Applies the limits of a `SafetyConfig`; `log(level, text)` receives the events (rate-limited)."""

    def __init__(
        self, config: SafetyConfig, log: Callable[[str, str], None], limiter: LogLimiter | None = None
    ) -> None:
        self.config = config
        self.counts: Counter[str] = Counter({name: 0 for name in EVENTS})
        self._log = log
        self._limiter = limiter or LogLimiter()
        # Events come from the control thread and from the e-stop service's thread.
        self._lock = threading.Lock()
        self._output_clamping = False

    def event(self, name: str, text: str, level: str = "warn", count: int = 1) -> None:
        """Count `count` events of a kind and log one line for them (unless the limit is reached)."""
        with self._lock:
            self.counts[name] += count
            total, allowed = self.counts[name], self._limiter.allow(name)
        if allowed:
            self._log(level, f"[safety:{name} #{total}] {text}")

    def take_suppressed(self) -> dict[str, int]:
        """Lines not logged since the last call, per kind (for the periodic summary)."""
        with self._lock:
            taken = {name: n for name, n in self._limiter.suppressed.items() if n}
            self._limiter.suppressed.clear()
        return taken

    def clamp_waypoints(self, positions: np.ndarray) -> np.ndarray:
        """Clamp [k, 2, 3] camera-frame waypoints into the workspace box: each clamped step of
        each arm is counted, one line per chunk names how many and the first."""
        lo, hi = self.config.workspace_min, self.config.workspace_max
        clamped = np.clip(positions, lo, hi)
        moved = np.argwhere(np.any(clamped != positions, axis=-1))
        if len(moved):
            step, arm = moved[0]
            self.event(
                "clamped",
                f"{len(moved)} waypoint(s) outside workspace [{lo.tolist()}, {hi.tolist()}] clamped onto it; "
                f"first: {ARMS[arm]} arm step {step}: {np.round(positions[step, arm], 4).tolist()} -> "
                f"{np.round(clamped[step, arm], 4).tolist()}",
                count=len(moved),
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
