"""Faults: the fold graph against randomised malformed requests, and stopped in the middle of a fold.

The graph is the one `python -m instant_fold.runner fold robot:=sim` starts (sim node, tokenizer,
policy server, controller; untrained cpu-small models), over DDS. Every service of the graph
(`policy/load_demonstration`, `policy/predict_action_chunk`, the `policy/execute_fold` action's
goal, cancel and result services, `sim/step`, `sim/evaluate`, `control/estop`, `control/reset`)
gets malformed requests: strings of thousands of characters, NUL and bidirectional characters,
declared sizes up to 2^32 - 1 with arrays of other lengths, images in unknown encodings, NaN and
infinite numbers, demonstrations longer than the server takes. Every request must be answered,
none may move the simulation, no node may die, and the graph must fold afterwards.

Before (issue "Faults and bad input, round two", item 1): `LoadDemonstration` with a path of 5,000
characters under an allowed folder killed the policy server (OSError out of its callback); item 14:
SIGTERM to the runner stopped the nodes under a fold in flight, whose goal never got a result, and
the runner exited 0 without a word. Now the fold is canceled first, its client gets the CANCELED
result, one line says so and the runner exits 143.
"""

from __future__ import annotations

import array
import os
import random
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from instant_fold import sim_fold
from instant_fold_learning.testing import untrained_checkpoints
from instant_fold_ros.bringup_share import models_dir
from instant_fold_ros.domains import isolated_ros_env
from instant_fold_ros.testing import TopicProbe

pytestmark = pytest.mark.ros

DEMO = (models_dir() / sim_fold.DEFAULT_DEMO).resolve()
GARMENT, SEED = "proc:1", 5
#: Requests per service (the issue's "Done when").
REQUESTS = 200
#: Services every malformed request of which must be refused (the others' requests may be no-ops:
#: a step to a time already passed, a cancel of an unknown goal, a reset).
REFUSING = ("policy/load_demonstration", "policy/predict_action_chunk", "sim/evaluate")
#: Longest wait for one answer (s): a hang guard, not a timing requirement.
ANSWER_S = 120.0


@dataclass
class FoldGraph:
    """The running graph: the runner's process, its output file, the probe and the folders."""

    process: subprocess.Popen[bytes]
    log: Path
    probe: TopicProbe
    folder: Path
    outputs: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture(scope="module")
def fold_graph(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FoldGraph]:
    folder = tmp_path_factory.mktemp("fuzz")
    policy_dir, encoder_dir = untrained_checkpoints(folder / "models")
    outputs = folder / "outputs"
    outputs.mkdir()
    shutil.copy(DEMO, folder / "demo.safetensors")
    extra = folder / "roots.yaml"
    extra.write_text(
        yaml.safe_dump(
            {
                "policy_server": {"ros__parameters": {"file_roots": [str(folder)]}},
                "sim": {"ros__parameters": {"file_roots": [str(outputs)]}},
            }
        )
    )
    arguments = [f"checkpoint:={policy_dir}", f"encoder:={encoder_dir}", f"garment:={GARMENT}", f"seed:={SEED}"]
    with isolated_ros_env() as env, open(folder / "graph.log", "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "instant_fold.runner", "fold", *arguments, "--params-file", str(extra)],
            env=env,
            cwd=folder,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        probe = TopicProbe(env, "fuzz_probe")
        try:
            yield FoldGraph(process, folder / "graph.log", probe, folder, outputs)
        finally:
            probe.close()
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
                try:
                    process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


# --- malformed values -------------------------------------------------------------------------

BAD_FLOATS = (float("nan"), float("inf"), -float("inf"), 1e38, -1e38, 0.0, 1.0)


def _text(rng: random.Random, root: Path) -> str:
    """A string no service should take: long, NUL, bidirectional or combining characters, traversal."""
    return rng.choice(
        [
            str(root / ("a" * rng.randint(256, 6000))),  # ENAMETOOLONG under an allowed folder
            str(root / "/".join("b" * 200 for _ in range(rng.randint(30, 60)))),  # path longer than PATH_MAX
            str(root) + "/x\0y",
            "\u202e\u0301🙂é" * rng.randint(1, 3000),
            "../" * rng.randint(1, 200) + "etc/passwd",
            str(root / "missing" / "demo.safetensors"),
            str(root),  # a folder, not a file
            str(root / "roots.yaml"),  # a file, not a demonstration
            "".join(chr(rng.randint(1, 0xD7FF)) for _ in range(rng.randint(1, 500))),
        ]
    )


def _floats(rng: random.Random, n: int) -> array.array:
    return array.array("f", (rng.choice(BAD_FLOATS) if rng.random() < 0.5 else rng.uniform(-5, 5) for _ in range(n)))


def _length(rng: random.Random, right: int) -> int:
    """A length near, at or far from the right one (never a huge allocation)."""
    return max(0, rng.choice([0, 1, right - 1, right + 1, right * 3, rng.randint(0, 5000)]))


def _count(rng: random.Random) -> int:
    return rng.choice([0, 1, 3, 64, 2**16, 2**31 - 1, 2**32 - 1, rng.randint(0, 5000)])


def _header(rng: random.Random, root: Path) -> Any:
    from std_msgs.msg import Header

    header = Header(frame_id=_text(rng, root)[:5000])
    header.stamp.sec = rng.randint(-(2**31), 2**31 - 1)
    header.stamp.nanosec = rng.randint(0, 2**32 - 1)
    return header


def _arms(rng: random.Random, root: Path) -> Any:
    from geometry_msgs.msg import Point

    from instant_fold_interfaces.msg import ArmState, DualArmState

    def arm() -> ArmState:
        x, y, z, g = (rng.choice(BAD_FLOATS) for _ in range(4))
        return ArmState(position=Point(x=x, y=y, z=z), openness=g)

    return DualArmState(header=_header(rng, root), left=arm(), right=arm())


def _tokens(rng: random.Random, root: Path) -> Any:
    from instant_fold_interfaces.msg import ClothTokens

    n, d = _count(rng), _count(rng)
    return ClothTokens(
        header=_header(rng, root),
        num_tokens=n,
        feature_dim=d,
        positions=_floats(rng, _length(rng, min(n * 3, 5000))),
        features=_floats(rng, _length(rng, min(n * d, 5000))),
        valid=[rng.random() < 0.5 for _ in range(_length(rng, min(n, 5000)))],
        encoder_id=_text(rng, root)[:3000],
    )


def _image(rng: random.Random) -> Any:
    from sensor_msgs.msg import Image

    width, height = rng.choice([0, 1, 64, 2**31 - 1, 2**32 - 1]), rng.choice([0, 1, 48, 2**31 - 1])
    return Image(
        width=width,
        height=height,
        encoding=rng.choice(["rgb8", "mono8", "32FC1", "16UC1", "banana", "", "rgb8\0", "🙂"]),
        is_bigendian=rng.randint(0, 1),
        step=rng.choice([0, 1, width % 2**32, 2**32 - 1]),
        data=os.urandom(rng.choice([0, 1, 3, 64 * 48, 64 * 48 * 3, 64 * 48 * 4])),
    )


def _demonstration(rng: random.Random, root: Path) -> Any:
    from sensor_msgs.msg import CameraInfo

    from instant_fold_interfaces.msg import Demonstration, Keyframe

    def keyframe(images: bool) -> Keyframe:
        kf = Keyframe(
            frame_index=rng.randint(0, 2**32 - 1),
            keypose=_arms(rng, root),
            left_event=rng.randint(0, 255),
            right_event=rng.randint(0, 255),
        )
        if images:
            kf.color, kf.depth, kf.mask = _image(rng), _image(rng), _image(rng)
            kf.camera_info = CameraInfo(width=rng.randint(0, 2**32 - 1), height=rng.randint(0, 2**32 - 1))
            kf.camera_info.k = [rng.choice(BAD_FLOATS) for _ in range(9)]
        return kf

    count = rng.choice([0, 1, 2, 3, 65, 200])  # 65 and 200: more than max_keyframes (64)
    return Demonstration(
        header=_header(rng, root),
        name=_text(rng, root)[:2000],
        mode=_text(rng, root)[:2000],
        keyframes=[keyframe(count < 10) for _ in range(count)],
    )


def _load_request(rng: random.Random, root: Path) -> Any:
    from instant_fold_interfaces.srv import LoadDemonstration

    if rng.random() < 0.5:
        return LoadDemonstration.Request(path=_text(rng, root))
    return LoadDemonstration.Request(demonstration=_demonstration(rng, root))


def _predict_request(rng: random.Random, root: Path) -> Any:
    from instant_fold_interfaces.srv import PredictActionChunk

    return PredictActionChunk.Request(
        tokens=_tokens(rng, root), state=_arms(rng, root), steps_to_execute=rng.choice([0, 1, 9, 2**32 - 1])
    )


def _goal(rng: random.Random, root: Path) -> Any:
    """A fold goal whose demonstration is bad: it must be aborted (never fold with another one)."""
    from instant_fold_interfaces.action import ExecuteFold

    goal = ExecuteFold.Goal(max_steps=rng.choice([0, 1, 2**32 - 1]))
    if rng.random() < 0.5:
        goal.demonstration_path = _text(rng, root)
    else:
        goal.demonstration = _demonstration(rng, root)
        if not goal.demonstration.keyframes:
            goal.demonstration_path = str(root / ("a" * 5000))
    return goal


def _goal_id(rng: random.Random) -> Any:
    from unique_identifier_msgs.msg import UUID

    return UUID(uuid=np.frombuffer(os.urandom(16), np.uint8))


def _cancel_request(rng: random.Random, root: Path) -> Any:
    from action_msgs.srv import CancelGoal

    request = CancelGoal.Request()
    request.goal_info.goal_id = _goal_id(rng)
    request.goal_info.stamp.sec = rng.randint(-(2**31), 2**31 - 1)
    return request


def _result_request(rng: random.Random, root: Path) -> Any:
    from instant_fold_interfaces.action import ExecuteFold

    return ExecuteFold.Impl.GetResultService.Request(goal_id=_goal_id(rng))


def _step_request(rng: random.Random, root: Path) -> Any:
    """A step that must not move anything: bad numbers, a target metres away, or a time too far ahead."""
    from instant_fold_interfaces.srv import SimStep

    target = [rng.choice((*BAD_FLOATS, 1e300, rng.uniform(-1e6, 1e6))) for _ in range(6)]
    until = rng.choice([float("nan"), float("inf"), -float("inf"), 1e308, 1e9])
    if rng.random() < 0.3:  # a time the sim may step to, with targets it must refuse
        target[rng.randrange(6)] = rng.choice([float("nan"), 50.0, -1e300])
        until = 1e-3 * rng.randint(1, 1000)
    return SimStep.Request(target=target, openness=[rng.choice(BAD_FLOATS) for _ in range(2)], until=until)


def _evaluate_request(rng: random.Random, root: Path) -> Any:
    """An output folder that cannot be used (the sim node's root is `outputs`)."""
    from instant_fold_interfaces.srv import EvaluateFold

    text = _text(rng, root.parent / "outputs")
    return EvaluateFold.Request(output_dir=text if text.strip() else "\0")


def _trigger(rng: random.Random, root: Path) -> Any:
    from std_srvs.srv import Trigger

    return Trigger.Request()


# --- the probe's side ---------------------------------------------------------------------------


def _call(probe: TopicProbe, client: Any, request: Any) -> Any:
    """One call on a ready client; the response, or None when none came."""
    future = client.call_async(request)
    probe.spin_until(future.done, ANSWER_S)
    return future.result() if future.done() else None


def _services() -> list[tuple[str, type, Callable[[random.Random, Path], Any]]]:
    from action_msgs.srv import CancelGoal
    from std_srvs.srv import Trigger

    from instant_fold_interfaces.action import ExecuteFold
    from instant_fold_interfaces.srv import EvaluateFold, LoadDemonstration, PredictActionChunk, SimStep

    return [
        ("policy/load_demonstration", LoadDemonstration, _load_request),
        ("policy/predict_action_chunk", PredictActionChunk, _predict_request),
        ("policy/execute_fold/_action/cancel_goal", CancelGoal, _cancel_request),
        ("policy/execute_fold/_action/get_result", ExecuteFold.Impl.GetResultService, _result_request),
        ("sim/step", SimStep, _step_request),
        ("sim/evaluate", EvaluateFold, _evaluate_request),
        ("control/reset", Trigger, _trigger),
        ("control/estop", Trigger, _trigger),  # last: latched until the reset after the fuzz
    ]


def _sim_now(graph: FoldGraph) -> Any:
    from instant_fold_interfaces.srv import SimStep

    answer = graph.probe.call(SimStep, "sim/step", SimStep.Request(until=-1.0), ANSWER_S)
    assert answer is not None and answer.success, graph.output()
    return answer


def _fold(graph: FoldGraph, client: Any, goal: Any, feedback: list | None = None) -> Any:
    """Send a goal; its goal handle once accepted (or rejected)."""
    sent = client.send_goal_async(goal, feedback_callback=None if feedback is None else feedback.append)
    assert graph.probe.spin_until(sent.done, ANSWER_S), graph.output()
    return sent.result()


def _result(graph: FoldGraph, handle: Any) -> Any:
    result = handle.get_result_async()
    assert graph.probe.spin_until(result.done, 600.0), graph.output()
    return result.result()


def _fuzz_then_fold(graph: FoldGraph, count: int, seed: int) -> None:
    from rclpy.action import ActionClient

    from instant_fold_interfaces.action import ExecuteFold

    rng = random.Random(seed)
    probe = graph.probe
    fold = ActionClient(probe.node, ExecuteFold, "policy/execute_fold")
    assert probe.spin_until(fold.server_is_ready, 300.0), graph.output()
    before = _sim_now(graph)
    # Every client is created and matched before the first malformed request. Created one by one
    # between the fuzzing, `sim/evaluate`'s client once waited more than 120 s to match on a loaded
    # 2-core CI machine although the same node had just answered 200 `sim/step` requests (cause not
    # found; alone the test passed). What this test fuzzes is the services, not late discovery.
    clients = [(service, probe.node.create_client(srv_type, service), make) for service, srv_type, make in _services()]
    seen = probe.node.get_service_names_and_types
    for service, client, _ in clients:
        assert probe.spin_until(client.service_is_ready, ANSWER_S), (service, seen(), graph.output())
    for service, client, make in clients:
        for i in range(count):
            request = make(rng, graph.folder)
            answer = _call(probe, client, request)
            assert answer is not None, (service, i, request, graph.output()[-5000:])
            if service in REFUSING:
                assert not answer.success and answer.message, (service, i, answer)
        probe.node.destroy_client(client)
    for i in range(count):
        handle = _fold(graph, fold, _goal(rng, graph.folder))
        if handle.accepted:
            answer = _result(graph, handle)
            assert answer.result.outcome == ExecuteFold.Result.OUTCOME_ABORTED, (i, answer.result.message)
    assert graph.process.poll() is None, graph.output()
    after = _sim_now(graph)
    assert after.sim_time == before.sim_time and list(after.state) == list(before.state), "nothing may move"
    from std_srvs.srv import Trigger

    reset = probe.call(Trigger, "control/reset", Trigger.Request(), ANSWER_S)
    assert reset is not None and reset.success, reset
    # and the graph still folds: two policy queries, each executed by the controller in the sim
    handle = _fold(
        graph, fold, ExecuteFold.Goal(demonstration_path=str(graph.folder / "demo.safetensors"), max_steps=2)
    )
    assert handle.accepted, graph.output()
    answer = _result(graph, handle)
    assert answer.result.outcome == ExecuteFold.Result.OUTCOME_STEP_LIMIT, (answer.result.message, graph.output())
    assert answer.result.steps == 2 and _sim_now(graph).sim_time > after.sim_time
    output = graph.output()
    assert "Traceback" not in output and "exited with" not in output, output


def test_every_service_survives_200_malformed_requests_and_the_graph_folds(fold_graph: FoldGraph) -> None:
    """About 40 s on the 2-core development machine, the graph's start included (1,800 requests and
    goals, then a fold): in the default run."""
    _fuzz_then_fold(fold_graph, REQUESTS, seed=1)


def test_sigterm_cancels_the_fold_in_flight_and_exits_non_zero(fold_graph: FoldGraph) -> None:
    """Last in this module: it stops the graph."""
    from rclpy.action import ActionClient

    from instant_fold_interfaces.action import ExecuteFold

    graph = fold_graph
    fold = ActionClient(graph.probe.node, ExecuteFold, "policy/execute_fold")
    assert graph.probe.spin_until(fold.server_is_ready, 300.0), graph.output()
    feedback: list = []
    goal = ExecuteFold.Goal(demonstration_path=str(graph.folder / "demo.safetensors"), max_steps=10_000)
    handle = _fold(graph, fold, goal, feedback)
    assert handle.accepted, graph.output()
    result = handle.get_result_async()
    assert graph.probe.spin_until(lambda: len(feedback) >= 3, 300.0), graph.output()
    graph.process.send_signal(signal.SIGTERM)
    assert graph.probe.spin_until(result.done, 120.0), ("the goal must get its result", graph.output())
    answer = result.result()
    assert answer.result.outcome == ExecuteFold.Result.OUTCOME_CANCELED, (answer.result.message, graph.output())
    assert graph.process.wait(timeout=120) == 128 + signal.SIGTERM, graph.output()
    lines = [line for line in graph.output().splitlines() if line.startswith("[runner] SIGTERM")]
    assert lines == ["[runner] SIGTERM: canceled the fold in flight (its client has the result); stopping the graph"]
