//! An ODrive axis on CAN (CAN Simple): closed-loop control requested at the measured position,
//! inputs streamed (feeding the axis watchdog), faults from its heartbeat.

use super::codec::{self as odrive, Firmware};
use super::settings::Settings;
use crate::backend::bus::Mode;
use crate::backend::bus::can::{Axis, CanDrive, Measured, Target, Wait};
use crate::backend::frame::CanFrame;
use crate::backend::transport::FrameIo;
use crate::backend::{BackendError, FaultKind};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Clear errors, arm the watchdog, set the controller mode.
    Start,
    /// Request closed loop at the measured position until the heartbeat shows it.
    Power,
}

/// How long an axis error in the heartbeat is taken for one Clear_Errors has not reached yet
/// after the closed-loop request (a heartbeat already on its way, a busy bus, a slow host, an
/// E-stop input released late): ten of ODrive's default heartbeat periods (100 ms).
const DOUBT_MS: f64 = 1000.0;

pub struct OdriveDrive {
    node: u8,
    mode: Mode,
    firmware: Firmware,
    phase: Phase,
    wait: Wait,
    heartbeat: Option<odrive::Heartbeat>,
    requested: bool,
    /// Ticks since the first closed-loop request of this power step: a heartbeat with an error
    /// within [`DOUBT_MS`] of it is answered with Clear_Errors and the request again; only one
    /// after that faults.
    since_request: u32,
    doubt_ticks: u32,
    /// RxSdo writes that arm the axis watchdog at enable, and the one that disarms it.
    arm: Option<[CanFrame; 2]>,
    disarm: Option<CanFrame>,
}

impl OdriveDrive {
    /// `watchdog_ms`: the bus's drive watchdog (0: off), armed over CAN when the endpoints are
    /// known.
    pub fn new(node: u8, mode: Mode, s: &Settings, watchdog_ms: f64, rate_hz: f64) -> Self {
        let armed = s.endpoints.filter(|_| watchdog_ms > 0.0);
        Self {
            node,
            mode,
            firmware: s.firmware,
            phase: Phase::Start,
            wait: Wait::default(),
            heartbeat: None,
            requested: false,
            since_request: 0,
            doubt_ticks: (DOUBT_MS * rate_hz / 1000.0).ceil().clamp(1.0, 1e6) as u32,
            arm: armed.map(|(timeout, enable)| {
                [
                    odrive::write_endpoint(node, timeout, (watchdog_ms / 1000.0) as f32),
                    odrive::write_endpoint_bool(node, enable, true),
                ]
            }),
            disarm: armed.map(|(_, enable)| odrive::write_endpoint_bool(node, enable, false)),
        }
    }

    fn on_heartbeat(&mut self, axis: &Axis, f: &CanFrame) -> Result<(), BackendError> {
        let hb = odrive::decode_heartbeat(f.data()).ok_or(axis.fault(FaultKind::Protocol, f.id))?;
        self.heartbeat = Some(hb);
        // While enabling, the power step judges heartbeats after its request.
        if axis.ready() && hb.axis_error != 0 {
            let kind = if odrive::estop_requested(self.firmware, hb.axis_error) {
                FaultKind::DriveEStop
            } else {
                FaultKind::DriveFault
            };
            return Err(axis.fault(kind, hb.axis_error));
        }
        let state = u32::from(hb.axis_state);
        // Compliant: idle, or still in closed loop until it took the request.
        let expected = state == odrive::AXIS_STATE_CLOSED_LOOP_CONTROL
            || (axis.compliant() && state == odrive::AXIS_STATE_IDLE);
        if axis.ready() && !expected {
            return Err(axis.fault(FaultKind::DriveFault, state));
        }
        Ok(())
    }

    fn start(&mut self, axis: &mut Axis, io: &mut dyn FrameIo) -> Result<(), BackendError> {
        axis.restart_measuring();
        self.phase = Phase::Power;
        self.wait.restart();
        self.heartbeat = None;
        self.requested = false;
        let control = if self.mode == Mode::Velocity {
            odrive::CONTROL_MODE_VELOCITY
        } else {
            odrive::CONTROL_MODE_POSITION
        };
        io.send(&odrive::clear_errors(self.node, self.firmware))?;
        // The watchdog is fed from here on by the streamed setpoints.
        for f in self.arm.iter().flatten() {
            io.send(f)?;
        }
        io.send(&odrive::set_controller_mode(
            self.node,
            control,
            odrive::INPUT_MODE_PASSTHROUGH,
        ))
    }

    fn power(
        &mut self,
        axis: &mut Axis,
        io: &mut dyn FrameIo,
        resend: bool,
    ) -> Result<(), BackendError> {
        let Some(m) = axis.measured() else {
            return Ok(());
        };
        // The measured position until closed loop is asked for, then the one it had.
        let target = axis.power_target(m.position, self.requested);
        io.send(&self.standing(target))?;
        if !self.requested {
            self.since_request = 0;
        }
        self.since_request = self.since_request.saturating_add(1);
        if !self.requested || resend {
            axis.power_target(target, true);
            self.heartbeat = None;
            self.requested = true;
            return io.send(&odrive::set_axis_state(
                self.node,
                odrive::AXIS_STATE_CLOSED_LOOP_CONTROL,
            ));
        }
        if let Some(hb) = self.heartbeat {
            if hb.axis_error != 0 && self.since_request <= self.doubt_ticks {
                self.heartbeat = None;
                io.send(&odrive::clear_errors(self.node, self.firmware))?;
                return io.send(&odrive::set_axis_state(
                    self.node,
                    odrive::AXIS_STATE_CLOSED_LOOP_CONTROL,
                ));
            }
            if hb.axis_error != 0 {
                return Err(axis.fault(FaultKind::DriveFault, hb.axis_error));
            }
            if u32::from(hb.axis_state) == odrive::AXIS_STATE_CLOSED_LOOP_CONTROL {
                axis.become_ready(target);
            }
        }
        Ok(())
    }

    /// The input that keeps the axis at `position` (velocity 0 in velocity mode).
    fn standing(&self, position: f64) -> CanFrame {
        match self.mode {
            Mode::Velocity => odrive::set_input_vel(self.node, 0.0, 0.0),
            _ => odrive::set_input_pos(self.node, position as f32, 0.0, 0.0),
        }
    }
}

impl CanDrive for OdriveDrive {
    /// The heartbeat's axis state and axis error.
    fn words(&self) -> (u32, u32) {
        self.heartbeat
            .map_or((0, 0), |h| (u32::from(h.axis_state), h.axis_error))
    }

    fn accept(&mut self, axis: &mut Axis, f: &CanFrame) -> Result<bool, BackendError> {
        let (node, cmd) = odrive::split_id(f.id);
        if f.extended || node != self.node {
            return Ok(false);
        }
        match cmd {
            odrive::HEARTBEAT => self.on_heartbeat(axis, f)?,
            odrive::GET_ENCODER_ESTIMATES => {
                let e = odrive::decode_encoder_estimates(f.data())
                    .ok_or(axis.fault(FaultKind::Protocol, f.id))?;
                axis.measure(Measured {
                    position: f64::from(e.position),
                    velocity: f64::from(e.velocity),
                    torque: 0.0,
                });
            }
            _ => {}
        }
        Ok(true)
    }

    fn enable_step(&mut self, axis: &mut Axis, io: &mut dyn FrameIo) -> Result<(), BackendError> {
        let resend = self.wait.tick();
        match self.phase {
            Phase::Start => self.start(axis, io),
            Phase::Power => self.power(axis, io, resend),
        }
    }

    fn command(&mut self, _axis: &Axis, t: Target) -> CanFrame {
        match self.mode {
            Mode::Velocity => odrive::set_input_vel(self.node, t.velocity as f32, t.torque as f32),
            _ => odrive::set_input_pos(self.node, t.position as f32, t.velocity, t.torque),
        }
    }

    fn disable(&mut self, _axis: &Axis, _rest: f64) -> (CanFrame, Option<CanFrame>) {
        (
            odrive::set_axis_state(self.node, odrive::AXIS_STATE_IDLE),
            self.disarm,
        )
    }

    fn reset(&mut self) {
        self.phase = Phase::Start;
        self.wait.restart();
        self.requested = false;
    }

    /// Idle: no torque, encoder estimates still sent.
    fn can_be_compliant(&self) -> bool {
        true
    }

    fn torque_off(&self, _axis: &Axis) -> Option<CanFrame> {
        Some(odrive::set_axis_state(self.node, odrive::AXIS_STATE_IDLE))
    }

    /// The input kept at the measured position (and the watchdog fed) while idle.
    fn compliant_command(&mut self, _axis: &Axis, at: f64) -> CanFrame {
        self.standing(at)
    }

    /// Input position first, then closed loop, at the measured position.
    fn stiffen(&mut self) {
        self.phase = Phase::Power;
        self.wait.restart();
        self.requested = false;
    }
}
