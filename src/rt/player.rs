//! One tick of the loop: commands, the player's state machine, the guard, the backend.
//!
//! Nothing here allocates or frees after [`Player::new`]: buffers are sized for the joint set,
//! playbacks arrive boxed and leave through the retire channel.
//!
//! The drives see one stream of setpoints, one per period, whatever happens: motion, pause,
//! stop, fault and hold all continue from the last two setpoints sent, and every setpoint is
//! checked against them before it goes out ([`violation`]).

use std::sync::Arc;

use crossbeam::channel::{Receiver, Sender, TryRecvError, TrySendError};

use super::status::{Published, Shared};
use super::trace::Trace;
use super::{
    Ack, Clock, Command, Outcome, Playback, Refusal, Repeat, Retired, SafeState, Settings, State,
    Step,
};
use crate::backend::{Backend, BackendError, FaultKind, Feedback, Readiness};
use crate::trajectory::envelope::position_scale;
use crate::trajectory::{
    Cursor, DofLimits, JointSet, Measure, SeamError, Setpoint, Stop, StopKind, Stream, Trajectory,
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
    Idle,
    Holding,
    Running,
    Stopping {
        tick: u64,
        quick: bool,
        after: After,
    },
    /// Stopping quickly (tick into the plan), then holding, until cleared.
    Fault {
        tick: u64,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Segment {
    Approach,
    /// At the motion's first sample until loop tick `until` (`start_at`).
    Wait {
        until: u64,
    },
    Motion,
}

/// What follows a stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum After {
    Hold,
    Disable,
    Exit,
}

/// Where the player is along the active playback: a segment, a position in it (in ticks:
/// `base + frac`) and the path speed (1 = as recorded).
#[derive(Debug, Clone, Copy)]
struct Path {
    segment: Segment,
    base: u64,
    frac: f64,
    speed: f64,
    target_speed: f64,
    /// The playback's first tick is still to come (the path does not move before it).
    fresh: bool,
    /// Passes through the motion still to come after this one; `None`: forever.
    laps_left: Option<u32>,
    /// Loop tick before which the motion may not start (`start_at`).
    wait_until: Option<u64>,
}

impl Path {
    fn new(repeat: Repeat, wait_until: Option<u64>) -> Path {
        Path {
            segment: Segment::Approach,
            wait_until,
            base: 0,
            frac: 0.0,
            speed: 1.0,
            target_speed: 1.0,
            fresh: true,
            laps_left: match repeat {
                Repeat::Once => Some(0),
                Repeat::Times(n) => Some(n.saturating_sub(1)),
                Repeat::Forever => None,
            },
        }
    }

    /// Moved on by `step` ticks.
    fn advanced(mut self, step: f64) -> Path {
        let pos = self.frac + step;
        let whole = pos.floor();
        self.base += whole as u64;
        self.frac = pos - whole;
        self
    }
}

/// Where a path position falls once segment ends are resolved.
enum Place {
    At(Path),
    /// Past the end of the last lap.
    Finished,
}

pub(crate) struct Player {
    rate_hz: f64,
    dt: f64,
    limits: Vec<DofLimits>,
    backend: Box<dyn Backend>,
    stop: Stop,
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
    playback: Option<Box<Playback>>,
    path: Path,
    cursor: Cursor,
    /// Tick by which the drives must be within the goal tolerance of the finished motion.
    goal_deadline: Option<u64>,
    /// A `ClearFault` waiting for the fault's quick stop to come to rest.
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

    last_k: Option<u64>,
    enabled: bool,
    fault: Option<BackendError>,
    limit_violations: u64,
    refused: u64,
    awaiting_first_command: bool,
    first_command: Option<(u64, u64)>,
    motion_start_tick: Option<u64>,
}

/// Whether `next` may follow `prev`, `last` on a DOF with limits `lim` at period `dt`, as the
/// drive sees the stream (the one definition: [`Stream::judge`]): the code of the first check it
/// fails. Positions outside the position limits pass when they do not move farther out (a robot
/// that ends up outside can always be brought back).
fn violation(
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

impl Player {
    pub fn new(
        settings: &Settings,
        backend: Box<dyn Backend>,
        joints: &JointSet,
        commands: Receiver<(u64, Command)>,
        retire: Sender<Retired>,
        shared: Arc<Shared>,
        trace: Option<Arc<Trace>>,
    ) -> Self {
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
        Self {
            rate_hz: settings.rate_hz,
            dt: 1.0 / settings.rate_hz,
            limits: joints.dofs.iter().map(|d| d.limits).collect(),
            backend,
            stop: Stop::new(joints, settings.rate_hz, &quick),
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
            playback: None,
            path: Path::new(Repeat::Once, None),
            cursor: Cursor::default(),
            goal_deadline: None,
            clear_pending: false,
            out: rest.clone(),
            last: rest.clone(),
            prev: rest,
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
            motion_start_tick: None,
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
            Mode::Idle => State::Idle,
            Mode::Running if self.path.target_speed == 0.0 => State::Paused,
            Mode::Running => match self.path.segment {
                Segment::Motion => State::Playing,
                Segment::Approach | Segment::Wait { .. } => State::Approaching,
            },
            Mode::Stopping { .. } => State::Stopping,
            Mode::Holding => State::Holding,
            Mode::Fault { .. } => State::Fault,
        }
    }

    /// Runs loop tick `k`. Ticks may have been skipped after an overrun: timeouts count them,
    /// the path does not (one period of motion per tick run).
    pub fn tick(&mut self, k: u64, clock: &dyn Clock) -> Step {
        let dk = self.last_k.map_or(1, |last| k.saturating_sub(last).max(1));
        self.last_k = Some(k);
        self.flush_parked();
        let mut exit = self.take_commands(k, clock);

        let mut sent = false;
        match self.mode {
            Mode::Disabled | Mode::Fault { .. } => {}
            Mode::Enabling { ready, ticks } => self.step_enable(ready, ticks + dk),
            Mode::Idle | Mode::Holding => {
                self.hold_setpoints();
                sent = self.send(k, clock);
            }
            Mode::Running => {
                self.run_playback(k);
                sent = self.send(k, clock);
            }
            Mode::Stopping { tick, quick, after } => {
                let tick = tick + 1;
                self.stop.sample(tick, &mut self.out);
                self.mode = Mode::Stopping { tick, quick, after };
                sent = self.send(k, clock);
                if sent && tick + 1 >= self.stop.ticks() {
                    exit |= self.end_stop(after);
                }
            }
        }
        // Also on the tick a fault was entered: the drives get the first step of its stop now.
        if let Mode::Fault { tick } = self.mode {
            self.fault_tick(k, tick);
        }
        self.read_feedback(dk, sent);
        self.check_following(k);
        if let Some(trace) = &self.trace {
            trace.record(k, self.state(), &self.last, &self.measured);
        }
        self.publish(k);
        if exit { Step::Ended } else { Step::Continue }
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

    /// What became of the command, and whether the loop should end after this tick.
    fn handle(&mut self, cmd: Command, k: u64, clock: &dyn Clock) -> (Ack, bool) {
        let state = self.state();
        let ignored = (Ack::Ignored(state), false);
        let done = (Ack::Done, false);
        match cmd {
            Command::Play(pb) => (self.accept(pb, k, clock), false),
            Command::Stop => match self.mode {
                Mode::Running => {
                    self.begin_stop(StopKind::Planned, After::Hold);
                    done
                }
                Mode::Idle => {
                    self.mode = Mode::Holding;
                    done
                }
                Mode::Holding | Mode::Stopping { .. } => done,
                _ => ignored,
            },
            Command::QuickStop => match self.mode {
                Mode::Running => {
                    self.begin_stop(StopKind::Quick, After::Hold);
                    done
                }
                Mode::Stopping {
                    quick: false,
                    after,
                    ..
                } => {
                    self.begin_stop(StopKind::Quick, after);
                    done
                }
                Mode::Idle => {
                    self.mode = Mode::Holding;
                    done
                }
                Mode::Holding | Mode::Stopping { .. } => done,
                _ => ignored,
            },
            Command::Pause => {
                if self.mode == Mode::Running && self.path.target_speed != 0.0 {
                    self.path.target_speed = 0.0;
                    done
                } else {
                    ignored
                }
            }
            Command::Resume => {
                if self.mode == Mode::Running && self.path.target_speed == 0.0 {
                    self.path.target_speed = 1.0;
                    done
                } else {
                    ignored
                }
            }
            Command::Enable => match self.mode {
                Mode::Disabled => {
                    self.begin_enable();
                    done
                }
                Mode::Fault { .. } => ignored,
                _ => done,
            },
            Command::Disable => match self.mode {
                Mode::Running => {
                    self.begin_stop(StopKind::Planned, After::Disable);
                    done
                }
                Mode::Stopping { tick, quick, after } if after != After::Exit => {
                    self.mode = Mode::Stopping {
                        tick,
                        quick,
                        after: After::Disable,
                    };
                    done
                }
                Mode::Idle | Mode::Holding | Mode::Fault { .. } | Mode::Enabling { .. } => {
                    self.disable();
                    done
                }
                _ => done,
            },
            Command::ClearFault => match self.mode {
                Mode::Fault { tick } => {
                    self.clear_pending = true;
                    if tick + 1 >= self.stop.ticks() {
                        self.clear_fault();
                    }
                    done
                }
                _ => ignored,
            },
            Command::Shutdown => match self.mode {
                Mode::Running => {
                    self.begin_stop(StopKind::Planned, After::Exit);
                    done
                }
                Mode::Stopping { tick, quick, .. } => {
                    self.mode = Mode::Stopping {
                        tick,
                        quick,
                        after: After::Exit,
                    };
                    done
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

    /// Takes a playback: constant time, whatever the motion's length.
    fn accept(&mut self, pb: Box<Playback>, k: u64, clock: &dyn Clock) -> Ack {
        if !matches!(self.mode, Mode::Idle | Mode::Holding) {
            let state = self.state();
            return self.refuse(pb, Refusal::Busy(state));
        }
        let n = self.limits.len();
        let fits = |t: &Trajectory| t.dofs() == n && t.ticks() > 0 && t.rate_hz() == self.rate_hz;
        if !fits(&pb.approach) || !fits(&pb.motion) {
            return self.refuse(pb, Refusal::Mismatch);
        }
        let start = pb.approach.first_setpoints();
        let jump = start.iter().zip(&self.last).position(|(a, l)| {
            let gap = (a.position - l.position).abs();
            // NaN counts as a jump.
            gap.is_nan() || gap > self.start_tolerance
        });
        if let Some(j) = jump {
            return self.refuse(pb, Refusal::Jump { dof: j as u16 });
        }
        if pb.repeat != Repeat::Once
            && let Err(seam) = pb.motion.loop_seam()
        {
            return self.refuse(
                pb,
                Refusal::NotLoopable {
                    dof: match seam {
                        SeamError::Jump { index, .. } => index as u16,
                        SeamError::TooShort(_) => 0,
                    },
                },
            );
        }
        let wait_until = pb.start_at.map(|at| {
            let at_ns = at
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as i128);
            let ahead_ns = (at_ns - clock.realtime_ns()).max(0) as f64;
            k + (ahead_ns * self.rate_hz / 1e9).ceil() as u64
        });
        self.path = Path::new(pb.repeat, wait_until);
        self.playback = Some(pb);
        self.cursor = Cursor::default();
        self.mode = Mode::Running;
        self.goal_deadline = None;
        self.awaiting_first_command = true;
        self.first_command = None;
        self.motion_start_tick = None;
        Ack::Done
    }

    fn begin_enable(&mut self) {
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
            self.mode = Mode::Idle;
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

    /// The next setpoint of the active playback into `out`. The path moves on by the mean of this
    /// tick's and the next path speed; while the speed ramps (pause, resume) the largest change
    /// whose setpoint keeps the stream within the limits is taken.
    fn run_playback(&mut self, k: u64) {
        let Some(pb) = self.playback.take() else {
            self.hold_setpoints();
            self.mode = Mode::Holding;
            return;
        };
        let s = self.path.speed;
        let full = if self.path.fresh {
            0.0
        } else {
            (self.path.target_speed - s).clamp(-self.ramp_step, self.ramp_step)
        };
        let candidates = [s + full, s + 0.5 * full, s + 0.25 * full, s];
        let tries = if full == 0.0 { 1 } else { 4 };
        let mut finished = false;
        for (i, &next) in candidates[..tries].iter().enumerate() {
            let next = next.clamp(0.0, 1.0);
            let moved = if self.path.fresh {
                self.path
            } else {
                self.path.advanced(0.5 * (s + next))
            };
            match place(&pb, moved, k) {
                Place::Finished => {
                    finished = true;
                    break;
                }
                Place::At(path) => {
                    self.sample_path(&pb, &path, next, (next - s) * self.rate_hz);
                    if i + 1 == tries || self.fits() {
                        self.path = Path {
                            speed: next,
                            fresh: false,
                            ..path
                        };
                        break;
                    }
                }
            }
        }
        if finished {
            // The motion's last sample, as played; the drives hold it from the next tick.
            let s = self.path.speed;
            for (o, l) in self.out.iter_mut().zip(pb.motion.last_setpoints()) {
                *o = Setpoint {
                    position: l.position,
                    velocity: s * l.velocity,
                    acceleration: s * s * l.acceleration,
                };
            }
            self.playback = Some(pb);
            self.retire_active(Outcome::Finished);
            self.mode = Mode::Holding;
            if self.goal_tolerance.is_finite() {
                self.goal_deadline = Some(k + self.goal_ticks);
            }
            return;
        }
        if self.path.segment == Segment::Motion && self.motion_start_tick.is_none() {
            self.motion_start_tick = Some(k);
        }
        self.playback = Some(pb);
    }

    /// `out` at `path` with path speed `speed` changing at `dspeed` per second: velocity
    /// speed·v, acceleration speed²·a + dspeed·v.
    fn sample_path(&mut self, pb: &Playback, path: &Path, speed: f64, dspeed: f64) {
        let traj = match path.segment {
            Segment::Wait { .. } => {
                for (o, f) in self.out.iter_mut().zip(pb.motion.first_setpoints()) {
                    *o = at_rest(f.position);
                }
                return;
            }
            Segment::Approach => &pb.approach,
            Segment::Motion => &pb.motion,
        };
        let t = (path.base as f64 + path.frac) / self.rate_hz;
        traj.sample_at_time(&mut self.cursor, t, &mut self.out);
        if speed != 1.0 || dspeed != 0.0 {
            for o in &mut self.out {
                o.acceleration = speed * speed * o.acceleration + dspeed * o.velocity;
                o.velocity *= speed;
            }
        }
    }

    /// Whether `out` may follow the last two setpoints on every DOF.
    fn fits(&self) -> bool {
        self.limits
            .iter()
            .zip(&self.prev)
            .zip(&self.last)
            .zip(&self.out)
            .all(|(((lim, p), l), o)| violation(lim, p, l, o, self.dt).is_none())
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
        if self.awaiting_first_command {
            self.awaiting_first_command = false;
            self.first_command = Some((k, clock.now_ns()));
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

    fn begin_stop(&mut self, kind: StopKind, after: After) {
        self.stop.plan(&self.prev, &self.last, kind);
        self.retire_active(Outcome::Stopped);
        // The plan's tick 0 is the last setpoint, already sent.
        self.mode = Mode::Stopping {
            tick: 0,
            quick: kind == StopKind::Quick,
            after,
        };
    }

    /// At rest after a stop: returns true when the loop should end.
    fn end_stop(&mut self, after: After) -> bool {
        self.mode = Mode::Holding;
        match after {
            After::Hold => false,
            After::Disable => {
                self.disable();
                false
            }
            After::Exit => self.finish(self.last_k.unwrap_or(0)),
        }
    }

    /// Leaves the drives in the safe state; the loop ends after this tick.
    fn finish(&mut self, k: u64) -> bool {
        self.retire_active(Outcome::Stopped);
        match self.safe_state {
            SafeState::Disable => self.disable(),
            SafeState::Hold => {
                if self.enabled && !matches!(self.mode, Mode::Fault { .. }) {
                    self.hold_setpoints();
                    // The last word to the drives; nothing is left to act on a failure.
                    let _ = self.backend.hold(k, &self.out);
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
        self.goal_deadline = None;
        if !matches!(self.mode, Mode::Fault { .. }) {
            self.mode = Mode::Disabled;
        }
    }

    /// Stops whatever moves as fast as the quick-stop decelerations allow, from what the drives
    /// were last sent, then holds; the first fault is the one reported.
    fn enter_fault(&mut self, e: BackendError) {
        if matches!(self.mode, Mode::Fault { .. }) {
            return;
        }
        self.fault = Some(e);
        self.retire_active(Outcome::Faulted);
        self.goal_deadline = None;
        self.clear_pending = false;
        self.stop.plan(&self.prev, &self.last, StopKind::Quick);
        self.mode = Mode::Fault { tick: 0 };
    }

    /// One tick of the safe state: the quick stop's next setpoint (at rest: the hold), sent
    /// every tick whatever the backend said last time, so a drive that missed one gets the next.
    fn fault_tick(&mut self, k: u64, tick: u64) {
        let tick = tick + 1;
        self.stop.sample(tick, &mut self.out);
        if self.enabled {
            let _ = self.backend.hold(k, &self.out);
            self.push_sent();
        }
        self.mode = Mode::Fault { tick };
        if tick + 1 >= self.stop.ticks() {
            if self.enabled && self.safe_state == SafeState::Disable {
                let _ = self.backend.disable();
                self.enabled = false;
            }
            if self.clear_pending {
                self.clear_fault();
            }
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
            self.mode = Mode::Holding;
        } else {
            if self.enabled {
                // The way out of trouble: a failure here changes nothing we could do.
                let _ = self.backend.disable();
            }
            self.enabled = false;
            self.mode = Mode::Disabled;
        }
    }

    fn read_feedback(&mut self, dk: u64, sent: bool) {
        let result = self.backend.read(&mut self.feedback);
        let commanding = !matches!(
            self.mode,
            Mode::Disabled | Mode::Enabling { .. } | Mode::Fault { .. }
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
        let errors = self
            .commanded
            .iter()
            .zip(&self.measured)
            .zip(&self.feedback)
            .map(|((c, m), f)| if f.valid { (c - m).abs() } else { 0.0 });
        match self.mode {
            Mode::Running | Mode::Stopping { .. } => {
                let over = errors
                    .zip(&self.path_tolerance)
                    .position(|(e, &tol)| e > tol);
                if let Some(j) = over {
                    self.enter_fault(BackendError {
                        kind: FaultKind::FollowingError,
                        dof: Some(j as u16),
                        code: FOLLOWING_PATH,
                    });
                }
            }
            Mode::Holding => {
                let Some(deadline) = self.goal_deadline else {
                    return;
                };
                let tol = self.goal_tolerance;
                let worst = errors
                    .enumerate()
                    .fold((0, 0.0), |w, (j, e)| if e > w.1 { (j, e) } else { w });
                if worst.1 <= tol {
                    self.goal_deadline = None;
                } else if k >= deadline {
                    self.enter_fault(BackendError {
                        kind: FaultKind::FollowingError,
                        dof: Some(worst.0 as u16),
                        code: FOLLOWING_GOAL,
                    });
                }
            }
            _ => {}
        }
    }

    fn publish(&self, k: u64) {
        let (progress, time_s) = match (self.path.segment, self.playback.as_deref()) {
            (Segment::Motion, Some(pb)) if self.mode == Mode::Running => {
                let t = self.path.base as f64 + self.path.frac;
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
            motion_start_tick: self.motion_start_tick,
            moving: match self.mode {
                Mode::Running | Mode::Stopping { .. } => true,
                Mode::Fault { tick } => tick + 1 < self.stop.ticks(),
                _ => false,
            },
        };
        self.shared
            .publish(&p, &self.commanded, &self.measured, &self.tracking);
        for &(seq, ack) in &self.acks[..self.acks_len.min(PER_TICK)] {
            self.shared.acknowledge(seq, ack);
        }
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

/// Where `path` falls once the ends of its segments are resolved: past the approach into the
/// wait or the motion, past the motion's end into its next lap, or finished.
fn place(pb: &Playback, mut path: Path, k: u64) -> Place {
    loop {
        match path.segment {
            Segment::Approach => {
                // The approach's last tick is the motion's first sample: the motion takes over there.
                let end = pb.approach.ticks() - 1;
                if path.base < end {
                    return Place::At(path);
                }
                match path.wait_until {
                    Some(until) => {
                        path.segment = Segment::Wait { until };
                        path.base = 0;
                        path.frac = 0.0;
                    }
                    None => {
                        path.segment = Segment::Motion;
                        path.base -= end;
                    }
                }
            }
            Segment::Wait { until } => {
                path.base = 0;
                path.frac = 0.0;
                if k >= until {
                    path.segment = Segment::Motion;
                }
                return Place::At(path);
            }
            Segment::Motion => {
                let end = pb.motion.ticks() - 1;
                if path.base < end {
                    return Place::At(path);
                }
                match path.laps_left {
                    Some(0) => return Place::Finished,
                    _ if end == 0 => return Place::Finished,
                    laps => {
                        path.laps_left = laps.map(|l| l - 1);
                        path.base -= end;
                    }
                }
            }
        }
    }
}
