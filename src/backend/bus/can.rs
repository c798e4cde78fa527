//! A CAN bus: the drives of any CAN families on one [`FrameIo`] (SocketCAN, SLCAN, in-memory).
//!
//! The bus keeps what every drive has whatever its family (an [`Axis`]: its DOF, units, what it
//! measured, where it is held, teach-in flags, status) and leaves the protocol to the family's
//! [`CanDrive`]: the frames it takes, each tick of its enable sequence, its command, disable and
//! compliance frames. A family with once-per-bus traffic (CiA 402's SYNC) adds a [`CanService`].
//! Each drive runs its enable sequence once per tick from `enable()`, so a drive always comes up
//! targeting its measured position. Frames are `Copy` values; nothing here allocates after
//! construction.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use crate::backend::bus::Mode;
use crate::backend::bus::settings::{BusSettings, DriveSettings, Units};
use crate::backend::frame::CanFrame;
use crate::backend::status::{BusStatus, LinkState, LinkStatus};
use crate::backend::transport::FrameIo;
use crate::backend::{BackendError, FaultKind, Feedback, Readiness};
use crate::trajectory::Setpoint;

/// One drive on a CAN bus as its family speaks to it. Every method runs on the real-time thread
/// (except construction): encode into `Copy` frames, never allocate or block.
pub trait CanDrive: Send {
    /// Takes `frame` when it is this drive's (`Ok(false)` otherwise): what it measured into
    /// [`Axis::measure`], its own state; a fault the drive reports is an `Err` from
    /// [`Axis::fault`]. Called while enabling, following and faulted alike.
    fn accept(&mut self, axis: &mut Axis, frame: &CanFrame) -> Result<bool, BackendError>;
    /// One tick of the enable sequence (only while [`Axis::ready`] is false): requests to
    /// `io`, and [`Axis::become_ready`] at the measured position once the drive follows it.
    fn enable_step(&mut self, axis: &mut Axis, io: &mut dyn FrameIo) -> Result<(), BackendError>;
    /// The frame that commands `target` (drive units; velocity and torque are feed-forwards, or
    /// the command of a velocity-mode drive).
    fn command(&mut self, axis: &Axis, target: Target) -> CanFrame;
    /// The frame that removes power with the drive resting at `rest`, and one sent after it
    /// (ODrive: its watchdog disarmed).
    fn disable(&mut self, axis: &Axis, rest: f64) -> (CanFrame, Option<CanFrame>);
    /// Back to the start of the enable sequence after a fault or disable (configuration kept).
    fn reset(&mut self);
    /// Drops what it kept of earlier reports: an enable sequence starts from fresh ones only.
    fn forget_measurements(&mut self) {}
    /// The link was lost: the drive may have been power-cycled unseen, so it is set up again.
    fn forget_configuration(&mut self) {}
    /// Teach-in: whether it has a torque-off mode that keeps reporting positions.
    fn can_be_compliant(&self) -> bool {
        false
    }
    /// Teach-in on: the frame that takes the torque off, sent once (where the protocol says it
    /// once; CiA 402 says it with every command instead).
    fn torque_off(&self, axis: &Axis) -> Option<CanFrame> {
        let _ = axis;
        None
    }
    /// Each tick while compliant: the protocol kept alive with `at` (the measured position) as
    /// the target, so stiffening again never jumps.
    fn compliant_command(&mut self, axis: &Axis, at: f64) -> CanFrame {
        self.command(axis, Target::at(at))
    }
    /// Teach-in off: back to the step of the enable sequence that targets the measured position.
    fn stiffen(&mut self) {
        self.reset();
    }
    /// Once per read: faults only time shows (a heartbeat that stopped); `following`: every
    /// drive of the bus ended its enable sequence.
    fn check(&mut self, axis: &Axis, following: bool) -> Result<(), BackendError> {
        let _ = (axis, following);
        Ok(())
    }
    /// Whether a command takes effect when the drive receives it (a CiA 402 target waits for
    /// the SYNC: [`CanService::applied`]).
    fn applies_on_receipt(&self) -> bool {
        true
    }
    /// The drive's own status and error words as its protocol reports them, for the flight
    /// recorder ([`Feedback`]'s `status` and `error`); 0 where it reports none.
    fn words(&self) -> (u32, u32) {
        (0, 0)
    }
}

/// Traffic a family sends once per bus, after each tick's commands (CiA 402's SYNC, motiond's
/// heartbeat).
pub trait CanService: Send {
    /// `tick`: the loop's tick (`None` outside the loop's ticks: enable, disable).
    fn end_tick(&mut self, tick: Option<u64>, io: &mut dyn FrameIo) -> Result<(), BackendError>;
    /// Whether the last `end_tick` sent what applies the targets of drives that do not apply
    /// them on receipt (CiA 402's SYNC).
    fn applied(&self) -> bool {
        false
    }
}

/// A target in drive units.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Target {
    pub position: f64,
    pub velocity: f64,
    pub torque: f64,
}

impl Target {
    /// Standing at `position`.
    pub fn at(position: f64) -> Self {
        Self {
            position,
            ..Self::default()
        }
    }
}

/// Measured state in drive units: position, velocity, torque.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Measured {
    pub position: f64,
    pub velocity: f64,
    pub torque: f64,
}

/// Ticks between resends of an unanswered request during enable.
pub const RESEND_TICKS: u32 = 100;

/// Ticks spent in one step of an enable sequence, for resends.
#[derive(Debug, Clone, Copy, Default)]
pub struct Wait(u32);

impl Wait {
    /// Counts this tick; true on the ticks a request is (re)sent: the first of the step and
    /// every [`RESEND_TICKS`] after.
    pub fn tick(&mut self) -> bool {
        let resend = self.0.is_multiple_of(RESEND_TICKS);
        self.0 = self.0.saturating_add(1);
        resend
    }

    /// A new step starts.
    pub fn restart(&mut self) {
        self.0 = 0;
    }

    /// Ticks counted in this step.
    pub fn ticks(&self) -> u32 {
        self.0
    }
}

/// What the bus keeps of one drive whatever its family.
pub struct Axis {
    index: usize,
    id: u8,
    units: Units,
    /// Joint torque → drive torque (direction / gear ratio).
    torque_scale: f64,
    inertia: f64,
    mode: Mode,
    ready: bool,
    measured: Option<Measured>,
    fresh: bool,
    age: u32,
    /// Latched hold target in drive units.
    hold: Option<f64>,
    /// Last commanded position in drive units.
    last: f64,
    /// The drive was enabled at least once, so `last` is what it was told to be at.
    commanded: bool,
    /// Teach-in: enabled but without torque, reporting positions and told to be where it is
    /// measured.
    compliant: bool,
    /// Out of teach-in: stepping back to following (the enable sequence, from the measured
    /// position) on every write and hold until it follows.
    stiffening: bool,
    /// Power asked for (CiA 402 enable operation, ODrive closed loop): the target the drive was
    /// given then (drive units), kept until it follows — a drive that takes power holds there,
    /// and following the measured position meanwhile would echo its own lagging report back.
    power_target: Option<f64>,
    status: Arc<LinkStatus>,
}

impl Axis {
    fn new(index: usize, mode: Mode, d: &DriveSettings, status: Arc<LinkStatus>) -> Self {
        Self {
            index,
            id: d.id,
            units: d.units,
            torque_scale: d.direction / d.gear_ratio,
            inertia: d.inertia,
            mode,
            ready: false,
            measured: None,
            fresh: false,
            age: 0,
            hold: None,
            last: d.units.offset,
            commanded: false,
            compliant: false,
            stiffening: false,
            power_target: None,
            status,
        }
    }

    /// The DOF's index in the JointSet.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The drive's id (node id, motor id) as configured.
    pub fn id(&self) -> u8 {
        self.id
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The drive follows commands (its enable sequence ended).
    pub fn ready(&self) -> bool {
        self.ready
    }

    /// Teach-in: the drive is compliant.
    pub fn compliant(&self) -> bool {
        self.compliant
    }

    pub fn measured(&self) -> Option<Measured> {
        self.measured
    }

    /// A fresh report from the drive.
    pub fn measure(&mut self, m: Measured) {
        self.measured = Some(m);
        self.fresh = true;
    }

    /// A new enable step starts from the next report, and holds nothing latched before it.
    pub fn restart_measuring(&mut self) {
        self.measured = None;
        self.hold = None;
    }

    /// An enable step's target (drive units): the measured position until power is asked for
    /// (`asked`), then the one it had when it was, until the drive follows.
    pub fn power_target(&mut self, measured: f64, asked: bool) -> f64 {
        if asked {
            *self.power_target.get_or_insert(measured)
        } else {
            self.power_target = None;
            measured
        }
    }

    /// The drive follows, at `position` (drive units): held there until commanded.
    pub fn become_ready(&mut self, position: f64) {
        self.ready = true;
        self.stiffening = false;
        self.power_target = None;
        self.hold = Some(position);
        self.last = position;
        self.commanded = true;
        self.age = 0;
    }

    /// A fault of this drive.
    pub fn fault(&self, kind: FaultKind, code: u32) -> BackendError {
        BackendError {
            kind,
            dof: u16::try_from(self.index).ok(),
            code,
        }
    }

    /// A condition the drive reports but keeps running through, in its family's code.
    pub fn warning(&self, code: u32) {
        self.status.warning(code);
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

    /// What the loop reads of this drive; `(status, error)`: its words ([`CanDrive::words`]).
    fn feedback(&self, (status, error): (u32, u32)) -> Feedback {
        match self.measured {
            Some(m) => Feedback {
                position: self.units.to_joint(m.position),
                velocity: self.units.rate_to_joint(m.velocity),
                effort: if self.torque_scale != 0.0 {
                    m.torque / self.torque_scale
                } else {
                    0.0
                },
                status,
                error,
                valid: self.fresh,
            },
            None => Feedback::default(),
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
}

/// One drive: the bus's part and the family's.
struct Slot {
    axis: Axis,
    drive: Box<dyn CanDrive>,
    /// The last write or hold reached it: its frame went out (a drive that waits for a SYNC:
    /// and the SYNC). What [`CanBus`]'s `taken` reports after a failed one.
    took: bool,
}

impl Slot {
    /// Drops what was measured before: an enable sequence starts from fresh reports only.
    fn forget_measurements(&mut self) {
        self.axis.measured = None;
        self.axis.fresh = false;
        self.drive.forget_measurements();
    }

    /// Back to the start of the enable sequence after a fault or disable (configuration kept).
    fn reset(&mut self) {
        if self.axis.hold.is_none() {
            self.axis.hold = Some(self.axis.rest_target());
        }
        self.forget_measurements();
        self.axis.compliant = false;
        self.axis.stiffening = false;
        self.axis.power_target = None;
        self.axis.ready = false;
        self.drive.reset();
    }

    fn forget_configuration(&mut self) {
        self.drive.forget_configuration();
        self.reset();
    }

    /// The frame that commands `sp` (joint units); a compliant drive is told where it is.
    fn command(&mut self, sp: &Setpoint) -> CanFrame {
        if self.axis.compliant {
            return self.compliant_frame();
        }
        let a = &mut self.axis;
        let target = Target {
            position: a.units.to_drive(sp.position),
            velocity: a.units.rate_to_drive(sp.velocity),
            torque: a.torque_ff(sp),
        };
        a.last = target.position;
        self.drive.command(&self.axis, target)
    }

    /// A standing target (drive units), or the compliant frame.
    fn frame_at(&mut self, position: f64) -> CanFrame {
        if self.axis.compliant {
            return self.compliant_frame();
        }
        self.drive.command(&self.axis, Target::at(position))
    }

    fn compliant_frame(&mut self) -> CanFrame {
        let target = self.axis.measured.map_or(self.axis.last, |m| m.position);
        self.axis.last = target;
        self.drive.compliant_command(&self.axis, target)
    }

    /// The frame that keeps the drive where it is (latched on the first call).
    fn hold_frame(&mut self) -> CanFrame {
        let target = match self.axis.hold {
            Some(t) => t,
            None => {
                let t = self.axis.rest_target();
                self.axis.hold = Some(t);
                t
            }
        };
        self.frame_at(target)
    }

    /// The frame that holds `sp` (joint units), whatever the drive's phase: its position, and
    /// its velocity as feed-forward or command, so a quick stop reaches velocity drives as the
    /// ramp it is (at rest the velocity is 0).
    fn hold_at(&mut self, sp: &Setpoint) -> CanFrame {
        let target = self.axis.units.to_drive(sp.position);
        if self.axis.ready {
            self.axis.last = target;
        }
        self.axis.hold = Some(target);
        if self.axis.compliant {
            return self.compliant_frame();
        }
        let a = &self.axis;
        let target = Target {
            position: target,
            velocity: a.units.rate_to_drive(sp.velocity),
            torque: a.torque_ff(sp),
        };
        self.drive.command(&self.axis, target)
    }

    /// Sends one frame of a write or hold and notes whether it reached the drive.
    fn send(&mut self, io: &mut dyn FrameIo, f: &CanFrame) -> Result<(), BackendError> {
        let sent = io.send(f);
        // A frame a serial adapter began goes out whole, after the rest.
        self.took = self.drive.applies_on_receipt() && (sent.is_ok() || io.finishing());
        sent
    }

    /// One tick of the enable sequence; a drive that follows already is held.
    fn enable_step(&mut self, io: &mut dyn FrameIo) -> Result<(), BackendError> {
        if self.axis.ready {
            let f = self.hold_frame();
            return io.send(&f);
        }
        self.drive.enable_step(&mut self.axis, io)
    }

    /// Teach-in off: back to following from the measured position.
    fn begin_stiffening(&mut self) {
        self.axis.compliant = false;
        self.axis.stiffening = true;
        self.axis.ready = false;
        self.axis.hold = None;
        self.axis.power_target = None;
        self.drive.stiffen();
    }

    /// The frame that removes power, and the one after it.
    fn disable_frames(&mut self) -> (CanFrame, Option<CanFrame>) {
        let rest = self.axis.rest_target();
        self.drive.disable(&self.axis, rest)
    }
}

/// Frames processed per read, so a babbling bus cannot stall the loop.
const MAX_FRAMES_PER_READ: usize = 512;

/// The drives on one CAN bus and the transport that reaches them.
pub struct CanBus {
    io: Box<dyn FrameIo>,
    slots: Vec<Slot>,
    services: Vec<Box<dyn CanService>>,
    rate_hz: f64,
    /// Ticks without feedback before a drive faults.
    timeout_ticks: u32,
    ready: bool,
    /// An enable sequence is under way (measurements from before it were dropped).
    enabling: bool,
    /// The interface or adapter disappeared: the next enable reopens it.
    lost: bool,
    status: Arc<BusStatus>,
}

impl CanBus {
    /// The drives of `bus` (`joints`: each with its index in the JointSet and its command mode)
    /// over `io`. A drive whose family cannot build it (not a CAN family; validation refuses
    /// that before) is left out.
    pub fn new(
        io: Box<dyn FrameIo>,
        bus: &BusSettings,
        joints: &[(usize, Mode, &DriveSettings)],
        rate_hz: f64,
        status: Arc<BusStatus>,
    ) -> Self {
        let slots: Vec<Slot> = joints
            .iter()
            .filter_map(|&(index, mode, d)| {
                let drive = d.family.can_drive(d, bus, rate_hz, mode)?;
                let axis = Axis::new(index, mode, d, status.drive(&d.dof));
                Some(Slot {
                    axis,
                    drive,
                    took: false,
                })
            })
            .collect();
        let mut services = Vec::new();
        let mut seen: Vec<&str> = Vec::new();
        for &(_, _, d) in joints {
            if !seen.contains(&d.family.name()) {
                seen.push(d.family.name());
                services.extend(d.family.can_service(bus, rate_hz));
            }
        }
        CanBus {
            io,
            slots,
            services,
            rate_hz,
            timeout_ticks: super::timeout_ticks(bus, rate_hz),
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
        for s in &mut self.slots {
            s.axis.status.set_state(LinkState::Fault);
            if e.dof.is_some_and(|dof| usize::from(dof) == s.axis.index) {
                // Faulted: it neither stiffens nor follows until cleared and enabled again
                // (stiffening it would reset or clear its fault).
                s.reset();
                continue;
            }
            if s.axis.stiffening {
                // Another drive's fault, or the bus's: its stiffening goes on where it is (a
                // fault in teach-in stiffens the drives where they are; starting the enable
                // over at every repeated report of the fault would never end it).
                continue;
            }
            // A compliant drive stays so until the loop asks it to stiffen.
            let compliant = s.axis.compliant;
            s.reset();
            s.axis.compliant = compliant;
        }
        match e
            .dof
            .and_then(|dof| self.slots.iter().find(|s| s.axis.index == usize::from(dof)))
        {
            Some(s) => s.axis.status.fault(&e),
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
            for s in &mut self.slots {
                if s.drive.accept(&mut s.axis, &f)? {
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

    /// The families' once-per-bus traffic, the transport's housekeeping.
    fn end_tick(&mut self, tick: Option<u64>) -> Result<(), BackendError> {
        for s in &mut self.services {
            let sent = s.end_tick(tick, self.io.as_mut());
            if s.applied() {
                for slot in &mut self.slots {
                    slot.took |= !slot.drive.applies_on_receipt();
                }
            }
            sent?;
        }
        self.io.end_tick()?;
        let warnings = self.io.take_warnings();
        if warnings != 0 {
            self.status.link.warning(warnings);
        }
        Ok(())
    }

    /// Reopens a lost interface (its drives are set up again), or drops what arrived while
    /// faulted or disabled at the start of an enable sequence.
    fn begin_enable(&mut self) -> Result<(), BackendError> {
        if self.lost {
            self.io.reopen()?;
            self.lost = false;
            self.status.link.reopened();
            for s in &mut self.slots {
                s.forget_configuration();
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
            for s in &mut self.slots {
                s.forget_measurements();
            }
        }
        Ok(())
    }

    fn try_enable(&mut self) -> Result<Readiness, BackendError> {
        self.begin_enable()?;
        // Once ready, each further call keeps the drives polled (hold frames, SYNC) so their
        // feedback keeps coming until the loop takes over.
        self.drain()?;
        for s in &mut self.slots {
            s.enable_step(self.io.as_mut())?;
            s.axis.status.set_state(if s.axis.ready {
                LinkState::Ready
            } else {
                LinkState::Enabling
            });
        }
        self.end_tick(None)?;
        if self.slots.iter().all(|s| s.axis.ready) {
            self.ready = true;
            self.enabling = false;
            self.status.link.set_state(LinkState::Ready);
            return Ok(Readiness::Ready);
        }
        self.status.link.set_state(LinkState::Enabling);
        Ok(Readiness::Pending)
    }

    fn try_write(&mut self, tick: u64, setpoints: &[Setpoint]) -> Result<(), BackendError> {
        self.slots.iter_mut().for_each(|s| s.took = false);
        for s in &mut self.slots {
            if s.axis.stiffening {
                s.enable_step(self.io.as_mut())?;
                continue;
            }
            let f = match (s.axis.ready, setpoints.get(s.axis.index)) {
                (true, Some(sp)) => {
                    s.axis.hold = None;
                    s.command(sp)
                }
                // A drive that is not enabled (or a short slice) only ever gets held.
                _ => s.hold_frame(),
            };
            s.send(self.io.as_mut(), &f)?;
            self.status.sent.fetch_add(1, Relaxed);
        }
        self.end_tick(Some(tick))
    }

    fn try_read(&mut self, feedback: &mut [Feedback]) -> Result<(), BackendError> {
        self.drain()?;
        for s in &mut self.slots {
            let words = s.drive.words();
            let a = &mut s.axis;
            a.age = if a.fresh { 0 } else { a.age.saturating_add(1) };
            if let Some(slot) = feedback.get_mut(a.index) {
                *slot = a.feedback(words);
            }
            a.fresh = false;
            if self.ready && a.age > self.timeout_ticks {
                return Err(a.fault(FaultKind::FeedbackMissing, a.age));
            }
            s.drive.check(&s.axis, self.ready)?;
        }
        Ok(())
    }

    fn try_compliant(&mut self, on: bool, dofs: &mut [bool]) -> Result<Readiness, BackendError> {
        let mut pending = false;
        for s in &mut self.slots {
            if on && s.axis.ready && s.drive.can_be_compliant() {
                s.axis.compliant = true;
                s.axis.hold = None;
                if let Some(f) = s.drive.torque_off(&s.axis) {
                    self.io.send(&f)?;
                }
                if let Some(c) = dofs.get_mut(s.axis.index) {
                    *c = true;
                }
            } else if !on && s.axis.compliant {
                s.begin_stiffening();
            }
            pending |= s.axis.stiffening;
        }
        Ok(if pending {
            Readiness::Pending
        } else {
            Readiness::Ready
        })
    }
}

impl super::Bus for CanBus {
    fn enable(&mut self) -> Result<Readiness, BackendError> {
        self.try_enable().map_err(|e| self.failed(e))
    }

    fn disable(&mut self) -> Result<(), BackendError> {
        self.ready = false;
        self.enabling = false;
        let mut result = Ok(());
        for s in &mut self.slots {
            let (f, after) = s.disable_frames();
            s.reset();
            s.axis.status.set_state(LinkState::Disabled);
            // Every drive gets its disable even when one send fails.
            for f in std::iter::once(f).chain(after) {
                if let Err(e) = self.io.send(&f) {
                    result = result.and(Err(e));
                }
            }
        }
        self.status.link.set_state(LinkState::Disabled);
        result.and(self.end_tick(None))
    }

    fn write(&mut self, tick: u64, setpoints: &[Setpoint]) -> Result<(), BackendError> {
        self.try_write(tick, setpoints).map_err(|e| self.failed(e))
    }

    fn read(&mut self, feedback: &mut [Feedback]) -> Result<(), BackendError> {
        self.try_read(feedback).map_err(|e| self.failed(e))
    }

    /// Holds every drive at its setpoint in `setpoints` (best effort: every drive gets its frame
    /// even when one send fails), then the tick's bus traffic (SYNC) unless a write already sent
    /// it. A hold the bus did not take whole gets no SYNC: that SYNC would apply a truncated set
    /// of targets (a queue that drained in mid-burst); the next tick sends them all again.
    fn hold(&mut self, tick: u64, setpoints: &[Setpoint]) -> Result<(), BackendError> {
        self.slots.iter_mut().for_each(|s| s.took = false);
        let mut result = Ok(());
        for s in &mut self.slots {
            let sent = if s.axis.stiffening {
                // Out of teach-in, still coming back: held where it is measured meanwhile.
                s.enable_step(self.io.as_mut())
            } else {
                let f = match setpoints.get(s.axis.index) {
                    Some(sp) => s.hold_at(sp),
                    None => s.hold_frame(),
                };
                s.send(self.io.as_mut(), &f)
            };
            if let Err(e) = sent {
                result = result.and(Err(e));
            }
        }
        result?;
        self.end_tick(Some(tick))
    }

    /// Teach-in on: every enabled drive whose family allows it goes compliant and its DOF is
    /// marked in `dofs`; the others keep holding. Off: compliant drives step back to following
    /// from their measured position; `Pending` until `enable` (or the writes and holds) saw
    /// them follow.
    fn taken(&self, dofs: &mut [bool]) {
        for s in &self.slots {
            if let Some(t) = dofs.get_mut(s.axis.index) {
                *t = s.took;
            }
        }
    }

    fn holding(&self, positions: &mut [f64]) {
        for s in &self.slots {
            let a = &s.axis;
            if a.ready
                && a.commanded
                && !a.compliant
                && !a.stiffening
                && let Some(p) = positions.get_mut(a.index)
            {
                *p = a.units.to_joint(a.last);
            }
        }
    }

    fn compliant(&mut self, on: bool, dofs: &mut [bool]) -> Result<Readiness, BackendError> {
        self.try_compliant(on, dofs).map_err(|e| self.failed(e))
    }

    fn feedback_timeout(&self, dof: usize) -> Option<std::time::Duration> {
        self.slots.iter().any(|s| s.axis.index == dof).then(|| {
            std::time::Duration::from_secs_f64(f64::from(self.timeout_ticks) / self.rate_hz)
        })
    }

    fn status(&self) -> Arc<BusStatus> {
        self.status.clone()
    }
}
