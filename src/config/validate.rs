//! The raw sections → validated settings: ranges checked so that NaN fails them, units
//! converted, paths resolved against the configuration file's folder, every problem recorded.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::problems::Problems;
use super::raw::{self, RawConfig, RawRange};
use super::{
    ActiveLevel, BackendConfig, Config, ControlSettings, DEFAULT_ENABLE_TIMEOUT_S, DaemonSettings,
    DofLimitOverride, EStopSettings, GpioLine, JointGroup, Locations, MAX_ESTOP_DEBOUNCE_MS,
    MAX_RECORDER_SECONDS, MAX_SOCKET_PATH, MAX_TAKE_S, MAX_WAKEUP_LATENCY_US, MotionSettings,
    RecorderSettings, Robot, RtSettings, SafeState, SimConfig, SimConfigFault, bus, check_priority,
    check_rate_hz, resolve,
};
use crate::diag::Num;
use crate::robot::Limits;
use crate::trajectory::{Interpolation, LimitPolicy};

/// Turns the raw sections into settings, recording every problem. The returned value is only
/// meaningful when no problem was recorded.
pub(super) fn validate(raw: RawConfig, p: &mut Problems) -> Config {
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
    let motion = validate_motion(&raw.motion, config_path, p);
    let backend = validate_backend(&raw, &robot, rate_ok.then_some(rate_hz), p);
    Config {
        path: config_path.to_path_buf(),
        robot,
        motion,
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

/// `backend` and the buses it drives. Bus entries name the DOFs they drive, so they are
/// validated against `robot.joints` at the control rate (`None`: invalid); without those only
/// their keys are checked.
fn validate_backend(
    raw: &RawConfig,
    robot: &Robot,
    rate_hz: Option<f64>,
    p: &mut Problems,
) -> BackendConfig {
    let mut buses = Vec::new();
    if !raw.buses.is_empty()
        && robot.joints.is_none()
        && !p.section_failed("robot")
        && !p.unknown_under("robot")
    {
        p.key(
            "robot.joints",
            "required when buses are configured: list the DOF names the buses drive, in .seq \
             column order",
        );
    }
    let found = match (raw.buses.is_empty(), rate_hz, &robot.joints) {
        (false, Some(rate_hz), Some(joints)) => {
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
    match raw.backend {
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
    }
}

/// `motion`: the library and takes folders resolved against the configuration's folder.
fn validate_motion(raw: &raw::RawMotion, config_path: &Path, p: &mut Problems) -> MotionSettings {
    if raw.library.as_os_str().is_empty() {
        p.value("motion.library", "empty path");
    }
    let library = resolve(config_path, &raw.library);
    let takes = raw
        .takes
        .as_ref()
        .map_or_else(|| library.join(".takes"), |t| resolve(config_path, t));
    let max_take_s = raw.max_take_s;
    let max_take = if max_take_s.is_finite() && max_take_s > 0.0 && max_take_s <= MAX_TAKE_S {
        Duration::from_secs_f64(max_take_s)
    } else {
        p.value(
            "motion.max_take_s",
            format!("{} is outside (0, {MAX_TAKE_S}] s", Num(max_take_s)),
        );
        Duration::from_secs(3600)
    };
    MotionSettings {
        library,
        takes,
        max_take,
        interpolation: match raw.interpolation {
            raw::RawInterpolation::Hold => Interpolation::Hold,
            raw::RawInterpolation::Linear => Interpolation::Linear,
            raw::RawInterpolation::Pchip => Interpolation::Pchip,
            raw::RawInterpolation::Cubic => Interpolation::Cubic,
        },
        limit_policy: match raw.limit_policy {
            raw::RawLimitPolicy::Reject => LimitPolicy::Reject,
            raw::RawLimitPolicy::Clamp => LimitPolicy::Clamp,
            raw::RawLimitPolicy::Retime => LimitPolicy::Retime,
        },
        goal_tolerance: raw
            .goal_tolerance
            .and_then(|t| positive(t, "motion.goal_tolerance", "rad or m", p)),
        goal_time_s: positive(raw.goal_time_s, "motion.goal_time_s", "s", p).unwrap_or(1.0),
        max_file_bytes: positive(raw.max_file_mib, "motion.max_file_mib", "MiB", p)
            .map_or(0, |mib| (mib * 1024.0 * 1024.0).min(u64::MAX as f64) as u64),
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
                "{} ms is outside 0..={MAX_ESTOP_DEBOUNCE_MS} ms (a longer debounce delays the \
                 stop by as much)",
                Num(ms)
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
        p.value(
            key,
            format!("{} is not a positive number of {unit}", Num(v)),
        );
        None
    }
}

/// A position range: a finite `[lower, upper]` pair with `lower < upper`.
fn position_range(range: RawRange, key: &str, p: &mut Problems) -> Option<Limits> {
    match range {
        RawRange::Symmetric(v) => {
            p.value(
                key,
                format!("expected a [lower, upper] pair, found {}", Num(v)),
            );
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
                p.value(
                    key,
                    format!("{} is not a positive finite magnitude", Num(v)),
                );
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
                    format!(
                        "[{}, {}] does not contain 0, so the joint could never rest",
                        Num(lower),
                        Num(upper)
                    ),
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
            format!(
                "[{}, {}] has a bound that is not finite",
                Num(lower),
                Num(upper)
            ),
        );
        None
    } else if lower < upper {
        Some(Limits { lower, upper })
    } else {
        p.value(
            key,
            format!(
                "[{}, {}]: the lower bound must be below the upper",
                Num(lower),
                Num(upper)
            ),
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
                    format!(
                        "{} milliseconds is longer than any clock can count",
                        Num(ms)
                    ),
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
            format!("{} s is outside (0, 600] s", Num(timeout_s)),
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
            format!(
                "{} Hz is not a positive finite frequency",
                Num(bandwidth_hz)
            ),
        );
    }
    let damping = raw.damping;
    if !(damping.is_finite() && damping > 0.0 && damping <= 100.0) {
        p.value(
            "sim.damping",
            format!("{} is outside (0, 100]", Num(damping)),
        );
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
                Num(raw.seconds)
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
            format!("{} s is outside (0, 600] s", Num(timeout_s)),
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
