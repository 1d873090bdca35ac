"""`python -m instant_fold.runner`: start a graph where `ros2 launch` is not installed.

The command-line face of `instant_fold_ros.standins.process_runner.ProcessRunner` (each node its
own process, one SIGINT each on Ctrl-C/SIGTERM/SIGHUP, the graph stopped when a `required` node
exits). With an apt-installed ROS, `ros2 launch instant_fold <graph>.launch.py` does the same.

Usage:  python -m instant_fold.runner <graph name or file> [--params-file extra.yaml ...]
        python -m instant_fold.runner fold robot:=sim demo:=demo.safetensors ...   (fold.launch.py's arguments)
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from instant_fold.fold_graph import FoldOptions, build_fold_graph, parameters_yaml, parse_launch_arguments
from instant_fold.graph import find_graph, load_graph
from instant_fold_core.errors import ConfigError
from instant_fold_ros.graph_spec import GraphSpec
from instant_fold_ros.standins.process_runner import STOP_SIGNALS, ProcessRunner, RunnerError


def load_graph_with_arguments(name: str, arguments: Sequence[str], params_dir: Path) -> tuple[GraphSpec, list[Path]]:
    """A graph file, or the fold graph built from `name:=value` arguments (its parameter file is
    written to `params_dir`)."""
    if name == "fold":
        options = FoldOptions.from_arguments(parse_launch_arguments(list(arguments)))
        graph, params = build_fold_graph(options)
        path = params_dir / "fold_params.yaml"
        path.write_text(parameters_yaml(params))
        return graph, [path]
    if arguments:
        raise ConfigError(f"graph '{name}' takes no name:=value arguments (got {list(arguments)})")
    return load_graph(find_graph(name)), []


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("graph", help="'fold', or a graph name under config/graphs/ or a graph YAML file")
    parser.add_argument("arguments", nargs="*", help="name:=value arguments of the fold graph (as fold.launch.py)")
    parser.add_argument("--params-file", action="append", default=[], type=Path, help="extra ROS parameter file")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="instant_fold_") as tmp:
        try:
            graph, generated = load_graph_with_arguments(args.graph, args.arguments, Path(tmp))
            runner = ProcessRunner(graph, extra_parameters=[*generated, *args.params_file])
            runner.start()
        except (ConfigError, RunnerError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        for sig in STOP_SIGNALS:
            signal.signal(sig, lambda *_: runner.request_stop())
        return runner.wait()


if __name__ == "__main__":
    sys.exit(main())
