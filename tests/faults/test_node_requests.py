"""Faults: requests that killed a node, demonstrations without end, chunks read whole to be refused.

Before (issue "Faults and bad input, round two"):
- item 1: `LoadDemonstration` with a path of 5,000 characters under an allowed folder killed the
  policy server: `Path.is_file` raised OSError (ENAMETOOLONG), which was not among the errors its
  callback answered, and rclpy let it end the node. Any error a request reaches is now answered
  `success=False` with the reason and logged in one line (`instant_fold_ros.services`), in every
  service of the fold graph (the fuzz test, test_service_fuzz.py, sends each of them 200).
- item 15: a demonstration of any length was encoded (about 0.5 s per keyframe; 120 keyframes held
  the server for 55 s). One of more than `max_keyframes` (64) is refused before anything is
  encoded, an inline one before its images are even converted.
- item 16: the controller deserialised and converted a chunk message of any size (64 MB for
  2,000,000 steps: 0.3 s here, up to 0.9 s with state publishing paused on a loaded machine)
  before refusing it for having more than `safety.max_chunk_steps` steps. A message larger than
  the largest acceptable chunk is now refused from its size, before deserialisation.
"""

from __future__ import annotations

import array
import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from instant_fold import sim_fold
from instant_fold_core.contracts import KeyframeEvent
from instant_fold_core.demonstration import Demonstration
from instant_fold_policy.server import MAX_DEMONSTRATION_KEYFRAMES, DemonstrationRefused, PolicyServer
from instant_fold_ros.bringup_share import models_dir
from instant_fold_ros.services import MAX_REASON_CHARS, guarded

DEMO = (models_dir() / sim_fold.DEFAULT_DEMO).resolve()


class _Logger:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def warning(self, text: str) -> None:
        self.lines.append(text)


class _Node:
    """What `guarded` needs of a node: its logger."""

    def __init__(self) -> None:
        self.logger = _Logger()

    def get_logger(self) -> _Logger:
        return self.logger


class _Response:
    success = True
    message = ""


def _raise(exc: BaseException):
    def callback(_request: Any, _response: Any) -> Any:
        raise exc

    return callback


def test_a_guarded_service_answers_every_error_in_one_line() -> None:
    node = _Node()
    too_long = guarded(node, "svc", _raise(OSError(36, "File name too long")), (OSError,))
    answer = too_long(None, _Response())
    assert not answer.success and answer.message == "[Errno 36] File name too long"
    bug = guarded(node, "svc", _raise(IndexError("line one\n  line two")))
    answer = bug(None, _Response())
    assert not answer.success and answer.message == "internal error: IndexError: line one line two"
    huge = guarded(node, "svc", _raise(ValueError("p" * 100_000)), (ValueError,))
    assert len(huge(None, _Response()).message) == MAX_REASON_CHARS
    assert len(node.logger.lines) == 3 and all(line.startswith("svc: request refused: ") for line in node.logger.lines)
    assert all("\n" not in line for line in node.logger.lines)


class _CountingTokenizer:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, frame: Any, mask: Any) -> Any:
        self.calls += 1
        raise AssertionError("a refused demonstration must not be tokenized")


def _demonstration(keyframes: int) -> Demonstration:
    home = np.tile(np.array([[-0.2, 0.0, 0.8, 1.0], [0.2, 0.0, 0.8, 1.0]], np.float32), (keyframes, 1, 1))
    events = np.full((keyframes, 2), KeyframeEvent.MOTION, np.uint8)
    events[-1] = KeyframeEvent.TERMINAL
    return Demonstration(
        color=np.zeros((keyframes, 4, 4, 3), np.uint8),
        depth=np.ones((keyframes, 4, 4), np.float32),
        mask=np.ones((keyframes, 4, 4), bool),
        intrinsics=np.array([[4, 0, 2], [0, 4, 2], [0, 0, 1]], np.float32),
        keypose=home,
        events=events,
        frame_index=np.arange(keyframes, dtype=np.int32),
    )


def test_a_demonstration_longer_than_the_bound_is_refused_before_encoding() -> None:
    tokenize = _CountingTokenizer()
    server = PolicyServer(runner=None, tokenize=tokenize)
    assert server.max_keyframes == MAX_DEMONSTRATION_KEYFRAMES == 64
    with pytest.raises(
        DemonstrationRefused, match=r"65 keyframes refused: more than the server's max_keyframes \(64\)"
    ):
        server.load_demonstration(_demonstration(MAX_DEMONSTRATION_KEYFRAMES + 1))
    assert tokenize.calls == 0 and server.demonstration is None


def test_a_chunk_message_larger_than_the_largest_chunk_is_measured_exactly() -> None:
    from rclpy.serialization import serialize_message

    from instant_fold_control.controller_node import FRAME_ID_ALLOWANCE, max_chunk_message_bytes
    from instant_fold_interfaces.msg import ActionChunk
    from instant_fold_ros.conversions import make_header

    def size(steps: int, frame_id: str = "camera_color_optical_frame") -> int:
        msg = ActionChunk(
            header=make_header(frame_id),
            horizon=steps,
            positions=array.array("f", bytes(24 * steps)),
            openness=array.array("f", bytes(8 * steps)),
            has_keypose=True,
        )
        return len(serialize_message(msg))

    bound = max_chunk_message_bytes(64)
    # the size bound allows the longest frame id; a chunk longer than the bound with a short frame id
    # still is refused for its length, after a deserialisation of at most this size
    assert size(64) <= size(64, "f" * FRAME_ID_ALLOWANCE) == bound < size(65, "f" * FRAME_ID_ALLOWANCE)
    assert size(2_000_000) > 25_000 * bound


@pytest.mark.ros
def test_the_policy_server_answers_unusable_paths_and_overlong_demonstrations(tmp_path: Path, ros_env) -> None:
    """Over DDS, on a server that takes at most 2 keyframes: a path too long for the file system
    under its root, the bundled demonstration (13 keyframes) and an inline one of 3 keyframes
    without images are each refused with the reason; the server answers on and stops cleanly."""
    from policy_server_rig import policy_server_rig

    from instant_fold_interfaces.msg import Demonstration as DemonstrationMsg
    from instant_fold_interfaces.msg import Keyframe
    from instant_fold_interfaces.srv import LoadDemonstration
    from instant_fold_ros.standins.process_runner import ProcessRunner
    from instant_fold_ros.testing import TopicProbe

    graph = policy_server_rig(tmp_path, [tmp_path, DEMO.parent], max_keyframes=2).graph
    requests = {
        "long_path": LoadDemonstration.Request(path=str(tmp_path / ("a" * 5000))),
        "long_file": LoadDemonstration.Request(path=str(DEMO)),
        "long_inline": LoadDemonstration.Request(demonstration=DemonstrationMsg(keyframes=[Keyframe()] * 3)),
        "after": LoadDemonstration.Request(path=str(tmp_path / "missing.safetensors")),
    }
    answers: dict = {}
    log = io.StringIO()
    with TopicProbe(ros_env) as probe:
        runner = ProcessRunner(graph, env=ros_env, output=log)
        runner.start()
        try:
            for name, request in requests.items():
                answers[name] = probe.call(LoadDemonstration, "policy/load_demonstration", request, 120.0)
        finally:
            code = runner.shutdown()
    assert code == 0 and all(answers.values()), (answers, log.getvalue())
    assert not any(answer.success for answer in answers.values())
    assert "File name too long" in answers["long_path"].message
    assert "13 keyframes refused: more than the server's max_keyframes (2)" in answers["long_file"].message
    assert "3 keyframes refused" in answers["long_inline"].message  # before: "carries no images" (converted)
    assert "does not exist" in answers["after"].message
    assert log.getvalue().count("policy/load_demonstration: request refused:") == 4, log.getvalue()
    assert "Traceback" not in log.getvalue()


@pytest.mark.ros
def test_the_controller_refuses_an_oversized_chunk_before_deserialising_it(tmp_path: Path, ros_env) -> None:
    """Over DDS on two loopback Dobots: a 50,000-step chunk is refused from its size (the line says
    so), and the controller goes on publishing state and taking chunks within the bound."""
    from loopback_controller import run_script
    from test_estop_starvation import _chunk_spec

    script = [{"delay_s": 0.3, "chunk": _chunk_spec(50_000)}, {"delay_s": 0.3, "chunk": _chunk_spec(8)}]
    run = run_script(tmp_path, ros_env, script, probe_timeout_s=60.0)
    assert run.probe_code == 0 and run.node_code == 0 and run.report is not None, run.describe()
    refusals = [line for line in run.log.splitlines() if "chunk refused" in line]
    assert len(refusals) == 1 and "not deserialised" in refusals[0], run.log
    assert "safety:refused_long" in refusals[0]  # counted as before, with the chunks too long
    last_chunk = run.report["actions"][-1]["t"]
    assert any(state["t"] > last_chunk for state in run.report["states"]), "state publishing goes on"
