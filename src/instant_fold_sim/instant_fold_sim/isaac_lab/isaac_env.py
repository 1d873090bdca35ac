"""The Isaac Lab 3 backend: the garment, a table, two Franka Pandas and an overhead RGB-D camera,
kit-less on Isaac Lab's Newton backend. Runs only inside the Isaac Lab environment
(.venv-isaaclab, Python 3.12), as the bridge server's backend (`server.py --backend isaac_lab`).

Scene (`scene_cfg`), following Isaac Lab's `Isaac-Lift-Cloth-Franka` task (isaaclab_tasks
core/lift/config/franka_soft) where it applies:

* physics: `NewtonCfg` with Isaac Lab's coupled solver as in that task: MuJoCo-Warp for the
  robots, VBD for the cloth (self-contact on, as the project's Newton scene), the Frankas' hands
  and fingers proxied into the cloth solver as colliders; substeps and VBD iterations from the
  project's preset (8 x 8 at 20 frames/s), soft contact friction 0.6 (the project's cloth-table);
* garment: the project's mesh (`SceneSpec.rest_positions`, written to a USD mesh) as a Newton
  surface deformable (`DeformableObjectCfg` + `UsdFileCfg`), material from the Lift-Cloth task,
  triangles wound upwards (`layout.upward_faces`), colour from the episode's randomised
  appearance applied to the camera image (`layout.paint_garment`: kit-less, no material reaches
  a deformable's triangles in Newton's renderer); the settled start positions and velocities
  from the project's generator are written into the simulation after spawning, so the layout is
  the Newton sim's;
* table: a static box, top at z = 0;
* robots: two Frankas (`assets.py`: example-robot-data's Panda converted to USD, no asset server)
  placed by `layout.arm_placements`, two articulations side by side as the bimanual OpenArm
  tasks use one articulation with left/right joint groups: one left and one right action path;
* camera: `CameraCfg` at the episode camera's pose (the project's optical frame is Isaac Lab's
  "ros" convention), pinhole from the episode intrinsics, Newton's Warp renderer, rgb (+ its
  linear `rgb_hdr`, to colour the garment) + depth (`distance_to_image_plane`) + semantic
  segmentation (robots and table labelled, the garment the only unlabelled hit); cloth mask =
  above the table plane and no shape (`layout.cloth_mask`). The Frankas stay in the rgb (what the
  rollout video shows); the mask excludes them.

Control, per frame: each arm's TCP target goes through Isaac Lab's `DifferentialIKController`
(damped least squares, absolute pose in the base frame, orientation held fixed pointing down),
the joint position targets are set, fingers open (0.04) or closed (0.0), and the simulation
steps one control frame.

Grasping (stated, as the issue asks): Isaac Lab's own cloth task grasps by friction between the
coupled finger colliders and the cloth. The project's folds instead hold the cloth rigidly
between the fingers: on close, the particles within the grasp radius of the TCP become
kinematic (Isaac Lab's `write_nodal_kinematic_target_to_sim`, which on Newton zeroes their
inverse mass, as the project's Newton scene pins them); on open they are free again. Where the
held particles go is the grasp model (`grasp.py`): with `fingers` (default) they move with the
simulated hand's measured pose, set before each frame and again after it (so the state reported
has them where physics put the fingers); with `commanded` (the first model, kept to compare)
they follow the commanded target. The fingers close and collide either way.
"""

from __future__ import annotations

import colorsys
import os
import tempfile
import time
from typing import Any

import numpy as np

from instant_fold_core.contracts import gripper_closed

from . import layout
from .assets import panda_usd
from .backend import Backend, BackendError, BackendState
from .grasp import DEFAULT_GRASP, HeldCloth
from .spec import SceneSpec

#: Isaac Lab's Lift-Cloth material (isaaclab_tasks core/lift/config/franka_soft/franka_cloth_env_cfg.py).
CLOTH_MATERIAL = {"density": 1.0, "tri_ke": 5e2, "tri_ka": 5e2, "tri_kd": 1e-3, "edge_ke": 0.5, "edge_kd": 1e-3}
SUBSTEPS, VBD_ITERATIONS = 8, 8
CLOTH_TABLE_FRICTION = 0.6
ARMS = ("left", "right")


def _versions() -> dict[str, str]:
    from importlib import metadata

    out = {}
    for dist in ("isaaclab", "newton", "warp-lang", "torch"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "missing"
    return out


def cloth_colour(spec: SceneSpec) -> np.ndarray:
    """The episode's garment colour (display RGB in [0, 1]), as the project's renderer computes it."""
    a = spec.appearance
    return np.array(
        colorsys.hsv_to_rgb(float(a.get("hue", 0.6)), float(a.get("saturation", 0.5)), float(a.get("value", 0.6)))
    )


def table_colour(spec: SceneSpec) -> np.ndarray:
    """The episode's table colour (display RGB in [0, 1])."""
    return np.array([float(c) for c in spec.appearance.get("table_rgb", (0.55, 0.45, 0.35))])


def scene_cfg(spec: SceneSpec, garment_path: str, robot_path: str) -> Any:
    """The Isaac Lab `InteractiveSceneCfg` of one start state (one environment)."""
    import isaaclab.sim as sim_utils
    from isaaclab.actuators import ImplicitActuatorCfg
    from isaaclab.assets import ArticulationCfg, AssetBaseCfg, DeformableObjectCfg
    from isaaclab.scene import InteractiveSceneCfg
    from isaaclab.sensors import CameraCfg
    from isaaclab.utils import configclass
    from isaaclab_newton.renderers import NewtonWarpRendererCfg
    from isaaclab_newton.sim.schemas import NewtonDeformableBodyPropertiesCfg
    from isaaclab_newton.sim.spawners.materials import NewtonSurfaceDeformableBodyMaterialCfg

    @configclass
    class FoldSceneCfg(InteractiveSceneCfg):
        """Table, garment, two Frankas, overhead camera (entities added below)."""

    # Newton imports deformables through the cloner: replicate_physics must be on (False: "No
    # imported deformable matches", checked with Isaac Lab 3.0.0).
    cfg = FoldSceneCfg(num_envs=1, env_spacing=0.0, replicate_physics=True)
    # The episode's table colour is a display (sRGB) colour, as the project's renderer draws it;
    # a preview surface's diffuse colour is linear, so it is converted (a fully lit table shows
    # the episode's colour). The garment's colour is applied to the camera image (`observe`).
    table_rgb = tuple(float(c) for c in layout.srgb_to_linear(table_colour(spec)))
    cfg.table = AssetBaseCfg(
        prim_path="{ENV_REGEX_NS}/Table",
        init_state=AssetBaseCfg.InitialStateCfg(pos=(0.0, 0.0, -0.025)),
        spawn=sim_utils.CuboidCfg(
            size=(2.0, 1.6, 0.05),
            collision_props=sim_utils.UsdPhysicsCollisionCfg(),
            visual_material=sim_utils.PreviewSurfaceCfg(diffuse_color=table_rgb),
            # labelled, so the only unlabelled pixels of the segmentation are the garment's
            semantic_tags=[("class", "table")],
        ),
    )
    cfg.garment = DeformableObjectCfg(
        prim_path="{ENV_REGEX_NS}/Garment",
        spawn=sim_utils.UsdFileCfg(
            usd_path=garment_path,
            deformable_props=NewtonDeformableBodyPropertiesCfg(),
            # No visual material: kit-less Isaac Lab skips a USD file's one, and Newton's renderer
            # reads none for a deformable's triangles (layout.paint_garment).
            physics_material=NewtonSurfaceDeformableBodyMaterialCfg(
                particle_radius=0.006 * spec.world_scale, **CLOTH_MATERIAL
            ),
        ),
    )
    for index, placement in enumerate(layout.arm_placements()):
        setattr(
            cfg,
            f"robot_{placement.name}",
            ArticulationCfg(
                prim_path="{ENV_REGEX_NS}/Robot" + placement.name.capitalize(),
                spawn=sim_utils.UsdFileCfg(
                    usd_path=robot_path,
                    rigid_props=sim_utils.RigidBodyPropertiesCfg(disable_gravity=True),
                    # labelled, so the camera's semantic segmentation tells robot pixels apart
                    semantic_tags=[("class", "robot")],
                ),
                init_state=ArticulationCfg.InitialStateCfg(
                    pos=placement.position,
                    rot=placement.quat_xyzw,
                    # Already at the episode's initial TCP pose, inside the joint limits
                    # (layout.panda_ik); differential IK and physics only refine it.
                    joint_pos={
                        **{
                            f"panda_joint{i + 1}": float(q)
                            for i, q in enumerate(layout.panda_ik(placement, spec.grippers[index, :3]))
                        },
                        "panda_finger_joint.*": layout.FINGER_OPEN,
                    },
                ),
                # Stiffer than Isaac Lab's cloth task (600/50, libfranka joint impedance): with those
                # the TCPs settled 1.5-3 cm from their targets here, with these the left one within
                # 4 mm (measured on CPU). Gravity off on the arms, as in that task.
                actuators={
                    "arm": ImplicitActuatorCfg(
                        joint_names_expr=["panda_joint[1-7]"], stiffness=4000.0, damping=200.0, effort_limit_sim=87.0
                    ),
                    "hand": ImplicitActuatorCfg(
                        joint_names_expr=["panda_finger_joint.*"],
                        stiffness=2000.0,
                        damping=100.0,
                        effort_limit_sim=500.0,
                    ),
                },
            ),
        )
    pos, rot = layout.camera_offset_ros(spec.T_world_camera)
    cfg.camera = CameraCfg(
        prim_path="{ENV_REGEX_NS}/Camera",
        offset=CameraCfg.OffsetCfg(pos=pos, rot=rot, convention="ros"),
        # rgb_hdr: the garment's linear radiance, which the episode colour multiplies (observe)
        data_types=["rgb", "rgb_hdr", "distance_to_image_plane", "semantic_segmentation"],
        colorize_semantic_segmentation=False,
        spawn=sim_utils.PinholeCameraCfg.from_intrinsic_matrix(
            intrinsic_matrix=layout.intrinsics_row_major(spec.intrinsics),
            width=spec.resolution,
            height=spec.resolution,
            clipping_range=(0.05, 5.0),
        ),
        width=spec.resolution,
        height=spec.resolution,
        renderer_cfg=NewtonWarpRendererCfg(),
    )
    return cfg


def physics_cfg(spec: SceneSpec) -> Any:
    """Isaac Lab's coupled MuJoCo-Warp (robots) + VBD (cloth) solver, as the Lift-Cloth task."""
    from isaaclab_contrib.coupling import CouplerEntryCfg, CouplerProxyCfg, CouplerProxyMappingCfg
    from isaaclab_newton.physics import (
        MJWarpSolverCfg,
        NewtonCfg,
        NewtonCollisionPipelineCfg,
        NewtonSoftContactCfg,
        VBDSolverCfg,
    )

    radius = 0.004 * spec.world_scale
    robots = r"/World/envs/env_[^/]+/Robot(Left|Right)"
    return NewtonCfg(
        solver_cfg=CouplerProxyCfg(
            entries=[
                CouplerEntryCfg(
                    name="rigid",
                    solver_cfg=MJWarpSolverCfg(cone="elliptic", ls_iterations=50, integrator="implicitfast"),
                    bodies=[robots],
                ),
                CouplerEntryCfg(
                    name="soft",
                    solver_cfg=VBDSolverCfg(
                        iterations=VBD_ITERATIONS,
                        particle_enable_self_contact=True,
                        particle_self_contact_radius=radius,
                        particle_self_contact_margin=radius + 0.002 * spec.world_scale,
                        rigid_body_particle_contact_buffer_size=1024,
                    ),
                    all_particles=True,
                    include_static_shapes=True,
                ),
            ],
            proxies=[
                CouplerProxyMappingCfg(
                    source="rigid",
                    destination="soft",
                    bodies=[robots + r"/Geometry/.*panda_hand", robots + r"/Geometry/.*panda_(left|right)finger"],
                    collide_interval=1,
                    # Per-particle contacts: the Lift-Cloth task's full-surface contact samples each
                    # collider's SDF, which its primitive-collider Franka has and the converted
                    # example-robot-data mesh colliders do not ("no signed-distance field").
                    collision_pipeline=NewtonCollisionPipelineCfg(enable_rigid_soft_full_surface_contact=False),
                )
            ],
            iterations=1,
        ),
        soft_contact_cfg=NewtonSoftContactCfg(
            soft_contact_ke=8.0e3, soft_contact_kd=1.0e-2, soft_contact_mu=CLOTH_TABLE_FRICTION
        ),
        num_substeps=SUBSTEPS,
    )


class _Arm:
    """One Franka: differential IK to a TCP position at the fixed downward orientation."""

    def __init__(self, robot: Any, device: str) -> None:
        import torch
        from isaaclab.controllers import DifferentialIKController, DifferentialIKControllerCfg

        self.robot, self.torch = robot, torch
        self.joint_ids, _ = robot.find_joints("panda_joint[1-7]")
        self.finger_ids, _ = robot.find_joints("panda_finger_joint.*")
        body_ids, _ = robot.find_bodies("panda_hand")
        self.body = body_ids[0]
        self.jacobi_body = self.body - 1 if robot.is_fixed_base else self.body
        self.jacobi_joints = [j + robot.num_base_dofs for j in self.joint_ids]
        self.ik = DifferentialIKController(
            DifferentialIKControllerCfg(
                command_type="pose", use_relative_mode=False, ik_method="dls", ik_params={"lambda_val": 0.1}
            ),
            num_envs=1,
            device=device,
        )
        self.offset = torch.tensor([[0.0, 0.0, layout.TCP_OFFSET]], device=device)
        self.down = torch.tensor([layout.TCP_DOWN_QUAT_XYZW], device=device)
        self.openness = 1.0

    def tcp_world(self) -> np.ndarray:
        import isaaclab.utils.math as m

        d = self.robot.data
        pos = d.body_pos_w.torch[:, self.body]
        quat = d.body_quat_w.torch[:, self.body]
        return (pos + m.quat_apply(quat, self.offset))[0].cpu().numpy().astype(np.float64)

    def hand_rotation_world(self) -> np.ndarray:
        """The simulated hand's measured orientation as a world rotation matrix [3, 3]."""
        import isaaclab.utils.math as m

        quat = self.robot.data.body_quat_w.torch[:, self.body]
        return m.matrix_from_quat(quat)[0].cpu().numpy().astype(np.float64)

    def solve(self, target_world: np.ndarray) -> Any:
        """One damped-least-squares IK update: joint positions [1, 7] moving the TCP towards
        `target_world` at the fixed downward orientation (Isaac Lab's DifferentialIKController,
        with the TCP offset folded into the hand Jacobian as its IK action term does)."""
        import isaaclab.utils.math as m

        torch = self.torch
        d = self.robot.data
        root_pos, root_quat = d.root_pos_w.torch, d.root_quat_w.torch
        hand_pos, hand_quat = d.body_pos_w.torch[:, self.body], d.body_quat_w.torch[:, self.body]
        ee_pos_b, ee_quat_b = m.subtract_frame_transforms(root_pos, root_quat, hand_pos, hand_quat)
        ee_pos_b = ee_pos_b + m.quat_apply(ee_quat_b, self.offset)
        goal_w = torch.tensor(np.asarray(target_world, np.float32)[None], device=root_pos.device)
        goal_b, goal_quat_b = m.subtract_frame_transforms(root_pos, root_quat, goal_w, self.down)
        # q and -q are one orientation; the controller's error must not see a turn of 2 pi between
        # them (the right arm, on its exact start pose, was sent once round joint 7: measured).
        goal_quat_b = torch.where((goal_quat_b * ee_quat_b).sum(-1, keepdim=True) < 0, -goal_quat_b, goal_quat_b)
        self.ik.set_command(torch.cat([goal_b, goal_quat_b], dim=-1))
        jac = d.body_link_jacobian_w.torch[:, self.jacobi_body, :, self.jacobi_joints].clone()
        rot = m.matrix_from_quat(m.quat_inv(root_quat))
        jac[:, :3] = torch.bmm(rot, jac[:, :3])
        jac[:, 3:] = torch.bmm(rot, jac[:, 3:])
        lever = m.quat_apply(ee_quat_b, self.offset)
        jac[:, :3] += torch.linalg.cross(jac[:, 3:], lever[:, :, None].expand_as(jac[:, 3:]), dim=1)
        q = self.ik.compute(ee_pos_b, ee_quat_b, jac, d.joint_pos.torch[:, self.joint_ids])
        # Inside the joint limits: a placement written past one is undone by the rigid solver.
        limits = d.joint_pos_limits.torch[:, self.joint_ids]
        return torch.clamp(q, limits[..., 0], limits[..., 1])

    def start_at_default(self) -> None:
        """Write the configured start joints (`init_state`) into the simulation, at rest. Without an
        environment's reset event nothing writes them: the arms stood at all-zero joints (joint 4
        past its limit), and differential IK from there ended against the limits, 30 cm from the
        start pose (measured on CPU)."""
        q = self.robot.data.default_joint_pos.torch.clone()
        self.robot.write_joint_state_to_sim_index(position=q, velocity=self.torch.zeros_like(q))
        self.robot.set_joint_position_target_index(target=q)

    def command(self, target_world: np.ndarray, openness: float) -> None:
        """Joint position targets for the TCP at `target_world` and the fingers (physics tracks them)."""
        self.robot.set_joint_position_target_index(target=self.solve(target_world), joint_ids=self.joint_ids)
        self.openness = float(openness)
        fingers = layout.FINGER_CLOSED if gripper_closed(openness) else layout.FINGER_OPEN
        self.robot.set_joint_position_target_index(
            target=self.torch.full((1, len(self.finger_ids)), fingers, device=self.offset.device),
            joint_ids=self.finger_ids,
        )

    def place(self, target_world: np.ndarray) -> None:
        """Teleport the joints one IK update towards `target_world` (kinematics only, no physics),
        and make that the position target: how the arms start at the episode's gripper poses."""
        q = self.solve(target_world)
        self.robot.write_joint_position_to_sim_index(position=q, joint_ids=self.joint_ids)
        self.robot.set_joint_position_target_index(target=q, joint_ids=self.joint_ids)


class IsaacLabBackend(Backend):
    """Isaac Lab 3, kit-less, Newton backend; one environment, one start state per process."""

    name = "isaac_lab"
    stand_in = False

    def __init__(self, device: str = "cpu", grasp: str = DEFAULT_GRASP) -> None:
        import isaaclab  # noqa: F401  (fail at start, with the server's clear message, if absent)

        HeldCloth(grasp)  # an unknown model is refused before the scene is built
        self.device = device
        self.grasp = grasp
        self.spec: SceneSpec | None = None
        self._reset_started = False
        self._tmp = tempfile.TemporaryDirectory(prefix="instant_fold_isaac_")
        self.timings_: dict[str, float] = {}

    def timings(self) -> dict[str, float]:
        return dict(self.timings_)

    def detail(self) -> dict[str, Any]:
        return {
            "simulator": "Isaac Lab 3 (kit-less, Newton backend)",
            **_versions(),
            "device": self.device,
            "grasp": self.grasp,
        }

    # ------------------------------------------------------------------ build

    def reset(self, spec: SceneSpec) -> None:
        if self._reset_started:
            # Isaac Lab's SimulationContext is a process-wide singleton bound to one stage: a new
            # garment mesh needs a new process (the sim node starts one per start state).
            raise BackendError("isaac_lab: one start state per process; start a new bridge for another")
        import isaaclab.sim as sim_utils
        import torch
        from isaaclab.utils import instantiate

        self._reset_started = True
        t0 = time.perf_counter()
        root = os.environ.get("ISAACSIM_ASSET_ROOT", "")
        try:
            robot_path = str(panda_usd(__import__("pathlib").Path(root)))
        except Exception as exc:  # AssetError: say what to run
            raise BackendError(str(exc)) from exc
        garment_path = layout.garment_usd(spec, os.path.join(self._tmp.name, "garment.usda"))
        self.sim = sim_utils.SimulationContext(
            sim_utils.SimulationCfg(dt=1.0 / spec.fps, device=self.device, physics=physics_cfg(spec))
        )
        self.scene = instantiate(scene_cfg(spec, garment_path, robot_path))
        self.sim.reset()
        self.cloth = self.scene["garment"]
        n = self.cloth.data.nodal_pos_w.torch.shape[1]
        if n != len(spec.positions):
            raise BackendError(f"isaac_lab: the garment spawned with {n} particles, the spec has {len(spec.positions)}")
        state = torch.cat([torch.from_numpy(spec.positions), torch.from_numpy(spec.velocities)], dim=-1).to(
            self.cloth.data.nodal_pos_w.torch.device
        )[None]
        self.cloth.write_nodal_state_to_sim_index(state)
        self.kinematic = torch.zeros((1, n, 4), device=state.device)
        self.kinematic[..., 3] = 1.0  # all free
        self.arms = [_Arm(self.scene[f"robot_{name}"], str(state.device)) for name in ARMS]
        for arm in self.arms:
            arm.start_at_default()
        self.sim.forward()
        self.scene.update(0.0)
        self.holds = [HeldCloth(self.grasp) for _ in ARMS]
        self.table = layout.table_depth(spec.intrinsics, spec.T_world_camera, spec.resolution)
        self.spec = spec
        self.timings_["build_s"] = time.perf_counter() - t0
        # Bring both TCPs to the episode's initial gripper positions before time starts (the
        # cloth is held kinematic meanwhile, so it stays where the generator left it).
        self._move_arms_to(spec.grippers[:, :3])

    def _move_arms_to(
        self, targets: np.ndarray, max_iterations: int = 200, tol: float = 0.005, settle_frames: int = 40
    ) -> None:
        """Put both TCPs at `targets` before time starts: IK updates applied to the joints
        directly with forward kinematics in between, then physics frames with the cloth held
        kinematic (so it does not move) until the arms are there (the rigid solver keeps its own
        joint state, so a kinematic placement alone snapped back to the ready pose on the first
        step: 0.45 m TCP error, measured)."""
        for _ in range(max_iterations):
            if max(np.linalg.norm(arm.tcp_world() - t) for arm, t in zip(self.arms, targets, strict=True)) < tol:
                break
            for arm, target in zip(self.arms, targets, strict=True):
                arm.place(target)
            self.sim.forward()
            self.scene.update(0.0)
        # The rigid solver (MuJoCo-Warp) keeps its own joint state: let physics settle the arms
        # on the placed targets with the cloth held kinematic where it lies.
        self.kinematic[..., :3] = self.cloth.data.nodal_pos_w.torch
        self.kinematic[..., 3] = 0.0
        self.cloth.write_nodal_kinematic_target_to_sim_index(self.kinematic)
        settled = 0
        while settled < settle_frames:  # at least one physics frame: only physics shows where they are
            for arm, target in zip(self.arms, targets, strict=True):
                arm.command(target, 1.0)
            self._advance()
            settled += 1
            if max(np.linalg.norm(arm.tcp_world() - t) for arm, t in zip(self.arms, targets, strict=True)) < 0.01:
                break
        self.kinematic[..., 3] = 1.0
        self.cloth.write_nodal_kinematic_target_to_sim_index(self.kinematic)
        self.timings_["arm_settle_frames"] = float(settled)
        self.timings_["arm_placement_error_m"] = float(
            max(np.linalg.norm(arm.tcp_world() - t) for arm, t in zip(self.arms, targets, strict=True))
        )

    def _advance(self) -> None:
        self.scene.write_data_to_sim()
        self.sim.step(render=False)
        self.scene.update(self.sim.get_physics_dt())

    # ------------------------------------------------------------------ stepping

    def _spec(self) -> SceneSpec:
        if self.spec is None:
            raise BackendError("isaac_lab: no scene (reset first)")
        return self.spec

    def step(self, target: np.ndarray, openness: np.ndarray) -> None:
        spec = self._spec()
        positions = self.cloth.data.nodal_pos_w.torch[0].cpu().numpy()
        for i, arm in enumerate(self.arms):
            closes, was_closed = gripper_closed(openness[i]), gripper_closed(arm.openness)
            if closes and not was_closed:  # close: hold the cloth within the grasp radius
                hand = arm.hand_rotation_world()
                self.holds[i].grasp(positions, arm.tcp_world(), hand, spec.grasp_radius, self.holds[1 - i].ids)
            elif was_closed and not closes:  # open: release
                self.holds[i].release()
            arm.command(target[i], float(openness[i]))
        self._hold(target)
        t0 = time.perf_counter()
        self._advance()
        if self.grasp == "fingers":
            # The fingers moved during the frame: the held cloth ends it where they are.
            self._hold(target)
            pos = self.cloth.data.nodal_pos_w.torch.clone()
            held = self.kinematic[..., 3] == 0.0
            pos[held] = self.kinematic[..., :3][held]
            self.cloth.write_nodal_pos_to_sim_index(pos)
        self.timings_["step_s"] = time.perf_counter() - t0
        self.timings_["frames"] = self.timings_.get("frames", 0.0) + 1
        self.timings_["step_total_s"] = self.timings_.get("step_total_s", 0.0) + self.timings_["step_s"]

    def _hold(self, commanded: np.ndarray) -> None:
        """Make each gripper's held particles kinematic at the grasp model's targets, the rest free."""
        self.kinematic[..., 3] = 1.0
        for i, (arm, hold) in enumerate(zip(self.arms, self.holds, strict=True)):
            if hold.ids.size:
                ids = self.torch_ids(hold.ids)
                goal = hold.targets(arm.tcp_world(), arm.hand_rotation_world(), commanded[i])
                self.kinematic[0, ids, :3] = self._tensor(goal)
                self.kinematic[0, ids, 3] = 0.0
        self.cloth.write_nodal_kinematic_target_to_sim_index(self.kinematic)

    def torch_ids(self, ids: np.ndarray) -> Any:
        import torch

        return torch.as_tensor(ids, dtype=torch.long, device=self.kinematic.device)

    def _tensor(self, a: np.ndarray) -> Any:
        import torch

        return torch.as_tensor(a, device=self.kinematic.device)

    def state(self) -> BackendState:
        self._spec()
        pos = self.cloth.data.nodal_pos_w.torch[0].cpu().numpy().astype(np.float32)
        vel = self.cloth.data.nodal_vel_w.torch[0].cpu().numpy()
        grippers = np.array([[*arm.tcp_world(), arm.openness] for arm in self.arms], dtype=np.float64)
        return BackendState(pos, grippers, float(np.percentile(np.linalg.norm(vel, axis=1), 95)))

    def observe(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        self._spec()
        camera = self.scene["camera"]
        camera.update(self.sim.get_physics_dt(), force_recompute=True)
        out = camera.data.output
        depth = out["distance_to_image_plane"][0, ..., 0].cpu().numpy().astype(np.float32)
        depth = np.where(np.isfinite(depth), depth, 0.0).astype(np.float32)
        # Ids: 0 background (no hit), 1 unlabelled (the garment, whose triangles are no shape),
        # >= 2 labelled shapes (robots, table: semantic_tags).
        seg = out["semantic_segmentation"][0].cpu().numpy().reshape(*depth.shape, -1)[..., 0]
        rgb = layout.paint_garment(
            out["rgb"][0, ..., :3].cpu().numpy().astype(np.uint8),
            out["rgb_hdr"][0, ..., :3].cpu().numpy(),
            seg == layout.UNLABELLED_ID,
            cloth_colour(self._spec()),
        )
        # The robots stay in the image (the rollout video shows the Frankas); the cloth mask, so
        # the cloth tokens, excludes them: cloth = above the table plane and no shape.
        return rgb, depth, layout.cloth_mask(depth, self.table, seg >= 2)

    def close(self) -> None:
        self._tmp.cleanup()
