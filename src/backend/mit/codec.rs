//! "MIT mode" (Mini Cheetah / bgkatz motorcontrol / CubeMars AK V1.x): 8-byte big-endian bit
//! packing of position, velocity, kp, kd and torque over per-motor ranges (protocols.md §3).
//! Arithmetic is done in f32 like the firmware, so the integers match the vendor code bit for bit.

use crate::backend::frame::FrameLoad;

/// Per-motor ranges (flash registers on the motor; configuration, not constants).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ranges {
    pub p_min: f32,
    pub p_max: f32,
    pub v_min: f32,
    pub v_max: f32,
    pub kp_max: f32,
    pub kd_max: f32,
    pub t_min: f32,
    pub t_max: f32,
}

impl Ranges {
    /// The common Mini Cheetah host defaults.
    pub const MINI_CHEETAH: Ranges = Ranges {
        p_min: -12.5,
        p_max: 12.5,
        v_min: -65.0,
        v_max: 65.0,
        kp_max: 500.0,
        kd_max: 5.0,
        t_min: -18.0,
        t_max: 18.0,
    };
}

/// One command: desired position [rad], velocity [rad/s], gains, torque feed-forward [N·m].
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Command {
    pub p: f32,
    pub v: f32,
    pub kp: f32,
    pub kd: f32,
    pub t: f32,
}

/// One motor's traffic per tick: a command and the reply it gets (8 bytes in the AK form).
pub const DRIVE_LOAD: [FrameLoad; 2] = [FrameLoad::each_tick(8), FrameLoad::each_tick(8)];

pub const ENTER_MOTOR_MODE: [u8; 8] = [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFC];
pub const EXIT_MOTOR_MODE: [u8; 8] = [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFD];
pub const SET_ZERO: [u8; 8] = [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFE];

/// The firmware's `float_to_uint` after clamping on the host (the firmware does not clamp).
pub fn float_to_uint(x: f32, min: f32, max: f32, bits: u32) -> u16 {
    let top = ((1u32 << bits) - 1) as f32;
    let x = if x.is_nan() { min } else { x.clamp(min, max) };
    let span = max - min;
    if span <= 0.0 {
        return 0;
    }
    ((x - min) * top / span) as u16
}

pub fn uint_to_float(x: u16, min: f32, max: f32, bits: u32) -> f32 {
    let top = ((1u32 << bits) - 1) as f32;
    f32::from(x) * (max - min) / top + min
}

pub fn pack(c: &Command, r: &Ranges) -> [u8; 8] {
    let mut p = float_to_uint(c.p, r.p_min, r.p_max, 16);
    let v = float_to_uint(c.v, r.v_min, r.v_max, 12);
    let kp = float_to_uint(c.kp, 0.0, r.kp_max, 12);
    let kd = float_to_uint(c.kd, 0.0, r.kd_max, 12);
    let t = float_to_uint(c.t, r.t_min, r.t_max, 12);
    // All-ones fields with t = 0xFFC..0xFFE would read as enter/exit/zero: never send those.
    if p == 0xFFFF && v == 0xFFF && kp == 0xFFF && kd == 0xFFF && (0xFFC..=0xFFE).contains(&t) {
        p = 0xFFFE;
    }
    [
        (p >> 8) as u8,
        (p & 0xFF) as u8,
        (v >> 4) as u8,
        (((v & 0xF) << 4) | (kp >> 8)) as u8,
        (kp & 0xFF) as u8,
        (kd >> 4) as u8,
        (((kd & 0xF) << 4) | (t >> 8)) as u8,
        (t & 0xFF) as u8,
    ]
}

/// A motor's reply: its id, position [rad], velocity [rad/s], torque [N·m]; the AK V1.x 8-byte form
/// adds temperature [°C] and an error code.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reply {
    pub id: u8,
    pub position: f32,
    pub velocity: f32,
    pub torque: f32,
    pub temperature: Option<i16>,
    pub error: Option<u8>,
}

pub fn decode_reply(d: &[u8], r: &Ranges) -> Option<Reply> {
    let b = d.get(0..6)?;
    let p = u16::from(b[1]) << 8 | u16::from(b[2]);
    let v = u16::from(b[3]) << 4 | u16::from(b[4] >> 4);
    let i = u16::from(b[4] & 0xF) << 8 | u16::from(b[5]);
    let extra = d.get(6..8);
    Some(Reply {
        id: b[0],
        position: uint_to_float(p, r.p_min, r.p_max, 16),
        velocity: uint_to_float(v, r.v_min, r.v_max, 12),
        torque: uint_to_float(i, r.t_min, r.t_max, 12),
        temperature: extra.map(|e| i16::from(e[0]) - 40),
        error: extra.map(|e| e[1]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cmd(p: f32, v: f32, kp: f32, kd: f32, t: f32) -> Command {
        Command { p, v, kp, kd, t }
    }

    #[test]
    fn vectors_mini_cheetah() {
        let r = Ranges::MINI_CHEETAH;
        assert_eq!(
            pack(&cmd(1.0, 0.0, 50.0, 1.0, 0.0), &r),
            [0x8A, 0x3C, 0x7F, 0xF1, 0x99, 0x33, 0x37, 0xFF]
        );
        assert_eq!(
            pack(&cmd(0.0, 0.0, 0.0, 0.0, 0.0), &r),
            [0x7F, 0xFF, 0x7F, 0xF0, 0x00, 0x00, 0x07, 0xFF]
        );
        assert_eq!(
            pack(&cmd(1.0, 2.0, 50.0, 1.0, 1.5), &r),
            [0x8A, 0x3C, 0x83, 0xE1, 0x99, 0x33, 0x38, 0xAA]
        );
        assert_eq!(pack(&cmd(-12.5, -65.0, 0.0, 0.0, -18.0), &r), [0; 8]);
        assert_eq!(pack(&cmd(12.5, 65.0, 500.0, 5.0, 18.0), &r), [0xFF; 8]);
    }

    #[test]
    fn vector_ak80_8() {
        let r = Ranges {
            v_min: -37.5,
            v_max: 37.5,
            t_min: -32.0,
            t_max: 32.0,
            ..Ranges::MINI_CHEETAH
        };
        assert_eq!(
            pack(&cmd(1.0, 2.0, 50.0, 1.0, 1.5), &r),
            [0x8A, 0x3C, 0x86, 0xC1, 0x99, 0x33, 0x38, 0x5F]
        );
    }

    #[test]
    fn host_clamps_out_of_range_values() {
        let r = Ranges::MINI_CHEETAH;
        assert_eq!(
            pack(&cmd(100.0, 1e9, 1e9, 1e9, 1e9), &r),
            pack(&cmd(12.5, 65.0, 500.0, 5.0, 18.0), &r)
        );
        assert_eq!(pack(&cmd(-100.0, -1e9, -1.0, -1.0, -1e9), &r), [0; 8]);
    }

    #[test]
    fn reply_decode_example() {
        let r = Ranges::MINI_CHEETAH;
        let reply = decode_reply(&[0x01, 0x8A, 0x3C, 0x7F, 0xF7, 0xFF], &r).unwrap();
        assert_eq!(reply.id, 1);
        assert!((reply.position - 0.99966).abs() < 1e-4);
        assert!((reply.velocity + 0.01587).abs() < 1e-4);
        assert!((reply.torque + 0.0044).abs() < 1e-4);
        assert_eq!(reply.temperature, None);
        let ak = decode_reply(&[0x01, 0x8A, 0x3C, 0x7F, 0xF7, 0xFF, 65, 3], &r).unwrap();
        assert_eq!((ak.temperature, ak.error), (Some(25), Some(3)));
        assert_eq!(decode_reply(&[1, 2, 3], &r), None);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn packing_never_forms_a_special_frame_and_round_trips(
            p in -20.0f32..20.0, v in -80.0f32..80.0, kp in -10.0f32..600.0,
            kd in -1.0f32..6.0, t in -20.0f32..20.0,
        ) {
            let r = Ranges::MINI_CHEETAH;
            let data = pack(&cmd(p, v, kp, kd, t), &r);
            prop_assert!(data != ENTER_MOTOR_MODE && data != EXIT_MOTOR_MODE && data != SET_ZERO);
            // The reply layout shares the position/velocity packing: decode it back.
            let reply = decode_reply(&[1, data[0], data[1], data[2], data[3] & 0xF0, 0], &r).unwrap();
            let pc = p.clamp(r.p_min, r.p_max);
            prop_assert!((reply.position - pc).abs() <= 25.0 / 65535.0 + 1e-5);
            let vc = v.clamp(r.v_min, r.v_max);
            prop_assert!((reply.velocity - vc).abs() <= 130.0 / 4095.0 + 1e-4);
        }
    }
}
