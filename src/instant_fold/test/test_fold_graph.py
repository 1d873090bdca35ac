"""The fold graph builder: which nodes each choice starts, with which parameters, and refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from instant_fold.fold_graph import SIM_GRASPS, FoldOptions, build_fold_graph, parameters_yaml, parse_launch_arguments
from instant_fold.runner import load_graph_with_arguments
from instant_fold_core.errors import ConfigError
from instant_fold_ros.bringup_share import launch_dir


def names(options: FoldOptions) -> list[str]:
    return [n.name for n in build_fold_graph(options)[0].nodes]


def test_sim_is_camera_and_robot_and_masks_the_cloth() -> None:
    graph, params = build_fold_graph(FoldOptions(robot="sim", seed="7", garment="proc:2"))
    assert [n.name for n in graph.nodes] == ["sim", "tokenizer", "policy_server", "controller_node"]
    assert {n.name for n in graph.nodes if n.required} == {"sim", "controller_node"}
    assert params["sim"] == {"publish_mask": True, "seed": 7, "garment": "proc:2"}
    assert params["controller_node"] == {"robot": "sim", "control_rate_hz": 20.0}
    # stamps are simulated time: the policy server must read /clock, the tickers must not
    assert params["policy_server"]["use_sim_time"] is True and params["policy_server"]["step_duration"] == 0.05
    assert "use_sim_time" not in params["sim"] and "use_sim_time" not in params["controller_node"]
    for node in graph.nodes:
        assert all(p.is_file() for p in node.parameters)


def test_real_robots_get_camera_and_segmentation_nodes() -> None:
    assert names(FoldOptions(robot="dobot")) == [
        "camera",
        "segmentation",
        "tokenizer",
        "policy_server",
        "controller_node",
    ]
    _, params = build_fold_graph(FoldOptions(robot="franka", segmentation="sam2", camera="playback", playback_file="x"))
    assert params["segmentation"] == {"backend": "sam2"} and params["camera"] == {"playback_file": "x"}
    assert params["controller_node"] == {"robot": "franka"}
    # a recorded rosbag2 bag replaces the camera
    graph, params = build_fold_graph(FoldOptions(robot="dobot", camera="bag", playback_file="rec"))
    assert graph.nodes[0].executable == "bag_player" and params["bag_player"] == {"bag": "rec"}
    # the simulator rendered images can also be segmented by a real backend
    _, params = build_fold_graph(FoldOptions(robot="sim", segmentation="plane"))
    assert params["sim"]["publish_mask"] is False and params["segmentation"]["backend"] == "plane"


def test_models_default_to_the_models_folder_and_demo_is_passed() -> None:
    _, params = build_fold_graph(FoldOptions(robot="sim", demo="/d.safetensors", max_steps="9"))
    policy = params["policy_server"]
    assert Path(policy["policy_checkpoint"]).parts[-2:] == ("models", "policy")
    assert policy["encoder_checkpoint"] == params["tokenizer"]["encoder_checkpoint"]
    assert policy["demonstration"] == "/d.safetensors" and policy["fold"] == {"max_steps": 9}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (FoldOptions(robot="dobot", camera="sim"), "camera and robot at once"),
        (FoldOptions(robot="sim", camera="realsense"), "camera and robot at once"),
        (FoldOptions(robot="dobot", segmentation="sim"), "needs camera:=sim"),
        (FoldOptions(robot="dobot", camera="playback"), "playback_file"),
        (FoldOptions(robot="dobot", camera="bag"), "camera:=bag needs playback_file"),
        (FoldOptions(robot="dobot", camera="webcam"), "camera:=webcam"),
        (FoldOptions(robot="sim", segmentation="magic"), "segmentation:=magic"),
        (FoldOptions(robot="dobot", seed="3"), "need camera:=sim"),
        (FoldOptions(robot="franka", sim_backend="isaac_lab"), "need robot:=sim"),
        (FoldOptions(robot="sim", sim_backend="gazebo"), "sim_backend:=gazebo"),
    ],
)
def test_inconsistent_choices_are_refused(options: FoldOptions, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build_fold_graph(options)


def test_parameter_file_is_valid_ros_yaml() -> None:
    _, params = build_fold_graph(FoldOptions(robot="sim", max_steps="3"))
    data = yaml.safe_load(parameters_yaml(params))
    assert data["policy_server"]["ros__parameters"]["fold"] == {"max_steps": 3}
    assert set(data) == {"sim", "tokenizer", "policy_server", "controller_node"}


def test_runner_takes_launch_style_arguments(tmp_path: Path) -> None:
    graph, files = load_graph_with_arguments("fold", ["robot:=sim", "seed:=4"], tmp_path)
    assert graph.name == "fold" and files == [tmp_path / "fold_params.yaml"]
    assert yaml.safe_load(files[0].read_text())["sim"]["ros__parameters"]["seed"] == 4
    with pytest.raises(ConfigError, match="unknown arguments"):
        load_graph_with_arguments("fold", ["robots:=sim"], tmp_path)
    with pytest.raises(ConfigError, match="name:=value"):
        parse_launch_arguments(["robot=sim"])
    with pytest.raises(ConfigError, match="takes no name:=value"):
        load_graph_with_arguments("graph_check", ["robot:=sim"], tmp_path)


def test_sim_backend_reaches_the_sim_node_from_launch_arguments(tmp_path: Path) -> None:
    """`sim_backend:=isaac_lab sim_device:=cuda:0` (fold.launch.py and the runner share
    FoldOptions): the sim node's backend parameters; the rest of the graph is unchanged."""
    graph, files = load_graph_with_arguments(
        "fold", ["robot:=sim", "sim_backend:=isaac_lab", "sim_device:=cuda:0"], tmp_path
    )
    sim = yaml.safe_load(files[0].read_text())["sim"]["ros__parameters"]
    assert sim["backend"] == "isaac_lab" and sim["backend_device"] == "cuda:0"
    assert [n.name for n in graph.nodes] == names(FoldOptions(robot="sim"))
    _, params = build_fold_graph(FoldOptions(robot="sim"))
    assert "backend" not in params["sim"]  # default: the embedded Newton scene (config/sim.yaml)
    launch = launch_dir() / "fold.launch.py"
    assert "fold_launch_description" in launch.read_text()  # one launch argument per FoldOptions field


def test_sim_grasp_reaches_the_sim_node_and_unknown_models_are_refused(tmp_path: Path) -> None:
    """`sim_grasp:=commanded` (Isaac Lab: what held cloth follows) is the sim node's `grasp`; the
    bringup's list is the simulator's (not imported there: the bringup stays light)."""
    from instant_fold_sim.isaac_lab.grasp import GRASP_MODELS

    assert SIM_GRASPS == GRASP_MODELS
    _, files = load_graph_with_arguments(
        "fold", ["robot:=sim", "sim_backend:=isaac_lab", "sim_grasp:=commanded"], tmp_path
    )
    assert yaml.safe_load(files[0].read_text())["sim"]["ros__parameters"]["grasp"] == "commanded"
    with pytest.raises(ConfigError, match="sim_grasp:=friction"):
        build_fold_graph(FoldOptions(robot="sim", sim_grasp="friction"))
    with pytest.raises(ConfigError, match="need robot:=sim"):
        build_fold_graph(FoldOptions(robot="dobot", sim_grasp="fingers"))


def test_a_keypoint_detector_reaches_the_policy_server(tmp_path: Path) -> None:
    """`keypoints:=DIR` is the policy server's `keypoint_detector`; without it the server has none
    (config/policy.yaml's empty default)."""
    _, files = load_graph_with_arguments("fold", ["robot:=sim", "keypoints:=models/keypoints"], tmp_path)
    server = yaml.safe_load(files[0].read_text())["policy_server"]["ros__parameters"]
    assert server["keypoint_detector"] == "models/keypoints"
    _, params = build_fold_graph(FoldOptions(robot="sim"))
    assert "keypoint_detector" not in params["policy_server"]
