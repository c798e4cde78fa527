//! A Feetech line: goal positions of every servo in one Sync Write a tick, positions read back
//! with one Sync Read (STS) or a Read per servo (SCS). The enable sequence reads every servo's
//! position and then writes it as the goal before torque goes on, so a servo whose torque was on
//! already (held through a fault) is taken over where it is and one whose torque was off does
//! not jump; teach-in turns torque off and keeps reading positions. A servo with a LeRobot
//! calibration is first read back (Min/Max_Position_Limit and, on STS, Homing_Offset, which
//! `lerobot-calibrate` writes to it, as LeRobot's `is_calibrated` compares them): a servo
//! calibrated with another file, or since, reports positions shifted from what the file says,
//! so the enable is refused before anything is written. The line itself (buffers,
//! failures, the `Bus` calls) is the serial servo bus's ([`SerialBus`]).

use std::sync::Arc;

use super::calibration;
use super::codec::{self as ft, Fault, Series, reg};
use crate::backend::bus::serial::{
    self, Line, Scanned, SerialBus, SerialProtocol, Servo, Unanswered, count_received,
};
use crate::backend::bus::settings::Units;
use crate::backend::servo_registers::{Mismatch, ServoRegisters};
use crate::backend::status::{BusStatus, LinkState};
use crate::backend::transport::serial::Port;
use crate::backend::{BackendError, FaultKind, Feedback, Readiness};
use crate::trajectory::Setpoint;

/// Ticks between resends of unanswered position reads during enable.
const RESEND_TICKS: u32 = 50;

/// One servo as the bus is built with it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ServoSpec {
    /// Index in the JointSet.
    pub index: usize,
    pub id: u8,
    pub units: Units,
    /// Its motor in the bus's LeRobot calibration file.
    pub calibration: Option<ServoRegisters>,
    /// The Acceleration it is set up with ([`super::setup::ACCELERATION`]): a RAM register,
    /// which a servo power-cycled since the bus opened has lost; written at every enable.
    pub acceleration: Option<u8>,
}

/// How a Feetech bus runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FeetechSettings {
    pub series: Series,
    /// Ticks without a position before a servo faults.
    pub timeout_ticks: u32,
    pub rate_hz: f64,
}

/// A servo's Goal_Position bytes this tick.
type Goal = [u8; 2];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Read every servo's position, or first the calibration registers of those that have one.
    Start,
    /// Waiting for the calibration registers of every calibrated servo.
    Verify,
    /// Waiting for every servo's position; then goal = present and torque on.
    Measure,
    Ready,
}

/// The Feetech protocol on a line (see the module's introduction).
pub struct FeetechProtocol {
    series: Series,
    timeout_ticks: u32,
    ids: Vec<u8>,
    /// Each servo's motor in the calibration file (in the servos' order).
    calibration: Vec<Option<ServoRegisters>>,
    /// Whose calibration registers were read back and agree, this enable.
    verified: Vec<bool>,
    /// (id, Acceleration) of the servos set up with one.
    acceleration: Vec<(u8, [u8; 1])>,
    phase: Phase,
    wait: u32,
    /// Teach-in: torque off, positions still read every tick.
    compliant: bool,
}

/// The servos on one Feetech bus.
pub type FeetechBus = SerialBus<FeetechProtocol>;

/// The servos of `specs` (in the order of `status`'s drives) on `port`.
pub fn bus(
    port: Box<dyn Port>,
    specs: &[ServoSpec],
    settings: FeetechSettings,
    status: Arc<BusStatus>,
) -> FeetechBus {
    let servos: Vec<Servo<Goal>> = serial::servos(
        &status,
        specs.iter().map(|s| (s.index, s.id, s.units, [0; 2])),
    );
    let n = servos.len();
    // Goals, Acceleration, torque and the reads of one tick, whichever series.
    let tx_len = ft::sync_write_len(n, 2)
        + 2 * ft::sync_write_len(n, 1)
        + ft::sync_read_len(n)
        + n * ft::packet_len(2);
    let protocol = FeetechProtocol {
        series: settings.series,
        timeout_ticks: settings.timeout_ticks,
        ids: servos.iter().map(|s| s.id).collect(),
        calibration: specs.iter().map(|s| s.calibration).collect(),
        verified: vec![false; n],
        acceleration: specs
            .iter()
            .filter_map(|s| Some((s.id, [s.acceleration?])))
            .collect(),
        phase: Phase::Start,
        wait: 0,
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

type Servos = [Servo<Goal>];

impl FeetechProtocol {
    /// Appends the Sync Write of Goal_Position, each servo's goal (counts) from `goal`.
    fn goals(
        &self,
        line: &mut Line,
        servos: &mut Servos,
        at: usize,
        mut goal: impl FnMut(&mut Servo<Goal>) -> f64,
    ) -> Result<usize, BackendError> {
        for s in servos.iter_mut() {
            let counts = goal(s);
            s.last = counts;
            s.own = counts_i32(counts)
                .and_then(|c| self.series.encode_position(c))
                .ok_or(BackendError {
                    kind: FaultKind::Protocol,
                    dof: u16::try_from(s.index).ok(),
                    code: counts_i32(counts).unwrap_or(i32::MAX) as u32,
                })?;
        }
        let entries = servos.iter().map(|s| (s.id, &s.own[..]));
        Ok(at + ft::sync_write(line.tx(at)?, reg::GOAL_POSITION, 2, entries))
    }

    /// Appends Torque_Enable = `on` for every servo.
    fn torque(&self, line: &mut Line, at: usize, on: bool) -> Result<usize, BackendError> {
        let value = [u8::from(on)];
        let entries = self.ids.iter().map(|&id| (id, &value[..]));
        Ok(at + ft::sync_write(line.tx(at)?, reg::TORQUE_ENABLE, 1, entries))
    }

    /// Appends the reads of every servo's Present_Position: one Sync Read (STS), a Read each (SCS).
    fn reads(&self, line: &mut Line, mut at: usize) -> Result<usize, BackendError> {
        if self.series.has_sync_read() {
            return Ok(at + ft::sync_read(line.tx(at)?, reg::PRESENT_POSITION, 2, &self.ids));
        }
        for &id in &self.ids {
            at += ft::read(line.tx(at)?, id, reg::PRESENT_POSITION, 2);
        }
        Ok(at)
    }

    /// Appends a Read of the calibration registers of every servo that has a calibration.
    fn calibration_reads(&self, line: &mut Line, mut at: usize) -> Result<usize, BackendError> {
        for (&id, _) in self
            .ids
            .iter()
            .zip(&self.calibration)
            .filter(|(_, c)| c.is_some())
        {
            at += ft::read(line.tx(at)?, id, calibration::ADDRESS, calibration::LEN);
        }
        Ok(at)
    }

    /// Takes the complete status packets waiting on the line.
    fn drain(&mut self, line: &mut Line, servos: &mut Servos) -> Result<(), BackendError> {
        let series = self.series;
        let mut calibrated = Calibrated {
            motors: &self.calibration,
            verified: &mut self.verified,
        };
        line.drain(|input, status| match ft::scan(input) {
            ft::Scan::Status {
                id,
                error,
                params,
                len,
            } => match apply(series, servos, &mut calibrated, status, id, error, params) {
                Ok(()) => Scanned::Took(len),
                Err(e) => Scanned::Failed(len, e),
            },
            ft::Scan::Corrupt { len } | ft::Scan::Skip(len) => Scanned::Took(len),
            ft::Scan::More => Scanned::More(0),
        })
    }

    /// Goal = present position, the Acceleration the servos were set up with (lost by a servo
    /// power-cycled since), then torque on (unless in teach-in): ready where they are.
    fn power_on(
        &mut self,
        line: &mut Line,
        servos: &mut Servos,
    ) -> Result<Readiness, BackendError> {
        let mut at = self.goals(line, servos, 0, |s| s.measured.unwrap_or(s.last))?;
        if !self.acceleration.is_empty() {
            let entries = self.acceleration.iter().map(|(id, v)| (*id, &v[..]));
            at += ft::sync_write(line.tx(at)?, reg::ACCELERATION, 1, entries);
        }
        let at = if self.compliant {
            at
        } else {
            self.torque(line, at, true)?
        };
        line.flush(at)?;
        for s in servos.iter_mut() {
            s.hold = None;
            s.age = 0;
        }
        self.phase = Phase::Ready;
        line.set_state(servos, LinkState::Ready);
        Ok(Readiness::Ready)
    }
}

/// The calibration file's motors and whose registers agree with them (in the servos' order).
struct Calibrated<'a> {
    motors: &'a [Option<ServoRegisters>],
    verified: &'a mut [bool],
}

impl Calibrated<'_> {
    /// The calibration block of the servo at `k` against its motor in the file
    /// ([`calibration::check`]).
    fn verify(&mut self, series: Series, k: usize, block: &[u8]) -> Result<(), Mismatch> {
        let Some(motor) = self.motors.get(k).copied().flatten() else {
            return Ok(());
        };
        calibration::check(series, &motor, block)?;
        if let Some(v) = self.verified.get_mut(k) {
            *v = true;
        }
        Ok(())
    }
}

/// A servo's status packet: a fault bit in its status byte is a drive fault with the byte as its
/// code; two parameter bytes are its position; [`calibration::LEN`] its calibration registers.
fn apply(
    series: Series,
    servos: &mut Servos,
    calibrated: &mut Calibrated<'_>,
    status: &BusStatus,
    id: u8,
    error: u8,
    params: &[u8],
) -> Result<(), BackendError> {
    let k = servos.iter().position(|s| s.id == id);
    count_received(status, k.is_some());
    let Some((k, servo)) = k.and_then(|k| Some((k, servos.get_mut(k)?))) else {
        return Ok(());
    };
    if Fault::of(error).next().is_some() {
        return Err(BackendError {
            kind: FaultKind::DriveFault,
            dof: u16::try_from(servo.index).ok(),
            code: u32::from(error),
        });
    }
    if params.len() == usize::from(calibration::LEN) {
        return calibrated
            .verify(series, k, params)
            .map_err(|m| BackendError {
                kind: FaultKind::CalibrationMismatch,
                dof: u16::try_from(servo.index).ok(),
                code: m.code(),
            });
    }
    if let Ok(b) = <[u8; 2]>::try_from(params) {
        servo.measured = Some(f64::from(series.decode_position(b)));
        servo.fresh = true;
    }
    Ok(())
}

impl SerialProtocol for FeetechProtocol {
    type Own = Goal;

    fn enable(&mut self, line: &mut Line, servos: &mut Servos) -> Result<Readiness, BackendError> {
        match self.phase {
            Phase::Start => {
                line.discard_input()?;
                line.set_state(servos, LinkState::Enabling);
                servos.iter_mut().for_each(Servo::forget);
                self.verified.iter_mut().for_each(|v| *v = false);
                self.wait = 1;
                let at = if self.calibration.iter().any(Option::is_some) {
                    self.phase = Phase::Verify;
                    self.calibration_reads(line, 0)?
                } else {
                    self.phase = Phase::Measure;
                    self.reads(line, 0)?
                };
                line.flush(at)?;
                Ok(Readiness::Pending)
            }
            Phase::Verify => {
                self.drain(line, servos)?;
                self.wait = self.wait.saturating_add(1);
                let done = self
                    .calibration
                    .iter()
                    .zip(&self.verified)
                    .all(|(c, v)| c.is_none() || *v);
                let at = if done {
                    self.phase = Phase::Measure;
                    self.wait = 1;
                    self.reads(line, 0)?
                } else if self.wait.is_multiple_of(RESEND_TICKS) {
                    self.calibration_reads(line, 0)?
                } else {
                    return Ok(Readiness::Pending);
                };
                line.flush(at)?;
                Ok(Readiness::Pending)
            }
            Phase::Measure => {
                self.drain(line, servos)?;
                if servos.iter().all(|s| s.measured.is_some()) {
                    return self.power_on(line, servos);
                }
                self.wait = self.wait.saturating_add(1);
                if self.wait.is_multiple_of(RESEND_TICKS) {
                    let at = self.reads(line, 0)?;
                    line.flush(at)?;
                }
                Ok(Readiness::Pending)
            }
            Phase::Ready => {
                // Keep the positions coming until the loop takes over.
                self.drain(line, servos)?;
                let at = self.reads(line, 0)?;
                line.flush(at)?;
                Ok(Readiness::Ready)
            }
        }
    }

    fn ready(&self) -> bool {
        self.phase == Phase::Ready
    }

    fn holds(&self, _servo: &Servo<Goal>) -> bool {
        self.phase == Phase::Ready && !self.compliant
    }

    fn restart(&mut self) {
        self.phase = Phase::Start;
    }

    fn unanswered(&self, k: usize, s: &Servo<Goal>) -> Option<Unanswered> {
        match self.phase {
            Phase::Verify => {
                let calibrated = self.calibration.get(k).is_some_and(Option::is_some);
                let verified = self.verified.get(k).copied().unwrap_or(false);
                (calibrated && !verified).then_some(Unanswered::Calibration)
            }
            Phase::Measure => s.measured.is_none().then_some(Unanswered::Position),
            Phase::Start | Phase::Ready => None,
        }
    }

    fn disable(&mut self, line: &mut Line, _servos: &mut Servos) -> Result<(), BackendError> {
        self.phase = Phase::Start;
        self.compliant = false;
        let at = self.torque(line, 0, false)?;
        line.flush(at)
    }

    fn send_tick(
        &mut self,
        line: &mut Line,
        servos: &mut Servos,
        setpoints: &[Setpoint],
        hold: bool,
    ) -> Result<(), BackendError> {
        let ready = self.phase == Phase::Ready;
        let at = if self.compliant || !(ready || hold) {
            // Torque off (teach-in), or not enabled: no goals, only the positions, which are
            // where a failure would hold them.
            for s in servos.iter_mut() {
                s.last = s.measured.unwrap_or(s.last);
            }
            0
        } else {
            self.goals(line, servos, 0, |s| {
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
        let at = self.reads(line, at)?;
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
        for s in servos.iter_mut() {
            // For the flight recorder: enabled, as DYNAMIXEL's; a fault bit in a status byte is
            // a drive fault of its own, so nothing is left to report as the error.
            let (position, valid) = (s.measured.unwrap_or(s.last), s.fresh);
            let f = s.feedback(position, u32::from(ready), 0, valid);
            if let Some(slot) = feedback.get_mut(s.index) {
                *slot = f;
            }
            if ready {
                s.check_age(self.timeout_ticks)?;
            }
        }
        Ok(())
    }

    /// Teach-in on: Torque_Enable 0 on every servo (marked in `dofs`), positions still read.
    /// Off: goal = present position, torque on.
    fn compliant(
        &mut self,
        line: &mut Line,
        servos: &mut Servos,
        on: bool,
        dofs: &mut [bool],
    ) -> Result<Readiness, BackendError> {
        if on && self.phase == Phase::Ready {
            let at = self.torque(line, 0, false)?;
            let at = self.reads(line, at)?;
            line.flush(at)?;
            self.compliant = true;
            serial::mark_compliant(servos, dofs);
        } else if !on && self.compliant {
            // Still compliant until it took (asked again after a failure).
            self.compliant = false;
            if let Err(e) = self.power_on(line, servos) {
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
