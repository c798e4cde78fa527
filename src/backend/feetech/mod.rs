//! Feetech STS/SMS and SCS serial servos (the SO-100/SO-101 arms' STS3215) on a half-duplex
//! serial line of their own: the packet codec ([`codec`]), the settings ([`settings`]) and the
//! bus ([`drive`]): goal positions in one Sync Write a tick, positions read back with one Sync
//! Read (STS) or a Read per servo (SCS), faults from the status byte, teach-in with torque off.
//!
//! These servos have no communication watchdog: a servo that hears nothing keeps holding its
//! last goal position with torque on, whatever happened to the host. motiond turns their torque
//! off when it disables them (a `disable` request, the end of `play` with `safe_state: disable`,
//! shutdown) but nothing on the servo stops it when motiond dies or the cable is cut: power the
//! servos through the E-stop chain.
//!
//! The bus budget ([`codec::tick_bytes`]) at 1 Mbit/s, 10 bits a byte, with the bus's default
//! maximum load of 70 %: an STS tick (Sync Write of Goal_Position, Sync Read of
//! Present_Position and one status packet a servo) is 16 + 12·n bytes, 160 + 120·n µs, plus the
//! servos' Return_Delay_Time (2 µs units) once a servo. With a return delay of 0 (what LeRobot
//! writes) 57 servos fit at 100 Hz, 22 at 250 Hz and 10 at 500 Hz; with the factory 250
//! (500 µs) 11, 4 and 2. The SO-101's six take 880 µs a tick: 500 Hz fits (44 %), 1 kHz does not
//! (88 %). SCS servos have no Sync Read: 8 + 19·n bytes a tick (36, 14 and 6 servos), and each
//! servo's Read is a round trip through the USB adapter, whose latency then dominates.

pub mod codec;
pub mod drive;
pub mod settings;

use std::sync::Arc;

use crate::backend::FaultKind;
use crate::backend::bus::budget::Traffic;
use crate::backend::bus::settings::{
    BusSettings, DriveSettings, Param, Problems, ServoCounts, UnitKeys,
};
use crate::backend::bus::{Bus, bus_joints, timeout_ticks};
use crate::backend::bus::{Family, Medium, Mode};
use crate::backend::lerobot_calibration as lerobot;
use crate::backend::servo_registers::Mismatch;
use crate::backend::status::BusStatus;
use crate::backend::transport::serial::Port;
use crate::robot::Actuator;
use crate::trajectory::JointSet;
use codec::Series;

/// A Feetech family: `protocol: feetech` (STS/SMS) or `feetech_scs` (SCS).
pub struct Feetech {
    name: &'static str,
    series: Series,
}

pub static FEETECH: Feetech = Feetech {
    name: "feetech",
    series: Series::Sts,
};

pub static FEETECH_SCS: Feetech = Feetech {
    name: "feetech_scs",
    series: Series::Scs,
};

impl Family for Feetech {
    fn name(&self) -> &'static str {
        self.name
    }

    fn medium(&self) -> Medium {
        Medium::Serial
    }

    fn ids(&self) -> (u8, u8) {
        settings::IDS
    }

    fn units(&self) -> UnitKeys {
        settings::units(self.series)
    }

    fn joint_keys(&self) -> &'static [Param] {
        settings::JOINT_PARAMS
    }

    fn bus_keys(&self) -> &'static [Param] {
        settings::BUS_PARAMS
    }

    /// Position only; a `force` joint (what a URDF joint is without an actuator type, as the
    /// SO-101's are) is commanded by position too: these servos take no torque feed-forward.
    fn modes(&self) -> (&'static [Mode], &'static str) {
        (
            &[Mode::Position, Mode::Force],
            "servo and force (both by position)",
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

    /// LeRobot's Feetech bus applies `drive_mode` itself (the servos have no such register).
    fn lerobot_counts(&self) -> Option<ServoCounts> {
        Some(ServoCounts {
            resolution: self.series.resolution(),
            applies_drive_mode: true,
            // Sign-magnitude, 11 bits (SCS servos have none; LeRobot's files hold 0 there).
            homing_offset_max: 2047,
        })
    }

    /// Position mode: one turn of counts.
    fn position_range(&self, _drive: &DriveSettings, _actuator: Actuator) -> (f64, f64) {
        let (lo, hi) = self.series.position_range();
        (f64::from(lo), f64::from(hi))
    }

    fn traffic(&self, drives: &[&DriveSettings], _bus: &BusSettings, _period_ms: f64) -> Traffic {
        Traffic {
            serial_bytes: codec::tick_bytes(self.series, drives.len()) as f64,
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
        let servos: Vec<drive::ServoSpec> = bus_joints(bus, joints)
            .into_iter()
            .map(|(index, _, j)| drive::ServoSpec {
                index,
                id: j.id,
                units: j.units,
                calibration: j.lerobot,
            })
            .collect();
        let settings = drive::FeetechSettings {
            series: self.series,
            timeout_ticks: timeout_ticks(bus, rate_hz),
            rate_hz,
        };
        Some(Box::new(drive::bus(port, &servos, settings, status)))
    }

    /// 1 Mbit/s is the fastest these servos take; the budget counts no return delay.
    fn budget_advice(&self) -> Option<&'static str> {
        Some(
            "1 Mbit/s is the servos' fastest line rate: put the others on a bus of their own, \
             on a second adapter; each servo's Return_Delay_Time must be 0, as LeRobot sets it",
        )
    }

    fn fault_words(&self, kind: FaultKind, code: u32) -> Option<String> {
        if kind == FaultKind::CalibrationMismatch {
            return Mismatch::of_code(code).map(Mismatch::words);
        }
        (kind == FaultKind::DriveFault).then(|| {
            let names: Vec<&str> = codec::Fault::of(code as u8).map(|f| f.as_str()).collect();
            format!("status {code:#04x}: {}", names.join(", "))
        })
    }
}
