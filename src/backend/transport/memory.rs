//! An in-memory CAN bus for tests and benchmarks.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use super::FrameIo;
use crate::backend::frame::CanFrame;
use crate::backend::{BackendError, FaultKind};

#[derive(Debug, Default)]
struct MemoryShared {
    queues: [VecDeque<CanFrame>; 2],
    closed: bool,
}

/// One end of an in-memory CAN bus (tests and benchmarks): frames sent on one end are received on
/// the other. Bounded like a real transmit queue; [`MemoryIo::close`] makes both ends report
/// [`FaultKind::DeviceLost`].
#[derive(Debug, Clone)]
pub struct MemoryIo {
    shared: Arc<Mutex<MemoryShared>>,
    side: usize,
    capacity: usize,
}

/// Two connected ends with `capacity` frames of queue in each direction.
pub fn memory_pair(capacity: usize) -> (MemoryIo, MemoryIo) {
    let shared = Arc::new(Mutex::new(MemoryShared {
        queues: [
            VecDeque::with_capacity(capacity),
            VecDeque::with_capacity(capacity),
        ],
        closed: false,
    }));
    (
        MemoryIo {
            shared: shared.clone(),
            side: 0,
            capacity,
        },
        MemoryIo {
            shared,
            side: 1,
            capacity,
        },
    )
}

impl MemoryIo {
    pub fn close(&self) {
        if let Ok(mut s) = self.shared.lock() {
            s.closed = true;
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut MemoryShared) -> T) -> Result<T, BackendError> {
        let mut s = self
            .shared
            .lock()
            .map_err(|_| BackendError::new(FaultKind::DeviceLost))?;
        if s.closed {
            return Err(BackendError::new(FaultKind::DeviceLost));
        }
        Ok(f(&mut s))
    }
}

impl FrameIo for MemoryIo {
    fn send(&mut self, frame: &CanFrame) -> Result<(), BackendError> {
        let (side, capacity) = (self.side, self.capacity);
        let queued = self.with(|s| {
            let q = &mut s.queues[side];
            if q.len() >= capacity {
                return false;
            }
            q.push_back(*frame);
            true
        })?;
        if queued {
            Ok(())
        } else {
            Err(BackendError::new(FaultKind::QueueFull))
        }
    }

    fn recv(&mut self) -> Result<Option<CanFrame>, BackendError> {
        let other = 1 - self.side;
        self.with(|s| s.queues[other].pop_front())
    }
}
