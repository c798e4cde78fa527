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

pub mod calibration;
pub mod codec;
pub mod drive;
pub mod settings;
pub mod setup;

use std::sync::Arc;
use std::time::Duration;

use crate::backend::FaultKind;
use crate::backend::bus::budget::Traffic;
use crate::backend::bus::serial;
use crate::backend::bus::settings::{
    BusSettings, DriveSettings, Keys, Param, Problems, ServoCounts, Transport, UnitKeys,
};
use crate::backend::bus::{Bus, OpenError, bus_joints, timeout_ticks};
use crate::backend::bus::{Family, Medium, Mode};
use crate::backend::lerobot_calibration as lerobot;
use crate::backend::servo_registers::Mismatch;
use crate::backend::servo_setup;
use crate::backend::status::BusStatus;
use crate::backend::transport::serial::Port;
use crate::robot::Actuator;
use crate::trajectory::JointSet;
use codec::Series;

/// How long a servo may take to answer a request of the set-up at open (each of 3 tries).
const SETUP_TIMEOUT: Duration = Duration::from_millis(500);

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

impl Feetech {
    /// Its drives on `bus`.
    fn drives<'a>(&self, bus: &'a BusSettings) -> impl Iterator<Item = &'a DriveSettings> {
        let name = self.name;
        bus.joints.iter().filter(move |d| d.family.name() == name)
    }
}

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
        let key = format!("{bus_key}.joints.{}", drive.dof);
        servo_setup::check_keys(&self.series, &drive.keys, &key, p);
    }

    fn check_bus(&self, keys: &Keys, key: &str, p: &mut Problems) {
        servo_setup::check_keys(&self.series, keys, key, p);
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

    /// The packets, and each servo's Return_Delay_Time (2 µs before it answers, in byte times
    /// of the line): what it is set to hold, else 0 (checked again at open with the value read).
    fn traffic(&self, drives: &[&DriveSettings], bus: &BusSettings, _period_ms: f64) -> Traffic {
        let baud = match bus.transport {
            Transport::Serial { baud, .. } => f64::from(baud),
            _ => 0.0,
        };
        Traffic {
            serial_bytes: codec::tick_bytes(self.series, drives.len()) as f64
                + servo_setup::delay_bytes(&self.series, drives, bus, baud),
            ..Traffic::default()
        }
    }

    /// The servos' settings ([`servo_setup`]), then the budget with the Return_Delay_Time they
    /// hold.
    fn prepare(
        &self,
        port: &mut dyn Port,
        bus: &BusSettings,
        rate_hz: f64,
    ) -> Result<(), OpenError> {
        let drives: Vec<&DriveSettings> = self.drives(bus).collect();
        servo_setup::prepare(&self.series, port, bus, &drives, rate_hz, SETUP_TIMEOUT)
    }

    fn prepared(&self, bus: &BusSettings) -> Vec<String> {
        let drives: Vec<&DriveSettings> = self.drives(bus).collect();
        servo_setup::prepared(&self.series, bus, &drives)
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
                acceleration: servo_setup::wanted_of(&self.series, &setup::ACCELERATION, j, bus)
                    .and_then(|(v, _)| u8::try_from(v).ok()),
            })
            .collect();
        let settings = drive::FeetechSettings {
            series: self.series,
            timeout_ticks: timeout_ticks(bus, rate_hz),
            rate_hz,
        };
        Some(Box::new(drive::bus(port, &servos, settings, status)))
    }

    /// 1 Mbit/s is the fastest these servos take; the return delay counts too.
    fn budget_advice(&self) -> Option<&'static str> {
        Some(
            "1 Mbit/s is the servos' fastest line rate: put the others on a bus of their own, \
             on a second adapter; give the servos Return_Delay_Time 0 as LeRobot does \
             (`servo: {return_delay_time: 0}`)",
        )
    }

    fn fault_words(&self, kind: FaultKind, code: u32) -> Option<String> {
        if kind == FaultKind::CalibrationMismatch {
            return Mismatch::of_code(code).map(Mismatch::words);
        }
        if kind == FaultKind::EnableTimeout {
            return serial::unanswered_words(code);
        }
        (kind == FaultKind::DriveFault).then(|| {
            let names: Vec<&str> = codec::Fault::of(code as u8).map(|f| f.as_str()).collect();
            format!("status {code:#04x}: {}", names.join(", "))
        })
    }
}
