"""Policy server node: the in-context policy behind ROS.

- `policy/load_demonstration` (LoadDemonstration): a demonstration file path or inline keyframes;
  tokenized and encoded once, then cached; refused while a fold runs. A path (here or in an
  ExecuteFold goal) must lie under the `file_roots` parameter's folders (default: the working
  directory); the `demonstration` parameter, set by the operator, is not restricted. A demonstration of more than `max_keyframes`
  keyframes (default `server.MAX_DEMONSTRATION_KEYFRAMES`) is refused before anything is encoded.
- `policy/predict_action_chunk` (PredictActionChunk): tokens + arm state -> action chunk.
- parameter `event_targets` (default "policy"): where the arms grasp and let go: "policy" (the
  policy's own targets), "latched", "demonstration_releases" or "demonstration" (`PolicyServer`,
  docs/policy.md "Event targets").
- parameter `grasp_refinement_m` (default 0, off): the window in which those strategies refine a
  demonstrated grasp mapped onto the cloth (docs/registration.md, "Local refinement").
- parameter `grasp_conflict_m` (default 0.10): the demonstration strategy sends each arm to its own
  demonstrated grasp when the policy aims both grasps this close to each other (0: off;
  docs/policy.md, "Event targets").
- parameter `grasp_match_m` (default `GRASP_MATCH_M`): the demonstration strategy makes a grasp the
  policy aims this close to where the arm's next demonstrated grasp maps at that mapped point (0:
  never; docs/policy.md, "Event targets").
- parameter `first_grasp_match_m` (default `FIRST_GRASP_MATCH_M`): `grasp_match_m` for each arm's
  first grasp of a fold.
- parameter `keypoint_detector` (default "", none): a keypoint detector directory; those strategies
  carry a demonstrated grasp made at a keypoint to that keypoint of the current cloth
  (docs/registration.md, "Grasps carried by keypoints").
- `policy/execute_fold` (ExecuteFold action): the closed loop — fresh `cloth/tokens` + `arms/state`
  -> chunk on `arms/command` -> the controller executes the first k steps -> repeat, until the arms
  are back home with open grippers after the demonstration's events, or the step limit; feedback
  per query; cancel makes the arms hold where they are; the node's shutdown (Ctrl-C, SIGTERM)
  aborts a running fold, even one waiting for observations. Home is what the robot publishes, latched,
  on `arms/home` (the simulator does), else the demonstration's terminal keypose.
- parameter `controller_wait_s` (default 10, wall seconds): how long a fold's first chunk waits for
  the controller to listen (`_controller_missing`); the fold is aborted with the reason after it.

Every request is answered: a bad one with `success=False` and the reason (one log line), never by
the node's end (`instant_fold_ros.services`); a goal that cannot start is aborted with its reason.

Threads: the observations (`cloth/tokens`, `arms/state`, `arms/home`, and `/clock` under
`use_sim_time`) are taken by this node's single-threaded executor; the services and the action
live on a `SideNode`, `<name>_requests` in the same namespace, with a multi-threaded executor of
its own, where a fold's loop blocks one thread for its whole length (why: `node_main`).

A fold samples from a generator of its own, seeded when it starts, so predict-service calls made
meanwhile never change it. Its observation timeout counts on the node's clock: simulated time
under `use_sim_time` (a lock-stepped simulator stops its clock while the graph catches up, so a
loaded machine never aborts a fold), the monotonic clock otherwise.
"""

from __future__ import annotations

import contextlib
import threading
import time

import numpy as np
import torch
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from rclpy.time import Time

from instant_fold_core.config import at_least_zero
from instant_fold_core.contracts import ActionChunk, FoldOutcome, FoldPhase
from instant_fold_core.demonstration import load_demonstration
from instant_fold_core.errors import InvalidInputError
from instant_fold_core.paths import resolve_under
from instant_fold_core.tokens import TokenArrays
from instant_fold_interfaces.action import ExecuteFold
from instant_fold_interfaces.msg import ActionChunk as ActionChunkMsg
from instant_fold_interfaces.msg import ClothTokens, DualArmState
from instant_fold_interfaces.srv import LoadDemonstration, PredictActionChunk
from instant_fold_learning.policy.event_targets import FIRST_GRASP_MATCH_M, GRASP_CONFLICT_M, GRASP_MATCH_M
from instant_fold_learning.policy.inference import DEFAULT_STEP_DURATION
from instant_fold_policy.fold_loop import Finish, FoldLoop, FoldLoopConfig, Wait
from instant_fold_policy.server import MAX_DEMONSTRATION_KEYFRAMES, PolicyServer, PolicyServerError
from instant_fold_ros.conversions import (
    action_chunk_to_msg,
    demonstration_from_msg,
    dual_arm_state_from_msg,
    dual_arm_state_to_msg,
    home_pose_from_msg,
    make_header,
    tokens_from_msg,
)
from instant_fold_ros.node_main import SideNode, run_node
from instant_fold_ros.params import declare_config, declare_file_roots
from instant_fold_ros.qos import COMMAND_QOS, LATCHED_QOS, OBSERVATION_QOS
from instant_fold_ros.services import create_guarded_service, one_line

#: Longest wait between checks for a cancel request while no observation arrives (s).
CANCEL_CHECK_S = 0.1
#: Default bound on the wait for the controller to listen before a fold's first chunk (wall s).
CONTROLLER_WAIT_S = 10.0
#: What a request can fail with and still be answered: its content (a message, a demonstration, a
#: path, the tokens: `InvalidInputError`, also what numpy/torch raise as `ValueError`; a path the
#: file system refuses, such as a name too long: `OSError`) or the server's state. Any other error
#: is answered too (`instant_fold_ros.services`), as an internal one.
REQUEST_ERRORS = (InvalidInputError, ValueError, OSError, PolicyServerError)


class PolicyServerNode(Node):
    def __init__(self) -> None:
        super().__init__("policy_server")
        p = self.declare_parameter
        self.step_duration = float(p("step_duration", DEFAULT_STEP_DURATION).value)
        self.server = PolicyServer.from_checkpoints(
            str(p("policy_checkpoint", "").value),
            str(p("encoder_checkpoint", "").value),
            str(p("device", "auto").value),
            int(p("seed", 0).value),
            self.step_duration,
            int(p("max_keyframes", MAX_DEMONSTRATION_KEYFRAMES).value),
            str(p("event_targets", "policy").value),  # docs/policy.md, "Event targets"
            float(p("grasp_refinement_m", 0.0).value),  # docs/registration.md, "Local refinement"
            str(p("keypoint_detector", "").value) or None,  # docs/registration.md, "Grasps carried by keypoints"
            float(p("grasp_conflict_m", GRASP_CONFLICT_M).value),  # docs/policy.md, "Event targets"
            float(p("grasp_match_m", GRASP_MATCH_M).value),  # docs/policy.md, "Event targets"
            float(p("first_grasp_match_m", FIRST_GRASP_MATCH_M).value),  # docs/policy.md, "Event targets"
        )
        self.steps_to_execute = int(p("steps_to_execute", 0).value)
        self.frame_id = str(p("frame_id", "camera_color_optical_frame").value)
        # NaN would wait forever
        self.controller_wait_s = at_least_zero(
            "controller_wait_s", float(p("controller_wait_s", CONTROLLER_WAIT_S).value), "seconds"
        )
        self.fold_config = FoldLoopConfig(**declare_config(self, "fold", FoldLoopConfig()))
        self.file_roots = declare_file_roots(self, ["."])
        # Guards the running fold loop; observations notify the fold's thread through it.
        self._observed = threading.Condition()
        self._state: np.ndarray | None = None
        self._state_ns = 0
        self._latest_tokens: ClothTokens | None = None
        self._home: np.ndarray | None = None  # [2, 3] the robot's, from `arms/home`
        self._loop: FoldLoop[ClothTokens] | None = None
        self._busy = False  # a goal is accepted and not finished (set on acceptance: one fold at a time)
        self._closing = False  # the node is shutting down: a running fold ends (`close`)
        self._command = self.create_publisher(ActionChunkMsg, "arms/command", COMMAND_QOS)
        self.create_subscription(ClothTokens, "cloth/tokens", self._on_tokens, OBSERVATION_QOS)
        self._state_sub = self.create_subscription(DualArmState, "arms/state", self._on_state, OBSERVATION_QOS)
        self.create_subscription(DualArmState, "arms/home", self._on_home, LATCHED_QOS)
        self._requests = SideNode(self, "requests", threads=3)
        group, requests = ReentrantCallbackGroup(), self._requests.node
        for srv_type, service, callback in (
            (LoadDemonstration, "policy/load_demonstration", self._on_load),
            (PredictActionChunk, "policy/predict_action_chunk", self._on_predict),
        ):
            create_guarded_service(requests, srv_type, service, callback, REQUEST_ERRORS, callback_group=group)
        self._action = ActionServer(
            requests,
            ExecuteFold,
            "policy/execute_fold",
            execute_callback=self._execute,
            goal_callback=self._accept_goal,
            cancel_callback=lambda _: CancelResponse.ACCEPT,
            callback_group=group,
        )
        if demo := str(p("demonstration", "").value):
            self.get_logger().info(
                f"demonstration {demo} encoded in {self.server.load_demonstration(load_demonstration(demo)):.2f} s"
            )
        self._requests.start()
        self.get_logger().info(
            f"policy server ready (horizon {self.server.horizon}, encoder {self.server.encoder_id}, "
            f"event targets {self.server.event_targets})"
        )

    def close(self) -> None:
        """End a running fold and stop serving requests (run_node calls this before destroying the
        node, after Ctrl-C or SIGTERM). A fold waiting for observations that never come would
        otherwise keep its executor thread, and the process, alive."""
        with self._observed:
            self._closing = True
            self._observed.notify_all()
        self._requests.close()

    # -- topics -----------------------------------------------------------------------------

    def _on_tokens(self, msg: ClothTokens) -> None:
        with self._observed:
            self._latest_tokens = msg
            if self._loop is not None:
                self._loop.on_tokens(msg, Time.from_msg(msg.header.stamp).nanoseconds)
                self._observed.notify_all()

    def _on_state(self, msg: DualArmState) -> None:
        try:
            state = dual_arm_state_from_msg(msg)
        except InvalidInputError as exc:
            self.get_logger().warning(f"arm state rejected: {exc}", throttle_duration_sec=2.0)
            return
        with self._observed:
            self._state, self._state_ns = state, Time.from_msg(msg.header.stamp).nanoseconds
            if self._loop is not None:
                self._loop.on_state(state, self._state_ns)
                self._observed.notify_all()

    def _on_home(self, msg: DualArmState) -> None:
        try:
            home = home_pose_from_msg(msg)
        except InvalidInputError as exc:
            self.get_logger().warning(f"home pose rejected: {exc}")
            return
        with self._observed:
            self._home = home
            if self._loop is not None:
                self._loop.on_home(home)
        self.get_logger().info(f"home pose (camera frame): {np.round(home, 4).tolist()}")

    # -- services ---------------------------------------------------------------------------

    def _load(self, path: str, inline) -> float:
        if path:
            demo = load_demonstration(resolve_under(path, self.file_roots, "demonstration"))
        else:
            self.server.check_keyframes(len(inline.keyframes))  # before converting any image
            demo = demonstration_from_msg(inline)
        return self.server.load_demonstration(demo)

    def _on_load(self, request: LoadDemonstration.Request, response: LoadDemonstration.Response):
        """Refusals are answered by the service's guard (`REQUEST_ERRORS`). A load while a fold
        runs is refused: it would change the running fold's context, and its encoding (about half
        a second per keyframe on a CPU) would compete with the fold's queries."""
        with self._observed:
            if self._busy:
                raise PolicyServerError("a fold is running: load the demonstration after it ends (or cancel it)")
        response.encode_time = self._load(request.path, request.demonstration)
        assert self.server.demonstration is not None
        response.success, response.num_keyframes = True, self.server.demonstration.num_keyframes
        response.message = f"demonstration '{self.server.demonstration.name}' loaded"
        return response

    def _predict(
        self, tokens_msg: ClothTokens, state: np.ndarray, steps: int, generator: torch.Generator | None = None
    ) -> tuple[ActionChunk, float]:
        """The chunk for one observation and the seconds the policy took to predict it."""
        tokens: TokenArrays = tokens_from_msg(tokens_msg)
        start = time.perf_counter()
        chunk = self.server.predict(tokens, state, steps, tokens_msg.encoder_id, generator)
        return chunk, time.perf_counter() - start

    def _chunk_msg(self, chunk: ActionChunk, stamp) -> ActionChunkMsg:
        """A chunk as a command message stamped with its observation's time."""
        return action_chunk_to_msg(chunk, make_header(self.frame_id, stamp))

    def _on_predict(self, request: PredictActionChunk.Request, response: PredictActionChunk.Response):
        """Refusals are answered by the service's guard (`REQUEST_ERRORS`)."""
        state = dual_arm_state_from_msg(request.state)
        chunk, inference_time = self._predict(request.tokens, state, request.steps_to_execute or self.steps_to_execute)
        response.chunk = self._chunk_msg(chunk, request.tokens.header.stamp)
        response.success, response.inference_time = True, inference_time
        return response

    # -- execute-fold action ----------------------------------------------------------------

    def _fold_clock(self) -> float:
        """Seconds on the clock fold timeouts count on: simulated under `use_sim_time`, else monotonic."""
        if self.get_parameter("use_sim_time").value:
            return self.get_clock().now().nanoseconds / 1e9
        return time.monotonic()

    def _accept_goal(self, _goal) -> GoalResponse:
        with self._observed:
            if self._busy:
                return GoalResponse.REJECT
            self._busy = True
            return GoalResponse.ACCEPT

    def _hold(self, state: np.ndarray) -> None:
        """Command the arms to stay where they are (one absolute step at the current state)."""
        hold = ActionChunk(state[None, :, :3], state[None, :, 3], 1, self.step_duration)
        self._command.publish(self._chunk_msg(hold, self.get_clock().now().to_msg()))

    def _finish(self, goal_handle, outcome: FoldOutcome, message: str, loop: FoldLoop, started: float):
        result = ExecuteFold.Result(
            outcome=int(outcome), message=message, steps=loop.step, duration=time.monotonic() - started
        )
        {FoldOutcome.COMPLETED: goal_handle.succeed, FoldOutcome.CANCELED: goal_handle.canceled}.get(
            outcome, goal_handle.abort
        )()
        self.get_logger().info(f"fold {outcome.name.lower()}: {message} ({loop.step} queries)")
        return result

    def _controller_missing(self) -> str | None:
        """Why a chunk published now could miss the controller, or None when it cannot.

        `arms/command` is reliable and volatile: what is published before a subscription is matched
        is dropped. A fold's first chunk lost that way leaves the arms still and the fold waiting for
        them to move (forever under a lock-stepped simulator, whose clock the observation timeout
        counts). The controller is the node that publishes `arms/state`; it must subscribe to
        `arms/command`, and every subscription the graph knows of must be matched to this publisher
        (the graph may learn of an endpoint before the publisher matches it).
        """
        state_nodes = {
            (i.node_namespace, i.node_name) for i in self.get_publishers_info_by_topic(self._state_sub.topic_name)
        }
        listeners = self.get_subscriptions_info_by_topic(self._command.topic_name)
        if not state_nodes & {(i.node_namespace, i.node_name) for i in listeners}:
            return f"no node that publishes {self._state_sub.topic_name} subscribes to {self._command.topic_name}"
        matched = self._command.get_subscription_count()
        if matched < len(listeners):
            return f"{matched} of the {len(listeners)} subscriptions to {self._command.topic_name} matched"
        return None

    def _await_controller(self, goal_handle) -> str | None:
        """Wait (wall time, at most `controller_wait_s`) until `_controller_missing` says nothing;
        returns why it still would miss, or None. A cancel request or the node's shutdown ends the
        wait early."""
        deadline = time.monotonic() + self.controller_wait_s
        while (missing := self._controller_missing()) is not None:
            if time.monotonic() >= deadline or goal_handle.is_cancel_requested or self._closing:
                return missing
            time.sleep(CANCEL_CHECK_S / 2)
        return None

    def _execute(self, goal_handle):
        """Run one goal. An unexpected error aborts it with its message: left to rclpy, the goal
        would end with a default result, whose outcome 0 reads as "completed"."""
        try:
            return self._execute_goal(goal_handle)
        except Exception as exc:  # reported to the client as the abort reason, never swallowed
            self.get_logger().error(f"fold aborted by an internal error: {exc!r}")
            goal_handle.abort()
            return ExecuteFold.Result(outcome=int(FoldOutcome.ABORTED), message=f"internal error: {exc!r}")
        finally:
            with self._observed:
                self._loop, self._busy = None, False

    def _execute_goal(self, goal_handle):
        goal: ExecuteFold.Goal = goal_handle.request
        started = time.monotonic()
        feedback = ExecuteFold.Feedback(phase=int(FoldPhase.LOADING_DEMONSTRATION))
        goal_handle.publish_feedback(feedback)
        try:
            if goal.demonstration_path or goal.demonstration.keyframes:
                self._load(goal.demonstration_path, goal.demonstration)
            if self.server.demonstration is None:
                raise PolicyServerError("no demonstration: give one in the goal or load one first")
        except REQUEST_ERRORS as exc:
            self.get_logger().warning(f"fold goal refused: {one_line(str(exc))}")
            goal_handle.abort()
            return ExecuteFold.Result(outcome=int(FoldOutcome.ABORTED), message=one_line(str(exc)))
        assert self.server.home is not None  # a demonstration is loaded
        loop: FoldLoop[ClothTokens] = FoldLoop(
            FoldLoopConfig(**{**vars(self.fold_config), "max_steps": goal.max_steps or self.fold_config.max_steps}),
            self.server.home,
            self.server.expected_events,
            self._fold_clock(),
            self.server.event_schedule,
        )
        with self._observed:
            # The latest observations seed the loop (a fold may start while nothing new arrives).
            if self._home is not None:
                loop.on_home(self._home)
            if self._latest_tokens is not None:
                loop.on_tokens(self._latest_tokens, Time.from_msg(self._latest_tokens.header.stamp).nanoseconds)
            if self._state is not None:
                loop.on_state(self._state, self._state_ns)
            self._loop = loop
        return self._run(goal_handle, loop, feedback, started, self.server.fold_generator())

    def _run(
        self,
        goal_handle,
        loop: FoldLoop[ClothTokens],
        feedback: ExecuteFold.Feedback,
        started: float,
        generator: torch.Generator,
    ):
        """Drive the fold loop: wait (woken by every observation) until it asks for a query or ends."""
        controller_listens = False
        while True:
            with self._observed:
                if self._closing:  # the context is gone: the goal's end cannot reach its client any more
                    with contextlib.suppress(Exception):
                        goal_handle.abort()
                    return ExecuteFold.Result(
                        outcome=int(FoldOutcome.ABORTED), message="the policy server shut down", steps=loop.step
                    )
                decision = loop.next(self._fold_clock(), goal_handle.is_cancel_requested)
                if isinstance(decision, Wait):
                    feedback.phase = int(FoldPhase.WAITING_FOR_OBSERVATION)
                    # Woken by observations; the bound only re-checks cancellation and the timeout.
                    self._observed.wait(min(decision.timeout_s, CANCEL_CHECK_S))
                    continue
            if isinstance(decision, Finish):
                if decision.hold and loop.latest_state is not None:
                    self._hold(loop.latest_state)
                return self._finish(goal_handle, decision.outcome, decision.message, loop, started)
            tokens, state = decision.tokens, decision.arm_state
            try:
                chunk, _ = self._predict(tokens, state, self.steps_to_execute, generator)
            except REQUEST_ERRORS as exc:
                with self._observed:
                    loop.fail(f"prediction failed: {exc}")
                continue
            if not controller_listens:
                if (missing := self._await_controller(goal_handle)) is not None:
                    if not goal_handle.is_cancel_requested:  # else the loop ends the fold as canceled
                        with self._observed:
                            loop.fail(f"the controller does not listen after {self.controller_wait_s:g} s: {missing}")
                    continue
                controller_listens = True
            with self._observed:
                steer = loop.steer(chunk)
            self._command.publish(self._chunk_msg(steer.chunk, tokens.header.stamp))
            sent = self.get_clock().now().nanoseconds
            with self._observed:
                loop.chunk_sent(sent, steer.chunk.steps_to_execute, steer.chunk.step_duration, self._fold_clock())
                events = loop.events_executed
            feedback.step, feedback.phase = loop.step - 1, int(steer.phase)
            feedback.state = dual_arm_state_to_msg(state.astype(np.float32), tokens.header)
            feedback.events_executed = events
            goal_handle.publish_feedback(feedback)


def main(args: list[str] | None = None) -> int:
    return run_node(PolicyServerNode, args)
