//! Time as the loop sees it, injected so tests can step a clock instead of sleeping.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The loop's source of time. Monotonic nanoseconds drive the deadlines; the wall clock only
/// converts an absolute `start_at` (CLOCK_REALTIME) into a tick.
pub trait Clock: Send + 'static {
    /// Monotonic time in nanoseconds (an arbitrary but fixed origin).
    fn now_ns(&self) -> u64;
    /// Blocks until the monotonic time reaches `deadline_ns`; returns at once if it has passed.
    fn sleep_until(&mut self, deadline_ns: u64);
    /// Wall-clock time in nanoseconds since the Unix epoch.
    fn realtime_ns(&self) -> i128;
}

/// The kernel's clocks: CLOCK_MONOTONIC with absolute-deadline `clock_nanosleep`, CLOCK_REALTIME.
#[derive(Debug, Clone, Copy, Default)]
pub struct MonotonicClock;

fn read_clock(id: libc::clockid_t) -> libc::timespec {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime only writes into it.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts
}

impl Clock for MonotonicClock {
    fn now_ns(&self) -> u64 {
        let ts = read_clock(libc::CLOCK_MONOTONIC);
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }

    fn sleep_until(&mut self, deadline_ns: u64) {
        let ts = libc::timespec {
            tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
        };
        loop {
            // SAFETY: `ts` is a valid timespec; the remaining-time pointer may be null with
            // TIMER_ABSTIME.
            let rc = unsafe {
                libc::clock_nanosleep(
                    libc::CLOCK_MONOTONIC,
                    libc::TIMER_ABSTIME,
                    &ts,
                    std::ptr::null_mut(),
                )
            };
            // An absolute deadline makes retrying after a signal exact.
            if rc != libc::EINTR {
                break;
            }
        }
    }

    fn realtime_ns(&self) -> i128 {
        let ts = read_clock(libc::CLOCK_REALTIME);
        ts.tv_sec as i128 * 1_000_000_000 + ts.tv_nsec as i128
    }
}

/// A clock that moves only when told: `sleep_until` jumps straight to the deadline, so a loop on
/// it runs as fast as the CPU allows with every wake-up exactly on time. Clones share the time, so
/// a test (or a simulated backend) can hold one and advance it to model a slow tick.
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    now: Arc<AtomicU64>,
    /// Wall-clock time at monotonic zero.
    epoch_ns: i128,
}

impl ManualClock {
    /// Starts at monotonic 0, with the wall clock at `epoch_ns` (ns since the Unix epoch).
    pub fn new(epoch_ns: i128) -> Self {
        Self {
            now: Arc::new(AtomicU64::new(0)),
            epoch_ns,
        }
    }

    /// Moves time forward by `ns`.
    pub fn advance(&self, ns: u64) {
        self.now.fetch_add(ns, Ordering::Relaxed);
    }
}

impl Clock for ManualClock {
    fn now_ns(&self) -> u64 {
        self.now.load(Ordering::Relaxed)
    }

    fn sleep_until(&mut self, deadline_ns: u64) {
        self.now.fetch_max(deadline_ns, Ordering::Relaxed);
    }

    fn realtime_ns(&self) -> i128 {
        self.epoch_ns + self.now_ns() as i128
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_jumps_to_deadlines_and_never_back() {
        let mut c = ManualClock::new(5_000);
        c.sleep_until(1_000);
        assert_eq!(c.now_ns(), 1_000);
        c.sleep_until(500);
        assert_eq!(c.now_ns(), 1_000);
        c.clone().advance(250);
        assert_eq!(c.now_ns(), 1_250);
        assert_eq!(c.realtime_ns(), 6_250);
    }

    #[test]
    fn monotonic_clock_sleeps_past_an_absolute_deadline() {
        let mut c = MonotonicClock;
        let t0 = c.now_ns();
        c.sleep_until(t0 + 1_000_000);
        assert!(c.now_ns() >= t0 + 1_000_000);
        assert!(c.realtime_ns() > 0);
    }
}
