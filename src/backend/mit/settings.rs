//! What a configuration says about an MIT-mode motor: `joints.<dof>.mit` (ranges, gains, reply id).

use super::codec::Ranges;
use crate::backend::bus::settings::{Keys, Param, ParamKind, Problems, UnitKeys};

/// Motor ids (the first payload byte of replies; 0 is the master's).
pub const IDS: (u8, u8) = (1, 127);

/// The motor takes joint-side radians through the gear; no unit key.
pub const UNITS: UnitKeys = UnitKeys {
    per_unit: None,
    default_per_unit: Some(1.0),
    default_zero_offset: 0.0,
};

/// The keys of an MIT-mode motor (beyond the keys every drive has): `joints.<dof>.mit`, named
/// with their path; `can_id` is the `<ros2_control>` param name of the motor id.
pub const JOINT_PARAMS: &[Param] = &[
    Param::same("mit.kp", ParamKind::Number),
    Param::same("mit.kd", ParamKind::Number),
    Param::same("mit.p_min", ParamKind::Number),
    Param::same("mit.p_max", ParamKind::Number),
    Param::same("mit.v_min", ParamKind::Number),
    Param::same("mit.v_max", ParamKind::Number),
    Param::same("mit.kp_max", ParamKind::Number),
    Param::same("mit.kd_max", ParamKind::Number),
    Param::same("mit.t_min", ParamKind::Number),
    Param::same("mit.t_max", ParamKind::Number),
    Param::same("mit.reply_id", ParamKind::Integer),
    Param::alias("can_id", "id", ParamKind::Integer),
];

/// One motor's validated settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    pub ranges: Ranges,
    pub kp: f64,
    pub kd: f64,
    pub reply_id: u16,
}

/// Reads `joints.<dof>.mit` (the drive at `key`); `None` when a problem was added.
pub fn settings(keys: &Keys, key: &str, p: &mut Problems) -> Option<Settings> {
    let (Some(kp), Some(kd)) = (keys.number("mit.kp"), keys.number("mit.kd")) else {
        p.add(
            format!("{key}.mit"),
            "MIT mode needs its gains `kp` and `kd` (and the motor's ranges if they differ from \
             the Mini Cheetah defaults)",
        );
        return None;
    };
    let key = &format!("{key}.mit");
    let d = Ranges::MINI_CHEETAH;
    let or = |name: &str, dflt: f32| {
        keys.number(&format!("mit.{name}"))
            .map_or(dflt, |v| v as f32)
    };
    let ranges = Ranges {
        p_min: or("p_min", d.p_min),
        p_max: or("p_max", d.p_max),
        v_min: or("v_min", d.v_min),
        v_max: or("v_max", d.v_max),
        kp_max: or("kp_max", d.kp_max),
        kd_max: or("kd_max", d.kd_max),
        t_min: or("t_min", d.t_min),
        t_max: or("t_max", d.t_max),
    };
    let before = p.len();
    for (lo_name, lo, hi_name, hi) in [
        ("p_min", ranges.p_min, "p_max", ranges.p_max),
        ("v_min", ranges.v_min, "v_max", ranges.v_max),
        ("t_min", ranges.t_min, "t_max", ranges.t_max),
        ("kp_max", 0.0, "kp_max", ranges.kp_max),
        ("kd_max", 0.0, "kd_max", ranges.kd_max),
    ] {
        if !(lo.is_finite() && hi.is_finite() && lo < hi) {
            p.add(
                format!("{key}.{hi_name}"),
                format!("{lo_name} = {lo} must be below {hi_name} = {hi}"),
            );
        }
    }
    for (name, v, max) in [("kp", kp, ranges.kp_max), ("kd", kd, ranges.kd_max)] {
        if !(v.is_finite() && v >= 0.0 && v <= f64::from(max)) {
            p.add(
                format!("{key}.{name}"),
                format!("must be within 0..={max}, got {v}"),
            );
        }
    }
    let raw_reply_id = keys.integer("mit.reply_id");
    let reply_id = match raw_reply_id.map(u16::try_from) {
        None => 0,
        Some(Ok(id)) if id <= 0x7FF => id,
        Some(_) => {
            p.add(
                format!("{key}.reply_id"),
                format!(
                    "standard CAN ids are 0..=0x7FF, got {}",
                    raw_reply_id.unwrap_or_default()
                ),
            );
            0
        }
    };
    (p.len() == before).then_some(Settings {
        ranges,
        kp,
        kd,
        reply_id,
    })
}
