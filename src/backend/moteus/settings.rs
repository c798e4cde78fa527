//! What a configuration says about a moteus controller: `joints.<dof>.moteus` (gain scales, a
//! torque limit) and its units.

use crate::backend::bus::settings::{Keys, Param, ParamKind, Problems, UnitKeys};

/// Servo ids (7 bits; 0 is the host's).
pub const IDS: (u8, u8) = (1, super::codec::MAX_ID);

/// Output revolutions per joint unit before the gear, by default one per 2π rad (moteus reports
/// the output shaft as its `motor_position.rotor_to_output_ratio` configures it).
pub const UNITS: UnitKeys = UnitKeys {
    per_unit: Some("turns_per_unit"),
    default_per_unit: Some(1.0 / std::f64::consts::TAU),
    default_zero_offset: 0.0,
};

/// Its keys (beyond the keys every drive has); `can_id` is the `<ros2_control>` name of the id.
pub const JOINT_PARAMS: &[Param] = &[
    Param::same("turns_per_unit", ParamKind::Number),
    Param::same("moteus.kp_scale", ParamKind::Number),
    Param::same("moteus.kd_scale", ParamKind::Number),
    Param::same("moteus.max_torque", ParamKind::Number),
    Param::alias("can_id", "id", ParamKind::Integer),
];

/// One controller's validated settings.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Settings {
    /// Scales of the controller's own kp and kd (registers 0x023, 0x024); `None`: 1, not sent.
    pub kp_scale: Option<f32>,
    pub kd_scale: Option<f32>,
    /// N·m at the output (0x025); `None`: the controller's configured maximum.
    pub max_torque: Option<f32>,
}

/// Reads `joints.<dof>.moteus` of the drive at `key`.
pub fn settings(keys: &Keys, key: &str, p: &mut Problems) -> Settings {
    let mut scale = |name: &str| {
        let v = keys.number(&format!("moteus.{name}"))?;
        if !(0.0..=1.0).contains(&v) {
            p.add(
                format!("{key}.moteus.{name}"),
                format!("must be within 0..=1 (a fraction of the controller's own gain), got {v}"),
            );
        }
        Some(v as f32)
    };
    let kp_scale = scale("kp_scale");
    let kd_scale = scale("kd_scale");
    let max_torque = keys.number("moteus.max_torque");
    if let Some(t) = max_torque.filter(|t| !(t.is_finite() && *t > 0.0)) {
        p.add(
            format!("{key}.moteus.max_torque"),
            format!("must be a positive torque in N·m, got {t}"),
        );
    }
    Settings {
        kp_scale,
        kd_scale,
        max_torque: max_torque.map(|t| t as f32),
    }
}
