//! `motiond check MOTION.seq`: maps a motion onto the robot and proves every sample against the
//! limits, as the daemon would before playing it.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::plot;
use motiond::backend::bus::settings::Transport;
use motiond::config::BackendConfig;
use motiond::trajectory::{self, BuildError};

use crate::robot::{self, Failure, RobotArgs, TrajectoryArgs};

#[derive(clap::Args)]
pub struct Args {
    /// The .seq motion to check.
    motion: PathBuf,
    #[command(flatten)]
    robot: RobotArgs,
    /// Control rate in Hz (1 to 8000); default: the configuration's, else 1000.
    #[arg(long, value_name = "HZ", value_parser = robot::parse_rate)]
    rate: Option<f64>,
    #[command(flatten)]
    trajectory: TrajectoryArgs,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Also draw, per joint, position, velocity and acceleration with their limits and where the
    /// proof refused (OUT.svg or OUT.png).
    #[arg(long, value_name = "OUT.svg|OUT.png")]
    plot: Option<PathBuf>,
}

/// Exit 0 when the motion would be played, 1 when it would be refused, 2 when a file is invalid.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match check(&args) {
        Ok(code) => Ok(code),
        Err(f) => f.exit(),
    }
}

fn check(args: &Args) -> Result<ExitCode, Failure> {
    if let Some(path) = &args.plot {
        plot::check_path(path)
            .map_err(|e| Failure::Invalid(vec![format!("motiond check: {e}")]))?;
    }
    robot::check_outputs("check", &[("--plot", args.plot.as_deref())])?;
    let robot = robot::load_or_default(&args.robot, "check")?;
    let motion = motiond::session::load_motion(&args.motion)?;
    let map = robot.map(&motion, &args.motion)?;
    let options = args.trajectory.options(Some(&robot), args.rate);
    let (report, code, drawn) = match trajectory::build(&robot.joints, &motion, &map, &options) {
        Ok(proved) => (proved.report, ExitCode::SUCCESS, Some(proved.trajectory)),
        Err(BuildError::Refused(report)) => (*report, ExitCode::from(1), None),
        Err(e) => {
            return Err(Failure::Invalid(vec![format!(
                "{}: {e}",
                args.motion.display()
            )]));
        }
    };
    if let Some(path) = &args.plot {
        let drawn = match drawn {
            Some(t) => t,
            None => plot::unproved(&robot.joints, &motion, &map, &options)
                .map_err(|e| Failure::Runtime(e.into()))?,
        };
        let figure = plot::proof_figure(
            &args.motion,
            Some(&robot),
            &robot.joints,
            &drawn,
            &motion,
            &map,
            &report,
        );
        plot::write(path, &figure).map_err(|e| Failure::Runtime(e.into()))?;
    }
    let from_model = robot.config.as_ref().map_or(&[][..], |c| &c.from_model[..]);
    // What each serial bus writes to its devices when it opens (Feetech servo settings).
    let prepared: Vec<String> = match robot.config.as_ref().map(|c| &c.backend) {
        Some(BackendConfig::Buses(buses)) => buses
            .iter()
            .filter_map(|b| match b.transport {
                Transport::Serial { family, .. } => Some(family.prepared(b)),
                _ => None,
            })
            .flatten()
            .collect(),
        _ => Vec::new(),
    };
    let text = if args.json {
        let mut json = report.to_json();
        json["motion"] = args.motion.display().to_string().into();
        json["robot"] = robot.name().into();
        json["columns"] = map.names(&robot.joints).collect::<Vec<_>>().into();
        json["bus_settings_from_model"] = from_model
            .iter()
            .map(|f| {
                serde_json::json!({
                    "key": f.key,
                    "value": f.value,
                    "from": format!("{}:{}:{}", f.origin.path.display(), f.origin.line, f.origin.col),
                })
            })
            .collect::<Vec<_>>()
            .into();
        json["servo_settings"] = prepared.clone().into();
        serde_json::to_string_pretty(&json).map_err(|e| Failure::Runtime(e.into()))?
    } else {
        let mut text = String::new();
        if !from_model.is_empty() {
            text.push_str(
                "bus settings from the robot model (the configuration leaves them out):\n",
            );
            for f in from_model {
                text.push_str(&format!(
                    "  {} = {}  ({}:{}:{}, {})\n",
                    f.key,
                    f.value,
                    f.origin.path.display(),
                    f.origin.line,
                    f.origin.col,
                    f.origin.what
                ));
            }
        }
        if !prepared.is_empty() {
            text.push_str(
                "servo settings written when the bus opens (registers that differ, with torque \
                 off; then read back):\n",
            );
            for line in &prepared {
                text.push_str(&format!("  {line}\n"));
            }
        }
        text.push_str(&format!(
            "{} on {} ({} commanded DOFs): {report}",
            args.motion.display(),
            robot.name(),
            robot.joints.len()
        ));
        text
    };
    // A reader that stops early (`| head`) is not an error of the check.
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{text}") {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(Failure::Runtime(e.into())),
        _ => Ok(code),
    }
}
