//! What a configuration says about DYNAMIXEL servos: ids and units.

use super::codec::MAX_ID;
use super::setup;
use crate::backend::bus::settings::{Param, ParamKind, Plugin, UnitKeys};
use crate::backend::lerobot_calibration as lerobot;
use crate::backend::servo_setup;

pub const IDS: (u8, u8) = (0, MAX_ID);

/// 4096 counts a turn, 2048 at the middle of the turn (the X series' defaults).
pub const UNITS: UnitKeys = UnitKeys {
    per_unit: Some("counts_per_unit"),
    default_per_unit: Some(4096.0 / std::f64::consts::TAU),
    default_zero_offset: 2048.0,
};

/// The `servo:` keys, on a bus and on a joint.
const SERVO_PARAMS: [Param; setup::SETTINGS.len()] = servo_setup::params(&setup::SETTINGS);

/// Keys and `<ros2_control>` `<joint>` params of a servo (beyond the keys every drive has).
pub const JOINT_PARAMS: &[Param] = &Param::joined::<{ 3 + SERVO_PARAMS.len() }>(
    &[
        Param::same("counts_per_unit", ParamKind::Number),
        lerobot::MOTOR_PARAM,
        lerobot::MODE_PARAM,
    ],
    &SERVO_PARAMS,
);

/// `<ros2_control>` `<hardware>` params of a DYNAMIXEL bus; `usb_port` and `baud_rate` are the
/// names ROBOTIS' `dynamixel_hardware` plugin gives the device and the line rate.
pub const BUS_PARAMS: &[Param] = &Param::joined::<{ 4 + SERVO_PARAMS.len() }>(
    &[
        Param::same("sync_read", ParamKind::Bool),
        lerobot::BUS_PARAM,
        Param::alias("usb_port", "device", ParamKind::Text),
        Param::alias("baud_rate", "baud", ParamKind::Integer),
    ],
    &SERVO_PARAMS,
);

/// ros2_control hardware plugins that drive DYNAMIXEL servos on a serial line.
pub const PLUGINS: &[Plugin] = &[Plugin {
    name: "dynamixel_hardware/DynamixelHardware",
    transport: "serial",
    protocol: "dynamixel",
}];
