//! One tick of the loop: commands, the player's state machine, the guard, the backend.
//!
//! Nothing here allocates or frees after [`Player::new`]: buffers are sized for the joint set,
//! playbacks arrive boxed and leave through the retire channel.
//!
//! The drives see one stream of setpoints, one per period, whatever happens: motion, pause,
//! stop, fault and hold all continue from the last two setpoints sent, and every setpoint is
//! checked against them before it goes out ([`violation`]).
//!
//! The DOFs are played by [`Slot`]s: slot 0 is the whole robot, slots 1.. the configured joint
//! groups (disjoint). Each plays one motion at a time, a slot only while no overlapping one does
//! (slot 0 overlaps every group); DOFs no slot moves hold. A fault stops every slot.

use std::sync::Arc;

use crossbeam::channel::{Receiver, Sender, TryRecvError, TrySendError};

use super::slot::{After, Leaving, Slot, SlotState};
use super::status::{Published, Shared, SlotPublished};
use super::trace::{RowHead, Trace};
use super::{
    Ack, Clock, Command, EStop, EStopCause, MAX_SLOTS, Outcome, Playback, Refusal, Repeat, Retired,
    SafeState, Scope, Settings, State, Step,
};
use crate::backend::{Backend, BackendError, FaultKind, Feedback, Readiness};
use crate::estop::EStopInput;
use crate::trajectory::envelope::position_scale;
use crate::trajectory::{
    DofLimits, JointSet, Measure, SeamError, Setpoint, Stop, StopKind, Stream, Trajectory,
};

/// `code` of a [`FaultKind::Limit`] fault: which check the setpoint failed.
pub const LIMIT_POSITION: u32 = 1;
pub const LIMIT_VELOCITY: u32 = 2;
pub const LIMIT_ACCELERATION: u32 = 3;
/// Two consecutive positions farther apart than the velocity limit allows in one period.
pub const LIMIT_JUMP: u32 = 4;
/// Two consecutive velocities farther apart than the acceleration limit allows in one period.
pub const LIMIT_VELOCITY_STEP: u32 = 5;
/// Three consecutive positions bending harder than the acceleration limit allows.
pub const LIMIT_BEND: u32 = 6;

/// `code` of a [`FaultKind::FollowingError`] fault.
pub const FOLLOWING_PATH: u32 = 1;
pub const FOLLOWING_GOAL: u32 = 2;

/// Retired playbacks the channel could not take at once (it is sized so this stays empty).
const PARKED: usize = 4;
/// Commands taken in one tick; the rest wait for the next.
const PER_TICK: usize = 32;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Disabled,
    Enabling {
        ready: bool,
        ticks: u64,
    },
    /// The drives follow; the slots say what moves.
    Active,
    /// Teach-in: the drives are compliant where the backend can make them so (else they hold),
    /// and there the commanded pose follows the measured one; `compliant`: any drive is.
    Recording {
        compliant: bool,
    },
    /// Stopping quickly (tick into the plan), then holding, until cleared.
    Fault {
        tick: u64,
    },
    /// The E-stop: stopping quickly (tick into the plan), then the safe state, until cleared
    /// once the input is released; `resume`: the drives were up, and come up again then.
    EStop {
        tick: u64,
        resume: bool,
    },
}

pub(crate) struct Player {
    rate_hz: f64,
    dt: f64,
    limits: Vec<DofLimits>,
    backend: Box<dyn Backend>,
    /// Polled once a tick.
    estop_input: Option<Box<dyn EStopInput>>,
    /// A drive's own E-stop is the loop's E-stop, not a fault.
    estop_drive: bool,
    estop: EStop,
    /// The whole robot's quick stop, for faults and the E-stop.
    stop: Stop,
    slots: Vec<Slot>,
    commands: Receiver<(u64, Command)>,
    retire: Sender<Retired>,
    parked: [Option<Retired>; PARKED],
    shared: Arc<Shared>,
    trace: Option<Arc<Trace>>,
    /// This tick's acknowledgements, published after its status so that a reader who sees one
    /// sees the command's effect.
    acks: [(u64, Ack); PER_TICK],
    acks_len: usize,

    enable_timeout_ticks: u64,
    feedback_timeout_ticks: Vec<u64>,
    /// Path-speed change per tick while pausing or resuming.
    ramp_step: f64,
    start_tolerance: f64,
    safe_state: SafeState,
    path_tolerance: Vec<f64>,
    goal_tolerance: f64,
    goal_ticks: u64,

    mode: Mode,
    /// What follows once every slot is at rest (disable, exit), asked of all slots at once.
    after_all: Option<After>,
    /// A disable the backend refused: sent again every tick while the drives are down.
    disable_untaken: bool,
    /// A `ClearFault` waiting for the fault's (or E-stop's) quick stop to come to rest.
    clear_pending: bool,

    out: Vec<Setpoint>,
    /// The last two setpoints sent (`prev` before `last`): what the drives follow. After the
    /// drives come up both are the pose they hold, at rest.
    last: Vec<Setpoint>,
    prev: Vec<Setpoint>,
    feedback: Vec<Feedback>,
    measured: Vec<f64>,
    commanded: Vec<f64>,
    stale: Vec<u64>,
    tracking: Vec<f64>,

    /// Teach-in: the DOFs whose drives went compliant (the others hold).
    compliant: Vec<bool>,

    last_k: Option<u64>,
    enabled: bool,
    fault: Option<BackendError>,
    limit_violations: u64,
    refused: u64,
}

/// Whether `next` may follow `prev`, `last` on a DOF with limits `lim` at period `dt`, as the
/// drive sees the stream (the one definition: [`Stream::judge`]): the code of the first check it
/// fails. Positions outside the position limits pass when they do not move farther out (a robot
/// that ends up outside can always be brought back).
pub(crate) fn violation(
    lim: &DofLimits,
    prev: &Setpoint,
    last: &Setpoint,
    next: &Setpoint,
    dt: f64,
) -> Option<u32> {
    let scale = position_scale(lim.position)
        .max(next.position.abs())
        .max(last.position.abs())
        .max(prev.position.abs());
    let stream = Stream {
        dt,
        // After the drives come up both earlier setpoints are the pose they hold: always two.
        history: 2,
        scale,
        recovering: true,
    };
    let (measure, _, _) = stream.judge(lim, [prev, last, next], |_, _, _| {}).err()?;
    Some(match measure {
        Measure::Position => LIMIT_POSITION,
        Measure::Velocity => LIMIT_VELOCITY,
        Measure::Acceleration => LIMIT_ACCELERATION,
        Measure::StepVelocity => LIMIT_JUMP,
        Measure::VelocityStep => LIMIT_VELOCITY_STEP,
        Measure::StepAcceleration => LIMIT_BEND,
    })
}

fn at_rest(position: f64) -> Setpoint {
    Setpoint {
        position,
        velocity: 0.0,
        acceleration: 0.0,
    }
}

/// How a slot's state reads to the control side.
fn slot_state(slot: &Slot) -> State {
    match slot.state {
        SlotState::Idle => State::Idle,
        SlotState::Holding => State::Holding,
        SlotState::Stopping { .. } => State::Stopping,
        SlotState::Running if slot.path.target_speed == 0.0 => State::Paused,
        SlotState::Running => match slot.path.segment {
            super::path::Segment::Motion => State::Playing,
            _ => State::Approaching,
        },
    }
}

/// Which of two slot states says more about the robot as a whole.
fn rank(s: State) -> u8 {
    match s {
        State::Stopping => 5,
        State::Playing => 4,
        State::Approaching => 3,
        State::Paused => 2,
        State::Holding => 1,
        _ => 0,
    }
}

/// How the player talks to the control side.
pub(crate) struct Links {
    pub commands: Receiver<(u64, Command)>,
    pub retire: Sender<Retired>,
    pub shared: Arc<Shared>,
    pub trace: Option<Arc<Trace>>,
}

impl Player {
    pub fn new(
        settings: &Settings,
        backend: Box<dyn Backend>,
        estop_input: Option<Box<dyn EStopInput>>,
        joints: &JointSet,
        links: Links,
    ) -> Self {
        let Links {
            commands,
            retire,
            shared,
            trace,
        } = links;
        let n = joints.len();
        let ticks = |s: f64| (s * settings.rate_hz).ceil().max(1.0) as u64;
        let initial: Vec<f64> = joints.dofs.iter().map(|d| d.initial_position).collect();
        let quick: Vec<f64> = if settings.quick_stop_deceleration.is_empty() {
            joints
                .dofs
                .iter()
                .map(|d| {
                    d.limits
                        .acceleration
                        .upper
                        .min(-d.limits.acceleration.lower)
                })
                .collect()
        } else {
            settings.quick_stop_deceleration.clone()
        };
        let feedback_timeout_ticks = (0..n)
            .map(|j| {
                ticks(
                    backend
                        .feedback_timeout(j)
                        .map_or(settings.feedback_timeout_s, |d| d.as_secs_f64()),
                )
            })
            .collect();
        let rest: Vec<Setpoint> = initial.iter().map(|&p| at_rest(p)).collect();
        let slots = std::iter::once((0..n).collect())
            .chain(settings.groups.iter().cloned())
            .map(|dofs: Vec<usize>| Slot::new(joints, dofs, settings.rate_hz, &quick))
            .collect();
        Self {
            rate_hz: settings.rate_hz,
            dt: 1.0 / settings.rate_hz,
            limits: joints.dofs.iter().map(|d| d.limits).collect(),
            backend,
            estop: EStop {
                input: estop_input.as_ref().map(|_| false),
                cause: None,
                reenable: false,
            },
            estop_input,
            estop_drive: settings.estop_drive,
            stop: Stop::new(joints, settings.rate_hz, &quick),
            slots,
            commands,
            retire,
            parked: std::array::from_fn(|_| None),
            shared,
            trace,
            acks: [(0, Ack::Done); PER_TICK],
            acks_len: 0,
            enable_timeout_ticks: ticks(settings.enable_timeout_s),
            feedback_timeout_ticks,
            ramp_step: 1.0 / (settings.pause_ramp_s * settings.rate_hz),
            start_tolerance: settings.start_tolerance,
            safe_state: settings.safe_state,
            path_tolerance: if settings.path_tolerance.is_empty() {
                vec![f64::INFINITY; n]
            } else {
                settings.path_tolerance.clone()
            },
            goal_tolerance: settings.goal_tolerance,
            goal_ticks: ticks(settings.goal_time_s),
            mode: Mode::Disabled,
            after_all: None,
            disable_untaken: false,
            clear_pending: false,
            out: rest.clone(),
            last: rest.clone(),
            prev: rest,
            feedback: vec![Feedback::default(); n],
            measured: initial.clone(),
            commanded: initial,
            stale: vec![0; n],
            tracking: vec![0.0; n],
            compliant: vec![false; n],
            last_k: None,
            enabled: false,
            fault: None,
            limit_violations: 0,
            refused: 0,
        }
    }

    /// A fault the loop itself found (late wake-up, overruns): stop quickly from what was last
    /// commanded. Published at once: the tick it belongs to may already have run.
    pub fn loop_fault(&mut self, e: BackendError) {
        self.enter_fault(e);
        self.publish(self.last_k.unwrap_or(0));
    }

    pub fn state(&self) -> State {
        match self.mode {
            Mode::Disabled | Mode::Enabling { .. } => State::Disabled,
            Mode::Recording { .. } => State::Recording,
            Mode::Fault { .. } => State::Fault,
            Mode::EStop { .. } => State::EStop,
            Mode::Active => self
                .slots
                .iter()
                .map(slot_state)
                .max_by_key(|&s| rank(s))
                .unwrap_or(State::Idle),
        }
    }

    fn moving(&self) -> bool {
        match self.mode {
            Mode::Active => self.slots.iter().any(Slot::moving),
            Mode::Fault { tick } | Mode::EStop { tick, .. } => tick + 1 < self.stop.ticks(),
            _ => false,
        }
    }

    /// Runs loop tick `k`. Ticks may have been skipped after an overrun: timeouts count them,
    /// the path does not (one period of motion per tick run).
    pub fn tick(&mut self, k: u64, clock: &dyn Clock) -> Step {
        let dk = self.last_k.map_or(1, |last| k.saturating_sub(last).max(1));
        self.last_k = Some(k);
        self.flush_parked();
        // Before the commands: a play in the same tick as the E-stop is refused.
        self.poll_estop();
        if self.disable_untaken && !self.enabled && !matches!(self.mode, Mode::Enabling { .. }) {
            self.disable_drives();
        }
        let mut exit = self.take_commands(k, clock);

        let mut sent = false;
        match self.mode {
            Mode::Disabled | Mode::Fault { .. } | Mode::EStop { .. } => {}
            Mode::Enabling { ready, ticks } => self.step_enable(ready, ticks + dk),
            Mode::Active => {
                exit |= self.play_slots(k);
                if self.mode == Mode::Active {
                    sent = self.send(k, clock);
                }
                if sent {
                    exit |= self.after_rest(k);
                }
            }
            Mode::Recording { compliant } => sent = self.record_tick(k, compliant, clock),
        }
        // Also on the tick a fault was entered: the drives get the first step of its stop now.
        match self.mode {
            Mode::Fault { tick } => self.fault_tick(k, tick),
            Mode::EStop { tick, resume } => self.estop_tick(k, tick, resume),
            _ => {}
        }
        self.read_feedback(dk, sent);
        self.check_following(k);
        self.publish(k);
        if exit { Step::Ended } else { Step::Continue }
    }

    /// Writes tick `k` into the flight recorder's ring, once the loop has timed it.
    pub fn record(&self, k: u64, late_ns: u64, exec_ns: u64) {
        if let Some(trace) = &self.trace {
            let head = RowHead {
                tick: k,
                state: self.state(),
                late_ns,
                exec_ns,
                guard: self.limit_violations,
                fault: self.fault,
                estop: self.estop,
            };
            trace.record(&head, &self.last, &self.measured, &self.feedback);
        }
    }

    /// Every slot's next setpoints into `out`; DOFs no slot moves hold. Returns true when the
    /// loop should end after this tick.
    fn play_slots(&mut self, k: u64) -> bool {
        self.hold_setpoints();
        let mut exit = false;
        for i in 0..self.slots.len() {
            let slot = &mut self.slots[i];
            slot.gather(&self.prev, &self.last);
            let (leaving, after) = match slot.state {
                SlotState::Running => (slot.run(k, self.rate_hz, self.ramp_step), None),
                SlotState::Stopping { .. } => ([None, None], slot.stop_tick()),
                SlotState::Idle | SlotState::Holding => continue,
            };
            slot.scatter(&mut self.out);
            if slot.state == SlotState::Holding && self.goal_tolerance.is_finite() {
                // A motion that just ended: the drives must reach its end in time.
                if leaving[0]
                    .as_ref()
                    .is_some_and(|l| l.outcome == Outcome::Finished)
                {
                    slot.goal_deadline = Some(k + self.goal_ticks);
                }
            }
            self.retire_all(leaving);
            if let Some(after) = after {
                exit |= self.slot_at_rest(i, after, k);
            }
        }
        exit
    }

    /// Slot `i`'s stop is at rest: it holds; the disable or exit it was for waits for the others.
    fn slot_at_rest(&mut self, i: usize, after: After, k: u64) -> bool {
        self.slots[i].state = SlotState::Holding;
        match after {
            After::Hold => false,
            After::Disable | After::Exit => {
                self.after_all = Some(after);
                self.after_rest(k)
            }
        }
    }

    /// Once nothing moves: the disable or exit asked for all slots.
    fn after_rest(&mut self, k: u64) -> bool {
        if self.slots.iter().any(Slot::moving) {
            return false;
        }
        match self.after_all.take() {
            Some(After::Disable) => {
                self.disable();
                false
            }
            Some(After::Exit) => self.finish(k),
            Some(After::Hold) | None => false,
        }
    }

    fn retire_all(&mut self, leaving: [Option<Leaving>; 2]) {
        for l in leaving.into_iter().flatten() {
            if let Outcome::Refused(_) = l.outcome {
                self.refused += 1;
            }
            self.send_retired(Retired {
                playback: l.playback,
                outcome: l.outcome,
            });
        }
    }

    fn take_commands(&mut self, k: u64, clock: &dyn Clock) -> bool {
        let mut exit = false;
        self.acks_len = 0;
        while self.acks_len < PER_TICK {
            match self.commands.try_recv() {
                Ok((seq, cmd)) => {
                    let (ack, ends) = self.handle(cmd, k, clock);
                    if let Some(slot) = self.acks.get_mut(self.acks_len) {
                        *slot = (seq, ack);
                    }
                    self.acks_len += 1;
                    exit |= ends;
                }
                // Every handle is gone: nobody can stop us later, so stop now.
                Err(TryRecvError::Disconnected) => {
                    exit |= self.handle(Command::Shutdown, k, clock).1;
                    break;
                }
                Err(TryRecvError::Empty) => break,
            }
        }
        exit
    }

    /// The slots a scope names (all of them, or one), as an index range.
    fn scope(&self, scope: Scope) -> Option<std::ops::Range<usize>> {
        match scope {
            Scope::All => Some(0..self.slots.len()),
            Scope::Slot(i) => {
                let i = usize::from(i);
                (i < self.slots.len()).then_some(i..i + 1)
            }
        }
    }

    /// Plans `kind` stops for the moving slots of `scope`; returns whether any was moving.
    fn stop_slots(&mut self, scope: std::ops::Range<usize>, kind: StopKind, after: After) -> bool {
        let mut any = false;
        for i in scope {
            let slot = &mut self.slots[i];
            let leaving = match slot.state {
                SlotState::Running => {
                    slot.gather(&self.prev, &self.last);
                    slot.begin_stop(kind, after)
                }
                SlotState::Stopping {
                    quick, after: was, ..
                } => {
                    // A quick stop cuts a planned one short; what follows keeps the stronger.
                    let after = if was == After::Exit { was } else { after };
                    if kind == StopKind::Quick && !quick {
                        slot.gather(&self.prev, &self.last);
                        slot.begin_stop(kind, after)
                    } else {
                        if let SlotState::Stopping { tick, quick, .. } = slot.state {
                            slot.state = SlotState::Stopping { tick, quick, after };
                        }
                        [None, None]
                    }
                }
                _ => continue,
            };
            any = true;
            self.retire_all(leaving);
        }
        any
    }

    /// What became of the command, and whether the loop should end after this tick.
    fn handle(&mut self, cmd: Command, k: u64, clock: &dyn Clock) -> (Ack, bool) {
        let state = self.state();
        let ignored = (Ack::Ignored(state), false);
        let done = (Ack::Done, false);
        let active = self.mode == Mode::Active;
        match cmd {
            Command::Play(pb) => (self.accept(pb, k, clock), false),
            Command::Replace { playback, at_tick } => (self.replace(playback, at_tick), false),
            Command::Stop(scope) | Command::QuickStop(scope) => {
                let kind = if matches!(cmd, Command::QuickStop(_)) {
                    StopKind::Quick
                } else {
                    StopKind::Planned
                };
                let Some(range) = self.scope(scope).filter(|_| active) else {
                    return ignored;
                };
                self.stop_slots(range.clone(), kind, After::Hold);
                for i in range {
                    if self.slots[i].state == SlotState::Idle {
                        self.slots[i].state = SlotState::Holding;
                    }
                }
                done
            }
            Command::Pause(scope) | Command::Resume(scope) => {
                let target = if matches!(cmd, Command::Pause(_)) {
                    0.0
                } else {
                    1.0
                };
                let Some(range) = self.scope(scope).filter(|_| active) else {
                    return ignored;
                };
                let mut any = false;
                for slot in &mut self.slots[range] {
                    if slot.state == SlotState::Running && slot.path.target_speed != target {
                        slot.path.target_speed = target;
                        any = true;
                    }
                }
                if any { done } else { ignored }
            }
            Command::Enable => match self.mode {
                Mode::Disabled => {
                    self.begin_enable();
                    done
                }
                Mode::Fault { .. } | Mode::EStop { .. } => ignored,
                _ => done,
            },
            Command::Disable => match self.mode {
                Mode::Active if self.slots.iter().any(Slot::moving) => {
                    let all = 0..self.slots.len();
                    self.stop_slots(all, StopKind::Planned, After::Disable);
                    self.after_all = Some(After::Disable);
                    done
                }
                Mode::Recording { .. } => {
                    self.end_recording();
                    self.disable();
                    done
                }
                _ => {
                    self.disable();
                    done
                }
            },
            Command::ClearFault => match self.mode {
                Mode::Fault { tick } => {
                    self.clear_pending = true;
                    if tick + 1 >= self.stop.ticks() {
                        self.clear_fault();
                    }
                    done
                }
                // Only a released E-stop clears; the operator must release it first.
                Mode::EStop { .. } if self.estop.input == Some(true) => ignored,
                Mode::EStop { tick, resume } => {
                    self.clear_pending = true;
                    if tick + 1 >= self.stop.ticks() {
                        self.clear_estop(resume);
                    }
                    done
                }
                _ => ignored,
            },
            Command::Record(on) => match (on, self.mode) {
                (true, Mode::Active) if !self.slots.iter().any(Slot::moving) => {
                    // Where the backend cannot make the drives compliant, they hold.
                    if let Err(e) = self.backend.compliant(true, &mut self.compliant) {
                        self.enter_fault(e);
                        return ignored;
                    }
                    let compliant = self.compliant.iter().any(|&c| c);
                    self.mode = Mode::Recording { compliant };
                    done
                }
                (false, Mode::Recording { .. }) => {
                    self.end_recording();
                    done
                }
                _ => ignored,
            },
            Command::Shutdown => match self.mode {
                Mode::Active if self.slots.iter().any(Slot::moving) => {
                    let all = 0..self.slots.len();
                    self.stop_slots(all, StopKind::Planned, After::Exit);
                    self.after_all = Some(After::Exit);
                    done
                }
                Mode::Recording { .. } => {
                    self.end_recording();
                    (Ack::Done, self.finish(k))
                }
                _ => (Ack::Done, self.finish(k)),
            },
        }
    }

    fn refuse(&mut self, pb: Box<Playback>, why: Refusal) -> Ack {
        self.refused += 1;
        self.send_retired(Retired {
            playback: pb,
            outcome: Outcome::Refused(why),
        });
        Ack::Refused(why)
    }

    /// Whether `pb` fits slot `slot` and the loop: DOFs, rate, a seam if it repeats.
    fn misfit(&self, pb: &Playback) -> Option<Refusal> {
        let Some(slot) = self.slots.get(usize::from(pb.slot)) else {
            return Some(Refusal::Mismatch);
        };
        let n = slot.dofs.len();
        let fits = |t: &Trajectory| t.dofs() == n && t.ticks() > 0 && t.rate_hz() == self.rate_hz;
        if !fits(&pb.route.approach) || !fits(&pb.route.motion) {
            return Some(Refusal::Mismatch);
        }
        if pb.repeat != Repeat::Once
            && let Err(seam) = pb.route.motion.loop_seam()
        {
            let dof = match seam {
                SeamError::Jump { index, .. } => index as u16,
                SeamError::TooShort(_) => 0,
            };
            return Some(Refusal::NotLoopable { dof });
        }
        None
    }

    /// Takes a playback: constant time, whatever the motion's length.
    fn accept(&mut self, pb: Box<Playback>, k: u64, clock: &dyn Clock) -> Ack {
        if self.mode != Mode::Active {
            let state = self.state();
            return self.refuse(pb, Refusal::Busy(state));
        }
        if let Some(why) = self.misfit(&pb) {
            return self.refuse(pb, why);
        }
        let i = usize::from(pb.slot);
        let slot = &self.slots[i];
        if let Some(busy) = self.slots.iter().find(|o| o.moving() && o.overlaps(slot)) {
            let state = slot_state(busy);
            return self.refuse(pb, Refusal::Busy(state));
        }
        let start = pb.route.approach.first_setpoints();
        let jump = slot.dofs.iter().zip(start).position(|(&d, a)| {
            let gap = (a.position - self.last[d].position).abs();
            // NaN counts as a jump.
            gap.is_nan() || gap > self.start_tolerance
        });
        if let Some(j) = jump {
            let dof = slot.dofs[j] as u16;
            return self.refuse(pb, Refusal::Jump { dof });
        }
        let wait_until = pb.start_at.map(|at| {
            let at_ns = at
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as i128);
            let ahead_ns = (at_ns - clock.realtime_ns()).max(0) as f64;
            k + (ahead_ns * self.rate_hz / 1e9).ceil() as u64
        });
        self.slots[i].start(pb, wait_until);
        Ack::Done
    }

    /// Queues a replacement for slot's running playback, to take over at loop tick `at`.
    fn replace(&mut self, pb: Box<Playback>, at: u64) -> Ack {
        if let Some(why) = self.misfit(&pb) {
            return self.refuse(pb, why);
        }
        let i = usize::from(pb.slot);
        let runs = self.mode == Mode::Active && self.slots[i].state == SlotState::Running;
        if !runs || at <= self.slots[i].ran {
            let state = self.state();
            return self.refuse(
                pb,
                if runs {
                    Refusal::Missed
                } else {
                    Refusal::Busy(state)
                },
            );
        }
        if let Some(old) = self.slots[i].queue_replacement(pb, at) {
            self.retire_all([Some(old), None]);
        }
        Ack::Done
    }

    /// Tells the drives to disable; a disable the bus did not take (a full queue, a link down)
    /// is sent again every tick until it is taken, or the drives are enabled again. Returns
    /// whether it was taken.
    fn disable_drives(&mut self) -> bool {
        let taken = self.backend.disable().is_ok();
        self.disable_untaken = !taken;
        taken
    }

    fn begin_enable(&mut self) {
        self.disable_untaken = false;
        self.enabled = false;
        self.mode = Mode::Enabling {
            ready: false,
            ticks: 0,
        };
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
            self.resync_to_measured();
            for slot in &mut self.slots {
                slot.state = SlotState::Idle;
            }
            self.mode = Mode::Active;
        } else if ticks > self.enable_timeout_ticks {
            self.enter_fault(BackendError::new(FaultKind::EnableTimeout));
        } else {
            self.mode = Mode::Enabling { ready, ticks };
        }
    }

    /// The stream starts again at rest where the drives are.
    fn resync_to_measured(&mut self) {
        for (((l, p), c), f) in self
            .last
            .iter_mut()
            .zip(self.prev.iter_mut())
            .zip(self.commanded.iter_mut())
            .zip(&self.feedback)
        {
            if f.valid {
                *l = at_rest(f.position);
                *p = *l;
                *c = f.position;
            }
        }
    }

    fn hold_setpoints(&mut self) {
        for (o, l) in self.out.iter_mut().zip(&self.last) {
            *o = at_rest(l.position);
        }
    }

    /// One tick of teach-in: compliant drives are told where they are (the protocol stays alive;
    /// they follow the hand, not the target), the others hold.
    fn record_tick(&mut self, k: u64, compliant: bool, clock: &dyn Clock) -> bool {
        if compliant {
            for (((o, m), l), c) in self
                .out
                .iter_mut()
                .zip(&self.measured)
                .zip(&self.last)
                .zip(&self.compliant)
            {
                *o = at_rest(if *c { *m } else { l.position });
            }
            if let Err(e) = self.backend.write(k, &self.out) {
                self.enter_fault(e);
                return false;
            }
            self.push_sent();
            true
        } else {
            self.hold_setpoints();
            self.send(k, clock)
        }
    }

    /// Out of teach-in: the drives stiffen where they are and hold it. Drives that take ticks
    /// for it come up through the enable steps, which end resynced to the measured pose.
    fn end_recording(&mut self) {
        if let Mode::Recording { compliant } = self.mode {
            for slot in &mut self.slots {
                slot.state = SlotState::Holding;
            }
            self.mode = Mode::Active;
            if compliant {
                self.compliant.iter_mut().for_each(|c| *c = false);
                match self.backend.compliant(false, &mut self.compliant) {
                    Ok(Readiness::Ready) => self.resync_to_measured(),
                    Ok(Readiness::Pending) => self.begin_enable(),
                    Err(e) => self.enter_fault(e),
                }
            }
        }
    }

    /// Checks `out` against the last two setpoints, then writes it. A setpoint outside the limits
    /// or a failed write faults instead; returns whether `out` went out.
    fn send(&mut self, k: u64, clock: &dyn Clock) -> bool {
        let dt = self.dt;
        let bad = self
            .limits
            .iter()
            .zip(&self.prev)
            .zip(&self.last)
            .zip(&self.out)
            .enumerate()
            .find_map(|(j, (((lim, p), l), o))| violation(lim, p, l, o, dt).map(|c| (j, c)));
        if let Some((j, code)) = bad {
            self.limit_violations += 1;
            self.enter_fault(BackendError {
                kind: FaultKind::Limit,
                dof: Some(j as u16),
                code,
            });
            return false;
        }
        if let Err(e) = self.backend.write(k, &self.out) {
            self.enter_fault(e);
            return false;
        }
        self.push_sent();
        for slot in &mut self.slots {
            if slot.awaiting_first_command && slot.state == SlotState::Running {
                slot.awaiting_first_command = false;
                slot.first_command = Some((k, clock.now_ns()));
            }
        }
        true
    }

    /// `out` went to the drives: it is now the last setpoint.
    fn push_sent(&mut self) {
        self.prev.copy_from_slice(&self.last);
        self.last.copy_from_slice(&self.out);
        for (c, l) in self.commanded.iter_mut().zip(&self.last) {
            *c = l.position;
        }
    }

    /// Leaves the drives in the safe state; the loop ends after this tick.
    fn finish(&mut self, k: u64) -> bool {
        for i in 0..self.slots.len() {
            let leaving = self.slots[i].leave(Outcome::Stopped);
            self.retire_all(leaving);
        }
        match self.safe_state {
            SafeState::Disable => self.disable(),
            SafeState::Hold => {
                if self.enabled && matches!(self.mode, Mode::Active) {
                    self.hold_setpoints();
                    // The last word to the drives; nothing is left to act on a failure.
                    let _ = self.backend.hold(k, &self.out);
                }
            }
        }
        true
    }

    fn disable(&mut self) {
        for i in 0..self.slots.len() {
            let leaving = self.slots[i].leave(Outcome::Stopped);
            self.retire_all(leaving);
            self.slots[i].state = SlotState::Idle;
            self.slots[i].goal_deadline = None;
        }
        self.after_all = None;
        if self.enabled || matches!(self.mode, Mode::Enabling { .. }) {
            self.disable_drives();
        }
        self.enabled = false;
        match &mut self.mode {
            Mode::Fault { .. } => {}
            // Cleared later, the E-stop leaves the drives disabled as asked now.
            Mode::EStop { resume, .. } => *resume = false,
            _ => self.mode = Mode::Disabled,
        }
    }

    /// Stops whatever moves as fast as the quick-stop decelerations allow, from what the drives
    /// were last sent, then holds; the first fault is the one reported. Every slot stops.
    fn enter_fault(&mut self, e: BackendError) {
        if e.kind == FaultKind::DriveEStop && self.estop_drive {
            return self.enter_estop(EStopCause::Drive { dof: e.dof });
        }
        if matches!(self.mode, Mode::Fault { .. } | Mode::EStop { .. }) {
            return;
        }
        self.fault = Some(e);
        self.begin_quick_stop();
        self.mode = Mode::Fault { tick: 0 };
    }

    /// Every slot ends (faulted) and the whole robot stops as fast as the quick-stop
    /// decelerations allow from what the drives were last sent.
    fn begin_quick_stop(&mut self) {
        if let Mode::Recording { compliant: true } = self.mode {
            // Stiff again (drives that take ticks for it get them from the hold): the hold needs
            // the drives to follow.
            self.compliant.iter_mut().for_each(|c| *c = false);
            let _ = self.backend.compliant(false, &mut self.compliant);
        }
        for i in 0..self.slots.len() {
            let leaving = self.slots[i].leave(Outcome::Faulted);
            self.retire_all(leaving);
            self.slots[i].state = SlotState::Holding;
            self.slots[i].goal_deadline = None;
        }
        self.after_all = None;
        self.clear_pending = false;
        self.stop.plan(&self.prev, &self.last, StopKind::Quick);
    }

    /// Reads the E-stop input; asserted (or unreadable) enters the E-stop.
    fn poll_estop(&mut self) {
        let Some(input) = &mut self.estop_input else {
            return;
        };
        let (asserted, cause) = match input.asserted() {
            Ok(level) => (level, EStopCause::Input),
            Err(_) => (true, EStopCause::InputLost),
        };
        self.estop.input = Some(asserted);
        if asserted {
            self.enter_estop(cause);
        }
    }

    /// The E-stop: whatever moves stops quickly (a fault's quick stop already under way goes
    /// on), then the safe state; nothing moves again until it is released and cleared. Enabling
    /// drives are disabled.
    fn enter_estop(&mut self, cause: EStopCause) {
        let tick = match self.mode {
            Mode::EStop { .. } => {
                // Asserted again: a clear asked for meanwhile no longer counts.
                self.clear_pending = false;
                return;
            }
            Mode::Fault { tick } => tick,
            _ => {
                self.begin_quick_stop();
                0
            }
        };
        let resume = match self.mode {
            Mode::Active | Mode::Recording { .. } | Mode::Fault { .. } => self.enabled,
            Mode::Enabling { .. } => {
                self.disable_drives();
                self.enabled = false;
                true
            }
            Mode::Disabled | Mode::EStop { .. } => false,
        };
        self.estop.cause = Some(cause);
        self.mode = Mode::EStop { tick, resume };
    }

    /// One tick of the quick stop a fault or the E-stop runs: its next setpoint (at rest: the
    /// hold), sent every tick whatever the backend said last time, so a drive that missed one
    /// gets the next; at rest, the safe state. Returns the tick into the stop and whether it is
    /// at rest.
    fn quick_stop_tick(&mut self, k: u64, tick: u64) -> (u64, bool) {
        let tick = tick + 1;
        self.stop.sample(tick, &mut self.out);
        if self.enabled {
            let _ = self.backend.hold(k, &self.out);
            self.push_sent();
        }
        let rest = tick + 1 >= self.stop.ticks();
        // Until the drives take the disable they keep getting the hold, and it is sent again
        // next tick.
        if rest && self.enabled && self.safe_state == SafeState::Disable && self.disable_drives() {
            self.enabled = false;
        }
        (tick, rest)
    }

    fn fault_tick(&mut self, k: u64, tick: u64) {
        let (tick, rest) = self.quick_stop_tick(k, tick);
        self.mode = Mode::Fault { tick };
        if rest && self.clear_pending {
            self.clear_fault();
        }
    }

    fn estop_tick(&mut self, k: u64, tick: u64, resume: bool) {
        let (tick, rest) = self.quick_stop_tick(k, tick);
        self.mode = Mode::EStop { tick, resume };
        if rest && self.clear_pending && self.estop.input != Some(true) {
            self.clear_estop(resume);
        }
    }

    /// Out of the E-stop, released and at rest: drives that were up go through their whole
    /// enable sequence again (an E-stop circuit may have cut their power) and the commanded pose
    /// starts from the measured one, so nothing jumps; drives that were down stay down.
    fn clear_estop(&mut self, resume: bool) {
        self.clear_pending = false;
        self.estop.cause = None;
        self.fault = None;
        if self.enabled {
            // The enable sequence starts from a known state.
            self.disable_drives();
            self.enabled = false;
        }
        if resume {
            self.begin_enable();
        } else {
            self.mode = Mode::Disabled;
        }
    }

    /// Out of the fault, at rest: a fault the loop found leaves the drives following, so they
    /// hold what was commanded; after one a drive or bus reported the drives are disabled, and
    /// `Enable` brings them up again where they are.
    fn clear_fault(&mut self) {
        self.clear_pending = false;
        let loop_side = matches!(
            self.fault.map(|f| f.kind),
            Some(FaultKind::Limit | FaultKind::Overrun | FaultKind::FollowingError)
        );
        self.fault = None;
        if self.enabled && loop_side {
            self.mode = Mode::Active;
        } else {
            if self.enabled {
                self.disable_drives();
            }
            self.enabled = false;
            self.mode = Mode::Disabled;
        }
    }

    fn read_feedback(&mut self, dk: u64, sent: bool) {
        let result = self.backend.read(&mut self.feedback);
        let commanding = !matches!(
            self.mode,
            Mode::Disabled | Mode::Enabling { .. } | Mode::Fault { .. } | Mode::EStop { .. }
        );
        if let Err(e) = result {
            if commanding {
                self.enter_fault(e);
            }
            return;
        }
        let sent = sent && commanding;
        let mut missing = None;
        for (j, f) in self.feedback.iter().enumerate() {
            let (Some(m), Some(stale), Some(&timeout)) = (
                self.measured.get_mut(j),
                self.stale.get_mut(j),
                self.feedback_timeout_ticks.get(j),
            ) else {
                continue;
            };
            if !f.valid {
                *stale += dk;
                if commanding && *stale > timeout && missing.is_none() {
                    missing = Some(j);
                }
                continue;
            }
            *stale = 0;
            *m = f.position;
            if sent && let (Some(c), Some(t)) = (self.commanded.get(j), self.tracking.get_mut(j)) {
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

    /// Following error: while moving against each DOF's path tolerance; after a motion ends,
    /// the drives must reach the goal tolerance in time.
    fn check_following(&mut self, k: u64) {
        if self.mode != Mode::Active {
            return;
        }
        let mut fault = None;
        for slot in &mut self.slots {
            let errors = slot.dofs.iter().map(|&d| {
                let f = &self.feedback[d];
                (
                    d,
                    if f.valid {
                        (self.commanded[d] - self.measured[d]).abs()
                    } else {
                        0.0
                    },
                )
            });
            if slot.moving() {
                if let Some((d, _)) = errors.clone().find(|&(d, e)| e > self.path_tolerance[d]) {
                    fault = Some((d, FOLLOWING_PATH));
                    break;
                }
            } else if let Some(deadline) = slot.goal_deadline {
                let worst = errors.fold((0, 0.0), |w, (d, e)| if e > w.1 { (d, e) } else { w });
                if worst.1 <= self.goal_tolerance {
                    slot.goal_deadline = None;
                } else if k >= deadline {
                    fault = Some((worst.0, FOLLOWING_GOAL));
                    break;
                }
            }
        }
        if let Some((d, code)) = fault {
            self.enter_fault(BackendError {
                kind: FaultKind::FollowingError,
                dof: Some(d as u16),
                code,
            });
        }
    }

    fn publish(&self, k: u64) {
        let mut slots = [SlotPublished::default(); MAX_SLOTS];
        for (p, slot) in slots.iter_mut().zip(&self.slots) {
            let (progress, time_s) = slot.progress(self.rate_hz);
            *p = SlotPublished {
                state: if self.mode == Mode::Active {
                    slot_state(slot)
                } else {
                    self.state()
                },
                motion_id: slot.playback.as_ref().map(|pb| pb.motion_id),
                progress,
                time_s,
                motion_start_tick: slot.motion_start_tick,
                first_command: slot.first_command,
                path: slot.playback.as_ref().map(|_| slot.path),
                ran: slot.ran,
            };
        }
        // The robot as a whole reads as its most active slot.
        let primary = slots[..self.slots.len()]
            .iter()
            .filter(|s| s.motion_id.is_some())
            .max_by_key(|s| rank(s.state))
            .copied()
            .or_else(|| {
                // The latest first command, so a finished playback still tells when it began.
                slots[..self.slots.len()]
                    .iter()
                    .filter(|s| s.first_command.is_some())
                    .max_by_key(|s| s.first_command.map(|f| f.0))
                    .copied()
            })
            .unwrap_or_default();
        let p = Published {
            state: self.state(),
            motion_id: primary.motion_id,
            tick: k,
            progress: primary.progress,
            time_s: primary.time_s,
            limit_violations: self.limit_violations,
            refused: self.refused,
            fault: self.fault,
            estop: EStop {
                reenable: matches!(self.mode, Mode::EStop { resume: true, .. }),
                ..self.estop
            },
            first_command: primary.first_command,
            motion_start_tick: primary.motion_start_tick,
            moving: self.moving(),
        };
        self.shared.publish(
            &p,
            &slots[..self.slots.len()],
            &self.commanded,
            &self.measured,
            &self.tracking,
        );
        for &(seq, ack) in &self.acks[..self.acks_len.min(PER_TICK)] {
            self.shared.acknowledge(seq, ack);
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
