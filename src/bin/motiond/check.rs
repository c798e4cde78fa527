//! `motiond check MOTION.seq`: maps a motion onto the robot and proves every sample against the
//! limits, as the daemon would before playing it.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use motiond::trajectory::{self, BuildError};

use crate::robot::{self, Failure, RobotArgs, TrajectoryArgs};

#[derive(clap::Args)]
pub struct Args {
    /// The .seq motion to check.
    motion: PathBuf,
    #[command(flatten)]
    robot: RobotArgs,
    /// Control rate in Hz; default: the configuration's, else 1000.
    #[arg(long, value_name = "HZ")]
    rate: Option<f64>,
    #[command(flatten)]
    trajectory: TrajectoryArgs,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// Exit 0 when the motion would be played, 1 when it would be refused, 2 when a file is invalid.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match check(&args) {
        Ok(code) => Ok(code),
        Err(f) => f.exit(),
    }
}

fn check(args: &Args) -> Result<ExitCode, Failure> {
    let Some(robot) = robot::load(&args.robot)? else {
        return Err(Failure::Invalid(vec![
            "motiond check: name the robot with --config FILE or --skel FILE".to_string(),
        ]));
    };
    let motion = motiond::session::load_motion(&args.motion)?;
    let map = robot.map(&motion, &args.motion)?;
    let options = args.trajectory.options(Some(&robot), args.rate);
    let (report, code) = match trajectory::build(&robot.joints, &motion, &map, &options) {
        Ok(proved) => (proved.report, ExitCode::SUCCESS),
        Err(BuildError::Refused(report)) => (*report, ExitCode::from(1)),
        Err(e) => {
            return Err(Failure::Invalid(vec![format!(
                "{}: {e}",
                args.motion.display()
            )]));
        }
    };
    let text = if args.json {
        let mut json = report.to_json();
        json["motion"] = args.motion.display().to_string().into();
        json["robot"] = robot.name().into();
        json["columns"] = map.names(&robot.joints).collect::<Vec<_>>().into();
        serde_json::to_string_pretty(&json).map_err(|e| Failure::Runtime(e.into()))?
    } else {
        format!(
            "{} on {} ({} commanded DOFs): {report}",
            args.motion.display(),
            robot.name(),
            robot.joints.len()
        )
    };
    // A reader that stops early (`| head`) is not an error of the check.
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{text}") {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(Failure::Runtime(e.into())),
        _ => Ok(code),
    }
}
