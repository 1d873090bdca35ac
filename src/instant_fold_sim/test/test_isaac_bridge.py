"""The Isaac Lab bridge without Isaac Lab: wire format, scene hand-over, scene geometry, and the
whole bridge (process start, loopback socket, lockstep stepping, camera frames) end to end with
the protocol-faithful Newton stand-in (`newton_stand_in`, the project's Newton scene behind the
same server loop). Tests that need the Isaac Lab environment are in test_isaac_lab_env.py.
"""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from instant_fold_control.transforms import quaternion_to_matrix
from instant_fold_sim.isaac_lab import layout, protocol
from instant_fold_sim.isaac_lab.client import BridgeClient, BridgeError, scene_spec, server_environment
from instant_fold_sim.isaac_lab.protocol import ProtocolError
from instant_fold_sim.isaac_lab.spec import SceneSpec

GARMENT, SEED = "proc:1", 5


# --------------------------------------------------------------------------- wire format


def _roundtrip(header: dict, arrays: dict | None = None) -> tuple[dict, dict]:
    a, b = socket.socketpair()
    with a, b:
        protocol.send(a, header, arrays)
        return protocol.recv(b)


def test_messages_round_trip_every_allowed_dtype_bit_for_bit() -> None:
    rng = np.random.default_rng(0)
    arrays = {
        "u8": rng.integers(0, 255, (4, 5, 3), dtype=np.uint8),
        "mask": rng.random((3, 7)) > 0.5,
        "i32": rng.integers(-5, 5, (6, 3), dtype=np.int32),
        "i64": np.arange(7, dtype=np.int64),
        "f32": rng.standard_normal((5, 3)).astype(np.float32),
        "f64": rng.standard_normal((2, 4)),
        "big_endian": np.arange(3, dtype=">f8"),
        "empty": np.zeros((0, 3), np.float32),
    }
    header, out = _roundtrip({"type": "x", "n": 3, "nested": {"a": [1, 2]}}, arrays)
    assert header == {"type": "x", "n": 3, "nested": {"a": [1, 2]}}
    assert list(out) == list(arrays)
    for name, value in arrays.items():
        assert out[name].shape == value.shape and np.array_equal(out[name], value), name
    assert out["mask"].dtype == bool and out["big_endian"].dtype == np.float64


@pytest.mark.parametrize(
    ("header", "arrays", "message"),
    [
        ({"n": 1}, None, "string 'type'"),
        ({"type": "x", "arrays": []}, None, "reserved"),
        ({"type": "x", "v": float("nan")}, None, "Out of range float"),
        ({"type": "x"}, {"o": np.array([object()])}, "cannot cross the bridge"),
        ({"type": "x"}, {"c": np.zeros(2, np.complex64)}, "cannot cross the bridge"),
    ],
)
def test_unencodable_messages_are_refused_before_sending(header: dict, arrays: dict | None, message: str) -> None:
    with pytest.raises((ProtocolError, ValueError), match=message):
        protocol.encode(header, arrays)


def _raw(payload: bytes) -> ProtocolError:
    a, b = socket.socketpair()
    with a, b:
        a.sendall(payload)
        a.shutdown(socket.SHUT_WR)
        with pytest.raises(ProtocolError) as info:
            protocol.recv(b)
    return info.value


def test_malformed_or_hostile_frames_are_refused_with_a_reason() -> None:
    assert "bad magic" in str(_raw(b"GET / HTTP/1.1\r\n\r\n"))
    assert "exceeds" in str(_raw(protocol.MAGIC + struct.pack(">I", protocol.MAX_HEADER_BYTES + 1)))
    assert "not JSON" in str(_raw(protocol.MAGIC + struct.pack(">I", 3) + b"{x}"))
    huge = b'{"type": "x", "arrays": [{"name": "a", "dtype": "float64", "shape": [100000, 100000]}]}'
    assert "exceeds" in str(_raw(protocol.MAGIC + struct.pack(">I", len(huge)) + huge))
    obj = b'{"type": "x", "arrays": [{"name": "a", "dtype": "object", "shape": [1]}]}'
    assert "not allowed" in str(_raw(protocol.MAGIC + struct.pack(">I", len(obj)) + obj))
    # a peer that dies in the middle of a message
    chunks = protocol.encode({"type": "x"}, {"a": np.zeros(100)})
    truncated = _raw(b"".join(chunks)[:-10])
    assert isinstance(truncated, protocol.PeerClosed) and "closed after" in str(truncated)


def test_require_checks_presence_shape_kind_and_finiteness() -> None:
    arrays = {"a": np.zeros((2, 3)), "i": np.zeros(3, np.int32), "bad": np.array([np.inf])}
    assert protocol.require(arrays, "a", (2, None)).shape == (2, 3)
    with pytest.raises(ProtocolError, match="missing array 'b'"):
        protocol.require(arrays, "b", (2, 3))
    with pytest.raises(ProtocolError, match=r"expected shape \(3, 3\)"):
        protocol.require(arrays, "a", (3, 3))
    with pytest.raises(ProtocolError, match="dtype kind"):
        protocol.require(arrays, "i", (3,), "f")
    with pytest.raises(ProtocolError, match="not finite"):
        protocol.require(arrays, "bad", (1,))


# --------------------------------------------------------------------------- scene hand-over


@pytest.fixture(scope="module")
def start():
    from instant_fold_sim.garments import resolve_garment
    from instant_fold_sim.rollout import preset, start_state

    cfg = preset("cpu-small")
    garment = resolve_garment(GARMENT, spacing=cfg.garment_spacing, max_particles=cfg.max_particles)
    return start_state(garment, SEED, cfg), cfg


def test_scene_spec_is_the_generators_start_state_in_real_metres(start) -> None:
    st, cfg = start
    spec = scene_spec(st, cfg, "cpu-small")
    s = cfg.obs_scale
    assert spec.garment_id == st.scene.garment.garment_id and spec.world_scale == s
    assert np.allclose(spec.positions, st.scene.positions() * s, atol=1e-6)
    assert np.array_equal(spec.faces, st.scene.garment.faces) and np.array_equal(spec.keypoint_ids, st.keypoint_ids)
    assert np.allclose(spec.rest_positions, st.scene.garment.vertices * cfg.sim.garment_scale * s, atol=1e-6)
    # the camera frame of every observation: world points map to the same camera-frame points
    p = st.scene.positions()[:5]
    t = spec.T_world_camera
    assert np.allclose((p * s - t[:3, 3]) @ t[:3, :3], st.dr.camera.world_to_camera(p) * s)
    assert np.array_equal(spec.intrinsics, st.dr.camera.intrinsics) and spec.resolution == st.dr.camera.resolution
    header, arrays = spec.to_message()
    back = SceneSpec.from_message(*_roundtrip(header, arrays))
    for name in ("rest_positions", "faces", "positions", "velocities", "keypoint_ids", "T_world_camera", "grippers"):
        assert np.array_equal(getattr(back, name), getattr(spec, name)), name
    assert back.camera == spec.camera and back.appearance["hue"] == spec.appearance["hue"]


def test_a_spec_with_indices_outside_the_mesh_is_refused(start) -> None:
    header, arrays = scene_spec(*start, "cpu-small").to_message()
    bad = dict(arrays, faces=arrays["faces"].copy())
    bad["faces"][0, 0] = len(arrays["positions"])
    with pytest.raises(ProtocolError, match="faces index particles outside"):
        SceneSpec.from_message(header, bad)
    with pytest.raises(ProtocolError, match="keypoint_ids outside"):
        SceneSpec.from_message(header, dict(arrays, keypoint_ids=np.array([-1, 2])))
    with pytest.raises(ProtocolError, match="positions"):
        SceneSpec.from_message(header, dict(arrays, positions=arrays["positions"][:-1]))
    with pytest.raises(ProtocolError, match="must be positive"):
        SceneSpec.from_message(dict(header, fps=0.0), arrays)


# --------------------------------------------------------------------------- scene geometry


def test_camera_pose_carries_over_in_isaac_labs_ros_convention(start) -> None:
    spec = scene_spec(*start, "cpu-small")
    pos, rot = layout.camera_offset_ros(spec.T_world_camera)
    assert np.allclose(pos, spec.T_world_camera[:3, 3])
    assert np.allclose(quaternion_to_matrix(np.array(rot)), spec.T_world_camera[:3, :3], atol=1e-9)
    assert layout.intrinsics_row_major(spec.intrinsics)[0] == spec.intrinsics[0, 0]


def test_table_depth_and_cloth_mask_match_the_projects_renderer(start) -> None:
    from instant_fold_sim.render import render

    st, cfg = start
    spec = scene_spec(st, cfg, "cpu-small")
    frame = render(st.dr.camera, st.dr.appearance, st.scene.positions(), st.scene.garment.faces)
    depth = frame.depth * cfg.obs_scale
    table = layout.table_depth(spec.intrinsics, spec.T_world_camera, spec.resolution)
    assert np.allclose(table[~frame.mask], depth[~frame.mask], rtol=1e-5)
    mask = layout.cloth_mask(depth, table)
    # the flat cloth rests 1.6-3 mm above the table; the 1 mm tolerance finds almost all of it
    assert (mask & ~frame.mask).sum() == 0 and mask.sum() >= 0.95 * frame.mask.sum()
    robot = np.zeros_like(mask)
    robot[: mask.shape[0] // 2] = True
    assert not (layout.cloth_mask(depth, table, robot) & robot).any()


def test_franka_placement_reaches_the_garment_and_the_homes(start) -> None:
    report = layout.reach_report(scene_spec(*start, "cpu-small"))
    assert report["either"] >= 0.98 and min(report["left"], report["right"]) >= 0.6, report
    assert report["homes"] == 1.0 and report["home_clearance"] > 0.3, report
    left, right = layout.arm_placements()
    assert left.position[0] < 0 < right.position[0]  # left arm = image left = world -x
    assert np.allclose(quaternion_to_matrix(np.array(right.quat_xyzw)) @ [1, 0, 0], [-1, 0, 0], atol=1e-12)
    # joint 1 seeds: towards +x in front of the left base is 0; the right arm turned to its home
    assert layout.joint1_towards(left, np.array([1.0, left.position[1], 0])) == pytest.approx(0.0)
    home = scene_spec(*start, "cpu-small").home[1]
    yaw = right.yaw + layout.joint1_towards(right, home)
    direction = home[:2] - np.asarray(right.position[:2])
    assert np.allclose([np.cos(yaw), np.sin(yaw)], direction / np.linalg.norm(direction))


def test_panda_start_joints_reach_the_start_and_home_poses_inside_the_limits(start) -> None:
    """Both arms: the TCP on the target to 0.1 mm, pointing down with the fingers along world y
    (the full orientation, not just the axis), every joint inside the Panda's limits."""
    spec = scene_spec(*start, "cpu-small")
    goal = quaternion_to_matrix(np.array(layout.TCP_DOWN_QUAT_XYZW))
    for index, arm in enumerate(layout.arm_placements()):
        base = quaternion_to_matrix(np.array(arm.quat_xyzw))
        for target in (spec.grippers[index, :3], spec.home[index]):
            q = layout.panda_ik(arm, target)
            assert np.all(q >= layout.PANDA_LIMITS[:, 0]) and np.all(q <= layout.PANDA_LIMITS[:, 1]), q
            _, tcp = layout.panda_frames(q)
            assert np.linalg.norm(base @ tcp[:3, 3] + np.asarray(arm.position) - target) < 1e-4
            assert np.allclose(base @ tcp[:3, :3], goal, atol=1e-3)


def test_a_half_turn_is_a_rotation_error_of_pi() -> None:
    """The naive axis-angle formula reads a half turn as no error (it hid a right-arm wrist seed
    half a turn off); the error must be pi about the right axis."""
    half_turn_z = np.diag([-1.0, -1.0, 1.0])
    error = layout.rotation_error(np.eye(3), half_turn_z)
    assert np.linalg.norm(error) == pytest.approx(np.pi) and np.allclose(np.abs(error), [0, 0, np.pi])
    assert np.allclose(layout.rotation_error(np.eye(3), np.eye(3)), 0.0)


def test_garment_usd_is_the_project_mesh(start, tmp_path) -> None:
    from pxr import Usd, UsdGeom

    spec = scene_spec(*start, "cpu-small")
    path = layout.garment_usd(spec, str(tmp_path / "garment.usda"))
    stage = Usd.Stage.Open(path)  # kept: prims are invalid once their stage is gone
    mesh = UsdGeom.Mesh(stage.GetPrimAtPath("/Garment/mesh"))
    assert np.allclose(np.array(mesh.GetPointsAttr().Get()), spec.rest_positions)
    faces = np.array(mesh.GetFaceVertexIndicesAttr().Get()).reshape(-1, 3)
    assert np.array_equal(faces, layout.upward_faces(spec.rest_positions, spec.faces))  # the same triangles, wound up


def _facing_up(v: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """Which triangles' winding normals point up (+z, towards the overhead camera)."""
    return np.cross(v[faces[:, 1]] - v[faces[:, 0]], v[faces[:, 2]] - v[faces[:, 0]])[:, 2] > 0


def test_garment_triangles_are_wound_consistently_and_face_the_camera(start) -> None:
    """Newton's renderer shades a triangle's back side dark: the generator's proc:1 has triangles
    facing down (a sleeve rendered dark in Isaac Lab). Re-wound, the flat garment faces up
    everywhere, no edge is traversed twice the same way, and the triangles are the same."""
    spec = scene_spec(*start, "cpu-small")
    v, before = spec.rest_positions.astype(np.float64), spec.faces
    assert not _facing_up(v, before).all()  # what the issue saw: some triangles face the table
    after = layout.upward_faces(v, before)
    assert _facing_up(v, after).all()
    assert np.array_equal(np.sort(after, axis=1), np.sort(before, axis=1))
    directed = [(int(t[k]), int(t[(k + 1) % 3])) for t in after for k in range(3)]
    assert len(set(directed)) == len(directed)
    mirrored = v[:, [1, 0, 2]]  # a mirror image turns every winding over: still made to face up
    assert _facing_up(mirrored, layout.upward_faces(mirrored, before)).all()


def test_the_garment_is_painted_in_the_episode_colour_as_the_renderer_shades_it() -> None:
    """`paint_garment`: a fully lit white garment (linear radiance 1) shows exactly the episode
    colour; half the light gives half the colour's linear light; other pixels are untouched."""
    colour = np.array([0.55, 0.44, 0.86])
    rgb = np.full((2, 3, 3), 200, np.uint8)
    radiance = np.ones((2, 3, 3))
    radiance[1] = 0.5
    garment = np.array([[True, True, False], [True, False, False]])
    out = layout.paint_garment(rgb, radiance, garment, colour)
    assert np.array_equal(out[0, 0], np.round(colour * 255)) and np.array_equal(out[0, 1], out[0, 0])
    half = layout.linear_to_srgb(0.5 * layout.srgb_to_linear(colour))
    assert np.array_equal(out[1, 0], np.round(half * 255))
    assert np.array_equal(out[~garment], rgb[~garment]) and rgb[0, 0, 0] == 200  # the input is not written
    assert np.allclose(layout.linear_to_srgb(layout.srgb_to_linear(colour)), colour)


def test_missing_robot_asset_says_how_to_make_it(tmp_path) -> None:
    from instant_fold_sim.isaac_lab.assets import AssetError, panda_usd

    with pytest.raises(AssetError, match="bootstrap_isaaclab.sh"):
        panda_usd(tmp_path)


# --------------------------------------------------------------------------- the bridge, end to end


@pytest.fixture(scope="module")
def stand_in():
    with BridgeClient("newton_stand_in", "cpu", start_timeout_s=120) as client:
        yield client


def test_stand_in_says_it_is_a_stand_in(stand_in: BridgeClient) -> None:
    assert stand_in.stand_in and stand_in.hello["backend"] == "newton_stand_in"
    assert stand_in.hello["protocol"] == protocol.PROTOCOL_VERSION
    assert "stand-in" in stand_in.hello["detail"]["simulator"]


def test_sim_world_over_the_bridge_follows_the_embedded_newton_scene(stand_in: BridgeClient) -> None:
    """Same start, same commands: the world behind the bridge and the embedded one agree (the
    stand-in is the same simulator, so only float rounding of the hand-over differs)."""
    from instant_fold_sim.sim_world import SimWorld

    remote = SimWorld(GARMENT, SEED, "cpu-small", record=False, bridge=stand_in)
    local = SimWorld(GARMENT, SEED, "cpu-small", record=False)
    assert np.allclose(remote.scene.positions(), local.scene.positions(), atol=1e-6)
    assert np.array_equal(remote.arm_state(), local.arm_state())
    kp = local.camera_from_world(local.keypoints_world()[:1])[0]
    plan = [  # reach above the left sleeve tip, close, lift (lockstep: time advances by `until`)
        (np.stack([kp + np.array([0, 0, -0.05]), local.home()[1]]), np.ones(2), 0.5),
        (np.stack([kp, local.home()[1]]), np.ones(2), 0.8),
        (np.stack([kp, local.home()[1]]), np.array([0.0, 1.0]), 0.85),
        (np.stack([kp + np.array([0.1, 0, -0.1]), local.home()[1]]), np.array([0.0, 1.0]), 1.3),
    ]
    for target, openness, until in plan:
        assert remote.step(target, openness, until) == local.step(target, openness, until)
        assert remote.sim_time == local.sim_time == pytest.approx(until)
    assert np.allclose(remote.arm_state(), local.arm_state(), atol=1e-9)
    assert remote.arm_state()[0, 3] == 0.0
    moved = np.linalg.norm(local.keypoints_world()[0] - local.initial_keypoints[0])
    assert moved > 0.1  # the sleeve was carried
    assert np.abs(remote.scene.positions() - local.scene.positions()).max() < 2e-3
    a, b = remote.observe(), local.observe()
    assert a.rgb.shape == b.rgb.shape and a.frame == b.frame == local.frames
    assert (a.mask != b.mask).mean() < 0.01 and np.abs(a.depth - b.depth)[a.mask & b.mask].max() < 0.01
    rec_remote, rec_local = remote.record(), local.record()  # what the oracle-bank metrics score
    assert len(rec_remote.episodes) == len(rec_local.episodes)
    assert rec_remote.frames == rec_local.frames
    assert np.allclose(rec_remote.final_keypoints, rec_local.final_keypoints, atol=2e-3)


def test_a_bridged_rollout_records_the_simulators_own_camera_frames(stand_in: BridgeClient, monkeypatch) -> None:
    """The episode (so the rollout video and keyframe strip) of a bridged world holds the frames
    the simulator's camera sent, the ones the sim node published, rendered once per simulated
    frame: with Isaac Lab, its camera with the Frankas in view (test_isaac_lab_env checks those
    pixels), not the project's renderer."""
    from instant_fold_sim.sim_world import SimWorld

    world = SimWorld(GARMENT, SEED, "cpu-small", record=True, bridge=stand_in)
    sent: list[np.ndarray] = []
    request = stand_in.request

    def spy(header: dict, arrays: dict | None = None) -> tuple[dict, dict]:
        reply, out = request(header, arrays)
        if header["type"] == "observe":
            sent.append(out["rgb"])
        return reply, out

    monkeypatch.setattr(stand_in, "request", spy)
    published = [world.observe().rgb]  # as the sim node: a frame at the start and after every step
    kp = world.camera_from_world(world.keypoints_world()[:1])[0]
    for k in range(1, 5):
        assert world.step(np.stack([kp + np.array([0.02 * k, 0, -0.05]), world.home()[1]]), np.ones(2), k / 20) == 1
        published.append(world.observe().rgb)
    episode = world.episode("test", "S")
    assert episode.meta["camera"] == "newton_stand_in" and episode.num_frames == len(published) == 5
    assert len(sent) == 5  # one render per simulated frame, shared by the publisher and the recording
    assert all(np.array_equal(a, b) for a, b in zip(episode.rgb, published, strict=True))
    assert all(np.array_equal(a, b) for a, b in zip(episode.rgb, sent, strict=True))
    assert episode.particle_visible.any(axis=1).all() and episode.mask.any(axis=(1, 2)).all()


def test_bridge_errors_reach_the_caller_and_the_session_goes_on(stand_in: BridgeClient) -> None:
    with pytest.raises(BridgeError, match="missing array 'rest_positions'"):
        stand_in.request({"type": "reset"}, {})
    with pytest.raises(BridgeError, match="unknown request type 'teleport'"):
        stand_in.request({"type": "teleport"})
    assert stand_in.request({"type": "hello", "protocol": protocol.PROTOCOL_VERSION})[0]["backend"] == "newton_stand_in"


def test_a_fresh_server_refuses_steps_before_a_scene_and_exits_on_close() -> None:
    with BridgeClient("newton_stand_in", start_timeout_s=120) as client:
        with pytest.raises(BridgeError, match="no scene yet"):
            client.request({"type": "step"}, {"target": np.zeros((2, 3)), "openness": np.ones(2)})
        process = client.process
    assert process.returncode == 0


def test_a_dead_simulator_is_a_bridge_error_naming_its_exit(start) -> None:
    client = BridgeClient("newton_stand_in", start_timeout_s=120)
    try:
        client.process.kill()
        client.process.wait()
        with pytest.raises(BridgeError, match="process exited with code -9"):
            client.request({"type": "observe"})
    finally:
        client.close()


def test_the_simulator_computes_with_one_thread_and_stops_inside_the_runners_grace(monkeypatch) -> None:
    """Issue 31: the simulator process fixes its compute threads itself, whatever the caller's
    environment says (results must not depend on it); and closing it, even when it does not
    answer, ends within CLOSE_BUDGET_S, inside the SIGINT grace the process runner gives the sim
    node (a 35 s wait once made the runner SIGKILL it: graph exit -9)."""
    import inspect
    import os
    import signal
    import time

    from instant_fold_ros.standins.process_runner import ProcessRunner
    from instant_fold_sim.isaac_lab.client import CLOSE_BUDGET_S

    grace = inspect.signature(ProcessRunner).parameters["sigint_grace"].default
    assert grace > CLOSE_BUDGET_S + 1.0
    monkeypatch.setenv("OMP_NUM_THREADS", "5")
    client = BridgeClient("newton_stand_in", start_timeout_s=120)
    try:
        assert client.hello["compute_threads"] == "1"
        os.kill(client.process.pid, signal.SIGSTOP)  # a simulator that no longer answers
        t0 = time.monotonic()
        client.close()
        assert time.monotonic() - t0 < CLOSE_BUDGET_S + 1.0
        assert client.process.returncode == -signal.SIGKILL  # stopped processes ignore SIGTERM
    finally:
        if client.process.poll() is None:
            client.process.kill()
    with BridgeClient("newton_stand_in", start_timeout_s=120) as answering:
        t0 = time.monotonic()
        answering.close()  # the server exits right after its reply
        assert time.monotonic() - t0 < 2.0 and answering.process.returncode == 0


def test_unknown_backend_and_missing_isaaclab_environment_are_clear_errors(tmp_path, monkeypatch) -> None:
    with pytest.raises(BridgeError, match="unknown simulator backend"):
        BridgeClient("gazebo")
    with pytest.raises(BridgeError, match="does not exist"):
        BridgeClient("isaac_lab", python=str(tmp_path / "nope" / "python"))
    with pytest.raises(BridgeError, match="grasp model 'friction': expected one of fingers, commanded"):
        BridgeClient("newton_stand_in", grasp="friction")


def test_the_server_listens_on_loopback_only() -> None:
    from instant_fold_sim.isaac_lab.server import serve
    from instant_fold_sim.isaac_lab.standin import NewtonStandIn

    with pytest.raises(ValueError, match="loopback only"):
        serve(NewtonStandIn(), host="0.0.0.0")
    # and one that does listen announces its port and serves one client
    lines: list[str] = []
    import contextlib
    import io

    out = io.StringIO()

    def run() -> None:
        with contextlib.redirect_stdout(out):
            serve(NewtonStandIn(), accept_timeout_s=0.5)
        lines.extend(out.getvalue().splitlines())

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(10)
    assert lines and lines[0].startswith("INSTANT_FOLD_BRIDGE ")


def test_the_isaac_lab_process_imports_its_modules_from_the_paths_it_is_given() -> None:
    """The Isaac Lab process gets only the bridge's package roots on PYTHONPATH (its own
    interpreter has none of the workspace's): every project module it loads must import from
    those alone (a transforms import of the core's error root once broke it, unseen without the
    Isaac Lab environment). This interpreter has no project package of its own either."""
    env = server_environment(Path(sys.executable), "isaac_lab")
    modules = ["server", "spec", "protocol", "assets", "layout", "isaac_env"]
    code = "; ".join(f"import instant_fold_sim.isaac_lab.{m}" for m in modules)
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
