"""Robstride motors behind python-can's slcan (29-bit ids as `T` lines), checked against the
vendor's own SDK, PyPI `robstride-dynamics` 0.0.1: every enable, stop, parameter read and write
motiond sends must be the frame the SDK's `RobstrideBus` sends for it (a stop that clears a fault
differs only in data[0] = 1), every motion frame within one count per field of what the SDK's
`write_operation_frame` builds for the same command (the SDK scales by (x/max + 1)·0x7FFF, the
firmware's float_to_uint one count apart), decoded with the SDK's model table; every feedback
and parameter frame the motor sends is read back through the SDK's `receive_status_frame` and
`receive_read_frame` first. The motor
model: reset/run mode, fault bits cleared by a stop with data[0] = 1, run_mode and canTimeout
(50 µs units; the motor back to reset mode when it passes), following in run mode.
"""

import contextlib
import io
import struct
import time

import can
from robstride_dynamics.bus import Motor as SdkMotor
from robstride_dynamics.bus import RobstrideBus
from robstride_dynamics.protocol import CommunicationType as T
from robstride_dynamics.protocol import ParameterType as P
from robstride_dynamics.table import (
    MODEL_MIT_KD_TABLE,
    MODEL_MIT_KP_TABLE,
    MODEL_MIT_POSITION_TABLE,
    MODEL_MIT_TORQUE_TABLE,
    MODEL_MIT_VELOCITY_TABLE,
)

from harness import CanPeer

RESET, RUN = 0, 2
HOST = 0xFD


class Capture:
    """A channel handler for the SDK's bus: what it would send, and one frame it receives."""

    def __init__(self):
        self.sent = []
        self.inbox = []

    def send(self, msg):
        self.sent.append(msg)

    def recv(self, timeout=None):
        return self.inbox.pop(0) if self.inbox else None

    def shutdown(self):
        pass


def sdk(id_, model):
    with contextlib.redirect_stdout(io.StringIO()):  # its note that no calibration is given
        bus = RobstrideBus("peer", {"m": SdkMotor(id_, model)})
    bus.channel_handler = Capture()
    bus.host_id = HOST
    return bus


class Motor:
    def __init__(self, id_, model="rs-03", position=0.0):
        self.id = id_
        self.model = model
        self.ref = sdk(id_, model)
        self.mode = RESET
        self.faults = 0  # feedback fault bits (id bits 16–21)
        self.position = position
        self.params = {"run_mode": 0}  # motion control, as after power-up
        self.fed_at = None
        self.timed_out_at = None
        self.commands = []  # decoded motion commands applied in run mode: dicts p, v, kp, kd, t
        self.kinds = []  # every frame's communication type, in order
        self.stream = []  # the motion commands applied, None where the motor left run mode

    def set_mode(self, mode):
        if self.mode == RUN and mode != RUN:
            self.stream.append(None)
        self.mode = mode

    def ranges(self):
        m = self.model
        return (MODEL_MIT_POSITION_TABLE[m], MODEL_MIT_VELOCITY_TABLE[m], MODEL_MIT_TORQUE_TABLE[m],
                MODEL_MIT_KP_TABLE[m], MODEL_MIT_KD_TABLE[m])

    def sdk_frames(self, call):
        """The frames the SDK sends for `call(bus)` (its replies not awaited)."""
        self.ref.channel_handler.sent.clear()
        self.ref.receive_status_frame = lambda motor: None
        self.ref.receive_read_frame = lambda: bytes(4)
        call(self.ref)
        return [(m.arbitration_id, bytes(m.data)) for m in self.ref.channel_handler.sent]

    def decode_motion(self, arbitration_id, d):
        """The SDK's scaling read backwards: (u / 0x7FFF − 1)·max, u / 0xFFFF·max for the gains."""
        pm, vm, tm, kpm, kdm = self.ranges()
        p, v, kp, kd = struct.unpack(">HHHH", d)
        t = (arbitration_id >> 8) & 0xFFFF
        return {"p": (p / 0x7FFF - 1) * pm, "v": (v / 0x7FFF - 1) * vm, "kp": kp / 0xFFFF * kpm,
                "kd": kd / 0xFFFF * kdm, "t": (t / 0x7FFF - 1) * tm}

    def check_motion(self, arbitration_id, d, c):
        """motiond's motion frame against the SDK's for the command it decodes to."""
        (sid, sdata), = self.sdk_frames(
            lambda b: b.write_operation_frame("m", c["p"], c["kp"], c["kd"], velocity=c["v"], torque=c["t"])
        )
        if sid >> 24 != arbitration_id >> 24 or sid & 0xFF != arbitration_id & 0xFF:
            raise ValueError(f"motion id {arbitration_id:#x}, the SDK's {sid:#x}")
        ours = struct.unpack(">HHHH", d) + ((arbitration_id >> 8) & 0xFFFF,)
        theirs = struct.unpack(">HHHH", sdata) + ((sid >> 8) & 0xFFFF,)
        if any(abs(a - b) > 1 for a, b in zip(ours, theirs)):
            raise ValueError(f"motion fields {ours}, the SDK's {theirs}")

    def param_reply(self, param):
        """Type 17 with the parameter's value, read back through the SDK's receive_read_frame."""
        value = struct.pack("<bBH", self.params[param[2]], 0, 0)
        data = struct.pack("<HH", param[0], 0) + value
        msg = can.Message(arbitration_id=T.READ_PARAMETER << 24 | self.id << 8 | HOST, data=data, is_extended_id=True)
        self.ref.channel_handler.inbox.append(msg)
        assert RobstrideBus.receive_read_frame(self.ref) == value
        return msg

    def feedback(self):
        """Type 2 to the host: mode and faults in the id, the SDK's scaling, 30.0 °C; read back
        through the SDK's receive_status_frame."""
        pm, vm, tm, _, _ = self.ranges()
        u = lambda x, m: max(0, min(0xFFFF, int((x / m + 1) * 0x7FFF)))  # noqa: E731
        data = struct.pack(">HHHH", u(self.position, pm), u(0.0, vm), u(0.0, tm), 300)
        extra = self.mode << 14 | (self.faults & 0x3F) << 8 | self.id
        msg = can.Message(arbitration_id=T.OPERATION_STATUS << 24 | extra << 8 | HOST, data=data, is_extended_id=True)
        self.ref.channel_handler.inbox.append(msg)
        pos, _, _, temp = RobstrideBus.receive_status_frame(self.ref, "m")
        assert abs(pos - self.position) <= 2 * pm / 0x7FFF and temp == 30.0
        return msg


class Bus(CanPeer):
    family = "robstride"

    def __init__(self, link, motors):
        self.motors = {m.id: m for m in motors}
        super().__init__(link)

    def close(self):
        super().close()
        for m in self.motors.values():
            m.ref.channel_handler = None  # not connected: its destructor sends nothing

    def decoded(self):
        return sum(len(m.kinds) for m in self.motors.values())

    def apply(self, msg):
        if not msg.is_extended_id:
            raise ValueError("a standard id: the private protocol's ids are 29 bits")
        kind, data, target = msg.arbitration_id >> 24, (msg.arbitration_id >> 8) & 0xFFFF, msg.arbitration_id & 0xFF
        m = self.motors.get(target)
        if m is None:
            return None
        d = bytes(msg.data)
        m.kinds.append(kind)
        if kind == T.OPERATION_CONTROL:
            c = m.decode_motion(msg.arbitration_id, d)
            m.check_motion(msg.arbitration_id, d, c)
            if m.mode == RUN:
                m.commands.append(c)
                m.stream.append(c)
                m.fed_at = time.monotonic()
                if c["kp"] > 0:
                    m.position = c["p"]
            return m.feedback()
        if data != HOST:
            raise ValueError(f"type {kind} with host id {data:#x}, not {HOST:#x}")
        if kind == T.ENABLE:
            self.expect(m, msg, lambda b: b.transmit(T.ENABLE, HOST, m.id))
            if m.faults == 0:
                m.set_mode(RUN)
                m.fed_at = time.monotonic()
        elif kind == T.DISABLE:
            # The SDK's stop; a stop that clears a fault sets data[0] = 1 (kscalelabs/actuator).
            self.expect(m, msg, lambda b: b.transmit(T.DISABLE, HOST, m.id), clear=d[0] == 1)
            m.set_mode(RESET)
            if d[0] == 1:
                m.faults = 0
        elif kind == T.READ_PARAMETER:
            index = struct.unpack("<H", d[:2])[0]
            if index != P.MODE[0]:
                raise ValueError(f"a read of parameter {index:#x}")
            self.expect(m, msg, lambda b: b.read("m", P.MODE))
            return m.param_reply(P.MODE)
        elif kind == T.WRITE_PARAMETER:
            index = struct.unpack("<H", d[:2])[0]
            param = {P.MODE[0]: P.MODE, P.CAN_TIMEOUT[0]: P.CAN_TIMEOUT}.get(index)
            if param is None:
                raise ValueError(f"a write of parameter {index:#x}")
            value = struct.unpack("<b" if param is P.MODE else "<L", d[4:5] if param is P.MODE else d[4:])[0]
            self.expect(m, msg, lambda b: b.write("m", param, value))
            m.params[param[2]] = value
        else:
            raise ValueError(f"communication type {kind}")
        return m.feedback()

    def expect(self, m, msg, call, clear=False):
        want = m.sdk_frames(call)
        got = bytes(msg.data)
        if clear:
            got = b"\x00" + got[1:]
        if want != [(msg.arbitration_id, got)]:
            raise ValueError(f"{msg.arbitration_id:#x} {bytes(msg.data).hex()}: the SDK sends {want}")

    def watchdogs(self, now):
        """canTimeout: a motor in run mode without a frame for that long goes back to reset."""
        for m in self.motors.values():
            timeout = m.params.get("canTimeout", 0) * 50e-6
            if m.mode == RUN and timeout > 0 and now - m.fed_at > timeout:
                m.set_mode(RESET)
                # When the motor's timer ran out, not when this thread came by to see it.
                m.timed_out_at = m.fed_at + timeout

    def fault_frame(self, id_, fault, warning=0):
        """A type-21 fault frame from motor `id_`."""
        data = struct.pack("<LL", fault, warning)
        self.send(can.Message(arbitration_id=T.FAULT_REPORT << 24 | id_ << 8 | HOST, data=data, is_extended_id=True))
