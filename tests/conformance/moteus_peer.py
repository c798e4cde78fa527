"""moteus controllers behind python-can's slcan in CAN-FD (the CANable 2.0 dialect python-can
speaks: `b`/`B` lines, data bitrate `Y5`), with mjbots' own `moteus` package: every command is
decoded with `moteus.multiplex.parse_frame` and its bytes are checked against what
`moteus.Controller` builds from the same values (`make_position`, `make_stop`, `make_query`);
every reply is encoded with the package's `WriteFrame`/`WriteCombiner` as the firmware's reply
subframes. The controller follows the commanded position at once, reports mode 1 with a fault
code when told to, and enforces the watchdog of register 0x027 as the firmware does: no command
for that long and a position-mode controller enters mode 11 (timeout)."""

import io
import math
import time

import can
import moteus
from moteus import multiplex as mp

from harness import CanPeer

MODE, POSITION, VELOCITY, TORQUE, FAULT = 0x000, 0x001, 0x002, 0x003, 0x00F
CMD_POSITION, CMD_VELOCITY, CMD_TORQUE, KP_SCALE, KD_SCALE, MAX_TORQUE = range(0x020, 0x026)
WATCHDOG = 0x027
STOPPED, FAULTED, POSITION_MODE, TIMEOUT = 0, 1, 10, 11

# What motiond queries: moteus' default query without voltage and temperature.
QUERY = moteus.QueryResolution()
QUERY.voltage = mp.IGNORE
QUERY.temperature = mp.IGNORE

FD_LENGTHS = [0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24, 32, 48, 64]


def pad(data: bytes) -> bytes:
    """To the next CAN-FD length with NOP (0x50), as moteus' transports pad."""
    n = next(length for length in FD_LENGTHS if length >= len(data))
    return data + bytes([mp.NOP] * (n - len(data)))


class Servo:
    def __init__(self, id_):
        self.id = id_
        self.controller = moteus.Controller(id=id_, query_resolution=QUERY)
        self.mode = STOPPED
        self.position = 0.0  # revolutions
        self.velocity = 0.0
        self.fault = 0
        self.inject = None  # a fault code to report from the next command on
        self.watchdog = math.nan
        self.last_command = None
        self.commands = []  # decoded position commands: {register: value}
        self.stops = 0
        self.queries = 0
        self.timeouts = 0
        self.silent = False
        self.stream = []  # position-mode commands followed, None where it left position mode

    def set_mode(self, mode):
        if self.mode == POSITION_MODE and mode != POSITION_MODE:
            self.stream.append(None)
        self.mode = mode


def registers(data: bytes) -> tuple:
    """(writes, reads) of a frame, decoded by moteus' parser."""
    writes, reads = {}, []
    for sub in mp.parse_frame(data):
        if sub.type == mp.SubframeType.WRITE:
            writes[sub.register] = sub.value
        elif sub.type == mp.SubframeType.READ:
            reads.append(sub.register)
    return writes, reads


def expected_bytes(servo: Servo, writes: dict) -> bytes:
    """What moteus' own Controller builds for the same command."""
    c = servo.controller
    if MODE not in writes:
        return pad(c.make_query().data)
    if writes[MODE] == STOPPED:
        return pad(c.make_stop(query=True).data)
    kwargs = {
        "position": writes.get(CMD_POSITION),
        "velocity": writes.get(CMD_VELOCITY),
        "feedforward_torque": writes.get(CMD_TORQUE),
        "kp_scale": writes.get(KP_SCALE),
        "kd_scale": writes.get(KD_SCALE),
        "maximum_torque": writes.get(MAX_TORQUE),
        "watchdog_timeout": writes.get(WATCHDOG),
    }
    return pad(c.make_position(query=True, **{k: v for k, v in kwargs.items() if v is not None}).data)


def reply(servo: Servo) -> bytes:
    """Mode, position, velocity, torque and fault as reply subframes, as the firmware answers
    the query."""
    buf = io.BytesIO()
    w = mp.WriteFrame(buf)
    values = {MODE: servo.mode, POSITION: servo.position, VELOCITY: servo.velocity, TORQUE: 0.0}
    c = mp.WriteCombiner(w, 0x20, MODE, [mp.INT8, mp.F32, mp.F32, mp.F32])
    for reg, res in zip((MODE, POSITION, VELOCITY, TORQUE), (mp.INT8, mp.F32, mp.F32, mp.F32)):
        if c.maybe_write():
            w.write(values[reg], res)
    c = mp.WriteCombiner(w, 0x20, FAULT, [mp.INT8])
    if c.maybe_write():
        w.write(servo.fault, mp.INT8)
    return pad(buf.getvalue())


class Bus(CanPeer):
    family = "moteus"

    def __init__(self, link, ids):
        self.servos = {i: Servo(i) for i in ids}
        # A pseudo-terminal has no bit rates: the `b`/`B` lines are what makes it CAN-FD.
        super().__init__(link)

    def decoded(self):
        return sum(len(s.commands) + s.stops + s.queries for s in self.servos.values())

    def watchdogs(self, now):
        for s in self.servos.values():
            if (
                s.mode == POSITION_MODE
                and s.last_command is not None
                and math.isfinite(s.watchdog)
                and now - s.last_command > s.watchdog
            ):
                s.set_mode(TIMEOUT)
                s.timeouts += 1

    def apply(self, msg):
        dest, source, want_reply = msg.arbitration_id & 0x7F, (msg.arbitration_id >> 8) & 0x7F, msg.arbitration_id & 0x8000
        s = self.servos.get(dest)
        if s is None or source != 0 or not want_reply:
            return None
        data = bytes(msg.data)
        writes, reads = registers(data)
        if data != expected_bytes(s, writes):
            self.errors.append((s.id, data.hex(), expected_bytes(s, writes).hex()))
        if not (msg.is_fd and msg.bitrate_switch and msg.is_extended_id):
            self.errors.append((s.id, "not an extended CAN-FD frame with bit rate switch"))
        s.last_command = time.monotonic()
        if MODE not in writes:
            s.queries += 1
        elif writes[MODE] == STOPPED:
            s.stops += 1
            s.set_mode(STOPPED)
            s.fault = 0
        elif writes[MODE] == POSITION_MODE:
            s.commands.append(writes)
            s.watchdog = writes.get(WATCHDOG, math.nan)
            if s.inject is not None:
                s.set_mode(FAULTED)
                s.fault = s.inject
            elif s.mode in (STOPPED, POSITION_MODE):
                s.set_mode(POSITION_MODE)
                s.stream.append(writes)
                p = writes.get(CMD_POSITION, math.nan)
                s.velocity = writes.get(CMD_VELOCITY, 0.0)
                # NaN: velocity control from where it is.
                s.position = s.position + s.velocity * 0.004 if math.isnan(p) else p
        if s.silent or not reads:
            return None
        return can.Message(
            arbitration_id=s.id << 8, is_extended_id=True, is_fd=True, bitrate_switch=True,
            data=reply(s),
        )
