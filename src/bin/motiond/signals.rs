//! The signals `serve` and `play` act on, delivered on channels by one thread.
//!
//! signal-hook rather than ctrlc: ctrlc allows one handler per process and runs it for SIGINT and
//! SIGTERM alike (with its `termination` feature, SIGHUP too), so `serve` could not tell a reload
//! from a stop; signal-hook's iterator names each signal as it arrives, and counts every one, so
//! the second-signal rule (the first SIGINT/SIGTERM a controlled stop, the second a quick stop)
//! and SIGHUP's reload are read in one place.

use anyhow::Context;
use crossbeam::channel::{self, Receiver};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

/// What SIGHUP means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hangup {
    /// Reload (the daemon's library): arrives on [`Signals::reloads`].
    Reload,
    /// Stop, as SIGINT and SIGTERM do (a one-shot play whose terminal went away).
    Stop,
}

pub struct Signals {
    /// One message per stop signal (SIGINT, SIGTERM; SIGHUP with [`Hangup::Stop`]).
    pub stops: Receiver<()>,
    /// One pending SIGHUP with [`Hangup::Reload`]: a reload reads the folder as it is when it
    /// runs, so more would add nothing.
    pub reloads: Receiver<()>,
}

/// Installs the handlers and starts the thread that forwards them.
pub fn install(hangup: Hangup) -> anyhow::Result<Signals> {
    // A stop beyond the second changes nothing; a few are kept so none is lost in between.
    let (stop_tx, stops) = channel::bounded(4);
    let (reload_tx, reloads) = channel::bounded(1);
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])
        .context("installing the signal handlers")?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for signal in signals.forever() {
                let _ = match signal {
                    SIGHUP if hangup == Hangup::Reload => reload_tx.try_send(()),
                    _ => stop_tx.try_send(()),
                };
            }
        })
        .context("starting the signal thread")?;
    Ok(Signals { stops, reloads })
}
