"""The Dobot driver against the protocol-faithful loopback controller (real TCP sockets)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest

from instant_fold_control.drivers.base import DriverConnectionError, DriverError
from instant_fold_control.drivers.dobot import DashboardClient, DobotDriver, DobotParams
from instant_fold_control.testing.dobot_server import LoopbackDobotServer

INITIAL_POSE = [350.0, 20.0, 180.0, 180.0, 0.0, 45.0]  # mm, deg


@pytest.fixture
def server() -> Iterator[LoopbackDobotServer]:
    with LoopbackDobotServer(initial_pose=INITIAL_POSE) as s:
        yield s


def _driver(server: LoopbackDobotServer, **params) -> DobotDriver:
    return DobotDriver("left", DobotParams.from_mapping("left", server.driver_params() | params))


def _wait_for(predicate, timeout: float = 3.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False


def test_connects_enables_and_reads_the_pose(server: LoopbackDobotServer) -> None:
    driver = _driver(server)
    driver.connect()
    try:
        assert [c.name for c in server.commands[:2]] == ["ClearError", "EnableRobot"]
        assert server.model.enabled
        state = driver.read_state()
        assert np.allclose(state.position, [0.35, 0.02, 0.18])
        assert state.joints is not None and np.allclose(state.joints, np.deg2rad(server.model.joints_deg))
    finally:
        driver.close()


def test_streams_servo_p_at_the_requested_rate_and_reaches_the_target(server: LoopbackDobotServer) -> None:
    driver = _driver(server, servo_rate_hz=50.0)
    driver.connect()
    try:
        target = np.array([0.37, 0.0, 0.2])
        driver.command_cartesian(target)
        time.sleep(1.2)
        # feedback parsed into the commanded pose (the loopback arm follows ServoP exactly)
        assert np.allclose(driver.read_state().position, target, atol=1e-6)
        servo = server.recorded("ServoP")
        intervals = np.diff([c.time for c in servo])
        assert len(servo) >= 40
        assert np.median(intervals) == pytest.approx(1 / 50.0, rel=0.25)  # server-side timestamps
        # fixed orientation: the one measured at connect, since rotation_deg is not configured
        assert all([float(a) for a in c.args[3:6]] == INITIAL_POSE[3:] for c in servo)
        assert servo[-1].args[6] == "t=0.0200"
    finally:
        driver.close()


def test_stream_interpolates_between_targets(server: LoopbackDobotServer) -> None:
    driver = _driver(server, servo_rate_hz=100.0, firmware_version="4.6.5")  # t = 0.01 s needs >= 4.6.0
    driver.connect()
    try:
        start = driver.read_state().position
        for i in range(1, 11):  # a 10 Hz controller moving 1 cm per command
            driver.command_cartesian(start + np.array([0.01 * i, 0.0, 0.0]))
            time.sleep(0.1)
        xs = np.array([float(c.args[0]) for c in server.recorded("ServoP")]) / 1000.0
        # many distinct intermediate points, monotonic, no step larger than one command's 1 cm
        assert len(np.unique(np.round(xs, 5))) > 30
        assert (np.diff(xs) >= -1e-9).all() and np.diff(xs).max() <= 0.0101
    finally:
        driver.close()


def test_hold_settles_at_the_last_target(server: LoopbackDobotServer) -> None:
    driver = _driver(server)
    driver.connect()
    try:
        target = driver.read_state().position + np.array([0.0, 0.02, 0.0])
        driver.command_cartesian(target)
        driver.hold()  # no more targets: finish the ramp, then stay
        time.sleep(0.4)
        assert np.allclose(driver.read_state().position, target, atol=1e-6)
        n = len(server.recorded("ServoP"))
        time.sleep(0.2)
        assert len(server.recorded("ServoP")) > n  # still streaming (holding), at the same pose
        assert np.allclose(np.array(server.model.pose[:3]) / 1000, target, atol=1e-6)
    finally:
        driver.close()


def test_gripper_on_tool_output_and_on_digital_output(server: LoopbackDobotServer) -> None:
    driver = _driver(server, gripper_io="tool_do", gripper_index=2)
    driver.connect()
    try:
        driver.set_gripper(0.0)
        driver.set_gripper(0.0)  # unchanged: not sent again
        driver.set_gripper(1.0)
        assert [c.args for c in server.recorded("ToolDOInstant")] == [["2", "1"], ["2", "0"]]
    finally:
        driver.close()
    driver = _driver(server, gripper_io="do", gripper_index=3, gripper_close_level=1)
    driver.connect()
    try:
        driver.set_gripper(0.0)
        assert _wait_for(lambda: driver.read_state().openness == 0.0)  # read back from the DO bits
        assert server.model.digital_outputs & 0b100
    finally:
        driver.close()


def test_non_finite_targets_never_reach_the_server(server: LoopbackDobotServer) -> None:
    driver = _driver(server)
    driver.connect()
    try:
        with pytest.raises(DriverError, match="refusing to send"):
            driver.command_cartesian(np.array([0.3, np.nan, 0.2]))
        time.sleep(0.2)
        assert all(np.isfinite([float(a) for a in c.args[:6]]).all() for c in server.recorded("ServoP"))
    finally:
        driver.close()


def test_stop_halts_the_stream_and_commanding_resumes_it(server: LoopbackDobotServer) -> None:
    driver = _driver(server)
    driver.connect()
    try:
        time.sleep(0.2)
        driver.stop()
        assert server.recorded("Stop")
        n = len(server.recorded("ServoP"))
        time.sleep(0.3)
        assert len(server.recorded("ServoP")) <= n + 1
        driver.command_cartesian(driver.read_state().position)
        assert _wait_for(lambda: len(server.recorded("ServoP")) > n + 5)
    finally:
        driver.close()


@contextlib.contextmanager
def _dashboard_answering(reply: bytes, response_timeout_s: float) -> Iterator[DashboardClient]:
    """A client connected to a dashboard peer that answers the first request with `reply`."""
    listener = socket.create_server(("127.0.0.1", 0))

    def answer() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(4096)
            conn.sendall(reply)
            conn.recv(4096)

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    client = DashboardClient("left arm", "127.0.0.1", listener.getsockname()[1], 1.0, response_timeout_s)
    client.connect()
    try:
        yield client
    finally:
        client.close()
        listener.close()
        thread.join(timeout=2)


def test_answers_to_another_command_are_detected() -> None:
    """A desynchronised dashboard stream (answer for a different command) is an error, not a success."""
    match = r"sent ClearError\(\) but the controller answered 'EnableRobot\(\)'"
    with _dashboard_answering(b"0,{},EnableRobot();", 1.0) as client, pytest.raises(DriverError, match=match):
        client.request("ClearError()")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_no_controller_gives_a_clear_error() -> None:
    port = _free_port()
    driver = DobotDriver("right", DobotParams(host="127.0.0.1", dashboard_port=port, feedback_port=port))
    start = time.monotonic()
    with pytest.raises(
        DriverConnectionError, match=rf"right arm .*cannot reach the Dobot dashboard port at 127.0.0.1:{port}"
    ):
        driver.connect()
    assert time.monotonic() - start < 3.0
    driver.close()


def test_losing_the_controller_is_reported(server: LoopbackDobotServer) -> None:
    driver = _driver(server, feedback_timeout_s=0.2)
    driver.connect()
    try:
        server.stop()
        assert _wait_for(lambda: _raises(driver.read_state, DriverConnectionError))
        with pytest.raises(DriverConnectionError):
            driver.command_cartesian(np.array([0.3, 0.0, 0.2]))
    finally:
        driver.close()


def _raises(fn, exc_type) -> bool:
    try:
        fn()
    except exc_type:
        return True
    return False


def test_controller_not_in_tcp_mode_is_named_not_timed_out(server: LoopbackDobotServer) -> None:
    """Item 5: the bare `Control Mode Is Not Tcp` answer says what to do, not '... timed out'."""
    server.model.tcp_mode = False
    driver = _driver(server, response_timeout_s=30.0)  # a wait for ';' would end in a timeout, not this error
    with pytest.raises(DriverError, match=r"ClearError\(\).*not in TCP/IP mode.*DobotStudio Pro") as info:
        driver.connect()
    assert not isinstance(info.value, DriverConnectionError)
    driver.close()


def test_other_plain_replies_are_reported_verbatim() -> None:
    match = r"answered ClearError\(\) with plain text 'Robot is busy'"
    with _dashboard_answering(b"Robot is busy", 30.0) as client, pytest.raises(DriverError, match=match):
        client.request("ClearError()")


def test_refused_commands_name_the_controller_state(server: LoopbackDobotServer) -> None:
    server.model.powered = False
    driver = _driver(server)
    with pytest.raises(DriverError, match=r"EnableRobot\(\) failed with ErrorID -4 \(the arm is powered off"):
        driver.connect()
    driver.close()


def test_servo_time_outside_the_firmware_range_is_refused_at_configuration() -> None:
    """Item 6: before 4.6.0 ServoP t >= 0.02 s (<= 50 Hz); unknown firmware gets that bound; no ServoP < 4.5.0."""
    with pytest.raises(DriverError, match=r"ServoP t = 0.0100 s .* below the 0.02 s .*firmware_version not set"):
        DobotParams.from_mapping("left", {"host": "x", "servo_rate_hz": 100.0})
    with pytest.raises(DriverError, match=r"below the 0.02 s that firmware 4.5.2 accepts; stream at <= 50 Hz"):
        DobotParams.from_mapping("left", {"host": "x", "servo_rate_hz": 125.0, "firmware_version": "4.5.2"})
    with pytest.raises(DriverError, match=r"servo_time_s"):
        DobotParams.from_mapping("left", {"host": "x", "servo_time_s": 0.01, "firmware_version": "4.5.2"})
    with pytest.raises(DriverError, match=r"4.4.1 has no ServoP \(needs firmware >= 4.5.0\)"):
        DobotParams.from_mapping("left", {"host": "x", "firmware_version": "4.4.1"})
    with pytest.raises(DriverError, match=r"firmware_version: not a firmware version"):
        DobotParams.from_mapping("left", {"host": "x", "firmware_version": "new"})
    assert DobotParams.from_mapping("left", {"host": "x", "servo_rate_hz": 125.0, "firmware_version": "V4.6.5.0"})
    assert DobotParams.from_mapping("left", {"host": "x"}).servo_time == pytest.approx(0.02)


def test_a_firmware_that_rejects_servo_p_is_reported_with_the_reason() -> None:
    """A wrong firmware_version in the config: the controller's -60001 answer names the t range."""
    with LoopbackDobotServer(initial_pose=INITIAL_POSE, firmware="4.5.2") as server:
        driver = _driver(server, servo_rate_hz=100.0, firmware_version="4.6.0")
        driver.connect()
        try:
            assert _wait_for(lambda: _raises(driver.read_state, DriverError))
            with pytest.raises(DriverError, match=r"ErrorID -60001 .*before 4.6.0 t must be >= 0.02 s"):
                driver.read_state()
        finally:
            driver.close()


def test_speed_factor_is_refused_because_it_does_not_limit_servo_p() -> None:
    """Item 7: the only speed limit that applies to a ServoP stream is the point spacing (safety.max_speed)."""
    with pytest.raises(DriverError, match=r"speed_factor: not supported.*safety.max_speed"):
        DobotParams.from_mapping("left", {"host": "x", "speed_factor": 10})


def test_malformed_feedback_packets_are_skipped_and_counted(server: LoopbackDobotServer) -> None:
    """Item 8: a bad packet is skipped and counted; only a feedback gap longer than the timeout is an error."""
    driver = _driver(server, feedback_timeout_s=0.3)
    driver.connect()
    try:
        server.corrupt_next_packets(5)
        assert _wait_for(lambda: driver.malformed_packets == 5)
        target = driver.read_state().position + np.array([0.01, 0.0, 0.0])
        driver.command_cartesian(target)
        assert _wait_for(lambda: np.allclose(driver.read_state().position, target, atol=1e-6))
        server.corrupt_next_packets(10_000)  # 80 s of bad packets: the feedback timeout decides
        assert _wait_for(lambda: _raises(driver.read_state, DriverConnectionError))
        with pytest.raises(DriverConnectionError, match=r"malformed packets skipped, last: .*TestValue"):
            driver.read_state()
    finally:
        driver.close()


def test_bad_parameters_name_the_field() -> None:
    with pytest.raises(DriverError, match=r"arms.left.driver.servo_rate_hz: must be in \[33.0, 125.0\]"):
        DobotParams.from_mapping("left", {"host": "x", "servo_rate_hz": 20})
    with pytest.raises(DriverError, match=r"arms\.left\.driver\.host: required"):
        DobotParams.from_mapping("left", {})
    with pytest.raises(
        DriverError, match=r"Dobot parameters: arms.left.driver: unknown keys \['arms.left.driver.speed'\]"
    ):
        DobotParams.from_mapping("left", {"host": "x", "speed": 1})
    with pytest.raises(DriverError, match="gripper_io"):
        DobotParams.from_mapping("left", {"host": "x", "gripper_io": "vacuum"})
