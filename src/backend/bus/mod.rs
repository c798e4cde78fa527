//! The buses, and the contract of the drive families with them.
//!
//! - [`Family`]: what a drive family declares (its keys, checks, budget) and how its drives are
//!   opened: as a [`can::CanDrive`] that [`can::CanBus`] runs beside any other CAN family's on
//!   one transport, or as the [`serial::SerialProtocol`] that [`serial::SerialBus`] runs on a
//!   serial line of its own. The registry of families is [`crate::backend::family`].
//! - [`settings`]: the plain, validated data buses and drives are built from.
//! - [`BusBackend`]: every configured bus behind one [`Backend`]; [`open`]; the budget of each
//!   bus ([`budget`]) and the checks against the robot model ([`check`]).
//!
//! Nothing here names a family: they plug in through [`Family`] values (imports point from the
//! families to here, never back).

pub mod budget;
pub mod can;
pub mod check;
pub mod serial;
pub mod settings;

use std::io;
use std::path::Path;
use std::sync::Arc;

use crate::backend::status::{BusStatus, BusesStatus};
use crate::backend::transport::FrameIo;
use crate::backend::transport::serial::{Port, SerialDevice};
use crate::backend::transport::slcan::SlcanIo;
use crate::backend::transport::socketcan::SocketCanIo;
use crate::backend::{Backend, BackendError, FaultKind, Feedback, Readiness};
use crate::robot::Actuator;
use crate::trajectory::{CommandedDof, JointSet, Setpoint};
use budget::Traffic;
use can::{CanDrive, CanService};
use settings::{
    BusSettings, DriveSettings, Keys, Param, Plugin, Problem, Problems, Transport, UnitKeys,
};

/// One bus of drives, as the bus backend drives it: the [`Backend`] calls, per bus. Implemented
/// by [`can::CanBus`] for every CAN family, and by each serial family for its line.
pub trait Bus: Send {
    fn enable(&mut self) -> Result<Readiness, BackendError>;
    fn disable(&mut self) -> Result<(), BackendError>;
    fn write(&mut self, tick: u64, setpoints: &[Setpoint]) -> Result<(), BackendError>;
    fn read(&mut self, feedback: &mut [Feedback]) -> Result<(), BackendError>;
    fn hold(&mut self, tick: u64, setpoints: &[Setpoint]) -> Result<(), BackendError>;
    /// After a failed `write` or `hold`: marks the DOFs whose drives took it anyway
    /// ([`Backend::taken`](crate::backend::Backend::taken)).
    fn taken(&self, dofs: &mut [bool]);
    /// [`Backend::holding`](crate::backend::Backend::holding) for this bus's DOFs.
    fn holding(&self, positions: &mut [f64]);
    /// [`Backend::enable_timed_out`](crate::backend::Backend::enable_timed_out) for this bus:
    /// `None` when it cannot say (CAN buses: their drives' own states tell).
    fn enable_timed_out(&mut self) -> Option<BackendError> {
        None
    }
    /// Marks the DOFs it made compliant in `dofs` (and leaves the others as they are).
    fn compliant(&mut self, on: bool, dofs: &mut [bool]) -> Result<Readiness, BackendError>;
    /// How long DOF `dof` may go without feedback, when it is on this bus.
    fn feedback_timeout(&self, dof: usize) -> Option<std::time::Duration>;
    fn status(&self) -> Arc<BusStatus>;
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
    /// Its frames are CAN-FD: its buses need an FD interface (SocketCAN mtu 72) or an FD SLCAN
    /// adapter, and are budgeted with the data bitrate.
    fn fd(&self) -> bool {
        false
    }
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
    /// Checks `drive`'s settings on `bus` (at `bus_key`) that depend on the DOF it drives (at
    /// `key`, `{bus_key}.joints.<dof>`): a DYNAMIXEL Operating Mode the joint cannot be commanded
    /// in.
    fn check_commanded(
        &self,
        drive: &DriveSettings,
        bus: &BusSettings,
        dof: &CommandedDof,
        (bus_key, key): (&str, &str),
        p: &mut Problems,
    ) {
        let _ = (drive, bus, dof, bus_key, key, p);
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
    /// Prepares a serial family's devices on `port` when `bus` opens, before its [`Bus`] is
    /// built and before the loop starts (settings written and read back; blocking I/O with
    /// deadlines is fine here).
    fn prepare(
        &self,
        port: &mut dyn Port,
        bus: &BusSettings,
        rate_hz: f64,
    ) -> Result<(), OpenError> {
        let _ = (port, bus, rate_hz);
        Ok(())
    }
    /// What [`prepare`](Family::prepare) would write to the drives of `bus`, a line each, for
    /// `motiond check` (no device needed).
    fn prepared(&self, bus: &BusSettings) -> Vec<String> {
        let _ = bus;
        Vec::new()
    }
    /// How its servos count a turn for a LeRobot calibration file (`lerobot_calibration`);
    /// `None`: its drives take none.
    fn lerobot_counts(&self) -> Option<settings::ServoCounts> {
        None
    }
    /// What else frees time on a bus of its own that is over its budget (beyond fewer drives or
    /// a lower rate, which the refusal names).
    fn budget_advice(&self) -> Option<&'static str> {
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

/// Refuses velocity limits of `dof` its drive cannot be commanded with: outside `[min, max]`
/// in drive units (the motor's velocity range; `key` names the key that sets it).
pub fn check_velocity_range(
    drive: &DriveSettings,
    dof: &CommandedDof,
    (min, max): (f64, f64),
    key: String,
    p: &mut Problems,
) {
    let v = dof.limits.velocity;
    let (a, b) = (
        drive.units.rate_to_drive(v.lower),
        drive.units.rate_to_drive(v.upper),
    );
    if a.min(b) < min || a.max(b) > max {
        p.add(
            key,
            format!(
                "the velocity limits [{}, {}] of `{}` exceed the motor's range [{min}, {max}]",
                v.lower, v.upper, drive.dof
            ),
        );
    }
}

#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{}", problems.iter().map(|p| format!("{}: {}", p.key, p.message)).collect::<Vec<_>>().join("\n"))]
    Config { problems: Vec<Problem> },
    #[error(
        "bus `{bus}`: one tick sends {burst} frames at once, but CAN interface `{interface}` \
         queues only {queue} (txqueuelen); frames past that are dropped by the kernel. Raise it: \
         `ip link set {interface} txqueuelen {suggested}` (or in the interface's systemd-networkd / \
         udev configuration)"
    )]
    TxQueue {
        bus: String,
        interface: String,
        burst: usize,
        queue: usize,
        suggested: usize,
    },
    #[error(
        "bus `{bus}`: its drives speak CAN-FD, but CAN interface `{interface}` carries classic \
         frames only (mtu {mtu}); switch it to CAN-FD: `ip link set {interface} mtu 72` (a \
         controller also needs its data bitrate: `ip link set {interface} type can bitrate \
         1000000 dbitrate 5000000 fd on`)"
    )]
    NotFd {
        bus: String,
        interface: String,
        mtu: usize,
    },
    /// The bus's devices could not be set up; `key`: the configuration key (`buses[i]....`)
    /// whose value a device did not take, when a key gave it.
    #[error("bus `{bus}`: {what}")]
    Setup {
        bus: String,
        what: String,
        key: Option<String>,
    },
    #[error("bus `{bus}`: cannot open {what}: {source}")]
    Io {
        bus: String,
        what: String,
        source: io::Error,
    },
}

/// The drives of `bus` in JointSet terms: (index, command mode, settings).
pub fn bus_joints<'a>(
    bus: &'a BusSettings,
    joints: &JointSet,
) -> Vec<(usize, Mode, &'a DriveSettings)> {
    bus.joints
        .iter()
        .filter_map(|j| {
            let index = joints.index_of(&j.dof)?;
            let dof = joints.dofs.get(index)?;
            Some((index, Mode::of(dof.actuator), j))
        })
        .collect()
}

/// Ticks without feedback before a drive of `bus` faults.
pub fn timeout_ticks(bus: &BusSettings, rate_hz: f64) -> u32 {
    (bus.feedback_timeout_ms * rate_hz / 1000.0)
        .ceil()
        .clamp(1.0, 1e9) as u32
}

/// Ticks between SLCAN status polls: ten times a second.
fn status_poll_ticks(rate_hz: f64) -> u32 {
    (rate_hz / 10.0).round().clamp(1.0, 1e6) as u32
}

fn bus_status(bus: &BusSettings) -> Arc<BusStatus> {
    let drives: Vec<(&str, &'static str)> = bus
        .joints
        .iter()
        .map(|j| (j.dof.as_str(), j.family.name()))
        .collect();
    let mut status = BusStatus::new(&bus.name, bus.transport.name(), &drives);
    status.device = match &bus.transport {
        Transport::Serial { device, baud, .. } => format!("{} at {baud} baud", device.display()),
        Transport::Slcan { device, .. } => device.display().to_string(),
        Transport::Can { interface, .. } => interface.clone(),
    };
    for (d, j) in status.drives.iter_mut().zip(&bus.joints) {
        d.id = j.id;
        d.lerobot = j.lerobot;
    }
    Arc::new(status)
}

/// A CAN bus over any frame transport (SocketCAN, SLCAN, in-memory).
pub fn can_bus(
    bus: &BusSettings,
    joints: &JointSet,
    rate_hz: f64,
    io: Box<dyn FrameIo>,
) -> can::CanBus {
    can::CanBus::new(io, bus, &bus_joints(bus, joints), rate_hz, bus_status(bus))
}

/// A serial family's bus over any byte port (serial device, pseudo-terminal, in-memory); `None`
/// when the bus is not a serial one.
pub fn serial_bus(
    bus: &BusSettings,
    joints: &JointSet,
    rate_hz: f64,
    port: Box<dyn crate::backend::transport::serial::Port>,
) -> Option<Box<dyn Bus>> {
    let Transport::Serial { family, .. } = bus.transport else {
        return None;
    };
    family.serial_bus(port, bus, joints, rate_hz, bus_status(bus))
}

/// Frames one tick sends on `bus` in one burst: what each family present sends for its drives
/// (a command per drive; CiA 402 adds the SYNC and a heartbeat).
pub fn burst_frames(bus: &BusSettings) -> usize {
    let mut total = 0;
    let mut seen: Vec<&str> = Vec::new();
    for j in &bus.joints {
        let name = j.family.name();
        if !seen.contains(&name) {
            seen.push(name);
            let n = bus
                .joints
                .iter()
                .filter(|k| k.family.name() == name)
                .count();
            total += j.family.burst(n);
        }
    }
    total
}

/// Refuses a SocketCAN interface whose transmit queue is shorter than one tick's burst: the
/// kernel would drop the excess (Linux's default txqueuelen for CAN is 10). A length of 0 is a
/// virtual interface without a queue (vcan, vxcan: the `noqueue` discipline hands each frame
/// straight to the driver), which nothing overflows. `sysfs` is `/sys/class/net` (a folder of the
/// tests' making in tests).
pub fn check_tx_queue(bus: &BusSettings, interface: &str, sysfs: &Path) -> Result<(), OpenError> {
    let path = sysfs.join(interface).join("tx_queue_len");
    // An interface without the file is reported by the socket's own open just after.
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(());
    };
    let Ok(queue) = text.trim().parse::<usize>() else {
        return Ok(());
    };
    let burst = burst_frames(bus);
    if queue == 0 || burst <= queue {
        return Ok(());
    }
    Err(OpenError::TxQueue {
        bus: bus.name.clone(),
        interface: interface.to_string(),
        burst,
        queue,
        suggested: (2 * burst).next_power_of_two().max(64),
    })
}

/// Refuses a SocketCAN interface that cannot carry the CAN-FD frames of the bus's drives: its
/// mtu is 16 (classic) rather than 72 (`sysfs`: as for [`check_tx_queue`]).
pub fn check_fd_mtu(bus: &BusSettings, interface: &str, sysfs: &Path) -> Result<(), OpenError> {
    if !bus.fd() {
        return Ok(());
    }
    let path = sysfs.join(interface).join("mtu");
    let Some(mtu) = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| t.trim().parse::<usize>().ok())
    else {
        return Ok(());
    };
    if mtu >= 72 {
        return Ok(());
    }
    Err(OpenError::NotFd {
        bus: bus.name.clone(),
        interface: interface.to_string(),
        mtu,
    })
}

/// Opens one configured bus.
fn open_bus(bus: &BusSettings, joints: &JointSet, rate_hz: f64) -> Result<Box<dyn Bus>, OpenError> {
    let io_err = |what: String| {
        let bus = bus.name.clone();
        move |source| OpenError::Io { bus, what, source }
    };
    Ok(match &bus.transport {
        Transport::Can { interface, .. } => {
            let sysfs = Path::new("/sys/class/net");
            check_tx_queue(bus, interface, sysfs)?;
            check_fd_mtu(bus, interface, sysfs)?;
            let io = SocketCanIo::open(interface, bus.fd())
                .map_err(io_err(format!("CAN interface `{interface}`")))?;
            Box::new(can_bus(bus, joints, rate_hz, Box::new(io)))
        }
        Transport::Slcan {
            device,
            baud,
            bitrate,
            data_bitrate,
        } => {
            let what = format!("SLCAN adapter {}", device.display());
            let port = SerialDevice::open(device, baud.unwrap_or(115_200))
                .map_err(io_err(what.clone()))?;
            let fd = bus.fd().then_some(*data_bitrate);
            let io = SlcanIo::open(Box::new(port), *bitrate, fd)
                .map_err(io_err(what))?
                .poll_status_every(status_poll_ticks(rate_hz));
            Box::new(can_bus(bus, joints, rate_hz, Box::new(io)))
        }
        Transport::Serial {
            device,
            baud,
            family,
        } => {
            let mut port = SerialDevice::open(device, *baud)
                .map_err(io_err(format!("serial device {}", device.display())))?;
            family.prepare(&mut port, bus, rate_hz)?;
            serial_bus(bus, joints, rate_hz, Box::new(port)).ok_or_else(|| OpenError::Config {
                problems: vec![Problem {
                    key: format!("buses.{}", bus.name),
                    message: format!("{} is not a serial family", family.name()),
                    about_key: false,
                }],
            })?
        }
    })
}

/// Opens every configured bus after checking the drives against the robot's DOFs.
pub fn open(
    buses: &[BusSettings],
    joints: &JointSet,
    rate_hz: f64,
) -> Result<BusBackend, OpenError> {
    let problems = check::check_joints(buses, joints);
    if !problems.is_empty() {
        return Err(OpenError::Config { problems });
    }
    let mut opened = Vec::with_capacity(buses.len());
    for (i, bus) in buses.iter().enumerate() {
        opened.push(open_bus(bus, joints, rate_hz).map_err(|e| match e {
            // The family names the key below its bus.
            OpenError::Setup { bus, what, key } => OpenError::Setup {
                bus,
                what,
                key: key.map(|k| format!("buses[{i}].{k}")),
            },
            e => e,
        })?);
    }
    Ok(BusBackend::new(opened))
}

/// All buses as one backend. Every bus gets its share of each call even when another fails, so
/// one failing bus never starves the drives on the others; the first error is reported.
pub struct BusBackend {
    buses: Vec<Box<dyn Bus>>,
    status: Arc<BusesStatus>,
}

impl BusBackend {
    pub fn new(buses: Vec<Box<dyn Bus>>) -> Self {
        let status = Arc::new(BusesStatus {
            buses: buses.iter().map(|b| b.status()).collect(),
        });
        Self { buses, status }
    }

    fn each(
        &mut self,
        mut f: impl FnMut(&mut dyn Bus) -> Result<(), BackendError>,
    ) -> Result<(), BackendError> {
        let mut result = Ok(());
        for bus in &mut self.buses {
            let r = f(bus.as_mut());
            result = result.and(r);
        }
        result
    }

    /// Calls `f` on every bus; `Ready` when every bus is.
    fn each_ready(
        &mut self,
        mut f: impl FnMut(&mut dyn Bus) -> Result<Readiness, BackendError>,
    ) -> Result<Readiness, BackendError> {
        let mut all = true;
        self.each(|b| {
            all &= f(b)? == Readiness::Ready;
            Ok(())
        })?;
        Ok(if all {
            Readiness::Ready
        } else {
            Readiness::Pending
        })
    }
}

impl Backend for BusBackend {
    fn enable(&mut self) -> Result<Readiness, BackendError> {
        self.each_ready(|b| b.enable())
    }

    fn disable(&mut self) -> Result<(), BackendError> {
        self.each(|b| b.disable())
    }

    fn write(&mut self, tick: u64, setpoints: &[Setpoint]) -> Result<(), BackendError> {
        self.each(|b| b.write(tick, setpoints))
    }

    fn read(&mut self, feedback: &mut [Feedback]) -> Result<(), BackendError> {
        self.each(|b| b.read(feedback))
    }

    fn hold(&mut self, tick: u64, setpoints: &[Setpoint]) -> Result<(), BackendError> {
        self.each(|b| b.hold(tick, setpoints))
    }

    fn taken(&self, dofs: &mut [bool]) {
        for b in &self.buses {
            b.taken(dofs);
        }
    }

    fn compliant(&mut self, on: bool, dofs: &mut [bool]) -> Result<Readiness, BackendError> {
        dofs.iter_mut().for_each(|d| *d = false);
        self.each_ready(|b| b.compliant(on, dofs))
    }

    fn holding(&self, positions: &mut [f64]) {
        for b in &self.buses {
            b.holding(positions);
        }
    }

    /// Every bus is told (each marks its own silent drives); the first one's drive is named.
    fn enable_timed_out(&mut self) -> Option<BackendError> {
        let mut first = None;
        for b in &mut self.buses {
            let e = b.enable_timed_out();
            first = first.or(e);
        }
        first
    }

    fn status(&self) -> Option<Arc<BusesStatus>> {
        Some(self.status.clone())
    }

    fn feedback_timeout(&self, dof: usize) -> Option<std::time::Duration> {
        self.buses.iter().find_map(|b| b.feedback_timeout(dof))
    }
}
