"""The command lines on bad input: clear messages and exit codes, nothing the user recorded changed."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

from test_keyframes import _frames, _script

from instant_fold_demo.correction import main as correction_main
from instant_fold_demo.extract import main as extract_main
from instant_fold_demo.rgbd_bag import write_rgbd_bag
from instant_fold_ros.graph_spec import NodeSpec
from instant_fold_ros.standins.process_runner import find_executable


def _digest(folder: Path) -> str:
    return hashlib.sha256(b"".join(p.read_bytes() for p in sorted(folder.iterdir()))).hexdigest()


def test_extract_with_mediapipe_on_a_bag_without_hands(tmp_path: Path, capsys) -> None:
    """The real tracker on a recording where nobody's hands appear: a clear error, the bag untouched."""
    bag = write_rgbd_bag(tmp_path / "bag", _frames(_script())[:12])
    before = _digest(bag)
    out = tmp_path / "demo.safetensors"
    assert extract_main([str(bag), "--out", str(out)]) == 1
    assert "no hand was detected in any frame" in capsys.readouterr().err
    assert not out.exists() and _digest(bag) == before
    assert extract_main([str(tmp_path / "missing"), "--out", str(out)]) == 1
    assert "does not exist" in capsys.readouterr().err


def test_correction_page_refuses_a_nonsense_file(tmp_path: Path, capsys) -> None:
    nonsense = tmp_path / "demo.safetensors"
    nonsense.write_text('{"keyframes": "edited by hand"}')
    assert correction_main([str(nonsense)]) == 1
    assert "is not a valid demonstration" in capsys.readouterr().err


def test_record_demo_cli_reports_an_existing_output(tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()
    exe = find_executable(NodeSpec("record", "instant_fold_demo", "record_demo"))
    out = subprocess.run([sys.executable, str(exe), str(tmp_path / "taken"), "--duration", "1"],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.returncode == 1, out.stdout + out.stderr
    assert "exists already: a recording is never overwritten" in out.stdout + out.stderr
