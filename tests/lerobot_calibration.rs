//! LeRobot calibration → counts ↔ joint radians, against LeRobot's normalisation as a Python
//! reference reproduces it (`tests/lerobot/calibration_reference.py`): for every mode, drive mode
//! and resolution, a grid of raw positions maps to the joint position LeRobot's normalised value
//! means (degrees in radians; 0..100 and −100..100 over the joint's range), and back.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use motiond::backend::lerobot_calibration::{Calibration, NormMode};
use serde_json::{Value, json};

/// `$MOTIOND_PYTHON` (default `python3`).
fn python() -> String {
    std::env::var("MOTIOND_PYTHON").unwrap_or_else(|_| "python3".into())
}

#[test]
fn counts_map_to_radians_as_lerobot_normalises_them() {
    // An SO-101 follower's file as lerobot-calibrate writes it, plus motors calibrated reversed
    // and narrow.
    let file = r#"{
    "shoulder_pan": {"id": 1, "drive_mode": 0, "homing_offset": -1019, "range_min": 751, "range_max": 3393},
    "shoulder_lift": {"id": 2, "drive_mode": 0, "homing_offset": 1324, "range_min": 893, "range_max": 3224},
    "wrist_roll": {"id": 5, "drive_mode": 0, "homing_offset": -1551, "range_min": 0, "range_max": 4095},
    "gripper": {"id": 6, "drive_mode": 0, "homing_offset": 1106, "range_min": 2031, "range_max": 3514},
    "reversed": {"id": 7, "drive_mode": 1, "homing_offset": 0, "range_min": 1000, "range_max": 1001},
    "scs": {"id": 8, "drive_mode": 1, "homing_offset": 0, "range_min": 200, "range_max": 823}
}"#;
    let cal = Calibration::parse(file, &PathBuf::from("so101_follower.json")).unwrap();
    let range = (-0.174533, 1.74533);
    let mut cases = Vec::new();
    let mut expect = Vec::new();
    for (name, m) in &cal.motors {
        for mode in ["degrees", "range_0_100", "range_m100_100"] {
            for resolution in [4096u32, 1024] {
                for applies in [true, false] {
                    // Range modes clamp outside the range in LeRobot (motiond does not): sample
                    // inside it for them, and beyond it for degrees.
                    let (lo, hi) = (m.range_min as f64, m.range_max as f64);
                    let raw: Vec<f64> = (0..=40)
                        .map(|i| {
                            let f = i as f64 / 40.0;
                            if mode == "degrees" {
                                lo - 300.0 + f * (hi - lo + 600.0)
                            } else {
                                lo + f * (hi - lo)
                            }
                        })
                        .map(f64::round)
                        .collect();
                    cases.push(json!({
                        "motor": {"id": m.id, "drive_mode": m.drive_mode, "homing_offset": m.homing_offset,
                                  "range_min": m.range_min, "range_max": m.range_max},
                        "mode": mode, "resolution": resolution, "apply_drive_mode": applies, "raw": raw,
                    }));
                    expect.push((name.clone(), *m, mode, resolution, applies, raw));
                }
            }
        }
    }
    let mut child = Command::new(python())
        .arg(
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("tests/lerobot/calibration_reference.py"),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs the reference");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(Value::from(cases).to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let reference: Vec<Vec<String>> = serde_json::from_slice(&out.stdout).unwrap();
    let mut checked = 0;
    for ((name, m, mode, resolution, applies, raw), normalised) in expect.iter().zip(&reference) {
        let norm_mode = NormMode::parse(mode).unwrap();
        let units = m.units(norm_mode, *resolution, *applies, range).unwrap();
        for (&r, n) in raw.iter().zip(normalised) {
            let n: f64 = n.parse().unwrap();
            let joint = match norm_mode {
                NormMode::Degrees => n.to_radians(),
                NormMode::Range0To100 => range.0 + n / 100.0 * (range.1 - range.0),
                NormMode::RangeM100To100 => range.0 + (n + 100.0) / 200.0 * (range.1 - range.0),
            };
            let got = units.to_joint(r);
            assert!(
                (got - joint).abs() <= 1e-12 * (1.0 + joint.abs()),
                "{name} {mode} res {resolution} drive_mode applied {applies}: raw {r} → {got}, LeRobot {n} → {joint}"
            );
            let back = units.to_drive(joint);
            assert!(
                (back - r).abs() < 1e-6,
                "{name} {mode}: {joint} → {back}, expected {r}"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 6 * 3 * 2 * 2 * 41);
}
