//! The .seq semantics: positioned tree → [`Motion`], or every problem found.
//!
//! Both readers feed this one function, so they cannot disagree on what a file means. Rules follow
//! ../shared/docs/seq-semantics.md (Choreonoid's reader) with the refusals of
//! ../shared/docs/policy.md.

use std::path::Path;

use nalgebra::{Isometry3, Quaternion, Translation3, UnitQuaternion, Vector3};

use super::tree::{Kind, Node, Pos, Rows, Shape};
use super::{
    Channel, Component, DeclaredFrames, FRAME_RATE_RANGE, JOINT_DISPLACEMENT, LINK_POSITION,
    MAX_TIME_S, Motion, MultiSe3Seq, MultiValueSeq, PartLabels, Se3Format, Skipped, Timing,
    Vector3Seq, ZMP,
};
use crate::diag::{Diagnostic, Diagnostics, Num};

/// Row problems reported one by one; beyond this a broken 150 MB file gets one summary line
/// instead of millions.
pub(crate) const MAX_ROW_ERRORS: usize = 20;

/// The least step between timed rows: one frame at the highest frame rate accepted.
const MIN_STEP_S: f64 = 1e-5;

/// How far a quaternion's norm may be from 1 and still be taken as a rounding error (files written
/// with 4–6 significant digits are off by up to ~1e-4).
const QUATERNION_NORM_TOLERANCE: f64 = 1e-3;

/// Components whose last rows lie further apart than this (seconds) disagree on the duration.
const DURATION_TOLERANCE: f64 = 1e-6;

struct Report<'p> {
    path: &'p Path,
    diags: Vec<Diagnostic>,
    row_errors: usize,
    first_suppressed: Option<Pos>,
}

impl Report<'_> {
    fn err(&mut self, at: Pos, message: impl Into<String>) {
        self.diags
            .push(Diagnostic::new(self.path, at.line, at.col, message));
    }

    fn row_err(&mut self, at: Pos, message: impl FnOnce() -> String) {
        self.row_errors += 1;
        if self.row_errors <= MAX_ROW_ERRORS {
            self.err(at, message());
        } else if self.first_suppressed.is_none() {
            self.first_suppressed = Some(at);
        }
    }

    fn finish(mut self) -> Diagnostics {
        if let Some(at) = self.first_suppressed {
            let more = self.row_errors - MAX_ROW_ERRORS;
            self.err(
                at,
                format!("{more} more problems in frame rows from here on (not listed)"),
            );
        }
        Diagnostics(self.diags).sorted()
    }
}

/// Content names and SE3 types by top-level format version (seq-semantics.md §2.1).
struct Dialect {
    joint: &'static str,
    link: &'static str,
    zmp: &'static [&'static str],
    se3_types: &'static [&'static str],
}

fn dialect(version: f64) -> Dialect {
    if version < 2.0 {
        Dialect {
            joint: "JointPosition",
            link: "LinkPosition",
            zmp: &["ZMP", "RelativeZMP", "RelativeZmp"],
            se3_types: &["MultiSE3Seq", "MultiSe3Seq", "MultiAffine3Seq"],
        }
    } else if version < 3.0 {
        Dialect {
            joint: "JointDisplacement",
            link: "LinkPosition",
            zmp: &["ZMP"],
            se3_types: &["MultiSE3Seq"],
        }
    } else if version < 4.0 {
        Dialect {
            joint: "MultiJointDisplacementSeq",
            link: "MultiLinkPositionSeq",
            zmp: &["ZMPSeq"],
            se3_types: &["MultiSE3Seq"],
        }
    } else {
        Dialect {
            joint: "JointDisplacement",
            link: "LinkPosition",
            zmp: &["ZMP"],
            se3_types: &["MultiSE3Seq"],
        }
    }
}

/// The 22 boolean words of Choreonoid's ValueTree.
fn boolean(text: &str) -> Option<bool> {
    match text {
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            Some(true)
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            Some(false)
        }
        _ => None,
    }
}

/// A key looked up in snake_case, then camelCase.
fn lookup<'a>(map: &'a Node, snake: &str, camel: &str) -> Option<(&'a Node, &'static str)> {
    map.get(snake)
        .map(|n| (n, "snake"))
        .or_else(|| map.get(camel).map(|n| (n, "camel")))
}

fn spelled<'a>(which: &str, snake: &'a str, camel: &'a str) -> &'a str {
    if which == "snake" { snake } else { camel }
}

/// A header number: the whole value must be a finite number.
fn header_number(r: &mut Report, node: &Node, key: &str) -> Option<f64> {
    match node.scalar().map(super::tree::number) {
        Some(Ok(v)) => Some(v),
        Some(Err(problem)) => {
            let text = node.scalar().unwrap_or_default();
            r.err(node.pos, format!("{key}: {}", problem.describe(text)));
            None
        }
        None => {
            r.err(
                node.pos,
                format!("{key}: expected a number, found {}", node.describe()),
            );
            None
        }
    }
}

fn frame_rate_value(r: &mut Report, node: &Node, key: &str) -> Option<f64> {
    let rate = header_number(r, node, key)?;
    if FRAME_RATE_RANGE.contains(&rate) {
        Some(rate)
    } else {
        r.err(
            node.pos,
            format!(
                "{key}: {} is not a frame rate motiond plays: give {} to {} frames per second \
                 (frames at most 100 s and at least 10 µs apart; a rate outside is a mistake of \
                 units or a damaged file)",
                Num(rate),
                Num(*FRAME_RATE_RANGE.start()),
                Num(*FRAME_RATE_RANGE.end()),
            ),
        );
        None
    }
}

fn bool_value(r: &mut Report, node: &Node, key: &str) -> Option<bool> {
    match node.scalar().and_then(boolean) {
        Some(b) => Some(b),
        None => {
            let found = node
                .scalar()
                .map_or_else(|| node.describe().to_owned(), |s| format!("\"{s}\""));
            r.err(
                node.pos,
                format!("{key}: expected a boolean (true/false, yes/no, on/off), found {found}"),
            );
            None
        }
    }
}

/// Top-level values components inherit, validated once (an invalid one is reported here, and the
/// components that inherit it are skipped silently).
struct Top<'a> {
    node: &'a Node,
    version: f64,
    frame_rate: Option<Result<f64, ()>>,
    has_frame_time: Option<(Result<bool, ()>, Pos)>,
}

/// Parses and validates the tree.
pub(crate) fn build(mut root: Node, path: &Path) -> Result<Motion, Diagnostics> {
    let mut r = Report {
        path,
        diags: Vec::new(),
        row_errors: 0,
        first_suppressed: None,
    };
    let Kind::Map(entries) = &mut root.kind else {
        r.err(
            root.pos,
            format!(
                "expected a mapping (type, formatVersion, frameRate, components) at the top, found {}",
                root.describe()
            ),
        );
        return Err(r.finish());
    };
    // Components are taken out so that their frame data can be moved, not copied, into the motion.
    let components = entries
        .iter()
        .rposition(|(k, _)| k.text.as_deref() == Some("components"))
        .map(|i| entries.remove(i));
    let top = &root;
    let version = match lookup(top, "format_version", "formatVersion") {
        None => Some(1.0),
        Some((n, w)) => header_number(&mut r, n, spelled(w, "format_version", "formatVersion")),
    };
    let Some(version) = version else {
        return Err(r.finish());
    };
    if version >= 5.0 {
        let at = lookup(top, "format_version", "formatVersion").map_or(top.pos, |(n, _)| n.pos);
        r.err(
            at,
            format!("format version {version} is not supported (versions 1 to 4 are)"),
        );
        return Err(r.finish());
    }
    check_top_type(&mut r, top, version);
    let frame_rate = lookup(top, "frame_rate", "frameRate")
        .map(|(n, w)| frame_rate_value(&mut r, n, spelled(w, "frame_rate", "frameRate")).ok_or(()));
    let has_frame_time = lookup(top, "has_frame_time", "hasFrameTime").map(|(n, w)| {
        let key = spelled(w, "has_frame_time", "hasFrameTime");
        (bool_value(&mut r, n, key).ok_or(()), n.pos)
    });
    let top_info = Top {
        node: top,
        version,
        frame_rate,
        has_frame_time,
    };

    let mut motion = Motion {
        format_version: version,
        frame_rate: top_info.frame_rate.and_then(Result::ok),
        components: Vec::new(),
        skipped: Vec::new(),
    };
    let mut attempted_main = false;
    match components {
        None => r.err(
            top.pos,
            "missing key \"components\" (the list of the motion's components)",
        ),
        Some((_, node)) => match node.kind {
            Kind::Seq(items) => {
                for (i, item) in items.into_iter().enumerate() {
                    component(&mut r, &top_info, i, item, &mut motion, &mut attempted_main);
                }
            }
            _ => r.err(
                node.pos,
                format!(
                    "components: expected a list of components, found {}",
                    node.describe()
                ),
            ),
        },
    }
    if r.diags.is_empty() && !attempted_main {
        r.err(
            top.pos,
            "no JointDisplacement and no LinkPosition component: nothing to play",
        );
    }
    if r.diags.is_empty() {
        check_durations(&mut r, &motion);
    }
    if r.diags.is_empty() {
        Ok(motion)
    } else {
        Err(r.finish())
    }
}

/// The top node's `type`: BodyMotion before version 2, CompositeSeq from 2 on.
fn check_top_type(r: &mut Report, top: &Node, version: f64) {
    let expected_type = if version < 2.0 {
        "BodyMotion"
    } else {
        "CompositeSeq"
    };
    match top.get("type") {
        None => r.err(
            top.pos,
            format!("missing key \"type\" (expected type: {expected_type})"),
        ),
        Some(n) => match n.scalar() {
            Some(t) if t == expected_type => {}
            Some("CompositeSeq") => r.err(
                n.pos,
                format!(
                    "type CompositeSeq needs formatVersion 2 to 4; this file is version {version}{}",
                    if lookup(top, "format_version", "formatVersion").is_none() {
                        " (no formatVersion given)"
                    } else {
                        ""
                    }
                ),
            ),
            Some(t) => r.err(
                n.pos,
                format!("type: expected {expected_type} for format version {version}, found \"{t}\""),
            ),
            None => r.err(
                n.pos,
                format!("type: expected {expected_type}, found {}", n.describe()),
            ),
        },
    }
}

enum Type {
    Values,
    Poses,
    Vectors,
}

fn component(
    r: &mut Report,
    top: &Top,
    index: usize,
    mut node: Node,
    motion: &mut Motion,
    attempted_main: &mut bool,
) {
    let number = index + 1;
    if !matches!(node.kind, Kind::Map(_)) {
        r.err(
            node.pos,
            format!(
                "component {number}: expected a mapping, found {}",
                node.describe()
            ),
        );
        return;
    }
    let before = r.diags.len();
    let Some(header) = header(r, top, number, &node, motion) else {
        return;
    };
    *attempted_main |= header.is_main();
    let component_pos = node.pos;
    let rows = take_frames(r, &mut node, &header.label);
    let (Some(timed), Some(num_parts), Some(rows)) = (header.timed, header.num_parts, rows) else {
        return;
    };
    if matches!(header.ty, Type::Poses) && header.se3_format.is_none() {
        return; // the row layout depends on the format
    }
    let shape = RowShape {
        timed,
        num_parts,
        se3: header.se3_format,
    };
    let times = check_rows(r, &header.label, &rows, &shape, &header.ty);
    if r.diags.len() != before || header.rate_failed {
        return;
    }
    let Some(times) = times else {
        return;
    };
    let timing = match times {
        Some(times) => Timing::Timed {
            times,
            frame_rate: header.frame_rate,
        },
        None => match header.frame_rate {
            Some(frame_rate) => Timing::Fixed { frame_rate },
            None => return,
        },
    };
    let Some(data) = channel(r, &header, rows, &shape, timing) else {
        return;
    };
    let component = Component {
        content: header.content,
        data,
        line: component_pos.line,
        col: component_pos.col,
        part_labels: header.part_labels,
        declared_frames: header.declared_frames,
    };
    // A later component of the same content replaces the earlier one, as in Choreonoid.
    match motion.components.iter_mut().find(|c| {
        c.content == component.content && c.data.type_name() == component.data.type_name()
    }) {
        Some(slot) => *slot = component,
        None => motion.components.push(component),
    }
}

/// What a component's keys say (its own, else the top node's), before its rows are read.
struct Header {
    ty: Type,
    content: String,
    /// `component N (content)`, for messages.
    label: String,
    /// ZMP relative to the root (a `Relative…` content name or `isRootRelative`).
    root_relative: bool,
    timed: Option<bool>,
    frame_rate: Option<f64>,
    /// The frame rate given was invalid (already reported); the rows are still checked.
    rate_failed: bool,
    num_parts: Option<usize>,
    part_labels: Option<PartLabels>,
    se3_format: Option<Se3Format>,
    declared_frames: Option<DeclaredFrames>,
}

impl Header {
    /// The joint or link data a motion is played from.
    fn is_main(&self) -> bool {
        self.content == JOINT_DISPLACEMENT && matches!(self.ty, Type::Values)
            || self.content == LINK_POSITION && matches!(self.ty, Type::Poses)
    }
}

/// The component's header; `None` when it cannot be read at all (reported), or its type is not
/// one motiond reads (listed in `motion.skipped`).
fn header(
    r: &mut Report,
    top: &Top,
    number: usize,
    node: &Node,
    motion: &mut Motion,
) -> Option<Header> {
    // Own value first, then the top node's (Choreonoid merges the top keys into each component).
    let version = match lookup(node, "format_version", "formatVersion") {
        Some((n, w)) => header_number(r, n, spelled(w, "format_version", "formatVersion")),
        None => Some(top.version),
    }?;
    let type_node = node.get("type").or_else(|| top.node.get("type"));
    let Some(type_name) = type_node.and_then(Node::scalar) else {
        r.err(
            node.pos,
            format!("component {number}: missing key \"type\" (MultiValueSeq, MultiSE3Seq or Vector3Seq)"),
        );
        return None;
    };
    let dialect = dialect(top.version);
    let ty = match type_name {
        "MultiValueSeq" => Type::Values,
        "Vector3Seq" => Type::Vectors,
        t if dialect.se3_types.contains(&t) => Type::Poses,
        t => {
            motion.skipped.push(Skipped {
                type_name: t.to_owned(),
                reason: "unknown type".into(),
                line: node.pos.line,
                col: node.pos.col,
            });
            return None;
        }
    };
    let (content, mut root_relative) = content(top, node, version, &ty, &dialect);
    let label = format!(
        "component {number} ({})",
        display_content(&content, type_name)
    );
    let timed = has_frame_time(r, top, node, version, &label);
    let frame_rate = match lookup(node, "frame_rate", "frameRate") {
        Some((n, w)) => {
            Some(frame_rate_value(r, n, spelled(w, "frame_rate", "frameRate")).ok_or(()))
        }
        None => top.frame_rate,
    };
    // An invalid inherited rate was reported at the top; the rows are still checked.
    let rate_failed = matches!(frame_rate, Some(Err(())));
    let frame_rate = frame_rate.and_then(Result::ok);
    if timed == Some(false) && frame_rate.is_none() && !rate_failed {
        r.err(
            node.pos,
            format!(
                "{label}: missing key \"frameRate\" (give it on the component or on the top node)"
            ),
        );
    }
    let inherited = |snake: &str, camel: &str| {
        lookup(node, snake, camel).or_else(|| lookup(top.node, snake, camel))
    };
    let num_parts = match ty {
        Type::Vectors => Some(1),
        Type::Values | Type::Poses => {
            num_parts(r, node, inherited("num_parts", "numParts"), &label)
        }
    };
    let part_labels = match (&ty, num_parts) {
        (Type::Values | Type::Poses, Some(parts)) => inherited("part_labels", "partLabels")
            .and_then(|(n, w)| {
                part_labels(r, n, spelled(w, "part_labels", "partLabels"), parts, &label)
            }),
        _ => None,
    };
    let se3_format = match ty {
        Type::Poses => se3_format(r, top, node, version, &label),
        _ => None,
    };
    if let (Type::Vectors, Some((n, w))) = (&ty, inherited("is_root_relative", "isRootRelative")) {
        let key = spelled(w, "is_root_relative", "isRootRelative");
        if let Some(b) = bool_value(r, n, key) {
            root_relative |= b;
        }
    }
    let declared_frames = inherited("num_frames", "numFrames").map(|(n, _)| DeclaredFrames {
        text: n
            .scalar()
            .map_or_else(|| n.describe().to_owned(), str::to_owned),
        line: n.pos.line,
        col: n.pos.col,
    });
    Some(Header {
        ty,
        content,
        label,
        root_relative,
        timed,
        frame_rate,
        rate_failed,
        num_parts,
        part_labels,
        se3_format,
        declared_frames,
    })
}

/// The component's content, by the names of its format version, and whether it is a ZMP relative
/// to the root by name.
fn content(top: &Top, node: &Node, version: f64, ty: &Type, dialect: &Dialect) -> (String, bool) {
    let content_node = node
        .get("content")
        .or_else(|| top.node.get("content"))
        .or_else(|| {
            (version < 2.0)
                .then(|| node.get("purpose").or_else(|| top.node.get("purpose")))
                .flatten()
        });
    let raw = content_node.and_then(Node::scalar).unwrap_or("");
    match ty {
        Type::Values if raw == dialect.joint => (JOINT_DISPLACEMENT.to_owned(), false),
        Type::Poses if raw == dialect.link => (LINK_POSITION.to_owned(), false),
        Type::Vectors if dialect.zmp.contains(&raw) => {
            (ZMP.to_owned(), raw.starts_with("Relative"))
        }
        _ => (raw.to_owned(), false),
    }
}

/// `hasFrameTime`, the component's or the top node's: legal from version 2 on; even `false` is
/// refused before.
fn has_frame_time(
    r: &mut Report,
    top: &Top,
    node: &Node,
    version: f64,
    label: &str,
) -> Option<bool> {
    match lookup(node, "has_frame_time", "hasFrameTime") {
        Some((n, w)) => {
            let key = spelled(w, "has_frame_time", "hasFrameTime");
            if version < 2.0 {
                r.err(
                    n.pos,
                    format!(
                        "{label}: {key} needs formatVersion 2 or later (this is version {version})"
                    ),
                );
                None
            } else {
                bool_value(r, n, key)
            }
        }
        None => match top.has_frame_time {
            None => Some(false),
            Some((_, at)) if version < 2.0 => {
                r.err(
                    at,
                    format!("{label}: hasFrameTime needs formatVersion 2 or later (this is version {version})"),
                );
                None
            }
            Some((Ok(b), _)) => Some(b),
            Some((Err(()), _)) => None,
        },
    }
}

/// `numParts` (found as `given`): a whole number ≥ 1.
fn num_parts(
    r: &mut Report,
    node: &Node,
    given: Option<(&Node, &'static str)>,
    label: &str,
) -> Option<usize> {
    let Some((n, w)) = given else {
        r.err(node.pos, format!("{label}: missing key \"numParts\""));
        return None;
    };
    let key = spelled(w, "num_parts", "numParts");
    match n.scalar().map(|s| s.trim_ascii().parse::<i64>()) {
        Some(Ok(v)) if v >= 1 => usize::try_from(v).ok(),
        _ => {
            let found = n
                .scalar()
                .map_or_else(|| n.describe().to_owned(), |s| format!("\"{s}\""));
            r.err(
                n.pos,
                format!("{label}: {key}: expected a whole number ≥ 1, found {found}"),
            );
            None
        }
    }
}

/// A pose component's `SE3Format` (`format` before version 2).
fn se3_format(
    r: &mut Report,
    top: &Top,
    node: &Node,
    version: f64,
    label: &str,
) -> Option<Se3Format> {
    let key = if version < 2.0 { "format" } else { "SE3Format" };
    let Some(n) = node.get(key).or_else(|| top.node.get(key)) else {
        r.err(
            node.pos,
            format!("{label}: missing key \"{key}\" (XYZQWQXQYQZ or XYZRPY)"),
        );
        return None;
    };
    match n.scalar() {
        Some("XYZQWQXQYQZ") => Some(Se3Format::XyzQwQxQyQz),
        Some("XYZRPY") => Some(Se3Format::XyzRpy),
        Some("XYZQXQYQZQW") if version < 2.0 => Some(Se3Format::XyzQxQyQzQw),
        other => {
            let found = other.map_or_else(|| n.describe().to_owned(), |s| format!("\"{s}\""));
            r.err(
                n.pos,
                format!(
                    "{label}: {key}: expected XYZQWQXQYQZ or XYZRPY{}, found {found}",
                    if version < 2.0 { " or XYZQXQYQZQW" } else { "" }
                ),
            );
            None
        }
    }
}

/// The checked rows as the component's channel.
fn channel(
    r: &mut Report,
    header: &Header,
    rows: Rows,
    shape: &RowShape,
    timing: Timing,
) -> Option<Channel> {
    let num_parts = shape.num_parts;
    Some(match header.ty {
        Type::Values => Channel::Values(MultiValueSeq {
            num_parts,
            values: strip_times(rows.values, shape.timed, num_parts),
            timing,
        }),
        Type::Vectors => {
            let flat = strip_times(rows.values, shape.timed, 3);
            Channel::Vectors(Vector3Seq {
                timing,
                root_relative: header.root_relative,
                values: flat
                    .chunks_exact(3)
                    .map(|c| Vector3::new(c[0], c[1], c[2]))
                    .collect(),
            })
        }
        Type::Poses => {
            let format = header.se3_format?;
            Channel::Poses(MultiSe3Seq {
                num_parts,
                timing,
                format,
                poses: poses(r, &header.label, &rows, shape, format)?,
            })
        }
    })
}

/// `partLabels`: a list of one name per part.
fn part_labels(
    r: &mut Report,
    node: &Node,
    key: &str,
    parts: usize,
    label: &str,
) -> Option<PartLabels> {
    let Kind::Seq(items) = &node.kind else {
        r.err(
            node.pos,
            format!(
                "{label}: {key}: expected a list of {parts} names (one per part), found {}",
                node.describe()
            ),
        );
        return None;
    };
    let mut names = Vec::with_capacity(items.len());
    let mut at = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        match item.scalar() {
            Some(name) if !name.is_empty() => {
                names.push(name.to_owned());
                at.push((item.pos.line, item.pos.col));
            }
            _ => r.err(
                item.pos,
                format!(
                    "{label}: {key}: name {} is {}; expected a non-empty name",
                    i + 1,
                    if item.scalar().is_some() {
                        "empty"
                    } else {
                        item.describe()
                    }
                ),
            ),
        }
    }
    if items.len() != parts {
        r.err(
            node.pos,
            format!(
                "{label}: {key}: {} names for numParts {parts}; give one name per part",
                items.len()
            ),
        );
        return None;
    }
    (names.len() == parts).then_some(PartLabels { names, at })
}

fn display_content<'a>(content: &'a str, type_name: &'a str) -> &'a str {
    if content.is_empty() {
        type_name
    } else {
        content
    }
}

/// Moves the component's `frames` out of the tree.
fn take_frames(r: &mut Report, node: &mut Node, label: &str) -> Option<Rows> {
    let Kind::Map(entries) = &mut node.kind else {
        return None;
    };
    let Some(i) = entries
        .iter()
        .rposition(|(k, _)| k.text.as_deref() == Some("frames"))
    else {
        r.err(node.pos, format!("{label}: missing key \"frames\""));
        return None;
    };
    let value = &mut entries[i].1;
    let rows = match &mut value.kind {
        Kind::Rows(rows) => std::mem::take(rows),
        // Only an alias can put a plain list here: `frames` lists are compacted while parsing.
        Kind::Seq(items) => Rows::from_nodes(items),
        _ => {
            r.err(
                value.pos,
                format!(
                    "{label}: frames: expected a list of frame rows, found {}",
                    value.describe()
                ),
            );
            return None;
        }
    };
    if rows.rows.is_empty() {
        r.err(value.pos, format!("{label}: frames: no frame rows"));
        return None;
    }
    Some(rows)
}

struct RowShape {
    timed: bool,
    num_parts: usize,
    se3: Option<Se3Format>,
}

/// Checks every row's shape, numbers and time stamp. `Some(None)`: fixed-rate rows, all fine;
/// `Some(Some(times))`: timed rows, all fine.
fn check_rows(
    r: &mut Report,
    label: &str,
    rows: &Rows,
    shape: &RowShape,
    ty: &Type,
) -> Option<Option<Vec<f64>>> {
    let errors_before = r.row_errors;
    let t = usize::from(shape.timed);
    let mut times = shape.timed.then(|| Vec::with_capacity(rows.rows.len()));
    let mut bad = rows.bad.iter().peekable();
    let mut last_time: Option<f64> = None;
    for (i, row) in rows.rows.iter().enumerate() {
        let n = i + 1;
        let mut row_ok = true;
        match (ty, row.shape) {
            (_, Shape::Malformed { at, found }) => {
                r.row_err(at, || {
                    format!("{label}, frame row {n}: expected a list of numbers, found {found}")
                });
                row_ok = false;
            }
            (Type::Values | Type::Vectors, Shape::Flat) => {
                let width = match ty {
                    Type::Values => shape.num_parts,
                    _ => 3,
                };
                if row.len != width + t {
                    r.row_err(row.pos, || {
                        format!(
                            "{label}, frame row {n}: expected {} numbers{}, found {}",
                            width + t,
                            if shape.timed {
                                " (a time stamp, then the values)"
                            } else {
                                ""
                            },
                            row.len
                        )
                    });
                    row_ok = false;
                }
            }
            (Type::Values | Type::Vectors, Shape::Nested { .. }) => {
                r.row_err(row.pos, || {
                    format!("{label}, frame row {n}: expected a flat list of numbers, found a nested list")
                });
                row_ok = false;
            }
            (Type::Poses, Shape::Flat) => {
                r.row_err(row.pos, || {
                    format!(
                        "{label}, frame row {n}: expected {}{} SE3 value list(s) like [x, y, z, …], found plain numbers",
                        if shape.timed { "a time stamp, then " } else { "" },
                        shape.num_parts
                    )
                });
                row_ok = false;
            }
            (Type::Poses, Shape::Nested { first, count }) => {
                row_ok = check_se3_row(r, label, n, rows, row.pos, first, count, shape);
            }
        }
        while let Some(cell) = bad.next_if(|b| b.row <= i) {
            if cell.row == i && row_ok {
                r.row_err(cell.pos, || {
                    format!(
                        "{label}, frame row {n}: {}",
                        cell.problem.describe(&cell.text)
                    )
                });
                row_ok = false;
            }
        }
        if let (Some(times), true) = (times.as_mut(), row_ok) {
            let time = rows.values.get(row.start).copied().unwrap_or(f64::NAN);
            check_time(r, label, n, row.pos, time, last_time);
            last_time = Some(time);
            times.push(time);
        }
    }
    (r.row_errors == errors_before).then_some(times)
}

/// Row `n`'s time stamp: not negative, at most [`MAX_TIME_S`], after the previous row's by at
/// least [`MIN_STEP_S`].
fn check_time(r: &mut Report, label: &str, n: usize, pos: Pos, time: f64, last_time: Option<f64>) {
    if time < 0.0 {
        r.row_err(pos, || {
            format!(
                "{label}, frame row {n}: time stamp {} is negative",
                Num(time)
            )
        });
    } else if time > MAX_TIME_S {
        r.row_err(pos, || {
            format!(
                "{label}, frame row {n}: time stamp {} s is past {} s (a week), the \
                 longest motion motiond plays; time stamps are seconds from the motion's \
                 start",
                Num(time),
                Num(MAX_TIME_S)
            )
        });
    } else if let Some(prev) =
        last_time.filter(|&p| p < time && time - p < MIN_STEP_S * (1.0 - 1e-9))
    {
        r.row_err(pos, || {
            format!(
                "{label}, frame row {n}: time stamp {} is {} s after the previous row's \
                 {}; rows must be at least {} s (10 µs) apart (at most {} frames per \
                 second)",
                Num(time),
                Num(time - prev),
                Num(prev),
                Num(MIN_STEP_S),
                Num(*FRAME_RATE_RANGE.end())
            )
        });
    } else if let Some(prev) = last_time.filter(|&p| time <= p) {
        r.row_err(pos, || {
            format!(
                "{label}, frame row {n}: time stamp {time} does not come after the previous row's {prev} (time stamps must strictly increase)"
            )
        });
    }
}

#[allow(clippy::too_many_arguments)]
fn check_se3_row(
    r: &mut Report,
    label: &str,
    n: usize,
    rows: &Rows,
    row_pos: Pos,
    first: usize,
    count: usize,
    shape: &RowShape,
) -> bool {
    let t = usize::from(shape.timed);
    if count != shape.num_parts + t {
        r.row_err(row_pos, || {
            format!(
                "{label}, frame row {n}: expected {}{} SE3 value list(s), found {} element(s)",
                if shape.timed { "a time stamp and " } else { "" },
                shape.num_parts,
                count
            )
        });
        return false;
    }
    let width = match shape.se3 {
        Some(Se3Format::XyzRpy) => 6,
        _ => 7,
    };
    let mut ok = true;
    for (k, item) in rows.items[first..first + count].iter().enumerate() {
        match (k < t, item.list_len) {
            (true, None) => {}
            (true, Some(_)) => {
                r.row_err(item.pos, || {
                    format!("{label}, frame row {n}: expected the time stamp first, found a list")
                });
                ok = false;
            }
            (false, None) => {
                r.row_err(item.pos, || {
                    format!(
                        "{label}, frame row {n}: expected an SE3 value list of {width} numbers, found a number"
                    )
                });
                ok = false;
            }
            (false, Some(len)) if len != width => {
                r.row_err(item.pos, || {
                    format!(
                        "{label}, frame row {n}: an SE3 value needs {width} numbers ({}), found {len}",
                        shape.se3.map_or("", Se3Format::as_str)
                    )
                });
                ok = false;
            }
            (false, Some(_)) => {}
        }
    }
    ok
}

/// Turns the checked SE3 rows into poses, refusing zero and clearly non-unit quaternions.
fn poses(
    r: &mut Report,
    label: &str,
    rows: &Rows,
    shape: &RowShape,
    format: Se3Format,
) -> Option<Vec<Isometry3<f64>>> {
    let t = usize::from(shape.timed);
    let width = if format == Se3Format::XyzRpy { 6 } else { 7 };
    let mut out = Vec::with_capacity(rows.rows.len() * shape.num_parts);
    let errors_before = r.row_errors;
    for (i, row) in rows.rows.iter().enumerate() {
        let Shape::Nested { first, .. } = row.shape else {
            continue;
        };
        for part in 0..shape.num_parts {
            let start = row.start + t + part * width;
            let item_pos = rows
                .items
                .get(first + t + part)
                .map_or(row.pos, |it| it.pos);
            let Some(v) = rows.values.get(start..start + width) else {
                continue;
            };
            let translation = Translation3::new(v[0], v[1], v[2]);
            let rotation = match format {
                Se3Format::XyzRpy => UnitQuaternion::from_euler_angles(v[3], v[4], v[5]),
                Se3Format::XyzQwQxQyQz | Se3Format::XyzQxQyQzQw => {
                    let q = if format == Se3Format::XyzQwQxQyQz {
                        Quaternion::new(v[3], v[4], v[5], v[6])
                    } else {
                        Quaternion::new(v[6], v[3], v[4], v[5])
                    };
                    let norm = q.norm();
                    if norm == 0.0 {
                        r.row_err(item_pos, || {
                            format!(
                                "{label}, frame row {}: zero quaternion (no orientation)",
                                i + 1
                            )
                        });
                        continue;
                    }
                    if (norm - 1.0).abs() > QUATERNION_NORM_TOLERANCE {
                        r.row_err(item_pos, || {
                            format!(
                                "{label}, frame row {}: quaternion norm {norm} is not 1 (more than a rounding error)",
                                i + 1
                            )
                        });
                        continue;
                    }
                    UnitQuaternion::from_quaternion(q)
                }
            };
            out.push(Isometry3::from_parts(translation, rotation));
        }
    }
    (r.row_errors == errors_before).then_some(out)
}

/// Drops the leading time stamp of each `width + 1`-number row in place, so the values are not
/// copied (a 150 MB file's data must not exist twice).
fn strip_times(mut values: Vec<f64>, timed: bool, width: usize) -> Vec<f64> {
    if !timed {
        return values;
    }
    let stride = width + 1;
    let rows = values.len() / stride;
    for row in 0..rows {
        let src = row * stride + 1;
        values.copy_within(src..src + width, row * width);
    }
    values.truncate(rows * width);
    values.shrink_to_fit();
    values
}

fn check_durations(r: &mut Report, motion: &Motion) {
    let end = |c: &Component| -> f64 {
        let rows = match &c.data {
            Channel::Values(v) => v.rows(),
            Channel::Poses(p) => p.rows(),
            Channel::Vectors(v) => v.values.len(),
        };
        c.data.timing().time(rows.saturating_sub(1))
    };
    let Some(reference) = motion
        .components
        .iter()
        .find(|c| c.content == JOINT_DISPLACEMENT)
        .or_else(|| motion.components.first())
    else {
        return;
    };
    let ref_end = end(reference);
    for c in &motion.components {
        let e = end(c);
        if (e - ref_end).abs() > DURATION_TOLERANCE {
            r.err(
                Pos {
                    line: c.line,
                    col: c.col,
                },
                format!(
                    "component {}: its last row is at {e} s but {}'s is at {ref_end} s (all components of a motion must last equally long)",
                    display_content(&c.content, c.data.type_name()),
                    display_content(&reference.content, reference.data.type_name())
                ),
            );
        }
    }
}
