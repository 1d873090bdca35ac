"""Dobot V4 wire format: response parsing, command formatting, the 1440-byte feedback layout."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from instant_fold_control.drivers import dobot_protocol as proto
from instant_fold_control.testing.dobot_server import LoopbackDobotServer


def test_feedback_layout_matches_the_published_offsets() -> None:
    """Offsets from the V4 real-time feedback table (port 30004)."""
    fields = proto.FEEDBACK_DTYPE.fields
    assert proto.FEEDBACK_DTYPE.itemsize == 1440
    expected = {
        "len": 0,
        "digital_outputs": 16,
        "robot_mode": 24,
        "q_target": 192,
        "q_actual": 432,
        "tool_vector_actual": 624,
        "tool_vector_target": 768,
        "enable_status": 1026,
        "error_status": 1029,
        "current_command_id": 1112,
    }
    assert {name: fields[name][1] for name in expected} == expected


def test_responses_parse_and_malformed_ones_raise() -> None:
    r = proto.parse_response("0,{5},RobotMode();")
    assert r.ok and r.values == ("5",) and r.echo == "RobotMode()"
    r = proto.parse_response("0,{300.000000,0.5,-12,180,0,0},GetPose();")
    assert [float(v) for v in r.values] == [300.0, 0.5, -12.0, 180.0, 0.0, 0.0]
    r = proto.parse_response("-10000,{},Dance();")
    assert not r.ok and r.error_id == -10000 and r.values == ()
    with pytest.raises(proto.ProtocolError, match="malformed Dobot response"):
        proto.parse_response("could not understand")


def test_servo_p_is_in_millimetres_and_refuses_non_finite() -> None:
    text = proto.servo_p(np.array([0.3, -0.05, 0.2]), np.array([180.0, 0.0, 90.0]), 0.02)
    assert text == "ServoP(300.000000,-50.000000,200.000000,180.000000,0.000000,90.000000,t=0.0200)"
    name, args = proto.parse_command(text)
    assert name == "ServoP" and len(args) == 7
    with pytest.raises(proto.ProtocolError, match="non-finite"):
        proto.servo_p(np.array([0.3, np.nan, 0.2]), np.zeros(3), 0.02)


def test_server_answers_in_the_v4_format() -> None:
    server = LoopbackDobotServer()
    try:
        assert server.handle("RobotMode()") == f"0,{{{proto.MODE_DISABLED}}},RobotMode();"
        assert server.handle("ServoP(1,2,3,4,5,6)").startswith(f"{proto.ERROR_EXECUTION_FAILED},{{}},")  # not enabled
        assert server.handle("EnableRobot()") == "0,{},EnableRobot();"
        assert server.handle("ServoP(1,2,3,4,5,6,t=0.02)") == "0,{4},ServoP(1,2,3,4,5,6,t=0.02);"  # {queue id}
        assert server.handle("GetPose()") == "0,{1.000000,2.000000,3.000000,4.000000,5.000000,6.000000},GetPose();"
        assert server.handle("Dance()") == f"{proto.ERROR_UNKNOWN_COMMAND},{{}},Dance();"
        assert server.handle("DO(1)").startswith(f"{proto.ERROR_PARAMETER_COUNT},")
        assert server.handle("ServoP(1,a,3,4,5,6)").startswith(f"{proto.ERROR_REQUIRED_TYPE - 2},")  # 2nd parameter
    finally:
        server.stop()


def test_server_packets_decode_to_its_state() -> None:
    """The server writes fields with struct at documented offsets; the driver decodes with numpy."""
    server = LoopbackDobotServer(initial_pose=[412.5, -33.0, 250.25, 179.0, 1.0, -90.0])
    try:
        server.handle("EnableRobot()")
        server.handle("DOInstant(3,1)")
        fb = proto.parse_feedback(server.packet())
        assert np.allclose(fb.position, [0.4125, -0.033, 0.25025]) and np.allclose(fb.rotation_deg, [179, 1, -90])
        assert fb.enabled and not fb.error and fb.robot_mode == proto.MODE_ENABLED
        assert fb.digital_outputs == 0b100
        assert np.allclose(fb.joints, np.deg2rad(server.model.joints_deg))
        with pytest.raises(proto.ProtocolError, match="expected 1440 bytes"):
            proto.parse_feedback(server.packet()[:-1])
        with pytest.raises(proto.ProtocolError, match="length field"):
            proto.parse_feedback(b"\x00" * 1440)
    finally:
        server.stop()


def test_packets_carry_the_test_value_and_bad_ones_are_rejected() -> None:
    """Dobot's clients drop packets whose TestValue (u64 @48) is not 0x0123456789ABCDEF."""
    server = LoopbackDobotServer()
    try:
        packet = server.packet()
        assert struct.unpack_from("<Q", packet, 48)[0] == 0x0123456789ABCDEF
        server.corrupt_next_packets(1)
        with pytest.raises(proto.ProtocolError, match="TestValue"):
            proto.parse_feedback(server.packet())
        proto.parse_feedback(server.packet())  # the next one is good again
    finally:
        server.stop()


def test_server_refuses_commands_by_state_with_the_guides_error_ids() -> None:
    server = LoopbackDobotServer()
    try:
        m = server.model
        m.powered = False
        assert server.handle("RobotMode()") == f"0,{{{proto.MODE_POWER_OFF}}},RobotMode();"
        assert server.handle("EnableRobot()") == "-4,{},EnableRobot();"
        assert server.handle("PowerOn()") == "0,{},PowerOn();"
        assert server.handle("EnableRobot()") == "0,{},EnableRobot();"
        assert server.handle("EmergencyStop(1)") == "0,{},EmergencyStop(1);"
        assert server.handle("ServoP(1,2,3,4,5,6)") == "-3,{},ServoP(1,2,3,4,5,6);"
        assert server.handle("EmergencyStop(0)") == "0,{},EmergencyStop(0);"
        assert server.handle("EnableRobot()") == "-2,{},EnableRobot();"  # alarm until cleared
        assert server.handle("ClearError()") == "0,{},ClearError();"
        assert server.handle("EnableRobot()") == "0,{},EnableRobot();"
        assert server.handle("ServoJ(0,0,90,0,-90,10,t=0.1)") == f"0,{{{m.command_id}}},ServoJ(0,0,90,0,-90,10,t=0.1);"
        assert m.joints_deg == [0.0, 0.0, 90.0, 0.0, -90.0, 10.0]
        assert proto.describe_error(-3).startswith("the emergency stop is pressed")
        assert proto.describe_error(-60001) == "optional parameter out of range #1"
    finally:
        server.stop()


def test_server_checks_servo_time_against_its_firmware() -> None:
    """t in [0.02, 3600] before 4.6.0, [0.004, 3600] from 4.6.0; no ServoP before 4.5.0."""
    for firmware, fast_ok in (("4.5.2", False), ("4.6.0", True)):
        server = LoopbackDobotServer(firmware=firmware)
        try:
            server.handle("EnableRobot()")
            assert server.handle("ServoP(1,2,3,4,5,6,t=0.02)").startswith("0,")
            fast = server.handle("ServoP(1,2,3,4,5,6,t=0.008)")
            assert fast.startswith("0,") if fast_ok else fast.startswith(f"{proto.ERROR_OPTIONAL_RANGE - 1},")
            assert server.handle("ServoP(1,2,3,4,5,6,gain=50)").startswith("-60001,")
            assert server.handle("ServoP(1,2,3,4,5,6,t=x)").startswith("-50001,")
        finally:
            server.stop()
    server = LoopbackDobotServer(firmware="4.4.0")
    try:
        server.handle("EnableRobot()")
        assert server.handle("ServoP(1,2,3,4,5,6)").startswith(f"{proto.ERROR_UNKNOWN_COMMAND},")
    finally:
        server.stop()


def test_server_not_in_tcp_mode_answers_plain_text_until_request_control() -> None:
    server = LoopbackDobotServer()
    try:
        server.model.tcp_mode = False
        assert server.handle("ClearError()") == proto.NOT_TCP_REPLY  # no ErrorID, no ';'
        assert not proto.is_response_prefix(server.handle("EnableRobot()"))
        assert server.handle("RequestControl()") == "0,{},RequestControl();"
        assert server.handle("ClearError()") == "0,{},ClearError();"
        assert proto.is_response_prefix("-6000") and proto.is_response_prefix("0,{1,2},Ro")
    finally:
        server.stop()
