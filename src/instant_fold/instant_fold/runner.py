"""`python -m instant_fold.runner`: start a graph where `ros2 launch` is not installed.

The command-line face of `instant_fold_ros.standins.process_runner.ProcessRunner` (each node its
own process, one SIGINT each on Ctrl-C/SIGTERM/SIGHUP, the graph stopped when a `required` node
exits). With an apt-installed ROS, `ros2 launch instant_fold <graph>.launch.py` does the same.

Usage:  python -m instant_fold.runner <graph name or file> [--params-file extra.yaml ...]
        python -m instant_fold.runner fold robot:=sim demo:=demo.safetensors ...   (fold.launch.py's arguments)

Stopping: on Ctrl-C, SIGTERM or SIGHUP the fold graph's fold in flight is canceled first (its
client gets the CANCELED result and the arms hold; before, SIGTERM stopped the nodes under it and
the goal never got a result), one line says so, then the nodes are stopped. Exit status: the
graph's, else 0 after Ctrl-C (the documented way to stop a graph) and 128 + the signal's number
after another stop signal (SIGTERM 143, SIGHUP 129), as the shell reports a process it ended.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from instant_fold.fold_graph import FoldOptions, build_fold_graph, parameters_yaml, parse_launch_arguments
from instant_fold.graph import find_graph, load_graph
from instant_fold_core.errors import ConfigError
from instant_fold_ros.dds_profile import use_project_dds_profile
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


#: The fold graph's action, whose goals a stop cancels.
FOLD_ACTION = "policy/execute_fold"
#: Seconds to find the fold server (DDS discovery of a fresh participant) and for the fold to end.
DISCOVERY_TIMEOUT_S = 10.0
CANCEL_TIMEOUT_S = 15.0


def cancel_folds(discovery_timeout_s: float = DISCOVERY_TIMEOUT_S, cancel_timeout_s: float = CANCEL_TIMEOUT_S) -> str:
    """Cancel every goal of the fold action in flight and wait until each has ended (its client
    then has its result); return what happened, as words for one line. A participant of its own
    on the graph's domain (ROS_DOMAIN_ID, as the nodes), without rclpy's signal handlers."""
    import rclpy
    from action_msgs.msg import GoalStatus, GoalStatusArray
    from action_msgs.srv import CancelGoal
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import QoSDurabilityPolicy, QoSProfile, QoSReliabilityPolicy
    from rclpy.signals import SignalHandlerOptions

    ended = {GoalStatus.STATUS_SUCCEEDED, GoalStatus.STATUS_CANCELED, GoalStatus.STATUS_ABORTED}
    statuses: dict[bytes, int] = {}
    context = rclpy.Context()
    use_project_dds_profile()
    rclpy.init(context=context, signal_handler_options=SignalHandlerOptions.NO)
    try:
        node = rclpy.create_node("runner_stop", context=context)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)

        def spin_until(condition, timeout_s: float) -> bool:
            deadline = time.monotonic() + timeout_s
            while not condition() and time.monotonic() < deadline:
                executor.spin_once(timeout_sec=0.05)
            return bool(condition())

        def on_status(msg: GoalStatusArray) -> None:
            statuses.update((bytes(s.goal_info.goal_id.uuid), s.status) for s in msg.status_list)

        status_qos = QoSProfile(
            depth=1, reliability=QoSReliabilityPolicy.RELIABLE, durability=QoSDurabilityPolicy.TRANSIENT_LOCAL
        )
        node.create_subscription(GoalStatusArray, f"{FOLD_ACTION}/_action/status", on_status, status_qos)
        client: Any = node.create_client(CancelGoal, f"{FOLD_ACTION}/_action/cancel_goal")
        if not spin_until(client.service_is_ready, discovery_timeout_s):
            return f"no fold server found within {discovery_timeout_s:g} s"
        answer = client.call_async(CancelGoal.Request())  # no goal id, no stamp: every goal
        response = answer.result() if spin_until(answer.done, cancel_timeout_s) else None
        if response is None:
            return f"the fold server did not answer the cancel within {cancel_timeout_s:g} s"
        goals = [bytes(g.goal_id.uuid) for g in response.goals_canceling]
        if not goals:
            return "no fold in flight"
        if not spin_until(lambda: all(statuses.get(g) in ended for g in goals), cancel_timeout_s):
            return f"canceled the fold in flight, which did not end within {cancel_timeout_s:g} s"
        return "canceled the fold in flight (its client has the result)"
    finally:
        rclpy.try_shutdown(context=context)


def stop_code(signum: int) -> int:
    """Exit status after a stop signal when the graph itself exited cleanly (module docstring)."""
    return 0 if signum == signal.SIGINT else 128 + signum


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
        stops: list[int] = []

        def stop_graph(signum: int) -> None:
            try:
                done = cancel_folds() if args.graph == "fold" else ""
            except Exception as exc:  # the graph is stopped all the same; the line says what failed
                done = f"no fold canceled ({type(exc).__name__}: {exc})"
            # One write, newline included: print() writes the text and the newline separately, and a
            # node's line forwarded by another thread at that moment landed between them.
            line = f"[runner] {signal.Signals(signum).name}: {done + '; ' if done else ''}stopping the graph\n"
            sys.stdout.write(line)
            sys.stdout.flush()
            runner.request_stop()

        def on_signal(signum: int, _frame: object) -> None:
            if stops:  # a second signal: stop now
                runner.request_stop()
                return
            stops.append(signum)  # the graph is stopped from a thread: cancelling takes DDS round trips
            threading.Thread(target=stop_graph, args=(signum,), daemon=True).start()

        for sig in STOP_SIGNALS:
            signal.signal(sig, on_signal)
        code = runner.wait()
        return code if code or not stops else stop_code(stops[0])


if __name__ == "__main__":
    sys.exit(main())
