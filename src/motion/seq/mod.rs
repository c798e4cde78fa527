//! Choreonoid body motion files (.seq, YAML) → [`Motion`].
//!
//! Accepts what Choreonoid accepts (format versions 1–4, both key spellings, inherited keys, old
//! content names) and refuses, with `FILE:LINE:COL: message`, what would make a robot move on
//! ambiguous data (see `../shared/docs/policy.md`). Timed rows (`hasFrameTime`) keep their time
//! stamps as written; putting them on the control rate is `trajectory`'s job.
//! This module and `config` are the only ones that know YAML.
//!
//! How it reads: a 10-minute 1 kHz motion is a ~150 MB file that must load in about a second, and
//! every error must point at its line and column. A generic YAML value tree is neither fast nor
//! small enough, and serde_yaml does not say where a node was written. So two readers build one
//! positioned tree (`tree`, with frame rows held compactly as one `Vec<f64>`): the fast scanner
//! (`fast`) for the YAML subset .seq files are written in, and the general reader (`general`,
//! yaml-rust2 events) for everything else, taken whenever the fast one declines. One semantic layer
//! (`build`) turns the tree into a [`Motion`] or the list of problems, so the readers cannot
//! disagree on meaning; property tests (`tests.rs`) check they build the same tree.

use std::path::Path;

use nalgebra::{Isometry3, Vector3};

use crate::diag::{Diagnostic, Diagnostics};

mod build;
mod fast;
mod general;
mod tree;
pub mod write;

pub use write::{
    LinkPoses, WriteError, Writer, Written, Zmp, write_motion, write_timed, write_timed_to,
    write_to,
};

/// Frame rates a .seq may declare (frames per second). Choreonoid validates none (it takes 0);
/// motiond plays samples onto a control loop of at most 8 kHz, so a rate whose frames are more
/// than 100 s apart or closer than 10 µs is a mistake of units or a damaged file — and `1e308` or
/// `1e-308` would make a motion of one tick or of more ticks than a machine can count.
pub const FRAME_RATE_RANGE: std::ops::RangeInclusive<f64> = 0.01..=100_000.0;

/// The latest time stamp a timed row may carry, and the longest motion played: a week.
pub const MAX_TIME_S: f64 = 7.0 * 24.0 * 3600.0;

#[cfg(test)]
mod tests;

/// A loaded body motion.
#[derive(Debug, Clone, PartialEq)]
pub struct Motion {
    /// Top-level format version (1.0 when absent).
    pub format_version: f64,
    /// Top-level frame rate, if given.
    pub frame_rate: Option<f64>,
    /// Recognised components in document order (a later component of the same content replaces an
    /// earlier one, as in Choreonoid).
    pub components: Vec<Component>,
    /// Components of unknown type, skipped with a warning as Choreonoid does.
    pub skipped: Vec<Skipped>,
}

impl Motion {
    /// The joint trajectory (`JointDisplacement`, or its older names).
    pub fn joint_displacement(&self) -> Option<&MultiValueSeq> {
        self.components.iter().find_map(|c| match &c.data {
            Channel::Values(v) if c.content == JOINT_DISPLACEMENT => Some(v),
            _ => None,
        })
    }

    /// Link poses (`LinkPosition`); part 0 is the root link.
    pub fn link_position(&self) -> Option<&MultiSe3Seq> {
        self.components.iter().find_map(|c| match &c.data {
            Channel::Poses(p) if c.content == LINK_POSITION => Some(p),
            _ => None,
        })
    }

    /// The names of the joint columns (`partLabels` of the JointDisplacement component, as
    /// [`write`] writes them), when the file gives them.
    pub fn joint_names(&self) -> Option<&[String]> {
        self.components
            .iter()
            .find(|c| c.content == JOINT_DISPLACEMENT && matches!(c.data, Channel::Values(_)))
            .and_then(|c| c.part_labels.as_ref())
            .map(|l| l.names.as_slice())
    }

    /// The JointDisplacement component's `partLabels`, with where each name is written.
    pub fn joint_labels(&self) -> Option<&PartLabels> {
        self.components
            .iter()
            .find(|c| c.content == JOINT_DISPLACEMENT && matches!(c.data, Channel::Values(_)))
            .and_then(|c| c.part_labels.as_ref())
    }

    /// One diagnostic per component whose `numFrames` differs from the frame rows the file
    /// holds: the sign of a file cut short at a line boundary. `inspect` warns; what plays a
    /// motion refuses it.
    pub fn frame_count_mismatches(&self, path: &Path) -> Vec<Diagnostic> {
        self.components
            .iter()
            .enumerate()
            .filter_map(|(i, c)| {
                let declared = c.declared_frames.as_ref()?;
                let rows = c.data.rows();
                if declared.text.trim().parse::<u64>().ok() == u64::try_from(rows).ok() {
                    return None;
                }
                Some(Diagnostic::new(
                    path,
                    declared.line,
                    declared.col,
                    format!(
                        "component {} ({}): numFrames is {} but the file holds {rows} frame rows; \
                         it may have been cut short — write it again, or correct numFrames if \
                         the rows are complete",
                        i + 1,
                        c.content,
                        declared.text
                    ),
                ))
            })
            .collect()
    }

    pub fn zmp(&self) -> Option<&Vector3Seq> {
        self.components.iter().find_map(|c| match &c.data {
            Channel::Vectors(v) if c.content == ZMP => Some(v),
            _ => None,
        })
    }
}

/// Normalised content names (format version 2 spelling).
pub const JOINT_DISPLACEMENT: &str = "JointDisplacement";
pub const LINK_POSITION: &str = "LinkPosition";
pub const ZMP: &str = "ZMP";

#[derive(Debug, Clone, PartialEq)]
pub struct Component {
    /// Normalised: JointDisplacement, LinkPosition, ZMP; other contents keep their own name.
    pub content: String,
    pub data: Channel,
    /// Where the component's mapping starts (1-based).
    pub line: u32,
    pub col: u32,
    /// `partLabels`: one name per part (Multi* components), when given. Choreonoid writes part
    /// names under this key; motiond writes the joints' names there.
    pub part_labels: Option<PartLabels>,
    /// `numFrames` as the file gives it (own or inherited from the top), where it was written.
    /// Choreonoid ignores it; motiond compares it with the rows read ([`Motion::frame_count_mismatches`]).
    pub declared_frames: Option<DeclaredFrames>,
}

/// A component's `partLabels`: one name per part, each with where it is written (1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartLabels {
    pub names: Vec<String>,
    pub at: Vec<(u32, u32)>,
}

/// A `numFrames` (or `num_frames`) value and its position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclaredFrames {
    pub text: String,
    pub line: u32,
    pub col: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Channel {
    /// `MultiValueSeq`
    Values(MultiValueSeq),
    /// `MultiSE3Seq`
    Poses(MultiSe3Seq),
    /// `Vector3Seq`
    Vectors(Vector3Seq),
}

impl Channel {
    /// The component `type` as written by Choreonoid.
    pub fn type_name(&self) -> &'static str {
        match self {
            Channel::Values(_) => "MultiValueSeq",
            Channel::Poses(_) => "MultiSE3Seq",
            Channel::Vectors(_) => "Vector3Seq",
        }
    }

    /// Frame rows read.
    pub fn rows(&self) -> usize {
        match self {
            Channel::Values(v) => v.rows(),
            Channel::Poses(p) => p.rows(),
            Channel::Vectors(v) => v.values.len(),
        }
    }

    pub fn timing(&self) -> &Timing {
        match self {
            Channel::Values(v) => &v.timing,
            Channel::Poses(p) => &p.timing,
            Channel::Vectors(v) => &v.timing,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Skipped {
    pub type_name: String,
    pub reason: String,
    pub line: u32,
    pub col: u32,
}

/// When each row happens.
#[derive(Debug, Clone, PartialEq)]
pub enum Timing {
    /// Row `i` is at `i / frame_rate`.
    Fixed { frame_rate: f64 },
    /// Each row carries its own time stamp (seconds, strictly increasing); `frame_rate` is the
    /// file's rate if it gave one (informational for timed data).
    Timed {
        times: Vec<f64>,
        frame_rate: Option<f64>,
    },
}

impl Timing {
    /// Time of row `i` in seconds.
    pub fn time(&self, i: usize) -> f64 {
        match self {
            Timing::Fixed { frame_rate } => i as f64 / frame_rate,
            Timing::Timed { times, .. } => times[i],
        }
    }

    pub fn is_timed(&self) -> bool {
        matches!(self, Timing::Timed { .. })
    }

    pub fn frame_rate(&self) -> Option<f64> {
        match self {
            Timing::Fixed { frame_rate } => Some(*frame_rate),
            Timing::Timed { frame_rate, .. } => *frame_rate,
        }
    }
}

/// `MultiValueSeq`: `rows × num_parts` values, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct MultiValueSeq {
    pub num_parts: usize,
    pub timing: Timing,
    pub values: Vec<f64>,
}

impl MultiValueSeq {
    pub fn rows(&self) -> usize {
        self.values.len() / self.num_parts
    }

    pub fn row(&self, i: usize) -> &[f64] {
        &self.values[i * self.num_parts..(i + 1) * self.num_parts]
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Se3Format {
    /// x y z qw qx qy qz
    XyzQwQxQyQz,
    /// x y z roll pitch yaw (radians, R = Rz·Ry·Rx)
    XyzRpy,
    /// x y z qx qy qz qw (format version 1 only)
    XyzQxQyQzQw,
}

impl Se3Format {
    pub fn as_str(self) -> &'static str {
        match self {
            Se3Format::XyzQwQxQyQz => "XYZQWQXQYQZ",
            Se3Format::XyzRpy => "XYZRPY",
            Se3Format::XyzQxQyQzQw => "XYZQXQYQZQW",
        }
    }
}

/// `MultiSE3Seq`: `rows × num_parts` poses, row-major; quaternions normalised.
#[derive(Debug, Clone, PartialEq)]
pub struct MultiSe3Seq {
    pub num_parts: usize,
    pub timing: Timing,
    pub format: Se3Format,
    pub poses: Vec<Isometry3<f64>>,
}

impl MultiSe3Seq {
    pub fn rows(&self) -> usize {
        self.poses.len() / self.num_parts
    }
}

/// `Vector3Seq`, e.g. the ZMP.
#[derive(Debug, Clone, PartialEq)]
pub struct Vector3Seq {
    pub timing: Timing,
    /// `isRootRelative`: coordinates relative to the root link (a flag, nothing converted).
    pub root_relative: bool,
    pub values: Vec<Vector3<f64>>,
}

/// Why a .seq file could not be used: unreadable, or every problem found in it.
pub use crate::diag::FileError as Error;

/// Reads and validates a .seq file.
pub fn load(path: &Path) -> Result<Motion, Error> {
    let text = crate::file::read_to_string(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    from_text(text, path)
}

/// Parses the whole text of a .seq file; `path` is only used in messages. Takes the text so it
/// can be dropped as soon as the tree holds its numbers: a long motion's file and its decoded
/// values need not both stay in memory while the motion is assembled.
pub fn from_text(text: String, path: &Path) -> Result<Motion, Error> {
    whole_text(&text, path)?;
    let tree = match fast::parse(&text) {
        Some(tree) => Some(tree),
        None => general_tree(&text, path)?,
    };
    drop(text);
    finish(tree, path)
}

/// Parses .seq text; `path` is only used in messages.
pub fn parse(text: &str, path: &Path) -> Result<Motion, Error> {
    whole_text(text, path)?;
    let tree = match fast::parse(text) {
        Some(tree) => Some(tree),
        None => general_tree(text, path)?,
    };
    finish(tree, path)
}

/// The general reader alone (what `parse` falls back to); public for the tests, benchmarks and
/// fuzz targets that compare the two readers.
#[doc(hidden)]
pub fn parse_general(text: &str, path: &Path) -> Result<Motion, Error> {
    whole_text(text, path)?;
    let tree = general_tree(text, path)?;
    finish(tree, path)
}

/// The fast scanner alone; `None` when the text is outside its YAML subset.
#[doc(hidden)]
pub fn parse_fast(text: &str, path: &Path) -> Option<Result<Motion, Error>> {
    if let Err(err) = whole_text(text, path) {
        return Some(Err(err));
    }
    fast::parse(text).map(|tree| finish(Some(tree), path))
}

/// Refuses a text with a NUL byte: what a power loss leaves of a file being written (a zero-filled
/// tail), which a YAML reader would take for the end of the file and so drop every row after it.
fn whole_text(text: &str, path: &Path) -> Result<(), Error> {
    let Some(offset) = text.bytes().position(|b| b == 0) else {
        return Ok(());
    };
    let (line, col) = crate::diag::LineIndex::new(&text[..offset]).line_col(offset);
    Err(Error::Invalid(Diagnostics(vec![Diagnostic::new(
        path,
        line,
        col,
        "NUL byte: a .seq file is text; from here on the file looks zero-filled or binary \
         (a write cut short, e.g. by a power loss?)",
    )])))
}

fn general_tree(text: &str, path: &Path) -> Result<Option<tree::Node>, Error> {
    general::parse(text).map_err(|e| {
        let (line, col, message) = match cut_short(text, e.pos) {
            Some(CutShort::InRow { line, col }) => (
                line,
                col,
                format!(
                    "the file ends in the middle of this frame row (no closing ']'): it looks cut \
                     short, e.g. by an interrupted write or copy ({})",
                    e.message
                ),
            ),
            Some(CutShort::Elsewhere) => (
                e.pos.line,
                e.pos.col,
                format!(
                    "{} at the end of the file: it looks cut short, e.g. by an interrupted write \
                     or copy",
                    e.message
                ),
            ),
            None => (e.pos.line, e.pos.col, e.message),
        };
        Error::Invalid(Diagnostics(vec![Diagnostic::new(path, line, col, message)]))
    })
}

/// How a text whose YAML broke at `at` was cut short, if the break is at its end.
enum CutShort {
    /// Inside the flow row `[…` that starts at this line and column.
    InRow {
        line: u32,
        col: u32,
    },
    Elsewhere,
}

fn cut_short(text: &str, at: tree::Pos) -> Option<CutShort> {
    // YAML ends a line at `\r` too: count lines as the parser does.
    let text = text.replace("\r\n", "\n");
    let lines: Vec<&str> = text.split(['\n', '\r']).collect();
    let (index, last) = lines
        .iter()
        .enumerate()
        .rev()
        .find(|(_, line)| !line.trim().is_empty())?;
    let last_line = u32::try_from(index + 1).ok()?;
    if at.line < last_line {
        return None;
    }
    let row = last.trim_start();
    let indent = last.len() - row.len();
    let bracket = row.strip_prefix('-').map_or(row, str::trim_start);
    if bracket.starts_with('[') && !bracket.contains(']') && !bracket.contains('#') {
        let col = u32::try_from(last[..indent].chars().count() + 1).ok()?;
        return Some(CutShort::InRow {
            line: last_line,
            col,
        });
    }
    // A break inside the last line's text (e.g. nesting past the parser's limit) is not the
    // file ending early.
    let inside = at.line == last_line
        && usize::try_from(at.col).is_ok_and(|col| col <= last.trim_end().chars().count());
    (!inside).then_some(CutShort::Elsewhere)
}

fn finish(tree: Option<tree::Node>, path: &Path) -> Result<Motion, Error> {
    match tree {
        Some(tree) => build::build(tree, path).map_err(Error::Invalid),
        None => Err(Error::Invalid(Diagnostics(vec![Diagnostic::new(
            path,
            1,
            1,
            "empty file: expected a .seq mapping (type, formatVersion, frameRate, components)",
        )]))),
    }
}

/// The `inspect seq` JSON shape of ../shared/docs/inspect-json.md.
pub fn inspect_json(motion: &Motion) -> serde_json::Value {
    let components: Vec<_> = motion
        .components
        .iter()
        .map(|c| {
            let (num_parts, rows, se3_format) = match &c.data {
                Channel::Values(v) => (v.num_parts, v.rows(), None),
                Channel::Poses(p) => (p.num_parts, p.rows(), Some(p.format.as_str())),
                Channel::Vectors(v) => (1, v.values.len(), None),
            };
            let timing = c.data.timing();
            let mut json = serde_json::json!({
                "type": c.data.type_name(),
                "content": c.content,
                "num_parts": num_parts,
                "rows": rows,
                "timed": timing.is_timed(),
                "frame_rate": timing.frame_rate(),
                "se3_format": se3_format,
                "first_time": timing.time(0),
                "last_time": timing.time(rows.saturating_sub(1)),
            });
            if let (Channel::Vectors(v), Some(obj)) = (&c.data, json.as_object_mut()) {
                obj.insert("root_relative".into(), v.root_relative.into());
            }
            json
        })
        .collect();
    let skipped: Vec<_> = motion
        .skipped
        .iter()
        .map(|s| serde_json::json!({"type": s.type_name, "reason": s.reason}))
        .collect();
    serde_json::json!({
        "format_version": json_number(motion.format_version),
        "frame_rate": motion.frame_rate,
        "components": components,
        "skipped": skipped,
    })
}

/// Whole versions print as integers (`2`, not `2.0`), as the documented shape shows.
fn json_number(v: f64) -> serde_json::Value {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        serde_json::Value::from(v as i64)
    } else {
        serde_json::Value::from(v)
    }
}
