"""Damiao motors behind python-can's slcan, speaking through the codec of PyPI `damiao-motor`
1.0.6: every frame motiond sends must be what the package's `DaMiaoMotor` would send (special
frames and register requests byte for byte, MIT commands decoded with its `uint_to_float` and
its kp/kd ranges), and every frame the motor answers is built with its `float_to_uint` and read
back through its own decoders (`decode_sensor_feedback`, `decode_register_reply`) before it
goes out. The motor model: registers (PMAX/VMAX/TMAX, CTRL_MODE, TIMEOUT in 50 µs units), the
state nibble (0 disabled, 1 enabled, 8..E errors latched until FB), the TIMEOUT watchdog
(communication lost, 0xD, and no torque), and the motor following each enabled command.
"""

import struct
import time

import can
from damiao_motor.core import motor as dm

from harness import CanPeer

ENABLED, DISABLED, LOST_COMM = dm.DM_MOTOR_ENABLED, dm.DM_MOTOR_DISABLED, dm.DM_MOTOR_LOST_COMM
PMAX, VMAX, TMAX, TIMEOUT, CTRL_MODE = 21, 22, 23, 9, 10


class Motor:
    def __init__(self, id_, master, pvt=(12.5, 10.0, 28.0), position=0.0):
        self.id = id_
        self.master = master
        # The package's host-side model of this motor: its encoders and decoders are the reference.
        self.ref = dm.DaMiaoMotor(id_, master, None, motor_type="4340")
        self.registers = {PMAX: pvt[0], VMAX: pvt[1], TMAX: pvt[2], TIMEOUT: 0, CTRL_MODE: 1}
        self.limits()
        self.state = DISABLED
        self.position = position
        self.fed_at = None
        self.timed_out_at = None
        self.commands = []  # decoded MIT commands applied while enabled: dicts p, v, kp, kd, t
        self.specials = []  # last byte of FC/FD/FE/FB frames, in order
        self.requests = []  # register requests: (op, rid, raw value bytes)
        self.stream = []  # the commands applied, None where the motor left the enabled state

    def set(self, state):
        if self.state == ENABLED and state != ENABLED:
            self.stream.append(None)
        self.state = state

    def limits(self):
        p, v, t = (self.registers[r] for r in (PMAX, VMAX, TMAX))
        self.ref.set_limits(p_min=-p, p_max=p, v_min=-v, v_max=v, t_min=-t, t_max=t)

    def decode_command(self, d):
        """An MIT command, with the package's uint_to_float, kp/kd ranges and this motor's
        P/V/T limits (the ones its encode_cmd_msg uses)."""
        r = self.ref
        return {
            "p": dm.uint_to_float((d[0] << 8) | d[1], r._p_min, r._p_max, 16),
            "v": dm.uint_to_float((d[2] << 4) | (d[3] >> 4), r._v_min, r._v_max, 12),
            "kp": dm.uint_to_float(((d[3] & 0xF) << 8) | d[4], dm.KP_MIN, dm.KP_MAX, 12),
            "kd": dm.uint_to_float((d[5] << 4) | (d[6] >> 4), dm.KD_MIN, dm.KD_MAX, 12),
            "t": dm.uint_to_float(((d[6] & 0xF) << 8) | d[7], r._t_min, r._t_max, 12),
        }

    def feedback(self):
        """The feedback frame, built with the package's float_to_uint and checked with its own
        decoder."""
        r = self.ref
        p = dm.float_to_uint(self.position, r._p_min, r._p_max, 16)
        v = dm.float_to_uint(0.0, r._v_min, r._v_max, 12)
        t = dm.float_to_uint(0.0, r._t_min, r._t_max, 12)
        data = bytes(
            [(self.id & 0xF) | (self.state << 4), p >> 8, p & 0xFF, v >> 4, ((v & 0xF) << 4) | (t >> 8), t & 0xFF, 30, 31]
        )
        back = r.decode_sensor_feedback(data)
        assert back["status_code"] == self.state and abs(back["pos"] - self.position) <= (r._p_max - r._p_min) / 65535
        return data

    def register_reply(self, op, rid):
        """The register's reply (a read, or a write's echo), as the package reads it."""
        fmt = "<f" if dm.REGISTER_TABLE[rid].data_type == "float" else "<I"
        raw = struct.pack(fmt, self.registers.get(rid, 0))
        data = bytes([self.id & 0xFF, self.id >> 8, op, rid]) + raw
        if op == 0x33:
            assert dm.is_register_reply(data)
            self.ref.decode_register_reply(data)
            assert self.ref.registers[rid] == struct.unpack(fmt, raw)[0]
        return data


class Bus(CanPeer):
    family = "damiao"

    def __init__(self, link, motors, fd=False):
        self.motors = {m.id: m for m in motors}
        self.fd = fd
        super().__init__(link)

    def decoded(self):
        return sum(len(m.commands) + len(m.specials) + len(m.requests) for m in self.motors.values())

    def reply(self, arbitration_id, data):
        return can.Message(arbitration_id=arbitration_id, data=data, is_extended_id=False, is_fd=self.fd, bitrate_switch=self.fd)

    def apply(self, msg):
        if msg.is_extended_id or msg.is_fd != self.fd or (self.fd and not msg.bitrate_switch):
            raise ValueError("not a frame of this bus's kind (classic or CAN-FD with the bit rate switch)")
        d = bytes(msg.data)
        if len(d) != 8:
            raise ValueError(f"{len(d)} bytes, the package sends 8")
        if msg.arbitration_id == 0x7FF:
            m = self.motors.get(d[0] | d[1] << 8)
            return m and self.reply(*self.register(m, d))
        m = self.motors.get(msg.arbitration_id)
        if m is None:
            return None
        special = {m.ref.encode_enable_msg(): 0xFC, m.ref.encode_disable_msg(): 0xFD,
                   m.ref.encode_clear_error_msg(): 0xFB, m.ref.encode_save_position_zero_msg(): 0xFE}
        if d in special:
            b = special[d]
            m.specials.append(b)
            if b == 0xFB:
                m.set(DISABLED)
            elif b == 0xFC and m.state in (DISABLED, ENABLED):
                m.set(ENABLED)
                m.fed_at = time.monotonic()
            elif b == 0xFD and m.state == ENABLED:
                m.set(DISABLED)
        elif m.state == ENABLED:
            if m.registers[CTRL_MODE] != 1:
                raise ValueError("an MIT command to a motor not in MIT mode")
            c = m.decode_command(d)
            m.commands.append(c)
            m.stream.append(c)
            m.fed_at = time.monotonic()
            if c["kp"] > 0:
                m.position = c["p"]
        return self.reply(m.master, m.feedback())

    def register(self, m, d):
        op, rid, raw = d[2], d[3], d[4:]
        m.requests.append((op, rid, raw))
        # What the package sends for the same request, byte for byte.
        sent = []
        m.ref.send_raw = lambda data, arbitration_id=None: sent.append((arbitration_id, bytes(data)))
        if op == 0x33:
            m.ref.request_register_reading(rid)
        elif op == 0x55:
            kind = dm.REGISTER_TABLE[rid].data_type
            value = struct.unpack("<f" if kind == "float" else "<I", raw)[0]
            m.ref.write_register(rid, value)
            m.registers[rid] = value
            m.limits()
        if sent != [(0x7FF, d)]:
            raise ValueError(f"register request {d.hex()}: damiao-motor sends {sent}")
        return m.master, m.register_reply(op, rid)

    def watchdogs(self, now):
        """The TIMEOUT register: an enabled motor without a command for that long loses
        communication (0xD) and its torque."""
        for m in self.motors.values():
            timeout = m.registers[TIMEOUT] * 50e-6
            if m.state == ENABLED and timeout > 0 and now - m.fed_at > timeout:
                m.set(LOST_COMM)
                # When the motor's timer ran out, not when this thread came by to see it.
                m.timed_out_at = m.fed_at + timeout

    def set_state(self, id_, state):
        with self.lock:
            self.motors[id_].set(state)
