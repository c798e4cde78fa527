"""motiond against DYNAMIXEL servos whose every packet is checked with dynamixel-sdk's CRC and
unstuffing: set-up order, every goal, EEPROM written only when it differs, a hardware error
alert → reboot → re-enable, motiond killed mid-motion → the Bus Watchdog stops the servos, and
a LeRobot calibration read back before anything is written (a servo calibrated otherwise is
refused, named)."""

import json
import math

import pytest

import dynamixel_peer
from dynamixel_peer import ADDR, REBOOT, SYNC_READ, SYNC_WRITE, Servo
import harness
from harness import FEEDBACK_MS, Play, expected, follows, settle, wait_for, write_config, write_motion

WATCHDOG_MS = harness.WATCHDOG_MS
PER_RAD = 4096 / (2 * math.pi)


def buses(link):
    return (
        f"  - name: servos\n    transport: serial\n    device: {link.device}\n"
        "    baud: 4000000\n    protocol: dynamixel\n"
        f"    feedback_timeout_ms: {FEEDBACK_MS}\n    watchdog_ms: {WATCHDOG_MS}\n"
        "    joints:\n      a: {id: 1}\n      b: {id: 2, direction: -1}\n      v: {id: 3}\n"
    )


@pytest.fixture
def rig(link, tmp_path):
    chain = dynamixel_peer.Chain(link, [Servo(1), Servo(2), Servo(3)])
    motion = tmp_path / "swing.seq"
    write_motion(motion)
    config = write_config(tmp_path, buses(link))
    yield chain, motion, config
    chain.close()


def writes(chain, addr):
    """(id, value bytes) of each Sync Write item at `addr`, in order."""
    out = []
    for _, (inst, _, p) in chain.packets.all():
        if inst == SYNC_WRITE and (p[0] | p[1] << 8) == addr:
            size = p[2] | p[3] << 8
            out += [(p[k], p[k + 1 : k + 1 + size]) for k in range(4, len(p), size + 1)]
    return out


def test_set_up_every_goal_and_the_end_of_a_play(rig):
    chain, motion, config = rig
    play = Play(config, motion)
    assert play.wait() == 0, play.err
    settle(lambda: len(chain.packets.all()))
    assert chain.errors == [], chain.errors[:5]
    want = expected(config, motion)
    follows(chain.servos[1].goals, [round(PER_RAD * r["a"]) + 2048 for r in want])
    follows(chain.servos[2].goals, [round(-PER_RAD * r["b"]) + 2048 for r in want])
    v = chain.servos[3].goals
    assert max(v) > 20 and v[-1] == 0, "the velocity servo moved and ended at rest"
    # Set-up: torque off and the watchdog cleared, then the modes read, velocity mode written
    # for `v` only (the others are in position mode already), torque on, watchdog armed.
    seq = [(i, p[0] | p[1] << 8) for _, (i, _, p) in chain.packets.all() if i in (SYNC_WRITE, SYNC_READ)]
    first = lambda item: seq.index(item)  # noqa: E731
    assert first((SYNC_WRITE, ADDR["torque"])) < first((SYNC_READ, ADDR["mode"]))
    assert first((SYNC_WRITE, ADDR["watchdog"])) < first((SYNC_READ, ADDR["mode"]))
    assert writes(chain, ADDR["mode"]) == [(3, b"\x01")]
    torque = writes(chain, ADDR["torque"])
    assert [t for t in torque if t[1] == b"\x01"] == [(1, b"\x01"), (2, b"\x01"), (3, b"\x01")]
    # 300 ms = fifteen 20 ms units, after the clear.
    assert writes(chain, ADDR["watchdog"]) == [(i, b"\x00") for i in (1, 2, 3)] + [
        (i, bytes([WATCHDOG_MS // 20])) for i in (1, 2, 3)
    ]
    # Shutdown of a play that holds: torque stays on.
    assert all(s.torque == 1 for s in chain.servos.values())


def test_eeprom_is_written_only_when_it_differs(rig):
    chain, motion, config = rig
    for _ in range(2):
        assert Play(config, motion).wait() == 0
    assert [s.mode_writes for s in chain.servos.values()] == [0, 0, 1]


def test_a_hardware_alert_faults_then_the_servo_is_rebooted_and_re_enabled(rig):
    chain, motion, config = rig
    # Long enough to be still playing when the alert comes, however late this peer saw the first
    # 50 goals (the alert ends the play).
    long = motion.with_name("long.seq")
    write_motion(long, duration=harness.FAULT_MOTION_S)
    play = Play(config, long)
    play.until(lambda: len(chain.servos[2].goals) > 50, "50 goals")
    chain.alert(2)
    assert play.wait() == 1
    assert "drive_fault on b (code 0x80)" in play.err, play.err
    # A new play (as clear-fault + enable would): servo 2 is rebooted, then everything enables.
    before = len(chain.servos[2].goals)
    play = Play(config, motion)
    assert play.wait() == 0, play.err
    assert chain.servos[2].reboots == 1
    assert [id_ for _, (i, id_, _) in chain.packets.all() if i == REBOOT] == [2]
    assert len(chain.servos[2].goals) > before + 100
    assert chain.errors == []


def test_motiond_killed_mid_motion_the_bus_watchdog_stops_the_servos(rig):
    chain, motion, config = rig
    play = Play(config, motion)
    play.until(lambda: len(chain.servos[3].goals) > 120, "120 goals")
    assert abs(chain.servos[3].goal_vel) > 20, "the velocity servo is moving"
    play.kill()
    wait_for(lambda: all(s.watchdog_expired_at for s in chain.servos.values()))
    for s in chain.servos.values():
        assert s.goal_vel == 0 and s.watchdog == -1
        # Stopped the Bus Watchdog motiond set (WATCHDOG_MS in 20 ms units) after its last packet.
        assert s.watchdog_expired_after * 20 == WATCHDOG_MS
    assert chain.servos[3].velocity_when_stopped != 0
    # Every packet whole up to the kill: none cut short.
    assert chain.errors == []


# A LeRobot calibration of the position servos a (id 1) and b (id 2): b reversed in the servo
# (LeRobot's DYNAMIXEL bus writes drive_mode to Drive_Mode), ranges that hold the rig's ±2.5 rad.
CALIBRATION = {
    "a": {"id": 1, "drive_mode": 0, "homing_offset": -1019, "range_min": 300, "range_max": 3800},
    "b": {"id": 2, "drive_mode": 1, "homing_offset": 1106, "range_min": 296, "range_max": 3796},
}
POSITION_JOINTS = ("a", "b")


def calibrated_rig(link, tmp_path, servos):
    """motiond playing the position joints on DYNAMIXEL servos `servos`, its bus naming the
    calibration file; the chain, the play."""
    (tmp_path / "arm.json").write_text(json.dumps(CALIBRATION))
    bus = (
        f"  - name: servos\n    transport: serial\n    device: {link.device}\n"
        f"    baud: 4000000\n    protocol: dynamixel\n    feedback_timeout_ms: {FEEDBACK_MS}\n"
        "    lerobot_calibration: arm.json\n"
        "    joints:\n      a: {id: 1}\n      b: {id: 2}\n"
    )
    motion = tmp_path / "swing.seq"
    write_motion(motion, joints=POSITION_JOINTS)
    config = write_config(tmp_path, bus, joints=POSITION_JOINTS, skel="servos.skel")
    chain = dynamixel_peer.Chain(link, servos)
    return chain, Play(config, motion)


def as_calibrated(name, position, **changed):
    m = dict(CALIBRATION[name], **changed)
    return Servo(
        m["id"],
        position,
        drive_mode=m["drive_mode"],
        homing_offset=m["homing_offset"],
        limits=(m["range_min"], m["range_max"]),
    )


def reads_and_writes(chain):
    return [
        (i, p[0] | p[1] << 8, p[2] | p[3] << 8) for _, (i, _, p) in chain.packets.all() if i in (SYNC_WRITE, SYNC_READ)
    ]


def test_calibrated_servos_are_read_back_before_anything_is_written(link, tmp_path):
    """LeRobot's `is_calibrated` (DYNAMIXEL): Drive_Mode, Homing_Offset and the position limits
    read back and equal to the file's before torque goes on; then the play as usual."""
    chain, play = calibrated_rig(link, tmp_path, [as_calibrated("a", 2050), as_calibrated("b", 2046)])
    try:
        assert play.wait() == 0, play.err
    finally:
        chain.close()
    assert chain.errors == [], chain.errors[:5]
    seq = reads_and_writes(chain)
    # Each read with its neighbour, so that no reply is as long as an Operating Mode's or a
    # position's: Drive_Mode+Operating_Mode, Homing_Offset+Moving_Threshold, Velocity_Limit+the
    # position limits — for the calibrated servos, the first packets on the line.
    assert seq[:3] == [(SYNC_READ, 10, 2), (SYNC_READ, 20, 8), (SYNC_READ, 44, 12)], seq[:5]
    first_write = next(k for k, (i, _, _) in enumerate(seq) if i == SYNC_WRITE)
    assert first_write >= 3 and seq[first_write][1] == ADDR["torque"]
    assert all(s.goals for s in chain.servos.values())


@pytest.mark.parametrize(
    "changed, words",
    [
        ({"homing_offset": 806}, "its Homing_Offset reads 806, the bus's LeRobot calibration file says 1106"),
        ({"drive_mode": 0}, "its Drive_Mode reads 0, the bus's LeRobot calibration file says 1"),
        ({"range_max": 4095}, "its Max_Position_Limit reads 4095, the bus's LeRobot calibration file says 3796"),
    ],
)
def test_a_servo_calibrated_otherwise_is_refused_and_nothing_is_written(link, tmp_path, changed, words):
    """Servo 2 calibrated since (or reversed, or with another range than the file's): motiond
    refuses to enable, naming the bus, the servo, its joint, the register and both values, and
    writes nothing to any servo."""
    servos = [as_calibrated("a", 2050), as_calibrated("b", 2046, **changed)]
    chain, play = calibrated_rig(link, tmp_path, servos)
    try:
        assert play.wait() != 0
    finally:
        chain.close()
    assert chain.errors == [], chain.errors[:5]
    assert f"calibration_mismatch on bus servos, servo 2 (b): {words}" in play.err, play.err
    assert "lerobot-calibrate" in play.err, play.err
    assert all(i == SYNC_READ for i, _, _ in reads_and_writes(chain))
    assert all(s.stream == [] and s.torque == 0 for s in servos)
