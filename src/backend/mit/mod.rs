//! MIT-mode motors (Mini Cheetah, bgkatz motorcontrol, CubeMars AK V1.x), on CAN. They have no
//! torque-off mode that keeps reporting, so they hold during teach-in.

pub mod codec;
pub mod drive;
pub mod settings;

pub use codec::*;

use crate::backend::bus::budget::Traffic;
use crate::backend::bus::can::CanDrive;
use crate::backend::bus::settings::{BusSettings, DriveSettings, Param, Problems, UnitKeys};
use crate::backend::bus::{Family, Medium, Mode, check_velocity_range};
use crate::robot::Actuator;
use crate::trajectory::CommandedDof;

/// The MIT-mode family (`protocol: mit`).
pub struct Mit;

/// A drive's settings, validated with its bus.
fn drive_settings(drive: &DriveSettings) -> Option<settings::Settings> {
    settings::settings(&drive.keys, "", &mut Problems::default())
}

impl Family for Mit {
    fn name(&self) -> &'static str {
        "mit"
    }

    fn medium(&self) -> Medium {
        Medium::Can
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

    fn modes(&self) -> (&'static [Mode], &'static str) {
        (
            &[Mode::Position, Mode::Velocity, Mode::Force],
            "servo, velocity and force",
        )
    }

    fn check_drive(
        &self,
        drive: &DriveSettings,
        _bus: &BusSettings,
        _rate_hz: f64,
        bus_key: &str,
        p: &mut Problems,
    ) {
        settings::settings(&drive.keys, &format!("{bus_key}.joints.{}", drive.dof), p);
    }

    /// The motor's position range.
    fn position_range(&self, drive: &DriveSettings, _actuator: Actuator) -> (f64, f64) {
        drive_settings(drive).map_or((0.0, 0.0), |s| {
            (f64::from(s.ranges.p_min), f64::from(s.ranges.p_max))
        })
    }

    /// The velocity limits must fit the motor's velocity range.
    fn check_range(&self, drive: &DriveSettings, dof: &CommandedDof, key: &str, p: &mut Problems) {
        if let Some(s) = drive_settings(drive) {
            let range = (f64::from(s.ranges.v_min), f64::from(s.ranges.v_max));
            check_velocity_range(drive, dof, range, format!("{key}.mit.v_max"), p);
        }
    }

    fn traffic(&self, drives: &[&DriveSettings], _bus: &BusSettings, _period_ms: f64) -> Traffic {
        let loads: Vec<_> = drives.iter().flat_map(|_| codec::DRIVE_LOAD).collect();
        Traffic::of(&loads)
    }

    fn can_drive(
        &self,
        drive: &DriveSettings,
        _bus: &BusSettings,
        _rate_hz: f64,
        mode: Mode,
    ) -> Option<Box<dyn CanDrive>> {
        let s = drive_settings(drive)?;
        Some(Box::new(drive::MitDrive::new(drive.id, mode, &s)))
    }
}
