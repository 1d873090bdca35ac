"""One policy server node on untrained checkpoints: the rig of the policy server's fault tests."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from instant_fold_learning.testing import untrained_checkpoints
from instant_fold_ros.graph_spec import GraphSpec, NodeSpec


@dataclass(frozen=True)
class PolicyServerRig:
    graph: GraphSpec
    policy_dir: Path
    encoder_dir: Path


def policy_server_rig(tmp_path: Path, file_roots: list[Path], **parameters: Any) -> PolicyServerRig:
    """Untrained cpu-small checkpoints under `tmp_path`/models and the graph of one policy server
    on the CPU serving them, allowed to open files under `file_roots`, with `parameters` added
    (a parameter group as a dict, e.g. `fold={"observation_timeout_s": 1.0}`)."""
    policy_dir, encoder_dir = untrained_checkpoints(tmp_path / "models")
    params = {
        "policy_checkpoint": str(policy_dir),
        "encoder_checkpoint": str(encoder_dir),
        "device": "cpu",
        "file_roots": [str(root) for root in file_roots],
        **parameters,
    }
    path = tmp_path / "server.yaml"
    path.write_text(yaml.safe_dump({"policy_server": {"ros__parameters": params}}))
    node = NodeSpec("policy_server", "instant_fold_policy", "policy_server_node", parameters=(path,))
    return PolicyServerRig(GraphSpec("policy", (node,)), policy_dir, encoder_dir)
