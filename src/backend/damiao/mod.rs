//! Damiao DM-J motors (DM4310, DM4340, DM8009…; OpenArm, Seeed reBot, LeRobot's `damiao` bus) in
//! MIT mode, on CAN (`protocol: damiao`) or on CAN-FD where the motors are set to it
//! (`protocol: damiao_fd`: the same frames with the bit rate switch). Teach-in: zero-gain MIT
//! commands (the motor keeps answering with its position). No E-stop input of their own.

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

/// The Damiao family: `protocol: damiao` on classic CAN, `protocol: damiao_fd` on CAN-FD.
pub struct Damiao {
    pub fd: bool,
}

/// Classic CAN at 1 Mbit/s (the motors' default).
pub static DAMIAO: Damiao = Damiao { fd: false };
/// CAN-FD (the motor's CAN-FD mode set with the vendor's tool; 1 M arbitration, 5 M data).
pub static DAMIAO_FD: Damiao = Damiao { fd: true };

/// A drive's settings, validated with its bus.
fn drive_settings(drive: &DriveSettings) -> Option<settings::Settings> {
    settings::settings(&drive.keys, "", &mut Problems::default())
}

impl Family for Damiao {
    fn name(&self) -> &'static str {
        if self.fd { "damiao_fd" } else { "damiao" }
    }

    fn medium(&self) -> Medium {
        Medium::Can
    }

    fn fd(&self) -> bool {
        self.fd
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

    /// ±PMAX.
    fn position_range(&self, drive: &DriveSettings, _actuator: Actuator) -> (f64, f64) {
        drive_settings(drive).map_or((0.0, 0.0), |s| (-f64::from(s.p_max), f64::from(s.p_max)))
    }

    /// The velocity limits must fit ±VMAX.
    fn check_range(&self, drive: &DriveSettings, dof: &CommandedDof, key: &str, p: &mut Problems) {
        if let Some(s) = drive_settings(drive) {
            let v = f64::from(s.v_max);
            check_velocity_range(drive, dof, (-v, v), format!("{key}.damiao.v_max"), p);
        }
    }

    /// Its command id and its feedback (master) id: a motor's feedback on another's command id
    /// would be taken for a command.
    fn can_ids(&self, drive: &DriveSettings) -> Vec<u32> {
        let master = drive_settings(drive).map(|s| u32::from(s.master_id));
        std::iter::once(u32::from(drive.id)).chain(master).collect()
    }

    fn traffic(&self, drives: &[&DriveSettings], _bus: &BusSettings, _period_ms: f64) -> Traffic {
        let loads: Vec<_> = drives
            .iter()
            .flat_map(|_| codec::DRIVE_LOAD)
            .map(|l| if self.fd { l.fd() } else { l })
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
        let s = drive_settings(drive)?;
        Some(Box::new(drive::DamiaoDrive::new(
            drive.id,
            self.fd,
            mode,
            &s,
            bus.watchdog_ms,
            rate_hz,
        )))
    }

    /// The state nibble (8 over-voltage … E overload), a motor that disabled itself, or a
    /// register that contradicts the configuration.
    fn fault_words(&self, kind: FaultKind, code: u32) -> Option<String> {
        match (kind, code) {
            (FaultKind::DriveFault, 0x8..=0xF) => Some(format!(
                "the motor reports {} (state {code:#x})",
                codec::state_words(code as u8)
            )),
            (FaultKind::DriveFault, drive::DISABLED_CODE) => {
                Some("the motor reports itself disabled while it should follow".into())
            }
            (FaultKind::DriveFault, _) => codec::mismatch_words(code),
            _ => None,
        }
    }
}
