"""numpy <-> message conversions for cloth tokens, arm states, action chunks, demonstrations and
RGB-D frames (single images: `standins.image_bridge`, the stand-in for cv_bridge).

The custom messages carry flat arrays, so every conversion lives here once. Each `*_from_msg` validates what arrives over the wire (lengths,
counts, encodings, finiteness) and each `*_to_msg` validates what a node is about to send;
errors are `MessageConversionError`s that name the message field, e.g.
``ClothTokens.positions: expected 192 values (num_tokens=64 x 3), got 191``.
"""

from __future__ import annotations

import array

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import Point
from sensor_msgs.msg import CameraInfo, Image
from std_msgs.msg import Header

from instant_fold_core.contracts import ActionChunk
from instant_fold_core.demonstration import Demonstration, DemonstrationError
from instant_fold_core.distortion import NO_DISTORTION, Distortion
from instant_fold_core.rgbd import RGBDFrame
from instant_fold_core.tokens import TokenArrays
from instant_fold_core.validation import ValidationError
from instant_fold_interfaces.msg import ActionChunk as ActionChunkMsg
from instant_fold_interfaces.msg import ArmState, ClothTokens, DualArmState, Keyframe
from instant_fold_interfaces.msg import Demonstration as DemonstrationMsg
from instant_fold_ros.message_errors import MessageConversionError, check_field
from instant_fold_ros.standins.image_bridge import image_from_msg, image_to_msg


def _float32_sequence(values: np.ndarray) -> array.array:
    """Fast path into a float32[] field (the generated setter would iterate element by element)."""
    out = array.array("f")
    out.frombytes(np.ascontiguousarray(values, dtype=np.float32).tobytes())
    return out


def _sized_field(msg_name: str, field: str, values: object, expected: int, detail: str) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float32)
    if arr.size != expected:
        raise MessageConversionError(f"{msg_name}.{field}: expected {expected} values ({detail}), got {arr.size}")
    return arr


def _flat_field(msg_name: str, field: str, values: object, expected: int, detail: str) -> np.ndarray:
    arr = _sized_field(msg_name, field, values, expected, detail)
    if not np.isfinite(arr).all():
        raise MessageConversionError(f"{msg_name}.{field}: contains NaN or infinite values")
    return arr


def make_header(frame_id: str, stamp: Time | None = None) -> Header:
    return Header(frame_id=frame_id, stamp=stamp if stamp is not None else Time())


# --- cloth tokens -------------------------------------------------------------------------


def tokens_to_msg(
    positions: np.ndarray,
    features: np.ndarray,
    valid: np.ndarray | None = None,
    *,
    header: Header | None = None,
    encoder_id: str = "",
) -> ClothTokens:
    """Pack tokens (positions [N, 3] metres, features [N, D], valid [N] bool) into a message."""
    positions = check_field("ClothTokens.positions", positions, (None, 3))
    n = positions.shape[0]
    features = check_field("ClothTokens.features", features, (n, None))
    if valid is None:
        valid = np.ones(n, dtype=bool)
    valid = check_field("ClothTokens.valid", valid, (n,), np.bool_)
    if n and not valid.any():  # what the receiving side refuses too (`tokens_from_msg`)
        raise MessageConversionError("ClothTokens.valid: no valid token")
    return ClothTokens(
        header=header if header is not None else Header(),
        num_tokens=n,
        feature_dim=features.shape[1],
        positions=_float32_sequence(positions),
        features=_float32_sequence(features),
        valid=valid.tolist(),
        encoder_id=encoder_id,
    )


def tokens_from_msg(msg: ClothTokens, expected_tokens: int | None = None) -> TokenArrays:
    """Unpack and validate a ClothTokens message; `expected_tokens` enforces N when given."""
    n, d = int(msg.num_tokens), int(msg.feature_dim)
    if expected_tokens is not None and n != expected_tokens:
        raise MessageConversionError(f"ClothTokens.num_tokens: expected {expected_tokens}, got {n}")
    positions = _flat_field("ClothTokens", "positions", msg.positions, n * 3, f"num_tokens={n} x 3")
    features = _flat_field("ClothTokens", "features", msg.features, n * d, f"num_tokens={n} x feature_dim={d}")
    if len(msg.valid) != n:
        raise MessageConversionError(f"ClothTokens.valid: expected {n} flags (num_tokens), got {len(msg.valid)}")
    valid = np.asarray(msg.valid, dtype=bool)
    if n and not valid.any():
        raise MessageConversionError("ClothTokens.valid: no valid token")
    return TokenArrays(positions.reshape(n, 3), features.reshape(n, d), valid)


# --- arm states ---------------------------------------------------------------------------


def _arm_to_msg(values: np.ndarray) -> ArmState:
    x, y, z, g = (float(v) for v in values)
    return ArmState(position=Point(x=x, y=y, z=z), openness=g)


def _arm_from_msg(msg: ArmState) -> list[float]:
    p = msg.position
    return [p.x, p.y, p.z, msg.openness]


def dual_arm_state_to_msg(state: np.ndarray, header: Header | None = None) -> DualArmState:
    """Pack a [2, 4] array of (x, y, z, openness) for (left, right) arms."""
    state = check_field("DualArmState", state, (2, 4))
    return DualArmState(
        header=header if header is not None else Header(),
        left=_arm_to_msg(state[0]),
        right=_arm_to_msg(state[1]),
    )


def dual_arm_state_from_msg(msg: DualArmState) -> np.ndarray:
    """Unpack to a float32 [2, 4] array, rejecting non-finite values and openness outside [0, 1]."""
    state = np.array([_arm_from_msg(msg.left), _arm_from_msg(msg.right)], dtype=np.float32)
    for arm, row in zip(("left", "right"), state, strict=True):
        if not np.isfinite(row).all():
            raise MessageConversionError(f"DualArmState.{arm}: contains NaN or infinite values")
        if not 0.0 <= row[3] <= 1.0:
            raise MessageConversionError(f"DualArmState.{arm}.openness: must be in [0, 1], got {row[3]}")
    return state


def home_pose_to_msg(home: np.ndarray, header: Header | None = None) -> DualArmState:
    """Pack both arms' home positions [2, 3] (camera frame) as a DualArmState with open grippers."""
    home = check_field("home", home, (2, 3))
    return dual_arm_state_to_msg(np.concatenate([home, np.ones((2, 1))], axis=1), header)


def home_pose_from_msg(msg: DualArmState) -> np.ndarray:
    """Unpack the home positions as float64 [2, 3]: the pose is a fixed point of the robot, kept
    to the message's precision (an arm state is float32, a measurement)."""
    home = np.array([[p.x, p.y, p.z] for p in (msg.left.position, msg.right.position)], dtype=np.float64)
    if not np.isfinite(home).all():
        raise MessageConversionError(f"home (DualArmState): contains NaN or infinite values: {home.tolist()}")
    return home


# --- action chunks ------------------------------------------------------------------------


def action_chunk_to_msg(chunk: ActionChunk, header: Header | None = None) -> ActionChunkMsg:
    """Pack a chunk (valid by construction) into its message."""
    msg = ActionChunkMsg(
        header=header if header is not None else Header(),
        representation=int(chunk.representation),
        horizon=chunk.horizon,
        steps_to_execute=chunk.steps_to_execute,
        step_duration=chunk.step_duration,
        positions=_float32_sequence(chunk.positions),
        openness=_float32_sequence(chunk.openness),
        has_keypose=chunk.keypose is not None,
    )
    if chunk.keypose is not None:
        msg.keypose = dual_arm_state_to_msg(chunk.keypose, msg.header)
    return msg


def action_chunk_from_msg(msg: ActionChunkMsg) -> ActionChunk:
    """Unpack a message into the chunk contract. The message's own layout (array lengths against
    `horizon`) is checked here, every invariant of a chunk once, by `ActionChunk`; either raises a
    kind of `InvalidInputError` naming the field (`NonFiniteError` for NaN/inf)."""
    h = int(msg.horizon)
    positions = _sized_field("ActionChunk", "positions", msg.positions, h * 6, f"horizon={h} x 2 arms x 3")
    openness = _sized_field("ActionChunk", "openness", msg.openness, h * 2, f"horizon={h} x 2 arms")
    keypose = None
    if msg.has_keypose:
        keypose = np.array([_arm_from_msg(msg.keypose.left), _arm_from_msg(msg.keypose.right)], dtype=np.float32)
    return ActionChunk(
        positions.reshape(h, 2, 3),
        openness.reshape(h, 2),
        int(msg.steps_to_execute),
        float(msg.step_duration),
        int(msg.representation),
        keypose,
    )


# --- camera info ------------------------------------------------------------------------------


def intrinsics_from_camera_info(msg: CameraInfo) -> np.ndarray:
    """Return the 3x3 pinhole matrix K (float32) of a CameraInfo, rejecting an unset one."""
    k = np.asarray(msg.k, dtype=np.float32).reshape(3, 3)
    if not np.isfinite(k).all() or k[0, 0] <= 0 or k[1, 1] <= 0 or k[2, 2] != 1.0:
        raise MessageConversionError(f"CameraInfo.k: not a valid pinhole matrix: {k.ravel().tolist()}")
    return k


#: CameraInfo.distortion_model of each supported model: ROS's name for OpenCV's model, the
#: SDK's name where ROS has none (consumers that only know plumb_bob then see an unknown model
#: instead of silently wrong coefficients).
DISTORTION_MODEL_NAMES = {
    "none": "plumb_bob",
    "brown_conrady": "plumb_bob",
    "inverse_brown_conrady": "inverse_brown_conrady",
}


def camera_info_from_intrinsics(
    k: np.ndarray, width: int, height: int, header: Header | None = None, distortion: Distortion = NO_DISTORTION
) -> CameraInfo:
    """Build a CameraInfo for a pinhole matrix K and the lens distortion (coefficients k1, k2, p1, p2, k3)."""
    k = check_field("CameraInfo.k", np.asarray(k, dtype=np.float64), (3, 3))
    p = np.zeros((3, 4))
    p[:, :3] = k
    return CameraInfo(
        header=header if header is not None else Header(),
        width=width,
        height=height,
        distortion_model=DISTORTION_MODEL_NAMES[distortion.model],
        d=list(distortion.coeffs),
        k=k.ravel().tolist(),
        r=np.eye(3).ravel().tolist(),
        p=p.ravel().tolist(),
    )


def distortion_from_camera_info(msg: CameraInfo) -> Distortion:
    """The lens distortion of a CameraInfo; all-zero coefficients mean none whatever the model says."""
    d = tuple(float(v) for v in msg.d)
    if not any(d):
        return NO_DISTORTION
    model = {"plumb_bob": "brown_conrady", "inverse_brown_conrady": "inverse_brown_conrady"}.get(msg.distortion_model)
    if model is None or len(d) != 5:
        raise MessageConversionError(
            f"CameraInfo: distortion model {msg.distortion_model!r} with {len(d)} coefficients is not supported "
            "(plumb_bob or inverse_brown_conrady with k1, k2, p1, p2, k3)"
        )
    try:
        return Distortion(model, d)
    except ValidationError as exc:
        raise MessageConversionError(f"CameraInfo.d: {exc}") from exc


# --- RGB-D frames -----------------------------------------------------------------------------

COLOR_ENCODINGS = ("rgb8", "bgr8")
DEPTH_ENCODINGS = ("32FC1", "16UC1")


def rgbd_to_msgs(frame: RGBDFrame, header: Header) -> tuple[Image, Image, CameraInfo]:
    """Colour (rgb8), depth (32FC1, metres, 0 = invalid) and CameraInfo sharing one header."""
    frame.validate()
    h, w = frame.depth.shape
    return (
        image_to_msg(frame.color, "rgb8", header),
        image_to_msg(frame.depth, "32FC1", header),
        camera_info_from_intrinsics(frame.intrinsics, w, h, header, frame.distortion),
    )


def rgbd_from_msgs(color: Image, depth: Image, info: CameraInfo) -> RGBDFrame:
    """Build an RGBDFrame from aligned colour/depth images and their CameraInfo.

    Accepts rgb8/bgr8 colour and 32FC1 (metres) or 16UC1 (millimetres) depth. Non-finite depth
    pixels (NaN/inf, how some drivers mark missing returns) become 0, the invalid marker.
    """
    rgb = image_from_msg(color, COLOR_ENCODINGS)
    if color.encoding == "bgr8":
        rgb = rgb[..., ::-1].copy()
    raw = image_from_msg(depth, DEPTH_ENCODINGS)
    depth_m = raw.astype(np.float32) * (0.001 if depth.encoding == "16UC1" else 1.0)
    depth_m[~np.isfinite(depth_m)] = 0.0
    if rgb.shape[:2] != depth_m.shape:
        raise MessageConversionError(f"Image: depth {depth_m.shape} is not aligned to colour {rgb.shape[:2]}")
    if (info.width, info.height) != (rgb.shape[1], rgb.shape[0]):
        raise MessageConversionError(
            f"CameraInfo: size {info.width}x{info.height} does not match the images {rgb.shape[1]}x{rgb.shape[0]}"
        )
    stamp = color.header.stamp
    frame = RGBDFrame(
        rgb,
        depth_m,
        intrinsics_from_camera_info(info),
        stamp_ns=stamp.sec * 10**9 + stamp.nanosec,
        distortion=distortion_from_camera_info(info),
    )
    try:
        return frame.validate()
    except ValidationError as exc:
        raise MessageConversionError(str(exc)) from None


# --- demonstrations ---------------------------------------------------------------------------


def demonstration_to_msg(demo: Demonstration, header: Header) -> DemonstrationMsg:
    """Keyframes with images (colour, depth, mask, CameraInfo), keyposes and events."""
    demo.validate()
    keyframes = []
    for i in range(demo.num_keyframes):
        color, depth, info = rgbd_to_msgs(demo.frame(i), header)
        mask = image_to_msg(np.where(demo.mask[i], 255, 0).astype(np.uint8), "mono8", header)
        keyframes.append(
            Keyframe(
                header=header,
                frame_index=int(demo.frame_index[i]),
                color=color,
                depth=depth,
                mask=mask,
                camera_info=info,
                keypose=dual_arm_state_to_msg(demo.keypose[i], header),
                left_event=int(demo.events[i, 0]),
                right_event=int(demo.events[i, 1]),
            )
        )
    return DemonstrationMsg(
        header=header, name=demo.name, mode=demo.mode, description=demo.description, keyframes=keyframes
    )


def demonstration_from_msg(msg: DemonstrationMsg) -> Demonstration:
    """Rebuild a Demonstration from keyframes that carry images; errors name the keyframe."""
    if not msg.keyframes:
        raise MessageConversionError("Demonstration.keyframes: empty")
    frames, masks, keyposes, events, indices = [], [], [], [], []
    for i, kf in enumerate(msg.keyframes):
        try:
            if kf.color.width == 0:
                raise MessageConversionError("carries no images (token-only keyframes need a tokenizer-free path)")
            frames.append(rgbd_from_msgs(kf.color, kf.depth, kf.camera_info))
            masks.append(image_from_msg(kf.mask, ("mono8", "8UC1")) > 0)
            keyposes.append(dual_arm_state_from_msg(kf.keypose))
        except MessageConversionError as exc:
            raise MessageConversionError(f"Demonstration.keyframes[{i}]: {exc}") from None
        events.append((kf.left_event, kf.right_event))
        indices.append(kf.frame_index)
    shapes = {f.color.shape for f in frames}
    if len(shapes) != 1:
        raise MessageConversionError(f"Demonstration.keyframes: images differ in size {sorted(shapes)}")
    demo = Demonstration(
        color=np.stack([f.color for f in frames]),
        depth=np.stack([f.depth for f in frames]),
        mask=np.stack(masks),
        intrinsics=frames[0].intrinsics,
        keypose=np.stack(keyposes),
        events=np.asarray(events, np.uint8),
        frame_index=np.asarray(indices, np.int32),
        name=msg.name,
        mode=msg.mode,
        description=msg.description,
    )
    try:
        return demo.validate()
    except DemonstrationError as exc:
        raise MessageConversionError(str(exc)) from None
