//! The demo arm as URDF (config/demo-arm.urdf, with config/demo-arm-urdf.yaml) is the same robot
//! for motiond as demo-arm.skel with motiond.yaml: the same commanded joints, limits and actuators,
//! so every shipped motion is proved and played the same way. Initial positions are DART's for
//! each format: the URDF's gripper starts at 0 (its ros2_control initial_value is not DART's),
//! the SKEL's at its init_pos 0.01.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

use std::path::Path;

use motiond::config::Config;
use motiond::motion::seq;
use motiond::robot;
use motiond::trajectory::{ColumnMap, JointSet, Options, build};

fn robot(config: &str) -> (Config, JointSet) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
    let c = Config::load(dir.join(config)).unwrap_or_else(|e| panic!("{e}"));
    let options = robot::Options {
        fixed_base: c.robot.fixed_base,
        ..Default::default()
    };
    let world = robot::load(&c.robot.model, &options).unwrap_or_else(|e| panic!("{e}"));
    let joints = JointSet::from_world(&world, &c.robot.limits).unwrap_or_else(|e| panic!("{e}"));
    (c, joints)
}

#[test]
fn urdf_and_skel_demo_arms_command_the_same_joints() {
    let (_, mut skel) = robot("motiond.yaml");
    let (_, urdf) = robot("demo-arm-urdf.yaml");
    let gripper = skel.dofs.iter_mut().find(|d| d.name == "gripper_slide");
    let gripper = gripper.expect("the demo arm has a gripper");
    assert_eq!(gripper.initial_position, 0.01);
    gripper.initial_position = 0.0;
    assert_eq!(urdf, skel);
    assert_eq!(urdf.len(), 6);
}

#[test]
fn shipped_motions_prove_the_same_on_both() {
    let (skel_config, skel) = robot("motiond.yaml");
    let (urdf_config, urdf) = robot("demo-arm-urdf.yaml");
    let names = urdf_config.robot.joints.clone().expect("joint list");
    assert_eq!(skel_config.robot.joints, Some(names.clone()));
    let library = urdf_config.motion.library.clone();
    let mut motions: Vec<_> = std::fs::read_dir(&library)
        .expect("motion library")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "seq"))
        .collect();
    motions.sort();
    assert!(!motions.is_empty());
    for path in motions {
        let motion = seq::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let parts = motion.joint_displacement().expect("joint data").num_parts;
        let verdict = |joints: &JointSet| {
            let map = ColumnMap::by_name(joints, &names, parts).expect("mapping");
            build(joints, &motion, &map, &Options::default())
                .map(|p| p.report.summary())
                .map_err(|e| e.to_string())
        };
        assert_eq!(verdict(&urdf), verdict(&skel), "{}", path.display());
    }
}
