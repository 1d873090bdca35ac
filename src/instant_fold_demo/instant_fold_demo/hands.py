"""Hand tracking for human demonstrations: a detector interface, the MediaPipe backend, and the
per-frame hand state the keyframe extraction reads (grasp point in 3D, pinch, arm side).

Backend: MediaPipe Tasks `HandLandmarker` (the tracker PianoMime, which the paper cites, builds
on MediaPipe Hands). The current `mediapipe` wheel ships no hand model, so `scripts/bootstrap.sh`
packs the hand landmark and palm detection models bundled in the registry package
`mediapipe==0.10.21` (Apache-2.0) into a `.task` bundle once (`scripts/hand_model.py`); nothing is
downloaded at run time.

Sides: the overhead view sees both hands from above, and MediaPipe's handedness label is
unreliable there (it is trained on selfie-style views), so, as PianoMime does, hands are
assigned by image position: the hand further left in the image (smaller u) drives arm 0 ("left"
in the camera frame, x < 0), the other arm 1. `mirror=True` swaps them (a person facing the
robot across the table, whose left hand is the robot's right arm).
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from instant_fold_core.errors import ExternalError

#: MediaPipe hand landmark indices used here (21 landmarks per hand).
WRIST, THUMB_TIP, INDEX_MCP, INDEX_TIP, MIDDLE_MCP = 0, 4, 5, 8, 9
NUM_LANDMARKS = 21
#: Where set-up puts the model bundle (inside the environment, next to the packages using it).
MODEL_ENV = "INSTANT_FOLD_HAND_MODEL"


class HandTrackingError(ExternalError):
    """The hand tracker cannot run (model missing or unreadable); the message says what to do."""


@dataclass(frozen=True)
class HandDetection:
    """One detected hand: 21 landmarks in pixels (u, v) and the detector's confidence in [0, 1]."""

    landmarks: np.ndarray  # float32 [21, 2]
    score: float


class HandDetector(Protocol):
    """Turns an RGB image (uint8 [H, W, 3]) into the hands it sees; `stamp_ms` increases per call."""

    def detect(self, color: np.ndarray, stamp_ms: int) -> list[HandDetection]: ...


def default_model_path() -> Path:
    """The hand model bundle: $INSTANT_FOLD_HAND_MODEL, else the one set-up wrote into the environment."""
    if os.environ.get(MODEL_ENV):
        return Path(os.environ[MODEL_ENV])
    return Path(sys.prefix) / "share" / "instant_fold_demo" / "hand_landmarker.task"


class MediaPipeHandDetector:
    """MediaPipe Tasks HandLandmarker in VIDEO mode (tracks between frames, re-detects palms when lost)."""

    def __init__(self, model_path: str | Path | None = None, max_hands: int = 2, min_confidence: float = 0.5) -> None:
        path = Path(model_path) if model_path else default_model_path()
        if not path.is_file():
            raise HandTrackingError(
                f"hand model {path} not found: run scripts/bootstrap.sh (it builds it from mediapipe==0.10.21) "
                f"or set {MODEL_ENV}"
            )
        from mediapipe.tasks.python import BaseOptions, vision

        options = vision.HandLandmarkerOptions(
            base_options=BaseOptions(model_asset_path=str(path)),
            running_mode=vision.RunningMode.VIDEO,
            num_hands=max_hands,
            min_hand_detection_confidence=min_confidence,
            min_hand_presence_confidence=min_confidence,
            min_tracking_confidence=min_confidence,
        )
        try:
            self._landmarker = vision.HandLandmarker.create_from_options(options)
        except (RuntimeError, ValueError) as exc:
            raise HandTrackingError(f"hand model {path} does not load: {exc}") from exc

    def detect(self, color: np.ndarray, stamp_ms: int) -> list[HandDetection]:
        import mediapipe as mp

        h, w = color.shape[:2]
        image = mp.Image(image_format=mp.ImageFormat.SRGB, data=np.ascontiguousarray(color))
        result = self._landmarker.detect_for_video(image, int(stamp_ms))
        hands = []
        for landmarks, handedness in zip(result.hand_landmarks, result.handedness, strict=True):
            uv = np.array([[p.x * w, p.y * h] for p in landmarks], np.float32)
            hands.append(HandDetection(uv, float(handedness[0].score) if handedness else 0.0))
        return hands

    def close(self) -> None:
        self._landmarker.close()

    def __enter__(self) -> MediaPipeHandDetector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def depth_at(depth: np.ndarray, u: float, v: float, window: int = 5, mask: np.ndarray | None = None) -> float:
    """Median of the valid (> 0, finite) depths in a window around pixel (u, v); NaN if none.

    A median over a small window, because single depth pixels at finger tips and cloth edges are
    often missing or fly to the background. With `mask`, only pixels inside it count.
    """
    h, w = depth.shape
    r = window // 2
    x, y = round(u), round(v)
    x0, x1, y0, y1 = max(0, x - r), min(w, x + r + 1), max(0, y - r), min(h, y + r + 1)
    if x0 >= x1 or y0 >= y1:
        return float("nan")
    patch = depth[y0:y1, x0:x1]
    ok = np.isfinite(patch) & (patch > 0)
    if mask is not None:
        ok &= mask[y0:y1, x0:x1]
    return float(np.median(patch[ok])) if ok.any() else float("nan")


def backproject(u: float, v: float, z: float, k: np.ndarray) -> np.ndarray:
    """Pixel (u, v) at depth z (m) -> camera-frame point (x right, y down, z forward)."""
    return np.array([(u - k[0, 2]) * z / k[0, 0], (v - k[1, 2]) * z / k[1, 1], z], np.float32)


def project(point: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Camera-frame point -> pixel (u, v)."""
    x, y, z = (float(c) for c in point)
    return np.array([k[0, 0] * x / z + k[0, 2], k[1, 1] * y / z + k[1, 2]], np.float32)


@dataclass(frozen=True)
class HandState:
    """What the keyframe extraction needs from one hand in one frame.

    grasp_px: midpoint of thumb and index tips (where a gripper's fingers would close), pixels.
    grasp_point: that point in 3D (camera frame, m) from the aligned depth; NaN when no valid depth.
    pinch: thumb-to-index tip distance over the hand's size (wrist to middle-finger base), both in
        pixels: scale-free, and robust where fingertip depth is missing.
    """

    landmarks: np.ndarray
    score: float
    grasp_px: np.ndarray
    grasp_point: np.ndarray
    pinch: float

    def to_json(self) -> dict:
        return {
            "score": round(self.score, 4),
            "grasp_px": [round(float(c), 2) for c in self.grasp_px],
            "grasp_point": [None if not np.isfinite(c) else round(float(c), 4) for c in self.grasp_point],
            "pinch": round(self.pinch, 4),
        }


def hand_state(detection: HandDetection, depth: np.ndarray, k: np.ndarray, window: int = 5) -> HandState:
    """Grasp point, its 3D position from depth, and the pinch ratio of one detected hand."""
    lm = detection.landmarks
    grasp = (lm[THUMB_TIP] + lm[INDEX_TIP]) / 2
    size = float(np.linalg.norm(lm[MIDDLE_MCP] - lm[WRIST]))
    pinch = float(np.linalg.norm(lm[THUMB_TIP] - lm[INDEX_TIP])) / max(size, 1e-6)
    z = depth_at(depth, float(grasp[0]), float(grasp[1]), window)
    point = backproject(float(grasp[0]), float(grasp[1]), z, k) if np.isfinite(z) else np.full(3, np.nan, np.float32)
    return HandState(lm, detection.score, grasp.astype(np.float32), point, pinch)


def assign_arms(
    hands: list[HandDetection],
    image_width: int,
    mirror: bool = False,
    previous: tuple[np.ndarray | None, np.ndarray | None] = (None, None),
) -> list[HandDetection | None]:
    """[arm 0, arm 1] by image position: with two hands the one further left (mean landmark u)
    is arm 0. A single hand keeps the arm whose last known landmarks (`previous`, per arm) are
    nearest, so a hand crossing the image centre does not change arms; with no history it goes to
    the arm of its image half. Extra detections (> 2) keep the two most confident. `mirror`
    swaps the arms (two hands, or a single hand without history)."""
    hands = sorted(hands, key=lambda d: -d.score)[:2]
    arms: list[HandDetection | None] = [None, None]
    if len(hands) == 2:
        a, b = sorted(hands, key=lambda d: float(d.landmarks[:, 0].mean()))
        return [b, a] if mirror else [a, b]
    if len(hands) == 1:
        centre = hands[0].landmarks.mean(axis=0)
        known = [(float(np.linalg.norm(p.mean(axis=0) - centre)), a) for a, p in enumerate(previous) if p is not None]
        if known:
            arms[min(known)[1]] = hands[0]
        else:
            arms[int(float(centre[0]) >= image_width / 2) ^ int(mirror)] = hands[0]
    return arms


def model_provenance(path: Path | None = None) -> dict:
    """The JSON set-up wrote beside the model (source package, file hashes, licence)."""
    model = path or default_model_path()
    info = model.with_suffix(".json")
    return json.loads(info.read_text()) if info.is_file() else {}


#: Lines MediaPipe's native code (LiteRT, XNNPACK, glog) writes to stderr on every run: set-up
#: and alignment notices that say nothing about the user's recording.
NATIVE_NOISE = re.compile(r"^(INFO: |WARNING: |[IW]\d{4} [\d:. ]+\d+ \S+\.cc:\d+\] )")


@contextmanager
def quiet_native_logs() -> Iterator[None]:
    """Keep MediaPipe's native INFO/WARNING lines off the terminal while it runs; anything else its
    native code writes to stderr (an error) is passed on when the block ends.

    Its C++ logging writes to file descriptor 2 directly, so Python's logging cannot filter it:
    the descriptor is pointed at a temporary file for the duration and filtered afterwards."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            for line in capture.read().decode(errors="replace").splitlines(keepends=True):
                if not NATIVE_NOISE.match(line):
                    sys.stderr.write(line)
            sys.stderr.flush()
