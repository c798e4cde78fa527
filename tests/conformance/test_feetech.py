"""motiond against Feetech STS and SCS servos built on Feetech's own SDK (PyPI
`feetech-servo-sdk`, the one LeRobot uses; `feetech_peer.py`): every packet's checksum checked
with the SDK's `txPacket`, words decoded in the series' byte order; the set-up (positions read
before anything is written, goal = present, torque on), every goal along the trajectory, an
overload named, teach-in through `motiond serve` (torque off, a hand moves the servo, stiff
again where it left it), and what happens when motiond dies: nothing — these servos have no
communication watchdog and keep their last goal with torque on."""

import math
import time

import pytest

import feetech_peer
from feetech_peer import ADDR, FAULT, READ, SYNC_WRITE, Servo
import harness
from harness import FEEDBACK_MS, Play, Serve, expected, follows, settle, wait_for, write_config, write_motion

# Position servos only: these servos' wheel mode is not a drive mode motiond uses.
JOINTS = ("a", "b")
SERIES = {"sts": ("feetech", 4096), "scs": ("feetech_scs", 1024)}


def buses(link, protocol):
    return (
        f"  - name: servos\n    transport: serial\n    device: {link.device}\n"
        f"    baud: 1000000\n    protocol: {protocol}\n    feedback_timeout_ms: {FEEDBACK_MS}\n"
        "    joints:\n      a: {id: 1}\n      b: {id: 2, direction: -1}\n"
    )


@pytest.fixture(params=["sts", "scs"])
def rig(request, link, tmp_path):
    series = request.param
    protocol, resolution = SERIES[series]
    mid = resolution // 2
    chain = feetech_peer.Chain(link, [Servo(1, series, mid), Servo(2, series, mid)], series=series)
    library = tmp_path / "motions"
    library.mkdir()
    motion = library / "swing.seq"
    write_motion(motion, joints=JOINTS)
    config = write_config(
        tmp_path, buses(link, protocol), library=library, joints=JOINTS, skel="servos.skel"
    )
    yield chain, motion, config, resolution
    chain.close()


def test_set_up_every_goal_and_the_end_of_a_play(rig):
    chain, motion, config, resolution = rig
    play = Play(config, motion)
    assert play.wait() == 0, play.err
    settle(lambda: len(chain.packets.all()))
    assert chain.errors == [], chain.errors[:5]
    per_rad, mid = resolution / (2 * math.pi), resolution // 2
    want = expected(config, motion)
    follows(chain.servos[1].goals, [round(per_rad * r["a"]) + mid for r in want])
    follows(chain.servos[2].goals, [round(-per_rad * r["b"]) + mid for r in want])
    # Set-up: without a LeRobot calibration or `servo:` keys nothing is written when the bus
    # opens, only each servo's Return_Delay_Time read (for the budget); then the positions read
    # before anything is written (a servo with torque on keeps it), goal = present, torque on.
    seq = [(i, p[0]) for _, (i, _, p) in chain.packets.all()]
    first = next(k for k, (i, _) in enumerate(seq) if i == SYNC_WRITE)
    delays = [(READ, ADDR["return_delay"])] * 2
    assert seq[:2] == delays, seq[:2]
    assert first > 2 and all(a == ADDR["present"] for _, a in seq[2:first]), seq[: first + 2]
    assert seq[first : first + 2] == [(SYNC_WRITE, ADDR["goal"]), (SYNC_WRITE, ADDR["torque"])]
    # The end of a play that holds: torque stays on.
    assert all(s.torque == 1 and s.torque_writes == [1] for s in chain.servos.values())


def test_an_overload_faults_naming_it(rig):
    chain, motion, config, _ = rig
    write_motion(motion, duration=harness.FAULT_MOTION_S, joints=JOINTS)
    play = Play(config, motion)
    play.until(lambda: len(chain.servos[2].goals) > 50, "50 goals")
    chain.fault(2, FAULT["overload"])
    assert play.wait() == 1
    assert "drive_fault on b (code 0x20)" in play.err, play.err
    assert "overload" in play.err, play.err


def test_motiond_killed_the_servos_keep_their_last_goal_with_torque_on(rig):
    chain, motion, config, _ = rig
    play = Play(config, motion)
    play.until(lambda: len(chain.servos[1].goals) > 60, "60 goals")
    play.kill()
    time.sleep(0.5)
    with chain.lock:
        # No communication watchdog: nothing on the servo notices motiond is gone.
        assert all(s.torque == 1 for s in chain.servos.values())
        assert chain.servos[1].present == chain.servos[1].goals[-1]
    assert chain.errors == []


def test_teach_in_turns_torque_off_and_stiffens_where_the_hand_left_the_servo(rig, tmp_path):
    chain, _, config, resolution = rig
    per_rad, mid = resolution / (2 * math.pi), resolution // 2
    serve = Serve(config, tmp_path)
    assert serve.request(cmd="record", motion="taught")["ok"]
    wait_for(lambda: chain.servos[1].torque == 0)
    for k in range(1, 51):
        assert chain.move_by_hand(1, mid + round(0.006 * k * per_rad)), "limp"
        time.sleep(0.02)
    left = mid + round(0.3 * per_rad)
    serve.wait_for(lambda s: abs(s["positions"]["a"] - 0.3) < 1.5 / per_rad, "the hand's position read")
    with chain.lock:
        n = len(chain.servos[1].goals)
    assert serve.request(cmd="record", stop=True)["ok"]
    serve.wait_for(lambda s: s["state"] in ("idle", "holding"), "stiff again")
    wait_for(lambda: chain.servos[1].torque == 1 and len(chain.servos[1].goals) > n + 5)
    with chain.lock:
        assert chain.servos[1].word("goal", chain.servos[1].sign_bit) == left
        assert all(abs(g - left) <= 1 for g in chain.servos[1].goals[n : n + 5])
    assert chain.errors == []
