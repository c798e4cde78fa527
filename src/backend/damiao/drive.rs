//! A Damiao motor on CAN (classic or FD): its registers checked (the scaling and MIT mode read
//! back, the TIMEOUT watchdog written), enabled — a latched error cleared first — at the measured
//! position, then one MIT command per tick, each answered with feedback carrying the motor's
//! state. Nothing in the sequence disables the motor: one still enabled (after a fault of the
//! loop, held meanwhile) keeps its torque and is taken over where it is.

use super::codec::{self as dm, RegisterReply};
use super::settings::Settings;
use crate::backend::bus::Mode;
use crate::backend::bus::can::{Axis, CanDrive, Measured, Target, Wait};
use crate::backend::frame::CanFrame;
use crate::backend::mit::{self, Ranges};
use crate::backend::transport::FrameIo;
use crate::backend::{BackendError, FaultKind};

/// A fault code for a motor that reports itself disabled while it should follow (state 0).
pub const DISABLED_CODE: u32 = 0x10;

/// How long error states are not believed after the clear: replies to frames sent before it
/// (three resend periods of a loaded bus).
const DOUBT_MS: f64 = 300.0;

/// What a register step's reply must show.
#[derive(Debug, Clone, Copy)]
enum Expect {
    /// A float register equal to the configuration's (the scaling).
    Float(f32),
    /// An integer register: the mode it must be in, or the value just written.
    Integer(u32),
}

/// One register step of the set-up: a read, or a write (whose echo must repeat it).
#[derive(Debug, Clone, Copy)]
struct RegisterStep {
    rid: u8,
    write: bool,
    expect: Expect,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Register step `n`.
    Register(usize),
    /// Enable (clearing a latched error) until the feedback shows the motor enabled.
    Power,
    /// Out of teach-in: following again from the measured position.
    Stiffen,
}

pub struct DamiaoDrive {
    id: u8,
    fd: bool,
    mode: Mode,
    ranges: Ranges,
    kp: f32,
    kd: f32,
    master_id: u32,
    steps: Vec<RegisterStep>,
    phase: Phase,
    wait: Wait,
    /// The awaited register replied since the last request.
    answered: bool,
    /// The state nibble of the last feedback.
    state: Option<u8>,
    /// A clear was sent in this power step, and ticks since then: error states within
    /// [`DOUBT_MS`] of it may predate it.
    cleared: bool,
    since_clear: u32,
    doubt_ticks: u32,
}

impl DamiaoDrive {
    /// `watchdog_ms`: the bus's drive watchdog (0: leave the TIMEOUT register as it is).
    pub fn new(id: u8, fd: bool, mode: Mode, s: &Settings, watchdog_ms: f64, rate_hz: f64) -> Self {
        let read = |rid, expect| RegisterStep {
            rid,
            write: false,
            expect,
        };
        let mut steps = vec![
            read(dm::RID_PMAX, Expect::Float(s.p_max)),
            read(dm::RID_VMAX, Expect::Float(s.v_max)),
            read(dm::RID_TMAX, Expect::Float(s.t_max)),
            read(dm::RID_CTRL_MODE, Expect::Integer(dm::CTRL_MODE_MIT)),
        ];
        if watchdog_ms > 0.0 {
            steps.push(RegisterStep {
                rid: dm::RID_TIMEOUT,
                write: true,
                expect: Expect::Integer(dm::timeout_register(watchdog_ms)),
            });
        }
        Self {
            id,
            fd,
            mode,
            ranges: s.ranges(),
            kp: s.kp as f32,
            kd: s.kd as f32,
            master_id: u32::from(s.master_id),
            steps,
            phase: Phase::Register(0),
            wait: Wait::default(),
            answered: false,
            state: None,
            cleared: false,
            since_clear: 0,
            doubt_ticks: (DOUBT_MS * rate_hz / 1000.0).ceil().clamp(1.0, 1e6) as u32,
        }
    }

    /// A frame to the motor: classic, or CAN-FD with the bit rate switch where it is set to FD.
    fn frame(&self, id: u32, data: &[u8; 8]) -> CanFrame {
        if self.fd {
            CanFrame::new_fd(id, false, data)
        } else {
            CanFrame::new(id, data)
        }
    }

    fn special(&self, data: &[u8; 8]) -> CanFrame {
        self.frame(u32::from(self.id), data)
    }

    fn request(&self, step: &RegisterStep) -> CanFrame {
        let (op, value) = match (step.write, step.expect) {
            (true, Expect::Integer(v)) => (dm::WRITE, v.to_le_bytes()),
            _ => (dm::READ, [0; 4]),
        };
        let mut data = [0u8; 8];
        data.copy_from_slice(dm::register(self.id, op, step.rid, value).data());
        self.frame(dm::REGISTER_ID, &data)
    }

    fn mit_frame(&self, c: &mit::Command) -> CanFrame {
        self.special(&mit::pack(c, &self.ranges))
    }

    /// A register reply during the register steps: the awaited one ends its step, a value that
    /// contradicts the configuration is a fault naming the register.
    fn on_register(&mut self, axis: &Axis, r: &RegisterReply) -> Result<(), BackendError> {
        let Phase::Register(n) = self.phase else {
            return Ok(());
        };
        let Some(step) = self.steps.get(n) else {
            return Ok(());
        };
        if r.rid != step.rid || step.write != (r.op == dm::WRITE) {
            return Ok(());
        }
        let agrees = match step.expect {
            // Equal as the f32 the register holds (a relative 1e-6 for values written through
            // other tools' decimal conversions).
            Expect::Float(want) => (r.float() - want).abs() <= 1e-6 * want.abs(),
            Expect::Integer(want) => r.integer() == want,
        };
        if !agrees {
            return Err(axis.fault(FaultKind::DriveFault, dm::mismatch_code(r.rid, r.integer())));
        }
        self.answered = true;
        Ok(())
    }

    fn on_feedback(&mut self, axis: &mut Axis, fb: &dm::Feedback) -> Result<(), BackendError> {
        self.state = Some(fb.state);
        if axis.ready() {
            if dm::is_error(fb.state) {
                return Err(axis.fault(FaultKind::DriveFault, u32::from(fb.state)));
            }
            if fb.state == dm::STATE_DISABLED {
                return Err(axis.fault(FaultKind::DriveFault, DISABLED_CODE));
            }
        }
        axis.measure(Measured {
            position: f64::from(fb.position),
            velocity: f64::from(fb.velocity),
            torque: f64::from(fb.torque),
        });
        Ok(())
    }

    /// Enable (after a clear when `clear`), measuring afresh from its answer.
    fn request_power(
        &mut self,
        axis: &mut Axis,
        io: &mut dyn FrameIo,
        clear: bool,
    ) -> Result<(), BackendError> {
        axis.restart_measuring();
        self.state = None;
        if clear {
            if !self.cleared {
                self.since_clear = 0;
            }
            self.cleared = true;
            io.send(&self.special(&dm::CLEAR_ERROR))?;
        }
        io.send(&self.special(&dm::ENABLE))
    }

    fn power(
        &mut self,
        axis: &mut Axis,
        io: &mut dyn FrameIo,
        resend: bool,
    ) -> Result<(), BackendError> {
        self.since_clear = self.since_clear.saturating_add(1);
        match (self.state, axis.measured()) {
            (Some(dm::STATE_ENABLED), Some(m)) => self.follow(axis, io, m.position),
            (Some(s), _) if dm::is_error(s) => {
                if self.cleared && self.since_clear > self.doubt_ticks {
                    return Err(axis.fault(FaultKind::DriveFault, u32::from(s)));
                }
                // A latched error (communication lost after an earlier run): cleared once,
                // and again with each resend.
                if !self.cleared || resend {
                    return self.request_power(axis, io, true);
                }
                Ok(())
            }
            _ if resend => self.request_power(axis, io, self.cleared),
            _ => Ok(()),
        }
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

impl CanDrive for DamiaoDrive {
    fn accept(&mut self, axis: &mut Axis, f: &CanFrame) -> Result<bool, BackendError> {
        if f.extended || f.id != self.master_id {
            return Ok(false);
        }
        let d = f.data();
        // Register replies come only while the set-up asks for them; any other frame then is
        // feedback (the motor sends nothing unasked).
        if matches!(self.phase, Phase::Register(_))
            && let Some(r) = dm::decode_register(d).filter(|r| r.motor == u16::from(self.id))
        {
            self.on_register(axis, &r)?;
            return Ok(true);
        }
        if d.first().map(|b| b & 0x0F) != Some(self.id & 0x0F) {
            return Ok(false);
        }
        let fb =
            dm::decode_feedback(d, &self.ranges).ok_or(axis.fault(FaultKind::Protocol, f.id))?;
        self.on_feedback(axis, &fb)?;
        Ok(true)
    }

    fn enable_step(&mut self, axis: &mut Axis, io: &mut dyn FrameIo) -> Result<(), BackendError> {
        if let Phase::Register(n) = self.phase
            && self.answered
        {
            self.phase = if n + 1 < self.steps.len() {
                Phase::Register(n + 1)
            } else {
                Phase::Power
            };
            self.wait.restart();
            self.answered = false;
        }
        let resend = self.wait.tick();
        match self.phase {
            Phase::Register(n) => match self.steps.get(n) {
                Some(step) if resend => io.send(&self.request(step)),
                _ => Ok(()),
            },
            Phase::Power => self.power(axis, io, resend),
            Phase::Stiffen => match axis.measured() {
                Some(m) => self.follow(axis, io, m.position),
                None => Ok(()),
            },
        }
    }

    fn command(&mut self, _axis: &Axis, t: Target) -> CanFrame {
        self.mit_frame(&mit::Command {
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
        (self.special(&dm::DISABLE), None)
    }

    fn reset(&mut self) {
        self.phase = Phase::Register(0);
        self.wait.restart();
        self.answered = false;
        self.state = None;
        self.cleared = false;
    }

    /// MIT commands with kp = kd = 0 and no feed-forward: the motor stays enabled and answers
    /// every frame, but its current loop is told zero torque.
    fn can_be_compliant(&self) -> bool {
        true
    }

    fn compliant_command(&mut self, _axis: &Axis, at: f64) -> CanFrame {
        self.mit_frame(&mit::Command {
            p: at as f32,
            ..mit::Command::default()
        })
    }

    /// Still enabled: the next command with the gains, at the measured position.
    fn stiffen(&mut self) {
        self.phase = Phase::Stiffen;
    }
}
