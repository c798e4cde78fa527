//! ROBOTIS DYNAMIXEL Protocol 2.0 servos (X series), on a serial line of their own: the packet
//! codec ([`codec`]), the settings ([`settings`]), the registers written when the bus opens
//! ([`setup`]), the calibration read-back ([`calibration`]) and the bus ([`drive`]).

pub mod calibration;
pub mod codec;
pub mod drive;
pub mod settings;
pub mod setup;

pub use codec::*;

use std::sync::Arc;
use std::time::Duration;

use crate::backend::FaultKind;
use crate::backend::bus::budget::Traffic;
use crate::backend::bus::serial;
use crate::backend::bus::settings::{
    BusSettings, DriveSettings, Keys, Param, Plugin, Problems, ServoCounts, Transport, UnitKeys,
};
use crate::backend::bus::{Bus, OpenError, bus_joints, timeout_ticks};
use crate::backend::bus::{Family, Medium, Mode};
use crate::backend::lerobot_calibration as lerobot;
use crate::backend::servo_setup::{self, Source};
use crate::backend::status::BusStatus;
use crate::backend::transport::serial::Port;
use crate::robot::Actuator;
use crate::trajectory::{CommandedDof, JointSet};
use setup::XSeries;

/// How long a servo may take to answer a request of the set-up at open (each of 3 tries).
const SETUP_TIMEOUT: Duration = Duration::from_millis(500);

/// The DYNAMIXEL family (`protocol: dynamixel`).
pub struct Dynamixel;

/// Its drives on `bus`.
fn drives(bus: &BusSettings) -> Vec<&DriveSettings> {
    bus.joints
        .iter()
        .filter(|d| d.family.name() == Dynamixel.name())
        .collect()
}

/// The drive range (counts) of the joint `dof` drives through `drive`, lowest first.
fn drive_range(drive: &DriveSettings, dof: &CommandedDof) -> (f64, f64) {
    let (a, b) = (
        drive.units.to_drive(dof.limits.position.lower),
        drive.units.to_drive(dof.limits.position.upper),
    );
    (a.min(b), a.max(b))
}

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
        let key = format!("{bus_key}.joints.{}", drive.dof);
        servo_setup::check_keys(&XSeries, &drive.keys, &key, p);
    }

    fn check_bus(&self, keys: &Keys, key: &str, p: &mut Problems) {
        servo_setup::check_keys(&XSeries, keys, key, p);
    }

    /// The Operating Mode the servo is to hold (its key, the bus's, or LeRobot's) must be one
    /// the joint is commanded in: velocity for a velocity joint; for the others position (only
    /// where the joint's range fits one turn), extended or current-based position.
    fn check_commanded(
        &self,
        drive: &DriveSettings,
        bus: &BusSettings,
        dof: &CommandedDof,
        (bus_key, key): (&str, &str),
        p: &mut Problems,
    ) {
        let mode = setup::OPERATING_MODE;
        let Some((value, source)) = servo_setup::wanted_of(&XSeries, &mode, drive, bus) else {
            return;
        };
        let velocity = dof.actuator == Actuator::Velocity;
        let (lo, hi) = drive_range(drive, dof);
        let one_turn = lo >= 0.0 && hi <= 4095.0;
        let fits = match u8::try_from(value).unwrap_or(u8::MAX) {
            codec::OPERATING_MODE_VELOCITY => velocity,
            codec::OPERATING_MODE_POSITION => !velocity && one_turn,
            codec::OPERATING_MODE_EXTENDED_POSITION | codec::OPERATING_MODE_CURRENT_POSITION => {
                !velocity
            }
            // Refused with the key's own value check.
            _ => true,
        };
        if fits {
            return;
        }
        let at = match source {
            Source::Joint => format!("{key}.{}", mode.key),
            Source::Bus => format!("{bus_key}.{}", mode.key),
            Source::LeRobot => key.to_string(),
        };
        let need = if velocity {
            "1 (velocity)".to_string()
        } else if one_turn {
            "3 (position), 4 (extended position) or 5 (current-based position)".to_string()
        } else {
            format!(
                "4 (extended position) or 5 (current-based position), since its range \
                 [{lo:.0}, {hi:.0}] does not fit one turn (0..4095)"
            )
        };
        p.add(
            at,
            format!(
                "`{}` is commanded by {}, but its servo is to hold Operating_Mode {value} ({}); \
                 it needs {need}: give `servo: {{operating_mode: ...}}` under this joint",
                drive.dof,
                if velocity { "velocity" } else { "position" },
                source.as_str()
            ),
        );
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

    /// The packets, and each servo's Return_Delay_Time (2 µs before it answers, in byte times
    /// of the line): what it is set to hold, else 0 (checked again at open with the value read).
    fn traffic(&self, drives: &[&DriveSettings], bus: &BusSettings, _period_ms: f64) -> Traffic {
        let baud = match bus.transport {
            Transport::Serial { baud, .. } => f64::from(baud),
            _ => 0.0,
        };
        Traffic {
            serial_bytes: codec::tick_bytes(drives.len(), reads_positions(bus)) as f64
                + servo_setup::delay_bytes(&XSeries, drives, bus, baud),
            ..Traffic::default()
        }
    }

    /// The servos' settings ([`setup`]), then the budget with the Return_Delay_Time they hold.
    fn prepare(
        &self,
        port: &mut dyn Port,
        bus: &BusSettings,
        rate_hz: f64,
    ) -> Result<(), OpenError> {
        servo_setup::prepare(&XSeries, port, bus, &drives(bus), rate_hz, SETUP_TIMEOUT)
    }

    fn prepared(&self, bus: &BusSettings) -> Vec<String> {
        servo_setup::prepared(&XSeries, bus, &drives(bus))
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
                let range = joints
                    .dofs
                    .get(index)
                    .map_or((0.0, 0.0), |d| drive_range(j, d));
                let held = servo_setup::wanted_of(&XSeries, &setup::OPERATING_MODE, j, bus)
                    .and_then(|(v, _)| u8::try_from(v).ok());
                let mut spec = drive::ServoSpec::new(index, mode, j, range, held);
                spec.ram = setup::RAM.map(|s| {
                    servo_setup::wanted_of(&XSeries, s, j, bus)
                        .and_then(|(v, _)| u16::try_from(v).ok())
                });
                spec
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
        if kind == FaultKind::EnableTimeout {
            return serial::unanswered_words(code);
        }
        matches!(kind, FaultKind::DriveFault | FaultKind::Protocol).then(|| {
            format!(
                "status error {code:#04x}: {}",
                codec::error_words(code as u8)
            )
        })
    }
}
