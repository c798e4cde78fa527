//! A CiA 402 drive in cyclic synchronous position mode, on a CAN bus: its set-up by SDO, the
//! power state machine walked to operation enabled at the measured position, RPDO1 targets
//! applied by the bus's SYNC, faults from its TPDO, EMCY and heartbeat.

use super::codec::{self as cia402, State};
use super::settings::BusSettings;
use crate::backend::bus::can::{Axis, CanDrive, CanService, Measured, Target, Wait};
use crate::backend::frame::CanFrame;
use crate::backend::transport::FrameIo;
use crate::backend::{BackendError, FaultKind};

/// `ms` as control ticks at `rate_hz`, at least one.
fn ticks(ms: f64, rate_hz: f64) -> u32 {
    (ms * rate_hz / 1000.0).ceil().clamp(1.0, 1e9) as u32
}

/// Where the drive is in its enable sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// NMT enter pre-operational, so a drive left operational accepts the PDO remapping.
    PreOperational,
    /// SDO `step` of the PDO/mode set-up.
    Configure(usize),
    /// NMT start.
    Start,
    /// Walk the power state machine to operation enabled at the measured position.
    Power,
}

fn counts(x: f64) -> i32 {
    if x.is_nan() {
        return 0;
    }
    x.round().clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i32
}

pub struct Cia402Drive {
    node: u8,
    setup: Box<[cia402::Step; cia402::SETUP_LEN]>,
    configured: bool,
    phase: Phase,
    wait: Wait,
    statusword: Option<u16>,
    last_cw: u16,
    /// Seen switched on in this power step: only then is "operation enabled" the answer to it (a
    /// TPDO still in flight from before a disable also says operation enabled).
    switched_on: bool,
    /// Ticks since the drive's last heartbeat.
    heartbeat_age: u32,
    heartbeat_timeout_ticks: u32,
}

impl Cia402Drive {
    /// `None` at a rate 0x60C2 cannot express (validation refuses it before).
    pub fn new(node: u8, bus: &BusSettings, watchdog_ms: f64, rate_hz: f64) -> Option<Self> {
        let options = cia402::Options {
            period: cia402::interpolation_period(rate_hz)?,
            sync_period_us: (1e6 / rate_hz).round() as u32,
            heartbeat_ms: bus.heartbeat_ms,
            master_node: bus.master_id,
            // The drives' heartbeat consumer time for motiond's heartbeat (0x1016), 0 when off.
            consumer_ms: watchdog_ms.ceil().clamp(0.0, 65535.0) as u16,
            on_connection_loss: bus.on_connection_loss,
        };
        Some(Self {
            node,
            setup: Box::new(cia402::setup(node, &options)),
            configured: false,
            phase: Phase::PreOperational,
            wait: Wait::default(),
            statusword: None,
            last_cw: 0,
            switched_on: false,
            heartbeat_age: 0,
            // Twice its period without a heartbeat: the drive is lost.
            heartbeat_timeout_ticks: ticks(2.0 * f64::from(bus.heartbeat_ms), rate_hz),
        })
    }

    fn on_tpdo(&mut self, axis: &mut Axis, t: cia402::Tpdo1) -> Result<(), BackendError> {
        self.statusword = Some(t.statusword);
        let state = cia402::state(t.statusword);
        let operating = match state {
            // Compliant: switched on (and operating until the drive has taken the switch-on
            // command) is where it is meant to be.
            State::SwitchedOn | State::OperationEnabled if axis.compliant() => true,
            State::OperationEnabled => t.statusword & cia402::SW_FOLLOWS_COMMAND != 0,
            _ => false,
        };
        axis.measure(Measured {
            position: f64::from(t.position),
            ..Measured::default()
        });
        if axis.ready() && !operating {
            // Quick stop active, unasked: the drive's own E-stop (its quick-stop input, STO
            // wired to it).
            let kind = if state == State::QuickStopActive {
                FaultKind::DriveEStop
            } else {
                FaultKind::DriveFault
            };
            return Err(axis.fault(kind, u32::from(t.statusword)));
        }
        Ok(())
    }

    fn on_heartbeat(&mut self, axis: &Axis, state: cia402::NmtState) -> Result<(), BackendError> {
        self.heartbeat_age = 0;
        if state == cia402::NmtState::BootUp {
            self.configured = false;
        }
        if axis.ready() && state != cia402::NmtState::Operational {
            let byte = match state {
                cia402::NmtState::BootUp => 0x00,
                cia402::NmtState::Stopped => 0x04,
                cia402::NmtState::Operational => 0x05,
                cia402::NmtState::PreOperational => 0x7F,
                cia402::NmtState::Other(b) => b,
            };
            return Err(axis.fault(FaultKind::DriveFault, 0x700 | u32::from(byte)));
        }
        Ok(())
    }

    fn on_sdo(&mut self, axis: &Axis, reply: cia402::SdoReply) -> Result<(), BackendError> {
        let Phase::Configure(step) = self.phase else {
            return Ok(());
        };
        let Some(w) = self.setup.get(step).copied() else {
            return Ok(());
        };
        let object = w.object();
        match (reply, w) {
            (cia402::SdoReply::DownloadOk { index, sub }, cia402::Step::Write(_))
                if (index, sub) == object => {}
            (
                cia402::SdoReply::UploadOk { index, sub, value },
                cia402::Step::Expect { value: want, .. },
            ) if (index, sub) == object => {
                if value != want {
                    // 0x6061 shows a mode other than the one set: the drive does not run CSP.
                    // Code: object index, value read.
                    let code = u32::from(index) << 16 | (value & 0xFFFF);
                    return Err(axis.fault(FaultKind::DriveFault, code));
                }
            }
            (cia402::SdoReply::Abort { code, .. }, _) => {
                return Err(axis.fault(FaultKind::SdoAbort, code));
            }
            _ => return Ok(()),
        }
        self.phase = Phase::Configure(step + 1);
        self.wait.restart();
        Ok(())
    }

    /// Walks the power state machine with target = measured position, so enabling never makes
    /// the drive jump.
    fn power_step(
        &mut self,
        axis: &mut Axis,
        io: &mut dyn FrameIo,
        resend: bool,
    ) -> Result<(), BackendError> {
        let (Some(sw), Some(m)) = (self.statusword, axis.measured()) else {
            // No TPDO yet: SYNC (sent by the bus) asks for it; repeat the NMT start.
            if resend && self.wait.ticks() > 1 {
                io.send(&cia402::nmt(cia402::NMT_START, self.node))?;
            }
            return Ok(());
        };
        let cw = match cia402::state(sw) {
            State::Fault if self.last_cw == cia402::CW_FAULT_RESET => cia402::CW_DISABLE_VOLTAGE,
            State::Fault => cia402::CW_FAULT_RESET,
            State::FaultReactionActive | State::QuickStopActive => cia402::CW_DISABLE_VOLTAGE,
            State::SwitchOnDisabled | State::NotReadyToSwitchOn | State::Unknown => {
                cia402::CW_SHUTDOWN
            }
            State::ReadyToSwitchOn => cia402::CW_SWITCH_ON,
            State::SwitchedOn => {
                self.switched_on = true;
                cia402::CW_ENABLE_OPERATION
            }
            State::OperationEnabled if self.switched_on => cia402::CW_ENABLE_OPERATION,
            // Not seen switched on yet: disable operation first, so that enabling ends on an
            // answer to this sequence's own command.
            State::OperationEnabled => cia402::CW_SWITCH_ON,
        };
        self.last_cw = cw;
        // From the enable operation on, the position the drive had then.
        let target = axis.power_target(m.position, cw == cia402::CW_ENABLE_OPERATION);
        io.send(&cia402::rpdo1(self.node, cw, counts(target)))?;
        if self.switched_on
            && cia402::state(sw) == State::OperationEnabled
            && sw & cia402::SW_FOLLOWS_COMMAND != 0
        {
            axis.become_ready(target);
        }
        Ok(())
    }
}

impl CanDrive for Cia402Drive {
    /// The statusword (faults arrive as EMCY, counted in the bus status).
    fn words(&self) -> (u32, u32) {
        (self.statusword.map_or(0, u32::from), 0)
    }

    /// A target takes effect at the next SYNC.
    fn applies_on_receipt(&self) -> bool {
        false
    }

    fn accept(&mut self, axis: &mut Axis, f: &CanFrame) -> Result<bool, BackendError> {
        let Some(msg) = cia402::classify(f, self.node) else {
            return Ok(false);
        };
        match msg {
            cia402::Message::Tpdo1(t) => self.on_tpdo(axis, t)?,
            cia402::Message::Heartbeat(state) => self.on_heartbeat(axis, state)?,
            cia402::Message::Emcy(e) => {
                let code = u32::from(e.code) | u32::from(e.register) << 16;
                match cia402::classify_emcy(&e) {
                    cia402::EmcyClass::Reset => {}
                    cia402::EmcyClass::Warning => axis.warning(code),
                    cia402::EmcyClass::Error => {
                        return Err(axis.fault(FaultKind::DriveFault, code));
                    }
                }
            }
            cia402::Message::Sdo(reply) => self.on_sdo(axis, reply)?,
        }
        Ok(true)
    }

    fn enable_step(&mut self, axis: &mut Axis, io: &mut dyn FrameIo) -> Result<(), BackendError> {
        let resend = self.wait.tick();
        match self.phase {
            Phase::PreOperational => {
                self.phase = Phase::Configure(0);
                self.wait.restart();
                io.send(&cia402::nmt(cia402::NMT_PRE_OPERATIONAL, self.node))
            }
            Phase::Configure(step) => {
                match self.setup.get(step) {
                    Some(w) if !self.configured => {
                        if resend {
                            io.send(&w.request(self.node))?;
                        }
                    }
                    _ => {
                        self.configured = true;
                        self.phase = Phase::Start;
                        self.wait.restart();
                    }
                }
                Ok(())
            }
            Phase::Start => {
                axis.restart_measuring();
                self.phase = Phase::Power;
                self.wait.restart();
                self.statusword = None;
                io.send(&cia402::nmt(cia402::NMT_START, self.node))
            }
            Phase::Power => self.power_step(axis, io, resend),
        }
    }

    fn command(&mut self, axis: &Axis, target: Target) -> CanFrame {
        // Only an enabled drive is told to operate; otherwise repeat the last command.
        if axis.ready() {
            self.last_cw = cia402::CW_ENABLE_OPERATION;
        }
        cia402::rpdo1(self.node, self.last_cw, counts(target.position))
    }

    fn disable(&mut self, _axis: &Axis, rest: f64) -> (CanFrame, Option<CanFrame>) {
        self.last_cw = cia402::CW_SHUTDOWN;
        (
            cia402::rpdo1(self.node, cia402::CW_SHUTDOWN, counts(rest)),
            None,
        )
    }

    fn reset(&mut self) {
        self.phase = if self.configured {
            Phase::Power
        } else {
            Phase::PreOperational
        };
        self.wait.restart();
        self.switched_on = false;
    }

    fn forget_measurements(&mut self) {
        self.statusword = None;
        self.heartbeat_age = 0;
        self.switched_on = false;
    }

    fn forget_configuration(&mut self) {
        self.configured = false;
    }

    /// Switched on (controlword 0x07): no torque, positions still reported.
    fn can_be_compliant(&self) -> bool {
        true
    }

    fn compliant_command(&mut self, _axis: &Axis, at: f64) -> CanFrame {
        self.last_cw = cia402::CW_SWITCH_ON;
        cia402::rpdo1(self.node, cia402::CW_SWITCH_ON, counts(at))
    }

    /// Back through enable operation from switched on, at the measured position.
    fn stiffen(&mut self) {
        self.phase = Phase::Power;
        self.wait.restart();
        self.switched_on = false;
    }

    fn check(&mut self, axis: &Axis, following: bool) -> Result<(), BackendError> {
        self.heartbeat_age = self.heartbeat_age.saturating_add(1);
        if following && self.heartbeat_age > self.heartbeat_timeout_ticks {
            let code = cia402::COB_HEARTBEAT + u32::from(self.node);
            return Err(axis.fault(FaultKind::HeartbeatLost, code));
        }
        Ok(())
    }
}

/// What a bus with CiA 402 drives sends once per tick: the SYNC that applies the tick's RPDOs,
/// and motiond's heartbeat for the drives' consumers (0x1016) when the watchdog is on.
pub struct Cia402Sync {
    master_id: u8,
    /// Ticks between motiond's heartbeats (three within each consumer time); 0: none.
    heartbeat_ticks: u32,
    /// Ticks since motiond's last heartbeat.
    heartbeat_wait: u32,
    /// The tick whose SYNC was sent: a hold in the same tick as a write adds no second SYNC.
    synced_tick: Option<u64>,
    /// The last `end_tick` sent a SYNC: the drives applied the targets sent before it.
    applied: bool,
}

impl Cia402Sync {
    pub fn new(bus: &BusSettings, watchdog_ms: f64, rate_hz: f64) -> Self {
        Self {
            master_id: bus.master_id,
            heartbeat_ticks: if watchdog_ms > 0.0 {
                ticks(watchdog_ms / 3.0, rate_hz).max(1)
            } else {
                0
            },
            heartbeat_wait: 0,
            synced_tick: None,
            applied: false,
        }
    }
}

impl CanService for Cia402Sync {
    fn end_tick(&mut self, tick: Option<u64>, io: &mut dyn FrameIo) -> Result<(), BackendError> {
        self.applied = false;
        if tick.is_none() || tick != self.synced_tick {
            self.synced_tick = tick;
            io.send(&cia402::sync())?;
            self.applied = true;
        }
        if self.heartbeat_ticks > 0 {
            self.heartbeat_wait += 1;
            if self.heartbeat_wait >= self.heartbeat_ticks {
                self.heartbeat_wait = 0;
                io.send(&cia402::master_heartbeat(self.master_id))?;
            }
        }
        Ok(())
    }

    fn applied(&self) -> bool {
        self.applied
    }
}
