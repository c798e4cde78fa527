//! `motiond play MOTION.seq`: one playback without the daemon — and a rehearsal of everything
//! `serve` can do to it (stop, quick stop, pause, resume, loops, a drive fault) at chosen times,
//! with the loop's trace and plot to look at afterwards. The library's `Session` does the work.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::plot::{Figure, PlotError};
use motiond::backend::Backend;
use motiond::backend::sim::{Injector, Sim, SimFaultKind, SimSettings};
use motiond::backend::status::BusesStatus;
use motiond::config::{BackendConfig, Config};
use motiond::diag::Num;
use motiond::rehearse::script::MAX_SCRIPT_S;
use motiond::rt::{
    self, Clock, ManualClock, MonotonicClock, Outcome, Repeat, Settings, Status, TraceRow,
};
use motiond::session::start;
use motiond::session::{
    Action, BusWatch, PlayRequest, Prepared, Robot, Scripted, Session, Started,
};
use motiond::trajectory::{JointSet, speed_text};
use serde_json::json;

use crate::robot::{self, Failure, RobotArgs, TrajectoryArgs};
use crate::signals::{self, Hangup, Signals};
use crate::trace_out::TraceOut;

#[derive(clap::Args)]
pub struct Args {
    /// The .seq motion to play.
    motion: PathBuf,
    #[command(flatten)]
    robot: RobotArgs,
    /// Play on the simulated motors whatever the configuration's backend (see also --dry-run).
    #[arg(long, value_name = "KIND", value_parser = ["sim"])]
    backend: Option<String>,
    /// Replace every bus of the configuration with the simulated backend: same joints, limits,
    /// rate and mapping, no motor moves.
    #[arg(long)]
    dry_run: bool,
    /// Control rate in Hz (1 to 8000); default: the configuration's, else 1000.
    #[arg(long, value_name = "HZ", value_parser = robot::parse_rate)]
    rate: Option<f64>,
    #[command(flatten)]
    trajectory: TrajectoryArgs,
    /// Play the motion N times in a row (it must continue from its end into its start).
    #[arg(long = "loop", value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    laps: u32,
    /// CPU to pin the loop to; default: the configuration's rt.cpu.
    #[arg(long, value_name = "N")]
    cpu: Option<usize>,
    /// SCHED_FIFO priority of the loop (1-99); default: the configuration's rt.priority.
    #[arg(long, value_name = "P", value_parser = robot::parse_priority)]
    priority: Option<i32>,
    /// Report format.
    #[arg(long, value_name = "FORMAT", default_value = "text", value_parser = ["text", "json"])]
    report: String,
    /// Write every loop tick: CSV (commanded position, velocity, acceleration and measured
    /// position per DOF), or MCAP when the name ends in .mcap (the flight recorder's channels,
    /// for Foxglove or PlotJuggler).
    #[arg(long, value_name = "OUT.csv|OUT.mcap")]
    trace: Option<PathBuf>,
    /// Draw, per DOF, commanded position, velocity and acceleration and the measured (or
    /// simulated) position against the limits, from the loop's trace (OUT.svg or OUT.png).
    #[arg(long, value_name = "OUT.svg|OUT.png")]
    plot: Option<PathBuf>,
    /// The loop's clock: `monotonic` (real time) or `manual` (stepped as the rehearsal needs it,
    /// every tick exactly on time, no real-time settings: the same run every time; simulated
    /// backend only).
    #[arg(long, value_name = "CLOCK", default_value = "monotonic", value_parser = ["monotonic", "manual"])]
    clock: String,
    /// Rehearsal: stop at this time (seconds from the motion's first sample, after the approach).
    #[arg(long, value_name = "SECONDS")]
    stop_at: Option<f64>,
    /// Rehearsal: quick stop (the socket's `hold`) at this time.
    #[arg(long, value_name = "SECONDS")]
    quick_stop_at: Option<f64>,
    /// Rehearsal: pause at this time.
    #[arg(long, value_name = "SECONDS")]
    pause_at: Option<f64>,
    /// Rehearsal: resume at this time (after --pause-at).
    #[arg(long, value_name = "SECONDS", requires = "pause_at")]
    resume_at: Option<f64>,
    /// Rehearsal: a simulated drive fault, DOF:KIND:SECONDS with KIND error, stall,
    /// no_feedback or estop (the drive reports its own E-stop; DOF `all` for every DOF).
    #[arg(long, value_name = "DOF:KIND:SECONDS")]
    fault: Option<String>,
}

/// Exit 0 when the motion played to its end, 1 when it was refused or did not finish (stopped,
/// fault, signal), 2 when a file or argument is invalid.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match play(args) {
        Ok(code) => Ok(code),
        Err(f) => f.exit(),
    }
}

fn invalid(message: String) -> Failure {
    Failure::Invalid(vec![message])
}

/// Ring rows of the loop's trace on a thread: drained every few hundred µs, so a second's worth
/// is ample.
const TRACE_RING: usize = 1 << 16;

fn play(args: Args) -> Result<ExitCode, Failure> {
    if !args.motion.exists() {
        return Err(invalid(not_a_path(&args.motion)));
    }
    if let Some(path) = &args.plot {
        crate::plot::check_path(path).map_err(|e| invalid(format!("motiond play: {e}")))?;
    }
    robot::check_outputs(
        "play",
        &[
            ("--trace", args.trace.as_deref()),
            ("--plot", args.plot.as_deref()),
        ],
    )?;
    let robot = robot::load_or_default(&args.robot, "play")?;
    let options = args.trajectory.options(Some(&robot), args.rate);
    let prepared = robot.prepare(&args.motion, &options)?;
    let joints = robot.joints.clone();
    let rate = options.rate_hz;
    let manual = args.clock == "manual";
    let sim_wanted = args.dry_run
        || args.backend.is_some()
        || robot
            .config
            .as_ref()
            .is_none_or(|c| matches!(c.backend, BackendConfig::Sim));
    if manual && !sim_wanted {
        return Err(invalid(
            "motiond play: --clock manual needs the simulated backend (--dry-run)".into(),
        ));
    }
    let mut settings = match &robot.config {
        Some(c) => Settings::from_config(c, &joints),
        None => Settings {
            lock_memory: true,
            cpu_wakeup_latency_us: Some(0),
            ..Settings::default()
        },
    };
    settings.rate_hz = rate;
    settings.cpu = args.cpu.or(settings.cpu);
    settings.priority = args.priority.or(settings.priority);
    settings.trace_ticks = TRACE_RING;
    if manual {
        // The loop never sleeps on the manual clock: real-time scheduling would starve the CPU.
        settings.cpu = None;
        settings.priority = None;
        settings.lock_memory = false;
        settings.cpu_wakeup_latency_us = None;
    }
    let (backend, injector): (Box<dyn Backend>, Option<Arc<Injector>>) = if sim_wanted {
        let sim = sim_for(robot.config.as_ref(), &joints, rate, &prepared)?;
        let injector = sim.injector();
        (Box::new(sim), Some(injector))
    } else {
        let Some(config) = &robot.config else {
            return Err(invalid(
                "motiond play: no configuration names a backend".into(),
            ));
        };
        let permit = start::permit(&robot, config)?;
        (start::open_backend(permit, config, &joints)?, None)
    };
    let script = script(&args, &joints, injector)?;
    // The configured E-stop input is watched in rehearsals too: pressing it stops them.
    let estop = match &robot.config {
        Some(config) => start::open_estop(config, rate)?,
        None => None,
    };
    // Installed before the loop starts: a signal from here on stops the play within the limits.
    let signals = signals::install(Hangup::Stop).map_err(Failure::Runtime)?;
    // CLOCK_REALTIME near the loop's tick 0: the MCAP trace's times.
    let epoch_ns = MonotonicClock.realtime_ns();
    let session = if manual {
        let clock = ManualClock::new(epoch_ns);
        Session::stepped(settings, backend, estop, joints.clone(), clock)
    } else {
        Session::spawn(settings, backend, estop, joints.clone())
    }
    .map_err(|e| Failure::Runtime(e.into()))?;
    // The trace streams to its file as the loop runs; rows are kept only for a plot.
    let trace = Arc::new(Mutex::new(Streamed::new(
        args.trace.as_deref(),
        &joints,
        rate,
        u64::try_from(epoch_ns).unwrap_or(0),
        args.plot.is_some(),
    )?));
    {
        let trace = trace.clone();
        session.trace_to(Box::new(move |row: &TraceRow| {
            if let Ok(mut t) = trace.lock() {
                t.row(row);
            }
        }));
    }
    let buses = session.buses().cloned();
    let mut bus_watch = buses.clone().map(BusWatch::new);
    let mut played = rehearse(&session, &args, &prepared, &script, &signals);
    let status = session.status();
    let obtained = session.obtained().clone();
    session
        .shutdown(Duration::from_secs(30), || false)
        .map_err(|e| Failure::Runtime(e.into()))?;
    let dropped = session.trace_dropped();
    if dropped > 0 {
        tracing::warn!("the trace lost {dropped} ticks (the reader fell behind the loop)");
    }
    // What the buses reported over the play (drive warnings, faults in the drives' words).
    for event in bus_watch.iter_mut().flat_map(BusWatch::changes) {
        event.log();
    }
    drop(session);
    let trace = Arc::try_unwrap(trace)
        .ok()
        .and_then(|t| t.into_inner().ok())
        .ok_or_else(|| Failure::Runtime(anyhow::anyhow!("the trace is still in use")))?;
    let (outside, rows, seen) = trace.finish(args.trace.as_deref())?;
    played.fault_at_s = seen.fault_at_s(rate);
    if let Some(path) = &args.trace {
        eprintln!(
            "motiond play: wrote the trace ({} ticks) to {}",
            seen.ticks,
            path.display()
        );
    }
    let ok = played.outcome == Some(Outcome::Finished) && status.limit_violations + outside == 0;
    if let Some(path) = &args.plot {
        let label = if sim_wanted { "simulated" } else { "measured" };
        let verdict = (played.verdict(&status, &joints, buses.as_deref()), ok);
        plot(path, &args.motion, &rows, &robot, rate, label, verdict)
            .map_err(|e| Failure::Runtime(e.into()))?;
        eprintln!("motiond play: wrote the plot to {}", path.display());
    }
    let report = Report {
        rate,
        played: &played,
        status: &status,
        obtained: &obtained,
        joints: &joints,
        buses: buses.as_deref(),
        violations: status.limit_violations + outside,
    };
    let text = if args.report == "json" {
        Some(serde_json::to_string_pretty(&report.json()).map_err(|e| Failure::Runtime(e.into()))?)
    } else if played.started.is_some() {
        Some(report.text(&args.motion))
    } else {
        // Refused before the motion started: the loop only enabled, nothing to report on.
        None
    };
    let mut out = std::io::stdout().lock();
    if let Some(text) = text
        && let Err(e) = writeln!(out, "{text}")
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        return Err(Failure::Runtime(e.into()));
    }
    if !ok {
        eprintln!(
            "motiond play: {}",
            played.verdict(&status, &joints, buses.as_deref())
        );
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// A motion that is not there: `play` takes a file's path, where an operator may have meant a
/// library motion's name (`motionctl play NAME` plays those on the daemon).
fn not_a_path(motion: &Path) -> String {
    let shown = motion.display();
    let bare = motion.extension().is_none() && motion.components().count() == 1;
    if bare {
        format!(
            "motiond play: {shown}: no such file; `motiond play` takes the path of a .seq file \
             (e.g. config/motions/{shown}.seq); a library motion's name is for the daemon: \
             `motionctl play {shown}`"
        )
    } else {
        format!("motiond play: {shown}: no such file")
    }
}

/// The rehearsal's scripted events.
fn script(
    args: &Args,
    joints: &JointSet,
    injector: Option<Arc<Injector>>,
) -> Result<Vec<Scripted>, Failure> {
    let mut script = Vec::new();
    let mut at = |t: Option<f64>, action: Action, flag: &str| -> Result<(), Failure> {
        if let Some(t) = t {
            if !(t.is_finite() && (0.0..=MAX_SCRIPT_S).contains(&t)) {
                return Err(invalid(format!(
                    "motiond play: {flag} {}: expected a time from 0 to {MAX_SCRIPT_S} seconds",
                    Num(t)
                )));
            }
            script.push(Scripted { at_s: t, action });
        }
        Ok(())
    };
    at(args.stop_at, Action::Stop, "--stop-at")?;
    at(args.quick_stop_at, Action::QuickStop, "--quick-stop-at")?;
    at(args.pause_at, Action::Pause, "--pause-at")?;
    at(args.resume_at, Action::Resume, "--resume-at")?;
    if let Some(spec) = &args.fault {
        let Some(injector) = injector else {
            return Err(invalid(
                "motiond play: --fault needs the simulated backend (--dry-run)".into(),
            ));
        };
        let (dof, kind, t) = parse_fault(spec, joints).map_err(|why| {
            invalid(format!(
                "motiond play: --fault {spec}: {why} (expected DOF:KIND:SECONDS, KIND error, stall, no_feedback or estop)"
            ))
        })?;
        at(
            Some(t),
            Action::Fault {
                injector,
                kind,
                dof,
            },
            "--fault",
        )?;
    }
    if let (Some(p), Some(r)) = (args.pause_at, args.resume_at)
        && r < p
    {
        return Err(invalid(format!(
            "motiond play: --resume-at {} comes before --pause-at {}",
            Num(r),
            Num(p)
        )));
    }
    Ok(script)
}

fn parse_fault(
    spec: &str,
    joints: &JointSet,
) -> Result<(Option<usize>, SimFaultKind, f64), String> {
    let mut parts = spec.rsplitn(3, ':');
    let (Some(t), Some(kind), Some(dof)) = (parts.next(), parts.next(), parts.next()) else {
        return Err("not three fields".into());
    };
    let t: f64 = t
        .parse()
        .map_err(|_| format!("{t:?} is not a number of seconds"))?;
    let kind = match kind {
        "error" => SimFaultKind::Error,
        "stall" => SimFaultKind::Stall,
        "no_feedback" => SimFaultKind::NoFeedback,
        "estop" => SimFaultKind::Estop,
        other => return Err(format!("unknown kind {other:?}")),
    };
    let dof = match dof {
        "all" => None,
        name => Some(
            joints
                .index_of(name)
                .ok_or_else(|| format!("{name:?} is not a commanded DOF"))?,
        ),
    };
    Ok((dof, kind, t))
}

/// What a run produced.
struct Played {
    started: Option<Started>,
    outcome: Option<Outcome>,
    interrupted: bool,
    error: Option<String>,
    /// When the loop faulted: seconds of loop time from the motion's first tick (as `--fault`
    /// counts), from the trace.
    fault_at_s: Option<f64>,
}

impl Played {
    fn verdict(&self, status: &Status, joints: &JointSet, buses: Option<&BusesStatus>) -> String {
        if let Some(e) = &self.error {
            return e.clone();
        }
        match (self.outcome, status.fault) {
            (_, Some(f)) => format!(
                "the loop faulted{}: {}",
                self.fault_at_s
                    .map(|t| format!(" {t:.3} s into the motion"))
                    .unwrap_or_default(),
                motiond::session::describe_fault(&f, joints, buses)
            ),
            (Some(Outcome::Finished), _) => "played to the end".into(),
            (Some(Outcome::Refused(r)), _) => format!("the loop refused the motion: {r:?}"),
            _ if self.interrupted => "interrupted: stopped within the limits".into(),
            (Some(Outcome::Stopped), _) => "stopped before the end".into(),
            (o, _) => format!("did not finish ({o:?})"),
        }
    }
}

/// Enables, plays with the script, waits until the drives are at rest again. SIGINT/SIGTERM stop
/// the motion within the limits; a second signal stops it quickly.
fn rehearse(
    session: &Session,
    args: &Args,
    prepared: &Prepared,
    script: &[Scripted],
    signals: &Signals,
) -> Played {
    let mut played = Played {
        started: None,
        outcome: None,
        interrupted: false,
        error: None,
        fault_at_s: None,
    };
    if let Err(e) = session.enable() {
        played.error = Some(format!("enabling the drives: {e}"));
        return played;
    }
    let name = args
        .motion
        .file_stem()
        .map_or_else(|| "motion".into(), |s| s.to_string_lossy().into_owned());
    let request = PlayRequest {
        name,
        speed: args.trajectory.speed,
        repeat: if args.laps > 1 {
            Repeat::Times(args.laps)
        } else {
            Repeat::Once
        },
        start_at: None,
        group: None,
    };
    let started = match session.play(prepared, &request) {
        Ok(s) => s,
        Err(e) => {
            played.error = Some(e.to_string());
            return played;
        }
    };
    warn_changes(&started);
    // Long enough for everything the script can do; a stepped loop counts it in loop time.
    let paused = match (args.pause_at, args.resume_at) {
        (Some(p), Some(r)) => r - p,
        (Some(_), None) => 0.0,
        _ => 0.0,
    };
    let timeout = started.approach_s
        + started.duration_s * f64::from(args.laps) / started.speed.max(1e-6)
        + paused
        + 60.0;
    // Signals seen: the first stops the motion within the limits, the second quickly.
    let mut seen = 0u32;
    let outcome = session.run(
        started.motion_id,
        script,
        Duration::from_secs_f64(timeout),
        || {
            let n = seen + signals.stops.try_iter().count() as u32;
            let action = match (seen, n) {
                (0, 1..) => Some(Action::Stop),
                (1, 2..) => Some(Action::QuickStop),
                _ => None,
            };
            seen = n.min(2);
            action
        },
    );
    played.interrupted = seen > 0;
    // A pause without a resume ends the rehearsal there, at rest.
    played.outcome = outcome;
    played.started = Some(started);
    played
}

/// Nothing silent: what the proof changed goes to stderr.
fn warn_changes(started: &Started) {
    let Some(report) = &started.report else {
        return;
    };
    let notes = motiond::daemon::requests::report_notes(report);
    if !notes.is_empty() {
        tracing::warn!(
            "the motion plays at speed {} (requested {}){notes}",
            speed_text(started.speed),
            speed_text(started.requested_speed)
        );
    }
}

fn sim_for(
    config: Option<&Config>,
    joints: &JointSet,
    rate: f64,
    prepared: &Prepared,
) -> Result<Sim, Failure> {
    let settings = match config {
        Some(c) => SimSettings::from_config(&c.sim, joints)
            .map_err(|e| Failure::diagnostics([c.diagnostic("sim.fault.dof", e)]))?,
        None => SimSettings::default(),
    };
    let mut sim = Sim::new(joints, rate, &settings);
    // A DOF whose limits forbid any motion (SR1's elbow has velocity limits [0, 0]) could never
    // be approached: its simulated motor is put at the motion's first position instead.
    let first = prepared.trajectory.first_setpoints();
    for (j, (d, s)) in joints.dofs.iter().zip(first).enumerate() {
        let v = d.limits.velocity;
        let a = d.limits.acceleration;
        let frozen = !(v.upper.min(-v.lower) > 0.0 && a.upper.min(-a.lower) > 0.0);
        if frozen && d.initial_position != s.position {
            tracing::warn!(
                "`{}` cannot move (velocity or acceleration limit 0): its simulated motor starts at the motion's first position {}",
                d.name,
                s.position
            );
            sim.place(j, s.position);
        }
    }
    Ok(sim)
}

/// The loop's trace as it comes: written to its file (CSV, or MCAP for a name ending in .mcap),
/// measured positions outside the position limits counted (per tick and DOF), when the motion
/// started and the first fault came noted, rows kept only when a plot wants them — so a play of
/// any length runs in the same memory.
struct Streamed {
    out: Option<TraceOut>,
    failed: Option<anyhow::Error>,
    limits: Vec<motiond::robot::Limits>,
    outside: u64,
    seen: Seen,
    kept: Option<Vec<TraceRow>>,
}

/// What the rows showed as they went by.
#[derive(Debug, Default, Clone, Copy)]
struct Seen {
    ticks: u64,
    first: Option<u64>,
    playing: Option<u64>,
    fault: Option<u64>,
}

impl Seen {
    /// Loop time from the motion's first tick (the first row playing, else the first row) to the
    /// first row with a fault.
    fn fault_at_s(&self, rate: f64) -> Option<f64> {
        let start = self.playing.or(self.first)?;
        Some(self.fault?.saturating_sub(start) as f64 / rate)
    }
}

impl Streamed {
    fn new(
        path: Option<&Path>,
        joints: &JointSet,
        rate: f64,
        epoch_ns: u64,
        keep: bool,
    ) -> Result<Streamed, Failure> {
        let out = match path {
            Some(path) => Some(
                TraceOut::create(path, joints, rate, epoch_ns)
                    .map_err(|e| Failure::Runtime(anyhow::anyhow!("{}: {e:#}", path.display())))?,
            ),
            None => None,
        };
        Ok(Streamed {
            out,
            failed: None,
            limits: joints.dofs.iter().map(|d| d.limits.position).collect(),
            outside: 0,
            seen: Seen::default(),
            kept: keep.then(Vec::new),
        })
    }

    fn row(&mut self, row: &TraceRow) {
        for (p, l) in row.measured.iter().zip(&self.limits) {
            let slack = 1e-9 * l.lower.abs().max(l.upper.abs()).max(1.0);
            if *p < l.lower - slack || *p > l.upper + slack {
                self.outside += 1;
            }
        }
        let seen = &mut self.seen;
        seen.ticks += 1;
        seen.first.get_or_insert(row.tick);
        if row.state == rt::State::Playing {
            seen.playing.get_or_insert(row.tick);
        }
        if row.fault.is_some() {
            seen.fault.get_or_insert(row.tick);
        }
        if let Some(out) = self.out.as_mut()
            && self.failed.is_none()
            && let Err(e) = out.row(row)
        {
            self.failed = Some(e);
        }
        if let Some(kept) = self.kept.as_mut() {
            kept.push(row.clone());
        }
    }

    /// The count of measured positions outside the limits, the rows kept for a plot and what
    /// the rows showed, once the file is complete.
    fn finish(self, path: Option<&Path>) -> Result<(u64, Vec<TraceRow>, Seen), Failure> {
        let shown = path.map(|p| p.display().to_string()).unwrap_or_default();
        if let Some(e) = self.failed {
            return Err(Failure::Runtime(anyhow::anyhow!("{shown}: {e:#}")));
        }
        if let Some(out) = self.out {
            out.finish()
                .map_err(|e| Failure::Runtime(anyhow::anyhow!("{shown}: {e:#}")))?;
        }
        Ok((self.outside, self.kept.unwrap_or_default(), self.seen))
    }
}

fn plot(
    path: &Path,
    motion: &Path,
    rows: &[TraceRow],
    robot: &Robot,
    rate: f64,
    measured_label: &str,
    verdict: (String, bool),
) -> Result<(), PlotError> {
    let mut plots = crate::plot::joints_of(Some(&robot.world), &robot.joints);
    crate::plot::add_trace(&mut plots, rows, rate);
    let figure = Figure {
        title: format!(
            "{} on {}: the loop's trace at {rate} Hz (approach, motion, stops, faults, hold)",
            motion.display(),
            robot.name()
        ),
        verdict: verdict.0,
        refused: !verdict.1,
        measured_label: Some(measured_label.into()),
        events: crate::plot::trace_events(rows, &robot.joints, rate),
        joints: plots,
    };
    crate::plot::write(path, &figure)
}

struct Report<'a> {
    rate: f64,
    played: &'a Played,
    status: &'a Status,
    obtained: &'a rt::Obtained,
    joints: &'a JointSet,
    buses: Option<&'a BusesStatus>,
    violations: u64,
}

impl Report<'_> {
    fn ticks(&self) -> u64 {
        self.status.latency.count
    }

    fn json(&self) -> serde_json::Value {
        let s = self.status;
        let o = self.obtained;
        let tracking: serde_json::Map<String, serde_json::Value> = self
            .joints
            .dofs
            .iter()
            .zip(&s.max_tracking_error)
            .map(|(d, e)| (d.name.clone(), json!(e)))
            .collect();
        let started = self.played.started.as_ref();
        let report = started.and_then(|s| s.report.as_ref());
        json!({
            "rate_hz": self.rate,
            "ticks": self.ticks(),
            "duration_s": self.ticks() as f64 / self.rate,
            "overruns": s.overruns,
            "latency_us": {"min": s.latency.min, "mean": s.latency.mean, "p50": s.latency.p50,
                           "p99": s.latency.p99, "p999": s.latency.p999, "max": s.latency.max},
            "exec_us": {"p50": s.exec.p50, "p99": s.exec.p99, "max": s.exec.max},
            "limit_violations": self.violations,
            "max_tracking_error": tracking,
            "rt": {"cpu": o.cpu, "policy": o.policy, "priority": o.priority,
                   "memory_locked": o.memory_locked, "cpu_wakeup_latency": o.cpu_wakeup_latency,
                   "warnings": o.warnings},
            "speed": started.map(|s| s.speed),
            "requested_speed": started.map(|s| s.requested_speed),
            "retimed": report.and_then(|r| r.retimed),
            "clamped": report.map(|r| r.clamped.iter().map(|c| json!({
                "joint": c.dof, "samples": c.samples, "max_change": c.max_change,
            })).collect::<Vec<_>>()),
            "measured_offset": started.and_then(|s| s.measured_offset.as_ref())
                .map(|(j, v)| json!({"joint": j, "value": v})),
            "fault": s.fault.map(|f| motiond::session::describe_fault(&f, self.joints, self.buses)),
            "result": self.played.verdict(s, self.joints, self.buses),
        })
    }

    fn text(&self, motion: &Path) -> String {
        let s = self.status;
        let o = self.obtained;
        let l = &s.latency;
        let mut t = format!(
            "{}: {}\n\
             {} ticks at {} Hz ({:.3} s), {} overruns, {} limit violations\n\
             wake-up latency µs: min {:.1}  p50 {:.1}  p99 {:.1}  p99.9 {:.1}  max {:.1}\n\
             tick execution µs: p50 {:.1}  p99 {:.1}  max {:.1}\n\
             real time: cpu {}, {} priority {}, memory {}, {}",
            motion.display(),
            self.played.verdict(s, self.joints, self.buses),
            self.ticks(),
            self.rate,
            self.ticks() as f64 / self.rate,
            s.overruns,
            self.violations,
            l.min,
            l.p50,
            l.p99,
            l.p999,
            l.max,
            s.exec.p50,
            s.exec.p99,
            s.exec.max,
            o.cpu.map_or("any".to_string(), |c| c.to_string()),
            o.policy,
            o.priority,
            if o.memory_locked {
                "locked"
            } else {
                "not locked"
            },
            motiond::rt::describe_wakeup(o.cpu_wakeup_latency.as_ref()),
        );
        if let Some(st) = &self.played.started {
            t.push_str(&format!(
                "\nspeed {} (requested {})",
                speed_text(st.speed),
                speed_text(st.requested_speed)
            ));
            if let Some(r) = &st.report {
                t.push_str(&motiond::daemon::requests::report_notes(r));
            }
            if let Some((j, v)) = &st.measured_offset {
                t.push_str(&format!(
                    "\nmeasured offset at the start: {v:.6} on {j} (the approach starts from the commanded pose)"
                ));
            }
        }
        t.push_str("\nmax following error:");
        for (d, e) in self.joints.dofs.iter().zip(&s.max_tracking_error) {
            t.push_str(&format!("\n  {:<24} {e:.6}", d.name));
        }
        t
    }
}
