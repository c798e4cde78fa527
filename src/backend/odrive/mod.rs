//! ODrive axes over CAN Simple (firmware 0.5 and 0.6), on CAN.

pub mod codec;
pub mod drive;
pub mod settings;

pub use codec::*;

use crate::backend::bus::budget::Traffic;
use crate::backend::bus::can::CanDrive;
use crate::backend::bus::settings::{
    BusSettings, DriveSettings, Param, Plugin, Problems, UnitKeys,
};
use crate::backend::bus::{Family, Medium, Mode};

/// The ODrive family (`protocol: odrive`).
pub struct Odrive;

impl Family for Odrive {
    fn name(&self) -> &'static str {
        "odrive"
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

    fn bus_keys(&self) -> &'static [Param] {
        settings::BUS_PARAMS
    }

    fn plugins(&self) -> &'static [Plugin] {
        settings::PLUGINS
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

    /// A node's ids: node << 5 | command.
    fn can_ids(&self, drive: &DriveSettings) -> Vec<u32> {
        codec::ids(drive.id).collect()
    }

    fn traffic(&self, drives: &[&DriveSettings], _bus: &BusSettings, period_ms: f64) -> Traffic {
        let loads: Vec<_> = drives
            .iter()
            .flat_map(|_| codec::drive_load(period_ms))
            .collect();
        Traffic::of(&loads)
    }

    fn can_drive(
        &self,
        drive: &DriveSettings,
        bus: &BusSettings,
        rate_hz: f64,
        mode: Mode,
    ) -> Option<Box<dyn CanDrive>> {
        let s = settings::settings(&drive.keys, "", &mut Problems::default());
        Some(Box::new(drive::OdriveDrive::new(
            drive.id,
            mode,
            &s,
            bus.watchdog_ms,
            rate_hz,
        )))
    }
}
