//! YAML configuration → validated settings (issue 5).
//!
//! This module holds the settings' types; the file goes through three stages, each reporting
//! every problem it can find before giving up (into a `problems` collector):
//! 1. YAML syntax (serde_yaml) — a syntax error stops here, with its position (`yaml`);
//! 2. each top-level section deserialized on its own into its [`raw`] mirror: every unknown key
//!    is reported (and left out), a wrong type ends its section (serde stops there) (`yaml`);
//! 3. validation into [`Config`]: ranges checked so that NaN fails them, units converted, paths
//!    resolved against the directory of the config file (`validate`; the buses in [`bus`]).
//!
//! Every problem is a `FILE:LINE:COL: key.path: message` [`Diagnostic`] naming the value; positions
//! of problems found after deserialization come from a [`Locations`] index of the same text. The
//! loader opens nothing but the config file: the skeleton, the motion library, the socket and the
//! buses are the callers' to open.

pub mod bus;
pub mod joint_map;
pub mod keys;
mod locate;
mod prefill;
mod problems;
pub mod raw;
mod validate;
mod yaml;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_yaml::Value;

pub use crate::backend::SimFaultKind;
use crate::diag::{Diagnostic, Diagnostics, Num};
use crate::trajectory::{Interpolation, JointSet, JointSetError, LimitPolicy};

pub use locate::{Locations, Pos};
pub use prefill::{FromModel, Origin};
use problems::Problems;
use validate::validate;
use yaml::{closest, read_sections};
pub(crate) use yaml::{syntax, too_deeply_nested};

/// The configuration of a checkout, relative to its top folder: the demo arm on the simulated
/// backend.
pub const DEFAULT_PATH: &str = "config/motiond.yaml";

/// Where an installed motiond keeps its configuration (the package's conffile).
pub const SYSTEM_PATH: &str = "/etc/motiond/motiond.yaml";

/// The configuration used when none is named: `$MOTIOND_CONFIG` when set; else, for a binary
/// installed under `/usr`, [`SYSTEM_PATH`]; else [`DEFAULT_PATH`] when the current folder has one
/// (a checkout), else [`SYSTEM_PATH`].
pub fn default_path() -> PathBuf {
    if let Some(path) = std::env::var_os("MOTIOND_CONFIG").filter(|p| !p.is_empty()) {
        return PathBuf::from(path);
    }
    let installed = std::env::current_exe().is_ok_and(|exe| exe.starts_with("/usr"));
    if !installed && Path::new(DEFAULT_PATH).is_file() {
        PathBuf::from(DEFAULT_PATH)
    } else {
        PathBuf::from(SYSTEM_PATH)
    }
}

/// SCHED_FIFO priorities the loop accepts.
pub const PRIORITY_RANGE: std::ops::RangeInclusive<i64> = 1..=99;

/// A control rate as the configuration and every command line accept it.
pub fn check_rate_hz(rate_hz: f64) -> Result<f64, String> {
    if RATE_HZ_RANGE.contains(&rate_hz) {
        Ok(rate_hz)
    } else {
        Err(format!(
            "{} Hz is outside {}..={} Hz",
            Num(rate_hz),
            RATE_HZ_RANGE.start(),
            RATE_HZ_RANGE.end()
        ))
    }
}

/// A SCHED_FIFO priority as the configuration and every command line accept it.
pub fn check_priority(priority: i64) -> Result<i32, String> {
    match i32::try_from(priority) {
        Ok(p) if PRIORITY_RANGE.contains(&priority) => Ok(p),
        _ => Err(format!(
            "{priority} is outside the SCHED_FIFO priorities {}..={}",
            PRIORITY_RANGE.start(),
            PRIORITY_RANGE.end()
        )),
    }
}

/// Control rates the loop accepts. Below 1 Hz an operator's stop would wait up to a second for
/// the next tick; above 8 kHz the 125 µs period nears the wake-up latency of a PREEMPT_RT
/// machine, and a 1 Mbit/s CAN bus cannot carry even one frame per joint per tick.
pub const RATE_HZ_RANGE: std::ops::RangeInclusive<f64> = 1.0..=8000.0;

pub use crate::backend::sim::{
    DEFAULT_BANDWIDTH_HZ as DEFAULT_SIM_BANDWIDTH_HZ, SimConfig, SimConfigFault,
};

/// Longest Unix socket path: `sun_path` holds 108 bytes including the terminating NUL.
const MAX_SOCKET_PATH: usize = 107;

/// Why a configuration could not be used: unreadable, or every problem found in it.
pub use crate::diag::FileError as Error;

/// A validated configuration: every value in range, every path resolved.
#[derive(Debug, Clone)]
pub struct Config {
    /// The file it was read from (as given).
    pub path: PathBuf,
    pub robot: Robot,
    pub motion: MotionSettings,
    pub control: ControlSettings,
    pub rt: RtSettings,
    pub backend: BackendConfig,
    /// The simulated backend's model; used when `backend` is [`BackendConfig::Sim`], including
    /// after [`Config::dry_run`].
    pub sim: SimConfig,
    pub daemon: DaemonSettings,
    /// Joint groups (`groups`), sorted by name: each plays its own motion beside the others.
    /// Names are non-empty, DOFs unique across groups and among `robot.joints` when that is
    /// given; whether the robot has them is checked when the joint set is built
    /// ([`Config::group_diagnostic`]).
    pub groups: Vec<JointGroup>,
    /// `estop`: the E-stop inputs the loop watches; `None` watches none.
    pub estop: Option<EStopSettings>,
    /// `recorder`: the flight recorder's ring and where its dumps go.
    pub recorder: RecorderSettings,
    /// Where each key sits in the file, for callers' own diagnostics (see [`Config::diagnostic`]).
    pub locations: Locations,
    /// Bus settings the robot model's `<ros2_control>` `<param>`s filled in (keys this file
    /// leaves out), in the order they were read; empty unless read by [`Config::load`].
    pub from_model: Vec<FromModel>,
    /// Where the robot model wrote each key it filled in (and each mapping it created).
    pub model_origins: HashMap<String, Origin>,
    /// What the robot model's `<ros2_control>` blocks hold that fills nothing (unknown params,
    /// blocks no bus is named after), FILE:LINE:COL in the model; also logged as warnings.
    pub model_warnings: Vec<Diagnostic>,
}

/// `estop`: what asserts the E-stop. At least one input is configured.
#[derive(Debug, Clone, PartialEq)]
pub struct EStopSettings {
    /// A line of a GPIO character device.
    pub gpio: Option<GpioLine>,
    /// How long a level must hold before it counts (asserting and releasing alike); at most
    /// [`MAX_ESTOP_DEBOUNCE_MS`].
    pub debounce: Duration,
    /// Also honour an E-stop the drives report (CiA 402 quick stop active, ODrive's E-stop
    /// error); otherwise such a report is the fault `drive_estop`.
    pub drive: bool,
}

/// `estop.gpio`: one input line of a Linux GPIO character device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpioLine {
    /// The chip's device, e.g. `/dev/gpiochip0` (a relative path is resolved against the config
    /// file's directory like every path; not opened here).
    pub chip: PathBuf,
    /// The line's offset on the chip.
    pub line: u32,
    pub active: ActiveLevel,
}

/// The electrical level at which the E-stop counts as asserted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActiveLevel {
    Low,
    High,
}

/// `estop.debounce_ms` when not given.
pub const DEFAULT_ESTOP_DEBOUNCE_MS: f64 = 10.0;

/// The longest `estop.debounce_ms`: the debounce delays the stop by as much, and a contact
/// bounces for a few milliseconds, not tenths of a second.
pub const MAX_ESTOP_DEBOUNCE_MS: f64 = 100.0;

#[derive(Debug, Clone, PartialEq)]
pub struct Robot {
    /// The robot model file (`robot.model`, or its alias `robot.skel`): .skel, .urdf, .sdf or
    /// .xode, resolved against the config file's directory (not opened here; see
    /// [`crate::robot::load`]).
    pub model: PathBuf,
    /// Which key named the model (`robot.model` or `robot.skel`), for messages about it.
    pub model_key: &'static str,
    /// `robot.fixed_base`: a URDF's root link is welded to the world instead of floating.
    pub fixed_base: bool,
    /// DOF names of the .seq columns, in column order (`robot.joints`); `None` when the file has
    /// no list and the skeleton's driven DOFs in DOF order are meant. Names are non-empty and
    /// unique; whether the skeleton has them is checked when the joint set is built.
    pub joints: Option<Vec<String>>,
    /// Per-DOF tightening (`robot.limits`), sorted by DOF name, for
    /// [`JointSet::from_world`](crate::trajectory::JointSet::from_world). Whether a DOF exists and
    /// whether each bound really tightens the skeleton's is checked there;
    /// [`Config::joint_set_diagnostic`] places its errors in this file.
    pub limits: Vec<DofLimitOverride>,
    /// `robot.allow_unlimited`: real drives may be commanded on DOFs that have no velocity or
    /// acceleration limit after `limits` (refused otherwise).
    pub allow_unlimited: bool,
}

/// The bounds `robot.limits.<dof>` sets (the type lives with the joint set it tightens).
pub use crate::trajectory::DofLimitOverride;

/// A joint group: `groups.<name>: [dof, …]`.
#[derive(Debug, Clone, PartialEq)]
pub struct JointGroup {
    pub name: String,
    pub dofs: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct MotionSettings {
    /// Folder of .seq files the daemon serves, resolved against the config file's directory.
    pub library: PathBuf,
    pub interpolation: Interpolation,
    pub limit_policy: LimitPolicy,
    /// After a motion ends every DOF must come within this (rad or m) of its final position
    /// within `goal_time_s`; `None`: unchecked.
    pub goal_tolerance: Option<f64>,
    pub goal_time_s: f64,
    /// Library files larger than this are refused before they are read.
    pub max_file_bytes: u64,
    /// Teach-in takes are written here as they are recorded, and kept here when they cannot be
    /// saved into the library (`motion.takes`; default `.takes` in the library folder).
    pub takes: PathBuf,
    /// The longest take; later frames are not recorded (`motion.max_take_s`).
    pub max_take: Duration,
}

/// The longest `motion.max_take_s`: a day.
pub const MAX_TAKE_S: f64 = 86_400.0;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ControlSettings {
    /// Within [`RATE_HZ_RANGE`].
    pub rate_hz: f64,
    /// `1 / rate_hz`, rounded to the nanosecond: a loop that adds it k times drifts from k/rate,
    /// so deadlines are best computed from `rate_hz` and k.
    pub period: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RtSettings {
    /// CPU the loop thread is pinned to; `None` leaves it unpinned. Below `CPU_SETSIZE`.
    pub cpu: Option<usize>,
    /// SCHED_FIFO priority, 1..=99.
    pub priority: i32,
    /// `mlockall(MCL_CURRENT | MCL_FUTURE)` before the first tick.
    pub lock_memory: bool,
    /// Any real-time setting not obtained is fatal instead of a warning.
    pub strict: bool,
    /// This many overruns in a row stop the motion with a fault; at least 1.
    pub max_consecutive_overruns: u32,
    /// A wake-up later than this after its deadline faults; `None`: two control periods.
    pub max_late: Option<Duration>,
    /// Enabling the drives (the whole set-up of a bus's drives, then power) that takes longer
    /// faults with `enable_timeout`.
    pub enable_timeout: Duration,
    /// The PM QoS wake-up latency the loop's CPU is held to while the loop runs (µs, at most
    /// [`MAX_WAKEUP_LATENCY_US`]); `None`: no request (`off`).
    pub cpu_wakeup_latency_us: Option<u32>,
}

/// `rt.enable_timeout_s` when the file leaves it out.
pub const DEFAULT_ENABLE_TIMEOUT_S: f64 = 2.0;

/// `rt.priority` when the file leaves it out.
pub const DEFAULT_PRIORITY: i32 = 80;

/// The largest PM QoS latency the kernel takes (an s32 of µs, below its "no constraint" value).
pub const MAX_WAKEUP_LATENCY_US: u32 = i32::MAX as u32 - 1;

/// Where the loop's commands go: the simulated motors of [`Config::sim`], or real drives on
/// buses (at least one).
pub use crate::backend::BackendSettings as BackendConfig;

/// What the drives do after a fault or at shutdown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SafeState {
    /// Hold position, powered.
    #[default]
    Hold,
    /// Hold, then remove power.
    Disable,
}

/// `recorder`: how many seconds of ticks the loop keeps, and the dumps written from them.
#[derive(Debug, Clone, PartialEq)]
pub struct RecorderSettings {
    /// Seconds of ticks in the ring (0: no flight recorder).
    pub seconds: f64,
    /// Where dumps go, resolved against the configuration's folder; `None`: the daemon's state
    /// directory (`$STATE_DIRECTORY`, else `/var/lib/motiond`), folder `flight`.
    pub dir: Option<PathBuf>,
    /// Dumps kept at most, by count and by size together (the oldest are removed).
    pub max_files: usize,
    pub max_bytes: u64,
}

/// The longest `recorder.seconds`: the ring is allocated (and locked in memory) whole.
const MAX_RECORDER_SECONDS: f64 = 600.0;

#[derive(Debug, Clone, PartialEq)]
pub struct DaemonSettings {
    /// Control socket path, resolved against the config file's directory; fits `sun_path`.
    pub socket: PathBuf,
    /// Group given the socket (mode 0660); `None` keeps the daemon's own group.
    pub socket_group: Option<String>,
    /// Longest a controlled stop at SIGTERM may take before the immediate safe stop.
    pub shutdown_timeout: Duration,
    pub safe_state: SafeState,
    /// Ping the systemd watchdog while the loop ticks.
    pub watchdog: bool,
}

impl Config {
    /// Reads and validates a configuration file. When it configures buses and its robot model is
    /// a URDF, the model's `<ros2_control>` `<param>`s fill the bus settings the file leaves out
    /// ([`Config::from_model`]); its warnings are logged.
    pub fn load(path: impl AsRef<Path>) -> Result<Config, Error> {
        let path = path.as_ref();
        let text = crate::file::read_to_string(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Config::parse_inner(&text, path, true)
    }

    /// Validates configuration text; `path` names it in diagnostics and anchors relative paths.
    /// Opens no other file: bus settings are not filled from the robot model.
    pub fn parse(text: &str, path: &Path) -> Result<Config, Error> {
        Config::parse_inner(text, path, false)
    }

    fn parse_inner(text: &str, path: &Path, read_model: bool) -> Result<Config, Error> {
        if let Some(deep) = too_deeply_nested(text, path) {
            return Err(Error::Invalid(Diagnostics(vec![deep])));
        }
        let mut value: Value = match serde_yaml::from_str(text) {
            Ok(value) => value,
            Err(err) => return Err(Error::Invalid(Diagnostics(vec![syntax(path, &err)]))),
        };
        let prefill = if read_model {
            prefill::from_model(&mut value, path)
        } else {
            prefill::Prefill::default()
        };
        for warning in &prefill.warnings {
            tracing::warn!("{warning}");
        }
        let mut problems = Problems {
            path,
            locations: Locations::index(text),
            origins: prefill.origins,
            found: prefill.errors,
            failed: Vec::new(),
            unknown: prefill.refused,
        };
        let raw = read_sections(value, &mut problems);
        let config = validate(raw, &mut problems);
        if problems.found.is_empty() {
            for f in &prefill.filled {
                let o = &f.origin;
                tracing::info!(
                    "{}:{}:{}: {} = {} from the robot model ({})",
                    o.path.display(),
                    o.line,
                    o.col,
                    f.key,
                    f.value,
                    o.what
                );
            }
            Ok(Config {
                locations: problems.locations,
                from_model: prefill.filled,
                model_origins: problems.origins,
                model_warnings: prefill.warnings,
                ..config
            })
        } else {
            Err(Error::Invalid(Diagnostics(problems.found).sorted()))
        }
    }

    /// The same robot with every bus replaced by the simulated backend: joints, limits, rate,
    /// mapping and RT settings unchanged, so a motion can be rehearsed without moving a motor.
    pub fn dry_run(mut self) -> Config {
        self.backend = BackendConfig::Sim;
        self
    }

    /// A diagnostic placed at the value of `key` (e.g. `robot.limits.elbow_pitch.velocity`), for
    /// problems callers find later, such as a limit that loosens the skeleton's.
    pub fn diagnostic(&self, key: &str, message: impl std::fmt::Display) -> Diagnostic {
        if let Some(origin) = self.model_origins.get(key) {
            return origin.diagnostic(key, message);
        }
        let pos = self.locations.value(key);
        Diagnostic::new(&self.path, pos.line, pos.col, format!("{key}: {message}"))
    }

    /// A path this file names (`robot.model`, `motion.library`, …), as resolved, for messages:
    /// absolute, with the folder a relative value was resolved against.
    pub fn resolved(&self, path: &Path) -> String {
        let absolute = |p: &Path| match std::env::current_dir() {
            Ok(cwd) if p.is_relative() => cwd.join(p),
            _ => p.to_path_buf(),
        };
        let shown = absolute(path);
        let dir = absolute(self.path.parent().unwrap_or(Path::new("")));
        if shown.starts_with(&dir) {
            format!(
                "{} (relative paths are resolved against {}, the folder of {})",
                shown.display(),
                dir.display(),
                self.path.display()
            )
        } else {
            shown.display().to_string()
        }
    }

    /// A path-valued key whose file or folder cannot be used, at the key's value: the path as
    /// resolved, why, and what to do.
    pub fn path_diagnostic(
        &self,
        key: &str,
        path: &Path,
        why: &std::io::Error,
        todo: &str,
    ) -> Diagnostic {
        self.diagnostic(key, format!("{}: {why}; {todo}", self.resolved(path)))
    }

    /// The joint groups as JointSet indices (each ascending), for
    /// [`rt::Settings::groups`](crate::rt::Settings::groups); every DOF a group names that the
    /// robot does not command is reported at its entry in this file.
    pub fn group_dofs(&self, joints: &JointSet) -> Result<Vec<Vec<usize>>, Vec<Diagnostic>> {
        let mut found = Vec::new();
        let groups = self
            .groups
            .iter()
            .map(|group| {
                let mut dofs: Vec<usize> = group
                    .dofs
                    .iter()
                    .enumerate()
                    .filter_map(|(i, name)| {
                        let index = joints.index_of(name);
                        if index.is_none() {
                            found.push(self.diagnostic(
                                &format!("groups.{}[{i}]", group.name),
                                format!(
                                    "{name:?} is not a DOF the robot commands (its commanded DOFs: {})",
                                    joints
                                        .dofs
                                        .iter()
                                        .map(|d| d.name.as_str())
                                        .collect::<Vec<_>>()
                                        .join(", ")
                                ),
                            ));
                        }
                        index
                    })
                    .collect();
                dofs.sort_unstable();
                dofs
            })
            .collect::<Vec<Vec<usize>>>();
        // A mimic follower is commanded from its leader's setpoints: it moves with whichever
        // group holds its leader (so the coupling holds while groups move separately), and is
        // never listed on its own.
        let mut groups = groups;
        for (group, dofs) in self.groups.iter().zip(groups.iter_mut()) {
            for (entry, name) in group.dofs.iter().enumerate() {
                let Some(mimic) = joints.index_of(name).and_then(|d| joints.dofs[d].mimic) else {
                    continue;
                };
                let leader = &joints.dofs[mimic.leader].name;
                found.push(self.diagnostic(
                    &format!("groups.{}[{entry}]", group.name),
                    format!(
                        "{name:?} mimics {leader:?} (URDF <mimic>): a follower moves with the \
                         group that holds its leader; list {leader:?} instead"
                    ),
                ));
            }
            let followers: Vec<usize> = joints
                .dofs
                .iter()
                .enumerate()
                .filter(|(_, d)| d.mimic.is_some_and(|m| dofs.contains(&m.leader)))
                .map(|(i, _)| i)
                .filter(|i| !dofs.contains(i))
                .collect();
            dofs.extend(followers);
            dofs.sort_unstable();
        }
        if found.is_empty() {
            Ok(groups)
        } else {
            Err(found)
        }
    }

    /// Places an error of [`JointSet::from_world`](crate::trajectory::JointSet::from_world),
    /// called with `self.robot.limits`, at the entry of this file it is about.
    pub fn joint_set_diagnostic(&self, err: &JointSetError) -> Diagnostic {
        let key = match err {
            JointSetError::AmbiguousName { .. } | JointSetError::Mimic { .. } => {
                self.robot.model_key.to_owned()
            }
            JointSetError::UnknownDof { name, .. } => {
                let key = format!("robot.limits.{name}");
                let pos = self.locations.key(&key);
                return Diagnostic::new(&self.path, pos.line, pos.col, format!("{key}: {err}"));
            }
            JointSetError::Empty { name, quantity, .. }
            | JointSetError::Loosens { name, quantity, .. } => {
                format!("robot.limits.{name}.{quantity}")
            }
            JointSetError::QuickStop { name, .. } => {
                format!("robot.limits.{name}.quick_stop_deceleration")
            }
        };
        self.diagnostic(&key, err)
    }
}

/// Resolves `path` against the directory holding the config file.
fn resolve(config: &Path, path: &Path) -> PathBuf {
    match config.parent() {
        Some(dir) if path.is_relative() => dir.join(path),
        _ => path.to_path_buf(),
    }
}

#[cfg(test)]
mod tests;
