"""numpy <-> message conversions: exact round trips and clear, field-naming errors."""

from __future__ import annotations

import numpy as np
import pytest

from instant_fold_core.contracts import ActionChunk, ChunkRepresentation
from instant_fold_core.errors import InvalidInputError, NonFiniteError
from instant_fold_ros.conversions import (
    MessageConversionError,
    action_chunk_from_msg,
    action_chunk_to_msg,
    camera_info_from_intrinsics,
    dual_arm_state_from_msg,
    dual_arm_state_to_msg,
    home_pose_from_msg,
    home_pose_to_msg,
    intrinsics_from_camera_info,
    make_header,
    tokens_from_msg,
    tokens_to_msg,
)
from instant_fold_ros.standins.image_bridge import image_from_msg, image_to_msg

RNG = np.random.default_rng(0)


def _tokens(n: int = 64, d: int = 32) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    positions = RNG.normal(size=(n, 3)).astype(np.float32)
    features = RNG.normal(size=(n, d)).astype(np.float32)
    valid = RNG.random(n) > 0.1
    valid[0] = True
    return positions, features, valid


def test_tokens_round_trip_is_exact() -> None:
    positions, features, valid = _tokens()
    msg = tokens_to_msg(positions, features, valid, header=make_header("cam"), encoder_id="enc-1")
    assert (msg.num_tokens, msg.feature_dim, msg.encoder_id) == (64, 32, "enc-1")
    out = tokens_from_msg(msg, expected_tokens=64)
    np.testing.assert_array_equal(out.positions, positions)
    np.testing.assert_array_equal(out.features, features)
    np.testing.assert_array_equal(out.valid, valid)


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda m: m.positions.pop(), "ClothTokens.positions"),
        (lambda m: m.features.append(0.0), "ClothTokens.features"),
        (lambda m: m.valid.pop(), "ClothTokens.valid"),
        (lambda m: m.positions.__setitem__(5, float("nan")), "ClothTokens.positions"),
        (lambda m: m.features.__setitem__(0, float("inf")), "ClothTokens.features"),
        (lambda m: setattr(m, "valid", [False] * 64), "ClothTokens.valid"),
    ],
)
def test_malformed_tokens_message_names_field(mutate, field: str) -> None:
    msg = tokens_to_msg(*_tokens())
    mutate(msg)
    with pytest.raises(MessageConversionError, match=field.replace(".", r"\.")):
        tokens_from_msg(msg)


def test_token_count_is_enforced() -> None:
    msg = tokens_to_msg(*_tokens(n=10))
    with pytest.raises(MessageConversionError, match=r"ClothTokens\.num_tokens: expected 64, got 10"):
        tokens_from_msg(msg, expected_tokens=64)


@pytest.mark.parametrize(
    ("positions", "features", "valid", "field"),
    [
        (np.zeros((64, 2), np.float32), np.zeros((64, 8), np.float32), None, "ClothTokens.positions"),
        (np.zeros((64, 3), np.float32), np.zeros((63, 8), np.float32), None, "ClothTokens.features"),
        (np.zeros((64, 3), np.float32), np.zeros((64, 8), np.float32), np.ones(64, np.int64), "ClothTokens.valid"),
        (np.full((64, 3), np.nan, np.float32), np.zeros((64, 8), np.float32), None, "ClothTokens.positions"),
        ([[0.0, 0.0, 0.0]], np.zeros((1, 8), np.float32), None, "ClothTokens.positions"),
        (np.zeros((64, 3), np.float32), np.zeros((64, 8), np.float32), np.zeros(64, bool), "ClothTokens.valid"),
    ],
)
def test_bad_token_arrays_are_refused_before_sending(positions, features, valid, field: str) -> None:
    with pytest.raises(MessageConversionError, match=field.replace(".", r"\.")):
        tokens_to_msg(positions, features, valid)


def test_dual_arm_state_round_trip_and_validation() -> None:
    state = np.array([[0.1, -0.2, 0.9, 1.0], [-0.3, 0.05, 1.1, 0.0]], dtype=np.float32)
    np.testing.assert_array_equal(dual_arm_state_from_msg(dual_arm_state_to_msg(state)), state)
    msg = dual_arm_state_to_msg(state)
    msg.right.openness = 1.5
    with pytest.raises(MessageConversionError, match=r"DualArmState\.right\.openness"):
        dual_arm_state_from_msg(msg)
    msg = dual_arm_state_to_msg(state)
    msg.left.position.y = float("nan")
    with pytest.raises(MessageConversionError, match=r"DualArmState\.left"):
        dual_arm_state_from_msg(msg)


def test_home_pose_keeps_float64_and_open_grippers() -> None:
    home = np.array([[-0.7312345678901234, -0.17, 0.28], [0.73, -0.1700000001, 0.28]])
    msg = home_pose_to_msg(home, make_header("cam"))
    assert (msg.left.openness, msg.right.openness) == (1.0, 1.0)
    out = home_pose_from_msg(msg)
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, home)  # a fixed pose of the robot, not a float32 measurement
    msg.right.position.z = float("inf")
    with pytest.raises(MessageConversionError, match="home"):
        home_pose_from_msg(msg)
    with pytest.raises(MessageConversionError, match="home"):
        home_pose_to_msg(np.zeros(6))


def test_action_chunk_round_trip() -> None:
    h = 8
    positions = RNG.normal(scale=0.01, size=(h, 2, 3)).astype(np.float32)
    openness = (RNG.random((h, 2)) > 0.5).astype(np.float32)
    keypose = np.array([[0.1, 0.0, 1.0, 0.0], [0.2, 0.1, 1.0, 1.0]], np.float32)
    chunk = ActionChunk(positions, openness, 4, 0.1, ChunkRepresentation.DELTA, keypose)
    out = action_chunk_from_msg(action_chunk_to_msg(chunk))
    np.testing.assert_array_equal(out.positions, positions)
    np.testing.assert_array_equal(out.openness, openness)
    np.testing.assert_array_equal(out.keypose, keypose)
    assert (out.representation, out.steps_to_execute, out.step_duration) == (ChunkRepresentation.DELTA, 4, 0.1)
    no_keypose = action_chunk_from_msg(action_chunk_to_msg(ActionChunk(positions, openness, 2, 0.1)))
    assert no_keypose.keypose is None and no_keypose.representation is ChunkRepresentation.ABSOLUTE


@pytest.mark.parametrize(
    ("mutate", "kind", "field"),
    [
        (lambda m: m.positions.pop(), MessageConversionError, "ActionChunk.positions: expected 48 values"),
        (lambda m: m.openness.pop(), MessageConversionError, "ActionChunk.openness: expected 16 values"),
        (lambda m: m.positions.__setitem__(0, float("nan")), NonFiniteError, "ActionChunk.positions"),
        (lambda m: m.keypose.left.position.__setattr__("x", float("inf")), NonFiniteError, "ActionChunk.keypose"),
        (lambda m: m.openness.__setitem__(0, 2.0), InvalidInputError, "ActionChunk.openness"),
        (lambda m: setattr(m, "steps_to_execute", 9), InvalidInputError, "ActionChunk.steps_to_execute"),
        (lambda m: setattr(m, "steps_to_execute", 0), InvalidInputError, "ActionChunk.steps_to_execute"),
        (lambda m: setattr(m, "representation", 7), InvalidInputError, "ActionChunk.representation"),
        (lambda m: setattr(m, "step_duration", 0.0), InvalidInputError, "ActionChunk.step_duration"),
    ],
)
def test_malformed_action_chunk_names_field_and_kind(mutate, kind: type, field: str) -> None:
    keypose = np.array([[0.1, 0.0, 1.0, 1.0], [0.2, 0.1, 1.0, 1.0]], np.float32)
    msg = action_chunk_to_msg(
        ActionChunk(np.zeros((8, 2, 3), np.float32), np.ones((8, 2), np.float32), 4, 0.1, keypose=keypose)
    )
    mutate(msg)
    with pytest.raises(kind, match=field.replace(".", r"\.")):
        action_chunk_from_msg(msg)


@pytest.mark.parametrize(
    ("encoding", "image"),
    [
        ("rgb8", RNG.integers(0, 255, (6, 5, 3), dtype=np.uint8)),
        ("bgra8", RNG.integers(0, 255, (6, 5, 4), dtype=np.uint8)),
        ("mono8", RNG.integers(0, 255, (6, 5), dtype=np.uint8)),
        ("16UC1", RNG.integers(0, 65535, (6, 5), dtype=np.uint16)),
        ("32FC1", RNG.random((6, 5), dtype=np.float32)),
    ],
)
def test_image_round_trip(encoding: str, image: np.ndarray) -> None:
    np.testing.assert_array_equal(image_from_msg(image_to_msg(image, encoding)), image)


def test_image_with_row_padding_and_big_endian() -> None:
    depth = np.arange(12, dtype=np.uint16).reshape(3, 4)
    msg = image_to_msg(depth, "16UC1")
    padded = np.zeros((3, msg.step + 4), np.uint8)
    padded[:, : msg.step] = depth.astype(">u2").view(np.uint8).reshape(3, -1)
    msg.step += 4
    msg.is_bigendian = 1
    msg.data = padded.tobytes()
    np.testing.assert_array_equal(image_from_msg(msg), depth)


def test_bad_images_are_refused() -> None:
    msg = image_to_msg(np.zeros((4, 4, 3), np.uint8), "rgb8")
    with pytest.raises(MessageConversionError, match=r"Image\.encoding: got 'rgb8'"):
        image_from_msg(msg, allowed=("32FC1", "16UC1"))
    msg.encoding = "yuv422"
    with pytest.raises(MessageConversionError, match=r"Image\.encoding"):
        image_from_msg(msg)
    msg = image_to_msg(np.zeros((4, 4, 3), np.uint8), "rgb8")
    msg.data = bytes(10)
    with pytest.raises(MessageConversionError, match=r"Image\.data: expected 48 bytes"):
        image_from_msg(msg)
    msg.height = 0
    with pytest.raises(MessageConversionError, match="empty image"):
        image_from_msg(msg)
    with pytest.raises(MessageConversionError, match=r"Image\[rgb8\]: expected dtype uint8"):
        image_to_msg(np.zeros((4, 4, 3), np.float32), "rgb8")


def test_camera_info_round_trip_and_unset_intrinsics() -> None:
    k = np.array([[600.0, 0, 320], [0, 601.0, 240], [0, 0, 1]], np.float32)
    info = camera_info_from_intrinsics(k, 640, 480)
    np.testing.assert_array_equal(intrinsics_from_camera_info(info), k)
    info.k = [0.0] * 9
    with pytest.raises(MessageConversionError, match=r"CameraInfo\.k"):
        intrinsics_from_camera_info(info)


def test_distortion_travels_in_camera_info() -> None:
    """Item 10: the frame's distortion model and coefficients survive rgbd_to_msgs -> rgbd_from_msgs."""
    from instant_fold_core.distortion import Distortion
    from instant_fold_core.rgbd import RGBDFrame
    from instant_fold_ros.conversions import rgbd_from_msgs, rgbd_to_msgs

    k = np.array([[50.0, 0, 16], [0, 50.0, 12], [0, 0, 1]], np.float32)
    color = RNG.integers(0, 255, (24, 32, 3), dtype=np.uint8)
    depth = RNG.uniform(0.5, 1.5, (24, 32)).astype(np.float32)
    for distortion, name in (
        (Distortion("inverse_brown_conrady", (0.1, -0.05, 0.002, -0.003, 0.01)), "inverse_brown_conrady"),
        (Distortion("brown_conrady", (-0.04, 0.03, 0.0, 0.001, 0.0)), "plumb_bob"),
        (Distortion(), "plumb_bob"),
    ):
        c, d, info = rgbd_to_msgs(RGBDFrame(color, depth, k, distortion=distortion), make_header("cam"))
        assert info.distortion_model == name and list(info.d) == list(distortion.coeffs)
        assert rgbd_from_msgs(c, d, info).distortion == distortion
    info.distortion_model, info.d = "equidistant", [0.1, 0.0, 0.0, 0.0]
    with pytest.raises(MessageConversionError, match="'equidistant' with 4 coefficients is not supported"):
        rgbd_from_msgs(c, d, info)


def test_rgbd_round_trip_and_depth_conventions() -> None:
    from instant_fold_core.rgbd import RGBDFrame
    from instant_fold_ros.conversions import rgbd_from_msgs, rgbd_to_msgs

    k = np.array([[50.0, 0, 16], [0, 50.0, 12], [0, 0, 1]], np.float32)
    color = RNG.integers(0, 255, (24, 32, 3), dtype=np.uint8)
    depth = RNG.uniform(0.5, 1.5, (24, 32)).astype(np.float32)
    frame = RGBDFrame(color, depth, k)
    c, d, info = rgbd_to_msgs(frame, make_header("cam"))
    out = rgbd_from_msgs(c, d, info)
    np.testing.assert_array_equal(out.color, color)
    np.testing.assert_array_equal(out.depth, depth)
    np.testing.assert_array_equal(out.intrinsics, k)
    # bgr8 colour and 16UC1 millimetre depth (RealSense ROS driver conventions); NaN depth -> invalid
    bgr = image_to_msg(color[..., ::-1].copy(), "bgr8", c.header)
    mm = image_to_msg(np.round(depth * 1000).astype(np.uint16), "16UC1", c.header)
    out = rgbd_from_msgs(bgr, mm, info)
    np.testing.assert_array_equal(out.color, color)
    np.testing.assert_allclose(out.depth, depth, atol=0.0006)
    nan_msg = image_to_msg(depth, "32FC1")  # another driver's convention: NaN marks no return
    nan_msg.data = np.where(np.arange(depth.size).reshape(depth.shape) == 0, np.nan, depth).astype(np.float32).tobytes()
    assert rgbd_from_msgs(c, nan_msg, info).depth[0, 0] == 0.0
    with pytest.raises(MessageConversionError, match=r"Image\.encoding: got 'mono8'"):
        rgbd_from_msgs(image_to_msg(color[..., 0].copy(), "mono8"), d, info)
    with pytest.raises(MessageConversionError, match="not aligned"):
        rgbd_from_msgs(c, image_to_msg(depth[:10].copy(), "32FC1"), info)
    info.width = 10
    with pytest.raises(MessageConversionError, match="CameraInfo: size"):
        rgbd_from_msgs(c, d, info)


def test_demonstration_round_trip_and_bad_keyframe() -> None:
    from instant_fold_core.demonstration import Demonstration
    from instant_fold_ros.conversions import demonstration_from_msg, demonstration_to_msg

    k, size = 3, 16
    mask = np.zeros((k, size, size), bool)
    mask[:, 4:12, 4:12] = True
    demo = Demonstration(
        color=RNG.integers(0, 255, (k, size, size, 3), dtype=np.uint8),
        depth=RNG.uniform(0.9, 1.1, (k, size, size)).astype(np.float32),
        mask=mask,
        intrinsics=np.array([[20, 0, 8], [0, 20, 8], [0, 0, 1]], np.float32),
        keypose=np.tile(np.array([[0.1, 0.0, 1.0, 1.0], [-0.1, 0.0, 1.0, 0.0]], np.float32), (k, 1, 1)),
        events=np.array([[1, 0], [2, 3], [4, 4]], np.uint8),
        frame_index=np.array([3, 17, 40], np.int32),
        name="d",
        mode="m",
        description="desc",
    )
    msg = demonstration_to_msg(demo, make_header("cam"))
    out = demonstration_from_msg(msg)
    for name in ("color", "depth", "mask", "intrinsics", "keypose", "events", "frame_index"):
        np.testing.assert_array_equal(getattr(out, name), getattr(demo, name))
    assert (out.name, out.mode, out.description) == ("d", "m", "desc")
    msg.keyframes[1].mask = image_to_msg(np.zeros((size, size), np.uint8), "mono8")
    with pytest.raises(MessageConversionError, match="keyframe 1: empty cloth mask"):
        demonstration_from_msg(msg)
    msg.keyframes[2].depth.encoding = "rgb8"
    with pytest.raises(MessageConversionError, match=r"Demonstration\.keyframes\[2\]: Image\.encoding"):
        demonstration_from_msg(msg)


def test_exact_time_sync_groups_by_stamp() -> None:
    from builtin_interfaces.msg import Time
    from std_msgs.msg import Header

    from instant_fold_ros.standins.exact_sync import ExactTimeSync

    def msg(sec: int):
        return type("M", (), {"header": Header(stamp=Time(sec=sec))})()

    groups: list[dict] = []
    sync = ExactTimeSync(("color", "depth", "mask"), groups.append, queue_size=2)
    sync.add("color", msg(1))
    sync.add("depth", msg(1))
    sync.add("color", msg(2))
    sync.add("depth", msg(2))
    sync.add("mask", msg(2))  # completes stamp 2 and drops the stale stamp 1
    assert len(groups) == 1 and {m.header.stamp.sec for m in groups[0].values()} == {2}
    sync.add("mask", msg(1))
    assert len(groups) == 1
    for sec in (3, 4, 5, 6):
        sync.add("color", msg(sec))
    assert len(sync._pending) == 2  # bounded queue
    with pytest.raises(KeyError, match="unknown key"):
        sync.add("info", msg(7))
