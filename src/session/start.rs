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

/// The folders the daemon writes into later — `motion.takes` (teach-in takes) and the flight
/// recorder's `recorder_dir` — each one that cannot be made or written now, at its key with the
/// path as resolved and what to do. Warnings for the start, not refusals: the robot plays
/// without them, and a folder may be mended before it is needed (record start and each dump
/// check again).
pub fn output_folders(config: &Config, recorder_dir: Option<&std::path::Path>) -> Vec<Diagnostic> {
    let mut found = Vec::new();
    let mut check = |key: &str, folder: &std::path::Path, needed: &str| {
        // The nearest folder that exists: the one that must take the new folder (or the files).
        let existing = folder
            .ancestors()
            .find(|a| !a.as_os_str().is_empty() && std::fs::symlink_metadata(a).is_ok())
            .unwrap_or(std::path::Path::new("."));
        if let Err(e) = crate::diag::check_output_folder(existing) {
            found.push(config.diagnostic(
                key,
                format!(
                    "{}: {e}; {needed} until it is mended (set {key} to a folder the daemon can \
                     write, or make this one writable)",
                    config.resolved(folder)
                ),
            ));
        }
    };
    check(
        "motion.takes",
        &config.motion.takes,
        "teach-in (`motionctl record`) is refused",
    );
    if let Some(dir) = recorder_dir {
        check("recorder.dir", dir, "flight recorder dumps fail");
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A takes folder under a file, a recorder folder under a read-only folder: both named at
    /// their key with what to do; folders that can be made are fine.
    #[test]
    fn output_folders_that_cannot_be_written_are_named_at_their_key() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("plain"), "").unwrap();
        let path = dir.path().join("motiond.yaml");
        let text = format!(
            "robot:\n  model: {}\nmotion:\n  takes: plain/takes\n",
            concat!(env!("CARGO_MANIFEST_DIR"), "/config/demo-arm.skel")
        );
        let config = Config::parse(&text, &path).unwrap();
        let found = output_folders(&config, Some(&dir.path().join("new/flight")));
        assert_eq!(found.len(), 1, "{found:?}");
        let text = found[0].to_string();
        assert!(
            text.starts_with(&format!("{}:4:10: motion.takes: ", path.display())),
            "{text}"
        );
        assert!(text.contains("is not a folder"), "{text}");
        assert!(
            text.contains("teach-in (`motionctl record`) is refused"),
            "{text}"
        );
    }
}
