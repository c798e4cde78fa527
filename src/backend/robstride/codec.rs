//! The Robstride / Xiaomi CyberGear private protocol: 29-bit extended ids (bits 28–24 the
//! communication type, 23–8 a data field, 7–0 the target), 8-byte payloads. Facts from the
//! vendor's SDK (PyPI `robstride-dynamics` 0.0.1), its C sample (RobStride/SampleProgram),
//! `cybergeardriver` 0.2.0 and kscalelabs/actuator; where they disagree it is said below.
//!
//! Motion frames pack with the firmware's `float_to_uint` (the vendor's C sample and
//! cybergeardriver, the same function as [`crate::backend::mit`]'s, at 16 bits); the vendor's
//! Python SDK scales by `(x / max + 1) · 0x7FFF` instead, at most one count apart.

use crate::backend::frame::{CanFrame, FrameLoad};
use crate::backend::mit::{float_to_uint, uint_to_float};

/// Communication types (id bits 28–24) motiond sends or takes; 6 (set zero) is never sent.
pub const MOTION: u8 = 1;
pub const FEEDBACK: u8 = 2;
pub const ENABLE: u8 = 3;
pub const STOP: u8 = 4;
pub const READ_PARAM: u8 = 17;
pub const WRITE_PARAM: u8 = 18;
pub const FAULT: u8 = 21;

/// Parameters (types 17/18; index little-endian in bytes 0–1, value in bytes 4–7).
pub const PARAM_RUN_MODE: u16 = 0x7005;
pub const PARAM_CAN_TIMEOUT: u16 = 0x7028;
/// `run_mode` 0: motion control (the MIT-like type 1 frames).
pub const RUN_MODE_MOTION: u8 = 0;
/// `canTimeout` counts 50 µs units (20000 = 1 s); 0, the default, turns it off.
pub const CAN_TIMEOUT_UNITS_PER_MS: f64 = 20.0;

/// The motor's mode in feedback id bits 22–23.
pub const MODE_RESET: u8 = 0;
pub const MODE_CALIBRATION: u8 = 1;
pub const MODE_RUN: u8 = 2;

/// One motor's traffic per tick: a motion frame and its feedback, 8 bytes, extended ids.
pub const DRIVE_LOAD: [FrameLoad; 2] = [
    FrameLoad::each_tick(8).extended(),
    FrameLoad::each_tick(8).extended(),
];

/// The symmetric ranges a motor scales its motion and feedback frames with (per model; no
/// register holds them).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ranges {
    pub p_max: f32,
    pub v_max: f32,
    pub t_max: f32,
    pub kp_max: f32,
    pub kd_max: f32,
}

/// The models and their ranges. CyberGear: cybergeardriver's constants (the Xiaomi manual's).
/// RS00–RS06: the vendor's SDK table (`robstride-dynamics` 0.0.1 `table.py`). They disagree with
/// kscalelabs/actuator on RS00 (±33 rad/s, ±14 N·m there) and RS03 (±20 rad/s there), and with the
/// vendor's own C sample on the RS01 position range (±12.5 rad there): the `p_max`…`kd_max` keys
/// override a model's values.
pub const MODELS: &[(&str, Ranges)] = &[
    ("cybergear", ranges(12.5, 30.0, 12.0, 500.0, 5.0)),
    ("rs-00", ranges(FOUR_PI, 50.0, 17.0, 500.0, 5.0)),
    ("rs-01", ranges(FOUR_PI, 44.0, 17.0, 500.0, 5.0)),
    ("rs-02", ranges(FOUR_PI, 44.0, 17.0, 500.0, 5.0)),
    ("rs-03", ranges(FOUR_PI, 50.0, 60.0, 5000.0, 100.0)),
    ("rs-04", ranges(FOUR_PI, 15.0, 120.0, 5000.0, 100.0)),
    ("rs-05", ranges(FOUR_PI, 33.0, 17.0, 500.0, 5.0)),
    ("rs-06", ranges(FOUR_PI, 20.0, 60.0, 5000.0, 100.0)),
];

const FOUR_PI: f32 = 4.0 * std::f32::consts::PI;

const fn ranges(p_max: f32, v_max: f32, t_max: f32, kp_max: f32, kd_max: f32) -> Ranges {
    Ranges {
        p_max,
        v_max,
        t_max,
        kp_max,
        kd_max,
    }
}

/// The ranges of model `name`.
pub fn model(name: &str) -> Option<Ranges> {
    MODELS.iter().find(|(n, _)| *n == name).map(|(_, r)| *r)
}

/// An extended id: `kind` (bits 28–24), `data` (23–8), `target` (7–0).
pub fn ext_id(kind: u8, data: u16, target: u8) -> u32 {
    u32::from(kind & 0x1F) << 24 | u32::from(data) << 8 | u32::from(target)
}

/// (kind, data, target) of an extended id.
pub fn split_id(id: u32) -> (u8, u16, u8) {
    (
        ((id >> 24) & 0x1F) as u8,
        ((id >> 8) & 0xFFFF) as u16,
        (id & 0xFF) as u8,
    )
}

/// A frame from the host `host` to motor `motor`.
fn to_motor(kind: u8, host: u8, motor: u8, data: &[u8; 8]) -> CanFrame {
    CanFrame::new_extended(ext_id(kind, u16::from(host), motor), data)
}

/// One motion command: position [rad], velocity [rad/s], gains, torque [N·m].
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Motion {
    pub p: f32,
    pub v: f32,
    pub kp: f32,
    pub kd: f32,
    pub t: f32,
}

/// Type 1: the torque in the id's data field, position, velocity, kp, kd big-endian u16, each
/// clamped to its range on the host.
pub fn motion(motor: u8, c: &Motion, r: &Ranges) -> CanFrame {
    let u = |x: f32, max: f32, symmetric: bool| {
        let min = if symmetric { -max } else { 0.0 };
        float_to_uint(x, min, max, 16).to_be_bytes()
    };
    let (p, v) = (u(c.p, r.p_max, true), u(c.v, r.v_max, true));
    let (kp, kd) = (u(c.kp, r.kp_max, false), u(c.kd, r.kd_max, false));
    let t = float_to_uint(c.t, -r.t_max, r.t_max, 16);
    CanFrame::new_extended(
        ext_id(MOTION, t, motor),
        &[p[0], p[1], v[0], v[1], kp[0], kp[1], kd[0], kd[1]],
    )
}

/// Type 3: enter run mode.
pub fn enable(motor: u8, host: u8) -> CanFrame {
    to_motor(ENABLE, host, motor, &[0; 8])
}

/// Type 4: stop (back to reset mode); `clear_fault` (data[0] = 1) also clears a latched fault.
pub fn stop(motor: u8, host: u8, clear_fault: bool) -> CanFrame {
    to_motor(
        STOP,
        host,
        motor,
        &[u8::from(clear_fault), 0, 0, 0, 0, 0, 0, 0],
    )
}

/// Type 18: writes parameter `index` with `value` (little-endian, as the parameter's type).
pub fn write_param(motor: u8, host: u8, index: u16, value: [u8; 4]) -> CanFrame {
    let i = index.to_le_bytes();
    to_motor(
        WRITE_PARAM,
        host,
        motor,
        &[i[0], i[1], 0, 0, value[0], value[1], value[2], value[3]],
    )
}

/// Type 17: reads parameter `index`; the motor answers with a type-17 frame carrying its value.
pub fn read_param(motor: u8, host: u8, index: u16) -> CanFrame {
    let i = index.to_le_bytes();
    to_motor(READ_PARAM, host, motor, &[i[0], i[1], 0, 0, 0, 0, 0, 0])
}

/// A parameter's answer (type 17): its index and the four value bytes (little-endian).
pub fn decode_param(d: &[u8]) -> Option<(u16, [u8; 4])> {
    let d: &[u8; 8] = d.try_into().ok()?;
    Some((u16::from_le_bytes([d[0], d[1]]), [d[4], d[5], d[6], d[7]]))
}

/// The `canTimeout` value for a watchdog of `ms` milliseconds (at least one unit).
pub fn can_timeout(ms: f64) -> u32 {
    (ms * CAN_TIMEOUT_UNITS_PER_MS)
        .round()
        .clamp(1.0, f64::from(u32::MAX)) as u32
}

/// A feedback frame (type 2): which motor, to which host, its fault bits (id bits 16–21) and
/// mode (22–23), position [rad], velocity [rad/s], torque [N·m], temperature [°C].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Feedback {
    pub motor: u8,
    pub host: u8,
    pub faults: u8,
    pub mode: u8,
    pub position: f32,
    pub velocity: f32,
    pub torque: f32,
    pub temperature: f32,
}

/// Decodes a type-2 frame; `None` for another type or a short payload.
pub fn decode_feedback(f: &CanFrame, r: &Ranges) -> Option<Feedback> {
    let (kind, data, host) = split_id(f.id);
    let d: &[u8; 8] = f.data().try_into().ok()?;
    if !f.extended || kind != FEEDBACK {
        return None;
    }
    let word = |i: usize| u16::from_be_bytes([d[i], d[i + 1]]);
    let value = |i: usize, max: f32| uint_to_float(word(i), -max, max, 16);
    Some(Feedback {
        motor: (data & 0xFF) as u8,
        host,
        faults: ((data >> 8) & 0x3F) as u8,
        mode: (data >> 14) as u8,
        position: value(0, r.p_max),
        velocity: value(2, r.v_max),
        torque: value(4, r.t_max),
        temperature: f32::from(word(6)) / 10.0,
    })
}

/// A fault frame (type 21): the fault word (bytes 0–3) and warning word (4–7), little-endian.
pub fn decode_fault(d: &[u8]) -> Option<(u32, u32)> {
    let d: &[u8; 8] = d.try_into().ok()?;
    Some((
        u32::from_le_bytes([d[0], d[1], d[2], d[3]]),
        u32::from_le_bytes([d[4], d[5], d[6], d[7]]),
    ))
}

/// The feedback id's fault bits (16–21, here 0–5), as the vendor's SDK and kscalelabs/actuator
/// name them; bit 4 is a HALL encoder fault on the CyberGear and a stall on the Robstride models.
const FEEDBACK_FAULTS: [&str; 6] = [
    "under-voltage",
    "over-current",
    "over-temperature",
    "magnetic encoder fault",
    "HALL encoder fault (CyberGear) or stall overload (Robstride)",
    "not calibrated",
];

/// The fault frame's fault word: bits 0–3 and 7 as every reference reads them; the over-current
/// and overload bits as the CyberGear manual (cybergeardriver: phase A 16, B 4, C 5, overload
/// 8–15) and the Robstride manuals (stall overload 14) give them.
const FRAME_FAULTS: [(u32, &str); 9] = [
    (1 << 0, "motor over-temperature"),
    (1 << 1, "driver chip fault"),
    (1 << 2, "under-voltage"),
    (1 << 3, "over-voltage"),
    (1 << 4, "phase B over-current"),
    (1 << 5, "phase C over-current"),
    (1 << 7, "encoder not calibrated"),
    (0xFF << 8, "overload (bit 14: stall overload)"),
    (1 << 16, "phase A over-current"),
];

fn listed(names: impl Iterator<Item = &'static str>) -> String {
    let v: Vec<&str> = names.collect();
    if v.is_empty() {
        "undocumented bits".into()
    } else {
        v.join(", ")
    }
}

/// The feedback fault bits (0–5) in words.
pub fn feedback_fault_words(bits: u8) -> String {
    listed(
        FEEDBACK_FAULTS
            .iter()
            .enumerate()
            .filter(|(i, _)| bits & (1 << i) != 0)
            .map(|(_, n)| *n),
    )
}

/// A fault frame's fault word in words.
pub fn fault_frame_words(word: u32) -> String {
    listed(
        FRAME_FAULTS
            .iter()
            .filter(|(mask, _)| word & mask != 0)
            .map(|(_, n)| *n),
    )
}

/// A fault frame's warning word in words (bit 0: motor over-temperature warning).
pub fn warning_words(word: u32) -> String {
    if word & 1 != 0 {
        "motor over-temperature warning".into()
    } else {
        format!("warning bits {word:#x}")
    }
}

pub fn mode_words(mode: u8) -> &'static str {
    match mode {
        MODE_RESET => "reset (stopped)",
        MODE_CALIBRATION => "calibration",
        MODE_RUN => "run",
        _ => "an undocumented mode",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cybergear() -> Ranges {
        model("cybergear").unwrap()
    }

    /// cybergeardriver 0.2.0 `CyberGearMotor(1).control(position, velocity, torque, kp, kd)`
    /// sends these (its id lacks the host id: it always uses the data field for the torque).
    #[test]
    fn motion_frames_match_cybergeardriver() {
        let m = |p, v, kp, kd, t| Motion { p, v, kp, kd, t };
        let f = motion(1, &m(1.0, 0.5, 30.0, 1.0, 2.0), &cybergear());
        assert_eq!((f.id, f.extended), (0x0195_5401, true));
        assert_eq!(f.data(), [0x8A, 0x3C, 0x82, 0x21, 0x0F, 0x5C, 0x33, 0x33]);
        let f = motion(1, &m(-0.25, -2.0, 50.0, 0.3, -1.5), &cybergear());
        assert_eq!(f.id, 0x016F_FF01);
        assert_eq!(f.data(), [0x7D, 0x70, 0x77, 0x77, 0x19, 0x99, 0x0F, 0x5C]);
        let f = motion(1, &Motion::default(), &cybergear());
        assert_eq!(f.id, 0x017F_FF01);
        assert_eq!(f.data(), [0x7F, 0xFF, 0x7F, 0xFF, 0, 0, 0, 0]);
    }

    /// The vendor's SDK (`robstride-dynamics` 0.0.1 `RobstrideBus` with host id 0xFD) sends these;
    /// its motion frame scales by (x/max + 1)·0x7FFF, one count from the firmware's
    /// float_to_uint here.
    #[test]
    fn control_frames_match_the_vendors_sdk() {
        assert_eq!(enable(1, 0xFD).id, 0x0300_FD01);
        assert_eq!(enable(1, 0xFD).data(), [0; 8]);
        assert_eq!(stop(1, 0xFD, false).id, 0x0400_FD01);
        assert_eq!(stop(1, 0xFD, true).data(), [1, 0, 0, 0, 0, 0, 0, 0]);
        let t = write_param(1, 0xFD, PARAM_CAN_TIMEOUT, can_timeout(300.0).to_le_bytes());
        assert_eq!(t.id, 0x1200_FD01);
        assert_eq!(t.data(), [0x28, 0x70, 0, 0, 0x70, 0x17, 0, 0]);
        let m = write_param(1, 0xFD, PARAM_RUN_MODE, [RUN_MODE_MOTION, 0, 0, 0]);
        assert_eq!(m.data(), [0x05, 0x70, 0, 0, 0, 0, 0, 0]);
        // The SDK's `read("m", ParameterType.MODE)`.
        let r = read_param(1, 0xFD, PARAM_RUN_MODE);
        assert_eq!(
            (r.id, r.data()),
            (0x1100_FD01, &[0x05, 0x70, 0, 0, 0, 0, 0, 0][..])
        );
        assert_eq!(
            decode_param(&[0x05, 0x70, 0, 0, 2, 0, 0, 0]),
            Some((PARAM_RUN_MODE, [2, 0, 0, 0]))
        );
        let rs03 = model("rs-03").unwrap();
        let c = Motion {
            p: 1.0,
            v: 0.5,
            kp: 30.0,
            kd: 1.0,
            t: 2.0,
        };
        // The SDK: id 0x01844301, data 8a2e 8146 0189 028f.
        let f = motion(1, &c, &rs03);
        let (_, torque, _) = split_id(f.id);
        let sdk = [0x8A2Eu16, 0x8146, 0x0189, 0x028F, 0x8443];
        let ours = [
            u16::from_be_bytes([f.data()[0], f.data()[1]]),
            u16::from_be_bytes([f.data()[2], f.data()[3]]),
            u16::from_be_bytes([f.data()[4], f.data()[5]]),
            u16::from_be_bytes([f.data()[6], f.data()[7]]),
            torque,
        ];
        for (o, s) in ours.iter().zip(sdk) {
            assert!(o.abs_diff(s) <= 1, "{ours:x?} vs the SDK's {sdk:x?}");
        }
    }

    #[test]
    fn feedback_carries_faults_and_mode_in_the_id() {
        // Motor 1 to host 0xFD, run mode, over-temperature: id 2<<24 | (2<<14 | 4<<8 | 1)<<8 | FD.
        let id = ext_id(FEEDBACK, 2 << 14 | 0x04 << 8 | 1, 0xFD);
        let f = CanFrame::new_extended(id, &[0x8A, 0x3C, 0x82, 0x21, 0x95, 0x54, 0x01, 0x2C]);
        let fb = decode_feedback(&f, &cybergear()).unwrap();
        assert_eq!(
            (fb.motor, fb.host, fb.faults, fb.mode),
            (1, 0xFD, 0x04, MODE_RUN)
        );
        assert!((fb.position - 1.0).abs() < 4e-4);
        assert!((fb.velocity - 0.5).abs() < 1e-3);
        assert!((fb.torque - 2.0).abs() < 1e-3);
        assert_eq!(fb.temperature, 30.0);
        assert_eq!(feedback_fault_words(fb.faults), "over-temperature");
        let standard = CanFrame::new(id & 0x7FF, f.data());
        assert_eq!(decode_feedback(&standard, &cybergear()), None);
    }

    #[test]
    fn fault_frames_name_every_documented_bit() {
        let (fault, warning) = decode_fault(&[0x09, 0x40, 0x01, 0, 0x01, 0, 0, 0]).unwrap();
        assert_eq!((fault, warning), (0x0001_4009, 1));
        assert_eq!(
            fault_frame_words(fault),
            "motor over-temperature, over-voltage, overload (bit 14: stall overload), phase A \
             over-current"
        );
        assert_eq!(warning_words(warning), "motor over-temperature warning");
        assert_eq!(fault_frame_words(1 << 30), "undocumented bits");
    }

    #[test]
    fn every_model_has_positive_ranges() {
        for (name, r) in MODELS {
            assert!(
                [r.p_max, r.v_max, r.t_max, r.kp_max, r.kd_max]
                    .iter()
                    .all(|v| *v > 0.0),
                "{name}"
            );
        }
    }
}
