//! Robstride motors (RS00–RS06; K-Scale's humanoids, LeRobot's `robstride` bus) and the Xiaomi
//! CyberGear, in motion mode over their private protocol (29-bit ids) on CAN
//! (`protocol: robstride`). Teach-in: zero-gain motion frames (the motor keeps answering with its
//! position). No E-stop input of their own.

pub mod codec;
pub mod drive;
pub mod settings;

use crate::backend::FaultKind;
use crate::backend::bus::budget::Traffic;
use crate::backend::bus::can::CanDrive;
use crate::backend::bus::settings::{BusSettings, DriveSettings, Param, Problems, UnitKeys};
use crate::backend::bus::{Family, Medium, Mode, check_velocity_range};
use crate::robot::Actuator;
use crate::trajectory::CommandedDof;

/// The Robstride family (`protocol: robstride`).
pub struct Robstride;

/// Tags a motor id in [`Family::can_ids`]: its frames are extended, apart from every standard
/// id, and two motors of one id would answer each other's frames.
const MOTOR_ID_TAG: u32 = 0x8000_0000;

fn drive_settings(drive: &DriveSettings) -> Option<settings::Settings> {
    settings::settings(&drive.keys, "", drive.id, &mut Problems::default())
}

impl Family for Robstride {
    fn name(&self) -> &'static str {
        "robstride"
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

    /// Its keys, and a host id that is no motor's id on the bus (that motor would take the
    /// replies addressed to motiond).
    fn check_drive(
        &self,
        drive: &DriveSettings,
        bus: &BusSettings,
        _rate_hz: f64,
        bus_key: &str,
        p: &mut Problems,
    ) {
        let key = format!("{bus_key}.joints.{}", drive.dof);
        let Some(s) = settings::settings(&drive.keys, &key, drive.id, p) else {
            return;
        };
        let motor = bus
            .joints
            .iter()
            .find(|j| j.family.name() == self.name() && j.id == s.host_id);
        if let Some(other) = motor {
            p.add(
                format!("{key}.robstride.host_id"),
                format!(
                    "host id {} is the id of `{}` on this bus: pick an id no motor has (the \
                     vendor's default is {})",
                    s.host_id,
                    other.dof,
                    settings::DEFAULT_HOST_ID
                ),
            );
        }
    }

    /// ±p_max.
    fn position_range(&self, drive: &DriveSettings, _actuator: Actuator) -> (f64, f64) {
        drive_settings(drive).map_or((0.0, 0.0), |s| {
            let p = f64::from(s.ranges.p_max);
            (-p, p)
        })
    }

    /// The velocity limits must fit ±v_max.
    fn check_range(&self, drive: &DriveSettings, dof: &CommandedDof, key: &str, p: &mut Problems) {
        if let Some(s) = drive_settings(drive) {
            let v = f64::from(s.ranges.v_max);
            check_velocity_range(drive, dof, (-v, v), format!("{key}.robstride.v_max"), p);
        }
    }

    fn can_ids(&self, drive: &DriveSettings) -> Vec<u32> {
        vec![MOTOR_ID_TAG | u32::from(drive.id)]
    }

    fn traffic(&self, drives: &[&DriveSettings], _bus: &BusSettings, _period_ms: f64) -> Traffic {
        let loads: Vec<_> = drives.iter().flat_map(|_| codec::DRIVE_LOAD).collect();
        Traffic::of(&loads)
    }

    fn can_drive(
        &self,
        drive: &DriveSettings,
        bus: &BusSettings,
        rate_hz: f64,
        mode: Mode,
    ) -> Option<Box<dyn CanDrive>> {
        let s = drive_settings(drive)?;
        Some(Box::new(drive::RobstrideDrive::new(
            drive.id,
            mode,
            &s,
            bus.watchdog_ms,
            rate_hz,
        )))
    }

    /// Feedback fault bits, the motor out of run mode (its CAN timeout tripped, or stopped by
    /// another host), or a fault frame's fault word.
    fn fault_words(&self, kind: FaultKind, code: u32) -> Option<String> {
        if kind != FaultKind::DriveFault {
            return None;
        }
        Some(if code & drive::FEEDBACK_FAULT != 0 {
            format!(
                "the motor's feedback reports {}",
                codec::feedback_fault_words((code >> 16) as u8 & 0x3F)
            )
        } else if code & drive::NOT_MOTION_MODE != 0 {
            format!(
                "the motor's run_mode is {}, not motion control (0): set it with the vendor's \
                 tool (motiond does not switch a motor's mode)",
                code & 0xFF
            )
        } else if code & drive::LEFT_RUN_MODE != 0 {
            format!(
                "the motor left run mode for {} (its CAN timeout passed, or another host \
                 stopped it)",
                codec::mode_words((code & 0x3) as u8)
            )
        } else {
            format!(
                "fault frame: {} (fault word {code:#x})",
                codec::fault_frame_words(code)
            )
        })
    }

    fn warning_words(&self, code: u32) -> Option<String> {
        Some(codec::warning_words(code))
    }
}
