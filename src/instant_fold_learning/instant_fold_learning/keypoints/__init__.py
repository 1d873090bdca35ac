"""The keypoint detector: the garment's named keypoints read from its cloth tokens.

Why: a demonstrated grasp carried onto the current cloth by a rigid registration lands where the
demonstrator's cloth part was, not where the same part is now; a sleeve that lies elsewhere is
missed (docs/evaluation.md, "Where the rows stand"). The detector names the parts: trained on the
simulator's tracked keypoints, it predicts each keypoint of `KEYPOINT_NAMES` on any frame's cloth
tokens, so a grasp at a named part of the demonstration's cloth can be carried to that part of
the current one (`policy/replay.py`, `keypoint_grasp`). Not in the paper (docs/registration.md,
"Grasps carried by keypoints").
"""

from instant_fold_learning.keypoints.configuration import (
    PRESETS,
    KeypointConfig,
    KeypointDetectorConfig,
    KeypointTrainingConfig,
)
from instant_fold_learning.keypoints.modeling import KeypointDetector, KeypointOutput, Keypoints, keypoint_losses

__all__ = [
    "PRESETS",
    "KeypointConfig",
    "KeypointDetector",
    "KeypointDetectorConfig",
    "KeypointOutput",
    "KeypointTrainingConfig",
    "Keypoints",
    "keypoint_losses",
]
