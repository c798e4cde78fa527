//! The real-time playback loop.
//!
//! One dedicated thread per loop ([`spawn`]): pinned to a CPU, SCHED_FIFO, memory locked, stack
//! prefaulted. It wakes on absolute deadlines (`start + k·period`), takes control messages without
//! blocking, samples the active trajectory, guards the limits once more, writes the backend and
//! reads its feedback. Everything it touches is prepared before it starts or handed in boxed;
//! what it is done with goes back out through a channel to be dropped on the control side.
//!
//! The control side talks to it through a [`LoopHandle`]: [`Command`]s over a bounded channel,
//! [`Status`] snapshots published without a lock. [`Loop`] is the same loop without its thread,
//! stepped by hand (tests, `motiond play --clock manual`).

mod clock;
mod guard;
mod path;
mod player;
// `motiond doctor`'s wake-up test applies the settings as the loop's thread does.
pub(crate) mod sched;
mod slot;
mod stats;
mod status;
pub mod table;
mod trace;

use crate::diag::Num;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use crossbeam::channel::{self, Receiver, RecvTimeoutError, Sender, TrySendError};

pub use self::clock::{Clock, ManualClock, MonotonicClock};
pub use self::path::{Path, Place, Route, Segment};
pub use self::sched::{
    CPU_DMA_LATENCY, Obtained, WAKEUP_REMEDY, WakeupObtained, cpu_resume_latency_path,
    describe_wakeup,
};
pub use self::stats::{Histogram, Summary};
pub use self::table::{Input, Phase, Rule};
pub use self::trace::{
    CsvWriter as TraceCsv, RowHead, Trace, TraceRow, write_csv as write_trace_csv,
};
/// The drives' state after a shutdown: hold (powered) or disable.
pub use crate::config::SafeState;

use self::player::Player;
use self::status::Shared;
use crate::backend::{Backend, BackendError};
use crate::estop::EStopInput;
use crate::trajectory::{JointSet, Trajectory};

/// Acknowledgements kept for [`LoopHandle::ack`]: more than the command queue holds.
const ACKS_KEPT: usize = 64;
/// Slots a loop plays: the whole robot and up to eight joint groups.
pub const MAX_SLOTS: usize = 9;

/// Capacity of the command channel; `send` fails with [`Error::Busy`] beyond it.
const COMMAND_CAPACITY: usize = 32;
/// Every playback enters through the command channel and `send` drains the retired ones first,
/// so this many are never all waiting at once.
const RETIRED_CAPACITY: usize = COMMAND_CAPACITY + 8;
/// Outcomes kept for [`LoopHandle::outcome`] (and for [`LoopHandle::outcomes`] when nobody
/// collects them).
const OUTCOMES_KEPT: usize = 64;
/// The loop thread's stack, and how much of it is touched before the first tick.
const STACK_BYTES: usize = 1 << 20;

/// How the loop runs. Built from the validated configuration ([`Settings::from_config`]) or by
/// hand.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub rate_hz: f64,
    /// CPU to pin the loop thread to; `None` leaves the affinity alone.
    pub cpu: Option<usize>,
    /// SCHED_FIFO priority (1–99); `None` keeps the normal scheduler.
    pub priority: Option<i32>,
    /// mlockall(MCL_CURRENT | MCL_FUTURE) before the first tick.
    pub lock_memory: bool,
    /// Any real-time setting that is not obtained makes [`spawn`] fail instead of warning.
    pub strict: bool,
    /// While the loop runs, hold its CPU to this wake-up latency (µs) with a PM QoS request so
    /// it stays out of idle states slower to leave; `None` asks for nothing.
    pub cpu_wakeup_latency_us: Option<u32>,
    /// This many overruns in a row fault the loop (0: never).
    pub max_consecutive_overruns: u32,
    /// A wake-up later than this after its deadline faults the loop (quick stop); `None`: two
    /// periods.
    pub max_late_s: Option<f64>,
    /// Enabling that takes longer faults with `enable_timeout`.
    pub enable_timeout_s: f64,
    /// A DOF without valid feedback for this long faults with `feedback_missing`, unless the
    /// backend names its own timeout for that DOF.
    pub feedback_timeout_s: f64,
    /// Time a pause takes to slow a motion to rest along its path, and a resume to bring it back.
    pub pause_ramp_s: f64,
    /// A playback whose approach starts farther than this (rad or m) from the commanded position
    /// of any DOF is refused: the loop never jumps.
    pub start_tolerance: f64,
    /// What `Shutdown` leaves the drives in once the motion is at rest. (Each DOF's quick-stop
    /// deceleration is its [`CommandedDof::quick_stop_deceleration`](crate::trajectory::CommandedDof).)
    pub safe_state: SafeState,
    /// Per DOF, the largest |commanded − measured| allowed while moving (infinite: unchecked);
    /// empty: unchecked.
    pub path_tolerance: Vec<f64>,
    /// After a motion ends, every DOF must come within this of its final position within
    /// [`goal_time_s`](Self::goal_time_s) (infinite: unchecked).
    pub goal_tolerance: f64,
    pub goal_time_s: f64,
    /// Rows of the loop's [`Trace`] ring (0: no trace); the reader must drain it at least this
    /// often (in ticks) to keep every row.
    pub trace_ticks: usize,
    /// Joint groups (JointSet indices, each ascending; disjoint): slot `i + 1` plays group `i`.
    pub groups: Vec<Vec<usize>>,
    /// A drive's report of its own E-stop ([`FaultKind::DriveEStop`](crate::backend::FaultKind))
    /// puts the loop into [`State::EStop`] rather than faulting it (`estop.drive`).
    pub estop_drive: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            rate_hz: 1000.0,
            cpu: None,
            priority: None,
            lock_memory: false,
            strict: false,
            cpu_wakeup_latency_us: None,
            max_consecutive_overruns: 10,
            max_late_s: None,
            enable_timeout_s: 2.0,
            feedback_timeout_s: 0.05,
            pause_ramp_s: 0.5,
            start_tolerance: 1e-6,
            safe_state: SafeState::Hold,
            path_tolerance: Vec::new(),
            goal_tolerance: f64::INFINITY,
            goal_time_s: 1.0,
            trace_ticks: 0,
            groups: Vec::new(),
            estop_drive: false,
        }
    }
}

impl Settings {
    /// `control.rate_hz`, the `rt` section, `daemon.safe_state`, the following-error tolerances
    /// of `robot.limits` and `motion`, for `joints`; the rest keeps its default.
    pub fn from_config(config: &crate::config::Config, joints: &JointSet) -> Self {
        let rt = &config.rt;
        let per_dof = |pick: fn(&crate::config::DofLimitOverride) -> Option<f64>| -> Vec<f64> {
            joints
                .dofs
                .iter()
                .map(|d| {
                    config
                        .robot
                        .limits
                        .iter()
                        .find(|o| o.dof == d.name)
                        .and_then(pick)
                        .unwrap_or(f64::NAN)
                })
                .collect()
        };
        let path_tolerance = per_dof(|o| o.following_error)
            .into_iter()
            .map(|t| if t.is_nan() { f64::INFINITY } else { t })
            .collect();
        Self {
            rate_hz: config.control.rate_hz,
            cpu: rt.cpu,
            priority: Some(rt.priority),
            lock_memory: rt.lock_memory,
            strict: rt.strict,
            cpu_wakeup_latency_us: rt.cpu_wakeup_latency_us,
            max_consecutive_overruns: rt.max_consecutive_overruns,
            max_late_s: rt.max_late.map(|d| d.as_secs_f64()),
            enable_timeout_s: rt.enable_timeout.as_secs_f64(),
            safe_state: config.daemon.safe_state,
            path_tolerance,
            goal_tolerance: config.motion.goal_tolerance.unwrap_or(f64::INFINITY),
            goal_time_s: config.motion.goal_time_s,
            estop_drive: config.estop.as_ref().is_some_and(|e| e.drive),
            ..Self::default()
        }
    }
}

/// A motion ready to play: both trajectories built and proved off the loop.
#[derive(Debug)]
pub struct Playback {
    /// Chosen by the caller; reported back in [`Status`] and [`Outcome`]s.
    pub motion_id: u32,
    /// From the commanded pose to the motion's first sample, then the motion (the control side
    /// may keep a reference to predict the loop).
    pub route: Route,
    /// How often the motion plays; more than once is refused unless it can loop
    /// ([`Trajectory::loop_seam`]).
    pub repeat: Repeat,
    /// Start the motion (after the approach) at this wall-clock (CLOCK_REALTIME) instant.
    pub start_at: Option<SystemTime>,
    /// The slot it plays in: 0 the whole robot, `i + 1` joint group `i` (whose DOFs are the
    /// trajectories' DOFs, in JointSet order).
    pub slot: u8,
    /// A streamed piece: the motion tick of its last row. The slot is [`State::Streaming`] up
    /// to it and [`State::Starved`] in the braking tail after it.
    pub stream_tail: Option<u64>,
}

impl Playback {
    /// The whole robot plays `approach` then `motion`, once, now.
    pub fn new(motion_id: u32, approach: Trajectory, motion: Trajectory) -> Playback {
        Playback {
            motion_id,
            route: Route {
                approach: Arc::new(approach),
                motion: Arc::new(motion),
            },
            repeat: Repeat::Once,
            start_at: None,
            slot: 0,
            stream_tail: None,
        }
    }
}

/// Which slots a command is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Every slot: the whole robot and all groups.
    All,
    /// One slot (0 the whole robot, `i + 1` group `i`).
    Slot(u8),
}

/// How often a playback's motion plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repeat {
    Once,
    /// This many times in a row (at least 1), through the motion's seam.
    Times(u32),
    /// Until stopped.
    Forever,
}

/// Control messages. Each is acknowledged ([`LoopHandle::ack`]) once the loop has taken it:
/// done, ignored (it does not apply in the current state), or — for `Play` — refused.
#[derive(Debug)]
pub enum Command {
    /// Start a playback in its slot; accepted while no overlapping slot moves.
    Play(Box<Playback>),
    /// Replace the slot's running playback at slot tick `at_tick` ([`SlotStatus::ran`]) with this one, whose approach
    /// (a blend) must start exactly at the setpoint the old one gives at that tick — else it is
    /// refused and the old one plays on.
    Replace {
        playback: Box<Playback>,
        at_tick: u64,
    },
    /// Decelerate to rest within the limits, then hold: together along the path when that stays
    /// inside the position limits, else each DOF at its own limit.
    Stop(Scope),
    /// The fastest stop within the quick-stop decelerations, then hold (the socket's `hold`, a
    /// second signal). Also cuts a running stop short.
    QuickStop(Scope),
    /// Slow the motion to rest along its path, then hold there.
    Pause(Scope),
    /// Bring a paused motion back up to speed along its path.
    Resume(Scope),
    /// Step the backend's enable sequence, then idle at the measured position.
    Enable,
    /// Decelerate to rest if moving, then disable the drives.
    Disable,
    /// Leave the fault state once the fault's quick stop is at rest: hold the commanded position
    /// (a fault the loop found: the drives still follow) or disable the drives (one a drive or bus
    /// reported: `Enable` brings them up again where they are).
    ClearFault,
    /// Teach-in on (from rest: the drives compliant where the backend can, the commanded pose
    /// following the measured one) or off (the drives hold where they are).
    Record(bool),
    /// Leave a fault or a released E-stop (once its quick stop is at rest), then enable.
    Recover,
    /// Decelerate to rest, hold (or disable, per [`Settings::safe_state`]) and end the loop. A
    /// stop under way (a fault's, the E-stop's) comes to rest first, whatever else happens.
    Shutdown,
    /// A second signal: what moves stops at the quick-stop decelerations, then the loop ends.
    ShutdownNow,
}

/// What the loop did with a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ack {
    Done,
    /// The command does not apply in this state (e.g. `Resume` with nothing paused).
    Ignored(State),
    /// A `Play` the loop would not start.
    Refused(Refusal),
}

/// The player's state as the control side sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum State {
    Idle,
    Approaching,
    Playing,
    Paused,
    Stopping,
    Holding,
    Fault,
    Disabled,
    /// Teach-in: the drives follow a hand, the loop records.
    Recording,
    /// The E-stop was asserted: the quick stop, then the safe state, until `ClearFault` after
    /// the input is released.
    EStop,
    /// A streamed piece plays: its blend and its rows ([`Playback::stream_tail`]).
    Streaming,
    /// A streamed piece is past its last row: braking to rest until the next chunk.
    Starved,
}

impl State {
    pub const ALL: [State; 12] = [
        State::Idle,
        State::Approaching,
        State::Playing,
        State::Paused,
        State::Stopping,
        State::Holding,
        State::Fault,
        State::Disabled,
        State::Recording,
        State::EStop,
        State::Streaming,
        State::Starved,
    ];

    /// The spelling of the control protocol.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Idle => "idle",
            State::Approaching => "approaching",
            State::Playing => "playing",
            State::Paused => "paused",
            State::Stopping => "stopping",
            State::Holding => "holding",
            State::Fault => "fault",
            State::Disabled => "disabled",
            State::Recording => "recording",
            State::EStop => "estop",
            State::Streaming => "streaming",
            State::Starved => "starved",
        }
    }

    fn from_u8(v: u8) -> State {
        State::ALL
            .get(usize::from(v))
            .copied()
            .unwrap_or(State::Fault)
    }
}

/// The E-stop as the loop sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EStop {
    /// The input's debounced level (`true` asserted); `None` when no input is watched.
    pub input: Option<bool>,
    /// What put the loop into [`State::EStop`], while it is there.
    pub cause: Option<EStopCause>,
    /// Clearing the E-stop brings the drives up again (they were up when it was asserted).
    pub reenable: bool,
}

/// What asserted the E-stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EStopCause {
    /// The E-stop input (`estop.gpio`).
    Input,
    /// The input could not be read (the GPIO chip went away): treated as asserted.
    InputLost,
    /// A drive reported its own E-stop (`estop.drive`): which DOF's drive, when known.
    Drive { dof: Option<u16> },
}

/// A snapshot of the loop.
#[derive(Debug, Clone)]
pub struct Status {
    pub state: State,
    /// The row of the state table ([`table`]) the loop is in.
    pub phase: Phase,
    /// The active playback, if any.
    pub motion_id: Option<u32>,
    /// The loop's tick (`k` of `start + k·period`).
    pub tick: u64,
    /// Position in the motion, 0..1 (0 while approaching).
    pub progress: f64,
    /// Time into the motion in seconds (motion time: it slows while pausing).
    pub time_s: f64,
    /// Measured positions in [`JointSet`] order (the last valid feedback).
    pub positions: Vec<f64>,
    /// Commanded positions in [`JointSet`] order.
    pub commanded: Vec<f64>,
    /// Largest |commanded − measured| per DOF while commanding, since the loop started.
    pub max_tracking_error: Vec<f64>,
    /// Wake-up latency (actual wake-up − deadline), µs.
    pub latency: Summary,
    /// Time from wake-up to the end of the tick's work, µs.
    pub exec: Summary,
    pub overruns: u64,
    /// Setpoints the loop's own guard found outside the limits (each one faults).
    pub limit_violations: u64,
    /// Playbacks refused since the loop started.
    pub refused: u64,
    /// The fault that stopped the loop's motion, until cleared.
    pub fault: Option<BackendError>,
    /// The E-stop input's level and what put the loop into [`State::EStop`].
    pub estop: EStop,
    /// Advances once per completed tick: proof that the loop is running.
    pub heartbeat: u64,
    /// Tick and monotonic time (ns, [`MonotonicClock`]) at which the latest playback's first
    /// command reached the backend.
    pub first_command_tick: Option<u64>,
    pub first_command_ns: Option<u64>,
    /// Loop tick at which the active playback's motion (after the approach and any wait)
    /// started.
    pub motion_start_tick: Option<u64>,
    /// Something is moving: a playback, a stop, or a fault's quick stop not yet at rest.
    pub moving: bool,
    /// Per slot (0 the whole robot, `i + 1` group `i`).
    pub slots: Vec<SlotStatus>,
}

/// One slot's part of the [`Status`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SlotStatus {
    pub state: State,
    pub motion_id: Option<u32>,
    pub progress: f64,
    pub time_s: f64,
    pub motion_start_tick: Option<u64>,
    pub first_command_tick: Option<u64>,
    pub first_command_ns: Option<u64>,
    /// Where the playback is, as of [`Status::tick`] (what [`Route::predict`] starts from).
    pub path: Option<Path>,
    /// Ticks the slot's playbacks have run as of [`Status::tick`]: one per period of path, so
    /// unlike loop ticks none is skipped after an overrun. A replacement is scheduled in these.
    pub ran: u64,
}

/// How a playback left the loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Played to its end.
    Finished,
    /// Ended by `Stop`, `QuickStop`, `Disable` or `Shutdown`.
    Stopped,
    /// Ended by a fault.
    Faulted,
    /// Replaced by another playback in its slot, which took over without a seam.
    Replaced,
    /// Never started.
    Refused(Refusal),
}

/// Why a playback was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Only idle or holding accepts a playback.
    Busy(State),
    /// Its DOF count or rate is not the loop's.
    Mismatch,
    /// The approach does not start where the drives are commanded to be.
    Jump { dof: u16 },
    /// A repeated motion whose end does not continue into its start (position and velocity).
    NotLoopable { dof: u16 },
    /// A replacement that did not start where the old playback was at its tick (the old one
    /// paused, stopped or changed speed meanwhile), or came too late.
    Missed,
    /// A replacement itself replaced by a newer one before its tick.
    Superseded,
    /// A replacement whose playback ended (finished, stopped, faulted) before its tick.
    Ended,
}

/// What the loop hands back to be dropped off the real-time thread.
#[derive(Debug)]
pub(crate) struct Retired {
    pub playback: Box<Playback>,
    pub outcome: Outcome,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the loop's command queue is full")]
    Busy,
    #[error("the loop has ended")]
    Ended,
    #[error("invalid loop settings: {0}")]
    Settings(String),
    #[error("real-time settings not obtained (rt.strict is set): {0}")]
    NotPermitted(String),
    #[error("starting the loop thread: {0}")]
    Spawn(#[source] std::io::Error),
    #[error("the loop did not end within {0:?}")]
    ShutdownTimeout(Duration),
    #[error("the loop did not take the command within {0:?}")]
    AckTimeout(Duration),
    #[error("the loop thread panicked")]
    Panicked,
}

/// How playbacks left the loop, as the control side collects them: the last
/// [`OUTCOMES_KEPT`], of which the newest `fresh` nobody has taken yet
/// ([`LoopHandle::outcomes`]).
#[derive(Debug)]
struct Outcomes {
    kept: VecDeque<(u32, Outcome)>,
    fresh: usize,
}

/// The control side of a loop. `Sync`: share it by reference or in an `Arc`.
#[derive(Debug)]
pub struct LoopHandle {
    commands: Sender<(u64, Command)>,
    next_seq: std::sync::atomic::AtomicU64,
    trace: Option<Arc<Trace>>,
    retired: Receiver<Retired>,
    shared: Arc<Shared>,
    outcomes: Mutex<Outcomes>,
    obtained: Obtained,
    thread: Option<std::thread::JoinHandle<()>>,
    done: Receiver<()>,
}

impl LoopHandle {
    /// Queues a command without blocking; returns its sequence number for [`ack`](Self::ack).
    pub fn send(&self, command: Command) -> Result<u64, Error> {
        self.collect_retired();
        let seq = self
            .next_seq
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.commands
            .try_send((seq, command))
            .map_err(|e| match e {
                TrySendError::Full(_) => Error::Busy,
                TrySendError::Disconnected(_) => Error::Ended,
            })?;
        Ok(seq)
    }

    /// What the loop did with command `seq`, once it has taken it (`None` before, and for
    /// commands so old their acknowledgement was overwritten).
    pub fn ack(&self, seq: u64) -> Option<Ack> {
        self.shared.ack(seq)
    }

    /// The loop's record of every tick, when [`Settings::trace_ticks`] asked for one.
    pub fn trace(&self) -> Option<&Arc<Trace>> {
        self.trace.as_ref()
    }

    /// The latest snapshot the loop published.
    pub fn status(&self) -> Status {
        let mut status = self.peek();
        status.latency = self.shared.latency.summary();
        status.exec = self.shared.exec.summary();
        status
    }

    /// [`status`](Self::status) without the latency statistics (left at zero): cheap enough to
    /// read every tick.
    pub fn peek(&self) -> Status {
        self.collect_retired();
        let s = self.shared.read();
        let v = s.values;
        Status {
            state: v.state,
            phase: v.phase,
            motion_id: v.motion_id,
            tick: v.tick,
            progress: v.progress,
            time_s: v.time_s,
            positions: s.measured,
            commanded: s.commanded,
            max_tracking_error: s.tracking,
            latency: Summary::default(),
            exec: Summary::default(),
            overruns: self
                .shared
                .overruns
                .load(std::sync::atomic::Ordering::Relaxed),
            limit_violations: v.limit_violations,
            refused: v.refused,
            fault: v.fault,
            estop: v.estop,
            heartbeat: self
                .shared
                .heartbeat
                .load(std::sync::atomic::Ordering::Relaxed),
            first_command_tick: v.first_command.map(|f| f.0),
            first_command_ns: v.first_command.map(|f| f.1),
            motion_start_tick: v.motion_start_tick,
            moving: v.moving,
            slots: s
                .slots
                .iter()
                .map(|p| SlotStatus {
                    state: p.state,
                    motion_id: p.motion_id,
                    progress: p.progress,
                    time_s: p.time_s,
                    motion_start_tick: p.motion_start_tick,
                    first_command_tick: p.first_command.map(|f| f.0),
                    first_command_ns: p.first_command.map(|f| f.1),
                    path: p.path,
                    ran: p.ran,
                })
                .collect(),
        }
    }

    /// The state alone (cheaper than [`status`](Self::status): no statistics).
    pub fn state(&self) -> State {
        self.shared.read().values.state
    }

    /// Whether the loop has ended (after `Shutdown`, or when its thread is gone).
    pub fn ended(&self) -> bool {
        !matches!(
            self.done.try_recv(),
            Err(crossbeam::channel::TryRecvError::Empty)
        ) || self.thread.as_ref().is_some_and(|t| t.is_finished())
    }

    /// The heartbeat alone (cheaper than [`status`](Self::status), for a watchdog).
    pub fn heartbeat(&self) -> u64 {
        self.shared
            .heartbeat
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Playbacks that have left the loop since the last call: `(motion_id, outcome)`, oldest
    /// first (at most the last 64 are kept).
    pub fn outcomes(&self) -> Vec<(u32, Outcome)> {
        self.collect_retired();
        match self.outcomes.lock() {
            Ok(mut o) => {
                let fresh = o.kept.len() - std::mem::take(&mut o.fresh);
                o.kept.range(fresh..).copied().collect()
            }
            Err(_) => Vec::new(),
        }
    }

    /// How playback `motion_id` left the loop, if it has (among the last 64 to leave).
    pub fn outcome(&self, motion_id: u32) -> Option<Outcome> {
        self.collect_retired();
        let o = self.outcomes.lock().ok()?;
        o.kept
            .iter()
            .rev()
            .find(|(id, _)| *id == motion_id)
            .map(|&(_, outcome)| outcome)
    }

    /// What the loop thread obtained of the real-time settings.
    pub fn obtained(&self) -> &Obtained {
        &self.obtained
    }

    /// Controlled stop: decelerate within the limits, hold (or disable, per
    /// [`Settings::safe_state`]), end the loop and join its thread.
    pub fn shutdown(mut self, timeout: Duration) -> Result<(), Error> {
        let deadline = Instant::now() + timeout;
        loop {
            match self.send(Command::Shutdown) {
                Ok(_) | Err(Error::Ended) => break,
                Err(_) if Instant::now() >= deadline => {
                    return Err(Error::ShutdownTimeout(timeout));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(1)),
            }
        }
        let result = loop {
            self.collect_retired();
            let left = deadline.saturating_duration_since(Instant::now());
            match self.done.recv_timeout(left.min(Duration::from_millis(20))) {
                Ok(()) | Err(RecvTimeoutError::Disconnected) => break Ok(()),
                Err(RecvTimeoutError::Timeout) if left.is_zero() => {
                    break Err(Error::ShutdownTimeout(timeout));
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
        };
        self.collect_retired();
        if result.is_ok()
            && let Some(thread) = self.thread.take()
        {
            thread.join().map_err(|_| Error::Panicked)?;
        }
        result
    }

    /// Drops the playbacks the loop has finished with, here on the control side.
    fn collect_retired(&self) {
        let Ok(mut o) = self.outcomes.lock() else {
            return;
        };
        while let Ok(r) = self.retired.try_recv() {
            if o.kept.len() == OUTCOMES_KEPT {
                o.kept.pop_front();
            }
            o.kept.push_back((r.playback.motion_id, r.outcome));
            o.fresh = (o.fresh + 1).min(o.kept.len());
        }
    }
}

/// The loop without its thread: [`step`](Loop::step) runs one period (sleep until the deadline,
/// tick, statistics). [`spawn`] runs it on a real-time thread; tests and the manual clock step it.
pub struct Loop<C: Clock> {
    player: Player,
    clock: C,
    shared: Arc<Shared>,
    rate_hz: f64,
    start_ns: Option<u64>,
    k: u64,
    overruns: u64,
    consecutive_overruns: u32,
    max_consecutive_overruns: u32,
    max_late_ns: u64,
}

/// Whether the loop goes on after a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Continue,
    Ended,
}

impl<C: Clock> Loop<C> {
    /// Prepares everything the loop will touch (buffers, stop planner, statistics). The loop
    /// starts disabled; send [`Command::Enable`].
    /// `estop` is polled once a tick (see [`crate::estop`]).
    pub fn new(
        settings: &Settings,
        backend: Box<dyn Backend>,
        estop: Option<Box<dyn EStopInput>>,
        joints: &JointSet,
        clock: C,
    ) -> Result<(Self, LoopHandle), Error> {
        validate(settings, joints)?;
        let (cmd_tx, cmd_rx) = channel::bounded(COMMAND_CAPACITY);
        let (ret_tx, ret_rx) = channel::bounded(RETIRED_CAPACITY);
        let (_done_tx, done_rx) = channel::bounded(1);
        let shared = Arc::new(Shared::new(
            joints.len(),
            1 + settings.groups.len(),
            ACKS_KEPT,
        ));
        let trace = (settings.trace_ticks > 0)
            .then(|| Arc::new(Trace::new(joints.len(), settings.trace_ticks)));
        let player = Player::new(
            settings,
            backend,
            estop,
            joints,
            player::Links {
                commands: cmd_rx,
                retire: ret_tx,
                shared: shared.clone(),
                trace: trace.clone(),
            },
        );
        let handle = LoopHandle {
            commands: cmd_tx,
            next_seq: std::sync::atomic::AtomicU64::new(1),
            trace,
            retired: ret_rx,
            shared: shared.clone(),
            outcomes: Mutex::new(Outcomes {
                kept: VecDeque::with_capacity(OUTCOMES_KEPT),
                fresh: 0,
            }),
            obtained: Obtained::none(),
            thread: None,
            done: done_rx,
        };
        let lp = Loop {
            player,
            clock,
            shared,
            rate_hz: settings.rate_hz,
            start_ns: None,
            k: 0,
            overruns: 0,
            consecutive_overruns: 0,
            max_consecutive_overruns: settings.max_consecutive_overruns,
            max_late_ns: (settings.max_late_s.unwrap_or(2.0 / settings.rate_hz) * 1e9) as u64,
        };
        Ok((lp, handle))
    }

    fn deadline(&self, start: u64, k: u64) -> u64 {
        start + (k as f64 * 1e9 / self.rate_hz).round() as u64
    }

    /// One period: sleep until the next deadline, run the tick, record its timing. A tick that
    /// ends past the following deadline is an overrun: the loop skips to the next deadline still
    /// ahead rather than catching up with a burst, and the motion goes on from where it was (a
    /// late loop delays the path, never skips along it). A wake-up later than the configured
    /// maximum, or too many overruns in a row, is a fault: the drives stop quickly from what was
    /// last commanded.
    pub fn step(&mut self) -> Step {
        let start = match self.start_ns {
            Some(s) => s,
            None => {
                let s = self.clock.now_ns() + (1e9 / self.rate_hz).round() as u64;
                self.start_ns = Some(s);
                s
            }
        };
        let deadline = self.deadline(start, self.k);
        self.clock.sleep_until(deadline);
        let wake = self.clock.now_ns();
        let late = wake.saturating_sub(deadline);
        if late > self.max_late_ns {
            self.player.loop_fault(BackendError {
                kind: crate::backend::FaultKind::Overrun,
                dof: None,
                code: u32::try_from(late / 1000).unwrap_or(u32::MAX),
            });
        }
        let step = self.player.tick(self.k, &self.clock);
        let end = self.clock.now_ns();
        self.shared.latency.record(late);
        self.shared.exec.record(end.saturating_sub(wake));
        self.player.record(self.k, late, end.saturating_sub(wake));
        let mut next = self.k + 1;
        // A tick that ran far past its successor's deadline left the drives without a setpoint
        // as long as a late wake-up would.
        let overshoot = end.saturating_sub(self.deadline(start, next));
        if overshoot > self.max_late_ns {
            self.player.loop_fault(BackendError {
                kind: crate::backend::FaultKind::Overrun,
                dof: None,
                code: u32::try_from(overshoot / 1000).unwrap_or(u32::MAX),
            });
        }
        if self.deadline(start, next) <= end {
            let elapsed = (end - start) as f64 * self.rate_hz / 1e9;
            next = next.max(elapsed.floor() as u64 + 1);
            while self.deadline(start, next) <= end {
                next += 1;
            }
            self.overruns += 1;
            self.consecutive_overruns += 1;
            if self.max_consecutive_overruns > 0
                && self.consecutive_overruns >= self.max_consecutive_overruns
            {
                self.player
                    .loop_fault(BackendError::new(crate::backend::FaultKind::Overrun));
            }
        } else {
            self.consecutive_overruns = 0;
        }
        self.shared
            .overruns
            .store(self.overruns, std::sync::atomic::Ordering::Relaxed);
        self.k = next;
        self.shared
            .heartbeat
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        step
    }

    /// Steps until the loop ends (after `Shutdown`, or when every handle is gone).
    pub fn run(&mut self) {
        while self.step() == Step::Continue {}
    }

    /// The tick the next [`step`](Self::step) runs (`k` of `start + k·period`).
    pub fn next_tick(&self) -> u64 {
        self.k
    }

    /// The clock the loop runs on.
    pub fn clock(&self) -> &C {
        &self.clock
    }
}

fn validate(settings: &Settings, joints: &JointSet) -> Result<(), Error> {
    let bad = |what: String| Err(Error::Settings(what));
    if !(settings.rate_hz.is_finite() && settings.rate_hz >= 1.0 && settings.rate_hz <= 100_000.0) {
        return bad(format!(
            "rate_hz {} is not within 1..100000",
            Num(settings.rate_hz)
        ));
    }
    if let Some(p) = settings.priority
        && !(1..=99).contains(&p)
    {
        return bad(format!("priority {p} is not within 1..99"));
    }
    for (name, v) in [
        ("enable_timeout_s", settings.enable_timeout_s),
        ("feedback_timeout_s", settings.feedback_timeout_s),
        ("pause_ramp_s", settings.pause_ramp_s),
        ("start_tolerance", settings.start_tolerance),
        ("goal_time_s", settings.goal_time_s),
        ("max_late_s", settings.max_late_s.unwrap_or(1.0)),
    ] {
        if !(v.is_finite() && v > 0.0) {
            return bad(format!("{name} {v} must be a positive number"));
        }
    }
    if settings.goal_tolerance.is_nan() || settings.goal_tolerance <= 0.0 {
        return bad(format!(
            "goal_tolerance {} must be positive",
            settings.goal_tolerance
        ));
    }
    let tolerances = &settings.path_tolerance;
    if !tolerances.is_empty() && tolerances.len() != joints.len() {
        return bad(format!(
            "path_tolerance has {} values for {} DOFs",
            tolerances.len(),
            joints.len()
        ));
    }
    if let Some(v) = tolerances
        .iter()
        .find(|v| v.is_nan() || **v < f64::MIN_POSITIVE)
    {
        return bad(format!("path_tolerance {} is out of range", Num(*v)));
    }
    if settings.groups.len() + 1 > MAX_SLOTS {
        return bad(format!(
            "{} joint groups; at most {}",
            settings.groups.len(),
            MAX_SLOTS - 1
        ));
    }
    let mut seen = vec![false; joints.len()];
    for (g, dofs) in settings.groups.iter().enumerate() {
        if dofs.is_empty() || !dofs.is_sorted() {
            return bad(format!("group {g} is empty or not in JointSet order"));
        }
        for &d in dofs {
            match seen.get_mut(d) {
                Some(s) if !*s => *s = true,
                _ => return bad(format!("group {g}: DOF {d} is not a DOF, or in two groups")),
            }
        }
    }
    if joints.len() > usize::from(u16::MAX) {
        return bad(format!("{} DOFs is more than a loop drives", joints.len()));
    }
    Ok(())
}

/// Starts the loop on its own thread with the real-time settings applied (each one not permitted
/// is a warning in [`Obtained::warnings`], or an error under `strict`).
pub fn spawn<C: Clock>(
    settings: Settings,
    backend: Box<dyn Backend>,
    estop: Option<Box<dyn EStopInput>>,
    joints: JointSet,
    clock: C,
) -> Result<LoopHandle, Error> {
    let (mut lp, mut handle) = Loop::new(&settings, backend, estop, &joints, clock)?;
    let (ready_tx, ready_rx) = channel::bounded(1);
    let (done_tx, done_rx) = channel::bounded(1);
    handle.done = done_rx;
    let thread = std::thread::Builder::new()
        .name("motiond-rt".into())
        .stack_size(STACK_BYTES)
        .spawn(move || {
            // The PM QoS request is held until the loop has ended and dropped everything.
            let (obtained, wakeup_request) = match sched::apply(&settings, STACK_BYTES / 2) {
                Ok(applied) => (Ok(applied.obtained), applied.wakeup_request),
                Err(e) => (Err(e), None),
            };
            let go = obtained.is_ok();
            let _ = ready_tx.send(obtained);
            if go {
                lp.run();
            }
            drop(lp);
            drop(wakeup_request);
            let _ = done_tx.send(());
        })
        .map_err(Error::Spawn)?;
    match ready_rx.recv() {
        Ok(Ok(obtained)) => {
            for w in &obtained.warnings {
                tracing::warn!("real-time loop: {w}");
            }
            handle.obtained = obtained;
            handle.thread = Some(thread);
            Ok(handle)
        }
        Ok(Err(e)) => {
            let _ = thread.join();
            Err(e)
        }
        Err(_) => Err(Error::Panicked),
    }
}

#[cfg(test)]
mod tests;
