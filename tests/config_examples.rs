//! The per-protocol example configurations in config/examples/ and the book's bus example (docs/src/buses.md) load,
//! pass the bus budget at their rates and fit the demo arm's joints: what operators copy works.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

use std::path::{Path, PathBuf};

use motiond::config::{BackendConfig, Config};
use motiond::session::{Robot, RobotSpec};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Loads `path` as `play` and `serve` do: the robot model, each bus's LeRobot calibration and the
/// checks of its drives against the robot (those of the backend's open, minus the devices).
fn load_and_check(path: &Path) -> Config {
    let spec = RobotSpec {
        config: Some(path.to_path_buf()),
        ..RobotSpec::default()
    };
    let robot = Robot::load(&spec)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .unwrap();
    let c = robot.config.unwrap();
    assert!(
        matches!(c.backend, BackendConfig::Buses(_)),
        "{}: not a bus configuration",
        path.display()
    );
    c
}

#[test]
fn every_protocol_has_an_example_that_loads() {
    let dir = root().join("config/examples");
    let mut protocols = Vec::new();
    for name in [
        "cia402",
        "odrive",
        "mit",
        "dynamixel",
        "slcan",
        "damiao",
        "robstride",
        "moteus",
        "so101",
    ] {
        let c = load_and_check(&dir.join(format!("{name}.yaml")));
        let BackendConfig::Buses(buses) = &c.backend else {
            unreachable!()
        };
        protocols.extend(
            buses
                .iter()
                .flat_map(|b| b.joints.iter().map(|j| j.family.name())),
        );
    }
    for p in [
        "cia402",
        "odrive",
        "mit",
        "dynamixel",
        "damiao_fd",
        "robstride",
        "moteus",
        "feetech",
    ] {
        assert!(protocols.contains(&p), "no example drives {p}");
    }
}

#[test]
fn the_books_bus_example_loads() {
    let page = std::fs::read_to_string(root().join("docs/src/buses.md")).unwrap();
    let yaml = page
        .split("```yaml\n")
        .nth(1)
        .and_then(|s| s.split("```").next())
        .expect("a yaml block in docs/src/buses.md");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("motiond.yaml");
    let skel = root().join("config/demo-arm.skel");
    std::fs::write(
        &path,
        format!(
            "robot:\n  skel: {}\n  joints: [base_yaw, shoulder_pitch, elbow_pitch, wrist_pitch, \
             wrist_roll, gripper_slide]\n{yaml}",
            skel.display()
        ),
    )
    .unwrap();
    load_and_check(&path);
}
