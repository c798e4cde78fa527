//! Serial lines: a device opened by path (or a pseudo-terminal, or memory in tests), for the
//! serial families and SLCAN adapters. Ports are opened non-blocking (mio-serial's
//! `SerialStream`, configured with tokio-serial's builder; no async runtime runs on the loop
//! thread): a write that does not fit is a fault, never a wait.

use std::io::{self, Read, Write};
use std::path::Path;

use super::io_fault;
use crate::backend::{BackendError, FaultKind};

/// A byte stream to a serial device (or a pseudo-terminal, or memory in tests).
pub trait Port: Read + Write + Send {
    /// Opens the device again after it disappeared (e.g. a USB adapter unplugged and back at the
    /// same path). Only called on enable after a lost device, never while streaming.
    fn reopen(&mut self) -> io::Result<()> {
        Err(io::Error::from_raw_os_error(libc::ENODEV))
    }
}

/// A serial device opened by path, so it can be opened again.
pub struct SerialDevice {
    stream: mio_serial::SerialStream,
    path: std::path::PathBuf,
    baud: u32,
}

impl SerialDevice {
    pub fn open(path: &Path, baud: u32) -> io::Result<Self> {
        Ok(Self {
            stream: open_port(path, baud)?,
            path: path.to_path_buf(),
            baud,
        })
    }
}

impl Read for SerialDevice {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.stream.read(buf)
    }
}

impl Write for SerialDevice {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.stream.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.stream.flush()
    }
}

impl Port for SerialDevice {
    fn reopen(&mut self) -> io::Result<()> {
        // Opening builds a path string: an allocation, taken only on this recovery path.
        self.stream = open_port(&self.path, self.baud)?;
        Ok(())
    }
}

impl Port for mio_serial::SerialStream {}
impl Port for std::fs::File {}

/// Opens `path` at `baud`, 8N1, no flow control, non-blocking.
pub fn open_port(path: &Path, baud: u32) -> io::Result<mio_serial::SerialStream> {
    let builder = tokio_serial::new(path.to_string_lossy(), baud)
        .data_bits(tokio_serial::DataBits::Eight)
        .parity(tokio_serial::Parity::None)
        .stop_bits(tokio_serial::StopBits::One)
        .flow_control(tokio_serial::FlowControl::None);
    mio_serial::SerialStream::open(&builder).map_err(io::Error::from)
}

/// Writes what the port takes now: `Ok(n)` bytes, 0 when its queue is full.
pub fn write_some(port: &mut dyn Port, bytes: &[u8]) -> Result<usize, BackendError> {
    loop {
        return match port.write(bytes) {
            Ok(n) => Ok(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => Err(io_fault(&e)),
        };
    }
}

/// Whole packets or nothing on a byte stream. A write the port takes only in part leaves its
/// unsent end here, and that end goes out before any new bytes: a packet is never cut short on
/// the wire, where a servo or adapter would misread the next one. Sized at construction for the
/// longest write, so nothing allocates afterwards.
pub struct Tail {
    buf: Vec<u8>,
    len: usize,
    /// The last `send` began its bytes and left their end here: they go out whole.
    cut: bool,
}

impl Tail {
    pub fn with_capacity(longest_write: usize) -> Self {
        Self {
            buf: vec![0; longest_write],
            len: 0,
            cut: false,
        }
    }

    /// After a `send` that returned `Err`: whether its bytes began going out, so they will all
    /// reach the other end (before anything sent later).
    pub fn cut(&self) -> bool {
        self.cut
    }

    fn queue_full(&self) -> BackendError {
        BackendError {
            kind: FaultKind::QueueFull,
            dof: None,
            code: self.len as u32,
        }
    }

    /// Finishes the pending tail; `Err(QueueFull)` while some of it is still unsent.
    pub fn flush(&mut self, port: &mut dyn Port) -> Result<(), BackendError> {
        if self.len == 0 {
            return Ok(());
        }
        let pending = self.buf.get(..self.len).unwrap_or_default();
        let n = write_some(port, pending)?;
        self.buf.copy_within(n..self.len, 0);
        self.len -= n;
        if self.len == 0 {
            Ok(())
        } else {
            Err(self.queue_full())
        }
    }

    /// Sends `bytes` after the pending tail. `Err(QueueFull)` when `bytes` did not all go out now
    /// (none of them if the old tail is still pending, else the rest waits here).
    pub fn send(&mut self, port: &mut dyn Port, bytes: &[u8]) -> Result<(), BackendError> {
        self.cut = false;
        self.flush(port)?;
        let n = write_some(port, bytes)?;
        let rest = bytes.get(n..).unwrap_or_default();
        if rest.is_empty() {
            return Ok(());
        }
        if n == 0 {
            // Nothing of it went out: dropped whole, never sent late.
            return Err(self.queue_full());
        }
        match self.buf.get_mut(..rest.len()) {
            Some(slot) => {
                slot.copy_from_slice(rest);
                self.len = rest.len();
                self.cut = true;
                Err(self.queue_full())
            }
            // Longer than any write this port was sized for: cannot happen, refused loudly.
            None => Err(BackendError {
                kind: FaultKind::Protocol,
                dof: None,
                code: rest.len() as u32,
            }),
        }
    }

    /// Forgets the unsent end (the device was reopened: it belongs to no packet there).
    pub fn clear(&mut self) {
        self.len = 0;
    }
}

/// Reads what is available into `buf`: `Ok(0)` when nothing is waiting; end of file is a lost device.
pub fn read_some(port: &mut dyn Port, buf: &mut [u8]) -> Result<usize, BackendError> {
    loop {
        return match port.read(buf) {
            Ok(0) if !buf.is_empty() => Err(BackendError {
                kind: FaultKind::DeviceLost,
                dof: None,
                code: 0,
            }),
            Ok(n) => Ok(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => Err(io_fault(&e)),
        };
    }
}
