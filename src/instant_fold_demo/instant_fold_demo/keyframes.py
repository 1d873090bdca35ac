"""Keyframes from a human demonstration (paper, appendix E, "Cross-Embodiment Transfer").

Two passes over the recording, so a long bag never sits in memory:

1. `observe`: per frame, the cloth mask (any `Segmenter`), both hands (`HandDetector`, arms by
   image position) and whether the frame is *clean* (no hand's landmarks, grown by a margin,
   touch the cloth). Each hand's contact with the cloth is judged against the latest clean frame:
   its grasp pixel lies on that frame's cloth mask (within `contact_radius_px`) and its fingertip
   depth is within `contact_height` in front of the cloth surface there.
2. `extract`: per arm a closed/open state with hysteresis (close: pinch ratio below
   `close_pinch` while in contact; open: above `open_pinch`; a change must hold `min_frames`
   frames), giving grasp and release events. Each grasp's hand position is projected onto the
   preceding clean frame (after the previous event of either arm, since the cloth may have
   changed before it; if the hands covered the cloth all that time, the least covered frame):
   the cloth point under the grasp pixel there (median depth over the
   mask, snapped to the nearest cloth pixel when the pixel is just off it) is the grasp keypose,
   and that frame's image is the keyframe's observation (the cloth the policy will see, not the
   hand). A release's keypose is the hand's own 3D grasp point, and its observation the next
   clean frame (the cloth as released). An arm that grasps again after a release gets a
   retraction keyframe in between: the release point moved `retract_height` towards the camera
   (the paper interpolates retraction points of modes with an intermediate retraction). The
   sequence starts with both arms at `home` (open) and ends with a TERMINAL keyframe at home.

The result is the project's `Demonstration` (the file the policy server loads) plus a JSON of
every event with its evidence (pinch, contact, score, clean frame, how the position was found).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

import numpy as np
from scipy import ndimage

from instant_fold_core.contracts import KeyframeEvent, gripper_closed
from instant_fold_core.demonstration import Demonstration
from instant_fold_core.errors import InvalidInputError
from instant_fold_core.rgbd import RGBDFrame
from instant_fold_demo.hands import HandDetector, HandState, assign_arms, backproject, depth_at, hand_state, project
from instant_fold_perception.segmentation import SegmentationError, Segmenter

ARMS = ("left", "right")


class ExtractionError(InvalidInputError):
    """The recording does not yield a demonstration; the message says why and where."""


@dataclass(frozen=True)
class ExtractionConfig:
    close_pinch: float = 0.35  # thumb-index distance / hand size below which the hand pinches
    open_pinch: float = 0.6  # ... above which it has let go (the gap between is the hysteresis)
    min_frames: int = 2  # frames a new state must hold before it counts
    contact_radius_px: int = 6  # grasp pixel at most this far from the cloth mask
    contact_height: float = 0.05  # m: fingertips at most this far in front of the cloth surface
    clean_margin_px: int = 6  # hand landmarks' box grown by this must not touch the cloth
    depth_window: int = 5  # median window (pixels) for depth at a point
    retract_height: float = 0.08  # m towards the camera above a release, for retraction keyframes
    retract_frames: int = 5  # retraction keyframe this many frames after the release
    sync_frames: int = 3  # events of the two arms at most this many frames apart share a keyframe
    home: tuple[tuple[float, float, float], tuple[float, float, float]] = (
        (-0.815, 0.233, 0.935),
        (0.649, 0.234, 1.056),
    )
    mirror: bool = False  # swap arms (demonstrator facing the robot)


@dataclass
class FrameObservation:
    """Pass-1 result for one frame (small: the mask is bit-packed)."""

    index: int
    stamp_ns: int
    hands: list[HandState | None]
    contact: list[bool]
    clean: bool
    covered: int  # cloth pixels the hands may hide (0 when clean)
    packed_mask: np.ndarray
    shape: tuple[int, int]

    @property
    def mask(self) -> np.ndarray:
        h, w = self.shape
        return np.unpackbits(self.packed_mask, count=h * w).reshape(h, w).astype(bool)


@dataclass
class Event:
    """One grasp or release of one arm, with the evidence that placed it."""

    arm: int
    kind: str  # "grasp" | "release"
    frame: int
    image_frame: int
    pixel: list[float]
    position: list[float]
    evidence: dict = field(default_factory=dict)


def _covered(mask: np.ndarray, hand: HandState, margin: int) -> int:
    """Cloth pixels inside the hand's landmark box grown by `margin` (what the hand may hide)."""
    h, w = mask.shape
    u0, v0 = np.floor(hand.landmarks.min(axis=0)).astype(int) - margin
    u1, v1 = np.ceil(hand.landmarks.max(axis=0)).astype(int) + margin
    u0, v0, u1, v1 = max(u0, 0), max(v0, 0), min(u1 + 1, w), min(v1 + 1, h)
    return int(mask[v0:v1, u0:u1].sum()) if u0 < u1 and v0 < v1 else 0


def observe(
    frames: Iterable[RGBDFrame],
    detector: HandDetector,
    segmenter: Segmenter,
    config: ExtractionConfig = ExtractionConfig(),
) -> list[FrameObservation]:
    """Pass 1: masks, hands, contact and cleanliness of every frame."""
    out: list[FrameObservation] = []
    clean_mask: np.ndarray | None = None
    clean_depth: np.ndarray | None = None
    shape: tuple[int, int] | None = None
    last_seen: tuple[np.ndarray | None, np.ndarray | None] = (None, None)
    last_ms = -1
    for frame in frames:
        if shape is None:
            shape = frame.depth.shape
        elif frame.depth.shape != shape:
            raise ExtractionError(f"frame {frame.frame_number}: size {frame.depth.shape} differs from {shape}")
        try:
            mask = np.asarray(segmenter.segment(frame), bool)
        except SegmentationError:  # e.g. arms cover the table: no cloth here, and never clean
            mask = np.zeros(shape, bool)
        # The tracker's clock is in whole milliseconds and must increase (frames < 1 ms apart).
        last_ms = max(frame.stamp_ns // 1_000_000, last_ms + 1)
        detections = detector.detect(frame.color, last_ms)
        arms = assign_arms(detections, shape[1], config.mirror, last_seen)
        hands = [None if d is None else hand_state(d, frame.depth, frame.intrinsics, config.depth_window) for d in arms]
        last_seen = (
            hands[0].landmarks if hands[0] is not None else last_seen[0],
            hands[1].landmarks if hands[1] is not None else last_seen[1],
        )
        covered = sum(_covered(mask, h, config.clean_margin_px) for h in hands if h is not None)
        clean = bool(mask.any()) and covered == 0
        if clean or clean_mask is None:
            clean_mask, clean_depth = mask, frame.depth
        contact = [False, False]
        assert clean_depth is not None
        near = ndimage.binary_dilation(clean_mask, iterations=config.contact_radius_px)
        for a, hand in enumerate(hands):
            if hand is None:
                continue
            u, v = (round(float(c)) for c in hand.grasp_px)
            if not (0 <= v < shape[0] and 0 <= u < shape[1] and near[v, u]):
                continue
            surface = depth_at(clean_depth, u, v, config.depth_window, clean_mask)
            tip = float(hand.grasp_point[2])
            contact[a] = bool(np.isfinite(surface) and np.isfinite(tip) and surface - tip <= config.contact_height)
        out.append(
            FrameObservation(
                frame.frame_number, frame.stamp_ns, hands, contact, clean, covered, np.packbits(mask), shape
            )
        )
    if not out:
        raise ExtractionError("the recording holds no frames")
    return out


def _state_changes(obs: list[FrameObservation], arm: int, config: ExtractionConfig) -> list[tuple[str, int]]:
    """Debounced (kind, first frame) changes of one arm's closed/open state."""
    closed = False
    run_start: int | None = None
    run = 0
    changes: list[tuple[str, int]] = []
    for i, o in enumerate(obs):
        hand = o.hands[arm]
        if hand is None:
            run_start, run = None, 0
            continue
        wants = (hand.pinch > config.open_pinch) if closed else (hand.pinch < config.close_pinch and o.contact[arm])
        if not wants:
            run_start, run = None, 0
            continue
        run_start = i if run_start is None else run_start
        run += 1
        if run >= config.min_frames:
            changes.append(("release" if closed else "grasp", run_start))
            closed, run_start, run = not closed, None, 0
    if closed:
        raise ExtractionError(
            f"{ARMS[arm]} arm grasps at frame {obs[changes[-1][1]].index} and never releases: "
            "the recording may have stopped too early, or the pinch never opened past open_pinch"
        )
    return changes


def _clean_before(obs: list[FrameObservation], i: int, since: int) -> int:
    """The latest clean frame in (since, i]; if the hands covered the cloth all that time (the
    cloth may have changed before `since`, the previous event), the least covered, latest one."""
    window = range(i, since, -1)
    return next((j for j in window if obs[j].clean), min(window, key=lambda j: obs[j].covered))


def _clean_after(obs: list[FrameObservation], i: int, until: int) -> int:
    """The first clean frame in [i, until); else the least covered, earliest one."""
    window = range(i, max(until, i + 1))
    return next((j for j in window if obs[j].clean), min(window, key=lambda j: obs[j].covered))


def _project_grasp(
    obs: FrameObservation, depth: np.ndarray, k: np.ndarray, px: np.ndarray, window: int
) -> tuple[np.ndarray, np.ndarray, str]:
    """The cloth point under pixel `px` in a clean frame (snapped onto the cloth when just off it)."""
    mask = obs.mask
    u, v = float(px[0]), float(px[1])
    z = depth_at(depth, u, v, window, mask)
    how = "clean-frame depth under the grasp pixel"
    if not np.isfinite(z):
        ys, xs = np.nonzero(mask & (depth > 0))
        if xs.size == 0:
            raise ExtractionError(f"frame {obs.index}: no cloth with valid depth to project a grasp onto")
        j = int(np.argmin((xs - u) ** 2 + (ys - v) ** 2))
        u, v = float(xs[j]), float(ys[j])
        z = depth_at(depth, u, v, window, mask)
        how = f"snapped to the nearest cloth pixel ({np.hypot(u - px[0], v - px[1]):.1f} px away)"
    return np.array([u, v], np.float32), backproject(u, v, z, k), how


def extract_events(
    obs: list[FrameObservation], read_frame, config: ExtractionConfig = ExtractionConfig()
) -> list[Event]:
    """Pass 2: grasp/release events with positions; `read_frame(i)` returns frame i (RGBDFrame)."""
    if not any(h is not None for o in obs for h in o.hands):
        raise ExtractionError("no hand was detected in any frame: is the demonstrator in view of the camera?")
    events: list[Event] = []
    changes = sorted((i, arm, kind) for arm in (0, 1) for kind, i in _state_changes(obs, arm, config))
    frames = [i for i, _, _ in changes]
    for i, arm, kind in changes:
        hand = obs[i].hands[arm]
        assert hand is not None
        evidence: dict[str, object] = {
            "pinch": round(hand.pinch, 4),
            "contact": obs[i].contact[arm],
            "score": round(hand.score, 4),
        }
        if kind == "grasp":
            j = _clean_before(obs, i, max((f for f in frames if f < i), default=-1))
            frame = read_frame(j)
            px, pos, how = _project_grasp(obs[j], frame.depth, frame.intrinsics, hand.grasp_px, config.depth_window)
        else:
            j = _clean_after(obs, i, min((f for f in frames if f > i), default=len(obs)))
            px, pos, how = hand.grasp_px, hand.grasp_point, "the hand's grasp point (depth at the fingertips)"
            if not np.isfinite(pos).all():
                frame = read_frame(j)
                px, pos, how = _project_grasp(obs[j], frame.depth, frame.intrinsics, hand.grasp_px, config.depth_window)
                how = "no fingertip depth: " + how + " in the next clean frame"
        evidence["position_from"] = how
        pixel = [round(float(c), 2) for c in px]
        events.append(Event(arm, kind, obs[i].index, obs[j].index, pixel, [round(float(c), 5) for c in pos], evidence))
    if not events:
        raise ExtractionError(
            "hands were seen but never grasped the cloth (no pinch below close_pinch while touching it)"
        )
    return sorted(events, key=lambda e: (e.frame, e.arm))


@dataclass
class KeyframePlan:
    """One keyframe before images are attached: which recorded frame shows it, and the keypose."""

    frame: int  # recording frame of the event (Demonstration.frame_index)
    image_frame: int  # recording frame whose images are the observation
    keypose: np.ndarray  # [2, 4]
    events: list[int]  # [2] KeyframeEvent


def plan_keyframes(
    events: list[Event], num_frames: int, config: ExtractionConfig = ExtractionConfig()
) -> list[KeyframePlan]:
    """Start at home, one keyframe per event (both arms' events within `sync_frames` share it), a
    retraction keyframe after a release that another grasp of the same arm follows, home at the end."""
    home = np.array([[*config.home[0], 1.0], [*config.home[1], 1.0]], np.float32)
    pose = home.copy()
    plans = [KeyframePlan(0, 0, pose.copy(), [KeyframeEvent.MOTION] * 2)]
    for n, event in enumerate(events):
        prev = events[n - 1] if n else None
        if (
            prev is not None
            and prev.arm != event.arm
            and event.frame - prev.frame <= config.sync_frames
            and (plans[-1].events[event.arm] == KeyframeEvent.MOTION)
        ):
            plan = plans[-1]  # both arms act together: one keyframe holds both events
        else:
            plan = KeyframePlan(event.frame, event.image_frame, pose.copy(), [KeyframeEvent.MOTION] * 2)
            plans.append(plan)
        closed = event.kind == "grasp"
        pose[event.arm] = [*event.position, 0.0 if closed else 1.0]
        plan.keypose[event.arm] = pose[event.arm]
        plan.events[event.arm] = KeyframeEvent.GRASP if closed else KeyframeEvent.RELEASE
        later = [e for e in events[n + 1 :] if e.arm == event.arm]
        if not closed and later:
            # intermediate retraction: lift the released arm before its next grasp
            nxt = min(e.frame for e in events[n + 1 :])
            frame = min(event.frame + config.retract_frames, max(nxt - 1, event.frame))
            if frame > event.frame and nxt - event.frame > config.sync_frames:
                pose = pose.copy()
                pose[event.arm, 2] -= config.retract_height
                plans.append(KeyframePlan(frame, event.image_frame, pose.copy(), [KeyframeEvent.MOTION] * 2))
    last = num_frames - 1
    plans.append(
        KeyframePlan(max(last, plans[-1].frame), max(last, plans[-1].image_frame), home, [KeyframeEvent.TERMINAL] * 2)
    )
    return plans


def build_demonstration(
    plans: list[KeyframePlan], frames_by_index: dict[int, RGBDFrame], masks: dict[int, np.ndarray], name: str = ""
) -> Demonstration:
    """Attach each keyframe's observation (colour, depth, cloth mask of its image frame)."""
    try:
        first = frames_by_index[plans[0].image_frame]
        return Demonstration(
            color=np.stack([frames_by_index[p.image_frame].color for p in plans]),
            depth=np.stack([frames_by_index[p.image_frame].depth for p in plans]),
            mask=np.stack([masks[p.image_frame] for p in plans]),
            intrinsics=first.intrinsics.astype(np.float32),
            keypose=np.stack([p.keypose for p in plans]).astype(np.float32),
            events=np.array([p.events for p in plans], np.uint8),
            frame_index=np.array([p.frame for p in plans], np.int32),
            name=name,
            meta={"source": "human demonstration", "image_frames": [p.image_frame for p in plans]},
        ).validate()
    except KeyError as exc:
        raise ExtractionError(f"keyframe image frame {exc} was not read from the recording") from exc


def events_json(events: list[Event], frames: int, config: ExtractionConfig, **details: object) -> dict:
    """Every event with its evidence, the configuration used, and what the source adds (`details`)."""
    return {
        "format": "instant_fold_demo.events/1",
        "frames": frames,
        "warnings": [],
        **details,
        "config": asdict(config),
        "events": [event_json(e) for e in events],
    }


def event_json(event: Event) -> dict:
    """One event as the events JSON holds it (arm by name)."""
    return {**asdict(event), "arm": ARMS[event.arm]}


def hand_details(obs: list[FrameObservation]) -> dict:
    """What hand tracking adds to the events JSON: clean frames, covered pixels, per-arm visibility."""
    seen = [sum(o.hands[a] is not None for o in obs) for a in (0, 1)]
    return {
        "clean_frames": sum(o.clean for o in obs),
        "covered_pixels": [o.covered for o in obs],
        "hand_frames": {ARMS[a]: seen[a] for a in (0, 1)},
        "warnings": [f"the {ARMS[a]} hand was never detected" for a in (0, 1) if seen[a] == 0],
    }


def events_from_arm_states(states: np.ndarray, intrinsics: np.ndarray, source: str) -> list[Event]:
    """Grasp and release events of a recorded robot: [T, 2, 4] arm states per frame (camera frame,
    openness 1 open / 0 closed, closed below 0.5, the simulator's and the dataset's rule).

    For a demonstration the robot itself performed (the simulated arms, or a teleoperated robot):
    there is no hand to track, and the gripper state needs no inference. An event is the first
    frame of a new open/closed state; its keypose is where the gripper was then, and that frame's
    image is the keyframe's observation (as `instant_fold_core.demonstration.from_episode` does
    for the simulator's own demonstrations)."""
    closed = gripper_closed(states[:, :, 3])
    if closed[0].any():
        raise ExtractionError(f"the {ARMS[int(np.argmax(closed[0]))]} gripper is closed in the first frame")
    events = []
    for t, arm in zip(*np.nonzero(closed[1:] != closed[:-1]), strict=True):
        frame = int(t) + 1
        position = states[frame, arm, :3]
        evidence = {
            "openness": [round(float(states[frame - 1, arm, 3]), 4), round(float(states[frame, arm, 3]), 4)],
            "position_from": f"the recorded arm state ({source}) at the event's frame",
        }
        pixel = [round(float(c), 2) for c in project(position, intrinsics)]
        kind = "grasp" if closed[frame, arm] else "release"
        events.append(Event(int(arm), kind, frame, frame, pixel, [round(float(c), 5) for c in position], evidence))
    if not events:
        raise ExtractionError(f"the grippers never close in {source}: nothing was grasped")
    for arm in (0, 1):
        if closed[-1, arm]:
            last = max(e.frame for e in events if e.arm == arm)
            raise ExtractionError(
                f"{ARMS[arm]} arm grasps at frame {last} and never releases: the recording may have stopped too early"
            )
    return sorted(events, key=lambda e: (e.frame, e.arm))
