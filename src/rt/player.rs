//! One tick of the loop: the E-stop input, commands and events through the state table
//! ([`super::table`]), the slots, the guard ([`super::guard`]), the backend.
//!
//! Nothing here allocates or frees after [`Player::new`]: buffers are sized for the joint set,
//! playbacks arrive boxed and leave through the retire channel.
//!
//! The drives see one stream of setpoints, one per period, whatever happens, and every setpoint
//! reaches them through one function ([`Player::emit`]), judged by the guard against what each
//! drive last took. Motion, pause, stop, the fault's and the E-stop's quick stop, hold, teach-in
//! and recovery all continue from there.
//!
//! The DOFs are played by [`Slot`]s: slot 0 is the whole robot, slots 1.. the configured joint
//! groups (disjoint). Each plays one motion at a time, a slot only while no overlapping one does
//! (slot 0 overlaps every group); DOFs no slot moves hold. A fault stops every slot.

use std::sync::Arc;

use crossbeam::channel::{Receiver, Sender, TryRecvError, TrySendError};

use super::guard::{Guard, at_rest};
use super::slot::{Leaving, Slot, SlotState};
use super::status::{Published, Shared, SlotPublished};
use super::table::{self, Input, Phase, Rule};
use super::trace::{RowHead, Trace};
use super::{
    Ack, Clock, Command, EStop, EStopCause, MAX_SLOTS, Outcome, Playback, Refusal, Repeat, Retired,
    SafeState, Scope, Settings, State, Step,
};
use crate::backend::{Backend, BackendError, FaultKind, Feedback, Readiness};
use crate::estop::EStopInput;
use crate::trajectory::{JointSet, SeamError, Setpoint, StopKind, Trajectory};

/// `code` of a [`FaultKind::FollowingError`] fault.
pub const FOLLOWING_PATH: u32 = 1;
pub const FOLLOWING_GOAL: u32 = 2;

/// Retired playbacks the channel could not take at once (it is sized so this stays empty).
const PARKED: usize = 4;
/// Commands taken in one tick; the rest wait for the next.
const PER_TICK: usize = 32;
/// A drive that took no setpoint for this long (its bus no longer reaches it) is left to its own
/// watchdog: a stop, a clear or a shutdown no longer waits for it.
pub(super) const SILENT_S: f64 = 1.0;

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
    /// Stopping quickly from what the drives have, then holding, until cleared.
    Fault,
    /// The E-stop: stopping quickly, then the safe state, until cleared once the input is
    /// released; `resume`: the drives were up, and come up again then.
    EStop {
        resume: bool,
    },
}

/// What acknowledged commands left to do once the robot is at rest (see [`super::table`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Pending {
    /// `clear-fault` (or `recover`) during a fault's or the E-stop's quick stop.
    clear: bool,
    /// `recover`: enable once cleared.
    enable: bool,
    /// `disable` while moving or stopping: honoured whatever comes meanwhile.
    disable: bool,
    /// `shutdown`: the loop ends at rest whatever comes meanwhile.
    exit: bool,
}

/// How [`Player::emit`] reaches the drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    /// Drives that follow get the setpoints; the others keep what they hold.
    Write,
    /// Every drive, whatever its state (the quick stop, the hold).
    Hold,
}

pub(crate) struct Player {
    rate_hz: f64,
    backend: Box<dyn Backend>,
    /// Polled once a tick.
    estop_input: Option<Box<dyn EStopInput>>,
    /// A drive's own E-stop is the loop's E-stop, not a fault.
    estop_drive: bool,
    estop: EStop,
    /// The one way to the drives: what each took, the checks, the quick stop.
    guard: Guard,
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
    silent_ticks: u64,
    /// Path-speed change per tick while pausing or resuming.
    ramp_step: f64,
    start_tolerance: f64,
    safe_state: SafeState,
    path_tolerance: Vec<f64>,
    goal_tolerance: f64,
    goal_ticks: u64,

    mode: Mode,
    pending: Pending,
    /// The loop ends after this tick: nothing more is taken.
    ended: bool,
    /// A disable the backend refused: sent again every tick while the drives are down.
    disable_untaken: bool,
    /// A teach-in's drives stiffening after a fault or the E-stop: held where the hand left
    /// them until the backend says they follow.
    stiffening: bool,

    out: Vec<Setpoint>,
    /// Which drives took a failed write (scratch).
    taken: Vec<bool>,
    feedback: Vec<Feedback>,
    measured: Vec<f64>,
    /// What the drives were last sent (positions), as the guard keeps it.
    commanded: Vec<f64>,
    /// Where the backend says each drive holds, NaN where it does not say (scratch).
    held: Vec<f64>,
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

/// How a slot's state reads to the control side.
fn slot_state(slot: &Slot) -> State {
    match slot.state {
        SlotState::Idle => State::Idle,
        SlotState::Holding => State::Holding,
        SlotState::Stopping { .. } => State::Stopping,
        SlotState::Running if slot.path.target_speed == 0.0 => State::Paused,
        SlotState::Running => match (slot.path.segment, slot.stream_tail()) {
            (super::path::Segment::Motion, Some(tail)) if slot.path.base > tail => State::Starved,
            (_, Some(_)) => State::Streaming,
            (super::path::Segment::Motion, None) => State::Playing,
            _ => State::Approaching,
        },
    }
}

/// Which of two slot states says more about the robot as a whole.
fn rank(s: State) -> u8 {
    match s {
        State::Stopping => 5,
        State::Playing | State::Streaming => 4,
        State::Approaching | State::Starved => 3,
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
        let feedback_timeout_ticks = (0..n)
            .map(|j| {
                ticks(
                    backend
                        .feedback_timeout(j)
                        .map_or(settings.feedback_timeout_s, |d| d.as_secs_f64()),
                )
            })
            .collect();
        let slots = std::iter::once((0..n).collect())
            .chain(settings.groups.iter().cloned())
            .map(|dofs: Vec<usize>| Slot::new(joints, dofs, settings.rate_hz))
            .collect();
        Self {
            rate_hz: settings.rate_hz,
            backend,
            estop: EStop {
                input: estop_input.as_ref().map(|_| false),
                cause: None,
                reenable: false,
            },
            estop_input,
            estop_drive: settings.estop_drive,
            guard: Guard::new(joints, settings.rate_hz, &initial),
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
            silent_ticks: ticks(SILENT_S),
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
            pending: Pending::default(),
            ended: false,
            disable_untaken: false,
            stiffening: false,
            out: initial.iter().map(|&p| at_rest(p)).collect(),
            taken: vec![false; n],
            feedback: vec![Feedback::default(); n],
            measured: initial.clone(),
            commanded: initial,
            held: vec![f64::NAN; n],
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

    /// A fault the loop itself found (late wake-up, overruns): stop quickly from what the drives
    /// have. Published at once: the tick it belongs to may already have run.
    pub fn loop_fault(&mut self, e: BackendError) {
        self.fault_event(e);
        self.publish(self.last_k.unwrap_or(0));
    }

    pub fn state(&self) -> State {
        match self.mode {
            Mode::Disabled | Mode::Enabling { .. } => State::Disabled,
            Mode::Recording { .. } => State::Recording,
            Mode::Fault => State::Fault,
            Mode::EStop { .. } => State::EStop,
            Mode::Active => self
                .slots
                .iter()
                .map(slot_state)
                .max_by_key(|&s| rank(s))
                .unwrap_or(State::Idle),
        }
    }

    /// The row of the state table the loop is in.
    fn phase(&self) -> Phase {
        if self.ended {
            return Phase::Ended;
        }
        match self.mode {
            Mode::Disabled => Phase::Disabled,
            Mode::Enabling { .. } => Phase::Enabling,
            Mode::Recording { .. } => Phase::Recording,
            Mode::Active if self.pending.exit => Phase::Ending,
            Mode::Active if self.pending.disable => Phase::Disabling,
            Mode::Active if self.slots.iter().any(|s| s.state == SlotState::Running) => {
                Phase::Moving
            }
            Mode::Active if self.slots.iter().any(Slot::moving) => Phase::Stopping,
            Mode::Active => Phase::Holding,
            Mode::Fault if self.stopped() => Phase::Fault,
            Mode::Fault => Phase::FaultStopping,
            Mode::EStop { .. } => {
                let pressed = self.estop.input == Some(true);
                match (self.stopped(), pressed) {
                    (false, true) => Phase::EStopStopping,
                    (false, false) => Phase::EStopStoppingReleased,
                    (true, true) => Phase::EStop,
                    (true, false) => Phase::EStopReleased,
                }
            }
        }
    }

    /// A fault's or the E-stop's quick stop is over: the drives are down, or they have held
    /// still and stiff for a tick (a drive no bus has reached for [`SILENT_S`] is left to its
    /// own watchdog — a teach-in's compliant one too: a silent bus never takes its stiffening,
    /// and it stiffens where it is once the bus drains).
    fn stopped(&self) -> bool {
        let now = self.last_k.unwrap_or(0);
        let stiff = !self.stiffening
            || self
                .compliant
                .iter()
                .enumerate()
                .all(|(j, &c)| !c || self.guard.silent(j, now, self.silent_ticks));
        !self.enabled || (stiff && self.guard.stopped(now, self.silent_ticks))
    }

    fn moving(&self) -> bool {
        match self.mode {
            Mode::Active => self.slots.iter().any(Slot::moving),
            Mode::Fault | Mode::EStop { .. } => !self.stopped(),
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
        if !exit {
            match self.mode {
                Mode::Disabled | Mode::Fault | Mode::EStop { .. } => {}
                Mode::Enabling { ready, ticks } => self.step_enable(ready, ticks + dk),
                Mode::Active => {
                    self.play_slots(k);
                    if self.mode == Mode::Active {
                        sent = self.emit(k, Via::Write);
                    }
                    if sent {
                        self.first_commands(k, clock);
                    }
                }
                Mode::Recording { compliant } => sent = self.record_tick(k, compliant),
            }
            // Also on the tick a fault was entered: the drives get the first step of its stop now.
            if matches!(self.mode, Mode::Fault | Mode::EStop { .. }) {
                self.quick_stop_tick(k);
            }
        }
        self.read_feedback(dk, sent);
        self.check_following(k);
        if !exit {
            exit = self.at_rest_obligations(k);
        }
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
            trace.record(&head, self.guard.last(), &self.measured, &self.feedback);
        }
    }

    /// Every slot's next setpoints into `out`; DOFs no slot moves hold.
    fn play_slots(&mut self, k: u64) {
        self.hold_setpoints();
        for i in 0..self.slots.len() {
            let slot = &mut self.slots[i];
            slot.gather(self.guard.prev(), self.guard.last());
            let leaving = match slot.state {
                SlotState::Running => slot.run(k, self.rate_hz, self.ramp_step),
                SlotState::Stopping { .. } => {
                    slot.stop_tick();
                    [None, None]
                }
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
        }
    }

    /// The running playbacks whose first setpoints just reached the drives.
    fn first_commands(&mut self, k: u64, clock: &dyn Clock) {
        for slot in &mut self.slots {
            if slot.awaiting_first_command && slot.state == SlotState::Running {
                slot.awaiting_first_command = false;
                slot.first_command = Some((k, clock.now_ns()));
            }
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

    /// Plans `kind` stops for the moving slots of `scope` (a quick stop cuts a planned one short).
    fn stop_slots(&mut self, scope: std::ops::Range<usize>, kind: StopKind) {
        for i in scope {
            let slot = &mut self.slots[i];
            let leaving = match slot.state {
                SlotState::Running => {
                    slot.gather(self.guard.prev(), self.guard.last());
                    slot.begin_stop(kind)
                }
                SlotState::Stopping { quick: false, .. } if kind == StopKind::Quick => {
                    slot.gather(self.guard.prev(), self.guard.last());
                    slot.begin_stop(kind)
                }
                _ => continue,
            };
            self.retire_all(leaving);
        }
    }

    /// What became of the command — the state table's rule for it in this phase — and whether
    /// the loop should end after this tick.
    fn handle(&mut self, cmd: Command, k: u64, clock: &dyn Clock) -> (Ack, bool) {
        let input = input_of(&cmd);
        let state = self.state();
        let ignored = Ack::Ignored(state);
        let done = (Ack::Done, false);
        match table::rule(self.phase(), input) {
            Rule::Refuse => (
                match cmd {
                    Command::Play(pb) | Command::Replace { playback: pb, .. } => {
                        self.refuse(pb, Refusal::Busy(state))
                    }
                    _ => ignored,
                },
                false,
            ),
            Rule::Already => done,
            Rule::Start => match cmd {
                Command::Play(pb) => (self.accept(pb, k, clock), false),
                _ => (ignored, false),
            },
            Rule::Replace => match cmd {
                Command::Replace { playback, at_tick } => (self.replace(playback, at_tick), false),
                _ => (ignored, false),
            },
            Rule::PathSpeed => match cmd {
                Command::Pause(scope) => (self.path_speed(scope, 0.0).unwrap_or(ignored), false),
                Command::Resume(scope) => (self.path_speed(scope, 1.0).unwrap_or(ignored), false),
                _ => (ignored, false),
            },
            rule @ (Rule::Stop | Rule::QuickStop) => {
                let (Command::Stop(scope) | Command::QuickStop(scope)) = cmd else {
                    return (ignored, false);
                };
                let kind = if rule == Rule::QuickStop {
                    StopKind::Quick
                } else {
                    StopKind::Planned
                };
                (self.stop_scope(scope, kind).unwrap_or(ignored), false)
            }
            Rule::DisableNow => {
                self.disable();
                done
            }
            Rule::DisableAfterStop => {
                self.stop_slots(0..self.slots.len(), StopKind::Planned);
                self.pending.disable = true;
                self.pending.enable = false;
                done
            }
            Rule::DisableAtRest => {
                self.pending.disable = true;
                self.pending.enable = false;
                done
            }
            Rule::EndRecordingDisable => {
                self.end_recording();
                self.disable();
                done
            }
            Rule::Enable => {
                self.begin_enable();
                done
            }
            Rule::Record => (self.begin_record(), false),
            Rule::RecordStop => {
                self.end_recording();
                done
            }
            Rule::Clear => {
                self.clear();
                done
            }
            Rule::ClearAtRest => {
                self.pending.clear = true;
                done
            }
            Rule::RecoverNow => {
                self.clear();
                if self.mode == Mode::Disabled {
                    self.begin_enable();
                }
                done
            }
            Rule::RecoverAtRest => {
                self.pending.clear = true;
                self.pending.enable = true;
                done
            }
            Rule::ExitNow => (Ack::Done, self.finish(k)),
            Rule::ExitAfterStop => {
                self.stop_slots(0..self.slots.len(), StopKind::Planned);
                self.pending.exit = true;
                done
            }
            Rule::QuickExit => {
                self.stop_slots(0..self.slots.len(), StopKind::Quick);
                self.pending.exit = true;
                done
            }
            Rule::ExitAtRest => {
                self.pending.exit = true;
                done
            }
            Rule::EndRecordingExit => {
                self.end_recording();
                self.pending.exit = true;
                done
            }
            // Event rules: never a command's (`table` tests it).
            Rule::EStop | Rule::EStopAgain | Rule::Released | Rule::Fault | Rule::DriveEStop => {
                (ignored, false)
            }
        }
    }

    /// Pause (`target` 0) or resume (1) the running playbacks of `scope` along their paths;
    /// `None` when the scope names no group or nothing changed.
    fn path_speed(&mut self, scope: Scope, target: f64) -> Option<Ack> {
        let range = self.scope(scope)?;
        let mut any = false;
        for slot in &mut self.slots[range] {
            if slot.state == SlotState::Running && slot.path.target_speed != target {
                slot.path.target_speed = target;
                any = true;
            }
        }
        any.then_some(Ack::Done)
    }

    /// Stops the playbacks of `scope`; its idle slots hold from here on (`None`: no such group).
    /// A group's stop also stops a whole-robot playback, which moves the group's joints too: a
    /// stop stops more than asked rather than leave the joints it names moving.
    fn stop_scope(&mut self, scope: Scope, kind: StopKind) -> Option<Ack> {
        let range = self.scope(scope)?;
        if range.start > 0 {
            self.stop_slots(0..1, kind);
        }
        self.stop_slots(range.clone(), kind);
        for i in range {
            if self.slots[i].state == SlotState::Idle {
                self.slots[i].state = SlotState::Holding;
            }
        }
        Some(Ack::Done)
    }

    /// An event (E-stop input, fault, stall) through the state table.
    fn event(&mut self, input: Input, fault: BackendError, cause: EStopCause) {
        let rule = match table::rule(self.phase(), input) {
            // A drive's own E-stop is the E-stop's rule when honoured, else a fault's.
            Rule::DriveEStop if self.estop_drive => table::rule(self.phase(), Input::EStopPress),
            Rule::DriveEStop => table::rule(self.phase(), Input::Fault),
            rule => rule,
        };
        match rule {
            Rule::EStop => self.enter_estop(cause),
            Rule::EStopAgain => {
                self.pending.clear = false;
                self.pending.enable = false;
            }
            Rule::Fault => self.enter_fault(fault),
            // The input level is the E-stop's whole state; a fault during a fault or the E-stop
            // is the bus status's to show.
            _ => {}
        }
    }

    /// A fault from the backend, the guard, the following check or the loop's clock, as the
    /// state table's input it is.
    fn fault_event(&mut self, e: BackendError) {
        let input = match e.kind {
            FaultKind::DriveEStop => Input::DriveEStop,
            FaultKind::Overrun => Input::Stall,
            _ => Input::Fault,
        };
        let cause = EStopCause::Drive { dof: e.dof };
        self.event(input, e, cause);
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
            let gap = (a.position - self.guard.last()[d].position).abs();
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
            // Saturating: an instant beyond u64 ticks never comes, and never wraps to now.
            k.saturating_add((ahead_ns * self.rate_hz / 1e9).ceil() as u64)
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
        // A disable the drives never took stays due until an enable brings them up (see
        // `step_enable`): an enable that fails leaves them as they were, still to be disabled.
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
            Err(e) => return self.fault_event(e),
        }
        // Drives come up targeting their measured position: hold exactly that.
        if ready && self.feedback.iter().all(|f| f.valid) {
            self.disable_untaken = false;
            self.enabled = true;
            self.stale.iter_mut().for_each(|s| *s = 0);
            self.resync_to_measured();
            for (j, c) in self.compliant.iter_mut().enumerate() {
                *c = false;
                self.guard.set_free(j, false);
            }
            for slot in &mut self.slots {
                slot.state = SlotState::Idle;
            }
            self.mode = Mode::Active;
        } else if ticks > self.enable_timeout_ticks {
            let e = self.backend.enable_timed_out();
            self.fault_event(e.unwrap_or(BackendError::new(FaultKind::EnableTimeout)));
        } else {
            self.mode = Mode::Enabling { ready, ticks };
        }
    }

    /// The stream starts again at rest where the drives are: where each holds as the backend
    /// says (what it took), else where it was measured.
    fn resync_to_measured(&mut self) {
        self.read_held();
        for (j, (f, &h)) in self.feedback.iter().zip(&self.held).enumerate() {
            let p = if h.is_finite() {
                h
            } else if f.valid {
                f.position
            } else {
                continue;
            };
            self.guard.resync(j, p);
            self.commanded[j] = p;
        }
    }

    /// Where the backend says each drive holds ([`Backend::holding`]), NaN where it does not.
    fn read_held(&mut self) {
        self.held.iter_mut().for_each(|h| *h = f64::NAN);
        self.backend.holding(&mut self.held);
    }

    fn hold_setpoints(&mut self) {
        for (o, l) in self.out.iter_mut().zip(self.guard.last()) {
            *o = at_rest(l.position);
        }
    }

    /// Teach-in on, from rest: the drives compliant where the backend can (else they hold).
    fn begin_record(&mut self) -> Ack {
        if let Err(e) = self.backend.compliant(true, &mut self.compliant) {
            self.fault_event(e);
            return Ack::Ignored(self.state());
        }
        for (j, &c) in self.compliant.iter().enumerate() {
            self.guard.set_free(j, c);
        }
        let compliant = self.compliant.iter().any(|&c| c);
        self.mode = Mode::Recording { compliant };
        Ack::Done
    }

    /// One tick of teach-in: compliant drives are told where they are (the protocol stays alive;
    /// they follow the hand, not the target), the others hold.
    fn record_tick(&mut self, k: u64, compliant: bool) -> bool {
        self.hold_setpoints();
        if compliant {
            for ((o, m), c) in self.out.iter_mut().zip(&self.measured).zip(&self.compliant) {
                if *c {
                    *o = at_rest(*m);
                }
            }
        }
        self.emit(k, Via::Write)
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
                self.follow_hand();
                match self.backend.compliant(false, &mut self.taken) {
                    Ok(Readiness::Ready) => self.stiff(),
                    Ok(Readiness::Pending) => self.begin_enable(),
                    Err(e) => self.fault_event(e),
                }
            }
        }
    }

    /// The compliant DOFs' history restarts at rest where the hand holds them: what they are
    /// told to hold, never the hand's motion continued. A drive that stiffened already holds
    /// where it was stiffened: its history restarts there, not at a report that may predate
    /// its stiffening (the hand still moving it).
    fn follow_hand(&mut self) {
        self.read_held();
        let held = self.held.iter();
        for (j, ((&c, &m), &h)) in self
            .compliant
            .iter()
            .zip(&self.measured)
            .zip(held)
            .enumerate()
        {
            if c {
                let p = if h.is_finite() { h } else { m };
                self.guard.resync(j, p);
                self.commanded[j] = p;
            }
        }
    }

    /// The compliant drives follow again, from rest where they are.
    fn stiff(&mut self) {
        self.follow_hand();
        for (j, c) in self.compliant.iter_mut().enumerate() {
            if *c {
                self.guard.set_free(j, false);
            }
            *c = false;
        }
        self.stiffening = false;
    }

    /// The one way to the drives: `out`, judged by the guard against what each drive took last,
    /// then written ([`Via::Write`]) or held ([`Via::Hold`]). A setpoint the guard refuses never
    /// goes out: the loop faults and the drives get the quick stop's first step from what they
    /// have (this tick still). A failed write becomes no drive's history but the drives' that
    /// took it ([`Backend::taken`]). Returns whether every drive took `out`.
    fn emit(&mut self, k: u64, via: Via) -> bool {
        if let Some((j, code)) = self.guard.judge(&self.out) {
            self.limit_violations += 1;
            let stopping = matches!(self.mode, Mode::Fault | Mode::EStop { .. });
            self.fault_event(BackendError {
                kind: FaultKind::Limit,
                dof: u16::try_from(j).ok(),
                code,
            });
            if !stopping {
                return false;
            }
            // The quick stop's own step (a rounding away from what the guard computes): it is
            // the brake, the gentlest thing there is to send.
        }
        let result = match via {
            Via::Write => self.backend.write(k, &self.out),
            Via::Hold => self.backend.hold(k, &self.out),
        };
        let taken = match &result {
            Ok(()) => None,
            Err(_) => {
                self.backend.taken(&mut self.taken);
                Some(&self.taken[..])
            }
        };
        self.guard.commit(k, &self.out, taken);
        for (c, l) in self.commanded.iter_mut().zip(self.guard.last()) {
            *c = l.position;
        }
        match result {
            Ok(()) => true,
            Err(e) => {
                self.fault_event(e);
                false
            }
        }
    }

    /// Leaves the drives in the safe state (a disable acknowledged meanwhile: disabled); the
    /// loop ends after this tick. Only ever at rest (see [`super::table`]).
    fn finish(&mut self, k: u64) -> bool {
        for i in 0..self.slots.len() {
            let leaving = self.slots[i].leave(Outcome::Stopped);
            self.retire_all(leaving);
        }
        if self.pending.disable || self.safe_state == SafeState::Disable {
            self.disable();
        } else if self.enabled && self.mode == Mode::Active {
            self.hold_setpoints();
            // The last word to the drives; nothing is left to act on a failure.
            self.emit(k, Via::Hold);
        }
        self.pending = Pending::default();
        self.ended = true;
        true
    }

    fn disable(&mut self) {
        for i in 0..self.slots.len() {
            let leaving = self.slots[i].leave(Outcome::Stopped);
            self.retire_all(leaving);
            self.slots[i].state = SlotState::Idle;
            self.slots[i].goal_deadline = None;
        }
        self.pending.disable = false;
        if self.enabled || matches!(self.mode, Mode::Enabling { .. }) {
            self.disable_drives();
        }
        self.enabled = false;
        self.stiffening = false;
        for (j, c) in self.compliant.iter_mut().enumerate() {
            *c = false;
            self.guard.set_free(j, false);
        }
        match &mut self.mode {
            Mode::Fault => {}
            // Cleared later, the E-stop leaves the drives disabled as asked now.
            Mode::EStop { resume } => *resume = false,
            _ => self.mode = Mode::Disabled,
        }
    }

    /// The fault (the first one is the one reported): whatever moves stops as fast as the
    /// quick-stop decelerations allow from what the drives have, then holds; every slot stops.
    /// Disables and exits acknowledged before stay due.
    fn enter_fault(&mut self, e: BackendError) {
        if matches!(self.mode, Mode::Fault | Mode::EStop { .. } | Mode::Disabled) {
            return;
        }
        self.fault = Some(e);
        self.begin_quick_stop();
        self.mode = Mode::Fault;
    }

    /// Every slot ends (faulted) and the whole robot stops as fast as the quick-stop
    /// decelerations allow from what the drives have. A teach-in stops where the joints are:
    /// the drives stiffen in place, never continuing the hand's motion.
    fn begin_quick_stop(&mut self) {
        if self.compliant.iter().any(|&c| c) {
            self.follow_hand();
            match self.backend.compliant(false, &mut self.taken) {
                Ok(Readiness::Ready) => self.stiff(),
                // Asked again every tick until they follow (a failed bus may refuse at first).
                Ok(Readiness::Pending) | Err(_) => self.stiffening = true,
            }
        }
        for i in 0..self.slots.len() {
            let leaving = self.slots[i].leave(Outcome::Faulted);
            self.retire_all(leaving);
            self.slots[i].state = SlotState::Holding;
            self.slots[i].goal_deadline = None;
        }
        self.pending.clear = false;
        self.pending.enable = false;
        self.guard.plan_quick_stop();
    }

    /// Reads the E-stop input: asserted (or unreadable) is the E-stop, a release is noted.
    fn poll_estop(&mut self) {
        let Some(input) = &mut self.estop_input else {
            return;
        };
        let (asserted, event, cause) = match input.asserted() {
            Ok(true) => (true, Input::EStopPress, EStopCause::Input),
            Ok(false) => (false, Input::EStopRelease, EStopCause::Input),
            Err(_) => (true, Input::EStopLost, EStopCause::InputLost),
        };
        // The table's row is the one before this level.
        if asserted || self.estop.input == Some(true) {
            self.event(event, BackendError::new(FaultKind::DriveEStop), cause);
        }
        self.estop.input = Some(asserted);
    }

    /// The E-stop: whatever moves stops quickly (a fault's quick stop already under way goes
    /// on), then the safe state; nothing moves again until it is released and cleared. Enabling
    /// drives are disabled. A clear asked for before no longer counts; a disable or an exit does.
    fn enter_estop(&mut self, cause: EStopCause) {
        let resume = match self.mode {
            Mode::EStop { .. } => return,
            Mode::Fault => self.enabled,
            Mode::Active | Mode::Recording { .. } => {
                self.begin_quick_stop();
                self.enabled
            }
            Mode::Enabling { .. } => {
                self.disable_drives();
                self.enabled = false;
                self.stiffening = false;
                for (j, c) in self.compliant.iter_mut().enumerate() {
                    *c = false;
                    self.guard.set_free(j, false);
                }
                true
            }
            Mode::Disabled => false,
        };
        self.pending.clear = false;
        self.pending.enable = false;
        self.estop.cause = Some(cause);
        self.mode = Mode::EStop {
            resume: resume && !self.pending.disable,
        };
    }

    /// One tick of the quick stop a fault or the E-stop runs: its next step from what the drives
    /// have (at rest: the hold), sent every tick whatever the backend said last time, so a drive
    /// that missed one continues from where it is; at rest, the safe state.
    fn quick_stop_tick(&mut self, k: u64) {
        if !self.enabled {
            return;
        }
        if self.stiffening {
            // Held where the hand leaves them until they follow again.
            self.follow_hand();
            if let Ok(Readiness::Ready) = self.backend.compliant(false, &mut self.taken) {
                self.stiff();
            }
        }
        self.guard.settle_silent(k, self.silent_ticks);
        self.guard.brake(&mut self.out);
        self.emit(k, Via::Hold);
        // Until the drives take the disable they keep getting the hold, and it is sent again
        // next tick.
        if self.stopped() && self.safe_state == SafeState::Disable && self.disable_drives() {
            self.enabled = false;
        }
    }

    /// What acknowledged commands left for rest, once at rest: clear, disable, enable, exit (in
    /// that order; an exit skips the clear and the enable). Returns whether the loop ends.
    fn at_rest_obligations(&mut self, k: u64) -> bool {
        let rest = match self.mode {
            Mode::Disabled => true,
            Mode::Enabling { .. } | Mode::Recording { .. } => false,
            Mode::Active => !self.slots.iter().any(Slot::moving),
            Mode::Fault | Mode::EStop { .. } => self.stopped(),
        };
        if !rest || self.pending == Pending::default() {
            return false;
        }
        if self.pending.clear && !self.pending.exit {
            match self.mode {
                Mode::Fault => self.clear(),
                Mode::EStop { .. } if self.estop.input != Some(true) => self.clear(),
                _ => {}
            }
        }
        self.pending.clear = false;
        if self.pending.disable {
            self.disable();
        }
        if self.pending.enable && !self.pending.exit && self.mode == Mode::Disabled {
            self.begin_enable();
        }
        self.pending.enable = false;
        if self.pending.exit {
            return self.finish(k);
        }
        false
    }

    /// Out of a fault or a released E-stop, at rest.
    fn clear(&mut self) {
        match self.mode {
            Mode::Fault => self.clear_fault(),
            Mode::EStop { resume } if self.estop.input != Some(true) => self.clear_estop(resume),
            _ => {}
        }
    }

    /// Out of the E-stop, released and at rest: drives that were up go through their whole
    /// enable sequence again (an E-stop circuit may have cut their power) and the commanded pose
    /// starts from the measured one, so nothing jumps; drives that were down stay down.
    fn clear_estop(&mut self, resume: bool) {
        self.pending.clear = false;
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
        self.pending.clear = false;
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
            Mode::Disabled | Mode::Enabling { .. } | Mode::Fault | Mode::EStop { .. }
        );
        // The reports that came in are taken even when a bus failed: the drives on the others
        // go on, and what the loop does next (a teach-in stiffens where they are) needs them.
        let sent = sent && commanding && result.is_ok();
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
        if let Err(e) = result {
            if commanding {
                self.fault_event(e);
            }
            return;
        }
        if let Some(j) = missing {
            self.fault_event(BackendError {
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
            self.fault_event(BackendError {
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
            phase: self.phase(),
            motion_id: primary.motion_id,
            tick: k,
            progress: primary.progress,
            time_s: primary.time_s,
            limit_violations: self.limit_violations,
            refused: self.refused,
            fault: self.fault,
            estop: EStop {
                reenable: matches!(self.mode, Mode::EStop { resume: true }),
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

/// The state table's input for a command.
fn input_of(cmd: &Command) -> Input {
    match cmd {
        Command::Play(_) => Input::Play,
        Command::Replace { .. } => Input::Replace,
        Command::Stop(_) => Input::Stop,
        Command::QuickStop(_) => Input::QuickStop,
        Command::Pause(_) => Input::Pause,
        Command::Resume(_) => Input::Resume,
        Command::Enable => Input::Enable,
        Command::Disable => Input::Disable,
        Command::ClearFault => Input::ClearFault,
        Command::Record(true) => Input::Record,
        Command::Record(false) => Input::RecordStop,
        Command::Recover => Input::Recover,
        Command::Shutdown => Input::Shutdown,
        Command::ShutdownNow => Input::SecondSignal,
    }
}
