//! ROBOTIS DYNAMIXEL Protocol 2.0 servos (X series), on a serial line of their own.

pub mod codec;
pub mod drive;
pub mod settings;

pub use codec::*;

use std::sync::Arc;

use crate::backend::FaultKind;
use crate::backend::bus::budget::Traffic;
use crate::backend::bus::settings::{
    BusSettings, DriveSettings, Param, Plugin, Problems, ServoCounts, UnitKeys,
};
use crate::backend::bus::{Bus, bus_joints, timeout_ticks};
use crate::backend::bus::{Family, Medium, Mode};
use crate::backend::lerobot_calibration as lerobot;
use crate::backend::status::BusStatus;
use crate::backend::transport::serial::Port;
use crate::robot::Actuator;
use crate::trajectory::JointSet;

/// The DYNAMIXEL family (`protocol: dynamixel`).
pub struct Dynamixel;

/// Read Present Position every tick with a Sync Read (`sync_read`, default true).
fn reads_positions(bus: &BusSettings) -> bool {
    bus.keys.bool("sync_read").unwrap_or(true)
}

impl Family for Dynamixel {
    fn name(&self) -> &'static str {
        "dynamixel"
    }

    fn medium(&self) -> Medium {
        Medium::Serial
    }

    fn ids(&self) -> (u8, u8) {
        settings::IDS
    }

    fn units(&self) -> UnitKeys {
        settings::UNITS
    }

    fn joint_keys(&self) -> &'static [Param] {
        settings::JOINT_PARAMS
    }

    fn bus_keys(&self) -> &'static [Param] {
        settings::BUS_PARAMS
    }

    fn plugins(&self) -> &'static [Plugin] {
        settings::PLUGINS
    }

    fn modes(&self) -> (&'static [Mode], &'static str) {
        (
            &[Mode::Position, Mode::Velocity],
            "servo (position) and velocity",
        )
    }

    fn check_drive(
        &self,
        drive: &DriveSettings,
        bus: &BusSettings,
        _rate_hz: f64,
        bus_key: &str,
        p: &mut Problems,
    ) {
        lerobot::check_drive(drive, bus, bus_key, p);
    }

    /// X series: 4096 counts a turn; LeRobot's DYNAMIXEL bus leaves `drive_mode` to the servo's
    /// Drive_Mode register (written when it calibrates), so positions read are already
    /// reversed.
    fn lerobot_counts(&self) -> Option<ServoCounts> {
        Some(ServoCounts {
            resolution: 4096,
            applies_drive_mode: false,
            homing_offset_max: 1_044_479,
        })
    }

    /// Beyond one turn the servo runs in extended position mode (±256 turns).
    fn position_range(&self, _drive: &DriveSettings, actuator: Actuator) -> (f64, f64) {
        if actuator == Actuator::Velocity {
            (f64::NEG_INFINITY, f64::INFINITY)
        } else {
            (
                -codec::EXTENDED_POSITION_LIMIT,
                codec::EXTENDED_POSITION_LIMIT,
            )
        }
    }

    fn traffic(&self, drives: &[&DriveSettings], bus: &BusSettings, _period_ms: f64) -> Traffic {
        Traffic {
            serial_bytes: codec::tick_bytes(drives.len(), reads_positions(bus)) as f64,
            ..Traffic::default()
        }
    }

    fn serial_bus(
        &self,
        port: Box<dyn Port>,
        bus: &BusSettings,
        joints: &JointSet,
        rate_hz: f64,
        status: Arc<BusStatus>,
    ) -> Option<Box<dyn Bus>> {
        let specs: Vec<drive::ServoSpec> = bus_joints(bus, joints)
            .into_iter()
            .map(|(index, mode, j)| {
                let range = joints.dofs.get(index).map_or((0.0, 0.0), |d| {
                    let (a, b) = (
                        j.units.to_drive(d.limits.position.lower),
                        j.units.to_drive(d.limits.position.upper),
                    );
                    (a.min(b), a.max(b))
                });
                drive::ServoSpec::new(index, mode, j, range)
            })
            .collect();
        let settings = drive::DynamixelSettings {
            sync_read: reads_positions(bus),
            timeout_ticks: timeout_ticks(bus, rate_hz),
            rate_hz,
            watchdog_ms: bus.watchdog_ms,
        };
        Some(Box::new(drive::bus(port, &specs, settings, status)))
    }

    fn budget_advice(&self) -> Option<&'static str> {
        Some("a faster baud rate or sync_read: false also frees time")
    }

    fn fault_words(&self, kind: FaultKind, code: u32) -> Option<String> {
        matches!(kind, FaultKind::DriveFault | FaultKind::Protocol).then(|| {
            format!(
                "status error {code:#04x}: {}",
                codec::error_words(code as u8)
            )
        })
    }
}
