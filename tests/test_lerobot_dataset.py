"""LeRobotDataset v3 export and import (`instant_fold_learning.lerobot_dataset`, docs/lerobot.md).

Real parts throughout: episodes go through a real zarr `EpisodeStore` (synthetic frames in the
fast tests, the project's generator in the slow one), demonstrations are the bundled file, recorded
demonstrations are real MCAP bags (the project's bag writer, messages serialized by rclpy) with
the keyframes the project's `extract` finds in them, and the exports are read back by LeRobot's own
`LeRobotDataset` (lerobot 0.4.4) in the isolated `.venv-lerobot`, since lerobot pins another torch
and numpy than the workspace.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from instant_fold_core.contracts import KeyframeEvent
from instant_fold_core.dataset.lerobot_format import read_episode, read_info
from instant_fold_core.dataset.schema import Episode
from instant_fold_core.demonstration import Demonstration, from_episode, load_demonstration
from instant_fold_core.rgbd import RGBDFrame
from instant_fold_learning.lerobot_dataset import main
from instant_fold_learning.testing import random_episode

zarr_store = pytest.importorskip(
    "instant_fold_core.dataset.zarr_store", reason="episode stores need zarr 3 (Python >= 3.11)"
)

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "models" / "demos" / "proc_00001_sleeves_down__bottom_up.safetensors"
LEROBOT_PYTHON = Path(os.environ.get("LEROBOT_VENV", REPO / ".venv-lerobot")) / "bin" / "python"
READER = Path(__file__).with_name("lerobot_reader.py")


def _episode(mode: str, seed: int, frames: int = 8, res: int = 256) -> Episode:
    """A synthetic episode with a grasp at frame 3 and a release at frame 6 on both arms."""
    meta = {"mode": mode, "garment_id": f"proc_{seed:05d}", "variant": "S", "seed": seed, "description": mode}
    ep = random_episode(frames, res, np.array([[300.5, 0, 128], [0, 300.5, 127.5], [0, 0, 1]]), seed, meta)
    return dataclasses.replace(ep, action=np.roll(ep.arm_state, -1, axis=0) + np.float32(1e-3))


def _bag(path: Path, ep: Episode, arm_state: bool = True) -> Path:
    """`ep` recorded as `record_demo` stores a robot's demonstration: camera topics, the cloth mask
    and (with `arm_state`) `arms/state`, one header stamp per frame, in a real MCAP bag."""
    from rclpy.serialization import serialize_message
    from rclpy.time import Time

    from instant_fold_demo.bag import write_messages
    from instant_fold_demo.rgbd_bag import CAMERA_INFO, DUAL_ARM_STATE, IMAGE
    from instant_fold_ros.conversions import dual_arm_state_to_msg, make_header, rgbd_to_msgs
    from instant_fold_ros.standins.image_bridge import image_to_msg

    types = {"/camera/color": IMAGE, "/camera/depth": IMAGE, "/camera/camera_info": CAMERA_INFO, "/cloth/mask": IMAGE}
    if arm_state:
        types["/arms/state"] = DUAL_ARM_STATE

    def messages():
        for t in range(ep.num_frames):
            stamp = 10**9 + t * 50_000_000
            header = make_header("camera_color_optical_frame", Time(nanoseconds=stamp).to_msg())
            frame = RGBDFrame(ep.rgb[t], ep.depth[t], ep.intrinsics, stamp, t)
            msgs = [*rgbd_to_msgs(frame, header), image_to_msg(ep.mask[t].astype(np.uint8) * 255, "mono8", header)]
            if arm_state:
                msgs.append(dual_arm_state_to_msg(ep.arm_state[t], header))
            for topic, msg in zip(types, msgs, strict=True):
                yield topic, stamp, serialize_message(msg)

    return write_messages(path, types, messages())


def _bags(bag: Path, keyframes: Path) -> list[str]:
    return ["--bag", str(bag), str(keyframes)]


@pytest.fixture
def recorded(tmp_path) -> tuple[Path, Path, Path]:
    """A robot's recording, the same recording without its arm state (as a human demonstration's
    has none), and the keyframes `extract --events arm-state --mask recorded` finds in it."""
    from instant_fold_demo import extract

    ep = _episode("", 4, frames=12, res=64)
    robot, human = _bag(tmp_path / "robot_bag", ep), _bag(tmp_path / "human_bag", ep, arm_state=False)
    keyframes = tmp_path / "demos" / "robot.safetensors"
    argv = [str(robot), "--out", str(keyframes), "--events", "arm-state", "--mask", "recorded"]
    assert extract.main(argv) == 0
    return robot, human, keyframes


@pytest.fixture
def store(tmp_path) -> Path:
    path = tmp_path / "sim.zarr"
    s = zarr_store.EpisodeStore(path, mode="a")
    s.write("proc_00001__m02_S__e000", _episode("sleeves_down__bottom_up", 1))
    s.write("proc_00002__m16_S__e000", _episode("body_bottom_up__sleeves_down", 2, frames=10))
    return path


def _assert_same_demonstration(back: Demonstration, original: Demonstration) -> None:
    for name in ("color", "mask", "events", "frame_index"):
        np.testing.assert_array_equal(getattr(back, name), getattr(original, name), err_msg=name)
    for name in ("depth", "keypose", "intrinsics"):
        np.testing.assert_allclose(getattr(back, name), getattr(original, name), rtol=0, atol=1e-6, err_msg=name)
    assert (back.name, back.mode, back.description, back.meta) == (
        original.name,
        original.mode,
        original.description,
        original.meta,
    )


def test_demonstration_exports_and_imports_back_equal(tmp_path):
    out = tmp_path / "lerobot"
    assert main(["export", "--out", str(out), "--demo", str(DEMO)]) == 0
    info = read_info(out)
    original = load_demonstration(DEMO)
    assert (info["total_episodes"], info["total_frames"]) == (1, original.num_keyframes)
    assert main(["import", str(out), "--episode", "0", "--out", str(tmp_path / "back.safetensors")]) == 0
    _assert_same_demonstration(load_demonstration(tmp_path / "back.safetensors"), original)


def test_store_episodes_import_as_their_keyframe_demonstrations(tmp_path, store):
    out = tmp_path / "lerobot"
    assert main(["export", "--out", str(out), "--store", str(store)]) == 0
    info = read_info(out)
    assert (info["total_episodes"], info["total_frames"], info["total_tasks"]) == (2, 18, 2)
    episodes = zarr_store.EpisodeStore(store)
    for index, name in enumerate(episodes.names()):
        target = tmp_path / f"{index}.safetensors"
        assert main(["import", str(out), "--episode", str(index), "--out", str(target)]) == 0
        back = load_demonstration(target)
        _assert_same_demonstration(back, from_episode(episodes.read(name), name=name))
        assert (
            back.events[1].tolist() == [KeyframeEvent.GRASP] * 2
            and back.events[2].tolist() == [KeyframeEvent.RELEASE] * 2
        )


def test_recorded_bags_export_every_frame_and_import_as_their_keyframes(tmp_path, recorded):
    """Bag + keyframes -> every frame, keyframes flagged; import gives the extracted demonstration
    back, from a robot's recording (measured state) and from one without arm state alike."""
    robot, human, keyframes = recorded
    out = tmp_path / "lerobot"
    assert main(["export", "--out", str(out), *_bags(robot, keyframes), *_bags(human, keyframes)]) == 0
    info = read_info(out)
    assert (info["total_episodes"], info["total_frames"], info["total_tasks"]) == (2, 24, 1)
    demo = load_demonstration(keyframes)
    ep = _episode("", 4, frames=12, res=64)
    for index in (0, 1):
        target = tmp_path / f"{index}.safetensors"
        assert main(["import", str(out), "--episode", str(index), "--out", str(target)]) == 0
        _assert_same_demonstration(load_demonstration(target), demo)
        frames = read_episode(out, index)
        np.testing.assert_array_equal(frames.color, ep.rgb)
        np.testing.assert_array_equal(frames.mask, ep.mask)
        np.testing.assert_array_equal(np.flatnonzero(frames.keyframe), demo.frame_index)
        assert frames.events[3].tolist() == [KeyframeEvent.GRASP] * 2 and frames.task == "fold the garment"
    robot_ep, human_ep = read_episode(out, 0), read_episode(out, 1)
    np.testing.assert_allclose(robot_ep.state, ep.arm_state, rtol=0, atol=1e-6)
    np.testing.assert_allclose(robot_ep.action, np.concatenate([ep.arm_state[1:], ep.arm_state[-1:]]), atol=1e-6)
    np.testing.assert_allclose(human_ep.state, _held_keyposes(demo, 12), rtol=0, atol=0)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no scratch files left


def _held_keyposes(demo: Demonstration, frames: int, ahead: int = 0) -> np.ndarray:
    """Per frame the keypose of the latest keyframe at or before it (`ahead` = 1: the next one)."""
    latest = np.searchsorted(demo.frame_index, np.arange(frames), side="right") - 1
    return demo.keypose[np.clip(latest + ahead, 0, demo.num_keyframes - 1)]


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("no keyframes", "no keyframes file {tmp}/none.safetensors for bag {robot}: extract them first"),
        ("other recording", "was extracted from a recording of 12 frames, bag {tmp}/short has 8"),
        ("damaged bag", "robot_bag is not a readable rosbag2 bag"),
        ("no camera", "has no color topic /camera/color"),
    ],
)
def test_bad_recordings_give_one_error_line(tmp_path, recorded, capsys, case, message):
    from instant_fold_demo.bag import write_messages

    robot, _, keyframes = recorded
    bag, kf = robot, keyframes
    if case == "no keyframes":
        kf = tmp_path / "none.safetensors"
    elif case == "other recording":
        bag = _bag(tmp_path / "short", _episode("", 4, frames=8, res=64))
    elif case == "damaged bag":
        mcap = next(robot.glob("*.mcap"))
        mcap.write_bytes(mcap.read_bytes()[: mcap.stat().st_size // 2])
    else:
        bag = write_messages(tmp_path / "empty", {}, iter(()))
    capsys.readouterr()
    assert main(["export", "--out", str(tmp_path / "new"), "--bag", str(bag), str(kf)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert message.format(tmp=tmp_path, robot=robot) in err, err
    assert not (tmp_path / "new").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["import", "{tmp}", "--out", "{tmp}/d.safetensors"], "not a LeRobotDataset folder"),
        (["import", "{lerobot}", "--episode", "5", "--out", "{tmp}/d.safetensors"], "no episode 5 (it has 1)"),
        (["import", "{lerobot}", "--out", "{demo}"], "exists (--force to overwrite)"),
        (["export", "--out", "{lerobot}", "--demo", "{demo}"], "exists and is not an empty folder"),
        (["export", "--out", "{tmp}/new", "--store", "{store}", "--episodes", "nope"], "no episodes ['nope']"),
        (["export", "--out", "{tmp}/new", "--demo", "{tmp}/missing.safetensors"], "does not exist"),
    ],
)
def test_bad_input_gives_one_error_line(tmp_path, store, capsys, argv, message):
    lerobot = tmp_path / "lerobot"
    assert main(["export", "--out", str(lerobot), "--demo", str(DEMO)]) == 0
    capsys.readouterr()
    fill = {"tmp": tmp_path, "lerobot": lerobot, "demo": DEMO, "store": store}
    assert main([arg.format(**fill) for arg in argv]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "new").exists()


def test_damaged_export_is_refused_with_one_line(tmp_path, capsys):
    out = tmp_path / "lerobot"
    assert main(["export", "--out", str(out), "--demo", str(DEMO)]) == 0
    data = out / "data" / "chunk-000" / "file-000.parquet"
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
    capsys.readouterr()
    assert main(["import", str(out), "--out", str(tmp_path / "d.safetensors")]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {out}: episode 0 cannot be read (") and err.count("\n") == 1, err
    assert not (tmp_path / "d.safetensors").exists()


def test_failed_export_leaves_no_folder(tmp_path, store, capsys):
    """Images of two sizes cannot share a LeRobot feature: refused, and nothing is left behind."""
    small = tmp_path / "small.zarr"
    zarr_store.EpisodeStore(small, mode="a").write("e", _episode("sleeves_down__bottom_up", 3, res=32))
    assert main(["export", "--out", str(tmp_path / "x"), "--store", str(small), "--demo", str(DEMO)]) == 1
    assert "images are 256x256, the dataset's are 32x32" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sim.zarr", "small.zarr"]


def _read_with_lerobot(root: Path, tmp_path: Path) -> dict:
    if not LEROBOT_PYTHON.is_file():
        pytest.skip(f"no LeRobot environment at {LEROBOT_PYTHON.parent.parent}: scripts/bootstrap_lerobot.sh makes it")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"), "OMP_NUM_THREADS": "1"}
    env.pop("PYTHONPATH", None)  # the workspace's packages are not for lerobot's interpreter
    run = subprocess.run(
        [str(LEROBOT_PYTHON), str(READER), str(root)], capture_output=True, text=True, env=env, timeout=300
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def _check_against(seen: dict, expected: list[tuple[str, np.ndarray, np.ndarray, np.ndarray]]) -> None:
    """`expected`: per episode (task, action [T, 2, 4], colour [T, H, W, 3], depth [T, H, W])."""
    total = sum(len(action) for _, action, _, _ in expected)
    assert seen["num_frames"] == seen["len"] == total
    assert seen["num_episodes"] == len(expected)
    assert seen["camera_keys"] == ["observation.images.overhead"]
    np.testing.assert_allclose(
        np.array(seen["action"]), np.concatenate([a.reshape(-1, 8) for _, a, _, _ in expected]), rtol=0, atol=1e-6
    )
    assert seen["task"] == [task for task, action, _, _ in expected for _ in action]
    assert seen["image_sum"] == [int(c.astype(np.int64).sum()) for _, _, color, _ in expected for c in color]
    np.testing.assert_allclose(
        seen["depth_sum"], [float(d.astype(np.float64).sum()) for *_, depth in expected for d in depth], rtol=1e-9
    )


def test_lerobot_reads_store_episodes_and_a_demonstration(tmp_path, store):
    out = tmp_path / "lerobot"
    assert main(["export", "--out", str(out), "--store", str(store), "--demo", str(DEMO)]) == 0
    seen = _read_with_lerobot(out, tmp_path)
    episodes = zarr_store.EpisodeStore(store)
    expected = []
    for name in episodes.names():
        ep = episodes.read(name)
        expected.append((ep.meta["mode"], ep.action, ep.rgb, ep.depth))
    demo = load_demonstration(DEMO)
    expected.append((demo.mode, np.concatenate([demo.keypose[1:], demo.keypose[-1:]]), demo.color, demo.depth))
    _check_against(seen, expected)
    assert seen["keyframe"][:8] == [i in (0, 3, 6, 7) for i in range(8)]
    assert seen["gripper_event"][3] == [KeyframeEvent.GRASP] * 2


def test_lerobot_reads_recorded_bags(tmp_path, recorded, monkeypatch):
    """LeRobot's own reader on the export of a robot's recording and a recording without arm state,
    written in batches of 5 frames (parquet row groups that do not divide an episode)."""
    from instant_fold_core.dataset import lerobot_format

    monkeypatch.setattr(lerobot_format, "WRITE_BATCH", 5)
    robot, human, keyframes = recorded
    out = tmp_path / "lerobot"
    assert main(["export", "--out", str(out), *_bags(robot, keyframes), *_bags(human, keyframes)]) == 0
    seen = _read_with_lerobot(out, tmp_path)
    ep, demo = _episode("", 4, frames=12, res=64), load_demonstration(keyframes)
    robot_action = np.concatenate([ep.arm_state[1:], ep.arm_state[-1:]])
    human_action = _held_keyposes(demo, 12, ahead=1)
    task = "fold the garment"
    _check_against(seen, [(task, robot_action, ep.rgb, ep.depth), (task, human_action, ep.rgb, ep.depth)])
    flagged = [i in demo.frame_index for i in range(12)]
    assert seen["keyframe"] == flagged * 2


@pytest.mark.slow
def test_generated_episode_through_lerobot_and_back(tmp_path):
    """The project's generator (cpu-small, one fold) -> export -> LeRobot's reader and our import."""
    from instant_fold_sim import generate

    store = tmp_path / "sim.zarr"
    args = ["--out", str(store), "--preset", "cpu-small", "--garments", "proc:0", "--modes", "2/S"]
    assert generate.main(args) == 0
    out = tmp_path / "lerobot"
    assert main(["export", "--out", str(out), "--store", str(store)]) == 0
    episodes = zarr_store.EpisodeStore(store)
    (name,) = episodes.names()
    ep = episodes.read(name)
    assert main(["import", str(out), "--out", str(tmp_path / "d.safetensors")]) == 0
    _assert_same_demonstration(load_demonstration(tmp_path / "d.safetensors"), from_episode(ep, name=name))
    _check_against(_read_with_lerobot(out, tmp_path), [("sleeves_down__bottom_up", ep.action, ep.rgb, ep.depth)])
