"""motiond against ODrive axes that decode every frame with ODrive's DBC files through cantools:
the set-up per firmware (Clear_Errors DLC, the watchdog armed over RxSdo on 0.6), every streamed
setpoint, remote requests from another host, a slow encoder, an axis error, and motiond killed
mid-motion → the axis watchdog stops every axis."""

import math
import time

import pytest

import odrive_peer
import harness
from harness import Play, expected, follows, settle, wait_for, write_config, write_motion

WATCHDOG_MS = harness.WATCHDOG_MS
GEAR = {"a": 1.0, "b": 9.0}
SIGN = {"a": 1.0, "b": -1.0}


def buses(link, firmware="0.6", feedback_ms=harness.FEEDBACK_MS, endpoints=True):
    ep = (
        f", endpoints: {{watchdog_timeout: {odrive_peer.ENDPOINT_WATCHDOG_TIMEOUT}, "
        f"enable_watchdog: {odrive_peer.ENDPOINT_ENABLE_WATCHDOG}}}"
        if endpoints
        else ""
    )
    common = f"firmware: '{firmware}'{ep}"
    return (
        f"  - name: drives\n    transport: slcan\n    device: {link.device}\n"
        f"    feedback_timeout_ms: {feedback_ms}\n    watchdog_ms: {WATCHDOG_MS}\n"
        "    joints:\n"
        f"      a: {{protocol: odrive, id: 1, {common}}}\n"
        f"      b: {{protocol: odrive, id: 2, gear_ratio: 9, direction: -1, {common}}}\n"
        f"      v: {{protocol: odrive, id: 3, {common}}}\n"
    )


@pytest.fixture
def motion(tmp_path):
    m = tmp_path / "swing.seq"
    write_motion(m)
    return m


def turns(joint, rad):
    return SIGN[joint] * GEAR[joint] * rad / (2 * math.pi)


def close(x, y, tol=2e-6):
    """Equal as a float32 carries it."""
    return abs(x - y) <= tol * max(1.0, abs(y))


def names(axis):
    out = []
    for name, _ in axis.commands:
        if not out or out[-1] != name:
            out.append(name)
    return out


@pytest.mark.parametrize("firmware", ["0.6", "0.5"])
def test_set_up_per_firmware_every_setpoint_and_the_end_of_a_play(link, tmp_path, motion, firmware):
    bus = odrive_peer.Bus(link, [1, 2, 3], firmware=firmware)
    try:
        config = write_config(tmp_path, buses(link, firmware, endpoints=firmware == "0.6"))
        play = Play(config, motion)
        assert play.wait() == 0, play.err
        settle(lambda: len(bus.frames.all()))
        assert bus.errors == [], bus.errors[:5]
        want = expected(config, motion)
        a = bus.axes[1]
        armed = ["RxSdo"] if firmware == "0.6" else []
        order = ["Clear_Errors", *armed, "Set_Controller_Mode", "Set_Input_Pos", "Set_Axis_State"]
        assert names(a)[: len(order)] == order
        clear = next(s for n, s in a.commands if n == "Clear_Errors")
        assert clear == ({"Identify": 0} if firmware == "0.6" else {})
        if firmware == "0.6":
            assert a.watchdog_enabled and a.watchdog_timeout == pytest.approx(WATCHDOG_MS / 1000)
        mode = next(s for n, s in a.commands if n == "Set_Controller_Mode")
        assert (mode["Control_Mode"], mode["Input_Mode"]) == (3, 1)
        v_mode = next(s for n, s in bus.axes[3].commands if n == "Set_Controller_Mode")
        assert v_mode["Control_Mode"] == 2
        follows(bus.axes[1].setpoints, [turns("a", r["a"]) for r in want], close)
        follows(bus.axes[2].setpoints, [turns("b", r["b"]) for r in want], close)
        # The velocity axis gets Set_Input_Vel only, ending at rest.
        assert all(n != "Set_Input_Pos" for n, _ in bus.axes[3].commands if bus.axes[3].setpoints)
        assert abs(bus.axes[3].setpoints[-1]) < 1e-6
        assert max(bus.axes[3].setpoints) > 0.1
    finally:
        bus.close()


def test_remote_requests_from_another_host_are_ignored(link, tmp_path, motion):
    bus = odrive_peer.Bus(link, [1, 2, 3])
    try:
        play = Play(write_config(tmp_path, buses(link)), motion)
        play.until(lambda: len(bus.axes[1].setpoints) > 50, "50 setpoints")
        bus.poll_from_another_host(node=20, cmd=0x18)  # r0298
        bus.poll_from_another_host(node=1, cmd=0x09)  # our axis's encoder estimates
        assert play.wait() == 0, play.err
    finally:
        bus.close()


def test_a_slow_encoder_within_feedback_timeout_ms_plays(link, tmp_path, motion):
    # Estimates every 100 ms, twice the loop's old fixed 50 ms: the bus's 500 ms is what counts.
    bus = odrive_peer.Bus(link, [1, 2, 3], estimate_period=0.1)
    try:
        play = Play(write_config(tmp_path, buses(link, feedback_ms=500)), motion)
        assert play.wait() == 0, play.err
    finally:
        bus.close()


def test_an_axis_error_in_the_heartbeat_faults(link, tmp_path, motion):
    write_motion(motion, duration=harness.FAULT_MOTION_S)
    bus = odrive_peer.Bus(link, [1, 2, 3])
    try:
        play = Play(write_config(tmp_path, buses(link)), motion)
        play.until(lambda: len(bus.axes[2].setpoints) > 50, "50 setpoints")
        with bus.lock:
            bus.axes[2].error = 0x100  # e.g. motor failed
        assert play.wait() == 1
        assert "drive_fault on b (code 0x100)" in play.err, play.err
    finally:
        bus.close()


@pytest.mark.parametrize("firmware", ["0.6", "0.5"])
def test_motiond_killed_mid_motion_the_axis_watchdog_stops_every_axis(link, tmp_path, motion, firmware):
    # 0.5 cannot be told over CAN: its watchdog is set on the drive, as docs/src/drive-families.md says.
    on_drive = WATCHDOG_MS / 1000 if firmware == "0.5" else None
    bus = odrive_peer.Bus(link, [1, 2, 3], firmware=firmware, watchdog_on_drive=on_drive)
    try:
        play = Play(write_config(tmp_path, buses(link, firmware, endpoints=firmware == "0.6")), motion)
        play.until(lambda: len(bus.axes[3].setpoints) > 120, "120 setpoints")
        assert abs(bus.axes[3].velocity) > 0.05, "the velocity axis is moving"
        play.kill()
        wait_for(lambda: all(a.watchdog_expired_at for a in bus.axes.values()))
        for a in bus.axes.values():
            assert a.state == odrive_peer.IDLE and a.velocity == 0.0
            # Stopped one watchdog period after the last frame motiond sent it (on 0.6, the
            # period motiond set over RxSdo).
            assert a.watchdog_enabled and a.watchdog_timeout == pytest.approx(WATCHDOG_MS / 1000)
    finally:
        bus.close()


def serve_on(link, tmp_path, firmware="0.6", estop_drive=True):
    library = tmp_path / "motions"
    library.mkdir()
    write_motion(library / "swing.seq")
    extra = "estop:\n  drive: true\n" if estop_drive else ""
    config = write_config(
        tmp_path, buses(link, firmware, endpoints=firmware == "0.6"), library=library, extra=extra
    )
    return harness.Serve(config, tmp_path)


def commands_since(axis, n):
    return [(name, s) for name, s in axis.commands[n:]]


@pytest.mark.parametrize("firmware", ["0.6", "0.5"])
def test_estop_requested_is_the_estop_and_clearing_closes_the_loop_in_place(link, tmp_path, firmware):
    bus = odrive_peer.Bus(link, [1, 2, 3], firmware=firmware)
    try:
        serve = serve_on(link, tmp_path, firmware)
        assert serve.request(cmd="play", motion="swing")["ok"]
        serve.wait_for(lambda s: s["state"] == "playing" and s.get("progress", 0) > 0.2, "mid-motion")
        bus.press_estop(2)
        s = serve.wait_for(lambda s: s["state"] == "estop", "in the E-stop")
        assert s["estop"]["cause"] == "drive" and s["estop"]["joint"] == "b", s
        # The hand moves the idle axis; the input is released; the operator clears.
        with bus.lock:
            bus.axes[2].position = 0.25
            n = len(bus.axes[2].commands)
            applied = len(bus.axes[2].setpoints)
        bus.release_estop(2)
        reply = serve.request(cmd="clear-fault")
        assert reply["ok"], (reply, serve.status())
        serve.wait_for(lambda s: s["state"] in ("idle", "holding"), "enabled again")
        wait_for(lambda: len(bus.axes[2].setpoints) > applied)
        with bus.lock:
            seen = [name for name, _ in commands_since(bus.axes[2], n)]
            first = bus.axes[2].setpoints[applied]
        assert "Clear_Errors" in seen
        # Input position at the measured one before closed loop is asked for.
        closed = seen.index("Set_Axis_State", seen.index("Clear_Errors"))
        assert "Set_Input_Pos" in seen[:closed], seen
        assert first == pytest.approx(0.25, abs=1e-6), "no jump"
        assert bus.errors == [], bus.errors[:5]
    finally:
        bus.close()


def test_without_estop_drive_estop_requested_is_the_fault_drive_estop(link, tmp_path):
    bus = odrive_peer.Bus(link, [1, 2, 3])
    try:
        serve = serve_on(link, tmp_path, estop_drive=False)
        assert serve.request(cmd="play", motion="swing")["ok"]
        serve.wait_for(lambda s: s["state"] == "playing" and s.get("progress", 0) > 0.2, "mid-motion")
        bus.press_estop(1)
        s = serve.wait_for(lambda s: s["state"] == "fault", "faulted")
        assert [(f["kind"], f["joint"]) for f in s["faults"]] == [("drive_estop", "a")], s
    finally:
        bus.close()


def test_teach_in_idles_the_axes_and_closes_the_loop_where_the_hand_left_them(link, tmp_path):
    bus = odrive_peer.Bus(link, [1, 2, 3])
    try:
        serve = serve_on(link, tmp_path)
        n = len(bus.axes[1].commands)
        assert serve.request(cmd="record", motion="taught")["ok"]
        wait_for(lambda: all(a.state == odrive_peer.IDLE for a in bus.axes.values()))
        # Estimates keep arriving: a hand turns axis a by 0.02 turns over a second.
        for k in range(1, 51):
            with bus.lock:
                bus.axes[1].position = 0.0004 * k
            time.sleep(0.02)
        rad = 0.02 * 2 * math.pi
        serve.wait_for(lambda s: abs(s["positions"]["a"] - rad) < 1e-5, "the hand's position read")
        assert serve.status()["state"] == "recording"
        with bus.lock:
            m, applied = len(bus.axes[1].commands), len(bus.axes[1].setpoints)
        reply = serve.request(cmd="record", stop=True)
        assert reply["ok"], reply
        serve.wait_for(lambda s: s["state"] in ("idle", "holding"), "stiff again")
        wait_for(lambda: len(bus.axes[1].setpoints) > applied)
        with bus.lock:
            idle = [s for name, s in commands_since(bus.axes[1], n)[: m - n] if name == "Set_Axis_State"]
            back = [name for name, _ in commands_since(bus.axes[1], m)]
            first = bus.axes[1].setpoints[applied]
        assert [s["Axis_Requested_State"] for s in idle] == [odrive_peer.IDLE]
        closed = back.index("Set_Axis_State")
        assert back[:closed] and set(back[:closed]) == {"Set_Input_Pos"}, back[: closed + 1]
        assert first == pytest.approx(0.02, abs=1e-6), "closed loop where the hand left it"
        assert bus.errors == [], bus.errors[:5]
    finally:
        bus.close()
