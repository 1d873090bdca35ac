"""Grasps and releases: where each arm closes and opens its gripper, and how far from the oracle's.

Geom. and C-SR@95 judge where the garment ends up, not whether the arms went to the right places
to get there. Every grasp (where an arm closes on the cloth) and every release (where it lets go:
the place point) is a place a fold can go wrong, and each can be compared with the scripted
oracle's from the same start. `arm_events` takes them from a fold's grasp-release episodes (the
gripper's position at the frame it closes, and at the frame it opens again), numbered per arm in
time order: the k-th grasp and k-th release of the left and of the right arm. `EventReference`
holds the oracle's and `EventReference.error` measures each of a fold's events against the
oracle's event of the same kind, arm and number. The first grasp of each arm (`first_grasps`,
`GraspReference`, `FirstGraspError`) is the first slot of the same arrays: it is where a fold is
decided (an arm that closes on the wrong part folds the wrong part) and keeps its own summary
(`summarize_first_grasps`, with the 3D distance) and table.

**Choice**, the oracle's event is the coordinate-wise *median* over its K executions of that
start and context: with the execution noise (Gaussian pick and place offsets per execution) the
median estimates the nominal point as the mean does, but an execution whose arm went somewhere
else (the shipped CPU bank has a few, 20+ cm off) does not drag it away; the distance to the
*nearest* execution would shrink as K grows and reward a larger bank. The oracle *performs* an
event when more than half of its executions do; a fold that does not perform such an event
*missed* it, and an event the fold performs that the oracle does not is *extra*. Matching by
number is the simplest pairing and says what it means: a fold that regrasps after a slip shifts
its later events by one, and they are then compared with the oracle's next ones (and the last
counts as extra), which is how such a fold goes wrong.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from instant_fold_core.fold_record import GraspEpisode, MetricsError

#: Distance (m) within which an event counts as landed (`within_5cm` of the summaries).
WITHIN_M = 0.05
#: Event kinds, the first axis of `arm_events` (`GRASP`, `RELEASE` index it).
EVENT_KINDS = ("grasp", "release")
GRASP, RELEASE = 0, 1


def arm_events(episodes: Sequence[GraspEpisode]) -> np.ndarray:
    """[2 kinds (`EVENT_KINDS`), 2 arms, n, 3]: the position of each arm's k-th grasp and k-th
    release, in the order the arm grasped (n = the most episodes of one arm). NaN where the arm
    has fewer episodes, and for the release of an episode whose gripper was still closed at the end
    (it never let go there)."""
    by_arm = [sorted((e for e in episodes if e.arm == arm), key=lambda e: e.grasp_frame) for arm in range(2)]
    out = np.full((2, 2, max(len(a) for a in by_arm), 3), np.nan)
    for arm, eps in enumerate(by_arm):
        for k, e in enumerate(eps):
            out[GRASP, arm, k] = e.grasp
            if e.released:
                out[RELEASE, arm, k] = e.release
    return out


def _pad(events: np.ndarray, n: int) -> np.ndarray:
    """`arm_events` [2, 2, m, 3] with NaN slots up to n (m <= n): folds of different lengths line up."""
    out = np.full((2, 2, n, 3), np.nan)
    out[:, :, : events.shape[2]] = events
    return out


def first_grasps(episodes: Sequence[GraspEpisode]) -> np.ndarray:
    """[2, 3] position of each arm at its first grasp; a NaN row for an arm that never grasped."""
    events = arm_events(episodes)
    return _pad(events, max(1, events.shape[2]))[GRASP, :, 0]


def _majority_median(runs: np.ndarray) -> np.ndarray:
    """[K, ..., 3] positions of K executions (NaN rows: the execution did not perform the event) ->
    [..., 3]: the coordinate-wise median over the executions that did, for the events more than
    half of them perform; NaN for the others (module docstring)."""
    by_slot = np.moveaxis(runs, 0, -2)  # [..., K, 3]
    performed = ~np.isnan(by_slot).any(axis=-1)  # [..., K]
    out = np.full(runs.shape[1:], np.nan)
    for slot in zip(*np.nonzero(2 * performed.sum(axis=-1) > len(runs)), strict=True):
        out[slot] = np.median(by_slot[slot][performed[slot]], axis=0)
    return out


def _distances(fold: np.ndarray, reference: np.ndarray, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """xy and 3D distances [...] between matching positions [..., 3], times `scale`; NaN where
    either position is missing."""
    d = fold - reference
    return np.linalg.norm(d[..., :2], axis=-1) * scale, np.linalg.norm(d, axis=-1) * scale


def _value(x: float) -> float | None:
    return None if np.isnan(x) else float(x)


@dataclass(frozen=True)
class FirstGraspError:
    """One fold's first grasps against the oracle's, per arm (left, right).

    `xy` and `xyz` are distances (m, after the caller's scale) for the arms that the oracle grasps
    with and the fold grasped with, else None."""

    expected: tuple[bool, bool]  # the oracle's executions grasp with this arm
    grasped: tuple[bool, bool]  # the fold grasped with this arm
    xy: tuple[float | None, float | None]
    xyz: tuple[float | None, float | None]

    def to_json(self) -> dict[str, Any]:
        return {
            "expected": list(self.expected),
            "grasped": list(self.grasped),
            "xy_m": list(self.xy),
            "xyz_m": list(self.xyz),
        }


@dataclass(frozen=True)
class GraspReference:
    """The oracle's first grasp of each arm for one (start, context): [2, 3], NaN rows for the
    arms the oracle does not grasp with (`EventReference.first_grasps`)."""

    position: np.ndarray

    @property
    def expected(self) -> tuple[bool, bool]:
        left, right = (not np.isnan(p).any() for p in self.position)
        return left, right

    def error(self, first: np.ndarray, scale: float = 1.0) -> FirstGraspError:
        """Distances of a fold's `first_grasps` [2, 3] to the reference, times `scale` (what turns
        the positions' units into metres)."""
        f = np.asarray(first, dtype=np.float64)
        if f.shape != (2, 3):
            raise MetricsError(f"first grasps: expected [2, 3], got {f.shape}")
        grasped = [not np.isnan(p).any() for p in f]
        xy, xyz = _distances(f, self.position, scale)
        return FirstGraspError(
            self.expected,
            (grasped[0], grasped[1]),
            (_value(xy[0]), _value(xy[1])),
            (_value(xyz[0]), _value(xyz[1])),
        )


@dataclass(frozen=True)
class EventMatch:
    """One slot of a fold's events: the k-th (`index`, from 0) grasp or release of an arm, whether
    the oracle performs it (`expected`) and the fold did (`performed`), and the xy distance (m,
    after the caller's scale) where both did, else None."""

    kind: str  # one of EVENT_KINDS
    arm: int
    index: int
    expected: bool
    performed: bool
    xy: float | None

    @property
    def label(self) -> str:
        """The summary key: "grasp 1" is each arm's first grasp, "release 2" its second release."""
        return f"{self.kind} {self.index + 1}"

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> EventMatch:
        """The inverse of `to_json` (a `scores.jsonl` line's events are summarised again by group)."""
        kind, number = str(d["event"]).split()
        return cls(kind, int(d["arm"]), int(number) - 1, bool(d["expected"]), bool(d["performed"]), d["xy_m"])

    def to_json(self) -> dict[str, Any]:
        return {
            "event": self.label,
            "arm": self.arm,
            "expected": self.expected,
            "performed": self.performed,
            "xy_m": self.xy,
        }


@dataclass(frozen=True)
class EventError:
    """One fold's grasps and releases against the oracle's: a match per slot that the oracle or
    the fold fills (slots neither fills are left out), by number, then kind, then arm."""

    matches: tuple[EventMatch, ...]

    @classmethod
    def from_json(cls, matches: list[dict[str, Any]]) -> EventError:
        return cls(tuple(EventMatch.from_json(m) for m in matches))

    def to_json(self) -> list[dict[str, Any]]:
        return [m.to_json() for m in self.matches]


@dataclass(frozen=True)
class EventReference:
    """The oracle's grasps and releases for one (start, context): `arm_events`-shaped [2, 2, n, 3],
    NaN for the slots the majority of its executions leave empty (module docstring)."""

    position: np.ndarray

    @classmethod
    def from_runs(cls, runs: Sequence[np.ndarray]) -> EventReference:
        """From the `arm_events` of each of the K oracle executions."""
        if len(runs) == 0:
            raise MetricsError("events: expected K > 0 executions, got none")
        shapes = {np.shape(r)[:2] + np.shape(r)[3:] for r in runs}
        if shapes != {(2, 2, 3)}:
            raise MetricsError(f"events: expected [2, 2, n, 3] per execution, got {sorted(shapes)}")
        n = max(1, *(np.shape(r)[2] for r in runs))
        return cls(_majority_median(np.stack([_pad(np.asarray(r, dtype=np.float64), n) for r in runs])))

    def first_grasps(self) -> GraspReference:
        """The first grasp of each arm: the reference of the first-grasp error."""
        return GraspReference(self.position[GRASP, :, 0].copy())

    def error(self, events: np.ndarray, scale: float = 1.0) -> EventError:
        """Each of a fold's `arm_events` against the reference slot of the same kind, arm and
        number, distances times `scale` (what turns the positions' units into metres)."""
        f = np.asarray(events, dtype=np.float64)
        if f.ndim != 4 or f.shape[:2] + f.shape[3:] != (2, 2, 3):
            raise MetricsError(f"events: expected [2, 2, n, 3], got {f.shape}")
        n = max(f.shape[2], self.position.shape[2])
        fold, ref = _pad(f, n), _pad(self.position, n)
        performed, expected = ~np.isnan(fold).any(axis=-1), ~np.isnan(ref).any(axis=-1)
        xy, _ = _distances(fold, ref, scale)
        return EventError(
            tuple(
                EventMatch(
                    EVENT_KINDS[kind],
                    arm,
                    k,
                    bool(expected[kind, arm, k]),
                    bool(performed[kind, arm, k]),
                    _value(xy[kind, arm, k]),
                )
                for k in range(n)
                for kind in range(2)
                for arm in range(2)
                if expected[kind, arm, k] or performed[kind, arm, k]
            )
        )


def _stats(values: list[float]) -> dict[str, float] | None:
    return {"mean": float(np.mean(values)), "median": float(np.median(values))} if values else None


def _landed(xy: list[float | None]) -> dict[str, Any]:
    """Of the xy distances of expected events (None: missed): `measured`, `missed`, mean and
    median of the measured (`xy_m`) and `within_5cm`, the share of expected events landed within
    `WITHIN_M` (a miss is not within; None without any expected event)."""
    measured = [v for v in xy if v is not None]
    return {
        "measured": len(measured),
        "missed": len(xy) - len(measured),
        "xy_m": _stats(measured),
        "within_5cm": (sum(v <= WITHIN_M for v in measured) / len(xy)) if xy else None,
    }


def summarize_first_grasps(errors: Sequence[FirstGraspError]) -> dict[str, Any]:
    """Pooled over (fold, expected arm): `arms` expected, `measured` (the fold grasped with it),
    `missed`, mean and median of the measured xy and xyz distances (m), and `within_5cm`: the
    share of expected arms whose first grasp landed within `WITHIN_M` in xy (a missed grasp is
    not within). None where there is nothing to average."""
    expected = [(e, arm) for e in errors for arm in range(2) if e.expected[arm]]
    xyz = [v for e, arm in expected if (v := e.xyz[arm]) is not None]
    return {"arms": len(expected), **_landed([e.xy[arm] for e, arm in expected]), "xyz_m": _stats(xyz)}


#: Summary key of the events no oracle reference of the pool performs (`summarize_events`).
LATER = "later"


def summarize_events(errors: Sequence[EventError]) -> dict[str, dict[str, Any]]:
    """Per event ("grasp 1", "release 1", "grasp 2", ...: `EventMatch.label`, in that order),
    pooled over (fold, arm): `expected` (slots the oracle performs), `measured`, `missed`, mean and
    median xy distance (m) of the measured, `within_5cm` (share of the expected), and `extra`
    (slots the fold filled that the oracle leaves empty). The events that no fold's oracle
    performs are pooled under `LATER` (only `extra`, their number): a fold whose gripper chatters
    (30 grasps have been seen) then adds one line, not thirty."""
    slots: dict[tuple[int, int], list[EventMatch]] = {}
    for e in errors:
        for m in e.matches:
            slots.setdefault((m.index, EVENT_KINDS.index(m.kind)), []).append(m)
    out = {}
    later: list[EventMatch] = []
    for key in sorted(slots):
        matches = slots[key]
        expected = [m.xy for m in matches if m.expected]
        if not expected:
            later += matches
            continue
        out[matches[0].label] = {
            "expected": len(expected),
            **_landed(expected),
            "extra": sum(m.performed and not m.expected for m in matches),
        }
    if later:
        out[LATER] = {"expected": 0, **_landed([]), "extra": len(later)}
    return out
