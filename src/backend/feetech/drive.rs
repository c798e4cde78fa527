//! A Feetech line: goal positions of every servo in one Sync Write a tick, positions read back
//! with one Sync Read (STS) or a Read per servo (SCS). The enable sequence reads every servo's
//! position and then writes it as the goal before torque goes on, so a servo whose torque was on
//! already (held through a fault) is taken over where it is and one whose torque was off does
//! not jump; teach-in turns torque off and keeps reading positions.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use super::codec::{self as ft, Fault, Series, reg};
use crate::backend::bus::settings::Units;
use crate::backend::status::{BusStatus, LinkState, LinkStatus};
use crate::backend::transport::io_fault;
use crate::backend::transport::serial::{Port, Tail, read_some};
use crate::backend::{BackendError, FaultKind, Feedback, Readiness};
use crate::trajectory::Setpoint;

/// Ticks between resends of unanswered position reads during enable.
const RESEND_TICKS: u32 = 50;
/// Reads per `drain`, so a babbling line cannot hold the loop.
const MAX_READS_PER_DRAIN: usize = 8;

/// One servo as the bus is built with it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ServoSpec {
    /// Index in the JointSet.
    pub index: usize,
    pub id: u8,
    pub units: Units,
}

/// How a Feetech bus runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FeetechSettings {
    pub series: Series,
    /// Ticks without a position before a servo faults.
    pub timeout_ticks: u32,
    pub rate_hz: f64,
}

struct Servo {
    index: usize,
    id: u8,
    units: Units,
    /// Present_Position in counts.
    measured: Option<f64>,
    fresh: bool,
    age: u32,
    /// Last goal in counts.
    last: f64,
    hold: Option<f64>,
    /// This tick's Goal_Position bytes.
    goal: [u8; 2],
    status: Arc<LinkStatus>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Read every servo's position.
    Start,
    /// Waiting for every servo's position; then goal = present and torque on.
    Measure,
    Ready,
}

/// The servos on one Feetech bus. Each tick is one write (the Sync Write of Goal_Position and
/// the position reads) from a buffer sized at start.
pub struct FeetechBus {
    port: Box<dyn Port>,
    servos: Vec<Servo>,
    ids: Vec<u8>,
    settings: FeetechSettings,
    phase: Phase,
    wait: u32,
    tx: Vec<u8>,
    tail: Tail,
    rx: Vec<u8>,
    rx_len: usize,
    /// The device disappeared: the next enable reopens it.
    lost: bool,
    /// Teach-in: torque off, positions still read every tick.
    compliant: bool,
    /// The last tick's bytes reached the servos (see `Bus::taken`).
    took: bool,
    status: Arc<BusStatus>,
}

impl FeetechBus {
    pub fn new(
        port: Box<dyn Port>,
        specs: &[ServoSpec],
        settings: FeetechSettings,
        status: Arc<BusStatus>,
    ) -> Self {
        let servos: Vec<Servo> = specs
            .iter()
            .enumerate()
            .map(|(k, spec)| Servo {
                index: spec.index,
                id: spec.id,
                units: spec.units,
                measured: None,
                fresh: false,
                age: 0,
                last: spec.units.offset,
                hold: None,
                goal: [0; 2],
                status: status
                    .drives
                    .get(k)
                    .map(|d| d.link.clone())
                    .unwrap_or_default(),
            })
            .collect();
        let n = servos.len();
        // Goals, torque and the reads of one tick, whichever series.
        let tx = vec![
            0u8;
            ft::sync_write_len(n, 2)
                + ft::sync_write_len(n, 1)
                + ft::sync_read_len(n)
                + n * ft::packet_len(2)
        ];
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
            lost: false,
            compliant: false,
            took: false,
            status,
        }
    }

    /// Appends the Sync Write of Goal_Position, each servo's goal (counts) from `goal`.
    fn goals(
        &mut self,
        at: usize,
        mut goal: impl FnMut(&mut Servo) -> f64,
    ) -> Result<usize, BackendError> {
        let series = self.settings.series;
        for s in &mut self.servos {
            let counts = goal(s);
            s.last = counts;
            s.goal = counts_i32(counts)
                .and_then(|c| series.encode_position(c))
                .ok_or(BackendError {
                    kind: FaultKind::Protocol,
                    dof: u16::try_from(s.index).ok(),
                    code: counts_i32(counts).unwrap_or(i32::MAX) as u32,
                })?;
        }
        let buf = self
            .tx
            .get_mut(at..)
            .ok_or(BackendError::new(FaultKind::Protocol))?;
        let entries = self.servos.iter().map(|s| (s.id, &s.goal[..]));
        Ok(at + ft::sync_write(buf, reg::GOAL_POSITION, 2, entries))
    }

    /// Appends Torque_Enable = `on` for every servo.
    fn torque(&mut self, at: usize, on: bool) -> Result<usize, BackendError> {
        let value = [u8::from(on)];
        let buf = self
            .tx
            .get_mut(at..)
            .ok_or(BackendError::new(FaultKind::Protocol))?;
        let entries = self.ids.iter().map(|&id| (id, &value[..]));
        Ok(at + ft::sync_write(buf, reg::TORQUE_ENABLE, 1, entries))
    }

    /// Appends the reads of every servo's Present_Position: one Sync Read (STS), a Read each (SCS).
    fn reads(&mut self, mut at: usize) -> Result<usize, BackendError> {
        let buf = self
            .tx
            .get_mut(at..)
            .ok_or(BackendError::new(FaultKind::Protocol))?;
        if self.settings.series.has_sync_read() {
            return Ok(at + ft::sync_read(buf, reg::PRESENT_POSITION, 2, &self.ids));
        }
        for &id in &self.ids {
            let buf = self
                .tx
                .get_mut(at..)
                .ok_or(BackendError::new(FaultKind::Protocol))?;
            at += ft::read(buf, id, reg::PRESENT_POSITION, 2);
        }
        Ok(at)
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

    /// Reads and applies the complete status packets waiting on the port.
    fn drain(&mut self) -> Result<(), BackendError> {
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
            self.parse()?;
        }
        Ok(())
    }

    /// Drops whatever arrived before this enable (replies from before a fault).
    fn discard_input(&mut self) -> Result<(), BackendError> {
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
            match ft::scan(input) {
                ft::Scan::Status {
                    id,
                    error,
                    params,
                    len,
                } => {
                    let position = <[u8; 2]>::try_from(params).ok();
                    start += len;
                    result = self.apply(id, error, position);
                }
                ft::Scan::Corrupt { len } | ft::Scan::Skip(len) => start += len,
                ft::Scan::More => break,
            }
        }
        self.rx.copy_within(start..self.rx_len, 0);
        self.rx_len -= start;
        result
    }

    /// A servo's status packet: a fault bit in its status byte is a drive fault with the byte as
    /// its code; two parameter bytes are its position.
    fn apply(&mut self, id: u8, error: u8, position: Option<[u8; 2]>) -> Result<(), BackendError> {
        self.status.received.fetch_add(1, Relaxed);
        let series = self.settings.series;
        let Some(servo) = self.servos.iter_mut().find(|s| s.id == id) else {
            self.status.ignored.fetch_add(1, Relaxed);
            return Ok(());
        };
        if Fault::of(error).next().is_some() {
            return Err(BackendError {
                kind: FaultKind::DriveFault,
                dof: u16::try_from(servo.index).ok(),
                code: u32::from(error),
            });
        }
        if let Some(b) = position {
            servo.measured = Some(f64::from(series.decode_position(b)));
            servo.fresh = true;
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
        match self.phase {
            Phase::Start => {
                self.discard_input()?;
                self.set_state(LinkState::Enabling);
                for s in &mut self.servos {
                    s.measured = None;
                    s.fresh = false;
                }
                self.phase = Phase::Measure;
                self.wait = 1;
                let at = self.reads(0)?;
                self.flush(at)?;
                Ok(Readiness::Pending)
            }
            Phase::Measure => {
                self.drain()?;
                if self.servos.iter().all(|s| s.measured.is_some()) {
                    return self.power_on();
                }
                self.wait = self.wait.saturating_add(1);
                if self.wait.is_multiple_of(RESEND_TICKS) {
                    let at = self.reads(0)?;
                    self.flush(at)?;
                }
                Ok(Readiness::Pending)
            }
            Phase::Ready => {
                // Keep the positions coming until the loop takes over.
                self.drain()?;
                let at = self.reads(0)?;
                self.flush(at)?;
                Ok(Readiness::Ready)
            }
        }
    }

    /// Goal = present position, then torque on (unless in teach-in): ready where they are.
    fn power_on(&mut self) -> Result<Readiness, BackendError> {
        let at = self.goals(0, |s| s.measured.unwrap_or(s.last))?;
        let at = if self.compliant {
            at
        } else {
            self.torque(at, true)?
        };
        self.flush(at)?;
        for s in &mut self.servos {
            s.hold = None;
            s.age = 0;
        }
        self.phase = Phase::Ready;
        self.set_state(LinkState::Ready);
        Ok(Readiness::Ready)
    }

    fn disable_all(&mut self) -> Result<(), BackendError> {
        self.phase = Phase::Start;
        self.compliant = false;
        self.set_state(LinkState::Disabled);
        let at = self.torque(0, false)?;
        self.flush(at)
    }

    fn send_tick(&mut self, setpoints: &[Setpoint], hold: bool) -> Result<(), BackendError> {
        let ready = self.phase == Phase::Ready;
        let at = if self.compliant || !(ready || hold) {
            // Torque off (teach-in), or not enabled: no goals, only the positions, which are
            // where a failure would hold them.
            for s in &mut self.servos {
                s.last = s.measured.unwrap_or(s.last);
            }
            0
        } else {
            self.goals(0, |s| {
                let target = setpoints
                    .get(s.index)
                    .map(|sp| s.units.to_drive(sp.position));
                match (hold, target) {
                    (true, Some(t)) => *s.hold.insert(t),
                    (false, Some(t)) => {
                        s.hold = None;
                        t
                    }
                    (_, None) => *s.hold.get_or_insert(s.last),
                }
            })?
        };
        let at = self.reads(at)?;
        self.flush(at)
    }

    fn try_read(&mut self, feedback: &mut [Feedback]) -> Result<(), BackendError> {
        self.drain()?;
        let ready = self.phase == Phase::Ready;
        for s in &mut self.servos {
            s.age = if s.fresh { 0 } else { s.age.saturating_add(1) };
            if let Some(slot) = feedback.get_mut(s.index) {
                *slot = Feedback {
                    position: s.units.to_joint(s.measured.unwrap_or(s.last)),
                    velocity: 0.0,
                    effort: 0.0,
                    // For the flight recorder: enabled, as DYNAMIXEL's; a fault bit in a status
                    // byte is a drive fault of its own, so nothing is left to report here.
                    status: u32::from(ready),
                    error: 0,
                    valid: s.fresh,
                };
            }
            s.fresh = false;
            if ready && s.age > self.settings.timeout_ticks {
                return Err(BackendError {
                    kind: FaultKind::FeedbackMissing,
                    dof: u16::try_from(s.index).ok(),
                    code: s.age,
                });
            }
        }
        Ok(())
    }

    /// Teach-in on: Torque_Enable 0 on every servo (marked in `dofs`), positions still read.
    /// Off: goal = present position, torque on.
    fn try_compliant(&mut self, on: bool, dofs: &mut [bool]) -> Result<Readiness, BackendError> {
        if on && self.phase == Phase::Ready {
            let at = self.torque(0, false)?;
            let at = self.reads(at)?;
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
            self.compliant = false;
            if let Err(e) = self.power_on() {
                self.compliant = true;
                return Err(e);
            }
        }
        Ok(Readiness::Ready)
    }
}

/// Counts as the register's integer; `None` beyond i32 (or NaN).
fn counts_i32(x: f64) -> Option<i32> {
    let r = x.round();
    (r.is_finite() && r >= f64::from(i32::MIN) && r <= f64::from(i32::MAX)).then_some(r as i32)
}

impl crate::backend::bus::Bus for FeetechBus {
    fn enable(&mut self) -> Result<Readiness, BackendError> {
        self.try_enable().map_err(|e| self.failed(e))
    }

    fn disable(&mut self) -> Result<(), BackendError> {
        self.disable_all()
    }

    fn write(&mut self, _tick: u64, setpoints: &[Setpoint]) -> Result<(), BackendError> {
        let sent = self.send_tick(setpoints, false);
        self.took = sent.is_ok() || self.tail.cut();
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
        self.try_read(feedback).map_err(|e| self.failed(e))
    }

    /// Holds every servo at its setpoint's position, whatever the phase.
    fn hold(&mut self, _tick: u64, setpoints: &[Setpoint]) -> Result<(), BackendError> {
        let sent = self.send_tick(setpoints, true);
        self.took = sent.is_ok() || self.tail.cut();
        sent
    }

    fn compliant(&mut self, on: bool, dofs: &mut [bool]) -> Result<Readiness, BackendError> {
        self.try_compliant(on, dofs).map_err(|e| self.failed(e))
    }

    fn feedback_timeout(&self, dof: usize) -> Option<Duration> {
        self.servos.iter().any(|s| s.index == dof).then(|| {
            Duration::from_secs_f64(f64::from(self.settings.timeout_ticks) / self.settings.rate_hz)
        })
    }

    fn status(&self) -> Arc<BusStatus> {
        self.status.clone()
    }
}
