"""SAM2 streaming tracker with random weights (none can be downloaded here): the streaming state,
prompting, memory pruning and strict checkpoint loading are real; mask quality is not testable."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from perception_scenes import table_scene

from instant_fold_core.checkpoint import CheckpointError
from instant_fold_perception.segmentation import SegmentationError
from instant_fold_perception.segmentation.sam2_tracker import Sam2Config, Sam2Tracker, load_sam2_weights

TINY = Sam2Config(
    model_config="configs/sam2.1/sam2.1_hiera_t.yaml", image_size=256, memory_frames=2, min_mask_pixels=0, device="cpu"
)


@pytest.fixture(scope="module")
def tracker() -> Sam2Tracker:
    torch.manual_seed(0)
    return Sam2Tracker(TINY)


def test_streams_frames_after_a_box_prompt(tracker: Sam2Tracker) -> None:
    frames = [table_scene(size=(60, 80), seed=i)[0] for i in range(5)]
    with pytest.raises(SegmentationError, match="needs a box prompt"):
        tracker.segment(frames[0])
    tracker.prompt((16.0, 18.0, 64.0, 45.0))
    masks = [tracker.segment(frame) for frame in frames]
    assert all(m.shape == (60, 80) and m.dtype == bool for m in masks)
    state = tracker._state
    assert state is not None and state["num_frames"] == 5
    # memory window: the prompt frame plus the `memory_frames` most recent frames
    assert sorted(state["images"]) == [0, 2, 3, 4]
    (outputs,) = state["output_dict_per_obj"].values()
    assert sorted(outputs["cond_frame_outputs"]) == [0]
    assert sorted(outputs["non_cond_frame_outputs"]) == [2, 3, 4]


def test_reprompt_restarts_and_bad_boxes_are_refused(tracker: Sam2Tracker) -> None:
    frame = table_scene(size=(60, 80))[0]
    tracker.prompt((10.0, 10.0, 40.0, 40.0))
    tracker.segment(frame)
    assert tracker._state is not None and tracker._state["num_frames"] == 1
    with pytest.raises(SegmentationError, match="invalid box prompt"):
        tracker.prompt((40.0, 10.0, 10.0, 40.0))
    with pytest.raises(SegmentationError, match="invalid box prompt"):
        tracker.prompt((0.0, float("nan"), 10.0, 40.0))


def test_checkpoints_load_strictly(tracker: Sam2Tracker, tmp_path: Path) -> None:
    from safetensors.torch import save_file

    state = {k: v.clone() for k, v in tracker.predictor.state_dict().items()}
    official = tmp_path / "sam2.1_hiera_tiny.pt"
    torch.save({"model": state}, official)  # the official layout
    load_sam2_weights(tracker.predictor, official)
    save_file({k: v.contiguous() for k, v in state.items()}, str(tmp_path / "sam2.safetensors"))
    load_sam2_weights(tracker.predictor, tmp_path / "sam2.safetensors")
    with pytest.raises(CheckpointError, match="does not exist"):
        load_sam2_weights(tracker.predictor, tmp_path / "missing.pt")
    (tmp_path / "corrupt.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="cannot be read"):
        load_sam2_weights(tracker.predictor, tmp_path / "corrupt.pt")
    partial = dict(list(state.items())[:10])
    torch.save({"model": partial}, tmp_path / "partial.pt")
    with pytest.raises(CheckpointError, match="missing keys"):
        load_sam2_weights(tracker.predictor, tmp_path / "partial.pt")
    np.testing.assert_equal(len(state), len(tracker.predictor.state_dict()))
