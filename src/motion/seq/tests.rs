//! Every accept and reject rule of seq-semantics.md §15 and policy.md, with positions; and the
//! proof that the fast scanner and the general reader agree.

use std::path::Path;

use proptest::prelude::*;

use super::*;

const PATH: &str = "m.seq";

/// Parses with both readers, checks they agree wherever the fast one answers, and returns the
/// general reader's result with errors as `LINE:COL: message` lines.
fn both(text: &str) -> Result<Motion, Vec<String>> {
    let path = Path::new(PATH);
    let strip = |e: Error| -> Vec<String> {
        match e {
            Error::Invalid(d) => d
                .iter()
                .map(|d| format!("{}:{}: {}", d.line, d.col, d.message))
                .collect(),
            Error::Io { .. } => vec![e.to_string()],
        }
    };
    let general = parse_general(text, path).map_err(strip);
    if let Some(fast) = parse_fast(text, path) {
        assert_eq!(
            fast.map_err(strip),
            general,
            "fast and general disagree on:\n{text}"
        );
    }
    general
}

fn fast_answers(text: &str) -> bool {
    parse_fast(text, Path::new(PATH)).is_some()
}

fn ok(text: &str) -> Motion {
    both(text).unwrap_or_else(|e| panic!("rejected: {e:#?}\n{text}"))
}

fn err(text: &str) -> Vec<String> {
    match both(text) {
        Ok(m) => panic!("accepted: {m:#?}\n{text}"),
        Err(e) => e,
    }
}

/// Asserts one error at `line:col` whose message contains `needle`.
fn rejects(text: &str, at: (u32, u32), needle: &str) {
    let errors = err(text);
    let prefix = format!("{}:{}: ", at.0, at.1);
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with(&prefix) && e.contains(needle)),
        "expected `{prefix}…{needle}…` among {errors:#?}\n{text}"
    );
}

const V2: &str = "\
type: CompositeSeq
content: BodyMotion
formatVersion: 2
frameRate: 100
components:
  - type: MultiValueSeq
    content: JointDisplacement
    numParts: 2
    frames:
      - [ 0.0, 0.5 ]
      - [ 0.1, 0.6 ]
";

#[test]
fn minimal_v2_motion() {
    assert!(fast_answers(V2));
    let m = ok(V2);
    assert_eq!(m.format_version, 2.0);
    assert_eq!(m.frame_rate, Some(100.0));
    let j = m.joint_displacement().unwrap();
    assert_eq!(j.values, vec![0.0, 0.5, 0.1, 0.6]);
    assert_eq!(j.timing, Timing::Fixed { frame_rate: 100.0 });
    assert_eq!((m.components[0].line, m.components[0].col), (6, 5));
}

#[test]
fn versions_and_their_content_names() {
    // v4, snake_case
    let v4 = "type: CompositeSeq\nformat_version: 4\nframe_rate: 50\ncomponents:\n  - type: MultiValueSeq\n    content: JointDisplacement\n    num_parts: 1\n    frames: [[1], [2]]\n";
    assert_eq!(ok(v4).joint_displacement().unwrap().rows(), 2);
    // camelCase in v4 and snake_case in v2 are both read
    let mixed = "type: CompositeSeq\nformatVersion: 4\nframe_rate: 50\ncomponents:\n  - {type: MultiValueSeq, content: JointDisplacement, numParts: 1, frames: [[1]]}\n";
    assert!(ok(mixed).joint_displacement().is_some());
    // v3 names
    let v3 = "type: CompositeSeq\nformatVersion: 3\nframeRate: 10\ncomponents:\n  - type: MultiValueSeq\n    content: MultiJointDisplacementSeq\n    numParts: 1\n    frames: [[1]]\n  - type: MultiSE3Seq\n    content: MultiLinkPositionSeq\n    numParts: 1\n    SE3Format: XYZQWQXQYQZ\n    frames: [[[0, 0, 1, 1, 0, 0, 0]]]\n  - type: Vector3Seq\n    content: ZMPSeq\n    frames: [[0, 0, 0]]\n";
    let m = ok(v3);
    assert!(m.joint_displacement().is_some() && m.link_position().is_some() && m.zmp().is_some());
    // v1: BodyMotion, JointPosition, `purpose` alias, no formatVersion
    let v1 = "type: BodyMotion\ncomponents:\n  - type: MultiValueSeq\n    purpose: JointPosition\n    frameRate: 10\n    numParts: 1\n    frames: [[1]]\n";
    assert!(ok(v1).joint_displacement().is_some());
    // v2 does not know `purpose` or JointPosition: that is an extra channel, not joint data
    let v2_old_name = V2.replace("content: JointDisplacement", "content: JointPosition");
    rejects(
        &v2_old_name,
        (1, 1),
        "no JointDisplacement and no LinkPosition",
    );
}

#[test]
fn version_five_and_type_mismatches_are_refused() {
    rejects(
        &V2.replace("formatVersion: 2", "formatVersion: 5"),
        (3, 16),
        "format version 5 is not supported",
    );
    rejects(
        &V2.replace("formatVersion: 2\n", ""),
        (1, 7),
        "needs formatVersion 2 to 4",
    );
    rejects(
        &V2.replace("CompositeSeq", "BodyMotion"),
        (1, 7),
        "expected CompositeSeq",
    );
    rejects(
        &V2.replace("type: CompositeSeq\n", ""),
        (1, 1),
        "missing key \"type\"",
    );
    rejects(
        &V2.replace("formatVersion: 2", "formatVersion: two"),
        (3, 16),
        "expected a number",
    );
}

#[test]
fn top_level_structure_errors() {
    rejects("- 1\n- 2\n", (1, 1), "expected a mapping");
    rejects(
        "type: CompositeSeq\nformatVersion: 2\nframeRate: 10\n",
        (1, 1),
        "missing key \"components\"",
    );
    rejects(
        "type: CompositeSeq\nformatVersion: 2\ncomponents: 3\n",
        (3, 13),
        "expected a list of components",
    );
    rejects(
        "type: CompositeSeq\nformatVersion: 2\ncomponents: [3]\n",
        (3, 14),
        "component 1: expected a mapping",
    );
    rejects("", (1, 1), "empty file");
    rejects("a: [1, 2\nb: 3\n", (2, 2), "YAML syntax error");
}

#[test]
fn inheritance_own_value_wins() {
    let text = "type: CompositeSeq\nformatVersion: 2\nframeRate: 100\nnumParts: 1\ncomponents:\n  - type: MultiValueSeq\n    content: JointDisplacement\n    frameRate: 50\n    frames: [[1], [2], [3]]\n  - type: Vector3Seq\n    content: ZMP\n    frameRate: 25\n    frames: [[0, 0, 0], [1, 1, 1]]\n";
    let m = ok(text);
    assert_eq!(
        m.joint_displacement().unwrap().timing,
        Timing::Fixed { frame_rate: 50.0 }
    );
    assert_eq!(m.joint_displacement().unwrap().num_parts, 1);
    assert_eq!(m.zmp().unwrap().timing, Timing::Fixed { frame_rate: 25.0 });
}

#[test]
fn unknown_types_are_skipped_and_unknown_contents_kept() {
    let text = format!(
        "{V2}  - type: MultiVector3Seq\n    content: Foo\n    frames: []\n  - type: MultiValueSeq\n    content: JointEffort\n    numParts: 1\n    frames: [[1], [2]]\n  - content: Bar\n"
    );
    let m = ok(&text);
    assert_eq!(m.skipped.len(), 2);
    assert_eq!(m.skipped[0].type_name, "MultiVector3Seq");
    assert_eq!((m.skipped[0].line, m.skipped[0].col), (12, 5));
    // A component without `type` inherits CompositeSeq, an unknown component type.
    assert_eq!(m.skipped[1].type_name, "CompositeSeq");
    assert_eq!(m.components[1].content, "JointEffort");
    assert_eq!(
        inspect_json(&m)["skipped"][0],
        serde_json::json!({"type": "MultiVector3Seq", "reason": "unknown type"})
    );
}

#[test]
fn num_frames_is_compared_with_the_rows_but_not_refused_here() {
    let path = Path::new(PATH);
    let matching = ok(&V2.replace("frameRate: 100", "frameRate: 100\nnumFrames: 2"));
    assert!(matching.frame_count_mismatches(path).is_empty());
    assert!(ok(V2).frame_count_mismatches(path).is_empty());
    // Inherited from the top, and a component's own value wins.
    let cut = ok(&V2.replace("frameRate: 100", "frameRate: 100\nnumFrames: 999"));
    let mismatches = cut.frame_count_mismatches(path);
    assert_eq!(mismatches.len(), 1);
    assert_eq!((mismatches[0].line, mismatches[0].col), (5, 12));
    assert!(
        mismatches[0].message.contains("numFrames is 999")
            && mismatches[0].message.contains("holds 2 frame rows"),
        "{}",
        mismatches[0].message
    );
    let own = ok(&V2
        .replace("frameRate: 100", "frameRate: 100\nnumFrames: 999")
        .replace("numParts: 2", "numParts: 2\n    num_frames: 2"));
    assert!(own.frame_count_mismatches(path).is_empty());
    let garbage = ok(&V2.replace("frameRate: 100", "frameRate: 100\nnumFrames: lots"));
    assert!(
        garbage.frame_count_mismatches(path)[0]
            .message
            .contains("numFrames is lots")
    );
}

#[test]
fn a_nul_byte_anywhere_is_refused_where_it_is() {
    // A power loss leaves a zero-filled tail at a line boundary: YAML readers stop there.
    let last_row = V2.rfind("      - [ 0.1").unwrap();
    let zero_filled = format!("{}{}", &V2[..last_row], "\0".repeat(64));
    rejects(&zero_filled, (11, 1), "NUL byte");
    rejects(&V2.replace("0.6", "0\0.6"), (11, 17), "NUL byte");
    rejects(
        &V2.replace("content: B", "content: \0B"),
        (2, 10),
        "NUL byte",
    );
}

#[test]
fn a_file_that_ends_in_the_middle_of_a_row_is_refused_there() {
    let last_row = V2.rfind("      - [ 0.1").unwrap();
    for cut in ["      - [ 0.1, 0.6", "      - [ 0.1, ", "      - [ 0.1"] {
        let text = format!("{}{cut}", &V2[..last_row]);
        rejects(&text, (11, 7), "ends in the middle of this frame row");
    }
    let flow_header = "type: CompositeSeq\ncontent: BodyMotion\nformatVersion: 2\nframeRate: {";
    let errors = err(flow_header);
    assert!(
        errors.iter().any(|e| e.contains("cut short")),
        "{errors:#?}"
    );
    // A break in the middle of the file is an ordinary syntax error.
    let errors = err(&V2.replace("    numParts", "   numParts"));
    assert!(
        !errors.iter().any(|e| e.contains("cut short")),
        "{errors:#?}"
    );
    // So is one inside the last line: nesting past the parser's limit.
    let deep = format!(
        "format: CommonSeq\nframeRate: 100\nframes:\n  - {}{}\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let errors = err(&deep);
    assert!(
        errors.iter().all(|e| !e.contains("cut short")),
        "{errors:#?}"
    );
}

#[test]
fn frame_rate_rules() {
    rejects(
        &V2.replace("frameRate: 100\n", ""),
        (5, 5),
        "missing key \"frameRate\"",
    );
    rejects(
        &V2.replace("frameRate: 100", "frameRate: 0"),
        (4, 12),
        "not a frame rate",
    );
    rejects(
        &V2.replace("frameRate: 100", "frameRate: -5"),
        (4, 12),
        "not a frame rate",
    );
    rejects(
        &V2.replace("frameRate: 100", "frameRate: 100abc"),
        (4, 12),
        "expected a number",
    );
    rejects(
        &V2.replace("frameRate: 100", "frameRate: .inf"),
        (4, 12),
        "expected a number",
    );
}

/// Rates that would make a motion one tick long or longer than any clock counts are refused at
/// the key, naming the range; so are time stamps past a week or closer than 10 µs.
#[test]
fn absurd_rates_and_time_stamps_are_refused_at_their_key() {
    for rate in ["1e308", "1e-308", "0.001", "1000000"] {
        rejects(
            &V2.replace("frameRate: 100", &format!("frameRate: {rate}")),
            (4, 12),
            &format!("frameRate: {rate} is not a frame rate motiond plays: give 0.01 to 100000"),
        );
    }
    for rate in ["0.01", "100000"] {
        ok(&V2.replace("frameRate: 100", &format!("frameRate: {rate}")));
    }
    let base = "type: CompositeSeq\nformatVersion: 2\nhasFrameTime: true\ncomponents:\n  - type: MultiValueSeq\n    content: JointDisplacement\n    numParts: 1\n    frames:\n";
    rejects(
        &format!("{base}      - [0, 1]\n      - [1e308, 1]\n"),
        (10, 9),
        "time stamp 1e308 s is past 604800 s (a week)",
    );
    rejects(
        &format!("{base}      - [0, 1]\n      - [1e-300, 1]\n"),
        (10, 9),
        "time stamp 1e-300 is 1e-300 s after the previous row's 0; rows must be at least 0.00001 s",
    );
    ok(&format!(
        "{base}      - [0, 1]\n      - [0.00001, 1]\n      - [0.00002, 1]\n"
    ));
}

#[test]
fn num_parts_rules() {
    rejects(
        &V2.replace("    numParts: 2\n", ""),
        (6, 5),
        "missing key \"numParts\"",
    );
    rejects(
        &V2.replace("numParts: 2", "numParts: 0"),
        (8, 15),
        "whole number",
    );
    rejects(
        &V2.replace("numParts: 2", "numParts: 2.0"),
        (8, 15),
        "whole number",
    );
    rejects(
        &V2.replace("numParts: 2", "numParts: -1"),
        (8, 15),
        "whole number",
    );
}

#[test]
fn frames_rules() {
    rejects(
        &V2.replace(
            "    frames:\n      - [ 0.0, 0.5 ]\n      - [ 0.1, 0.6 ]\n",
            "",
        ),
        (6, 5),
        "missing key \"frames\"",
    );
    rejects(
        &V2.replace(
            "    frames:\n      - [ 0.0, 0.5 ]\n      - [ 0.1, 0.6 ]\n",
            "    frames: []\n",
        ),
        (9, 13),
        "no frame rows",
    );
    rejects(
        &V2.replace("      - [ 0.1, 0.6 ]", "      - 0.1"),
        (11, 9),
        "frame row 2: expected a list of numbers, found a scalar",
    );
    rejects(
        &V2.replace("[ 0.1, 0.6 ]", "[ 0.1, 0.6, 0.7 ]"),
        (11, 9),
        "frame row 2: expected 2 numbers, found 3",
    );
    rejects(
        &V2.replace("[ 0.1, 0.6 ]", "[ 0.1 ]"),
        (11, 9),
        "expected 2 numbers, found 1",
    );
    rejects(
        &V2.replace("[ 0.1, 0.6 ]", "[ 0.1, [0.6] ]"),
        (11, 9),
        "nested list",
    );
    rejects(
        "type: CompositeSeq\nformatVersion: 2\nframeRate: 10\ncomponents:\n  - type: MultiValueSeq\n    content: JointDisplacement\n    numParts: 1\n    frames: 5\n",
        (8, 13),
        "expected a list of frame rows",
    );
}

#[test]
fn numbers_must_be_complete_and_finite() {
    rejects(
        &V2.replace("0.6 ]", "1.5abc ]"),
        (11, 16),
        "component 1 (JointDisplacement), frame row 2: expected a number, found \"1.5abc\"",
    );
    rejects(
        &V2.replace("0.6 ]", "nan ]"),
        (11, 16),
        "\"nan\" is not a finite number",
    );
    rejects(
        &V2.replace("0.6 ]", "inf ]"),
        (11, 16),
        "not a finite number",
    );
    rejects(
        &V2.replace("0.6 ]", "1e999 ]"),
        (11, 16),
        "not a finite number",
    );
    rejects(
        &V2.replace("0.6 ]", "0x10 ]"),
        (11, 16),
        "expected a number",
    );
    rejects(
        &V2.replace("0.6 ]", ".inf ]"),
        (11, 16),
        "expected a number",
    );
    // Choreonoid reads quoted numbers, exponents with three digits, and `1e-05`.
    let m = ok(&V2.replace("[ 0.1, 0.6 ]", "[ \"0.1\", -7.779e-005 ]"));
    assert_eq!(m.joint_displacement().unwrap().row(1), &[0.1, -7.779e-5]);
}

#[test]
fn all_problems_of_a_file_are_reported_together() {
    let text = "type: CompositeSeq\nformatVersion: 2\nframeRate: 10\ncomponents:\n  - type: MultiValueSeq\n    content: JointDisplacement\n    numParts: 2\n    frames:\n      - [1, x]\n      - [1]\n  - type: Vector3Seq\n    content: ZMP\n    frames:\n      - [0, 0]\n";
    let e = err(text);
    assert_eq!(
        e,
        vec![
            "9:13: component 1 (JointDisplacement), frame row 1: expected a number, found \"x\"",
            "10:9: component 1 (JointDisplacement), frame row 2: expected 2 numbers, found 1",
            "14:9: component 2 (ZMP), frame row 1: expected 3 numbers, found 2",
        ]
    );
}

#[test]
fn row_errors_are_capped() {
    let mut text = V2.replace("      - [ 0.0, 0.5 ]\n      - [ 0.1, 0.6 ]\n", "");
    for _ in 0..1000 {
        text.push_str("      - [ 1 ]\n");
    }
    let e = err(&text);
    assert_eq!(e.len(), build::MAX_ROW_ERRORS + 1);
    assert!(
        e[build::MAX_ROW_ERRORS].starts_with("30:9: 980 more problems"),
        "{e:?}"
    );
}

#[test]
fn has_frame_time_keeps_time_stamps() {
    let text = "type: CompositeSeq\nformatVersion: 2\nhasFrameTime: true\ncomponents:\n  - type: MultiValueSeq\n    content: JointDisplacement\n    numParts: 2\n    frames:\n      - [0.0, 1, 2]\n      - [0.1, 3, 4]\n      - [0.35, 5, 6]\n";
    let m = ok(text);
    let j = m.joint_displacement().unwrap();
    assert_eq!(j.values, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(
        j.timing,
        Timing::Timed {
            times: vec![0.0, 0.1, 0.35],
            frame_rate: None
        }
    );
    let json = inspect_json(&m);
    assert_eq!(json["components"][0]["last_time"], 0.35);
    assert_eq!(json["components"][0]["timed"], true);
    // On the component, with a frame rate kept for information.
    let own = "type: CompositeSeq\nformatVersion: 2\nframeRate: 100\ncomponents:\n  - type: Vector3Seq\n    content: ZMP\n    hasFrameTime: yes\n    frames: [[0, 1, 2, 3]]\n  - type: MultiValueSeq\n    content: JointDisplacement\n    numParts: 1\n    has_frame_time: On\n    frames: [[0, 1]]\n";
    let m = ok(own);
    assert_eq!(m.zmp().unwrap().timing.frame_rate(), Some(100.0));
    assert!(m.zmp().unwrap().timing.is_timed());
}

#[test]
fn time_stamps_must_be_non_negative_and_strictly_increasing() {
    let base = "type: CompositeSeq\nformatVersion: 2\nhasFrameTime: true\ncomponents:\n  - type: MultiValueSeq\n    content: JointDisplacement\n    numParts: 1\n    frames:\n";
    rejects(
        &format!("{base}      - [-0.1, 1]\n      - [0.1, 1]\n"),
        (9, 9),
        "time stamp -0.1 is negative",
    );
    rejects(
        &format!("{base}      - [0.0, 1]\n      - [0.0, 1]\n"),
        (10, 9),
        "strictly increase",
    );
    rejects(
        &format!("{base}      - [0.5, 1]\n      - [0.2, 1]\n"),
        (10, 9),
        "does not come after",
    );
    rejects(
        &format!("{base}      - [0.5]\n"),
        (9, 9),
        "expected 2 numbers (a time stamp, then the values), found 1",
    );
}

#[test]
fn has_frame_time_needs_version_2() {
    let v1 = "type: BodyMotion\ncomponents:\n  - type: MultiValueSeq\n    content: JointPosition\n    frameRate: 10\n    numParts: 1\n    hasFrameTime: false\n    frames: [[1]]\n";
    rejects(v1, (7, 19), "needs formatVersion 2 or later");
    rejects(
        &V2.replace("frameRate: 100", "frameRate: 100\nhasFrameTime: maybe"),
        (5, 15),
        "expected a boolean",
    );
    rejects(
        &V2.replace("frameRate: 100", "frameRate: 100\nhasFrameTime: 1"),
        (5, 15),
        "expected a boolean",
    );
}

#[test]
fn all_22_boolean_words() {
    for word in [
        "y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON", "n", "N", "no",
        "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF",
    ] {
        let text = format!(
            "type: CompositeSeq\nformatVersion: 2\nframeRate: 10\ncomponents:\n  - type: Vector3Seq\n    content: ZMP\n    isRootRelative: {word}\n    frames: [[0, 0, 0]]\n  - type: MultiValueSeq\n    content: JointDisplacement\n    numParts: 1\n    frames: [[0]]\n"
        );
        let m = ok(&text);
        assert_eq!(
            m.zmp().unwrap().root_relative,
            word.starts_with(['y', 'Y', 't', 'T']) || word.eq_ignore_ascii_case("on"),
            "{word}"
        );
    }
}

const SE3: &str = "type: CompositeSeq\nformatVersion: 2\nframeRate: 10\ncomponents:\n  - type: MultiSE3Seq\n    content: LinkPosition\n    numParts: 1\n    SE3Format: XYZQWQXQYQZ\n    frames:\n      - [ [ 1, 2, 3, 1, 0, 0, 0 ] ]\n";

#[test]
fn se3_formats() {
    let m = ok(SE3);
    let p = m.link_position().unwrap();
    assert_eq!(p.poses[0].translation.vector, Vector3::new(1.0, 2.0, 3.0));
    // RPY in radians, R = Rz·Ry·Rx: yaw π/2 is q = (cos π/4, 0, 0, sin π/4)
    let rpy = SE3.replace("XYZQWQXQYQZ", "XYZRPY").replace(
        "[ 1, 2, 3, 1, 0, 0, 0 ]",
        "[ 1, 2, 3, 0, 0, 1.5707963267948966 ]",
    );
    let q = ok(&rpy).link_position().unwrap().poses[0].rotation;
    assert!(
        (q.w - std::f64::consts::FRAC_1_SQRT_2).abs() < 1e-12
            && (q.k - std::f64::consts::FRAC_1_SQRT_2).abs() < 1e-12
    );
    // XYZQXQYQZQW only in version 1, where the key is `format`
    let v1 = "type: BodyMotion\ncomponents:\n  - type: MultiSe3Seq\n    content: LinkPosition\n    frameRate: 10\n    numParts: 1\n    format: XYZQXQYQZQW\n    frames: [[[0, 0, 0, 0, 0, 1, 0]]]\n";
    let q = ok(v1).link_position().unwrap().poses[0].rotation;
    assert_eq!((q.w, q.k), (0.0, 1.0));
    rejects(
        &SE3.replace("XYZQWQXQYQZ", "XYZQXQYQZQW"),
        (8, 16),
        "expected XYZQWQXQYQZ or XYZRPY",
    );
    rejects(
        &SE3.replace("    SE3Format: XYZQWQXQYQZ\n", ""),
        (5, 5),
        "missing key \"SE3Format\"",
    );
    // timed SE3 rows: the time is a sibling of the pose lists
    let timed = SE3.replace("frameRate: 10", "hasFrameTime: true").replace(
        "[ [ 1, 2, 3, 1, 0, 0, 0 ] ]",
        "[ 0.5, [ 1, 2, 3, 1, 0, 0, 0 ] ]",
    );
    assert_eq!(ok(&timed).link_position().unwrap().timing.time(0), 0.5);
}

#[test]
fn se3_rows_are_checked() {
    rejects(
        &SE3.replace("[ [ 1, 2, 3, 1, 0, 0, 0 ] ]", "[ [ 1, 2, 3, 1, 0, 0 ] ]"),
        (10, 11),
        "an SE3 value needs 7 numbers",
    );
    rejects(
        &SE3.replace("[ [ 1, 2, 3, 1, 0, 0, 0 ] ]", "[ 1, 2, 3, 1, 0, 0, 0 ]"),
        (10, 9),
        "found plain numbers",
    );
    rejects(
        &SE3.replace(
            "[ [ 1, 2, 3, 1, 0, 0, 0 ] ]",
            "[ [ 1, 2, 3, 1, 0, 0, 0 ], [ 1, 2, 3, 1, 0, 0, 0 ] ]",
        ),
        (10, 9),
        "found 2 element(s)",
    );
    rejects(
        &SE3.replace("[ [ 1, 2, 3, 1, 0, 0, 0 ] ]", "[ [ 1, 2, 3, 0, 0, 0, 0 ] ]"),
        (10, 11),
        "zero quaternion",
    );
    rejects(
        &SE3.replace("[ [ 1, 2, 3, 1, 0, 0, 0 ] ]", "[ [ 1, 2, 3, 2, 0, 0, 0 ] ]"),
        (10, 11),
        "quaternion norm 2 is not 1",
    );
}

#[test]
fn near_unit_quaternions_are_normalised() {
    let m = ok(&SE3.replace("1, 0, 0, 0 ]", "0.7071, 0, 0, 0.7071 ]"));
    let q = m.link_position().unwrap().poses[0].rotation;
    assert!((q.quaternion().norm() - 1.0).abs() < 1e-15);
    assert!((q.w - std::f64::consts::FRAC_1_SQRT_2).abs() < 1e-12);
}

#[test]
fn zmp_flags_and_rows() {
    let v1 = "type: BodyMotion\nframeRate: 10\ncomponents:\n  - type: MultiValueSeq\n    content: JointPosition\n    numParts: 1\n    frames: [[0], [1]]\n  - type: Vector3Seq\n    content: RelativeZmp\n    frames: [[0, 0, 0], [1, 1, 1]]\n";
    assert!(ok(v1).zmp().unwrap().root_relative);
    let bad =
        V2.to_owned() + "  - type: Vector3Seq\n    content: ZMP\n    frames: [[0, 0], [1, 1, 1]]\n";
    rejects(
        &bad,
        (14, 14),
        "component 2 (ZMP), frame row 1: expected 3 numbers, found 2",
    );
}

#[test]
fn durations_must_agree() {
    let text = V2.to_owned()
        + "  - type: Vector3Seq\n    content: ZMP\n    frames: [[0, 0, 0], [1, 1, 1], [2, 2, 2]]\n";
    rejects(
        &text,
        (12, 5),
        "its last row is at 0.02 s but JointDisplacement's is at 0.01 s",
    );
    // the same duration at another rate is fine
    let other_rate = V2.to_owned()
        + "  - type: Vector3Seq\n    content: ZMP\n    frameRate: 200\n    frames: [[0, 0, 0], [1, 1, 1], [2, 2, 2]]\n";
    assert!(ok(&other_rate).zmp().is_some());
}

#[test]
fn a_later_component_of_the_same_content_replaces_the_earlier() {
    let text = V2.to_owned()
        + "  - type: MultiValueSeq\n    content: JointDisplacement\n    numParts: 1\n    frames: [[7], [8]]\n";
    let m = ok(&text);
    assert_eq!(m.components.len(), 1);
    assert_eq!(m.joint_displacement().unwrap().values, vec![7.0, 8.0]);
}

#[test]
fn duplicate_keys_last_wins() {
    let m = ok(&V2.replace("frameRate: 100", "frameRate: 100\nframeRate: 200"));
    assert_eq!(m.frame_rate, Some(200.0));
}

#[test]
fn styles_fast_and_general() {
    // plain JSON
    let json = r#"{"type": "CompositeSeq", "formatVersion": 2, "frameRate": 10,
 "components": [{"type":"MultiValueSeq","content":"JointDisplacement","numParts":2,
   "frames": [[0, 1], [2, 3]]}]}"#;
    assert_eq!(
        ok(json).joint_displacement().unwrap().values,
        vec![0.0, 1.0, 2.0, 3.0]
    );
    // comments, CRLF, indentless lists, quoted keys and values
    let styled = "# a comment\r\ntype: 'CompositeSeq'   # trailing\r\n\"formatVersion\": 2\r\nframeRate: 10\r\ncomponents:\r\n- type: MultiValueSeq\r\n  content: \"JointDisplacement\"\r\n  numParts: 2\r\n  frames:\r\n  - [0, 1]  # row\r\n\r\n  - [2, 3]\r\n";
    assert!(fast_answers(styled));
    assert_eq!(
        ok(styled).joint_displacement().unwrap().values,
        vec![0.0, 1.0, 2.0, 3.0]
    );
    // a lone CR ends a line for YAML (found by the mutation proptest): left to the general reader
    let lone_cr = V2.replace("frameRate: 100\n", "frameRate: 100 # Hz\r");
    assert!(!fast_answers(&lone_cr));
    let _ = both(&lone_cr);
    // anchors, aliases, merge keys and tags: general reader only
    let anchors = "type: CompositeSeq\nformatVersion: 2\ncommon: &c\n  type: MultiValueSeq\n  numParts: 1\nframeRate: !!float 10\ncomponents:\n  - <<: *c\n    content: JointDisplacement\n    frames: &f [[1], [2]]\n  - <<: *c\n    content: JointEffort\n    frames: *f\n";
    assert!(!fast_answers(anchors));
    let m = ok(anchors);
    assert_eq!(m.components.len(), 2);
    assert_eq!(m.components[1].content, "JointEffort");
}

// --- Property tests -------------------------------------------------------------------------

/// How a generated file is written.
#[derive(Debug, Clone)]
struct Style {
    snake: bool,
    flow_components: bool,
    indentless: bool,
    comments: bool,
    crlf: bool,
    quote_header: bool,
    spaces_in_rows: bool,
}

fn style() -> impl Strategy<Value = Style> {
    (any::<[bool; 7]>()).prop_map(|b| Style {
        snake: b[0],
        flow_components: b[1],
        indentless: b[2],
        comments: b[3],
        crlf: b[4],
        quote_header: b[5],
        spaces_in_rows: b[6],
    })
}

/// A cell: mostly numbers, sometimes the things files get wrong.
fn cell() -> impl Strategy<Value = String> {
    prop_oneof![
        60 => (-1e3f64..1e3).prop_map(|v| format!("{v}")),
        12 => (-100i32..100).prop_map(|v| v.to_string()),
        6 => (-9.0f64..9.0).prop_map(|v| format!("{v:e}")),
        1 => Just("nan".to_owned()),
        1 => Just("1.5abc".to_owned()),
        1 => Just("\"2.5\"".to_owned()),
        1 => Just("x".to_owned()),
        1 => Just("1e999".to_owned()),
    ]
}

#[derive(Debug, Clone)]
struct Spec {
    version: u8,
    timed: bool,
    rate: String,
    parts: usize,
    rows: Vec<Vec<String>>,
    /// `Some(None)`: a ZMP component as long as the joint data; `Some(Some(n))`: `n` rows.
    zmp_rows: Option<Option<usize>>,
    se3: bool,
    style: Style,
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        prop_oneof![Just(1u8), Just(2), Just(3), Just(4)],
        any::<bool>(),
        prop_oneof![8 => Just("100".to_owned()), 1 => Just("0".to_owned()), 1 => Just("25.5".to_owned())],
        1usize..4,
        proptest::collection::vec(proptest::collection::vec(cell(), 4), 1..6),
        proptest::option::of(0usize..12),
        proptest::option::of(proptest::option::of(1usize..6)),
        any::<bool>(),
        style(),
    )
        .prop_map(|(version, timed, rate, parts, cells, odd_row, zmp_rows, se3, style)| {
            let mut rows: Vec<Vec<String>> =
                cells.into_iter().map(|r| r[..parts].to_vec()).collect();
            // Now and then one row of the wrong length.
            if let Some(row) = odd_row.and_then(|i| rows.get_mut(i)) {
                row.push("0".into());
            }
            Spec {
                version,
                timed,
                rate,
                parts,
                rows,
                zmp_rows,
                se3,
                style,
            }
        })
}

fn render(s: &Spec) -> String {
    let st = &s.style;
    let key = |snake: &str, camel: &str| {
        if st.snake {
            snake.to_owned()
        } else {
            camel.to_owned()
        }
    };
    let (top_type, joint, link, zmp) = match s.version {
        1 => ("BodyMotion", "JointPosition", "LinkPosition", "ZMP"),
        3 => (
            "CompositeSeq",
            "MultiJointDisplacementSeq",
            "MultiLinkPositionSeq",
            "ZMPSeq",
        ),
        _ => ("CompositeSeq", "JointDisplacement", "LinkPosition", "ZMP"),
    };
    let q = |v: &str| {
        if st.quote_header {
            format!("\"{v}\"")
        } else {
            v.to_owned()
        }
    };
    let mut out = String::new();
    if st.comments {
        out.push_str("# generated\n\n");
    }
    out.push_str(&format!("type: {}\n", q(top_type)));
    if s.version > 1 {
        out.push_str(&format!(
            "{}: {}\n",
            key("format_version", "formatVersion"),
            s.version
        ));
    }
    out.push_str(&format!(
        "{}: {}{}\n",
        key("frame_rate", "frameRate"),
        s.rate,
        if st.comments { "  # Hz" } else { "" }
    ));
    if s.timed {
        out.push_str(&format!(
            "{}: true\n",
            key("has_frame_time", "hasFrameTime")
        ));
    }
    out.push_str("components:\n");
    let (dash, ind) = if st.indentless {
        ("- ", "  ")
    } else {
        ("  - ", "    ")
    };
    let sep = if st.spaces_in_rows { ", " } else { "," };
    let row = |cells: &[String], i: usize| -> String {
        let mut cells = cells.to_vec();
        if s.timed {
            cells.insert(0, format!("{}", i as f64 * 0.01));
        }
        if st.spaces_in_rows {
            format!("[ {} ]", cells.join(sep))
        } else {
            format!("[{}]", cells.join(sep))
        }
    };
    let mut component = |ty: &str, content: &str, extra: &[String], rows: Vec<String>| {
        if st.flow_components {
            let mut fields = vec![format!("type: {ty}"), format!("content: {content}")];
            fields.extend(extra.iter().cloned());
            fields.push(format!("frames: [{}]", rows.join(", ")));
            out.push_str(&format!("{dash}{{{}}}\n", fields.join(", ")));
        } else {
            out.push_str(&format!("{dash}type: {ty}\n{ind}content: {}\n", q(content)));
            for e in extra {
                out.push_str(&format!("{ind}{e}\n"));
            }
            if st.comments {
                out.push_str(&format!("{ind}# the rows:\n"));
            }
            out.push_str(&format!("{ind}frames:\n"));
            for r in rows {
                out.push_str(&format!(
                    "{ind}  - {r}{}\n",
                    if st.comments { " # r" } else { "" }
                ));
            }
        }
    };
    let parts = format!("{}: {}", key("num_parts", "numParts"), s.parts);
    let joint_rows: Vec<String> = s.rows.iter().enumerate().map(|(i, r)| row(r, i)).collect();
    component(
        "MultiValueSeq",
        joint,
        std::slice::from_ref(&parts),
        joint_rows,
    );
    if s.se3 {
        let fmt_key = if s.version < 2 { "format" } else { "SE3Format" };
        let rows = s
            .rows
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let pose = format!(
                    "[{}]",
                    [
                        r.first().cloned().unwrap_or("0".into()),
                        "0".into(),
                        "0".into(),
                        "1".into(),
                        "0".into(),
                        "0".into(),
                        "0".into()
                    ]
                    .join(sep)
                );
                if s.timed {
                    format!("[{}{sep}{pose}]", i as f64 * 0.01)
                } else {
                    format!("[{pose}]")
                }
            })
            .collect();
        component(
            "MultiSE3Seq",
            link,
            &[
                format!("{}: 1", key("num_parts", "numParts")),
                format!("{fmt_key}: XYZQWQXQYQZ"),
            ],
            rows,
        );
    }
    if let Some(n) = s.zmp_rows {
        let n = n.unwrap_or(s.rows.len());
        let rows = (0..n)
            .map(|i| row(&["0".into(), "1".into(), "2".into()], i))
            .collect();
        component("Vector3Seq", zmp, &[], rows);
    }
    if st.crlf {
        out = out.replace('\n', "\r\n");
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Generated files of many styles: whenever the fast scanner answers, it gives the same motion
    /// or the same errors at the same positions as the general reader; and block-style files
    /// written the way Choreonoid writes them always take the fast path.
    #[test]
    fn fast_and_general_readers_agree(s in spec()) {
        let text = render(&s);
        let _ = both(&text);
        if !s.style.flow_components && !s.style.quote_header {
            prop_assert!(fast_answers(&text) || text.contains("\"2.5\""), "fast path declined:\n{}", text);
        }
    }

    /// A NUL byte anywhere in a valid file is refused by both readers, at its own position.
    #[test]
    fn nul_anywhere_is_refused_at_its_position(s in spec(), at in any::<prop::sample::Index>()) {
        let mut text = render(&s);
        let offset = at.index(text.len() + 1);
        prop_assume!(text.is_char_boundary(offset));
        text.insert(offset, '\0');
        let (line, col) = crate::diag::LineIndex::new(&text).line_col(offset);
        let errors = err(&text);
        prop_assert_eq!(errors.len(), 1);
        prop_assert!(errors[0].starts_with(&format!("{line}:{col}: NUL byte")), "{:?}", errors);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let text = String::from_utf8_lossy(&bytes);
        let _ = both(&text);
    }

    #[test]
    fn yaml_ish_text_never_panics(text in "[-\\[\\]{}:,#&*!|>'\"\\n .0-9a-zA-Z]{0,300}") {
        let _ = both(&text);
    }

    #[test]
    fn mutated_files_never_panic_and_readers_agree(
        s in spec(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let mut bytes = render(&s).into_bytes();
        for (at, b) in edits {
            let i = at.index(bytes.len());
            bytes[i] = if b.is_ascii() { b } else { b' ' };
        }
        let text = String::from_utf8_lossy(&bytes);
        let _ = both(&text);
    }
}

#[test]
fn part_labels_name_the_joint_columns() {
    let with =
        |labels: &str| V2.replace("    numParts: 2\n", &format!("    numParts: 2\n{labels}"));
    let text = with("    partLabels: [ \"hip\", knee ]\n");
    assert!(fast_answers(&text));
    let m = ok(&text);
    assert_eq!(
        m.joint_names(),
        Some(&["hip".to_string(), "knee".to_string()][..])
    );
    assert_eq!(ok(V2).joint_names(), None);
    assert_eq!(
        ok(&with("    part_labels:\n      - a\n      - b\n")).joint_names(),
        Some(&["a".to_string(), "b".to_string()][..])
    );
    rejects(
        &with("    partLabels: [ a ]\n"),
        (9, 17),
        "partLabels: 1 names for numParts 2; give one name per part",
    );
    rejects(
        &with("    partLabels: a\n"),
        (9, 17),
        "expected a list of 2 names",
    );
    rejects(
        &with("    partLabels: [ a, [b] ]\n"),
        (9, 22),
        "name 2 is a list",
    );
    rejects(
        &with("    partLabels: [ a, \"\" ]\n"),
        (9, 22),
        "name 2 is empty",
    );
}
