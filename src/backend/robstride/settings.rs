//! What a configuration says about a Robstride or CyberGear motor: `joints.<dof>.robstride` —
//! the model (its ranges, each overridable), the gains and the host id.

use super::codec::{self, MODELS, Ranges};
use crate::backend::bus::settings::{Keys, Param, ParamKind, Problems, UnitKeys};

/// Motor ids (CAN_ID, 1..127 on every model).
pub const IDS: (u8, u8) = (1, 127);

/// The host id of the vendor's C sample and motorbridge.
pub const DEFAULT_HOST_ID: u8 = 0xFD;

/// The motor takes output-shaft radians; no unit key.
pub const UNITS: UnitKeys = UnitKeys {
    per_unit: None,
    default_per_unit: Some(1.0),
    default_zero_offset: 0.0,
};

/// The keys of a Robstride motor (beyond the keys every drive has), named with their path.
pub const JOINT_PARAMS: &[Param] = &[
    Param::same("robstride.model", ParamKind::Text),
    Param::same("robstride.kp", ParamKind::Number),
    Param::same("robstride.kd", ParamKind::Number),
    Param::same("robstride.host_id", ParamKind::Integer),
    Param::same("robstride.p_max", ParamKind::Number),
    Param::same("robstride.v_max", ParamKind::Number),
    Param::same("robstride.t_max", ParamKind::Number),
    Param::same("robstride.kp_max", ParamKind::Number),
    Param::same("robstride.kd_max", ParamKind::Number),
];

/// One motor's validated settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    pub ranges: Ranges,
    pub kp: f64,
    pub kd: f64,
    /// The id motiond speaks as: the data field of its frames, the target of the motor's.
    pub host_id: u8,
}

fn model_names() -> String {
    MODELS
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Reads `joints.<dof>.robstride` (the drive at `key`, motor `id`); `None` when a problem was
/// added.
pub fn settings(keys: &Keys, key: &str, id: u8, p: &mut Problems) -> Option<Settings> {
    let key = &format!("{key}.robstride");
    let (Some(name), Some(kp), Some(kd)) = (
        keys.text("robstride.model"),
        keys.number("robstride.kp"),
        keys.number("robstride.kd"),
    ) else {
        p.add(
            key.clone(),
            format!(
                "a Robstride motor needs its `model` ({}) and its gains `kp` and `kd`",
                model_names()
            ),
        );
        return None;
    };
    let Some(model) = codec::model(name) else {
        p.add(
            format!("{key}.model"),
            format!("`{name}` is not a model motiond knows: {}", model_names()),
        );
        return None;
    };
    let before = p.len();
    let mut value = |name: &str, dflt: f32| {
        let Some(v) = keys.number(&format!("robstride.{name}")) else {
            return dflt;
        };
        if !(v.is_finite() && v > 0.0 && v < 1e6) {
            p.add(
                format!("{key}.{name}"),
                format!("must be a positive number, got {v}"),
            );
        }
        v as f32
    };
    let ranges = Ranges {
        p_max: value("p_max", model.p_max),
        v_max: value("v_max", model.v_max),
        t_max: value("t_max", model.t_max),
        kp_max: value("kp_max", model.kp_max),
        kd_max: value("kd_max", model.kd_max),
    };
    for (name, v, max) in [("kp", kp, ranges.kp_max), ("kd", kd, ranges.kd_max)] {
        if !(v.is_finite() && v >= 0.0 && v <= f64::from(max)) {
            p.add(
                format!("{key}.{name}"),
                format!("must be within 0..={max}, got {v}"),
            );
        }
    }
    let raw = keys.integer("robstride.host_id");
    let host_id = match raw.map(u8::try_from) {
        None => DEFAULT_HOST_ID,
        Some(Ok(h)) if h != id => h,
        _ => {
            p.add(
                format!("{key}.host_id"),
                format!(
                    "the host id is 0..=255 and not the motor's own id {id}, got {}",
                    raw.unwrap_or_default()
                ),
            );
            DEFAULT_HOST_ID
        }
    };
    (p.len() == before).then_some(Settings {
        ranges,
        kp,
        kd,
        host_id,
    })
}
