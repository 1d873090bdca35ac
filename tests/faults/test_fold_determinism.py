"""Faults: what made a fold depend on other callers and on the machine's speed.

Before (issue "faults and bad input", item 10): the fold sampled its noise from the generator the
public `policy/predict_action_chunk` service also drew from, so another caller's predictions
changed the fold; the policy server aborted a fold after 10 s of *wall* time without a fresh
observation and the `sim` driver after 60 s of wall time without a step's answer, although under
a lock-stepped simulator simulated time stands still while the graph catches up, so a loaded
machine aborted folds that had lost no simulated time at all. Now a fold has a generator of its
own, its timeout counts simulated time under `use_sim_time`, and a step is waited for as long as
the simulator is on the graph.
"""

from __future__ import annotations

import io
import math
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from instant_fold import sim_fold
from instant_fold_ros.bringup_share import models_dir

pytestmark = pytest.mark.ros

DEMO = (models_dir() / sim_fold.DEFAULT_DEMO).resolve()  # the source file behind a --symlink-install
HOME = np.array([[-0.25, 0.05, 0.9, 1.0], [0.25, 0.05, 0.9, 1.0]], np.float32)
#: Simulated time per tick of the stand-in simulator below (s), ticked every TICK_S of wall time.
TICK_S = 0.05


class StandInSimulator:
    """A probe playing a lock-stepped simulator's part for the policy server: `/clock`, cloth tokens
    and arm state, stamped with a simulated time that advances TICK_S per tick only while commanded
    steps are left to execute (each chunk's executed steps, at least one tick), as the sim driver
    advances it. Otherwise, and while stalled, time stands still: the latest observation is
    published again unchanged, or nothing at all while stalled (as while a lock-stepped graph
    catches up). So how fast the policy server answers never changes what it observes."""

    def __init__(self, probe, tokens, encoder_id: str) -> None:
        from builtin_interfaces.msg import Time
        from rosgraph_msgs.msg import Clock

        from instant_fold_interfaces.msg import ActionChunk, ClothTokens, DualArmState
        from instant_fold_ros.conversions import dual_arm_state_to_msg, make_header, tokens_to_msg

        self.sim_ns = 1_000_000_000
        self.stall_until = 0.0
        self.ticks_left = 1  # the first observation
        clock_pub = probe.node.create_publisher(Clock, "/clock", 10)
        tokens_pub = probe.node.create_publisher(ClothTokens, "cloth/tokens", 10)
        state_pub = probe.node.create_publisher(DualArmState, "arms/state", 10)

        def on_command(chunk: ActionChunk) -> None:
            self.ticks_left += max(1, math.ceil(chunk.steps_to_execute * chunk.step_duration / TICK_S - 1e-9))

        def tick() -> None:
            if time.monotonic() < self.stall_until:
                return
            if self.ticks_left > 0:
                self.sim_ns += round(TICK_S * 1e9)
                self.ticks_left -= 1
            stamp = Time(sec=self.sim_ns // 1_000_000_000, nanosec=self.sim_ns % 1_000_000_000)
            clock_pub.publish(Clock(clock=stamp))
            header = make_header("camera_color_optical_frame", stamp)
            tokens_pub.publish(tokens_to_msg(*tokens, header=header, encoder_id=encoder_id))
            state_pub.publish(dual_arm_state_to_msg(HOME, header))

        probe.node.create_subscription(ActionChunk, "arms/command", on_command, 10)
        probe.node.create_timer(TICK_S, tick)


def test_a_fold_is_its_own_under_predict_calls_and_slow_machines(tmp_path: Path, ros_env: dict[str, str]) -> None:
    """Three folds of three queries, the same demonstration and observations: alone; with a flood
    of predict-service calls; with a 3 s (wall) stall of the simulator after its first chunk,
    under a 1 s observation timeout."""
    from policy_server_rig import policy_server_rig
    from rclpy.action import ActionClient

    from instant_fold_core.checkpoint import checkpoint_id
    from instant_fold_core.demonstration import load_demonstration
    from instant_fold_interfaces.action import ExecuteFold
    from instant_fold_interfaces.msg import ActionChunk
    from instant_fold_interfaces.srv import PredictActionChunk
    from instant_fold_learning.encoder.modeling import ClothEncoder
    from instant_fold_learning.encoder.tokenize import tokenize_frame
    from instant_fold_ros.conversions import action_chunk_from_msg, dual_arm_state_to_msg, make_header, tokens_to_msg
    from instant_fold_ros.standins.process_runner import ProcessRunner
    from instant_fold_ros.testing import TopicProbe

    rig = policy_server_rig(
        tmp_path, [DEMO.parent], step_duration=0.02, use_sim_time=True, fold={"observation_timeout_s": 1.0}
    )
    graph, encoder_dir = rig.graph, rig.encoder_dir
    demo = load_demonstration(DEMO)
    tokens = tokenize_frame(ClothEncoder.from_pretrained(encoder_dir), demo.frame(0), demo.mask[0])
    encoder_id = checkpoint_id(encoder_dir)
    results: dict = {}
    log = io.StringIO()
    with TopicProbe(ros_env) as probe:
        simulator = StandInSimulator(probe, tokens, encoder_id)
        commands = probe.subscribe(ActionChunk, "arms/command")
        predict = probe.node.create_client(PredictActionChunk, "policy/predict_action_chunk")
        header = make_header("camera_color_optical_frame")
        request = PredictActionChunk.Request(
            tokens=tokens_to_msg(*tokens, header=header, encoder_id=encoder_id),
            state=dual_arm_state_to_msg(HOME, header),
        )
        client = ActionClient(probe.node, ExecuteFold, "policy/execute_fold")
        runner = ProcessRunner(graph, env=ros_env, output=log)
        runner.start()
        try:
            assert probe.spin_until(lambda: client.server_is_ready() and predict.service_is_ready(), 120.0), (
                log.getvalue()
            )
            for name in ("alone", "predict_flood", "stall"):
                commands.clear()
                goal = client.send_goal_async(ExecuteFold.Goal(demonstration_path=str(DEMO), max_steps=3))
                assert probe.spin_until(goal.done, 30.0) and goal.result().accepted, log.getvalue()
                result = goal.result().get_result_async()
                stalled, pending = False, []
                while not result.done():
                    probe.executor.spin_once(timeout_sec=0.01)
                    pending = [p for p in pending if not p.done()]
                    if name == "predict_flood" and len(pending) < 2:  # always a call in flight
                        pending.append(predict.call_async(request))
                    if name == "stall" and commands and not stalled:
                        simulator.stall_until, stalled = time.monotonic() + 3.0, True
                    assert runner.exited_required() is None, log.getvalue()
                probe.spin_until(lambda: len(commands) >= 3, 5.0)
                chunks = [action_chunk_from_msg(c).positions for c in commands]
                results[name] = (result.result().result, chunks)
        finally:
            code = runner.shutdown()
    assert code == 0, log.getvalue()
    for name, (result, chunks) in results.items():
        assert result.outcome == ExecuteFold.Result.OUTCOME_STEP_LIMIT, (name, result.message)
        assert len(chunks) == 3, (name, len(chunks))
    for name in ("predict_flood", "stall"):
        for a, b in zip(results["alone"][1], results[name][1], strict=True):
            np.testing.assert_array_equal(a, b, err_msg=name)


#: A stand-in `sim/step` service in a process of its own: a read (until < 0) is answered at once,
#: a step after `delay` seconds (SIGINT takes it off the graph meanwhile). With `lost` = 1 its first
#: reply is never sent, as DDS drops a reply to a client it has not matched yet.
SLOW_SIMULATOR = """
import sys, time
import rclpy
from rclpy.signals import SignalHandlerOptions
from instant_fold_interfaces.srv import SimStep
delay, lost = float(sys.argv[1]), int(sys.argv[2])
rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
node = rclpy.create_node("slow_sim")
def step(request, response):
    if request.until >= 0:
        time.sleep(delay)
    response.success, response.sim_time = True, max(request.until, 0.0)
    response.state = [-0.2, 0.0, 0.8, 1.0, 0.2, 0.0, 0.8, 1.0]
    return response
service = node.create_service(SimStep, "sim/step", step)
send_response = service.send_response
def lossy_send(response, header):
    global lost
    if lost:
        lost -= 1
        print("slow_sim: reply lost", flush=True)
        return
    send_response(response, header)
service.send_response = lossy_send
try:
    while True:  # short waits: a wait without end would hold SIGINT off
        rclpy.spin_once(node, timeout_sec=0.1)
except KeyboardInterrupt:
    pass
finally:
    node.destroy_node()
    rclpy.try_shutdown()
"""


def _slow_simulator(env: dict[str, str], delay: float, lost_replies: int = 0) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", SLOW_SIMULATOR, str(delay), str(lost_replies)], env=env)


def _stop(simulator: subprocess.Popen) -> None:
    """SIGINT, then SIGKILL if it is still there after 10 s: a stand-in left running would answer
    `sim/step` for the next tests on this ROS domain (seen in CI: one outlived its SIGINT)."""
    simulator.send_signal(signal.SIGINT)
    try:
        simulator.wait(10)
    except subprocess.TimeoutExpired:
        simulator.kill()
        simulator.wait(10)


def test_a_slow_step_is_waited_for_and_a_gone_simulator_fails(ros_env: dict[str, str]) -> None:
    import rclpy

    from instant_fold_control.drivers.base import DriverConnectionError
    from instant_fold_sim.sim_driver import SimLink

    rclpy.init(domain_id=int(ros_env["ROS_DOMAIN_ID"]))
    try:
        simulator = _slow_simulator(ros_env, 2.5)
        link = SimLink(timeout_s=1.0)
        try:
            link.connect()
            link.advance(0.1)  # 2.5 s for a step: a loaded machine
            assert link.sim_time == pytest.approx(0.1)
        finally:
            link.close()
            _stop(simulator)

        simulator = _slow_simulator(ros_env, 600.0)  # a step that never ends ...
        link = SimLink(timeout_s=1.0)
        failure: list[BaseException] = []

        def step() -> None:
            try:
                link.advance(0.1)
            except DriverConnectionError as exc:
                failure.append(exc)

        try:
            link.connect()
            stepping = threading.Thread(target=step)
            stepping.start()
            time.sleep(2.0)
            assert not failure  # ... is waited for while the simulator is there
            simulator.send_signal(signal.SIGINT)  # ... until it leaves the graph
            stepping.join(30.0)
            assert not stepping.is_alive() and failure, "the step did not fail after the simulator left"
            assert "left the graph" in str(failure[0])
        finally:
            link.close()
            simulator.kill()
            simulator.wait(30)
    finally:
        rclpy.try_shutdown()


def test_the_sim_driver_waits_for_a_simulator_still_building_its_scene(ros_env: dict[str, str]) -> None:
    """A simulator answers only once its scene is built (the Isaac Lab backend: minutes): the link
    waits `connect_timeout_s` for it, then says what it waited for; the read at connect is sent
    again when its reply is lost. The shipped `sim` robot waits as long as the sim node allows its
    backend to start."""
    import rclpy

    from instant_fold_control.config import find_robot_config, load_robot_config
    from instant_fold_control.drivers.base import DriverConnectionError
    from instant_fold_sim.sim_driver import SimLink, make_robot

    rclpy.init(domain_id=int(ros_env["ROS_DOMAIN_ID"]))
    try:
        link = SimLink(connect_timeout_s=1.0)
        with pytest.raises(DriverConnectionError, match="after 1 s"):
            link.connect()  # nothing there
        link = SimLink(connect_timeout_s=60.0)
        late: list[subprocess.Popen] = []
        starter = threading.Timer(3.0, lambda: late.append(_slow_simulator(ros_env, 0.0, lost_replies=1)))
        starter.start()
        try:
            link.connect()  # the simulator appears 3 s (plus its start-up) later, its first reply lost
            assert link.connected and link.state is not None
            np.testing.assert_allclose(link.state[0], [-0.2, 0.0, 0.8, 1.0])
        finally:
            starter.join()
            link.close()
            for p in late:
                _stop(p)
        drivers = make_robot(load_robot_config(find_robot_config("sim")))
        assert drivers.lockstep.connect_timeout_s >= 600.0  # sim.yaml: the sim node's backend_start_timeout_s
    finally:
        rclpy.try_shutdown()


DEMONSTRATOR = "from instant_fold_demo.sim_demonstrator import main; raise SystemExit(main())"
DEMONSTRATOR_PARAMETERS = ("-p", "wait_for_subscribers:=false", "-p", "settle_s:=0.0", "-p", "linger_s:=0.0")
DEMONSTRATOR_PARAMETERS += ("-p", "keyframes:=2")


def test_the_sim_demonstrator_sends_its_first_read_again_when_the_reply_is_lost(ros_env: dict[str, str]) -> None:
    """The demonstrator's first `sim/step` is a read of the arm state; a simulator whose first
    reply is lost (as DDS loses a reply to a client it has not matched yet) still gets the whole
    replay: the read is sent again, then every step of the first two keyframes is answered."""
    simulator = _slow_simulator(ros_env, 0.0, lost_replies=1)
    try:
        demonstrator = subprocess.run(
            [sys.executable, "-c", DEMONSTRATOR, "--ros-args", *DEMONSTRATOR_PARAMETERS],
            env=ros_env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        _stop(simulator)
    assert demonstrator.returncode == 0, demonstrator.stderr
    assert "demonstration replayed" in demonstrator.stderr + demonstrator.stdout
