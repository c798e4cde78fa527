//! The shipped configuration (config/motiond.yaml) loads and says what the README says it does.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

use std::path::Path;
use std::time::Duration;

use motiond::config::{self, BackendConfig, Config, SafeState};
use motiond::robot::Limits;
use motiond::trajectory::JointSet;
use motiond::trajectory::{ColumnMap, Interpolation, LimitPolicy, Options, build};

fn shipped() -> Config {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(config::DEFAULT_PATH);
    match Config::load(&path) {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn shipped_config_is_the_demo_arm_on_the_sim_backend() {
    let c = shipped();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
    assert_eq!(c.robot.model, dir.join("demo-arm.skel"));
    assert_eq!(
        c.robot.joints.as_deref(),
        Some(
            &[
                "base_yaw",
                "shoulder_pitch",
                "elbow_pitch",
                "wrist_pitch",
                "wrist_roll",
                "gripper_slide"
            ]
            .map(String::from)[..]
        )
    );
    assert_eq!(c.robot.limits.len(), 1);
    assert_eq!(c.robot.limits[0].dof, "elbow_pitch");
    assert_eq!(c.motion.library, dir.join("motions"));
    assert_eq!(c.motion.interpolation, Interpolation::Pchip);
    assert_eq!(c.motion.limit_policy, LimitPolicy::Reject);
    assert_eq!(c.control.rate_hz, 1000.0);
    assert_eq!(c.control.period, Duration::from_millis(1));
    assert_eq!(c.rt.cpu, Some(1));
    assert_eq!(c.rt.priority, 80);
    assert!(c.rt.lock_memory);
    assert!(!c.rt.strict);
    assert!(matches!(c.backend, BackendConfig::Sim));
    assert_eq!(c.sim.fault, None);
    assert_eq!(c.daemon.socket, Path::new("/run/motiond/control.sock"));
    assert_eq!(c.daemon.safe_state, SafeState::Hold);
    assert!(c.daemon.watchdog);
}

/// The shipped file fits the shipped robot: every listed joint is a DOF of demo-arm.skel and
/// every limit it sets lies inside the skeleton's.
#[test]
fn shipped_config_fits_the_demo_arm() {
    let c = shipped();
    let world = match motiond::robot::skel::load(&c.robot.model) {
        Ok(w) => w,
        Err(e) => panic!("{e}"),
    };
    let dofs: Vec<_> = world.skeletons.iter().flat_map(|s| &s.dofs).collect();
    let find = |name: &str| dofs.iter().find(|d| d.name == name).copied();
    for name in c.robot.joints.as_deref().unwrap_or_default() {
        assert!(
            find(name).is_some(),
            "{name} is not a DOF of {}",
            c.robot.model.display()
        );
    }
    let inside = |inner: Option<Limits>, outer: Limits| {
        inner.is_none_or(|i| outer.lower <= i.lower && i.upper <= outer.upper)
    };
    for o in &c.robot.limits {
        let dof = find(&o.dof).unwrap_or_else(|| panic!("{} is not a DOF", o.dof));
        assert!(inside(o.position, dof.position), "{o:?} vs {dof:?}");
        assert!(inside(o.velocity, dof.velocity), "{o:?} vs {dof:?}");
        assert!(inside(o.acceleration, dof.acceleration), "{o:?} vs {dof:?}");
        assert!(inside(o.effort, dof.effort), "{o:?} vs {dof:?}");
    }
    if let Err(e) = JointSet::from_world(&world, &c.robot.limits) {
        panic!("{}", c.joint_set_diagnostic(&e));
    }
}

/// The commented-out examples in the shipped file are valid once uncommented, so an operator can
/// enable them as written.
#[test]
fn shipped_examples_are_valid_when_uncommented() {
    const EXAMPLES: [&str; 2] = ["# fault: ", "# socket_group: "];
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(config::DEFAULT_PATH);
    let text = std::fs::read_to_string(&path).expect("shipped config readable");
    let mut found = 0;
    let uncommented: String = text
        .lines()
        .map(|line| {
            let trimmed = line.trim_start();
            let indent = &line[..line.len() - trimmed.len()];
            if EXAMPLES.iter().any(|e| trimmed.starts_with(e)) {
                found += 1;
                format!("{indent}{}\n", &trimmed[2..])
            } else {
                format!("{line}\n")
            }
        })
        .collect();
    assert_eq!(found, EXAMPLES.len());
    let c = match Config::parse(&uncommented, &path) {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    };
    assert!(c.sim.fault.is_some());
    assert_eq!(c.daemon.socket_group.as_deref(), Some("motiond"));
}

#[test]
fn dry_run_of_the_shipped_config_keeps_the_robot() {
    let c = shipped();
    let dry = c.clone().dry_run();
    assert!(matches!(dry.backend, BackendConfig::Sim));
    assert_eq!(dry.robot, c.robot);
    assert_eq!(dry.control, c.control);
}

/// Every demo motion shipped in the library passes the limit proof under the shipped settings, so
/// the README's first command and the daemon's library work out of the box.
#[test]
fn shipped_motions_pass_the_proof_under_the_shipped_config() {
    let c = shipped();
    let world = motiond::robot::skel::load(&c.robot.model).unwrap_or_else(|e| panic!("{e}"));
    let joints = JointSet::from_world(&world, &c.robot.limits)
        .unwrap_or_else(|e| panic!("{}", c.joint_set_diagnostic(&e)));
    let names = c
        .robot
        .joints
        .clone()
        .expect("the shipped config names its joints");
    let options = Options {
        rate_hz: c.control.rate_hz,
        interpolation: c.motion.interpolation,
        policy: c.motion.limit_policy,
        speed: 1.0,
    };
    let mut proved = 0;
    for entry in std::fs::read_dir(&c.motion.library).expect("the motion library exists") {
        let path = entry.expect("a readable library entry").path();
        if path.extension().is_none_or(|e| e != "seq") {
            continue;
        }
        let motion = motiond::motion::seq::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let columns = motion.joint_displacement().map_or(0, |j| j.num_parts);
        let map = ColumnMap::by_name(&joints, &names, columns)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if let Err(e) = build(&joints, &motion, &map, &options) {
            panic!(
                "{} is refused under the shipped config: {e}",
                path.display()
            );
        }
        proved += 1;
    }
    assert_eq!(proved, 3, "wave, pick and reach_pose");
}
