"""motiond against Robstride motors checked with the vendor's SDK, robstride-dynamics 0.0.1, over
SLCAN with 29-bit ids (`T` lines): the set-up (run_mode read, canTimeout written, enable; a stop
clearing a fault only after one) as the SDK sends it, every motion frame within a count of the SDK's, feedback fault bits
and fault frames as named faults, motiond killed → the CAN timeout stops every motor, teach-in
through `motiond serve`."""

import math

import pytest

import harness
import robstride_peer
from harness import FEEDBACK_MS, Play, expected, follows, settle, wait_for, write_config, write_motion
from robstride_peer import T

WATCHDOG_MS = harness.WATCHDOG_MS
MODEL = "rs-03"
STEP = 8 * math.pi / 65535  # one position count at ±4π


def buses(link):
    rows = "".join(
        f"      {j}: {{protocol: robstride, id: {i}, robstride: {{model: {MODEL}, kp: 60, kd: 2}}}}\n"
        for i, j in ((1, "a"), (2, "b"), (3, "v"))
    )
    return (
        f"  - name: legs\n    transport: slcan\n    device: {link.device}\n"
        f"    feedback_timeout_ms: {FEEDBACK_MS}\n    watchdog_ms: {WATCHDOG_MS}\n    joints:\n{rows}"
    )


def motors():
    return [robstride_peer.Motor(i, MODEL) for i in (1, 2, 3)]


@pytest.fixture
def motion(tmp_path):
    m = tmp_path / "swing.seq"
    write_motion(m)
    return m


def close(x, y, counts=2):
    return abs(x - y) <= counts * STEP


def test_set_up_as_the_sdk_sends_it_every_motion_frame_and_the_end(link, tmp_path, motion):
    bus = robstride_peer.Bus(link, motors())
    try:
        config = write_config(tmp_path, buses(link))
        play = Play(config, motion)
        assert play.wait() == 0, play.err
        settle(lambda: len(bus.frames.all()))
        assert bus.errors == [], bus.errors[:5]
        assert all(m.is_extended_id for _, m in bus.frames.all()), "every frame has a 29-bit id"
        want = expected(config, motion)
        for id_, joint in ((1, "a"), (2, "b")):
            m = bus.motors[id_]
            setup = [k for k in m.kinds if k != T.OPERATION_CONTROL]
            # run_mode read back, canTimeout written, enabled: never stopped first (a motor still
            # in run mode keeps its torque), held at the end (safe_state hold).
            assert setup == [T.READ_PARAMETER, T.WRITE_PARAMETER, T.ENABLE]
            assert m.params == {"run_mode": 0, "canTimeout": WATCHDOG_MS * 20}
            follows([c["p"] for c in m.commands], [r[joint] for r in want], close)
            assert all(abs(c["kp"] - 60) < 0.1 and abs(c["kd"] - 2) < 0.01 for c in m.commands)
        v = bus.motors[3].commands
        assert all(c["kp"] == 0.0 for c in v), "the velocity joint runs with kp = 0"
        assert max(c["v"] for c in v) > 0.5 and abs(v[-1]["v"]) < 2 * 50 / 32767
    finally:
        bus.close()


def test_a_fault_latched_before_is_cleared_by_a_stop_before_the_enable(link, tmp_path, motion):
    bus = robstride_peer.Bus(link, motors())
    try:
        with bus.lock:
            bus.motors[2].faults = 0x04
        play = Play(write_config(tmp_path, buses(link)), motion)
        assert play.wait() == 0, play.err
        assert bus.errors == [], bus.errors[:5]
        setup = [k for k in bus.motors[2].kinds if k != T.OPERATION_CONTROL]
        assert setup == [T.READ_PARAMETER, T.WRITE_PARAMETER, T.DISABLE, T.ENABLE]
    finally:
        bus.close()


@pytest.mark.parametrize("bit,words", [(0x04, "over-temperature"), (0x01, "under-voltage"), (0x20, "not calibrated")])
def test_feedback_fault_bits_are_named_faults(link, tmp_path, motion, bit, words):
    write_motion(motion, duration=harness.FAULT_MOTION_S)
    bus = robstride_peer.Bus(link, motors())
    try:
        play = Play(write_config(tmp_path, buses(link)), motion)
        play.until(lambda: len(bus.motors[2].commands) > 50, "50 commands")
        with bus.lock:
            bus.motors[2].faults = bit
        assert play.wait() == 1
        assert f"the motor's feedback reports {words}" in play.err, play.err
    finally:
        bus.close()


def test_a_fault_frame_is_a_named_fault(link, tmp_path, motion):
    write_motion(motion, duration=harness.FAULT_MOTION_S)
    bus = robstride_peer.Bus(link, motors())
    try:
        play = Play(write_config(tmp_path, buses(link)), motion)
        play.until(lambda: len(bus.motors[1].commands) > 50, "50 commands")
        bus.fault_frame(1, 0x08)  # over-voltage
        assert play.wait() == 1
        assert "drive_fault (code 0x8): fault frame: over-voltage" in play.err, play.err
    finally:
        bus.close()


def test_motiond_killed_mid_motion_the_can_timeout_stops_every_motor(link, tmp_path, motion):
    bus = robstride_peer.Bus(link, motors())
    try:
        play = Play(write_config(tmp_path, buses(link)), motion)
        play.until(lambda: len(bus.motors[3].commands) > 120, "120 commands")
        play.kill()
        wait_for(lambda: all(m.timed_out_at for m in bus.motors.values()))
        for m in bus.motors.values():
            assert m.mode == robstride_peer.RESET
            # Stopped by the canTimeout motiond set (50 µs units) after the last frame it sent.
            assert m.params["canTimeout"] * 50e-6 == pytest.approx(WATCHDOG_MS / 1000)
    finally:
        bus.close()


def test_teach_in_sends_zero_gains_and_stiffens_where_the_hand_left_the_joint(link, tmp_path):
    bus = robstride_peer.Bus(link, motors())
    try:
        library = tmp_path / "motions"
        library.mkdir()
        write_motion(library / "swing.seq")
        config = write_config(tmp_path, buses(link), library=library)
        harness.teach_in_by_hand(bus, bus.motors[1], config, tmp_path, 3 * STEP)
        with bus.lock:
            kinds = [k for k in bus.motors[1].kinds if k != T.OPERATION_CONTROL]
        assert kinds == [T.READ_PARAMETER, T.WRITE_PARAMETER, T.ENABLE], "still in run mode"
        assert bus.errors == [], bus.errors[:5]
    finally:
        bus.close()
