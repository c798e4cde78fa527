//! URDF mimic joints on the trajectory side: a follower is commanded `multiplier · leader +
//! offset` (velocity and acceleration scaled), has no column of its own, and is proved against
//! its own limits.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

use std::path::Path;

use motiond::motion::seq::{MultiValueSeq, Timing};
use motiond::robot::Actuator;
use motiond::robot::{self, Options as ModelOptions};
use motiond::trajectory::{
    BuildError, ColumnMap, Cursor, Interpolation, JointSet, MappingError, Options, Quantity,
    Setpoint, build_values,
};

/// A gripper: `finger` drives, `mirror` follows it (−1·q + 0.01), `tip` follows `mirror` (2·q).
fn gripper(mirror_upper: f64) -> JointSet {
    let text = format!(
        r#"<robot name="g"><link name="world"/><link name="palm"/><link name="f"/><link name="m"/><link name="t"/>
      <joint name="mount" type="fixed"><parent link="world"/><child link="palm"/></joint>
      <joint name="finger" type="prismatic"><parent link="palm"/><child link="f"/>
        <limit lower="0" upper="0.04" effort="10" velocity="0.1"/></joint>
      <joint name="mirror" type="prismatic"><parent link="palm"/><child link="m"/>
        <limit lower="-0.04" upper="{mirror_upper}" effort="10" velocity="0.1"/>
        <mimic joint="finger" multiplier="-1" offset="0.01"/></joint>
      <joint name="tip" type="prismatic"><parent link="m"/><child link="t"/>
        <limit lower="-1" upper="1" effort="10" velocity="1"/><mimic joint="mirror" multiplier="2"/></joint>
      <ros2_control name="h"><joint name="finger"><command_interface name="position"/></joint></ros2_control>
    </robot>"#
    );
    let world = robot::parse(&text, Path::new("g.urdf"), &ModelOptions::default())
        .unwrap_or_else(|e| panic!("{e}"));
    JointSet::from_world(&world, &[]).unwrap_or_else(|e| panic!("{e}"))
}

/// `finger` from 0 to 0.03 and back in 2 s.
fn motion() -> MultiValueSeq {
    let rows = 21;
    MultiValueSeq {
        num_parts: 1,
        timing: Timing::Fixed { frame_rate: 10.0 },
        values: (0..rows)
            .map(|i| 0.015 * (1.0 - (std::f64::consts::PI * i as f64 / 10.0).cos()))
            .collect(),
    }
}

fn options() -> Options {
    Options {
        rate_hz: 500.0,
        interpolation: Interpolation::Cubic,
        ..Options::default()
    }
}

#[test]
fn followers_record_their_composed_leader_and_take_no_column() {
    let joints = gripper(0.04);
    let names: Vec<&str> = joints.dofs.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["finger", "mirror", "tip"]);
    let mirror = joints.dofs[1].mimic.expect("mirror follows finger");
    assert_eq!(
        (mirror.leader, mirror.multiplier, mirror.offset),
        (0, -1.0, 0.01)
    );
    let tip = joints.dofs[2]
        .mimic
        .expect("tip follows finger through mirror");
    assert_eq!((tip.leader, tip.multiplier, tip.offset), (0, -2.0, 0.02));
    assert_eq!(joints.dofs[1].actuator, Actuator::Servo);
    assert_eq!(joints.driven().count(), 1);
    let err = ColumnMap::by_name(&joints, &["mirror"], 1).unwrap_err();
    assert!(
        matches!(&err.0[0], MappingError::Mimic { leader, .. } if leader == "finger"),
        "{err}"
    );
}

#[test]
fn followers_are_commanded_from_their_leader_at_every_tick() {
    let joints = gripper(0.04);
    let map = ColumnMap::by_name(&joints, &["finger"], 1).expect("mapping");
    let proved =
        build_values(&joints, &motion(), &map, &options()).unwrap_or_else(|e| panic!("{e}"));
    let t = proved.trajectory;
    let mut cursor = Cursor::default();
    let mut out = vec![Setpoint::default(); t.dofs()];
    for k in 0..t.ticks() {
        t.sample(&mut cursor, k, &mut out);
        let (f, m, tip) = (out[0], out[1], out[2]);
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-12;
        assert!(close(m.position, -f.position + 0.01), "tick {k}");
        assert!(close(m.velocity, -f.velocity), "tick {k}");
        assert!(close(m.acceleration, -f.acceleration), "tick {k}");
        assert!(close(tip.position, -2.0 * f.position + 0.02), "tick {k}");
        assert!(close(tip.velocity, -2.0 * f.velocity), "tick {k}");
    }
}

#[test]
fn a_follower_is_proved_against_its_own_limits() {
    // mirror = 0.01 − finger reaches −0.02, inside [−0.04, …]; an upper limit of 0.005 is
    // crossed at the start, where finger is 0 and mirror 0.01.
    let joints = gripper(0.005);
    let map = ColumnMap::by_name(&joints, &["finger"], 1).expect("mapping");
    match build_values(&joints, &motion(), &map, &options()) {
        Err(BuildError::Refused(report)) => {
            assert!(
                report
                    .violations
                    .iter()
                    .any(|v| v.dof == "mirror" && v.quantity == Quantity::Position),
                "{}",
                report.summary()
            );
            assert!(report.violations.iter().all(|v| v.dof != "finger"));
        }
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("a follower outside its limits was played"),
    }
}
