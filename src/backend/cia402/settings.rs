//! What a configuration says about CiA 402 drives: the bus-wide `heartbeat_ms`, `master_id` and
//! `on_connection_loss`, and whether the control rate can be told to a drive (0x60C2).

use super::codec::{OnConnectionLoss, interpolation_period, nearest_periodic_rates};
use crate::backend::bus::settings::{Keys, Param, ParamKind, Problems, UnitKeys};

/// CANopen node ids.
pub const IDS: (u8, u8) = (1, 127);

/// Encoder counts per joint unit before the gear: no default, every encoder differs.
pub const UNITS: UnitKeys = UnitKeys {
    per_unit: Some("counts_per_unit"),
    default_per_unit: None,
    default_zero_offset: 0.0,
};

/// `<ros2_control>` `<joint>` params of a CiA 402 drive (beyond the keys every drive has).
/// `node_id` is CANopen's word for the id.
pub const JOINT_PARAMS: &[Param] = &[
    Param::same("counts_per_unit", ParamKind::Number),
    Param::alias("node_id", "id", ParamKind::Integer),
];

/// `<ros2_control>` `<hardware>` params of a bus with CiA 402 drives.
pub const BUS_PARAMS: &[Param] = &[
    Param::same("heartbeat_ms", ParamKind::Number),
    Param::same("master_id", ParamKind::Integer),
    Param::same("on_connection_loss", ParamKind::Text),
];

const DEFAULT_HEARTBEAT_MS: f64 = 20.0;
const DEFAULT_MASTER_ID: u8 = 127;

/// What a CAN bus with CiA 402 drives tells them beyond the PDOs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BusSettings {
    /// 0x1017: the drives' heartbeat period.
    pub heartbeat_ms: u16,
    /// The node id of motiond's own heartbeat, which the drives consume (0x1016).
    pub master_id: u8,
    /// 0x6007.
    pub on_connection_loss: OnConnectionLoss,
}

impl Default for BusSettings {
    fn default() -> Self {
        Self {
            heartbeat_ms: DEFAULT_HEARTBEAT_MS as u16,
            master_id: DEFAULT_MASTER_ID,
            on_connection_loss: OnConnectionLoss::QuickStop,
        }
    }
}

/// Reads the CiA 402 keys of the bus at `key` (defaults where they are not given).
pub fn bus_settings(keys: &Keys, key: &str, p: &mut Problems) -> BusSettings {
    let d = BusSettings::default();
    let heartbeat_ms = match keys.number("heartbeat_ms").unwrap_or(DEFAULT_HEARTBEAT_MS) {
        h if (1.0..=32767.0).contains(&h) && h.fract() == 0.0 => h as u16,
        h => {
            p.add(
                format!("{key}.heartbeat_ms"),
                format!("must be a whole number of ms in 1..=32767 (0x1017), got {h}"),
            );
            d.heartbeat_ms
        }
    };
    let raw_master_id = keys.integer("master_id");
    let master_id = match raw_master_id.map(u8::try_from) {
        None => d.master_id,
        Some(Ok(id)) if (IDS.0..=IDS.1).contains(&id) => id,
        Some(_) => {
            p.add(
                format!("{key}.master_id"),
                format!(
                    "CANopen node ids are 1..=127, got {}",
                    raw_master_id.unwrap_or_default()
                ),
            );
            d.master_id
        }
    };
    let on_connection_loss = match keys.text("on_connection_loss") {
        None => d.on_connection_loss,
        Some(name) => OnConnectionLoss::from_name(name).unwrap_or_else(|| {
            p.add(
                format!("{key}.on_connection_loss"),
                format!(
                    "expected one of `{}`, got `{name}`",
                    OnConnectionLoss::NAMES.join("`, `")
                ),
            );
            d.on_connection_loss
        }),
    };
    BusSettings {
        heartbeat_ms,
        master_id,
        on_connection_loss,
    }
}

/// A CiA 402 drive (`dof`, node `node`, under bus `bus_key`) is told the control period
/// in 0x60C2, which holds 1..255 × 10^-3..-6 s: a rate whose period it cannot hold is refused
/// (the drive would interpolate over a wrong period). Its node id must not be the master's.
pub fn check_drive(
    dof: &str,
    node: u8,
    settings: &BusSettings,
    rate_hz: f64,
    bus_key: &str,
    p: &mut Problems,
) {
    if interpolation_period(rate_hz).is_none() {
        let (below, above) = nearest_periodic_rates(rate_hz);
        let near: Vec<String> = [below, above]
            .into_iter()
            .flatten()
            .map(|r| format!("{r} Hz"))
            .collect();
        p.add(
            format!("{bus_key}.joints.{dof}"),
            format!(
                "control.rate_hz {rate_hz} Hz: its period {:.4} ms cannot be told to a CiA 402 drive \
                 (0x60C2 holds 1..255 × 10^-3..10^-6 s); use a rate whose period it can hold, such \
                 as {}",
                1000.0 / rate_hz,
                near.join(" or ")
            ),
        );
    }
    if settings.master_id == node {
        p.add(
            format!("{bus_key}.master_id"),
            format!(
                "node id {} is `{dof}`'s; motiond's heartbeat needs an id of its own",
                settings.master_id
            ),
        );
    }
}
