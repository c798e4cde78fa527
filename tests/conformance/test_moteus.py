"""motiond against moteus controllers with mjbots' own `moteus` package, over SLCAN in CAN-FD:
every frame decoded with moteus' parser and equal byte for byte to what moteus' Controller builds
for the same values (stop, position mode with the watchdog 0x027, the query), positions in
output revolutions along the trajectory, the velocity joint in velocity control (position "use
the current one"), a fault code named, a controller that stops answering, and motiond killed
mid-motion → every controller's watchdog puts it in mode timeout."""

import math

import pytest

import harness
import moteus_peer
from harness import Play, expected, follows, settle, wait_for, write_config, write_motion

WATCHDOG_MS = harness.WATCHDOG_MS
# 100 Hz rather than the harness's 250: a tick's three CAN-FD commands are up to 320 SLCAN
# characters, and the Python peer (moteus' parser and Controller for every frame) falls behind
# on a loaded machine until the pseudo-terminal fills and motiond's send is refused (queue_full).
# The frames, not the rate, are what is checked here; the budget is tests/bus_moteus.rs'.
RATE_HZ = 100


def buses(link, feedback_ms=harness.FEEDBACK_MS, extra=""):
    return (
        f"  - name: legs\n    transport: slcan\n    device: {link.device}\n"
        f"    data_bitrate: 5000000\n    feedback_timeout_ms: {feedback_ms}\n"
        f"    watchdog_ms: {WATCHDOG_MS}\n    joints:\n"
        f"      a: {{protocol: moteus, id: 1{extra}}}\n"
        f"      b: {{protocol: moteus, id: 2, direction: -1{extra}}}\n"
        f"      v: {{protocol: moteus, id: 3{extra}}}\n"
    )


@pytest.fixture
def motion(tmp_path):
    m = tmp_path / "swing.seq"
    write_motion(m)
    return m


def revs(sign, rad):
    return sign * rad / (2 * math.pi)


def close(x, y, tol=2e-6):
    """Equal as a float32 carries it."""
    return abs(x - y) <= tol * max(1.0, abs(y))


def test_every_frame_is_moteus_own_and_the_motion_is_followed(link, tmp_path, motion):
    bus = moteus_peer.Bus(link, [1, 2, 3])
    try:
        config = write_config(tmp_path, buses(link, extra=", moteus: {kd_scale: 0.8}"), rate_hz=RATE_HZ)
        play = Play(config, motion)
        assert play.wait() == 0, play.err
        settle(lambda: len(bus.frames.all()))
        assert bus.errors == [], bus.errors[:5]
        want = expected(config, motion)
        for id_, joint, sign in ((1, "a", 1.0), (2, "b", -1.0)):
            s = bus.servos[id_]
            assert s.stops >= 1, "stopped (faults cleared) before position mode"
            c = s.commands
            assert all(w[moteus_peer.WATCHDOG] == pytest.approx(WATCHDOG_MS / 1000) for w in c)
            assert all(w[moteus_peer.KD_SCALE] == pytest.approx(0.8) for w in c)
            assert moteus_peer.KP_SCALE not in c[0], "kp scale 1: not sent"
            follows([w[moteus_peer.CMD_POSITION] for w in c], [revs(sign, r[joint]) for r in want], close)
        v = bus.servos[3].commands
        assert all(math.isnan(w[moteus_peer.CMD_POSITION]) for w in v), "velocity control"
        assert max(w[moteus_peer.CMD_VELOCITY] for w in v) > 0.05
        assert abs(v[-1][moteus_peer.CMD_VELOCITY]) < 1e-6
    finally:
        bus.close()


def test_a_fault_code_is_named(link, tmp_path, motion):
    write_motion(motion, duration=harness.FAULT_MOTION_S)
    bus = moteus_peer.Bus(link, [1, 2, 3])
    try:
        play = Play(write_config(tmp_path, buses(link), rate_hz=RATE_HZ), motion)
        play.until(lambda: len(bus.servos[2].commands) > 50, "50 commands")
        with bus.lock:
            bus.servos[2].inject = 39
        assert play.wait() == 1
        assert "drive_fault on b (code 0x27)" in play.err, play.err
        assert "outside limit" in play.err, play.err
    finally:
        bus.close()


def test_a_controller_that_stops_answering_is_feedback_missing(link, tmp_path, motion):
    write_motion(motion, duration=harness.FAULT_MOTION_S)
    bus = moteus_peer.Bus(link, [1, 2, 3])
    try:
        play = Play(write_config(tmp_path, buses(link, feedback_ms=200), rate_hz=RATE_HZ), motion)
        play.until(lambda: len(bus.servos[1].commands) > 50, "50 commands")
        with bus.lock:
            bus.servos[1].silent = True
        assert play.wait() == 1
        assert "feedback_missing on a" in play.err, play.err
    finally:
        bus.close()


def test_a_killed_motiond_leaves_every_controller_to_its_watchdog(link, tmp_path, motion):
    bus = moteus_peer.Bus(link, [1, 2, 3])
    try:
        play = Play(write_config(tmp_path, buses(link), rate_hz=RATE_HZ), motion)
        play.until(lambda: len(bus.servos[3].commands) > 60, "60 commands")
        play.kill()
        # Only a finite 0x027 in every command times a controller out: the peer enforces it.
        wait_for(lambda: all(s.mode == moteus_peer.TIMEOUT for s in bus.servos.values()))
        assert all(s.timeouts == 1 for s in bus.servos.values())
    finally:
        bus.close()
