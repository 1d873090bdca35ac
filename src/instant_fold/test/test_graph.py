"""Graph files: parsing, validation errors, argument building, and the launch files' wiring."""

from __future__ import annotations

from pathlib import Path

import pytest

from instant_fold.graph import find_graph, load_graph
from instant_fold_core.errors import ConfigError
from instant_fold_ros.bringup_share import launch_dir
from instant_fold_ros.standins.process_runner import RunnerError, find_executable


def _write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "graphs").mkdir(exist_ok=True)
    (tmp_path / "params.yaml").write_text("a:\n  ros__parameters: {}\n")
    path = tmp_path / "graphs" / "g.yaml"
    path.write_text(text)
    return path


def test_graph_check_graph_loads_with_resolved_parameter_files() -> None:
    graph = load_graph(find_graph("graph_check"))
    assert [n.name for n in graph.nodes] == ["graph_check_source", "graph_check_probe"]
    assert all(p.is_file() for n in graph.nodes for p in n.parameters)
    assert [n.required for n in graph.nodes] == [False, True]


def test_ros_arguments_name_params_and_remaps(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "nodes:\n  - {name: a, package: p, executable: e, parameters: [params.yaml], remappings: {x: y}, arguments: [--v]}\n",
    )
    (node,) = load_graph(path).nodes
    extra = tmp_path / "extra.yaml"
    assert node.ros_arguments((extra,)) == [
        "--v", "--ros-args", "-r", "__node:=a",
        "--params-file", str(tmp_path / "params.yaml"), "--params-file", str(extra),
        "-r", "x:=y",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nodes: []\n", "nodes: expected a non-empty list"),
        ("name: g\nnode: []\n", r"missing \['nodes'\]"),
        ("nodes:\n  - {name: a, package: p}\n", r"nodes\[0\]\.executable"),
        ("nodes:\n  - {name: a, package: p, executable: e, parameters: [missing.yaml]}\n", "no such file"),
        ("nodes:\n  - {name: a, package: p, executable: e, colour: red}\n", r"unknown keys \['nodes\[0\]\.colour'\]"),
        ("nodes:\n  - {name: a, package: p, executable: e}\n  - {name: a, package: p, executable: e}\n", "unique"),
        ("nodes: [\n", "cannot read graph"),
    ],
)
def test_malformed_graphs_are_rejected(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_graph(_write(tmp_path, text))


def test_unknown_graph_and_missing_executable() -> None:
    with pytest.raises(ConfigError, match="graph 'nope' not found"):
        find_graph("nope")
    node = load_graph(find_graph("graph_check")).nodes[0]
    with pytest.raises(RunnerError, match="no executable 'missing'"):
        find_executable(type(node)(name="x", package="instant_fold", executable="missing"))
    with pytest.raises(RunnerError, match="package 'not_a_package' not found"):
        find_executable(type(node)(name="x", package="not_a_package", executable="e"))


def test_every_launch_file_compiles_and_names_an_existing_graph() -> None:
    """launch_ros is not installable here; check each launch file at least wires a real graph
    (a graph file, or the fold graph builder, which test_fold_graph covers)."""
    launch_files = sorted(launch_dir().glob("*.launch.py"))
    assert {f.name for f in launch_files} >= {"fold.launch.py", "graph_check.launch.py"}
    for launch_file in launch_files:
        source = launch_file.read_text()
        compile(source, str(launch_file), "exec")
        graph_name = launch_file.name.removesuffix(".launch.py")
        if graph_name == "fold":
            assert "return fold_launch_description()" in source
            continue
        assert f'graph_launch_description("{graph_name}")' in source
        load_graph(find_graph(graph_name))


def test_record_demo_graph_starts_camera_and_recorder() -> None:
    graph = load_graph(find_graph("record_demo"))
    assert [(n.name, n.required) for n in graph.nodes] == [("camera", False), ("recorder", True)]
    assert all(find_executable(n).is_file() for n in graph.nodes)
