//! E-stop inputs → one debounced "asserted" bit, polled once per loop tick.
//!
//! The loop holds an [`EStopInput`] and polls it every tick; while it says asserted (or cannot be
//! read) the loop stops quickly and keeps the drives in their safe state. Polling is what the
//! loop can afford: one non-blocking read, no allocation, no lock, no waiting — an interrupt or a
//! blocking read would need a thread of its own and a hand-over to the loop, which is what polling
//! a line at the control rate already is.
//!
//! Inputs: a line of a Linux GPIO character device (`gpio`, uAPI v2 through `gpiocdev`), and a
//! simulated one for tests ([`sim`]). A drive-reported E-stop (CiA 402 quick stop / STO) arrives
//! with the drives' feedback and is debounced by the loop with the same [`Debounce`].

use std::time::Duration;

pub mod gpio;
pub mod sim;

#[cfg(test)]
mod tests;

pub use gpio::{GpioInput, OpenError};
pub use sim::{SimInput, SimSwitch};

use crate::config::EStopSettings;

/// An E-stop input as the loop sees it.
pub trait EStopInput: Send {
    /// Polled once per tick: `Ok(true)` while the E-stop is asserted (after debouncing). An `Err`
    /// (the line is lost) counts as asserted. Never blocks or allocates.
    fn asserted(&mut self) -> Result<bool, EStopError>;
}

/// Why an input could not be read. `Copy` and without text, so the loop can return it without
/// allocating; [`std::fmt::Display`] is for the control side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EStopError {
    /// Reading the GPIO line failed with this errno (the chip was removed, the request revoked):
    /// treated as asserted.
    #[error("the E-stop line cannot be read ({}); treated as asserted", std::io::Error::from_raw_os_error(*.0))]
    LineLost(i32),
}

/// A level that changes only after the new value has been seen at every poll for the debounce
/// time: the first poll that sees it and `polls` more. Small, `Copy`, allocation-free.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Debounce {
    polls: u32,
    state: bool,
    /// Consecutive polls that saw the other value.
    seen: u32,
}

impl Debounce {
    /// Starts in `state`; `polls` is the debounce time in polls (0 follows the input at once).
    pub const fn new(polls: u32, state: bool) -> Debounce {
        Debounce {
            polls,
            state,
            seen: 0,
        }
    }

    /// The debounce time in polls at `rate_hz` polls a second, rounded up (so never shorter).
    pub fn polls_for(debounce: Duration, rate_hz: f64) -> u32 {
        let polls = (debounce.as_secs_f64() * rate_hz - 1e-9).ceil();
        if polls.is_finite() && polls > 0.0 {
            polls.min(f64::from(u32::MAX)) as u32
        } else {
            0
        }
    }

    /// Takes one raw reading; returns the debounced level.
    pub fn update(&mut self, raw: bool) -> bool {
        if raw == self.state {
            self.seen = 0;
        } else {
            self.seen += 1;
            if self.seen > self.polls {
                self.state = raw;
                self.seen = 0;
            }
        }
        self.state
    }

    pub fn state(&self) -> bool {
        self.state
    }
}

/// The GPIO input `settings` configure (`estop.gpio`), polled at `rate_hz`; `None` when the
/// configuration names no GPIO line (only the drives' E-stop, `estop.drive`). Opening reads the
/// line once: an E-stop pressed when the daemon starts is asserted from the first poll.
pub fn open(
    settings: &EStopSettings,
    rate_hz: f64,
) -> Result<Option<Box<dyn EStopInput>>, OpenError> {
    let Some(line) = &settings.gpio else {
        return Ok(None);
    };
    let input = GpioInput::open(line, settings.debounce, rate_hz)?;
    Ok(Some(Box::new(input)))
}
