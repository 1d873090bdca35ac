"""A Newton cloth scene: one garment on a table plane and two kinematic pinning grippers.

The cloth is simulated with VBD and self-contact (without self-contact folded layers pass
through each other and folds do not stack). Newton runs in centimetre units of the paper's
simulation space (meshes scaled by two, appendix A) because VBD is better conditioned there;
every public method of `ClothScene` takes and returns simulation-space metres in the world
frame (x, y on the table, z up, table surface at z = 0).

A gripper grasps by pinning every particle within `grasp_radius` of its position (the ACTIVE
flag is cleared so the solver leaves them alone) and drags them rigidly with it; opening
re-activates them with zero velocity, so a release is clean.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import newton
import numpy as np
import warp as wp
from newton import ParticleFlags

from .garments import GarmentMesh

#: Newton units per simulation-space metre (Newton runs in centimetres).
UNITS = 100.0
#: Lowest height of a free particle, in particle radii above the table (the soft contact keeps
#: resting cloth at about one radius; this only catches particles that went through it).
TABLE_FLOOR = 0.25


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
    ids: wp.array[wp.int32],
    offsets: wp.array[wp.vec3],
    target: wp.vec3,
    vel: wp.vec3,
    floor: float,
    q: wp.array[wp.vec3],
    qd: wp.array[wp.vec3],
):
    # Pinned particles are kinematic (no contacts), so keep them above the table explicitly:
    # a gripper placing a layer must not push the cloth below it through the table.
    i = wp.tid()
    p = target + offsets[i]
    q[ids[i]] = wp.vec3(p[0], p[1], wp.max(p[2], floor))
    qd[ids[i]] = vel


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
        self.held: np.ndarray = np.zeros(0, dtype=np.int32)
        self._offsets: wp.array | None = None
        self._ids: wp.array | None = None


class ClothScene:
    """Garment + table + two grippers; `step_frame` advances one control frame."""

    def __init__(
        self, garment: GarmentMesh, config: ClothSimConfig | None = None, initial_positions: np.ndarray | None = None
    ) -> None:
        """Build the Newton model.

        `initial_positions` (sim-space metres, world frame) places the cloth; by default the
        canonical garment is scaled into simulation space and laid at the table centre. The
        rest shape is always the canonical mesh, so a perturbed start relaxes back towards it.
        """
        self.config = cfg = config or ClothSimConfig()
        self.garment = garment
        self.device = wp.get_device(cfg.device) if cfg.device else wp.get_device()
        rest = garment.vertices * cfg.garment_scale * UNITS
        builder = newton.ModelBuilder(gravity=(0.0, 0.0, -9.81 * UNITS))
        builder.add_cloth_mesh(
            pos=wp.vec3(0.0, 0.0, 0.0),
            rot=wp.quat_identity(),
            scale=1.0,
            vel=wp.vec3(0.0, 0.0, 0.0),
            vertices=[wp.vec3(*v) for v in rest],
            indices=garment.faces.reshape(-1).tolist(),
            density=cfg.density,
            tri_ke=cfg.stretch_ke,
            tri_ka=cfg.shear_ka,
            tri_kd=cfg.stretch_kd,
            edge_ke=cfg.bend_ke,
            edge_kd=cfg.bend_kd,
            particle_radius=cfg.particle_radius * UNITS,
        )
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
        self._flags = self.model.particle_flags.numpy().copy()
        self.frame_dt = 1.0 / cfg.fps
        self.sim_time = 0.0
        self.grippers = [Gripper(np.array([-0.6, -0.9, 0.4])), Gripper(np.array([0.6, -0.9, 0.4]))]
        if initial_positions is not None:
            self.set_positions(initial_positions)

    # ------------------------------------------------------------------ state access

    @property
    def num_particles(self) -> int:
        return self.model.particle_count

    def positions(self) -> np.ndarray:
        """Particle positions [N, 3], simulation-space metres."""
        return self.state_0.particle_q.numpy().astype(np.float64) / UNITS

    def set_positions(self, positions: np.ndarray, velocities: np.ndarray | None = None) -> None:
        positions = np.asarray(positions, dtype=np.float32)
        if positions.shape != (self.num_particles, 3) or not np.isfinite(positions).all():
            raise ValueError(f"positions: expected finite [{self.num_particles}, 3], got {positions.shape}")
        self.state_0.particle_q.assign(positions * UNITS)
        qd = np.zeros_like(positions) if velocities is None else np.asarray(velocities, np.float32) * UNITS
        self.state_0.particle_qd.assign(qd)

    def gripper_states(self) -> np.ndarray:
        """[2, 4] (x, y, z, openness) per arm in sim-space world coordinates."""
        return np.array([[*g.position, g.openness] for g in self.grippers], dtype=np.float64)

    # ------------------------------------------------------------------ grasping

    def grasp(self, arm: int) -> np.ndarray:
        """Close gripper `arm`: pin the particles within the grasp radius (at least the nearest)."""
        g = self.grippers[arm]
        pos = self.positions()
        d = np.linalg.norm(pos - g.position, axis=1)
        held = np.setdiff1d(np.flatnonzero(d <= self.config.grasp_radius), self.grippers[1 - arm].held)
        if held.size == 0:
            held = np.array([np.argmin(d)])
        g.held = held.astype(np.int32)
        g.openness = 0.0
        g._ids = wp.array(g.held, dtype=wp.int32, device=self.device)
        g._offsets = wp.array(((pos[held] - g.position) * UNITS).astype(np.float32), dtype=wp.vec3, device=self.device)
        self._flags[held] &= ~int(ParticleFlags.ACTIVE)
        self.model.particle_flags.assign(self._flags)
        return g.held

    def release(self, arm: int) -> None:
        """Open gripper `arm`: the held particles become free cloth again, at rest."""
        g = self.grippers[arm]
        g.openness = 1.0
        if g.held.size:
            self._flags[g.held] |= int(ParticleFlags.ACTIVE)
            self.model.particle_flags.assign(self._flags)
            qd = self.state_0.particle_qd.numpy()
            qd[g.held] = 0.0
            self.state_0.particle_qd.assign(qd)
        g.held = np.zeros(0, dtype=np.int32)
        g._ids = g._offsets = None

    def command_gripper(self, arm: int, openness: float) -> None:
        """Apply a commanded openness: closing an open gripper grasps, opening a closed one releases."""
        g = self.grippers[arm]
        if openness < 0.5 <= g.openness:
            self.grasp(arm)
        elif openness >= 0.5 > g.openness:
            self.release(arm)

    # ------------------------------------------------------------------ stepping

    def step_frame(self, targets: np.ndarray | None = None) -> None:
        """Advance one control frame, moving each gripper linearly to `targets[arm]` (sim m)."""
        cfg = self.config
        start = [g.position.copy() for g in self.grippers]
        goal = start if targets is None else [np.asarray(t, dtype=np.float64) for t in targets]
        dt = self.frame_dt / cfg.substeps
        self.solver.rebuild_bvh(self.state_0)
        for k in range(1, cfg.substeps + 1):
            alpha = k / cfg.substeps
            for arm, g in enumerate(self.grippers):
                g.position = (1 - alpha) * start[arm] + alpha * goal[arm]
                if g.held.size:
                    vel = (goal[arm] - start[arm]) / self.frame_dt * UNITS
                    wp.launch(
                        _drive_pinned,
                        dim=len(g.held),
                        inputs=[
                            g._ids,
                            g._offsets,
                            wp.vec3(*(g.position * UNITS)),
                            wp.vec3(*vel),
                            cfg.particle_radius * UNITS,
                        ],
                        outputs=[self.state_0.particle_q, self.state_0.particle_qd],
                        device=self.device,
                    )
            self.state_0.clear_forces()
            self.collision.collide(self.state_0, self.contacts)
            self.solver.step(self.state_0, self.state_1, self.control, self.contacts, dt)
            self.state_0, self.state_1 = self.state_1, self.state_0
            wp.launch(
                _table_floor,
                dim=self.num_particles,
                inputs=[self.model.particle_flags, TABLE_FLOOR * cfg.particle_radius * UNITS],
                outputs=[self.state_0.particle_q, self.state_0.particle_qd],
                device=self.device,
            )
        self.sim_time += self.frame_dt

    def cloth_speed(self) -> float:
        """95th-percentile particle speed (sim m/s): the cloth is at rest when this is small."""
        speed = np.linalg.norm(self.state_0.particle_qd.numpy(), axis=1) / UNITS
        return float(np.percentile(speed, 95))

    def settle(self, max_frames: int = 60, speed_tol: float = 0.01) -> int:
        """Step with grippers idle until the cloth is (nearly) at rest; returns frames used."""
        for frame in range(max_frames):
            self.step_frame()
            if self.cloth_speed() < speed_tol:
                return frame + 1
        return max_frames
