//! `motiond play MOTION.seq`: one-shot playback without the daemon — load, prove, approach,
//! play, stop, report.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use motiond::backend::sim::{Sim, SimSettings, Trace};
use motiond::backend::{self, Backend};
use motiond::config::{self, BackendConfig, Config};
use motiond::plot::{PlotError, Series, write_svg};
use motiond::rt::{
    self, Clock, Command, LoopHandle, ManualClock, MonotonicClock, Outcome, Playback, Settings,
    State, Status,
};
use motiond::trajectory::{self, BuildError, Cursor, JointSet, Setpoint, Trajectory};
use serde_json::json;

use crate::robot::{self, Failure, RobotArgs, TrajectoryArgs};

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
    /// Control rate in Hz; default: the configuration's, else 1000.
    #[arg(long, value_name = "HZ")]
    rate: Option<f64>,
    #[command(flatten)]
    trajectory: TrajectoryArgs,
    /// CPU to pin the loop to; default: the configuration's rt.cpu.
    #[arg(long, value_name = "N")]
    cpu: Option<usize>,
    /// SCHED_FIFO priority of the loop (1-99); default: the configuration's rt.priority.
    #[arg(long, value_name = "P")]
    priority: Option<i32>,
    /// Report format.
    #[arg(long, value_name = "FORMAT", default_value = "text", value_parser = ["text", "json"])]
    report: String,
    /// Write the simulated backend's commanded and simulated positions per tick as CSV.
    #[arg(long, value_name = "OUT.csv")]
    trace: Option<PathBuf>,
    /// Draw, per DOF, the commanded positions (line) and the simulated motor's (points) against
    /// the position limits, as SVG.
    #[arg(long, value_name = "OUT.svg")]
    plot: Option<PathBuf>,
    /// The loop's clock: `monotonic` (real time) or `manual` (as fast as the CPU allows, every
    /// tick exactly on time, no real-time settings; for rehearsals and tests on the sim backend).
    #[arg(long, value_name = "CLOCK", default_value = "monotonic", value_parser = ["monotonic", "manual"])]
    clock: String,
}

/// Exit 0 when the motion played to its end, 1 when it was refused or did not finish (fault,
/// signal), 2 when a file or argument is invalid.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match play(args) {
        Ok(code) => Ok(code),
        Err(f) => f.exit(),
    }
}

fn invalid(message: String) -> Failure {
    Failure::Invalid(vec![message])
}

fn play(mut args: Args) -> Result<ExitCode, Failure> {
    if args.robot.config.is_none() && args.robot.model.is_none() {
        // The default configuration, looked up in the current directory (a checkout, or an
        // installed robot's working directory): never next to the binary or its sources.
        let default = PathBuf::from(config::DEFAULT_PATH);
        if !default.is_file() {
            return Err(invalid(format!(
                "motiond play: no robot given and no {} in the current directory; use --config FILE or --skel FILE",
                config::DEFAULT_PATH
            )));
        }
        args.robot.config = Some(default);
    }
    let Some(robot) = robot::load(&args.robot)? else {
        return Err(invalid(
            "motiond play: name the robot with --config or --skel".into(),
        ));
    };
    let motion = robot::load_motion(&args.motion)?;
    let map = robot.map(&motion, &args.motion)?;
    let options = robot.options(args.rate, &args.trajectory);
    let proved = match trajectory::build(&robot.joints, &motion, &map, &options) {
        Ok(proved) => proved,
        Err(BuildError::Refused(report)) => {
            eprintln!("motiond play: {}: refused: {report}", args.motion.display());
            return Ok(ExitCode::from(1));
        }
        Err(e) => return Err(invalid(format!("{}: {e}", args.motion.display()))),
    };
    let joints = robot.joints.clone();
    let rate = options.rate_hz;
    let manual = args.clock == "manual";
    let mut settings = match &robot.config {
        Some(c) => Settings::from_config(c),
        None => Settings {
            lock_memory: true,
            ..Settings::default()
        },
    };
    settings.rate_hz = rate;
    settings.cpu = args.cpu.or(settings.cpu);
    settings.priority = args.priority.or(settings.priority);
    if manual {
        // The loop never sleeps on the manual clock: real-time scheduling would starve the CPU.
        settings.cpu = None;
        settings.priority = None;
        settings.lock_memory = false;
    }
    let sim_wanted = args.dry_run
        || args.backend.is_some()
        || robot
            .config
            .as_ref()
            .is_none_or(|c| matches!(c.backend, BackendConfig::Sim));
    let (backend, trace): (Box<dyn Backend>, Option<Arc<Trace>>) = if sim_wanted {
        let keep = args.trace.is_some() || args.plot.is_some();
        let sim = sim_for(&robot.config, &joints, rate, &proved.trajectory, keep)?;
        let trace = sim.trace();
        (Box::new(sim), Some(trace))
    } else if manual {
        return Err(invalid(
            "motiond play: --clock manual needs the simulated backend (--dry-run)".into(),
        ));
    } else {
        let Some(config) = &robot.config else {
            return Err(invalid(
                "motiond play: no configuration names a backend".into(),
            ));
        };
        let backend = backend::open(config, &joints).map_err(|e| invalid(format!("{e}")))?;
        (backend, None)
    };
    let id = 1;
    let played = if manual {
        let clock = ManualClock::new(MonotonicClock.realtime_ns());
        run_loop(settings, backend, &joints, clock, proved.trajectory, id)
    } else {
        run_loop(
            settings,
            backend,
            &joints,
            MonotonicClock,
            proved.trajectory,
            id,
        )
    }
    .map_err(Failure::Runtime)?;
    if let (Some(path), Some(trace)) = (&args.trace, &trace) {
        write_trace(path, trace).map_err(Failure::Runtime)?;
    }
    if let Some(path) = &args.plot {
        let Some(trace) = &trace else {
            return Err(invalid(
                "motiond play: --plot needs the simulated backend".into(),
            ));
        };
        plot(path, &args.motion, trace, &joints).map_err(|e| Failure::Runtime(e.into()))?;
    }
    let violations =
        played.status.limit_violations + trace.as_deref().map_or(0, |t| outside_limits(t, &joints));
    let report = Report {
        rate,
        played: &played,
        joints: &joints,
        violations,
    };
    let text = if args.report == "json" {
        serde_json::to_string_pretty(&report.json()).map_err(|e| Failure::Runtime(e.into()))?
    } else {
        report.text(&args.motion)
    };
    let mut out = std::io::stdout().lock();
    if let Err(e) = writeln!(out, "{text}")
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        return Err(Failure::Runtime(e.into()));
    }
    let ok = played.outcome == Some(Outcome::Finished) && violations == 0;
    if !ok {
        eprintln!("motiond play: {}", played.verdict());
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Largest trace kept without `--trace` (rows × DOFs): enough for minutes of a 30-DOF robot at
/// 1 kHz; with `--trace` the whole run is kept.
const TRACE_BUDGET: usize = 16 << 20;

fn sim_for(
    config: &Option<Config>,
    joints: &JointSet,
    rate: f64,
    motion: &Trajectory,
    asked: bool,
) -> Result<Sim, Failure> {
    let mut settings = match config {
        Some(c) => SimSettings::from_config(&c.sim, joints)
            .map_err(|e| Failure::diagnostics([c.diagnostic("sim.fault.dof", e)]))?,
        None => SimSettings::default(),
    };
    // The motors start at the DOFs' initial positions, except where a DOF's limits forbid any
    // motion (SR1's elbow has velocity limits [0, 0]): no approach could bring such a motor to
    // the motion's start, so the simulated one is put there, with a warning.
    let mut from: Vec<f64> = joints.dofs.iter().map(|d| d.initial_position).collect();
    let mut first = vec![Setpoint::default(); joints.len()];
    motion.sample(&mut Cursor::default(), 0, &mut first);
    let mut placed = Vec::new();
    for ((j, d), (f, s)) in joints
        .dofs
        .iter()
        .enumerate()
        .zip(from.iter_mut().zip(&first))
    {
        let v = d.limits.velocity;
        let a = d.limits.acceleration;
        let frozen = !(v.upper.min(-v.lower) > 0.0 && a.upper.min(-a.lower) > 0.0);
        if frozen && *f != s.position {
            tracing::warn!(
                "`{}` cannot move (velocity or acceleration limit 0): its simulated motor starts at the motion's first position {}",
                d.name,
                s.position
            );
            *f = s.position;
            placed.push(j);
        }
    }
    // Enable, the approach, the motion and a margin for the stop.
    let approach = trajectory::approach(joints, &from, &first, rate).map_or(0, |a| a.ticks());
    let rows = (approach + motion.ticks()) as usize + (5.0 * rate) as usize;
    if asked || rows * joints.len().max(1) <= TRACE_BUDGET {
        settings.trace_ticks = rows;
    }
    let mut sim = Sim::new(joints, rate, &settings);
    for j in placed {
        if let Some(&p) = from.get(j) {
            sim.place(j, p);
        }
    }
    Ok(sim)
}

/// What a run produced.
struct Played {
    status: Status,
    outcome: Option<Outcome>,
    obtained: rt::Obtained,
    interrupted: bool,
}

impl Played {
    fn verdict(&self) -> String {
        match (self.outcome, self.status.fault) {
            (_, Some(f)) => format!("the loop faulted: {f}"),
            (Some(Outcome::Finished), _) => "played to the end".into(),
            (Some(Outcome::Refused(r)), _) => format!("the loop refused the motion: {r:?}"),
            _ if self.interrupted => "interrupted: stopped within the limits".into(),
            (o, _) => format!("did not finish ({o:?})"),
        }
    }
}

/// Enables, approaches, plays and shuts down; SIGINT/SIGTERM stop the motion within the limits.
fn run_loop<C: Clock>(
    settings: Settings,
    backend: Box<dyn Backend>,
    joints: &JointSet,
    clock: C,
    motion: Trajectory,
    id: u32,
) -> anyhow::Result<Played> {
    let rate = settings.rate_hz;
    let handle = rt::spawn(settings, backend, joints.clone(), clock)?;
    let interrupted = Arc::new(AtomicBool::new(false));
    {
        let flag = interrupted.clone();
        // A second handler cannot be installed in one process; `play` installs only this one.
        let _ = ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed));
    }
    let result = drive(&handle, joints, motion, rate, id, &interrupted);
    let status = handle.status();
    let outcomes = handle.outcomes();
    let obtained = handle.obtained().clone();
    handle.shutdown(Duration::from_secs(30))?;
    let outcome = result?.or_else(|| {
        outcomes
            .iter()
            .rev()
            .find(|(m, _)| *m == id)
            .map(|&(_, o)| o)
    });
    Ok(Played {
        status,
        outcome,
        obtained,
        interrupted: interrupted.load(Ordering::Relaxed),
    })
}

fn wait(
    handle: &LoopHandle,
    what: &str,
    timeout: Duration,
    done: impl Fn(State) -> bool,
) -> anyhow::Result<()> {
    let give_up = Instant::now() + timeout;
    loop {
        let state = handle.state();
        if done(state) {
            return Ok(());
        }
        if state == State::Fault {
            let status = handle.status();
            let fault = status
                .fault
                .map_or_else(|| "unknown".to_string(), |f| f.to_string());
            anyhow::bail!("the loop faulted while {what}: {fault}");
        }
        if Instant::now() > give_up {
            anyhow::bail!("timed out {what} (state {})", state.as_str());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The playback's outcome, or `None` when it ended some other way (fault, interruption).
fn drive(
    handle: &LoopHandle,
    joints: &JointSet,
    motion: Trajectory,
    rate: f64,
    id: u32,
    interrupted: &AtomicBool,
) -> anyhow::Result<Option<Outcome>> {
    handle.send(Command::Enable)?;
    wait(
        handle,
        "enabling the drives",
        Duration::from_secs(10),
        |s| s == State::Idle,
    )?;
    // The approach starts where the drives are: the measured positions.
    let from = handle.status().positions;
    let mut first = vec![Setpoint::default(); joints.len()];
    motion.sample(&mut Cursor::default(), 0, &mut first);
    let approach = trajectory::approach(joints, &from, &first, rate)?;
    let pb = Playback {
        motion_id: id,
        approach,
        motion,
        looped: false,
        start_at: None,
    };
    handle.send(Command::Play(Box::new(pb)))?;
    let mut stop_sent = false;
    loop {
        if let Some(&(_, outcome)) = handle.outcomes().iter().find(|(m, _)| *m == id) {
            return Ok(Some(outcome));
        }
        if handle.state() == State::Fault {
            return Ok(Some(Outcome::Faulted));
        }
        if interrupted.load(Ordering::Relaxed) && !stop_sent {
            handle.send(Command::Stop)?;
            stop_sent = true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Simulated positions outside a DOF's position limits, counted per tick and DOF.
fn outside_limits(trace: &Trace, joints: &JointSet) -> u64 {
    let mut n = 0;
    for i in 0..trace.len() {
        let Some(row) = trace.row(i) else { break };
        for (p, d) in row.simulated.iter().zip(&joints.dofs) {
            let l = d.limits.position;
            let slack = 1e-9 * l.lower.abs().max(l.upper.abs()).max(1.0);
            if *p < l.lower - slack || *p > l.upper + slack {
                n += 1;
            }
        }
    }
    n
}

fn write_trace(path: &Path, trace: &Trace) -> anyhow::Result<()> {
    let file =
        std::fs::File::create(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    trace
        .write_csv(&mut out)
        .and_then(|()| out.flush())
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    if trace.dropped() > 0 {
        tracing::warn!(
            "{}: the last {} ticks did not fit the trace",
            path.display(),
            trace.dropped()
        );
    }
    Ok(())
}

fn plot(path: &Path, motion: &Path, trace: &Trace, joints: &JointSet) -> Result<(), PlotError> {
    let rows: Vec<_> = (0..trace.len()).filter_map(|i| trace.row(i)).collect();
    let t0 = rows.first().map_or(0, |r| r.tick);
    let rate = trace.rate_hz();
    let series: Vec<Series> = joints
        .dofs
        .iter()
        .enumerate()
        .map(|(j, d)| {
            let at = |r: &motiond::backend::sim::TraceRow, v: &[f64]| {
                (
                    (r.tick - t0) as f64 / rate,
                    v.get(j).copied().unwrap_or(f64::NAN),
                )
            };
            Series {
                name: &d.name,
                source: rows.iter().map(|r| at(r, &r.simulated)).collect(),
                curve: rows.iter().map(|r| at(r, &r.commanded)).collect(),
                limits: d.limits.position,
            }
        })
        .collect();
    let title = format!(
        "{}: commanded (line) and simulated (points)",
        motion.display()
    );
    write_svg(path, &title, &series)
}

struct Report<'a> {
    rate: f64,
    played: &'a Played,
    joints: &'a JointSet,
    violations: u64,
}

impl Report<'_> {
    fn ticks(&self) -> u64 {
        self.played.status.latency.count
    }

    fn json(&self) -> serde_json::Value {
        let s = &self.played.status;
        let o = &self.played.obtained;
        let tracking: serde_json::Map<String, serde_json::Value> = self
            .joints
            .dofs
            .iter()
            .zip(&s.max_tracking_error)
            .map(|(d, e)| (d.name.clone(), json!(e)))
            .collect();
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
                   "memory_locked": o.memory_locked},
            "result": self.played.verdict(),
        })
    }

    fn text(&self, motion: &Path) -> String {
        let s = &self.played.status;
        let o = &self.played.obtained;
        let l = &s.latency;
        let mut t = format!(
            "{}: {}\n\
             {} ticks at {} Hz ({:.3} s), {} overruns, {} limit violations\n\
             wake-up latency µs: min {:.1}  p50 {:.1}  p99 {:.1}  p99.9 {:.1}  max {:.1}\n\
             tick execution µs: p50 {:.1}  p99 {:.1}  max {:.1}\n\
             real time: cpu {}, {} priority {}, memory {}\n\
             max tracking error:",
            motion.display(),
            self.played.verdict(),
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
        );
        for (d, e) in self.joints.dofs.iter().zip(&s.max_tracking_error) {
            t.push_str(&format!("\n  {:<24} {e:.6}", d.name));
        }
        t
    }
}
