"""motiond against MIT-mode motors decoded with the motor firmware's reference formulas: enter
motor mode, every command (position within one 16-bit step of the trajectory, gains, kp = 0 on
the velocity joint), the configurable reply id, and what a kill leaves behind (these firmwares
have no CAN timeout in MIT mode: docs/src/drive-families.md says so)."""

import time

import pytest

import mit_peer
from harness import FEEDBACK_MS, Play, expected, follows, settle, write_config, write_motion

STEP = 25.0 / 65535  # one position count in the Mini Cheetah range


def buses(link, reply_id=None):
    rid = f", reply_id: {reply_id}" if reply_id is not None else ""
    return (
        f"  - name: legs\n    transport: slcan\n    device: {link.device}\n"
        f"    feedback_timeout_ms: {FEEDBACK_MS}\n    joints:\n"
        f"      a: {{protocol: mit, id: 1, mit: {{kp: 40, kd: 1.5{rid}}}}}\n"
        f"      b: {{protocol: mit, id: 2, mit: {{kp: 40, kd: 1.5{rid}}}}}\n"
        f"      v: {{protocol: mit, id: 3, mit: {{kp: 40, kd: 1.5{rid}}}}}\n"
    )


@pytest.fixture
def motion(tmp_path):
    m = tmp_path / "swing.seq"
    write_motion(m)
    return m


def close(x, y):
    """Within the one count the 16-bit position field rounds to."""
    return abs(x - y) <= 1.01 * STEP


@pytest.mark.parametrize("reply_id", [None, 0x10])
def test_motor_mode_every_command_and_the_reply_id(link, tmp_path, motion, reply_id):
    bus = mit_peer.Bus(link, [1, 2, 3], reply_id=reply_id or 0)
    try:
        config = write_config(tmp_path, buses(link, reply_id))
        play = Play(config, motion)
        assert play.wait() == 0, play.err
        settle(lambda: len(bus.frames.all()))
        want = expected(config, motion)
        for id_, joint in ((1, "a"), (2, "b")):
            m = bus.motors[id_]
            assert m.special == [0xFC], "enter motor mode once; never zero"
            follows([c["p"] for c in m.commands], [r[joint] for r in want], close)
            assert all(abs(c["kp"] - 40) < 0.13 and abs(c["kd"] - 1.5) < 0.002 for c in m.commands)
        v = bus.motors[3].commands
        assert all(c["kp"] == 0.0 for c in v), "the velocity joint runs with kp = 0"
        assert max(c["v"] for c in v) > 0.5 and abs(v[-1]["v"]) < 65 / 4095 * 1.01
    finally:
        bus.close()


def test_replies_from_another_id_than_configured_are_not_taken(link, tmp_path, motion):
    bus = mit_peer.Bus(link, [1, 2, 3], reply_id=0)
    try:
        # Never enabled: the default timeout says so.
        play = Play(write_config(tmp_path, buses(link, reply_id=0x10), enable_timeout_s=2), motion)
        assert play.wait() == 1
        assert "enable_timeout" in play.err, play.err
    finally:
        bus.close()


def test_mit_motors_have_no_drive_side_watchdog_so_a_kill_leaves_the_last_command(link, tmp_path, motion):
    bus = mit_peer.Bus(link, [1, 2, 3])
    try:
        play = Play(write_config(tmp_path, buses(link)), motion)
        play.until(lambda: len(bus.motors[3].commands) >= 120, "120 commands")
        play.kill()
        settle(lambda: len(bus.frames.all()))  # what was on its way arrives
        last = bus.motors[3].commands[-1]
        time.sleep(0.3)
        # Nothing in the protocol stops it: the motor still runs its last velocity. This is the
        # the documented warning, not a feature.
        assert bus.motors[3].enabled and bus.motors[3].commands[-1] == last
        assert abs(last["v"]) > 0.05
    finally:
        bus.close()
