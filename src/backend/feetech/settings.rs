//! What a configuration says about Feetech servos: ids and units, per series.

use super::codec::{IDS as CODEC_IDS, Series};
use super::setup;
use crate::backend::bus::settings::{Param, ParamKind, UnitKeys};
use crate::backend::lerobot_calibration as lerobot;
use crate::backend::servo_setup;

pub const IDS: (u8, u8) = CODEC_IDS;

/// One turn of counts a turn, the middle of the turn at joint 0 (the servos' centre, where
/// LeRobot's calibration puts the SO-101's joint zero).
pub const fn units(series: Series) -> UnitKeys {
    let resolution = series.resolution() as f64;
    UnitKeys {
        per_unit: Some("counts_per_unit"),
        default_per_unit: Some(resolution / std::f64::consts::TAU),
        default_zero_offset: resolution / 2.0,
    }
}

/// The `servo:` keys, on a bus and on a joint.
const SERVO_PARAMS: [Param; setup::SETTINGS.len()] = servo_setup::params(&setup::SETTINGS);

/// Keys of a servo (beyond the keys every drive has).
pub const JOINT_PARAMS: &[Param] = &Param::joined::<{ 3 + SERVO_PARAMS.len() }>(
    &[
        Param::same("counts_per_unit", ParamKind::Number),
        lerobot::MOTOR_PARAM,
        lerobot::MODE_PARAM,
    ],
    &SERVO_PARAMS,
);

/// Keys of a bus (beyond the keys every bus has): the `servo:` keys are every servo's values
/// unless its joint gives its own.
pub const BUS_PARAMS: &[Param] =
    &Param::joined::<{ 1 + SERVO_PARAMS.len() }>(&[lerobot::BUS_PARAM], &SERVO_PARAMS);
