"""The Franka driver up to the franky boundary: real franky objects and connection attempts, no robot."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from instant_fold_control.drivers.base import DriverConnectionError, DriverError
from instant_fold_control.drivers.franka import FrankaDriver, FrankaParams, cartesian_motion, import_franky


def test_missing_franky_gives_an_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "franky", None)  # makes `import franky` raise ImportError
    with pytest.raises(DriverError, match="pip install franky-control"):
        FrankaDriver("left", FrankaParams(host="127.0.0.1")).connect()


def test_motion_is_an_absolute_cartesian_target_at_fixed_orientation() -> None:
    franky = pytest.importorskip("franky", reason="franky-control is not installed (see docs/control.md)")
    down = np.array([1.0, 0.0, 0.0, 0.0])  # x, y, z, w: gripper pointing down
    motion = cartesian_motion(franky, np.array([0.45, -0.1, 0.2]), down, 0.15)
    assert isinstance(motion, franky.CartesianMotion)
    assert motion.reference_type == franky.ReferenceType.Absolute
    pose = motion.target.pose.end_effector_pose
    assert np.allclose(np.ravel(pose.translation), [0.45, -0.1, 0.2])
    q = np.ravel(pose.quaternion)
    assert np.allclose(q, down) or np.allclose(q, -down)
    # franky's Affine agrees with our quaternion convention (x, y, z, w)
    from instant_fold_control.transforms import quaternion_to_matrix

    assert np.allclose(pose.matrix[:3, :3], quaternion_to_matrix(down))


def test_unreachable_robot_gives_a_clear_error() -> None:
    pytest.importorskip("franky", reason="franky-control is not installed (see docs/control.md)")
    driver = FrankaDriver("right", FrankaParams(host="127.0.0.1"))
    with pytest.raises(
        DriverConnectionError, match=r"right arm \(Franka 127.0.0.1\): cannot reach the FCI at 127.0.0.1"
    ):
        driver.connect()
    with pytest.raises(DriverConnectionError, match="not connected"):
        driver.read_state()
    with pytest.raises(DriverError, match="refusing to send"):
        driver.command_cartesian(np.array([np.inf, 0, 0]))
    driver.close()


def test_params_are_validated() -> None:
    with pytest.raises(DriverError, match=r"arms\.left\.driver\.orientation: expected a unit quaternion"):
        FrankaParams.from_mapping("left", {"host": "x", "orientation": [1, 1, 0, 0]})
    with pytest.raises(DriverError, match="relative_dynamics_factor"):
        FrankaParams.from_mapping("left", {"host": "x", "relative_dynamics_factor": 2})
    params = FrankaParams.from_mapping("left", {"host": "x", "orientation": [0, 0, 0, 1]})
    assert params.orientation == (0.0, 0.0, 0.0, 1.0)


def test_import_guard_returns_the_module_when_installed() -> None:
    franky = pytest.importorskip("franky", reason="franky-control is not installed (see docs/control.md)")
    assert import_franky() is franky
