"""In-process closed-loop rollouts: the fold graph's code, without DDS, on a simulated garment.

One process holds what the fold graph spreads over five: the simulator (`SimWorld`, camera and
arms), the cloth encoder, the policy (`PolicyServer`), the dual-arm controller with its safety
layer (`ControlLoop` over the `sim` arm drivers, linked to the world in-process) and the
execute-fold state machine (`FoldLoop`). Each of these is the very object the corresponding node
wraps, so a rollout here is what the graph (and a robot) runs, with the graph's lockstep: a query
sees the frame rendered after the previous chunk's executed steps and the arm state of that same
instant; the controller then executes the first k of the H steps, one control period (= one
simulated frame) per tick, and simulated time stands still while the policy thinks.

What differs from the graph is transport only: values that cross DDS as float32 (arm state)
are rounded the same way here, and every frame's arm state reaches the fold loop (the graph's
50 Hz state topic may skip one under load; the events counted are the same unless it does).
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass

import numpy as np

from instant_fold_control.config import RobotConfig, find_robot_config, load_robot_config
from instant_fold_control.control_loop import ControlLoop
from instant_fold_control.controller import DualArmController
from instant_fold_core.contracts import FoldOutcome
from instant_fold_core.demonstration import Demonstration
from instant_fold_core.errors import InvalidInputError
from instant_fold_core.fold_record import FoldRecord
from instant_fold_core.fold_recording import FoldRecording
from instant_fold_core.rgbd import RGBDFrame
from instant_fold_core.validation import ValidationError
from instant_fold_evaluation.oracle_bank import Context
from instant_fold_policy.fold_loop import NANOSECONDS, Finish, FoldLoop, FoldLoopConfig, Query, Wait
from instant_fold_policy.server import PolicyServer, PolicyServerError
from instant_fold_sim.programs import instruction
from instant_fold_sim.sim_arms import WorldLink, sim_robot
from instant_fold_sim.sim_world import SimWorld

#: Cloth pixels with valid depth a frame needs before it is tokenized (the tokenizer node's default).
MIN_MASK_PIXELS = 50
#: Bad input, not bugs: a policy query failing with one finishes the fold as ABORTED (as the
#: policy server node does); conditioning failing with one means the rollout cannot start (`not_run`).
POLICY_ERRORS = (PolicyServerError, ValueError)


class ClosedLoopError(InvalidInputError):
    """The rollout cannot start (no demonstration for a demonstration-conditioned policy)."""


@dataclass(frozen=True)
class RolloutResult:
    outcome: FoldOutcome
    message: str
    queries: int
    frames: int
    record: FoldRecord
    wall_s: float
    policy_s: float  # rendering + tokenizing + predicting, summed over queries
    safety_events: dict[str, int]


def _quiet(level: str, text: str) -> None:
    """Safety events are counted by the controller; the evaluator reports the counts, not each line."""


def sim_robot_config() -> RobotConfig:
    """The simulated robot of the fold graph (`config/robots/sim.yaml`): its extrinsics and limits."""
    return load_robot_config(find_robot_config("sim"))


def observe_tokens(world: SimWorld, tokenize, recording: FoldRecording | None = None) -> object:
    """Render the camera and tokenize the cloth as the sim and tokenizer nodes do (and record the
    frame, its mask and its tokens when a recording is given)."""
    obs = world.observe()
    stamp = world.stamp_ns(obs.frame) / NANOSECONDS
    if recording is not None:
        if not recording.has_camera:
            recording.camera(obs.intrinsics, obs.rgb.shape[1], obs.rgb.shape[0])
        recording.observation(stamp, obs.rgb, obs.mask)
    if int(np.count_nonzero(obs.mask & (obs.depth > 0))) < MIN_MASK_PIXELS:
        raise ValidationError(f"mask has fewer than {MIN_MASK_PIXELS} cloth pixels with valid depth")
    frame = RGBDFrame(obs.rgb, obs.depth, obs.intrinsics.astype(np.float32), frame_number=obs.frame)
    tokens = tokenize(frame, obs.mask)
    if recording is not None:
        recording.tokens(stamp, tokens.positions, tokens.valid)
    return tokens


def run_rollout(
    world: SimWorld,
    server: PolicyServer,
    max_steps: int,
    robot: RobotConfig | None = None,
    fold: FoldLoopConfig | None = None,
    steps_to_execute: int = 0,
    recording: FoldRecording | None = None,
) -> RolloutResult:
    """Fold `world` with the loaded policy (demonstration or mode already loaded) until the fold
    loop finishes: arms home after the demonstration's events, or `max_steps` queries.

    `recording`: also log every observation, its tokens, each query's chunk and latencies
    (`observe_ms`: render + tokenize, `predict_ms`: the policy) and every tick's arm state; the
    caller adds the demonstration and keypoints and closes it."""
    started = time.perf_counter()
    robot = robot or sim_robot_config()
    link = WorldLink(world)
    drivers = sim_robot(robot, link)
    drivers.connect()
    controller = DualArmController(robot, _quiet)
    control = ControlLoop(controller, drivers, 1.0 / world.fps, _quiet)
    step_duration = 1.0 / world.fps  # one action step per simulated frame, as in the fold graph
    expected = server.expected_events if server.conditioning == "demo" else None
    config = FoldLoopConfig(**{**vars(fold or FoldLoopConfig()), "max_steps": max_steps})
    loop: FoldLoop = FoldLoop(config, world.home(), expected, schedule=server.event_schedule)
    noise = server.fold_generator()

    def measure() -> None:
        control.read()
        state = controller.state()
        assert state is not None
        loop.on_state(state.astype(np.float32), round(control.measured_at * NANOSECONDS))
        if recording is not None:
            recording.arm_state(control.measured_at, state)

    measure()
    policy_s = 0.0
    while True:
        t0 = time.perf_counter()
        decision = _decide(loop, world, server, recording)
        if isinstance(decision, Finish):
            finish = decision
            break
        t1 = time.perf_counter()
        try:
            prediction = server.predict(decision.tokens, decision.arm_state, steps_to_execute, generator=noise)
        except POLICY_ERRORS as exc:
            finish = loop.fail(f"policy query failed: {exc}")
            break
        t2 = time.perf_counter()
        policy_s += t2 - t0
        # One action step per simulated frame, whatever cadence the server was built with.
        steer = loop.steer(dataclasses.replace(prediction, step_duration=step_duration))
        now = link.now()
        control.submit(steer.chunk, decision.tokens_ns / NANOSECONDS)  # refusals are counted, and held
        loop.chunk_sent(round(now * NANOSECONDS), steer.chunk.steps_to_execute, step_duration, 0.0)
        if recording is not None:
            latency = {"observe_ms": (t1 - t0) * 1e3, "predict_ms": (t2 - t1) * 1e3}
            recording.query(loop.step - 1, decision.tokens_ns / NANOSECONDS, steer.chunk, latency)
        while not control.idle(link.now()):
            control.tick()
            measure()
    if recording is not None:
        recording.event(link.now(), f"fold {finish.outcome.name.lower()}: {finish.message} ({loop.step} queries)")
    return RolloutResult(
        finish.outcome,
        finish.message,
        loop.step,
        world.frames,
        world.record(),
        time.perf_counter() - started,
        policy_s,
        {
            k: v
            for k, v in {
                **controller.safety.counts,
                "regrasp_guarded": loop.regrasps_guarded,
                "grasp_gated": loop.grasps_gated,
                "event_ordered": loop.events_ordered,
                "event_order_expired": loop.order_waits_expired,
                "event_partner_called": loop.partners_called,
            }.items()
            if v
        },
    )


def _decide(loop: FoldLoop, world: SimWorld, server: PolicyServer, recording: FoldRecording | None) -> Query | Finish:
    """Observe the world and let the fold loop decide: query the policy or finish."""
    try:
        loop.on_tokens(observe_tokens(world, server.tokenize, recording), world.stamp_ns())
    except ValidationError as exc:
        return loop.fail(f"no cloth tokens: {exc}")
    decision = loop.next(now_s=0.0)
    if isinstance(decision, Wait):
        # No observation after the last chunk's steps (simulated time stood still): the graph's
        # fold loop would wait until its observation timeout; the outcome is the same.
        decision = loop.next(now_s=math.inf)
    assert not isinstance(decision, Wait), "past its observation timeout the fold loop never waits"
    return decision


def not_run(world: SimWorld, reason: str) -> RolloutResult:
    """The result of a rollout that could not start (the policy cannot be conditioned on its
    context, e.g. a language-conditioned policy asked for a fold it never trained on): ABORTED,
    the garment left as it was, scored like doing nothing."""
    return RolloutResult(FoldOutcome.ABORTED, reason, 0, world.frames, world.record(), 0.0, 0.0, {})


def load_condition(server: PolicyServer, demonstration: Demonstration | None, context: Context) -> None:
    """Condition the policy: on the demonstration when it is demonstration-conditioned, else on
    the instruction of `context` (its mode's description and its variant in words)."""
    if server.conditioning == "demo":
        if demonstration is None:
            raise ClosedLoopError("a demonstration-conditioned policy needs a demonstration")
        server.load_demonstration(demonstration)
    else:
        server.load_instruction(instruction(context.mode, context.variant))
