//! SocketCAN: a raw CAN socket on a Linux CAN interface (a controller, vcan, slcan0).

use std::io;

use super::{FrameIo, io_fault};
use crate::backend::frame::CanFrame;
use crate::backend::{BackendError, FaultKind};

/// A SocketCAN raw socket in non-blocking mode, reporting error frames (bus-off, controller
/// problems) as [`FaultKind::BusOff`].
pub struct SocketCanIo {
    socket: socketcan::CanSocket,
    interface: String,
}

impl SocketCanIo {
    pub fn open(interface: &str) -> io::Result<Self> {
        Ok(Self {
            socket: Self::socket(interface)?,
            interface: interface.to_string(),
        })
    }

    fn socket(interface: &str) -> io::Result<socketcan::CanSocket> {
        use socketcan::{Socket, SocketOptions};
        let socket = socketcan::CanSocket::open(interface)?;
        socket.set_nonblocking(true)?;
        socket.set_error_filter_accept_all()?;
        Ok(socket)
    }
}

impl FrameIo for SocketCanIo {
    fn send(&mut self, frame: &CanFrame) -> Result<(), BackendError> {
        use socketcan::{EmbeddedFrame, ExtendedId, Id, Socket, StandardId};
        let id: Option<Id> = if frame.extended {
            ExtendedId::new(frame.id).map(Id::Extended)
        } else {
            u16::try_from(frame.id)
                .ok()
                .and_then(StandardId::new)
                .map(Id::Standard)
        };
        let f = id
            .and_then(|id| socketcan::CanFrame::new(id, frame.data()))
            .ok_or(BackendError::new(FaultKind::Protocol))?;
        self.socket.write_frame(&f).map_err(|e| io_fault(&e))
    }

    fn recv(&mut self) -> Result<Option<CanFrame>, BackendError> {
        use socketcan::{EmbeddedFrame, Frame, Socket};
        loop {
            return match self.socket.read_frame() {
                Ok(socketcan::CanFrame::Data(d)) => Ok(Some(if d.is_extended() {
                    CanFrame::new_extended(d.raw_id(), d.data())
                } else {
                    CanFrame::new(d.raw_id(), d.data())
                })),
                Ok(socketcan::CanFrame::Remote(_)) => continue,
                Ok(socketcan::CanFrame::Error(e)) => Err(BackendError {
                    kind: FaultKind::BusOff,
                    dof: None,
                    code: e.error_bits(),
                }),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
                Err(e) => Err(io_fault(&e)),
            };
        }
    }

    fn reopen(&mut self) -> Result<(), BackendError> {
        self.socket = Self::socket(&self.interface).map_err(|e| BackendError {
            kind: FaultKind::DeviceLost,
            dof: None,
            code: e.raw_os_error().unwrap_or(0) as u32,
        })?;
        Ok(())
    }
}
