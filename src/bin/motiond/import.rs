//! `motiond import lerobot DATASET_DIR --episode N`: a recorded LeRobot episode as a .seq motion
//! for the robot, its columns the robot's joints by name in the robot's units.

use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use motiond::diag::Num;
use motiond::motion::lerobot::{self, Dataset, Frames, Joint};

use crate::robot::{self, Failure, RobotArgs};

#[derive(clap::Subcommand)]
pub enum Source {
    /// A LeRobot dataset (format v3.0, or v2.1/v2.0): one episode's `action` or
    /// `observation.state`, degrees to radians and the gripper's 0–100 to its joint range, timed
    /// by the dataset's `timestamp`.
    Lerobot(LerobotArgs),
}

#[derive(clap::Args)]
pub struct LerobotArgs {
    /// The dataset's folder (holding meta/info.json and data/).
    dataset: PathBuf,
    /// The episode to import (its `episode_index`).
    #[arg(long, value_name = "N")]
    episode: u64,
    /// The feature to import: `action` (what was commanded; what lerobot-replay sends) or
    /// `observation.state` (what the arm measured).
    #[arg(long, value_name = "FEATURE", default_value = "action",
          value_parser = ["action", "observation.state"])]
    column: String,
    /// A joint LeRobot records 0–100 over its range (its RANGE_0_100 mode): 0 is the joint's
    /// lower position limit, 100 the upper. Repeat for several; default: `gripper`. Every other
    /// joint is in degrees (LeRobot's DEGREES mode).
    #[arg(long, value_name = "JOINT")]
    percent: Vec<String>,
    /// Write the .seq here (atomically) instead of stdout.
    #[arg(short, long, value_name = "OUT.seq")]
    output: Option<PathBuf>,
    #[command(flatten)]
    robot: RobotArgs,
}

pub fn run(source: Source) -> anyhow::Result<ExitCode> {
    let Source::Lerobot(args) = source;
    match import(&args) {
        Ok(code) => Ok(code),
        Err(f) => f.exit(),
    }
}

fn import(args: &LerobotArgs) -> Result<ExitCode, Failure> {
    robot::check_outputs("import", &[("--output", args.output.as_deref())])?;
    let robot = robot::load_or_default(&args.robot, "import")?;
    let joints = robot
        .column_names()
        .into_iter()
        .map(|name| {
            let (lower, upper) = robot
                .model_range(&name)
                .unwrap_or((f64::NEG_INFINITY, f64::INFINITY));
            Joint { name, lower, upper }
        })
        .collect::<Vec<_>>();
    let percent = if args.percent.is_empty() {
        vec!["gripper".to_string()]
    } else {
        args.percent.clone()
    };
    if let Some(unknown) = args
        .percent
        .iter()
        .find(|p| !joints.iter().any(|j| &j.name == *p))
    {
        return Err(Failure::Invalid(vec![format!(
            "motiond import: --percent {unknown}: the robot has no such joint; its joints are {}",
            joints
                .iter()
                .map(|j| j.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )]));
    }
    let invalid = |e: lerobot::Error| Failure::Invalid(vec![e.to_string()]);
    let dataset = Dataset::open(&args.dataset).map_err(invalid)?;
    let episode = dataset.read(args.episode, &args.column).map_err(invalid)?;
    let imported = lerobot::convert(
        dataset.info_path(),
        &episode,
        dataset.fps(),
        &joints,
        &percent,
    )
    .map_err(invalid)?;
    let write = |e: motiond::motion::seq::WriteError| Failure::Runtime(e.into());
    match &args.output {
        Some(path) => {
            imported.write(path).map_err(write)?;
            let timing = match &imported.frames {
                Frames::Fixed { fps } => format!("at {} fps", Num(*fps)),
                Frames::Timed { fps, times } => {
                    let span = times.last().unwrap_or(&0.0) - times.first().unwrap_or(&0.0);
                    // Saturating: a span of 1e300 s counts i64::MAX frames, not an overflow.
                    let missing = ((span * fps).round() as i64)
                        .saturating_add(1)
                        .saturating_sub(times.len() as i64);
                    format!(
                        "variable interval (its time stamps are off the {} fps grid{})",
                        Num(*fps),
                        if missing > 0 {
                            format!(": about {missing} frames missing")
                        } else {
                            String::new()
                        }
                    )
                }
            };
            eprintln!(
                "{}: episode {} `{}` of {} ({}), {} frames of {} joints, {timing}",
                path.display(),
                args.episode,
                args.column,
                args.dataset.display(),
                dataset.version(),
                imported.frame_count(),
                imported.joint_names.len(),
            );
        }
        None => {
            let mut out = BufWriter::new(std::io::stdout().lock());
            imported.write_to(&mut out).map_err(write)?;
            out.flush().map_err(|e| Failure::Runtime(e.into()))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
