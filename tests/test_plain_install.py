"""A plain `colcon build` (no `--symlink-install`) of the bringup finds its files where it is installed.

The bringup is built alone into a temporary install (copies of launch/, config/, models/, its
modules in site-packages; the other packages come from the workspace) and asked, from a folder
outside the repository, where its graphs, launch files, robot configs and models are: every answer
must lie in that install, never in the checkout. The whole workspace built this way is checked by
hand as in docs/architecture.md (Installed files).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

PROBE = """
import json
import instant_fold
from instant_fold.fold_graph import FoldOptions, build_fold_graph
from instant_fold.graph import find_graph
from instant_fold_control.config import find_robot_config
from instant_fold_ros import bringup_share

graph, _ = build_fold_graph(FoldOptions(robot="sim"))
print(json.dumps({
    "module": instant_fold.__file__,
    "graph": str(find_graph("graph_check")),
    "launch": str(bringup_share.launch_dir() / "fold.launch.py"),
    "robot": str(find_robot_config("dobot")),
    "policy": str(bringup_share.models_dir() / "policy" / "model.safetensors"),
    "parameters": [str(p) for node in graph.nodes for p in node.parameters],
}))
"""


@pytest.mark.skipif(shutil.which("colcon") is None, reason="colcon is not installed")
def test_a_plain_install_of_the_bringup_finds_its_files_in_its_share_folder(tmp_path: Path) -> None:
    build = [
        "colcon", "--log-base", str(tmp_path / "log"), "build", "--base-paths", str(SRC),
        "--packages-select", "instant_fold", "--build-base", str(tmp_path / "build"),
        "--install-base", str(tmp_path / "install"), "--event-handlers", "console_cohesion-", "status-",
    ]  # fmt: skip
    run = subprocess.run(build, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    install = tmp_path / "install"
    probe = f"source \"{install}/local_setup.bash\" && python -c '{PROBE}'"
    run = subprocess.run(["bash", "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    found = json.loads(run.stdout.strip().splitlines()[-1])
    paths = [found[key] for key in ("module", "graph", "launch", "robot", "policy")] + found["parameters"]
    for path in map(Path, paths):
        assert path.is_relative_to(install), f"{path} is not in the plain install {install}"
        assert path.is_file() and not path.is_symlink(), path
