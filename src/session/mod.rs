//! One playback session: a robot, its real-time loop and backend, and the orchestration every
//! front end shares — enable, prove at the requested speed, approach from what the drives are
//! commanded to hold, play, stop, recover, shut down. `motiond play` and `motiond serve` both go
//! through it; binaries only parse arguments and print.
//!
//! A session drives its loop either on the loop's own real-time thread ([`Session::spawn`]) or by
//! stepping it on the caller's thread with a manual clock ([`Session::stepped`]): then the loop
//! runs exactly as many ticks as the session waits for, so a rehearsal gives the same ticks and
//! the same trace every run.

mod buses;
mod robot;
mod splice;
pub mod start;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

pub use buses::{BusEvent, BusWatch, Level};
pub use robot::{
    Overrides, PrepareError, Prepared, Robot, RobotSpec, load_motion, motion_from_text, options,
};
pub use splice::{Build, Join, Piece, Spliced};

use crate::backend::Backend;
use crate::backend::SimFaultKind;
use crate::backend::sim::Injector;
use crate::backend::status::BusesStatus;
use crate::estop::{EStopInput, SimSwitch};
use crate::motion::take::Take;
use crate::rt::{
    self, Ack, Clock, Command, EStopCause, Loop, LoopHandle, ManualClock, MonotonicClock, Obtained,
    Outcome, Phase, Playback, Refusal, Repeat, Route, Scope, Settings, State, Status, Step,
    TraceRow,
};
use crate::trajectory::{self, JointSet, ProofReport, Trajectory};

/// How long the loop gets to take a command before the session reports it unavailable.
const ACK_TIMEOUT: Duration = Duration::from_millis(500);
/// Poll interval while waiting for the loop to take a command.
const POLL: Duration = Duration::from_micros(200);
/// The longest wait between looks at a loop that runs on its own thread (its status changes once
/// a tick; a slow loop is still watched this often, for signals and shutdowns).
const WATCH_MAX: Duration = Duration::from_millis(5);
/// The furthest ahead a playback may be scheduled to start.
pub const MAX_START_AHEAD: Duration = Duration::from_secs(86_400);

/// What went wrong, in words an operator can act on, with a kind scripts can match.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct SessionError {
    pub kind: ErrorKind,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Not possible in the current state (nothing to pause, disabled, busy, …).
    Refused,
    /// The loop is faulted: clear the fault first.
    Fault,
    /// The motion cannot be played (the proof refuses it at this speed, it cannot loop, …).
    InvalidMotion,
    /// The loop is not running or did not answer.
    Unavailable,
}

impl SessionError {
    fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }

    fn refused(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Refused, message)
    }
}

/// A request to play a prepared motion.
#[derive(Debug, Clone)]
pub struct PlayRequest {
    /// The motion's name in messages (its file stem in the daemon's library).
    pub name: String,
    /// Playback speed (0.5 = half speed); the motion is proved again at it.
    pub speed: f64,
    pub repeat: Repeat,
    /// Hold at the motion's first sample, after the approach, until this wall-clock instant.
    pub start_at: Option<SystemTime>,
    /// The joint group that plays it (`None`: the whole robot); the motion's DOFs are the
    /// group's.
    pub group: Option<String>,
}

/// A playback the loop has taken.
#[derive(Debug, Clone)]
pub struct Started {
    pub motion_id: u32,
    pub duration_s: f64,
    pub approach_s: f64,
    pub requested_speed: f64,
    /// The speed actually played: lower than requested when the proof retimed the motion.
    pub speed: f64,
    /// The proof at this speed: clamped samples, retime factor (`None` for a pose to go to).
    pub report: Option<ProofReport>,
    /// The largest |commanded − measured| when the approach started (the approach starts from
    /// the commanded pose, which is what the drives track): DOF name and offset.
    pub measured_offset: Option<(String, f64)>,
    /// CLOCK_MONOTONIC time the playback's first command reached the backend.
    pub first_command_ns: Option<u64>,
}

/// Something a rehearsal does at a time counted from the motion's first sample (loop ticks, so
/// pauses count too).
#[derive(Debug, Clone)]
pub enum Action {
    Stop,
    QuickStop,
    Pause,
    Resume,
    /// A simulated drive fault on one DOF (or all).
    Fault {
        injector: std::sync::Arc<Injector>,
        kind: SimFaultKind,
        dof: Option<usize>,
    },
    /// A simulated E-stop switch is pressed.
    EStop(SimSwitch),
    /// `disable`: decelerate to rest, then power off.
    Disable,
    /// `shutdown`: decelerate to rest, then the loop ends.
    Shutdown,
}

#[derive(Debug, Clone)]
pub struct Scripted {
    pub at_s: f64,
    pub action: Action,
}

/// What a request does to the motion of a joint group (or of every slot).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupCommand {
    Stop,
    QuickStop,
    Pause,
    Resume,
}

/// How a controlled shutdown ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shutdown {
    /// The motion decelerated to rest within the limits.
    AtRest,
    /// A second signal or the timeout cut the stop short with a quick stop.
    Quick,
}

/// Called before each tick of a stepped loop with the tick about to run and the status after the
/// last one: what happens to the robot from outside (a hand, an E-stop, a drive fault, a stalled
/// thread) at exact ticks, whatever the control side is busy with.
pub type BeforeTick = Box<dyn FnMut(u64, &Status) + Send>;

/// Where the loop's trace rows go as the session drains them (a CSV file, a checker): each row
/// once, in tick order, never kept in memory by the session.
pub trait TraceSink: Send {
    fn row(&mut self, row: &TraceRow);
}

impl<F: FnMut(&TraceRow) + Send> TraceSink for F {
    fn row(&mut self, row: &TraceRow) {
        self(row);
    }
}

enum Driver {
    Thread(LoopHandle),
    Stepped {
        lp: Box<Mutex<Loop<ManualClock>>>,
        handle: LoopHandle,
        /// The loop's clock (clones share the time): the control side's time too.
        clock: ManualClock,
        before_tick: Mutex<Option<BeforeTick>>,
    },
}

#[derive(Default)]
struct Record {
    /// The loop's trace rows, kept only when asked ([`Session::keep_trace`]).
    keep_trace: bool,
    trace: Vec<TraceRow>,
    /// Where every trace row goes as it is drained ([`Session::trace_to`]).
    sink: Option<Box<dyn TraceSink>>,
    /// Rows drained and not yet handed on (emptied at every drain).
    fresh_rows: Vec<TraceRow>,
    /// A teach-in under way: what it keeps of the rows.
    teach: Option<TeachIn>,
    ended: bool,
}

/// A teach-in recording: the measured positions of some DOFs, every `every` loop ticks, into a
/// take on disk.
#[derive(Debug)]
struct TeachIn {
    dofs: Vec<usize>,
    every: u64,
    next_tick: Option<u64>,
    take: Take,
    /// The loop was seen recording: rows before are from before it took the command.
    started: bool,
    /// The loop left the teach-in by itself (E-stop, fault, shutdown): the state it went to.
    interrupted: Option<State>,
    /// `record_stop` asked the loop to end it: later rows are not the take's.
    ending: bool,
    /// One frame, reused.
    frame: Vec<f64>,
    /// The tick of the last row seen.
    last_tick: u64,
}

impl TeachIn {
    /// `rows` trace rows after the last one seen never reached the teach-in (the loop overwrote
    /// them before they were drained): the frames they held are counted as lost, and the frames
    /// after them stay on their ticks. Before the loop was seen recording they are not the
    /// take's (as far as anybody can tell).
    fn missed(&mut self, rows: u64) {
        if rows == 0 || !self.started || self.ending || self.interrupted.is_some() {
            return;
        }
        // One row a tick (a tick an overrun skipped would count as one here).
        let end = self.last_tick.saturating_add(rows);
        let next = self.next_tick.unwrap_or(self.last_tick + 1);
        if next <= end {
            let frames = (end - next) / self.every.max(1) + 1;
            self.take.lose(frames);
            self.next_tick = Some(next.saturating_add(frames.saturating_mul(self.every)));
        }
        self.last_tick = end;
    }

    fn see(&mut self, row: &TraceRow) {
        if self.ending || self.interrupted.is_some() {
            return;
        }
        if row.state != State::Recording {
            if self.started {
                self.interrupted = Some(row.state);
                // What was recorded goes to disk now: nobody knows when the take is closed.
                self.take.sync();
            }
            return;
        }
        self.started = true;
        self.last_tick = row.tick;
        if self.next_tick.is_none_or(|n| row.tick >= n) {
            self.next_tick = Some(row.tick.saturating_add(self.every));
            self.frame.clear();
            self.frame
                .extend(self.dofs.iter().map(|&d| row.measured[d]));
            self.take.push(&self.frame);
        }
    }
}

/// How a take under way stands ([`Session::take_progress`]).
#[derive(Debug, Clone, PartialEq)]
pub struct TakeProgress {
    pub frames: u64,
    pub path: std::path::PathBuf,
    /// The loop left the teach-in by itself: the state it went to.
    pub interrupted: Option<State>,
    /// The take reached its longest length.
    pub capped: bool,
    /// A write that failed (later frames are lost).
    pub error: Option<String>,
}

/// A teach-in ended ([`Session::record_stop`]): its take, still to be closed, and whether the
/// loop had left the teach-in before (the state it went to).
#[derive(Debug)]
pub struct Ended {
    pub take: Take,
    pub interrupted: Option<State>,
}

/// One slot of the loop as the session knows it: the whole robot (slot 0) or a joint group.
#[derive(Debug, Clone)]
struct SlotInfo {
    name: String,
    /// JointSet indices.
    dofs: Vec<usize>,
    /// The slot's own joint set (its DOFs, in JointSet order): its trajectories' DOFs.
    joints: JointSet,
    /// The playback the session last started there, to predict the loop for a replacement.
    route: Option<(u32, Route)>,
}

/// A robot's loop under orchestration. `Sync`: share it by reference or in an `Arc`.
pub struct Session {
    joints: JointSet,
    rate_hz: f64,
    enable_timeout: Duration,
    driver: Driver,
    next_id: AtomicU32,
    record: Mutex<Record>,
    slots: Mutex<Vec<SlotInfo>>,
    /// The buses' live counters, taken from the backend before it moved into the loop.
    buses: Option<Arc<BusesStatus>>,
}

impl Session {
    /// Starts the loop on its own real-time thread.
    pub fn spawn(
        settings: Settings,
        backend: Box<dyn Backend>,
        estop: Option<Box<dyn EStopInput>>,
        joints: JointSet,
    ) -> Result<Session, rt::Error> {
        let rate_hz = settings.rate_hz;
        let enable_timeout = Duration::from_secs_f64(settings.enable_timeout_s);
        let groups = settings.groups.clone();
        let buses = backend.status();
        let handle = rt::spawn(settings, backend, estop, joints.clone(), MonotonicClock)?;
        let driver = Driver::Thread(handle);
        Ok(Session::new(
            joints,
            &groups,
            rate_hz,
            enable_timeout,
            driver,
            buses,
        ))
    }

    /// The loop on a manual clock, stepped only while the session waits for it (rehearsals,
    /// tests): no thread, no real-time settings.
    pub fn stepped(
        settings: Settings,
        backend: Box<dyn Backend>,
        estop: Option<Box<dyn EStopInput>>,
        joints: JointSet,
        clock: ManualClock,
    ) -> Result<Session, rt::Error> {
        let rate_hz = settings.rate_hz;
        let enable_timeout = Duration::from_secs_f64(settings.enable_timeout_s);
        let buses = backend.status();
        let (lp, handle) = Loop::new(&settings, backend, estop, &joints, clock.clone())?;
        let driver = Driver::Stepped {
            lp: Box::new(Mutex::new(lp)),
            handle,
            clock,
            before_tick: Mutex::new(None),
        };
        Ok(Session::new(
            joints,
            &settings.groups,
            rate_hz,
            enable_timeout,
            driver,
            buses,
        ))
    }

    fn new(
        joints: JointSet,
        groups: &[Vec<usize>],
        rate_hz: f64,
        enable_timeout: Duration,
        driver: Driver,
        buses: Option<Arc<BusesStatus>>,
    ) -> Session {
        let slot = |name: String, dofs: Vec<usize>| SlotInfo {
            name,
            joints: JointSet {
                dofs: dofs
                    .iter()
                    .map(|&d| {
                        let mut dof = joints.dofs[d].clone();
                        // A follower's leader, as an index into the slot's own joints (a group
                        // holds a leader's followers: config::Config::group_dofs).
                        dof.mimic = dof.mimic.and_then(|m| {
                            let leader = dofs.iter().position(|&l| l == m.leader)?;
                            Some(trajectory::MimicOf { leader, ..m })
                        });
                        dof
                    })
                    .collect(),
            },
            dofs,
            route: None,
        };
        let slots = std::iter::once(slot("all".into(), (0..joints.len()).collect()))
            .chain(
                groups
                    .iter()
                    .enumerate()
                    .map(|(i, g)| slot(format!("group {i}"), g.clone())),
            )
            .collect();
        Session {
            joints,
            rate_hz,
            enable_timeout,
            driver,
            next_id: AtomicU32::new(1),
            record: Mutex::new(Record::default()),
            slots: Mutex::new(slots),
            buses,
        }
    }

    /// Names the joint groups (in the order of [`Settings::groups`]), for requests and messages.
    pub fn name_groups(self, names: &[String]) -> Session {
        if let Ok(mut slots) = self.slots.lock() {
            for (slot, name) in slots.iter_mut().skip(1).zip(names) {
                slot.name = name.clone();
            }
        }
        self
    }

    /// The slot of group `group` (`None`: the whole robot), or why not.
    fn slot_of(&self, group: Option<&str>) -> Result<u8, SessionError> {
        let Some(name) = group else {
            return Ok(0);
        };
        let slots = self.slots.lock().map_err(|_| poisoned())?;
        slots
            .iter()
            .skip(1)
            .position(|s| s.name == name)
            .map(|i| (i + 1) as u8)
            .ok_or_else(|| {
                let known: Vec<&str> = slots.iter().skip(1).map(|s| s.name.as_str()).collect();
                SessionError::refused(format!(
                    "no joint group {name:?} (groups: {})",
                    if known.is_empty() {
                        "none configured".to_string()
                    } else {
                        known.join(", ")
                    }
                ))
            })
    }

    /// The names of the joint groups, in slot order (slot `i + 1` is group `i`).
    pub fn group_names(&self) -> Vec<String> {
        self.slots
            .lock()
            .map(|s| s.iter().skip(1).map(|s| s.name.clone()).collect())
            .unwrap_or_default()
    }

    /// The joint set a motion for group `group` (`None`: the whole robot) is built for.
    pub fn group_joints(&self, group: Option<&str>) -> Result<JointSet, SessionError> {
        let slot = usize::from(self.slot_of(group)?);
        let slots = self.slots.lock().map_err(|_| poisoned())?;
        Ok(slots[slot].joints.clone())
    }

    /// Keeps every trace row the loop records (the loop must have been built with a trace), for
    /// [`trace`](Self::trace); otherwise rows are drained and dropped.
    pub fn keep_trace(&self) {
        if let Ok(mut r) = self.record.lock() {
            r.keep_trace = true;
        }
    }

    /// Hands every trace row the loop records to `sink` as it is drained (the loop must have been
    /// built with a trace): a trace of any length in constant memory.
    pub fn trace_to(&self, sink: Box<dyn TraceSink>) {
        if let Ok(mut r) = self.record.lock() {
            r.sink = Some(sink);
        }
    }

    /// On a stepped loop, calls `hook` before every tick (see [`BeforeTick`]); ignored on a loop
    /// with its own thread, whose ticks nobody can hold.
    pub fn before_tick(&self, hook: BeforeTick) {
        if let Driver::Stepped { before_tick, .. } = &self.driver
            && let Ok(mut slot) = before_tick.lock()
        {
            *slot = Some(hook);
        }
    }

    /// The control side's monotonic time in ns: the kernel's CLOCK_MONOTONIC, or a stepped loop's
    /// manual clock (the same time base as [`Status::first_command_ns`]).
    pub fn now_ns(&self) -> u64 {
        match &self.driver {
            Driver::Thread(_) => MonotonicClock.now_ns(),
            Driver::Stepped { clock, .. } => clock.now_ns(),
        }
    }

    /// The wall clock (CLOCK_REALTIME) as the loop converts `start_at`: the kernel's, or a stepped
    /// loop's manual clock.
    pub fn realtime(&self) -> SystemTime {
        let ns = match &self.driver {
            Driver::Thread(_) => MonotonicClock.realtime_ns(),
            Driver::Stepped { clock, .. } => clock.realtime_ns(),
        };
        let since = Duration::from_nanos(u64::try_from(ns.max(0)).unwrap_or(u64::MAX));
        SystemTime::UNIX_EPOCH + since
    }

    /// The loop's flight-recorder ring, when the loop was built with one
    /// ([`Settings::trace_ticks`]).
    pub fn trace_ring(&self) -> Option<Arc<rt::Trace>> {
        self.handle().trace().cloned()
    }

    /// The buses' live counters (`None` on the simulated backend), read without making the loop
    /// wait: for `status`, and for a [`BusWatch`] that journals each change once.
    pub fn buses(&self) -> Option<&Arc<BusesStatus>> {
        self.buses.as_ref()
    }

    /// [`describe_fault`] with this session's joints and buses.
    pub fn describe_fault(&self, fault: &crate::backend::BackendError) -> String {
        describe_fault(fault, &self.joints, self.buses.as_deref())
    }

    fn handle(&self) -> &LoopHandle {
        match &self.driver {
            Driver::Thread(h) | Driver::Stepped { handle: h, .. } => h,
        }
    }

    pub fn joints(&self) -> &JointSet {
        &self.joints
    }

    pub fn rate_hz(&self) -> f64 {
        self.rate_hz
    }

    /// What the loop obtained of the real-time settings.
    pub fn obtained(&self) -> &Obtained {
        self.handle().obtained()
    }

    pub fn status(&self) -> Status {
        self.collect();
        self.handle().status()
    }

    /// [`status`](Self::status) without the latency statistics (left at zero): cheap.
    pub fn peek(&self) -> Status {
        self.collect();
        self.handle().peek()
    }

    pub fn state(&self) -> State {
        self.handle().state()
    }

    /// Advances once per loop tick: proof that the loop is running (for a watchdog).
    pub fn heartbeat(&self) -> u64 {
        self.handle().heartbeat()
    }

    /// Playbacks that left the loop since the last call (for logging), oldest first.
    pub fn take_outcomes(&self) -> Vec<(u32, Outcome)> {
        self.handle().outcomes()
    }

    /// How playback `motion_id` left the loop, if it has.
    pub fn outcome(&self, motion_id: u32) -> Option<Outcome> {
        self.handle().outcome(motion_id)
    }

    /// Every trace row recorded so far (when the loop keeps a trace), and rows the loop had to
    /// drop because nobody drained its ring in time.
    pub fn trace(&self) -> (Vec<TraceRow>, u64) {
        self.collect();
        let rows = self
            .record
            .lock()
            .map(|r| r.trace.clone())
            .unwrap_or_default();
        (rows, self.handle().trace().map_or(0, |t| t.dropped()))
    }

    /// Trace rows the loop had to drop because nobody drained its ring in time.
    pub fn trace_dropped(&self) -> u64 {
        self.handle().trace().map_or(0, |t| t.dropped())
    }

    /// Drains the trace rows the loop handed out.
    fn collect(&self) {
        let Ok(mut r) = self.record.lock() else {
            return;
        };
        if let Some(t) = self.handle().trace() {
            if !r.keep_trace && r.teach.is_none() && r.sink.is_none() {
                t.discard();
                return;
            }
            let Record {
                trace,
                teach,
                sink,
                fresh_rows,
                keep_trace,
                ..
            } = &mut *r;
            fresh_rows.clear();
            let lost = t.drain_into(fresh_rows);
            if let Some(teach) = teach.as_mut() {
                teach.missed(lost);
            }
            for row in fresh_rows.iter() {
                if let Some(teach) = teach.as_mut() {
                    teach.see(row);
                }
                if let Some(sink) = sink.as_mut() {
                    sink.row(row);
                }
            }
            if *keep_trace {
                trace.append(fresh_rows);
            }
            fresh_rows.clear();
        }
    }

    /// Lets the loop run a little: one tick on a stepped loop (after the [`BeforeTick`] hook), a
    /// short sleep otherwise.
    pub fn advance(&self) {
        match &self.driver {
            // Once a control period: the status changes no faster, and each wake-up of this
            // thread is work the machine does beside the loop.
            Driver::Thread(_) => std::thread::sleep(
                Duration::from_secs_f64(1.0 / self.rate_hz).clamp(POLL, WATCH_MAX),
            ),
            Driver::Stepped {
                lp,
                handle,
                before_tick,
                ..
            } => {
                if self.ended() {
                    return;
                }
                if let Ok(mut lp) = lp.lock() {
                    if let Ok(mut hook) = before_tick.lock()
                        && let Some(hook) = hook.as_mut()
                    {
                        hook(lp.next_tick(), &handle.peek());
                    }
                    if lp.step() == Step::Ended
                        && let Ok(mut r) = self.record.lock()
                    {
                        r.ended = true;
                    }
                }
            }
        }
        self.collect();
    }

    fn pump(&self) {
        self.advance();
    }

    /// The tick a stepped loop runs next (`None` on a loop with its own thread).
    pub fn next_tick(&self) -> Option<u64> {
        match &self.driver {
            Driver::Thread(_) => None,
            Driver::Stepped { lp, .. } => lp.lock().ok().map(|lp| lp.next_tick()),
        }
    }

    /// Whether the loop has ended (after a shutdown).
    pub fn has_ended(&self) -> bool {
        match &self.driver {
            Driver::Thread(h) => h.ended(),
            Driver::Stepped { .. } => self.ended(),
        }
    }

    fn ended(&self) -> bool {
        self.record.lock().map(|r| r.ended).unwrap_or(true)
    }

    /// Lets the loop run until `f` returns something, or `timeout` of loop time (stepped) or
    /// wall time (thread) passes.
    pub fn wait_for<T>(
        &self,
        timeout: Duration,
        mut f: impl FnMut(&Status) -> Option<T>,
    ) -> Option<T> {
        let ticks = (timeout.as_secs_f64() * self.rate_hz).ceil() as u64;
        // `None`: further than a clock can say, never.
        let deadline = std::time::Instant::now().checked_add(timeout);
        let mut n = 0u64;
        loop {
            let status = self.handle().peek();
            if let Some(t) = f(&status) {
                self.collect();
                return Some(t);
            }
            let out_of_time = match self.driver {
                Driver::Thread(_) => deadline.is_some_and(|d| std::time::Instant::now() >= d),
                Driver::Stepped { .. } => n >= ticks || self.ended(),
            };
            if out_of_time {
                return None;
            }
            self.pump();
            n += 1;
        }
    }

    /// Sends a command and waits until the loop has taken it (the status read after this
    /// shows its effect).
    pub fn command(&self, command: Command) -> Result<Ack, SessionError> {
        let seq = self.handle().send(command).map_err(loop_error)?;
        let ack = match &self.driver {
            Driver::Thread(h) => {
                let deadline = std::time::Instant::now() + ACK_TIMEOUT;
                loop {
                    if let Some(a) = h.ack(seq) {
                        break Some(a);
                    }
                    if std::time::Instant::now() >= deadline {
                        break None;
                    }
                    std::thread::sleep(POLL);
                }
            }
            // A stepped loop takes it on its next tick.
            Driver::Stepped { handle, .. } => {
                self.pump();
                handle.ack(seq)
            }
        };
        self.collect();
        ack.ok_or_else(|| {
            SessionError::new(
                ErrorKind::Unavailable,
                format!("the loop did not take the command within {ACK_TIMEOUT:?}"),
            )
        })
    }

    /// A command that only applies in some states: `Ignored` becomes a refusal in words.
    fn simple(&self, command: Command, refusal: &str) -> Result<(), SessionError> {
        match self.command(command)? {
            Ack::Done => Ok(()),
            Ack::Ignored(State::Fault) => Err(self.fault_error()),
            Ack::Ignored(State::EStop) => Err(self.estop_error()),
            Ack::Ignored(_) | Ack::Refused(_) => Err(SessionError::refused(refusal)),
        }
    }

    /// Powers the drives and waits until they hold their measured position (or fault).
    pub fn enable(&self) -> Result<(), SessionError> {
        match self.command(Command::Enable)? {
            Ack::Ignored(State::Fault) => return Err(self.fault_error()),
            Ack::Ignored(State::EStop) => return Err(self.estop_error()),
            Ack::Ignored(_) | Ack::Refused(_) => {
                return Err(SessionError::refused(
                    "a disable or a shutdown is under way: enable once the drives are disabled",
                ));
            }
            Ack::Done => {}
        }
        self.wait_ready()
    }

    /// Waits until the enable sequence has ended.
    fn wait_ready(&self) -> Result<(), SessionError> {
        let state = self.wait_for(self.enable_timeout * 2, |s| {
            (s.state != State::Disabled).then_some(s.state)
        });
        match state {
            Some(State::Fault) => Err(self.fault_error()),
            Some(State::EStop) => Err(self.estop_error()),
            Some(_) => Ok(()),
            None => Err(SessionError::new(
                ErrorKind::Unavailable,
                format!(
                    "the drives did not come up within {:?}",
                    self.enable_timeout * 2
                ),
            )),
        }
    }

    /// Decelerates to rest if moving, then removes power.
    pub fn disable(&self) -> Result<(), SessionError> {
        self.simple(Command::Disable, "the drives are already disabled")
    }

    /// Decelerates to rest within the limits, then holds.
    pub fn stop(&self) -> Result<(), SessionError> {
        self.simple(Command::Stop(Scope::All), "nothing is moving")
    }

    /// `stop`, `quick_stop`, `pause` or `resume` for one joint group (`None`: every slot).
    pub fn for_group(&self, what: GroupCommand, group: Option<&str>) -> Result<(), SessionError> {
        let scope = match group {
            None => Scope::All,
            Some(_) => Scope::Slot(self.slot_of(group)?),
        };
        let (command, refusal) = match what {
            GroupCommand::Stop => (Command::Stop(scope), "nothing is moving"),
            GroupCommand::QuickStop => (Command::QuickStop(scope), "nothing is moving"),
            GroupCommand::Pause => (Command::Pause(scope), "nothing is playing"),
            GroupCommand::Resume => (Command::Resume(scope), "nothing is paused"),
        };
        self.simple(command, refusal)
    }

    /// The fastest stop within the quick-stop decelerations, then holds.
    pub fn quick_stop(&self) -> Result<(), SessionError> {
        self.simple(Command::QuickStop(Scope::All), "nothing is moving")
    }

    pub fn pause(&self) -> Result<(), SessionError> {
        self.simple(Command::Pause(Scope::All), "nothing is playing")
    }

    pub fn resume(&self) -> Result<(), SessionError> {
        self.simple(Command::Resume(Scope::All), "nothing is paused")
    }

    /// Acknowledges a fault and waits until the loop has left it: the fault's stop at rest, then
    /// holding what was commanded (a fault the loop found), or disabled (a drive or bus fault:
    /// [`enable`](Self::enable) next, or [`recover`](Self::recover) for both).
    /// Leaves a fault, or a released E-stop: from an E-stop the drives that were up come up
    /// again through their enable sequence, holding where they are measured.
    pub fn clear_fault(&self) -> Result<(), SessionError> {
        let reenable = self.handle().peek().estop.reenable;
        match self.command(Command::ClearFault)? {
            Ack::Done => {}
            Ack::Ignored(State::EStop) => return Err(self.estop_error()),
            Ack::Ignored(_) | Ack::Refused(_) => {
                return Err(SessionError::refused("there is no fault to clear"));
            }
        }
        let timeout = self.enable_timeout * 2 + Duration::from_secs(5);
        let left = self.wait_for(timeout, |s| match s.state {
            State::Fault | State::EStop => None,
            // Re-enabling after the E-stop (the loop reads as disabled while enabling).
            State::Disabled if reenable && s.fault.is_none() => None,
            _ => Some(()),
        });
        match self.state() {
            State::EStop => return Err(self.estop_error()),
            State::Fault => return Err(self.fault_error()),
            _ if left.is_none() => return Err(self.fault_error()),
            _ => {}
        }
        Ok(())
    }

    /// Back to holding from a fault, a released E-stop or with the drives disabled, in one step:
    /// clear (once the quick stop is at rest), enable; waits until the drives hold.
    pub fn recover(&self) -> Result<(), SessionError> {
        match self.command(Command::Recover)? {
            Ack::Done => {}
            Ack::Ignored(State::EStop) => return Err(self.estop_error()),
            Ack::Ignored(State::Fault) => return Err(self.fault_error()),
            Ack::Ignored(_) | Ack::Refused(_) => {
                return Err(SessionError::refused(
                    "a disable or a shutdown is under way: recover once the drives are disabled",
                ));
            }
        }
        let timeout = self.enable_timeout * 2 + Duration::from_secs(5);
        let state = self.wait_for(timeout, |s| match s.phase {
            Phase::FaultStopping
            | Phase::EStopStoppingReleased
            | Phase::Enabling
            | Phase::Disabled => None,
            _ => Some(s.state),
        });
        match state {
            Some(State::EStop) => Err(self.estop_error()),
            Some(State::Fault) => Err(self.fault_error()),
            Some(_) => Ok(()),
            None => Err(SessionError::new(
                ErrorKind::Unavailable,
                format!("the drives did not come up within {timeout:?}"),
            )),
        }
    }

    /// Why nothing moves while the E-stop holds the robot, and what to do.
    fn estop_error(&self) -> SessionError {
        let estop = self.handle().peek().estop;
        let next = if estop.input == Some(true) {
            "release it, then clear-fault"
        } else if estop.reenable {
            "clear-fault brings the drives back up where they are"
        } else {
            "clear-fault ends it (the drives stay disabled)"
        };
        SessionError::new(
            ErrorKind::Fault,
            format!(
                "E-stop: {}; {next}",
                describe_estop(estop.cause, &self.joints)
            ),
        )
    }

    fn fault_error(&self) -> SessionError {
        let status = self.handle().peek();
        let what = status
            .fault
            .map_or_else(|| "a fault".to_string(), |f| self.describe_fault(&f));
        SessionError::new(
            ErrorKind::Fault,
            format!("the loop stopped on {what}; clear the fault first"),
        )
    }

    /// The status, when slot `slot` may start a motion (it and every slot overlapping it
    /// holding or idle).
    fn ready_to_move(&self, slot: u8) -> Result<Status, SessionError> {
        let status = self.handle().peek();
        let busy = self.slots.lock().ok().and_then(|slots| {
            let me = &slots.get(usize::from(slot))?.dofs;
            status
                .slots
                .iter()
                .zip(slots.iter())
                .find(|(st, info)| {
                    !matches!(st.state, State::Idle | State::Holding)
                        && info.dofs.iter().any(|d| me.contains(d))
                })
                .map(|(st, info)| (st.state, info.name.clone()))
        });
        match status.state {
            State::Fault => Err(self.fault_error()),
            State::EStop => Err(self.estop_error()),
            State::Disabled => Err(SessionError::refused(
                "the drives are disabled; enable them first",
            )),
            State::Recording => Err(SessionError::refused(
                "a teach-in is recording; stop it first",
            )),
            _ => match busy {
                None => Ok(status),
                Some((state, name)) if name == "all" => Err(SessionError::refused(format!(
                    "the robot is {}; stop the current motion first",
                    state.as_str()
                ))),
                Some((state, name)) => Err(SessionError::refused(format!(
                    "joint group {name} is {}; stop it first",
                    state.as_str()
                ))),
            },
        }
    }

    /// Proves `prepared` at the requested speed, builds the approach from the commanded pose and
    /// hands both to the loop; returns once the loop has taken the playback.
    pub fn play(
        &self,
        prepared: &Prepared,
        request: &PlayRequest,
    ) -> Result<Started, SessionError> {
        let name = &request.name;
        let slot = self.slot_of(request.group.as_deref())?;
        let status = self.ready_to_move(slot)?;
        let (motion, report) = self.at_speed(prepared, request, slot)?;
        self.play_proved(
            name,
            trajectory::Proved {
                trajectory: motion,
                report,
            },
            slot,
            request.repeat,
            request.start_at,
            &status,
        )
    }

    /// `prepared` at the request's speed, proved again, for the slot's joints.
    fn at_speed(
        &self,
        prepared: &Prepared,
        request: &PlayRequest,
        slot: u8,
    ) -> Result<(Trajectory, ProofReport), SessionError> {
        let name = &request.name;
        let joints = self.group_joints_of(slot)?;
        let built = if slot == 0 {
            prepared.at_speed(&joints, request.speed)
        } else {
            prepared.for_group(&self.joints, &joints, request.speed)
        };
        built.map_err(|e| match e {
            PrepareError::Refused { report, .. } => SessionError::new(
                ErrorKind::InvalidMotion,
                format!(
                    "{name} at speed {}: refused: {}",
                    trajectory::speed_text(request.speed),
                    report.summary()
                ),
            ),
            other => SessionError::new(ErrorKind::InvalidMotion, format!("{name}: {other}")),
        })
    }

    fn group_joints_of(&self, slot: u8) -> Result<JointSet, SessionError> {
        let slots = self.slots.lock().map_err(|_| poisoned())?;
        slots
            .get(usize::from(slot))
            .map(|s| s.joints.clone())
            .ok_or_else(|| SessionError::refused(format!("no slot {slot}")))
    }

    /// Plays a trajectory already proved for this session's joints and rate (a library motion
    /// at its speed, a recording, a generated motion): the approach from the commanded pose,
    /// then the motion, `repeat` times.
    pub fn play_trajectory(
        &self,
        name: &str,
        proved: trajectory::Proved,
        repeat: Repeat,
        start_at: Option<SystemTime>,
    ) -> Result<Started, SessionError> {
        let status = self.ready_to_move(0)?;
        self.play_proved(name, proved, 0, repeat, start_at, &status)
    }

    /// [`play_trajectory`](Self::play_trajectory) in joint group `group` (`None`: the whole
    /// robot), once, now; `proved` is for the group's joints.
    pub fn play_trajectory_in(
        &self,
        name: &str,
        proved: trajectory::Proved,
        group: Option<&str>,
    ) -> Result<Started, SessionError> {
        let slot = self.slot_of(group)?;
        let status = self.ready_to_move(slot)?;
        self.play_proved(name, proved, slot, Repeat::Once, None, &status)
    }

    #[allow(clippy::too_many_arguments)]
    fn play_proved(
        &self,
        name: &str,
        proved: trajectory::Proved,
        slot: u8,
        repeat: Repeat,
        start_at: Option<SystemTime>,
        status: &Status,
    ) -> Result<Started, SessionError> {
        if repeat != Repeat::Once
            && let Err(seam) = proved.trajectory.loop_seam()
        {
            return Err(SessionError::refused(format!("{name} cannot loop: {seam}")));
        }
        self.start(
            name,
            proved.trajectory,
            Some(proved.report),
            slot,
            repeat,
            start_at,
            status,
        )
    }

    /// Takes the robot from the commanded pose to `pose` (JointSet order) and holds it there.
    pub fn go_to(&self, name: &str, pose: &[f64]) -> Result<Started, SessionError> {
        let status = self.ready_to_move(0)?;
        let hold = Trajectory::hold(pose, self.rate_hz);
        self.start(name, hold, None, 0, Repeat::Once, None, &status)
    }

    /// A start time at most [`MAX_START_AHEAD`] ahead of the session's wall clock: the loop
    /// counts the wait in ticks, and a later time is a mistake, not a plan.
    fn check_start_at(&self, name: &str, start_at: Option<SystemTime>) -> Result<(), SessionError> {
        let Some(at) = start_at else {
            return Ok(());
        };
        match at.duration_since(self.realtime()) {
            Ok(ahead) if ahead > MAX_START_AHEAD => Err(SessionError::refused(format!(
                "{name}: the start time is {:.0} s ahead; at most {} s (a day)",
                ahead.as_secs_f64(),
                MAX_START_AHEAD.as_secs()
            ))),
            _ => Ok(()),
        }
    }

    /// The approach from the commanded pose to `motion`'s first sample, and both to the loop.
    #[allow(clippy::too_many_arguments)]
    fn start(
        &self,
        name: &str,
        motion: Trajectory,
        report: Option<ProofReport>,
        slot: u8,
        repeat: Repeat,
        start_at: Option<SystemTime>,
        status: &Status,
    ) -> Result<Started, SessionError> {
        self.check_start_at(name, start_at)?;
        let (joints, dofs) = {
            let slots = self.slots.lock().map_err(|_| poisoned())?;
            let s = &slots[usize::from(slot)];
            (s.joints.clone(), s.dofs.clone())
        };
        let commanded: Vec<f64> = dofs.iter().map(|&d| status.commanded[d]).collect();
        // The drives track the commanded pose: the approach starts exactly there.
        let approach =
            trajectory::approach(&joints, &commanded, motion.first_setpoints(), self.rate_hz)
                .map_err(|e| {
                    SessionError::refused(format!("cannot approach {name}'s first pose: {e}"))
                })?;
        let measured_offset = dofs
            .iter()
            .map(|&d| {
                let c = status.commanded[d];
                let m = status.positions[d];
                (self.joints.dofs[d].name.clone(), (c - m).abs())
            })
            .fold(None, |w: Option<(String, f64)>, (n, e)| match w {
                Some(w) if w.1 >= e => Some(w),
                _ => Some((n, e)),
            });
        let motion_id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let duration_s = motion.duration_s();
        let approach_s = approach.duration_s();
        let playback = Playback {
            repeat,
            start_at,
            slot,
            ..Playback::new(motion_id, approach, motion)
        };
        let route = playback.route.clone();
        match self.command(Command::Play(Box::new(playback)))? {
            Ack::Done => {}
            Ack::Refused(why) => return Err(self.refusal(name, why)),
            Ack::Ignored(state) => {
                return Err(SessionError::refused(format!(
                    "{name}: the robot is {}",
                    state.as_str()
                )));
            }
        }
        self.remember_route(slot, motion_id, route);
        // Acknowledged with the tick that took it: its first command is in this status.
        let first_command_ns = self.handle().peek().slots[usize::from(slot)].first_command_ns;
        Ok(Started {
            motion_id,
            duration_s,
            approach_s,
            requested_speed: report.as_ref().map_or(1.0, |r| r.speed),
            speed: report.as_ref().map_or(1.0, Prepared::effective_speed),
            report,
            measured_offset,
            first_command_ns,
        })
    }

    /// Replaces the motion playing in the request's slot without a seam: from the state the loop
    /// will be in at the switch (now plus a few ticks, or `start_at`), a blend proved within the
    /// limits leads into `prepared` at the requested speed; the loop swaps it in at that tick.
    /// When nothing plays there, this is [`play`](Self::play).
    pub fn replace(
        &self,
        prepared: &Prepared,
        request: &PlayRequest,
    ) -> Result<Started, SessionError> {
        let slot = self.slot_of(request.group.as_deref())?;
        if self.handle().peek().slots[usize::from(slot)]
            .motion_id
            .is_none()
        {
            return self.play(prepared, request);
        }
        let (motion, report) = self.at_speed(prepared, request, slot)?;
        self.replace_proved(
            trajectory::Proved {
                trajectory: motion,
                report,
            },
            request,
        )
    }

    /// [`replace`](Self::replace) with a trajectory already proved for the slot's joints.
    pub fn replace_proved(
        &self,
        proved: trajectory::Proved,
        request: &PlayRequest,
    ) -> Result<Started, SessionError> {
        let name = &request.name;
        let slot = self.slot_of(request.group.as_deref())?;
        let trajectory::Proved {
            trajectory: motion,
            report,
        } = proved;
        if request.repeat != Repeat::Once
            && let Err(seam) = motion.loop_seam()
        {
            return Err(SessionError::refused(format!("{name} cannot loop: {seam}")));
        }
        self.check_start_at(name, request.start_at)?;
        let joints = self.group_joints_of(slot)?;
        let (duration_s, mut approach_s) = (motion.duration_s(), 0.0);
        // The switch must reach the loop before its tick: leave time for building the blend.
        let lead = (0.02 * self.rate_hz).ceil().max(4.0) as u64;
        let switched = self.splice_at(
            slot,
            name,
            lead,
            request.start_at,
            request.repeat,
            &mut |join| {
                let blend =
                    trajectory::blend(&joints, &join.from, &motion, self.rate_hz, join.recovering)
                        .map_err(|e| {
                            SessionError::new(ErrorKind::InvalidMotion, format!("{name}: {e}"))
                        })?;
                approach_s = blend.duration_s();
                Ok(splice::Piece {
                    approach: blend,
                    motion: motion.clone(),
                    stream_tail: None,
                })
            },
        )?;
        let motion_id = match switched {
            splice::Switch::Taken(s) => s.motion_id,
            splice::Switch::Idle => {
                let status = self.ready_to_move(slot)?;
                let proved = trajectory::Proved {
                    trajectory: motion,
                    report,
                };
                let (repeat, start_at) = (request.repeat, request.start_at);
                return self.play_proved(name, proved, slot, repeat, start_at, &status);
            }
            splice::Switch::EndsBefore => {
                return Err(SessionError::refused(format!(
                    "{name}: the motion playing there ends before the switch; play {name} after it"
                )));
            }
        };
        Ok(Started {
            motion_id,
            duration_s,
            approach_s,
            requested_speed: report.speed,
            speed: Prepared::effective_speed(&report),
            report: Some(report),
            measured_offset: None,
            first_command_ns: None,
        })
    }

    /// Starts a teach-in from rest: the drives go compliant where the backend can (else they
    /// hold), and the measured positions of `dofs` (JointSet indices) go into `take` every
    /// `every` loop ticks until [`record_stop`](Self::record_stop). When it cannot start, the
    /// take is discarded (it holds nothing).
    pub fn record_start(
        &self,
        dofs: Vec<usize>,
        every: u64,
        take: Take,
    ) -> Result<(), SessionError> {
        if let Some(&bad) = dofs.iter().find(|&&d| d >= self.joints.len()) {
            take.discard();
            return Err(SessionError::refused(format!("no DOF {bad} to record")));
        }
        if let Err(e) = self.ready_to_move(0) {
            take.discard();
            return Err(e);
        }
        let mut r = self.record.lock().map_err(|_| poisoned())?;
        if r.teach.is_some() {
            drop(r);
            take.discard();
            return Err(SessionError::refused(
                "a teach-in is recording; stop it first",
            ));
        }
        r.teach = Some(TeachIn {
            frame: Vec::with_capacity(dofs.len()),
            last_tick: 0,
            dofs,
            every: every.max(1),
            next_tick: None,
            take,
            started: false,
            interrupted: None,
            ending: false,
        });
        drop(r);
        let started = self.command(Command::Record(true));
        if matches!(started, Ok(Ack::Done)) {
            return Ok(());
        }
        if let Some(teach) = self.record.lock().ok().and_then(|mut r| r.teach.take()) {
            teach.take.discard();
        }
        started?;
        Err(SessionError::refused(
            "a teach-in starts from rest with the drives enabled",
        ))
    }

    /// Ends the teach-in: the drives stiffen and hold where they are; returns the take (its
    /// frames are in its file). A teach-in the loop left by itself (E-stop, fault) ends here
    /// too, without asking the loop anything.
    pub fn record_stop(&self) -> Result<Ended, SessionError> {
        self.collect();
        let interrupted = {
            let mut r = self.record.lock().map_err(|_| poisoned())?;
            let teach = r
                .teach
                .as_mut()
                .ok_or_else(|| SessionError::refused("no teach-in is recording"))?;
            teach.ending = true;
            teach.interrupted
        };
        let interrupted = match interrupted {
            Some(state) => Some(state),
            None => match self.command(Command::Record(false)) {
                Ok(Ack::Done) => None,
                // The loop left the teach-in meanwhile, or cannot be asked: the take stands.
                _ => Some(self.state()),
            },
        };
        let teach = self
            .record
            .lock()
            .map_err(|_| poisoned())?
            .teach
            .take()
            .ok_or_else(|| SessionError::refused("no teach-in is recording"))?;
        Ok(Ended {
            take: teach.take,
            interrupted,
        })
    }

    /// Takes the take out of a teach-in without asking the loop (which is shutting down): no
    /// frame is added after this.
    pub fn record_detach(&self) -> Option<Take> {
        self.collect();
        let mut r = self.record.lock().ok()?;
        r.teach.take().map(|t| t.take)
    }

    /// How the take under way stands, if one is.
    pub fn take_progress(&self) -> Option<TakeProgress> {
        self.collect();
        let r = self.record.lock().ok()?;
        let t = r.teach.as_ref()?;
        Some(TakeProgress {
            frames: t.take.frames(),
            path: t.take.path().to_path_buf(),
            interrupted: t.interrupted,
            capped: t.take.capped(),
            error: t.take.error().map(str::to_string),
        })
    }

    fn remember_route(&self, slot: u8, motion_id: u32, route: Route) {
        if let Ok(mut slots) = self.slots.lock()
            && let Some(s) = slots.get_mut(usize::from(slot))
        {
            s.route = Some((motion_id, route));
        }
    }

    fn dof_name(&self, dof: usize) -> String {
        self.joints
            .dofs
            .get(dof)
            .map_or_else(|| format!("DOF {dof}"), |d| d.name.clone())
    }

    fn refusal(&self, name: &str, why: Refusal) -> SessionError {
        let text = match why {
            Refusal::Busy(state) => format!(
                "{name}: the robot is {}; stop the current motion first",
                state.as_str()
            ),
            Refusal::Mismatch => {
                format!("{name}: the trajectory does not fit the loop's DOFs or rate")
            }
            Refusal::Jump { dof } => format!(
                "{name}: the approach would start away from where {} is commanded to be (it moved meanwhile); try again",
                self.dof_name(usize::from(dof))
            ),
            Refusal::NotLoopable { dof } => format!(
                "{name} does not continue from its end into its start ({}), so it cannot loop",
                self.dof_name(usize::from(dof))
            ),
            Refusal::Missed => format!(
                "{name}: the motion it was to replace changed pace (paused, stopped, resumed) or the switch came too late; try again"
            ),
            Refusal::Superseded => format!("{name}: replaced by a newer request before its switch"),
            Refusal::Ended => {
                format!("{name}: the motion it was to replace ended before the switch")
            }
        };
        SessionError::new(ErrorKind::Refused, text)
    }

    /// Runs `script` against playback `motion_id` and waits until it has left the loop and the
    /// drives are at rest (a stop or a fault's quick stop finished), or `timeout` passes.
    /// `external` is asked every time for an action from outside (a signal).
    pub fn run(
        &self,
        motion_id: u32,
        script: &[Scripted],
        timeout: Duration,
        mut external: impl FnMut() -> Option<Action>,
    ) -> Option<Outcome> {
        let mut pending: Vec<&Scripted> = script.iter().collect();
        pending.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
        let mut pending: VecDeque<&Scripted> = pending.into();
        let rate = self.rate_hz;
        self.wait_for(timeout, |status| {
            if let Some(action) = external() {
                let _ = self.act(&action);
            }
            if let Some(start) = status.motion_start_tick
                && status.motion_id == Some(motion_id)
            {
                while let Some(next) = pending.front() {
                    let at = start.saturating_add((next.at_s * rate).round().max(0.0) as u64);
                    if status.tick + 1 < at {
                        break;
                    }
                    let _ = self.act(&next.action);
                    pending.pop_front();
                }
            }
            match self.outcome(motion_id) {
                Some(o) if !status.moving => Some(o),
                _ => None,
            }
        })
    }

    fn act(&self, action: &Action) -> Result<(), SessionError> {
        match action {
            Action::Stop => self.handle().send(Command::Stop(Scope::All)).map(drop),
            Action::QuickStop => self.handle().send(Command::QuickStop(Scope::All)).map(drop),
            Action::Pause => self.handle().send(Command::Pause(Scope::All)).map(drop),
            Action::Resume => self.handle().send(Command::Resume(Scope::All)).map(drop),
            Action::Disable => self.handle().send(Command::Disable).map(drop),
            Action::Shutdown => self.handle().send(Command::Shutdown).map(drop),
            Action::Fault {
                injector,
                kind,
                dof,
            } => {
                injector.inject(*kind, *dof);
                Ok(())
            }
            Action::EStop(switch) => {
                switch.press();
                Ok(())
            }
        }
        .map_err(loop_error)
    }

    /// Waits until nothing moves any more (a stop or a fault's quick stop at rest).
    pub fn settle(&self, timeout: Duration) -> bool {
        self.wait_for(timeout, |s| (!s.moving).then_some(()))
            .is_some()
    }

    /// Controlled end: the motion decelerates to rest within the limits, the drives are left in
    /// the configured safe state and the loop ends. `cut_short` is polled while stopping (a
    /// second signal): when it says so, or `timeout` passes, the stop becomes a quick stop.
    pub fn shutdown(
        &self,
        timeout: Duration,
        mut cut_short: impl FnMut() -> bool,
    ) -> Result<Shutdown, SessionError> {
        let mut stopping = self.begin_shutdown(timeout);
        loop {
            if let Some(end) = self.poll_shutdown(&mut stopping, &mut cut_short) {
                return end;
            }
            self.pump();
        }
    }

    /// [`shutdown`](Self::shutdown) in steps, for a caller that runs the loop's time itself (a
    /// rehearsal): asks the loop to stop; [`poll_shutdown`](Self::poll_shutdown) follows it.
    pub fn begin_shutdown(&self, timeout: Duration) -> Stopping {
        let before = self.handle().peek();
        let _ = self.handle().send(Command::Shutdown);
        Stopping {
            started_ns: self.now_ns(),
            timeout,
            quick: false,
            state: before.state,
            fault: before.fault,
        }
    }

    /// How a shutdown under way stands, without letting the loop run: `None` while it stops,
    /// then how it ended. `cut_short` is asked while the stop is not quick yet (a second signal);
    /// when it says so, or the timeout has passed, the stop becomes a quick stop.
    pub fn poll_shutdown(
        &self,
        stopping: &mut Stopping,
        cut_short: impl FnOnce() -> bool,
    ) -> Option<Result<Shutdown, SessionError>> {
        // Once quick, the stop is bounded by the quick-stop decelerations; this covers any.
        let grace = Duration::from_secs(5);
        // `Shutdown` is idempotent: repeating it is how we learn the loop has ended.
        if self.has_ended() {
            self.collect();
            return Some(Ok(if stopping.quick {
                Shutdown::Quick
            } else {
                Shutdown::AtRest
            }));
        }
        let elapsed = Duration::from_nanos(self.now_ns().saturating_sub(stopping.started_ns));
        if !stopping.quick && (elapsed >= stopping.timeout || cut_short()) {
            let _ = self.handle().send(Command::ShutdownNow);
            stopping.quick = true;
        }
        if stopping.quick && elapsed >= stopping.timeout + grace {
            return Some(Err(SessionError::new(
                ErrorKind::Unavailable,
                format!("the loop did not end within {:?}", stopping.timeout + grace),
            )));
        }
        None
    }
}

/// A controlled shutdown under way ([`Session::begin_shutdown`]).
#[derive(Debug, Clone, Copy)]
pub struct Stopping {
    started_ns: u64,
    timeout: Duration,
    quick: bool,
    /// The loop's state and fault when the stop began: what the drives were doing then.
    state: State,
    fault: Option<crate::backend::BackendError>,
}

impl Stopping {
    /// Whether the stop was made quick (a second signal or the timeout).
    pub fn quick(&self) -> bool {
        self.quick
    }

    /// The loop's state and fault when the stop began.
    pub fn before(&self) -> (State, Option<crate::backend::BackendError>) {
        (self.state, self.fault)
    }
}

/// What asserted the E-stop, in words.
pub fn describe_estop(cause: Option<EStopCause>, joints: &JointSet) -> String {
    match cause {
        None | Some(EStopCause::Input) => "the E-stop input is asserted".into(),
        Some(EStopCause::InputLost) => {
            "the E-stop input cannot be read (treated as asserted)".into()
        }
        Some(EStopCause::Drive { dof }) => {
            match dof.and_then(|d| joints.dofs.get(usize::from(d))) {
                Some(d) => format!("the drive of {} reports its E-stop", d.name),
                None => "a drive reports its E-stop".into(),
            }
        }
    }
}

/// A fault in the one vocabulary of status, replies and logs: its kind, the DOF by name, the
/// drive's code; a servo's calibration found different also by its bus and id (from `buses`,
/// when the backend has buses).
pub fn describe_fault(
    fault: &crate::backend::BackendError,
    joints: &JointSet,
    buses: Option<&BusesStatus>,
) -> String {
    if fault.kind == crate::backend::FaultKind::Overrun {
        return describe_overrun(fault.code);
    }
    let name = fault.dof.map(|d| {
        joints
            .dofs
            .get(usize::from(d))
            .map_or_else(|| format!("DOF {d}"), |dof| dof.name.clone())
    });
    if fault.kind == crate::backend::FaultKind::CalibrationMismatch
        && let Some(m) = crate::backend::servo_registers::Mismatch::of_code(fault.code)
    {
        let servo = buses
            .zip(name.as_deref())
            .and_then(|(b, joint)| b.drive_of(joint))
            .map(|(bus, drive)| (bus.name.as_str(), drive.id, drive.lerobot));
        return m.describe(name.as_deref().unwrap_or("a servo"), servo);
    }
    if fault.kind == crate::backend::FaultKind::EnableTimeout {
        return describe_enable_timeout(fault, name.as_deref(), buses);
    }
    let mut text = fault.kind.as_str().to_string();
    if let Some(name) = name {
        text.push_str(&format!(" on {name}"));
    }
    if fault.code != 0 {
        text.push_str(&format!(" (code {:#x})", fault.code));
    }
    text
}

/// An `enable_timeout` in an operator's words: the servo that left a request unanswered, on
/// which bus and device, and what to check (its family's words, when its bus says); else which
/// setting ran out and where to look.
fn describe_enable_timeout(
    fault: &crate::backend::BackendError,
    joint: Option<&str>,
    buses: Option<&BusesStatus>,
) -> String {
    let on = buses.zip(joint).and_then(|(b, joint)| b.drive_of(joint));
    if let Some((bus, drive)) = on
        && let Some(words) =
            crate::backend::family::fault_words(drive.protocol, fault.kind, fault.code)
    {
        let device = if bus.device.is_empty() {
            String::new()
        } else {
            format!(" ({})", bus.device)
        };
        return format!(
            "enable_timeout: {} servo {} ({}) on bus `{}`{device} {words}",
            drive.protocol, drive.id, drive.dof, bus.name
        );
    }
    let which = joint.map_or_else(|| "the drives".to_string(), |j| format!("the drive of {j}"));
    format!(
        "enable_timeout: {which} did not come up within rt.enable_timeout_s; `motionctl drives` \
         shows each drive's state and last error: check power, wiring and ids (slow drives: \
         raise rt.enable_timeout_s)"
    )
}

/// An overrun in an operator's words: how late (the code is µs; 0: too many late ticks in a
/// row), which setting it passed, whose the fault is and the way out.
fn describe_overrun(late_us: u32) -> String {
    let what = if late_us == 0 {
        "overrun: too many ticks in a row ended past their deadline \
         (rt.max_consecutive_overruns)"
            .to_string()
    } else {
        format!(
            "overrun: the loop woke up {:.1} ms late, past rt.max_late_ms",
            f64::from(late_us) / 1000.0
        )
    };
    format!(
        "{what}; this machine did not run the loop in time (load, power saving, no real-time \
         kernel) — rehearsing on a desktop, allow more with rt.max_late_ms (e.g. 250); on the \
         robot run `motiond doctor` and see the manual's \"Preparing a robot computer\" (rt.cpu, \
         rt.priority, a PREEMPT_RT kernel)"
    )
}

fn poisoned() -> SessionError {
    SessionError::new(
        ErrorKind::Unavailable,
        "the session's state is unusable after a panic",
    )
}

fn loop_error(err: rt::Error) -> SessionError {
    SessionError::new(ErrorKind::Unavailable, format!("the loop: {err}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::sim::{Sim, SimSettings};
    use crate::backend::{BackendError, FaultKind};
    use crate::robot::Limits;
    use crate::trajectory::DofLimits;

    /// A teach-in of 600 ticks at one frame every 10, its trace ring of 16 rows drained every
    /// tick, or not at all for 200 ticks in the middle (`stall`): the frames and lost frames.
    fn take_with(stall: bool) -> (u64, u64) {
        let js = JointSet::uniform(
            1,
            DofLimits {
                position: Limits::symmetric(2.0),
                velocity: Limits::symmetric(2.0),
                acceleration: Limits::symmetric(20.0),
                effort: Limits::symmetric(10.0),
            },
        );
        let sim = Sim::new(&js, 1000.0, &SimSettings::default());
        let settings = Settings {
            trace_ticks: 16,
            ..Settings::default()
        };
        let s = Session::stepped(settings, Box::new(sim), None, js, ManualClock::new(0)).unwrap();
        s.enable().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let take = Take::create(dir.path(), "t", 100.0, vec!["j".into()], 10_000).unwrap();
        s.record_start(vec![0], 10, take).unwrap();
        let ticks = |n: u64| s.wait_for(Duration::from_millis(n), |_| None::<()>);
        ticks(200);
        if stall {
            // Nobody drains the ring: the loop laps it.
            let Driver::Stepped { lp, .. } = &s.driver else {
                unreachable!()
            };
            let mut lp = lp.lock().unwrap();
            for _ in 0..200 {
                lp.step();
            }
        } else {
            ticks(200);
        }
        ticks(200);
        let closed = s.record_stop().unwrap().take.close().unwrap();
        (closed.frames, closed.lost)
    }

    #[test]
    fn teach_in_frames_the_trace_ring_lost_are_counted_as_lost() {
        let (all, none_lost) = take_with(false);
        let (kept, lost) = take_with(true);
        assert_eq!(none_lost, 0);
        // 184 of the 200 rows were overwritten unread: 18 or 19 frames, on the 10-tick grid.
        assert!((18..=19).contains(&lost), "{lost}");
        assert_eq!(
            kept + lost,
            all,
            "{kept} + {lost} frames, {all} without the stall"
        );
    }

    #[test]
    fn an_overrun_says_how_late_in_ms_which_setting_and_what_to_do() {
        let joints = JointSet { dofs: Vec::new() };
        let late = BackendError {
            kind: FaultKind::Overrun,
            dof: None,
            code: 0x15d0,
        };
        let text = describe_fault(&late, &joints, None);
        assert!(
            text.starts_with("overrun: the loop woke up 5.6 ms late, past rt.max_late_ms;"),
            "{text}"
        );
        assert!(
            text.contains("this machine did not run the loop in time"),
            "{text}"
        );
        assert!(text.contains("rt.max_late_ms (e.g. 250)"), "{text}");
        assert!(!text.contains("0x"), "{text}");
        let in_a_row = describe_fault(&BackendError::new(FaultKind::Overrun), &joints, None);
        assert!(
            in_a_row.contains("rt.max_consecutive_overruns"),
            "{in_a_row}"
        );
    }
}
