//! `motiond rehearse`: an operator session played against the daemon itself, offline and
//! deterministically.
//!
//! The configuration's robot, joints, limits, rate and groups run on the simulated backend (its
//! buses replaced, as `serve --dry-run` does), on a manual clock stepped one tick at a time. The
//! requests of the [`Script`] go through the daemon's own request handling
//! ([`Daemon`](crate::daemon::requests::Daemon), the same code `serve` answers the socket with),
//! signals through its own shutdown, and the world's events — the E-stop input, drive faults, a
//! hand moving a compliant joint, a stalled loop thread — reach the loop at exact ticks. The same
//! script gives the same trace and report, byte for byte, every run.
//!
//! Requests are taken one after the other, in script order, each at the first tick at or after
//! its `at` once the one before was answered (a request that waits for the loop — `enable`,
//! `clear_fault`, `play --replace` — lets the loop run meanwhile); world events are applied before
//! the tick they fall on, whatever the control side is doing. The motion library is a scratch
//! copy of `motion.library` (`<rehearsal>/motions` in replies and the journal), so a rehearsed
//! teach-in never writes into the real one.

pub mod script;

use std::collections::VecDeque;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

pub use self::script::{Action, EStopEvent, Script, Signal, Step};
use crate::backend::sim::{Hand, Injector, Sim, SimSettings};
use crate::config::{BackendConfig, Config};
use crate::daemon::framing::{Frame, Framer};
use crate::daemon::protocol::Reply;
use crate::daemon::reply::BackendKind;
use crate::daemon::requests::{Daemon, Motions};
use crate::daemon::server::{Handler, Peer, request_of};
use crate::diag::Diagnostic;
use crate::estop::{Debounce, EStopInput, SimInput, SimSwitch};
use crate::rt::{self, ManualClock, State, Status, TraceRow};
use crate::session::{Robot, Session, Stopping, TraceSink};
use crate::trajectory::JointSet;

/// How often the daemon looks at the loop to journal what happened (as `serve` does).
const LOG_PERIOD_S: f64 = 0.05;

/// A run without `end` goes on at most this long after its last step for the robot to come to
/// rest (a looping motion never does).
const SETTLE_LIMIT_S: f64 = 600.0;

/// Trace rows the loop keeps between two drains; a stepped session drains every tick.
const TRACE_RING: usize = 1024;

/// What replaces the scratch folder's path in replies and the journal.
pub const SCRATCH: &str = "<rehearsal>";

/// Why a rehearsal could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration cannot run as a rehearsal (`FILE:LINE:COL` lines).
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Invalid(Vec<Diagnostic>),
    /// The scratch folder or the loop could not be set up.
    #[error("{0}")]
    Setup(String),
}

/// Each change of the loop's state, with the tick it happened at.
type States = Arc<Mutex<Vec<(u64, State)>>>;

/// Where the trace rows go, once a sink is given.
type Sink = Arc<Mutex<Option<Box<dyn TraceSink>>>>;

/// A rehearsal ready to run.
pub struct Rehearsal {
    script: Script,
    rate_hz: f64,
    joints: JointSet,
    session: Arc<Session>,
    daemon: Arc<Daemon>,
    world: Arc<Mutex<World>>,
    states: States,
    sink: Sink,
    journal: Journal,
    shutdown_timeout: Duration,
    scratch: tempfile::TempDir,
    added_estop: bool,
}

/// The world around the robot: what the script's events do, tick by tick.
struct World {
    /// Steps still to come: index in the script, tick, action.
    pending: VecDeque<(usize, u64, Action)>,
    /// When each world step was applied: index in the script, tick.
    applied: Vec<(usize, u64)>,
    hands: Vec<HandMove>,
    hand: Arc<Hand>,
    injector: Arc<Injector>,
    switch: Option<SimSwitch>,
    clock: ManualClock,
    rate_hz: f64,
}

#[derive(Debug, Clone, Copy)]
struct HandMove {
    dof: usize,
    from: f64,
    to: f64,
    start: u64,
    ticks: u64,
}

impl World {
    /// Everything that happens to the robot before tick `k` runs.
    fn before(&mut self, k: u64, status: &Status) {
        while let Some((i, tick, _)) = self.pending.front() {
            if *tick > k {
                break;
            }
            let i = *i;
            let Some((_, _, action)) = self.pending.pop_front() else {
                break;
            };
            self.applied.push((i, k));
            match action {
                Action::EStop(event) => {
                    if let Some(switch) = &self.switch {
                        match event {
                            EStopEvent::Pressed => switch.press(),
                            EStopEvent::Released => switch.release(),
                            EStopEvent::Lost => switch.lose_line(),
                        }
                    }
                }
                Action::Fault { dof, kind } => self.injector.inject(kind, dof),
                Action::FaultCleared => self.injector.clear(),
                Action::Hand { dof, to, over_s } => {
                    let from = status.positions.get(dof).copied().unwrap_or(to);
                    // A new move of the same joint takes over from where the hand holds it.
                    self.hands.retain(|h| h.dof != dof);
                    self.hands.push(HandMove {
                        dof,
                        from,
                        to,
                        start: k,
                        ticks: (over_s * self.rate_hz).round() as u64,
                    });
                }
                Action::Stall(s) => self.clock.advance((s * 1e9).round() as u64),
                Action::Request { .. } | Action::Disconnect(_) | Action::Signal(_) => {}
            }
        }
        self.hands.retain(|h| {
            let s = if h.ticks == 0 {
                1.0
            } else {
                ((k - h.start) as f64 / h.ticks as f64).min(1.0)
            };
            // Raised cosine: a hand starts and ends a move at rest.
            let x = h.from + (h.to - h.from) * (1.0 - (std::f64::consts::PI * s).cos()) / 2.0;
            self.hand.put(h.dof, x);
            if s >= 1.0 {
                // Let go: a compliant joint stays where the hand left it.
                self.hand.put(h.dof, f64::NAN);
                false
            } else {
                true
            }
        });
    }

    fn busy(&self) -> bool {
        !self.hands.is_empty()
    }
}

/// What happened, for the report.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub script: PathBuf,
    pub rate_hz: f64,
    pub epoch_s: f64,
    /// The script's steps in the order taken, each with the tick it was taken at (`None`: never,
    /// with the reason in `note`).
    pub steps: Vec<StepReport>,
    /// Each change of the loop's state, with the tick it happened at.
    pub states: Vec<(u64, State)>,
    /// The daemon's journal lines, with the tick of the loop when they were written.
    pub journal: Vec<(u64, String)>,
    pub result: RunResult,
}

#[derive(Debug, Clone, PartialEq)]
pub struct StepReport {
    pub step: Step,
    pub tick: Option<u64>,
    /// A request's reply line as a client would read it (JSON, without the newline), kept as
    /// text: a parsed reply holds ten times its size, and a script may have thousands of steps.
    pub reply: Option<String>,
    pub note: Option<String>,
}

impl StepReport {
    /// The reply as JSON.
    pub fn reply_json(&self) -> Option<Value> {
        self.reply
            .as_deref()
            .map(|r| serde_json::from_str(r).unwrap_or(Value::Null))
    }
}

/// How the run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct RunResult {
    /// `end` (the script's end), `at_rest` (after the last step), `shutdown` (a signal ended the
    /// daemon), `settle_limit` (still moving long after the last step).
    pub ended: &'static str,
    /// The last tick the loop ran.
    pub tick: u64,
    pub state: State,
    pub fault: Option<String>,
    pub estop: Option<String>,
    pub limit_violations: u64,
    pub overruns: u64,
    /// After a shutdown: the exit status `motiond serve` ends with.
    pub exit: Option<u8>,
    /// The rehearsal added an E-stop input the configuration does not watch.
    pub added_estop: bool,
}

impl Rehearsal {
    /// Sets up `robot`'s daemon (from its configuration) for `script`: the simulated backend, a
    /// scratch copy of the library, the loop on a manual clock that reads `script.epoch_s` at
    /// tick 0.
    pub fn new(mut robot: Robot, script: Script) -> Result<Rehearsal, Error> {
        let Some(config) = robot.config.take() else {
            return Err(Error::Setup(
                "a rehearsal needs a configuration (robot, library, daemon settings)".into(),
            ));
        };
        let simulated = matches!(config.backend, BackendConfig::Sim);
        let mut config = config.dry_run();
        let joints = robot.joints.clone();
        let rate_hz = config.control.rate_hz;
        let (scratch, library_dir) = scratch_library(&config)?;

        let sim_settings = SimSettings::from_config(&config.sim, &joints)
            .map_err(|e| Error::Invalid(vec![config.diagnostic("sim.fault.dof", e)]))?;
        let sim = Sim::new(&joints, rate_hz, &sim_settings);
        let (hand, injector) = (sim.hand(), sim.injector());
        let estop = RehearsedEStop::of(&config, &script);
        let (session, clock) = stepped_session(&config, &joints, sim, estop.input, &script)?;

        let shutdown_timeout = config.daemon.shutdown_timeout;
        // Takes go to the scratch folder too, wherever the configuration keeps them.
        config.motion.takes = scratch.path().join("takes");
        robot.config = Some(config);
        let motions = Motions::new(robot);
        let library = motions
            .scan_library(&library_dir)
            .map_err(|e| Error::Setup(format!("{}: {e}", library_dir.display())))?;
        let backend = if simulated {
            BackendKind::Sim
        } else {
            BackendKind::DryRun
        };
        let daemon = Arc::new(Daemon::new(
            motions,
            library_dir,
            library,
            session.clone(),
            backend,
        ));

        let world = World {
            pending: script
                .steps
                .iter()
                .enumerate()
                .filter(|(_, s)| !s.action.is_control())
                .map(|(i, s)| (i, tick_of(s.at_s, rate_hz), s.action.clone()))
                .collect(),
            applied: Vec::new(),
            hands: Vec::new(),
            hand,
            injector,
            switch: estop.switch,
            clock,
            rate_hz,
        };
        let world = Arc::new(Mutex::new(world));
        let (states, sink) = watch(&session, &world);
        Ok(Rehearsal {
            script,
            rate_hz,
            joints,
            session,
            daemon,
            world,
            states,
            sink,
            journal: Journal::default(),
            shutdown_timeout,
            scratch,
            added_estop: estop.added,
        })
    }

    /// The DOFs the trace rows list, in order.
    pub fn joints(&self) -> &JointSet {
        &self.joints
    }

    pub fn rate_hz(&self) -> f64 {
        self.rate_hz
    }

    /// Hands every trace row (one per tick from tick 0) to `sink` as the run goes.
    pub fn trace_to(&mut self, sink: Box<dyn TraceSink>) {
        if let Ok(mut s) = self.sink.lock() {
            *s = Some(sink);
        }
    }

    /// Runs the script to its end. The daemon's log lines on this thread (what `serve` writes
    /// to the journal; the level from `RUST_LOG` as for `serve`, info by default) go into the
    /// report's journal, each with the tick the loop last ran; they are not logged elsewhere.
    pub fn run(self) -> Report {
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
        let journal = self.journal.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_ansi(false)
            .with_target(false)
            .without_time()
            .with_writer(move || journal.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || self.run_journalled())
    }

    fn run_journalled(mut self) -> Report {
        let plan = Plan::of(&self.script, self.rate_hz);
        let mut run = Progress::new(&self.script, self.rate_hz, self.scratch.path());

        // As `serve` starts: the loop ticks, then the drives come up holding.
        self.session.advance();
        self.daemon.finish_loading();
        if let Err(err) = self.session.enable() {
            tracing::error!("enabling the drives failed: {err}");
        }
        let ended = loop {
            let k = self.session.next_tick().unwrap_or(0);
            while let Some(&(i, tick)) = run.control.front() {
                if tick > k || run.exit.is_some() {
                    break;
                }
                run.control.pop_front();
                self.take_control_step(&mut run, i, k);
                self.read_journal(&mut run.journal, &run.scratch, k);
            }
            if let Some(s) = run.stopping.as_mut()
                && run.exit.is_none()
                && let Some(code) = self
                    .daemon
                    .poll_stop(s, std::mem::take(&mut run.second_signal))
            {
                run.exit = Some(code);
            }
            self.read_journal(&mut run.journal, &run.scratch, k);
            if let Some(ended) = self.ended_at(k, &run, &plan) {
                break ended;
            }
            self.session.advance();
            if k >= run.next_log {
                self.daemon.log_outcomes();
                run.next_log = k + plan.log_every;
            }
            self.read_journal(&mut run.journal, &run.scratch, 0);
        };
        self.daemon.log_outcomes();
        self.read_journal(&mut run.journal, &run.scratch, 0);
        self.report(ended, run)
    }

    /// Takes the script's request, disconnection or signal `i` at tick `k`.
    fn take_control_step(&self, run: &mut Progress, i: usize, k: u64) {
        let report = &mut run.taken[i];
        report.tick = Some(self.session.status().tick.max(k));
        match &self.script.steps[i].action {
            Action::Request { .. } | Action::Disconnect(_) if run.stopping.is_some() => {
                report.tick = None;
                report.note =
                    Some("not answered: the control socket closed at the first signal".into());
            }
            Action::Request { line, client } => {
                let peer = Peer {
                    connection: *client,
                    ..run.peer
                };
                let reply = self.answer(line, &peer).to_line();
                report.reply = Some(reply.trim_end().replace(&run.scratch, SCRATCH));
            }
            Action::Signal(_) if run.stopping.is_none() => {
                run.stopping = Some(self.daemon.begin_stop(self.shutdown_timeout));
            }
            Action::Disconnect(client) => self.daemon.disconnected(&Peer {
                connection: *client,
                ..run.peer
            }),
            Action::Signal(_) => run.second_signal = true,
            _ => {}
        }
    }

    /// Why the run ends after tick `k`, if it does: the daemon ended, the script's `end`, at
    /// rest after the last step, or still moving at the settle limit.
    fn ended_at(&self, k: u64, run: &Progress, plan: &Plan) -> Option<&'static str> {
        if run.exit.is_some() || self.session.has_ended() {
            return Some("shutdown");
        }
        if let Some(end) = plan.end_tick {
            return (k >= end).then_some("end");
        }
        let world_done = self
            .world
            .lock()
            .map(|w| w.pending.is_empty() && !w.busy())
            .unwrap_or(true);
        if run.control.is_empty() && world_done && k > plan.last_step {
            let status = self.session.status();
            if !status.moving
                && !matches!(
                    status.state,
                    State::Approaching
                        | State::Playing
                        | State::Streaming
                        | State::Starved
                        | State::Stopping
                )
            {
                return Some("at_rest");
            }
        }
        (k >= plan.settle_limit).then_some("settle_limit")
    }

    /// The report of a run that ended for reason `ended`.
    fn report(&self, ended: &'static str, run: Progress) -> Report {
        let mut taken = run.taken;
        let applied = self
            .world
            .lock()
            .map(|w| w.applied.clone())
            .unwrap_or_default();
        for (i, tick) in applied {
            taken[i].tick = Some(tick);
        }
        for t in taken
            .iter_mut()
            .filter(|t| t.tick.is_none() && t.note.is_none())
        {
            t.note = Some(match ended {
                "shutdown" => "not taken: the daemon had ended".into(),
                _ => "not taken: the rehearsal ended first".into(),
            });
        }
        let status = self.session.status();
        let result = RunResult {
            ended,
            tick: status.tick,
            state: status.state,
            fault: status.fault.map(|f| self.session.describe_fault(&f)),
            estop: status
                .estop
                .cause
                .map(|c| crate::session::describe_estop(Some(c), &self.joints)),
            limit_violations: status.limit_violations,
            overruns: status.overruns,
            exit: run.exit,
            added_estop: self.added_estop,
        };
        let states = self.states.lock().map(|s| s.clone()).unwrap_or_default();
        Report {
            script: self.script.path.clone(),
            rate_hz: self.rate_hz,
            epoch_s: self.script.epoch_s,
            steps: taken,
            states,
            journal: run.journal,
            result,
        }
    }

    /// The daemon's answer to one request line, as the socket server gives it.
    fn answer(&self, line: &str, peer: &Peer) -> Reply {
        let mut framer = Framer::default();
        let mut frames = Vec::new();
        framer.push(line.as_bytes(), &mut frames);
        framer.push(b"\n", &mut frames);
        let frame = frames.into_iter().next().unwrap_or(Frame::Incomplete);
        match request_of(frame) {
            Ok(request) => self.daemon.handle(peer, request),
            Err(err) => Reply::error(&err),
        }
    }

    /// Takes the journal's new lines; they were written at tick `at` (a step taken before it
    /// ran) or at the loop's last tick, whichever is later.
    fn read_journal(&mut self, journal: &mut Vec<(u64, String)>, scratch: &str, at: u64) {
        let lines = self.journal.take_lines();
        if lines.is_empty() {
            return;
        }
        let tick = self.session.status().tick.max(at);
        journal.extend(
            lines
                .into_iter()
                .map(|l| (tick, l.replace(scratch, SCRATCH))),
        );
    }
}

/// The daemon's log lines as the journal would get them, until the run takes them.
#[derive(Debug, Clone, Default)]
struct Journal(Arc<Mutex<Vec<u8>>>);

impl Journal {
    /// The lines written since the last call.
    fn take_lines(&self) -> Vec<String> {
        let Ok(mut buf) = self.0.lock() else {
            return Vec::new();
        };
        let text = String::from_utf8_lossy(&buf).into_owned();
        buf.clear();
        text.lines().map(|l| l.trim().to_string()).collect()
    }
}

impl std::io::Write for Journal {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut buf) = self.0.lock() {
            buf.extend_from_slice(bytes);
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A scratch folder with a copy of the configuration's library in it (`motions`), and that
/// copy's path.
fn scratch_library(config: &Config) -> Result<(tempfile::TempDir, PathBuf), Error> {
    let scratch = tempfile::Builder::new()
        .prefix("motiond-rehearsal.")
        .tempdir()
        .map_err(|e| Error::Setup(format!("a scratch folder for the library: {e}")))?;
    let library_dir = scratch.path().join("motions");
    copy_library(&config.motion.library, &library_dir).map_err(|e| {
        Error::Invalid(vec![config.path_diagnostic(
            "motion.library",
            &config.motion.library,
            &e,
            "set motion.library to the folder of the .seq files to rehearse with",
        )])
    })?;
    Ok((scratch, library_dir))
}

/// The E-stop input of a rehearsal: a simulated switch where the configuration watches a GPIO
/// line or the script presses the E-stop (then `added` when the configuration has no line).
struct RehearsedEStop {
    input: Option<Box<dyn EStopInput>>,
    switch: Option<SimSwitch>,
    added: bool,
}

impl RehearsedEStop {
    fn of(config: &Config, script: &Script) -> RehearsedEStop {
        let wants_estop = script
            .steps
            .iter()
            .any(|s| matches!(s.action, Action::EStop(_)));
        let watched = config.estop.as_ref().is_some_and(|e| e.gpio.is_some());
        if !(wants_estop || watched) {
            return RehearsedEStop {
                input: None,
                switch: None,
                added: false,
            };
        }
        let debounce = config
            .estop
            .as_ref()
            .map_or(Duration::from_millis(10), |e| e.debounce);
        let polls = Debounce::polls_for(debounce, config.control.rate_hz);
        let (input, switch) = SimInput::new(polls);
        RehearsedEStop {
            input: Some(Box::new(input)),
            switch: Some(switch),
            added: wants_estop && !watched,
        }
    }
}

/// The configuration's loop on the simulated backend, stepped on a manual clock whose tick 0
/// reads the script's epoch.
fn stepped_session(
    config: &Config,
    joints: &JointSet,
    sim: Sim,
    estop: Option<Box<dyn EStopInput>>,
    script: &Script,
) -> Result<(Arc<Session>, ManualClock), Error> {
    let rate_hz = config.control.rate_hz;
    let groups = config.group_dofs(joints).map_err(Error::Invalid)?;
    let group_names: Vec<String> = config.groups.iter().map(|g| g.name.clone()).collect();
    let settings = rt::Settings {
        groups,
        cpu: None,
        priority: None,
        lock_memory: false,
        trace_ticks: TRACE_RING,
        ..rt::Settings::from_config(config, joints)
    };
    let period_ns = (1e9 / rate_hz).round() as u64;
    let epoch_ns = (script.epoch_s * 1e9).round() as i128;
    // The loop's first deadline is one period after the clock's start: tick 0 reads the epoch.
    let clock = ManualClock::new(epoch_ns - i128::from(period_ns));
    let session = Session::stepped(
        settings,
        Box::new(sim),
        estop,
        joints.clone(),
        clock.clone(),
    )
    .map_err(|e| Error::Setup(format!("the loop: {e}")))?
    .name_groups(&group_names);
    Ok((Arc::new(session), clock))
}

/// The world's events before each tick, and each trace row into the states seen and the sink
/// (once one is given).
fn watch(session: &Session, world: &Arc<Mutex<World>>) -> (States, Sink) {
    let world = world.clone();
    session.before_tick(Box::new(move |k, status| {
        if let Ok(mut w) = world.lock() {
            w.before(k, status);
        }
    }));
    let states = States::default();
    let sink = Sink::default();
    {
        let (states, sink) = (states.clone(), sink.clone());
        session.trace_to(Box::new(move |row: &TraceRow| {
            if let Ok(mut s) = states.lock()
                && s.last().is_none_or(|(_, last)| *last != row.state)
            {
                s.push((row.tick, row.state));
            }
            if let Ok(mut sink) = sink.lock()
                && let Some(sink) = sink.as_mut()
            {
                sink.row(row);
            }
        }));
    }
    (states, sink)
}

/// The ticks a run goes by.
struct Plan {
    /// The tick of the script's last step.
    last_step: u64,
    /// The script's `end`.
    end_tick: Option<u64>,
    settle_limit: u64,
    log_every: u64,
}

impl Plan {
    fn of(script: &Script, rate_hz: f64) -> Plan {
        let last_step = script
            .steps
            .iter()
            .map(|s| tick_of(s.at_s, rate_hz))
            .max()
            .unwrap_or(0);
        Plan {
            last_step,
            end_tick: script.end_s.map(|s| tick_of(s, rate_hz)),
            settle_limit: last_step + tick_of(SETTLE_LIMIT_S, rate_hz),
            log_every: tick_of(LOG_PERIOD_S, rate_hz).max(1),
        }
    }
}

/// The first tick at or after `at_s` seconds.
fn tick_of(at_s: f64, rate_hz: f64) -> u64 {
    (at_s * rate_hz - 1e-9).ceil().max(0.0) as u64
}

/// How far a run has come on the control side.
struct Progress {
    /// Every step of the script, as taken so far.
    taken: Vec<StepReport>,
    /// Requests and signals still to come: index in the script, tick.
    control: VecDeque<(usize, u64)>,
    stopping: Option<Stopping>,
    second_signal: bool,
    /// The exit status once a signal ended the daemon.
    exit: Option<u8>,
    next_log: u64,
    journal: Vec<(u64, String)>,
    /// The client the requests come from: this process's user (each script client its own
    /// connection).
    peer: Peer,
    /// The scratch folder's path, as replies and the journal show it.
    scratch: String,
}

impl Progress {
    fn new(script: &Script, rate_hz: f64, scratch: &Path) -> Progress {
        Progress {
            taken: script
                .steps
                .iter()
                .map(|s| StepReport {
                    step: s.clone(),
                    tick: None,
                    reply: None,
                    note: None,
                })
                .collect(),
            control: script
                .steps
                .iter()
                .enumerate()
                .filter(|(_, s)| s.action.is_control())
                .map(|(i, s)| (i, tick_of(s.at_s, rate_hz)))
                .collect(),
            stopping: None,
            second_signal: false,
            exit: None,
            next_log: 0,
            journal: Vec::new(),
            peer: Peer {
                // SAFETY: getuid and getgid cannot fail.
                uid: unsafe { libc::getuid() },
                gid: unsafe { libc::getgid() },
                pid: None,
                // Client 1's; a step's `client:` names another.
                connection: 1,
            },
            scratch: scratch.display().to_string(),
        }
    }
}

/// Copies the library folder's `.seq` files (and links, as links) into `to`.
fn copy_library(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir(to)?;
    for item in std::fs::read_dir(from)? {
        let item = item?;
        let path = item.path();
        if path.extension().is_none_or(|e| e != "seq") {
            continue;
        }
        let kind = item.file_type()?;
        let target = to.join(item.file_name());
        if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&path)?, &target)?;
        } else if kind.is_file() {
            std::fs::copy(&path, &target)?;
        }
    }
    Ok(())
}

impl Report {
    /// Writes the report as JSON: `steps` (each with `at`, `tick`, what it was and a request's
    /// `reply`), `states` (each change with its `tick`), `journal` and `result`. One element at
    /// a time, one per line: the whole document is never held in memory.
    pub fn write_json(&self, joints: &JointSet, out: &mut dyn Write) -> std::io::Result<()> {
        let head = json!({
            "script": self.script.display().to_string(),
            "rate_hz": self.rate_hz,
            "epoch": self.epoch_s,
        });
        let head = serde_json::to_string(&head)?;
        write!(out, "{},\n\"steps\": [", head.trim_end_matches('}'))?;
        for (n, t) in self.steps.iter().enumerate() {
            let mut v = serde_json::Map::new();
            v.insert("at".into(), json!(t.step.at_s));
            v.insert("tick".into(), json!(t.tick));
            let (key, what) = step_json(&t.step.action, joints);
            v.insert(key.into(), what);
            if let Some(client) = other_client(&t.step.action) {
                v.insert("client".into(), json!(client));
            }
            if let Some(reply) = &t.reply {
                let reply: Value = serde_json::from_str(reply).unwrap_or(Value::Null);
                v.insert("reply".into(), reply);
            }
            if let Some(note) = &t.note {
                v.insert("note".into(), json!(note));
            }
            let sep = if n == 0 { "\n" } else { ",\n" };
            write!(out, "{sep}{}", Value::Object(v))?;
        }
        write!(out, "\n],\n\"states\": [")?;
        for (n, (tick, state)) in self.states.iter().enumerate() {
            let sep = if n == 0 { "\n" } else { ",\n" };
            write!(
                out,
                "{sep}{}",
                json!({"tick": tick, "state": state.as_str()})
            )?;
        }
        write!(out, "\n],\n\"journal\": [")?;
        for (n, (tick, line)) in self.journal.iter().enumerate() {
            let sep = if n == 0 { "\n" } else { ",\n" };
            write!(out, "{sep}{}", json!({"tick": tick, "line": line}))?;
        }
        let r = &self.result;
        let result = json!({
            "ended": r.ended,
            "tick": r.tick,
            "time_s": r.tick as f64 / self.rate_hz,
            "state": r.state.as_str(),
            "fault": r.fault,
            "estop": r.estop,
            "limit_violations": r.limit_violations,
            "overruns": r.overruns,
            "exit": r.exit,
            "added_estop_input": r.added_estop,
        });
        writeln!(out, "\n],\n\"result\": {result}\n}}")
    }

    /// Writes the report for people: one timeline of steps, state changes and journal lines,
    /// then how the run ended. Each line is formatted as it is written.
    pub fn write_text(&self, joints: &JointSet, out: &mut dyn Write) -> std::io::Result<()> {
        /// What a timeline line shows, by index into the report.
        #[derive(Clone, Copy)]
        enum Event {
            Step(usize),
            State(usize),
            Journal(usize),
        }
        // At one tick: the steps taken before it ran, the state after it, what was journalled.
        let mut events: Vec<(u64, u8, Event)> =
            Vec::with_capacity(self.steps.len() + self.states.len() + self.journal.len());
        for (n, t) in self.steps.iter().enumerate() {
            events.push((t.tick.unwrap_or(u64::MAX), 0, Event::Step(n)));
        }
        for (n, (tick, _)) in self.states.iter().enumerate() {
            events.push((*tick, 1, Event::State(n)));
        }
        for (n, (tick, _)) in self.journal.iter().enumerate() {
            events.push((*tick, 2, Event::Journal(n)));
        }
        // Stable: steps keep the script's order within a tick.
        events.sort_by_key(|(tick, order, _)| (*tick, *order));
        writeln!(
            out,
            "rehearsal of {} at {} Hz (tick 0 at {} s since the Unix epoch)",
            self.script.display(),
            self.rate_hz,
            self.epoch_s
        )?;
        for (tick, _, event) in events {
            if tick == u64::MAX {
                write!(out, "{:>8} {:>8}  ", "-", "-")?;
            } else {
                let t = tick as f64 / self.rate_hz;
                write!(out, "{tick:>8} {t:>8.3}  ")?;
            }
            match event {
                Event::Step(n) => self.write_step(n, joints, out)?,
                Event::State(n) => writeln!(out, "state {}", self.states[n].1.as_str())?,
                Event::Journal(n) => writeln!(out, "journal: {}", self.journal[n].1)?,
            }
        }
        let r = &self.result;
        let ended = match r.ended {
            "end" => "the script's end",
            "at_rest" => "at rest after the last step",
            "shutdown" => "the daemon shut down",
            _ => "still moving 600 s after the last step",
        };
        write!(
            out,
            "result: {ended} at tick {} ({:.3} s): {}; {} limit violations, {} overruns",
            r.tick,
            r.tick as f64 / self.rate_hz,
            r.state.as_str(),
            r.limit_violations,
            r.overruns
        )?;
        if let Some(f) = &r.fault {
            write!(out, "; fault: {f}")?;
        }
        if let Some(e) = &r.estop {
            write!(out, "; E-stop: {e}")?;
        }
        if let Some(code) = r.exit {
            write!(out, "; motiond serve would exit {code}")?;
        }
        if r.added_estop {
            write!(
                out,
                "\n(the configuration watches no E-stop input: the rehearsal added a simulated one)"
            )?;
        }
        writeln!(out)
    }

    /// One step's timeline entry: what it was, when the script asked for it, its reply or note.
    fn write_step(&self, n: usize, joints: &JointSet, out: &mut dyn Write) -> std::io::Result<()> {
        let t = &self.steps[n];
        let (key, what) = step_json(&t.step.action, joints);
        let what = match what {
            Value::String(s) if key != "request" => format!("{key} {s}"),
            other => format!("{key} {other}"),
        };
        if let Some(client) = other_client(&t.step.action) {
            write!(out, "client {client} ")?;
        }
        write!(out, "{what} (at {} s)", t.step.at_s)?;
        if let Some(reply) = &t.reply {
            write!(out, "\n{:>18}→ {reply}", "")?;
        }
        if let Some(note) = &t.note {
            write!(out, ": {note}")?;
        }
        writeln!(out)
    }
}

/// A step as the report names it: its key and value.
fn step_json(action: &Action, joints: &JointSet) -> (&'static str, Value) {
    let name = |d: usize| joints.dofs.get(d).map_or("?", |d| d.name.as_str());
    match action {
        Action::Request { line, .. } => (
            "request",
            serde_json::from_str(line).unwrap_or_else(|_| json!(line)),
        ),
        Action::Disconnect(client) => ("disconnect", json!(client)),
        Action::EStop(e) => ("estop", json!(e.as_str())),
        Action::Fault { dof, kind } => (
            "fault",
            json!({"dof": dof.map_or("all", name), "kind": kind_str(*kind)}),
        ),
        Action::FaultCleared => ("fault", json!("cleared")),
        Action::Hand { dof, to, over_s } => (
            "hand",
            json!({"dof": name(*dof), "to": to, "over_s": over_s}),
        ),
        Action::Signal(s) => ("signal", json!(s.as_str())),
        Action::Stall(s) => ("stall_s", json!(s)),
    }
}

/// The client of a request that is not client 1's (reports name it only then).
fn other_client(action: &Action) -> Option<u64> {
    match action {
        Action::Request { client, .. } if *client != 1 => Some(*client),
        _ => None,
    }
}

fn kind_str(kind: crate::backend::SimFaultKind) -> &'static str {
    use crate::backend::SimFaultKind as K;
    match kind {
        K::Error => "error",
        K::Stall => "stall",
        K::NoFeedback => "no_feedback",
        K::Estop => "estop",
    }
}
