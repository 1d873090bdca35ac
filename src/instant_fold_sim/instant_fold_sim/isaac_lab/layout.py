"""Geometry of the Isaac Lab scene, as plain numpy (testable without Isaac Lab).

Everything is in the bridge frame (spec module): the Newton world frame in real metres, z up,
table top at z = 0, camera optical frame x right / y down / z forward.

Choices where the paper is silent (its Isaac Lab set-up is "two Franka robots"; no placement):

* **Arms.** Two Franka Panda arms on the table, left and right of the garment and a little
  beyond its neck side, facing each other: bases at (-`ARM_BASE_X`, `ARM_BASE_Y`, 0) facing +x
  (left arm, image left) and (+`ARM_BASE_X`, `ARM_BASE_Y`, 0) facing -x (right arm). Chosen with
  `reach_report` over laid-out start states (cpu-small, 5 garments/seeds): 0.55 / 0.25 puts
  >= 98.6 % of every garment within reach of at least one arm and >= 70 % within reach of each,
  both home poses (±0.73, -0.17, 0.28) reachable and 0.46 m from their base's axis. Bases
  further out (0.8 m) leave up to 11 % of the garment out of reach; bases level with the homes
  put the homes over the base columns.
* **Grasp point (TCP).** The point between the fingertips, `TCP_OFFSET` along the hand's z axis
  (Isaac Lab's Franka tasks use 0.1034-0.107 m); the commanded gripper position is the TCP.
* **Orientation.** Fixed, pointing straight down (hand z axis = world -z), fingers closing
  along world y, for the whole fold (the policy commands positions only).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from instant_fold_control.transforms import matrix_to_quaternion, quaternion_to_matrix

from .spec import SceneSpec

#: Each arm's base: distance from the table centre along world x, offset along world y (m).
ARM_BASE_X = 0.55
ARM_BASE_Y = 0.25
#: The Panda's reach from the shoulder (joint 2 axis) to the wrist centre (m) and the shoulder height.
PANDA_REACH = 0.855
PANDA_SHOULDER_Z = 0.333
#: Hand frame -> TCP (m along the hand's z axis) and wrist centre -> hand frame (flange 0.107).
TCP_OFFSET = 0.1034
WRIST_TO_TCP = 0.107 + TCP_OFFSET
#: TCP orientation, quaternion (x, y, z, w) as Isaac Lab 3 writes them: 180 deg about world x
#: (hand z down), so the fingers close along world y.
TCP_DOWN_QUAT_XYZW = (1.0, 0.0, 0.0, 0.0)
#: Panda kinematics for the start configuration (`panda_ik`): Franka's published modified-DH
#: parameters (a, d, alpha) of joints 1-7, the flange 0.107 m along joint 7's axis, the hand
#: turned -45 deg about it; joint position limits (rad) as in the converted asset.
PANDA_DH = (
    (0.0, 0.333, 0.0),
    (0.0, 0.0, -np.pi / 2),
    (0.0, 0.316, np.pi / 2),
    (0.0825, 0.0, np.pi / 2),
    (-0.0825, 0.384, -np.pi / 2),
    (0.0, 0.0, np.pi / 2),
    (0.088, 0.0, np.pi / 2),
)
PANDA_FLANGE, PANDA_HAND_YAW = 0.107, -np.pi / 4
PANDA_LIMITS = np.array(
    [
        [-2.8973, 2.8973],
        [-1.7628, 1.7628],
        [-2.8973, 2.8973],
        [-3.0718, -0.0698],
        [-2.8973, 2.8973],
        [-0.0175, 3.7525],
        [-2.8973, 2.8973],
    ]
)
#: Franka's hand-down home (elbow up), the start of `panda_ik`'s iterations.
PANDA_HOME = np.array([0.0, -np.pi / 4, 0.0, -3 * np.pi / 4, 0.0, np.pi / 2, np.pi / 4])
#: Finger joint targets (m per finger): open and closed on thin cloth (Isaac Lab's cloth task
#: closes fully, 0.0).
FINGER_OPEN, FINGER_CLOSED = 0.04, 0.0


@dataclass(frozen=True)
class ArmPlacement:
    """Where one arm's base stands (world) and which way it faces."""

    name: str  # "left" | "right" (image left / right)
    position: tuple[float, float, float]
    yaw: float  # rad about world z

    @property
    def quat_xyzw(self) -> tuple[float, float, float, float]:
        return (0.0, 0.0, float(np.sin(self.yaw / 2)), float(np.cos(self.yaw / 2)))


def arm_placements(base_x: float = ARM_BASE_X, base_y: float = ARM_BASE_Y) -> tuple[ArmPlacement, ArmPlacement]:
    """The two Frankas: left (index 0) at -x facing +x, right (index 1) at +x facing -x."""
    return (
        ArmPlacement("left", (-base_x, base_y, 0.0), 0.0),
        ArmPlacement("right", (base_x, base_y, 0.0), float(np.pi)),
    )


def joint1_towards(arm: ArmPlacement, point: np.ndarray) -> float:
    """Base yaw (Panda joint 1, rad) that turns the arm towards `point` (world): the IK seed, so
    damped least squares starts on the right side instead of swinging over from the ready pose."""
    d = np.asarray(point, np.float64)[:2] - np.asarray(arm.position[:2])
    c, s = np.cos(-arm.yaw), np.sin(-arm.yaw)
    return float(np.arctan2(s * d[0] + c * d[1], c * d[0] - s * d[1]))


def reachable(points: np.ndarray, arm: ArmPlacement, margin: float = 0.05) -> np.ndarray:
    """Which TCP positions [N, 3] the arm can reach pointing down: the wrist centre (above the
    TCP by `WRIST_TO_TCP`) within the reach sphere around the shoulder, less `margin`."""
    wrist = np.asarray(points, np.float64) + np.array([0.0, 0.0, WRIST_TO_TCP])
    shoulder = np.asarray(arm.position) + np.array([0.0, 0.0, PANDA_SHOULDER_Z])
    return np.linalg.norm(wrist - shoulder, axis=-1) <= PANDA_REACH - margin


def reach_report(
    spec: SceneSpec, lift: float = 0.02, base_x: float = ARM_BASE_X, base_y: float = ARM_BASE_Y
) -> dict[str, float]:
    """Fraction of the start garment (grasp points `lift` above each particle) within reach of
    the left arm, the right arm, either; and whether both homes are reachable by their arms."""
    left, right = arm_placements(base_x, base_y)
    pts = spec.positions.astype(np.float64) + np.array([0.0, 0.0, lift])
    l_ok, r_ok = reachable(pts, left), reachable(pts, right)
    return {
        "left": float(l_ok.mean()),
        "right": float(r_ok.mean()),
        "either": float((l_ok | r_ok).mean()),
        "homes": float(reachable(spec.home[:1], left)[0] and reachable(spec.home[1:], right)[0]),
        "home_clearance": float(
            min(np.linalg.norm(spec.home[a, :2] - np.asarray(arm.position[:2])) for a, arm in enumerate((left, right)))
        ),
    }


def camera_offset_ros(T_world_camera: np.ndarray) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Isaac Lab `CameraCfg.OffsetCfg(pos, rot, convention="ros")` of the project's camera.

    The project's camera frame is the ROS optical frame (x right, y down, z forward), which is
    Isaac Lab's "ros" convention, so the pose carries over as it is (rot as x, y, z, w)."""
    t = np.asarray(T_world_camera, np.float64)
    return tuple(map(float, t[:3, 3])), tuple(map(float, matrix_to_quaternion(t[:3, :3])))


def intrinsics_row_major(k: np.ndarray) -> list[float]:
    """`PinholeCameraCfg.from_intrinsic_matrix` wants [fx, 0, cx, 0, fy, cy, 0, 0, 1]."""
    return [float(v) for v in np.asarray(k, np.float64).reshape(9)]


def table_depth(intrinsics: np.ndarray, T_world_camera: np.ndarray, resolution: int) -> np.ndarray:
    """Depth along the optical axis of the table plane z = 0 at every pixel (0 where a ray
    misses it), as the project's renderer computes the background."""
    k = np.asarray(intrinsics, np.float64)
    t = np.asarray(T_world_camera, np.float64)
    jj, ii = np.meshgrid(np.arange(resolution), np.arange(resolution))
    rays = np.stack([(jj - k[0, 2]) / k[0, 0], (ii - k[1, 2]) / k[1, 1], np.ones((resolution, resolution))], -1)
    rays_world_z = rays @ t[2, :3]
    with np.errstate(divide="ignore", invalid="ignore"):
        depth = np.where(rays_world_z < 0, -t[2, 3] / rays_world_z, 0.0)
    return depth.astype(np.float32)


def cloth_mask(
    depth: np.ndarray, table: np.ndarray, robot: np.ndarray | None = None, tolerance: float = 0.001
) -> np.ndarray:
    """Cloth pixels of an Isaac Lab frame: in front of the table plane by more than `tolerance`
    and not robot. Newton's renderer labels shapes (robots, table) in its segmentation, not cloth
    particles, so the cloth is what stands above the table and is no shape. A garment lying flat
    rests 1.6-3 mm above the table (bridge metres, 1st-90th percentile of its pixels, cpu-small):
    a 4 mm tolerance found 5 % of it, 1 mm finds >= 95 %."""
    mask = (depth > 0) & (table > 0) & (depth < table - tolerance)
    if robot is not None:
        mask &= ~np.asarray(robot, bool)
    return mask


#: Isaac Lab's reserved semantic-segmentation id of a hit on no labelled prim. Newton's renderer
#: gives it to the cloth's triangles (a deformable's triangles are no shapes, so they carry no
#: label); the scene labels every shape (robots, table), so it marks exactly the garment.
UNLABELLED_ID = 1


def srgb_to_linear(c: np.ndarray) -> np.ndarray:
    """Display (sRGB) values in [0, 1] to linear light (the IEC 61966-2-1 transfer function)."""
    c = np.clip(np.asarray(c, np.float64), 0.0, 1.0)
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def linear_to_srgb(c: np.ndarray) -> np.ndarray:
    """Linear light to display (sRGB) values in [0, 1], clipped (the inverse of `srgb_to_linear`)."""
    c = np.clip(np.asarray(c, np.float64), 0.0, 1.0)
    return np.where(c <= 0.0031308, c * 12.92, 1.055 * c ** (1 / 2.4) - 0.055)


def paint_garment(rgb: np.ndarray, radiance: np.ndarray, garment: np.ndarray, colour: np.ndarray) -> np.ndarray:
    """The camera image [H, W, 3] uint8 with the garment's pixels in the episode's cloth colour.

    Newton's Warp renderer (newton 1.6.1, Isaac Lab 3.0.0) shades a deformable's triangles with a
    white albedo and reads no material for them, and kit-less Isaac Lab does not apply a USD
    file's visual material at all ("Skipping visual material application"), so the garment came
    out white. Its shading is linear in the albedo (ambient and each light's term are multiplied
    by it), so the white garment's linear radiance (`radiance`, the camera's `rgb_hdr`) times the
    colour's linear albedo is exactly the radiance of a garment of that colour, sRGB-encoded as
    the renderer encodes `rgb`. `colour` is a display colour in [0, 1] as the project's renderer
    draws it (a fully lit garment shows exactly it); `garment` [H, W] bool marks its pixels."""
    out = np.array(rgb, dtype=np.uint8, copy=True)
    lit = np.asarray(radiance, np.float64)[garment] * srgb_to_linear(colour)[None, :]
    out[garment] = np.round(linear_to_srgb(lit) * 255.0).astype(np.uint8)
    return out


def upward_faces(vertices: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """`faces` [F, 3] wound consistently (each shared edge traversed in opposite directions by
    its two triangles), each connected piece turned so that its area-weighted normal points up
    (+z, towards the overhead camera) at `vertices`.

    Newton's renderer lights a triangle on the side its winding's normal points to and leaves the
    other side dark (no two-sided shading), and the procedural garments are not wound
    consistently (proc:1: 40 of its 410 triangles face down, a sleeve among them), so one
    sleeve of a flat garment rendered dark in Isaac Lab. The project's own renderer shades both
    sides alike and its Newton scene keeps the generator's mesh: only the Isaac Lab USD is re-wound."""
    faces = np.array(faces, dtype=np.int64, copy=True)
    by_edge: dict[tuple[int, int], list[int]] = {}
    for f, tri in enumerate(faces):
        for k in range(3):
            a, b = int(tri[k]), int(tri[(k + 1) % 3])
            by_edge.setdefault((min(a, b), max(a, b)), []).append(f)

    def directed(f: int) -> set[tuple[int, int]]:
        tri = faces[f]
        return {(int(tri[k]), int(tri[(k + 1) % 3])) for k in range(3)}

    v = np.asarray(vertices, np.float64)
    seen = np.zeros(len(faces), bool)
    for seed in range(len(faces)):
        if seen[seed]:
            continue
        seen[seed], piece, queue = True, [seed], [seed]
        while queue:
            f = queue.pop()
            for a, b in directed(f):
                for g in by_edge[(min(a, b), max(a, b))]:
                    if seen[g]:
                        continue
                    if (a, b) in directed(g):  # traversed the same way: g is wound the other way round
                        faces[g] = faces[g][::-1].copy()
                    seen[g] = True
                    piece.append(g)
                    queue.append(g)
        tri = v[faces[piece]]
        if np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])[:, 2].sum() < 0:
            faces[piece] = faces[piece][:, ::-1]
    return faces


def garment_usd(spec: SceneSpec, path: str) -> str:
    """Write the garment as a USD mesh at its rest shape (the cloth's reference configuration;
    the start positions are written into the simulation after spawning), its triangles wound
    upwards (`upward_faces`) so that Newton's one-sided shading lights the whole flat garment.
    Needs `pxr`."""
    from pxr import Gf, Usd, UsdGeom, Vt

    stage = Usd.Stage.CreateNew(path)
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    root = UsdGeom.Xform.Define(stage, "/Garment")
    stage.SetDefaultPrim(root.GetPrim())
    mesh = UsdGeom.Mesh.Define(stage, "/Garment/mesh")
    mesh.CreatePointsAttr(Vt.Vec3fArray([Gf.Vec3f(*map(float, p)) for p in spec.rest_positions]))
    mesh.CreateFaceVertexCountsAttr(Vt.IntArray([3] * len(spec.faces)))
    faces = upward_faces(spec.rest_positions, spec.faces)
    mesh.CreateFaceVertexIndicesAttr(Vt.IntArray([int(i) for i in faces.reshape(-1)]))
    mesh.CreateSubdivisionSchemeAttr(UsdGeom.Tokens.none)
    mesh.CreateDoubleSidedAttr(True)
    stage.GetRootLayer().Save()
    return path


def _dh(a: float, d: float, alpha: float, theta: float) -> np.ndarray:
    ca, sa, ct, st = np.cos(alpha), np.sin(alpha), np.cos(theta), np.sin(theta)
    return np.array([[ct, -st, 0, a], [st * ca, ct * ca, -sa, -d * sa], [st * sa, ct * sa, ca, d * ca], [0, 0, 0, 1]])


def panda_frames(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Joint frames [7, 4, 4] (each joint's axis is its frame's z) and the TCP pose [4, 4], in the
    arm's base frame, for joint positions `q` [7]."""
    t, frames = np.eye(4), []
    for (a, d, alpha), theta in zip(PANDA_DH, np.asarray(q, np.float64), strict=True):
        t = t @ _dh(a, d, alpha, theta)
        frames.append(t)
    tcp = t @ _dh(0.0, PANDA_FLANGE, 0.0, PANDA_HAND_YAW) @ _dh(0.0, TCP_OFFSET, 0.0, 0.0)
    return np.stack(frames), tcp


def rotation_error(r: np.ndarray, goal: np.ndarray) -> np.ndarray:
    """Axis-angle vector turning `r` into `goal` (both 3x3, base frame)."""
    e = goal @ r.T
    v = np.array([e[2, 1] - e[1, 2], e[0, 2] - e[2, 0], e[1, 0] - e[0, 1]]) / 2
    sin, cos = np.linalg.norm(v), (np.trace(e) - 1) / 2
    if sin > 1e-6:
        return v / sin * np.arctan2(sin, cos)
    if cos > 0:  # no turn
        return v
    # a half turn: the axis is the column of (E + I) / 2 = a a^T with the largest norm
    half = (e + np.eye(3)) / 2
    axis = half[:, int(np.argmax(np.linalg.norm(half, axis=0)))]
    return axis / np.linalg.norm(axis) * np.pi


def panda_ik(arm: ArmPlacement, target_world: np.ndarray, iterations: int = 300, damping: float = 0.05) -> np.ndarray:
    """Joint positions [7], inside `PANDA_LIMITS`, that put the arm's TCP at `target_world` with the
    fixed downward orientation: damped least squares on the chain above, from the home pose turned
    towards the target, clamped to the limits at every update. The Isaac Lab scene starts each
    arm here. Started from Isaac Lab's ready pose instead, the simulator's own differential IK
    reached the start pose only through the elbow's limit (joint 4 at +1.3 rad); physics then
    undid it, and the right TCP settled 15-20 cm away (measured on CPU)."""
    base = quaternion_to_matrix(arm.quat_xyzw)
    goal_p = base.T @ (np.asarray(target_world, np.float64) - np.asarray(arm.position))
    goal_r = base.T @ quaternion_to_matrix(TCP_DOWN_QUAT_XYZW)
    q = PANDA_HOME.copy()
    q[0] = joint1_towards(arm, target_world)
    # the wrist angle that turns the hand nearest to the goal (the hand turns with joint 1)
    wrists = np.linspace(*PANDA_LIMITS[6], 73)
    q[6] = min(wrists, key=lambda w: np.linalg.norm(rotation_error(panda_frames([*q[:6], w])[1][:3, :3], goal_r)))
    for _ in range(iterations):
        frames, tcp = panda_frames(q)
        error = np.concatenate([goal_p - tcp[:3, 3], rotation_error(tcp[:3, :3], goal_r)])
        if np.linalg.norm(error[:3]) < 1e-5 and np.linalg.norm(error[3:]) < 1e-4:
            break
        axes = frames[:, :3, 2]
        jac = np.concatenate([np.cross(axes, tcp[:3, 3] - frames[:, :3, 3]).T, axes.T])
        step = jac.T @ np.linalg.solve(jac @ jac.T + damping**2 * np.eye(6), error)
        q = np.clip(q + step, PANDA_LIMITS[:, 0], PANDA_LIMITS[:, 1])
    return q
