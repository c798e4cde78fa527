//! What a configuration says about DYNAMIXEL servos: ids and units.

use super::MAX_ID;
use crate::backend::proto::UnitKeys;

pub const IDS: (u8, u8) = (0, MAX_ID);

/// 4096 counts a turn, 2048 at the middle of the turn (the X series' defaults).
pub const UNITS: UnitKeys = UnitKeys {
    per_unit: Some("counts_per_unit"),
    default_per_unit: Some(4096.0 / std::f64::consts::TAU),
    default_zero_offset: 2048.0,
};
