//! The measured wake-up test: a thread set up exactly as the loop's (`rt` settings applied, the
//! PM QoS request held) sleeps to absolute deadlines at the configured rate on the loop's CPU,
//! then once more at the machine's floor (SCHED_FIFO 99, PM QoS 0, same CPU), as cyclictest
//! would measure it.

use std::sync::Arc;

use super::{Finding, Level, Target};
use crate::rt::{Clock, Histogram, MonotonicClock, Obtained, Settings, Summary};

/// Wake-up latencies (actual wake-up − deadline), µs.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Wakeups {
    pub seconds: f64,
    /// With the loop's settings.
    pub configured: Summary,
    /// What the test thread obtained of them.
    pub obtained: Obtained,
    /// With the best settings this machine grants (FIFO 99, PM QoS 0, same CPU).
    pub floor: Option<Summary>,
    /// Why there is no floor.
    pub floor_missing: Option<String>,
}

/// Runs the wake-up test.
pub trait Measure {
    fn wakeups(&self, settings: &Settings, seconds: f64) -> Result<Wakeups, String>;
}

/// The test on this machine's kernel.
#[derive(Debug, Default, Clone, Copy)]
pub struct MeasuredHere;

/// Sleeps to `start + k·period` for `seconds` on a thread with `settings` applied.
fn run(settings: &Settings, seconds: f64) -> Result<(Summary, Obtained), String> {
    let settings = settings.clone();
    let histogram = Arc::new(Histogram::new());
    let recorded = Arc::clone(&histogram);
    let ticks = (seconds * settings.rate_hz).ceil() as u64;
    let period_ns = 1e9 / settings.rate_hz;
    std::thread::Builder::new()
        .name("motiond-doctor".into())
        .stack_size(256 * 1024)
        .spawn(move || {
            // Held (the PM QoS request with it) until the test ends.
            let applied =
                crate::rt::sched::apply(&settings, 64 * 1024).map_err(|e| e.to_string())?;
            let mut clock = MonotonicClock;
            let start = clock.now_ns() + period_ns as u64;
            for k in 0..ticks {
                let deadline = start + (k as f64 * period_ns) as u64;
                clock.sleep_until(deadline);
                recorded.record(clock.now_ns().saturating_sub(deadline));
            }
            Ok(applied.obtained)
        })
        .map_err(|e| format!("starting the test thread: {e}"))?
        .join()
        .map_err(|_| "the test thread panicked".to_string())?
        .map(|obtained| (histogram.summary(), obtained))
}

impl Measure for MeasuredHere {
    fn wakeups(&self, settings: &Settings, seconds: f64) -> Result<Wakeups, String> {
        let (configured, obtained) = run(settings, seconds)?;
        let best = Settings {
            priority: Some(99),
            lock_memory: true,
            cpu_wakeup_latency_us: Some(0),
            strict: true,
            ..settings.clone()
        };
        let (floor, floor_missing) = match run(&best, seconds) {
            Ok((floor, _)) => (Some(floor), None),
            Err(why) => (None, Some(why)),
        };
        Ok(Wakeups {
            seconds,
            configured,
            obtained,
            floor,
            floor_missing,
        })
    }
}

fn summary(s: &Summary) -> String {
    format!("p50 {:.1}  p99 {:.1}  max {:.1} µs", s.p50, s.p99, s.max)
}

/// The verdict on a test: beyond `rt.max_late_ms` the loop would fault (exit 2); well above
/// the floor it misses something the machine grants.
pub fn finding(w: &Wakeups, target: &Target) -> Finding {
    const CHECK: &str = "wake-up test";
    let c = &w.configured;
    let floor = match (&w.floor, &w.floor_missing) {
        (Some(f), _) => format!("floor (SCHED_FIFO 99, PM QoS 0) {}", summary(f)),
        (None, Some(why)) => format!("floor not measured: {why}"),
        (None, None) => "floor not measured".into(),
    };
    let cpu = w
        .obtained
        .cpu
        .map_or("any CPU".to_string(), |c| format!("CPU {c}"));
    let mut found = format!(
        "{} wake-ups at {} Hz on {cpu}: as configured {}; {floor}",
        c.count,
        target.rate_hz,
        summary(c)
    );
    for w in &w.obtained.warnings {
        found.push_str(&format!("; not obtained: {w}"));
    }
    if c.max * 1.0 >= target.max_late_us {
        return Finding::new(
            CHECK,
            Level::Fail,
            format!(
                "{found}; the latest wake-up is beyond rt.max_late_ms ({:.0} µs): the loop \
                 would fault",
                target.max_late_us
            ),
        )
        .todo(
            "act on the warnings above, then run the doctor again under the robot's usual load \
               (--seconds 30); a larger rt.max_late_ms only hides late ticks",
        );
    }
    if let Some(f) = &w.floor
        && c.p99 > 1.5 * f.p99 + 5.0
    {
        return Finding::new(
            CHECK,
            Level::Warn,
            format!("{found}; the configured loop wakes later than this machine can"),
        )
        .todo("see what the loop did not obtain (rtprio, memlock, pm qos above)");
    }
    if c.max > 0.5 * target.period_us() {
        return Finding::new(
            CHECK,
            Level::Warn,
            format!(
                "{found}; the latest wake-up leaves less than half of the {:.0} µs period for \
                 the tick's work",
                target.period_us()
            ),
        )
        .todo("act on the warnings above, or lower control.rate_hz");
    }
    Finding::new(CHECK, Level::Ok, found)
}
