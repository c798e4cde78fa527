//! YAML configuration → validated settings (issue 5).
//!
//! The file goes through three stages, each reporting every problem it can find before giving up:
//! 1. YAML syntax (serde_yaml) — a syntax error stops here, with its position;
//! 2. each top-level section deserialized on its own into its [`raw`] mirror: every unknown key
//!    is reported (and left out), a wrong type ends its section (serde stops there);
//! 3. validation into [`Config`]: ranges checked so that NaN fails them, units converted, paths
//!    resolved against the directory of the config file.
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
pub mod raw;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_yaml::Value;

pub use crate::backend::SimFaultKind;
use crate::diag::{Diagnostic, Diagnostics};
use crate::robot::Limits;
use crate::trajectory::{Interpolation, JointSet, JointSetError, LimitPolicy};

pub use locate::{Locations, Pos};
pub use prefill::{FromModel, Origin};
use raw::{RawConfig, RawRange, SECTIONS};

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
            "{rate_hz} Hz is outside {}..={} Hz",
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
        let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
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

/// Collects the problems of one file.
struct Problems<'a> {
    path: &'a Path,
    locations: Locations,
    /// Keys the robot model filled in: their problems are placed where the model wrote them.
    origins: HashMap<String, Origin>,
    found: Vec<Diagnostic>,
    /// Sections that did not deserialize: they hold defaults, so rules that need a value the
    /// file did give (robot.model, buses) are not checked again.
    failed: Vec<String>,
    /// Unknown keys and values of the wrong type reported (and left out of validation), as key
    /// paths.
    unknown: Vec<String>,
}

impl Problems<'_> {
    fn section_failed(&self, name: &str) -> bool {
        self.failed.iter().any(|f| f == name)
    }

    /// Whether an unknown key was reported directly under `parent`: then a key found missing
    /// there is most likely that one misspelled, and is not reported a second time.
    fn unknown_under(&self, parent: &str) -> bool {
        self.unknown
            .iter()
            .any(|k| k.rsplit_once('.').is_some_and(|(up, _)| up == parent))
    }

    /// A problem with the value of `key`; the message is prefixed with the key path.
    fn value(&mut self, key: &str, message: impl std::fmt::Display) {
        if let Some(origin) = self.origins.get(key) {
            self.found.push(origin.diagnostic(key, message));
            return;
        }
        let pos = self.locations.value(key);
        self.push(pos, key, message);
    }

    /// Reports `key` missing, unless its value was already reported (and left out) for its type.
    fn missing(&mut self, key: &str, message: impl std::fmt::Display) {
        if !self.unknown.iter().any(|k| k == key) {
            self.key(key, message);
        }
    }

    /// A problem with the key itself (unknown, misplaced).
    fn key(&mut self, key: &str, message: impl std::fmt::Display) {
        let pos = self.locations.key(key);
        self.push(pos, key, message);
    }

    fn push(&mut self, pos: Pos, key: &str, message: impl std::fmt::Display) {
        let message = if key.is_empty() {
            message.to_string()
        } else {
            format!("{key}: {message}")
        };
        self.found
            .push(Diagnostic::new(self.path, pos.line, pos.col, message));
    }
}

/// A YAML syntax error, placed where serde_yaml found it.
pub(crate) fn syntax(path: &Path, err: &serde_yaml::Error) -> Diagnostic {
    let mut message = err.to_string();
    let (line, col) = match err.location() {
        Some(loc) => {
            // The position is given as numbers; drop serde_yaml's prose copy of it.
            let suffix = format!(" at line {} column {}", loc.line(), loc.column());
            if let Some(cut) = message.find(&suffix) {
                message.replace_range(cut..cut + suffix.len(), "");
            }
            (to_u32(loc.line()), to_u32(loc.column()))
        }
        None => (1, 1),
    };
    let message = message.replace(" at line ", " starting at line ");
    let hint = yaml_hint(&message);
    Diagnostic::new(
        path,
        line.max(1),
        col.max(1),
        format!("YAML syntax error: {message}{hint}"),
    )
}

/// What usually causes a YAML syntax error, in words an operator acts on.
fn yaml_hint(message: &str) -> &'static str {
    const HINTS: &[(&str, &str)] = &[
        (
            "tab character",
            "; YAML indents with spaces only: replace the tab with spaces",
        ),
        (
            "did not find expected key",
            "; check this line's indentation against the lines above (each level indented by \
             the same number of spaces), and that every `[` and `{` is closed",
        ),
        (
            "mapping values are not allowed",
            "; a `key:` where none may start: check the indentation, or quote a value that holds \
             `: `",
        ),
        (
            "did not find expected ',' or ']'",
            "; a `[…]` list is not closed, or needs a comma",
        ),
        (
            "did not find expected ',' or '}'",
            "; a `{…}` mapping is not closed, or needs a comma",
        ),
        (
            "cannot start any token",
            "; quote the value (`@`, `` ` `` and `%` cannot start a plain one)",
        ),
        (
            "unexpected end of stream",
            "; a quote or bracket opened above is never closed",
        ),
        ("duplicate", "; give each key once"),
    ];
    HINTS
        .iter()
        .find(|(found, _)| message.contains(found))
        .map_or("", |(_, hint)| hint)
}

/// Flow collections (`[`, `{`) nested deeper than YAML's recursion limit would take libyaml time
/// quadratic in the depth before serde_yaml refuses them (minutes for a 300 KB file), so the
/// depth is measured first, in one pass. Quoted scalars and comments are skipped; a bracket inside
/// a plain scalar may count, which only matters past 64 unclosed ones.
pub(crate) fn too_deeply_nested(text: &str, path: &Path) -> Option<Diagnostic> {
    const MAX_DEPTH: usize = 64;
    let (mut depth, mut line, mut col) = (0usize, 1u32, 0u32);
    let mut quote: Option<char> = None;
    let mut comment = false;
    let mut prev = ' ';
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        col = col.saturating_add(1);
        if c == '\n' {
            (line, col, comment) = (line.saturating_add(1), 0, false);
        }
        match quote {
            _ if comment => {}
            Some(q) if c == q && q == '\'' && chars.peek() == Some(&'\'') => {
                // '' inside a single-quoted scalar is an escaped quote.
                chars.next();
                col = col.saturating_add(1);
            }
            Some('"') if c == '\\' && chars.peek() != Some(&'\n') => {
                chars.next();
                col = col.saturating_add(1);
            }
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None => match c {
                '\'' | '"' if matches!(prev, ' ' | '\t' | '\n' | '[' | '{' | ',' | ':' | '-') => {
                    quote = Some(c);
                }
                '#' if prev.is_whitespace() => comment = true,
                '[' | '{' => {
                    depth += 1;
                    if depth > MAX_DEPTH {
                        return Some(Diagnostic::new(
                            path,
                            line,
                            col,
                            format!(
                                "collections nested deeper than {MAX_DEPTH} levels; a \
                                 configuration needs a few (is this the right file?)"
                            ),
                        ));
                    }
                }
                ']' | '}' => depth = depth.saturating_sub(1),
                _ => {}
            },
        }
        prev = c;
    }
    None
}

fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn read_sections(value: Value, p: &mut Problems) -> RawConfig {
    let mut raw = RawConfig::default();
    let map = match value {
        Value::Null => return raw,
        Value::Mapping(map) => map,
        other => {
            p.failed.extend(SECTIONS.map(String::from));
            p.value(
                "",
                format!(
                    "expected a mapping of sections ({}), found {}",
                    SECTIONS.join(", "),
                    describe(&other)
                ),
            );
            return raw;
        }
    };
    for (key, value) in map {
        let Some(name) = key.as_str() else {
            p.value(
                "",
                format!(
                    "unknown section {} (expected one of: {})",
                    describe(&key),
                    SECTIONS.join(", ")
                ),
            );
            continue;
        };
        match name {
            "robot" => section(name, value, p, &mut raw.robot),
            "motion" => section(name, value, p, &mut raw.motion),
            "control" => section(name, value, p, &mut raw.control),
            "rt" => section(name, value, p, &mut raw.rt),
            "backend" => section(name, value, p, &mut raw.backend),
            "sim" => section(name, value, p, &mut raw.sim),
            "buses" => section(name, value, p, &mut raw.buses),
            "daemon" => section(name, value, p, &mut raw.daemon),
            "groups" => section(name, value, p, &mut raw.groups),
            "estop" => section(name, value, p, &mut raw.estop),
            "recorder" => section(name, value, p, &mut raw.recorder),
            _ => p.key(
                name,
                format!(
                    "unknown section (expected one of: {}){}",
                    SECTIONS.join(", "),
                    closest(name, &SECTIONS)
                        .map(|near| format!("; did you mean `{near}`?"))
                        .unwrap_or_default()
                ),
            ),
        }
    }
    raw
}

/// Unknown keys one section may report before the reader stops looking for more.
const MAX_UNKNOWN_KEYS: usize = 64;

/// One step of a key path inside a section.
#[derive(PartialEq)]
enum Step {
    Key(String),
    Index(usize),
}

/// Deserializes one section into `slot`; an empty section (`rt:` with nothing under it) keeps
/// the defaults already there. serde stops at the first problem, so each unknown key and each value
/// of the wrong type is reported (in people's words), removed and the section read again: all of a
/// section's problems are reported together, and then the rest of it is validated as usual. A
/// problem that cannot be taken out (a missing required key, a bad list element) ends the section.
fn section<T: DeserializeOwned>(name: &str, mut value: Value, p: &mut Problems, slot: &mut T) {
    if value.is_null() {
        return;
    }
    // A value of the wrong type is reported and taken out like an unknown key, so the rest of
    // the section is still read and validated (the value taken out has its default, which is
    // valid): every problem of the file in one pass.
    let mut taken_out: Vec<String> = Vec::new();
    for _ in 0..=MAX_UNKNOWN_KEYS {
        let err = match serde_path_to_error::deserialize::<_, T>(value.clone()) {
            Ok(v) => {
                *slot = v;
                return;
            }
            Err(err) => err,
        };
        let mut steps = Vec::new();
        let mut complete = true;
        for segment in err.path().iter() {
            match segment {
                serde_path_to_error::Segment::Seq { index } => steps.push(Step::Index(*index)),
                serde_path_to_error::Segment::Map { key } => steps.push(Step::Key(key.clone())),
                serde_path_to_error::Segment::Enum { .. }
                | serde_path_to_error::Segment::Unknown => complete = false,
            }
        }
        let message = err.inner().to_string();
        let Some((field, expected)) = unknown_field(&message) else {
            let key = key_path(name, &steps);
            // A required value taken out for its type is missing now: already reported.
            let missing = message
                .strip_prefix("missing field `")
                .and_then(|rest| rest.split_once('`'))
                .map(|(f, _)| format!("{key}.{f}"));
            if missing.is_some_and(|m| taken_out.contains(&m) || p.unknown.contains(&m)) {
                break;
            }
            p.value(&key, humanize(&key, &message));
            // A missing required key cannot be taken out; anything else can.
            if message.starts_with("missing field") || !(complete && remove(&mut value, &steps)) {
                break;
            }
            // Its parent lost a key, as with an unknown one: no second complaint about it.
            p.unknown.push(key.clone());
            taken_out.push(key);
            continue;
        };
        // The path may or may not end with the unknown key itself.
        if steps.last() != Some(&Step::Key(field.to_owned())) {
            steps.push(Step::Key(field.to_owned()));
        }
        let key = key_path(name, &steps);
        let choices: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
        let near = closest(field, &choices)
            .map(|near| format!("; did you mean `{near}`?"))
            .unwrap_or_default();
        p.key(&key, format!("unknown key; {expected}{near}"));
        p.unknown.push(key);
        if !(complete && remove(&mut value, &steps)) {
            break;
        }
    }
    p.failed.push(name.to_owned());
}

/// `robot` + [limits, a, velocity] → `robot.limits.a.velocity`; indices as `[i]`.
fn key_path(section: &str, steps: &[Step]) -> String {
    let mut key = section.to_owned();
    for step in steps {
        match step {
            Step::Key(k) => {
                key.push('.');
                key.push_str(k);
            }
            Step::Index(i) => key.push_str(&format!("[{i}]")),
        }
    }
    key
}

/// Removes the mapping entry at `steps` (relative to `value`); false when it is not there.
fn remove(value: &mut Value, steps: &[Step]) -> bool {
    let Some((Step::Key(last), parents)) = steps.split_last() else {
        return false;
    };
    let mut node = value;
    for step in parents {
        let next = match step {
            Step::Key(k) => node.get_mut(k.as_str()),
            Step::Index(i) => node.get_mut(*i),
        };
        match next {
            Some(n) => node = n,
            None => return false,
        }
    }
    node.as_mapping_mut()
        .and_then(|m| m.remove(last.as_str()))
        .is_some()
}

/// Splits serde's "unknown field `x`, expected one of `a`, `b`" into `x` and the expectation.
fn unknown_field(message: &str) -> Option<(&str, &str)> {
    let rest = message.strip_prefix("unknown field `")?;
    let (field, rest) = rest.split_once('`')?;
    Some((field, rest.trim_start_matches([',', ' '])))
}

/// A serde message in people's words, for the value at `key`: `"fast" is not a number (Hz)`,
/// `"pchipp" is not one of hold, linear, pchip, cubic; did you mean pchip?`.
fn humanize(key: &str, message: &str) -> String {
    if let Some(rest) = message.strip_prefix("unknown variant `")
        && let Some((given, rest)) = rest.split_once('`')
    {
        let choices: Vec<&str> = rest.split('`').skip(1).step_by(2).collect();
        let mut text = format!("{given:?} is not one of {}", choices.join(", "));
        if let Some(near) = closest(given, &choices) {
            text.push_str(&format!("; did you mean {near}?"));
        }
        return text;
    }
    let (found, expected) = match message
        .strip_prefix("invalid type: ")
        .or_else(|| message.strip_prefix("invalid value: "))
        .and_then(|rest| rest.split_once(", expected "))
    {
        Some(parts) => parts,
        None => return message.to_string(),
    };
    let found = value_of(found);
    let unit = unit_of(key);
    let wanted = match expected {
        "f64" | "f32" => "a number",
        "u8" | "u16" | "u32" | "u64" | "usize" => "a whole number ≥ 0",
        "i8" | "i16" | "i32" | "i64" | "isize" | "integer" => "a whole number",
        "a boolean" => "true or false",
        "a string" => "text",
        "a sequence" => "a list",
        e if e.starts_with("struct ") || e == "a map" => "a mapping of keys",
        other => return format!("{found} is not {other}{unit}"),
    };
    format!("{found} is not {wanted}{unit}")
}

/// `string "fast"` → `"fast"`, ``integer `5` `` → `5`, `sequence` → `a list`.
fn value_of(found: &str) -> String {
    let quoted = |s: &str| s.trim_matches('`').to_string();
    if let Some(s) = found.strip_prefix("string ") {
        s.to_string()
    } else if let Some(s) = found
        .strip_prefix("integer ")
        .or_else(|| found.strip_prefix("floating point "))
        .or_else(|| found.strip_prefix("boolean "))
    {
        quoted(s)
    } else {
        match found {
            "sequence" => "a list".into(),
            "map" => "a mapping".into(),
            "unit value" => "nothing".into(),
            other => other.into(),
        }
    }
}

/// The unit a key's name promises, as ` (Hz)`.
fn unit_of(key: &str) -> &'static str {
    let last = key.rsplit('.').next().unwrap_or(key);
    if last.ends_with("_hz") {
        " (Hz)"
    } else if last.ends_with("_ms") {
        " (milliseconds)"
    } else if last.ends_with("_s") {
        " (seconds)"
    } else {
        ""
    }
}

/// The choice within two edits of `given`, if one is.
fn closest<'a>(given: &str, choices: &[&'a str]) -> Option<&'a str> {
    choices
        .iter()
        .map(|c| (edit_distance(given, c), *c))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// How a YAML value is named in messages: its kind and, for scalars, the value.
fn describe(value: &Value) -> String {
    match value {
        Value::Null => "nothing".to_owned(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => format!("the string {s:?}"),
        Value::Sequence(_) => "a list".to_owned(),
        Value::Mapping(_) => "a mapping".to_owned(),
        Value::Tagged(t) => format!("a value tagged {}", t.tag),
    }
}

/// Resolves `path` against the directory holding the config file.
fn resolve(config: &Path, path: &Path) -> PathBuf {
    match config.parent() {
        Some(dir) if path.is_relative() => dir.join(path),
        _ => path.to_path_buf(),
    }
}

/// Turns the raw sections into settings, recording every problem. The returned value is only
/// meaningful when no problem was recorded.
fn validate(raw: RawConfig, p: &mut Problems) -> Config {
    let config_path = p.path;
    let rate_hz = raw.control.rate_hz;
    let rate_ok = match check_rate_hz(rate_hz) {
        Ok(_) => true,
        Err(why) => {
            p.value("control.rate_hz", why);
            false
        }
    };
    let period = if rate_ok {
        Duration::try_from_secs_f64(1.0 / rate_hz).unwrap_or(Duration::ZERO)
    } else {
        Duration::ZERO
    };

    let robot = validate_robot(&raw.robot, p);
    let rt = validate_rt(&raw.rt, p);
    let sim = validate_sim(&raw.sim, rate_ok.then_some(rate_hz), &robot, p);
    let daemon = validate_daemon(&raw.daemon, p);
    let groups = validate_groups(&raw.groups, &robot, p);
    let estop = raw.estop.as_ref().map(|e| validate_estop(e, p));
    let recorder = validate_recorder(&raw.recorder, config_path, p);

    if raw.motion.library.as_os_str().is_empty() {
        p.value("motion.library", "empty path");
    }

    let mut buses = Vec::new();
    if !raw.buses.is_empty()
        && robot.joints.is_none()
        && !p.section_failed("robot")
        && !p.unknown_under("robot")
    {
        // Bus entries name the DOFs they drive, so the commanded DOFs must be known here.
        p.key(
            "robot.joints",
            "required when buses are configured: list the DOF names the buses drive, in .seq \
             column order",
        );
    }
    let found = match (raw.buses.is_empty(), rate_ok, &robot.joints) {
        (false, true, Some(joints)) => {
            let names: Vec<&str> = joints.iter().map(String::as_str).collect();
            match bus::validate(&raw.buses, &names, rate_hz) {
                Ok(valid) => {
                    buses = valid;
                    Vec::new()
                }
                Err(found) => found,
            }
        }
        // Without DOF names or a rate the buses cannot be validated; their keys still are.
        _ => bus::check_keys(&raw.buses),
    };
    for problem in found {
        // A value already refused (by the robot model's params) is not missing again.
        if p.unknown.contains(&problem.key) {
            continue;
        }
        if problem.about_key {
            p.key(&problem.key, problem.message);
        } else {
            p.value(&problem.key, problem.message);
        }
    }
    let backend = match raw.backend {
        raw::RawBackendKind::Sim => BackendConfig::Sim,
        raw::RawBackendKind::Buses => {
            if raw.buses.is_empty() && !p.section_failed("buses") {
                p.value(
                    "backend",
                    "`buses` needs at least one entry under the `buses` key (or use `backend: sim`)",
                );
            }
            BackendConfig::Buses(buses)
        }
    };

    let library = resolve(config_path, &raw.motion.library);
    let takes = raw
        .motion
        .takes
        .as_ref()
        .map_or_else(|| library.join(".takes"), |t| resolve(config_path, t));
    let max_take_s = raw.motion.max_take_s;
    let max_take = if max_take_s.is_finite() && max_take_s > 0.0 && max_take_s <= MAX_TAKE_S {
        Duration::from_secs_f64(max_take_s)
    } else {
        p.value(
            "motion.max_take_s",
            format!("{max_take_s} is outside (0, {MAX_TAKE_S}] s"),
        );
        Duration::from_secs(3600)
    };
    Config {
        path: config_path.to_path_buf(),
        robot,
        motion: MotionSettings {
            library,
            takes,
            max_take,
            interpolation: match raw.motion.interpolation {
                raw::RawInterpolation::Hold => Interpolation::Hold,
                raw::RawInterpolation::Linear => Interpolation::Linear,
                raw::RawInterpolation::Pchip => Interpolation::Pchip,
                raw::RawInterpolation::Cubic => Interpolation::Cubic,
            },
            limit_policy: match raw.motion.limit_policy {
                raw::RawLimitPolicy::Reject => LimitPolicy::Reject,
                raw::RawLimitPolicy::Clamp => LimitPolicy::Clamp,
                raw::RawLimitPolicy::Retime => LimitPolicy::Retime,
            },
            goal_tolerance: raw
                .motion
                .goal_tolerance
                .and_then(|t| positive(t, "motion.goal_tolerance", "rad or m", p)),
            goal_time_s: positive(raw.motion.goal_time_s, "motion.goal_time_s", "s", p)
                .unwrap_or(1.0),
            max_file_bytes: positive(raw.motion.max_file_mib, "motion.max_file_mib", "MiB", p)
                .map_or(0, |mib| (mib * 1024.0 * 1024.0).min(u64::MAX as f64) as u64),
        },
        control: ControlSettings { rate_hz, period },
        rt,
        backend,
        sim,
        daemon,
        groups,
        estop,
        recorder,
        locations: Locations::default(),
        from_model: Vec::new(),
        model_origins: HashMap::new(),
        model_warnings: Vec::new(),
    }
}

fn validate_estop(raw: &raw::RawEStop, p: &mut Problems) -> EStopSettings {
    let ms = raw.debounce_ms;
    let debounce = if ms.is_finite() && (0.0..=MAX_ESTOP_DEBOUNCE_MS).contains(&ms) {
        Duration::from_secs_f64(ms / 1000.0)
    } else {
        p.value(
            "estop.debounce_ms",
            format!(
                "{ms} ms is outside 0..={MAX_ESTOP_DEBOUNCE_MS} ms (a longer debounce delays the \
                 stop by as much)"
            ),
        );
        Duration::ZERO
    };
    let gpio = raw.gpio.as_ref().and_then(|g| {
        let chip = match &g.chip {
            None => {
                p.missing(
                    "estop.gpio.chip",
                    "missing: name the GPIO character device, e.g. /dev/gpiochip0",
                );
                None
            }
            Some(c) if c.as_os_str().is_empty() => {
                p.value("estop.gpio.chip", "empty path");
                None
            }
            Some(c) => Some(resolve(p.path, c)),
        };
        let line = match g.line.map(u32::try_from) {
            None => {
                p.missing(
                    "estop.gpio.line",
                    "missing: give the line's offset on the chip (gpioinfo lists them)",
                );
                None
            }
            Some(Err(_)) => {
                p.value(
                    "estop.gpio.line",
                    format!("{} is not a line offset (0..={})", g.line.unwrap_or(0), u32::MAX),
                );
                None
            }
            Some(Ok(line)) => Some(line),
        };
        let active = match g.active {
            None => {
                p.missing(
                    "estop.gpio.active",
                    "missing: say at which level the E-stop is asserted, `low` or `high` (as wired)",
                );
                None
            }
            Some(raw::RawActiveLevel::Low) => Some(ActiveLevel::Low),
            Some(raw::RawActiveLevel::High) => Some(ActiveLevel::High),
        };
        Some(GpioLine {
            chip: chip?,
            line: line?,
            active: active?,
        })
    });
    if raw.gpio.is_none() && !raw.drive && !p.unknown_under("estop") {
        p.key(
            "estop",
            "watches no input: give estop.gpio, or `drive: true` to honour the drives' E-stop, \
             or leave the section out",
        );
    }
    EStopSettings {
        gpio,
        debounce,
        drive: raw.drive,
    }
}

fn validate_groups(
    raw: &std::collections::BTreeMap<String, Vec<String>>,
    robot: &Robot,
    p: &mut Problems,
) -> Vec<JointGroup> {
    let mut owner: HashMap<&str, String> = HashMap::new();
    for (name, dofs) in raw {
        let key = format!("groups.{name}");
        if name.is_empty() {
            p.key("groups", "a group needs a name");
        }
        if dofs.is_empty() {
            p.value(&key, "lists no DOFs; give the DOF names the group moves");
        }
        for (i, dof) in dofs.iter().enumerate() {
            let key = format!("{key}[{i}]");
            if let Some(first) = owner.get(dof.as_str()) {
                p.value(
                    &key,
                    format!("{dof:?} is already in {first}; groups are disjoint"),
                );
                continue;
            }
            owner.insert(dof, format!("groups.{name}"));
            if let Some(joints) = &robot.joints
                && !joints.contains(dof)
            {
                p.value(&key, format!("{dof:?} is not one of robot.joints"));
            }
        }
    }
    raw.iter()
        .map(|(name, dofs)| JointGroup {
            name: name.clone(),
            dofs: dofs.clone(),
        })
        .collect()
}

fn validate_robot(raw: &raw::RawRobot, p: &mut Problems) -> Robot {
    let (model_key, given) = match (&raw.model, &raw.skel) {
        (Some(_), Some(_)) => {
            p.key(
                "robot.skel",
                "robot.skel is the older name of robot.model; give only one of them",
            );
            ("robot.model", raw.model.as_ref())
        }
        (None, Some(s)) => ("robot.skel", Some(s)),
        (m, None) => ("robot.model", m.as_ref()),
    };
    let model = match given {
        None if p.section_failed("robot") || p.unknown_under("robot") => PathBuf::new(),
        None => {
            p.key(
                "robot.model",
                "missing: name the robot's model file, .skel, .urdf, .sdf or .xode (relative to \
                 this file)",
            );
            PathBuf::new()
        }
        Some(s) if s.as_os_str().is_empty() => {
            p.value(model_key, "empty path");
            PathBuf::new()
        }
        Some(s) => resolve(p.path, s),
    };

    if let Some(joints) = &raw.joints {
        if joints.is_empty() {
            p.value(
                "robot.joints",
                "empty list; leave the key out to command the skeleton's driven DOFs in DOF order",
            );
        }
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for (i, name) in joints.iter().enumerate() {
            let key = format!("robot.joints[{i}]");
            if name.trim().is_empty() {
                p.value(&key, format!("empty DOF name {name:?}"));
            } else if let Some(first) = seen.insert(name, i) {
                p.value(
                    &key,
                    format!("{name:?} is listed twice (first as robot.joints[{first}])"),
                );
                seen.insert(name, first);
            }
        }
    }

    let mut limits = Vec::with_capacity(raw.limits.len());
    for (dof, l) in &raw.limits {
        let key = format!("robot.limits.{dof}");
        if dof.trim().is_empty() {
            p.key(&key, "empty DOF name");
        }
        let empty = l.position.is_none()
            && l.velocity.is_none()
            && l.acceleration.is_none()
            && l.effort.is_none()
            && l.following_error.is_none()
            && l.quick_stop_deceleration.is_none();
        if empty && !p.unknown_under(&key) {
            p.value(
                &key,
                "sets no limit (expected position, velocity, acceleration, effort, following_error or quick_stop_deceleration)",
            );
        }
        limits.push(DofLimitOverride {
            dof: dof.clone(),
            position: l
                .position
                .and_then(|r| position_range(r, &format!("{key}.position"), p)),
            velocity: l
                .velocity
                .and_then(|r| range_through_zero(r, &format!("{key}.velocity"), p)),
            acceleration: l
                .acceleration
                .and_then(|r| range_through_zero(r, &format!("{key}.acceleration"), p)),
            effort: l
                .effort
                .and_then(|r| range_through_zero(r, &format!("{key}.effort"), p)),
            following_error: l
                .following_error
                .and_then(|t| positive(t, &format!("{key}.following_error"), "rad or m", p)),
            quick_stop_deceleration: l.quick_stop_deceleration.and_then(|d| {
                positive(
                    d,
                    &format!("{key}.quick_stop_deceleration"),
                    "rad/s² or m/s²",
                    p,
                )
            }),
        });
    }

    Robot {
        model,
        model_key,
        fixed_base: raw.fixed_base.unwrap_or(false),
        allow_unlimited: raw.allow_unlimited.unwrap_or(false),
        joints: raw.joints.clone(),
        limits,
    }
}

/// A positive finite number, else a problem naming `unit`.
fn positive(v: f64, key: &str, unit: &str, p: &mut Problems) -> Option<f64> {
    if v.is_finite() && v > 0.0 {
        Some(v)
    } else {
        p.value(key, format!("{v} is not a positive number of {unit}"));
        None
    }
}

/// A position range: a finite `[lower, upper]` pair with `lower < upper`.
fn position_range(range: RawRange, key: &str, p: &mut Problems) -> Option<Limits> {
    match range {
        RawRange::Symmetric(v) => {
            p.value(key, format!("expected a [lower, upper] pair, found {v}"));
            None
        }
        RawRange::Pair(lower, upper) => ordered_pair(lower, upper, key, p),
    }
}

/// A velocity, acceleration or effort range: a positive magnitude (symmetric) or a finite
/// `[lower, upper]` pair around 0 — a range excluding 0 would forbid coming to rest.
fn range_through_zero(range: RawRange, key: &str, p: &mut Problems) -> Option<Limits> {
    match range {
        RawRange::Symmetric(v) => {
            if v.is_finite() && v > 0.0 {
                Some(Limits {
                    lower: -v,
                    upper: v,
                })
            } else {
                p.value(key, format!("{v} is not a positive finite magnitude"));
                None
            }
        }
        RawRange::Pair(lower, upper) => {
            let limits = ordered_pair(lower, upper, key, p)?;
            if limits.lower <= 0.0 && 0.0 <= limits.upper {
                Some(limits)
            } else {
                p.value(
                    key,
                    format!("[{lower}, {upper}] does not contain 0, so the joint could never rest"),
                );
                None
            }
        }
    }
}

fn ordered_pair(lower: f64, upper: f64, key: &str, p: &mut Problems) -> Option<Limits> {
    if !(lower.is_finite() && upper.is_finite()) {
        p.value(
            key,
            format!("[{lower}, {upper}] has a bound that is not finite"),
        );
        None
    } else if lower < upper {
        Some(Limits { lower, upper })
    } else {
        p.value(
            key,
            format!("[{lower}, {upper}]: the lower bound must be below the upper"),
        );
        None
    }
}

fn validate_rt(raw: &raw::RawRt, p: &mut Problems) -> RtSettings {
    let cpu = raw.cpu.and_then(|cpu| {
        // sched_setaffinity's fixed-size cpu_set_t cannot name a higher CPU.
        let max = libc::CPU_SETSIZE as u64;
        if cpu < max {
            usize::try_from(cpu).ok()
        } else {
            p.value("rt.cpu", format!("{cpu} is not below CPU_SETSIZE ({max})"));
            None
        }
    });
    let priority = check_priority(raw.priority).unwrap_or_else(|why| {
        p.value("rt.priority", why);
        1
    });
    let max_consecutive_overruns = match u32::try_from(raw.max_consecutive_overruns) {
        Ok(n) if n >= 1 => n,
        _ => {
            p.value(
                "rt.max_consecutive_overruns",
                format!(
                    "{} is outside 1..={}",
                    raw.max_consecutive_overruns,
                    u32::MAX
                ),
            );
            1
        }
    };
    let max_late = raw
        .max_late_ms
        .and_then(|ms| positive(ms, "rt.max_late_ms", "milliseconds", p))
        .and_then(|ms| match Duration::try_from_secs_f64(ms / 1000.0) {
            Ok(late) => Some(late),
            Err(_) => {
                p.value(
                    "rt.max_late_ms",
                    format!("{ms} milliseconds is longer than any clock can count"),
                );
                None
            }
        });
    let timeout_s = raw.enable_timeout_s;
    let enable_timeout = if timeout_s.is_finite() && timeout_s > 0.0 && timeout_s <= 600.0 {
        Duration::try_from_secs_f64(timeout_s).unwrap_or(Duration::ZERO)
    } else {
        p.value(
            "rt.enable_timeout_s",
            format!("{timeout_s} s is outside (0, 600] s"),
        );
        Duration::from_secs_f64(DEFAULT_ENABLE_TIMEOUT_S)
    };
    let cpu_wakeup_latency_us = match raw.cpu_wakeup_latency_us {
        raw::RawWakeup::Off => None,
        raw::RawWakeup::Us(us) => match u32::try_from(us) {
            Ok(us) if us <= MAX_WAKEUP_LATENCY_US => Some(us),
            _ => {
                p.value(
                    "rt.cpu_wakeup_latency_us",
                    format!("{us} is outside 0..={MAX_WAKEUP_LATENCY_US} microseconds (or `off`)"),
                );
                Some(0)
            }
        },
    };
    RtSettings {
        cpu,
        priority,
        lock_memory: raw.lock_memory,
        strict: raw.strict,
        max_consecutive_overruns,
        max_late,
        enable_timeout,
        cpu_wakeup_latency_us,
    }
}

fn validate_sim(
    raw: &raw::RawSim,
    rate_hz: Option<f64>,
    robot: &Robot,
    p: &mut Problems,
) -> SimConfig {
    // The sim preallocates its command delay line, so the latency is bounded: one second.
    let max_latency = rate_hz.map_or(u64::MAX, |r| r.floor() as u64);
    let latency_ticks = match u32::try_from(raw.latency_ticks) {
        Ok(n) if raw.latency_ticks <= max_latency => n,
        _ => {
            p.value(
                "sim.latency_ticks",
                format!(
                    "{} ticks is more than one second at the control rate",
                    raw.latency_ticks
                ),
            );
            0
        }
    };
    let bandwidth_hz = raw.bandwidth_hz;
    if !(bandwidth_hz.is_finite() && bandwidth_hz > 0.0) {
        p.value(
            "sim.bandwidth_hz",
            format!("{bandwidth_hz} Hz is not a positive finite frequency"),
        );
    }
    let damping = raw.damping;
    if !(damping.is_finite() && damping > 0.0 && damping <= 100.0) {
        p.value("sim.damping", format!("{damping} is outside (0, 100]"));
    }
    let fault = raw.fault.as_ref().map(|f| {
        if let Some(dof) = &f.dof {
            let listed = robot.joints.as_ref().is_none_or(|j| j.contains(dof));
            if dof.trim().is_empty() {
                p.value("sim.fault.dof", format!("empty DOF name {dof:?}"));
            } else if !listed {
                p.value(
                    "sim.fault.dof",
                    format!("{dof:?} is not one of robot.joints"),
                );
            }
        }
        SimConfigFault {
            kind: f.kind,
            at_tick: f.at_tick,
            dof: f.dof.clone(),
        }
    });
    SimConfig {
        latency_ticks,
        bandwidth_hz,
        damping,
        fault,
    }
}

fn validate_recorder(raw: &raw::RawRecorder, config: &Path, p: &mut Problems) -> RecorderSettings {
    let seconds = if (0.0..=MAX_RECORDER_SECONDS).contains(&raw.seconds) {
        raw.seconds
    } else {
        p.value(
            "recorder.seconds",
            format!(
                "{} s is outside 0..={MAX_RECORDER_SECONDS} s (0 turns the recorder off)",
                raw.seconds
            ),
        );
        0.0
    };
    if raw.dir.as_ref().is_some_and(|d| d.as_os_str().is_empty()) {
        p.value("recorder.dir", "empty path");
    }
    if raw.max_files == 0 {
        p.value(
            "recorder.max_files",
            "0 would remove every dump as it is written; give at least 1",
        );
    }
    let max_bytes = positive(raw.max_mib, "recorder.max_mib", "MiB", p)
        .map_or(0, |mib| (mib * 1024.0 * 1024.0).min(u64::MAX as f64) as u64);
    RecorderSettings {
        seconds,
        dir: raw.dir.as_ref().map(|d| resolve(config, d)),
        max_files: usize::try_from(raw.max_files).unwrap_or(usize::MAX),
        max_bytes,
    }
}

fn validate_daemon(raw: &raw::RawDaemon, p: &mut Problems) -> DaemonSettings {
    let socket = resolve(p.path, &raw.socket);
    let len = socket.as_os_str().len();
    if raw.socket.as_os_str().is_empty() {
        p.value("daemon.socket", "empty path");
    } else if len > MAX_SOCKET_PATH {
        p.value(
            "daemon.socket",
            format!(
                "{} is {len} bytes long; a Unix socket path holds at most {MAX_SOCKET_PATH}",
                socket.display()
            ),
        );
    }
    if let Some(group) = &raw.socket_group {
        let valid = !group.is_empty()
            && group
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if !valid {
            p.value(
                "daemon.socket_group",
                format!("{group:?} is not a group name (letters, digits, `_`, `-`, `.`)"),
            );
        }
    }
    let timeout_s = raw.shutdown_timeout_s;
    let shutdown_timeout = if timeout_s.is_finite() && timeout_s > 0.0 && timeout_s <= 600.0 {
        Duration::try_from_secs_f64(timeout_s).unwrap_or(Duration::ZERO)
    } else {
        p.value(
            "daemon.shutdown_timeout_s",
            format!("{timeout_s} s is outside (0, 600] s"),
        );
        Duration::ZERO
    };
    DaemonSettings {
        socket,
        socket_group: raw.socket_group.clone(),
        shutdown_timeout,
        safe_state: match raw.safe_state {
            raw::RawSafeState::Hold => SafeState::Hold,
            raw::RawSafeState::Disable => SafeState::Disable,
        },
        watchdog: raw.watchdog,
    }
}

#[cfg(test)]
mod tests;
