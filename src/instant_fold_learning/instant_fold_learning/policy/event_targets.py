"""Where the arms grasp and let go: the learned policy's own targets, or ones held from the demonstration.

Why: the cloth-anchored head (`policy/anchor.py`) reads each arm's next target from the current
cloth at every query. Its grasps land well, but its releases land off (v5: release medians 3.4 /
4.2 cm against the oracle's own spread of 2.3 / 3.1 cm, `docs/results/event_errors_v5.json`),
while registration replay, which carries the demonstrated release through the registration of its
grasp, releases as precisely as the oracle. While an arm carries, the lifted part of the garment
hangs over the cloth around the place point and moves it, so a target read from those tokens
drifts.

A strategy (`EventTargets`) holds some arms' next targets (`PolicyRunner.predict`'s
`target_override`: the trajectory is conditioned on them and the chunk reports them); the policy
still decides when and with which arm to grasp, which part of the garment, how to move and when to
let go. Strategies (the policy server's `event_targets`):

- `policy` (default): none held, the policy's targets as read from the cloth at each query.
- `latched` (`ReleaseLatch`): a carry's release is the target the policy reported at the first
  query after the grasp. Measured and rejected (docs/policy.md, issue-28 table): worse than `policy`.
- `demonstration_releases` (`DemonstrationTargets`): a carry's release is the demonstration's
  release for that grasp, carried onto the cloth by the registration of the demonstrated grasp
  keyframe onto the cloth as the arm found it (the query before the grasp), as registration
  replay does (`policy/replay.py`).
- `demonstration` (`DemonstrationTargets(grasps=True)`): those releases, and a grasp the policy
  aims within `GRASP_MATCH_M` of the demonstrated one (`FIRST_GRASP_MATCH_M` for each arm's first
  grasp) is made at the demonstrated one, registered onto the current cloth; so are both arms'
  grasps when the policy aims them within `GRASP_CONFLICT_M` of each other (one point, which two
  grippers cannot share).

A strategy's state belongs to one stream of queries, a fold: `PolicyServer` keeps one per fold (and
starts it empty), so the fold loop's hosts, the policy server node and the in-process evaluator,
run the same code. Not in the paper (docs/policy.md, "Event targets").
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from instant_fold_core.contracts import gripper_closed
from instant_fold_core.registration import PlanarRigid, RegistrationTrack
from instant_fold_core.tokens import TokenArrays
from instant_fold_learning.keypoints.mapping import KeypointCarrier, keypoint_shift
from instant_fold_learning.policy.inference import _array
from instant_fold_learning.policy.replay import (
    Event,
    ReplayConfig,
    demo_stages,
    map_grasp,
    map_release,
    register_keyframe,
)

#: A cloth's token positions [N, 3], features [N, D] and validity [N], as `replay.map_grasp` takes them.
ClothArrays = tuple[np.ndarray, np.ndarray, np.ndarray]

#: The strategies a policy server can run (`event_targets`), the default first.
EVENT_TARGETS = ("policy", "latched", "demonstration_releases", "demonstration")

#: `event_targets` value that picks the deployment's choice for the policy at hand (`resolve`).
AUTO = "auto"

#: A grasp farther than this (x, y) from where the demonstration's grasp maps onto the cloth is not
#: that grasp (the policy grasped elsewhere): its carry keeps the policy's own targets.
GRASP_MATCH_M = 0.08

#: `GRASP_MATCH_M` for each arm's first grasp of the fold. That grasp is made on the cloth as it lay
#: when the fold started, where the registration of the demonstration's first keyframe is at its most
#: reliable: within 50 cm (about anywhere on a garment) the demonstration decides where it is made
#: (measured: docs/evaluation.md, "First grasps where the demonstration made them").
FIRST_GRASP_MATCH_M = 0.5

#: Two grasps the policy aims nearer than this (x, y) to each other are one point, which two
#: grippers cannot both take (the controller refuses the chunks that bring them this close,
#: config/robots/*.yaml `min_gripper_distance`, and the arms would hold there for good).
GRASP_CONFLICT_M = 0.10

#: With a keypoint detector, an arm this close (x, y) to where its next grasp maps keeps the keypoint
#: shift found before it came: over the cloth, the arm hides the part the detector reads.
KEYPOINT_LATCH_M = 0.10


class EventTargets(Protocol):
    """Targets held for some arms during one fold (see the module's docstring)."""

    def targets(self, cloth: TokenArrays, arm_state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Before a query with the current cloth tokens and measured arm state [2, 4]: the held
        targets [2, 3] and which arms hold one [2] (bool), as `PolicyRunner.predict` takes them."""
        ...

    def observe(self, arm_state: np.ndarray, keypose: np.ndarray) -> None:
        """After that query, with the keypose [2, 4] the chunk reported."""
        ...


def resolve(requested: str, keypose_head: str | None, conditioning: str) -> str:
    """The strategy `requested` names: itself, or for `AUTO` `demonstration` where the policy can
    take held targets (anchored keypose head, conditioned on a demonstration) and `policy`
    elsewhere (the paper's head, registration replay, a fold said in words). ValueError for an unknown
    name or a strategy the policy cannot take."""
    if requested == AUTO:
        return "demonstration" if keypose_head == "anchored" and conditioning == "demo" else "policy"
    if requested not in EVENT_TARGETS:
        raise ValueError(f"event_targets: expected one of {[AUTO, *EVENT_TARGETS]}, got {requested!r}")
    if requested != "policy" and keypose_head != "anchored":
        raise ValueError(
            f"event_targets {requested!r}: only a learned policy with the anchored keypose head "
            "(model.keypose_head: anchored) takes held targets"
        )
    if requested.startswith("demonstration") and conditioning != "demo":
        raise ValueError(f"event_targets {requested!r}: a policy told the fold in words has no demonstration")
    return requested


def closed_arms(arm_state: np.ndarray) -> np.ndarray:
    """bool [2]: the arms whose measured gripper is closed (a malformed state is the
    `PolicyInputError` the runner would raise, before any strategy changes)."""
    return gripper_closed(_array("arm_state", arm_state, (2, 4))[:, 3])


class ReleaseLatch:
    """`latched`: per-arm targets held while the arm's gripper is measured closed."""

    def __init__(self) -> None:
        self.target = np.zeros((2, 3), np.float32)
        self.latched = np.zeros(2, bool)

    def targets(self, cloth: TokenArrays, arm_state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Clear the arms measured open (their release is executed), then the held targets."""
        self.latched &= closed_arms(arm_state)
        return self.target.copy(), self.latched.copy()

    def observe(self, arm_state: np.ndarray, keypose: np.ndarray) -> None:
        """The closed arms that hold no target yet (its first query since the grasp) keep the
        target the policy reported."""
        first = closed_arms(arm_state) & ~self.latched
        self.target[first] = keypose[first, :3]
        self.latched |= first


class DemonstrationTargets:
    """`demonstration_releases`, and with `grasps` `demonstration`: each carry's release target
    from the demonstration, registered at its grasp.

    The n-th grasp of an arm in the fold is matched to that arm's n-th grasp in the demonstration
    (the stages registration replay walks, `replay.demo_stages`). When the grasp is measured, the
    demonstration keyframe of that grasp is registered onto the cloth of the previous query (as
    the arm found it, not yet lifted) and the demonstrated release is carried through it; the arm
    holds that target until it is measured open. A grasp with no demonstrated counterpart, or more
    than `match_m` (`first_match_m` for the arm's first grasp) from where the counterpart maps,
    keeps the policy's own targets.

    With `grasps`, an open arm's grasp is held too: once a query reports a grasp target within
    `match_m` (`first_match_m` for its first grasp) of where the arm's next demonstrated grasp maps
    onto the current cloth, or both arms' grasp targets within `conflict_m` of each other, the arm
    holds that mapped point (registered again at every query, continuing the fold's previous
    registration: `track`) until the grasp is measured; a grasp the policy aims elsewhere stays its
    own.

    With a keypoint detector (`keypoints`), a demonstrated grasp made at a named keypoint maps to
    that keypoint of the current cloth (`keypoints.mapping`) instead of where the registration puts
    it; the policy, which reads the registered demonstration, still names the grasp it means by
    aiming (or grasping) within `match_m` of either point.
    """

    def __init__(
        self,
        demo: TokenArrays,
        demo_arm_state: np.ndarray,
        registration: ReplayConfig | None = None,
        match_m: float = GRASP_MATCH_M,
        grasps: bool = False,
        keypoints: KeypointCarrier | None = None,
        keypoint_latch_m: float = KEYPOINT_LATCH_M,
        conflict_m: float = GRASP_CONFLICT_M,
        first_match_m: float = FIRST_GRASP_MATCH_M,
    ) -> None:
        """`demo`: the demonstration's tokens per keyframe (positions [K, N, 3], features [K, N, D],
        validity [K, N]); `demo_arm_state` [K, 2, 4]; `registration`: the registration's settings
        (registration replay's by default); `keypoints`: carry grasps made at a keypoint to that
        keypoint of the current cloth (`keypoints.mapping.keypoint_shift`), the shift found anew at
        each query until the arm comes within `keypoint_latch_m` of the grasp, then kept;
        `conflict_m`: two grasps aimed this close are one point (`observe`); `first_match_m`: the
        `match_m` of each arm's first grasp. A strategy belongs to one fold, so it keeps the fold's
        registrations (`track`: each continues the previous one)."""
        state = np.asarray(demo_arm_state, np.float64)
        self.demo = (
            np.asarray(demo.positions, np.float64),
            np.asarray(demo.features, np.float32),
            np.asarray(demo.valid, bool),
            state,
        )
        self.cfg = registration or ReplayConfig()
        self.match_m = match_m
        self.first_match_m = first_match_m
        self.hold_grasps = grasps
        self.keypoints = keypoints
        self.keypoint_latch_m = keypoint_latch_m
        self.conflict_m = conflict_m
        self.track = RegistrationTrack()
        # Per (arm, n-th grasp): the keypoint shift of the grasp's mapping (None: at no keypoint).
        self._shifts: dict[tuple[int, int], np.ndarray | None] = {}
        # Per arm, its demonstrated carries in order: (grasp keyframe, release keyframe or None).
        self.carries: list[list[tuple[int, int | None]]] = [[], []]
        for stage in demo_stages(state):
            for a, event in stage.events.items():
                if event is Event.GRASP:
                    self.carries[a].append((stage.keyframe, None))
                elif self.carries[a] and self.carries[a][-1][1] is None:
                    self.carries[a][-1] = (self.carries[a][-1][0], stage.keyframe)
        self.grasps = np.zeros(2, int)  # grasps measured per arm in this fold
        self.target = np.zeros((2, 3), np.float32)
        self.held = np.zeros(2, bool)
        self.aimed = np.zeros(2, bool)  # `grasps`: an open arm holds its mapped grasp
        self._mapped: dict[int, np.ndarray] = {}  # `grasps`: this query's mapped next grasp per open arm
        # ... and where the registration alone puts it (what the policy, which reads the registered
        # demonstration, means by that grasp; the same point without a keypoint detector)
        self._registered: dict[int, np.ndarray] = {}
        self._closed: np.ndarray | None = None  # at the previous query
        self._cloth: TokenArrays | None = None  # of the previous query

    def targets(self, cloth: TokenArrays, arm_state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Start each newly measured grasp's carry (its target from the demonstration, if it
        matches one), end the carries of arms measured open; with `grasps`, map each open arm's
        next demonstrated grasp onto this cloth. The held targets."""
        closed = closed_arms(arm_state)
        before = np.zeros(2, bool) if self._closed is None else self._closed
        self.held &= closed
        self.aimed &= ~closed
        for a in np.flatnonzero(closed & ~before):
            self._start_carry(int(a), arm_state[a, :3], cloth if self._cloth is None else self._cloth)
        self._closed, self._cloth = closed, cloth
        self._mapped, self._registered = {}, {}
        if self.hold_grasps:
            self._map_grasps(cloth, closed, arm_state)
        return self.target.copy(), self.held | self.aimed

    def observe(self, arm_state: np.ndarray, keypose: np.ndarray) -> None:
        """With `grasps`: an open arm that reports a grasp near its mapped next demonstrated grasp
        (or near where the registration alone puts it) holds the mapped grasp from the next query
        on. When both open arms report grasps within `conflict_m` of each other, the policy has sent
        both to one point: each holds its own mapped grasp (the demonstration says which part each
        arm takes)."""
        grasping = {a: keypose[a, :2] for a in self._mapped if gripper_closed(keypose[a, 3])}
        for a, xy in grasping.items():
            self.aimed[a] |= self._near(int(self.grasps[a]), xy, self._mapped[a], self._registered[a])
        if len(grasping) == 2 and np.linalg.norm(grasping[0] - grasping[1]) < self.conflict_m:
            self.aimed[:] = True
        for arm, point in self._mapped.items():
            if self.aimed[arm]:
                self.target[arm] = point

    def _current(self, cloth: TokenArrays) -> ClothArrays:
        return (
            np.asarray(cloth.positions, np.float64),
            np.asarray(cloth.features, np.float32),
            np.asarray(cloth.valid, bool),
        )

    def _near(self, n: int, xy: np.ndarray, *points: np.ndarray) -> bool:
        """Whether `xy` is within the match distance of an arm's n-th grasp (`first_match_m` for
        n = 0, else `match_m`; x, y) of any of `points`: the demonstrated grasp as mapped, or as
        the registration alone maps it."""
        radius = self.first_match_m if n == 0 else self.match_m
        return any(np.linalg.norm(xy - p[:2]) <= radius for p in points)

    def _shift(
        self, a: int, n: int, transform: PlanarRigid, current: ClothArrays, arm_xy: np.ndarray
    ) -> np.ndarray | None:
        """The keypoint shift of arm `a`'s n-th grasp: found on `current` while the arm is farther
        than `keypoint_latch_m` from where the grasp maps (or when none was found yet), else the one
        found before."""
        if self.keypoints is None:
            return None
        k = self.carries[a][n][0]
        if (a, n) in self._shifts:
            kept = self._shifts[(a, n)]
            at = transform.apply_point(self.demo[3][k, a, :3])[:2]  # the fit's point
            if np.linalg.norm(at + (0.0 if kept is None else kept) - arm_xy) <= self.keypoint_latch_m:
                return kept
        self._shifts[(a, n)] = keypoint_shift(self.keypoints, transform, self.demo, k, a, current)
        return self._shifts[(a, n)]

    def _grasp(
        self, a: int, n: int, transform: PlanarRigid, current: ClothArrays, arm_xy: np.ndarray
    ) -> tuple[tuple[np.ndarray, float], np.ndarray]:
        """Arm `a`'s n-th demonstrated grasp on `current`: as mapped (`map_grasp`'s point and depth
        offset, moved by its keypoint shift when there is one) and as the registration alone maps it
        (the same point without a shift)."""
        k = self.carries[a][n][0]
        registered = map_grasp(self.cfg, transform, self.demo, k, a, current)
        shift = self._shift(a, n, transform, current, arm_xy)
        mapped = registered if shift is None else map_grasp(self.cfg, transform, self.demo, k, a, current, shift)
        return mapped, registered[0]

    def _map_grasps(self, cloth: TokenArrays, closed: np.ndarray, arm_state: np.ndarray) -> None:
        current = self._current(cloth)
        transforms: dict[int, PlanarRigid] = {}  # per keyframe: a stage of two grasps registers once
        for a in map(int, np.flatnonzero(~closed)):
            n = int(self.grasps[a])
            if n >= len(self.carries[a]):
                continue
            k = self.carries[a][n][0]
            if k not in transforms:
                transforms[k] = register_keyframe(self.cfg, self.demo, k, current, self.track)
            arm_xy = np.asarray(arm_state[a, :2], np.float64)
            (self._mapped[a], _), self._registered[a] = self._grasp(a, n, transforms[k], current, arm_xy)
            if self.aimed[a]:
                self.target[a] = self._mapped[a]

    def _start_carry(self, a: int, grasped_at: np.ndarray, cloth: TokenArrays) -> None:
        n = int(self.grasps[a])
        self.grasps[a] += 1
        if n >= len(self.carries[a]) or self.carries[a][n][1] is None:
            return
        grasp_k, release_k = self.carries[a][n]
        assert release_k is not None
        current = self._current(cloth)
        transform = register_keyframe(self.cfg, self.demo, grasp_k, current, self.track)
        (grasp, depth_offset), registered = self._grasp(
            a, n, transform, current, np.asarray(grasped_at, np.float64)[:2]
        )
        if not self._near(n, np.asarray(grasped_at, np.float64)[:2], grasp, registered):
            return
        self.target[a] = map_release(transform, depth_offset, self.demo[3][release_k, a, :3])
        self.held[a] = True
