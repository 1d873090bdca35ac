"""Camera and segmentation nodes as separate processes over DDS, fed by a RealSense recording."""

from __future__ import annotations

import io
import signal
import subprocess
import time
from pathlib import Path

import pytest
from perception_scenes import table_scene
from sensor_msgs.msg import Image

from instant_fold_core.rgbd import RGBDFrame
from instant_fold_interfaces.srv import SetBoxPrompt
from instant_fold_perception.recording import write_recording
from instant_fold_ros.graph_spec import GraphSpec, NodeSpec
from instant_fold_ros.standins.image_bridge import image_from_msg
from instant_fold_ros.standins.process_runner import ProcessRunner, find_executable
from instant_fold_ros.testing import TopicProbe

pytestmark = pytest.mark.ros


def _run_perception(
    tmp_path: Path,
    ros_env: dict[str, str],
    frames: list[RGBDFrame],
    until,
    segmentation_params: str = "    backend: plane\n",
    prompt: SetBoxPrompt.Request | None = None,
    timeout_s: float = 60.0,
) -> tuple[list[Image], str, SetBoxPrompt.Response | None]:
    """Replay `frames` through camera + segmentation processes; collect masks until `until(masks, log)`.

    With `prompt`, the segmentation's box-prompt service is called once it is up.
    """
    recording = write_recording(tmp_path / "frames.db3", frames)
    params = tmp_path / "perception.yaml"
    params.write_text(
        f"camera:\n  ros__parameters:\n    playback_file: '{recording}'\n    playback_repeat: true\n"
        f"segmentation:\n  ros__parameters:\n{segmentation_params}"
    )
    graph = GraphSpec(
        "perception",
        (
            NodeSpec("camera", "instant_fold_perception", "camera_node", parameters=(params,)),
            NodeSpec("segmentation", "instant_fold_perception", "segmentation_node", parameters=(params,)),
        ),
    )
    out = io.StringIO()
    answer = None
    with TopicProbe(ros_env) as probe:
        masks = probe.subscribe(Image, "cloth/mask")
        runner = ProcessRunner(graph, env=ros_env, output=out)
        runner.start()
        try:
            if prompt is not None:
                answer = probe.call(SetBoxPrompt, "segmentation/set_box_prompt", prompt, timeout_s)
            probe.spin_until(lambda: until(masks, out.getvalue()), timeout_s=timeout_s)
            probe.spin_until(lambda: False, 1.0)  # whatever else is in flight arrives now
        finally:
            assert runner.shutdown() == 0, out.getvalue()
    return masks, out.getvalue(), answer


def test_recorded_frames_become_cloth_masks(tmp_path: Path, ros_env: dict[str, str]) -> None:
    scenes = [table_scene(size=(96, 128), seed=i) for i in range(8)]
    box = SetBoxPrompt.Request(x_min=0.0, y_min=0.0, x_max=10.0, y_max=10.0)
    masks, log, answer = _run_perception(
        tmp_path, ros_env, [frame for frame, _ in scenes], lambda m, _: len(m) >= 3, prompt=box
    )
    assert answer is not None and not answer.success and "takes no prompt" in answer.message
    assert len(masks) >= 3, log
    truth = scenes[0][1]
    for msg in masks:
        mask = image_from_msg(msg, ("mono8",)) > 0
        iou = (mask & truth).sum() / (mask | truth).sum()
        assert iou > 0.9, iou
        assert msg.header.frame_id == "camera_color_optical_frame"


def test_camera_without_device_reports_and_retries(ros_env: dict[str, str]) -> None:
    import pyrealsense2 as rs

    if len(rs.context().query_devices()):
        pytest.skip("a RealSense camera is connected")
    exe = find_executable(NodeSpec("camera", "instant_fold_perception", "camera_node"))
    proc = subprocess.Popen(
        [str(exe), "--ros-args", "-p", "retry_period_s:=0.5"],
        env=ros_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    time.sleep(6.0)
    assert proc.poll() is None, "the node keeps running and retrying"
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0, output
    assert output.count("no RealSense device connected") >= 2, output


def test_masks_are_not_published_for_unusable_frames(tmp_path: Path, ros_env: dict[str, str]) -> None:
    """A recording of an empty table: every frame is rejected, no mask is published."""
    frame, _ = table_scene(size=(96, 128), cloth_height=0.0, with_gripper=False)
    masks, log, _ = _run_perception(tmp_path, ros_env, [frame] * 4, lambda _, log: "frame rejected" in log)
    assert "frame rejected" in log and "nothing lies on the table" in log, log
    assert masks == []


@pytest.mark.slow
def test_sam2_backend_tracks_after_a_prompt_over_dds(tmp_path: Path, ros_env: dict[str, str]) -> None:
    """SAM2 (tiny, random weights) behind the node: no masks before the prompt, masks after it."""
    scenes = [table_scene(size=(60, 80), seed=i)[0] for i in range(6)]
    sam2 = (
        "    backend: sam2\n    sam2:\n      model_config: configs/sam2.1/sam2.1_hiera_t.yaml\n"
        "      image_size: 256\n      device: cpu\n      min_mask_pixels: 0\n      allow_random_weights: true\n"
    )
    box = SetBoxPrompt.Request(x_min=16.0, y_min=18.0, x_max=64.0, y_max=45.0)
    masks, log, answer = _run_perception(
        tmp_path, ros_env, scenes, lambda m, _: len(m) >= 2, segmentation_params=sam2, prompt=box, timeout_s=240.0
    )
    assert answer is not None and answer.success, log
    assert len(masks) >= 2, log
    assert all(image_from_msg(m, ("mono8",)).shape == (60, 80) for m in masks)
