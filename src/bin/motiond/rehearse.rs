//! `motiond rehearse SCRIPT`: an operator session — requests, E-stop, drive faults, a hand in
//! teach-in, signals, a stalled loop — played against the daemon on the simulated backend, on a
//! manual clock, the same way every run. The library's [`Rehearsal`] does the work.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use motiond::config;
use motiond::rehearse::{self, Rehearsal, Script};
use motiond::rt::TraceRow;

use crate::robot::{self, Failure, RobotArgs};
use crate::trace_out::TraceOut;

#[derive(clap::Args)]
pub struct Args {
    /// The script (YAML): `steps:`, each with `at:` (seconds from tick 0) and one of request,
    /// estop, fault, hand, signal, stall_s; optional `epoch:` and `end:`.
    script: PathBuf,
    /// The configuration file; default: $MOTIOND_CONFIG, else /etc/motiond/motiond.yaml for an
    /// installed motiond, else config/motiond.yaml of a checkout. Its buses are replaced by the
    /// simulated backend.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Write every loop tick as CSV (the columns of `motiond play --trace`), or as MCAP when the
    /// name ends in .mcap (the flight recorder's channels, with the loop's events).
    #[arg(long, value_name = "OUT.csv|OUT.mcap")]
    trace: Option<PathBuf>,
    /// Report format.
    #[arg(long, value_name = "FORMAT", default_value = "text", value_parser = ["text", "json"])]
    report: String,
}

/// Exit 0 when the script ran (whatever the replies), 2 for an invalid script or configuration.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match rehearse(args) {
        Ok(code) => Ok(code),
        Err(f) => f.exit(),
    }
}

fn rehearse(args: Args) -> Result<ExitCode, Failure> {
    robot::check_outputs("rehearse", &[("--trace", args.trace.as_deref())])?;
    let robot_args = RobotArgs {
        config: Some(args.config.clone().unwrap_or_else(config::default_path)),
        ..RobotArgs::default()
    };
    let Some(robot) = robot::load(&robot_args)? else {
        return Err(Failure::Invalid(vec![
            "motiond rehearse: no robot configured".into(),
        ]));
    };
    let script = Script::load(&args.script, &robot.joints)?;
    // CLOCK_REALTIME at tick 0, for the MCAP trace's log times.
    let script_epoch_ns = (script.epoch_s * 1e9).round().max(0.0) as u64;
    let mut rehearsal = match Rehearsal::new(robot, script) {
        Ok(r) => r,
        Err(rehearse::Error::Invalid(found)) => return Err(Failure::diagnostics(found)),
        Err(e @ rehearse::Error::Setup(_)) => return Err(Failure::Runtime(e.into())),
    };
    let joints = rehearsal.joints().clone();
    let trace = match &args.trace {
        Some(path) => {
            let out = TraceOut::create(path, &joints, rehearsal.rate_hz(), script_epoch_ns)
                .map_err(|e| failed_at(path, &e))?;
            Some(Arc::new(Mutex::new((out, None::<anyhow::Error>))))
        }
        None => None,
    };
    if let Some(trace) = &trace {
        let trace = trace.clone();
        rehearsal.trace_to(Box::new(move |row: &TraceRow| {
            if let Ok(mut guard) = trace.lock() {
                let (writer, failed) = &mut *guard;
                if failed.is_none()
                    && let Err(e) = writer.row(row)
                {
                    *failed = Some(e);
                }
            }
        }));
    }
    let report = rehearsal.run();
    if let (Some(trace), Some(path)) = (trace, &args.trace) {
        let Ok(mutex) = Arc::try_unwrap(trace) else {
            return Err(Failure::Runtime(anyhow::anyhow!(
                "{}: the trace is still in use",
                path.display()
            )));
        };
        let (writer, failed) = mutex
            .into_inner()
            .map_err(|_| Failure::Runtime(anyhow::anyhow!("{}: poisoned", path.display())))?;
        if let Some(e) = failed {
            return Err(failed_at(path, &e));
        }
        writer.finish().map_err(|e| failed_at(path, &e))?;
    }
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let written = if args.report == "json" {
        report.write_json(&joints, &mut out)
    } else {
        report.write_text(&joints, &mut out)
    }
    .and_then(|()| out.flush());
    if let Err(e) = written
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        return Err(Failure::Runtime(e.into()));
    }
    Ok(ExitCode::SUCCESS)
}

/// A trace that could not be written: the file and why.
fn failed_at(path: &Path, e: &anyhow::Error) -> Failure {
    Failure::Runtime(anyhow::anyhow!("{}: {e:#}", path.display()))
}
