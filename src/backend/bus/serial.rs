//! A serial servo bus: the servos of one family on a half-duplex line of their own (DYNAMIXEL,
//! Feetech), each tick one write of the family's packets into a buffer sized at start.
//!
//! The bus keeps what every servo has whatever its family (a [`Servo`]: its DOF, units, what it
//! measured, what it was last sent, where it is held, its status) and the line (a [`Line`]: the
//! port, the tick's buffer and its unsent tail, the received bytes), runs the [`Bus`] calls and
//! what follows a failure — held where it was commanded, the enable sequence started again, the
//! fault recorded, a lost device reopened at the next enable — and leaves the protocol to the
//! family's [`SerialProtocol`]: its enable sequence, each tick's packets, the status packets it
//! takes, teach-in and disable. Nothing here allocates after construction.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use crate::backend::bus::Bus;
use crate::backend::bus::settings::Units;
use crate::backend::status::{BusStatus, LinkState, LinkStatus};
use crate::backend::transport::io_fault;
use crate::backend::transport::serial::{Port, Tail, read_some};
use crate::backend::{BackendError, FaultKind, Feedback, Readiness};
use crate::trajectory::Setpoint;

/// Reads per [`Line::drain`], so a babbling line cannot hold the loop (each read fills at most
/// the receive buffer).
const MAX_READS_PER_DRAIN: usize = 8;
/// Bytes kept of what arrived and is not parsed yet.
const RX_LEN: usize = 4096;

/// One servo on the line: what the bus keeps of it, and `own`, what its family keeps.
pub struct Servo<X> {
    /// Index in the JointSet.
    pub index: usize,
    pub id: u8,
    pub units: Units,
    /// Its position in counts, as last reported.
    pub measured: Option<f64>,
    /// A position arrived since the last read.
    pub fresh: bool,
    /// Reads without a fresh position.
    pub age: u32,
    /// The last goal sent, in counts.
    pub last: f64,
    /// Where it is held after a failure (counts).
    pub hold: Option<f64>,
    pub status: Arc<LinkStatus>,
    pub own: X,
}

impl<X> Servo<X> {
    pub fn new(index: usize, id: u8, units: Units, status: Arc<LinkStatus>, own: X) -> Self {
        Self {
            index,
            id,
            units,
            measured: None,
            fresh: false,
            age: 0,
            last: units.offset,
            hold: None,
            status,
            own,
        }
    }

    /// Forgets what it reported, for an enable sequence that starts from fresh reports.
    pub fn forget(&mut self) {
        self.measured = None;
        self.fresh = false;
    }

    /// Its feedback at this read (`position` in counts), and one more read without a fresh
    /// position when none came.
    pub fn feedback(&mut self, position: f64, status: u32, error: u32, valid: bool) -> Feedback {
        self.age = if self.fresh {
            0
        } else {
            self.age.saturating_add(1)
        };
        self.fresh = false;
        Feedback {
            position: self.units.to_joint(position),
            velocity: 0.0,
            effort: 0.0,
            status,
            error,
            valid,
        }
    }

    /// A position missing longer than `timeout_ticks` reads is a fault.
    pub fn check_age(&self, timeout_ticks: u32) -> Result<(), BackendError> {
        if self.age > timeout_ticks {
            return Err(BackendError {
                kind: FaultKind::FeedbackMissing,
                dof: u16::try_from(self.index).ok(),
                code: self.age,
            });
        }
        Ok(())
    }
}

/// The servos of a bus, each from its `(index, id, units, own)`, in the order of `status`'s
/// drives (whose link status each takes).
pub fn servos<X>(
    status: &BusStatus,
    specs: impl IntoIterator<Item = (usize, u8, Units, X)>,
) -> Vec<Servo<X>> {
    specs
        .into_iter()
        .enumerate()
        .map(|(k, (index, id, units, own))| {
            let link = status.drives.get(k).map(|d| d.link.clone());
            Servo::new(index, id, units, link.unwrap_or_default(), own)
        })
        .collect()
}

/// Teach-in took on every servo: none is held any more, and each one's DOF is marked in `dofs`.
pub fn mark_compliant<X>(servos: &mut [Servo<X>], dofs: &mut [bool]) {
    for s in servos {
        s.hold = None;
        if let Some(c) = dofs.get_mut(s.index) {
            *c = true;
        }
    }
}

/// What a family's scanner made of the start of the received bytes.
pub enum Scanned {
    /// Took this many bytes (a packet applied, or bytes skipped); scan on.
    Took(usize),
    /// Took this many; what follows is a packet not complete yet.
    More(usize),
    /// Took this many, with a packet that reports a fault.
    Failed(usize, BackendError),
}

/// What a servo was asked in the enable sequence and did not answer: the code of the
/// `enable_timeout` the bus reports for it when the loop gives up
/// ([`SerialBus`]'s `enable_timed_out`), in words by [`unanswered_words`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unanswered {
    /// The Read of its calibration registers (compared with the LeRobot calibration file).
    Calibration = 1,
    /// The Read of its Operating Mode (DYNAMIXEL).
    OperatingMode = 2,
    /// The Read of its Present_Position.
    Position = 3,
}

/// An `enable_timeout`'s code ([`Unanswered`]) in words, with what to check.
pub fn unanswered_words(code: u32) -> Option<String> {
    let what = match code {
        1 => "the Read of its calibration registers",
        2 => "the Read of its Operating_Mode",
        3 => "the Read of its Present_Position",
        _ => return None,
    };
    Some(format!(
        "did not answer {what} while enabling (motiond did not turn its torque on); check \
         its power, wiring and id, and the bus's baud rate"
    ))
}

/// A status packet arrived, from a servo of this bus (`mine`) or another.
pub fn count_received(status: &BusStatus, mine: bool) {
    status.received.fetch_add(1, Relaxed);
    if !mine {
        status.ignored.fetch_add(1, Relaxed);
    }
}

/// The line: its port, the buffer each tick's packets are encoded into and what of it is not
/// sent yet, and the bytes received and not parsed yet.
pub struct Line {
    port: Box<dyn Port>,
    tx: Vec<u8>,
    tail: Tail,
    rx: Vec<u8>,
    rx_len: usize,
    /// The device disappeared: the next enable reopens it.
    lost: bool,
    status: Arc<BusStatus>,
}

impl Line {
    /// A line on `port` whose ticks are at most `tx_len` bytes.
    pub fn new(port: Box<dyn Port>, tx_len: usize, status: Arc<BusStatus>) -> Self {
        Self {
            port,
            tx: vec![0; tx_len],
            tail: Tail::with_capacity(tx_len),
            rx: vec![0; RX_LEN],
            rx_len: 0,
            lost: false,
            status,
        }
    }

    /// The tick's buffer from byte `at`.
    pub fn tx(&mut self, at: usize) -> Result<&mut [u8], BackendError> {
        self.tx
            .get_mut(at..)
            .ok_or(BackendError::new(FaultKind::Protocol))
    }

    /// Sends the tick's first `len` bytes in one write (what the port does not take now goes
    /// first next time).
    pub fn flush(&mut self, len: usize) -> Result<(), BackendError> {
        let bytes = self
            .tx
            .get(..len)
            .ok_or(BackendError::new(FaultKind::Protocol))?;
        self.tail.send(self.port.as_mut(), bytes)?;
        self.status.sent.fetch_add(1, Relaxed);
        Ok(())
    }

    /// Reads what waits on the port (a bounded number of reads) and hands the received bytes to
    /// `scan` packet by packet, with the bus's counters ([`count_received`]); stops at the first
    /// fault it reports.
    pub fn drain(
        &mut self,
        mut scan: impl FnMut(&[u8], &BusStatus) -> Scanned,
    ) -> Result<(), BackendError> {
        for _ in 0..MAX_READS_PER_DRAIN {
            if self.rx_len == self.rx.len() {
                // A buffer full of bytes that never parse: drop them and resynchronise.
                self.rx_len = 0;
            }
            let free = self.rx.get_mut(self.rx_len..).unwrap_or_default();
            let n = read_some(self.port.as_mut(), free)?;
            if n == 0 {
                break;
            }
            self.rx_len += n;
            self.parse(&mut scan)?;
        }
        Ok(())
    }

    fn parse(
        &mut self,
        scan: &mut impl FnMut(&[u8], &BusStatus) -> Scanned,
    ) -> Result<(), BackendError> {
        let mut start = 0;
        let mut result = Ok(());
        while start < self.rx_len {
            let input = self.rx.get(start..self.rx_len).unwrap_or_default();
            match scan(input, &self.status) {
                Scanned::Took(0) => break,
                Scanned::Took(n) => start += n,
                Scanned::More(n) => {
                    start += n;
                    break;
                }
                Scanned::Failed(n, e) => {
                    start += n;
                    result = Err(e);
                    break;
                }
            }
        }
        let start = start.min(self.rx_len);
        self.rx.copy_within(start..self.rx_len, 0);
        self.rx_len -= start;
        result
    }

    /// Drops whatever arrived before this enable (replies from before a fault).
    pub fn discard_input(&mut self) -> Result<(), BackendError> {
        self.rx_len = 0;
        for _ in 0..MAX_READS_PER_DRAIN {
            if read_some(self.port.as_mut(), &mut self.rx)? == 0 {
                break;
            }
        }
        Ok(())
    }

    /// The state of the line and of every servo on it.
    pub fn set_state<X>(&self, servos: &[Servo<X>], state: LinkState) {
        self.status.link.set_state(state);
        for s in servos {
            s.status.set_state(state);
        }
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
}

/// A serial servo family's protocol on its line. Every method runs on the real-time thread
/// (except construction): encode into the line's buffer, never allocate or block.
pub trait SerialProtocol: Send {
    /// What it keeps per servo.
    type Own: Send;
    /// One tick of the enable sequence (the line reopened already if it was lost; the states
    /// set on the way, [`Line::set_state`]); `Ready` once every servo follows goals, targeting
    /// its measured position.
    fn enable(
        &mut self,
        line: &mut Line,
        servos: &mut [Servo<Self::Own>],
    ) -> Result<Readiness, BackendError>;
    /// Whether the enable sequence is through.
    fn ready(&self) -> bool;
    /// Whether `servo` holds the goal it was last sent ([`Servo::last`]): torque on at a goal
    /// position (enabled, not in teach-in), not a velocity servo.
    fn holds(&self, servo: &Servo<Self::Own>) -> bool;
    /// After a failure: the enable sequence starts again (teach-in kept: compliant servos stay
    /// so until the loop asks them to stiffen, where they are).
    fn restart(&mut self);
    /// What servo `k` of `servo` was asked in this enable sequence and has not answered yet
    /// (`None`: it answered, or the sequence is not waiting for it).
    fn unanswered(&self, k: usize, servo: &Servo<Self::Own>) -> Option<Unanswered>;
    /// Torque off on every servo, teach-in ended; the enable sequence starts again.
    fn disable(
        &mut self,
        line: &mut Line,
        servos: &mut [Servo<Self::Own>],
    ) -> Result<(), BackendError>;
    /// One tick's packets: each servo's setpoint (or, `hold`, held at its setpoint whatever the
    /// phase) and the reads.
    fn send_tick(
        &mut self,
        line: &mut Line,
        servos: &mut [Servo<Self::Own>],
        setpoints: &[Setpoint],
        hold: bool,
    ) -> Result<(), BackendError>;
    /// Takes what arrived and fills each servo's feedback slot.
    fn read(
        &mut self,
        line: &mut Line,
        servos: &mut [Servo<Self::Own>],
        feedback: &mut [Feedback],
    ) -> Result<(), BackendError>;
    /// Teach-in on (torque off where positions are still read; those servos' DOFs marked in
    /// `dofs`) or off (stiff again where they are).
    fn compliant(
        &mut self,
        line: &mut Line,
        servos: &mut [Servo<Self::Own>],
        on: bool,
        dofs: &mut [bool],
    ) -> Result<Readiness, BackendError>;
}

/// The servos of one family on one line, driven by its protocol `P`.
pub struct SerialBus<P: SerialProtocol> {
    line: Line,
    servos: Vec<Servo<P::Own>>,
    protocol: P,
    /// Reads without a position before a servo faults.
    timeout_ticks: u32,
    rate_hz: f64,
    /// The last tick's bytes reached the servos (see `Bus::taken`).
    took: bool,
    status: Arc<BusStatus>,
}

impl<P: SerialProtocol> SerialBus<P> {
    /// `servos` in the order of `status`'s drives; each tick at most `tx_len` bytes.
    pub fn new(
        port: Box<dyn Port>,
        servos: Vec<Servo<P::Own>>,
        protocol: P,
        tx_len: usize,
        (timeout_ticks, rate_hz): (u32, f64),
        status: Arc<BusStatus>,
    ) -> Self {
        Self {
            line: Line::new(port, tx_len, status.clone()),
            servos,
            protocol,
            timeout_ticks,
            rate_hz,
            took: false,
            status,
        }
    }

    fn failed(&mut self, e: BackendError) -> BackendError {
        if self.protocol.ready() {
            // Hold what was commanded: the measured position would be a step back.
            for s in &mut self.servos {
                s.hold.get_or_insert(s.last);
            }
        }
        self.line.lost |= e.kind == FaultKind::DeviceLost;
        self.protocol.restart();
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

    fn try_enable(&mut self) -> Result<Readiness, BackendError> {
        if self.line.lost {
            self.line.reopen()?;
        }
        self.protocol.enable(&mut self.line, &mut self.servos)
    }
}

impl<P: SerialProtocol> Bus for SerialBus<P> {
    fn enable(&mut self) -> Result<Readiness, BackendError> {
        self.try_enable().map_err(|e| self.failed(e))
    }

    fn disable(&mut self) -> Result<(), BackendError> {
        self.line.set_state(&self.servos, LinkState::Disabled);
        self.protocol.disable(&mut self.line, &mut self.servos)
    }

    fn write(&mut self, _tick: u64, setpoints: &[Setpoint]) -> Result<(), BackendError> {
        let sent = self
            .protocol
            .send_tick(&mut self.line, &mut self.servos, setpoints, false);
        self.took = sent.is_ok() || self.line.tail.cut();
        sent.map_err(|e| self.failed(e))
    }

    /// The tick's packets went out as one write: all of its servos took it or none.
    fn taken(&self, dofs: &mut [bool]) {
        for s in &self.servos {
            if let Some(t) = dofs.get_mut(s.index) {
                *t = self.took;
            }
        }
    }

    fn read(&mut self, feedback: &mut [Feedback]) -> Result<(), BackendError> {
        self.protocol
            .read(&mut self.line, &mut self.servos, feedback)
            .map_err(|e| self.failed(e))
    }

    /// Holds every servo at its setpoint, whatever the phase.
    fn hold(&mut self, _tick: u64, setpoints: &[Setpoint]) -> Result<(), BackendError> {
        let sent = self
            .protocol
            .send_tick(&mut self.line, &mut self.servos, setpoints, true);
        self.took = sent.is_ok() || self.line.tail.cut();
        sent
    }

    /// The goal each holding servo was last sent: from the end of the enable sequence (or of a
    /// teach-in) the position it measured then, which its report may leave behind (a hand still
    /// moving it, a load deflecting it).
    fn holding(&self, positions: &mut [f64]) {
        for s in self.servos.iter().filter(|s| self.protocol.holds(s)) {
            if let Some(p) = positions.get_mut(s.index) {
                *p = s.units.to_joint(s.last);
            }
        }
    }

    fn compliant(&mut self, on: bool, dofs: &mut [bool]) -> Result<Readiness, BackendError> {
        self.protocol
            .compliant(&mut self.line, &mut self.servos, on, dofs)
            .map_err(|e| self.failed(e))
    }

    /// Each servo that left a request of the enable sequence unanswered gets an
    /// `enable_timeout` naming it ([`Unanswered`]); the first one's is returned. Like any
    /// failure, every servo's state is `fault` and the sequence starts again at the next enable.
    fn enable_timed_out(&mut self) -> Option<BackendError> {
        let mut first = None;
        for (k, s) in self.servos.iter().enumerate() {
            if let Some(asked) = self.protocol.unanswered(k, s) {
                let e = BackendError {
                    kind: FaultKind::EnableTimeout,
                    dof: u16::try_from(s.index).ok(),
                    code: asked as u32,
                };
                // The first one's is recorded by `failed`, with the rest of a failure.
                match first {
                    None => first = Some(e),
                    Some(_) => s.status.fault(&e),
                }
            }
        }
        Some(self.failed(first?))
    }

    fn feedback_timeout(&self, dof: usize) -> Option<Duration> {
        self.servos
            .iter()
            .any(|s| s.index == dof)
            .then(|| Duration::from_secs_f64(f64::from(self.timeout_ticks) / self.rate_hz))
    }

    fn status(&self) -> Arc<BusStatus> {
        self.status.clone()
    }
}
