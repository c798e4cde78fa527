//! End to end: a robot builder's URDF whose `<ros2_control>` block names the hardware of each
//! joint (ROBOTIS' dynamixel_hardware plugin, its `usb_port`/`baud_rate`, per joint an `id`), and
//! a configuration that only names the bus: `motiond check` loads the buses from both and says
//! which values came from the URDF; an unknown param is a warning and a bad one an error, both
//! at the param's FILE:LINE:COL.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

use std::path::{Path, PathBuf};
use std::process::Command;

const DOFS: [&str; 6] = [
    "base_yaw",
    "shoulder_pitch",
    "elbow_pitch",
    "wrist_pitch",
    "wrist_roll",
    "gripper_slide",
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The demo arm's URDF on DYNAMIXEL servos: the plugin and serial line in `<hardware>`, an id per
/// joint, and `extra` after the first joint's id.
fn urdf(extra: &str) -> String {
    let mut text = std::fs::read_to_string(root().join("config/demo-arm.urdf")).unwrap();
    text = text.replace(
        "<plugin>mock_components/GenericSystem</plugin>",
        "<plugin>dynamixel_hardware/DynamixelHardware</plugin>\n      \
         <param name=\"usb_port\">/dev/ttyUSB0</param>\n      \
         <param name=\"baud_rate\">4000000</param>",
    );
    for (i, dof) in DOFS.iter().enumerate() {
        let params = format!("      <param name=\"id\">{}</param>\n", i + 1);
        let params = if i == 0 { params + extra } else { params };
        text = text.replace(
            &format!("<joint name=\"{dof}\">\n"),
            &format!("<joint name=\"{dof}\">\n{params}"),
        );
    }
    text
}

/// A folder with the URDF and a configuration naming only the bus (and giving wrist_roll's id).
fn robot(urdf: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("arm.urdf"), urdf).unwrap();
    let shipped = std::fs::read_to_string(root().join("config/demo-arm-urdf.yaml")).unwrap();
    let config = shipped
        .replace("model: demo-arm.urdf", "model: arm.urdf")
        .replace(
            "motion:\n  library: motions\n",
            "backend: buses\nbuses:\n  - name: demo_arm\n    joints:\n      wrist_roll: {id: 50}\n",
        );
    let path = dir.path().join("motiond.yaml");
    std::fs::write(&path, config).unwrap();
    (dir, path)
}

fn check(config: &Path, json: bool) -> (i32, String, String) {
    let motion = root().join("config/motions/wave.seq");
    let mut args = vec![
        "check".as_ref(),
        motion.as_os_str(),
        "--config".as_ref(),
        config.as_os_str(),
    ];
    if json {
        args.push("--json".as_ref());
    }
    let out = Command::new(env!("CARGO_BIN_EXE_motiond"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The line and column where `needle` ends in `text` (where the value after it starts).
fn after(text: &str, needle: &str) -> (usize, usize) {
    let at = text.find(needle).unwrap() + needle.len();
    let line = text[..at].matches('\n').count() + 1;
    let col = at - text[..at].rfind('\n').map_or(0, |n| n + 1) + 1;
    (line, col)
}

#[test]
fn check_plays_on_buses_filled_from_the_urdf_and_names_each_value_s_origin() {
    let text = urdf("");
    let (dir, config) = robot(&text);
    let (code, out, err) = check(&config, false);
    assert_eq!(code, 0, "{out}{err}");
    let model = dir.path().join("arm.urdf");
    let (line, col) = after(&text, "<param name=\"usb_port\">");
    assert!(
        out.contains(&format!(
            "  buses[0].device = /dev/ttyUSB0  ({}:{line}:{col}, <param name=\"usb_port\"> of \
             <ros2_control> 'demo_arm' <hardware>)",
            model.display()
        )),
        "{out}"
    );
    let (line, col) = after(
        &text,
        "<joint name=\"elbow_pitch\">\n      <param name=\"id\">",
    );
    assert!(
        out.contains(&format!(
            "  buses[0].joints.elbow_pitch.id = 3  ({}:{line}:{col}, <param name=\"id\"> of \
             <ros2_control> 'demo_arm' joint 'elbow_pitch')",
            model.display()
        )),
        "{out}"
    );
    // The configuration's own id for wrist_roll wins, so it is not listed.
    assert!(!out.contains("wrist_roll.id"), "{out}");
    assert!(out.contains("played") || out.contains("ok"), "{out}");

    let (code, out, err) = check(&config, true);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let keys: Vec<&str> = v["bus_settings_from_model"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["key"].as_str().unwrap())
        .collect();
    assert_eq!(
        keys,
        [
            "buses[0].transport",
            "buses[0].protocol",
            "buses[0].device",
            "buses[0].baud",
            "buses[0].joints.base_yaw.protocol",
            "buses[0].joints.base_yaw.id",
            "buses[0].joints.shoulder_pitch.protocol",
            "buses[0].joints.shoulder_pitch.id",
            "buses[0].joints.elbow_pitch.protocol",
            "buses[0].joints.elbow_pitch.id",
            "buses[0].joints.wrist_pitch.protocol",
            "buses[0].joints.wrist_pitch.id",
            "buses[0].joints.wrist_roll.protocol",
            "buses[0].joints.gripper_slide.protocol",
            "buses[0].joints.gripper_slide.id",
        ]
    );
}

#[test]
fn unknown_params_warn_and_bad_ones_refuse_the_configuration_at_the_param() {
    let text = urdf("      <param name=\"torque_limit\">0.8</param>\n");
    let (dir, config) = robot(&text);
    let (code, out, err) = check(&config, false);
    assert_eq!(code, 0, "{out}{err}");
    let (line, col) = after(&text, "<param name=\"torque_limit");
    let col = col - "torque_limit".len();
    assert!(
        err.contains(&format!(
            "{}:{line}:{col}: <ros2_control> 'demo_arm' joint 'base_yaw': param 'torque_limit' is \
             not a setting of `dynamixel` drives; expected one of",
            dir.path().join("arm.urdf").display()
        )),
        "{err}"
    );

    let text = urdf("      <param name=\"direction\">2</param>\n");
    let (dir, config) = robot(&text);
    let (code, out, err) = check(&config, false);
    assert_eq!(code, 2, "{out}{err}");
    let (line, col) = after(&text, "<param name=\"direction\">");
    assert_eq!(
        err.trim(),
        format!(
            "{}:{line}:{col}: buses[0].joints.base_yaw.direction: must be 1 or -1, got 2 (from \
             <param name=\"direction\"> of <ros2_control> 'demo_arm' joint 'base_yaw')",
            dir.path().join("arm.urdf").display()
        )
    );
}
