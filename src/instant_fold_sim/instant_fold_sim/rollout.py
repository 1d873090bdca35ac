"""Run one folding program on one garment and record it as an `Episode`.

`run_episode(garment, mode, variant, seed, config)` is the whole pipeline: domain
randomisation (resampled until the garment lies inside the camera view), drop and settle,
scripted execution of the program with both kinematic grippers, per-frame rendering, oracle
errors per subaction, keyframes, and conversion of everything to the camera optical frame in
real-world metres (simulation space times `obs_scale`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from instant_fold_core.config import Presets
from instant_fold_core.contracts import gripper_closed
from instant_fold_core.dataset.keyframes import extract_keyframes
from instant_fold_core.dataset.schema import KEYPOINT_NAMES, Episode
from instant_fold_core.errors import ConfigError, InstantFoldError
from instant_fold_core.pick_place import SCRIPTED, SIM_TO_REAL

from .garments import GarmentMesh
from .keypoints import detect_keypoints
from .programs import FoldingMode, PickPlace, Subaction, random_deformation_program
from .randomization import DRRanges, Randomization, initial_layout, sample_randomization
from .render import Frame, render
from .scene import ClothScene, ClothSimConfig

KP_INDEX = {name: i for i, name in enumerate(KEYPOINT_NAMES)}


@dataclass
class MotionConfig:
    """Scripted gripper motion (simulation-space metres, seconds)."""

    hover: float = SCRIPTED.hover  # approach / retract height above pick and place points
    place_height: float = SCRIPTED.place_height  # release this far above the target
    move_speed: float = SCRIPTED.move_speed  # free-space moves, m/s
    arc_speed: float = SCRIPTED.arc_speed  # carrying cloth along the fold arc, m/s
    descend_frames: int = 3
    release_frames: int = 3  # frames holding still after a release so the cloth lands
    min_arm_distance: float = 0.35  # closer pick/place targets force sequential execution
    home: tuple[tuple[float, float, float], tuple[float, float, float]] = ((-1.3, -0.3, 0.5), (1.3, -0.3, 0.5))
    start_jitter: float = 0.15  # initial gripper states are sampled around home
    final_settle_frames: int = 15
    rest_speed: float = 0.02  # cloth counts as at rest below this 95th-percentile speed (m/s)
    max_wait_frames: int = 20  # at most this long waiting for rest before a subaction


@dataclass(frozen=True)
class ExecutionNoise:
    """Seeded perturbations of a scripted execution: the oracle bank's K runs per start state.

    The paper calibrates its metrics on 20 oracle executions from the same initialisation; their
    spread comes from execution, not from the cloth's start. Our noise model (the paper does not
    give one): every pick point and every place target moves in the table plane by a Gaussian
    offset, every carrying arc lasts a random factor of its nominal duration, and every release
    holds a random number of extra frames. Simulation-space metres and frames.
    """

    grasp_sigma: float = 0.02  # pick point offset (std per axis, sim m; ~1.1 cm real)
    place_sigma: float = 0.03  # place target offset (std per axis, sim m; ~1.7 cm real)
    arc_time_spread: float = 0.2  # carrying arc lasts (1 +- spread) x nominal, uniform
    max_release_delay: int = 2  # extra frames held at a release, uniform in 0..max

    def to_dict(self) -> dict:
        return asdict(self)


class _Perturb:
    """Applies an `ExecutionNoise` from one generator (or nothing, for the scripted oracle)."""

    def __init__(self, noise: ExecutionNoise | None, rng: np.random.Generator | None) -> None:
        if (noise is None) != (rng is None):
            raise ValueError("execution noise needs both a noise model and a generator")
        self.noise, self.rng = noise, rng

    def _offset(self, sigma: float) -> np.ndarray:
        assert self.rng is not None
        return np.array([*self.rng.normal(0.0, sigma, 2), 0.0])

    def pick(self, p: np.ndarray) -> np.ndarray:
        return p if self.noise is None else p + self._offset(self.noise.grasp_sigma)

    def place(self, p: np.ndarray) -> np.ndarray:
        return p if self.noise is None else p + self._offset(self.noise.place_sigma)

    def arc(self, frames: int) -> int:
        if self.noise is None:
            return frames
        assert self.rng is not None
        spread = self.noise.arc_time_spread
        return max(2, round(frames * self.rng.uniform(1 - spread, 1 + spread)))

    def release_frames(self, frames: int) -> int:
        if self.noise is None:
            return frames
        assert self.rng is not None
        return frames + int(self.rng.integers(0, self.noise.max_release_delay + 1))


@dataclass
class GenerationConfig:
    """Everything that shapes an episode apart from garment, mode, variant and seed."""

    name: str = "paper"
    sim: ClothSimConfig = field(default_factory=ClothSimConfig)
    motion: MotionConfig = field(default_factory=MotionConfig)
    dr: DRRanges = field(default_factory=DRRanges)
    garment_spacing: float = 0.016  # procedural garment edge length (real metres)
    max_particles: int = 2000  # budget for decimated mesh garments (Newton T-shirt, OBJ)
    resolution: int = 256
    obs_scale: float = SIM_TO_REAL  # sim space -> real metres (nominal 2 m camera -> 1.13 m)
    max_layout_attempts: int = 30
    drop_settle_frames: int = 60  # cap; settling stops early once the cloth is at rest

    def to_dict(self) -> dict:
        return asdict(self)


def _cpu_small() -> GenerationConfig:
    # Coarser garments (~250-450 particles) and a cheaper solver: the CPU data preset.
    return GenerationConfig(
        name="cpu-small",
        sim=ClothSimConfig(substeps=8, iterations=8, grasp_radius=0.09),
        garment_spacing=0.035,
        max_particles=600,
        motion=MotionConfig(final_settle_frames=8),
    )


def _cpu_small_sleeve() -> GenerationConfig:
    # cpu-small whose sleeve disturbances move the sleeves alone (`DRRanges.sleeve_selection`), so
    # a start's hem stays where the garment fell: the paper's disturbance as it means it. Its own
    # name, because every store, bank and demonstration records the preset it was made with.
    config = _cpu_small()
    return replace(config, name="cpu-small-sleeve", dr=replace(config.dr, sleeve_selection="sleeve"))


#: Named generation configs (the `--preset` of data generation, the sim node's `preset`).
PRESETS: Presets[GenerationConfig] = Presets("sim")
PRESETS.register("paper", GenerationConfig)
PRESETS.register("cpu-small", _cpu_small)
PRESETS.register("cpu-small-sleeve", _cpu_small_sleeve)


def preset(name: str) -> GenerationConfig:
    """The generation preset `name` (a fresh copy); an unknown name is a ConfigError."""
    return PRESETS.get(name)


class EpisodeFailed(InstantFoldError, RuntimeError):
    """No valid initial layout could be found (the garment never fit the camera view)."""


# --------------------------------------------------------------------------- motion plans

Plan = list[tuple[np.ndarray, float]]  # per frame: target position (sim m), openness


def _segment(a: np.ndarray, b: np.ndarray, frames: int, openness: float) -> Plan:
    return [(a + (b - a) * (k / frames), openness) for k in range(1, frames + 1)]


def _frames_for(dist: float, speed: float, fps: float, minimum: int = 2) -> int:
    return max(minimum, int(np.ceil(dist / speed * fps)))


def arc_frames(pick: np.ndarray, place: np.ndarray, m: MotionConfig, fps: float) -> int:
    dist = float(np.linalg.norm(place[:2] - pick[:2]))
    return _frames_for(np.pi / 2 * max(dist, 1e-3), m.arc_speed, fps, minimum=8)


def pick_place_plan(
    start: np.ndarray,
    pick: np.ndarray,
    place: np.ndarray,
    m: MotionConfig,
    fps: float,
    n_arc: int | None = None,
    release_frames: int | None = None,
) -> Plan:
    """Approach, descend, grasp, carry along a half-circle arc (`n_arc` frames), release (held
    `release_frames`, default the config's), retract."""
    up = np.array([0.0, 0.0, 1.0])
    above = pick + m.hover * up
    plan = _segment(start, above, _frames_for(np.linalg.norm(above - start), m.move_speed, fps), 1.0)
    plan += _segment(above, pick, m.descend_frames, 1.0)
    plan.append((pick.copy(), 0.0))  # grasp
    drop = place + m.place_height * up
    n = n_arc or arc_frames(pick, place, m, fps)
    plan += [(SCRIPTED.arc_point(pick, drop, k / n, up), 0.0) for k in range(1, n + 1)]
    plan += [(drop.copy(), 1.0)] * (m.release_frames if release_frames is None else release_frames)  # let it land
    plan += _segment(drop, drop + m.hover * up, 3, 1.0)
    return plan


def _grasp_index(plan: Plan) -> int:
    return next(i for i, (_, openness) in enumerate(plan) if gripper_closed(openness))


def _hold(pos: np.ndarray, openness: float, frames: int) -> Plan:
    return [(pos.copy(), openness)] * frames


def _merge(plans: list[Plan | None], current: list[tuple[np.ndarray, float]]) -> list[list[tuple[np.ndarray, float]]]:
    """Run per-arm plans side by side; idle or finished arms hold their last command."""
    n = max(len(p) for p in plans if p)
    out = []
    for k in range(n):
        row = []
        for arm, p in enumerate(plans):
            if p:
                row.append(p[min(k, len(p) - 1)])
            else:
                row.append(current[arm])
        out.append(row)
    return out


# --------------------------------------------------------------------------- the rollout


@dataclass
class _Recorder:
    rgb: list = field(default_factory=list)
    depth: list = field(default_factory=list)
    mask: list = field(default_factory=list)
    visible: list = field(default_factory=list)
    particles: list = field(default_factory=list)
    state: list = field(default_factory=list)
    action: list = field(default_factory=list)
    render_s: float = 0.0


class FoldingRollout:
    """Executes programs on a scene while recording observations every control frame."""

    def __init__(
        self,
        scene: ClothScene,
        dr: Randomization,
        keypoint_ids: np.ndarray,
        config: GenerationConfig,
        record: bool = True,
        noise: ExecutionNoise | None = None,
        rng: np.random.Generator | None = None,
        camera: Callable[[np.ndarray], Frame] | None = None,
    ) -> None:
        """`camera`: the frame recorded for the particle positions [N, 3] now (depth in simulation
        metres); default the project's renderer. A simulator with its own camera (Isaac Lab, whose
        frames show the Frankas) passes it, so the episode, and the video and keyframe strip drawn
        from it, are what that camera saw."""
        self.scene, self.dr, self.kp_ids, self.config = scene, dr, keypoint_ids, config
        self._camera_frame = camera or (lambda pos: render(dr.camera, dr.appearance, pos, scene.garment.faces))
        self.fps = scene.config.fps
        self.rec = _Recorder()
        self.record = record
        self.perturb = _Perturb(noise, rng)
        # Both grippers' (x, y, z, openness) after every frame, first the start: always kept (it is
        # small), since the evaluation reads the grasp and release events from it.
        self.trace: list[np.ndarray] = [scene.arm_states()]
        self.oracle: list[dict] = []
        self.size = scene.garment.size() * scene.config.garment_scale

    def keypoints(self) -> np.ndarray:
        return self.scene.positions()[self.kp_ids]

    def _current(self) -> list[tuple[np.ndarray, float]]:
        return [(g.position.copy(), g.openness) for g in self.scene.grippers]

    def execute(self, rows: list[list[tuple[np.ndarray, float]]]) -> None:
        """Record, apply grasp/release commands, then step one frame per row."""
        for row in rows:
            if self.record:
                self._observe(row)
            for arm, (_, openness) in enumerate(row):
                self.scene.command_gripper(arm, openness)
            self.scene.step_frame([pos for pos, _ in row])
            self.trace.append(self.scene.arm_states())

    def _observe(self, row: list[tuple[np.ndarray, float]] | None) -> None:
        t0 = time.perf_counter()
        pos = self.scene.positions()
        frame = self._camera_frame(pos)
        r = self.rec
        r.rgb.append(frame.rgb)
        r.depth.append(frame.depth)
        r.mask.append(frame.mask)
        r.visible.append(frame.particle_visible)
        r.particles.append(pos)
        r.state.append(self.scene.arm_states())
        cmd = row if row is not None else self._current()
        r.action.append(np.array([[*p, o] for p, o in cmd]))
        r.render_s += time.perf_counter() - t0

    def wait_until_rest(self) -> None:
        """Hold the arms (recorded frames) until the cloth stops moving, so that pick points
        planned from the keypoints are still where the cloth is when the gripper arrives."""
        m = self.config.motion
        for _ in range(m.max_wait_frames):
            if self.scene.cloth_speed() < m.rest_speed:
                return
            self.execute([self._current()])

    def run_subaction(self, sub: Subaction) -> None:
        m = self.config.motion
        self.wait_until_rest()
        kps = self.keypoints()
        targets = {mv: mv.target(kps) for mv in sub.moves}
        sequential = sub.sequential or self._too_close(sub.moves, targets)
        if sequential:
            for i, mv in enumerate(sub.moves):
                plans: list[Plan | None] = [None, None]
                plans[mv.arm] = self._plan(mv, targets[mv])
                if i > 0:  # early retraction: the previous arm goes home while this one works
                    prev = sub.moves[i - 1].arm
                    if prev != mv.arm:
                        start = self.scene.grippers[prev].position
                        home = np.asarray(m.home[prev])
                        plans[prev] = _segment(
                            start, home, _frames_for(np.linalg.norm(home - start), m.move_speed, self.fps), 1.0
                        )
                self.execute(_merge(plans, self._current()))
        else:
            # Two-handed folds: both arms grasp on the same frame and carry together, so one
            # side of the garment is not folded before the other (which skews the fold).
            picks = {mv: self.scene.positions()[self.kp_ids[KP_INDEX[mv.pick]]] for mv in sub.moves}
            n_arc = self.perturb.arc(max(arc_frames(picks[mv], targets[mv], m, self.fps) for mv in sub.moves))
            plans = [None, None]
            for mv in sub.moves:
                plans[mv.arm] = self._plan(mv, targets[mv], n_arc)
            grasp_at = {arm: _grasp_index(p) for arm, p in enumerate(plans) if p}
            for arm, idx in grasp_at.items():
                wait = max(grasp_at.values()) - idx
                plans[arm][:0] = _hold(self.scene.grippers[arm].position, 1.0, wait)
            self.execute(_merge(plans, self._current()))
        kps_end = self.keypoints()
        for mv in sub.moves:
            err = float(np.linalg.norm(kps_end[KP_INDEX[mv.pick], :2] - targets[mv][:2]) / self.size)
            self.oracle.append(
                {
                    "subaction": sub.name,
                    "move": mv.label or mv.pick,
                    "keypoint": mv.pick,
                    "error": err,
                    "sequential": sequential,
                }
            )

    def _plan(self, mv: PickPlace, target: np.ndarray, n_arc: int | None = None) -> Plan:
        """`n_arc` given: a two-handed fold's shared (already perturbed) arc length."""
        m = self.config.motion
        pick = self.perturb.pick(self.scene.positions()[self.kp_ids[KP_INDEX[mv.pick]]])
        place = self.perturb.place(np.array([target[0], target[1], max(float(target[2]), 0.0)]))
        if n_arc is None:
            n_arc = self.perturb.arc(arc_frames(pick, place, m, self.fps))
        return pick_place_plan(
            self.scene.grippers[mv.arm].position.copy(),
            pick,
            place,
            m,
            self.fps,
            n_arc,
            self.perturb.release_frames(m.release_frames),
        )

    def _too_close(self, moves: tuple[PickPlace, ...], targets: dict) -> bool:
        if len(moves) < 2:
            return False
        k = self.keypoints()
        a, b = moves[0], moves[1]
        d_pick = np.linalg.norm(k[KP_INDEX[a.pick], :2] - k[KP_INDEX[b.pick], :2])
        d_place = np.linalg.norm(targets[a][:2] - targets[b][:2])
        return bool(min(d_pick, d_place) < self.config.motion.min_arm_distance)

    def finish(self) -> None:
        """Both arms home, cloth settles, terminal frame recorded."""
        m = self.config.motion
        plans = []
        for arm, g in enumerate(self.scene.grippers):
            home = np.asarray(m.home[arm])
            plans.append(
                _segment(
                    g.position.copy(), home, _frames_for(np.linalg.norm(home - g.position), m.move_speed, self.fps), 1.0
                )
            )
        rows = _merge(plans, self._current())
        rows += [[(np.asarray(m.home[a], dtype=float), 1.0) for a in range(2)]] * m.final_settle_frames
        self.execute(rows)
        if self.record:
            self._observe(None)


def sleeve_labels(garment: GarmentMesh, config: GenerationConfig) -> np.ndarray | None:
    """The per-particle sleeve labels the layout's sleeve disturbance selects by under `config`
    (`DRRanges.sleeve_selection`): the garment's own with "sleeve", None (select by x) otherwise.
    A garment without labels under "sleeve" is refused: a store must not mix the two selections."""
    if config.dr.sleeve_selection != "sleeve":
        return None
    if garment.sleeve_side is None:
        raise ConfigError(
            f"dr.sleeve_selection 'sleeve' needs a garment with sleeve labels; {garment.garment_id} "
            f"({garment.source}) has none: use sleeve_selection 'x' for it"
        )
    return garment.sleeve_side


def _lay_out(
    scene: ClothScene, garment_sim: np.ndarray, kp_ids: np.ndarray, rng: np.random.Generator, config: GenerationConfig
) -> tuple[Randomization, int]:
    """Sample randomisation until the dropped garment is fully inside the view (paper: resample)."""
    sleeve_side = sleeve_labels(scene.garment, config)
    for attempt in range(1, config.max_layout_attempts + 1):
        dr = sample_randomization(rng, config.dr, config.resolution)
        init = initial_layout(garment_sim, kp_ids, dr, sleeve_side)
        if not dr.camera.in_view(init * [1, 1, 0]):
            continue
        scene.set_positions(init)
        scene.settle(config.drop_settle_frames)
        if dr.camera.in_view(scene.positions()):
            return dr, attempt
    raise EpisodeFailed(
        f"garment {scene.garment.garment_id}: no layout inside the camera view after "
        f"{config.max_layout_attempts} attempts"
    )


@dataclass
class StartState:
    """A laid-out, settled garment ready for a program: the scene, its randomisation, keypoints."""

    scene: ClothScene
    dr: Randomization
    keypoint_ids: np.ndarray
    layout_attempts: int


def start_state(
    garment: GarmentMesh,
    seed: int,
    config: GenerationConfig,
    keypoint_ids: np.ndarray | None = None,
    scene: ClothScene | None = None,
) -> StartState:
    """The start of every episode with this seed: layout, drop and settle, initial gripper poses.

    It depends on the seed alone, so episodes of different modes with one seed start identically
    (in-context pairs and same-init evaluation need that). `scene` re-uses a world of a
    `ClothBatch` holding this garment (reset first); by default the garment gets a scene of its own.
    """
    rng = np.random.default_rng(np.random.SeedSequence([seed]))
    kp_ids = detect_keypoints(garment.vertices) if keypoint_ids is None else np.asarray(keypoint_ids)
    garment_sim = garment.vertices * config.sim.garment_scale
    if scene is None:
        scene = ClothScene.build(garment, config.sim, initial_positions=garment_sim)
    elif scene.garment.garment_id != garment.garment_id or scene.num_particles != garment.num_particles:
        raise ValueError(f"scene holds {scene.garment.garment_id}, not {garment.garment_id}")
    else:
        scene.reset(garment_sim)
    dr, attempts = _lay_out(scene, garment_sim, kp_ids, rng, config)
    for arm, g in enumerate(scene.grippers):
        g.position = np.asarray(config.motion.home[arm]) + rng.uniform(-1, 1, 3) * config.motion.start_jitter
    return StartState(scene, dr, kp_ids, attempts)


def run_program(
    start: StartState,
    mode: FoldingMode,
    variant: str,
    seed: int,
    config: GenerationConfig,
    record: bool = True,
    noise: ExecutionNoise | None = None,
    noise_seed: int = 0,
) -> FoldingRollout:
    """Execute the mode's scripted program from `start` (which it advances), arms home at the end;
    with `noise`, perturbed by a generator seeded from (seed, mode, variant, noise_seed)."""
    garment = start.scene.garment
    program = (
        random_deformation_program(
            np.random.default_rng(np.random.SeedSequence([seed, mode.mode_id])),
            mode.regions,
            garment.size() * config.sim.garment_scale,
        )
        if mode.family == "random"
        else mode.program(variant)
    )
    rng = None
    if noise is not None:
        variant_index = mode.variants.index(variant) if variant in mode.variants else 0
        rng = np.random.default_rng(np.random.SeedSequence([seed, mode.mode_id, variant_index, noise_seed]))
    rollout = FoldingRollout(start.scene, start.dr, start.keypoint_ids, config, record, noise, rng)
    for sub in program:
        rollout.run_subaction(sub)
    rollout.finish()
    return rollout


def run_episode(
    garment: GarmentMesh,
    mode: FoldingMode,
    variant: str,
    seed: int,
    config: GenerationConfig | None = None,
    keypoint_ids: np.ndarray | None = None,
    scene: ClothScene | None = None,
) -> Episode:
    """Simulate `mode`/`variant` on `garment` with everything random drawn from `seed`
    (on `scene`, a batch world holding this garment, when given)."""
    config = config or preset("paper")
    t_start = time.perf_counter()
    start = start_state(garment, seed, config, keypoint_ids, scene)
    scene, dr, attempts = start.scene, start.dr, start.layout_attempts
    t_sim = time.perf_counter()
    rollout = run_program(start, mode, variant, seed, config)
    sim_wall = time.perf_counter() - t_sim
    # Quality signal for filtering: a few particles can leak through the table (see docs/sim.md).
    lowest = float(min(p[:, 2].min() for p in rollout.rec.particles))
    episode = _to_episode(rollout, config)
    errors = [o["error"] for o in rollout.oracle]
    episode.meta.update(
        {
            "mode": mode.name,
            "mode_id": mode.mode_id,
            "family": mode.family,
            "description": mode.description,
            "variant": variant,
            "seed": seed,
            "garment_id": garment.garment_id,  # the flat keys every consumer reads (schema.META_KEYS)
            "split": garment.split,
            "garment": {
                "id": garment.garment_id,
                "split": garment.split,
                "source": garment.source,
                "params": garment.params,
                "num_particles": garment.num_particles,
                "size_m": garment.size(),
            },
            "randomization": dr.to_dict(),
            "sleeve_selection": config.dr.sleeve_selection,
            "layout_attempts": attempts,
            "lowest_particle_z": lowest,
            "sim_config": config.sim.to_dict(),
            "motion_config": asdict(config.motion),
            "preset": config.name,
            "oracle": {"moves": rollout.oracle, "max_error": max(errors) if errors else 0.0},
            "timing": {
                "total_s": time.perf_counter() - t_start,
                "rollout_s": sim_wall,
                "render_s": rollout.rec.render_s,
                "sim_time_s": scene.sim_time,
                "frames": episode.num_frames,
            },
        }
    )
    return episode.validate()


def _to_episode(rollout: FoldingRollout, config: GenerationConfig) -> Episode:
    """Camera optical frame, real metres: p_cam = R^T (p - t) times `obs_scale`."""
    r = rollout.rec
    cam = rollout.dr.camera
    s = config.obs_scale
    t_wc = cam.T_world_camera

    def to_cam(p: np.ndarray) -> np.ndarray:
        return (cam.world_to_camera(p) * s).astype(np.float32)

    particles = to_cam(np.stack(r.particles))
    state = np.stack(r.state)
    action = np.stack(r.action)
    arm_state = np.concatenate([to_cam(state[..., :3]), state[..., 3:].astype(np.float32)], -1)
    act = np.concatenate([to_cam(action[..., :3]), action[..., 3:].astype(np.float32)], -1)
    extrinsics = t_wc.copy()
    extrinsics[:3, 3] *= s
    return Episode(
        rgb=np.stack(r.rgb),
        depth=(np.stack(r.depth) * s).astype(np.float32),
        mask=np.stack(r.mask),
        intrinsics=cam.intrinsics.astype(np.float32),
        extrinsics=extrinsics.astype(np.float32),
        arm_state=arm_state,
        action=act,
        particles=particles,
        particle_visible=np.stack(r.visible),
        keypoints=particles[:, rollout.kp_ids],
        keypoint_particle_ids=rollout.kp_ids.astype(np.int32),
        keyframes=extract_keyframes(arm_state),
        meta={
            "fps": rollout.fps,
            "obs_scale": s,
            "frame": "camera_optical",
            "units": "m",
            "keypoint_names": list(KEYPOINT_NAMES),
        },
    )
