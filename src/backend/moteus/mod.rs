//! mjbots moteus controllers over CAN-FD (1 Mbit/s arbitration, 5 Mbit/s data), in position
//! mode with velocity and torque feed-forward.

pub mod codec;
pub mod drive;
pub mod settings;

use crate::backend::FaultKind;
use crate::backend::bus::budget::Traffic;
use crate::backend::bus::can::CanDrive;
use crate::backend::bus::settings::{BusSettings, DriveSettings, Param, Problems, UnitKeys};
use crate::backend::bus::{Family, Medium, Mode};

/// The moteus family (`protocol: moteus`).
pub struct Moteus;

/// A drive's settings, validated with its bus.
fn drive_settings(drive: &DriveSettings) -> settings::Settings {
    settings::settings(&drive.keys, "", &mut Problems::default())
}

impl Family for Moteus {
    fn name(&self) -> &'static str {
        "moteus"
    }

    fn medium(&self) -> Medium {
        Medium::Can
    }

    fn fd(&self) -> bool {
        true
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
        bus: &BusSettings,
        _rate_hz: f64,
        bus_key: &str,
        p: &mut Problems,
    ) {
        let key = format!("{bus_key}.joints.{}", drive.dof);
        let _ = bus;
        settings::settings(&drive.keys, &key, p);
    }

    /// Replies come from `id << 8` (to the host, source 0), commands go to `0x8000 | id`.
    fn can_ids(&self, drive: &DriveSettings) -> Vec<u32> {
        let id = u32::from(drive.id);
        vec![codec::arbitration_id(drive::SOURCE, drive.id), id << 8]
    }

    fn traffic(&self, drives: &[&DriveSettings], bus: &BusSettings, _period_ms: f64) -> Traffic {
        let loads: Vec<_> = drives
            .iter()
            .flat_map(|d| {
                let s = drive_settings(d);
                codec::drive_load(&codec::Command {
                    position: 0.0,
                    velocity: 0.0,
                    feedforward_torque: 0.0,
                    kp_scale: s.kp_scale,
                    kd_scale: s.kd_scale,
                    maximum_torque: s.max_torque,
                    watchdog_timeout: (bus.watchdog_ms / 1000.0) as f32,
                })
            })
            .collect();
        Traffic::of(&loads)
    }

    fn can_drive(
        &self,
        drive: &DriveSettings,
        bus: &BusSettings,
        _rate_hz: f64,
        mode: Mode,
    ) -> Option<Box<dyn CanDrive>> {
        Some(Box::new(drive::MoteusDrive::new(
            drive.id,
            mode,
            drive_settings(drive),
            bus.watchdog_ms,
        )))
    }

    fn fault_words(&self, kind: FaultKind, code: u32) -> Option<String> {
        if kind != FaultKind::DriveFault {
            return None;
        }
        Some(match code {
            c if c & drive::MODE_CODE != 0 => match c & 0xFF {
                m if m == u32::from(codec::MODE_TIMEOUT) => {
                    "mode timeout: the controller heard no command within its watchdog \
                     (0x027)"
                        .to_string()
                }
                m => format!("the controller left position mode for mode {m}"),
            },
            c => format!("fault {c}: {}", codec::fault_words(c as u8)),
        })
    }
}
