"""A recorded LeRobot episode played on an SO-101 over its Feetech bus: issue 24's "the imported
episode proves and plays", on the real family.

A LeRobot v3.0 dataset written by pyarrow (`tests/lerobot/write_dataset.py`, LeRobot's layout and
schema; SO-101 joint names, degrees and the gripper's 0..100), imported with `motiond import
lerobot`, played by `motiond play` with `config/examples/so101.yaml` as shipped — its Feetech bus
and its LeRobot calibration file, only the device and the test machine's timing changed — to six
STS3215 servos built on Feetech's own SDK (`feetech_peer.py`) behind a pseudo-terminal.

Every Sync Write of Goal_Position is decoded by the SDK side (`SCS_MAKEWORD`/`SCS_TOHOST`, sign bit
15) and converted back with LeRobot's own normalisation (`MotorsBus._normalize`:
DEGREES (raw − mid)·360/(resolution − 1), the gripper RANGE_0_100 (raw − min)/(max − min)·100), then:
- the goals of the motion are motiond's resampled trajectory (`motiond resample`), tick after tick;
- at every row time of the episode the goals (linear between the two ticks around it) are the
  episode's values within half a count (0.044° a joint, 0.033 of the gripper's 0..100) and what
  the interpolation between ticks adds (|a|·dt²/8 ≤ 1e-5 rad);
- finite differences of the whole stream (set-up, approach, motion, hold) stay within the limits
  of the configuration (4 rad/s, 20 rad/s²) up to what the counts' rounding adds.
The servos hold the file's calibration in their registers (Homing_Offset, the position limits),
which motiond reads back before torque goes on; a servo calibrated otherwise is refused.

Before that, when the bus opens, motiond writes what LeRobot writes on connect: each servo's
control table ends with LeRobot's values (below, from `FeetechMotorsBus.configure_motors` and
`SOFollower.configure`, lerobot 0.6.2), written with torque off and Lock 0 and locked again; a servo
that does not take one refuses the open.
"""

import json
import math
import os
import pathlib
import subprocess

import scservo_sdk.scservo_def as scs

import feetech_peer
from feetech_peer import ADDR, SYNC_WRITE, WRITE, Servo
from harness import FEEDBACK_MS, Play, ROOT, motiond_command, settle

CONFIG = ROOT / "config" / "examples" / "so101.yaml"
CALIBRATION = json.loads((ROOT / "config" / "so101" / "so101_follower.json").read_text())
MOTORS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
RESOLUTION = 4096
RATE_HZ = 500  # the configuration's
VELOCITY, ACCELERATION = 4.0, 20.0  # rad/s, rad/s² (the configuration's robot.limits)
# The gripper's joint range in so101_new_calib.urdf: what its 0..100 spans.
GRIPPER_RANGE = (-0.174533, 1.74533)


# What LeRobot writes on connect to every STS3215 of an SO-101 (register: value, as its control
# table names them): configure_motors' Return_Delay_Time 0, Maximum_Acceleration and Acceleration
# 254, Phase bit 4 cleared; configure's Operating_Mode 0 (position) and the position PID 16/0/32;
# and to the gripper Max_Torque_Limit 500, Protection_Current 250, Overload_Torque 25.
LEROBOT = {"return_delay": 0, "max_acceleration": 254, "acceleration": 254, "mode": 0, "p": 16,
           "i": 0, "d": 32}
LEROBOT_GRIPPER = {"max_torque": 500, "protection_current": 250, "overload_torque": 25}
LOCK = feetech_peer.LOCK["sts"]


def assert_lerobots_values(servo, gripper):
    t = servo.table
    for name, value in LEROBOT.items():
        assert t[ADDR[name]] == value, (servo.id, name, t[ADDR[name]])
    assert t[ADDR["phase"]] == 0x1C & ~0x10, (servo.id, "Phase: only bit 4 cleared")
    words = {name: servo.word(name) for name in LEROBOT_GRIPPER if name != "overload_torque"}
    words["overload_torque"] = t[ADDR["overload_torque"]]
    want = LEROBOT_GRIPPER if gripper else {"max_torque": 1000, "protection_current": 500,
                                            "overload_torque": 80}
    assert words == want, (servo.id, words)
    assert t[LOCK] == 1, (servo.id, "locked again, as LeRobot's enable_torque leaves it")


def normalise(motor, raw):
    """LeRobot's `MotorsBus._normalize` of a raw position (drive_mode 0, as the sample has)."""
    m = CALIBRATION[motor]
    lo, hi = m["range_min"], m["range_max"]
    if motor == "gripper":  # RANGE_0_100
        return (min(hi, max(lo, raw)) - lo) / (hi - lo) * 100
    return (raw - (lo + hi) / 2) * 360 / (RESOLUTION - 1)  # DEGREES


def radians_per_count(motor):
    m = CALIBRATION[motor]
    if motor == "gripper":
        return (GRIPPER_RANGE[1] - GRIPPER_RANGE[0]) / (m["range_max"] - m["range_min"])
    return 2 * math.pi / (RESOLUTION - 1)


def counts(motor, joint):
    """A joint position (rad) in counts, as LeRobot's calibration means it (unrounded)."""
    m = CALIBRATION[motor]
    if motor == "gripper":
        return m["range_min"] + (joint - GRIPPER_RANGE[0]) / radians_per_count(motor)
    return (m["range_min"] + m["range_max"]) / 2 + joint / radians_per_count(motor)


def so101_config(folder: pathlib.Path, device: pathlib.Path) -> pathlib.Path:
    """config/examples/so101.yaml with the pseudo-terminal for /dev/ttyACM0, absolute paths, and
    the conformance suite's allowances for a loaded test machine (harness.write_config's)."""
    text = CONFIG.read_text()
    for old, new in [
        ("model: ../so101/", f"model: {ROOT / 'config' / 'so101'}/"),
        ("lerobot_calibration: ../so101/", f"lerobot_calibration: {ROOT / 'config' / 'so101'}/"),
        ("device: /dev/ttyACM0", f"device: {device}\n    feedback_timeout_ms: {FEEDBACK_MS}"),
        (
            "backend: buses",
            "rt:\n  lock_memory: false\n  max_late_ms: 250\n  enable_timeout_s: 20\n"
            f"recorder:\n  dir: {folder / 'flight'}\nbackend: buses",
        ),
    ]:
        assert old in text, old
        text = text.replace(old, new)
    path = folder / "so101.yaml"
    path.write_text(text)
    return path


def run(*args):
    out = subprocess.run(motiond_command(*args), capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_an_imported_episode_plays_on_six_sts_servos_as_recorded(link, tmp_path):
    # The dataset: one 4 s episode at 30 fps, written as LeRobot writes it.
    python = os.environ.get("MOTIOND_PYTHON", "python3")
    dataset = tmp_path / "so101_pick"
    subprocess.run(
        [python, str(ROOT / "tests/lerobot/write_dataset.py"), str(dataset), '{"episodes": [120]}'],
        check=True,
    )
    # The episode as stored (float32 values and stamps, as float64 reprs).
    episode = json.loads((dataset / "expected.json").read_text())["0"]
    rows = [[float(v) for v in r] for r in episode["action"]]
    times = [float(t) for t in episode["times"]]
    config = so101_config(tmp_path, link.device)
    seq = tmp_path / "pick.seq"
    run("import", "lerobot", str(dataset), "--episode", "0", "--config", str(config), "-o", str(seq))
    trajectory = [
        [float(v) for v in line.split(",")[1:]]
        for line in run("resample", str(seq), "--config", str(config)).splitlines()[1:]
    ]

    # Six STS3215 servos, ids 1-6, at rest at joint 0 (each motor's calibrated middle; the
    # gripper at its joint's 0).
    servos = [
        Servo(i + 1, "sts", round(counts(m, 0.0)), CALIBRATION[m]) for i, m in enumerate(MOTORS)
    ]
    chain = feetech_peer.Chain(link, servos, series="sts")
    try:
        play = Play(config, seq)
        assert play.wait(timeout=60) == 0, play.err
        settle(lambda: len(chain.packets.all()))
    finally:
        chain.close()
    # (The peer records any EEPROM write while locked as an error.)
    assert chain.errors == [], chain.errors[:5]

    # What LeRobot writes on connect, in every servo's control table; each servo's first writes
    # turn its torque off and unlock its EEPROM.
    for s, m in zip(servos, MOTORS):
        assert_lerobots_values(s, m == "gripper")
        writes = [p for _, (i, id_, p) in chain.packets.all() if i == WRITE and id_ == s.id]
        assert writes[:2] == [bytes([ADDR["torque"], 0]), bytes([LOCK, 0])], writes[:2]

    # Every Sync Write of Goal_Position, decoded with the SDK (the STS byte order is set).
    scs.SCS_SETEND(0)
    goals = []
    for _, (instruction, _, params) in chain.packets.all():
        if instruction != SYNC_WRITE or params[0] != ADDR["goal"]:
            continue
        size, by_id = params[1], {}
        for k in range(2, len(params), size + 1):
            word = scs.SCS_MAKEWORD(params[k + 1], params[k + 2])
            by_id[params[k]] = scs.SCS_TOHOST(word, 15)
        assert sorted(by_id) == [1, 2, 3, 4, 5, 6], by_id
        goals.append([by_id[i + 1] for i in range(6)])
    assert len(goals) > len(trajectory)

    # The motion's goals are motiond's trajectory, tick after tick (a late loop delays the path,
    # never skips along it).
    want = [[round(counts(m, row[j])) for j, m in enumerate(MOTORS)] for row in trajectory]
    start = next(
        (s for s in range(len(goals) - len(want) + 1) if goals[s : s + len(want)] == want), None
    )
    assert start is not None, "the trajectory is not among the goals as one run"
    motion = goals[start : start + len(want)]

    # At every row time: LeRobot's normalisation of the goals is the episode's value.
    # A count in LeRobot's units (degrees; the gripper's 0..100), and the interpolation's share.
    unit = [
        100 / (CALIBRATION[m]["range_max"] - CALIBRATION[m]["range_min"]) if m == "gripper"
        else 360 / (RESOLUTION - 1)
        for m in MOTORS
    ]
    half_count = [u / 2 for u in unit]
    between = [1e-5 / radians_per_count(m) * u for m, u in zip(MOTORS, unit)]
    worst = [0.0] * 6
    t0 = times[0]
    for row, t in zip(rows, times):
        x = (t - t0) * RATE_HZ
        k = min(int(math.floor(x)), len(motion) - 2)
        f = x - k
        for j, m in enumerate(MOTORS):
            got = (1 - f) * normalise(m, motion[k][j]) + f * normalise(m, motion[k + 1][j])
            error = abs(got - row[j])
            worst[j] = max(worst[j], error)
            assert error <= half_count[j] + between[j] + 1e-9, (
                f"{m} at {t:.4f} s: goal {got:.5f}, episode {row[j]:.5f} (LeRobot's units)"
            )
    print(
        f"{len(goals)} Sync Writes decoded, {len(rows)} rows compared; worst |goal − episode| "
        + ", ".join(f"{m} {w:.4f}" for m, w in zip(MOTORS, worst))
        + " (degrees; gripper 0..100)"
    )

    # Finite differences of every goal sent, against the limits: over one tick and over
    # n = 25 ticks, |Δ| ≤ v·n·dt + 1 count and |x[k+n] − 2x[k] + x[k−n]| ≤ a·(n·dt)² + 2 counts
    # (each goal is within half a count of the path).
    dt = 1.0 / RATE_HZ
    for j, m in enumerate(MOTORS):
        q = radians_per_count(m)
        x = [g[j] * q for g in goals]
        for n in (1, 25):
            h = n * dt
            for k in range(n, len(x) - n):
                assert abs(x[k + n] - x[k]) <= VELOCITY * h + q + 1e-12, f"{m}: velocity at goal {k}"
                second = abs(x[k + n] - 2 * x[k] + x[k - n])
                assert second <= ACCELERATION * h * h + 2 * q + 1e-12, f"{m}: acceleration at goal {k}"


def test_a_servo_calibrated_with_another_file_is_refused_before_torque_goes_on(link, tmp_path):
    """The elbow's servo was calibrated since (its Homing_Offset differs from the file's): its
    positions are shifted from what the file says, so motiond refuses to enable the arm, naming
    the servo, the register and both values, and writes nothing to any servo."""
    config = so101_config(tmp_path, link.device)
    seq = tmp_path / "rest.seq"  # a third of a second at joint 0
    rows = "\n".join("      - [ " + ", ".join(["0.0"] * 6) + " ]" for _ in range(10))
    seq.write_text(
        "type: CompositeSeq\ncontent: BodyMotion\nformatVersion: 2\nframeRate: 30\n"
        "numFrames: 10\ncomponents:\n  - type: MultiValueSeq\n    content: JointDisplacement\n"
        "    numParts: 6\n    frames:\n" + rows + "\n"
    )
    elbow = dict(CALIBRATION["elbow_flex"], homing_offset=CALIBRATION["elbow_flex"]["homing_offset"] - 300)
    servos = [
        Servo(i + 1, "sts", round(counts(m, 0.0)), elbow if m == "elbow_flex" else CALIBRATION[m])
        for i, m in enumerate(MOTORS)
    ]
    chain = feetech_peer.Chain(link, servos, series="sts")
    try:
        play = Play(config, seq)
        assert play.wait(timeout=60) != 0
    finally:
        chain.close()
    assert chain.errors == [], chain.errors[:5]
    want = (
        f"calibration_mismatch on bus so101, servo 3 (elbow_flex): its Homing_Offset reads "
        f"{elbow['homing_offset']}, the bus's LeRobot calibration file says "
        f"{CALIBRATION['elbow_flex']['homing_offset']}"
    )
    assert want in play.err, play.err
    assert "lerobot-calibrate" in play.err, play.err
    # The calibration registers were read back (the SDK's Read), and nothing was written.
    instructions = {i for _, (i, _, _) in chain.packets.all()}
    assert feetech_peer.READ in instructions
    assert all(s.torque_writes == [] and s.goals == [] for s in servos)


def test_a_servo_that_does_not_take_lerobots_setting_refuses_the_open(link, tmp_path):
    """The gripper's servo ignores writes to Protection_Current (a firmware without it): the
    read-back finds its old value, and motiond refuses to open the bus, naming the bus, the servo,
    the joint, the register, both values and what to do; no torque goes on, nothing moves."""
    config = so101_config(tmp_path, link.device)
    seq = tmp_path / "rest.seq"
    rows = "\n".join("      - [ " + ", ".join(["0.0"] * 6) + " ]" for _ in range(10))
    seq.write_text(
        "type: CompositeSeq\ncontent: BodyMotion\nformatVersion: 2\nframeRate: 30\n"
        "numFrames: 10\ncomponents:\n  - type: MultiValueSeq\n    content: JointDisplacement\n"
        "    numParts: 6\n    frames:\n" + rows + "\n"
    )
    servos = [
        Servo(i + 1, "sts", round(counts(m, 0.0)), CALIBRATION[m],
              deaf={ADDR["protection_current"]} if m == "gripper" else ())
        for i, m in enumerate(MOTORS)
    ]
    chain = feetech_peer.Chain(link, servos, series="sts")
    try:
        play = Play(config, seq)
        assert play.wait(timeout=60) != 0
    finally:
        chain.close()
    assert chain.errors == [], chain.errors[:5]
    want = (
        "bus `so101`: servo 6 (gripper) did not take Protection_Current: wanted 250 (LeRobot's "
        "value), it reads 500"
    )
    assert want in play.err, play.err
    assert "`servo.protection_current: keep`" in play.err, play.err
    assert all(1 not in s.torque_writes and s.goals == [] for s in servos)
