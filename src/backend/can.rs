//! CAN drives: CiA 402 (CSP), ODrive CAN Simple and MIT mode over any [`FrameIo`] — a SocketCAN
//! raw socket, an SLCAN serial adapter ([`crate::backend::serial::SlcanIo`]) or an in-memory bus
//! for tests.
//!
//! Each drive runs a small per-tick state machine driven by `enable()`, so a drive always comes up
//! targeting its measured position. Frames are `Copy` values; nothing here allocates after
//! construction.

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};

use crate::backend::proto::Units;
use crate::backend::proto::{CanFrame, cia402, mit, odrive};
use crate::backend::status::{BusStatus, LinkState, LinkStatus};
use crate::backend::{BackendError, FaultKind, Feedback, Readiness};
use crate::config::bus::{BusJoint, Protocol};
use crate::trajectory::Setpoint;

use super::buses::Mode;

/// A CAN transport: non-blocking send and receive of classic frames.
pub trait FrameIo: Send {
    /// Queues one frame; a full queue is [`FaultKind::QueueFull`], never a wait.
    fn send(&mut self, frame: &CanFrame) -> Result<(), BackendError>;
    /// The next received frame, `None` when nothing is waiting.
    fn recv(&mut self) -> Result<Option<CanFrame>, BackendError>;
    /// Once per control tick, after the tick's frames: transport housekeeping (SLCAN polls its
    /// adapter's status flags here).
    fn end_tick(&mut self) -> Result<(), BackendError> {
        Ok(())
    }
    /// Conditions the transport reported since the last call that are not faults, in its own
    /// code (SLCAN: the adapter's status flags); 0 when none.
    fn take_warnings(&mut self) -> u32 {
        0
    }
    /// Opens the interface or adapter again after it disappeared; only on enable after a lost
    /// device, never while streaming.
    fn reopen(&mut self) -> Result<(), BackendError> {
        Err(BackendError::new(FaultKind::DeviceLost))
    }
    /// After a `send` that returned `Err`: whether the frame began going out and its end follows
    /// (a serial line never cuts a frame short), so it reaches the bus whole after all.
    fn finishing(&self) -> bool {
        false
    }
}

/// Maps an OS error of a bus write or read to the fault it means.
pub fn io_fault(e: &io::Error) -> BackendError {
    let code = e.raw_os_error().unwrap_or(0);
    let kind = if e.kind() == io::ErrorKind::WouldBlock || code == libc::ENOBUFS {
        FaultKind::QueueFull
    } else if matches!(
        code,
        libc::EIO
            | libc::ENXIO
            | libc::ENODEV
            | libc::ENETDOWN
            | libc::EBADF
            | libc::EPIPE
            | libc::ENOTTY
    ) {
        FaultKind::DeviceLost
    } else {
        FaultKind::Write
    };
    BackendError {
        kind,
        dof: None,
        code: code as u32,
    }
}

/// A SocketCAN raw socket in non-blocking mode, reporting error frames (bus-off, controller
/// problems) as [`FaultKind::BusOff`].
pub struct SocketCanIo {
    socket: socketcan::CanSocket,
    interface: String,
}

impl SocketCanIo {
    pub fn open(interface: &str) -> io::Result<Self> {
        Ok(Self {
            socket: Self::socket(interface)?,
            interface: interface.to_string(),
        })
    }

    fn socket(interface: &str) -> io::Result<socketcan::CanSocket> {
        use socketcan::{Socket, SocketOptions};
        let socket = socketcan::CanSocket::open(interface)?;
        socket.set_nonblocking(true)?;
        socket.set_error_filter_accept_all()?;
        Ok(socket)
    }
}

impl FrameIo for SocketCanIo {
    fn send(&mut self, frame: &CanFrame) -> Result<(), BackendError> {
        use socketcan::{EmbeddedFrame, ExtendedId, Id, Socket, StandardId};
        let id: Option<Id> = if frame.extended {
            ExtendedId::new(frame.id).map(Id::Extended)
        } else {
            u16::try_from(frame.id)
                .ok()
                .and_then(StandardId::new)
                .map(Id::Standard)
        };
        let f = id
            .and_then(|id| socketcan::CanFrame::new(id, frame.data()))
            .ok_or(BackendError::new(FaultKind::Protocol))?;
        self.socket.write_frame(&f).map_err(|e| io_fault(&e))
    }

    fn recv(&mut self) -> Result<Option<CanFrame>, BackendError> {
        use socketcan::{EmbeddedFrame, Frame, Socket};
        loop {
            return match self.socket.read_frame() {
                Ok(socketcan::CanFrame::Data(d)) => Ok(Some(if d.is_extended() {
                    CanFrame::new_extended(d.raw_id(), d.data())
                } else {
                    CanFrame::new(d.raw_id(), d.data())
                })),
                Ok(socketcan::CanFrame::Remote(_)) => continue,
                Ok(socketcan::CanFrame::Error(e)) => Err(BackendError {
                    kind: FaultKind::BusOff,
                    dof: None,
                    code: e.error_bits(),
                }),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
                Err(e) => Err(io_fault(&e)),
            };
        }
    }

    fn reopen(&mut self) -> Result<(), BackendError> {
        self.socket = Self::socket(&self.interface).map_err(|e| BackendError {
            kind: FaultKind::DeviceLost,
            dof: None,
            code: e.raw_os_error().unwrap_or(0) as u32,
        })?;
        Ok(())
    }
}

#[derive(Debug, Default)]
struct MemoryShared {
    queues: [VecDeque<CanFrame>; 2],
    closed: bool,
}

/// One end of an in-memory CAN bus (tests and benchmarks): frames sent on one end are received on
/// the other. Bounded like a real transmit queue; [`MemoryIo::close`] makes both ends report
/// [`FaultKind::DeviceLost`].
#[derive(Debug, Clone)]
pub struct MemoryIo {
    shared: Arc<Mutex<MemoryShared>>,
    side: usize,
    capacity: usize,
}

/// Two connected ends with `capacity` frames of queue in each direction.
pub fn memory_pair(capacity: usize) -> (MemoryIo, MemoryIo) {
    let shared = Arc::new(Mutex::new(MemoryShared {
        queues: [
            VecDeque::with_capacity(capacity),
            VecDeque::with_capacity(capacity),
        ],
        closed: false,
    }));
    (
        MemoryIo {
            shared: shared.clone(),
            side: 0,
            capacity,
        },
        MemoryIo {
            shared,
            side: 1,
            capacity,
        },
    )
}

impl MemoryIo {
    pub fn close(&self) {
        if let Ok(mut s) = self.shared.lock() {
            s.closed = true;
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut MemoryShared) -> T) -> Result<T, BackendError> {
        let mut s = self
            .shared
            .lock()
            .map_err(|_| BackendError::new(FaultKind::DeviceLost))?;
        if s.closed {
            return Err(BackendError::new(FaultKind::DeviceLost));
        }
        Ok(f(&mut s))
    }
}

impl FrameIo for MemoryIo {
    fn send(&mut self, frame: &CanFrame) -> Result<(), BackendError> {
        let (side, capacity) = (self.side, self.capacity);
        let queued = self.with(|s| {
            let q = &mut s.queues[side];
            if q.len() >= capacity {
                return false;
            }
            q.push_back(*frame);
            true
        })?;
        if queued {
            Ok(())
        } else {
            Err(BackendError::new(FaultKind::QueueFull))
        }
    }

    fn recv(&mut self) -> Result<Option<CanFrame>, BackendError> {
        let other = 1 - self.side;
        self.with(|s| s.queues[other].pop_front())
    }
}

/// Where a drive is in its enable sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// CiA 402: NMT enter pre-operational, so a drive left operational accepts the PDO remapping.
    PreOperational,
    /// CiA 402: SDO `step` of the PDO/mode setup.
    Configure(usize),
    /// Send the protocol's start request (NMT start, ODrive mode, MIT enter).
    Start,
    /// Bring the drive to following its measured position.
    Power,
    Ready,
}

enum Kind {
    Cia402 {
        setup: Box<[cia402::Step; cia402::SETUP_LEN]>,
        configured: bool,
        statusword: Option<u16>,
        last_cw: u16,
        /// Seen switched on in this power step: only then is "operation enabled" the answer to
        /// it (a TPDO still in flight from before a disable also says operation enabled).
        switched_on: bool,
        /// Ticks since the drive's last heartbeat.
        heartbeat_age: u32,
    },
    Odrive {
        heartbeat: Option<odrive::Heartbeat>,
        requested: bool,
        /// The first heartbeat after the request showed an error: it may have been on its way
        /// before Clear_Errors was taken, so the next one decides.
        doubted: bool,
        firmware: odrive::Firmware,
        /// RxSdo writes that arm the axis watchdog at enable, and the one that disarms it.
        arm: Option<[CanFrame; 2]>,
        disarm: Option<CanFrame>,
    },
    Mit {
        ranges: mit::Ranges,
        kp: f32,
        kd: f32,
        reply_id: u32,
    },
}

/// How a CAN bus runs, from its configuration and the control rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CanSettings {
    pub rate_hz: f64,
    /// Ticks without feedback before a drive faults.
    pub timeout_ticks: u32,
    /// The drives' own watchdog in ms (0: off).
    pub watchdog_ms: f64,
    pub cia402: cia402::settings::BusSettings,
}

impl CanSettings {
    fn ticks(&self, ms: f64) -> u32 {
        (ms * self.rate_hz / 1000.0).ceil().clamp(1.0, 1e9) as u32
    }

    /// Ticks without a CiA 402 heartbeat before the drive is lost: twice its period.
    fn heartbeat_timeout_ticks(&self) -> u32 {
        self.ticks(2.0 * f64::from(self.cia402.heartbeat_ms))
    }

    /// The drives' heartbeat consumer time for motiond's heartbeat (0x1016), 0 when off.
    fn consumer_ms(&self) -> u16 {
        self.watchdog_ms.ceil().clamp(0.0, 65535.0) as u16
    }

    /// Ticks between motiond's own heartbeats: three within each consumer time.
    fn master_heartbeat_ticks(&self) -> u32 {
        self.ticks(self.watchdog_ms / 3.0).max(1)
    }
}

/// Measured state in drive units: position, velocity, torque.
#[derive(Debug, Clone, Copy, Default)]
struct Measured {
    position: f64,
    velocity: f64,
    torque: f64,
}

struct Drive {
    index: usize,
    id: u8,
    units: Units,
    /// Joint torque → drive torque (direction / gear ratio).
    torque_scale: f64,
    inertia: f64,
    mode: Mode,
    kind: Kind,
    phase: Phase,
    measured: Option<Measured>,
    fresh: bool,
    age: u32,
    /// Latched hold target in drive units.
    hold: Option<f64>,
    /// Last commanded position in drive units.
    last: f64,
    /// The drive was enabled at least once, so `last` is what it was told to be at.
    commanded: bool,
    /// Ticks spent in the current phase (for resends).
    wait: u32,
    /// Teach-in: enabled but without torque (CiA 402 switched on, ODrive idle), reporting
    /// positions and told to be where it is measured.
    compliant: bool,
    /// Out of teach-in: stepping back to following (the enable's power step, from the measured
    /// position) on every write and hold until it follows.
    stiffening: bool,
    /// Power asked for (CiA 402 enable operation, ODrive closed loop): the target it was given
    /// then, in drive units, kept until it follows — a drive that takes power holds there, and
    /// following the measured position meanwhile would echo its own lagging report back.
    power_target: Option<f64>,
    /// The last write or hold reached it: its frame went out (a CiA 402 drive: and the SYNC that
    /// applies it). What [`CanBus::taken`] reports after a failed one.
    took: bool,
    status: Arc<LinkStatus>,
}

/// Ticks between resends of an unanswered request during enable.
const RESEND_TICKS: u32 = 100;
/// Frames processed per read, so a babbling bus cannot stall the loop.
const MAX_FRAMES_PER_READ: usize = 512;

fn fault(kind: FaultKind, dof: usize, code: u32) -> BackendError {
    BackendError {
        kind,
        dof: u16::try_from(dof).ok(),
        code,
    }
}

fn counts(x: f64) -> i32 {
    if x.is_nan() {
        return 0;
    }
    x.round().clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i32
}

impl Drive {
    /// `None` for a protocol that is not spoken on CAN, or a CiA 402 drive at a rate 0x60C2
    /// cannot express (validation refuses both before a bus is built).
    fn new(j: &BusJoint, index: usize, mode: Mode, settings: &CanSettings) -> Option<Self> {
        let kind = match j.protocol {
            Protocol::Cia402 => Kind::Cia402 {
                setup: Box::new(cia402::setup(
                    j.id,
                    &cia402::Options {
                        period: cia402::interpolation_period(settings.rate_hz)?,
                        sync_period_us: (1e6 / settings.rate_hz).round() as u32,
                        heartbeat_ms: settings.cia402.heartbeat_ms,
                        master_node: settings.cia402.master_id,
                        consumer_ms: settings.consumer_ms(),
                        on_connection_loss: settings.cia402.on_connection_loss,
                    },
                )),
                configured: false,
                statusword: None,
                last_cw: 0,
                switched_on: false,
                heartbeat_age: 0,
            },
            Protocol::Odrive(odrive::settings::Settings {
                firmware,
                endpoints,
            }) => {
                let armed = endpoints.filter(|_| settings.watchdog_ms > 0.0);
                Kind::Odrive {
                    heartbeat: None,
                    requested: false,
                    doubted: false,
                    firmware,
                    arm: armed.map(|(timeout, enable)| {
                        [
                            odrive::write_endpoint(
                                j.id,
                                timeout,
                                (settings.watchdog_ms / 1000.0) as f32,
                            ),
                            odrive::write_endpoint_bool(j.id, enable, true),
                        ]
                    }),
                    disarm: armed
                        .map(|(_, enable)| odrive::write_endpoint_bool(j.id, enable, false)),
                }
            }
            Protocol::Mit(mit::settings::Settings {
                ranges,
                kp,
                kd,
                reply_id,
            }) => Kind::Mit {
                ranges,
                kp: kp as f32,
                kd: kd as f32,
                reply_id: u32::from(reply_id),
            },
            Protocol::Dynamixel => return None,
        };
        let phase = match kind {
            Kind::Cia402 { .. } => Phase::PreOperational,
            _ => Phase::Start,
        };
        Some(Drive {
            index,
            id: j.id,
            units: j.units,
            torque_scale: j.direction / j.gear_ratio,
            inertia: j.inertia,
            mode,
            kind,
            phase,
            measured: None,
            fresh: false,
            age: 0,
            hold: None,
            last: j.units.offset,
            commanded: false,
            wait: 0,
            compliant: false,
            stiffening: false,
            power_target: None,
            took: false,
            status: Arc::default(),
        })
    }

    /// Drops what was measured before: an enable sequence starts from fresh reports only.
    fn forget_measurements(&mut self) {
        self.measured = None;
        self.fresh = false;
        if let Kind::Cia402 {
            statusword,
            heartbeat_age,
            switched_on,
            ..
        } = &mut self.kind
        {
            *statusword = None;
            *heartbeat_age = 0;
            *switched_on = false;
        }
    }

    /// Back to the start of the enable sequence after a fault or disable (configuration kept).
    fn reset(&mut self) {
        if self.hold.is_none() {
            self.hold = Some(self.rest_target());
        }
        self.forget_measurements();
        self.compliant = false;
        self.stiffening = false;
        self.power_target = None;
        self.phase = match self.kind {
            Kind::Cia402 {
                configured: false, ..
            } => Phase::PreOperational,
            Kind::Cia402 { .. } => Phase::Power,
            _ => Phase::Start,
        };
        self.wait = 0;
        match &mut self.kind {
            Kind::Odrive { requested, .. } => *requested = false,
            Kind::Cia402 { switched_on, .. } => *switched_on = false,
            Kind::Mit { .. } => {}
        }
    }

    /// The link was lost: the drive may have been power-cycled meanwhile with its boot-up unseen,
    /// so a CiA 402 drive is configured again from NMT pre-operational on.
    fn forget_configuration(&mut self) {
        if let Kind::Cia402 { configured, .. } = &mut self.kind {
            *configured = false;
        }
        self.reset();
    }

    fn measure(&mut self, m: Measured) {
        self.measured = Some(m);
        self.fresh = true;
    }

    /// Applies a received frame if it is this drive's; `Ok(true)` when consumed.
    fn accept(&mut self, f: &CanFrame) -> Result<bool, BackendError> {
        let ready = self.phase == Phase::Ready;
        let compliant = self.compliant;
        let index = self.index;
        match &mut self.kind {
            Kind::Cia402 {
                setup,
                configured,
                statusword,
                heartbeat_age,
                ..
            } => {
                let Some(msg) = cia402::classify(f, self.id) else {
                    return Ok(false);
                };
                if let cia402::Message::Heartbeat(_) = msg {
                    *heartbeat_age = 0;
                }
                match msg {
                    cia402::Message::Tpdo1(t) => {
                        *statusword = Some(t.statusword);
                        let operating = match cia402::state(t.statusword) {
                            // Compliant: switched on (and operating until the drive has taken
                            // the switch-on command) is where it is meant to be.
                            cia402::State::SwitchedOn if compliant => true,
                            cia402::State::OperationEnabled if compliant => true,
                            cia402::State::OperationEnabled => {
                                t.statusword & cia402::SW_FOLLOWS_COMMAND != 0
                            }
                            _ => false,
                        };
                        self.measured = Some(Measured {
                            position: f64::from(t.position),
                            ..Measured::default()
                        });
                        self.fresh = true;
                        if ready && !operating {
                            // Quick stop active, unasked: the drive's own E-stop (its quick-stop
                            // input, STO wired to it).
                            let kind =
                                if cia402::state(t.statusword) == cia402::State::QuickStopActive {
                                    FaultKind::DriveEStop
                                } else {
                                    FaultKind::DriveFault
                                };
                            return Err(fault(kind, index, u32::from(t.statusword)));
                        }
                    }
                    cia402::Message::Heartbeat(state) => {
                        if state == cia402::NmtState::BootUp {
                            *configured = false;
                        }
                        if ready && state != cia402::NmtState::Operational {
                            let byte = match state {
                                cia402::NmtState::BootUp => 0x00,
                                cia402::NmtState::Stopped => 0x04,
                                cia402::NmtState::Operational => 0x05,
                                cia402::NmtState::PreOperational => 0x7F,
                                cia402::NmtState::Other(b) => b,
                            };
                            return Err(fault(FaultKind::DriveFault, index, 0x700 | byte as u32));
                        }
                    }
                    cia402::Message::Emcy(e) => {
                        let code = u32::from(e.code) | u32::from(e.register) << 16;
                        match cia402::classify_emcy(&e) {
                            cia402::EmcyClass::Reset => {}
                            cia402::EmcyClass::Warning => self.status.warning(code),
                            cia402::EmcyClass::Error => {
                                return Err(fault(FaultKind::DriveFault, index, code));
                            }
                        }
                    }
                    cia402::Message::Sdo(reply) => {
                        if let Phase::Configure(step) = self.phase {
                            let Some(w) = setup.get(step) else {
                                return Ok(true);
                            };
                            let object = w.object();
                            match (reply, *w) {
                                (
                                    cia402::SdoReply::DownloadOk { index: i, sub },
                                    cia402::Step::Write(_),
                                ) if (i, sub) == object => {
                                    self.phase = Phase::Configure(step + 1);
                                    self.wait = 0;
                                }
                                (
                                    cia402::SdoReply::UploadOk {
                                        index: i,
                                        sub,
                                        value,
                                    },
                                    cia402::Step::Expect { value: want, .. },
                                ) if (i, sub) == object => {
                                    if value != want {
                                        // 0x6061 shows a mode other than the one set: the drive
                                        // does not run CSP. Code: object index, value read.
                                        return Err(fault(
                                            FaultKind::DriveFault,
                                            index,
                                            u32::from(i) << 16 | (value & 0xFFFF),
                                        ));
                                    }
                                    self.phase = Phase::Configure(step + 1);
                                    self.wait = 0;
                                }
                                (cia402::SdoReply::Abort { code, .. }, _) => {
                                    return Err(fault(FaultKind::SdoAbort, index, code));
                                }
                                _ => {}
                            }
                        }
                    }
                }
                Ok(true)
            }
            Kind::Odrive {
                heartbeat,
                firmware,
                ..
            } => {
                let (node, cmd) = odrive::split_id(f.id);
                if f.extended || node != self.id {
                    return Ok(false);
                }
                match cmd {
                    odrive::HEARTBEAT => {
                        let hb = odrive::decode_heartbeat(f.data()).ok_or(fault(
                            FaultKind::Protocol,
                            index,
                            f.id,
                        ))?;
                        *heartbeat = Some(hb);
                        // While enabling, the power step judges heartbeats after its request.
                        if ready && hb.axis_error != 0 {
                            let kind = if odrive::estop_requested(*firmware, hb.axis_error) {
                                FaultKind::DriveEStop
                            } else {
                                FaultKind::DriveFault
                            };
                            return Err(fault(kind, index, hb.axis_error));
                        }
                        let state = u32::from(hb.axis_state);
                        // Compliant: idle, or still in closed loop until it took the request.
                        let expected = state == odrive::AXIS_STATE_CLOSED_LOOP_CONTROL
                            || (compliant && state == odrive::AXIS_STATE_IDLE);
                        if ready && !expected {
                            return Err(fault(
                                FaultKind::DriveFault,
                                index,
                                u32::from(hb.axis_state),
                            ));
                        }
                    }
                    odrive::GET_ENCODER_ESTIMATES => {
                        let e = odrive::decode_encoder_estimates(f.data()).ok_or(fault(
                            FaultKind::Protocol,
                            index,
                            f.id,
                        ))?;
                        self.measure(Measured {
                            position: f64::from(e.position),
                            velocity: f64::from(e.velocity),
                            torque: 0.0,
                        });
                    }
                    _ => {}
                }
                Ok(true)
            }
            Kind::Mit {
                ranges, reply_id, ..
            } => {
                // Replies come from the configured reply id with the motor's id in the first byte.
                if f.extended || f.id != *reply_id || f.data().first() != Some(&self.id) {
                    return Ok(false);
                }
                let r = mit::decode_reply(f.data(), ranges).ok_or(fault(
                    FaultKind::Protocol,
                    index,
                    f.id,
                ))?;
                if let Some(e) = r.error.filter(|&e| e != 0) {
                    return Err(fault(FaultKind::DriveFault, index, u32::from(e)));
                }
                self.measure(Measured {
                    position: f64::from(r.position),
                    velocity: f64::from(r.velocity),
                    torque: f64::from(r.torque),
                });
                Ok(true)
            }
        }
    }

    /// Torque feed-forward in drive units for force actuators.
    fn torque_ff(&self, sp: &Setpoint) -> f64 {
        if self.mode == Mode::Force {
            self.inertia * sp.acceleration * self.torque_scale
        } else {
            0.0
        }
    }

    /// The frame that commands `sp` (joint units); a compliant drive is told where it is.
    fn command(&mut self, sp: &Setpoint) -> CanFrame {
        if self.compliant {
            return self.compliant_frame();
        }
        let position = self.units.to_drive(sp.position);
        let velocity = self.units.rate_to_drive(sp.velocity);
        let torque = self.torque_ff(sp);
        self.last = position;
        self.frame_for(position, velocity, torque)
    }

    fn frame_for(&mut self, position: f64, velocity: f64, torque: f64) -> CanFrame {
        if self.compliant {
            return self.compliant_frame();
        }
        self.target_frame(position, velocity, torque)
    }

    /// The protocol's command frame for a target (drive units).
    fn target_frame(&mut self, position: f64, velocity: f64, torque: f64) -> CanFrame {
        match &mut self.kind {
            Kind::Cia402 { last_cw, .. } => {
                // Only an enabled drive is told to operate; otherwise repeat the last command.
                if self.phase == Phase::Ready {
                    *last_cw = cia402::CW_ENABLE_OPERATION;
                }
                cia402::rpdo1(self.id, *last_cw, counts(position))
            }
            Kind::Odrive { .. } => match self.mode {
                Mode::Velocity => odrive::set_input_vel(self.id, velocity as f32, torque as f32),
                _ => odrive::set_input_pos(self.id, position as f32, velocity, torque),
            },
            Kind::Mit { ranges, kp, kd, .. } => {
                let kp = if self.mode == Mode::Velocity {
                    0.0
                } else {
                    *kp
                };
                let c = mit::Command {
                    p: position as f32,
                    v: velocity as f32,
                    kp,
                    kd: *kd,
                    t: torque as f32,
                };
                CanFrame::new(u32::from(self.id), &mit::pack(&c, ranges))
            }
        }
    }

    /// Teach-in: whether this drive's protocol has a torque-off mode that keeps reporting (MIT
    /// motors stop replying once out of motor mode, so they hold instead).
    fn can_be_compliant(&self) -> bool {
        !matches!(self.kind, Kind::Mit { .. })
    }

    /// Each tick while compliant: the protocol kept alive (CiA 402 RPDO with controlword switch
    /// on, ODrive's input fed to its watchdog) with the measured position as the target, so
    /// stiffening again never jumps.
    fn compliant_frame(&mut self) -> CanFrame {
        let target = self.measured.map_or(self.last, |m| m.position);
        self.last = target;
        match &mut self.kind {
            Kind::Cia402 { last_cw, .. } => {
                *last_cw = cia402::CW_SWITCH_ON;
                cia402::rpdo1(self.id, cia402::CW_SWITCH_ON, counts(target))
            }
            Kind::Odrive { .. } if self.mode == Mode::Velocity => {
                odrive::set_input_vel(self.id, 0.0, 0.0)
            }
            Kind::Odrive { .. } => odrive::set_input_pos(self.id, target as f32, 0.0, 0.0),
            Kind::Mit { .. } => self.target_frame(target, 0.0, 0.0),
        }
    }

    /// Teach-in on: the frame that takes the torque off where the protocol says it once (ODrive
    /// idle); CiA 402's switch-on controlword goes with every RPDO from now on.
    fn torque_off_frame(&self) -> Option<CanFrame> {
        match self.kind {
            Kind::Odrive { .. } => Some(odrive::set_axis_state(self.id, odrive::AXIS_STATE_IDLE)),
            _ => None,
        }
    }

    /// Teach-in off: back to the power step of the enable sequence, which targets the measured
    /// position (ODrive: input position first, then closed loop) until the drive follows again.
    fn begin_stiffening(&mut self) {
        self.compliant = false;
        self.stiffening = true;
        self.phase = Phase::Power;
        self.wait = 0;
        self.hold = None;
        self.power_target = None;
        match &mut self.kind {
            Kind::Odrive { requested, .. } => *requested = false,
            Kind::Cia402 { switched_on, .. } => *switched_on = false,
            Kind::Mit { .. } => {}
        }
    }

    /// Where the drive rests when nothing else is said: the last commanded position once it was
    /// ever commanded (holding what was measured instead would step back by the following
    /// error), else where it was measured.
    fn rest_target(&self) -> f64 {
        if self.commanded {
            self.last
        } else {
            self.measured.map_or(self.last, |m| m.position)
        }
    }

    /// The frame that keeps the drive where it is (latched on the first call).
    fn hold_frame(&mut self) -> CanFrame {
        let target = match self.hold {
            Some(t) => t,
            None => {
                let t = self.rest_target();
                self.hold = Some(t);
                t
            }
        };
        self.frame_for(target, 0.0, 0.0)
    }

    /// The frame that holds `sp` (joint units), whatever the drive's phase: its position, and
    /// its velocity as feed-forward or command, so a quick stop reaches velocity drives as the
    /// ramp it is (at rest the velocity is 0).
    fn hold_at(&mut self, sp: &Setpoint) -> CanFrame {
        let target = self.units.to_drive(sp.position);
        if self.phase == Phase::Ready {
            self.last = target;
        }
        self.hold = Some(target);
        let velocity = self.units.rate_to_drive(sp.velocity);
        let torque = self.torque_ff(sp);
        self.frame_for(target, velocity, torque)
    }

    /// Whether a frame took effect when sent (CiA 402 targets wait for the SYNC).
    fn applies_on_receipt(&self) -> bool {
        !matches!(self.kind, Kind::Cia402 { .. })
    }

    /// One tick of the enable sequence.
    fn enable_step(&mut self, io: &mut dyn FrameIo) -> Result<(), BackendError> {
        let resend = self.wait.is_multiple_of(RESEND_TICKS);
        self.wait = self.wait.saturating_add(1);
        let index = self.index;
        match self.phase {
            Phase::Ready => {
                let f = self.hold_frame();
                io.send(&f)
            }
            Phase::PreOperational => {
                self.phase = Phase::Configure(0);
                self.wait = 0;
                io.send(&cia402::nmt(cia402::NMT_PRE_OPERATIONAL, self.id))
            }
            Phase::Configure(step) => {
                let Kind::Cia402 {
                    setup, configured, ..
                } = &mut self.kind
                else {
                    self.phase = Phase::Start;
                    return Ok(());
                };
                match setup.get(step) {
                    Some(w) if !*configured => {
                        if resend {
                            io.send(&w.request(self.id))?;
                        }
                    }
                    _ => {
                        *configured = true;
                        self.phase = Phase::Start;
                        self.wait = 0;
                    }
                }
                Ok(())
            }
            Phase::Start => {
                self.measured = None;
                self.hold = None;
                self.phase = Phase::Power;
                self.wait = 0;
                match &mut self.kind {
                    Kind::Cia402 { statusword, .. } => {
                        *statusword = None;
                        io.send(&cia402::nmt(cia402::NMT_START, self.id))
                    }
                    Kind::Odrive {
                        heartbeat,
                        requested,
                        firmware,
                        arm,
                        ..
                    } => {
                        *heartbeat = None;
                        *requested = false;
                        let control = if self.mode == Mode::Velocity {
                            odrive::CONTROL_MODE_VELOCITY
                        } else {
                            odrive::CONTROL_MODE_POSITION
                        };
                        io.send(&odrive::clear_errors(self.id, *firmware))?;
                        // The watchdog is fed from here on by the streamed setpoints.
                        for f in arm.iter().flatten() {
                            io.send(f)?;
                        }
                        io.send(&odrive::set_controller_mode(
                            self.id,
                            control,
                            odrive::INPUT_MODE_PASSTHROUGH,
                        ))
                    }
                    Kind::Mit { .. } => {
                        io.send(&CanFrame::new(u32::from(self.id), &mit::ENTER_MOTOR_MODE))
                    }
                }
            }
            Phase::Power => self.power_step(io, resend, index),
        }
    }

    fn power_step(
        &mut self,
        io: &mut dyn FrameIo,
        resend: bool,
        index: usize,
    ) -> Result<(), BackendError> {
        let id = self.id;
        let measured = self.measured;
        match &mut self.kind {
            Kind::Cia402 {
                statusword,
                last_cw,
                switched_on,
                ..
            } => {
                let (Some(sw), Some(m)) = (*statusword, measured) else {
                    // No TPDO yet: SYNC (sent by the bus) asks for it; repeat the NMT start.
                    if resend && self.wait > 1 {
                        io.send(&cia402::nmt(cia402::NMT_START, id))?;
                    }
                    return Ok(());
                };
                use cia402::State as S;
                let cw = match cia402::state(sw) {
                    S::Fault if *last_cw == cia402::CW_FAULT_RESET => cia402::CW_DISABLE_VOLTAGE,
                    S::Fault => cia402::CW_FAULT_RESET,
                    S::FaultReactionActive | S::QuickStopActive => cia402::CW_DISABLE_VOLTAGE,
                    S::SwitchOnDisabled | S::NotReadyToSwitchOn | S::Unknown => cia402::CW_SHUTDOWN,
                    S::ReadyToSwitchOn => cia402::CW_SWITCH_ON,
                    S::SwitchedOn => {
                        *switched_on = true;
                        cia402::CW_ENABLE_OPERATION
                    }
                    S::OperationEnabled if *switched_on => cia402::CW_ENABLE_OPERATION,
                    // Not seen switched on yet: disable operation first, so that enabling ends
                    // on an answer to this sequence's own command.
                    S::OperationEnabled => cia402::CW_SWITCH_ON,
                };
                // Target = actual position, so enabling never makes the drive jump; from the
                // enable operation on, the position it had then.
                let target = if cw == cia402::CW_ENABLE_OPERATION {
                    *self.power_target.get_or_insert(m.position)
                } else {
                    self.power_target = None;
                    m.position
                };
                *last_cw = cw;
                io.send(&cia402::rpdo1(id, cw, counts(target)))?;
                if *switched_on
                    && cia402::state(sw) == S::OperationEnabled
                    && sw & cia402::SW_FOLLOWS_COMMAND != 0
                {
                    self.become_ready(target);
                }
                Ok(())
            }
            Kind::Odrive {
                heartbeat,
                requested,
                doubted,
                ..
            } => {
                let Some(m) = measured else {
                    return Ok(());
                };
                // The measured position until closed loop is asked for, then the one it had.
                let target = match self.power_target {
                    Some(t) if *requested => t,
                    _ => m.position,
                };
                let f = match self.mode {
                    Mode::Velocity => odrive::set_input_vel(id, 0.0, 0.0),
                    _ => odrive::set_input_pos(id, target as f32, 0.0, 0.0),
                };
                io.send(&f)?;
                if !*requested || resend {
                    self.power_target = Some(target);
                    *heartbeat = None;
                    *requested = true;
                    *doubted = false;
                    io.send(&odrive::set_axis_state(
                        id,
                        odrive::AXIS_STATE_CLOSED_LOOP_CONTROL,
                    ))?;
                    return Ok(());
                }
                if let Some(hb) = heartbeat {
                    if hb.axis_error != 0 && !*doubted {
                        *doubted = true;
                        *heartbeat = None;
                        return Ok(());
                    }
                    if hb.axis_error != 0 {
                        return Err(fault(FaultKind::DriveFault, index, hb.axis_error));
                    }
                    if u32::from(hb.axis_state) == odrive::AXIS_STATE_CLOSED_LOOP_CONTROL {
                        self.become_ready(target);
                    }
                }
                Ok(())
            }
            Kind::Mit { .. } => {
                if let Some(m) = measured {
                    self.become_ready(m.position);
                    let f = self.hold_frame();
                    return io.send(&f);
                }
                if resend && self.wait > 1 {
                    io.send(&CanFrame::new(u32::from(id), &mit::ENTER_MOTOR_MODE))?;
                }
                Ok(())
            }
        }
    }

    fn become_ready(&mut self, position: f64) {
        self.phase = Phase::Ready;
        self.stiffening = false;
        self.power_target = None;
        self.hold = Some(position);
        self.last = position;
        self.commanded = true;
        self.age = 0;
    }

    /// The frame that removes power, and the one that disarms the drive's watchdog first if it
    /// was armed over the bus.
    fn disable_frames(&mut self) -> (CanFrame, Option<CanFrame>) {
        let target = self.rest_target();
        match &mut self.kind {
            Kind::Cia402 { last_cw, .. } => {
                *last_cw = cia402::CW_SHUTDOWN;
                let f = cia402::rpdo1(self.id, cia402::CW_SHUTDOWN, counts(target));
                (f, None)
            }
            Kind::Odrive { disarm, .. } => (
                odrive::set_axis_state(self.id, odrive::AXIS_STATE_IDLE),
                *disarm,
            ),
            Kind::Mit { .. } => (
                CanFrame::new(u32::from(self.id), &mit::EXIT_MOTOR_MODE),
                None,
            ),
        }
    }

    fn feedback(&self) -> Feedback {
        match self.measured {
            Some(m) => Feedback {
                position: self.units.to_joint(m.position),
                velocity: self.units.rate_to_joint(m.velocity),
                effort: if self.torque_scale != 0.0 {
                    m.torque / self.torque_scale
                } else {
                    0.0
                },
                valid: self.fresh,
            },
            None => Feedback::default(),
        }
    }
}

/// The drives on one CAN bus and the transport that reaches them.
pub struct CanBus {
    io: Box<dyn FrameIo>,
    drives: Vec<Drive>,
    settings: CanSettings,
    /// CiA 402 drives are here: SYNC each tick, motiond's heartbeat for their consumers.
    cia402: bool,
    /// The tick whose SYNC was sent: a hold in the same tick as a write adds no second SYNC.
    synced_tick: Option<u64>,
    /// Ticks since motiond's last heartbeat.
    heartbeat_wait: u32,
    ready: bool,
    /// An enable sequence is under way (measurements from before it were dropped).
    enabling: bool,
    /// The interface or adapter disappeared: the next enable reopens it.
    lost: bool,
    status: Arc<BusStatus>,
}

impl CanBus {
    /// `joints` are the bus's drives with their index in the JointSet and their command mode.
    pub(crate) fn new(
        io: Box<dyn FrameIo>,
        joints: &[(usize, Mode, &BusJoint)],
        settings: CanSettings,
        status: Arc<BusStatus>,
    ) -> Self {
        let drives: Vec<Drive> = joints
            .iter()
            .filter_map(|&(index, mode, j)| {
                let mut d = Drive::new(j, index, mode, &settings)?;
                d.status = status.drive(&j.dof);
                Some(d)
            })
            .collect();
        let cia402 = drives.iter().any(|d| matches!(d.kind, Kind::Cia402 { .. }));
        CanBus {
            io,
            drives,
            settings,
            cia402,
            synced_tick: None,
            heartbeat_wait: 0,
            ready: false,
            enabling: false,
            lost: false,
            status,
        }
    }

    /// After a fault the drives start their enable sequence again on the next `enable()`.
    fn failed(&mut self, e: BackendError) -> BackendError {
        self.ready = false;
        self.enabling = false;
        self.lost |= e.kind == FaultKind::DeviceLost;
        for d in &mut self.drives {
            d.status.set_state(LinkState::Fault);
            let named = e.dof.is_some_and(|dof| usize::from(dof) == d.index);
            if named {
                // Faulted: it neither stiffens nor follows until cleared and enabled again
                // (stiffening it would reset its fault).
                d.reset();
                continue;
            }
            if d.stiffening {
                // Another drive's fault, or the bus's: its stiffening goes on where it is (a
                // fault in teach-in stiffens the drives where they are; starting the enable
                // over at every repeated report would never end it).
                continue;
            }
            // A compliant drive stays so until the loop asks it to stiffen.
            let compliant = d.compliant;
            d.reset();
            d.compliant = compliant;
        }
        match e
            .dof
            .and_then(|dof| self.drives.iter().find(|d| d.index == usize::from(dof)))
        {
            Some(d) => d.status.fault(&e),
            None => self.status.link.fault(&e),
        }
        e
    }

    fn drain(&mut self) -> Result<(), BackendError> {
        for _ in 0..MAX_FRAMES_PER_READ {
            let Some(f) = self.io.recv()? else {
                return Ok(());
            };
            self.status.received.fetch_add(1, Relaxed);
            // Remote requests are other hosts polling a node; none of our drives answers them.
            if f.rtr {
                self.status.ignored.fetch_add(1, Relaxed);
                continue;
            }
            let mut ours = false;
            for d in &mut self.drives {
                if d.accept(&f)? {
                    ours = true;
                    break;
                }
            }
            if !ours {
                self.status.ignored.fetch_add(1, Relaxed);
            }
        }
        Ok(())
    }

    /// The SYNC that applies this tick's RPDOs (once per tick; `None`: outside the loop's ticks).
    fn sync(&mut self, tick: Option<u64>) -> Result<(), BackendError> {
        if !self.cia402 || (tick.is_some() && tick == self.synced_tick) {
            return Ok(());
        }
        self.synced_tick = tick;
        self.io.send(&cia402::sync())?;
        for d in &mut self.drives {
            d.took |= !d.applies_on_receipt();
        }
        Ok(())
    }

    /// One drive's frame of a write or hold; marks whether it reached the drive.
    fn send_to(io: &mut dyn FrameIo, d: &mut Drive, f: &CanFrame) -> Result<(), BackendError> {
        let sent = io.send(f);
        // A frame a serial adapter began goes out whole, after the rest.
        d.took = d.applies_on_receipt() && (sent.is_ok() || io.finishing());
        sent
    }

    /// The tick's SYNC, motiond's heartbeat when it is due, the transport's housekeeping.
    fn end_tick(&mut self, tick: Option<u64>) -> Result<(), BackendError> {
        self.sync(tick)?;
        if self.cia402 && self.settings.watchdog_ms > 0.0 {
            self.heartbeat_wait += 1;
            if self.heartbeat_wait >= self.settings.master_heartbeat_ticks() {
                self.heartbeat_wait = 0;
                self.io
                    .send(&cia402::master_heartbeat(self.settings.cia402.master_id))?;
            }
        }
        self.io.end_tick()?;
        let warnings = self.io.take_warnings();
        if warnings != 0 {
            self.status.link.warning(warnings);
        }
        Ok(())
    }

    fn try_enable(&mut self) -> Result<Readiness, BackendError> {
        if self.lost {
            self.io.reopen()?;
            self.lost = false;
            self.status.link.reopened();
            for d in &mut self.drives {
                d.forget_configuration();
            }
        }
        if !self.ready && !self.enabling {
            // What arrived while faulted or disabled (reports that may predate a move by hand,
            // EMCYs of the fault just cleared) is dropped unread.
            for _ in 0..MAX_FRAMES_PER_READ {
                if self.io.recv()?.is_none() {
                    break;
                }
            }
            self.enabling = true;
            for d in &mut self.drives {
                d.forget_measurements();
            }
        }
        // Once ready, each further call keeps the drives polled (hold frames, SYNC) so their
        // feedback keeps coming until the loop takes over.
        self.drain()?;
        for d in &mut self.drives {
            d.enable_step(self.io.as_mut())?;
            d.status.set_state(if d.phase == Phase::Ready {
                LinkState::Ready
            } else {
                LinkState::Enabling
            });
        }
        self.end_tick(None)?;
        if self.drives.iter().all(|d| d.phase == Phase::Ready) {
            self.ready = true;
            self.enabling = false;
            self.status.link.set_state(LinkState::Ready);
            return Ok(Readiness::Ready);
        }
        self.status.link.set_state(LinkState::Enabling);
        Ok(Readiness::Pending)
    }

    pub fn enable(&mut self) -> Result<Readiness, BackendError> {
        self.try_enable().map_err(|e| self.failed(e))
    }

    pub fn disable(&mut self) -> Result<(), BackendError> {
        self.ready = false;
        self.enabling = false;
        let mut result = Ok(());
        for d in &mut self.drives {
            let (f, disarm) = d.disable_frames();
            d.reset();
            d.status.set_state(LinkState::Disabled);
            // Every drive gets its disable even when one send fails.
            for f in std::iter::once(f).chain(disarm) {
                if let Err(e) = self.io.send(&f) {
                    result = result.and(Err(e));
                }
            }
        }
        self.status.link.set_state(LinkState::Disabled);
        result.and(self.end_tick(None))
    }

    fn try_write(&mut self, tick: u64, setpoints: &[Setpoint]) -> Result<(), BackendError> {
        self.drives.iter_mut().for_each(|d| d.took = false);
        for d in &mut self.drives {
            if d.stiffening {
                d.enable_step(self.io.as_mut())?;
                continue;
            }
            let f = match (d.phase, setpoints.get(d.index)) {
                (Phase::Ready, Some(sp)) => {
                    d.hold = None;
                    d.command(sp)
                }
                // A drive that is not enabled (or a short slice) only ever gets held.
                _ => d.hold_frame(),
            };
            Self::send_to(self.io.as_mut(), d, &f)?;
            self.status.sent.fetch_add(1, Relaxed);
        }
        self.end_tick(Some(tick))
    }

    pub fn write(&mut self, tick: u64, setpoints: &[Setpoint]) -> Result<(), BackendError> {
        self.try_write(tick, setpoints).map_err(|e| self.failed(e))
    }

    fn try_read(&mut self, feedback: &mut [Feedback]) -> Result<(), BackendError> {
        self.drain()?;
        for d in &mut self.drives {
            d.age = if d.fresh { 0 } else { d.age.saturating_add(1) };
            if let Some(slot) = feedback.get_mut(d.index) {
                *slot = d.feedback();
            }
            d.fresh = false;
            if self.ready && d.age > self.settings.timeout_ticks {
                return Err(fault(FaultKind::FeedbackMissing, d.index, d.age));
            }
            if let Kind::Cia402 { heartbeat_age, .. } = &mut d.kind {
                *heartbeat_age = heartbeat_age.saturating_add(1);
                if self.ready && *heartbeat_age > self.settings.heartbeat_timeout_ticks() {
                    let code = cia402::COB_HEARTBEAT + u32::from(d.id);
                    return Err(fault(FaultKind::HeartbeatLost, d.index, code));
                }
            }
        }
        Ok(())
    }

    pub fn read(&mut self, feedback: &mut [Feedback]) -> Result<(), BackendError> {
        self.try_read(feedback).map_err(|e| self.failed(e))
    }

    /// Holds every drive at its setpoint in `setpoints` (best effort: every drive gets its frame
    /// even when one send fails), then the tick's SYNC unless a write already sent it. A hold
    /// the bus did not take whole gets no SYNC: that SYNC would apply a truncated set of
    /// targets (a queue that drained in mid-burst); the next tick sends them all again.
    pub fn hold(&mut self, tick: u64, setpoints: &[Setpoint]) -> Result<(), BackendError> {
        self.drives.iter_mut().for_each(|d| d.took = false);
        let mut result = Ok(());
        for d in &mut self.drives {
            let sent = if d.stiffening {
                // Out of teach-in, still coming back: held where it is measured meanwhile.
                d.enable_step(self.io.as_mut())
            } else {
                let f = match setpoints.get(d.index) {
                    Some(sp) => d.hold_at(sp),
                    None => d.hold_frame(),
                };
                Self::send_to(self.io.as_mut(), d, &f)
            };
            if let Err(e) = sent {
                result = result.and(Err(e));
            }
        }
        result?;
        self.end_tick(Some(tick))
    }

    /// Teach-in on: every enabled drive whose protocol allows it goes compliant and its DOF is
    /// marked in `dofs`; MIT motors keep holding. Off: compliant drives step back to following
    /// from their measured position; `Pending` until `enable` (or the writes and holds) saw
    /// them follow.
    pub fn compliant(&mut self, on: bool, dofs: &mut [bool]) -> Result<Readiness, BackendError> {
        self.try_compliant(on, dofs).map_err(|e| self.failed(e))
    }

    fn try_compliant(&mut self, on: bool, dofs: &mut [bool]) -> Result<Readiness, BackendError> {
        let mut pending = false;
        for d in &mut self.drives {
            if on && d.phase == Phase::Ready && d.can_be_compliant() {
                d.compliant = true;
                d.hold = None;
                if let Some(f) = d.torque_off_frame() {
                    self.io.send(&f)?;
                }
                if let Some(c) = dofs.get_mut(d.index) {
                    *c = true;
                }
            } else if !on && d.compliant {
                d.begin_stiffening();
            }
            pending |= d.stiffening;
        }
        Ok(if pending {
            Readiness::Pending
        } else {
            Readiness::Ready
        })
    }

    /// How long a drive here may go without feedback.
    pub fn feedback_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs_f64(
            f64::from(self.settings.timeout_ticks) / self.settings.rate_hz,
        )
    }

    pub fn status(&self) -> Arc<BusStatus> {
        self.status.clone()
    }

    /// Whether the DOF at `index` (JointSet order) is driven on this bus.
    pub fn drives_dof(&self, index: usize) -> bool {
        self.drives.iter().any(|d| d.index == index)
    }

    /// After a failed write or hold: marks the DOFs whose drives it reached anyway.
    pub fn taken(&self, dofs: &mut [bool]) {
        for d in &self.drives {
            if let Some(t) = dofs.get_mut(d.index) {
                *t = d.took;
            }
        }
    }
}
