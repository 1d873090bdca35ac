"""SAM2 video tracking of the cloth from a bounding-box prompt, one frame at a time.

The official `SAM2VideoPredictor` expects a whole video up front. A robot sees frames one by one,
so this tracker drives the predictor's own inference state as a stream: the prompt frame is
frame 0, each new frame is appended and propagated on its own, and frames older than the memory
window are dropped (SAM2 attends to a handful of recent memories, plus the prompt frame which is
kept as its conditioning frame). Re-prompting restarts the stream.

Weights: an official SAM2 checkpoint (`.pt`, loaded with `weights_only=True`) or a
`.safetensors` state dict; without one the model is randomly initialised (tests only — the node
refuses to run like that unless told to).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from instant_fold_core.checkpoint import CheckpointError
from instant_fold_core.rgbd import RGBDFrame
from instant_fold_perception.segmentation import SegmentationError

#: ImageNet normalisation used by SAM2's image encoder.
_MEAN = torch.tensor([0.485, 0.456, 0.406])[:, None, None]
_STD = torch.tensor([0.229, 0.224, 0.225])[:, None, None]
_OBJECT_ID = 1


@dataclass(frozen=True)
class Sam2Config:
    model_config: str = "configs/sam2.1/sam2.1_hiera_s.yaml"  # SAM2.1 Hiera-S: real time on a GPU
    checkpoint: str = ""  # empty: random weights (tests)
    device: str = "auto"  # auto: cuda if available
    image_size: int = 1024  # the official models' input size
    memory_frames: int = 8  # recent frames kept as memories besides the prompt frame
    box: tuple[float, float, float, float] | None = None  # initial prompt (x_min, y_min, x_max, y_max), px
    min_mask_pixels: int = 50
    hydra_overrides: tuple[str, ...] = field(default_factory=tuple)


def load_sam2_weights(model: torch.nn.Module, path: str | Path) -> None:
    """Load an official `.pt` ({"model": state_dict}) or a `.safetensors` state dict, strictly."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"SAM2 checkpoint {path} does not exist")
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            state = load_file(str(path))
        else:
            loaded = torch.load(str(path), map_location="cpu", weights_only=True)
            state = loaded["model"] if isinstance(loaded, dict) and "model" in loaded else loaded
    except Exception as exc:  # torch/safetensors raise many types for a corrupt file
        raise CheckpointError(f"SAM2 checkpoint {path} cannot be read ({exc})") from exc
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise CheckpointError(
            f"SAM2 checkpoint {path} does not match the model: {len(missing)} missing keys "
            f"(e.g. {missing[:3]}), {len(unexpected)} unexpected (e.g. {unexpected[:3]})"
        )


class Sam2Tracker:
    """`Segmenter` backend: SAM2 video tracking of one object (the garment)."""

    def __init__(self, config: Sam2Config) -> None:
        from sam2.build_sam import build_sam2_video_predictor

        self.config = config
        device = config.device if config.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
        self.device = torch.device(device)
        overrides = [f"++model.image_size={config.image_size}", *config.hydra_overrides]
        self.predictor = build_sam2_video_predictor(
            config.model_config, ckpt_path=None, device=device, hydra_overrides_extra=overrides
        )
        if config.checkpoint:
            load_sam2_weights(self.predictor, config.checkpoint)
        self.predictor.eval()
        self._box = config.box
        self._state: dict[str, Any] | None = None
        self._next_index = 0

    def prompt(self, box: tuple[float, float, float, float]) -> None:
        """Track the object inside `box` (pixels) from the next frame on."""
        x0, y0, x1, y1 = box
        if not (np.isfinite(box).all() and x1 > x0 and y1 > y0):
            raise SegmentationError(f"invalid box prompt {box}: need x_min < x_max and y_min < y_max")
        self._box = (float(x0), float(y0), float(x1), float(y1))
        self._state = None

    def _image(self, color: np.ndarray) -> torch.Tensor:
        size = self.predictor.image_size
        x = torch.from_numpy(color).permute(2, 0, 1).float().div_(255.0)
        x = torch.nn.functional.interpolate(x[None], size=(size, size), mode="bilinear", align_corners=False)[0]
        return ((x - _MEAN) / _STD).to(self.device)

    def _new_state(self, frame: RGBDFrame) -> dict[str, Any]:
        h, w = frame.color.shape[:2]
        storage = self.device
        return {
            "images": {0: self._image(frame.color)},  # frame index -> image; old ones are dropped
            "num_frames": 1,
            "offload_video_to_cpu": False,
            "offload_state_to_cpu": False,
            "video_height": h,
            "video_width": w,
            "device": self.device,
            "storage_device": storage,
            "point_inputs_per_obj": {},
            "mask_inputs_per_obj": {},
            "cached_features": {},
            "constants": {},
            "obj_id_to_idx": OrderedDict(),
            "obj_idx_to_id": OrderedDict(),
            "obj_ids": [],
            "output_dict_per_obj": {},
            "temp_output_dict_per_obj": {},
            "frames_tracked_per_obj": {},
        }

    def _forget_old_frames(self, state: dict[str, Any], newest: int) -> None:
        oldest_kept = newest - self.config.memory_frames
        for index in [i for i in state["images"] if 0 < i < oldest_kept]:
            del state["images"][index]
        for outputs in state["output_dict_per_obj"].values():
            old = [i for i in outputs["non_cond_frame_outputs"] if i < oldest_kept]
            for index in old:
                del outputs["non_cond_frame_outputs"][index]
        for tracked in state["frames_tracked_per_obj"].values():
            for index in [i for i in tracked if 0 < i < oldest_kept]:
                del tracked[index]

    @torch.inference_mode()
    def segment(self, frame: RGBDFrame) -> np.ndarray:
        frame.validate()
        if self._box is None:
            raise SegmentationError("SAM2 needs a box prompt: set the sam2.box parameter or call the prompt service")
        if self._state is None or frame.color.shape[:2] != (self._state["video_height"], self._state["video_width"]):
            self._state = self._new_state(frame)
            self._next_index = 1
            _, _, logits = self.predictor.add_new_points_or_box(
                self._state, frame_idx=0, obj_id=_OBJECT_ID, box=np.asarray(self._box, np.float32)
            )
        else:
            index = self._next_index
            self._state["images"][index] = self._image(frame.color)
            self._state["num_frames"] = index + 1
            self._next_index += 1
            logits = None
            for _, _, masks in self.predictor.propagate_in_video(
                self._state, start_frame_idx=index, max_frame_num_to_track=0
            ):
                logits = masks
            self._forget_old_frames(self._state, index)
        assert logits is not None
        mask = (logits[0, 0] > 0.0).cpu().numpy()
        if mask.sum() < self.config.min_mask_pixels:
            raise SegmentationError("SAM2 lost the cloth (mask nearly empty); re-prompt with a box")
        return mask
