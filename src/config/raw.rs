//! The configuration as written: serde mirrors of each YAML section, unknown keys refused.
//! Nothing here is checked beyond its type; [`super::Config`] holds the validated form.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::Deserialize;
use serde::de::{self, Deserializer, SeqAccess, Visitor};

use super::bus::RawBus;

/// The whole file. Each section is deserialized on its own so that problems in several sections
/// are reported together; a missing section takes its defaults.
#[derive(Debug, Default)]
pub struct RawConfig {
    pub robot: RawRobot,
    pub motion: RawMotion,
    pub control: RawControl,
    pub rt: RawRt,
    pub backend: RawBackendKind,
    pub sim: RawSim,
    pub buses: Vec<RawBus>,
    pub daemon: RawDaemon,
    /// Joint groups: a name and the DOFs it moves.
    pub groups: BTreeMap<String, Vec<String>>,
    /// `None` when the file has no `estop` section (no E-stop input watched).
    pub estop: Option<RawEStop>,
    pub recorder: RawRecorder,
}

/// The top-level keys, in the order the documentation lists them.
pub const SECTIONS: [&str; 11] = [
    "robot", "motion", "control", "rt", "backend", "sim", "buses", "daemon", "groups", "estop",
    "recorder",
];

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRobot {
    pub model: Option<PathBuf>,
    /// The older name of `model`.
    pub skel: Option<PathBuf>,
    pub fixed_base: Option<bool>,
    #[serde(default)]
    pub joints: Option<Vec<String>>,
    #[serde(default)]
    pub limits: BTreeMap<String, RawDofLimits>,
    pub allow_unlimited: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDofLimits {
    pub position: Option<RawRange>,
    pub velocity: Option<RawRange>,
    pub acceleration: Option<RawRange>,
    pub effort: Option<RawRange>,
    pub following_error: Option<f64>,
    pub quick_stop_deceleration: Option<f64>,
}

/// A limit written either as one magnitude (symmetric, `2.0` = `[-2.0, 2.0]`) or as a
/// `[lower, upper]` pair.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RawRange {
    Symmetric(f64),
    Pair(f64, f64),
}

impl<'de> Deserialize<'de> for RawRange {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct RangeVisitor;

        impl<'de> Visitor<'de> for RangeVisitor {
            type Value = RawRange;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number (a symmetric ± limit) or a [lower, upper] pair")
            }

            fn visit_f64<E: de::Error>(self, v: f64) -> Result<RawRange, E> {
                Ok(RawRange::Symmetric(v))
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<RawRange, E> {
                Ok(RawRange::Symmetric(v as f64))
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<RawRange, E> {
                Ok(RawRange::Symmetric(v as f64))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RawRange, A::Error> {
                let lower: f64 = seq
                    .next_element()?
                    .ok_or_else(|| de::Error::invalid_length(0, &self))?;
                let upper: f64 = seq
                    .next_element()?
                    .ok_or_else(|| de::Error::invalid_length(1, &self))?;
                if seq.next_element::<de::IgnoredAny>()?.is_some() {
                    return Err(de::Error::invalid_length(3, &self));
                }
                Ok(RawRange::Pair(lower, upper))
            }
        }

        deserializer.deserialize_any(RangeVisitor)
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMotion {
    #[serde(default = "default_library")]
    pub library: PathBuf,
    #[serde(default)]
    pub interpolation: RawInterpolation,
    #[serde(default)]
    pub limit_policy: RawLimitPolicy,
    #[serde(default)]
    pub goal_tolerance: Option<f64>,
    #[serde(default = "default_goal_time_s")]
    pub goal_time_s: f64,
    #[serde(default = "default_max_file_mib")]
    pub max_file_mib: f64,
    /// Where teach-in takes are written while recorded; default: `.takes` in the library.
    #[serde(default)]
    pub takes: Option<PathBuf>,
    #[serde(default = "default_max_take_s")]
    pub max_take_s: f64,
}

impl Default for RawMotion {
    fn default() -> Self {
        RawMotion {
            library: default_library(),
            interpolation: RawInterpolation::default(),
            limit_policy: RawLimitPolicy::default(),
            goal_tolerance: None,
            goal_time_s: default_goal_time_s(),
            max_file_mib: default_max_file_mib(),
            takes: None,
            max_take_s: default_max_take_s(),
        }
    }
}

/// An hour of teach-in.
fn default_max_take_s() -> f64 {
    3600.0
}

fn default_goal_time_s() -> f64 {
    1.0
}

fn default_max_file_mib() -> f64 {
    256.0
}

fn default_library() -> PathBuf {
    PathBuf::from("motions")
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RawInterpolation {
    Hold,
    Linear,
    #[default]
    Pchip,
    Cubic,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RawLimitPolicy {
    #[default]
    Reject,
    Clamp,
    Retime,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawControl {
    #[serde(default = "default_rate_hz")]
    pub rate_hz: f64,
}

impl Default for RawControl {
    fn default() -> Self {
        RawControl {
            rate_hz: default_rate_hz(),
        }
    }
}

fn default_rate_hz() -> f64 {
    1000.0
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRt {
    #[serde(default)]
    pub cpu: Option<u64>,
    /// Wide integer so an out-of-range priority is reported by value, not as a type error.
    #[serde(default = "default_priority")]
    pub priority: i64,
    #[serde(default = "yes")]
    pub lock_memory: bool,
    #[serde(default)]
    pub strict: bool,
    #[serde(default = "default_max_overruns")]
    pub max_consecutive_overruns: u64,
    #[serde(default)]
    pub max_late_ms: Option<f64>,
    #[serde(default = "default_enable_timeout_s")]
    pub enable_timeout_s: f64,
    #[serde(default)]
    pub cpu_wakeup_latency_us: RawWakeup,
}

/// `rt.cpu_wakeup_latency_us`: microseconds (wide, so a negative value is reported by value), or
/// `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawWakeup {
    Us(i64),
    Off,
}

impl Default for RawWakeup {
    fn default() -> Self {
        RawWakeup::Us(0)
    }
}

impl<'de> Deserialize<'de> for RawWakeup {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct WakeupVisitor;

        impl<'de> Visitor<'de> for WakeupVisitor {
            type Value = RawWakeup;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a whole number of microseconds or `off`")
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<RawWakeup, E> {
                Ok(RawWakeup::Us(v))
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<RawWakeup, E> {
                Ok(RawWakeup::Us(i64::try_from(v).unwrap_or(i64::MAX)))
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawWakeup, E> {
                if v == "off" {
                    Ok(RawWakeup::Off)
                } else {
                    Err(de::Error::invalid_value(de::Unexpected::Str(v), &self))
                }
            }

            fn visit_bool<E: de::Error>(self, v: bool) -> Result<RawWakeup, E> {
                if v {
                    Err(de::Error::invalid_value(de::Unexpected::Bool(v), &self))
                } else {
                    Ok(RawWakeup::Off)
                }
            }
        }

        deserializer.deserialize_any(WakeupVisitor)
    }
}

impl Default for RawRt {
    fn default() -> Self {
        RawRt {
            cpu: None,
            priority: default_priority(),
            lock_memory: true,
            strict: false,
            max_consecutive_overruns: default_max_overruns(),
            max_late_ms: None,
            enable_timeout_s: default_enable_timeout_s(),
            cpu_wakeup_latency_us: RawWakeup::default(),
        }
    }
}

fn default_enable_timeout_s() -> f64 {
    super::DEFAULT_ENABLE_TIMEOUT_S
}

fn default_priority() -> i64 {
    super::DEFAULT_PRIORITY.into()
}

fn default_max_overruns() -> u64 {
    10
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RawBackendKind {
    #[default]
    Sim,
    Buses,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSim {
    #[serde(default = "default_latency_ticks")]
    pub latency_ticks: u64,
    #[serde(default = "default_bandwidth_hz")]
    pub bandwidth_hz: f64,
    #[serde(default = "default_damping")]
    pub damping: f64,
    #[serde(default)]
    pub fault: Option<RawFault>,
}

impl Default for RawSim {
    fn default() -> Self {
        RawSim {
            latency_ticks: default_latency_ticks(),
            bandwidth_hz: default_bandwidth_hz(),
            damping: default_damping(),
            fault: None,
        }
    }
}

fn default_latency_ticks() -> u64 {
    1
}

fn default_bandwidth_hz() -> f64 {
    super::DEFAULT_SIM_BANDWIDTH_HZ
}

fn default_damping() -> f64 {
    1.0
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFault {
    pub kind: crate::backend::SimFaultKind,
    pub at_tick: u64,
    #[serde(default)]
    pub dof: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDaemon {
    #[serde(default = "default_socket")]
    pub socket: PathBuf,
    #[serde(default)]
    pub socket_group: Option<String>,
    #[serde(default = "default_shutdown_timeout_s")]
    pub shutdown_timeout_s: f64,
    #[serde(default)]
    pub safe_state: RawSafeState,
    #[serde(default = "yes")]
    pub watchdog: bool,
}

impl Default for RawDaemon {
    fn default() -> Self {
        RawDaemon {
            socket: default_socket(),
            socket_group: None,
            shutdown_timeout_s: default_shutdown_timeout_s(),
            safe_state: RawSafeState::default(),
            watchdog: true,
        }
    }
}

/// `recorder`: the flight recorder's ring and dumps.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRecorder {
    #[serde(default = "default_recorder_seconds")]
    pub seconds: f64,
    #[serde(default)]
    pub dir: Option<PathBuf>,
    #[serde(default = "default_recorder_max_files")]
    pub max_files: u64,
    #[serde(default = "default_recorder_max_mib")]
    pub max_mib: f64,
}

impl Default for RawRecorder {
    fn default() -> Self {
        RawRecorder {
            seconds: default_recorder_seconds(),
            dir: None,
            max_files: default_recorder_max_files(),
            max_mib: default_recorder_max_mib(),
        }
    }
}

fn default_recorder_seconds() -> f64 {
    10.0
}

fn default_recorder_max_files() -> u64 {
    20
}

fn default_recorder_max_mib() -> f64 {
    512.0
}

fn default_socket() -> PathBuf {
    PathBuf::from("/run/motiond/control.sock")
}

fn default_shutdown_timeout_s() -> f64 {
    5.0
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RawSafeState {
    #[default]
    Hold,
    Disable,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawEStop {
    #[serde(default)]
    pub gpio: Option<RawGpioLine>,
    #[serde(default = "default_debounce_ms")]
    pub debounce_ms: f64,
    #[serde(default)]
    pub drive: bool,
}

fn default_debounce_ms() -> f64 {
    super::DEFAULT_ESTOP_DEBOUNCE_MS
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawGpioLine {
    #[serde(default)]
    pub chip: Option<PathBuf>,
    /// Wide integer so an out-of-range offset is reported by value, not as a type error.
    #[serde(default)]
    pub line: Option<u64>,
    #[serde(default)]
    pub active: Option<RawActiveLevel>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RawActiveLevel {
    Low,
    High,
}
