//! Damiao DM-J motors (DM4310, DM4340, DM8009…): the MIT command frame of [`crate::backend::mit`]
//! on the motor id, the `FF…FC/FD/FE/FB` special frames, feedback on the master id with the
//! motor's state in the high nibble of its first byte, and the registers behind CAN id 0x7FF
//! (enactic/openarm_can `damiao_motor/`, PyPI `damiao-motor` 1.0.6; both agree on every byte used
//! here). Commands are packed by the MIT codec, in f32 like the firmware.

use crate::backend::frame::{CanFrame, FrameLoad};
use crate::backend::mit::{self, Ranges};

pub use crate::backend::mit::{ENTER_MOTOR_MODE as ENABLE, EXIT_MOTOR_MODE as DISABLE, SET_ZERO};

/// Clears a latched error (over-temperature, communication lost…); the motor stays disabled.
pub const CLEAR_ERROR: [u8; 8] = [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFB];

/// The CAN id every register request goes to; the motor id is in its first two bytes.
pub const REGISTER_ID: u32 = 0x7FF;
/// Register operations (byte 2).
pub const READ: u8 = 0x33;
pub const WRITE: u8 = 0x55;

/// Register ids (RID) motiond uses.
pub const RID_TIMEOUT: u8 = 9;
pub const RID_CTRL_MODE: u8 = 10;
pub const RID_PMAX: u8 = 21;
pub const RID_VMAX: u8 = 22;
pub const RID_TMAX: u8 = 23;

/// CTRL_MODE values: MIT (1); POS_VEL (2), VEL (3) and POS_FORCE (4) take other frames.
pub const CTRL_MODE_MIT: u32 = 1;

/// The kp and kd ranges every Damiao motor packs with (fixed in the firmware, unlike PMAX/VMAX/TMAX).
pub const KP_MAX: f32 = 500.0;
pub const KD_MAX: f32 = 5.0;

/// The motor's state in the high nibble of a feedback frame's first byte.
pub const STATE_DISABLED: u8 = 0x0;
pub const STATE_ENABLED: u8 = 0x1;

/// The register TIMEOUT counts 50 µs units: 20 per millisecond.
pub const TIMEOUT_UNITS_PER_MS: f64 = 20.0;

/// One motor's traffic per tick: a command and its feedback, 8 bytes each.
pub const DRIVE_LOAD: [FrameLoad; 2] = [FrameLoad::each_tick(8), FrameLoad::each_tick(8)];

/// The MIT ranges of a motor whose PMAX, VMAX and TMAX registers hold `p`, `v`, `t`.
pub fn ranges(p: f32, v: f32, t: f32) -> Ranges {
    Ranges {
        p_min: -p,
        p_max: p,
        v_min: -v,
        v_max: v,
        kp_max: KP_MAX,
        kd_max: KD_MAX,
        t_min: -t,
        t_max: t,
    }
}

/// What the state nibble of a feedback frame says, in the vendor's words.
pub fn state_words(state: u8) -> &'static str {
    match state {
        STATE_DISABLED => "disabled",
        STATE_ENABLED => "enabled",
        0x8 => "over-voltage",
        0x9 => "under-voltage",
        0xA => "over-current",
        0xB => "MOS over-temperature",
        0xC => "rotor (coil) over-temperature",
        0xD => "communication lost (the TIMEOUT register's time passed without a command)",
        0xE => "overload",
        _ => "an undocumented state",
    }
}

/// Whether a state nibble is one of the errors (8 over-voltage … E overload).
pub fn is_error(state: u8) -> bool {
    state >= 0x8
}

/// A register request to motor `id`: a read, or a write of `value` (little-endian).
pub fn register(id: u8, op: u8, rid: u8, value: [u8; 4]) -> CanFrame {
    CanFrame::new(
        REGISTER_ID,
        &[id, 0, op, rid, value[0], value[1], value[2], value[3]],
    )
}

/// Reads register `rid` of motor `id`.
pub fn read_register(id: u8, rid: u8) -> CanFrame {
    register(id, READ, rid, [0; 4])
}

/// A register's reply: which motor, read or write, which register, its four bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegisterReply {
    pub motor: u16,
    pub op: u8,
    pub rid: u8,
    pub value: [u8; 4],
}

impl RegisterReply {
    /// The value of a float register (PMAX, VMAX, TMAX).
    pub fn float(&self) -> f32 {
        f32::from_le_bytes(self.value)
    }

    /// The value of an integer register (TIMEOUT, CTRL_MODE).
    pub fn integer(&self) -> u32 {
        u32::from_le_bytes(self.value)
    }
}

/// Decodes a register reply (`id_lo id_hi 33|55 rid v0 v1 v2 v3`); `None` for anything else.
pub fn decode_register(d: &[u8]) -> Option<RegisterReply> {
    let d: &[u8; 8] = d.try_into().ok()?;
    (d[2] == READ || d[2] == WRITE).then(|| RegisterReply {
        motor: u16::from_le_bytes([d[0], d[1]]),
        op: d[2],
        rid: d[3],
        value: [d[4], d[5], d[6], d[7]],
    })
}

/// A feedback frame: the motor id's low nibble, its state, position [rad], velocity [rad/s],
/// torque [N·m], MOS and rotor temperatures [°C].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Feedback {
    pub id_nibble: u8,
    pub state: u8,
    pub position: f32,
    pub velocity: f32,
    pub torque: f32,
    pub t_mos: u8,
    pub t_rotor: u8,
}

/// Decodes a feedback frame: the MIT reply layout after the first byte (`id | state << 4`), then
/// the two temperatures.
pub fn decode_feedback(d: &[u8], r: &Ranges) -> Option<Feedback> {
    let d: &[u8; 8] = d.try_into().ok()?;
    let reply = mit::decode_reply(d, r)?;
    Some(Feedback {
        id_nibble: d[0] & 0x0F,
        state: d[0] >> 4,
        position: reply.position,
        velocity: reply.velocity,
        torque: reply.torque,
        t_mos: d[6],
        t_rotor: d[7],
    })
}

/// The TIMEOUT register's value for a watchdog of `ms` milliseconds (at least one unit).
pub fn timeout_register(ms: f64) -> u32 {
    (ms * TIMEOUT_UNITS_PER_MS)
        .round()
        .clamp(1.0, f64::from(u32::MAX)) as u32
}

/// A fault code of a register that contradicts the configuration: the register id in the top
/// byte, its value in the low 24 bits (a float's bits without the lowest 8 mantissa bits, about
/// five significant digits; an integer up to 2²⁴ − 1).
pub fn mismatch_code(rid: u8, raw: u32) -> u32 {
    let value = if is_float(rid) {
        raw >> 8
    } else {
        raw.min(0xFF_FFFF)
    };
    u32::from(rid) << 24 | value
}

/// The registers motiond checks that hold floats (the scaling).
fn is_float(rid: u8) -> bool {
    matches!(rid, RID_PMAX | RID_VMAX | RID_TMAX)
}

/// What a fault code from [`mismatch_code`] says: the register and the value the motor holds.
pub fn mismatch_words(code: u32) -> Option<String> {
    let rid = (code >> 24) as u8;
    let value = code & 0xFF_FFFF;
    let (name, key) = match rid {
        RID_PMAX => ("PMAX", "damiao.p_max"),
        RID_VMAX => ("VMAX", "damiao.v_max"),
        RID_TMAX => ("TMAX", "damiao.t_max"),
        RID_TIMEOUT => {
            return Some(format!(
                "the motor's TIMEOUT register (RID 9) reads back {value} after motiond wrote \
                 watchdog_ms in 50 µs units: the write was not taken"
            ));
        }
        RID_CTRL_MODE => {
            return Some(format!(
                "the motor is in control mode {value} (CTRL_MODE, RID 10), not MIT (1): set it \
                 with the vendor's tool (motiond does not switch a motor's mode)"
            ));
        }
        _ => return None,
    };
    let v = f32::from_bits(value << 8);
    Some(format!(
        "the motor's {name} register (RID {rid}) holds {v:.5}, not the configured `{key}`: the \
         scaling must match the motor's; set `{key}` to the motor's value (the vendors' tables \
         disagree, the register decides)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dm4340() -> Ranges {
        ranges(12.5, 10.0, 28.0)
    }

    /// Vectors from damiao-motor 1.0.6 (`DaMiaoMotor(motor_type="4340").encode_cmd_msg`) and
    /// enactic/openarm_can (`CanPacketEncoder::pack_mit_control_data` with DM4340's limits):
    /// both give these bytes.
    #[test]
    fn commands_match_damiao_motor_and_openarm_can() {
        let c = |p, v, kp, kd, t| mit::Command { p, v, kp, kd, t };
        let r = dm4340();
        assert_eq!(
            mit::pack(&c(1.0, 0.5, 30.0, 1.0, 2.0), &r),
            [0x8A, 0x3C, 0x86, 0x50, 0xF5, 0x33, 0x38, 0x91]
        );
        assert_eq!(
            mit::pack(&c(-0.25, -2.0, 50.0, 0.3, -1.5), &r),
            [0x7D, 0x70, 0x66, 0x61, 0x99, 0x0F, 0x57, 0x91]
        );
        assert_eq!(
            mit::pack(&c(0.0, 0.0, 0.0, 0.0, 0.0), &r),
            [0x7F, 0xFF, 0x7F, 0xF0, 0x00, 0x00, 0x07, 0xFF]
        );
        assert_eq!(
            mit::pack(&c(3.0, 4.0, 120.0, 2.5, 10.0), &r),
            [0x9E, 0xB7, 0xB3, 0x23, 0xD6, 0x7F, 0xFA, 0xDA]
        );
    }

    #[test]
    fn special_frames_and_register_requests_match_the_references() {
        assert_eq!(ENABLE, [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFC]);
        assert_eq!(DISABLE[7], 0xFD);
        assert_eq!(SET_ZERO[7], 0xFE);
        assert_eq!(CLEAR_ERROR[7], 0xFB);
        // damiao-motor `_send_register_cmd(0x33, 21)` of motor 2; openarm_can
        // `pack_query_param_data(2, 21)`.
        let f = read_register(2, RID_PMAX);
        assert_eq!((f.id, f.extended), (0x7FF, false));
        assert_eq!(f.data(), [0x02, 0x00, 0x33, 0x15, 0, 0, 0, 0]);
        // damiao-motor `set_can_timeout(15)`: register 9 = 300 units, little-endian u32; and
        // `write_register(10, 1)`: MIT mode.
        let w = register(2, WRITE, RID_TIMEOUT, timeout_register(15.0).to_le_bytes());
        assert_eq!(w.data(), [0x02, 0x00, 0x55, 0x09, 0x2C, 0x01, 0x00, 0x00]);
        let m = register(2, WRITE, RID_CTRL_MODE, CTRL_MODE_MIT.to_le_bytes());
        assert_eq!(m.data(), [0x02, 0x00, 0x55, 0x0A, 0x01, 0x00, 0x00, 0x00]);
    }

    #[test]
    fn feedback_carries_the_state_nibble_and_both_temperatures() {
        // A DM4340 (id 1) enabled, MOS 35 °C, rotor 31 °C: damiao-motor's
        // `decode_sensor_feedback` reads 0.99966 rad, 0.49573 rad/s, 1.98974 N·m.
        let d = [0x11, 0x8A, 0x3C, 0x86, 0x58, 0x91, 35, 31];
        let fb = decode_feedback(&d, &dm4340()).unwrap();
        assert_eq!(
            (fb.id_nibble, fb.state, fb.t_mos, fb.t_rotor),
            (1, 1, 35, 31)
        );
        assert!((fb.position - 0.999_656_7).abs() < 1e-5);
        assert!((fb.velocity - 0.495_726_5).abs() < 1e-5);
        assert!((fb.torque - 1.989_743_6).abs() < 1e-5);
        let lost = decode_feedback(&[0xD1, 0x80, 0, 0x80, 0x08, 0, 30, 30], &dm4340()).unwrap();
        assert!(is_error(lost.state));
        assert!(state_words(lost.state).starts_with("communication lost"));
        assert_eq!(decode_feedback(&d[..6], &dm4340()), None);
    }

    #[test]
    fn register_replies_decode_and_mismatches_name_the_register_and_value() {
        let mut d = [0x02, 0x00, 0x33, RID_VMAX, 0, 0, 0, 0];
        d[4..].copy_from_slice(&10.0f32.to_le_bytes());
        let r = decode_register(&d).unwrap();
        assert_eq!((r.motor, r.op, r.rid, r.float()), (2, READ, RID_VMAX, 10.0));
        assert_eq!(
            decode_register(&[0x11, 0x8A, 0x3C, 0x83, 0x38, 0x88, 35, 31]),
            None
        );
        let code = mismatch_code(RID_VMAX, 8.0f32.to_bits());
        let words = mismatch_words(code).unwrap();
        assert!(
            words.contains("VMAX register (RID 22) holds 8.00000"),
            "{words}"
        );
        let words = mismatch_words(mismatch_code(RID_PMAX, 12.566f32.to_bits())).unwrap();
        assert!(words.contains("holds 12.56"), "{words}");
        let words = mismatch_words(mismatch_code(RID_TIMEOUT, 0)).unwrap();
        assert!(words.contains("reads back 0"), "{words}");
        let words = mismatch_words(mismatch_code(RID_CTRL_MODE, 2)).unwrap();
        assert!(words.contains("control mode 2"), "{words}");
        assert_eq!(mismatch_words(0x0000_000D), None);
    }
}
