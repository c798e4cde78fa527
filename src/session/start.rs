//! What `motiond serve` and `motiond play` both open before a robot's loop starts — the
//! configuration's drives (refused before a bus is opened when the robot may not drive real
//! motors) and its E-stop input — with one error for what stops them: a setting's problem as
//! `FILE:LINE:COL` diagnostics, a device as the OS error with its chain.

use crate::backend::{self, Backend};
use crate::config::{BackendConfig, Config};
use crate::diag::Diagnostic;
use crate::estop::{self, EStopInput};
use crate::session::Robot;
use crate::trajectory::JointSet;

/// Why a robot's loop cannot start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The configuration (or the robot it names) cannot drive as it is: `FILE:LINE:COL` lines.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Invalid(Vec<Diagnostic>),
    /// A drive's bus could not be opened.
    #[error("opening the drives")]
    Drives(#[source] backend::bus::OpenError),
}

/// Leave to open the drives of a configuration: the robot may drive real motors, or the
/// drives are simulated ([`permit`]).
#[derive(Debug)]
pub struct Permit(());

/// Whether `robot` may be driven as `config` says: with `backend: buses`, only when every
/// commanded DOF is limited or the configuration allows unlimited ones ([`Robot::drivable`]).
pub fn permit(robot: &Robot, config: &Config) -> Result<Permit, StartError> {
    if matches!(config.backend, BackendConfig::Buses(_))
        && let Err(why) = robot.drivable()
    {
        return Err(StartError::Invalid(vec![
            config.diagnostic("robot.limits", why),
        ]));
    }
    Ok(Permit(()))
}

/// The drives of `config` for the commanded DOFs `joints` at the configured rate: the
/// simulated motors for `backend: sim`, else the buses.
pub fn open_backend(
    _: Permit,
    config: &Config,
    joints: &JointSet,
) -> Result<Box<dyn Backend>, StartError> {
    backend::open(&config.backend, &config.sim, config.control.rate_hz, joints).map_err(|e| match e
    {
        backend::OpenError::Sim(e) => {
            StartError::Invalid(vec![config.diagnostic("sim.fault.dof", e)])
        }
        backend::OpenError::Buses(e) => match &e {
            // A value a device did not take, which a key gave: at that key's FILE:LINE:COL.
            backend::bus::OpenError::Setup { key: Some(key), .. } => {
                StartError::Invalid(vec![config.diagnostic(key, &e)])
            }
            _ => StartError::Drives(e),
        },
    })
}

/// The E-stop input `config` watches, polled at `rate_hz` (`None`: none configured); one that
/// cannot be opened is placed at its key.
pub fn open_estop(
    config: &Config,
    rate_hz: f64,
) -> Result<Option<Box<dyn EStopInput>>, StartError> {
    let Some(settings) = &config.estop else {
        return Ok(None);
    };
    estop::open(settings, rate_hz).map_err(|e| {
        // The message starts with the key it is about.
        let pos = config.locations.value(e.key());
        StartError::Invalid(vec![Diagnostic::new(
            &config.path,
            pos.line,
            pos.col,
            e.to_string(),
        )])
    })
}
