//! Transports: how frames and bytes reach the drives, whatever protocol they carry (a transport
//! is not a protocol). CAN frames go through a [`FrameIo`]: a SocketCAN socket (classic or FD),
//! an SLCAN adapter on a serial line, or an in-memory bus for tests; serial families write bytes
//! to a [`serial::Port`]. Every transport is non-blocking: a full queue is an error, never a wait.

pub mod memory;
pub mod serial;
pub mod slcan;
pub mod socketcan;

use std::io;

use crate::backend::frame::CanFrame;
use crate::backend::{BackendError, FaultKind};

/// A CAN transport: non-blocking send and receive of frames.
pub trait FrameIo: Send {
    /// Queues one frame; a full queue is [`FaultKind::QueueFull`], never a wait.
    fn send(&mut self, frame: &CanFrame) -> Result<(), BackendError>;
    /// The next received frame, `None` when nothing is waiting.
    fn recv(&mut self) -> Result<Option<CanFrame>, BackendError>;
    /// Once per control tick, after the tick's frames: transport housekeeping (SLCAN polls its
    /// adapter's status flags here).
    fn end_tick(&mut self) -> Result<(), BackendError> {
        Ok(())
    }
    /// Conditions the transport reported since the last call that are not faults, in its own
    /// code (SLCAN: the adapter's status flags); 0 when none.
    fn take_warnings(&mut self) -> u32 {
        0
    }
    /// Opens the interface or adapter again after it disappeared; only on enable after a lost
    /// device, never while streaming.
    fn reopen(&mut self) -> Result<(), BackendError> {
        Err(BackendError::new(FaultKind::DeviceLost))
    }
    /// After a `send` that returned `Err`: whether the frame began going out and its end follows
    /// (a serial line never cuts a frame short), so it reaches the bus whole after all.
    fn finishing(&self) -> bool {
        false
    }
}

/// Maps an OS error of a bus write or read to the fault it means.
pub fn io_fault(e: &io::Error) -> BackendError {
    let code = e.raw_os_error().unwrap_or(0);
    let kind = if e.kind() == io::ErrorKind::WouldBlock || code == libc::ENOBUFS {
        FaultKind::QueueFull
    } else if matches!(
        code,
        libc::EIO
            | libc::ENXIO
            | libc::ENODEV
            | libc::ENETDOWN
            | libc::EBADF
            | libc::EPIPE
            | libc::ENOTTY
    ) {
        FaultKind::DeviceLost
    } else {
        FaultKind::Write
    };
    BackendError {
        kind,
        dof: None,
        code: code as u32,
    }
}
