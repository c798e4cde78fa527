//! A Robstride or CyberGear motor on CAN (private protocol, motion mode): stopped with its fault
//! cleared, motion mode and the CAN timeout (the drive-side watchdog) written, enabled, then
//! one motion frame per tick, each answered with feedback carrying fault bits and mode.

use super::codec::{self as rs, Motion, Ranges};
use super::settings::Settings;
use crate::backend::bus::Mode;
use crate::backend::bus::can::{Axis, CanDrive, Measured, Target, Wait};
use crate::backend::frame::CanFrame;
use crate::backend::transport::FrameIo;
use crate::backend::{BackendError, FaultKind};

/// Fault codes: feedback fault bits (id bits 16–21, kept in place) flagged with bit 31; the
/// motor out of run mode while following: this flag with the mode. A fault frame's fault word
/// (bits 0–16) is the code as it is.
pub const FEEDBACK_FAULT: u32 = 0x8000_0000;
pub const LEFT_RUN_MODE: u32 = 0x4000_0000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Request `n` of the set-up, until the motor answers it.
    Request(usize),
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
    /// Stop with the fault cleared, motion mode, the CAN timeout (when armed), enable: each
    /// answered with a feedback frame.
    requests: Vec<CanFrame>,
    phase: Phase,
    wait: Wait,
    /// Feedback arrived since the last request.
    answered: bool,
    /// The mode of the last feedback.
    run: bool,
}

impl RobstrideDrive {
    /// `watchdog_ms`: the bus's drive watchdog (0: leave `canTimeout` as it is).
    pub fn new(id: u8, mode: Mode, s: &Settings, watchdog_ms: f64) -> Self {
        let host = s.host_id;
        let mut requests = vec![
            rs::stop(id, host, true),
            rs::write_param(id, host, rs::PARAM_RUN_MODE, [rs::RUN_MODE_MOTION, 0, 0, 0]),
        ];
        if watchdog_ms > 0.0 {
            let units = rs::can_timeout(watchdog_ms).to_le_bytes();
            requests.push(rs::write_param(id, host, rs::PARAM_CAN_TIMEOUT, units));
        }
        requests.push(rs::enable(id, host));
        Self {
            id,
            host,
            mode,
            ranges: s.ranges,
            kp: s.kp as f32,
            kd: s.kd as f32,
            requests,
            phase: Phase::Request(0),
            wait: Wait::default(),
            answered: false,
            run: false,
        }
    }

    /// Past the stop that clears faults: a fault the motor reports now is real.
    fn cleared(&self, axis: &Axis) -> bool {
        axis.ready() || self.phase != Phase::Request(0)
    }

    fn on_feedback(&mut self, axis: &mut Axis, f: &CanFrame) -> Result<(), BackendError> {
        let fb =
            rs::decode_feedback(f, &self.ranges).ok_or(axis.fault(FaultKind::Protocol, f.id))?;
        self.answered = true;
        self.run = fb.mode == rs::MODE_RUN;
        if fb.faults != 0 && self.cleared(axis) {
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
        if fault != 0 && self.cleared(axis) {
            return Err(axis.fault(FaultKind::DriveFault, fault));
        }
        Ok(())
    }

    fn motion(&self, c: &Motion) -> CanFrame {
        rs::motion(self.id, c, &self.ranges)
    }

    /// Following from the measured position.
    fn follow(&mut self, axis: &mut Axis, io: &mut dyn FrameIo) -> Result<(), BackendError> {
        match axis.measured() {
            Some(m) => {
                axis.become_ready(m.position);
                let f = self.command(axis, Target::at(m.position));
                io.send(&f)
            }
            None => Ok(()),
        }
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
        if (data & 0xFF) as u8 != self.id || !matches!(kind, rs::FEEDBACK | rs::FAULT) {
            return Ok(false);
        }
        if kind == rs::FEEDBACK {
            self.on_feedback(axis, f)?;
        } else {
            self.on_fault_frame(axis, f)?;
        }
        Ok(true)
    }

    fn enable_step(&mut self, axis: &mut Axis, io: &mut dyn FrameIo) -> Result<(), BackendError> {
        let Phase::Request(n) = self.phase else {
            return self.follow(axis, io);
        };
        let last = n + 1 == self.requests.len();
        if self.answered && last && self.run {
            return self.follow(axis, io);
        }
        if self.answered && !last {
            self.phase = Phase::Request(n + 1);
            self.wait.restart();
        }
        if self.wait.tick() {
            let Phase::Request(n) = self.phase else {
                return Ok(());
            };
            self.answered = false;
            if n == 0 {
                axis.restart_measuring();
            }
            if let Some(f) = self.requests.get(n) {
                return io.send(f);
            }
        }
        Ok(())
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
        self.phase = Phase::Request(0);
        self.wait.restart();
        self.answered = false;
        self.run = false;
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
