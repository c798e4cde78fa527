//! An episode's elements → the robot's joints, in the robot's units, and the frames' timing.

use std::io;
use std::path::Path;

use super::{Episode, Error};
use crate::diag::Num;
use crate::motion::seq::{self, WriteError, Written};

/// A joint the imported motion has a column for, in column order: its name and the model's
/// position range (for the joints LeRobot records 0–100).
#[derive(Debug, Clone, PartialEq)]
pub struct Joint {
    pub name: String,
    pub lower: f64,
    pub upper: f64,
}

/// When the frames happen.
#[derive(Debug, Clone, PartialEq)]
pub enum Frames {
    /// Frame `i` at `i / fps` from the first: the time stamps are the dataset's frame grid.
    Fixed { fps: f64 },
    /// Each frame at its own time (seconds): frames were dropped, or stamped by a clock; `fps`
    /// is the dataset's nominal rate.
    Timed { fps: f64, times: Vec<f64> },
}

/// A motion imported from an episode: `frames × joints` positions (rad or m), row-major, one
/// column per joint in the order asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct Imported {
    pub joint_names: Vec<String>,
    pub rows: Vec<f64>,
    pub frames: Frames,
}

impl Imported {
    pub fn frame_count(&self) -> usize {
        self.rows.len() / self.joint_names.len().max(1)
    }

    /// Writes the motion to `path` as a .seq file (atomically; variable-interval when timed),
    /// with the joints' names as `partLabels`.
    pub fn write(&self, path: &Path) -> Result<(), WriteError> {
        match &self.frames {
            Frames::Fixed { .. } => seq::write_motion(path, &self.written()),
            Frames::Timed { times, .. } => seq::write_timed(path, &self.written(), times),
        }
    }

    /// [`Imported::write`] to a stream (e.g. stdout).
    pub fn write_to(&self, out: &mut impl io::Write) -> Result<(), WriteError> {
        match &self.frames {
            Frames::Fixed { .. } => seq::write_to(out, &self.written()),
            Frames::Timed { times, .. } => seq::write_timed_to(out, &self.written(), times),
        }
    }

    fn written(&self) -> Written<'_> {
        let (Frames::Fixed { fps } | Frames::Timed { fps, .. }) = self.frames;
        Written {
            frame_rate: fps,
            columns: self.joint_names.len(),
            joint_names: Some(&self.joint_names),
            rows: &self.rows,
            link: None,
            zmp: None,
        }
    }
}

/// How far a time stamp may be from the frame grid and still be on it: LeRobot's own tolerance
/// (`tolerance_s = 1e-4`), or a few float32 steps at long times (LeRobot stores time stamps as
/// float32, whose step passes 1e-4 s after about 30 minutes).
fn on_grid(t: f64, nominal: f64) -> bool {
    (t - nominal).abs() <= 1e-4_f64.max(4.0 * f64::from(f32::EPSILON) * nominal.abs())
}

/// Maps `episode`'s elements (`NAME.pos`) onto `joints`, converting LeRobot's units: degrees to
/// radians, and for the joints named in `percent` (LeRobot's `RANGE_0_100`, its grippers) 0–100
/// to the joint's position range, 0 at `lower`. Every joint needs an element and every element
/// a joint. `info` is the file the names came from, for messages.
pub fn convert(
    info: &Path,
    episode: &Episode,
    fps: f64,
    joints: &[Joint],
    percent: &[String],
) -> Result<Imported, Error> {
    let joint_names: Vec<String> = joints.iter().map(|j| j.name.clone()).collect();
    // For each element, the column it fills.
    let mut columns = Vec::with_capacity(episode.names.len());
    for (element, name) in episode.names.iter().enumerate() {
        let joint = name.strip_suffix(".pos").unwrap_or(name);
        match joints.iter().position(|j| j.name == joint) {
            Some(c) if !columns.contains(&c) => columns.push(c),
            _ => {
                return Err(Error::UnknownJoint {
                    path: info.to_path_buf(),
                    column: episode.column.clone(),
                    element,
                    name: name.clone(),
                    joints: joint_names,
                });
            }
        }
    }
    if let Some(missing) = (0..joints.len()).find(|c| !columns.contains(c)) {
        return Err(Error::MissingJoint {
            path: info.to_path_buf(),
            column: episode.column.clone(),
            joint: joints[missing].name.clone(),
            names: episode.names.clone(),
        });
    }
    let scale: Vec<Scale> = columns
        .iter()
        .map(|&c| {
            let j = &joints[c];
            if !percent.contains(&j.name) {
                return Ok(Scale::Degrees);
            }
            if !(j.lower.is_finite() && j.upper.is_finite() && j.lower < j.upper) {
                return Err(Error::Joint {
                    joint: j.name.clone(),
                    message: format!(
                        "recorded 0–100 over its range, but its position range is [{}, {}]; \
                         give it finite limits in the model",
                        Num(j.lower),
                        Num(j.upper)
                    ),
                });
            }
            Ok(Scale::Percent {
                lower: j.lower,
                span: j.upper - j.lower,
            })
        })
        .collect::<Result<_, _>>()?;
    let width = episode.names.len();
    let mut rows = vec![0.0; episode.values.len()];
    for (src, dst) in episode
        .values
        .chunks_exact(width)
        .zip(rows.chunks_exact_mut(width))
    {
        for ((&v, &c), s) in src.iter().zip(&columns).zip(&scale) {
            dst[c] = match *s {
                Scale::Degrees => v.to_radians(),
                Scale::Percent { lower, span } => lower + v / 100.0 * span,
            };
        }
    }
    let t0 = episode.times.first().copied().unwrap_or(0.0);
    let fixed = episode
        .times
        .iter()
        .enumerate()
        .all(|(i, &t)| on_grid(t - t0, i as f64 / fps));
    let frames = if fixed {
        Frames::Fixed { fps }
    } else {
        Frames::Timed {
            fps,
            times: episode.times.clone(),
        }
    };
    Ok(Imported {
        joint_names,
        rows,
        frames,
    })
}

#[derive(Clone, Copy)]
enum Scale {
    Degrees,
    Percent { lower: f64, span: f64 },
}
