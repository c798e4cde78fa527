//! An MIT-mode motor on CAN: motor mode entered, then one packed command per tick, each answered
//! with position, velocity and torque.

use super::codec::{self as mit, Ranges};
use super::settings::Settings;
use crate::backend::bus::Mode;
use crate::backend::bus::can::{Axis, CanDrive, Measured, Target, Wait};
use crate::backend::frame::CanFrame;
use crate::backend::transport::FrameIo;
use crate::backend::{BackendError, FaultKind};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Enter motor mode.
    Start,
    /// Wait for its first reply, then hold there.
    Power,
}

pub struct MitDrive {
    id: u8,
    mode: Mode,
    ranges: Ranges,
    kp: f32,
    kd: f32,
    reply_id: u32,
    phase: Phase,
    wait: Wait,
}

impl MitDrive {
    pub fn new(id: u8, mode: Mode, s: &Settings) -> Self {
        Self {
            id,
            mode,
            ranges: s.ranges,
            kp: s.kp as f32,
            kd: s.kd as f32,
            reply_id: u32::from(s.reply_id),
            phase: Phase::Start,
            wait: Wait::default(),
        }
    }

    fn enter(&self) -> CanFrame {
        CanFrame::new(u32::from(self.id), &mit::ENTER_MOTOR_MODE)
    }
}

impl CanDrive for MitDrive {
    fn accept(&mut self, axis: &mut Axis, f: &CanFrame) -> Result<bool, BackendError> {
        // Replies come from the configured reply id with the motor's id in the first byte.
        if f.extended || f.id != self.reply_id || f.data().first() != Some(&self.id) {
            return Ok(false);
        }
        let r = mit::decode_reply(f.data(), &self.ranges)
            .ok_or(axis.fault(FaultKind::Protocol, f.id))?;
        if let Some(e) = r.error.filter(|&e| e != 0) {
            return Err(axis.fault(FaultKind::DriveFault, u32::from(e)));
        }
        axis.measure(Measured {
            position: f64::from(r.position),
            velocity: f64::from(r.velocity),
            torque: f64::from(r.torque),
        });
        Ok(true)
    }

    fn enable_step(&mut self, axis: &mut Axis, io: &mut dyn FrameIo) -> Result<(), BackendError> {
        let resend = self.wait.tick();
        match self.phase {
            Phase::Start => {
                axis.restart_measuring();
                self.phase = Phase::Power;
                self.wait.restart();
                io.send(&self.enter())
            }
            Phase::Power => {
                if let Some(m) = axis.measured() {
                    axis.become_ready(m.position);
                    let f = self.command(axis, Target::at(m.position));
                    return io.send(&f);
                }
                if resend && self.wait.ticks() > 1 {
                    io.send(&self.enter())?;
                }
                Ok(())
            }
        }
    }

    fn command(&mut self, _axis: &Axis, t: Target) -> CanFrame {
        let c = mit::Command {
            p: t.position as f32,
            v: t.velocity as f32,
            kp: if self.mode == Mode::Velocity {
                0.0
            } else {
                self.kp
            },
            kd: self.kd,
            t: t.torque as f32,
        };
        CanFrame::new(u32::from(self.id), &mit::pack(&c, &self.ranges))
    }

    fn disable(&mut self, _axis: &Axis, _rest: f64) -> (CanFrame, Option<CanFrame>) {
        (
            CanFrame::new(u32::from(self.id), &mit::EXIT_MOTOR_MODE),
            None,
        )
    }

    fn reset(&mut self) {
        self.phase = Phase::Start;
        self.wait.restart();
    }
}
