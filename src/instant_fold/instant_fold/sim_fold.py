"""The main job: fold a simulated garment from one demonstration, sim in the loop, and report.

Starts the fold graph with the simulator as camera and robot (`fold.launch.py robot:=sim`, as
separate processes through the process runner), sends one ExecuteFold goal with the
demonstration (the sim node tells the policy server where the simulated arms rest, on the latched
`arms/home` topic: the fold ends there), and when the fold ends asks the sim node to score it
against the oracle program run from the same start state. Writes to
`--out`: `rollout.mp4`, `fold_strip.png` (the demonstration's keyframes above the keyframes the
policy produced), `metrics.json`, and the graph's log; with `--rrd`, `fold.rrd`, a Rerun recording
fed from the graph's topics (docs/rerun.md), which `--view` then serves in Rerun's web viewer on
127.0.0.1 (`--view live`: the viewer starts first and the recording streams to it while the fold
runs). One run holds `--out` at a time (a second is refused, naming the first's pid), and
every node is supervised: one that exits ends the run at once, named, whatever the job was
waiting for.

python -m instant_fold.sim_fold [--demo FILE] [--garment proc:1] [--seed N] [--out outputs/sim_fold] [--rrd | --view [live]]
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from instant_fold.fold_graph import SIM_GRASPS, FoldOptions, build_fold_graph, parameters_yaml
from instant_fold_core.compute_threads import machine_record, pin_compute_threads
from instant_fold_core.contracts import FoldOutcome, FoldPhase
from instant_fold_core.errors import ExternalError
from instant_fold_core.fold_recording import FoldRecording
from instant_fold_core.output_dir import OutputDirError, claimed_output_dir, make_output_dir
from instant_fold_ros.bringup_share import models_dir
from instant_fold_ros.dds_profile import use_project_dds_profile
from instant_fold_ros.graph_spec import GraphSpec
from instant_fold_ros.node_main import ExecutorThread
from instant_fold_ros.recording_tap import RecordingTap
from instant_fold_ros.standins.process_runner import ProcessRunner

if TYPE_CHECKING:
    from rclpy.subscription import Subscription

    from instant_fold_core.rerun_web import WebViewer

DEFAULT_DEMO = "demos/proc_00001_sleeves_down__bottom_up.safetensors"
#: The fold of the bundled demonstration (mode, variant).
DEFAULT_FOLD = ("sleeves_down__bottom_up", "S")


class SimFoldError(ExternalError):
    """The graph did not come up or answer in time; the message says which part."""


def _stats(values: list[float]) -> dict[str, float | int]:
    if not values:
        return {"count": 0}
    a = np.asarray(values)
    return {
        "count": int(a.size),
        "median_ms": float(np.median(a)),
        "p95_ms": float(np.percentile(a, 95)),
        "max_ms": float(a.max()),
    }


@dataclass
class LatencyProbe:
    """Wall time from a camera frame's first arrival to its cloth tokens and to the chunk answering it.

    Arrivals are seen by this observer (over DDS like every node); frames count once `armed` (the
    fold started), so start-up waiting is not counted. A query needs the tokens and an arm state
    no older than them (`FoldLoop`), so tokens -> command splits into the wait for that state
    (`tokens_to_state`: under a simulator, its answer to the step that took the frame) and the
    policy's share (`ready_to_command`: from the later of the two arrivals to the chunk's).
    """

    frames: dict[int, float] = field(default_factory=dict)
    tokens_ms: list[float] = field(default_factory=list)
    command_ms: list[float] = field(default_factory=list)
    policy_ms: list[float] = field(default_factory=list)
    ready_ms: list[float] = field(default_factory=list)
    state_wait_ms: list[float] = field(default_factory=list)
    queries: list[dict[str, float]] = field(default_factory=list)  # each chunk's: stamp_s + latencies
    _tokens: dict[int, float] = field(default_factory=dict)
    _state_stamps: list[int] = field(default_factory=list)  # increasing: each new stamp once
    _state_arrivals: list[float] = field(default_factory=list)
    armed: bool = False

    @staticmethod
    def key(stamp) -> int:
        from rclpy.time import Time

        return Time.from_msg(stamp).nanoseconds

    def on_frame(self, msg) -> None:
        if self.armed:
            self.frames.setdefault(self.key(msg.header.stamp), time.monotonic())

    def on_tokens(self, msg) -> None:
        key = self.key(msg.header.stamp)
        if key in self.frames and key not in self._tokens:
            self._tokens[key] = time.monotonic()
            self.tokens_ms.append((self._tokens[key] - self.frames[key]) * 1000.0)

    def on_state(self, msg) -> None:
        key = self.key(msg.header.stamp)
        if self.armed and (not self._state_stamps or key > self._state_stamps[-1]):
            self._state_stamps.append(key)
            self._state_arrivals.append(time.monotonic())

    def _state_arrival(self, key: int) -> float | None:
        """When the first arm state no older than stamp `key` arrived (None: none yet)."""
        i = bisect.bisect_left(self._state_stamps, key)
        return self._state_arrivals[i] if i < len(self._state_stamps) else None

    def on_command(self, msg) -> None:
        self.command_latency(msg)

    def command_latency(self, msg) -> dict[str, float]:
        """Count the chunk's latencies and return them (name -> ms), for a recording of the fold."""
        key = self.key(msg.header.stamp)
        now = time.monotonic()
        latency = {}
        if key in self.frames:
            latency["frame_to_command"] = (now - self.frames[key]) * 1000.0
            self.command_ms.append(latency["frame_to_command"])
        if key in self._tokens:
            latency["tokens_to_command"] = (now - self._tokens[key]) * 1000.0
            self.policy_ms.append(latency["tokens_to_command"])
            if key in self.frames:
                latency["frame_to_tokens"] = (self._tokens[key] - self.frames[key]) * 1000.0
            state = self._state_arrival(key)
            if state is not None:
                latency["tokens_to_state"] = max(0.0, state - self._tokens[key]) * 1000.0
                latency["ready_to_command"] = (now - max(state, self._tokens[key])) * 1000.0
                self.state_wait_ms.append(latency["tokens_to_state"])
                self.ready_ms.append(latency["ready_to_command"])
        if latency:
            self.queries.append({"stamp_s": key / 1e9, **latency})
        return latency

    def summary(self) -> dict[str, dict[str, float | int]]:
        return {
            "frame_to_tokens": _stats(self.tokens_ms),
            "tokens_to_command": _stats(self.policy_ms),
            "tokens_to_state": _stats(self.state_wait_ms),
            "ready_to_command": _stats(self.ready_ms),
            "frame_to_command": _stats(self.command_ms),
        }


def fold_strip(demo_path: Path, rollout_strip: Path, out: Path) -> Path:
    """The demonstration's keyframes (top) above the rollout's keyframe strip (bottom).

    A demonstration that cannot be read (the one the policy server refused, which aborted the
    fold) gets a one-line panel saying why instead: the fold's report is still written.
    """
    from PIL import Image, ImageDraw

    from instant_fold_core.demonstration import DemonstrationError, load_demonstration

    bottom = Image.open(rollout_strip).convert("RGB")
    try:
        demo = load_demonstration(demo_path)
    except DemonstrationError as exc:
        panels = [Image.new("RGB", (bottom.width, 14))]
        labels = [f"demonstration unreadable: {exc}"]
    else:
        panels = [Image.fromarray(c).convert("RGB") for c in demo.color]
        labels = [f"demonstration: {demo.name}", *(f"keyframe {i}" for i in range(1, len(panels)))]
    top = Image.new("RGB", (sum(p.width for p in panels), panels[0].height))
    x = 0
    for p, label in zip(panels, labels, strict=True):
        draw = ImageDraw.Draw(p)
        draw.rectangle([0, 0, p.width, 12], fill=(0, 0, 0))
        draw.text((2, 0), label, fill=(255, 255, 255))
        top.paste(p, (x, 0))
        x += p.width
    strip = Image.new("RGB", (max(top.width, bottom.width), top.height + bottom.height), (255, 255, 255))
    strip.paste(top, (0, 0))
    strip.paste(bottom, (0, top.height))
    strip.save(out)
    return out


def same_init_metrics(args: argparse.Namespace, sim_metrics: dict) -> dict:
    """The paper's per-rollout metrics of this fold against the oracle bank of its start state
    (docs/evaluation.md): context classified, Geom., fold rate, C-SR@95 success."""
    from instant_fold_core.fold_record import FoldRecord
    from instant_fold_evaluation.oracle_bank import Context, OracleBank, OracleBankError

    try:
        bank = OracleBank.open(args.bank)
        family = bank.family(args.garment, args.seed)
        context = Context.parse(f"{args.mode}/{args.variant}")
        if context.label not in family.entries:
            raise OracleBankError(f"{args.bank} has no oracle executions of {context.label} from this start")
        score = family.score(sim_metrics["garment"], context.label, FoldRecord.from_json(sim_metrics["record"]))
    except (OracleBankError, ValueError, KeyError) as exc:  # MetricsError is a ValueError
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {
        "bank": str(args.bank),
        "context": score.context,
        "predicted_context": score.predicted,
        "context_correct": score.context_correct,
        "geom": score.geom,
        "fold_rate": score.fold_rate,
        "quality": score.quality,
        "envelope": family.references[context.label].envelope,
        "csr95_success": score.success,
    }


#: Largest step limit the ExecuteFold goal carries (`uint32 max_steps`).
MAX_GOAL_STEPS = 2**32 - 1
#: Where `--view` serves the recording: this machine only (the viewer has no authentication).
VIEW_HOST = "127.0.0.1"
#: Exit code of a fold that was aborted or canceled (the graph ran, the fold did not).
EXIT_FOLD_FAILED = 3
#: Exit code of a simulator this machine cannot run (no Isaac Lab environment, no such device),
#: told before any node starts.
EXIT_SIM_UNAVAILABLE = 2


def fold_outcome(status: int, outcome: int) -> str:
    """The fold's outcome as the goal's status and its result agree on it.

    Only a goal the server marked succeeded can have completed: an aborted goal whose result says
    "completed" (rclpy's default result after an error in the server) was aborted.
    """
    from action_msgs.msg import GoalStatus

    try:
        name = FoldOutcome(outcome).name.lower()
    except ValueError:  # an outcome this build does not know is no completed fold
        name = "aborted"
    if name == "completed" and status != GoalStatus.STATUS_SUCCEEDED:
        return "aborted"
    return name


#: Largest ROS domain id (Fast DDS derives the domain's UDP ports from it; higher ones overflow).
MAX_ROS_DOMAIN_ID = 232
#: How often a wait checks that every node of the graph still runs (s).
SUPERVISE_POLL_S = 0.5


def graph_environment() -> AbstractContextManager[dict[str, str]]:
    """The environment the graph runs in: the user's ROS_DOMAIN_ID when one is set, else a domain
    reserved for this run alone. On a shared default domain a second run, or a graph left over
    from an earlier one, answers for this run's nodes ("graph ready" at once, then the fold goal
    rejected by the other graph's policy server)."""
    from instant_fold_ros.domains import isolated_ros_env

    if domain := os.environ.get("ROS_DOMAIN_ID"):
        if not (domain.isdigit() and int(domain) <= MAX_ROS_DOMAIN_ID):
            raise SimFoldError(
                f"ROS_DOMAIN_ID={domain!r}: expected an integer 0..{MAX_ROS_DOMAIN_ID} "
                "(or unset it: the run then reserves a domain of its own)"
            )
        return nullcontext(dict(os.environ))
    return isolated_ros_env()


def _supervised(graph: GraphSpec) -> GraphSpec:
    """`graph` with every node required: in the main job no node can go without the fold going with
    it (a dead policy server never answers the goal, a dead sim node never advances time)."""
    return replace(graph, nodes=tuple(replace(n, required=True) for n in graph.nodes))


def _exited(runner: ProcessRunner, log: Path) -> str | None:
    """What ended the graph: the first of its nodes that has exited, named, or None while all run."""
    if (exited := runner.exited_required()) is None:
        return None
    return f"node '{exited[0]}' exited with code {exited[1]} (see {log})"


def _unready(fold: Any, step: Any, listening: list[Subscription]) -> list[str]:
    """What the fold still waits for: `policy/execute_fold`, `sim/step`, and the topics among
    `listening` that no publisher is matched to yet (empty: ready)."""
    waiting = [
        name
        for name, ready in (("policy/execute_fold", fold.server_is_ready()), ("sim/step", step.service_is_ready()))
        if not ready
    ]
    return waiting + [s.topic_name for s in listening if s.get_publisher_count() == 0]


def _wait(future, timeout: float, what: str, runner: ProcessRunner, log: Path):
    """The future's result, waiting at most `timeout` s while every node runs: a node that dies
    (a crash, SIGKILL) ends the wait at once, naming it, instead of leaving the whole timeout to
    run out on a graph that can no longer answer."""
    done = threading.Event()
    future.add_done_callback(lambda _: done.set())
    deadline = time.monotonic() + timeout
    while not done.wait(min(SUPERVISE_POLL_S, max(0.0, deadline - time.monotonic()))):
        dead = _exited(runner, log)
        if dead is not None or time.monotonic() >= deadline:
            future.cancel()
            raise SimFoldError(f"{what}: {dead or f'no answer within {timeout:g} s'}")
    return future.result()


def run_fold(args: argparse.Namespace) -> dict:
    import rclpy
    from rclpy.action import ActionClient
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.signals import SignalHandlerOptions
    from sensor_msgs.msg import Image

    from instant_fold_interfaces.action import ExecuteFold
    from instant_fold_interfaces.msg import ActionChunk, ClothTokens, DualArmState
    from instant_fold_interfaces.srv import EvaluateFold, SimStep
    from instant_fold_ros.qos import COMMAND_QOS, OBSERVATION_QOS

    out = make_output_dir(args.out).resolve()
    options = FoldOptions(
        robot="sim",
        demo="",  # sent with the goal instead (the server encodes it once per goal)
        checkpoint=args.checkpoint,
        encoder=args.encoder,
        garment=args.garment,
        seed=str(args.seed),
        mode=args.mode,
        variant=args.variant,
        max_steps=str(args.max_steps),
        sim_backend=args.sim_backend,
        sim_device=args.sim_device,
        sim_grasp=args.sim_grasp,
    )
    demo = Path(args.demo).resolve()
    if not demo.is_file():
        raise SimFoldError(f"demonstration {demo} not found")
    resolved = options.resolved()
    for what, directory in (("policy", resolved.checkpoint), ("encoder", resolved.encoder)):
        if not (Path(directory) / "config.json").is_file():
            raise SimFoldError(f"{what} checkpoint {directory} not found (no config.json)")
    graph, params = build_fold_graph(options)
    graph = _supervised(graph)
    # The only paths this run's requests name: the demonstration (goal) and the output folder.
    params["policy_server"]["file_roots"] = [str(demo.parent)]
    params["sim"]["file_roots"] = [str(out)]
    params_file = out / "fold_params.yaml"
    params_file.write_text(parameters_yaml(params))
    started = time.monotonic()
    stream_to = getattr(args, "stream_to", None)  # --view live: the viewer's proxy (main)
    recording = open_recording(out / "fold.rrd", demo, stream_to) if args.rrd else None
    tap = RecordingTap(recording) if recording is not None else None
    # Closed however the run ends: a failed fold's recording is its best account.
    with recording or nullcontext(), graph_environment() as env, open(out / "graph.log", "w") as log:
        domain = int(env["ROS_DOMAIN_ID"])
        runner = ProcessRunner(graph, extra_parameters=[params_file], env=env, output=log)
        runner.start()
        # rclpy's own handlers would take SIGINT/SIGTERM and only stop spinning, leaving this
        # thread waiting for a fold result that never comes; `main` turns them into an exception.
        use_project_dds_profile()
        rclpy.init(domain_id=domain, signal_handler_options=SignalHandlerOptions.NO)
        node = rclpy.create_node("sim_fold")
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        spinner = ExecutorThread(executor, "sim_fold")
        spinner.start()
        try:
            probe = LatencyProbe()
            listening = [node.create_subscription(DualArmState, "arms/state", probe.on_state, OBSERVATION_QOS)]
            if tap is None:
                listening += [
                    node.create_subscription(Image, "camera/color", probe.on_frame, OBSERVATION_QOS),
                    node.create_subscription(ClothTokens, "cloth/tokens", probe.on_tokens, OBSERVATION_QOS),
                    node.create_subscription(ActionChunk, "arms/command", probe.on_command, COMMAND_QOS),
                ]
            else:  # the same subscriptions feed the recording; the arm states come with the feedback
                also = {"camera/color": probe.on_frame, "cloth/tokens": probe.on_tokens}
                listening += tap.attach(node, latency=probe.command_latency, also=also, arm_state=False)
            fold: Any = ActionClient(node, ExecuteFold, "policy/execute_fold")
            step: Any = node.create_client(SimStep, "sim/step")
            evaluate: Any = node.create_client(EvaluateFold, "sim/evaluate")
            print(
                f"[sim_fold] starting the graph ({', '.join(n.name for n in graph.nodes)}) on ROS domain {domain}; "
                f"log: {out / 'graph.log'}"
            )
            deadline = time.monotonic() + args.startup_timeout
            # Ready: the fold's action and the simulator's step answer, and every topic this run
            # listens to (latency probe, recording) is matched to its publisher. A fold of a few
            # queries lasts about a second, less than discovery can take to reach the node that
            # started last: unmatched, the recording of a fresh-clone CI run missed all its tokens.
            # (Matched on this side; the publisher's side matches a moment later, so a message
            # sent in between can still be missed: rare, and the recording's checks allow it.)
            while unready := _unready(fold, step, listening):
                if (dead := _exited(runner, out / "graph.log")) is not None:
                    raise SimFoldError(dead)
                if time.monotonic() > deadline:
                    raise SimFoldError(
                        f"the fold graph did not come up within {args.startup_timeout:g} s "
                        f"(waiting for {', '.join(unready)}; see graph.log)"
                    )
                time.sleep(0.2)
            ready_s = time.monotonic() - started
            print(f"[sim_fold] graph ready in {ready_s:.1f} s; folding with {demo}")
            goal = ExecuteFold.Goal(demonstration_path=str(demo), max_steps=args.max_steps)

            def feedback(msg) -> None:
                f = msg.feedback
                if tap is not None and f.phase != FoldPhase.LOADING_DEMONSTRATION:  # a query's: its arm state
                    tap.on_state(f.state)
                if f.step % 10 == 0:
                    print(f"[sim_fold] query {f.step}: phase {f.phase}, gripper events {f.events_executed}", flush=True)

            probe.armed = True
            supervision = (runner, out / "graph.log")
            handle = _wait(
                fold.send_goal_async(goal, feedback_callback=feedback), 60, "execute_fold goal", *supervision
            )
            if not handle.accepted:
                raise SimFoldError("the policy server rejected the fold goal")
            answer = _wait(handle.get_result_async(), args.fold_timeout, "execute_fold result", *supervision)
            fold_result, outcome = answer.result, fold_outcome(answer.status, answer.result.outcome)
            print(f"[sim_fold] fold {outcome}: {fold_result.message} ({fold_result.steps} queries)")
            sim_metrics: dict = {}
            if args.evaluate:
                request = EvaluateFold.Request(output_dir=str(out))
                answer = _wait(evaluate.call_async(request), 600, "sim/evaluate", *supervision)
                if not answer.success:
                    raise SimFoldError(f"evaluation failed: {answer.message}")
                sim_metrics = json.loads(answer.metrics_json)
            if recording is not None:
                finish_recording(
                    recording, outcome, f"{fold_result.message} ({fold_result.steps} queries)", sim_metrics
                )
        finally:
            spinner.stop(node)
            rclpy.try_shutdown()
            code = runner.shutdown()
    outputs = {}
    paper_metrics = same_init_metrics(args, sim_metrics) if sim_metrics else {}
    if sim_metrics:
        strip = fold_strip(demo, Path(sim_metrics["rollout_keyframes"]), out / "fold_strip.png")
        outputs = {"video": sim_metrics["video"], "strip": str(strip)}
    metrics = {
        "fold": {
            "outcome": outcome,
            "message": fold_result.message,
            "policy_queries": int(fold_result.steps),
            "duration_s": float(fold_result.duration),
        },
        "sim": sim_metrics,
        "same_init": paper_metrics,
        "latency": probe.summary(),
        "latency_queries": probe.queries,  # in order: where a tail comes from (docs/architecture.md, "Latency")
        "graph_ready_s": ready_s,
        "wall_s": time.monotonic() - started,
        # CPU of this process (all its threads, the nodes not included): what `--rrd` adds to it
        # is the recording's cost (benchmarks/bench_rerun_main_job.py).
        "job_cpu_s": time.process_time(),
        "sim_backend": args.sim_backend,
        "sim_device": args.sim_device,
        "sim_grasp": args.sim_grasp if args.sim_backend == "isaac_lab" else None,
        "compute_threads": args.compute_threads,
        "machine": machine_record(),
        "graph_exit_code": code,
        "ros_domain_id": domain,
        "demonstration": str(demo),
        "policy": options.checkpoint or str(models_dir() / "policy"),
        "encoder": options.encoder or str(models_dir() / "encoder"),
        "outputs": outputs,
    }
    if recording is not None and tap is not None:
        outputs["rrd"] = str(recording.path)
        metrics["recording"] = {"queries": tap.queries, "refused_messages": tap.refused}
        if stream_to is not None:
            metrics["recording"].update(streamed_to=stream_to, stream_error=recording.stream_error)
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2, sort_keys=True))
    return metrics


def open_recording(path: Path, demo: Path, stream_to: str | None = None) -> FoldRecording:
    """The fold's Rerun recording (also streamed to the viewer at `stream_to`, when given), with
    the demonstration it is conditioned on (or, for one that cannot be read, a line saying so: the
    fold's report is still written)."""
    from instant_fold_core.demonstration import DemonstrationError, load_demonstration

    recording = FoldRecording(path, stream_to=stream_to)
    try:
        recording.demonstration(load_demonstration(demo))
    except DemonstrationError as exc:
        recording.event(None, f"demonstration unreadable: {exc}")
    return recording


def finish_recording(recording: FoldRecording, outcome: str, message: str, sim_metrics: dict) -> None:
    """The fold's outcome, and with an evaluation the oracle's target keypoints and the fold's own."""
    stamp = float(sim_metrics["sim_time_s"]) if "sim_time_s" in sim_metrics else None
    recording.event(stamp, f"fold {outcome}: {message}")
    if "oracle_keypoints" in sim_metrics:
        recording.keypoints(np.asarray(sim_metrics["oracle_keypoints"]), np.asarray(sim_metrics["final_keypoints"]))


@contextmanager
def _stop_signals_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP stop the run as Ctrl-C does (KeyboardInterrupt: the graph is shut down
    on the way out); before, SIGTERM during a fold was swallowed. Handlers are restored after."""

    def interrupt(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _positive(kind: type[int] | type[float], maximum: float = math.inf):
    """An argparse type: a finite number of `kind` in (0, maximum], checked before the graph
    starts (a step limit of -1 used to reach the goal message and fail there, after the start-up)."""

    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not (math.isfinite(value) and 0 < value <= maximum):
            limit = "" if maximum == math.inf else f" and at most {maximum:g}"
            raise argparse.ArgumentTypeError(f"must be positive{limit}, got {text!r}")
        return value

    return parse


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m instant_fold.sim_fold",
        description=__doc__.splitlines()[0],
        epilog=f"Exit status: 0 the fold completed or reached the step limit; 1 the graph failed (a node "
        "exited, a timeout) or could not start (bad input, --out in use by another run); "
        f"{EXIT_SIM_UNAVAILABLE} bad arguments, or a simulator this machine cannot run (--sim-backend isaac_lab "
        "without its environment, a --sim-device it lacks), told before any node starts; "
        f"{EXIT_FOLD_FAILED} the fold was aborted or canceled (metrics.json says why); 130 stopped by "
        "Ctrl-C, SIGTERM or SIGHUP.",
    )
    parser.add_argument("--demo", default=str(models_dir() / DEFAULT_DEMO), help="demonstration file")
    parser.add_argument("--garment", default="proc:1", help="simulated garment (proc:<seed>, newton_tshirt, OBJ)")
    parser.add_argument("--seed", type=int, default=1469361038825727794, help="episode seed of the start state")
    parser.add_argument("--mode", default="", help="mode the evaluation compares with (default: the demonstration's)")
    parser.add_argument("--variant", default="", help="its execution variant (default: the demonstration's)")
    parser.add_argument("--checkpoint", default="", help="policy directory (default models/policy)")
    parser.add_argument("--encoder", default="", help="cloth encoder directory (default models/encoder)")
    parser.add_argument("--max-steps", type=_positive(int, MAX_GOAL_STEPS), default=150, help="policy queries at most")
    parser.add_argument(
        "--bank", default=str(models_dir() / "oracle_banks" / "cpu"), help="oracle bank with this start state"
    )
    parser.add_argument("--out", default="outputs/sim_fold")
    parser.add_argument(
        "--sim-backend",
        default="newton",
        choices=("newton", "isaac_lab", "newton_stand_in"),
        help="simulator behind the sim node (isaac_lab: docs/isaac_lab.md; give it a longer --startup-timeout)",
    )
    parser.add_argument("--sim-device", default="", help="the backend's device: cpu (default) or cuda:0")
    parser.add_argument(
        "--sim-grasp",
        default=SIM_GRASPS[0],
        choices=SIM_GRASPS,
        help="isaac_lab: held cloth follows the simulated fingers (default) or the commanded target (the first model)",
    )
    parser.add_argument(
        "--no-evaluate", dest="evaluate", action="store_false", help="skip the oracle score, video and strip"
    )
    parser.add_argument(
        "--rrd", action="store_true", help="also write <out>/fold.rrd, a Rerun recording of the fold (docs/rerun.md)"
    )
    parser.add_argument(
        "--view",
        nargs="?",
        const="after",
        choices=("after", "live"),
        help="--rrd, then serve it in Rerun's web viewer on 127.0.0.1 and print the URL (Ctrl-C stops it); "
        "--view live: start the viewer first and stream the fold to it while it runs (served after it, too)",
    )
    parser.add_argument(
        "--view-port", type=_positive(int, 65535), default=9090, help="the web viewer's HTTP port (--view)"
    )
    parser.add_argument("--startup-timeout", type=_positive(float), default=180.0)
    parser.add_argument("--fold-timeout", type=_positive(float), default=900.0)
    parser.add_argument(
        "--rescore",
        metavar="METRICS_JSON",
        default="",
        help="run nothing: score a finished run's fold again against --bank (the same --garment) into "
        "<out>/metrics.json",
    )
    args = parser.parse_args(argv)
    if args.rescore:
        return rescore(args)
    args.mode, args.variant = demonstrated_fold(Path(args.demo), args.mode, args.variant)
    # Before anything computes or starts: this process's and every child's threads (the nodes,
    # the simulator process), so the fold does not depend on the caller's OMP_NUM_THREADS.
    args.compute_threads = pin_compute_threads()
    from instant_fold_sim.availability import SimulatorUnavailable, check_simulator

    try:  # one line and exit 2 now, not a node exiting 40 s into the graph's start-up
        args.sim_device = check_simulator(args.sim_backend, args.sim_device)
    except SimulatorUnavailable as exc:
        print(f"[sim_fold] error: {exc}", file=sys.stderr)
        return EXIT_SIM_UNAVAILABLE
    args.rrd = args.rrd or args.view is not None
    if args.view:  # a port in use is told now, not after the fold
        from instant_fold_core.rerun_web import RerunWebError, free_port

        try:
            free_port(VIEW_HOST, args.view_port)
        except RerunWebError as exc:
            print(f"[sim_fold] error: --view-port: {exc}", file=sys.stderr)
            return 1
    from instant_fold_core.rerun_web import RerunWebError

    with ExitStack() as live:  # --view live: the viewer, from before the fold until Ctrl-C after it
        try:
            # One run per output folder: a second one refuses, naming the first's pid, instead of
            # both writing (and claiming) the same metrics.json, video and strip.
            with _stop_signals_interrupt(), claimed_output_dir(args.out) as out:
                viewer = live.enter_context(open_live_view(args, out)) if args.view == "live" else None
                metrics = run_fold(args)
        except (SimFoldError, OutputDirError) as exc:
            print(f"[sim_fold] error: {exc}", file=sys.stderr)
            return 1
        except RerunWebError as exc:
            print(f"[sim_fold] error: --view live: {exc} (--view-port)", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print("[sim_fold] interrupted: the graph was stopped", file=sys.stderr)
            return 130
        code = report(args, metrics)
        if viewer is not None:
            print(f"[sim_fold] the fold stays in Rerun's web viewer: {viewer.url} (Ctrl-C stops it)", flush=True)
            return _serve_until_stopped(viewer) or code
    if args.view == "after":
        return serve_view(Path(metrics["outputs"]["rrd"]), args.view_port) or code
    return code


def demonstrated_fold(demo: Path, mode: str, variant: str) -> tuple[str, str]:
    """The fold the evaluation compares with: `mode` and `variant` as given, else the ones the
    demonstration file names (a simulated demonstration carries both), so `--demo` alone picks
    the fold. A file that names none (a recorded human demonstration), or that cannot be read (the
    graph refuses it and the report says why), is compared with the bundled demonstration's fold,
    `DEFAULT_FOLD`; the first says so."""
    if mode and variant:
        return mode, variant
    from instant_fold_core.demonstration import DemonstrationError, load_demonstration

    try:
        loaded = load_demonstration(demo)
    except DemonstrationError:
        return mode or DEFAULT_FOLD[0], variant or DEFAULT_FOLD[1]
    named = mode or loaded.mode, variant or str(loaded.meta.get("variant", ""))
    if all(named):
        return named
    print(
        f"[sim_fold] {demo.name} names no folding mode and variant: compared with {'/'.join(DEFAULT_FOLD)} "
        "(--mode, --variant)",
        file=sys.stderr,
    )
    return named[0] or DEFAULT_FOLD[0], named[1] or DEFAULT_FOLD[1]


def open_live_view(args: argparse.Namespace, out: Path) -> WebViewer:
    """`--view live`: Rerun's web viewer on 127.0.0.1, started before the graph (its log in
    `out`), with its URL printed; `run_fold` streams the recording to its proxy (`args.stream_to`)."""
    from instant_fold_core.rerun_web import serve_live

    viewer = serve_live(VIEW_HOST, args.view_port, log=out / "rerun_web.log")
    args.stream_to = viewer.proxy
    print(f"[sim_fold] the fold streams live to Rerun's web viewer: {viewer.url} (open it any time)", flush=True)
    return viewer


def _serve_until_stopped(viewer: WebViewer) -> int:
    """Keep `viewer` serving until Ctrl-C, SIGTERM or SIGHUP; 0 (a viewer that exits by itself: 0 too)."""
    try:
        with _stop_signals_interrupt():
            viewer.wait()
    except KeyboardInterrupt:
        pass
    return 0


def serve_view(rrd: Path, port: int) -> int:
    """Serve the fold's recording in Rerun's web viewer on 127.0.0.1 until Ctrl-C, SIGTERM or
    SIGHUP; 1 when it cannot be served (the port in use), else 0."""
    from instant_fold_core.rerun_web import RerunWebError, serve_recording

    try:
        with serve_recording(rrd, VIEW_HOST, port, log=rrd.with_name("rerun_web.log")) as viewer:
            print(f"[sim_fold] the fold in Rerun's web viewer: {viewer.url} (Ctrl-C stops it)", flush=True)
            return _serve_until_stopped(viewer)
    except RerunWebError as exc:
        print(f"[sim_fold] error: --view: {exc} (--view-port)", file=sys.stderr)
        return 1


def rescore(args: argparse.Namespace) -> int:
    """`--rescore`: a finished run's fold scored again against `--bank` (a bank of more oracle
    executions, say), simulating nothing, into `<out>/metrics.json` with `rescored_from`; the
    run's own folder is left as it was. Its start and fold are the run's (`sim`), so `--garment`
    must name the run's garment (checked against the garment id it recorded)."""
    from instant_fold_evaluation.oracle_bank import OracleBank, OracleBankError

    source = Path(args.rescore)
    try:
        metrics = json.loads(source.read_text())
        sim = metrics.get("sim") or {}
        if missing := [k for k in ("record", "garment", "seed", "mode", "variant") if k not in sim]:
            raise SimFoldError(f"no fold to score (its 'sim' has no {', '.join(missing)}: a run without --evaluate?)")
        args.seed, args.mode, args.variant = int(sim["seed"]), sim["mode"], sim["variant"]
        garment_id = OracleBank.open(args.bank).garment(args.garment)[0].garment_id
        if garment_id != sim["garment"]:
            raise SimFoldError(f"the run folded {sim['garment']}, --garment {args.garment} is {garment_id}")
        if Path(args.out).resolve() == source.parent.resolve():
            raise SimFoldError("--out is the run's own folder; re-scoring leaves the run as it was")
        same = same_init_metrics(args, sim)
        if "error" in same:
            raise SimFoldError(same["error"])
        with claimed_output_dir(args.out) as out:
            metrics |= {"same_init": same, "rescored_from": str(source)}
            (out / "metrics.json").write_text(json.dumps(metrics, indent=2, sort_keys=True))
    except (OSError, ValueError, KeyError, TypeError, OracleBankError, SimFoldError, OutputDirError) as exc:
        print(f"[sim_fold] error: --rescore {source}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(f"[sim_fold] re-scored against {args.bank}: {same_init_line(same)}; wrote {out / 'metrics.json'}")
    return 0


def same_init_line(same: dict) -> str:
    """The same-init metrics in one line, as the fold and its re-score print them."""
    return (
        f"context {same['predicted_context']} ({'correct' if same['context_correct'] else 'wrong'}), "
        f"Geom. {same['geom']:.2f} (envelope {same['envelope']:.2f}), fold rate {same['fold_rate']:.2f}, "
        f"C-SR@95 {'success' if same['csr95_success'] else 'failure'}"
    )


def report(args: argparse.Namespace, metrics: dict) -> int:
    """Print the fold's outcome and scores; the exit status it calls for."""
    fold = metrics["fold"]
    code = EXIT_FOLD_FAILED if fold["outcome"] in ("aborted", "canceled") else 0
    if code:
        print(f"[sim_fold] error: fold {fold['outcome']}: {fold['message']}", file=sys.stderr)
    s = metrics["sim"]
    if not s:
        print(f"[sim_fold] {fold['outcome']} after {fold['policy_queries']} queries")
        return code
    print(
        f"[sim_fold] {metrics['fold']['outcome']} after {metrics['fold']['policy_queries']} queries; keypoint error "
        f"vs oracle max {s['keypoint_error_max']:.3f} mean {s['keypoint_error_mean']:.3f} (start "
        f"{s['start_error_max']:.3f}); success {s['success']}; wall {metrics['wall_s']:.0f} s"
    )
    same = metrics["same_init"]
    if "error" in same:
        print(f"[sim_fold] no same-init metrics: {same['error']}")
    else:
        print(f"[sim_fold] same-init: {same_init_line(same)}")
    rrd = f", {metrics['outputs']['rrd']}" if "rrd" in metrics["outputs"] else ""
    print(f"[sim_fold] wrote {Path(args.out) / 'metrics.json'}, {s['video']}, {metrics['outputs']['strip']}{rrd}")
    return code


if __name__ == "__main__":
    sys.exit(main())
