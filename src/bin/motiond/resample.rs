//! `motiond resample FILE.seq --rate HZ`: a motion on a fixed control rate, as CSV or as a .seq.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use motiond::plot::{self, Series};
use motiond::seq::{Motion, Timing};
use motiond::trajectory::{self, BuildError, ColumnMap, Cursor, JointSet, Proved, Trajectory};

use crate::robot::{self, Failure, RobotArgs, TrajectoryArgs};

#[derive(clap::Args)]
pub struct Args {
    /// The .seq motion to resample.
    file: PathBuf,
    /// Control rate in Hz (ticks at k / HZ); default: the configuration's, else 1000.
    #[arg(long, value_name = "HZ")]
    rate: Option<f64>,
    #[command(flatten)]
    trajectory: TrajectoryArgs,
    #[command(flatten)]
    robot: RobotArgs,
    /// Output format: csv (time and one column per joint) or seq (a fixed-rate Choreonoid .seq).
    #[arg(long, value_name = "FORMAT", default_value = "csv", value_parser = ["csv", "seq"])]
    format: String,
    /// Write here instead of stdout.
    #[arg(short, long, value_name = "OUT")]
    output: Option<PathBuf>,
    /// Also draw, per joint, the source samples, the resampled curve and the limit bands (SVG).
    #[arg(long, value_name = "OUT.svg")]
    plot: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match resample(&args) {
        Ok(code) => Ok(code),
        Err(f) => f.exit(),
    }
}

fn resample(args: &Args) -> Result<ExitCode, Failure> {
    let robot = robot::load(&args.robot)?;
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
    write_output(args, &proved.trajectory, &map, &names, &motion).map_err(Failure::Runtime)?;
    if let Some(svg) = &args.plot {
        draw(svg, &args.file, &motion, &proved, &joints, &map, &names)
            .map_err(|e| Failure::Runtime(e.into()))?;
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
    t: &Trajectory,
    map: &ColumnMap,
    names: &[&str],
    motion: &Motion,
) -> anyhow::Result<()> {
    let sink: Box<dyn Write> = match &args.output {
        Some(path) => {
            Box::new(std::fs::File::create(path).with_context(|| format!("{}", path.display()))?)
        }
        None => Box::new(std::io::stdout().lock()),
    };
    let mut w = BufWriter::new(sink);
    if args.format == "seq" {
        let dropped: Vec<&str> = motion
            .components
            .iter()
            .filter(|c| c.content != motiond::seq::JOINT_DISPLACEMENT)
            .map(|c| c.content.as_str())
            .collect();
        if !dropped.is_empty() {
            tracing::warn!(
                "only JointDisplacement is resampled; not written: {}",
                dropped.join(", ")
            );
        }
        write_seq(&mut w, t, map)?;
    } else {
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
    }
    w.flush()?;
    Ok(())
}

/// A fixed-rate format-version-2 .seq, laid out like Choreonoid's own sample files.
fn write_seq(w: &mut impl Write, t: &Trajectory, map: &ColumnMap) -> std::io::Result<()> {
    let rate = t.rate_hz();
    let frames = t.ticks();
    writeln!(w, "type: CompositeSeq")?;
    writeln!(w, "content: BodyMotion")?;
    writeln!(w, "formatVersion: 2")?;
    writeln!(w, "frameRate: {rate}")?;
    writeln!(w, "numFrames: {frames}")?;
    writeln!(w, "components:")?;
    writeln!(w, "  - type: MultiValueSeq")?;
    writeln!(w, "    content: JointDisplacement")?;
    writeln!(w, "    frameRate: {rate}")?;
    writeln!(w, "    numFrames: {frames}")?;
    writeln!(w, "    numParts: {}", map.len())?;
    writeln!(w, "    frames:")?;
    each_tick(t, map, |_, cols| {
        write!(w, "      - [ ")?;
        for (i, v) in cols.iter().enumerate() {
            if i > 0 {
                write!(w, ", ")?;
            }
            write!(w, "{v}")?;
        }
        writeln!(w, " ]")
    })
}

fn draw(
    svg: &Path,
    file: &Path,
    motion: &Motion,
    proved: &Proved,
    joints: &JointSet,
    map: &ColumnMap,
    names: &[&str],
) -> Result<(), plot::PlotError> {
    let Some(seq) = motion.joint_displacement() else {
        return Ok(());
    };
    let cols = map.len();
    let rows = seq.rows();
    let first = if rows > 0 { seq.timing.time(0) } else { 0.0 };
    let speed = proved.report.speed / proved.report.retimed.unwrap_or(1.0);
    let time = |i: usize| (seq.timing.time(i) - first) / speed;
    let mut series: Vec<Series> = names
        .iter()
        .zip(map.columns())
        .enumerate()
        .map(|(c, (name, &i))| Series {
            name,
            source: (0..rows)
                .filter_map(|r| seq.values.get(r * cols + c).map(|&v| (time(r), v)))
                .collect(),
            curve: Vec::with_capacity(proved.trajectory.ticks() as usize),
            limits: joints
                .dofs
                .get(i)
                .map_or(motiond::skel::Limits::UNBOUNDED, |d| d.limits.position),
        })
        .collect();
    // Writing into a Vec cannot fail.
    let _ = each_tick(&proved.trajectory, map, |time, values| {
        for (s, &v) in series.iter_mut().zip(values) {
            s.curve.push((time, v));
        }
        Ok(())
    });
    let kind = match seq.timing {
        Timing::Fixed { frame_rate } => format!("{frame_rate} Hz"),
        Timing::Timed { .. } => "timed".to_string(),
    };
    let title = format!(
        "{} ({kind}) → {} Hz, {}",
        file.display(),
        proved.report.rate_hz,
        proved.report.interpolation.as_str()
    );
    plot::write_svg(svg, &title, &series)
}
