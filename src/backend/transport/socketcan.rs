//! SocketCAN: a raw CAN socket on a Linux CAN interface (a controller, vcan, slcan0), classic
//! (`CanSocket`) or CAN-FD (`CanFdSocket`, which carries classic frames too; the interface's mtu
//! must be 72).

use std::io;

use socketcan::{EmbeddedFrame, ExtendedId, Frame, Id, Socket, SocketOptions, StandardId};

use super::{FrameIo, io_fault};
use crate::backend::frame::CanFrame;
use crate::backend::{BackendError, FaultKind};

enum Raw {
    Classic(socketcan::CanSocket),
    Fd(socketcan::CanFdSocket),
}

/// A SocketCAN raw socket in non-blocking mode, reporting error frames (bus-off, controller
/// problems) as [`FaultKind::BusOff`].
pub struct SocketCanIo {
    socket: Raw,
    interface: String,
    fd: bool,
}

impl SocketCanIo {
    /// `fd`: a CAN-FD socket (needs an FD interface to send FD frames).
    pub fn open(interface: &str, fd: bool) -> io::Result<Self> {
        Ok(Self {
            socket: Self::socket(interface, fd)?,
            interface: interface.to_string(),
            fd,
        })
    }

    fn socket(interface: &str, fd: bool) -> io::Result<Raw> {
        Ok(if fd {
            let socket = socketcan::CanFdSocket::open(interface)?;
            socket.set_nonblocking(true)?;
            socket.set_error_filter_accept_all()?;
            Raw::Fd(socket)
        } else {
            let socket = socketcan::CanSocket::open(interface)?;
            socket.set_nonblocking(true)?;
            socket.set_error_filter_accept_all()?;
            Raw::Classic(socket)
        })
    }
}

fn id_of(frame: &CanFrame) -> Option<Id> {
    if frame.extended {
        ExtendedId::new(frame.id).map(Id::Extended)
    } else {
        u16::try_from(frame.id)
            .ok()
            .and_then(StandardId::new)
            .map(Id::Standard)
    }
}

/// A classic data frame as motiond's frame.
fn classic(d: &socketcan::CanDataFrame) -> CanFrame {
    if d.is_extended() {
        CanFrame::new_extended(d.raw_id(), d.data())
    } else {
        CanFrame::new(d.raw_id(), d.data())
    }
}

impl FrameIo for SocketCanIo {
    fn send(&mut self, frame: &CanFrame) -> Result<(), BackendError> {
        let protocol = BackendError::new(FaultKind::Protocol);
        let id = id_of(frame).ok_or(protocol)?;
        let sent = match (&self.socket, frame.fd) {
            (Raw::Fd(s), true) => {
                let flags = if frame.brs {
                    socketcan::id::FdFlags::BRS
                } else {
                    socketcan::id::FdFlags::empty()
                };
                let f =
                    socketcan::CanFdFrame::with_flags(id, frame.data(), flags).ok_or(protocol)?;
                s.write_frame(&f)
            }
            (Raw::Fd(s), false) => {
                let f = socketcan::CanFrame::new(id, frame.data()).ok_or(protocol)?;
                s.write_frame(&f)
            }
            (Raw::Classic(s), false) => {
                let f = socketcan::CanFrame::new(id, frame.data()).ok_or(protocol)?;
                s.write_frame(&f)
            }
            // A classic socket cannot carry it (validation opens an FD socket for FD drives).
            (Raw::Classic(_), true) => return Err(protocol),
        };
        sent.map_err(|e| io_fault(&e))
    }

    fn recv(&mut self) -> Result<Option<CanFrame>, BackendError> {
        loop {
            let read = match &self.socket {
                Raw::Classic(s) => s.read_frame().map(|f| match f {
                    socketcan::CanFrame::Data(d) => socketcan::CanAnyFrame::Normal(d),
                    socketcan::CanFrame::Remote(r) => socketcan::CanAnyFrame::Remote(r),
                    socketcan::CanFrame::Error(e) => socketcan::CanAnyFrame::Error(e),
                }),
                Raw::Fd(s) => s.read_frame(),
            };
            return match read {
                Ok(socketcan::CanAnyFrame::Normal(d)) => Ok(Some(classic(&d))),
                Ok(socketcan::CanAnyFrame::Fd(f)) => {
                    let mut frame = CanFrame::new_fd(f.raw_id(), f.is_extended(), f.data());
                    frame.brs = f.is_brs();
                    Ok(Some(frame))
                }
                Ok(socketcan::CanAnyFrame::Remote(_)) => continue,
                Ok(socketcan::CanAnyFrame::Error(e)) => Err(BackendError {
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
        self.socket = Self::socket(&self.interface, self.fd).map_err(|e| BackendError {
            kind: FaultKind::DeviceLost,
            dof: None,
            code: e.raw_os_error().unwrap_or(0) as u32,
        })?;
        Ok(())
    }
}
