//! `--plot` of `check`, `resample` and `play`: the panels, labels, legend and limits an operator
//! looks at, refused motions drawn with their violations, PNG beside SVG, and a size that renders.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

mod common;

use std::path::Path;
use std::process::{Command, Output};

fn motiond(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_motiond"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn assert_panels(svg: &str, joints: &[&str]) {
    for label in [
        "position (rad)",
        "velocity (rad/s)",
        "acceleration (rad/s²)",
        "time (s)",
        "commanded",
        "limit (shaded: outside)",
    ] {
        assert!(svg.contains(label), "no {label:?}");
    }
    for j in joints {
        assert!(svg.contains(j), "no panel for {j}");
    }
}

#[test]
fn check_draws_a_refused_motion_with_its_violations() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("fast.svg");
    let out = motiond(&[
        "check",
        "config/motions/wave.seq",
        "--config",
        "config/motiond.yaml",
        "--speed",
        "2.5",
        "--plot",
        s(&svg),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert_panels(&text, &["base_yaw", "elbow_pitch", "gripper_slide"]);
    assert!(text.contains("refused: "));
    assert!(text.contains("limit crossed: worst value"));
    // The prismatic gripper is in metres.
    assert!(text.contains("position (m)") && text.contains("velocity (m/s)"));
}

#[test]
fn resample_draws_sr1_small_enough_to_render_and_png_too() {
    let Some(corpus) = common::corpus() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (skel, map) = (
        corpus.join("robots/sr1.skel"),
        corpus.join("robots/sr1-joints.yaml"),
    );
    let robot = ["--skel", s(&skel), "--joint-map", s(&map)];
    let walk = corpus.join("seq/v2/SR1WalkPattern1.seq");
    let svg = dir.path().join("walk.svg");
    let mut args = vec!["resample", s(&walk), "-o", "/dev/null", "--plot", s(&svg)];
    args.extend(robot);
    let out = motiond(&args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert_panels(&text, &["RLEG_KNEE", "LARM_WRIST_R"]);
    assert!(text.contains("proved: "));
    assert!(text.len() < 3_000_000, "{} bytes", text.len());

    // SR1WalkPattern3 crosses a limit: exit 1, and the plot shows where.
    let png = dir.path().join("refused.png");
    let refused = corpus.join("seq/v2/SR1WalkPattern3.seq");
    let mut args = vec!["check", s(&refused), "--plot", s(&png)];
    args.extend(robot);
    let out = motiond(&args);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
}

#[test]
fn play_draws_commanded_and_simulated() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("play.svg");
    let out = motiond(&[
        "play",
        "config/motions/wave.seq",
        "--clock",
        "manual",
        "--plot",
        s(&svg),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert_panels(&text, &["shoulder_pitch"]);
    assert!(text.contains("simulated") && text.contains("played to the end"));
}

#[test]
fn plot_names_other_than_svg_or_png_are_refused_up_front() {
    let out = motiond(&[
        "check",
        "config/motions/wave.seq",
        "--config",
        "config/motiond.yaml",
        "--plot",
        "/tmp/out.pdf",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains(".svg or .png"), "{}", stderr(&out));
}
