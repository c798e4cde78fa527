//! [`Motion`](super::Motion)s out: Choreonoid body motion files, format version 2, fixed frame
//! rate, written atomically.
//!
//! The layout is what Choreonoid's own writer produces for format version 2 (camelCase keys, block
//! style around flow-style frame rows; `../shared/docs/seq-semantics.md` §12): the top node, then
//! the components in Choreonoid's order — `LinkPosition` (`MultiSE3Seq`, `XYZQWQXQYQZ`),
//! `JointDisplacement` (`MultiValueSeq`, with the joints' names as `partLabels`, the key
//! Choreonoid's `AbstractMultiSeq` writes part names under), `ZMP` (`Vector3Seq`). Numbers are
//! written so that they read back to the same `f64` and so that YAML 1.1 readers such as PyYAML
//! see floats: always with a `.`, exponents with a sign (`1.5e-7` → `1.5e-7`, `1e-7` → `1.0e-7`).
//!
//! [`write_timed`] writes variable-interval frames (`hasFrameTime: true`): each row starts with its
//! time in seconds, and `frameRate` stays in the top node, where the format document asks for it.
//!
//! A file is never seen half written: the text goes to a temporary file in the target's folder,
//! which is flushed to disk (fsync) and renamed over the target, and the folder is synced so the
//! rename survives a power loss. [`write_motion`] writes a whole motion held in memory;
//! [`Writer`] streams joint rows as they come (a teach-in recording), so a long recording never
//! sits in memory.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use nalgebra::{Isometry3, Vector3};

/// A motion to write: `rows` holds `frames × columns` joint values (radians or metres), row-major;
/// frame `i` is at `i / frame_rate` seconds. Every component has the same number of frames.
#[derive(Debug, Clone, Copy)]
pub struct Written<'a> {
    /// Frames per second; positive and finite.
    pub frame_rate: f64,
    /// The number of joint columns (`numParts` of `JointDisplacement`); at least 1.
    pub columns: usize,
    /// One name per column, written as `partLabels`; `None` writes no names.
    pub joint_names: Option<&'a [String]>,
    /// `frames × columns` values, row-major.
    pub rows: &'a [f64],
    /// The `LinkPosition` component, if any.
    pub link: Option<LinkPoses<'a>>,
    /// The `ZMP` component, if any.
    pub zmp: Option<Zmp<'a>>,
}

/// Link poses: `frames × parts` poses, row-major; part 0 is the root link.
#[derive(Debug, Clone, Copy)]
pub struct LinkPoses<'a> {
    pub parts: usize,
    pub poses: &'a [Isometry3<f64>],
}

/// One ZMP point per frame.
#[derive(Debug, Clone, Copy)]
pub struct Zmp<'a> {
    /// `isRootRelative`: the points are relative to the root link.
    pub root_relative: bool,
    pub points: &'a [Vector3<f64>],
}

/// Why a motion was not written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The data is not a motion Choreonoid or motiond could read back (nothing was written).
    #[error("not written: {0}")]
    Invalid(String),
    /// The file system refused.
    #[error("{}: cannot {action}: {error}{}", path.display(), hint(error))]
    Io {
        path: PathBuf,
        action: &'static str,
        error: io::Error,
    },
    /// Writing to a stream (stdout) failed.
    #[error("cannot write the motion: {0}")]
    Stream(io::Error),
}

fn hint(err: &io::Error) -> &'static str {
    match err.kind() {
        io::ErrorKind::PermissionDenied => {
            " (the folder must be writable by this user: check its owner and mode)"
        }
        io::ErrorKind::StorageFull => " (the disk is full: free space and try again)",
        io::ErrorKind::NotFound => " (create the folder first)",
        _ => "",
    }
}

/// Writes `motion` to `path` atomically (temporary file, fsync, rename, fsync of the folder),
/// replacing a file already there. Nothing is written when the data is invalid.
pub fn write_motion(path: &Path, motion: &Written) -> Result<(), WriteError> {
    write_frames(path, motion, None)
}

/// [`write_motion`] with a time (seconds) for each frame instead of the fixed rate: a
/// variable-interval motion (`hasFrameTime`), such as a log with dropped frames. `times` holds
/// one time a frame, finite, at least 0 and strictly increasing; `motion.frame_rate` is written
/// as the rate Choreonoid resamples the motion at.
pub fn write_timed(path: &Path, motion: &Written, times: &[f64]) -> Result<(), WriteError> {
    write_frames(path, motion, Some(times))
}

fn write_frames(path: &Path, motion: &Written, times: Option<&[f64]>) -> Result<(), WriteError> {
    let frames = check(motion)?;
    if let Some(times) = times {
        check_times(times, frames)?;
    }
    let mut file = AtomicFile::create(path)?;
    let temp = file.temp.clone();
    let io = |error| WriteError::Io {
        path: temp.clone(),
        action: "write",
        error,
    };
    {
        let mut out = BufWriter::with_capacity(1 << 16, &file.file);
        format(&mut out, motion, frames, times).map_err(io)?;
        out.flush().map_err(io)?;
    }
    file.commit()
}

/// Writes `motion` as .seq text to a stream (e.g. stdout); not atomic.
pub fn write_to(out: &mut impl Write, motion: &Written) -> Result<(), WriteError> {
    let frames = check(motion)?;
    format(out, motion, frames, None).map_err(WriteError::Stream)
}

/// [`write_timed`] to a stream (e.g. stdout); not atomic.
pub fn write_timed_to(
    out: &mut impl Write,
    motion: &Written,
    times: &[f64],
) -> Result<(), WriteError> {
    let frames = check(motion)?;
    check_times(times, frames)?;
    format(out, motion, frames, Some(times)).map_err(WriteError::Stream)
}

/// Checks the shape and values; returns the number of frames.
fn check(m: &Written) -> Result<usize, WriteError> {
    let invalid = |s: String| Err(WriteError::Invalid(s));
    if !(m.frame_rate.is_finite() && m.frame_rate > 0.0) {
        return invalid(format!(
            "the frame rate must be a positive number of frames per second, not {}",
            m.frame_rate
        ));
    }
    if m.columns == 0 {
        return invalid("a JointDisplacement component needs at least one column".into());
    }
    if let Some(names) = m.joint_names {
        check_names(names, m.columns)?;
    }
    if m.rows.is_empty() || !m.rows.len().is_multiple_of(m.columns) {
        return invalid(format!(
            "{} joint values are not whole frames of {} columns (Choreonoid refuses a motion \
             without frames)",
            m.rows.len(),
            m.columns
        ));
    }
    let frames = m.rows.len() / m.columns;
    if let Some(i) = m.rows.iter().position(|v| !v.is_finite()) {
        return invalid(format!(
            "frame {} column {} is {}; every value must be a finite number",
            i / m.columns + 1,
            i % m.columns + 1,
            m.rows[i]
        ));
    }
    if let Some(link) = &m.link {
        if link.parts == 0 || link.poses.len() != frames * link.parts {
            return invalid(format!(
                "the LinkPosition component has {} poses; expected {frames} frames × {} parts",
                link.poses.len(),
                link.parts
            ));
        }
        if let Some(i) = link.poses.iter().position(|p| {
            !(p.translation.vector.iter().all(|v| v.is_finite())
                && p.rotation.coords.iter().all(|v| v.is_finite()))
        }) {
            return invalid(format!(
                "LinkPosition frame {} part {} is not finite",
                i / link.parts + 1,
                i % link.parts
            ));
        }
    }
    if let Some(zmp) = &m.zmp {
        if zmp.points.len() != frames {
            return invalid(format!(
                "the ZMP component has {} points; expected one per frame ({frames})",
                zmp.points.len()
            ));
        }
        if let Some(i) = zmp
            .points
            .iter()
            .position(|p| !p.iter().all(|v| v.is_finite()))
        {
            return invalid(format!("ZMP frame {} is not finite", i + 1));
        }
    }
    Ok(frames)
}

fn check_times(times: &[f64], frames: usize) -> Result<(), WriteError> {
    let invalid = |s: String| Err(WriteError::Invalid(s));
    if times.len() != frames {
        return invalid(format!(
            "{} frame times for {frames} frames; give one time a frame",
            times.len()
        ));
    }
    if let Some(i) = times.iter().position(|t| !(t.is_finite() && *t >= 0.0)) {
        return invalid(format!(
            "frame {} is at {} s; frame times must be finite and at least 0",
            i + 1,
            times[i]
        ));
    }
    if let Some(i) = times.windows(2).position(|w| w[1] <= w[0]) {
        return invalid(format!(
            "frame {} is at {} s, not after frame {} at {} s; frame times must increase",
            i + 2,
            times[i + 1],
            i + 1,
            times[i]
        ));
    }
    Ok(())
}

fn check_names(names: &[String], columns: usize) -> Result<(), WriteError> {
    if names.len() != columns {
        return Err(WriteError::Invalid(format!(
            "{} joint names for {columns} columns; give one name per column",
            names.len()
        )));
    }
    if let Some(i) = names.iter().position(|n| n.is_empty()) {
        return Err(WriteError::Invalid(format!(
            "joint name {} is empty",
            i + 1
        )));
    }
    Ok(())
}

fn format(
    out: &mut impl Write,
    m: &Written,
    frames: usize,
    times: Option<&[f64]>,
) -> io::Result<()> {
    let mut text = String::new();
    top(
        &mut text,
        m.frame_rate,
        &frames.to_string(),
        times.is_some(),
    );
    if let Some(link) = &m.link {
        component_head(
            &mut text,
            "MultiSE3Seq",
            "LinkPosition",
            m.frame_rate,
            &frames.to_string(),
        );
        let _ = writeln!(text, "    numParts: {}", link.parts);
        text.push_str("    SE3Format: XYZQWQXQYQZ\n    frames:\n");
        out.write_all(text.as_bytes())?;
        for (f, row) in link.poses.chunks_exact(link.parts).enumerate() {
            text.clear();
            text.push_str("      - [ ");
            // A timed row starts with its time, a scalar beside the poses.
            if let Some(times) = times {
                number(&mut text, times[f]);
                text.push_str(", ");
            }
            for (i, pose) in row.iter().enumerate() {
                if i > 0 {
                    text.push_str(", ");
                }
                let (p, q) = (&pose.translation.vector, pose.rotation.coords);
                // nalgebra keeps quaternions as (i, j, k, w); the file wants w first.
                numbers(&mut text, &[p.x, p.y, p.z, q.w, q.x, q.y, q.z]);
            }
            text.push_str(" ]\n");
            out.write_all(text.as_bytes())?;
        }
        text.clear();
    }
    joints_head(
        &mut text,
        m.frame_rate,
        &frames.to_string(),
        m.columns,
        m.joint_names,
    );
    out.write_all(text.as_bytes())?;
    for (f, row) in m.rows.chunks_exact(m.columns).enumerate() {
        text.clear();
        match times {
            Some(times) => {
                text.push_str("      - [ ");
                number(&mut text, times[f]);
                for &v in row {
                    text.push_str(", ");
                    number(&mut text, v);
                }
                text.push_str(" ]\n");
            }
            None => joint_row(&mut text, row),
        }
        out.write_all(text.as_bytes())?;
    }
    if let Some(zmp) = &m.zmp {
        text.clear();
        component_head(
            &mut text,
            "Vector3Seq",
            "ZMP",
            m.frame_rate,
            &frames.to_string(),
        );
        if zmp.root_relative {
            text.push_str("    isRootRelative: true\n");
        }
        text.push_str("    frames:\n");
        out.write_all(text.as_bytes())?;
        for (f, p) in zmp.points.iter().enumerate() {
            text.clear();
            text.push_str("      - ");
            match times {
                Some(times) => numbers(&mut text, &[times[f], p.x, p.y, p.z]),
                None => numbers(&mut text, &[p.x, p.y, p.z]),
            }
            text.push('\n');
            out.write_all(text.as_bytes())?;
        }
    }
    Ok(())
}

/// The top node; `timed` marks every component's rows as starting with their time (inherited
/// from here, `seq-semantics.md` §7.1).
fn top(text: &mut String, frame_rate: f64, frames: &str, timed: bool) {
    let _ = write!(
        text,
        "type: CompositeSeq\ncontent: BodyMotion\nformatVersion: 2\nframeRate: {frame_rate}\n\
         numFrames: {frames}\n"
    );
    if timed {
        text.push_str("hasFrameTime: true\n");
    }
    text.push_str("components:\n");
}

fn component_head(text: &mut String, ty: &str, content: &str, frame_rate: f64, frames: &str) {
    let _ = write!(
        text,
        "  - type: {ty}\n    content: {content}\n    frameRate: {frame_rate}\n    numFrames: {frames}\n"
    );
}

fn joints_head(
    text: &mut String,
    frame_rate: f64,
    frames: &str,
    columns: usize,
    names: Option<&[String]>,
) {
    component_head(
        text,
        "MultiValueSeq",
        "JointDisplacement",
        frame_rate,
        frames,
    );
    let _ = writeln!(text, "    numParts: {columns}");
    if let Some(names) = names {
        text.push_str("    partLabels: [ ");
        for (i, name) in names.iter().enumerate() {
            if i > 0 {
                text.push_str(", ");
            }
            quoted(text, name);
        }
        text.push_str(" ]\n");
    }
    text.push_str("    frames:\n");
}

fn joint_row(text: &mut String, row: &[f64]) {
    text.push_str("      - ");
    numbers(text, row);
    text.push('\n');
}

/// `[ a, b, c ]`
fn numbers(text: &mut String, values: &[f64]) {
    text.push_str("[ ");
    for (i, &v) in values.iter().enumerate() {
        if i > 0 {
            text.push_str(", ");
        }
        number(text, v);
    }
    text.push_str(" ]");
}

/// The shortest text that reads back to `v`, always with a `.` (YAML 1.1 floats need one) and,
/// in exponent form, a signed exponent (`1.0e-7`, `2.5e+20`). `v` is finite.
pub(crate) fn number(text: &mut String, v: f64) {
    let start = text.len();
    let a = v.abs();
    if a == 0.0 || (1e-4..1e16).contains(&a) {
        let _ = write!(text, "{v}");
        if !text[start..].contains('.') {
            text.push_str(".0");
        }
        return;
    }
    let _ = write!(text, "{v:e}");
    let Some(e) = text[start..].find('e').map(|e| start + e) else {
        return;
    };
    let exponent_signed = text[e + 1..].starts_with('-');
    if !exponent_signed {
        text.insert(e + 1, '+');
    }
    if !text[start..e].contains('.') {
        text.insert_str(e, ".0");
    }
}

/// A YAML double-quoted scalar.
fn quoted(text: &mut String, s: &str) {
    text.push('"');
    for c in s.chars() {
        match c {
            '"' => text.push_str("\\\""),
            '\\' => text.push_str("\\\\"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(text, "\\x{:02x}", c as u32);
            }
            c => text.push(c),
        }
    }
    text.push('"');
}

/// Streams a fixed-rate motion of joint rows to a file as they come (a teach-in recording):
/// `create`, `push` each frame, `finish`. Until `finish` the rows go to a temporary file beside
/// the target; dropping an unfinished `Writer` removes it, so an abandoned recording leaves
/// nothing behind. `numFrames` is filled in by `finish`.
#[derive(Debug)]
pub struct Writer {
    out: BufWriter<File>,
    file: Target,
    columns: usize,
    frames: u64,
    /// Byte offsets of the two `numFrames` values (top node and component), written as spaces.
    frame_counts: [u64; 2],
    row: String,
    /// Bytes handed to `out` so far, and how many of them are the header: with the buffer's
    /// length they say which frames the file holds and which still wait in the buffer.
    pushed: u64,
    head: u64,
}

/// Width reserved for a frame count: any `u64`.
const COUNT_WIDTH: usize = 20;

/// Where a [`Writer`]'s text goes.
#[derive(Debug)]
enum Target {
    /// A temporary file renamed over the target by `finish`, removed when abandoned.
    Atomic(AtomicFile),
    /// The target itself, created new and kept whatever happens (a teach-in take).
    Kept { file: File, path: PathBuf },
}

impl Target {
    fn file(&self) -> &File {
        match self {
            Target::Atomic(a) => &a.file,
            Target::Kept { file, .. } => file,
        }
    }

    fn io(&self, action: &'static str, error: io::Error) -> WriteError {
        match self {
            Target::Atomic(a) => a.io(action, error),
            Target::Kept { path, .. } => WriteError::Io {
                path: path.clone(),
                action,
                error,
            },
        }
    }
}

impl Writer {
    /// Starts a motion at `path` with one column per name of `joint_names`.
    pub fn create(
        path: &Path,
        frame_rate: f64,
        joint_names: &[String],
    ) -> Result<Writer, WriteError> {
        Self::check_start(frame_rate, joint_names)?;
        let file = Target::Atomic(AtomicFile::create(path)?);
        Self::start(file, frame_rate, joint_names)
    }

    /// Starts a motion written straight into `path`, which must not exist yet; the file stays
    /// whatever happens to the writer: what was pushed is in it (all of it once
    /// [`sync`](Self::sync)ed), and [`finish`](Self::finish) fills in the frame count and syncs.
    pub fn create_kept(
        path: &Path,
        frame_rate: f64,
        joint_names: &[String],
    ) -> Result<Writer, WriteError> {
        Self::check_start(frame_rate, joint_names)?;
        // Readable too: a take whose folder is removed meanwhile is copied back from it
        // ([`Writer::restore`]).
        let file = File::options()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|error| WriteError::Io {
                path: path.to_path_buf(),
                action: "create",
                error,
            })?;
        let target = Target::Kept {
            file,
            path: path.to_path_buf(),
        };
        Self::start(target, frame_rate, joint_names)
    }

    fn check_start(frame_rate: f64, joint_names: &[String]) -> Result<(), WriteError> {
        if !(frame_rate.is_finite() && frame_rate > 0.0) {
            return Err(WriteError::Invalid(format!(
                "the frame rate must be a positive number of frames per second, not {frame_rate}"
            )));
        }
        if joint_names.is_empty() {
            return Err(WriteError::Invalid(
                "a recording needs at least one joint".into(),
            ));
        }
        check_names(joint_names, joint_names.len())
    }

    fn start(file: Target, frame_rate: f64, joint_names: &[String]) -> Result<Writer, WriteError> {
        let blank = " ".repeat(COUNT_WIDTH);
        let mut text = String::new();
        top(&mut text, frame_rate, &blank, false);
        // The value starts after `numFrames: `; the blank run is the value alone.
        let value = format!("numFrames: {blank}");
        let at = |text: &str, from: usize| {
            (from + text[from..].find(&value).unwrap_or(0) + value.len() - COUNT_WIDTH) as u64
        };
        let first = at(&text, 0);
        let before = text.len();
        joints_head(
            &mut text,
            frame_rate,
            &blank,
            joint_names.len(),
            Some(joint_names),
        );
        let second = at(&text, before);
        let mut out = BufWriter::with_capacity(
            1 << 16,
            file.file()
                .try_clone()
                .map_err(|error| file.io("open", error))?,
        );
        out.write_all(text.as_bytes())
            .map_err(|error| file.io("write", error))?;
        Ok(Writer {
            out,
            file,
            columns: joint_names.len(),
            frames: 0,
            frame_counts: [first, second],
            row: String::new(),
            pushed: text.len() as u64,
            head: text.len() as u64,
        })
    }

    /// Appends one frame (one value per joint, finite).
    pub fn push(&mut self, row: &[f64]) -> Result<(), WriteError> {
        if row.len() != self.columns {
            return Err(WriteError::Invalid(format!(
                "a frame of {} values for {} joints",
                row.len(),
                self.columns
            )));
        }
        if let Some(i) = row.iter().position(|v| !v.is_finite()) {
            return Err(WriteError::Invalid(format!(
                "frame {} column {} is {}; every value must be a finite number",
                self.frames + 1,
                i + 1,
                row[i]
            )));
        }
        self.row.clear();
        joint_row(&mut self.row, row);
        self.out
            .write_all(self.row.as_bytes())
            .map_err(|error| self.file.io("write", error))?;
        self.frames += 1;
        self.pushed += self.row.len() as u64;
        Ok(())
    }

    /// Frames pushed so far (in the file or still in the write buffer).
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Frames pushed but not (wholly) in the file yet: the write buffer holds them until a flush
    /// succeeds. A full disk keeps them there, so they are in memory only.
    pub fn unwritten(&self) -> u64 {
        let buffered = self.out.buffer();
        let written = self.pushed - buffered.len() as u64;
        // Header bytes still buffered hold no frame; every frame row ends with its newline.
        let header = usize::try_from(self.head.saturating_sub(written))
            .unwrap_or(usize::MAX)
            .min(buffered.len());
        buffered[header..].iter().filter(|&&b| b == b'\n').count() as u64
    }

    /// Puts every frame pushed so far on disk (flushed and synced).
    pub fn sync(&mut self) -> Result<(), WriteError> {
        self.out
            .flush()
            .map_err(|error| self.file.io("write", error))?;
        self.file
            .file()
            .sync_data()
            .map_err(|error| self.file.io("sync to disk", error))
    }

    /// Fills in the frame count, syncs and renames the file into place; returns the frame count.
    /// A motion without frames is not written (Choreonoid refuses one).
    pub fn finish(mut self) -> Result<u64, WriteError> {
        self.write_count()?;
        match &mut self.file {
            Target::Atomic(a) => a.commit()?,
            Target::Kept { file, path } => file.sync_all().map_err(|error| WriteError::Io {
                path: path.clone(),
                action: "sync to disk",
                error,
            })?,
        }
        Ok(self.frames)
    }

    /// Completes a file of [`create_kept`](Self::create_kept) where it is: flushed, the frame
    /// count filled in, synced; returns the frame count. On failure (the disk is full, …)
    /// nothing pushed is lost and a later call finishes the job.
    pub fn complete(&mut self) -> Result<u64, WriteError> {
        self.write_count()?;
        self.file
            .file()
            .sync_all()
            .map_err(|error| self.file.io("sync to disk", error))?;
        Ok(self.frames)
    }

    /// Puts a file of [`create_kept`](Self::create_kept) back at its path when the path no
    /// longer names it (its folder, or the file, was removed while it was written: the open file
    /// still holds every frame): the folder is created again and the file copied there, synced.
    /// Returns whether it had to.
    pub fn restore(&self) -> io::Result<bool> {
        use std::os::unix::fs::MetadataExt;
        let Target::Kept { file, path } = &self.file else {
            return Ok(false);
        };
        let open = file.metadata()?;
        if let Ok(named) = std::fs::metadata(path)
            && (named.dev(), named.ino()) == (open.dev(), open.ino())
        {
            return Ok(false);
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let mut copy = File::options().write(true).create_new(true).open(path)?;
        let mut from = file.try_clone()?;
        io::Seek::seek(&mut from, io::SeekFrom::Start(0))?;
        io::copy(&mut from, &mut copy)?;
        copy.sync_all()?;
        Ok(true)
    }

    /// Flushes every frame and fills in the frame count. A failed flush keeps what it could not
    /// write in the buffer (`BufWriter`), so it can be tried again.
    fn write_count(&mut self) -> Result<(), WriteError> {
        if self.frames == 0 {
            return Err(WriteError::Invalid(
                "no frames were recorded; nothing is written".into(),
            ));
        }
        self.out
            .flush()
            .map_err(|error| self.file.io("write", error))?;
        let count = format!("{:<COUNT_WIDTH$}", self.frames);
        for at in self.frame_counts {
            self.file
                .file()
                .write_all_at(count.as_bytes(), at)
                .map_err(|error| self.file.io("write", error))?;
        }
        Ok(())
    }
}

/// A temporary file beside `target` that becomes `target` on `commit`, or is removed when
/// dropped before.
#[derive(Debug)]
struct AtomicFile {
    file: File,
    temp: PathBuf,
    target: PathBuf,
    committed: bool,
}

impl AtomicFile {
    fn create(target: &Path) -> Result<AtomicFile, WriteError> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let Some(name) = target.file_name() else {
            return Err(WriteError::Invalid(format!(
                "{} names no file",
                target.display()
            )));
        };
        let dir = folder(target);
        loop {
            // Hidden and not ending in .seq: a library scan never takes it for a motion.
            let temp = dir.join(format!(
                ".{}.{}.{}.tmp",
                name.to_string_lossy(),
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ));
            match File::options().write(true).create_new(true).open(&temp) {
                Ok(file) => {
                    return Ok(AtomicFile {
                        file,
                        temp,
                        target: target.to_path_buf(),
                        committed: false,
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(error) => {
                    return Err(WriteError::Io {
                        path: dir.to_path_buf(),
                        action: "create a temporary file in this folder",
                        error,
                    });
                }
            }
        }
    }

    fn io(&self, action: &'static str, error: io::Error) -> WriteError {
        WriteError::Io {
            path: self.temp.clone(),
            action,
            error,
        }
    }

    fn commit(&mut self) -> Result<(), WriteError> {
        self.file
            .sync_all()
            .map_err(|error| self.io("sync to disk", error))?;
        std::fs::rename(&self.temp, &self.target).map_err(|error| WriteError::Io {
            path: self.target.clone(),
            action: "rename the temporary file into place",
            error,
        })?;
        self.committed = true;
        let dir = folder(&self.target);
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|error| WriteError::Io {
                path: dir.to_path_buf(),
                action: "sync the folder to disk",
                error,
            })
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}

/// The folder holding `path` (`.` for a bare file name).
fn folder(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::motion::seq::{self, Channel, Timing};
    use nalgebra::{Translation3, UnitQuaternion};
    use proptest::prelude::*;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("joint_{i}")).collect()
    }

    /// PyYAML's (YAML 1.1) float resolver, for the decimal forms `number` writes.
    fn yaml11_float(s: &str) -> bool {
        let s = s.strip_prefix(['-', '+']).unwrap_or(s);
        let (mantissa, exponent) = match s.split_once(['e', 'E']) {
            Some((m, e)) => (m, Some(e)),
            None => (s, None),
        };
        let Some((int, frac)) = mantissa.split_once('.') else {
            return false;
        };
        let digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
        !int.is_empty()
            && digits(int)
            && digits(frac)
            && exponent.is_none_or(|e| e.len() > 1 && e.starts_with(['-', '+']) && digits(&e[1..]))
    }

    #[test]
    fn numbers_read_back_exactly_and_are_yaml_floats() {
        for (v, text) in [
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (3.0, "3.0"),
            (0.5, "0.5"),
            (-1.57, "-1.57"),
            (1e-7, "1.0e-7"),
            (1.75e-8, "1.75e-8"),
            (2.5e20, "2.5e+20"),
            (1e16, "1.0e+16"),
            (1e15, "1000000000000000.0"),
            (0.0001, "0.0001"),
        ] {
            let mut s = String::new();
            number(&mut s, v);
            assert_eq!(s, text);
            assert!(yaml11_float(&s), "{s}");
            assert_eq!(s.parse::<f64>().unwrap().to_bits(), v.to_bits());
        }
    }

    proptest! {
        #[test]
        fn every_finite_number_reads_back_exactly(bits in any::<u64>()) {
            let v = f64::from_bits(bits);
            prop_assume!(v.is_finite());
            let mut s = String::new();
            number(&mut s, v);
            prop_assert!(yaml11_float(&s), "{}", s);
            prop_assert_eq!(s.parse::<f64>().unwrap().to_bits(), v.to_bits());
        }
    }

    fn motion_with_everything(frames: usize) -> (Vec<f64>, Vec<Isometry3<f64>>, Vec<Vector3<f64>>) {
        let rows: Vec<f64> = (0..frames * 3)
            .map(|i| (i as f64 * 0.37).sin() * 1.3e-3 * (i % 7) as f64)
            .collect();
        let poses: Vec<Isometry3<f64>> = (0..frames * 2)
            .map(|i| {
                let t = i as f64 * 0.1;
                Isometry3::from_parts(
                    Translation3::new(t, -0.5, 0.1 + t * 1e-9),
                    UnitQuaternion::from_euler_angles(0.1 * t, -0.2, t),
                )
            })
            .collect();
        let zmp: Vec<Vector3<f64>> = (0..frames)
            .map(|i| Vector3::new(i as f64 * 1e-5, -2.0, 0.0))
            .collect();
        (rows, poses, zmp)
    }

    #[test]
    fn a_written_motion_loads_with_the_same_values() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("all.seq");
        let (rows, poses, points) = motion_with_everything(40);
        let joint_names = vec!["a".to_string(), "b \"quoted\"".into(), "c\\d".into()];
        let written = Written {
            frame_rate: 125.0,
            columns: 3,
            joint_names: Some(&joint_names),
            rows: &rows,
            link: Some(LinkPoses {
                parts: 2,
                poses: &poses,
            }),
            zmp: Some(Zmp {
                root_relative: true,
                points: &points,
            }),
        };
        write_motion(&path, &written).unwrap();
        let motion = seq::load(&path).unwrap();
        assert_eq!(motion.format_version, 2.0);
        assert_eq!(motion.frame_rate, Some(125.0));
        let contents: Vec<&str> = motion
            .components
            .iter()
            .map(|c| c.content.as_str())
            .collect();
        assert_eq!(contents, ["LinkPosition", "JointDisplacement", "ZMP"]);
        let jd = motion.joint_displacement().unwrap();
        assert_eq!(jd.values, rows);
        assert_eq!(jd.timing, Timing::Fixed { frame_rate: 125.0 });
        assert_eq!(motion.joint_names(), Some(&joint_names[..]));
        let link = motion.link_position().unwrap();
        assert_eq!((link.num_parts, link.rows()), (2, 40));
        for (a, b) in link.poses.iter().zip(&poses) {
            assert_eq!(a.translation, b.translation);
            assert!(a.rotation.angle_to(&b.rotation) < 1e-12);
        }
        let zmp = motion.zmp().unwrap();
        assert!(zmp.root_relative);
        assert_eq!(zmp.values, points);
        // Nothing but the motion is left in the folder.
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1);
    }

    #[test]
    fn a_timed_motion_loads_with_its_times_in_every_component() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("timed.seq");
        let (rows, poses, points) = motion_with_everything(6);
        // Frame 3 dropped: a gap of two periods.
        let times = [
            0.0,
            1.0 / 30.0,
            2.0 / 30.0,
            4.0 / 30.0,
            5.0 / 30.0,
            6.0 / 30.0,
        ];
        let written = Written {
            frame_rate: 30.0,
            columns: 3,
            joint_names: None,
            rows: &rows,
            link: Some(LinkPoses {
                parts: 2,
                poses: &poses,
            }),
            zmp: Some(Zmp {
                root_relative: false,
                points: &points,
            }),
        };
        write_timed(&path, &written, &times).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains("numFrames: 6\nhasFrameTime: true\ncomponents:\n"),
            "{text}"
        );
        let motion = seq::load(&path).unwrap();
        let timed = Timing::Timed {
            times: times.to_vec(),
            frame_rate: Some(30.0),
        };
        let jd = motion.joint_displacement().unwrap();
        assert_eq!((&jd.values, &jd.timing), (&rows, &timed));
        let link = motion.link_position().unwrap();
        assert_eq!((link.rows(), &link.timing), (6, &timed));
        for (a, b) in link.poses.iter().zip(&poses) {
            assert_eq!(a.translation, b.translation);
        }
        let zmp = motion.zmp().unwrap();
        assert_eq!((&zmp.values, &zmp.timing), (&points, &timed));
        let fast = seq::parse_fast(&text, &path).expect("fast scanner declined");
        assert_eq!(fast.unwrap(), seq::parse_general(&text, &path).unwrap());

        for (bad, needle) in [
            (&times[..5], "5 frame times for 6 frames"),
            (
                &[0.0, 0.1, 0.1, 0.2, 0.3, 0.4][..],
                "frame 3 is at 0.1 s, not after frame 2",
            ),
            (&[-0.1, 0.1, 0.2, 0.3, 0.4, 0.5][..], "at least 0"),
            (&[0.0, 0.1, f64::NAN, 0.3, 0.4, 0.5][..], "finite"),
        ] {
            let err = write_timed(&dir.path().join("bad.seq"), &written, bad).unwrap_err();
            assert!(err.to_string().contains(needle), "{err}");
        }
        assert!(!dir.path().join("bad.seq").exists());
    }

    #[test]
    fn written_text_is_in_the_fast_scanners_subset() {
        let (rows, poses, points) = motion_with_everything(5);
        let joint_names = names(3);
        let mut text = Vec::new();
        write_to(
            &mut text,
            &Written {
                frame_rate: 500.0,
                columns: 3,
                joint_names: Some(&joint_names),
                rows: &rows,
                link: Some(LinkPoses {
                    parts: 2,
                    poses: &poses,
                }),
                zmp: Some(Zmp {
                    root_relative: false,
                    points: &points,
                }),
            },
        )
        .unwrap();
        let text = String::from_utf8(text).unwrap();
        let path = Path::new("w.seq");
        let fast = seq::parse_fast(&text, path)
            .expect("fast scanner declined")
            .unwrap();
        assert_eq!(fast, seq::parse_general(&text, path).unwrap());
        assert!(text.starts_with(
            "type: CompositeSeq\ncontent: BodyMotion\nformatVersion: 2\nframeRate: 500\nnumFrames: 5\ncomponents:\n"
        ), "{text}");
        assert!(text.contains("    partLabels: [ \"joint_0\", \"joint_1\", \"joint_2\" ]\n"));
        assert!(!text.contains("isRootRelative"));
    }

    #[test]
    fn invalid_motions_write_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.seq");
        let joint_names = names(2);
        let good = Written {
            frame_rate: 100.0,
            columns: 2,
            joint_names: Some(&joint_names),
            rows: &[0.0, 1.0],
            link: None,
            zmp: None,
        };
        let nan = [0.0, f64::NAN];
        let short_names = names(1);
        let three = [0.0, 1.0, 2.0];
        let zmp = [Vector3::zeros(); 2];
        for (bad, needle) in [
            (
                Written {
                    frame_rate: 0.0,
                    ..good
                },
                "frame rate",
            ),
            (
                Written {
                    frame_rate: f64::INFINITY,
                    ..good
                },
                "frame rate",
            ),
            (Written { rows: &[], ..good }, "without frames"),
            (
                Written {
                    rows: &three,
                    ..good
                },
                "whole frames",
            ),
            (Written { rows: &nan, ..good }, "frame 1 column 2 is NaN"),
            (
                Written {
                    joint_names: Some(&short_names),
                    ..good
                },
                "1 joint names for 2 columns",
            ),
            (
                Written {
                    columns: 0,
                    joint_names: None,
                    ..good
                },
                "at least one column",
            ),
            (
                Written {
                    zmp: Some(Zmp {
                        root_relative: false,
                        points: &zmp,
                    }),
                    ..good
                },
                "2 points; expected one per frame (1)",
            ),
        ] {
            let err = write_motion(&path, &bad).unwrap_err();
            assert!(matches!(err, WriteError::Invalid(_)), "{err}");
            assert!(err.to_string().contains(needle), "{err} / {needle}");
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        write_motion(&path, &good).unwrap();
        assert_eq!(
            seq::load(&path)
                .unwrap()
                .joint_displacement()
                .unwrap()
                .values,
            [0.0, 1.0]
        );
    }

    #[test]
    fn a_folder_that_is_missing_is_named() {
        let err = write_motion(
            Path::new("/nonexistent-motiond-folder/x.seq"),
            &Written {
                frame_rate: 1.0,
                columns: 1,
                joint_names: None,
                rows: &[0.0],
                link: None,
                zmp: None,
            },
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with("/nonexistent-motiond-folder: cannot create a temporary file")
                && text.contains("create the folder first"),
            "{text}"
        );
    }

    #[test]
    fn a_streamed_recording_loads_with_its_frame_count() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("taught.seq");
        let joint_names = names(4);
        let mut w = Writer::create(&path, 100.0, &joint_names).unwrap();
        assert!(!path.exists(), "the target appears only at finish");
        let mut expected = Vec::new();
        for k in 0..1234 {
            let row: Vec<f64> = (0..4).map(|j| (k * 4 + j) as f64 * 1e-3 - 0.5).collect();
            w.push(&row).unwrap();
            expected.extend(row);
        }
        assert!(w.push(&[0.0]).is_err());
        assert!(w.push(&[0.0, 0.0, f64::INFINITY, 0.0]).is_err());
        assert_eq!(w.frames(), 1234);
        assert_eq!(w.finish().unwrap(), 1234);
        let text = std::fs::read_to_string(&path).unwrap();
        let counts: Vec<&str> = text
            .lines()
            .filter_map(|l| l.trim_start().strip_prefix("numFrames: "))
            .collect();
        assert_eq!(counts.len(), 2);
        assert!(counts.iter().all(|c| c.trim_end() == "1234"), "{counts:?}");
        let motion = seq::parse_fast(&text, &path)
            .expect("fast scanner")
            .unwrap();
        let Channel::Values(jd) = &motion.components[0].data else {
            panic!("{motion:?}")
        };
        assert_eq!(jd.values, expected);
        assert_eq!(jd.timing, Timing::Fixed { frame_rate: 100.0 });
        assert_eq!(motion.joint_names(), Some(&joint_names[..]));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn an_abandoned_or_empty_recording_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.seq");
        let joint_names = names(1);
        {
            let mut w = Writer::create(&path, 50.0, &joint_names).unwrap();
            w.push(&[1.0]).unwrap();
            assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        let w = Writer::create(&path, 50.0, &joint_names).unwrap();
        assert!(matches!(w.finish(), Err(WriteError::Invalid(_))));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        assert!(Writer::create(&path, 50.0, &[]).is_err());
        assert!(Writer::create(&path, -1.0, &joint_names).is_err());
        assert!(Writer::create(&path, 50.0, &[String::new()]).is_err());
    }

    #[test]
    fn replacing_a_motion_is_atomic() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.seq");
        std::fs::write(&path, "old").unwrap();
        let joint_names = names(1);
        let mut w = Writer::create(&path, 10.0, &joint_names).unwrap();
        w.push(&[0.25]).unwrap();
        // Until finish, readers see the old file whole.
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old");
        w.finish().unwrap();
        let motion = seq::load(&path).unwrap();
        assert_eq!(motion.joint_displacement().unwrap().values, [0.25]);
    }
}
