//! `motiond doctor`: is this machine ready for the configured loop? Each check reads the machine
//! through a [`Host`] (so each finding is tested from a fake `/sys` and `/proc`) and says what it
//! found and what to do; a short measured wake-up test on the loop's CPU ([`Measure`]) sits
//! beside what the machine's own floor is.
//!
//! One module per concern: [`kernel`] (preemption model, clocksource, RT throttling), [`cpu`]
//! (isolation, SMT sibling, IRQs, idle states, frequency governor), [`limits`] (rtprio and
//! memlock), [`pmqos`] (the PM QoS request the loop holds), [`wakeup`] (the measured test).

pub mod cpu;
pub mod host;
pub mod kernel;
pub mod limits;
pub mod pmqos;
pub mod wakeup;

#[cfg(test)]
pub use self::host::fake::Tree;
pub use self::host::{Host, System};
pub use self::wakeup::{Measure, MeasuredHere, Wakeups};

use crate::rt::Settings;

/// How much a finding stands between the loop and its deadlines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// As it should be.
    Ok,
    /// Worth knowing; nothing to change for the configured loop.
    Note,
    /// Makes wake-ups later or less certain: the doctor exits 1.
    Warn,
    /// The loop cannot meet `rt.max_late_ms` (or, under `rt.strict`, would not start): exit 2.
    Fail,
}

/// One check's result.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Finding {
    /// The check's name (`preemption`, `isolation`, …).
    pub check: &'static str,
    pub level: Level,
    /// What the check found, with the file it read.
    pub finding: String,
    /// What to do about it (`None` when nothing).
    pub todo: Option<String>,
}

impl Finding {
    pub fn new(check: &'static str, level: Level, finding: impl Into<String>) -> Finding {
        Finding {
            check,
            level,
            finding: finding.into(),
            todo: None,
        }
    }

    pub fn todo(mut self, todo: impl Into<String>) -> Finding {
        self.todo = Some(todo.into());
        self
    }
}

/// Everything the doctor found.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    /// What was checked against: rate, CPU, priority, PM QoS request and the latest wake-up the
    /// loop allows.
    pub target: Target,
    pub findings: Vec<Finding>,
    /// The measured wake-up test, when it ran.
    pub wakeups: Option<Wakeups>,
    /// `ready`, `warnings` or `not ready`.
    pub verdict: &'static str,
    /// 0 ready, 1 with warnings, 2 not ready.
    pub exit: u8,
}

/// The configured loop, as the doctor checks it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Target {
    pub rate_hz: f64,
    pub cpu: Option<usize>,
    pub priority: Option<i32>,
    pub lock_memory: bool,
    pub strict: bool,
    pub cpu_wakeup_latency_us: Option<u32>,
    /// A wake-up later than this faults the loop (`rt.max_late_ms`; two periods by default), µs.
    pub max_late_us: f64,
}

impl Target {
    pub fn of(settings: &Settings) -> Target {
        Target {
            rate_hz: settings.rate_hz,
            cpu: settings.cpu,
            priority: settings.priority,
            lock_memory: settings.lock_memory,
            strict: settings.strict,
            cpu_wakeup_latency_us: settings.cpu_wakeup_latency_us,
            max_late_us: settings.max_late_s.unwrap_or(2.0 / settings.rate_hz) * 1e6,
        }
    }

    pub fn period_us(&self) -> f64 {
        1e6 / self.rate_hz
    }

    /// A setting the loop cannot obtain: a warning, or under `rt.strict` a loop that would not
    /// start.
    fn not_obtainable(&self) -> Level {
        if self.strict {
            Level::Fail
        } else {
            Level::Warn
        }
    }
}

/// Runs every check on `host` for the loop `settings` describe, and the wake-up test for
/// `seconds` (0: none) through `measure`.
pub fn examine(
    host: &dyn Host,
    settings: &Settings,
    measure: &dyn Measure,
    seconds: f64,
) -> Report {
    let target = Target::of(settings);
    let before = host.text("/proc/stat");
    let mut findings = vec![
        kernel::preemption(host),
        kernel::clocksource(host),
        kernel::rt_throttling(host),
        cpu::isolation(host, &target),
    ];
    let irqs = cpu::irqs(host, &target);
    let idle = cpu::idle_states(host, &target);
    let governor = cpu::governor(host, &target);
    let rtprio = limits::rtprio(host, &target);
    let memlock = limits::memlock(host, &target);
    let request = pmqos::request(host, &target);
    let wakeups = (seconds > 0.0).then(|| measure.wakeups(settings, seconds));
    let after = host.text("/proc/stat");
    findings.push(cpu::smt_sibling(
        host,
        &target,
        before.as_deref().zip(after.as_deref()),
    ));
    findings.extend([irqs, idle, governor, rtprio, memlock, request]);
    let (finding, wakeups) = match wakeups {
        None => (
            Finding::new("wake-up test", Level::Note, "not run (--seconds 0)"),
            None,
        ),
        Some(Err(why)) => (
            Finding::new("wake-up test", Level::Warn, format!("could not run: {why}")),
            None,
        ),
        Some(Ok(w)) => (wakeup::finding(&w, &target), Some(w)),
    };
    findings.push(finding);
    let worst = findings.iter().map(|f| f.level).max().unwrap_or(Level::Ok);
    let (verdict, exit) = match worst {
        Level::Ok | Level::Note => ("ready", 0),
        Level::Warn => ("warnings", 1),
        Level::Fail => ("not ready", 2),
    };
    Report {
        target,
        findings,
        wakeups,
        verdict,
        exit,
    }
}

#[cfg(test)]
mod tests;
