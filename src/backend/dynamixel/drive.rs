//! A DYNAMIXEL Protocol 2.0 line: every servo of the bus written with one Sync Write per
//! register and read with one Sync Read a tick; the enable sequence reboots servos in alert, sets
//! their Operating Mode and turns torque on at the present position; teach-in turns torque off
//! and keeps reading positions.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use super::codec as dxl;
use crate::backend::bus::Mode;
use crate::backend::bus::settings::{DriveSettings, Units};
use crate::backend::status::{BusStatus, LinkState, LinkStatus};
use crate::backend::transport::io_fault;
use crate::backend::transport::serial::{Port, Tail, read_some};
use crate::backend::{BackendError, FaultKind, Feedback, Readiness};
use crate::trajectory::Setpoint;

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
    pub fn new(index: usize, mode: Mode, joint: &DriveSettings, drive_range: (f64, f64)) -> Self {
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
    /// The last tick's packets reached the servos (see `Bus::taken`).
    took: bool,
    status: Arc<BusStatus>,
}

impl DynamixelBus {
    pub fn new(
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

    fn disable_all(&mut self) -> Result<(), BackendError> {
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
                    status: u32::from(ready),
                    // The status packet's alert bit: a hardware error the next enable reboots.
                    error: if s.alert {
                        u32::from(dxl::ERR_ALERT)
                    } else {
                        0
                    },
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

    /// Teach-in on: Bus Watchdog off (it would trip without goals), then Torque Enable 0 on
    /// every servo, whose DOFs are marked in `dofs`; only with Sync Reads (without them nothing
    /// would report where the hand put the servos, so they keep holding). Off: goal = present
    /// position, torque and watchdog on again, as at the end of the enable sequence.
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
}

impl crate::backend::bus::Bus for DynamixelBus {
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

    /// Holds every servo at its setpoint (position, and velocity on velocity servos), whatever
    /// the phase.
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
