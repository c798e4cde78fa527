//! The demo motions in config/motions load, start and end at rest at the demo arm's initial pose,
//! and stay well inside its position, velocity and acceleration limits (read from the SKEL file).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

use std::path::{Path, PathBuf};

use motiond::motion::seq::{self, Motion, Timing};
use motiond::robot::skel;

/// The .seq column order of the demo motions (config/motiond.yaml `robot.joints`).
const COLUMNS: [&str; 6] = [
    "base_yaw",
    "shoulder_pitch",
    "elbow_pitch",
    "wrist_pitch",
    "wrist_roll",
    "gripper_slide",
];

/// How much of each limit the demo motions may use: they leave room for interpolation overshoot
/// and for tightened limits in a configuration.
const MARGIN: f64 = 0.7;

fn config() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("config")
}

fn load(name: &str) -> Motion {
    let path = config().join("motions").join(name);
    seq::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

struct Limit {
    position: (f64, f64),
    velocity: f64,
    acceleration: f64,
    initial: f64,
}

fn limits() -> Vec<Limit> {
    let world = skel::load(&config().join("demo-arm.skel")).unwrap();
    let arm = &world.skeletons[0];
    COLUMNS
        .iter()
        .map(|name| {
            let dof = arm.dofs.iter().find(|d| d.name == *name).unwrap();
            Limit {
                position: (dof.position.lower, dof.position.upper),
                velocity: dof.velocity.upper.min(-dof.velocity.lower),
                acceleration: dof.acceleration.upper.min(-dof.acceleration.lower),
                initial: dof.initial_position,
            }
        })
        .collect()
}

/// Checks positions, and velocities and accelerations by finite differences over the samples.
fn check_within_limits(name: &str, motion: &Motion) {
    let joints = motion.joint_displacement().expect("joint data");
    assert_eq!(joints.num_parts, COLUMNS.len(), "{name}");
    let limits = limits();
    let rows = joints.rows();
    assert!(rows > 10, "{name}");
    let t = |i: usize| joints.timing.time(i);
    for (c, lim) in limits.iter().enumerate() {
        let q = |i: usize| joints.row(i)[c];
        for i in 0..rows {
            assert!(
                lim.position.0 <= q(i) && q(i) <= lim.position.1,
                "{name} {}: {} outside {:?}",
                COLUMNS[c],
                q(i),
                lim.position
            );
        }
        assert!(
            (q(0) - lim.initial).abs() < 1e-9,
            "{name} starts away from the initial pose"
        );
        assert!(
            (q(rows - 1) - lim.initial).abs() < 1e-9,
            "{name} ends away from the initial pose"
        );
        let v = |i: usize| (q(i + 1) - q(i)) / (t(i + 1) - t(i));
        for i in 0..rows - 1 {
            assert!(
                v(i).abs() <= MARGIN * lim.velocity,
                "{name} {} velocity {}",
                COLUMNS[c],
                v(i)
            );
        }
        for i in 0..rows - 2 {
            let a = (v(i + 1) - v(i)) / ((t(i + 2) - t(i)) / 2.0);
            assert!(
                a.abs() <= MARGIN * lim.acceleration,
                "{name} {} acceleration {a}",
                COLUMNS[c]
            );
        }
        // at rest at both ends
        assert!(
            v(0).abs() < 1e-3 && v(rows - 2).abs() < 1e-3,
            "{name} does not start and end at rest"
        );
    }
}

#[test]
fn wave_is_fixed_rate_and_within_limits() {
    let m = load("wave.seq");
    let j = m.joint_displacement().unwrap();
    assert_eq!(j.timing, Timing::Fixed { frame_rate: 100.0 });
    let duration = j.timing.time(j.rows() - 1);
    assert!((4.0..=6.0).contains(&duration), "{duration}");
    check_within_limits("wave.seq", &m);
}

#[test]
fn pick_is_variable_interval_and_within_limits() {
    let m = load("pick.seq");
    let j = m.joint_displacement().unwrap();
    let Timing::Timed { times, .. } = &j.timing else {
        panic!("pick.seq is not timed")
    };
    let steps: Vec<f64> = times.windows(2).map(|w| w[1] - w[0]).collect();
    let (min, max) = steps
        .iter()
        .fold((f64::MAX, 0.0f64), |(lo, hi), &s| (lo.min(s), hi.max(s)));
    assert!(max > 2.0 * min, "intervals should vary: {min}..{max}");
    check_within_limits("pick.seq", &m);
}

#[test]
fn reach_pose_has_the_tool_link_position() {
    let m = load("reach_pose.seq");
    check_within_limits("reach_pose.seq", &m);
    let links = m.link_position().expect("LinkPosition");
    let joints = m.joint_displacement().unwrap();
    assert_eq!((links.num_parts, links.rows()), (1, joints.rows()));
    // At the initial pose the tool link sits at its SKEL rest position, unrotated.
    let first = links.poses[0];
    assert!((first.translation.vector - nalgebra::Vector3::new(0.69, 0.0, 0.2)).norm() < 1e-6);
    assert!(first.rotation.angle() < 1e-6);
}

#[test]
fn demo_motions_take_the_fast_path() {
    for name in ["wave.seq", "pick.seq", "reach_pose.seq"] {
        let path = config().join("motions").join(name);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(seq::parse_fast(&text, Path::new(name)).is_some(), "{name}");
    }
}
