//! An SO-101 you can try without one: `config/examples/so101.yaml` (the SO-ARM100 URDF with the
//! limits it lacks, its Feetech bus with the sample LeRobot calibration) loads, and a LeRobot
//! episode written by pyarrow in LeRobot's v3.0 layout, imported with `motiond import lerobot`,
//! passes `check` (with `--plot`) and plays with `--dry-run` on the simulated motors without a
//! limit violation — the book's walk-through, minus the arm (which
//! tests/conformance/test_lerobot_so101.py plays to six servos of the vendor's SDK).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

use std::path::PathBuf;
use std::process::Command;

use motiond::config::{BackendConfig, Config};

const MOTIOND: &str = env!("CARGO_BIN_EXE_motiond");

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn config() -> PathBuf {
    root().join("config/examples/so101.yaml")
}

/// `$MOTIOND_PYTHON` (default `python3`) if it can import pyarrow; `None` to skip outside CI.
fn python() -> Option<String> {
    let python = std::env::var("MOTIOND_PYTHON").unwrap_or_else(|_| "python3".into());
    if Command::new(&python)
        .args(["-c", "import pyarrow"])
        .status()
        .is_ok_and(|s| s.success())
    {
        return Some(python);
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{python} cannot import pyarrow (CI=true): .ci/run installs it");
    }
    eprintln!("skipping: {python} cannot import pyarrow");
    None
}

fn motiond(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(MOTIOND).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_so101_configuration_loads_with_the_limits_the_urdf_lacks() {
    let c = Config::load(config()).unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(c.backend, BackendConfig::Buses(_)));
    assert!(c.robot.fixed_base);
    let joints = c.robot.joints.clone().unwrap();
    assert_eq!(
        joints,
        [
            "shoulder_pan",
            "shoulder_lift",
            "elbow_flex",
            "wrist_flex",
            "wrist_roll",
            "gripper"
        ]
    );
    // Every joint gets an acceleration limit (the URDF has none).
    let (code, out, err) = motiond(&["inspect", "model", c.robot.model.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\"gripper\""));
    for j in &joints {
        assert!(
            c.robot
                .limits
                .iter()
                .any(|l| &l.dof == j && l.acceleration.is_some()),
            "{j} has no acceleration limit"
        );
    }
}

#[test]
fn an_imported_episode_proves_and_plays_on_the_simulated_so101() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("so101_pick");
    // Two episodes of 4 s at 30 fps; the second lost frames (a variable-interval motion).
    let spec = r#"{"episodes": [120, 120], "drop_frames": {"1": [30, 31, 32, 77]}}"#;
    let made = Command::new(python)
        .arg(root().join("tests/lerobot/write_dataset.py"))
        .arg(&data)
        .arg(spec)
        .status()
        .unwrap();
    assert!(made.success());
    let config = config();
    let config = config.to_str().unwrap();
    for episode in ["0", "1"] {
        let seq = dir.path().join(format!("episode{episode}.seq"));
        let seq = seq.to_str().unwrap();
        let (code, _, err) = motiond(&[
            "import",
            "lerobot",
            data.to_str().unwrap(),
            "--episode",
            episode,
            "--config",
            config,
            "-o",
            seq,
        ]);
        assert_eq!(code, 0, "{err}");
        let plot = dir.path().join(format!("episode{episode}.svg"));
        let (code, out, err) = motiond(&[
            "check",
            seq,
            "--config",
            config,
            "--plot",
            plot.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "episode {episode}: {out}{err}");
        assert!(std::fs::metadata(&plot).unwrap().len() > 1000);
        // What the bus writes to the servos when it opens, LeRobot's values (no device needed).
        assert!(
            out.contains(
                "  bus so101, servo 6 (gripper): Return_Delay_Time = 0, Maximum_Acceleration = \
                 254, Acceleration = 254, Phase bit 4 = 0, Operating_Mode = 0, P_Coefficient = \
                 16, I_Coefficient = 0, D_Coefficient = 32, Max_Torque_Limit = 500, \
                 Protection_Current = 250, Overload_Torque = 25\n"
            ),
            "{out}"
        );
        let (code, out, err) = motiond(&[
            "play",
            seq,
            "--config",
            config,
            "--dry-run",
            "--clock",
            "manual",
            "--report",
            "json",
        ]);
        assert_eq!(code, 0, "episode {episode}: {err}");
        let report: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(report["limit_violations"], 0, "{report}");
        assert_eq!(report["rate_hz"], 500.0);
        // 4 s of motion at 500 Hz, with the approach to the first frame on top.
        assert!(report["ticks"].as_u64().unwrap() >= 1990, "{report}");
        assert_eq!(report["max_tracking_error"].as_object().unwrap().len(), 6);
    }
}
