//! Drive families: what each kind of drive motiond speaks to declares about itself, and the
//! registry of them ([`FAMILIES`]). See the [module documentation of `backend`](crate::backend)
//! for how to add one.

use std::sync::Arc;

use crate::backend::bus::Bus;
use crate::backend::bus::budget::Traffic;
use crate::backend::bus::can::{CanDrive, CanService};
use crate::backend::settings::{
    BusSettings, DriveSettings, Keys, Param, Plugin, Problems, UnitKeys,
};
use crate::backend::transport::serial::Port;
use crate::backend::{FaultKind, cia402, dynamixel, mit, odrive};
use crate::robot::Actuator;
use crate::trajectory::{CommandedDof, JointSet};

/// Every family motiond speaks, by `protocol:` name. Adding a family is adding its folder under
/// `src/backend/` and one line here.
pub static FAMILIES: &[&dyn Family] = &[
    &cia402::Cia402,
    &odrive::Odrive,
    &mit::Mit,
    &dynamixel::Dynamixel,
];

/// The family named `name` (a `protocol:` value).
pub fn find(name: &str) -> Option<&'static dyn Family> {
    FAMILIES.iter().copied().find(|f| f.name() == name)
}

/// The names of the families on `medium`, for messages.
pub fn names_on(medium: Medium) -> Vec<&'static str> {
    FAMILIES
        .iter()
        .filter(|f| f.medium() == medium)
        .map(|f| f.name())
        .collect()
}

/// What a family's drives are wired to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Medium {
    /// A CAN bus (SocketCAN or SLCAN), shared with drives of other CAN families.
    Can,
    /// A serial line of its own.
    Serial,
}

/// What a drive is commanded with, following the robot model's actuator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// servo (and locked): position with velocity feed-forward.
    Position,
    /// velocity: velocity command.
    Velocity,
    /// force: position with torque feed-forward (or MIT gains).
    Force,
}

impl Mode {
    pub fn of(actuator: Actuator) -> Mode {
        match actuator {
            Actuator::Velocity => Mode::Velocity,
            Actuator::Force => Mode::Force,
            _ => Mode::Position,
        }
    }
}

/// One family of drives: its configuration schema and checks, its share of the bus budget, and
/// how its drives are opened. One value of each family sits in [`FAMILIES`]; everything here
/// runs off the real-time thread. The drive itself is a [`CanDrive`] (CAN families: one per
/// drive on a shared bus) or a [`Bus`] (serial families: the whole line).
pub trait Family: Sync {
    /// The `protocol:` value that names it.
    fn name(&self) -> &'static str;
    fn medium(&self) -> Medium;
    /// Lowest and highest id a drive can have.
    fn ids(&self) -> (u8, u8);
    /// How its drives count position.
    fn units(&self) -> UnitKeys;
    /// Its own keys under `buses[i].joints.<dof>` (`Param::same`, dotted: `mit.kp`) and the
    /// `<ros2_control>` `<joint>` param names it takes for common keys (`Param::alias`).
    fn joint_keys(&self) -> &'static [Param] {
        &[]
    }
    /// Its own keys under `buses[i]`, and `<hardware>` param aliases.
    fn bus_keys(&self) -> &'static [Param] {
        &[]
    }
    /// ros2_control hardware plugins that imply this family.
    fn plugins(&self) -> &'static [Plugin] {
        &[]
    }
    /// The command modes it can follow, and how a message names them.
    fn modes(&self) -> (&'static [Mode], &'static str);
    /// Checks its keys of one drive of `bus` (the bus at `bus_key`, `buses[i]`; the drive's
    /// keys are below `{bus_key}.joints.<dof>`) at `rate_hz`, adding every problem.
    fn check_drive(
        &self,
        drive: &DriveSettings,
        bus: &BusSettings,
        rate_hz: f64,
        bus_key: &str,
        p: &mut Problems,
    );
    /// Checks its bus keys of the bus at `key` (whether or not a drive of it is there).
    fn check_bus(&self, keys: &Keys, key: &str, p: &mut Problems) {
        let _ = (keys, key, p);
    }
    /// The drive positions (drive units) a drive commanded as `actuator` accepts; the joint's
    /// position limits must map inside.
    fn position_range(&self, drive: &DriveSettings, actuator: Actuator) -> (f64, f64) {
        let _ = (drive, actuator);
        (f64::NEG_INFINITY, f64::INFINITY)
    }
    /// Checks beyond the position range against the DOF a drive drives (once the robot model is
    /// known): a velocity range the drive's units cannot express.
    fn check_range(&self, drive: &DriveSettings, dof: &CommandedDof, key: &str, p: &mut Problems) {
        let _ = (drive, dof, key, p);
    }
    /// The CAN ids a drive answers on or is addressed by (beyond shared ids such as SYNC); two
    /// drives of a bus must not share one.
    fn can_ids(&self, drive: &DriveSettings) -> Vec<u32> {
        vec![u32::from(drive.id)]
    }
    /// What `drives` (this family's drives on `bus`) put on the wire per control tick.
    fn traffic(&self, drives: &[&DriveSettings], bus: &BusSettings, period_ms: f64) -> Traffic;
    /// Frames one tick sends at once for `drives` of this family (the transmit queue must hold
    /// the whole burst).
    fn burst(&self, drives: usize) -> usize {
        drives
    }
    /// A CAN family's drive of `drive` on `bus`, commanded in `mode`.
    fn can_drive(
        &self,
        drive: &DriveSettings,
        bus: &BusSettings,
        rate_hz: f64,
        mode: Mode,
    ) -> Option<Box<dyn CanDrive>> {
        let _ = (drive, bus, rate_hz, mode);
        None
    }
    /// A CAN family's once-per-bus traffic (CiA 402's SYNC and heartbeat), when it has one.
    fn can_service(&self, bus: &BusSettings, rate_hz: f64) -> Option<Box<dyn CanService>> {
        let _ = (bus, rate_hz);
        None
    }
    /// A serial family's bus on `port`.
    fn serial_bus(
        &self,
        port: Box<dyn Port>,
        bus: &BusSettings,
        joints: &JointSet,
        rate_hz: f64,
        status: Arc<crate::backend::status::BusStatus>,
    ) -> Option<Box<dyn Bus>> {
        let _ = (port, bus, joints, rate_hz, status);
        None
    }
    /// A fault's code in the family's words, where the code says more than its kind.
    fn fault_words(&self, kind: FaultKind, code: u32) -> Option<String> {
        let _ = (kind, code);
        None
    }
    /// A warning's code in the family's words.
    fn warning_words(&self, code: u32) -> Option<String> {
        let _ = code;
        None
    }
}

impl std::fmt::Debug for dyn Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl PartialEq for dyn Family {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
    }
}

/// Refuses a command mode the family cannot follow, naming the actuator and what it can do.
pub fn check_mode(
    family: &dyn Family,
    drive: &DriveSettings,
    dof: &CommandedDof,
    key: &str,
    p: &mut Problems,
) {
    let (modes, words) = family.modes();
    if !modes.contains(&Mode::of(dof.actuator)) {
        p.add(
            format!("{key}.protocol"),
            format!(
                "`{}` has actuator `{}`, but {} drives here support {words} only",
                drive.dof,
                dof.actuator.as_str(),
                family.name()
            ),
        );
    }
}

/// A warning a drive or bus reported (`LinkStatus` code), in the words of `who` (a family name
/// or a transport name).
pub fn warning_words(who: &str, code: u32) -> String {
    if who == "slcan" {
        return crate::backend::transport::slcan::codec::status_words(code as u8);
    }
    find(who)
        .and_then(|f| f.warning_words(code))
        .unwrap_or_else(|| format!("code {code:#x}"))
}

/// A fault's code in the words of `who` (a family or transport name), where the code says more
/// than its kind; `None` where the kind and the hex code are all there is.
pub fn fault_words(who: &str, kind: FaultKind, code: u32) -> Option<String> {
    if who == "slcan" {
        return (kind == FaultKind::BusOff)
            .then(|| crate::backend::transport::slcan::codec::status_words(code as u8));
    }
    find(who)?.fault_words(kind, code)
}
