//! The hardware boundary: a small [`Backend`] trait, the simulated backend beside the real ones.
//!
//! Setpoint and feedback slices are in [`JointSet`](crate::trajectory::JointSet) order. `write`, `read` and `enable` run on the
//! real-time thread: implementations encode into buffers prepared at construction, never allocate
//! and never block (a full transmit queue is an error, not a wait).

pub mod buses;
pub mod can;
pub mod fault;
pub mod feetech;
pub mod lerobot_calibration;
pub mod proto;
pub mod serial;
pub mod sim;
pub mod status;

pub use fault::{BackendError, FaultKind, SimFaultKind};

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
