//! `motiond play --clock manual` as a rehearsal: the same run twice gives the same trace byte for
//! byte, and stopping each demo motion at a quarter, half and three quarters of its way keeps
//! every commanded sample (stop included) within the demo arm's limits, measured by finite
//! differences of the trace. The conformance rig's stops (tests/conformance/test_stops.py, whose
//! drives decode the setpoints too coarsely to show MIT accelerations) rehearsed on their
//! commanded stream: a fault, SIGTERM before, during or after its quick stop.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

use std::path::Path;
use std::process::{Command, Output};

use motiond::session::{Robot, RobotSpec};
use motiond::trajectory::{Envelope, JointSet, Setpoint};

const CONFIG: &str = "config/motiond.yaml";

fn motiond(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_motiond"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .output()
        .unwrap()
}

fn demo_joints() -> JointSet {
    let spec = RobotSpec {
        config: Some(Path::new(env!("CARGO_MANIFEST_DIR")).join(CONFIG)),
        ..RobotSpec::default()
    };
    Robot::load(&spec).unwrap().unwrap().joints
}

/// The trace's rows: per row the state and, per DOF, the commanded setpoint.
fn read_trace(path: &Path, dofs: usize) -> Vec<(String, Vec<Setpoint>)> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(header.len(), 3 + 4 * dofs, "{header:?}");
    lines
        .map(|l| {
            let cells: Vec<f64> = l.split(',').skip(3).map(|c| c.parse().unwrap()).collect();
            let state = l.split(',').nth(2).unwrap().to_string();
            let commanded = cells
                .chunks_exact(4)
                .map(|c| Setpoint {
                    position: c[0],
                    velocity: c[1],
                    acceleration: c[2],
                })
                .collect();
            (state, commanded)
        })
        .collect()
}

/// Every setpoint sent within the limits, as the drive saw the stream (the one checker).
fn assert_within_limits(rows: &[(String, Vec<Setpoint>)], joints: &JointSet, what: &str) {
    assert_within_limits_at(rows, joints, 1000.0, what);
}

fn assert_within_limits_at(
    rows: &[(String, Vec<Setpoint>)],
    joints: &JointSet,
    rate_hz: f64,
    what: &str,
) {
    let mut envelope = Envelope::new(joints, rate_hz);
    for (state, commanded) in rows.iter().filter(|(state, _)| state != "disabled") {
        if let Err(breach) = envelope.push(commanded) {
            panic!("{what}: {breach} ({state})");
        }
    }
}

#[test]
fn a_manual_clock_rehearsal_reproduces_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let traces: Vec<String> = (0..2)
        .map(|i| {
            let trace = dir.path().join(format!("trace{i}.csv"));
            let out = motiond(&[
                "play",
                "config/motions/pick.seq",
                "--clock",
                "manual",
                "--trace",
                trace.to_str().unwrap(),
                "--report",
                "json",
            ]);
            assert_eq!(
                out.status.code(),
                Some(0),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            std::fs::read_to_string(&trace).unwrap()
        })
        .collect();
    assert_eq!(traces[0], traces[1]);
    // One row per loop tick: the header and the report's tick count.
    let lines = traces[0].lines().count();
    assert!(lines > 7_800, "{lines} rows for a 7.8 s motion");
}

#[test]
fn stops_at_a_quarter_half_and_three_quarters_stay_within_the_limits() {
    let joints = demo_joints();
    let dir = tempfile::tempdir().unwrap();
    for (motion, duration) in [("wave", 6.0), ("pick", 7.8), ("reach_pose", 5.0)] {
        for (quick, flag) in [(false, "--stop-at"), (true, "--quick-stop-at")] {
            for fraction in [0.25, 0.5, 0.75] {
                let at = (duration * fraction).to_string();
                let trace = dir.path().join(format!("{motion}-{quick}-{fraction}.csv"));
                let file = format!("config/motions/{motion}.seq");
                let out = motiond(&[
                    "play",
                    &file,
                    "--clock",
                    "manual",
                    flag,
                    &at,
                    "--trace",
                    trace.to_str().unwrap(),
                ]);
                let stderr = String::from_utf8_lossy(&out.stderr);
                // Stopped before the end: exit 1, and said so.
                assert_eq!(out.status.code(), Some(1), "{stderr}");
                assert!(stderr.contains("stopped before the end"), "{stderr}");
                let rows = read_trace(&trace, joints.len());
                assert_eq!(rows.last().unwrap().0, "holding");
                assert_within_limits(&rows, &joints, &format!("{motion} {flag} {at}"));
            }
        }
    }
}

/// tests/conformance's `harness.write_motion`: each joint 0 → amplitude → 0 (raised cosine) over
/// 1.5 s, at rest 0.2 s before and after, 100 frames a second.
fn conformance_swing(path: &Path) {
    let amplitudes = [0.4, -0.3, 0.6];
    let (fps, rest, duration) = (100, 20, 1.5);
    let frames: Vec<String> = (0..=150 + 2 * rest)
        .map(|k| {
            let t = (f64::from(k - rest) / f64::from(fps)).clamp(0.0, duration);
            let row: Vec<String> = amplitudes
                .iter()
                .map(|a| {
                    let q = a * (1.0 - (2.0 * std::f64::consts::PI * t / duration).cos()) / 2.0;
                    format!("{q:.9}")
                })
                .collect();
            format!("      - [ {} ]", row.join(", "))
        })
        .collect();
    let seq = format!(
        "type: CompositeSeq\ncontent: BodyMotion\nformatVersion: 2\nframeRate: {fps}\n\
         numFrames: {}\ncomponents:\n  - type: MultiValueSeq\n    content: JointDisplacement\n\
         \x20   numParts: 3\n    frames:\n{}\n",
        frames.len(),
        frames.join("\n")
    );
    std::fs::write(path, seq).unwrap();
}

#[test]
fn the_conformance_rigs_fault_and_sigterm_stops_stay_within_the_limits() {
    let dir = tempfile::tempdir().unwrap();
    let library = dir.path().join("motions");
    std::fs::create_dir(&library).unwrap();
    conformance_swing(&library.join("swing.seq"));
    let skel = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance/robot.skel");
    let config = dir.path().join("motiond.yaml");
    std::fs::write(
        &config,
        format!(
            "robot:\n  skel: {}\n  joints: [a, b, v]\nmotion:\n  interpolation: cubic\n  \
             library: {}\ncontrol:\n  rate_hz: 100\nrt:\n  lock_memory: false\nbackend: sim\n",
            skel.display(),
            library.display()
        ),
    )
    .unwrap();
    let joints = Robot::load(&RobotSpec {
        config: Some(config.clone()),
        ..RobotSpec::default()
    })
    .unwrap()
    .unwrap()
    .joints;
    let script = dir.path().join("stop.yaml");
    let trace = dir.path().join("stop.csv");
    // Fault times where a sweep (every 70 ms, SIGTERM every 30 ms from 0.3 s before to 0.4 s
    // after) found each joint's stop braking at exactly its acceleration limit.
    for fault_at in [0.34, 0.69, 0.83, 1.25] {
        for kind in ["no_feedback", "error"] {
            for term in [
                None,
                Some(-0.06),
                Some(-0.03),
                Some(0.0),
                Some(0.03),
                Some(0.1),
            ] {
                let mut steps = format!(
                    "steps:\n  - {{at: 0.1, request: {{cmd: play, motion: swing}}}}\n  \
                     - {{at: {fault_at}, fault: {{dof: b, kind: {kind}}}}}\n"
                );
                if let Some(d) = term {
                    steps += &format!("  - {{at: {:.2}, signal: term}}\n", fault_at + d);
                }
                std::fs::write(&script, steps).unwrap();
                let out = motiond(&[
                    "rehearse",
                    "--config",
                    config.to_str().unwrap(),
                    script.to_str().unwrap(),
                    "--trace",
                    trace.to_str().unwrap(),
                ]);
                let what = format!("fault {kind} at {fault_at} s, SIGTERM {term:?} s after");
                let stderr = String::from_utf8_lossy(&out.stderr);
                assert_eq!(out.status.code(), Some(0), "{what}: {stderr}");
                let rows = read_trace(&trace, joints.len());
                // (A shutdown's stop may end before a later fault is found.)
                assert!(
                    term.is_some() || rows.iter().any(|(state, _)| state == "fault"),
                    "{what}: never faulted"
                );
                assert_within_limits_at(&rows, &joints, 100.0, &what);
            }
        }
    }
}
