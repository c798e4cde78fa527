//! What a configuration says about an ODrive axis: `joints.<dof>.firmware` and `.endpoints`.

use super::codec::{Firmware, MAX_NODE};
use crate::backend::bus::settings::{Keys, Param, ParamKind, Plugin, Problems, UnitKeys};

pub const IDS: (u8, u8) = (0, MAX_NODE);

/// Motor turns per joint unit before the gear, by default one turn per 2π rad.
pub const UNITS: UnitKeys = UnitKeys {
    per_unit: Some("turns_per_unit"),
    default_per_unit: Some(1.0 / std::f64::consts::TAU),
    default_zero_offset: 0.0,
};

/// `<ros2_control>` `<joint>` params of an ODrive axis (beyond the keys every drive has);
/// `node_id` is what ODrive's `odrive_ros2_control` plugin calls the id.
pub const JOINT_PARAMS: &[Param] = &[
    Param::same("turns_per_unit", ParamKind::Number),
    Param::same("firmware", ParamKind::Text),
    Param::same("endpoints.watchdog_timeout", ParamKind::Integer),
    Param::same("endpoints.enable_watchdog", ParamKind::Integer),
    Param::alias("node_id", "id", ParamKind::Integer),
];

/// `<ros2_control>` `<hardware>` params of a bus with ODrives: `can`, the SocketCAN interface as
/// `odrive_ros2_control` names it.
pub const BUS_PARAMS: &[Param] = &[Param::alias("can", "interface", ParamKind::Text)];

/// ros2_control hardware plugins that drive ODrives over SocketCAN.
pub const PLUGINS: &[Plugin] = &[Plugin {
    name: "odrive_ros2_control_plugin/ODriveHardwareInterface",
    transport: "can",
    protocol: "odrive",
}];

/// One axis's validated settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    pub firmware: Firmware,
    /// (watchdog_timeout, enable_watchdog) endpoint ids, 0.6 only.
    pub endpoints: Option<(u16, u16)>,
}

/// Reads `firmware` and `endpoints` of the drive at `key`.
pub fn settings(keys: &Keys, key: &str, p: &mut Problems) -> Settings {
    let firmware = match keys.text("firmware") {
        None | Some("0.6") => Firmware::V06,
        Some("0.5") => Firmware::V05,
        Some(other) => {
            p.add(
                format!("{key}.firmware"),
                format!("expected \"0.5\" or \"0.6\", got `{other}`"),
            );
            Firmware::V06
        }
    };
    let mut endpoint = |name: &str| {
        let k = format!("endpoints.{name}");
        let v = keys.integer(&k)?;
        let id = u16::try_from(v).ok();
        if id.is_none() {
            p.add(
                format!("{key}.{k}"),
                format!("endpoint ids are 0..=65535, got {v}"),
            );
        }
        id
    };
    let given = keys.any_under("endpoints");
    let endpoints = match (endpoint("watchdog_timeout"), endpoint("enable_watchdog")) {
        (Some(t), Some(e)) => Some((t, e)),
        _ if given => {
            p.add(
                format!("{key}.endpoints"),
                "needs both `watchdog_timeout` and `enable_watchdog` (their ids in the firmware's \
                 flat_endpoints.json)",
            );
            None
        }
        _ => None,
    };
    if firmware == Firmware::V05 && given {
        p.add(
            format!("{key}.endpoints"),
            "firmware 0.5 has no endpoint access over CAN: enable the watchdog on the drive \
             (axis.config.enable_watchdog, axis.config.watchdog_timeout)",
        );
    }
    Settings {
        firmware,
        endpoints,
    }
}
