//! One tick of the loop: commands, the player's state machine, the guard, the backend.
//!
//! Nothing here allocates or frees after [`Player::new`]: buffers are sized for the joint set,
//! playbacks arrive boxed and leave through the retire channel.

use std::sync::Arc;

use crossbeam::channel::{Receiver, Sender, TryRecvError, TrySendError};

use super::status::{Published, Shared};
use super::{
    Clock, Command, Outcome, Playback, Refusal, Retired, SafeState, Settings, State, Step,
};
use crate::backend::{Backend, BackendError, FaultKind, Feedback, Readiness};
use crate::skel::Limits;
use crate::trajectory::{Cursor, DofLimits, JointSet, Setpoint, Stop, StopKind, Trajectory};

/// `code` of a [`FaultKind::Limit`] fault: which bound the setpoint crossed.
pub const LIMIT_POSITION: u32 = 1;
pub const LIMIT_VELOCITY: u32 = 2;
pub const LIMIT_ACCELERATION: u32 = 3;
/// A step between two ticks faster than the velocity limit allows.
pub const LIMIT_JUMP: u32 = 4;

/// Retired playbacks the channel could not take at once (it is sized so this stays empty).
const PARKED: usize = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Disabled,
    Enabling { ready: bool, ticks: u64 },
    Idle,
    Running,
    Stopping { tick: u64 },
    Holding,
    Fault,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Segment {
    Approach,
    /// At the motion's first sample until the loop tick of `start_at`.
    Wait {
        until: u64,
    },
    Motion,
}

/// What follows a decelerated stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum After {
    Hold,
    Disable,
    Exit,
}

pub(crate) struct Player {
    rate_hz: f64,
    limits: Vec<DofLimits>,
    backend: Box<dyn Backend>,
    stop: Stop,
    commands: Receiver<Command>,
    retire: Sender<Retired>,
    parked: [Option<Retired>; PARKED],
    shared: Arc<Shared>,

    enable_timeout_ticks: u64,
    /// Per DOF, from the backend's bus settings (else the loop's default).
    feedback_timeout_ticks: Vec<u64>,
    ramp_rate: f64,
    start_tolerance: f64,
    safe_state: SafeState,

    mode: Mode,
    after_stop: After,
    playback: Option<Box<Playback>>,
    segment: Segment,
    /// Path position in the current segment: `base + frac` ticks.
    base: u64,
    frac: f64,
    /// Path speed (1 = as recorded) and where pause/resume is taking it.
    speed: f64,
    next_speed: f64,
    target_speed: f64,
    /// The playback's first tick is still to come (the path does not move before it).
    fresh: bool,
    cursor: Cursor,
    cursor_next: Cursor,

    out: Vec<Setpoint>,
    scratch: Vec<Setpoint>,
    /// The last setpoints the backend accepted; `None`-like until the first write of a session.
    last: Vec<Setpoint>,
    /// The ones accepted one write before `last` (equal to it after a discontinuity).
    previous: Vec<Setpoint>,
    continuous: bool,
    feedback: Vec<Feedback>,
    measured: Vec<f64>,
    commanded: Vec<f64>,
    stale: Vec<u64>,
    tracking: Vec<f64>,

    last_k: Option<u64>,
    enabled: bool,
    fault: Option<BackendError>,
    limit_violations: u64,
    refused: u64,
    awaiting_first_command: bool,
    first_command: Option<(u64, u64)>,
}

fn within(l: Limits, x: f64) -> bool {
    let slack = |b: f64| 1e-9 * b.abs().max(1.0);
    x >= l.lower - slack(l.lower) && x <= l.upper + slack(l.upper)
}

fn speed_bound(l: Limits) -> f64 {
    l.upper.max(-l.lower)
}

impl Player {
    pub fn new(
        settings: &Settings,
        backend: Box<dyn Backend>,
        joints: &JointSet,
        commands: Receiver<Command>,
        retire: Sender<Retired>,
        shared: Arc<Shared>,
    ) -> Self {
        let n = joints.len();
        let ticks = |s: f64| (s * settings.rate_hz).ceil().max(1.0) as u64;
        let initial: Vec<f64> = joints.dofs.iter().map(|d| d.initial_position).collect();
        Self {
            rate_hz: settings.rate_hz,
            limits: joints.dofs.iter().map(|d| d.limits).collect(),
            stop: Stop::new(joints, settings.rate_hz, &[]),
            commands,
            retire,
            parked: std::array::from_fn(|_| None),
            shared,
            enable_timeout_ticks: ticks(settings.enable_timeout_s),
            feedback_timeout_ticks: (0..n)
                .map(|j| {
                    ticks(
                        backend
                            .feedback_timeout(j)
                            .map_or(settings.feedback_timeout_s, |d| d.as_secs_f64()),
                    )
                })
                .collect(),
            ramp_rate: 1.0 / settings.pause_ramp_s,
            start_tolerance: settings.start_tolerance,
            backend,
            safe_state: settings.safe_state,
            mode: Mode::Disabled,
            after_stop: After::Hold,
            playback: None,
            segment: Segment::Approach,
            base: 0,
            frac: 0.0,
            speed: 1.0,
            next_speed: 1.0,
            target_speed: 1.0,
            fresh: true,
            cursor: Cursor::default(),
            cursor_next: Cursor::default(),
            out: vec![Setpoint::default(); n],
            scratch: vec![Setpoint::default(); n],
            last: initial
                .iter()
                .map(|&p| Setpoint {
                    position: p,
                    ..Setpoint::default()
                })
                .collect(),
            previous: initial
                .iter()
                .map(|&p| Setpoint {
                    position: p,
                    ..Setpoint::default()
                })
                .collect(),
            continuous: false,
            feedback: vec![Feedback::default(); n],
            measured: initial.clone(),
            commanded: initial,
            stale: vec![0; n],
            tracking: vec![0.0; n],
            last_k: None,
            enabled: false,
            fault: None,
            limit_violations: 0,
            refused: 0,
            awaiting_first_command: false,
            first_command: None,
        }
    }

    /// Faults after too many overruns in a row, publishing at once (tick `k` has already run).
    pub fn overrun_fault(&mut self, k: u64) {
        self.enter_fault(BackendError::new(FaultKind::Overrun));
        self.publish(k);
    }

    pub fn state(&self) -> State {
        match self.mode {
            Mode::Disabled | Mode::Enabling { .. } => State::Disabled,
            Mode::Idle => State::Idle,
            Mode::Running if self.target_speed == 0.0 => State::Paused,
            Mode::Running => match self.segment {
                Segment::Motion => State::Playing,
                Segment::Approach | Segment::Wait { .. } => State::Approaching,
            },
            Mode::Stopping { .. } => State::Stopping,
            Mode::Holding => State::Holding,
            Mode::Fault => State::Fault,
        }
    }

    /// Runs loop tick `k` (ticks may be skipped after an overrun; the path follows the clock).
    pub fn tick(&mut self, k: u64, clock: &dyn Clock) -> Step {
        let dk = self.last_k.map_or(1, |last| k.saturating_sub(last).max(1));
        self.last_k = Some(k);
        self.flush_parked();
        let mut exit = self.take_commands(k, clock);

        let mut write = false;
        let mut stop_done = false;
        match self.mode {
            Mode::Disabled => {}
            Mode::Fault => self.hold_commanded(k),
            Mode::Enabling { ready, ticks } => self.step_enable(ready, ticks + dk),
            Mode::Idle | Mode::Holding => {
                self.hold_setpoints();
                write = true;
            }
            Mode::Running => {
                self.run_playback(k, dk);
                write = true;
            }
            Mode::Stopping { tick } => {
                let tick = tick + dk;
                self.stop.sample(tick, &mut self.out);
                stop_done = tick + 1 >= self.stop.ticks();
                self.mode = Mode::Stopping { tick };
                write = true;
            }
        }
        if write && self.mode != Mode::Fault {
            self.guard_and_write(k, dk, clock);
        }
        if stop_done && matches!(self.mode, Mode::Stopping { .. }) {
            exit |= self.end_stop();
        }
        self.read_feedback(dk, write);
        self.publish(k);
        if exit { Step::Ended } else { Step::Continue }
    }

    fn take_commands(&mut self, k: u64, clock: &dyn Clock) -> bool {
        let mut exit = false;
        loop {
            match self.commands.try_recv() {
                Ok(cmd) => exit |= self.handle(cmd, k, clock),
                // Every handle is gone: nobody can stop us later, so stop now.
                Err(TryRecvError::Disconnected) => {
                    exit |= self.handle(Command::Shutdown, k, clock);
                    break;
                }
                Err(TryRecvError::Empty) => break,
            }
        }
        exit
    }

    /// Returns true when the loop should end after this tick.
    fn handle(&mut self, cmd: Command, k: u64, clock: &dyn Clock) -> bool {
        match cmd {
            Command::Play(pb) => self.accept(pb, k, clock),
            Command::Stop => match self.mode {
                Mode::Running => self.begin_stop(After::Hold),
                Mode::Idle => self.mode = Mode::Holding,
                _ => {}
            },
            Command::Pause => {
                if self.mode == Mode::Running {
                    self.target_speed = 0.0;
                }
            }
            Command::Resume => {
                if self.mode == Mode::Running {
                    self.target_speed = 1.0;
                }
            }
            Command::Hold => match self.mode {
                Mode::Running | Mode::Stopping { .. } => {
                    self.retire_active(Outcome::Stopped);
                    self.mode = Mode::Holding;
                }
                Mode::Idle => self.mode = Mode::Holding,
                _ => {}
            },
            Command::Enable => {
                if self.mode == Mode::Disabled {
                    self.mode = Mode::Enabling {
                        ready: false,
                        ticks: 0,
                    };
                }
            }
            Command::Disable => match self.mode {
                Mode::Running => self.begin_stop(After::Disable),
                Mode::Stopping { .. } if self.after_stop != After::Exit => {
                    self.after_stop = After::Disable;
                }
                Mode::Idle | Mode::Holding | Mode::Fault | Mode::Enabling { .. } => self.disable(),
                _ => {}
            },
            Command::ClearFault => {
                if self.mode == Mode::Fault {
                    // A fault the loop found leaves the drives enabled; one a bus or drive reported
                    // takes them out of operation, so they go through `enable` again and come up
                    // at their measured position.
                    let loop_side = matches!(
                        self.fault.map(|f| f.kind),
                        Some(FaultKind::Limit | FaultKind::Overrun)
                    );
                    self.fault = None;
                    self.enabled &= loop_side;
                    if self.enabled {
                        self.hold_measured();
                        self.mode = Mode::Holding;
                    } else {
                        self.mode = Mode::Disabled;
                    }
                }
            }
            Command::Shutdown => match self.mode {
                Mode::Running => self.begin_stop(After::Exit),
                Mode::Stopping { .. } => self.after_stop = After::Exit,
                _ => return self.finish(),
            },
        }
        false
    }

    fn refuse(&mut self, pb: Box<Playback>, why: Refusal) {
        self.refused += 1;
        self.send_retired(Retired {
            playback: pb,
            outcome: Outcome::Refused(why),
        });
    }

    fn accept(&mut self, pb: Box<Playback>, k: u64, clock: &dyn Clock) {
        if !matches!(self.mode, Mode::Idle | Mode::Holding) {
            let state = self.state();
            return self.refuse(pb, Refusal::Busy(state));
        }
        let n = self.limits.len();
        let fits = |t: &Trajectory| t.dofs() == n && t.ticks() > 0 && t.rate_hz() == self.rate_hz;
        if !fits(&pb.approach) || !fits(&pb.motion) {
            return self.refuse(pb, Refusal::Mismatch);
        }
        let mut cursor = Cursor::default();
        pb.approach.sample(&mut cursor, 0, &mut self.out);
        for (j, (a, l)) in self.out.iter().zip(&self.last).enumerate() {
            let gap = (a.position - l.position).abs();
            // NaN counts as a jump.
            if gap.is_nan() || gap > self.start_tolerance {
                return self.refuse(pb, Refusal::Jump { dof: j as u16 });
            }
        }
        if pb.looped {
            let end = pb.motion.ticks() - 1;
            pb.motion.sample(&mut cursor, end, &mut self.scratch);
            let mut cursor = Cursor::default();
            pb.motion.sample(&mut cursor, 0, &mut self.out);
            let period = 1.0 / self.rate_hz;
            for (j, ((first, last), lim)) in self
                .out
                .iter()
                .zip(&self.scratch)
                .zip(&self.limits)
                .enumerate()
            {
                // A seam no larger than one tick at the acceleration limit moves nothing.
                let a = speed_bound(lim.acceleration);
                let tolerance = if a.is_finite() {
                    a * period * period
                } else {
                    1e-6
                };
                let seam = (first.position - last.position).abs();
                if end == 0 || seam.is_nan() || seam > tolerance.max(1e-9) {
                    return self.refuse(pb, Refusal::NotLoopable { dof: j as u16 });
                }
            }
        }
        self.segment = Segment::Approach;
        if let Some(at) = pb.start_at {
            let at_ns = at
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as i128);
            let ahead_ns = (at_ns - clock.realtime_ns()).max(0) as f64;
            let until = k + (ahead_ns * self.rate_hz / 1e9).ceil() as u64;
            self.segment = Segment::Wait { until };
        }
        self.playback = Some(pb);
        self.base = 0;
        self.frac = 0.0;
        self.speed = 1.0;
        self.next_speed = 1.0;
        self.target_speed = 1.0;
        self.fresh = true;
        self.cursor = Cursor::default();
        self.cursor_next = Cursor::default();
        self.mode = Mode::Running;
        self.awaiting_first_command = true;
        self.first_command = None;
        // The approach's first sample may differ from the hold position by the start tolerance.
        self.continuous = false;
    }

    fn step_enable(&mut self, mut ready: bool, ticks: u64) {
        // Stepped until the feedback is in as well: real drives only report while polled.
        match self.backend.enable() {
            Ok(Readiness::Ready) => ready = true,
            Ok(Readiness::Pending) => {}
            Err(e) => return self.enter_fault(e),
        }
        // Drives come up targeting their measured position: hold exactly that.
        if ready && self.feedback.iter().all(|f| f.valid) {
            self.enabled = true;
            self.stale.iter_mut().for_each(|s| *s = 0);
            self.hold_measured();
            self.mode = Mode::Idle;
        } else if ticks > self.enable_timeout_ticks {
            self.enter_fault(BackendError::new(FaultKind::EnableTimeout));
        } else {
            self.mode = Mode::Enabling { ready, ticks };
        }
    }

    fn hold_measured(&mut self) {
        for (l, f) in self.last.iter_mut().zip(&self.feedback) {
            if f.valid {
                l.position = f.position;
            }
        }
        self.continuous = false;
    }

    /// The safe state: the last commanded positions at rest. Retried every faulted tick until the
    /// backend accepts it (its error is already covered by the fault).
    fn hold_commanded(&mut self, k: u64) {
        self.hold_setpoints();
        let _ = self.backend.hold(k, &self.out);
    }

    fn hold_setpoints(&mut self) {
        for (o, l) in self.out.iter_mut().zip(&self.last) {
            *o = Setpoint {
                position: l.position,
                velocity: 0.0,
                acceleration: 0.0,
            };
        }
    }

    /// The setpoint at the current path position, scaled by the path speed, then the path
    /// position advanced for the next tick.
    fn run_playback(&mut self, k: u64, dk: u64) {
        // The path position follows the loop tick: on by this tick's dk (more than one after an
        // overrun), except on the playback's first tick.
        if self.fresh {
            self.fresh = false;
        } else {
            self.move_path(dk);
        }
        let Some(pb) = self.playback.as_deref() else {
            self.hold_setpoints();
            self.mode = Mode::Holding;
            return;
        };
        if let Segment::Wait { until } = self.segment {
            // Approach first, then hold the first sample until the start tick.
            let approach_done = self.base + 1 >= pb.approach.ticks();
            if !approach_done {
                return self.sample_path(true);
            }
            if k < until {
                pb.motion.sample(&mut self.cursor, 0, &mut self.out);
                for o in &mut self.out {
                    o.velocity = 0.0;
                    o.acceleration = 0.0;
                }
                return;
            }
            self.segment = Segment::Motion;
            self.base = 0;
            self.frac = 0.0;
            self.cursor = Cursor::default();
            self.cursor_next = Cursor::default();
        }
        if self.segment == Segment::Approach && self.base + 1 >= pb.approach.ticks() {
            self.segment = Segment::Motion;
            self.base -= pb.approach.ticks() - 1;
            self.cursor = Cursor::default();
            self.cursor_next = Cursor::default();
        }
        if self.segment == Segment::Motion {
            let last = pb.motion.ticks() - 1;
            if self.base >= last {
                if pb.looped && last > 0 {
                    self.base -= last;
                    self.cursor = Cursor::default();
                    self.cursor_next = Cursor::default();
                } else {
                    pb.motion.sample(&mut self.cursor, last, &mut self.out);
                    self.retire_active(Outcome::Finished);
                    self.mode = Mode::Holding;
                    return;
                }
            }
        }
        self.sample_path(self.segment != Segment::Motion);
    }

    fn sample_path(&mut self, approach: bool) {
        let Some(pb) = self.playback.as_deref() else {
            return;
        };
        let traj = if approach { &pb.approach } else { &pb.motion };
        traj.sample(&mut self.cursor, self.base, &mut self.out);
        if self.frac > 0.0 {
            traj.sample(&mut self.cursor_next, self.base + 1, &mut self.scratch);
            let f = self.frac;
            for (o, b) in self.out.iter_mut().zip(&self.scratch) {
                o.position += (b.position - o.position) * f;
                o.velocity += (b.velocity - o.velocity) * f;
                o.acceleration += (b.acceleration - o.acceleration) * f;
            }
        }
        // Path speed s: velocity s·v, acceleration s²·a + ṡ·v. ṡ heads for the target speed at
        // the ramp rate, narrowed so every DOF's acceleration stays within its limits (ṡ = 0
        // always qualifies, as s ≤ 1 and the trajectory itself is within them).
        let s = self.speed;
        let mut ds = 0.0;
        if self.target_speed != s {
            let want = if self.target_speed > s {
                self.ramp_rate
            } else {
                -self.ramp_rate
            };
            let (mut lo, mut hi) = (f64::NEG_INFINITY, f64::INFINITY);
            for (o, l) in self.out.iter().zip(&self.limits) {
                let (v, a) = (o.velocity, o.acceleration);
                if v.abs() < 1e-12 {
                    continue;
                }
                let (b1, b2) = (
                    (l.acceleration.lower - s * s * a) / v,
                    (l.acceleration.upper - s * s * a) / v,
                );
                lo = lo.max(b1.min(b2));
                hi = hi.min(b1.max(b2));
            }
            ds = want.clamp(lo.min(0.0), hi.max(0.0));
        }
        if s != 1.0 || ds != 0.0 {
            for o in &mut self.out {
                o.acceleration = s * s * o.acceleration + ds * o.velocity;
                o.velocity *= s;
            }
        }
        let next = (s + ds / self.rate_hz).clamp(0.0, 1.0);
        self.next_speed =
            if (ds > 0.0 && next > self.target_speed) || (ds < 0.0 && next < self.target_speed) {
                self.target_speed
            } else {
                next
            };
    }

    /// Moves the path position on by `dk` ticks: the first at the mean of this tick's and the next
    /// speed, the rest (skipped by an overrun) at the next speed.
    fn move_path(&mut self, dk: u64) {
        let (s, next) = (self.speed, self.next_speed);
        let advance = if s == 1.0 && next == 1.0 {
            dk as f64
        } else {
            0.5 * (s + next) + next * (dk - 1) as f64
        };
        self.speed = next;
        let pos = self.frac + advance;
        let whole = pos.floor();
        self.base += whole as u64;
        self.frac = pos - whole;
    }

    fn begin_stop(&mut self, after: After) {
        self.stop
            .plan(&self.previous, &self.last, StopKind::Planned);
        self.after_stop = after;
        self.retire_active(Outcome::Stopped);
        self.mode = Mode::Stopping { tick: 0 };
        // The plan starts at the last commanded state; its tick 0 was already sent.
    }

    /// At rest after a stop: returns true when the loop should end.
    fn end_stop(&mut self) -> bool {
        self.mode = Mode::Holding;
        match self.after_stop {
            After::Hold => false,
            After::Disable => {
                self.disable();
                false
            }
            After::Exit => self.finish(),
        }
    }

    /// Leaves the drives in the safe state; the loop ends after this tick.
    fn finish(&mut self) -> bool {
        self.retire_active(Outcome::Stopped);
        match self.safe_state {
            SafeState::Disable => self.disable(),
            SafeState::Hold => {
                if self.enabled && self.mode != Mode::Fault {
                    self.hold_commanded(self.last_k.unwrap_or(0));
                    self.mode = Mode::Holding;
                }
            }
        }
        true
    }

    fn disable(&mut self) {
        self.retire_active(Outcome::Stopped);
        if self.enabled || matches!(self.mode, Mode::Enabling { .. }) {
            // Disabling is the way out of trouble: a failure here changes nothing we could do.
            let _ = self.backend.disable();
        }
        self.enabled = false;
        self.continuous = false;
        if self.mode != Mode::Fault {
            self.mode = Mode::Disabled;
        }
    }

    fn enter_fault(&mut self, e: BackendError) {
        if self.mode == Mode::Fault {
            return;
        }
        self.hold_commanded(self.last_k.unwrap_or(0));
        self.fault = Some(e);
        self.retire_active(Outcome::Faulted);
        self.mode = Mode::Fault;
        self.continuous = false;
    }

    /// The limits once more, and no step faster than the velocity limit between ticks.
    fn guard_and_write(&mut self, k: u64, dk: u64, clock: &dyn Clock) {
        let dt = dk as f64 / self.rate_hz;
        for (j, ((o, l), lim)) in self
            .out
            .iter()
            .zip(&self.last)
            .zip(&self.limits)
            .enumerate()
        {
            let code = if !within(lim.position, o.position) {
                LIMIT_POSITION
            } else if !within(lim.velocity, o.velocity) {
                LIMIT_VELOCITY
            } else if !within(lim.acceleration, o.acceleration) {
                LIMIT_ACCELERATION
            } else if self.continuous
                && (o.position - l.position).abs()
                    > speed_bound(lim.velocity) * dt * (1.0 + 1e-6) + 1e-9
            {
                LIMIT_JUMP
            } else {
                continue;
            };
            self.limit_violations += 1;
            return self.enter_fault(BackendError {
                kind: FaultKind::Limit,
                dof: Some(j as u16),
                code,
            });
        }
        if let Err(e) = self.backend.write(k, &self.out) {
            return self.enter_fault(e);
        }
        let before = if self.continuous {
            &self.last
        } else {
            &self.out
        };
        self.previous.copy_from_slice(before);
        self.last.copy_from_slice(&self.out);
        self.continuous = true;
        for (c, l) in self.commanded.iter_mut().zip(&self.last) {
            *c = l.position;
        }
        if self.awaiting_first_command && self.mode == Mode::Running {
            self.awaiting_first_command = false;
            self.first_command = Some((k, clock.now_ns()));
        }
    }

    fn read_feedback(&mut self, dk: u64, wrote: bool) {
        let result = self.backend.read(&mut self.feedback);
        let commanding = !matches!(
            self.mode,
            Mode::Disabled | Mode::Enabling { .. } | Mode::Fault
        );
        if let Err(e) = result {
            if commanding {
                self.enter_fault(e);
            }
            return;
        }
        let wrote = wrote && commanding;
        let mut missing = None;
        for (j, f) in self.feedback.iter().enumerate() {
            let (Some(m), Some(stale)) = (self.measured.get_mut(j), self.stale.get_mut(j)) else {
                continue;
            };
            if !f.valid {
                *stale += dk;
                let timeout = self.feedback_timeout_ticks.get(j).copied().unwrap_or(0);
                if commanding && *stale > timeout && missing.is_none() {
                    missing = Some(j);
                }
                continue;
            }
            *stale = 0;
            *m = f.position;
            if wrote && let (Some(c), Some(t)) = (self.commanded.get(j), self.tracking.get_mut(j)) {
                *t = t.max((c - f.position).abs());
            }
        }
        if let Some(j) = missing {
            self.enter_fault(BackendError {
                kind: FaultKind::FeedbackMissing,
                dof: Some(j as u16),
                code: 0,
            });
        }
    }

    fn publish(&self, k: u64) {
        let (progress, time_s) = match (self.segment, self.playback.as_deref()) {
            (Segment::Motion, Some(pb)) if self.mode == Mode::Running => {
                let t = self.base as f64 + self.frac;
                let last = pb.motion.ticks().saturating_sub(1).max(1) as f64;
                ((t / last).min(1.0), t / self.rate_hz)
            }
            _ => (0.0, 0.0),
        };
        let p = Published {
            state: self.state(),
            motion_id: self.playback.as_ref().map(|pb| pb.motion_id),
            tick: k,
            progress,
            time_s,
            limit_violations: self.limit_violations,
            refused: self.refused,
            fault: self.fault,
            first_command: self.first_command,
        };
        self.shared
            .publish(&p, &self.commanded, &self.measured, &self.tracking);
    }

    fn retire_active(&mut self, outcome: Outcome) {
        if let Some(playback) = self.playback.take() {
            self.send_retired(Retired { playback, outcome });
        }
    }

    fn send_retired(&mut self, r: Retired) {
        match self.retire.try_send(r) {
            Ok(()) => {}
            Err(TrySendError::Full(r)) | Err(TrySendError::Disconnected(r)) => {
                match self.parked.iter_mut().find(|p| p.is_none()) {
                    Some(slot) => *slot = Some(r),
                    // Unreachable while the handle drains before each send; never free here.
                    None => std::mem::forget(r),
                }
            }
        }
    }

    fn flush_parked(&mut self) {
        for slot in &mut self.parked {
            if let Some(r) = slot.take() {
                match self.retire.try_send(r) {
                    Ok(()) => {}
                    Err(TrySendError::Full(r)) | Err(TrySendError::Disconnected(r)) => {
                        *slot = Some(r);
                        return;
                    }
                }
            }
        }
    }
}
