"""The controller node over DDS on two loopback Dobot controllers, driven by a stand-in policy.

The fault tests of the controller run the same rig: `config/robots/dobot.yaml` pointed at two
protocol-faithful loopback Dobots, the controller node as a process of its own, and the
`command_probe` process playing a script of chunks and service calls against it.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from instant_fold_control.testing.dobot_server import LoopbackDobotServer
from instant_fold_ros.bringup_share import config_dir
from instant_fold_ros.graph_spec import GraphSpec, NodeSpec
from instant_fold_ros.standins.process_runner import ProcessRunner

ROBOT_CONFIG = config_dir() / "robots" / "dobot.yaml"
#: Both arms' start pose in their base frames (mm, deg): (-0.2, 0, 0.8) and (0.2, 0, 0.8) in the camera frame.
START_POSE = [400.0, 0.0, 150.0, 180.0, 0.0, 0.0]


@dataclass(frozen=True)
class ProbeRun:
    """What a scripted run left: the probe's exit code and output, its report, the node's log and exit code."""

    probe_code: int
    probe_output: str
    report: dict[str, Any] | None
    log: str
    node_code: int

    def describe(self) -> str:
        """Everything, for an assertion message."""
        return f"probe exit {self.probe_code}, node exit {self.node_code}\n{self.probe_output}\n{self.log}"


def run_script(
    tmp_path: Path, env: dict[str, str], script: list[dict[str, Any]], probe_timeout_s: float = 60.0
) -> ProbeRun:
    """Start the controller on two loopback Dobots, play `script` with the command probe, stop."""
    robot = yaml.safe_load(ROBOT_CONFIG.read_text())
    script_path, report_path = tmp_path / "script.json", tmp_path / "report.json"
    script_path.write_text(json.dumps(script))
    with LoopbackDobotServer(initial_pose=START_POSE) as left, LoopbackDobotServer(initial_pose=START_POSE) as right:
        for arm, server in (("left", left), ("right", right)):
            robot["arms"][arm]["driver"] = server.driver_params() | {"connect_timeout_s": 1.0}
        (tmp_path / "robot.yaml").write_text(yaml.safe_dump(robot))
        params = tmp_path / "control.yaml"
        params.write_text(
            yaml.safe_dump({"controller_node": {"ros__parameters": {"robot_config": str(tmp_path / "robot.yaml")}}})
        )
        node = NodeSpec("controller_node", "instant_fold_control", "controller_node", parameters=(params,))
        log = io.StringIO()
        runner = ProcessRunner(GraphSpec("control", (node,)), env=env, output=log)
        runner.start()
        try:
            probe = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "instant_fold_control.testing.command_probe",
                    str(script_path),
                    str(report_path),
                    "--ros-args",
                    "-p",
                    f"timeout_s:={probe_timeout_s}",
                ],
                env=env,
                capture_output=True,
                text=True,
                timeout=probe_timeout_s + 30.0,
            )
        finally:
            code = runner.shutdown()
    report = json.loads(report_path.read_text()) if report_path.is_file() else None
    return ProbeRun(probe.returncode, probe.stdout + probe.stderr, report, log.getvalue(), code)
