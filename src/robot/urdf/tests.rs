//! One case per rule of ../shared/docs/urdf-semantics.md and per URDF refusal of policy.md.

use std::path::Path;

use serde_json::Value;

use super::parse;
use crate::robot::skel::inspect_json;
use crate::robot::world::Options;
use crate::robot::world::{Actuator, CommandInterface, JointKind, World};

fn load(text: &str) -> World {
    parse(text, Path::new("t.urdf"), &Options::default()).unwrap_or_else(|e| panic!("{e}"))
}

fn json(text: &str) -> Value {
    inspect_json(&load(text))["skeletons"][0].clone()
}

/// The refusal, one `t.urdf:LINE:COL: message` line per problem.
fn refused(text: &str) -> String {
    match parse(text, Path::new("t.urdf"), &Options::default()) {
        Ok(w) => panic!("loaded: {:?}", inspect_json(&w)),
        Err(e) => e.to_string(),
    }
}

fn joint_names(text: &str) -> Vec<String> {
    load(text).skeletons[0]
        .joints
        .iter()
        .map(|j| j.name.clone())
        .collect()
}

const ARM: &str = r#"<robot name="r">
  <link name="base"/><link name="a"/>
  <joint name="j" type="revolute">
    <parent link="base"/><child link="a"/>
    <limit lower="-1" upper="2" effort="3" velocity="4"/>
  </joint>
</robot>"#;

#[test]
fn a_revolute_joint_under_the_synthetic_free_root() {
    let s = json(ARM);
    assert_eq!(s["name"], "r");
    assert_eq!(
        s["joints"][0],
        serde_json::json!({"name": "rootJoint", "type": "free", "actuator": "force",
            "parent": null, "child": "base", "dofs": [0, 1, 2, 3, 4, 5]})
    );
    assert_eq!(s["dofs"][0]["name"], "rootJoint_rot_x");
    assert_eq!(s["dofs"][5]["name"], "rootJoint_pos_z");
    assert_eq!(s["dofs"][5]["position"], serde_json::json!([null, null]));
    assert_eq!(
        s["dofs"][6],
        serde_json::json!({"index": 6, "name": "j", "joint": "j", "position": [-1.0, 2.0],
            "velocity": [-4.0, 4.0], "acceleration": [null, null], "effort": [-3.0, 3.0],
            "initial_position": 0.0, "initial_velocity": 0.0})
    );
}

#[test]
fn a_fixed_base_welds_the_root() {
    let w = parse(
        ARM,
        Path::new("t.urdf"),
        &Options {
            fixed_base: true,
            ..Default::default()
        },
    )
    .unwrap();
    let root = &w.skeletons[0].joints[0];
    assert_eq!(
        (root.name.as_str(), root.kind),
        ("rootJoint", JointKind::Weld)
    );
    assert_eq!(w.skeletons[0].dofs.len(), 1);
}

#[test]
fn siblings_follow_the_byte_order_of_their_names_depth_first() {
    let text = r#"<robot name="r"><link name="base"/>
      <link name="la"/><link name="lZ"/><link name="l_c"/><link name="lB"/><link name="lA"/>
      <joint name="a" type="fixed"><parent link="base"/><child link="la"/></joint>
      <joint name="Z" type="fixed"><parent link="base"/><child link="lZ"/></joint>
      <joint name="_c" type="fixed"><parent link="base"/><child link="l_c"/></joint>
      <joint name="B" type="fixed"><parent link="base"/><child link="lB"/></joint>
      <joint name="A_under_Z" type="fixed"><parent link="lZ"/><child link="lA"/></joint>
    </robot>"#;
    assert_eq!(
        joint_names(text),
        ["rootJoint", "B", "Z", "A_under_Z", "_c", "a"]
    );
}

#[test]
fn a_world_root_adds_no_root_joint_and_its_children_attach_to_the_world() {
    let text = r#"<robot name="r"><link name="world"/><link name="b"/><link name="c"/>
      <joint name="w2" type="floating"><parent link="world"/><child link="c"/></joint>
      <joint name="w1" type="fixed"><parent link="world"/><child link="b"/></joint>
    </robot>"#;
    let s = json(text);
    assert_eq!(s["joints"][0]["name"], "w1");
    assert_eq!(s["joints"][0]["parent"], Value::Null);
    assert_eq!(s["joints"][1]["type"], "free");
    assert_eq!(s["joints"][1]["parent"], Value::Null);
    assert_eq!(s["dofs"][0]["name"], "w2_rot_x");
}

#[test]
fn continuous_is_an_unbounded_revolute_whose_initial_position_still_follows_its_limits() {
    let text = r#"<robot name="r"><link name="b"/><link name="c"/>
      <joint name="wheel" type="continuous"><parent link="b"/><child link="c"/>
        <limit lower="2" upper="3" effort="5" velocity="6"/></joint></robot>"#;
    let d = &json(text)["dofs"][6];
    assert_eq!(d["position"], serde_json::json!([null, null]));
    assert_eq!(d["velocity"], serde_json::json!([-6.0, 6.0]));
    assert_eq!(d["initial_position"], 2.5);
    let bare = r#"<robot name="r"><link name="b"/><link name="c"/>
      <joint name="wheel" type="continuous"><parent link="b"/><child link="c"/></joint></robot>"#;
    assert_eq!(
        json(bare)["dofs"][6]["effort"],
        serde_json::json!([null, null])
    );
}

#[test]
fn initial_positions_move_into_limits_that_exclude_zero() {
    let text = |lo: &str, hi: &str| {
        format!(
            r#"<robot name="r"><link name="b"/><link name="c"/>
      <joint name="j" type="prismatic"><parent link="b"/><child link="c"/>
        <limit lower="{lo}" upper="{hi}" effort="1" velocity="1"/></joint></robot>"#
        )
    };
    let q0 = |lo, hi| json(&text(lo, hi))["dofs"][6]["initial_position"].as_f64();
    assert_eq!(q0("0.2", "1"), Some(0.6));
    assert_eq!(q0("-3", "-2"), Some(-2.5));
    assert_eq!(q0("0.5", "1e308"), Some(5e307));
    assert_eq!(q0("-1", "1"), Some(0.0));
    // Without lower/upper the limits are [0, 0].
    let zero = r#"<robot name="r"><link name="b"/><link name="c"/>
      <joint name="j" type="revolute"><parent link="b"/><child link="c"/>
        <limit effort="1" velocity="0"/></joint></robot>"#;
    let d = &json(zero)["dofs"][6];
    assert_eq!(d["position"], serde_json::json!([0.0, 0.0]));
    assert_eq!(d["velocity"], serde_json::json!([-0.0, 0.0]));
}

#[test]
fn floating_and_planar_joints_take_one_limit_for_every_dof() {
    let text = r#"<robot name="r"><link name="world"/><link name="b"/><link name="c"/><link name="d"/><link name="e"/>
      <joint name="f" type="floating"><parent link="world"/><child link="b"/>
        <limit lower="0.5" upper="1" effort="2" velocity="3"/></joint>
      <joint name="p" type="planar"><parent link="b"/><child link="c"/><axis xyz="0 0 1"/>
        <limit lower="-1" upper="1" effort="2" velocity="3"/></joint>
      <joint name="q" type="planar"><parent link="c"/><child link="d"/><axis xyz="0 1 0"/></joint>
      <joint name="s" type="planar"><parent link="d"/><child link="e"/><axis xyz="1 1 0"/></joint>
    </robot>"#;
    let s = json(text);
    let names: Vec<&str> = s["dofs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "f_rot_x",
            "f_rot_y",
            "f_rot_z",
            "f_pos_x",
            "f_pos_y",
            "f_pos_z",
            "p_x",
            "p_y",
            "default",
            "q_z",
            "q_x",
            "default(1)",
            "s_1",
            "s_2",
            "default(2)"
        ]
    );
    for i in 0..6 {
        assert_eq!(s["dofs"][i]["position"], serde_json::json!([0.5, 1.0]));
        assert_eq!(s["dofs"][i]["initial_position"], 0.75);
    }
    assert_eq!(s["dofs"][8]["effort"], serde_json::json!([-2.0, 2.0]));
}

#[test]
fn axes_are_normalised_and_default_to_x() {
    let text = r#"<robot name="r"><link name="b"/><link name="c"/><link name="d"/>
      <joint name="j" type="revolute"><parent link="b"/><child link="c"/><axis xyz="3 4 0"/>
        <limit effort="1" velocity="1"/></joint>
      <joint name="k" type="prismatic"><parent link="c"/><child link="d"/>
        <limit effort="1" velocity="1"/></joint></robot>"#;
    let w = load(text);
    let axes = |i: usize| w.skeletons[0].joints[i].axes[0].into_inner();
    assert!((axes(1) - nalgebra::Vector3::new(0.6, 0.8, 0.0)).norm() < 1e-15);
    assert_eq!(axes(2), nalgebra::Vector3::x());
}

#[test]
fn mimic_joints_name_their_leader_even_on_welds_and_later_in_dof_order() {
    let text = r#"<robot name="r"><link name="b"/><link name="c"/><link name="d"/><link name="e"/>
      <joint name="a_follow" type="revolute"><parent link="b"/><child link="c"/>
        <limit effort="1" velocity="1" lower="-1" upper="1"/>
        <mimic joint="z_lead" multiplier="-2" offset="0.5"/></joint>
      <joint name="w" type="fixed"><parent link="b"/><child link="e"/><mimic joint="z_lead"/></joint>
      <joint name="z_lead" type="revolute"><parent link="b"/><child link="d"/>
        <limit effort="1" velocity="1" lower="-1" upper="1"/></joint></robot>"#;
    let w = load(text);
    let j = &w.skeletons[0].joints;
    assert_eq!(j[1].name, "a_follow");
    assert_eq!(j[1].actuator, Actuator::Mimic);
    let m = j[1].mimic.as_ref().unwrap();
    assert_eq!(
        (m.joint.as_str(), m.multiplier, m.offset),
        ("z_lead", -2.0, 0.5)
    );
    assert_eq!(j[2].actuator, Actuator::Mimic);
    assert_eq!(j[3].actuator, Actuator::Force);
    let s = inspect_json(&w);
    assert_eq!(
        s["skeletons"][0]["joints"][1]["mimic"],
        serde_json::json!({"joint": "z_lead", "multiplier": -2.0, "offset": 0.5})
    );
}

#[test]
fn ros2_control_command_interfaces_choose_the_drive() {
    let text = r#"<robot name="r"><link name="b"/><link name="c"/><link name="d"/><link name="e"/>
      <joint name="p" type="revolute"><parent link="b"/><child link="c"/>
        <limit effort="1" velocity="1" lower="-1" upper="1"/></joint>
      <joint name="v" type="continuous"><parent link="c"/><child link="d"/></joint>
      <joint name="s" type="continuous"><parent link="d"/><child link="e"/></joint>
      <ros2_control name="hw" type="system">
        <joint name="p"><command_interface name="effort"/><command_interface name="position"/>
          <state_interface name="position"><param name="initial_value">0.25</param></state_interface></joint>
        <joint name="v"><command_interface name="velocity"/><command_interface name="kp"/></joint>
        <joint name="s"><state_interface name="position"/></joint>
      </ros2_control></robot>"#;
    let w = load(text);
    let j = &w.skeletons[0].joints;
    assert_eq!(j[1].command, Some(CommandInterface::Position));
    assert_eq!(j[1].actuator, Actuator::Force, "the actuator stays DART's");
    assert_eq!(
        w.skeletons[0].dofs[6].initial_position, 0.0,
        "initial_value is ros2_control's, not DART's: the initial position stays DART's"
    );
    assert_eq!(j[2].command, Some(CommandInterface::Velocity));
    assert_eq!(j[3].command, Some(CommandInterface::None));
    assert_eq!(
        inspect_json(&w)["skeletons"][0]["joints"][2]["command_interface"],
        "velocity"
    );
}

/// urdfdom keeps a visual's name-only material even when no `<material>` of that name is defined
/// (DART loads such robots; one humanoid of example-robot-data names its colours this way).
#[test]
fn a_visual_material_defined_nowhere_loads() {
    let text = r#"<robot name="r"><link name="b"/><link name="c">
        <visual><geometry><box size="1 1 1"/></geometry><material name="nowhere"/></visual>
        <visual><geometry><box size="1 1 1"/></geometry><material name="black"/></visual></link>
      <joint name="j" type="revolute"><parent link="b"/><child link="c"/>
        <limit effort="1" velocity="1" lower="-1" upper="1"/></joint></robot>"#;
    let w = load(text);
    assert_eq!(w.skeletons[0].joints[1].name, "j");
}

/// A ros2_control `initial_value` changes nothing DART builds: with and without it, the same
/// initial positions (DART's: 0, or the middle of limits that exclude 0).
#[test]
fn a_ros2_control_initial_value_leaves_the_initial_position_to_dart() {
    let robot = |param: &str| {
        format!(
            r#"<robot name="r"><link name="b"/><link name="c"/><link name="d"/>
      <joint name="a" type="revolute"><parent link="b"/><child link="c"/>
        <limit effort="1" velocity="1" lower="-1" upper="1"/></joint>
      <joint name="o" type="prismatic"><parent link="c"/><child link="d"/>
        <limit effort="1" velocity="1" lower="0.2" upper="0.4"/></joint>
      <ros2_control name="hw" type="system">
        <joint name="a"><command_interface name="position"/>
          <state_interface name="position">{param}</state_interface></joint>
        <joint name="o"><command_interface name="position"/>
          <state_interface name="position">{param}</state_interface></joint>
      </ros2_control></robot>"#
        )
    };
    let with = json(&robot(r#"<param name="initial_value">0.9</param>"#));
    let without = json(&robot(""));
    assert_eq!(with, without);
    assert_eq!(with["dofs"][6]["initial_position"], 0.0);
    assert!((with["dofs"][7]["initial_position"].as_f64().unwrap() - 0.3).abs() < 1e-12);
}

#[test]
fn what_urdfdom_ignores_is_ignored() {
    let text = r#"<robot name="r" xmlns:xacro="http://ros.org/wiki/xacro">
      <xacro:property name="x" value="1"/><gazebo/><transmission name="t"/>
      <link name="b"><visual><geometry><mesh filename="package://nowhere/x.stl"/></geometry></visual></link>
      <link name="c" unknown="1"/>
      <joint name="j" type="revolute"><parent link="b"/><child link="c"/>
        <limit lower="-1" upper="1" effort="1" velocity="1"/>
        <limit lower="-9" upper="9" effort="9" velocity="9"/>
        <safety_controller k_velocity="1" soft_lower_limit="-0.5"/>
        <calibration rising="0.1"/><dynamics damping="0.3"/></joint></robot>"#;
    let d = &json(text)["dofs"][6];
    assert_eq!(
        d["position"],
        serde_json::json!([-1.0, 1.0]),
        "the first <limit> wins"
    );
}

#[test]
fn urdfdom_refusals_name_the_place() {
    let cases: &[(&str, &str)] = &[
        ("<robot/>", "t.urdf:1:2: <robot> has no name attribute"),
        ("<robot name='r'/>", "t.urdf:1:2: the robot has no <link>"),
        (
            "<robot name='r' version='1'><link name='a'/></robot>",
            "t.urdf:1:26: URDF version '1'",
        ),
        (
            "<notrobot/>",
            "t.urdf:1:2: root element <notrobot> is not a URDF robot",
        ),
        (
            "<robot name='r'><link/></robot>",
            "t.urdf:1:18: <link> has no name attribute",
        ),
        (
            "<robot name='r'><link name='a'/>\n<link name='a'/></robot>",
            "t.urdf:2:13: link name 'a' is already used by the link at line 1",
        ),
        (
            "<robot name='r'><link name='a'/><link name='b'/>\n<joint type='fixed'><parent link='a'/><child link='b'/></joint></robot>",
            "t.urdf:2:2: <joint> has no name attribute",
        ),
        (
            "<robot name='r'><link name='a'/><link name='b'/>\n<joint name='j' type='hinge'><parent link='a'/><child link='b'/></joint></robot>",
            "t.urdf:2:23: joint 'j': unknown joint type 'hinge'",
        ),
        (
            "<robot name='r'><link name='a'/><link name='b'/>\n<joint name='j' type='revolute'><parent link='a'/><child link='b'/></joint></robot>",
            "t.urdf:2:2: joint 'j' is revolute but has no <limit>",
        ),
        (
            "<robot name='r'><link name='a'/><link name='b'/>\n<joint name='j' type='revolute'><parent link='a'/><child link='b'/><limit effort='1'/></joint></robot>",
            "t.urdf:2:69: joint 'j': <limit> has no velocity attribute",
        ),
        (
            "<robot name='r'><link name='a'/><link name='b'/>\n<joint name='j' type='revolute'><parent link='a'/><child link='b'/><limit effort='1' velocity='1.5rad'/></joint></robot>",
            "t.urdf:2:96: joint 'j': <limit> velocity: expected a number, found '1.5rad'",
        ),
        (
            "<robot name='r'><link name='a'/><link name='b'/>\n<joint name='j' type='fixed'><parent link='a'/><child link='b'/><safety_controller/></joint></robot>",
            "t.urdf:2:66: joint 'j': <safety_controller> has no k_velocity attribute",
        ),
        (
            "<robot name='r'><link name='a'/><link name='b'/>\n<joint name='j' type='fixed'><parent link='a'/><child link='b'/><mimic/></joint></robot>",
            "t.urdf:2:66: joint 'j': <mimic> names no joint",
        ),
        (
            "<robot name='r'><link name='a'/><link name='b'/>\n<joint name='j' type='fixed'><parent link='a'/><child link='b'/><dynamics/></joint></robot>",
            "t.urdf:2:66: joint 'j': <dynamics> has neither damping nor friction",
        ),
        (
            "<robot name='r'><link name='a'/><link name='b'/>\n<joint name='j' type='fixed'><child link='b'/></joint></robot>",
            "t.urdf:2:2: joint 'j' has no parent link",
        ),
        (
            "<robot name='r'><link name='a'/><link name='b'/>\n<joint name='j' type='fixed'><parent link='x'/><child link='b'/></joint></robot>",
            "t.urdf:2:44: joint 'j': parent link 'x' does not exist",
        ),
        (
            "<robot name='r'><link name='a'/>\n<link name='b'/></robot>",
            "t.urdf:2:2: link 'b' is a second root",
        ),
        (
            "<robot name='r'><link name='a'/><link name='b'/>\n<joint name='j' type='revolute'><parent link='a'/><child link='b'/><axis xyz='1 0'/><limit effort='1' velocity='1'/></joint></robot>",
            "t.urdf:2:79: joint 'j': <axis> xyz: expected 3 numbers separated by spaces, found 2",
        ),
        (
            "<robot name='r'><material name='m'/><material name='m'/><link name='a'/></robot>",
            "t.urdf:1:38: material 'm' is already defined",
        ),
        (
            "<robot name='r'><link name='a'>",
            "t.urdf:1:1: XML syntax error",
        ),
    ];
    for (text, expected) in cases {
        let e = refused(text);
        assert!(
            e.contains(expected),
            "{text}\n  gave: {e}\n  want: {expected}"
        );
    }
}

#[test]
fn numbers_are_read_as_urdfdom_reads_them() {
    use crate::robot::xml::c_number as number;
    for ok in [
        "1", "-1.5", "+2", ".5", "1.", "1e308", "-1e16", " 3", "\t4", "1E-3",
    ] {
        assert!(number(ok).is_some(), "{ok}");
    }
    for bad in [
        "", "1 ", "1.5rad", "1,5", "0x1p1", "${pi/2}", "inf", "-inf", "nan", "1e400", "e5", "1e",
        ".", "--1",
    ] {
        assert!(number(bad).is_none(), "{bad:?}");
    }
}

#[test]
fn where_dart_hangs_or_mangles_motiond_refuses() {
    let cases: &[(&str, &str)] = &[
        (
            // cycle below the root: a is the child of two joints
            "<robot name='r'><link name='base'/><link name='a'/><link name='b'/>\n<joint name='j1' type='fixed'><parent link='base'/><child link='a'/></joint>\n<joint name='j2' type='fixed'><parent link='a'/><child link='b'/></joint>\n<joint name='j3' type='fixed'><parent link='b'/><child link='a'/></joint></robot>",
            "t.urdf:4:62: link 'a' is already the child of joint 'j1' (line 2)",
        ),
        (
            "<robot name='r'><link name='a'/>\n<joint name='j' type='fixed'><parent link='a'/><child link='a'/></joint></robot>",
            "t.urdf:2:61: joint 'j' connects link 'a' to itself",
        ),
        (
            // a cycle beside the tree
            "<robot name='r'><link name='base'/><link name='a'/><link name='x'/><link name='y'/>\n<joint name='ja' type='fixed'><parent link='base'/><child link='a'/></joint>\n<joint name='jxy' type='fixed'><parent link='x'/><child link='y'/></joint>\n<joint name='jyx' type='fixed'><parent link='y'/><child link='x'/></joint></robot>",
            "t.urdf:3:2: joint 'jxy' is part of a cycle",
        ),
        (
            "<robot name='r'><link name='a'/><link name='b'/>\n<joint name='rootJoint' type='fixed'><parent link='a'/><child link='b'/></joint></robot>",
            "t.urdf:2:2: joint name 'rootJoint' is the name DART gives",
        ),
        (
            "<robot name='r'><link name='a'/><link name='b'/>\n<joint name='rootJoint_rot_x' type='continuous'><parent link='a'/><child link='b'/></joint></robot>",
            "t.urdf:2:2: joint 'rootJoint_rot_x': its DOF name is already the name of a DOF DART makes up (DART would rename this one 'rootJoint_rot_x(1)')",
        ),
        (
            "<robot name='r'><link name='a'/><link name='b'/>\n<joint name='j' type='revolute'><parent link='a'/><child link='b'/><limit lower='1' upper='-1' effort='1' velocity='1'/></joint></robot>",
            "t.urdf:2:82: joint 'j': lower limit 1 is above upper limit -1",
        ),
        (
            "<robot name='r'><link name='a'/><link name='b'/>\n<joint name='j' type='revolute'><parent link='a'/><child link='b'/><limit effort='-1' velocity='1'/></joint></robot>",
            "t.urdf:2:83: joint 'j': negative effort limit -1",
        ),
        (
            "<robot name='r'><link name='a'/><link name='b'/>\n<joint name='j' type='revolute'><parent link='a'/><child link='b'/><axis xyz='0 0 0'/><limit effort='1' velocity='1'/></joint></robot>",
            "t.urdf:2:79: joint 'j' has the zero axis",
        ),
        (
            "<robot name='r'><link name='a'/><link name='b'/>\n<joint name='j' type='fixed'><parent link='a'/><child link='b'/><mimic joint='ghost'/></joint></robot>",
            "t.urdf:2:79: joint 'j' mimics 'ghost', which is not a joint",
        ),
        (
            "<robot name='r'><link name='a'/><link name='b'/>\n<joint name='j' type='fixed'><parent link='a'/><child link='b'/><mimic joint='j'/></joint></robot>",
            "t.urdf:2:79: joint 'j' mimics itself",
        ),
        (
            "<robot name='r'><link name='a'/><link name='b'/><link name='c'/>\n<joint name='j' type='continuous'><parent link='a'/><child link='b'/><mimic joint='k'/></joint>\n<joint name='k' type='continuous'><parent link='b'/><child link='c'/><mimic joint='j'/></joint></robot>",
            "t.urdf:2:84: joint 'j' is part of a mimic cycle through 'k'",
        ),
        (
            "<robot name='r'><link name='a'/><link name='b'/>\n<joint name='j' type='fixed'><parent link='a'/><child link='b'/></joint>\n<ros2_control name='h'><joint name='j'><command_interface name='position'/></joint><joint name='q'/></ros2_control></robot>",
            "t.urdf:3:97: <ros2_control> joint 'q' is not a joint of this robot",
        ),
    ];
    for (text, expected) in cases {
        let e = refused(text);
        assert!(
            e.contains(expected),
            "{text}\n  gave: {e}\n  want: {expected}"
        );
    }
}

#[test]
fn every_problem_of_a_file_is_reported_together() {
    let text = "<robot name='r'><link name='a'/><link name='b'/><link name='c'/>\n\
        <joint name='j' type='revolute'><parent link='a'/><child link='b'/><limit effort='x' velocity='1'/></joint>\n\
        <joint name='k' type='revolute'><parent link='b'/><child link='c'/><limit effort='1' velocity='y'/></joint></robot>";
    let e = refused(text);
    assert_eq!(e.lines().count(), 2, "{e}");
    assert!(e.starts_with("t.urdf:2:"), "{e}");
}

#[test]
fn a_deep_chain_loads_without_recursion() {
    let n = 20_000;
    let mut text = String::from("<robot name='r'>");
    for i in 0..=n {
        text.push_str(&format!("<link name='l{i}'/>"));
    }
    for i in 0..n {
        text.push_str(&format!(
            "<joint name='j{i}' type='continuous'><parent link='l{i}'/><child link='l{}'/></joint>",
            i + 1
        ));
    }
    text.push_str("</robot>");
    assert_eq!(load(&text).skeletons[0].joints.len(), n + 1);
}

#[test]
fn vectors_split_on_spaces_only() {
    let text = |xyz: &str| {
        format!(
            "<robot name='r'><link name='a'/><link name='b'/>\n<joint name='j' type='revolute'><parent link='a'/><child link='b'/><axis xyz='{xyz}'/><limit effort='1' velocity='1'/></joint></robot>"
        )
    };
    load(&text("0  0   1"));
    assert!(
        refused(&text("1\t0 0"))
            .starts_with("t.urdf:2:79: joint 'j': <axis> xyz: expected a number, found '1\t0'"),
        "{}",
        refused(&text("1\t0 0"))
    );
}

/// Rules of urdf-semantics.md §2–§8 and §11 that the cases above do not reach, each with its
/// place (the audit of issue 16: every rule has a case).
#[test]
fn more_urdf_rules_each_with_its_place() {
    let two =
        |joint: &str| format!("<robot name='r'><link name='a'/><link name='b'/>\n{joint}</robot>");
    let cases: Vec<(String, &str)> = vec![
        (
            "<robot name='r'><link name='a'/><link name='b'/><link name='c'/>\n<joint name='j' type='fixed'><parent link='a'/><child link='b'/></joint>\n<joint name='j' type='fixed'><parent link='b'/><child link='c'/></joint></robot>".into(),
            "t.urdf:3:14: joint name 'j' is already used",
        ),
        (
            two("<joint name='j'><parent link='a'/><child link='b'/></joint>"),
            "t.urdf:2:2: joint 'j' has no type attribute",
        ),
        (
            two("<joint name='j' type='prismatic'><parent link='a'/><child link='b'/></joint>"),
            "t.urdf:2:2: joint 'j' is prismatic but has no <limit>",
        ),
        (
            two("<joint name='j' type='revolute'><parent link='a'/><child link='b'/><limit velocity='1'/></joint>"),
            "t.urdf:2:69: joint 'j': <limit> has no effort attribute",
        ),
        (
            two("<joint name='j' type='fixed'><parent link='a'/></joint>"),
            "t.urdf:2:2: joint 'j' has no child link",
        ),
        (
            two("<joint name='j' type='fixed'><parent link='a'/><child link='x'/></joint>"),
            "t.urdf:2:61: joint 'j': child link 'x' does not exist",
        ),
        (
            two("<joint name='j' type='revolute'><parent link='a'/><child link='b'/><limit effort='1' velocity='-2'/></joint>"),
            "t.urdf:2:96: joint 'j': negative velocity limit -2",
        ),
        (
            two("<joint name='j' type='revolute'><parent link='a'/><child link='b'/><limit effort='1' velocity='inf'/></joint>"),
            "t.urdf:2:96: joint 'j': <limit> velocity: expected a number, found 'inf'",
        ),
        (
            two("<joint name='j' type='revolute'><parent link='a'/><child link='b'/><limit lower='${-pi}' effort='1' velocity='1'/></joint>"),
            "t.urdf:2:82: joint 'j': <limit> lower: expected a number, found '${-pi}'",
        ),
        (
            // Every link a child: no root (urdfdom's "No root link found").
            "<robot name='r'><link name='a'/><link name='b'/>\n<joint name='j' type='fixed'><parent link='a'/><child link='b'/></joint>\n<joint name='k' type='fixed'><parent link='b'/><child link='a'/></joint></robot>".into(),
            "t.urdf:1:",
        ),
    ];
    for (text, expected) in &cases {
        let e = refused(text);
        assert!(
            e.contains(expected),
            "{text}\n  gave: {e}\n  want: {expected}"
        );
    }

    // A world root with two children: two root trees in one skeleton, in joint-name order; a
    // link named `world` below the root is an ordinary body; the skeleton is named after the
    // robot; every joint is `force`, the synthetic root and welds included.
    let s = json(
        "<robot name='twin'><link name='world'/><link name='a'/><link name='b'/><link name='c'/>
          <joint name='z' type='fixed'><parent link='world'/><child link='a'/></joint>
          <joint name='y' type='floating'><parent link='world'/><child link='b'/></joint>
          <joint name='x' type='fixed'><parent link='b'/><child link='c'/><axis xyz='0 0 0'/>
            <limit lower='3' upper='-3' effort='-1' velocity='-1'/></joint></robot>",
    );
    assert_eq!(s["name"], "twin");
    let joints: Vec<(&str, &str, Value)> = s["joints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| {
            (
                j["name"].as_str().unwrap(),
                j["actuator"].as_str().unwrap(),
                j["parent"].clone(),
            )
        })
        .collect();
    assert_eq!(
        joints,
        [
            ("y", "force", Value::Null),
            ("x", "force", serde_json::json!("b")),
            ("z", "force", Value::Null)
        ],
        "a fixed joint's <axis> and <limit> are ignored, even a zero axis and inverted limits"
    );
    let below = json(
        "<robot name='r'><link name='base'/><link name='world'/>
          <joint name='j' type='fixed'><parent link='base'/><child link='world'/></joint></robot>",
    );
    assert_eq!(below["joints"][0]["name"], "rootJoint");
    assert_eq!(below["joints"][0]["actuator"], "force");
    assert_eq!(below["joints"][1]["child"], "world");

    // Planar DOF names follow the plane normal, either sign.
    let planar = |xyz: &str| {
        let s = json(&format!(
            "<robot name='r'><link name='world'/><link name='b'/>
              <joint name='p' type='planar'><parent link='world'/><child link='b'/><axis xyz='{xyz}'/></joint></robot>"
        ));
        (0..3)
            .map(|i| s["dofs"][i]["name"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(planar("0 0 -1"), ["p_x", "p_y", "default"]);
    assert_eq!(planar("-1 0 0"), ["p_y", "p_z", "default"]);
    assert_eq!(planar("0 1 0"), ["p_z", "p_x", "default"]);
}
