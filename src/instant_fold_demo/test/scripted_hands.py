"""A hand tracker stand-in for tests, behind the `HandDetector` interface: it returns hands with
scripted landmarks (grasp point and pinch per frame) instead of finding them in the image.

Why: no person folds in front of a camera here, and the simulator renders cloth but no hands, so
the extraction is tested on what a tracker would report for hands moving where the simulator's
grippers move. MediaPipe itself is tested separately (`test_hands.py`).
"""

from __future__ import annotations

import numpy as np

from instant_fold_demo.hands import INDEX_TIP, MIDDLE_MCP, NUM_LANDMARKS, THUMB_TIP, WRIST, HandDetection


def hand_landmarks(grasp_px: np.ndarray, pinch: float, arm: int, size: float = 20.0) -> np.ndarray:
    """21 landmarks of a hand whose thumb/index midpoint is `grasp_px`, reaching in from the
    image side of its arm, with thumb-index distance `pinch` x hand size."""
    g = np.asarray(grasp_px, np.float32)
    outward = np.array([-1.0 if arm == 0 else 1.0, 0.8], np.float32)
    outward /= np.linalg.norm(outward)
    wrist = g + outward * size / 0.6
    lm = wrist + (g - wrist) * np.linspace(0, 1, NUM_LANDMARKS, dtype=np.float32)[:, None]
    lm[WRIST] = wrist
    lm[MIDDLE_MCP] = wrist + (g - wrist) * 0.6  # hand size = |MCP - wrist| = size
    across = np.array([-outward[1], outward[0]], np.float32)
    lm[THUMB_TIP] = g - across * pinch * size / 2
    lm[INDEX_TIP] = g + across * pinch * size / 2
    return lm


class ScriptedHands:
    """`HandDetector` answering from a script: stamp_ms -> [(arm, grasp_px, pinch), ...]."""

    def __init__(self, script: dict[int, list[tuple[int, np.ndarray, float]]], size: float = 20.0) -> None:
        self.script = script
        self.size = size

    def detect(self, color: np.ndarray, stamp_ms: int) -> list[HandDetection]:
        return [
            HandDetection(hand_landmarks(px, pinch, arm, self.size), 0.95)
            for arm, px, pinch in self.script.get(stamp_ms, [])
        ]


def pinch_of(openness: float) -> float:
    """The pinch ratio a hand shows for a gripper openness (1 open: fingers apart)."""
    return 0.1 + 0.8 * float(openness)
