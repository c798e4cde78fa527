//! A DYNAMIXEL Protocol 2.0 line: every servo of the bus written with one Sync Write per
//! register and read with one Sync Read a tick; the enable sequence reboots servos in alert, sets
//! their Operating Mode and turns torque on at the present position; teach-in turns torque off
//! and keeps reading positions. A servo with a LeRobot calibration is first read back —
//! Drive_Mode, Homing_Offset and the position limits, which `lerobot-calibrate` writes to it and
//! LeRobot's `is_calibrated` compares — before anything is written to any servo: one that
//! differs reports positions shifted or reversed from what the file says, so the enable is
//! refused. The line itself (buffers, failures, the `Bus` calls) is the serial servo bus's
//! ([`SerialBus`]).

use std::sync::Arc;

use super::calibration;
use super::codec as dxl;
use super::setup;
use crate::backend::bus::Mode;
use crate::backend::bus::serial::{
    self, Line, Scanned, SerialBus, SerialProtocol, Servo, Unanswered, count_received,
};
use crate::backend::bus::settings::{DriveSettings, Units};
use crate::backend::servo_registers::{Mismatch, ServoRegisters};
use crate::backend::status::{BusStatus, LinkState};
use crate::backend::transport::serial::Port;
use crate::backend::{BackendError, FaultKind, Feedback, Readiness};
use crate::trajectory::Setpoint;

/// Goal Velocity unit of X-series servos: 0.229 rev/min, for 4096 counts per revolution.
const VELOCITY_UNIT_COUNTS_PER_S: f64 = 0.229 * 4096.0 / 60.0;
/// Ticks between resends of an unanswered Sync Read during enable.
const RESEND_TICKS: u32 = 50;
/// How long a rebooted servo is given before it is talked to again.
const REBOOT_MS: f64 = 200.0;

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
    /// Its motor in the bus's LeRobot calibration file.
    pub calibration: Option<ServoRegisters>,
    /// The values of [`setup::RAM`] (the position gains) it is set up with, which a servo
    /// power-cycled since the bus opened has lost: written at every enable.
    pub ram: [Option<u16>; 3],
}

impl ServoSpec {
    /// `held`: the Operating Mode its `servo:` key (or LeRobot's value) sets, which the bus
    /// keeps (checked against `mode` at load); else velocity, position within one turn, or
    /// extended position.
    pub fn new(
        index: usize,
        mode: Mode,
        joint: &DriveSettings,
        drive_range: (f64, f64),
        held: Option<u8>,
    ) -> Self {
        let operating_mode = held.unwrap_or(match mode {
            Mode::Velocity => dxl::OPERATING_MODE_VELOCITY,
            _ if drive_range.0 >= 0.0 && drive_range.1 <= 4095.0 => dxl::OPERATING_MODE_POSITION,
            _ => dxl::OPERATING_MODE_EXTENDED_POSITION,
        });
        Self {
            index,
            id: joint.id,
            units: joint.units,
            operating_mode,
            calibration: joint.lerobot,
            ram: [None; 3],
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

/// What the bus keeps of a DYNAMIXEL servo beyond what every servo has.
pub struct Own {
    velocity: bool,
    operating_mode: u8,
    /// Operating Mode as read from the servo (EEPROM: written only when it differs).
    mode_read: Option<u8>,
    /// It reported a hardware error alert: the next enable reboots it first.
    alert: bool,
    /// Its motor in the calibration file.
    calibration: Option<ServoRegisters>,
    /// The values of [`setup::RAM`] it is set up with.
    ram: [Option<u16>; 3],
    /// Which of its calibration reads came back and agree, this enable (bits of
    /// [`calibration::ALL`]).
    verified: u8,
}

type Servos = [Servo<Own>];

fn hold_target(s: &mut Servo<Own>) -> f64 {
    *s.hold.get_or_insert(s.measured.unwrap_or(s.last))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Reboot servos in alert, torque off, Bus Watchdog cleared, Operating Mode read.
    Start,
    /// Rebooted servos come back (ticks left).
    Rebooting(u32),
    /// Waiting for the calibration registers of every calibrated servo (nothing written yet but
    /// the reboot of a servo in alert).
    Verify,
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

/// The DYNAMIXEL protocol on a line (see the module's introduction).
pub struct DynamixelProtocol {
    settings: DynamixelSettings,
    ids: Vec<u8>,
    /// The servos with a LeRobot calibration, read back before anything is written.
    calibrated: Vec<u8>,
    phase: Phase,
    wait: u32,
    params: [u8; 64],
    /// This enable sequence rebooted servos already (a servo still in alert then faults).
    rebooted: bool,
    /// Teach-in: torque off, positions still read every tick.
    compliant: bool,
}

/// The servos on one DYNAMIXEL bus. Each tick is one write of up to three packets (Sync Write of
/// Goal Position, of Goal Velocity, Sync Read of Present Position) into a buffer sized at start.
pub type DynamixelBus = SerialBus<DynamixelProtocol>;

/// The servos of `specs` (in the order of `status`'s drives) on `port`.
pub fn bus(
    port: Box<dyn Port>,
    specs: &[ServoSpec],
    settings: DynamixelSettings,
    status: Arc<BusStatus>,
) -> DynamixelBus {
    let specs = specs.iter().map(|spec| {
        let own = Own {
            velocity: spec.operating_mode == dxl::OPERATING_MODE_VELOCITY,
            operating_mode: spec.operating_mode,
            mode_read: None,
            alert: false,
            calibration: spec.calibration,
            ram: spec.ram,
            verified: 0,
        };
        (spec.index, spec.id, spec.units, own)
    });
    let servos: Vec<Servo<Own>> = serial::servos(&status, specs);
    let n = servos.len();
    // Worst case every byte is stuffed: twice the packet sizes, three packets a tick; at
    // enable also the RAM registers, a Sync Write each.
    let tx_len = 2 * (6 * dxl::sync_write_len(n, 4) + 64);
    let protocol = DynamixelProtocol {
        settings,
        ids: servos.iter().map(|s| s.id).collect(),
        calibrated: servos
            .iter()
            .filter(|s| s.own.calibration.is_some())
            .map(|s| s.id)
            .collect(),
        phase: Phase::Start,
        wait: 0,
        params: [0; 64],
        rebooted: false,
        compliant: false,
    };
    SerialBus::new(
        port,
        servos,
        protocol,
        tx_len,
        (settings.timeout_ticks, settings.rate_hz),
        status,
    )
}

impl DynamixelProtocol {
    /// Appends a Sync Write of `data_len` bytes at `addr` for the servos `pick` selects, with the
    /// value `value` gives; returns the new end of the tick buffer.
    fn sync_write(
        line: &mut Line,
        servos: &mut Servos,
        at: usize,
        addr: u16,
        data_len: u16,
        pick: impl Fn(&Servo<Own>) -> bool,
        mut value: impl FnMut(&mut Servo<Own>) -> u32,
    ) -> Result<usize, BackendError> {
        if !servos.iter().any(&pick) {
            return Ok(at);
        }
        let mut p = dxl::sync_write_begin(line.tx(at)?, addr, data_len);
        for s in servos.iter_mut().filter(|s| pick(s)) {
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

    /// Appends one byte of `value` at `addr` for every servo.
    fn write_all(
        line: &mut Line,
        servos: &mut Servos,
        at: usize,
        addr: u16,
        value: u32,
    ) -> Result<usize, BackendError> {
        Self::sync_write(line, servos, at, addr, 1, |_| true, |_| value)
    }

    fn sync_read_packet(
        &self,
        line: &mut Line,
        at: usize,
        addr: u16,
        len: u16,
    ) -> Result<usize, BackendError> {
        Self::sync_read_of(line, at, addr, len, &self.ids)
    }

    fn sync_read_of(
        line: &mut Line,
        at: usize,
        addr: u16,
        len: u16,
        ids: &[u8],
    ) -> Result<usize, BackendError> {
        let n = dxl::sync_read(line.tx(at)?, addr, len, ids)
            .ok_or(BackendError::new(FaultKind::Protocol))?
            .len();
        Ok(at + n)
    }

    /// Sends the calibration reads of the calibrated servos ([`calibration::BLOCKS`]).
    fn calibration_reads(&self, line: &mut Line) -> Result<(), BackendError> {
        let mut at = 0;
        for (address, len) in calibration::BLOCKS {
            at = Self::sync_read_of(line, at, address, u16::from(len), &self.calibrated)?;
        }
        line.flush(at)
    }

    /// The calibrated servos are read back first (nothing written before they agree); the
    /// others, or then, the Operating Modes.
    fn begin_verify(&mut self, line: &mut Line, servos: &mut Servos) -> Result<(), BackendError> {
        if self.calibrated.is_empty() {
            return self.begin_mode(line, servos);
        }
        self.calibration_reads(line)?;
        self.phase = Phase::Verify;
        self.wait = 1;
        Ok(())
    }

    fn read_positions(&self, line: &mut Line, at: usize) -> Result<usize, BackendError> {
        self.sync_read_packet(line, at, dxl::ADDR_PRESENT_POSITION, 4)
    }

    /// Takes the complete status packets waiting on the line.
    fn drain(&mut self, line: &mut Line, servos: &mut Servos) -> Result<(), BackendError> {
        line.drain(|input, status| match dxl::parse(input, &mut self.params) {
            dxl::Parse::Packet { consumed, packet } => {
                let params = self.params.get(..packet.params).unwrap_or_default();
                match apply(
                    &mut self.phase,
                    self.rebooted,
                    servos,
                    status,
                    packet,
                    params,
                ) {
                    Ok(()) => Scanned::Took(consumed),
                    Err(e) => Scanned::Failed(consumed, e),
                }
            }
            dxl::Parse::Skip { consumed, .. } => Scanned::Took(consumed),
            dxl::Parse::Incomplete { consumed } => Scanned::More(consumed),
        })
    }

    /// Torque off and the Bus Watchdog cleared (a tripped one refuses goals), then the Operating
    /// Modes are read.
    fn begin_mode(&mut self, line: &mut Line, servos: &mut Servos) -> Result<(), BackendError> {
        let at = Self::write_all(line, servos, 0, dxl::ADDR_TORQUE_ENABLE, 0)?;
        let at = Self::write_all(line, servos, at, dxl::ADDR_BUS_WATCHDOG, 0)?;
        let at = self.sync_read_packet(line, at, dxl::ADDR_OPERATING_MODE, 1)?;
        line.flush(at)?;
        self.phase = Phase::Mode;
        self.wait = 1;
        Ok(())
    }

    /// Goal = present position before torque comes on, so nothing jumps, with the RAM
    /// registers the servos were set up with (lost by a servo power-cycled since); then the Bus
    /// Watchdog is armed (it only runs with torque on).
    fn power_on(
        &mut self,
        line: &mut Line,
        servos: &mut Servos,
    ) -> Result<Readiness, BackendError> {
        let mut at = 0;
        for (k, setting) in setup::RAM.iter().enumerate() {
            let value = |s: &Servo<Own>| s.own.ram.get(k).copied().flatten();
            at = Self::sync_write(
                line,
                servos,
                at,
                setting.place.address,
                u16::from(setting.place.len),
                |s| value(s).is_some(),
                |s| u32::from(value(s).unwrap_or(0)),
            )?;
        }
        let at = Self::sync_write(
            line,
            servos,
            at,
            dxl::ADDR_GOAL_POSITION,
            4,
            |s| !s.own.velocity,
            |s| counts(s.measured.unwrap_or(s.last)),
        )?;
        let at = Self::sync_write(
            line,
            servos,
            at,
            dxl::ADDR_GOAL_VELOCITY,
            4,
            |s| s.own.velocity,
            |_| 0,
        )?;
        let at = Self::write_all(line, servos, at, dxl::ADDR_TORQUE_ENABLE, 1)?;
        let units = dxl::bus_watchdog_units(self.settings.watchdog_ms);
        let at = if units > 0 {
            Self::write_all(line, servos, at, dxl::ADDR_BUS_WATCHDOG, u32::from(units))?
        } else {
            at
        };
        let at = if self.settings.sync_read {
            self.read_positions(line, at)?
        } else {
            at
        };
        line.flush(at)?;
        for s in servos.iter_mut() {
            let m = s.measured.unwrap_or(s.last);
            s.hold = Some(m);
            s.last = m;
            s.age = 0;
        }
        self.phase = Phase::Ready;
        self.rebooted = false;
        line.set_state(servos, LinkState::Ready);
        Ok(Readiness::Ready)
    }

    /// Reboots the servos in alert (which refuse torque until then); whether any was.
    fn reboot(&mut self, line: &mut Line, servos: &mut Servos) -> Result<bool, BackendError> {
        let mut at = 0;
        for s in servos.iter_mut().filter(|s| s.own.alert) {
            s.own.alert = false;
            at += dxl::reboot(line.tx(at)?, s.id)
                .ok_or(BackendError::new(FaultKind::Protocol))?
                .len();
        }
        if at == 0 {
            return Ok(false);
        }
        self.rebooted = true;
        line.flush(at)?;
        let ticks = (REBOOT_MS * self.settings.rate_hz / 1000.0).ceil() as u32;
        self.phase = Phase::Rebooting(ticks.max(1));
        Ok(true)
    }
}

/// A status packet (instruction packets echoed by half-duplex adapters are not replies): an
/// error is a fault of its servo, a position or an Operating Mode is taken.
fn apply(
    phase: &mut Phase,
    rebooted: bool,
    servos: &mut Servos,
    status: &BusStatus,
    packet: dxl::Parsed,
    params: &[u8],
) -> Result<(), BackendError> {
    if packet.instruction != dxl::INST_STATUS {
        return Ok(());
    }
    let rebooting = matches!(*phase, Phase::Rebooting(_));
    let servo = servos.iter_mut().find(|s| s.id == packet.id);
    count_received(status, servo.is_some());
    let Some(servo) = servo else {
        return Ok(());
    };
    let Some((&error, data)) = params.split_first() else {
        return Ok(());
    };
    if error & dxl::ERR_ALERT != 0 {
        servo.own.alert = true;
        // Found while enabling (e.g. by a daemon started after the fault): the enable sequence
        // reboots it once instead of failing.
        if !rebooting && *phase != Phase::Ready && !rebooted {
            *phase = Phase::Start;
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
    if *phase == Phase::Verify {
        return verify(servo, data).map_err(|m| BackendError {
            kind: FaultKind::CalibrationMismatch,
            dof: u16::try_from(servo.index).ok(),
            code: m.code(),
        });
    }
    match *data {
        [mode] if *phase == Phase::Mode => servo.own.mode_read = Some(mode),
        [a, b, c, d] => {
            servo.measured = Some(f64::from(i32::from_le_bytes([a, b, c, d])));
            servo.fresh = true;
        }
        _ => {}
    }
    Ok(())
}

/// One calibration read's reply against the servo's motor in the file ([`calibration::check`]).
fn verify(servo: &mut Servo<Own>, data: &[u8]) -> Result<(), Mismatch> {
    if let Some(file) = servo.own.calibration {
        servo.own.verified |= calibration::check(&file, data)?;
    }
    Ok(())
}

impl SerialProtocol for DynamixelProtocol {
    type Own = Own;

    fn enable(&mut self, line: &mut Line, servos: &mut Servos) -> Result<Readiness, BackendError> {
        if self.phase == Phase::Start {
            line.discard_input()?;
        } else {
            self.drain(line, servos)?;
        }
        let resend = self.wait.is_multiple_of(RESEND_TICKS);
        self.wait = self.wait.saturating_add(1);
        match self.phase {
            Phase::Ready => {
                // Keep the positions coming until the loop takes over.
                if self.settings.sync_read {
                    let at = self.read_positions(line, 0)?;
                    line.flush(at)?;
                }
                return Ok(Readiness::Ready);
            }
            Phase::Start => {
                line.set_state(servos, LinkState::Enabling);
                for s in servos.iter_mut() {
                    s.forget();
                    s.own.mode_read = None;
                    s.own.verified = 0;
                }
                // A servo in hardware error refuses torque until it is rebooted.
                if !self.reboot(line, servos)? {
                    self.begin_verify(line, servos)?;
                }
            }
            Phase::Rebooting(left) => {
                if left > 1 {
                    self.phase = Phase::Rebooting(left - 1);
                } else {
                    line.discard_input()?;
                    self.begin_verify(line, servos)?;
                }
            }
            Phase::Verify => {
                let verified = |s: &Servo<Own>| {
                    s.own.calibration.is_none() || s.own.verified == calibration::ALL
                };
                if servos.iter().all(verified) {
                    self.begin_mode(line, servos)?;
                } else if resend {
                    self.calibration_reads(line)?;
                }
            }
            Phase::Mode => {
                if servos.iter().all(|s| s.own.mode_read.is_some()) {
                    // Operating Mode lives in EEPROM: written only where it differs.
                    let differs = |s: &Servo<Own>| s.own.mode_read != Some(s.own.operating_mode);
                    let at = Self::sync_write(
                        line,
                        servos,
                        0,
                        dxl::ADDR_OPERATING_MODE,
                        1,
                        differs,
                        |s| u32::from(s.own.operating_mode),
                    )?;
                    let at = self.read_positions(line, at)?;
                    line.flush(at)?;
                    self.phase = Phase::Measure;
                    self.wait = 1;
                } else if resend {
                    let at = self.sync_read_packet(line, 0, dxl::ADDR_OPERATING_MODE, 1)?;
                    line.flush(at)?;
                }
            }
            Phase::Measure => {
                if servos.iter().all(|s| s.measured.is_some()) {
                    return self.power_on(line, servos);
                }
                if resend {
                    let at = self.read_positions(line, 0)?;
                    line.flush(at)?;
                }
            }
        }
        Ok(Readiness::Pending)
    }

    fn ready(&self) -> bool {
        self.phase == Phase::Ready
    }

    fn holds(&self, servo: &Servo<Own>) -> bool {
        self.phase == Phase::Ready && !self.compliant && !servo.own.velocity
    }

    fn restart(&mut self) {
        self.rebooted = false;
        self.phase = Phase::Start;
    }

    fn unanswered(&self, _k: usize, s: &Servo<Own>) -> Option<Unanswered> {
        match self.phase {
            Phase::Verify => (s.own.calibration.is_some() && s.own.verified != calibration::ALL)
                .then_some(Unanswered::Calibration),
            Phase::Mode => s
                .own
                .mode_read
                .is_none()
                .then_some(Unanswered::OperatingMode),
            Phase::Measure => s.measured.is_none().then_some(Unanswered::Position),
            Phase::Start | Phase::Rebooting(_) | Phase::Ready => None,
        }
    }

    fn disable(&mut self, line: &mut Line, servos: &mut Servos) -> Result<(), BackendError> {
        self.phase = Phase::Start;
        self.compliant = false;
        // Watchdog off first: torque off with a running watchdog would trip it.
        let at = Self::write_all(line, servos, 0, dxl::ADDR_BUS_WATCHDOG, 0)?;
        let at = Self::write_all(line, servos, at, dxl::ADDR_TORQUE_ENABLE, 0)?;
        line.flush(at)
    }

    fn send_tick(
        &mut self,
        line: &mut Line,
        servos: &mut Servos,
        setpoints: &[Setpoint],
        hold: bool,
    ) -> Result<(), BackendError> {
        if self.compliant {
            // Torque off: no goals, only the positions the hand moves the servos to, which are
            // where they would hold on a failure.
            for s in servos.iter_mut() {
                s.last = s.measured.unwrap_or(s.last);
            }
            let at = self.read_positions(line, 0)?;
            return line.flush(at);
        }
        let ready = self.phase == Phase::Ready;
        // Held servos get their setpoint whatever the phase: a quick stop's ramp reaches
        // velocity servos as a ramp (at rest the velocity is 0).
        let command = |s: &mut Servo<Own>| -> Option<Setpoint> {
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
        let at = Self::sync_write(
            line,
            servos,
            0,
            dxl::ADDR_GOAL_POSITION,
            4,
            |s| !s.own.velocity,
            |s| {
                let goal = match command(s) {
                    Some(sp) => s.units.to_drive(sp.position),
                    None => hold_target(s),
                };
                s.last = goal;
                counts(goal)
            },
        )?;
        let at = Self::sync_write(
            line,
            servos,
            at,
            dxl::ADDR_GOAL_VELOCITY,
            4,
            |s| s.own.velocity,
            |s| match command(s) {
                Some(sp) => {
                    s.last = s.units.to_drive(sp.position);
                    counts(s.units.rate_to_drive(sp.velocity) / VELOCITY_UNIT_COUNTS_PER_S)
                }
                None => 0,
            },
        )?;
        let at = if self.settings.sync_read {
            self.read_positions(line, at)?
        } else {
            at
        };
        line.flush(at)
    }

    fn read(
        &mut self,
        line: &mut Line,
        servos: &mut Servos,
        feedback: &mut [Feedback],
    ) -> Result<(), BackendError> {
        self.drain(line, servos)?;
        let ready = self.phase == Phase::Ready;
        // Without Sync Reads the servos run open loop once enabled: what is reported is the goal.
        let open_loop = ready && !self.settings.sync_read;
        for s in servos.iter_mut() {
            let position = if open_loop {
                s.last
            } else {
                s.measured.unwrap_or(s.last)
            };
            // The status packet's alert bit: a hardware error the next enable reboots.
            let error = if s.own.alert {
                u32::from(dxl::ERR_ALERT)
            } else {
                0
            };
            let valid = s.fresh || open_loop;
            let f = s.feedback(position, u32::from(ready), error, valid);
            if let Some(slot) = feedback.get_mut(s.index) {
                *slot = f;
            }
            if ready && self.settings.sync_read {
                s.check_age(self.settings.timeout_ticks)?;
            }
        }
        Ok(())
    }

    /// Teach-in on: Bus Watchdog off (it would trip without goals), then Torque Enable 0 on
    /// every servo, whose DOFs are marked in `dofs`; only with Sync Reads (without them nothing
    /// would report where the hand put the servos, so they keep holding). Off: goal = present
    /// position, torque and watchdog on again, as at the end of the enable sequence.
    fn compliant(
        &mut self,
        line: &mut Line,
        servos: &mut Servos,
        on: bool,
        dofs: &mut [bool],
    ) -> Result<Readiness, BackendError> {
        if on && self.phase == Phase::Ready && self.settings.sync_read {
            let at = Self::write_all(line, servos, 0, dxl::ADDR_BUS_WATCHDOG, 0)?;
            let at = Self::write_all(line, servos, at, dxl::ADDR_TORQUE_ENABLE, 0)?;
            let at = self.read_positions(line, at)?;
            line.flush(at)?;
            self.compliant = true;
            serial::mark_compliant(servos, dofs);
        } else if !on && self.compliant {
            // Still compliant until it took (asked again after a failure).
            self.power_on(line, servos)?;
            self.compliant = false;
        }
        Ok(Readiness::Ready)
    }
}
