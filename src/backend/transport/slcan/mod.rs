//! SLCAN: CAN frames as ASCII lines over a serial adapter (Lawicel protocol, CANable, candleLight
//! with slcan firmware), for hosts without a SocketCAN interface.

pub mod codec;
pub mod settings;

use std::io::{self, Write};
use std::time::{Duration, Instant};

use self::codec as slcan;
use super::FrameIo;
use super::serial::{Port, Tail, read_some};
use crate::backend::frame::CanFrame;
use crate::backend::{BackendError, FaultKind};

/// CAN frames as SLCAN lines over a serial port.
pub struct SlcanIo {
    port: Box<dyn Port>,
    tail: Tail,
    reader: slcan::LineReader,
    buf: [u8; 256],
    pos: usize,
    len: usize,
    /// BEL replies count as faults only once the adapter has delivered a frame: before that they
    /// answer the set-up commands (a close of a closed channel is refused by some firmwares).
    naks_are_faults: bool,
    /// Ticks between polls of the adapter's status flags (0: never).
    status_every: u32,
    ticks: u32,
    /// The `Sn` command the adapter was set up with (sent again after a reopen).
    rate: &'static [u8],
    /// The `Yn` command of a CAN-FD adapter, likewise.
    data_rate: Option<&'static [u8]>,
    /// Status flags the adapter reported that are not faults (error warning, arbitration lost),
    /// or'ed together since the bus last took them.
    warnings: u8,
}

impl SlcanIo {
    /// Sets the bitrate (and the CAN-FD data bitrate, `Yn`, when given) and opens the channel.
    /// Replies are not required (firmwares differ); what arrives within a short settling time is
    /// discarded.
    pub fn open(
        mut port: Box<dyn Port>,
        bitrate: u32,
        data_bitrate: Option<u32>,
    ) -> io::Result<Self> {
        let invalid = |what: String| io::Error::new(io::ErrorKind::InvalidInput, what);
        let rate = slcan::bitrate_command(bitrate)
            .ok_or_else(|| invalid(format!("no SLCAN command for {bitrate} bit/s")))?;
        let data_rate =
            match data_bitrate {
                Some(b) => Some(slcan::data_bitrate_command(b).ok_or_else(|| {
                    invalid(format!("no SLCAN command for data bitrate {b} bit/s"))
                })?),
                None => None,
            };
        for cmd in [slcan::CLOSE, rate]
            .into_iter()
            .chain(data_rate)
            .chain([slcan::OPEN])
        {
            port.write_all(cmd)?;
        }
        let mut io = Self::new(port);
        io.rate = rate;
        io.data_rate = data_rate;
        let settle = Instant::now() + Duration::from_millis(20);
        while Instant::now() < settle {
            let mut scratch = [0u8; 64];
            match io.port.read(&mut scratch) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(2))
                }
                Err(e) => return Err(e),
            }
        }
        Ok(io)
    }

    /// Wraps a port whose adapter is already open.
    pub fn new(port: Box<dyn Port>) -> Self {
        Self {
            port,
            tail: Tail::with_capacity(slcan::MAX_LINE),
            reader: slcan::LineReader::default(),
            buf: [0; 256],
            pos: 0,
            len: 0,
            naks_are_faults: false,
            status_every: 0,
            ticks: 0,
            rate: b"S8\r",
            data_rate: None,
            warnings: 0,
        }
    }

    /// Polls the adapter's status flags (`F`) every `ticks` control ticks: bus errors, error
    /// passive and overruns on the adapter are otherwise invisible to the host. Adapters that do
    /// not answer `F` are not faulted for it.
    pub fn poll_status_every(mut self, ticks: u32) -> Self {
        self.status_every = ticks;
        self
    }
}

impl FrameIo for SlcanIo {
    fn send(&mut self, frame: &CanFrame) -> Result<(), BackendError> {
        let mut line = [0u8; slcan::MAX_LINE];
        let n = slcan::encode(frame, &mut line);
        self.tail.send(self.port.as_mut(), &line[..n])
    }

    fn finishing(&self) -> bool {
        self.tail.cut()
    }

    fn reopen(&mut self) -> Result<(), BackendError> {
        self.port.reopen().map_err(|e| BackendError {
            kind: FaultKind::DeviceLost,
            dof: None,
            code: e.raw_os_error().unwrap_or(0) as u32,
        })?;
        self.tail.clear();
        self.reader = slcan::LineReader::default();
        self.len = 0;
        self.pos = 0;
        self.naks_are_faults = false;
        let commands = [slcan::CLOSE, self.rate]
            .into_iter()
            .chain(self.data_rate)
            .chain([slcan::OPEN]);
        for cmd in commands {
            self.tail.send(self.port.as_mut(), cmd)?;
        }
        Ok(())
    }

    fn end_tick(&mut self) -> Result<(), BackendError> {
        if self.status_every == 0 {
            return Ok(());
        }
        self.ticks += 1;
        if self.ticks < self.status_every {
            return Ok(());
        }
        self.ticks = 0;
        self.tail.send(self.port.as_mut(), slcan::STATUS)
    }

    fn take_warnings(&mut self) -> u32 {
        u32::from(std::mem::take(&mut self.warnings))
    }

    fn recv(&mut self) -> Result<Option<CanFrame>, BackendError> {
        loop {
            while let Some(&b) = self.buf.get(self.pos).filter(|_| self.pos < self.len) {
                self.pos += 1;
                match self.reader.push(b) {
                    Some(slcan::Event::Frame(f)) => {
                        self.naks_are_faults = true;
                        return Ok(Some(f));
                    }
                    Some(slcan::Event::Nak) if self.naks_are_faults => {
                        return Err(BackendError {
                            kind: FaultKind::Write,
                            dof: None,
                            code: u32::from(slcan::BEL),
                        });
                    }
                    Some(slcan::Event::Status(flags)) => {
                        self.warnings |= flags & !slcan::status::FAULTS;
                        if flags & slcan::status::FAULTS != 0 {
                            return Err(BackendError {
                                kind: FaultKind::BusOff,
                                dof: None,
                                code: u32::from(flags),
                            });
                        }
                    }
                    _ => {}
                }
            }
            let n = read_some(self.port.as_mut(), &mut self.buf)?;
            self.pos = 0;
            self.len = n;
            if n == 0 {
                return Ok(None);
            }
        }
    }
}
