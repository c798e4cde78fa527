"""motiond against Damiao motors that speak through damiao-motor 1.0.6's codec: the set-up
(PMAX/VMAX/TMAX and MIT mode read and checked, TIMEOUT written, enable — clear only after an
error) byte for
byte as the package sends it, every command within one count of the trajectory, a scaling that
disagrees refused, each state nibble a named fault, motiond killed → the TIMEOUT watchdog takes
the torque, teach-in through `motiond serve`, and the CAN-FD form (`damiao_fd`) over SLCAN."""

import pytest

import damiao_peer
import harness
from harness import FEEDBACK_MS, Play, expected, follows, settle, wait_for, write_config, write_motion

WATCHDOG_MS = harness.WATCHDOG_MS
STEP = 25.0 / 65535  # one position count at PMAX 12.5


def buses(link, protocol="damiao", vmax=(10, 10, 10)):
    rows = "".join(
        f"      {j}: {{protocol: {protocol}, id: {i}, damiao: {{kp: 40, kd: 1.5, master_id: {0x10 + i}, "
        f"p_max: 12.5, v_max: {vmax[i - 1]}, t_max: 28}}}}\n"
        for i, j in ((1, "a"), (2, "b"), (3, "v"))
    )
    return (
        f"  - name: arm\n    transport: slcan\n    device: {link.device}\n"
        f"    feedback_timeout_ms: {FEEDBACK_MS}\n    watchdog_ms: {WATCHDOG_MS}\n    joints:\n{rows}"
    )


def motors(vmax=(10.0, 10.0, 10.0)):
    return [damiao_peer.Motor(i, 0x10 + i, (12.5, vmax[i - 1], 28.0)) for i in (1, 2, 3)]


@pytest.fixture
def motion(tmp_path):
    m = tmp_path / "swing.seq"
    write_motion(m)
    return m


def close(x, y):
    """Within the one count the 16-bit position field rounds to."""
    return abs(x - y) <= 1.01 * STEP


@pytest.mark.parametrize("protocol", ["damiao", "damiao_fd"])
def test_set_up_as_the_package_sends_it_every_command_and_the_end(link, tmp_path, motion, protocol):
    bus = damiao_peer.Bus(link, motors(), fd=protocol == "damiao_fd")
    try:
        config = write_config(tmp_path, buses(link, protocol))
        play = Play(config, motion)
        assert play.wait() == 0, play.err
        settle(lambda: len(bus.frames.all()))
        assert bus.errors == [], bus.errors[:5]
        want = expected(config, motion)
        for id_, joint in ((1, "a"), (2, "b")):
            m = bus.motors[id_]
            # Enabled without a disable before (a motor still holding keeps its torque), no clear
            # without an error, never zero, held at the end (safe_state hold).
            assert m.specials == [0xFC]
            assert [(op, rid) for op, rid, _ in m.requests] == [
                (0x33, 21), (0x33, 22), (0x33, 23), (0x33, 10), (0x55, 9)
            ]
            assert m.registers[9] == WATCHDOG_MS * 20, "TIMEOUT in 50 µs units"
            follows([c["p"] for c in m.commands], [r[joint] for r in want], close)
            assert all(abs(c["kp"] - 40) < 0.13 and abs(c["kd"] - 1.5) < 0.002 for c in m.commands)
        v = bus.motors[3].commands
        assert all(c["kp"] == 0.0 for c in v), "the velocity joint runs with kp = 0"
        assert max(c["v"] for c in v) > 0.5 and abs(v[-1]["v"]) < 20 / 4095 * 1.01
    finally:
        bus.close()


def test_a_motor_whose_scaling_disagrees_is_refused_before_it_is_enabled(link, tmp_path, motion):
    # LeRobot's table gives the DM4340 VMAX 8, OpenArm's 10: motor b holds 8, the file says 10.
    bus = damiao_peer.Bus(link, motors(vmax=(10.0, 8.0, 10.0)))
    try:
        play = Play(write_config(tmp_path, buses(link)), motion)
        assert play.wait() == 1
        assert "drive_fault" in play.err and "VMAX register (RID 22) holds 8.00000" in play.err, play.err
        assert 0xFC not in bus.motors[2].specials
    finally:
        bus.close()


@pytest.mark.parametrize("state,words", [(0xB, "MOS over-temperature"), (0xE, "overload"), (0x9, "under-voltage")])
def test_each_state_nibble_is_a_named_fault(link, tmp_path, motion, state, words):
    # Long enough to be still playing when the state is reported, however late this peer saw the
    # first 50 commands (the fault ends the play).
    write_motion(motion, duration=harness.FAULT_MOTION_S)
    bus = damiao_peer.Bus(link, motors())
    try:
        play = Play(write_config(tmp_path, buses(link)), motion)
        play.until(lambda: len(bus.motors[2].commands) > 50, "50 commands")
        bus.set_state(2, state)
        assert play.wait() == 1
        assert f"drive_fault (code {state:#x}): the motor reports {words}" in play.err, play.err
    finally:
        bus.close()


def test_a_communication_lost_latched_before_is_cleared_and_the_play_runs(link, tmp_path, motion):
    bus = damiao_peer.Bus(link, motors())
    try:
        bus.set_state(1, damiao_peer.LOST_COMM)
        play = Play(write_config(tmp_path, buses(link)), motion)
        assert play.wait() == 0, play.err
        assert bus.errors == [], bus.errors[:5]
        assert bus.motors[1].specials == [0xFC, 0xFB, 0xFC], "enable, its answer an error: clear, enable"
        assert bus.motors[2].specials == [0xFC]
    finally:
        bus.close()


def test_motiond_killed_mid_motion_the_timeout_register_takes_the_torque(link, tmp_path, motion):
    bus = damiao_peer.Bus(link, motors())
    try:
        play = Play(write_config(tmp_path, buses(link)), motion)
        play.until(lambda: len(bus.motors[3].commands) > 120, "120 commands")
        play.kill()
        wait_for(lambda: all(m.timed_out_at for m in bus.motors.values()))
        for m in bus.motors.values():
            assert m.state == damiao_peer.LOST_COMM
            # Stopped by the TIMEOUT motiond set (50 µs units) after the last frame it sent.
            assert m.registers[damiao_peer.TIMEOUT] * 50e-6 == pytest.approx(WATCHDOG_MS / 1000)
    finally:
        bus.close()


def test_teach_in_sends_zero_gains_and_stiffens_where_the_hand_left_the_joint(link, tmp_path):
    bus = damiao_peer.Bus(link, motors())
    try:
        library = tmp_path / "motions"
        library.mkdir()
        write_motion(library / "swing.seq")
        config = write_config(tmp_path, buses(link), library=library)
        harness.teach_in_by_hand(bus, bus.motors[1], config, tmp_path, 2 * STEP)
        with bus.lock:
            specials = list(bus.motors[1].specials)
        assert specials == [0xFC], "teach-in changes no state: still enabled"
        assert bus.errors == [], bus.errors[:5]
    finally:
        bus.close()
