//! The hardware boundary: a small [`Backend`] trait, the simulated backend beside the real ones.
//!
//! Setpoint and feedback slices are in [`JointSet`](crate::trajectory::JointSet) order. `write`, `read` and `enable` run on the
//! real-time thread: implementations encode into buffers prepared at construction, never allocate
//! and never block (a full transmit queue is an error, not a wait).

pub mod buses;
pub mod can;
pub mod proto;
pub mod serial;
pub mod sim;

use crate::trajectory::Setpoint;

/// What a drive reports for one DOF.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Feedback {
    pub position: f64,
    pub velocity: f64,
    pub effort: f64,
    /// False when no fresh report arrived for this DOF since the last read.
    pub valid: bool,
}

/// The kinds of failure a bus or drive can report. `Copy`, so reporting never allocates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// The OS refused a write.
    Write,
    /// The transmit queue is full.
    QueueFull,
    /// The CAN controller went bus-off or reported error frames.
    BusOff,
    /// The serial device or CAN interface disappeared.
    DeviceLost,
    /// No feedback for the configured number of ticks.
    FeedbackMissing,
    /// The drive reported a fault (CiA 402 fault state, EMCY, ODrive error, Dynamixel alert).
    DriveFault,
    /// The drive does not follow its command (simulated stall, tracking error too large).
    Stall,
    /// A reply that does not parse.
    Protocol,
    /// Enabling did not complete in time.
    EnableTimeout,
    /// The loop's own guard found a setpoint outside the limits (`code`: 1 position,
    /// 2 velocity, 3 acceleration, 4 a step faster than the velocity limit).
    Limit,
    /// Too many consecutive control periods overran their deadline, or one woke up too late
    /// (`code`: how late, µs).
    Overrun,
    /// A drive's measured position strayed farther from its command than the configured
    /// tolerance (`code`: 1 while moving, 2 at the end of a motion).
    FollowingError,
}

impl FaultKind {
    pub const ALL: [FaultKind; 12] = [
        FaultKind::Write,
        FaultKind::QueueFull,
        FaultKind::BusOff,
        FaultKind::DeviceLost,
        FaultKind::FeedbackMissing,
        FaultKind::DriveFault,
        FaultKind::Stall,
        FaultKind::Protocol,
        FaultKind::EnableTimeout,
        FaultKind::Limit,
        FaultKind::Overrun,
        FaultKind::FollowingError,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::Write => "write_error",
            FaultKind::QueueFull => "queue_full",
            FaultKind::BusOff => "bus_off",
            FaultKind::DeviceLost => "device_lost",
            FaultKind::FeedbackMissing => "feedback_missing",
            FaultKind::DriveFault => "drive_fault",
            FaultKind::Stall => "stall",
            FaultKind::Protocol => "protocol",
            FaultKind::EnableTimeout => "enable_timeout",
            FaultKind::Limit => "limit_violation",
            FaultKind::Overrun => "overrun",
            FaultKind::FollowingError => "following_error",
        }
    }
}

/// A backend failure: what, which DOF (index in the [`JointSet`](crate::trajectory::JointSet)) if known, and a protocol-specific
/// code (errno, EMCY error code, ODrive error bits, Dynamixel error byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackendError {
    pub kind: FaultKind,
    pub dof: Option<u16>,
    pub code: u32,
}

impl std::fmt::Display for BackendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.kind.as_str())?;
        if let Some(dof) = self.dof {
            write!(f, " on dof {dof}")?;
        }
        if self.code != 0 {
            write!(f, " (code {:#x})", self.code)?;
        }
        Ok(())
    }
}

impl std::error::Error for BackendError {}

impl BackendError {
    pub fn new(kind: FaultKind) -> Self {
        Self {
            kind,
            dof: None,
            code: 0,
        }
    }
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
    /// Holds every drive at `setpoints`: position drives at their position, velocity drives at
    /// velocity 0. Called every tick while the loop is faulted (and at a shutdown that holds),
    /// with the last commanded positions or a quick-stop sample on the way to rest. Best effort
    /// per drive, so a faulted drive never keeps the healthy ones from being held; keeps the
    /// protocol alive (CiA 402 SYNC, watchdogs fed); `Err` until every drive accepted it.
    fn hold(&mut self, tick: u64, setpoints: &[Setpoint]) -> Result<(), BackendError>;
    /// How long DOF `dof` (JointSet order) may go without fresh feedback before the loop faults,
    /// as its bus is configured; `None` leaves it to the loop's default. Read once when the loop
    /// is built.
    fn feedback_timeout(&self, dof: usize) -> Option<std::time::Duration> {
        let _ = dof;
        None
    }
}

/// Why the configured backend could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("sim.fault.dof: {0}")]
    Sim(#[from] sim::UnknownFaultDof),
    #[error(transparent)]
    Buses(#[from] buses::OpenError),
}

/// Opens the backend the configuration names for `joints` (JointSet order): the simulated
/// motors of `sim:` (also after [`Config::dry_run`](crate::config::Config::dry_run)), or the
/// drives on `buses:`.
pub fn open(
    config: &crate::config::Config,
    joints: &crate::trajectory::JointSet,
) -> Result<Box<dyn Backend>, OpenError> {
    match &config.backend {
        crate::config::BackendConfig::Sim => {
            let settings = sim::SimSettings::from_config(&config.sim, joints)?;
            Ok(Box::new(sim::Sim::new(
                joints,
                config.control.rate_hz,
                &settings,
            )))
        }
        crate::config::BackendConfig::Buses(b) => {
            Ok(Box::new(buses::open(b, joints, config.control.rate_hz)?))
        }
    }
}
