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

use motiond::backend::bus::settings::Units;
use motiond::backend::lerobot_calibration::{Calibration, NormMode};
use motiond::config::BackendConfig;
use motiond::session::{Robot, RobotSpec};
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

/// The SO-101's configuration with the bus's `lerobot_calibration` and the drives' keys as given,
/// and the calibration file `so101_follower.json` holding `calibration`, in a folder of their
/// own; loaded as `play` loads it (model, calibration, checks of the drives).
fn load_so101(bus_keys: &str, joints: &str, calibration: &str) -> Result<Robot, String> {
    let dir = tempfile::tempdir().unwrap();
    let urdf = root().join("config/so101/so101_new_calib.urdf");
    std::fs::write(dir.path().join("so101_follower.json"), calibration).unwrap();
    let config = dir.path().join("motiond.yaml");
    std::fs::write(
        &config,
        format!(
            "robot:
  model: {}
  fixed_base: true
  joints: [shoulder_pan, shoulder_lift, elbow_flex, wrist_flex, wrist_roll, gripper]
  limits:
    shoulder_pan:  {{velocity: 4.0, acceleration: 20.0}}
    shoulder_lift: {{velocity: 4.0, acceleration: 20.0}}
    elbow_flex:    {{velocity: 4.0, acceleration: 20.0}}
    wrist_flex:    {{velocity: 4.0, acceleration: 20.0}}
    wrist_roll:    {{velocity: 4.0, acceleration: 20.0}}
    gripper:       {{velocity: 4.0, acceleration: 20.0}}
control:
  rate_hz: 250
backend: buses
buses:
  - name: so101
    transport: serial
    device: /dev/ttyACM0
    baud: 1000000
    protocol: feetech
{bus_keys}
    joints:
{joints}
",
            urdf.display()
        ),
    )
    .unwrap();
    let spec = RobotSpec {
        config: Some(config),
        ..RobotSpec::default()
    };
    Robot::load(&spec)
        .map(|r| r.unwrap())
        .map_err(|e| e.to_string())
}

const JOINTS: &str = "      shoulder_pan:  {id: 1}
      shoulder_lift: {id: 2}
      elbow_flex:    {id: 3}
      wrist_flex:    {id: 4}
      wrist_roll:    {id: 5}
      gripper:       {id: 6}";

const CALIBRATION: &str = "    lerobot_calibration: so101_follower.json";

fn sample() -> String {
    std::fs::read_to_string(root().join("config/so101/so101_follower.json")).unwrap()
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn units(robot: &Robot) -> Vec<(String, Units)> {
    let BackendConfig::Buses(buses) = &robot.config.as_ref().unwrap().backend else {
        panic!("not on buses")
    };
    buses[0]
        .joints
        .iter()
        .map(|j| (j.dof.clone(), j.units))
        .collect()
}

/// config/examples/so101.yaml takes its units from the sample calibration: each DEGREES motor's
/// joint zero at the middle of its range, 4095/360 counts a degree; the gripper's range over
/// its joint's.
#[test]
fn the_so101_example_takes_its_units_from_the_calibration_file() {
    let spec = RobotSpec {
        config: Some(root().join("config/examples/so101.yaml")),
        ..RobotSpec::default()
    };
    let robot = Robot::load(&spec).unwrap().unwrap();
    let cal = Calibration::load(&root().join("config/so101/so101_follower.json")).unwrap();
    for (dof, u) in units(&robot) {
        let m = cal.motors[&dof];
        let (min, max) = (m.range_min as f64, m.range_max as f64);
        if dof == "gripper" {
            let (lower, upper) = robot.model_range("gripper").unwrap();
            assert!((u.to_drive(lower) - min).abs() < 1e-9, "{u:?}");
            assert!((u.to_drive(upper) - max).abs() < 1e-9, "{u:?}");
        } else {
            // LeRobot: degrees = (raw − mid)·360/(4096 − 1).
            for raw in [min, (min + max) / 2.0, max, 0.0, 4095.0] {
                let degrees = (raw - (min + max) / 2.0) * 360.0 / 4095.0;
                let got = u.to_joint(raw);
                assert!((got - degrees.to_radians()).abs() < 1e-12, "{dof}: {got}");
            }
        }
    }
}

#[test]
fn a_motor_keyed_and_moded_by_hand() {
    // The elbow's motor named otherwise in the file; the wrist roll recorded −100..100.
    let cal = sample().replace("\"elbow_flex\"", "\"elbow\"");
    let joints = JOINTS
        .replace(
            "elbow_flex:    {id: 3}",
            "elbow_flex:    {id: 3, lerobot_motor: elbow, lerobot_mode: degrees}",
        )
        .replace(
            "wrist_roll:    {id: 5}",
            "wrist_roll:    {id: 5, lerobot_mode: range_m100_100}",
        );
    let robot = load_so101(CALIBRATION, &joints, &cal).unwrap();
    let u = |dof: &str| units(&robot).into_iter().find(|(d, _)| d == dof).unwrap().1;
    assert_eq!(u("elbow_flex").offset, (880.0 + 3135.0) / 2.0);
    assert_eq!(u("elbow_flex").scale, 4095.0 / std::f64::consts::TAU);
    let (lower, upper) = robot.model_range("wrist_roll").unwrap();
    assert!(u("wrist_roll").to_drive(lower).abs() < 1e-9);
    assert!((u("wrist_roll").to_drive(upper) - 4095.0).abs() < 1e-9);
}

/// Every refusal names where (the configuration's FILE:LINE:COL and key; the calibration file's
/// own FILE:LINE:COL for broken JSON), what and what to do.
#[test]
fn bad_calibrations_are_refused_naming_the_file_the_motor_and_what_to_do() {
    let cases: &[(&str, String, String, &[&str])] = &[
        (
            "the ids differ",
            CALIBRATION.into(),
            JOINTS.replace("wrist_flex:    {id: 4}", "wrist_flex:    {id: 9}"),
            &[
                "buses[0].joints.wrist_flex.id",
                "so101_follower.json: motor `wrist_flex` has id 4, but this drive's id is 9",
                "the ids must agree",
            ],
        ),
        (
            "a motor the file lacks",
            CALIBRATION.into(),
            JOINTS.replace(
                "elbow_flex:    {id: 3}",
                "elbow_flex:    {id: 3, lerobot_motor: elbow}",
            ),
            &[
                "buses[0].joints.elbow_flex",
                "has no motor `elbow` (it has elbow_flex, gripper, shoulder_lift",
                "lerobot_motor",
            ],
        ),
        (
            "units by hand beside the file",
            CALIBRATION.into(),
            JOINTS.replace(
                "shoulder_pan:  {id: 1}",
                "shoulder_pan:  {id: 1, zero_offset: 2100}",
            ),
            &[
                "buses[0].joints.shoulder_pan",
                "the calibration file gives this drive's units: remove counts_per_unit, zero_offset",
            ],
        ),
        (
            "an unknown mode",
            CALIBRATION.into(),
            JOINTS.replace(
                "gripper:       {id: 6}",
                "gripper:       {id: 6, lerobot_mode: percent}",
            ),
            &[
                "buses[0].joints.gripper.lerobot_mode",
                "expected one of degrees, range_0_100, range_m100_100, got `percent`",
            ],
        ),
        (
            "motor keys without a file",
            String::new(),
            JOINTS.replace(
                "gripper:       {id: 6}",
                "gripper:       {id: 6, lerobot_motor: jaw}",
            ),
            &[
                "buses[0].joints.gripper.lerobot_motor",
                "applies with a calibration file only",
            ],
        ),
        (
            "no such file",
            "    lerobot_calibration: nowhere.json".into(),
            JOINTS.into(),
            &[
                "buses[0].lerobot_calibration",
                "nowhere.json: No such file",
                "lerobot-calibrate",
            ],
        ),
    ];
    for (what, bus, joints, expect) in cases {
        let err = load_so101(bus, joints, &sample()).unwrap_err();
        for e in *expect {
            assert!(err.contains(e), "{what}: {err}\nlacks {e}");
        }
        assert!(err.contains("motiond.yaml:"), "{what}: {err}");
    }
    // Broken JSON: the file's own line and column, and what it should hold.
    let broken = sample().replacen("\"range_max\": 3242", "\"range_max\": 3242,", 1);
    let err = load_so101(CALIBRATION, JOINTS, &broken).unwrap_err();
    assert!(
        err.contains("so101_follower.json:15:5: trailing comma; "),
        "{err}"
    );
    assert!(
        err.contains("a LeRobot calibration maps each motor name to"),
        "{err}"
    );
    // A calibrated range narrower than the joint's limits: the servo would clamp there.
    let narrow = sample().replace("\"range_min\": 742", "\"range_min\": 1200");
    let err = load_so101(CALIBRATION, JOINTS, &narrow).unwrap_err();
    assert!(
        err.contains("outside motor `shoulder_pan`'s calibrated range [1200, 3398]"),
        "{err}"
    );
    assert!(
        err.contains("tighten robot.limits.shoulder_pan.position to ["),
        "{err}"
    );
    // Values no servo register holds (the read-back would refuse them at enable): refused at
    // load, at the motor.
    for (from, to, says) in [
        (
            "\"drive_mode\": 0",
            "\"drive_mode\": 5",
            "drive_mode 5 is outside what the servo holds (0..=1)",
        ),
        (
            "\"homing_offset\": -1207",
            "\"homing_offset\": 1000000000000000",
            "homing_offset 1000000000000000 is outside what the servo holds (-2047..=2047)",
        ),
        (
            "\"range_max\": 3398",
            "\"range_max\": 4096",
            "range_max 4096 is outside what the servo holds (0..=4095)",
        ),
    ] {
        let wild = sample().replacen(from, to, 1);
        assert_ne!(wild, sample(), "{from}");
        let err = load_so101(CALIBRATION, JOINTS, &wild).unwrap_err();
        assert!(err.contains(says), "{err}");
        assert!(err.contains("lerobot-calibrate"), "{err}");
    }
    // A range with nothing in it.
    let empty = sample().replace("\"range_min\": 2019", "\"range_min\": 3537");
    let err = load_so101(CALIBRATION, JOINTS, &empty).unwrap_err();
    assert!(
        err.contains("motor `gripper`: range_min 3537 is not below range_max 3537"),
        "{err}"
    );
}

/// A calibration file that is a FIFO (or a device) would block the read at load forever: it is
/// refused as not a regular file, at once.
#[test]
fn a_calibration_file_that_is_not_a_regular_file_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("arm.json");
    let path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
    let err = motiond::backend::lerobot_calibration::Calibration::load(&fifo).unwrap_err();
    assert!(
        err.to_string().ends_with("arm.json: not a regular file"),
        "{err}"
    );
}
