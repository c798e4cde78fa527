//! The command-line side of choosing a robot (`--config` or `--skel [--joint-map]`) and its
//! trajectory settings, shared by `resample`, `check`, `play` and `serve`; the library's
//! [`session::Robot`] does the loading.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use motiond::config;
use motiond::diag::{Diagnostic, FileError};
use motiond::session::start::StartError;
use motiond::session::{self, Overrides, PrepareError, Robot, RobotSpec};
use motiond::trajectory::{Interpolation, LimitPolicy, Options};

#[derive(clap::Args, Debug, Clone, Default)]
pub struct RobotArgs {
    /// Configuration file: robot.model, robot.joints, robot.limits, motion.interpolation,
    /// motion.limit_policy and control.rate_hz.
    #[arg(long, value_name = "FILE", conflicts_with = "joint_map")]
    pub config: Option<PathBuf>,
    /// Robot model: .skel, .urdf, .sdf or .xode (replaces the configuration's robot.model).
    #[arg(long, visible_alias = "skel", value_name = "FILE")]
    pub model: Option<PathBuf>,
    /// YAML file with a `joints:` list naming the DOF of each .seq column.
    #[arg(long, value_name = "FILE", requires = "model")]
    pub joint_map: Option<PathBuf>,
}

/// Trajectory settings given on the command line; unset ones come from the configuration.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct TrajectoryArgs {
    /// Interpolation: hold, linear, pchip (default) or cubic.
    #[arg(long = "interp", value_name = "MODE", value_parser = parse_interpolation)]
    pub interpolation: Option<Interpolation>,
    /// What to do with a motion that crosses a limit: reject (default), clamp or retime.
    #[arg(long, value_name = "POLICY", value_parser = parse_policy)]
    pub policy: Option<LimitPolicy>,
    /// Playback speed: 0.5 plays at half speed, 2 at double speed, at most 10 (the proof
    /// covers the result).
    #[arg(long, value_name = "FACTOR", default_value_t = 1.0, value_parser = parse_speed)]
    pub speed: f64,
}

/// How a command fails: a bad input file or argument (exit 2, one `FILE:LINE:COL: message` per
/// line), or anything else (exit 1).
pub enum Failure {
    Invalid(Vec<String>),
    /// The motion crosses a limit: the proof's verdict (exit 1).
    Refused(String),
    Runtime(anyhow::Error),
}

impl Failure {
    pub fn diagnostics(d: impl IntoIterator<Item = Diagnostic>) -> Failure {
        Failure::Invalid(d.into_iter().map(|d| d.to_string()).collect())
    }

    /// Reports the failure the way `motiond` exits with it.
    pub fn exit(self) -> anyhow::Result<ExitCode> {
        match self {
            Failure::Invalid(lines) => {
                for l in lines {
                    eprintln!("{l}");
                }
                Ok(ExitCode::from(2))
            }
            Failure::Refused(verdict) => {
                eprintln!("motiond: {verdict}");
                Ok(ExitCode::from(1))
            }
            Failure::Runtime(err) => Err(err),
        }
    }
}

/// Checks the file-output options of `command` (`--trace`, `--plot`, `-o`) before any work is
/// done, so a long run never ends in a file it cannot write (exit 2, one line each).
pub fn check_outputs(command: &str, outputs: &[(&str, Option<&Path>)]) -> Result<(), Failure> {
    let problems: Vec<String> = outputs
        .iter()
        .filter_map(|(option, path)| {
            let why = motiond::diag::check_output((*path)?).err()?;
            Some(format!("motiond {command}: {option} {why}"))
        })
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Failure::Invalid(problems))
    }
}

/// A motion that cannot be prepared: an invalid file, or one the proof refuses (exit 1).
impl From<PrepareError> for Failure {
    fn from(e: PrepareError) -> Self {
        match e {
            PrepareError::File(f) => f.into(),
            refused @ PrepareError::Refused { .. } => Failure::Refused(refused.to_string()),
        }
    }
}

/// What stops a loop from starting: a setting (exit 2, at its line), or a device (exit 1, the
/// OS error with a hint).
impl From<StartError> for Failure {
    fn from(e: StartError) -> Self {
        match e {
            StartError::Invalid(d) => Failure::diagnostics(d),
            device @ StartError::Drives(_) => Failure::Runtime(device.into()),
        }
    }
}

/// Every input file (SKEL, .seq, configuration, joint map) fails the same way.
impl From<FileError> for Failure {
    fn from(e: FileError) -> Self {
        match e {
            FileError::Invalid(d) => Failure::diagnostics(d.0),
            io => Failure::Invalid(vec![io.to_string()]),
        }
    }
}

/// The robot named by `args` (the library loads it), or `None` when neither `--config` nor
/// `--skel` is given.
pub fn load(args: &RobotArgs) -> Result<Option<Robot>, Failure> {
    Ok(Robot::load(&args.spec())?)
}

/// The robot of `--config`, else of `--model`, else of the default configuration
/// ([`config::default_path`]); `command` names the subcommand in the error when there is none.
pub fn load_or_default(args: &RobotArgs, command: &str) -> Result<Robot, Failure> {
    let mut args = args.clone();
    if args.config.is_none() && args.model.is_none() {
        let default = config::default_path();
        if !default.is_file() {
            return Err(Failure::Invalid(vec![format!(
                "motiond {command}: no robot given, and no configuration at {}; name one with \
                 --config FILE or --model FILE (or set MOTIOND_CONFIG)",
                default.display()
            )]));
        }
        args.config = Some(default);
    }
    match load(&args)? {
        Some(robot) => Ok(robot),
        None => Err(Failure::Invalid(vec![format!(
            "motiond {command}: name the robot with --config FILE or --model FILE"
        )])),
    }
}

/// `--rate`: a control rate the configuration would accept.
pub fn parse_rate(text: &str) -> Result<f64, String> {
    let hz: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number (Hz)"))?;
    config::check_rate_hz(hz)
}

/// `--speed`: a finite speed the daemon would play, in (0, 10].
pub fn parse_speed(text: &str) -> Result<f64, String> {
    let max = motiond::daemon::protocol::MAX_SPEED;
    match text.parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 && s <= max => Ok(s),
        _ => Err(format!(
            "expected a speed above 0 and at most {max}, got {text:?}"
        )),
    }
}

/// `--priority`: a SCHED_FIFO priority the configuration would accept.
pub fn parse_priority(text: &str) -> Result<i32, String> {
    let p: i64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a whole number"))?;
    config::check_priority(p)
}

impl RobotArgs {
    pub fn spec(&self) -> RobotSpec {
        RobotSpec {
            config: self.config.clone(),
            model: self.model.clone(),
            joint_map: self.joint_map.clone(),
        }
    }
}

impl TrajectoryArgs {
    /// The command line's trajectory settings, with `rate_hz`.
    pub fn overrides(&self, rate_hz: Option<f64>) -> Overrides {
        Overrides {
            rate_hz,
            interpolation: self.interpolation,
            policy: self.policy,
        }
    }

    /// Options for `robot` (or for no robot): the command line's, else the configuration's, else
    /// the defaults, at `--speed`.
    pub fn options(&self, robot: Option<&Robot>, rate_hz: Option<f64>) -> Options {
        let o = session::options(
            robot.and_then(|r| r.config.as_ref()),
            self.overrides(rate_hz),
        );
        Options {
            speed: self.speed,
            ..o
        }
    }
}

fn parse_interpolation(s: &str) -> Result<Interpolation, String> {
    [
        Interpolation::Hold,
        Interpolation::Linear,
        Interpolation::Pchip,
        Interpolation::Cubic,
    ]
    .into_iter()
    .find(|i| i.as_str() == s)
    .ok_or_else(|| format!("expected hold, linear, pchip or cubic, found `{s}`"))
}

fn parse_policy(s: &str) -> Result<LimitPolicy, String> {
    [LimitPolicy::Reject, LimitPolicy::Clamp, LimitPolicy::Retime]
        .into_iter()
        .find(|p| p.as_str() == s)
        .ok_or_else(|| format!("expected reject, clamp or retime, found `{s}`"))
}
