//! `motiond play --clock manual` as a rehearsal: the same run twice gives the same trace byte for
//! byte, and stopping each demo motion at a quarter, half and three quarters of its way keeps
//! every commanded sample (stop included) within the demo arm's limits, measured by finite
//! differences of the trace.

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
    let mut envelope = Envelope::new(joints, 1000.0);
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
