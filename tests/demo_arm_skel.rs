//! config/demo-arm.skel: the project's demo robot, as TEAM.md specifies it for every other part.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

use std::path::Path;

use motiond::robot::{Actuator, JointKind, Limits, skel};

const INF: f64 = f64::INFINITY;

#[test]
fn demo_arm_has_the_specified_joints_and_limits() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/demo-arm.skel");
    let world = skel::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let [arm] = world.skeletons.as_slice() else {
        panic!("expected one skeleton");
    };
    assert_eq!(arm.name, "demo_arm");

    let mount = &arm.joints[0];
    assert_eq!(
        (
            mount.name.as_str(),
            mount.kind,
            mount.parent.as_deref(),
            mount.child.as_str()
        ),
        ("base_mount", JointKind::Weld, None, "base")
    );

    type Row = (
        &'static str,
        JointKind,
        Actuator,
        [f64; 3],
        [f64; 2],
        f64,
        f64,
        f64,
        f64,
    );
    let (rev, pri) = (JointKind::Revolute, JointKind::Prismatic);
    let (servo, vel, passive) = (Actuator::Servo, Actuator::Velocity, Actuator::Passive);
    #[rustfmt::skip]
    let table: [Row; 7] = [
        ("base_yaw",       rev, servo,   [0., 0., 1.], [-2.8, 2.8], 2.0,  8.0,  40.0, 0.0),
        ("shoulder_pitch", rev, servo,   [0., 1., 0.], [-1.9, 1.9], 1.8,  6.0,  60.0, 0.0),
        ("elbow_pitch",    rev, servo,   [0., 1., 0.], [-2.4, 2.4], 2.2,  8.0,  40.0, 0.0),
        ("wrist_pitch",    rev, vel,     [0., 1., 0.], [-1.9, 1.9], 3.0,  12.0, 10.0, 0.0),
        ("wrist_roll",     rev, vel,     [1., 0., 0.], [-3.0, 3.0], 4.0,  15.0, 8.0,  0.0),
        ("gripper_slide",  pri, servo,   [0., 1., 0.], [0.0, 0.04], 0.05, 0.5,  20.0, 0.01),
        ("tool_spring",    rev, passive, [1., 0., 0.], [-0.3, 0.3], INF,  INF,  INF,  0.0),
    ];
    assert_eq!(arm.dofs.len(), table.len(), "6 driven + 1 passive DOF");
    let driven = arm
        .dofs
        .iter()
        .filter(|d| arm.joints[d.joint].actuator != Actuator::Passive)
        .count();
    assert_eq!(driven, 6);

    let symmetric = |v: f64| Limits {
        lower: -v,
        upper: v,
    };
    for (i, (name, kind, actuator, axis, position, v, a, e, q0)) in table.into_iter().enumerate() {
        let dof = &arm.dofs[i];
        let joint = &arm.joints[dof.joint];
        assert_eq!((dof.name.as_str(), joint.name.as_str()), (name, name));
        assert_eq!((joint.kind, joint.actuator), (kind, actuator), "{name}");
        assert_eq!(joint.dofs, i..i + 1, "{name}");
        assert_eq!(joint.axes.len(), 1, "{name}");
        assert!((joint.axes[0].into_inner() - nalgebra::Vector3::from(axis)).norm() < 1e-12);
        let position = Limits {
            lower: position[0],
            upper: position[1],
        };
        assert_eq!(dof.position, position, "{name}");
        assert_eq!(dof.velocity, symmetric(v), "{name}");
        assert_eq!(dof.acceleration, symmetric(a), "{name}");
        assert_eq!(dof.effort, symmetric(e), "{name}");
        assert_eq!(
            (dof.initial_position, dof.initial_velocity),
            (q0, 0.0),
            "{name}"
        );
    }
}
