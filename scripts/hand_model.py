"""Build the MediaPipe hand model bundle from the registry package mediapipe==0.10.21 (idempotent).

Why: the current `mediapipe` wheel (1.2.x) ships no hand model, and model hubs are not reachable
at run time; 0.10.21 still bundles the palm detector and the hand landmark model. A Tasks `.task`
file is a zip holding `hand_detector.tflite` and `hand_landmarks_detector.tflite`, so this script
downloads that wheel once (pip, no dependencies), packs the two files, checks that the installed
mediapipe's HandLandmarker loads the bundle, and writes beside it the wheel's LICENSE
(Apache-2.0) and a JSON with the source and SHA-256 hashes. A second run with the bundle in
place and matching its JSON does nothing.

Usage: python scripts/hand_model.py OUT_DIR
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

PACKAGE = "mediapipe==0.10.21"
MEMBERS = {
    "hand_detector.tflite": "mediapipe/modules/palm_detection/palm_detection_full.tflite",
    "hand_landmarks_detector.tflite": "mediapipe/modules/hand_landmark/hand_landmark_full.tflite",
}
LICENSE = "mediapipe-0.10.21.dist-info/LICENSE"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def check_loads(task: Path) -> None:
    from mediapipe.tasks.python import BaseOptions, vision

    options = vision.HandLandmarkerOptions(base_options=BaseOptions(model_asset_path=str(task)))
    with vision.HandLandmarker.create_from_options(options):
        pass


def build(out_dir: Path) -> Path:
    task = out_dir / "hand_landmarker.task"
    info = out_dir / "hand_landmarker.json"
    if task.is_file() and info.is_file() and json.loads(info.read_text()).get("sha256") == sha256(task):
        return task
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        # Any platform's wheel holds the same .tflite files; pin one so every machine gets the same.
        subprocess.run(
            [sys.executable, "-m", "pip", "--isolated", "download", "--quiet", "--no-deps", "--only-binary=:all:",
             "--platform", "manylinux_2_28_x86_64", "--python-version", "3.11", PACKAGE, "-d", tmp],
            check=True,
        )  # fmt: skip
        (wheel,) = Path(tmp).glob("mediapipe-*.whl")
        packed = Path(tmp) / task.name
        with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(packed, "w", zipfile.ZIP_STORED) as bundle:
            for name, member in MEMBERS.items():
                bundle.writestr(name, source.read(member))
            (out_dir / "LICENSE.mediapipe").write_bytes(source.read(LICENSE))
        check_loads(packed)
        packed.replace(task)
        provenance = {
            "source": f"{PACKAGE} ({wheel.name})",
            "members": MEMBERS,
            "license": "Apache-2.0 (LICENSE.mediapipe)",
            "wheel_sha256": sha256(wheel),
            "sha256": sha256(task),
        }
        info.write_text(json.dumps(provenance, indent=2))
    return task


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    print(build(Path(sys.argv[1])))
