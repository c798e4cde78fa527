"""motiond against CiA 402 drives built on the `canopen` stack (LocalNode + cia402.eds) over
python-can's slcan: set-up sequence, SYNC period per rate, every streamed target, the end of a
play, and the faults (EMCY error vs warning, statusword fault, heartbeat loss, SDO abort, wrong
mode display, motiond killed mid-motion → the drive's heartbeat consumer quick-stops it)."""

import time

import pytest

import cia402_peer
import harness
from harness import Play, expected, follows, settle, wait_for, write_config, write_motion

COUNTS = 10000  # counts per rad
WATCHDOG_MS = harness.WATCHDOG_MS
# The drives' heartbeat period (0x1017): motiond's consumer faults after twice that without one.
# The producers are the peers' Python threads, which a loaded machine stalls for hundreds of ms.
HEARTBEAT_MS = 500


def buses(link, watchdog_ms=None, heartbeat_ms=HEARTBEAT_MS, feedback_ms=harness.FEEDBACK_MS):
    return (
        f"  - name: arm\n    transport: slcan\n    device: {link.device}\n"
        # Python peers see the bus with tens of ms of jitter: watchdogs sized for that.
        f"    heartbeat_ms: {heartbeat_ms}\n    watchdog_ms: {watchdog_ms or WATCHDOG_MS}\n"
        f"    feedback_timeout_ms: {feedback_ms}\n"
        "    joints:\n"
        f"      a: {{protocol: cia402, id: 5, counts_per_unit: {COUNTS}}}\n"
        f"      b: {{protocol: cia402, id: 6, counts_per_unit: {COUNTS}, direction: -1}}\n"
        f"      v: {{protocol: mit, id: 9, mit: {{kp: 0, kd: 1}}}}\n"
    )


@pytest.fixture
def rig(link, tmp_path):
    """Two CiA 402 drives (nodes 5, 6); the velocity joint on an MIT motor answered here too."""
    bus = cia402_peer.Bus(link, [5, 6])
    mit = cia402_peer.MitEcho(bus)
    motion = tmp_path / "swing.seq"
    write_motion(motion)
    yield bus, motion, tmp_path
    mit.stop()
    bus.close()


def drive_targets(want, joint, sign=1):
    return [round(sign * COUNTS * row[joint]) for row in want]


def test_setup_sequence_streamed_targets_and_end_of_play(rig):
    bus, motion, tmp = rig
    config = write_config(tmp, buses(bus.link))
    play = Play(config, motion)
    assert play.wait() == 0, play.err
    settle(lambda: len(bus.frames.all()))
    want = expected(config, motion)
    frames = bus.received()
    # NMT enter pre-operational before the first SDO, NMT start after the last.
    for node in (5, 6):
        ids = [(f.arbitration_id, bytes(f.data)) for f in frames]
        first_sdo = next(k for k, (i, _) in enumerate(ids) if i == 0x600 + node)
        last_sdo = max(k for k, (i, _) in enumerate(ids) if i == 0x600 + node)
        pre = ids.index((0x000, bytes([0x80, node])))
        start = ids.index((0x000, bytes([0x01, node])))
        assert pre < first_sdo and last_sdo < start
        d = bus.drives[node]
        # The maps read back from the dictionary; unused PDOs disabled.
        assert d.mapping(0x1600) == [(0x6040, 0, 16), (0x607A, 0, 32)]
        assert d.mapping(0x1A00) == [(0x6041, 0, 16), (0x6064, 0, 32)]
        for comm in (0x1401, 0x1402, 0x1403, 0x1801, 0x1802, 0x1803):
            assert d.node.sdo[comm][1].raw & 0x8000_0000, hex(comm)
        assert d.node.sdo[0x6060].raw == 8 and d.node.sdo[0x6061].raw == 8
        assert d.node.sdo[0x1006].raw == 4000  # µs at 250 Hz
        assert (d.node.sdo[0x60C2][1].raw, d.node.sdo[0x60C2][2].raw) == (4, -3)
        assert d.node.sdo[0x1017].raw == HEARTBEAT_MS
        assert d.node.sdo[0x1016][1].raw == (127 << 16) | WATCHDOG_MS
        assert d.node.sdo[0x6007].raw == 3
    # Every streamed target is the trajectory in counts, to its last sample.
    # A late loop delays the path, never skips along it: no target is skipped.
    follows(bus.drives[5].applied, drive_targets(want, "a"))
    follows(bus.drives[6].applied, drive_targets(want, "b", -1))
    # One SYNC per tick once streaming, to the end: an RPDO between every two SYNCs.
    ids = [f.arbitration_id for f in frames]
    first = next(k for k, f in enumerate(frames) if f.arbitration_id == 0x205 and f.data[0] == 0x0F)
    kinds = [i for i in ids[first:] if i in (0x080, 0x205)]
    assert all(not (x == y == 0x080) for x, y in zip(kinds, kinds[1:])), "two SYNCs in one tick"
    assert kinds.count(0x080) >= len(want) - len(want) // 50


@pytest.mark.parametrize("rate", [250, 400, 800])
def test_drives_read_back_the_sync_period_motiond_configured(link, tmp_path, rate):
    bus = cia402_peer.Bus(link, [5, 6])
    echo = cia402_peer.MitEcho(bus)
    try:
        motion = tmp_path / "swing.seq"
        write_motion(motion)
        # At 800 Hz the Python drives fall behind the stream: watchdogs sized for that.
        config = write_config(tmp_path, buses(link, watchdog_ms=2000, heartbeat_ms=500, feedback_ms=2000), rate_hz=rate)
        play = Play(config, motion)
        rc = play.wait()
        # python-can's slcan reads a byte at a time: at 800 Hz these Python drives may fall
        # behind the stream after the set-up (queue_full on the pty). The set-up is what is
        # checked at every rate; the whole play at the rates Python keeps up with.
        if rate <= 400:
            assert rc == 0, play.err
        period_us = round(1e6 / rate)
        for d in bus.drives.values():
            assert d.node.sdo[0x1006].raw == period_us, play.err
            value, index = d.node.sdo[0x60C2][1].raw, d.node.sdo[0x60C2][2].raw
            assert value * 10.0**index == pytest.approx(1.0 / rate, rel=1e-9)
    finally:
        echo.stop()
        bus.close()


def test_a_rate_the_drive_cannot_be_told_is_refused_at_start(link, tmp_path):
    motion = tmp_path / "swing.seq"
    write_motion(motion)
    config = write_config(tmp_path, buses(link), rate_hz=300)
    play = Play(config, motion)
    assert play.wait() == 2
    assert "300 Hz" in play.err and "0x60C2" in play.err, play.err
    assert "250 Hz or 400 Hz" in play.err, play.err


def mid_motion(bus, play, node=5, ticks=100):
    play.until(lambda: len(bus.drives[node].applied) >= ticks, f"{ticks} targets applied")


def test_an_emcy_warning_does_not_stop_the_play(rig):
    bus, motion, tmp = rig
    config = write_config(tmp, buses(bus.link))
    play = Play(config, motion)
    mid_motion(bus, play)
    before = len(bus.drives[5].applied)
    bus.drives[5].warn(0x4210, 0x08)  # temperature warning, generic error bit clear
    assert play.wait() == 0, play.err
    # Logged once, in the drive's words.
    words = "a (cia402): warning: EMCY 0x4210 excess temperature of the device"
    assert play.err.count(words) == 1, play.err
    settle(lambda: len(bus.frames.all()))
    # The drive kept following the motion to its end after the warning.
    assert len(bus.drives[5].applied) > before + 100
    want = drive_targets(expected(config, motion), "a")
    follows(bus.drives[5].applied, want)


def test_an_emcy_error_faults_naming_code_and_register(rig):
    bus, motion, tmp = rig
    write_motion(motion, duration=harness.FAULT_MOTION_S)
    play = Play(write_config(tmp, buses(bus.link)), motion)
    mid_motion(bus, play)
    bus.drives[6].fault(0x2310, 0x03)  # overcurrent: generic + current bits
    assert play.wait() == 1
    assert "drive_fault on b (code 0x32310)" in play.err, play.err
    assert "EMCY 0x2310 continuous over-current (error register 0x03: generic, current)" in play.err, play.err


def test_a_statusword_fault_without_emcy_faults(rig):
    bus, motion, tmp = rig
    write_motion(motion, duration=harness.FAULT_MOTION_S)
    play = Play(write_config(tmp, buses(bus.link)), motion)
    mid_motion(bus, play)
    with bus.drives[5].lock:
        bus.drives[5].state = "fault"
    assert play.wait() == 1
    assert "drive_fault on a (code 0x218)" in play.err, play.err


def test_a_lost_drive_heartbeat_faults_within_twice_its_period(rig):
    bus, motion, tmp = rig
    # Long enough to be still playing when the loss is found, however late this peer saw the
    # first 100 targets.
    write_motion(motion, duration=harness.FAULT_MOTION_S)
    play = Play(write_config(tmp, buses(bus.link)), motion)
    mid_motion(bus, play)
    bus.drives[6].stop_heartbeat()
    assert play.wait() == 1
    assert "heartbeat_lost on b (code 0x706)" in play.err, play.err


def test_an_sdo_abort_during_set_up_is_a_fault_naming_the_abort_code(rig):
    bus, motion, tmp = rig
    bus.drives[6].refuse[(0x1600, 2)] = 0x06040041  # object cannot be mapped
    play = Play(write_config(tmp, buses(bus.link)), motion)
    assert play.wait() == 1
    assert "sdo_abort on b (code 0x6040041)" in play.err, play.err
    assert bus.drives[6].applied == []


def test_a_drive_that_does_not_show_csp_in_0x6061_is_refused(rig):
    bus, motion, tmp = rig
    bus.drives[5].mode_display = 1  # stays in profile position mode
    play = Play(write_config(tmp, buses(bus.link)), motion)
    assert play.wait() == 1
    assert "drive_fault on a (code 0x60610001)" in play.err, play.err
    assert bus.drives[5].applied == []


def test_motiond_killed_mid_motion_the_heartbeat_consumer_quick_stops_every_drive(rig):
    bus, motion, tmp = rig
    play = Play(write_config(tmp, buses(bus.link)), motion)
    mid_motion(bus, play, ticks=150)
    play.kill()
    wait_for(lambda: all(d.connection_lost_at for d in bus.drives.values()))
    for d in bus.drives.values():
        # Each drive's consumer ran out the time motiond gave it after motiond's last heartbeat.
        assert d.node.sdo[0x1016][1].raw & 0xFFFF == WATCHDOG_MS
        assert d.state == "quick_stop"
        held = d.position
        time.sleep(0.05)
        assert d.position == held, "the motor moved after the quick stop"
    # The drives reported it: EMCY 0x8130 (heartbeat error).
    assert d.node.sdo[0x6007].raw == 3


def serve_rig(bus, tmp, estop_drive=True):
    """`motiond serve` on the rig's drives with the swing in its library."""
    library = tmp / "motions"
    library.mkdir()
    write_motion(library / "swing.seq")
    extra = "estop:\n  drive: true\n" if estop_drive else ""
    return harness.Serve(write_config(tmp, buses(bus.link), library=library, extra=extra), tmp)


def applied_since(drive, n):
    with drive.lock:
        return list(drive.applied[n:])


def test_the_drives_own_quick_stop_is_the_estop_and_clearing_reenables_it_in_place(rig):
    bus, _, tmp = rig
    serve = serve_rig(bus, tmp)
    a, b = bus.drives[5], bus.drives[6]
    assert serve.request(cmd="play", motion="swing")["ok"]
    serve.wait_for(lambda s: s["state"] == "playing" and s.get("progress", 0) > 0.2, "mid-motion")
    a.press_estop()
    s = serve.wait_for(lambda s: s["state"] == "estop", "in the E-stop")
    assert s["estop"]["cause"] == "drive" and s["estop"]["joint"] == "a", s
    # No further motion: once stopped, drive b is held at one target. Waited for by SYNCs, not
    # time: the stop's ramp ends (ten SYNCs at one target), then 50 more SYNCs keep it.
    wait_for(lambda: len(b.applied) >= 10 and len(set(applied_since(b, len(b.applied) - 10))) == 1,
             "drive b at rest")
    held = len(b.applied)
    wait_for(lambda: len(b.applied) >= held + 50, "50 SYNCs at rest")
    assert len(set(applied_since(b, held))) == 1, applied_since(b, held)
    assert serve.request(cmd="play", motion="swing")["ok"] is False
    # The hand moves the stopped joint; the input is released; then the operator clears.
    with a.lock:
        a.position = 2345
    a.release_estop()
    with a.lock:
        words, applied = len(a.controlwords), len(a.applied)
    reply = serve.request(cmd="clear-fault")
    assert reply["ok"], (reply, serve.status())
    serve.wait_for(lambda s: s["state"] in ("idle", "holding"), "enabled again")
    wait_for(lambda: len(a.applied) > applied)
    with a.lock:
        seen = a.controlwords[words:]
        first = a.applied[applied]
    # Out of quick stop through disable voltage, then the whole enable sequence.
    order = [w for w in seen if w in (0x00, 0x06, 0x07, 0x0F)]
    assert any(order[i : i + 4] == [0x00, 0x06, 0x07, 0x0F] for i in range(len(order))), [
        hex(w) for w in seen
    ]
    assert first == 2345, "the first target after the E-stop is the drive's actual position"
    assert "estop" not in serve.status(), "cleared"


def test_without_estop_drive_the_drives_quick_stop_is_the_fault_drive_estop(rig):
    bus, _, tmp = rig
    serve = serve_rig(bus, tmp, estop_drive=False)
    assert serve.request(cmd="play", motion="swing")["ok"]
    serve.wait_for(lambda s: s["state"] == "playing" and s.get("progress", 0) > 0.2, "mid-motion")
    bus.drives[6].press_estop()
    s = serve.wait_for(lambda s: s["state"] == "fault", "faulted")
    assert [(f["kind"], f["joint"]) for f in s["faults"]] == [("drive_estop", "b")], s
    assert "estop" not in s or s["estop"]["cause"] is None, s


def test_teach_in_switches_the_drives_on_without_torque_and_back_in_place(rig):
    bus, _, tmp = rig
    serve = serve_rig(bus, tmp)
    a, b = bus.drives[5], bus.drives[6]
    assert serve.request(cmd="record", motion="taught")["ok"]
    serve.wait_for(lambda s: s["state"] == "recording", "recording")
    # Controlword 0x07: switched on, no torque; the RPDOs and SYNCs go on.
    wait_for(lambda: a.state == "switched_on" and b.state == "switched_on")
    assert a.controlwords[-1] == 0x07 and b.controlwords[-1] == 0x07
    syncs = a.syncs
    # A hand moves joint a by 0.15 rad (1500 counts) over a second; it is read back.
    for k in range(1, 51):
        with a.lock:
            a.position = 30 * k
        time.sleep(0.02)
    serve.wait_for(lambda s: abs(s["positions"]["a"] - 0.15) < 1e-6, "the hand's position read")
    assert a.syncs > syncs and a.state == "switched_on"
    with a.lock:
        words, applied = len(a.controlwords), len(a.applied)
    reply = serve.request(cmd="record", stop=True)
    assert reply["ok"], reply
    serve.wait_for(lambda s: s["state"] in ("idle", "holding"), "stiff again")
    wait_for(lambda: len(a.applied) > applied)
    with a.lock:
        assert a.controlwords[words:] == [0x0F], [hex(w) for w in a.controlwords[words:]]
        assert a.applied[applied] == 1500, "stiff again at the measured position"
    assert (tmp / "motions" / "taught.seq").exists()
