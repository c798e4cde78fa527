//! `motiond resample FILE.seq --rate HZ`: a motion on a fixed control rate, as CSV or as a .seq.

use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use crate::plot;
use anyhow::Context;
use motiond::motion::seq::{self, LinkPoses, Motion, Written, Zmp};
use motiond::trajectory::{
    self, BuildError, ColumnMap, Cursor, JointSet, PointTrack, PoseTrack, Proved, Trajectory,
};
use nalgebra::{Isometry3, Vector3};

use crate::robot::{self, Failure, RobotArgs, TrajectoryArgs};

#[derive(clap::Args)]
pub struct Args {
    /// The .seq motion to resample.
    file: PathBuf,
    /// Control rate in Hz (ticks at k / HZ; 1 to 8000); default: the configuration's, else 1000.
    #[arg(long, value_name = "HZ", value_parser = robot::parse_rate)]
    rate: Option<f64>,
    #[command(flatten)]
    trajectory: TrajectoryArgs,
    #[command(flatten)]
    robot: RobotArgs,
    /// Resample without a robot: columns c0, c1, …, no limits and no proof (otherwise the
    /// robot of --config, --model or the default configuration).
    #[arg(long, conflicts_with_all = ["config", "model"])]
    no_robot: bool,
    /// Output format: csv (time and one column per joint) or seq (a fixed-rate Choreonoid .seq).
    #[arg(long, value_name = "FORMAT", default_value = "csv", value_parser = ["csv", "seq"])]
    format: String,
    /// Write here instead of stdout.
    #[arg(short, long, value_name = "OUT")]
    output: Option<PathBuf>,
    /// Also draw, per joint, position, velocity and acceleration with their limits, the source
    /// samples and where the proof refused (OUT.svg or OUT.png; drawn for a refused motion too).
    #[arg(long, value_name = "OUT.svg|OUT.png")]
    plot: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match resample(&args) {
        Ok(code) => Ok(code),
        Err(f) => f.exit(),
    }
}

fn resample(args: &Args) -> Result<ExitCode, Failure> {
    if let Some(path) = &args.plot {
        plot::check_path(path)
            .map_err(|e| Failure::Invalid(vec![format!("motiond resample: {e}")]))?;
    }
    robot::check_outputs(
        "resample",
        &[
            ("--output", args.output.as_deref()),
            ("--plot", args.plot.as_deref()),
        ],
    )?;
    let robot = if args.no_robot {
        None
    } else {
        Some(robot::load_or_default(&args.robot, "resample")?)
    };
    let motion = motiond::session::load_motion(&args.file)?;
    let Some(seq) = motion.joint_displacement() else {
        return Err(Failure::Invalid(vec![format!(
            "{}:1:1: the motion has no JointDisplacement component to resample",
            args.file.display()
        )]));
    };
    let (joints, map, options) = match &robot {
        Some(r) => (
            r.joints.clone(),
            r.map(&motion, &args.file)?,
            args.trajectory.options(Some(r), args.rate),
        ),
        None => {
            let joints = JointSet::unconstrained(seq.num_parts);
            let map = ColumnMap::in_dof_order(&joints, seq.num_parts)
                .map_err(|e| Failure::Runtime(e.into()))?;
            (joints, map, args.trajectory.options(None, args.rate))
        }
    };
    let proved = match trajectory::build(&joints, &motion, &map, &options) {
        Ok(p) => p,
        Err(BuildError::Refused(report)) => {
            eprintln!("{}: refused:\n{report}", args.file.display());
            if let Some(path) = &args.plot {
                let drawn = plot::unproved(&joints, &motion, &map, &options)
                    .map_err(|e| Failure::Runtime(e.into()))?;
                let figure = plot::proof_figure(
                    &args.file,
                    robot.as_ref(),
                    &joints,
                    &drawn,
                    &motion,
                    &map,
                    &report,
                );
                plot::write(path, &figure).map_err(|e| Failure::Runtime(e.into()))?;
            }
            return Ok(ExitCode::from(1));
        }
        Err(e) => {
            return Err(Failure::Invalid(vec![format!(
                "{}: {e}",
                args.file.display()
            )]));
        }
    };
    if !proved.report.clamped.is_empty() || proved.report.retimed.is_some() {
        eprintln!(
            "motiond: {}: {}",
            args.file.display(),
            proved.report.summary()
        );
    }
    let names: Vec<&str> = map.names(&joints).collect();
    write_output(args, &proved, &map, &names, robot.is_some(), &motion)
        .map_err(Failure::Runtime)?;
    if let Some(path) = &args.plot {
        let figure = plot::proof_figure(
            &args.file,
            robot.as_ref(),
            &joints,
            &proved.trajectory,
            &motion,
            &map,
            &proved.report,
        );
        plot::write(path, &figure).map_err(|e| Failure::Runtime(e.into()))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Calls `row(time, columns)` for every tick, with the motion's columns in column order.
fn each_tick(
    t: &Trajectory,
    map: &ColumnMap,
    mut row: impl FnMut(f64, &[f64]) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut cursor = Cursor::default();
    let mut cols = vec![0.0; map.len()];
    for k in 0..t.ticks() {
        t.column_positions(&mut cursor, k, &mut cols)
            .ok_or_else(|| std::io::Error::other("not a resampled motion"))?;
        row(k as f64 / t.rate_hz(), &cols)?;
    }
    Ok(())
}

fn write_output(
    args: &Args,
    proved: &Proved,
    map: &ColumnMap,
    names: &[&str],
    labelled: bool,
    motion: &Motion,
) -> anyhow::Result<()> {
    if args.format == "seq" {
        let speed = proved.report.speed / proved.report.retimed.unwrap_or(1.0);
        let resampled = Resampled::new(&proved.trajectory, map, motion, speed)?;
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let written = resampled.written(labelled.then_some(&names[..]));
        match &args.output {
            Some(path) => seq::write_motion(path, &written)?,
            None => {
                let mut w = BufWriter::new(std::io::stdout().lock());
                seq::write_to(&mut w, &written)?;
                w.flush()?;
            }
        }
        return Ok(());
    }
    let t = &proved.trajectory;
    let sink: Box<dyn Write> = match &args.output {
        Some(path) => {
            Box::new(std::fs::File::create(path).with_context(|| format!("{}", path.display()))?)
        }
        None => Box::new(std::io::stdout().lock()),
    };
    let mut w = BufWriter::new(sink);
    write!(w, "time")?;
    for n in names {
        write!(w, ",{n}")?;
    }
    writeln!(w)?;
    each_tick(t, map, |time, cols| {
        write!(w, "{time}")?;
        for v in cols {
            write!(w, ",{v}")?;
        }
        writeln!(w)
    })?;
    w.flush()?;
    Ok(())
}

/// A motion on the tick grid: the joint columns, and the LinkPosition and ZMP components
/// sampled at the same ticks (straight lines, slerp for orientations).
struct Resampled {
    rate_hz: f64,
    columns: usize,
    rows: Vec<f64>,
    link: Option<(usize, Vec<Isometry3<f64>>)>,
    zmp: Option<(bool, Vec<Vector3<f64>>)>,
}

impl Resampled {
    /// `speed`: the speed the trajectory plays the motion at (retiming included).
    fn new(t: &Trajectory, map: &ColumnMap, motion: &Motion, speed: f64) -> anyhow::Result<Self> {
        let others: Vec<&str> = motion
            .components
            .iter()
            .map(|c| c.content.as_str())
            .filter(|c| ![seq::JOINT_DISPLACEMENT, seq::LINK_POSITION, seq::ZMP].contains(c))
            .collect();
        if !others.is_empty() {
            tracing::warn!(
                "only JointDisplacement, LinkPosition and ZMP are resampled; not written: {}",
                others.join(", ")
            );
        }
        let ticks = usize::try_from(t.ticks())?;
        let mut rows = Vec::with_capacity(ticks * map.len());
        each_tick(t, map, |_, cols| {
            rows.extend_from_slice(cols);
            Ok(())
        })?;
        // Every track starts at the JointDisplacement's first sample, as the ticks do.
        let start = motion
            .joint_displacement()
            .map_or(0.0, |j| j.timing.time(0));
        let tick_time = |k: usize, first: f64| k as f64 / t.rate_hz() - (first - start) / speed;
        let link = match motion.link_position() {
            Some(seq) => {
                let tracks = (0..seq.num_parts)
                    .map(|part| PoseTrack::new(seq, part, speed))
                    .collect::<Result<Vec<_>, _>>()?;
                let first = seq.timing.time(0);
                let poses = (0..ticks)
                    .flat_map(|k| tracks.iter().map(move |p| p.pose_at(tick_time(k, first))))
                    .collect();
                Some((seq.num_parts, poses))
            }
            None => None,
        };
        let zmp = match motion.zmp() {
            Some(seq) => {
                let track = PointTrack::new(seq, speed)?;
                let first = seq.timing.time(0);
                let points = (0..ticks)
                    .map(|k| track.point_at(tick_time(k, first)))
                    .collect();
                Some((seq.root_relative, points))
            }
            None => None,
        };
        Ok(Resampled {
            rate_hz: t.rate_hz(),
            columns: map.len(),
            rows,
            link,
            zmp,
        })
    }

    fn written<'a>(&'a self, joint_names: Option<&'a [String]>) -> Written<'a> {
        Written {
            frame_rate: self.rate_hz,
            columns: self.columns,
            joint_names,
            rows: &self.rows,
            link: self.link.as_ref().map(|(parts, poses)| LinkPoses {
                parts: *parts,
                poses,
            }),
            zmp: self.zmp.as_ref().map(|(root_relative, points)| Zmp {
                root_relative: *root_relative,
                points,
            }),
        }
    }
}
