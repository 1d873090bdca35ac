"""Newton cloth scenes: garments on a table plane, each with two kinematic pinning grippers.

The cloth is simulated with VBD and self-contact (without self-contact folded layers pass
through each other and folds do not stack). Newton runs in centimetre units of the paper's
simulation space (meshes scaled by two, appendix A) because VBD is better conditioned there;
every public method of `ClothScene` takes and returns simulation-space metres in the scene's
own world frame (x, y on the table, z up, table surface at z = 0).

A gripper grasps by pinning every particle within `grasp_radius` of its position (the ACTIVE
flag is cleared so the solver leaves them alone) and drags them rigidly with it; opening
re-activates them with zero velocity, so a release is clean.

`ClothBatch` puts several garments in one Newton model, one world each, and steps them
together: one ~500-particle cloth leaves a GPU idle (every substep is a few dozen small kernel
launches), many in one model cost about the same launches. Each `ClothScene` is a world of a
batch; `ClothScene.build` makes a batch of one.

On the CPU a control frame's substeps are recorded once as a Warp graph and replayed (see
`ClothBatch`): a few hundred particles cost far less to solve than the ~1,200 kernel launches of
a frame cost to issue from Python, and a replay issues them from C++ with the same arguments,
so the results are bit-identical to launching them one by one.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass

import newton
import numpy as np
import warp as wp
from newton import ParticleFlags

from instant_fold_core.contracts import gripper_closed

from .garments import GarmentMesh

#: Newton units per simulation-space metre (Newton runs in centimetres).
UNITS = 100.0
#: Lowest height of a free particle, in particle radii above the table (the soft contact keeps
#: resting cloth at about one radius; this only catches particles that went through it).
TABLE_FLOOR = 0.25
#: Every batch's lock wraps this one lock: while a frame is being recorded as a graph, Warp
#: records (and does not run) every CPU launch of the process, so no other batch may touch
#: Warp then. Batches of one process are stepped one at a time anyway (one core each).
_WARP_LOCK = threading.RLock()


@dataclass
class ClothSimConfig:
    """Solver, material and gripper settings (lengths in simulation-space metres)."""

    garment_scale: float = 2.0  # the paper scales meshes by two for solver stability
    fps: float = 20.0  # control / observation rate
    substeps: int = 8
    iterations: int = 8
    # Material (Newton VBD units, centimetre scale). The paper's FleX stiffnesses (stretch,
    # bend, shear = 0.45, 0.05, 0.01) have no direct VBD counterpart; these give a light,
    # drapey cotton-like cloth. Physics randomisation is disabled, as in the paper.
    stretch_ke: float = 1.0e4  # tri_ke
    shear_ka: float = 1.0e4  # tri_ka (area preservation)
    stretch_kd: float = 1.5e-2
    bend_ke: float = 0.2
    bend_kd: float = 1.0e-2
    density: float = 0.02
    particle_radius: float = 0.006
    self_contact_margin: float = 0.004  # self-contact interaction distance
    self_contact_gap: float = 0.002  # extra detection reach (query radius = margin + gap)
    contact_ke: float = 1.0e4
    contact_kd: float = 1.0e1
    friction: float = 0.6  # cloth-table
    self_friction: float = 0.8
    grasp_radius: float = 0.05
    self_contact: bool = True
    device: str | None = None  # None: CUDA when present, else CPU

    def to_dict(self) -> dict:
        return asdict(self)


@wp.kernel
def _drive_pinned(
    count: wp.array[wp.int32],
    ids: wp.array[wp.int32],
    gripper: wp.array[wp.int32],
    offsets: wp.array[wp.vec3],
    gripper_pos: wp.array[wp.vec3],
    gripper_vel: wp.array[wp.vec3],
    floor: float,
    q: wp.array[wp.vec3],
    qd: wp.array[wp.vec3],
):
    # Pinned particles are kinematic (no contacts), so keep them above the table explicitly:
    # a gripper placing a layer must not push the cloth below it through the table. The arrays
    # have room for every particle; the first `count[0]` entries are held.
    i = wp.tid()
    if i >= count[0]:
        return
    g = gripper[i]
    p = gripper_pos[g] + offsets[i]
    q[ids[i]] = wp.vec3(p[0], p[1], wp.max(p[2], floor))
    qd[ids[i]] = gripper_vel[g]


@wp.kernel
def _zero_velocity(ids: wp.array[wp.int32], qd: wp.array[wp.vec3]):
    qd[ids[wp.tid()]] = wp.vec3(0.0, 0.0, 0.0)


@wp.kernel
def _table_floor(
    flags: wp.array[wp.int32],
    floor: float,
    q: wp.array[wp.vec3],
    qd: wp.array[wp.vec3],
):
    # The table is rigid: a free particle pushed through its soft contact within one substep (a
    # layer pressed down by a placing gripper, stacked layers) is put back on top, moving no
    # further down. Without this a few particles end up well below the table and drag keypoints.
    i = wp.tid()
    if (flags[i] & 1) == 0:  # ParticleFlags.ACTIVE
        return
    p = q[i]
    if p[2] < floor:
        q[i] = wp.vec3(p[0], p[1], floor)
        v = qd[i]
        qd[i] = wp.vec3(v[0], v[1], wp.max(v[2], 0.0))


class Gripper:
    """A kinematic point gripper: position (sim m), openness, and the particles it holds."""

    def __init__(self, position: np.ndarray) -> None:
        self.position = np.asarray(position, dtype=np.float64).copy()
        self.openness = 1.0
        self.held: np.ndarray = np.zeros(0, dtype=np.int32)  # particle ids within its scene
        self.offsets: np.ndarray = np.zeros((0, 3), dtype=np.float32)  # held - position, Newton units


#: Where grippers start in a fresh or reset scene (sim m).
GRIPPER_START = ((-0.6, -0.9, 0.4), (0.6, -0.9, 0.4))


class ClothBatch:
    """Several garments in one Newton model, one world each, stepped together.

    Every world lies at the origin on the shared table plane: Newton keeps worlds apart (per-world
    BVH groups for self-contact, world-filtered particle-shape contact), so a world computes the
    physics of a scene of its own, in the same coordinates (worlds spaced apart instead drifted by
    a centimetre through float32 rounding). Results are often bit-identical to a scene of its own;
    when contact sums add up in another order they differ at the millimetre level.

    A control frame advances every world. Single-threaded code drives it with `step`; a
    generator runs one thread per world inside `frame_barrier(world)`, where each scene's
    `step_frame` waits at a per-frame barrier until every member has asked for its frame and the
    last one to ask steps them all, so per-episode code (layout, programs, settling) stays sequential.
    Worlds that are not stepping hold their grippers; `ClothScene.park` stops simulating one.

    `capture` records a frame's substeps once as a Warp graph and replays it for every later
    frame: the launches and their arguments are the same, only issued from C++, so a frame
    computes exactly what it computes without (tested bit for bit). Everything a frame reads that
    changes between frames is written in place before it (the held particles too: their arrays
    have room for every particle), so one graph serves the batch's life (two when a frame has an
    odd number of substeps: it then starts from either state). `None` takes `capture_default`,
    whose `None` means on the CPU only: on CUDA it is not measured yet (no GPU here).
    """

    #: What `capture=None` means for batches made from now on (None: on the CPU only); the
    #: benchmark sets it to time a frame both ways.
    capture_default: bool | None = None

    def __init__(
        self, garments: Sequence[GarmentMesh], config: ClothSimConfig | None = None, capture: bool | None = None
    ) -> None:
        if not garments:
            raise ValueError("ClothBatch needs at least one garment")
        self.config = cfg = config or ClothSimConfig()
        self.garments = list(garments)
        self.device = wp.get_device(cfg.device) if cfg.device else wp.get_device()
        builder = newton.ModelBuilder(gravity=(0.0, 0.0, -9.81 * UNITS))
        ranges = []
        for garment in self.garments:
            first = len(builder.particle_q)
            builder.begin_world(label=garment.garment_id)
            builder.add_cloth_mesh(
                pos=wp.vec3(0.0, 0.0, 0.0),
                rot=wp.quat_identity(),
                scale=1.0,
                vel=wp.vec3(0.0, 0.0, 0.0),
                vertices=[wp.vec3(*v) for v in garment.vertices * cfg.garment_scale * UNITS],
                indices=garment.faces.reshape(-1).tolist(),
                density=cfg.density,
                tri_ke=cfg.stretch_ke,
                tri_ka=cfg.shear_ka,
                tri_kd=cfg.stretch_kd,
                edge_ke=cfg.bend_ke,
                edge_kd=cfg.bend_kd,
                particle_radius=cfg.particle_radius * UNITS,
            )
            builder.end_world()
            ranges.append((first, len(builder.particle_q)))
        builder.color()
        builder.add_ground_plane()
        self.model = builder.finalize(device=self.device, requires_grad=False)
        self.model.soft_contact_ke = cfg.contact_ke
        self.model.soft_contact_kd = cfg.contact_kd
        self.model.soft_contact_mu = cfg.self_friction
        mu = self.model.shape_material_mu.numpy()
        mu[:] = cfg.friction
        self.model.shape_material_mu.assign(mu)
        self.state_0 = self.model.state()
        self.state_1 = self.model.state()
        self.control = self.model.control()
        self.collision = newton.CollisionPipeline(self.model, soft_contact_gap=cfg.particle_radius * UNITS)
        self.contacts = self.collision.contacts()
        self.solver = newton.solvers.SolverVBD(
            self.model,
            iterations=cfg.iterations,
            particle_enable_self_contact=cfg.self_contact,
            particle_self_contact_margin=cfg.self_contact_margin * UNITS,
            particle_self_contact_gap=cfg.self_contact_gap * UNITS,
            particle_topological_contact_filter_threshold=1,
            particle_vertex_contact_buffer_size=16,
            particle_edge_contact_buffer_size=20,
        )
        self.frame_dt = 1.0 / cfg.fps
        self._flags = self.model.particle_flags.numpy().copy()
        self._snapshot: tuple[np.ndarray, np.ndarray] | None = None
        # The held particles of every gripper (global id, gripper index, offset from it), the
        # first `_held_count[0]` entries of arrays with room for every particle; rewritten after
        # a grasp, a release or a park.
        n = self.model.particle_count
        self._held_count = wp.zeros(1, dtype=wp.int32, device=self.device)
        self._held_ids = wp.zeros(n, dtype=wp.int32, device=self.device)
        self._held_gripper = wp.zeros(n, dtype=wp.int32, device=self.device)
        self._held_offsets = wp.zeros(n, dtype=wp.vec3, device=self.device)
        self._held_stale = True
        self._held = 0
        # Every substep's gripper positions of a frame, written once per frame (a recorded
        # graph reads row k at substep k).
        self._gripper_path = wp.zeros((cfg.substeps, 2 * len(self.garments)), dtype=wp.vec3, device=self.device)
        self._gripper_vel = wp.zeros(2 * len(self.garments), dtype=wp.vec3, device=self.device)
        if capture is None:
            capture = self.device.is_cpu if self.capture_default is None else self.capture_default
        self.capture = capture
        self._graphs: dict[int, wp.Graph] = {}  # id(state_0) at the frame's start -> its substeps
        # Held while stepping and by every change to grippers or particles (re-entrant): a world
        # that is not at the frame barrier may grasp or park while the others step.
        self.lock = threading.Condition(_WARP_LOCK)
        self._members: set[int] = set()
        self._pending: dict[int, np.ndarray | None] = {}
        self._generation = 0
        self._failure: BaseException | None = None
        self.scenes = [ClothScene(self, w, first, end) for w, (first, end) in enumerate(ranges)]

    @property
    def num_worlds(self) -> int:
        return len(self.garments)

    # ------------------------------------------------------------------ stepping

    def step(self, goals: dict[int, np.ndarray | None] | None = None) -> None:
        """Advance every world one control frame; `goals[world]` = [2, 3] gripper targets (sim m)."""
        with self.lock:
            self._advance(goals or {})

    @contextmanager
    def frame_barrier(self, world: int) -> Iterator[ClothScene]:
        """Inside this context, `scenes[world].step_frame` waits for the other members and steps
        together with them (a thread barrier per control frame; not the sim-time lockstep of the
        `sim` driver, `SimStep`)."""
        with self.lock:
            self._members.add(world)
        try:
            yield self.scenes[world]
        finally:
            with self.lock:
                self._members.discard(world)
                self._pending.pop(world, None)
                if self._failure is None:
                    self._step_if_all_pending()

    def _request(self, world: int, goal: np.ndarray | None) -> None:
        with self.lock:
            if self._failure is not None:
                raise RuntimeError("an earlier batch step failed") from self._failure
            if world not in self._members:
                if self._members:
                    raise RuntimeError(f"world {world} stepped outside the frame barrier while other worlds are at it")
                self._advance({world: goal})
                return
            self._pending[world] = goal
            generation = self._generation
            self._step_if_all_pending()
            while self._generation == generation:
                self.lock.wait()
            if self._failure is not None:
                raise RuntimeError("a batch step failed") from self._failure

    def _step_if_all_pending(self) -> None:
        if not self._pending or not self._members <= self._pending.keys():
            return
        goals, self._pending = self._pending, {}
        try:
            self._advance(goals)
        except BaseException as exc:
            self._failure = exc
            raise
        finally:
            self._generation += 1
            self.lock.notify_all()

    def _advance(self, goals: dict[int, np.ndarray | None]) -> None:
        cfg = self.config
        start = np.array([[g.position for g in scene.grippers] for scene in self.scenes])  # [W, 2, 3]
        goal = start.copy()
        for world, target in goals.items():
            if target is not None:
                goal[world] = target
        velocity = ((goal - start) / self.frame_dt * UNITS).reshape(-1, 3).astype(np.float32)
        if self._update_held():
            self._gripper_vel.assign(velocity)
            path = [(1 - k / cfg.substeps) * start + k / cfg.substeps * goal for k in range(1, cfg.substeps + 1)]
            self._gripper_path.assign((np.stack(path) * UNITS).reshape(cfg.substeps, -1, 3).astype(np.float32))
        dt = self.frame_dt / cfg.substeps
        self.solver.rebuild_bvh(self.state_0)
        if not self.capture:
            self._substeps(dt)
        else:
            graph = self._graphs.get(id(self.state_0))
            if graph is None:
                first = self.state_0, self.state_1
                wp.capture_begin(self.device)
                try:
                    self._substeps(dt)  # recorded, not run
                finally:
                    graph = wp.capture_end(self.device)
                    self.state_0, self.state_1 = first
                self._graphs[id(self.state_0)] = graph
            wp.capture_launch(graph)
            if cfg.substeps % 2:
                self.state_0, self.state_1 = self.state_1, self.state_0
        self._snapshot = None
        for world, scene in enumerate(self.scenes):
            for arm, g in enumerate(scene.grippers):
                g.position = goal[world, arm].copy()
            scene.sim_time += self.frame_dt

    def _substeps(self, dt: float) -> None:
        """One control frame's substeps, launched (or recorded) from the frame's gripper path."""
        cfg = self.config
        held = (self._held_count, self._held_ids, self._held_gripper, self._held_offsets)
        for k in range(cfg.substeps):
            wp.launch(
                _drive_pinned,
                dim=self.model.particle_count,
                inputs=[*held, self._gripper_path[k], self._gripper_vel, cfg.particle_radius * UNITS],
                outputs=[self.state_0.particle_q, self.state_0.particle_qd],
                device=self.device,
            )
            self.state_0.clear_forces()
            self.collision.collide(self.state_0, self.contacts)
            self.solver.step(self.state_0, self.state_1, self.control, self.contacts, dt)
            self.state_0, self.state_1 = self.state_1, self.state_0
            wp.launch(
                _table_floor,
                dim=self.model.particle_count,
                inputs=[self.model.particle_flags, TABLE_FLOOR * cfg.particle_radius * UNITS],
                outputs=[self.state_0.particle_q, self.state_0.particle_qd],
                device=self.device,
            )

    def _update_held(self) -> int:
        """Write the grippers' held particles into the held arrays if they changed; their count."""
        if self._held_stale:
            ids, grip, offsets = [], [], []
            for world, scene in enumerate(self.scenes):
                for arm, g in enumerate(scene.grippers):
                    ids.append(g.held + scene.first)
                    grip.append(np.full(g.held.size, 2 * world + arm, dtype=np.int32))
                    offsets.append(g.offsets)
            self._held = sum(len(i) for i in ids)
            pad = self.model.particle_count - self._held
            self._held_ids.assign(np.concatenate([*ids, np.zeros(pad)]).astype(np.int32))
            self._held_gripper.assign(np.concatenate([*grip, np.zeros(pad)]).astype(np.int32))
            self._held_offsets.assign(np.concatenate([*offsets, np.zeros((pad, 3))]).astype(np.float32))
            self._held_count.assign(np.array([self._held], dtype=np.int32))
            self._held_stale = False
        return self._held

    # ------------------------------------------------------------------ state access (Newton units)

    def snapshot(self) -> tuple[np.ndarray, np.ndarray]:
        """Positions and velocities of every particle (sim m, sim m/s), read once per frame."""
        with self.lock:
            if self._snapshot is None:
                q = self.state_0.particle_q.numpy().astype(np.float64) / UNITS
                qd = self.state_0.particle_qd.numpy().astype(np.float64) / UNITS
                self._snapshot = (q, qd)
            return self._snapshot

    def write(self, first: int, q: np.ndarray, qd: np.ndarray) -> None:
        """Overwrite particles first..first+len(q) (Newton units, float32)."""
        with self.lock:
            for dest, values in ((self.state_0.particle_q, q), (self.state_0.particle_qd, qd)):
                src = wp.array(values, dtype=wp.vec3, device=self.device)
                wp.copy(dest, src, dest_offset=first, count=len(values))
            self._snapshot = None

    def set_active(self, ids: np.ndarray, active: bool, zero_velocity: bool = False) -> None:
        """(De)activate particles (global ids); grasping and parking use it."""
        with self.lock:
            if active:
                self._flags[ids] |= int(ParticleFlags.ACTIVE)
            else:
                self._flags[ids] &= ~int(ParticleFlags.ACTIVE)
            self.model.particle_flags.assign(self._flags)
            if zero_velocity and len(ids):
                wp.launch(
                    _zero_velocity,
                    dim=len(ids),
                    inputs=[wp.array(np.asarray(ids, np.int32), dtype=wp.int32, device=self.device)],
                    outputs=[self.state_0.particle_qd],
                    device=self.device,
                )
                self._snapshot = None
            self._held_stale = True


class ClothScene:
    """One garment and two grippers: a world of a `ClothBatch`; `step_frame` advances a frame."""

    def __init__(self, batch: ClothBatch, world: int, first: int, end: int) -> None:
        self.batch, self.world, self.first, self.end = batch, world, first, end
        self.config = batch.config
        self.garment = batch.garments[world]
        self.device = batch.device
        self.frame_dt = batch.frame_dt
        self.sim_time = 0.0
        self.grippers = [Gripper(np.array(p)) for p in GRIPPER_START]

    @classmethod
    def build(
        cls, garment: GarmentMesh, config: ClothSimConfig | None = None, initial_positions: np.ndarray | None = None
    ) -> ClothScene:
        """A scene of its own (a batch of one). `initial_positions` (sim m) places the cloth;
        the rest shape is always the canonical mesh, so a perturbed start relaxes towards it."""
        scene = ClothBatch([garment], config).scenes[0]
        if initial_positions is not None:
            scene.set_positions(initial_positions)
        return scene

    # ------------------------------------------------------------------ state access

    @property
    def num_particles(self) -> int:
        return self.end - self.first

    def positions(self) -> np.ndarray:
        """Particle positions [N, 3], simulation-space metres."""
        return self.batch.snapshot()[0][self.first : self.end].copy()

    def set_positions(self, positions: np.ndarray, velocities: np.ndarray | None = None) -> None:
        positions = np.asarray(positions, dtype=np.float32)
        if positions.shape != (self.num_particles, 3) or not np.isfinite(positions).all():
            raise ValueError(f"positions: expected finite [{self.num_particles}, 3], got {positions.shape}")
        q = positions * UNITS
        qd = np.zeros_like(positions) if velocities is None else np.asarray(velocities, np.float32) * UNITS
        self.batch.write(self.first, q, qd)

    def active(self) -> np.ndarray:
        """Which particles the solver moves (held and parked ones are not)."""
        return (self.batch.model.particle_flags.numpy()[self.first : self.end] & int(ParticleFlags.ACTIVE)) != 0

    def arm_states(self) -> np.ndarray:
        """[2, 4] (x, y, z, openness) per arm in sim-space world coordinates."""
        return np.array([[*g.position, g.openness] for g in self.grippers], dtype=np.float64)

    # ------------------------------------------------------------------ grasping

    def grasp(self, arm: int) -> np.ndarray:
        """Close gripper `arm`: pin the particles within the grasp radius (at least the nearest)."""
        with self.batch.lock:
            g = self.grippers[arm]
            pos = self.positions()
            d = np.linalg.norm(pos - g.position, axis=1)
            held = np.setdiff1d(np.flatnonzero(d <= self.config.grasp_radius), self.grippers[1 - arm].held)
            if held.size == 0:
                held = np.array([np.argmin(d)])
            g.held = held.astype(np.int32)
            g.openness = 0.0
            g.offsets = ((pos[held] - g.position) * UNITS).astype(np.float32)
            self.batch.set_active(g.held + self.first, active=False)
            return g.held

    def release(self, arm: int) -> None:
        """Open gripper `arm`: the held particles become free cloth again, at rest."""
        with self.batch.lock:
            g = self.grippers[arm]
            g.openness = 1.0
            if g.held.size:
                held = g.held + self.first
                g.held = np.zeros(0, dtype=np.int32)
                g.offsets = np.zeros((0, 3), dtype=np.float32)
                self.batch.set_active(held, active=True, zero_velocity=True)

    def command_gripper(self, arm: int, openness: float) -> None:
        """Apply a commanded openness: closing an open gripper grasps, opening a closed one releases."""
        g = self.grippers[arm]
        if gripper_closed(openness) and not gripper_closed(g.openness):
            self.grasp(arm)
        elif gripper_closed(g.openness) and not gripper_closed(openness):
            self.release(arm)

    def reset(self, positions: np.ndarray) -> ClothScene:
        """Start over (a new episode on this world): grippers open at their start, cloth free at
        `positions` (sim m) and at rest, clock at zero."""
        with self.batch.lock:
            for arm in range(2):
                self.release(arm)
                self.grippers[arm].position = np.array(GRIPPER_START[arm])
            self.batch.set_active(np.arange(self.first, self.end), active=True)
            self.set_positions(positions)
            self.sim_time = 0.0
        return self

    def park(self) -> None:
        """Stop simulating this world (grippers open, every particle inactive) until `reset`."""
        with self.batch.lock:
            for arm in range(2):
                self.release(arm)
            self.batch.set_active(np.arange(self.first, self.end), active=False, zero_velocity=True)

    # ------------------------------------------------------------------ stepping

    def step_frame(self, targets: np.ndarray | Sequence[np.ndarray] | None = None) -> None:
        """Advance one control frame, moving each gripper linearly to `targets[arm]` (sim m).

        In a batch, every world advances; inside `ClothBatch.frame_barrier` this waits for the others.
        """
        goal = None if targets is None else np.array([np.asarray(t, dtype=np.float64) for t in targets])
        if goal is not None and (goal.shape != (2, 3) or not np.isfinite(goal).all()):
            raise ValueError(f"targets: expected finite [2, 3] gripper positions, got {goal.shape}")
        self.batch._request(self.world, goal)

    def cloth_speed(self) -> float:
        """95th-percentile particle speed (sim m/s): the cloth is at rest when this is small."""
        speed = np.linalg.norm(self.batch.snapshot()[1][self.first : self.end], axis=1)
        return float(np.percentile(speed, 95))

    def settle(self, max_frames: int = 60, speed_tol: float = 0.01) -> int:
        """Step with grippers idle until the cloth is (nearly) at rest; returns frames used."""
        for frame in range(max_frames):
            self.step_frame()
            if self.cloth_speed() < speed_tol:
                return frame + 1
        return max_frames
