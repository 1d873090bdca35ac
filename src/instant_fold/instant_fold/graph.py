"""Node-graph descriptions shared by the launch files and the process runner.

A graph file lists nodes: package, executable, node name, ROS parameter files, remappings,
extra arguments, and whether the graph stops when the node exits. Relative parameter-file
paths are resolved against the graph file's own config folder; graphs given by name are looked up
in `instant_fold_ros.bringup_share.config_dir()` (the installed share/instant_fold/config/).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from instant_fold_core.config import check_keys, read_yaml
from instant_fold_core.errors import ConfigError
from instant_fold_ros import bringup_share
from instant_fold_ros.graph_spec import GraphSpec, NodeSpec

GRAPHS_DIR_NAME = "graphs"


def find_graph(name_or_path: str) -> Path:
    """Resolve a graph given as a file path or as a name under config/graphs/."""
    candidate = Path(name_or_path)
    if candidate.suffix in {".yaml", ".yml"} and candidate.is_file():
        return candidate.resolve()
    folder = bringup_share.config_dir() / GRAPHS_DIR_NAME
    path = folder / f"{name_or_path}.yaml"
    if path.is_file():
        return path.resolve()
    raise ConfigError(f"graph '{name_or_path}' not found in {folder}")


def _node_from_dict(index: int, entry: Any, config_dir: Path) -> NodeSpec:
    where = f"nodes[{index}]"
    check_keys(
        where, entry, optional={"name", "package", "executable", "parameters", "remappings", "arguments", "required"}
    )
    for key in ("name", "package", "executable"):
        if not isinstance(entry.get(key), str) or not entry[key]:
            raise ConfigError(f"{where}.{key}: required string")
    parameters = []
    for params in entry.get("parameters", []):
        path = Path(params) if Path(params).is_absolute() else config_dir / params
        if not path.is_file():
            raise ConfigError(f"{where}.parameters: no such file {path}")
        parameters.append(path)
    remappings = entry.get("remappings", {})
    if not isinstance(remappings, dict):
        raise ConfigError(f"{where}.remappings: expected a mapping of topic -> topic")
    return NodeSpec(
        name=entry["name"],
        package=entry["package"],
        executable=entry["executable"],
        parameters=tuple(parameters),
        remappings=tuple((str(k), str(v)) for k, v in remappings.items()),
        arguments=tuple(str(a) for a in entry.get("arguments", [])),
        required=bool(entry.get("required", False)),
    )


def load_graph(path: str | Path) -> GraphSpec:
    """Load and validate a graph file."""
    path = Path(path)
    data = read_yaml(path, "graph")
    try:
        check_keys("", data, {"nodes"}, {"name"})
        if not isinstance(data["nodes"], list) or not data["nodes"]:
            raise ConfigError("nodes: expected a non-empty list")
        config_dir = path.resolve().parent.parent
        nodes = tuple(_node_from_dict(i, entry, config_dir) for i, entry in enumerate(data["nodes"]))
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    names = [n.name for n in nodes]
    if len(set(names)) != len(names):
        raise ConfigError(f"{path}: node names must be unique, got {names}")
    return GraphSpec(name=str(data.get("name", path.stem)), nodes=nodes)
