"""Registration replay: a policy without training that performs a demonstration's grasps and
releases on the current cloth, carried over by a rigid planar registration (issue 28).

Why: a rigid 2D registration of a demonstration keyframe's cloth tokens onto the current ones maps
the demonstrated grasp to within 2.5 cm on average, against 10.7 cm for the learned policy. This
runner makes that a policy the policy server can serve (`PolicyServer.from_checkpoints` loads it for
a directory whose `config.json` says `"variant": "registration_replay"`), so the closed-loop
benchmark measures what the registration alone achieves.

What it does, per query (`predict`), from the measured arm state it is given, never from time:

- The demonstration's arm states [K, 2, 4] give its events: an arm GRASPs at keyframe k when it
  is closed there and was open at k - 1 (or is closed at k = 0), RELEASEs when it opens again.
  Keyframes with events are *stages*, executed in order; the arms of one stage switch their
  grippers together (a two-handed fold grasps, and lets go, on one frame, as in the demonstration).
- Grasp: the demonstration keyframe of the grasp (the cloth as the demonstrator found it) is
  registered onto the current tokens (`register_planar`), and the demonstrated gripper position is
  mapped through it: x, y by the registration, z as the demonstrated height above the cloth (the
  gripper's z, less the mean depth of the `depth_neighbours` demonstration tokens nearest it in
  x, y, plus the same mean over the current tokens nearest the mapped point; the table's distance
  from the camera differs between starts). The registration is renewed on every query until the
  arm is straight above its target (the cloth may still settle from the previous fold), then kept.
  The arm rises to the approach height if it is lower, moves above the target, descends onto it.
- Release: the demonstration's cloth at release is already folded, so it is not registered;
  the release position is mapped through the transform (and depth offset) of that arm's grasp,
  and the arm carries the cloth there along the scripted carrying arc.
- The gripper switches once every arm of the stage is within `reach_tolerance_m` of its target,
  in a chunk that holds the arms there; the stage is over when the measured openness shows the
  switch. An arm outside the current stage holds still (raised to its approach height once it has
  let go), and goes home once it has no event left (the demonstration's early retraction); an
  arm without any event never moves before the end.
- After the last stage both arms go home, open: the demonstration's terminal keypose (the policy
  server's `home`), which is also the chunk's `keypose`, so the fold loop takes over the move home
  (`FoldLoop.steer`).

Motion: the simulator's scripted pick and place (`instant_fold_core.pick_place.SCRIPTED`) in real
metres (x `SIM_TO_REAL`): approach 8.5 cm above the target, release where the demonstration let go
(its scripts release 1.7 cm above the target), free moves at 0.85 m/s, carrying at 0.51 m/s along the
half-sine arc (apex half the carried distance, 4.5-34 cm), two arms carrying together arrive
together. "Up" is -z: the camera looks down at the table. Each chunk samples the remaining path at
`speed x step_duration` per step, so a path ends exactly at its target.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np
import torch

from instant_fold_core.checkpoint import CONFIG_FILE, read_json
from instant_fold_core.config import at_least_zero
from instant_fold_core.contracts import ActionChunk, gripper_closed
from instant_fold_core.errors import ConfigError
from instant_fold_core.pick_place import SCRIPTED, SIM_TO_REAL
from instant_fold_core.registration import (
    DEFAULT_FEATURE_WEIGHT,
    PlanarRigid,
    RegistrationTrack,
    local_shift,
    register_planar,
)
from instant_fold_learning.policy.inference import Array, PolicyInputError, _array, checked_cloth

#: `config.json` "variant" of a registration-replay checkpoint directory.
VARIANT = "registration_replay"

#: The scripted pick and place in real metres (the camera frame).
MOTION = SCRIPTED.scaled(SIM_TO_REAL)

#: Upwards in the camera optical frame (the camera looks down at the table).
UP = np.array([0.0, 0.0, -1.0])

#: Points along one carrying arc (the path the chunks follow; they sample it at the carrying speed).
ARC_POINTS = 16


@dataclass(frozen=True)
class ReplayConfig:
    """What a registration-replay "checkpoint" (`config.json`) sets; duck-typed where the policy
    server reads a policy's configuration (`horizon`, `execute_steps`, `conditioning`, tokens)."""

    variant: str = VARIANT
    conditioning: str = "demo"
    horizon: int = 8  # chunk steps
    execute_steps: int = 4  # steps executed before the next query
    step_duration: float = 0.05  # s per step unless the deployment says otherwise (the simulator's 20 fps)
    num_cloth_tokens: int = 64
    cloth_feature_dim: int = 64
    reach_tolerance_m: float = 0.01  # this close to its target an arm has arrived
    depth_neighbours: int = 4  # tokens averaged for the cloth's depth under a point
    feature_weight: float = DEFAULT_FEATURE_WEIGHT  # registration: m² per squared feature distance (0: geometry only)
    rotations: int = 16  # registration start angles (one query: affordable; finds turns of round cloths)
    iterations: int = 12  # registration ICP iterations
    grasp_refinement_m: float = (
        0.0  # window of the local refinement of a mapped grasp (`registration.local_shift`; 0: off)
    )

    def __post_init__(self) -> None:
        if self.variant != VARIANT:
            raise ConfigError(f"variant: expected {VARIANT!r}, got {self.variant!r}")
        if self.conditioning != "demo":
            raise ConfigError(f"conditioning: registration replay replays a demonstration, got {self.conditioning!r}")
        if not 1 <= self.execute_steps <= self.horizon:
            raise ConfigError(f"execute_steps: must be in [1, horizon={self.horizon}], got {self.execute_steps}")
        positive = ("step_duration", "num_cloth_tokens", "cloth_feature_dim", "reach_tolerance_m", "depth_neighbours")
        for name in (*positive, "rotations"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name}: must be positive, got {getattr(self, name)}")
        if self.feature_weight < 0 or self.iterations < 0:
            raise ConfigError("feature_weight and iterations must not be negative")
        at_least_zero("grasp_refinement_m", self.grasp_refinement_m)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReplayConfig:
        """From `config.json`'s object; an unknown key is a `ConfigError` (a typo never goes unnoticed)."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"registration replay config: unknown keys {unknown} (known: {sorted(known)})")
        return cls(**data)


def is_replay_checkpoint(directory: str | Path) -> bool:
    """True when `directory/config.json` names the registration-replay variant."""
    path = Path(directory) / CONFIG_FILE
    return path.is_file() and read_json(directory, Path(CONFIG_FILE).stem).get("variant") == VARIANT


def replay_id(directory: str | Path) -> str:
    """Short, stable identifier of a registration-replay directory: the hash of its configuration
    (what `checkpoint_id` is for a learned checkpoint, which also hashes the weights)."""
    config = read_json(directory, Path(CONFIG_FILE).stem)
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:12]


class Event(Enum):
    """A gripper event of one arm at a demonstration keyframe."""

    GRASP = "grasp"
    RELEASE = "release"


@dataclass(frozen=True)
class Stage:
    """One demonstration keyframe with gripper events: which arm does what there."""

    keyframe: int
    events: dict[int, Event]  # arm (0 left, 1 right) -> event


def cloth_arrays(
    cfg: ReplayConfig, prefix: str, positions: Array, features: Array, valid: Array | None, lead: tuple[int | None, ...]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`checked_cloth`, positions in float64 and features in float32 (what the registration takes)."""
    pos, feat, val = checked_cloth(cfg, prefix, positions, features, valid, lead)
    return pos.astype(np.float64), feat.astype(np.float32), val


def demo_stages(arm_state: np.ndarray) -> list[Stage]:
    """The stages of a demonstration's arm states [K, 2, 4] (`gripper_closed`)."""
    closed = gripper_closed(arm_state[:, :, 3])
    before = np.concatenate([np.zeros((1, 2), bool), closed[:-1]])
    stages = []
    for k in np.flatnonzero((closed != before).any(1)):
        events = {a: Event.GRASP if closed[k, a] else Event.RELEASE for a in range(2) if closed[k, a] != before[k, a]}
        stages.append(Stage(int(k), events))
    return stages


def registered_features(
    cfg: ReplayConfig,
    demo: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    k: int,
    cloth: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Keyframe `k`'s and the current cloth's token features where the registration weighs them
    (`cfg.feature_weight` > 0), else (None, None): the rigid fit and its local refinement agree."""
    return (demo[1][k], cloth[1]) if cfg.feature_weight > 0 else (None, None)


def register_keyframe(
    cfg: ReplayConfig,
    demo: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    k: int,
    cloth: tuple[np.ndarray, np.ndarray, np.ndarray],
    track: RegistrationTrack | None = None,
) -> PlanarRigid:
    """The rigid planar registration of demonstration keyframe `k` (`demo`: positions, features,
    validity, arm states of all keyframes) onto the current `cloth` (positions, features, validity),
    continued from the fold's previous registrations when its `track` is given."""
    demo_pos, _, demo_val, _ = demo
    pos, _, val = cloth
    demo_feat, feat = registered_features(cfg, demo, k, cloth)
    register = register_planar if track is None else functools.partial(track.register, k)
    return register(
        demo_pos[k][None],
        demo_val[k][None],
        pos[None],
        val[None],
        None if demo_feat is None else demo_feat[None],
        None if feat is None else feat[None],
        iterations=cfg.iterations,
        rotations=cfg.rotations,
        feature_weight=cfg.feature_weight,
    )


def cloth_depth(positions: np.ndarray, valid: np.ndarray, point: np.ndarray, neighbours: int) -> float:
    """Mean depth of the `neighbours` valid tokens nearest `point` in x, y."""
    pts = positions[valid]
    nearest = np.argsort(np.linalg.norm(pts[:, :2] - point[:2], axis=1))[:neighbours]
    return float(pts[nearest, 2].mean())


def map_grasp(
    cfg: ReplayConfig,
    transform: PlanarRigid,
    demo: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    k: int,
    arm: int,
    cloth: tuple[np.ndarray, np.ndarray, np.ndarray],
    shift_xy: np.ndarray | None = None,
) -> tuple[np.ndarray, float]:
    """`arm`'s demonstrated position at keyframe `k` carried onto the current cloth: x, y through
    `transform` and then moved by `shift_xy` when given (a keypoint carry, `keypoints.mapping.
    keypoint_shift`), else, with `cfg.grasp_refinement_m`, by the local refinement of that fit
    around the grasp (`local_shift`); z as the demonstrated height above the cloth; and the depth
    offset (current minus demonstration cloth depth there) that the arm's release is carried with
    (the release itself goes through `transform`: where a part is laid down is read from the
    garment as a whole)."""
    demo_point = demo[3][k, arm, :3]
    mapped = transform.apply_point(demo_point)
    if shift_xy is not None:
        mapped[:2] += shift_xy
    elif cfg.grasp_refinement_m > 0:
        demo_feat, feat = registered_features(cfg, demo, k, cloth)
        mapped[:2] += local_shift(
            transform,
            demo[0][k],
            demo[2][k],
            cloth[0],
            cloth[2],
            demo_point,
            cfg.grasp_refinement_m,
            source_features=demo_feat,
            target_features=feat,
            feature_weight=cfg.feature_weight,
        )
    n = cfg.depth_neighbours
    offset = cloth_depth(cloth[0], cloth[2], mapped, n) - cloth_depth(demo[0][k], demo[2][k], demo_point, n)
    return np.array([mapped[0], mapped[1], demo_point[2] + offset]), offset


def map_release(transform: PlanarRigid, depth_offset: float, demo_point: np.ndarray) -> np.ndarray:
    """A demonstrated release position carried through its grasp's registration and depth offset
    (the demonstration's cloth at a release is folded: it is not registered itself)."""
    mapped = transform.apply_point(demo_point)
    return np.array([mapped[0], mapped[1], demo_point[2] + depth_offset])


@dataclass
class _Arm:
    """What the walker remembers about one arm during a fold."""

    target: np.ndarray | None = None  # [3] the current stage's target (None: not computed yet)
    frozen: bool = False  # the target is no longer renewed (the arm is above it, or carrying)
    transform: PlanarRigid | None = None  # the registration of its last grasp
    depth_offset: float = 0.0  # current minus demonstration cloth depth at that grasp
    arc: np.ndarray | None = None  # [ARC_POINTS + 1, 3] the carrying arc of its release stage
    level: float | None = None  # camera z of its last event (the cloth level it approached)


@dataclass
class _Plan:
    """Per arm: the waypoints to follow, the speed, the openness to command and to report."""

    paths: list[np.ndarray] = field(default_factory=list)  # per arm [W, 3]
    speeds: list[float] = field(default_factory=list)
    openness: np.ndarray = field(default_factory=lambda: np.ones(2))
    keypose: np.ndarray = field(default_factory=lambda: np.zeros((2, 4)))


def follow(start: np.ndarray, waypoints: np.ndarray, step: float, horizon: int) -> np.ndarray:
    """[horizon, 3] points along the polyline start -> waypoints, `step` apart (arc length), the
    last waypoint repeated once reached."""
    points = np.vstack([start[None], waypoints])
    lengths = np.linalg.norm(np.diff(points, axis=0), axis=1)
    cumulative = np.concatenate([[0.0], np.cumsum(lengths)])
    s = np.minimum(step * np.arange(1, horizon + 1), cumulative[-1])
    out = np.empty((horizon, 3))
    for i in range(3):
        out[:, i] = np.interp(s, cumulative, points[:, i])
    return out


def _path_length(start: np.ndarray, waypoints: np.ndarray) -> float:
    return float(np.linalg.norm(np.diff(np.vstack([start[None], waypoints]), axis=0), axis=1).sum())


def _remaining_arc(position: np.ndarray, arc: np.ndarray) -> np.ndarray:
    """The arc's points [W, 3] after the segment of `arc` [A, 3] closest to `position`."""
    a, b = arc[:-1], arc[1:]
    d = b - a
    t = np.clip(np.einsum("ij,ij->i", position - a, d) / np.maximum(np.einsum("ij,ij->i", d, d), 1e-12), 0, 1)
    distance = np.linalg.norm(a + t[:, None] * d - position, axis=1)
    return arc[int(np.argmin(distance)) + 1 :]


class RegistrationReplay:
    """Stateful registration-replay runner with `PolicyRunner`'s interface (load a demonstration,
    answer observation queries with ABSOLUTE chunks). The walker's progress is reset by every
    `load_demonstration` and advanced only by the measured arm states `predict` receives."""

    #: Loading restarts the walker: a server loads even the demonstration it already has.
    RESTARTS_ON_LOAD = True

    def __init__(self, cfg: ReplayConfig | None = None, step_duration: float | None = None) -> None:
        """`step_duration`: seconds between chunk steps (None: the config's); speeds are in m/s, so
        the step length follows it."""
        self.cfg = cfg or ReplayConfig()
        self.step_duration = self.cfg.step_duration if step_duration is None else float(step_duration)
        if not self.step_duration > 0:
            raise ConfigError(f"step_duration: must be positive, got {self.step_duration}")
        self._demo: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
        self._stages: list[Stage] = []
        self._stage = 0
        self._switched = False  # the current stage's gripper switch was commanded
        self._arms = [_Arm(), _Arm()]
        self._track = RegistrationTrack()

    @classmethod
    def from_checkpoint(cls, directory: str | Path, step_duration: float | None = None) -> RegistrationReplay:
        """From a directory whose `config.json` holds a `ReplayConfig` (`CheckpointError` when it is
        missing or not JSON, `ConfigError` when its content is wrong)."""
        return cls(ReplayConfig.from_dict(read_json(directory, Path(CONFIG_FILE).stem)), step_duration)

    # -- conditioning --------------------------------------------------------------------------

    def load_demonstration(
        self, cloth_positions: Array, cloth_features: Array, arm_state: Array, cloth_valid: Array | None = None
    ) -> None:
        """Keep the K keyframes ([K, N, 3], [K, N, D], [K, 2, 4], [K, N]) and restart the walker."""
        pos, feat, val = cloth_arrays(self.cfg, "demo.", cloth_positions, cloth_features, cloth_valid, (None,))
        if pos.shape[0] == 0:
            raise PolicyInputError("demo: needs at least one keyframe")
        state = _array("demo.arm_state", arm_state, (pos.shape[0], 2, 4)).astype(np.float64)
        self._demo = (pos, feat, val, state)
        self._stages = demo_stages(state)
        self._stage, self._switched = 0, False
        self._arms = [_Arm(), _Arm()]
        self._track = RegistrationTrack()

    def load_instruction(self, text: str) -> None:
        raise PolicyInputError(f"registration replay replays a demonstration and reads no instruction ({text!r})")

    def clear_demonstration(self) -> None:
        self._demo = None

    @property
    def has_demonstration(self) -> bool:
        return self._demo is not None

    @property
    def stage(self) -> int:
        """Index of the stage being executed (== number of stages once only the move home is left)."""
        return self._stage

    @property
    def stages(self) -> list[Stage]:
        return list(self._stages)

    # -- queries -------------------------------------------------------------------------------

    @torch.no_grad()
    def predict(
        self,
        cloth_positions: Array,
        cloth_features: Array,
        arm_state: Array,
        cloth_valid: Array | None = None,
        generator: torch.Generator | None = None,
    ) -> ActionChunk:
        """One query: [N, 3] positions, [N, D] features, [2, 4] measured arm states -> an ABSOLUTE
        chunk; `generator` is accepted for the runner interface (nothing here is random). Its
        registrations continue the fold's previous ones (`RegistrationTrack`, started afresh by every
        `load_demonstration`)."""
        if self._demo is None:
            raise PolicyInputError("no demonstration loaded: call load_demonstration() first")
        cloth = cloth_arrays(self.cfg, "", cloth_positions, cloth_features, cloth_valid, ())
        state = _array("arm_state", arm_state, (2, 4)).astype(np.float64)
        while self._stage < len(self._stages) and self._stage_done(state):
            self._advance()
        plan = self._home(state) if self._stage == len(self._stages) else self._execute(state, cloth)
        return self._chunk(state, plan)

    def _stage_done(self, state: np.ndarray) -> bool:
        """The current stage's switch was commanded and every arm of it measures the new openness."""
        events = self._stages[self._stage].events
        return self._switched and all(gripper_closed(state[a, 3]) == (e is Event.GRASP) for a, e in events.items())

    def _advance(self) -> None:
        """On to the next stage: the arms of the finished one remember the level they worked at."""
        for a in self._stages[self._stage].events:
            arm = self._arms[a]
            assert arm.target is not None, "a stage is done only after its switch, which needs targets"
            arm.level = float(arm.target[2])
            arm.target, arm.frozen, arm.arc = None, False, None
        self._stage, self._switched = self._stage + 1, False

    def _execute(self, state: np.ndarray, cloth: tuple[np.ndarray, np.ndarray, np.ndarray]) -> _Plan:
        stage = self._stages[self._stage]
        if any(e is Event.GRASP for e in stage.events.values()):
            self._aim_grasps(stage, state, cloth)
        for a, event in stage.events.items():
            if event is Event.RELEASE and self._arms[a].target is None:
                self._aim_release(stage, a, state)
        arrived = all(
            np.linalg.norm(state[a, :3] - self._arms[a].target) <= self.cfg.reach_tolerance_m for a in stage.events
        )
        plan = _Plan(keypose=np.concatenate([state[:, :3], (~gripper_closed(state[:, 3:])).astype(float)], 1))
        plan.openness = plan.keypose[:, 3].copy()
        for a in range(2):
            if a in stage.events:
                target = self._arms[a].target
                assert target is not None
                after = 0.0 if stage.events[a] is Event.GRASP else 1.0
                plan.keypose[a] = [*target, after]
                if arrived:
                    path, speed = target[None], MOTION.move_speed
                    plan.openness[a] = after
                elif stage.events[a] is Event.GRASP:
                    path, speed = self._approach(state[a, :3], target), MOTION.move_speed
                else:
                    arc = self._arms[a].arc
                    assert arc is not None
                    path, speed = _remaining_arc(state[a, :3], arc), MOTION.arc_speed
            else:
                path, speed = self._idle(a, state[a])
            plan.paths.append(path)
            plan.speeds.append(speed)
        self._switched = self._switched or arrived
        carrying = [a for a, e in stage.events.items() if e is Event.RELEASE and not arrived]
        if len(carrying) == 2:  # carried together: each at the pace that makes both arrive together
            lengths = [_path_length(state[a, :3], plan.paths[a]) for a in carrying]
            for a, length in zip(carrying, lengths, strict=True):
                plan.speeds[a] = MOTION.arc_speed * length / max(max(lengths), 1e-9)
        return plan

    def _aim_grasps(self, stage: Stage, state: np.ndarray, cloth: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
        """Register the grasp keyframe onto the current cloth (unless every grasping arm's target is
        frozen) and map the demonstrated grasp positions through it."""
        grasping = [a for a, e in stage.events.items() if e is Event.GRASP and not self._arms[a].frozen]
        if not grasping:
            return
        assert self._demo is not None
        transform = register_keyframe(self.cfg, self._demo, stage.keyframe, cloth, self._track)
        for a in grasping:
            arm = self._arms[a]
            arm.target, arm.depth_offset = map_grasp(self.cfg, transform, self._demo, stage.keyframe, a, cloth)
            arm.transform = transform
            arm.frozen = bool(np.linalg.norm(state[a, :2] - arm.target[:2]) <= self.cfg.reach_tolerance_m)

    def _aim_release(self, stage: Stage, a: int, state: np.ndarray) -> None:
        """Map the demonstrated release position through the arm's grasp registration; plan the
        carrying arc from where the arm is."""
        assert self._demo is not None
        arm = self._arms[a]
        assert arm.transform is not None, "stages come from openness changes: a release follows a grasp"
        arm.target = map_release(arm.transform, arm.depth_offset, self._demo[3][stage.keyframe, a, :3])
        start = state[a, :3].copy()
        arm.arc = np.array([MOTION.arc_point(start, arm.target, j / ARC_POINTS, UP) for j in range(ARC_POINTS + 1)])
        arm.frozen = True

    def _approach(self, position: np.ndarray, target: np.ndarray) -> np.ndarray:
        """Waypoints onto `target`: straight down once above it, else (rise to the approach
        height,) above it, onto it."""
        if np.linalg.norm(position[:2] - target[:2]) <= self.cfg.reach_tolerance_m:
            return target[None]
        above = target + MOTION.hover * UP
        waypoints = [above, target]
        if position[2] > above[2] + self.cfg.reach_tolerance_m:  # lower than the approach height
            waypoints.insert(0, np.array([position[0], position[1], above[2]]))
        return np.array(waypoints)

    def _idle(self, a: int, state: np.ndarray) -> tuple[np.ndarray, float]:
        """An arm outside the current stage: holds (cloth in hand, or never moved in the
        demonstration); once it has let go, rises to its approach height; with no event left, goes home."""
        position, arm = state[:3], self._arms[a]
        if gripper_closed(state[3]) or arm.level is None:
            return position[None], MOTION.move_speed
        waypoints = []
        raised = arm.level - MOTION.hover  # camera z of the approach height over its last event
        if position[2] > raised + self.cfg.reach_tolerance_m:
            waypoints.append(np.array([position[0], position[1], raised]))
        if not any(a in s.events for s in self._stages[self._stage :]):
            assert self._demo is not None
            waypoints.append(self._demo[3][-1, a, :3])
        return (np.array(waypoints) if waypoints else position[None]), MOTION.move_speed

    def _home(self, state: np.ndarray) -> _Plan:
        """Both arms to the demonstration's terminal positions, open, raised first if low."""
        assert self._demo is not None
        home = self._demo[3][-1, :, :3]
        plan = _Plan(openness=np.ones(2), keypose=np.concatenate([home, np.ones((2, 1))], 1))
        for a in range(2):
            arm = self._arms[a]
            position = state[a, :3]
            waypoints = [home[a]]
            if arm.level is not None and position[2] > arm.level - MOTION.hover + self.cfg.reach_tolerance_m:
                waypoints.insert(0, np.array([position[0], position[1], arm.level - MOTION.hover]))
            plan.paths.append(np.array(waypoints))
            plan.speeds.append(MOTION.move_speed)
        return plan

    def _chunk(self, state: np.ndarray, plan: _Plan) -> ActionChunk:
        h = self.cfg.horizon
        positions = np.stack(
            [follow(state[a, :3], plan.paths[a], plan.speeds[a] * self.step_duration, h) for a in range(2)], 1
        )
        return ActionChunk(
            positions.astype(np.float32),
            np.repeat(plan.openness[None], h, 0).astype(np.float32),
            self.cfg.execute_steps,
            self.step_duration,
            keypose=plan.keypose.astype(np.float32),
        )
