//! What a configuration says about a Damiao motor: `joints.<dof>.damiao` — the gains, the master
//! (feedback) id, and the scaling the motor's PMAX/VMAX/TMAX registers must hold.

use super::codec::{self, REGISTER_ID};
use crate::backend::bus::settings::{Keys, Param, ParamKind, Problems, UnitKeys};
use crate::backend::mit::Ranges;

/// Motor ids (ESC_ID) motiond addresses; the feedback frames carry its low nibble.
pub const IDS: (u8, u8) = (1, 255);

/// The motor takes output-shaft radians; no unit key.
pub const UNITS: UnitKeys = UnitKeys {
    per_unit: None,
    default_per_unit: Some(1.0),
    default_zero_offset: 0.0,
};

/// The keys of a Damiao motor (beyond the keys every drive has), named with their path.
pub const JOINT_PARAMS: &[Param] = &[
    Param::same("damiao.kp", ParamKind::Number),
    Param::same("damiao.kd", ParamKind::Number),
    Param::same("damiao.master_id", ParamKind::Integer),
    Param::same("damiao.p_max", ParamKind::Number),
    Param::same("damiao.v_max", ParamKind::Number),
    Param::same("damiao.t_max", ParamKind::Number),
];

/// One motor's validated settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    pub kp: f64,
    pub kd: f64,
    /// MST_ID: the CAN id its feedback and register replies come from.
    pub master_id: u16,
    /// PMAX, VMAX, TMAX as configured (the motor's registers must agree).
    pub p_max: f32,
    pub v_max: f32,
    pub t_max: f32,
}

impl Settings {
    pub fn ranges(&self) -> Ranges {
        codec::ranges(self.p_max, self.v_max, self.t_max)
    }
}

const MISSING: &str = "a Damiao motor needs its gains `kp` and `kd`, its `master_id` (the \
                       feedback id, MST_ID) and the scaling its registers hold: `p_max` (PMAX, \
                       RID 21), `v_max` (VMAX, RID 22), `t_max` (TMAX, RID 23); motiond reads the \
                       registers at start and refuses a motor that disagrees";

/// Reads `joints.<dof>.damiao` (the drive at `key`); `None` when a problem was added.
pub fn settings(keys: &Keys, key: &str, p: &mut Problems) -> Option<Settings> {
    let key = &format!("{key}.damiao");
    let number = |name: &str| keys.number(&format!("damiao.{name}"));
    let (Some(kp), Some(kd), Some(master), Some(pm), Some(vm), Some(tm)) = (
        number("kp"),
        number("kd"),
        keys.integer("damiao.master_id"),
        number("p_max"),
        number("v_max"),
        number("t_max"),
    ) else {
        p.add(key.clone(), MISSING);
        return None;
    };
    let before = p.len();
    for (name, v, max) in [("kp", kp, codec::KP_MAX), ("kd", kd, codec::KD_MAX)] {
        if !(v.is_finite() && v >= 0.0 && v <= f64::from(max)) {
            p.add(
                format!("{key}.{name}"),
                format!("must be within 0..={max}, got {v}"),
            );
        }
    }
    for (name, v) in [("p_max", pm), ("v_max", vm), ("t_max", tm)] {
        if !(v.is_finite() && v > 0.0 && v < 1e6) {
            p.add(
                format!("{key}.{name}"),
                format!("must be a positive number (the register's value), got {v}"),
            );
        }
    }
    let master_id = match u16::try_from(master) {
        Ok(id) if u32::from(id) < REGISTER_ID => id,
        _ => {
            p.add(
                format!("{key}.master_id"),
                format!(
                    "standard CAN ids below 0x7FF (the register id), got {master}; OpenArm uses \
                     the motor id + 0x10"
                ),
            );
            0
        }
    };
    (p.len() == before).then_some(Settings {
        kp,
        kd,
        master_id,
        p_max: pm as f32,
        v_max: vm as f32,
        t_max: tm as f32,
    })
}
