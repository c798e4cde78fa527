"""SLCAN framing against python-can's slcan driver on the far end: the adapter set-up for every
bitrate, every line motiond writes, status polling (`F`), an adapter reporting a bus error, and
one reporting only warnings."""

import re
import time

import pytest
import serial

import harness
import mit_peer
from harness import FEEDBACK_MS, Play, write_config, write_motion

LINE = re.compile(rb"^(C|O|F|S[0-9]|t[0-9A-F]{3}[0-8](?:[0-9A-F]{2})*|r[0-9A-F]{3}[0-8])$")


def buses(link, bitrate=1_000_000):
    return (
        f"  - name: legs\n    transport: slcan\n    device: {link.device}\n    bitrate: {bitrate}\n"
        f"    feedback_timeout_ms: {FEEDBACK_MS}\n    max_load: 1.0\n    joints:\n"
        "      a: {protocol: mit, id: 1, mit: {kp: 40, kd: 1.5}}\n"
        "      b: {protocol: mit, id: 2, mit: {kp: 40, kd: 1.5}}\n"
        "      v: {protocol: mit, id: 3, mit: {kp: 40, kd: 1.5}}\n"
    )


@pytest.fixture
def motion(tmp_path):
    m = tmp_path / "swing.seq"
    write_motion(m)
    return m


@pytest.mark.parametrize("bitrate,command", [(1_000_000, b"S8"), (750_000, b"S7"), (83_300, b"S9"), (125_000, b"S4")])
def test_adapter_set_up_status_polls_and_every_line(link, tmp_path, motion, bitrate, command):
    port = serial.Serial(str(link.peer), 115200, timeout=0.05)
    try:
        play = Play(write_config(tmp_path, buses(link, bitrate), rate_hz=100), motion)
        # Until the lines asserted below have come (however long a loaded machine takes to
        # start motiond), the deadline only bounding a hang.
        raw = b""
        deadline = time.monotonic() + 60.0
        while raw.split(b"\r").count(b"F") < 5 or b"t0018FFFFFFFFFFFFFFFC" not in raw.split(b"\r"):
            assert time.monotonic() < deadline, raw[-200:]
            raw += port.read(4096)
        play.kill()
    finally:
        port.close()
    lines = raw.split(b"\r")[:-1]
    assert lines[:3] == [b"C", command, b"O"], lines[:5]
    bad = [l for l in lines if not LINE.match(l)]
    assert bad == [], bad[:5]
    # Motors that never answer get enter-motor-mode again; the adapter's flags are polled.
    assert lines.count(b"F") >= 5
    assert b"t0018FFFFFFFFFFFFFFFC" in lines


def test_an_adapter_reporting_a_bus_error_faults_the_bus(link, tmp_path, motion):
    write_motion(motion, duration=harness.FAULT_MOTION_S)
    bus = mit_peer.Bus(link, [1, 2, 3])
    try:
        play = Play(write_config(tmp_path, buses(link)), motion)
        play.until(lambda: len(bus.motors[1].commands) >= 50, "50 commands")
        bus.can.serialPortOrig.write(b"F80\r")  # bus error, as the adapter answers `F`
        assert play.wait() == 1
        assert "bus_off (code 0x80)" in play.err, play.err
    finally:
        bus.close()


def test_an_adapter_reporting_only_warnings_plays_on(link, tmp_path, motion):
    bus = mit_peer.Bus(link, [1, 2, 3])
    try:
        play = Play(write_config(tmp_path, buses(link)), motion)
        play.until(lambda: len(bus.motors[1].commands) >= 50, "50 commands")
        bus.can.serialPortOrig.write(b"F44\r")  # error warning, arbitration lost
        assert play.wait() == 0, play.err
    finally:
        bus.close()
