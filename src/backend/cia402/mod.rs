//! CANopen CiA 402 drives in cyclic synchronous position mode (CSP), on CAN.

pub mod codec;
pub mod drive;
pub mod settings;

pub use codec::*;

use crate::backend::FaultKind;
use crate::backend::bus::budget::Traffic;
use crate::backend::bus::can::{CanDrive, CanService};
use crate::backend::bus::settings as s;
use crate::backend::bus::settings::{BusSettings, DriveSettings, Keys, Param, Problems, UnitKeys};
use crate::backend::bus::{Family, Medium, Mode};
use crate::robot::Actuator;

/// The CiA 402 family (`protocol: cia402`).
pub struct Cia402;

/// The bus's CiA 402 settings; its keys were validated with the bus.
fn bus_settings(bus: &BusSettings) -> settings::BusSettings {
    settings::bus_settings(&bus.keys, "", &mut s::Problems::default())
}

impl Family for Cia402 {
    fn name(&self) -> &'static str {
        "cia402"
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

    fn modes(&self) -> (&'static [Mode], &'static str) {
        (&[Mode::Position], "servo (cyclic synchronous position)")
    }

    fn check_drive(
        &self,
        drive: &DriveSettings,
        bus: &BusSettings,
        rate_hz: f64,
        bus_key: &str,
        p: &mut Problems,
    ) {
        // The rate is the bus's: said once, at its first CiA 402 drive.
        let first = bus.joints.iter().find(|j| j.family.name() == self.name());
        if first.is_some_and(|f| f.dof == drive.dof) {
            settings::check_drive(
                &drive.dof,
                drive.id,
                &bus_settings(bus),
                rate_hz,
                bus_key,
                p,
            );
        }
    }

    fn check_bus(&self, keys: &Keys, key: &str, p: &mut Problems) {
        settings::bus_settings(keys, key, p);
    }

    /// Positions are i32 counts.
    fn position_range(&self, _drive: &DriveSettings, _actuator: Actuator) -> (f64, f64) {
        (f64::from(i32::MIN), f64::from(i32::MAX))
    }

    fn can_ids(&self, drive: &DriveSettings) -> Vec<u32> {
        codec::ids(drive.id).to_vec()
    }

    fn traffic(&self, drives: &[&DriveSettings], bus: &BusSettings, period_ms: f64) -> Traffic {
        let heartbeat_ms = f64::from(bus_settings(bus).heartbeat_ms);
        let mut loads = codec::bus_load(bus.watchdog_ms, period_ms).to_vec();
        for _ in drives {
            loads.extend(codec::drive_load(heartbeat_ms, period_ms));
        }
        Traffic::of(&loads)
    }

    /// An RPDO per drive, the SYNC and motiond's heartbeat.
    fn burst(&self, drives: usize) -> usize {
        drives + 2
    }

    fn can_drive(
        &self,
        drive: &DriveSettings,
        bus: &BusSettings,
        rate_hz: f64,
        _mode: Mode,
    ) -> Option<Box<dyn CanDrive>> {
        let d = drive::Cia402Drive::new(drive.id, &bus_settings(bus), bus.watchdog_ms, rate_hz)?;
        Some(Box::new(d))
    }

    fn can_service(&self, bus: &BusSettings, rate_hz: f64) -> Option<Box<dyn CanService>> {
        Some(Box::new(drive::Cia402Sync::new(
            &bus_settings(bus),
            bus.watchdog_ms,
            rate_hz,
        )))
    }

    fn fault_words(&self, kind: FaultKind, code: u32) -> Option<String> {
        match kind {
            // EMCY errors carry the error register above the code; 0x6061 read-backs carry the
            // index.
            FaultKind::DriveFault if code >> 16 == 0x6061 => Some(format!(
                "the mode display 0x6061 shows mode {}, not 8 (cyclic synchronous position)",
                code & 0xFFFF
            )),
            FaultKind::DriveFault if (0x1_0000..0x100_0000).contains(&code) => {
                Some(codec::emcy_text(code))
            }
            FaultKind::SdoAbort => Some(format!(
                "SDO abort {code:#010x}: {}",
                codec::sdo_abort_words(code)
            )),
            _ => None,
        }
    }

    fn warning_words(&self, code: u32) -> Option<String> {
        Some(codec::emcy_text(code))
    }
}
