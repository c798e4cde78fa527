//! `motiond resample` and `motiond check` as operators and scripts run them.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn motiond(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_motiond"))
        .args(args)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

struct Sr1 {
    skel: PathBuf,
    map: PathBuf,
    corpus: PathBuf,
}

fn sr1() -> Option<Sr1> {
    let corpus = common::corpus()?;
    Some(Sr1 {
        skel: corpus.join("robots/sr1.skel"),
        map: corpus.join("robots/sr1-joints.yaml"),
        corpus,
    })
}

#[test]
fn check_accepts_refuses_and_explains() {
    let Some(r) = sr1() else { return };
    let ok = motiond(&[
        "check",
        "--skel",
        s(&r.skel),
        "--joint-map",
        s(&r.map),
        s(&r.corpus.join("seq/v2/SR1WalkPattern1.seq")),
    ]);
    assert_eq!(ok.status.code(), Some(0), "{}", text(&ok.stderr));
    assert!(text(&ok.stdout).contains("ok: every sample is within the limits"));

    let refused = motiond(&[
        "check",
        "--skel",
        s(&r.skel),
        "--joint-map",
        s(&r.map),
        s(&r.corpus.join("seq/v2/SR1WalkPattern3.seq")),
        "--json",
    ]);
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused.stderr));
    let json: serde_json::Value = serde_json::from_slice(&refused.stdout).unwrap();
    assert_eq!(json["ok"], false);
    assert_eq!(json["violations"][0]["joint"], "RARM_ELBOW");
    assert_eq!(json["violations"][0]["quantity"], "velocity");
    assert_eq!(json["violations"][0]["limit"], 0.0);
    assert_eq!(json["columns"][0], "RLEG_HIP_R");
    assert_eq!(json["rate_hz"], 1000.0);
}

#[test]
fn check_points_at_a_bad_joint_map_entry() {
    let Some(r) = sr1() else { return };
    let dir = tempfile::tempdir().unwrap();
    let map = dir.path().join("map.yaml");
    let good = std::fs::read_to_string(&r.map).unwrap();
    std::fs::write(&map, good.replace("- RLEG_HIP_P", "- RLEG_HIP_X")).unwrap();
    let line = good
        .lines()
        .position(|l| l.contains("- RLEG_HIP_P"))
        .unwrap()
        + 1;
    let out = motiond(&[
        "check",
        "--skel",
        s(&r.skel),
        "--joint-map",
        s(&map),
        s(&r.corpus.join("seq/v2/SR1WalkPattern1.seq")),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    // SR1's model has no acceleration limits: a warning says so first.
    assert!(
        err.lines().any(|l| l.starts_with(&format!("{}:{line}:5: joint `RLEG_HIP_X` (column 1) is not a DOF the robot commands; did you mean", map.display()))),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn resample_writes_csv_seq_and_a_plot() {
    let Some(r) = sr1() else { return };
    let timed = r.corpus.join("seq/timed/SR1WalkPattern3-irregular.seq");
    // Without a robot: columns c0.., one row per tick up to the last sample time.
    let out = motiond(&["resample", s(&timed), "--rate", "500", "--no-robot"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let csv = text(&out.stdout);
    let mut lines = csv.lines();
    assert!(lines.next().unwrap().starts_with("time,c0,c1,"));
    assert_eq!(lines.next().unwrap().split(',').count(), 30);
    assert_eq!(csv.lines().count(), 1 + 4451);
    assert!(csv.lines().last().unwrap().starts_with("8.9,"));

    // With the robot: joint names, a .seq Choreonoid (and motiond) can load, and a plot.
    let dir = tempfile::tempdir().unwrap();
    let seq_out = dir.path().join("walk.seq");
    let svg = dir.path().join("walk.svg");
    let out = motiond(&[
        "resample",
        s(&r.corpus.join("seq/v2/SR1WalkPattern1.seq")),
        "--rate",
        "1000",
        "--skel",
        s(&r.skel),
        "--joint-map",
        s(&r.map),
        "--format",
        "seq",
        "-o",
        s(&seq_out),
        "--plot",
        s(&svg),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let back = motiond::motion::seq::load(&seq_out).unwrap();
    let jd = back.joint_displacement().unwrap();
    assert_eq!((jd.num_parts, jd.rows()), (29, 13401));
    assert_eq!(jd.timing.frame_rate(), Some(1000.0));
    let plot = std::fs::read_to_string(&svg).unwrap();
    assert!(plot.contains("RLEG_KNEE") && plot.contains("<polyline"));

    let out = motiond(&[
        "resample",
        s(&r.corpus.join("seq/v2/SR1WalkPattern1.seq")),
        "--rate",
        "250",
        "--skel",
        s(&r.skel),
        "--joint-map",
        s(&r.map),
    ]);
    assert!(text(&out.stdout).starts_with("time,RLEG_HIP_R,RLEG_HIP_P,"));
}

#[test]
fn invalid_input_exits_2_with_a_position() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.seq");
    std::fs::write(&bad, "type: CompositeSeq\nformatVersion: 2\nframeRate: [\n").unwrap();
    let out = motiond(&["resample", s(&bad), "--rate", "1000"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).starts_with(&format!("{}:", bad.display())));
    let out = motiond(&["resample", s(&bad), "--rate", "1000", "--interp", "spline"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("expected hold, linear, pchip or cubic"));
}

/// A 6-column motion for the demo arm, mapped by the shipped configuration's joint list and
/// checked against its tightened elbow limit.
#[test]
fn check_uses_the_configuration() {
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/motiond.yaml");
    let dir = tempfile::tempdir().unwrap();
    let motion = dir.path().join("elbow.seq");
    let mut frames = String::new();
    for i in 0..=200 {
        // The elbow sweeps 0.3 rad and back in 2 s (config limits it to 2.0 rad/s, 6.0 rad/s²).
        let t = i as f64 / 100.0;
        let e = 0.15 * (1.0 - (std::f64::consts::PI * t).cos());
        frames.push_str(&format!("      - [0, 0, {e}, 0, 0, 0.01]\n"));
    }
    let head = "type: CompositeSeq\ncontent: BodyMotion\nformatVersion: 2\nframeRate: 100\ncomponents:\n  - type: MultiValueSeq\n    content: JointDisplacement\n    numParts: 6\n    frames:\n";
    std::fs::write(&motion, format!("{head}{frames}")).unwrap();
    let out = motiond(&["check", "--config", s(&config), s(&motion)]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    // Twice as fast: four times the acceleration, above the configured 6.0 for elbow_pitch.
    let out = motiond(&["check", "--config", s(&config), s(&motion), "--speed", "2"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stdout).contains("elbow_pitch: acceleration"),
        "{}",
        text(&out.stdout)
    );
    // Retimed back to what the limits allow.
    let out = motiond(&[
        "check",
        "--config",
        s(&config),
        s(&motion),
        "--speed",
        "2",
        "--policy",
        "retime",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    assert!(text(&out.stdout).contains("retimed: slowed down uniformly by"));
}

/// A motion whose `partLabels` name this robot's DOFs in another order (a take recorded under
/// another configuration) is refused at the label, naming the joint list's entry; labels that
/// name no DOF of the robot are another tool's and the joint list translates them; without a
/// joint list, labels naming the robot's DOFs are the mapping.
#[test]
fn part_labels_that_contradict_the_joint_list_are_refused() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = root.join("config/motiond.yaml");
    let dir = tempfile::tempdir().unwrap();
    let labelled = |name: &str, labels: &str| {
        let path = dir.path().join(name);
        let mut text = format!(
            "type: CompositeSeq\ncontent: BodyMotion\nformatVersion: 2\nframeRate: 100\n\
             components:\n  - type: MultiValueSeq\n    content: JointDisplacement\n    \
             numParts: 6\n    partLabels: [ {labels} ]\n    frames:\n"
        );
        for i in 0..=100 {
            let e = 0.1 * (1.0 - (std::f64::consts::PI * i as f64 / 100.0).cos());
            text.push_str(&format!("      - [{e}, 0, 0, 0, 0, 0.01]\n"));
        }
        std::fs::write(&path, text).unwrap();
        path
    };
    let in_order = labelled(
        "in_order.seq",
        "base_yaw, shoulder_pitch, elbow_pitch, wrist_pitch, wrist_roll, gripper_slide",
    );
    let out = motiond(&["check", "--config", s(&config), s(&in_order)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    let swapped = labelled(
        "swapped.seq",
        "shoulder_pitch, base_yaw, elbow_pitch, wrist_pitch, wrist_roll, gripper_slide",
    );
    let out = motiond(&["check", "--config", s(&config), s(&swapped)]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    let err = text(&out.stderr);
    // Line 9, where each label is written; the joint list's entry by FILE:LINE:COL.
    assert!(
        err.contains(&format!(
            "{}:9:19: column 0 is labelled `shoulder_pitch` here, but robot.joints at {}:",
            swapped.display(),
            config.display()
        )),
        "{err}"
    );
    assert!(err.contains("column 1 is labelled `base_yaw`"), "{err}");
    assert!(!err.contains("column 2"), "{err}");
    assert!(
        err.contains("list the DOFs in the file's column order"),
        "{err}"
    );

    let foreign = labelled("foreign.seq", "J1, J2, J3, J4, J5, J6");
    let out = motiond(&["check", "--config", s(&config), s(&foreign)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    // No joint list: the labels map the columns (no guess, so no warning about one).
    let skel = root.join("config/demo-arm.skel");
    let out = motiond(&["check", "--skel", s(&skel), s(&swapped)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(!text(&out.stderr).contains("no joint list given"));
    let misspelt = labelled(
        "misspelt.seq",
        "base_yaw, shoulder_pich, elbow_pitch, wrist_pitch, wrist_roll, gripper_slide",
    );
    let out = motiond(&["check", "--skel", s(&skel), s(&misspelt)]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!(
            "{}:9:29: partLabels: joint `shoulder_pich` (column 1) is not a DOF the robot commands; did you mean `shoulder_pitch`?",
            misspelt.display()
        )),
        "{err}"
    );
}

/// `frameRate: 1e308` once made a one-tick motion that `check` refused with a report naming no
/// line; `1e-308` a motion "lasting inf s". Both are refused at the key, with the range and why.
#[test]
fn absurd_frame_rates_are_refused_at_the_key() {
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/motiond.yaml");
    let wave = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/motions/wave.seq");
    let text_of = std::fs::read_to_string(&wave).unwrap();
    let (line, col) = text_of
        .lines()
        .enumerate()
        .find_map(|(i, l)| l.find("frameRate: 100").map(|c| (i + 1, c + 12)))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    for rate in ["1e308", "1e-308"] {
        let motion = dir.path().join("w.seq");
        std::fs::write(
            &motion,
            text_of.replacen("frameRate: 100", &format!("frameRate: {rate}"), 1),
        )
        .unwrap();
        let out = motiond(&["check", "--config", s(&config), s(&motion)]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
        let expected = format!(
            "{}:{line}:{col}: frameRate: {rate} is not a frame rate motiond plays: give 0.01 to \
             100000 frames per second",
            motion.display()
        );
        assert!(
            text(&out.stderr).contains(&expected),
            "{}",
            text(&out.stderr)
        );
    }
}
