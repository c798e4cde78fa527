//! A moteus controller on CAN-FD: stopped (which clears a fault), then position mode at the
//! measured position; each tick one command with its query, answered with mode, position,
//! velocity, torque and fault; the drive's watchdog (0x027) in every command. Teach-in: mode
//! stopped (no torque, the encoder still read) with query-only frames, so a fault during it still
//! shows.

use super::codec::{self as moteus, Command};
use super::settings::Settings;
use crate::backend::bus::Mode;
use crate::backend::bus::can::{Axis, CanDrive, Measured, Target, Wait};
use crate::backend::frame::CanFrame;
use crate::backend::transport::FrameIo;
use crate::backend::{BackendError, FaultKind};

/// The host's source id in the arbitration ids (moteus' libraries use 0 too).
pub const SOURCE: u8 = 0;

/// A drive fault that is a mode, not a fault code: `MODE_CODE | mode` (0x10B: the drive's
/// watchdog expired).
pub const MODE_CODE: u32 = 0x100;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Send stop: it clears a fault.
    Start,
    /// Wait for a report of mode stopped.
    Stopped,
    /// Command position mode at the measured position until the drive reports it.
    Power,
}

pub struct MoteusDrive {
    id: u8,
    mode: Mode,
    settings: Settings,
    /// Seconds; NaN: no timeout.
    watchdog_s: f32,
    phase: Phase,
    wait: Wait,
    /// The mode of the last report since the last request.
    reported: Option<u8>,
    /// The last report's fault register.
    fault: u8,
    /// A fault reported just after the stop may predate it: the next report decides.
    doubted: bool,
}

impl MoteusDrive {
    /// `watchdog_ms`: the bus's drive watchdog (0: off).
    pub fn new(id: u8, mode: Mode, settings: Settings, watchdog_ms: f64) -> Self {
        Self {
            id,
            mode,
            settings,
            watchdog_s: if watchdog_ms > 0.0 {
                (watchdog_ms / 1000.0) as f32
            } else {
                f32::NAN
            },
            phase: Phase::Start,
            wait: Wait::default(),
            reported: None,
            fault: 0,
            doubted: false,
        }
    }

    fn stop(&self) -> CanFrame {
        moteus::stop(SOURCE, self.id)
    }

    /// Position mode at `t` (drive units: output revolutions, rev/s, N·m); velocity drives
    /// follow the velocity from where they are (position "use the current one").
    fn position(&self, t: Target) -> CanFrame {
        let position = if self.mode == Mode::Velocity {
            f32::NAN
        } else {
            t.position as f32
        };
        moteus::position(
            SOURCE,
            self.id,
            &Command {
                position,
                velocity: t.velocity as f32,
                feedforward_torque: t.torque as f32,
                kp_scale: self.settings.kp_scale,
                kd_scale: self.settings.kd_scale,
                maximum_torque: self.settings.max_torque,
                watchdog_timeout: self.watchdog_s,
            },
        )
    }

    /// A report while the drive follows (or is compliant): anything but the mode it was told is a
    /// fault.
    fn check_following(&self, axis: &Axis, mode: u8) -> Result<(), BackendError> {
        let expected =
            mode == moteus::MODE_POSITION || (axis.compliant() && mode == moteus::MODE_STOPPED);
        match mode {
            _ if expected => Ok(()),
            moteus::MODE_FAULT => Err(axis.fault(FaultKind::DriveFault, u32::from(self.fault))),
            other => Err(axis.fault(FaultKind::DriveFault, MODE_CODE | u32::from(other))),
        }
    }

    fn stopped_step(
        &mut self,
        axis: &mut Axis,
        io: &mut dyn FrameIo,
        resend: bool,
    ) -> Result<(), BackendError> {
        match self.reported.take() {
            Some(moteus::MODE_STOPPED) if axis.measured().is_some() => {
                self.phase = Phase::Power;
                self.wait.restart();
                self.power_step(axis, io)
            }
            Some(moteus::MODE_FAULT) if !self.doubted => {
                self.doubted = true;
                io.send(&self.stop())
            }
            Some(moteus::MODE_FAULT) => {
                Err(axis.fault(FaultKind::DriveFault, u32::from(self.fault)))
            }
            _ if resend && self.wait.ticks() > 1 => io.send(&self.stop()),
            _ => Ok(()),
        }
    }

    fn power_step(&mut self, axis: &mut Axis, io: &mut dyn FrameIo) -> Result<(), BackendError> {
        let Some(m) = axis.measured() else {
            return Ok(());
        };
        // The position it was first told until it follows: a later report may lag it (a hand
        // still moving a joint that stiffens), and the controller holds what it was told.
        let target = axis.power_target(m.position, true);
        match self.reported.take() {
            Some(moteus::MODE_POSITION) => {
                axis.become_ready(target);
                io.send(&self.position(Target::at(target)))
            }
            // Entering position mode faulted (outside its limits, not calibrated): as reported.
            Some(moteus::MODE_FAULT) => {
                Err(axis.fault(FaultKind::DriveFault, u32::from(self.fault)))
            }
            _ => io.send(&self.position(Target::at(target))),
        }
    }
}

impl CanDrive for MoteusDrive {
    fn accept(&mut self, axis: &mut Axis, f: &CanFrame) -> Result<bool, BackendError> {
        let reply = match moteus::decode_reply(f, SOURCE) {
            Some(Ok(r)) if r.id == self.id => r,
            Some(Err(())) if f.id >> 8 & 0x7F == u32::from(self.id) => {
                return Err(axis.fault(FaultKind::Protocol, f.id));
            }
            _ => return Ok(false),
        };
        axis.measure(Measured {
            position: f64::from(reply.position),
            velocity: f64::from(reply.velocity),
            torque: f64::from(reply.torque),
        });
        self.reported = Some(reply.mode);
        self.fault = reply.fault;
        if axis.ready() {
            self.check_following(axis, reply.mode)?;
        }
        Ok(true)
    }

    fn enable_step(&mut self, axis: &mut Axis, io: &mut dyn FrameIo) -> Result<(), BackendError> {
        let resend = self.wait.tick();
        match self.phase {
            Phase::Start => {
                axis.restart_measuring();
                self.phase = Phase::Stopped;
                self.wait.restart();
                self.reported = None;
                self.doubted = false;
                io.send(&self.stop())
            }
            Phase::Stopped => self.stopped_step(axis, io, resend),
            Phase::Power => self.power_step(axis, io),
        }
    }

    fn command(&mut self, _axis: &Axis, target: Target) -> CanFrame {
        self.position(target)
    }

    fn disable(&mut self, _axis: &Axis, _rest: f64) -> (CanFrame, Option<CanFrame>) {
        (self.stop(), None)
    }

    fn reset(&mut self) {
        self.phase = Phase::Start;
        self.wait.restart();
        self.reported = None;
    }

    fn forget_measurements(&mut self) {
        self.reported = None;
    }

    /// Mode stopped: no torque, the encoder still read and reported.
    fn can_be_compliant(&self) -> bool {
        true
    }

    fn torque_off(&self, _axis: &Axis) -> Option<CanFrame> {
        Some(self.stop())
    }

    /// The query alone: a stop each tick would also clear a fault that arises meanwhile.
    fn compliant_command(&mut self, _axis: &Axis, _at: f64) -> CanFrame {
        moteus::query(SOURCE, self.id)
    }

    /// Position mode again at the measured position, once a report shows it.
    fn stiffen(&mut self) {
        self.phase = Phase::Power;
        self.wait.restart();
        self.reported = None;
    }
}
