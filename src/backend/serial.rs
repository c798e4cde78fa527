//! Serial drives: DYNAMIXEL Protocol 2.0 servos, and SLCAN adapters that carry the CAN protocols
//! over a serial line. Ports are opened non-blocking (mio-serial's `SerialStream`, configured with
//! tokio-serial's builder; no async runtime runs on the loop thread): a write that does not fit is
//! a fault, never a wait.

use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use crate::backend::can::{FrameIo, io_fault};
use crate::backend::proto::Units;
use crate::backend::proto::{CanFrame, dynamixel as dxl, slcan};
use crate::backend::status::{BusStatus, LinkState, LinkStatus};
use crate::backend::{BackendError, FaultKind, Feedback, Readiness};
use crate::config::bus::BusJoint;
use crate::trajectory::Setpoint;

use super::buses::Mode;

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
fn write_some(port: &mut dyn Port, bytes: &[u8]) -> Result<usize, BackendError> {
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
    fn flush(&mut self, port: &mut dyn Port) -> Result<(), BackendError> {
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
fn read_some(port: &mut dyn Port, buf: &mut [u8]) -> Result<usize, BackendError> {
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
    /// Status flags the adapter reported that are not faults (error warning, arbitration lost),
    /// or'ed together since the bus last took them.
    warnings: u8,
}

impl SlcanIo {
    /// Sets the bitrate and opens the channel. Replies are not required (firmwares differ); what
    /// arrives within a short settling time is discarded.
    pub fn open(mut port: Box<dyn Port>, bitrate: u32) -> io::Result<Self> {
        let rate = slcan::bitrate_command(bitrate).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("no SLCAN command for {bitrate} bit/s"),
            )
        })?;
        for cmd in [slcan::CLOSE, rate, slcan::OPEN] {
            port.write_all(cmd)?;
        }
        let mut io = Self::new(port);
        io.rate = rate;
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
        for cmd in [slcan::CLOSE, self.rate, slcan::OPEN] {
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

/// Goal Velocity unit of X-series servos: 0.229 rev/min, for 4096 counts per revolution.
const VELOCITY_UNIT_COUNTS_PER_S: f64 = 0.229 * 4096.0 / 60.0;
/// Ticks between resends of an unanswered Sync Read during enable.
const RESEND_TICKS: u32 = 50;
/// How long a rebooted servo is given before it is talked to again.
const REBOOT_MS: f64 = 200.0;
/// Reads per `drain`, so a babbling line cannot hold the loop (each read fills at most the
/// receive buffer).
const MAX_READS_PER_DRAIN: usize = 8;

/// One servo as the bus is built with it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ServoSpec {
    /// Index in the JointSet.
    pub index: usize,
    pub id: u8,
    pub units: Units,
    /// Operating Mode (address 11): velocity, position, or extended position for a joint whose
    /// range does not fit one turn.
    pub operating_mode: u8,
}

impl ServoSpec {
    pub fn new(index: usize, mode: Mode, joint: &BusJoint, drive_range: (f64, f64)) -> Self {
        let operating_mode = match mode {
            Mode::Velocity => dxl::OPERATING_MODE_VELOCITY,
            _ if drive_range.0 >= 0.0 && drive_range.1 <= 4095.0 => dxl::OPERATING_MODE_POSITION,
            _ => dxl::OPERATING_MODE_EXTENDED_POSITION,
        };
        Self {
            index,
            id: joint.id,
            units: joint.units,
            operating_mode,
        }
    }
}

/// How a DYNAMIXEL bus runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DynamixelSettings {
    /// Read Present Position every tick.
    pub sync_read: bool,
    /// Ticks without a position before a servo faults.
    pub timeout_ticks: u32,
    pub rate_hz: f64,
    /// The servos' Bus Watchdog in ms (0: off).
    pub watchdog_ms: f64,
}

struct Servo {
    index: usize,
    id: u8,
    units: Units,
    velocity: bool,
    operating_mode: u8,
    /// Operating Mode as read from the servo (EEPROM: written only when it differs).
    mode_read: Option<u8>,
    /// Present Position in counts.
    measured: Option<f64>,
    fresh: bool,
    age: u32,
    /// Last goal in counts.
    last: f64,
    hold: Option<f64>,
    /// It reported a hardware error alert: the next enable reboots it first.
    alert: bool,
    status: Arc<LinkStatus>,
}

impl Servo {
    fn hold_target(&mut self) -> f64 {
        *self.hold.get_or_insert(self.measured.unwrap_or(self.last))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Reboot servos in alert, torque off, Bus Watchdog cleared, Operating Mode read.
    Start,
    /// Rebooted servos come back (ticks left).
    Rebooting(u32),
    /// Waiting for every servo's Operating Mode; then written where it differs.
    Mode,
    /// Waiting for every servo's position.
    Measure,
    Ready,
}

fn counts(x: f64) -> u32 {
    if x.is_nan() {
        return 0;
    }
    (x.round().clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i32) as u32
}

/// The servos on one DYNAMIXEL bus. Each tick is one write of up to three packets (Sync Write of
/// Goal Position, of Goal Velocity, Sync Read of Present Position) into a buffer sized at start.
pub struct DynamixelBus {
    port: Box<dyn Port>,
    servos: Vec<Servo>,
    ids: Vec<u8>,
    settings: DynamixelSettings,
    phase: Phase,
    wait: u32,
    tx: Vec<u8>,
    tail: Tail,
    rx: Vec<u8>,
    rx_len: usize,
    params: [u8; 64],
    /// The device disappeared: the next enable reopens it.
    lost: bool,
    /// This enable sequence rebooted servos already (a servo still in alert then faults).
    rebooted: bool,
    /// Teach-in: torque off, positions still read every tick.
    compliant: bool,
    /// The last tick's packets reached the servos (see [`DynamixelBus::taken`]).
    took: bool,
    status: Arc<BusStatus>,
}

impl DynamixelBus {
    pub(crate) fn new(
        port: Box<dyn Port>,
        specs: &[ServoSpec],
        settings: DynamixelSettings,
        status: Arc<BusStatus>,
    ) -> Self {
        let servos: Vec<Servo> = specs
            .iter()
            .enumerate()
            .map(|(k, spec)| Servo {
                index: spec.index,
                id: spec.id,
                units: spec.units,
                velocity: spec.operating_mode == dxl::OPERATING_MODE_VELOCITY,
                operating_mode: spec.operating_mode,
                mode_read: None,
                measured: None,
                fresh: false,
                age: 0,
                last: spec.units.offset,
                hold: None,
                alert: false,
                status: status
                    .drives
                    .get(k)
                    .map(|d| d.link.clone())
                    .unwrap_or_default(),
            })
            .collect();
        let n = servos.len();
        // Worst case every byte is stuffed: twice the packet sizes, three packets a tick.
        let tx = vec![0u8; 2 * (3 * dxl::sync_write_len(n, 4) + 64)];
        Self {
            tail: Tail::with_capacity(tx.len()),
            ids: servos.iter().map(|s| s.id).collect(),
            port,
            servos,
            settings,
            phase: Phase::Start,
            wait: 0,
            tx,
            rx: vec![0u8; 4096],
            rx_len: 0,
            params: [0; 64],
            lost: false,
            rebooted: false,
            compliant: false,
            took: false,
            status,
        }
    }

    pub fn status(&self) -> Arc<BusStatus> {
        self.status.clone()
    }

    /// Appends a Sync Write of `data_len` bytes at `addr` for the servos `pick` selects, with the
    /// value `value` gives; returns the new end of the tick buffer.
    fn sync_write(
        &mut self,
        at: usize,
        addr: u16,
        data_len: u16,
        pick: impl Fn(&Servo) -> bool,
        mut value: impl FnMut(&mut Servo) -> u32,
    ) -> Result<usize, BackendError> {
        if !self.servos.iter().any(&pick) {
            return Ok(at);
        }
        let buf = self
            .tx
            .get_mut(at..)
            .ok_or(BackendError::new(FaultKind::Protocol))?;
        let mut p = dxl::sync_write_begin(buf, addr, data_len);
        for s in self.servos.iter_mut().filter(|s| pick(s)) {
            p.push(s.id);
            let bytes = value(s).to_le_bytes();
            for b in bytes.iter().take(usize::from(data_len)) {
                p.push(*b);
            }
        }
        let n = p
            .finish()
            .ok_or(BackendError::new(FaultKind::Protocol))?
            .len();
        Ok(at + n)
    }

    fn sync_read_packet(&mut self, at: usize, addr: u16, len: u16) -> Result<usize, BackendError> {
        let buf = self
            .tx
            .get_mut(at..)
            .ok_or(BackendError::new(FaultKind::Protocol))?;
        let n = dxl::sync_read(buf, addr, len, &self.ids)
            .ok_or(BackendError::new(FaultKind::Protocol))?
            .len();
        Ok(at + n)
    }

    fn read_positions(&mut self, at: usize) -> Result<usize, BackendError> {
        self.sync_read_packet(at, dxl::ADDR_PRESENT_POSITION, 4)
    }

    fn flush(&mut self, len: usize) -> Result<(), BackendError> {
        let bytes = self
            .tx
            .get(..len)
            .ok_or(BackendError::new(FaultKind::Protocol))?;
        self.tail.send(self.port.as_mut(), bytes)?;
        self.status.sent.fetch_add(1, Relaxed);
        Ok(())
    }

    /// Reads and applies the complete status packets waiting on the port (a bounded number of
    /// reads per call).
    fn drain(&mut self) -> Result<(), BackendError> {
        for _ in 0..MAX_READS_PER_DRAIN {
            let free = self.rx.get_mut(self.rx_len..).unwrap_or_default();
            if free.is_empty() {
                // A buffer full of bytes that never parse: drop them and resynchronise.
                self.rx_len = 0;
                continue;
            }
            let n = read_some(self.port.as_mut(), free)?;
            if n == 0 {
                break;
            }
            self.rx_len += n;
            self.parse()?;
        }
        Ok(())
    }

    /// Drops whatever arrived before this enable (replies and alerts from before a fault).
    fn discard_input(&mut self) -> Result<(), BackendError> {
        self.rx_len = 0;
        for _ in 0..MAX_READS_PER_DRAIN {
            if read_some(self.port.as_mut(), &mut self.rx)? == 0 {
                break;
            }
        }
        self.rx_len = 0;
        Ok(())
    }

    fn parse(&mut self) -> Result<(), BackendError> {
        let mut start = 0;
        let mut result = Ok(());
        while result.is_ok() {
            let input = self.rx.get(start..self.rx_len).unwrap_or_default();
            match dxl::parse(input, &mut self.params) {
                dxl::Parse::Packet { consumed, packet } => {
                    start += consumed;
                    result = self.apply(packet);
                }
                dxl::Parse::Skip { consumed, .. } => start += consumed,
                dxl::Parse::Incomplete { consumed } => {
                    start += consumed;
                    break;
                }
            }
        }
        self.rx.copy_within(start..self.rx_len, 0);
        self.rx_len -= start;
        result
    }

    fn apply(&mut self, packet: dxl::Parsed) -> Result<(), BackendError> {
        // Instruction packets echoed by half-duplex adapters are not replies.
        if packet.instruction != dxl::INST_STATUS {
            return Ok(());
        }
        self.status.received.fetch_add(1, Relaxed);
        let rebooting = matches!(self.phase, Phase::Rebooting(_));
        let Some(servo) = self.servos.iter_mut().find(|s| s.id == packet.id) else {
            self.status.ignored.fetch_add(1, Relaxed);
            return Ok(());
        };
        let params = self.params.get(..packet.params).unwrap_or_default();
        let Some((&error, data)) = params.split_first() else {
            return Ok(());
        };
        if error & dxl::ERR_ALERT != 0 {
            servo.alert = true;
            // Found while enabling (e.g. by a daemon started after the fault): the enable
            // sequence reboots it once instead of failing.
            if !rebooting && self.phase != Phase::Ready && !self.rebooted {
                self.phase = Phase::Start;
                return Ok(());
            }
        }
        // A reboot's own reply may still carry the alert it clears.
        if error != 0 && !rebooting {
            let kind = if error & dxl::ERR_ALERT != 0 {
                FaultKind::DriveFault
            } else {
                FaultKind::Protocol
            };
            return Err(BackendError {
                kind,
                dof: u16::try_from(servo.index).ok(),
                code: u32::from(error),
            });
        }
        match *data {
            [mode] if self.phase == Phase::Mode => servo.mode_read = Some(mode),
            [a, b, c, d] => {
                servo.measured = Some(f64::from(i32::from_le_bytes([a, b, c, d])));
                servo.fresh = true;
            }
            _ => {}
        }
        Ok(())
    }

    fn failed(&mut self, e: BackendError) -> BackendError {
        if self.phase == Phase::Ready {
            // Hold what was commanded: the measured position would be a step back.
            for s in &mut self.servos {
                s.hold.get_or_insert(s.last);
            }
        }
        self.lost |= e.kind == FaultKind::DeviceLost;
        self.rebooted = false;
        // Compliant servos stay so until the loop asks them to stiffen, where they are.
        self.phase = Phase::Start;
        for s in &self.servos {
            s.status.set_state(LinkState::Fault);
        }
        match e
            .dof
            .and_then(|dof| self.servos.iter().find(|s| s.index == usize::from(dof)))
        {
            Some(s) => s.status.fault(&e),
            None => self.status.link.fault(&e),
        }
        e
    }

    /// Reopens a device that disappeared (it may be back at the same path).
    fn reopen(&mut self) -> Result<(), BackendError> {
        self.port.reopen().map_err(|e| {
            let mut fault = io_fault(&e);
            fault.kind = FaultKind::DeviceLost;
            fault
        })?;
        self.tail.clear();
        self.lost = false;
        self.status.link.reopened();
        Ok(())
    }

    fn set_state(&self, state: LinkState) {
        self.status.link.set_state(state);
        for s in &self.servos {
            s.status.set_state(state);
        }
    }

    fn try_enable(&mut self) -> Result<Readiness, BackendError> {
        if self.lost {
            self.reopen()?;
        }
        if self.phase == Phase::Start {
            self.discard_input()?;
        } else {
            self.drain()?;
        }
        let resend = self.wait.is_multiple_of(RESEND_TICKS);
        self.wait = self.wait.saturating_add(1);
        match self.phase {
            Phase::Ready => {
                // Keep the positions coming until the loop takes over.
                if self.settings.sync_read {
                    let at = self.read_positions(0)?;
                    self.flush(at)?;
                }
                return Ok(Readiness::Ready);
            }
            Phase::Start => {
                self.set_state(LinkState::Enabling);
                for s in &mut self.servos {
                    s.measured = None;
                    s.mode_read = None;
                    s.fresh = false;
                }
                // A servo in hardware error refuses torque until it is rebooted.
                let mut at = 0;
                for k in 0..self.servos.len() {
                    let Some(s) = self.servos.get_mut(k) else {
                        continue;
                    };
                    if !s.alert {
                        continue;
                    }
                    s.alert = false;
                    let id = s.id;
                    let buf = self
                        .tx
                        .get_mut(at..)
                        .ok_or(BackendError::new(FaultKind::Protocol))?;
                    at += dxl::reboot(buf, id)
                        .ok_or(BackendError::new(FaultKind::Protocol))?
                        .len();
                }
                if at > 0 {
                    self.rebooted = true;
                    self.flush(at)?;
                    let ticks = (REBOOT_MS * self.settings.rate_hz / 1000.0).ceil() as u32;
                    self.phase = Phase::Rebooting(ticks.max(1));
                    return Ok(Readiness::Pending);
                }
                self.begin_mode()?;
            }
            Phase::Rebooting(left) => {
                if left > 1 {
                    self.phase = Phase::Rebooting(left - 1);
                } else {
                    self.discard_input()?;
                    self.begin_mode()?;
                }
            }
            Phase::Mode => {
                if self.servos.iter().all(|s| s.mode_read.is_some()) {
                    // Operating Mode lives in EEPROM: written only where it differs.
                    let differs = |s: &Servo| s.mode_read != Some(s.operating_mode);
                    let at = self.sync_write(0, dxl::ADDR_OPERATING_MODE, 1, differs, |s| {
                        u32::from(s.operating_mode)
                    })?;
                    let at = self.read_positions(at)?;
                    self.flush(at)?;
                    self.phase = Phase::Measure;
                    self.wait = 1;
                } else if resend {
                    let at = self.sync_read_packet(0, dxl::ADDR_OPERATING_MODE, 1)?;
                    self.flush(at)?;
                }
            }
            Phase::Measure => {
                if self.servos.iter().all(|s| s.measured.is_some()) {
                    return self.power_on();
                }
                if resend {
                    let at = self.read_positions(0)?;
                    self.flush(at)?;
                }
            }
        }
        Ok(Readiness::Pending)
    }

    /// Torque off and the Bus Watchdog cleared (a tripped one refuses goals), then the Operating
    /// Modes are read.
    fn begin_mode(&mut self) -> Result<(), BackendError> {
        let at = self.sync_write(0, dxl::ADDR_TORQUE_ENABLE, 1, |_| true, |_| 0)?;
        let at = self.sync_write(at, dxl::ADDR_BUS_WATCHDOG, 1, |_| true, |_| 0)?;
        let at = self.sync_read_packet(at, dxl::ADDR_OPERATING_MODE, 1)?;
        self.flush(at)?;
        self.phase = Phase::Mode;
        self.wait = 1;
        Ok(())
    }

    /// Goal = present position before torque comes on, so nothing jumps; then the Bus Watchdog
    /// is armed (it only runs with torque on).
    fn power_on(&mut self) -> Result<Readiness, BackendError> {
        let at = self.sync_write(
            0,
            dxl::ADDR_GOAL_POSITION,
            4,
            |s| !s.velocity,
            |s| counts(s.measured.unwrap_or(s.last)),
        )?;
        let at = self.sync_write(at, dxl::ADDR_GOAL_VELOCITY, 4, |s| s.velocity, |_| 0)?;
        let at = self.sync_write(at, dxl::ADDR_TORQUE_ENABLE, 1, |_| true, |_| 1)?;
        let units = dxl::bus_watchdog_units(self.settings.watchdog_ms);
        let at = if units > 0 {
            self.sync_write(
                at,
                dxl::ADDR_BUS_WATCHDOG,
                1,
                |_| true,
                |_| u32::from(units),
            )?
        } else {
            at
        };
        let at = if self.settings.sync_read {
            self.read_positions(at)?
        } else {
            at
        };
        self.flush(at)?;
        for s in &mut self.servos {
            let m = s.measured.unwrap_or(s.last);
            s.hold = Some(m);
            s.last = m;
            s.age = 0;
        }
        self.phase = Phase::Ready;
        self.rebooted = false;
        self.set_state(LinkState::Ready);
        Ok(Readiness::Ready)
    }

    pub fn enable(&mut self) -> Result<Readiness, BackendError> {
        self.try_enable().map_err(|e| self.failed(e))
    }

    pub fn disable(&mut self) -> Result<(), BackendError> {
        self.phase = Phase::Start;
        self.compliant = false;
        self.set_state(LinkState::Disabled);
        // Watchdog off first: torque off with a running watchdog would trip it.
        let at = self.sync_write(0, dxl::ADDR_BUS_WATCHDOG, 1, |_| true, |_| 0)?;
        let at = self.sync_write(at, dxl::ADDR_TORQUE_ENABLE, 1, |_| true, |_| 0)?;
        self.flush(at)
    }

    fn send_tick(&mut self, setpoints: &[Setpoint], hold: bool) -> Result<(), BackendError> {
        if self.compliant {
            // Torque off: no goals, only the positions the hand moves the servos to, which are
            // where they would hold on a failure.
            for s in &mut self.servos {
                s.last = s.measured.unwrap_or(s.last);
            }
            let at = self.read_positions(0)?;
            return self.flush(at);
        }
        let ready = self.phase == Phase::Ready;
        // Held servos get their setpoint whatever the phase: a quick stop's ramp reaches
        // velocity servos as a ramp (at rest the velocity is 0).
        let command = |s: &mut Servo| -> Option<Setpoint> {
            let sp = setpoints.get(s.index).copied()?;
            if hold {
                let at = s.units.to_drive(sp.position);
                s.hold = Some(at);
                return Some(sp);
            }
            if !ready {
                return None;
            }
            s.hold = None;
            Some(sp)
        };
        let at = self.sync_write(
            0,
            dxl::ADDR_GOAL_POSITION,
            4,
            |s| !s.velocity,
            |s| {
                let goal = match command(s) {
                    Some(sp) => s.units.to_drive(sp.position),
                    None => s.hold_target(),
                };
                s.last = goal;
                counts(goal)
            },
        )?;
        let at = self.sync_write(
            at,
            dxl::ADDR_GOAL_VELOCITY,
            4,
            |s| s.velocity,
            |s| match command(s) {
                Some(sp) => {
                    s.last = s.units.to_drive(sp.position);
                    counts(s.units.rate_to_drive(sp.velocity) / VELOCITY_UNIT_COUNTS_PER_S)
                }
                None => 0,
            },
        )?;
        let at = if self.settings.sync_read {
            self.read_positions(at)?
        } else {
            at
        };
        self.flush(at)
    }

    pub fn write(&mut self, setpoints: &[Setpoint]) -> Result<(), BackendError> {
        let sent = self.send_tick(setpoints, false);
        self.took = sent.is_ok() || self.tail.cut();
        sent.map_err(|e| self.failed(e))
    }

    /// After a failed write or hold: marks the DOFs whose servos it reached anyway (the tick's
    /// packets went out as one write: all or none).
    pub fn taken(&self, dofs: &mut [bool]) {
        for s in &self.servos {
            if let Some(t) = dofs.get_mut(s.index) {
                *t = self.took;
            }
        }
    }

    fn try_read(&mut self, feedback: &mut [Feedback]) -> Result<(), BackendError> {
        self.drain()?;
        let ready = self.phase == Phase::Ready;
        // Without Sync Reads the servos run open loop once enabled: what is reported is the goal.
        let open_loop = ready && !self.settings.sync_read;
        for s in &mut self.servos {
            s.age = if s.fresh { 0 } else { s.age.saturating_add(1) };
            if let Some(slot) = feedback.get_mut(s.index) {
                let position = if open_loop {
                    s.last
                } else {
                    s.measured.unwrap_or(s.last)
                };
                *slot = Feedback {
                    position: s.units.to_joint(position),
                    velocity: 0.0,
                    effort: 0.0,
                    valid: s.fresh || open_loop,
                };
            }
            s.fresh = false;
            if ready && self.settings.sync_read && s.age > self.settings.timeout_ticks {
                return Err(BackendError {
                    kind: FaultKind::FeedbackMissing,
                    dof: u16::try_from(s.index).ok(),
                    code: s.age,
                });
            }
        }
        Ok(())
    }

    pub fn read(&mut self, feedback: &mut [Feedback]) -> Result<(), BackendError> {
        self.try_read(feedback).map_err(|e| self.failed(e))
    }

    /// How long a servo here may go without feedback.
    pub fn feedback_timeout(&self) -> std::time::Duration {
        Duration::from_secs_f64(f64::from(self.settings.timeout_ticks) / self.settings.rate_hz)
    }

    /// Whether the DOF at `index` (JointSet order) is driven on this bus.
    pub fn drives_dof(&self, index: usize) -> bool {
        self.servos.iter().any(|s| s.index == index)
    }

    /// Teach-in on: Bus Watchdog off (it would trip without goals), then Torque Enable 0 on
    /// every servo, whose DOFs are marked in `dofs`; only with Sync Reads (without them nothing
    /// would report where the hand put the servos, so they keep holding). Off: goal = present
    /// position, torque and watchdog on again, as at the end of the enable sequence.
    pub fn compliant(&mut self, on: bool, dofs: &mut [bool]) -> Result<Readiness, BackendError> {
        self.try_compliant(on, dofs).map_err(|e| self.failed(e))
    }

    fn try_compliant(&mut self, on: bool, dofs: &mut [bool]) -> Result<Readiness, BackendError> {
        if on && self.phase == Phase::Ready && self.settings.sync_read {
            let at = self.sync_write(0, dxl::ADDR_BUS_WATCHDOG, 1, |_| true, |_| 0)?;
            let at = self.sync_write(at, dxl::ADDR_TORQUE_ENABLE, 1, |_| true, |_| 0)?;
            let at = self.read_positions(at)?;
            self.flush(at)?;
            self.compliant = true;
            for s in &mut self.servos {
                s.hold = None;
                if let Some(c) = dofs.get_mut(s.index) {
                    *c = true;
                }
            }
        } else if !on && self.compliant {
            // Still compliant until it took (asked again after a failure).
            self.power_on()?;
            self.compliant = false;
        }
        Ok(Readiness::Ready)
    }

    /// Holds every servo at its setpoint (position, and velocity on velocity servos), whatever
    /// the phase.
    pub fn hold(&mut self, setpoints: &[Setpoint]) -> Result<(), BackendError> {
        let sent = self.send_tick(setpoints, true);
        self.took = sent.is_ok() || self.tail.cut();
        sent
    }
}
