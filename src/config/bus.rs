//! Bus and per-joint drive settings: the `buses:` section of the configuration (issue 7).
//!
//! The config module deserializes `buses:` into [`RawBus`] entries and calls [`validate`]; the
//! bus owner fills both in with transports, protocols, unit conversion and the bus budget.

use serde::Deserialize;

/// One `buses:` entry as written.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBus {
    pub name: String,
}

/// One validated bus.
#[derive(Debug, Clone, PartialEq)]
pub struct Bus {
    pub name: String,
}

/// A problem in one bus entry: the key path under `buses` (e.g. `buses[0].joints.base_yaw.gear_ratio`)
/// and what is wrong with its value.
#[derive(Debug, Clone, PartialEq)]
pub struct BusProblem {
    pub key: String,
    pub message: String,
}

/// Validates the `buses:` entries against the commanded DOF names and the control rate.
pub fn validate(
    raw: &[RawBus],
    dof_names: &[&str],
    rate_hz: f64,
) -> Result<Vec<Bus>, Vec<BusProblem>> {
    let _ = (dof_names, rate_hz);
    Ok(raw
        .iter()
        .map(|b| Bus {
            name: b.name.clone(),
        })
        .collect())
}
