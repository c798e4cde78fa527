//! A simulated E-stop input: a switch another thread (a test, a rehearsal) flips.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use super::{Debounce, EStopError, EStopInput};

const RELEASED: u8 = 0;
const ASSERTED: u8 = 1;
const LOST: u8 = 2;

/// The loop's side: polls the shared switch through the same [`Debounce`] as a real line.
#[derive(Debug)]
pub struct SimInput {
    line: Arc<AtomicU8>,
    debounce: Debounce,
}

/// The operator's side: press, release, or pull the wire out.
#[derive(Debug, Clone)]
pub struct SimSwitch {
    line: Arc<AtomicU8>,
}

impl SimInput {
    /// A released switch debounced over `polls` polls, and the handle that flips it.
    pub fn new(polls: u32) -> (SimInput, SimSwitch) {
        let line = Arc::new(AtomicU8::new(RELEASED));
        (
            SimInput {
                line: line.clone(),
                debounce: Debounce::new(polls, false),
            },
            SimSwitch { line },
        )
    }
}

impl EStopInput for SimInput {
    fn asserted(&mut self) -> Result<bool, EStopError> {
        match self.line.load(Ordering::Acquire) {
            LOST => Err(EStopError::LineLost(libc::ENODEV)),
            raw => Ok(self.debounce.update(raw == ASSERTED)),
        }
    }
}

impl SimSwitch {
    pub fn set(&self, asserted: bool) {
        let raw = if asserted { ASSERTED } else { RELEASED };
        self.line.store(raw, Ordering::Release);
    }

    pub fn press(&self) {
        self.set(true);
    }

    pub fn release(&self) {
        self.set(false);
    }

    /// The line can no longer be read (what a removed GPIO chip looks like).
    pub fn lose_line(&self) {
        self.line.store(LOST, Ordering::Release);
    }
}
