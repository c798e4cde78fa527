"""MIT-mode motors (Mini Cheetah / bgkatz motorcontrol) behind python-can's slcan, decoding every
command and encoding every reply with the reference formulas of the motor firmware (math_ops.c:
`uint_to_float`, `float_to_uint`; CAN packing of `unpack_cmd` and `pack_reply`), in float32 like
the firmware. The motor follows the commanded position at once."""

import struct

import can

from harness import CanPeer

ENTER = bytes([0xFF] * 7 + [0xFC])
EXIT = bytes([0xFF] * 7 + [0xFD])
ZERO = bytes([0xFF] * 7 + [0xFE])
P, V, KP, KD, T = (-12.5, 12.5), (-65.0, 65.0), (0.0, 500.0), (0.0, 5.0), (-18.0, 18.0)


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def uint_to_float(x_int, lo, hi, bits):
    span, offset = f32(hi - lo), f32(lo)
    return f32(f32(f32(float(x_int)) * span) / f32(float((1 << bits) - 1)) + offset)


def float_to_uint(x, lo, hi, bits):
    span, offset = f32(hi - lo), f32(lo)
    return int(f32(f32(f32(x - offset) * f32(float((1 << bits) - 1))) / span))


def unpack_cmd(d):
    p = (d[0] << 8) | d[1]
    v = (d[2] << 4) | (d[3] >> 4)
    kp = ((d[3] & 0xF) << 8) | d[4]
    kd = (d[5] << 4) | (d[6] >> 4)
    t = ((d[6] & 0xF) << 8) | d[7]
    return {
        "p": uint_to_float(p, *P, 16),
        "v": uint_to_float(v, *V, 12),
        "kp": uint_to_float(kp, *KP, 12),
        "kd": uint_to_float(kd, *KD, 12),
        "t": uint_to_float(t, *T, 12),
    }


def pack_reply(id_, p, v, t):
    p_int = float_to_uint(p, *P, 16)
    v_int = float_to_uint(v, *V, 12)
    t_int = float_to_uint(t, *T, 12)
    return bytes([id_, p_int >> 8, p_int & 0xFF, v_int >> 4, ((v_int & 0xF) << 4) | (t_int >> 8), t_int & 0xFF])


class Motor:
    def __init__(self, id_):
        self.id = id_
        self.enabled = False
        self.position = 0.0
        self.velocity = 0.0
        self.commands = []  # decoded commands while in motor mode
        self.special = []  # enter / exit / zero, in order
        self.stream = []  # decoded commands in motor mode, None where the mode changed
        self.silent = False  # answers nothing (a motor gone from the bus)


class Bus(CanPeer):
    family = "mit"

    def __init__(self, link, ids, reply_id=0):
        self.motors = {i: Motor(i) for i in ids}
        self.reply_id = reply_id
        super().__init__(link)

    def decoded(self):
        return sum(len(m.commands) + len(m.special) for m in self.motors.values())

    def apply(self, msg):
        m = self.motors.get(msg.arbitration_id)
        if m is None or len(msg.data) != 8:
            return None
        d = bytes(msg.data)
        if d in (ENTER, EXIT, ZERO):
            m.special.append(d[7])
            m.enabled = d == ENTER
            m.stream.append(None)
        elif m.enabled:
            c = unpack_cmd(d)
            m.commands.append(c)
            m.stream.append(c)
            m.position, m.velocity = c["p"], c["v"]
        if m.silent:
            return None
        reply = pack_reply(m.id, m.position, m.velocity, 0.0)
        return can.Message(arbitration_id=self.reply_id, data=reply, is_extended_id=False)
