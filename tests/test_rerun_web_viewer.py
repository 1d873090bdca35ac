"""A fold's Rerun recording opens in Rerun's web viewer (served on 127.0.0.1) in Debian's Chromium,
driven by Playwright (`scripts/rerun_screenshot.py`); and serving refuses what it cannot do."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from instant_fold_core.errors import InvalidInputError
from instant_fold_core.fold_recording import FoldRecording
from instant_fold_core.rerun_web import RerunWebError, free_port, serve_recording

pytest.importorskip("rerun", reason="rerun-sdk is pinned in requirements/python.lock")
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "rerun_screenshot.py"
MAGENTA = np.array([255, 0, 255])


def magenta_recording(path: Path) -> Path:
    """A short fold whose camera image is all magenta, a colour nothing else in the viewer has."""
    k = np.array([[60.0, 0, 32], [0, 60, 24], [0, 0, 1]])
    with FoldRecording(path) as rec:
        rec.camera(k, 64, 48)
        for t in range(3):
            rec.observation(0.05 * t, np.broadcast_to(MAGENTA.astype(np.uint8), (48, 64, 3)).copy())
            rec.arm_state(0.05 * t, np.array([[-0.1, 0, 0.6, 1], [0.1, 0, 0.6, 0]]))
    return path


@pytest.mark.slow  # WebGL on SwiftShader: about a minute on the 2-core machine
@pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed (scripts/bootstrap.sh installs it)"
)
def test_a_recording_opens_in_the_web_viewer_in_chromium(tmp_path: Path) -> None:
    recording = magenta_recording(tmp_path / "fold.rrd")
    shot = tmp_path / "shot.png"
    args = [str(recording), "--out", str(shot), "--colors", "256", "--min-wait", "8", "--max-wait", "90"]
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    pixels = np.asarray(Image.open(shot).convert("RGB")).astype(int)
    assert pixels.shape[:2] == (800, 1280)
    magenta = np.abs(pixels - MAGENTA).max(axis=-1) < 40
    assert magenta.sum() > 2000  # the camera image is drawn: the viewer loaded the recording


def test_the_viewer_is_served_on_loopback_and_stops(tmp_path: Path) -> None:
    viewer = serve_recording(magenta_recording(tmp_path / "fold.rrd"), web_port=0)
    with viewer:
        assert viewer.url.startswith("http://127.0.0.1:") and "rerun%2Bhttp%3A%2F%2F127.0.0.1%3A" in viewer.url
        with urllib.request.urlopen(viewer.url.split("?")[0], timeout=30) as page:
            assert page.status == 200
    assert viewer.process.poll() is not None


def test_a_port_in_use_and_a_missing_recording_are_refused(tmp_path: Path) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        with pytest.raises(RerunWebError, match=f"port {port} on 127.0.0.1 is in use"):
            free_port("127.0.0.1", port)
    with pytest.raises(InvalidInputError, match="no Rerun recording"):
        serve_recording(tmp_path / "missing.rrd")
