//! A Robstride or CyberGear motor on CAN (private protocol, motion mode): its run mode read back
//! (motion), the CAN timeout (the drive-side watchdog) written, enabled — a latched fault cleared
//! first — then one motion frame per tick, each answered with feedback carrying fault bits and
//! mode. Nothing in the sequence stops the motor: one still in run mode (after a fault of the
//! loop, held meanwhile) keeps its torque and is taken over where it is.

use super::codec::{self as rs, Motion, Ranges};
use super::settings::Settings;
use crate::backend::bus::Mode;
use crate::backend::bus::can::{Axis, CanDrive, Measured, Target, Wait};
use crate::backend::frame::CanFrame;
use crate::backend::transport::FrameIo;
use crate::backend::{BackendError, FaultKind};

/// Fault codes: feedback fault bits (id bits 16–21, kept in place) flagged with bit 31; the
/// motor out of run mode while following: bit 30 with the mode; `run_mode` not motion: bit 29
/// with its value. A fault frame's fault word (bits 0–16) is the code as it is.
pub const FEEDBACK_FAULT: u32 = 0x8000_0000;
pub const LEFT_RUN_MODE: u32 = 0x4000_0000;
pub const NOT_MOTION_MODE: u32 = 0x2000_0000;

/// How long faults are not believed after the clear: replies to frames sent before it.
const DOUBT_MS: f64 = 300.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Read `run_mode` until the motor answers it.
    Mode,
    /// Write `canTimeout` until the motor answers.
    Timeout,
    /// Enable (clearing a latched fault) until the feedback shows run mode without faults.
    Power,
    /// Out of teach-in: following again from the measured position.
    Stiffen,
}

pub struct RobstrideDrive {
    id: u8,
    host: u8,
    mode: Mode,
    ranges: Ranges,
    kp: f32,
    kd: f32,
    /// The `canTimeout` write, when the bus arms the watchdog.
    arm: Option<CanFrame>,
    phase: Phase,
    wait: Wait,
    /// The awaited reply arrived since the last request.
    answered: bool,
    /// From the last feedback: run mode, fault bits; the last fault frame's fault word.
    run: bool,
    faults: u8,
    fault_word: u32,
    /// A clear was sent in this power step, and ticks since then.
    cleared: bool,
    since_clear: u32,
    doubt_ticks: u32,
}

impl RobstrideDrive {
    /// `watchdog_ms`: the bus's drive watchdog (0: leave `canTimeout` as it is).
    pub fn new(id: u8, mode: Mode, s: &Settings, watchdog_ms: f64, rate_hz: f64) -> Self {
        let host = s.host_id;
        let arm = (watchdog_ms > 0.0).then(|| {
            let units = rs::can_timeout(watchdog_ms).to_le_bytes();
            rs::write_param(id, host, rs::PARAM_CAN_TIMEOUT, units)
        });
        Self {
            id,
            host,
            mode,
            ranges: s.ranges,
            kp: s.kp as f32,
            kd: s.kd as f32,
            arm,
            phase: Phase::Mode,
            wait: Wait::default(),
            answered: false,
            run: false,
            faults: 0,
            fault_word: 0,
            cleared: false,
            since_clear: 0,
            doubt_ticks: (DOUBT_MS * rate_hz / 1000.0).ceil().clamp(1.0, 1e6) as u32,
        }
    }

    fn on_feedback(&mut self, axis: &mut Axis, f: &CanFrame) -> Result<(), BackendError> {
        let fb =
            rs::decode_feedback(f, &self.ranges).ok_or(axis.fault(FaultKind::Protocol, f.id))?;
        if self.phase == Phase::Timeout {
            self.answered = true;
        }
        self.run = fb.mode == rs::MODE_RUN;
        self.faults = fb.faults;
        if axis.ready() && fb.faults != 0 {
            let code = FEEDBACK_FAULT | u32::from(fb.faults) << 16;
            return Err(axis.fault(FaultKind::DriveFault, code));
        }
        if axis.ready() && !self.run {
            return Err(axis.fault(FaultKind::DriveFault, LEFT_RUN_MODE | u32::from(fb.mode)));
        }
        axis.measure(Measured {
            position: f64::from(fb.position),
            velocity: f64::from(fb.velocity),
            torque: f64::from(fb.torque),
        });
        Ok(())
    }

    fn on_fault_frame(&mut self, axis: &Axis, f: &CanFrame) -> Result<(), BackendError> {
        let (fault, warning) =
            rs::decode_fault(f.data()).ok_or(axis.fault(FaultKind::Protocol, f.id))?;
        if warning != 0 {
            axis.warning(warning);
        }
        self.fault_word = fault;
        if fault != 0 && axis.ready() {
            return Err(axis.fault(FaultKind::DriveFault, fault));
        }
        Ok(())
    }

    /// The answer to the `run_mode` read: motion mode, or a fault naming the mode.
    fn on_param(&mut self, axis: &Axis, f: &CanFrame) -> Result<(), BackendError> {
        let Some((index, value)) = rs::decode_param(f.data()) else {
            return Err(axis.fault(FaultKind::Protocol, f.id));
        };
        if self.phase != Phase::Mode || index != rs::PARAM_RUN_MODE {
            return Ok(());
        }
        if value[0] != rs::RUN_MODE_MOTION {
            return Err(axis.fault(FaultKind::DriveFault, NOT_MOTION_MODE | u32::from(value[0])));
        }
        self.answered = true;
        Ok(())
    }

    fn motion(&self, c: &Motion) -> CanFrame {
        rs::motion(self.id, c, &self.ranges)
    }

    /// Enable (after a stop that clears faults when `clear`).
    fn request_power(
        &mut self,
        axis: &mut Axis,
        io: &mut dyn FrameIo,
        clear: bool,
    ) -> Result<(), BackendError> {
        axis.restart_measuring();
        self.run = false;
        self.faults = 0;
        self.fault_word = 0;
        if clear {
            if !self.cleared {
                self.since_clear = 0;
            }
            self.cleared = true;
            io.send(&rs::stop(self.id, self.host, true))?;
        }
        io.send(&rs::enable(self.id, self.host))
    }

    fn power(
        &mut self,
        axis: &mut Axis,
        io: &mut dyn FrameIo,
        resend: bool,
    ) -> Result<(), BackendError> {
        self.since_clear = self.since_clear.saturating_add(1);
        let faulted = self.faults != 0 || self.fault_word != 0;
        if let (false, true, Some(m)) = (faulted, self.run, axis.measured()) {
            return self.follow(axis, io, m.position);
        }
        if !faulted {
            return if resend {
                self.request_power(axis, io, self.cleared)
            } else {
                Ok(())
            };
        }
        if self.cleared && self.since_clear > self.doubt_ticks {
            let code = if self.fault_word != 0 {
                self.fault_word
            } else {
                FEEDBACK_FAULT | u32::from(self.faults) << 16
            };
            return Err(axis.fault(FaultKind::DriveFault, code));
        }
        // A latched fault (before this run): cleared once, and again with each resend.
        if !self.cleared || resend {
            return self.request_power(axis, io, true);
        }
        Ok(())
    }

    /// Following from `position` (measured), with the gains.
    fn follow(
        &mut self,
        axis: &mut Axis,
        io: &mut dyn FrameIo,
        position: f64,
    ) -> Result<(), BackendError> {
        axis.become_ready(position);
        let f = self.command(axis, Target::at(position));
        io.send(&f)
    }
}

impl CanDrive for RobstrideDrive {
    fn accept(&mut self, axis: &mut Axis, f: &CanFrame) -> Result<bool, BackendError> {
        if !f.extended {
            return Ok(false);
        }
        let (kind, data, _host) = rs::split_id(f.id);
        // The motor's frames carry its id in the data field's low byte. They are taken whatever
        // host they are addressed to (as the vendor's C sample does): a motor answers motion
        // frames, which carry no host id, to the host it last heard from.
        if (data & 0xFF) as u8 != self.id {
            return Ok(false);
        }
        match kind {
            rs::FEEDBACK => self.on_feedback(axis, f)?,
            rs::FAULT => self.on_fault_frame(axis, f)?,
            rs::READ_PARAM => self.on_param(axis, f)?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn enable_step(&mut self, axis: &mut Axis, io: &mut dyn FrameIo) -> Result<(), BackendError> {
        if self.answered {
            self.answered = false;
            self.wait.restart();
            self.phase = match (self.phase, self.arm) {
                (Phase::Mode, Some(_)) => Phase::Timeout,
                _ => Phase::Power,
            };
        }
        let resend = self.wait.tick();
        match self.phase {
            Phase::Mode if resend => {
                io.send(&rs::read_param(self.id, self.host, rs::PARAM_RUN_MODE))
            }
            Phase::Timeout if resend => match self.arm {
                Some(f) => io.send(&f),
                None => Ok(()),
            },
            Phase::Power => self.power(axis, io, resend),
            Phase::Stiffen => match axis.measured() {
                Some(m) => self.follow(axis, io, m.position),
                None => Ok(()),
            },
            _ => Ok(()),
        }
    }

    fn command(&mut self, _axis: &Axis, t: Target) -> CanFrame {
        self.motion(&Motion {
            p: t.position as f32,
            v: t.velocity as f32,
            kp: if self.mode == Mode::Velocity {
                0.0
            } else {
                self.kp
            },
            kd: self.kd,
            t: t.torque as f32,
        })
    }

    fn disable(&mut self, _axis: &Axis, _rest: f64) -> (CanFrame, Option<CanFrame>) {
        (rs::stop(self.id, self.host, false), None)
    }

    fn reset(&mut self) {
        self.phase = Phase::Mode;
        self.wait.restart();
        self.answered = false;
        self.run = false;
        self.faults = 0;
        self.fault_word = 0;
        self.cleared = false;
    }

    /// Motion frames with kp = kd = 0 and no torque: the motor stays in run mode and answers
    /// every frame, its current loop told zero torque.
    fn can_be_compliant(&self) -> bool {
        true
    }

    fn compliant_command(&mut self, _axis: &Axis, at: f64) -> CanFrame {
        self.motion(&Motion {
            p: at as f32,
            ..Motion::default()
        })
    }

    /// Still in run mode: the next command with the gains, at the measured position.
    fn stiffen(&mut self) {
        self.phase = Phase::Stiffen;
    }
}
