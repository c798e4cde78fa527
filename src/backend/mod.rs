//! The hardware boundary: a small [`Backend`] trait, the simulated backend beside the real ones.
//!
//! Setpoint and feedback slices are in [`JointSet`](crate::trajectory::JointSet) order. `write`,
//! `read`, `hold`, `compliant` and `enable` run on the real-time thread: implementations encode
//! into buffers prepared at construction, never allocate and never block (a full transmit queue is
//! an error, not a wait).
//!
//! # Layout
//!
//! - [`transport`]: how frames and bytes reach the drives, whatever they carry — SocketCAN
//!   (classic and FD), SLCAN, an in-memory bus, serial lines. A transport is not a protocol.
//! - One folder per drive **family** (`cia402/`, `odrive/`, `mit/`, `dynamixel/`, `damiao/`,
//!   `robstride/`, `moteus/`, `feetech/`), each with
//!   - `codec.rs`: the wire format, pure bytes in and out (fixed-size frames or caller buffers,
//!     decoders that return `None` on bytes that do not fit, never panic), byte-exact to
//!     `../shared/docs/protocols.md` and tested so;
//!   - `settings.rs`: the configuration it owns — its keys (`Param`s), their defaults and
//!     validation as problems at key paths, which `config` turns into FILE:LINE:COL;
//!   - `drive.rs`: the drive — enable sequence (always ending at the measured position), hold,
//!     faults, the drive's watchdog, teach-in compliance, the drive's own E-stop;
//!   - `mod.rs`: the family's [`bus::Family`] value, which ties them together.
//! - [`bus`]: the contract of the families with the buses ([`bus::Family`], [`bus::can::CanDrive`],
//!   [`bus::Bus`]), the plain data buses are built from ([`bus::settings`]: buses, drives, each
//!   family's keys), [`bus::can::CanBus`] that runs the drives of any CAN families on one
//!   transport, the [`bus::BusBackend`] over every configured bus, the bus budget and the checks
//!   against the robot model. It names no family.
//! - [`family`]: the registry [`family::FAMILIES`].
//!
//! Imports point one way: families → `bus` → `transport` → `frame`; the registry → families.
//! Nothing here reads the configuration file: `config` builds [`bus::settings`] values and
//! [`open`] takes them.
//!
//! # Adding a drive family
//!
//! 1. Make a folder `src/backend/<name>/` with `codec.rs`, `settings.rs`, `drive.rs` and
//!    `mod.rs` (copy the closest family: `mit/` for a CAN motor with one command frame and one
//!    reply, `odrive/` for one with a state request and a heartbeat, `cia402/` for one with a
//!    set-up sequence and once-per-bus traffic, `dynamixel/` for a serial line).
//! 2. In `mod.rs`, implement [`bus::Family`] on a unit struct: `name()` (the `protocol:` value),
//!    `medium()`, `ids()`, `units()` (the key giving drive units per rad, if any),
//!    `joint_keys()`/`bus_keys()` (every key it owns, typed, dotted for nesting: `mit.kp`; they are
//!    also the `<ros2_control>` params a URDF may set, plus `Param::alias` entries for the
//!    plugins' own names), `modes()`, `check_drive()` (validate its keys: the same function that
//!    reads its typed settings when the drive is built, so the two cannot drift apart),
//!    `can_ids()` (every id it uses: collisions on a bus are refused), `traffic()` (its frames
//!    per tick for the bus budget), `fault_words()` (its fault codes named for the journal).
//! 3. In `drive.rs`, implement [`bus::can::CanDrive`] (CAN families: `accept` the frames that are
//!    the drive's, `enable_step` until [`bus::can::Axis::become_ready`] at the measured position,
//!    `command`, `disable`, `reset`; `can_be_compliant`/`torque_off`/`compliant_command`/`stiffen`
//!    for teach-in where the drive has a torque-off mode that keeps reporting; report the drive's
//!    own E-stop as [`FaultKind::DriveEStop`]), and return it from `Family::can_drive`. A serial
//!    family implements [`bus::Bus`] for its whole line and returns it from `Family::serial_bus`.
//!    Arm the drive's own watchdog from the bus's `watchdog_ms` where the drive has one.
//! 4. Add one line to [`family::FAMILIES`] and `pub mod <name>;` here.
//! 5. Tests: byte-exact codec vectors from the vendor's own code in `codec.rs`; the enable
//!    sequence, faults and teach-in against a scripted peer on [`transport::memory`] in
//!    `tests/bus_can.rs` (or a pseudo-terminal in `tests/bus_serial.rs`); the loop without
//!    allocation in `tests/bus_alloc.rs`; an example in `config/examples/` (tested by
//!    `tests/config_examples.rs`); conformance against the vendor's package in
//!    `tests/conformance/` (pinned in `.ci/run`); the README's drive section.

pub mod bus;
pub mod cia402;
pub mod damiao;
pub mod dynamixel;
pub mod family;
pub mod fault;
pub mod feetech;
pub mod frame;
pub mod lerobot_calibration;
pub mod mit;
pub mod moteus;
pub mod odrive;
pub mod robstride;
pub mod servo_registers;
pub mod servo_setup;
pub mod sim;
pub mod status;
pub mod transport;

pub use fault::{BackendError, FaultKind, SimFaultKind};

use crate::trajectory::{JointSet, Setpoint};

/// What a drive reports for one DOF.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Feedback {
    pub position: f64,
    pub velocity: f64,
    pub effort: f64,
    /// The drive's own status word as its protocol reports it (CiA 402 statusword, ODrive axis
    /// state, DYNAMIXEL torque enable; the simulated motor: 1 while enabled); 0 where none.
    pub status: u32,
    /// The drive's fault bits as its protocol reports them (ODrive axis error, DYNAMIXEL alert;
    /// the simulated motor: its injected fault); 0 where none (a CiA 402 drive's faults arrive
    /// as EMCY, in the bus status).
    pub error: u32,
    /// False when no fresh report arrived for this DOF since the last read.
    pub valid: bool,
}

/// Whether the drives are ready to follow setpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    Ready,
    Pending,
}

/// A set of drives behind one or more buses, driven by the real-time loop.
pub trait Backend: Send {
    /// Steps the enable sequence; called once per tick until it returns `Ready` (the loop gives up
    /// after a configured time). Drives must come up targeting their measured position.
    fn enable(&mut self) -> Result<Readiness, BackendError>;
    /// Removes power from the drives (or the protocol's equivalent).
    fn disable(&mut self) -> Result<(), BackendError>;
    /// Sends one tick's setpoints.
    fn write(&mut self, tick: u64, setpoints: &[Setpoint]) -> Result<(), BackendError>;
    /// Collects the latest feedback without blocking.
    fn read(&mut self, feedback: &mut [Feedback]) -> Result<(), BackendError>;
    /// Holds every drive at `setpoints`, whatever its state: each drive gets what it is
    /// commanded by (position, velocity feed-forward, velocity), so a quick stop's ramp reaches
    /// velocity drives as a ramp too; at rest the velocities are 0. Called every tick while the
    /// loop is faulted (and at a shutdown that holds), with a quick-stop sample on the way to
    /// rest, then the pose at rest. Best effort per drive, so a faulted drive never keeps the
    /// healthy ones from being held; keeps the protocol alive (CiA 402 SYNC, watchdogs fed);
    /// `Err` until every drive accepted it.
    fn hold(&mut self, tick: u64, setpoints: &[Setpoint]) -> Result<(), BackendError>;
    /// After a `write` or `hold` that returned `Err`: which DOFs' drives took its setpoints
    /// anyway (JointSet order), so the loop goes on from what each drive has. The default:
    /// none. Runs on the real-time thread.
    fn taken(&self, dofs: &mut [bool]) {
        dofs.iter_mut().for_each(|d| *d = false);
    }
    /// Where the drives that follow hold (JointSet order, joint units): the position each was
    /// last sent — after an enable or a teach-in's stiffening, the target it came up at. The
    /// loop restarts a drive's history there rather than at its report, which can lag what the
    /// drive took (a hand still moving it when it was stiffened). DOFs the backend keeps no
    /// such record of (not following yet, compliant, or a backend that does not say) are left
    /// as they are. Runs on the real-time thread.
    fn holding(&self, positions: &mut [f64]) {
        let _ = positions;
    }
    /// The loop gave up on [`enable`](Backend::enable) (`rt.enable_timeout_s`): the drive that
    /// held it up, as an `enable_timeout` naming its DOF and, in its family's words
    /// ([`Family::fault_words`](bus::Family::fault_words)), the request it left unanswered; the
    /// backend marks the drives that never answered as faulted and starts its enable sequence
    /// again. `None`: the backend cannot say (the loop reports a bare `enable_timeout`). Runs on
    /// the real-time thread.
    fn enable_timed_out(&mut self) -> Option<BackendError> {
        None
    }
    /// Teach-in. `on`: makes compliant the drives whose protocol has a torque-off mode that keeps
    /// reporting positions (so a hand can move the robot), and marks their DOFs in `dofs`
    /// (JointSet order); the other drives keep holding and stay unmarked. Off: every compliant
    /// drive stiffens again targeting its measured position, so nothing jumps; `Pending` when a
    /// drive needs ticks for that (a CiA 402 or ODrive state change): the loop then steps
    /// [`enable`](Backend::enable) until `Ready`, as after an enable. Runs on the real-time
    /// thread like `write`. The default makes nothing compliant.
    fn compliant(&mut self, on: bool, dofs: &mut [bool]) -> Result<Readiness, BackendError> {
        let _ = on;
        dofs.iter_mut().for_each(|d| *d = false);
        Ok(Readiness::Ready)
    }
    /// How long DOF `dof` (JointSet order) may go without fresh feedback before the loop faults,
    /// as its bus is configured; `None` leaves it to the loop's default. Read once when the loop
    /// is built.
    fn feedback_timeout(&self, dof: usize) -> Option<std::time::Duration> {
        let _ = dof;
        None
    }
    /// Per bus and per drive: state, last fault, error counters, warnings; readable from any
    /// thread while the loop runs ([`status::BusesStatus::snapshot`]). `None` for backends
    /// without buses.
    fn status(&self) -> Option<std::sync::Arc<status::BusesStatus>> {
        None
    }
}

/// Where the loop's commands go.
#[derive(Debug, Clone, PartialEq)]
pub enum BackendSettings {
    /// The simulated motors.
    Sim,
    /// Real drives on these buses (at least one).
    Buses(Vec<bus::settings::BusSettings>),
}

/// Why the configured backend could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("sim.fault.dof: {0}")]
    Sim(#[from] sim::UnknownFaultDof),
    #[error(transparent)]
    Buses(#[from] bus::OpenError),
}

/// Opens `backend` for `joints` (JointSet order) at `rate_hz`: the simulated motors as `sim`
/// describes them, or the drives on the buses.
pub fn open(
    backend: &BackendSettings,
    sim: &sim::SimConfig,
    rate_hz: f64,
    joints: &JointSet,
) -> Result<Box<dyn Backend>, OpenError> {
    match backend {
        BackendSettings::Sim => {
            let settings = sim::SimSettings::from_config(sim, joints)?;
            Ok(Box::new(sim::Sim::new(joints, rate_hz, &settings)))
        }
        BackendSettings::Buses(b) => Ok(Box::new(bus::open(b, joints, rate_hz)?)),
    }
}
