//! One test per refusal rule (asserting where it is reported), DART's naming and ordering rules, and
//! property tests: no input panics, and every accepted tree is built ancestors first.

use std::path::Path;

use proptest::prelude::*;

use super::*;
use crate::robot::world::*;
use nalgebra::Vector3;

const PATH: &str = "t.skel";

/// A skeleton named `s` inside the usual document frame.
fn doc(skeleton: &str) -> String {
    format!(
        "<?xml version=\"1.0\"?>\n<skel version=\"1.0\">\n<world>\n<skeleton name=\"s\">\n{skeleton}\n</skeleton>\n</world>\n</skel>\n"
    )
}

fn body(name: &str) -> String {
    format!("<body name=\"{name}\"><transformation>0 0 0 0 0 0</transformation></body>\n")
}

fn revolute(name: &str, parent: &str, child: &str, extra: &str) -> String {
    format!(
        "<joint type=\"revolute\" name=\"{name}\">\n<parent>{parent}</parent>\n<child>{child}</child>\n<axis><xyz>0 0 1</xyz></axis>\n{extra}</joint>\n"
    )
}

fn load(text: &str) -> Result<World, Error> {
    parse(text, Path::new(PATH))
}

fn ok(text: &str) -> World {
    load(text).unwrap_or_else(|e| panic!("rejected:\n{e}\n---\n{text}"))
}

/// 1-based line of the first line containing `marker`.
fn line_of(text: &str, marker: &str) -> u32 {
    let index = text
        .lines()
        .position(|l| l.contains(marker))
        .unwrap_or_else(|| panic!("marker {marker:?} not in text"));
    u32::try_from(index + 1).expect("small test input")
}

/// Asserts the text is refused with a problem on the line of `marker` whose message contains
/// `needle`; returns all the diagnostics.
fn rejects(text: &str, marker: &str, needle: &str) -> Diagnostics {
    let diags = match load(text) {
        Ok(_) => panic!("accepted, expected a refusal mentioning {needle:?}:\n{text}"),
        Err(Error::Invalid(d)) => d,
        Err(e) => panic!("unexpected error {e}"),
    };
    let line = line_of(text, marker);
    assert!(
        diags
            .iter()
            .any(|d| d.line == line && d.message.contains(needle) && d.path == Path::new(PATH)),
        "expected line {line} to mention {needle:?}; got:\n{diags}"
    );
    diags
}

fn arm(extra_joint: &str) -> String {
    doc(&format!(
        "{}{}{}{}",
        body("a"),
        body("b"),
        revolute("j1", "world", "a", ""),
        revolute("j2", "a", "b", extra_joint)
    ))
}

fn dof_names(s: &Skeleton) -> Vec<&str> {
    s.dofs.iter().map(|d| d.name.as_str()).collect()
}

fn joint_names(s: &Skeleton) -> Vec<&str> {
    s.joints.iter().map(|j| j.name.as_str()).collect()
}

// ---------------------------------------------------------------- refusals, with their line

#[test]
fn xml_syntax_error_is_positioned() {
    let text = "<skel>\n<world>\n<skeleton name=\"s\">\n</world>\n</skel>\n";
    let d = rejects(text, "</world>", "XML syntax error");
    assert_eq!(d.len(), 1);
}

#[test]
fn legacy_text_skel_is_named() {
    let text = "dofs{\n    root<a-X> { 0.0000, -3.1416, 3.1416 }\n}\n";
    rejects(text, "dofs{", "legacy");
}

#[test]
fn other_text_is_not_xml() {
    rejects("\n\nhello", "hello", "not an XML file");
}

#[test]
fn root_must_be_skel() {
    rejects(
        "<?xml version=\"1.0\"?>\n<world/>\n",
        "<world/>",
        "expected <skel>",
    );
}

#[test]
fn skel_without_world_is_refused() {
    rejects("<skel>\n</skel>\n", "<skel>", "has no <world>");
}

#[test]
fn unknown_joint_type() {
    let text = doc(&format!(
        "{}<joint type=\"hinge\" name=\"j\">\n<parent>world</parent><child>a</child></joint>",
        body("a")
    ));
    rejects(&text, "hinge", "unknown type 'hinge'");
}

#[test]
fn screw_and_translational2d_are_refused() {
    for ty in ["screw", "translational2d"] {
        let text = doc(&format!(
            "{}<joint type=\"{ty}\" name=\"j\">\n<parent>world</parent><child>a</child><axis><xyz>0 0 1</xyz></axis></joint>",
            body("a")
        ));
        rejects(&text, ty, "cannot build");
    }
}

#[test]
fn missing_joint_type() {
    let text = doc(&format!(
        "{}<joint name=\"j\">\n<parent>world</parent><child>a</child></joint>",
        body("a")
    ));
    rejects(&text, "<joint name", "no type attribute");
}

#[test]
fn bad_actuators_are_refused() {
    for actuator in ["Force", "mimic", "motor"] {
        let text = doc(&format!(
            "{}<joint type=\"weld\" name=\"j\"\n actuator=\"{actuator}\">\n<parent>world</parent><child>a</child></joint>",
            body("a")
        ));
        rejects(&text, "actuator=", &format!("actuator '{actuator}'"));
    }
}

#[test]
fn torque_is_the_old_spelling_of_force() {
    let text = doc(&format!(
        "{}<joint type=\"revolute\" name=\"j\" actuator=\"torque\"><parent>world</parent><child>a</child><axis><xyz>1 0 0</xyz></axis></joint>",
        body("a")
    ));
    assert_eq!(ok(&text).skeletons[0].joints[0].actuator, Actuator::Force);
}

#[test]
fn missing_or_empty_parent_and_child() {
    let text = doc(&format!(
        "{}{}<joint type=\"weld\" name=\"no_parent\">\n<child>a</child></joint>\n<joint type=\"weld\" name=\"empty_parent\">\n<parent/>\n<child>b</child></joint>\n<joint type=\"weld\" name=\"no_child\">\n<parent>world</parent></joint>",
        body("a"),
        body("b")
    ));
    let d = rejects(&text, "\"no_parent\"", "has no <parent>");
    rejects(
        &text,
        "<parent/>",
        "<parent> of joint 'empty_parent' is empty",
    );
    rejects(&text, "\"no_child\"", "has no <child>");
    assert_eq!(d.len(), 3, "{d}");
}

#[test]
fn unknown_parent_and_child_bodies() {
    let text = doc(&format!(
        "{}<joint type=\"weld\" name=\"j\">\n<parent>ghost</parent>\n<child>a</child></joint>\n<joint type=\"weld\" name=\"k\">\n<parent>a</parent>\n<child>phantom</child></joint>",
        body("a")
    ));
    rejects(&text, "ghost", "parent 'ghost' of joint 'j' is not a body");
    rejects(
        &text,
        "phantom",
        "child 'phantom' of joint 'k' is not a body",
    );
}

#[test]
fn names_are_not_trimmed() {
    let text = doc(&format!(
        "{}<joint type=\"weld\" name=\"j\">\n<parent> world </parent>\n<child>a</child></joint>",
        body("a")
    ));
    rejects(&text, "<parent> world", "parent ' world '");
}

#[test]
fn second_joint_for_one_child() {
    let text = doc(&format!(
        "{}{}{}<joint type=\"weld\" name=\"again\">\n<parent>world</parent><child>a</child></joint>",
        body("a"),
        body("b"),
        revolute("j", "world", "a", ""),
    ));
    rejects(&text, "\"again\"", "already has parent joint 'j'");
}

#[test]
fn duplicate_body_names() {
    let text = doc(&format!(
        "{}<body name=\"a\" >\n</body>\n{}",
        body("a"),
        revolute("j", "world", "a", "")
    ));
    rejects(&text, "<body name=\"a\" >", "duplicate body name 'a'");
}

#[test]
fn duplicate_joint_names() {
    let text = doc(&format!(
        "{}{}{}<joint type=\"revolute\" name=\"j\"  >\n<parent>a</parent><child>b</child><axis><xyz>1 0 0</xyz></axis></joint>",
        body("a"),
        body("b"),
        revolute("j", "world", "a", ""),
    ));
    rejects(&text, "name=\"j\"  >", "joint name 'j' is already used");
}

#[test]
fn cycles_are_refused() {
    let text = doc(&format!(
        "{}{}<joint type=\"weld\" name=\"ab\">\n<parent>a</parent><child>b</child></joint>\n<joint type=\"weld\" name=\"ba\">\n<parent>b</parent><child>a</child></joint>",
        body("a"),
        body("b")
    ));
    let d = rejects(&text, "\"ab\"", "form a cycle");
    assert_eq!(d.len(), 1, "one cycle, one report: {d}");
}

#[test]
fn self_parent_is_a_cycle() {
    let text = doc(&format!(
        "{}<joint type=\"weld\" name=\"loop\">\n<parent>a</parent><child>a</child></joint>",
        body("a")
    ));
    rejects(&text, "\"loop\"", "both parent and child");
}

#[test]
fn body_named_world_with_a_cycle_back_to_it() {
    // `world` is a real body here, so world → a → world is a loop, which DART hangs on.
    let text = doc(&format!(
        "{}{}<joint type=\"weld\" name=\"w\">\n<parent>a</parent><child>world</child></joint>\n<joint type=\"weld\" name=\"a\">\n<parent>world</parent><child>a</child></joint>",
        body("world"),
        body("a")
    ));
    rejects(&text, "\"w\"", "cycle");
}

#[test]
fn unreached_body() {
    let text = doc(&format!(
        "{}<body name=\"lost\">\n</body>\n{}",
        body("a"),
        revolute("j", "world", "a", "")
    ));
    rejects(&text, "\"lost\"", "attached by no joint");
}

#[test]
fn missing_axes() {
    for (ty, marker, needle) in [
        ("revolute", "type=\"revolute\"", "has no <axis>"),
        ("prismatic", "type=\"prismatic\"", "has no <axis>"),
        ("universal", "type=\"universal\"", "has no <axis2>"),
    ] {
        let axis = if ty == "universal" {
            "<axis><xyz>1 0 0</xyz></axis>"
        } else {
            ""
        };
        let text = doc(&format!(
            "{}<joint type=\"{ty}\" name=\"j\">\n<parent>world</parent><child>a</child>{axis}</joint>",
            body("a")
        ));
        rejects(&text, marker, needle);
    }
    let text = doc(&format!(
        "{}<joint type=\"revolute\" name=\"j\"><parent>world</parent><child>a</child>\n<axis>\n<limit><lower>-1</lower></limit></axis></joint>",
        body("a")
    ));
    rejects(&text, "<axis>", "has no <xyz>");
}

#[test]
fn zero_axis() {
    let text = arm("").replacen("<xyz>0 0 1</xyz>", "<xyz>0 0 0</xyz>", 1);
    rejects(&text, "0 0 0</xyz>", "zero vector");
}

#[test]
fn euler_axis_order_is_required_and_checked() {
    let joint = |order: &str| {
        doc(&format!(
            "{}<joint type=\"euler\" name=\"e\">\n<parent>world</parent><child>a</child>{order}</joint>",
            body("a")
        ))
    };
    rejects(&joint(""), "type=\"euler\"", "has no <axis_order>");
    rejects(
        &joint("\n<axis_order>xzy</axis_order>"),
        "xzy",
        "axis_order 'xzy'",
    );
}

#[test]
fn planar_plane_type_is_checked() {
    let text = doc(&format!(
        "{}<joint type=\"planar\" name=\"p\">\n<parent>world</parent><child>a</child>\n<plane type=\"xz\"/></joint>",
        body("a")
    ));
    rejects(&text, "xz", "type 'xz'");
}

#[test]
fn init_pos_arity() {
    let text = doc(&format!(
        "{}{}<joint type=\"ball\" name=\"b\">\n<parent>world</parent><child>a</child>\n<init_pos>0.0</init_pos>\n</joint>\n{}",
        body("a"),
        body("c"),
        revolute("r", "a", "c", "<init_vel>0.5 0.6</init_vel>\n")
    ));
    rejects(&text, "<init_pos>", "has 1 value; expected 3");
    rejects(&text, "<init_vel>", "has 2 values; expected 1");
}

#[test]
fn non_numeric_and_nan_are_refused() {
    let text = arm(
        "<dof local_index=\"0\">\n<velocity lower=\"abc\" upper=\"1\"/>\n<force\n upper=\"NaN\"/></dof>\n<init_pos>1.5x</init_pos>\n",
    );
    let d = rejects(&text, "abc", "found 'abc'");
    rejects(&text, "NaN", "NaN is not allowed");
    rejects(&text, "1.5x", "found '1.5x'");
    assert_eq!(d.len(), 3, "all problems together: {d}");
}

#[test]
fn bad_transformation() {
    let text = arm("<transformation>0 0 0 0 0</transformation>\n");
    rejects(&text, ">0 0 0 0 0</", "has 5 values; expected 6");
    let text = arm("<transformation>0 0 inf 0 0 0</transformation>\n");
    rejects(&text, "inf 0 0 0<", "expected a finite number");
}

#[test]
fn lower_above_upper() {
    let text = doc(&format!(
        "{}<joint type=\"revolute\" name=\"r\"><parent>world</parent><child>a</child>\n<axis><xyz>0 0 1</xyz><limit><lower>1</lower>\n<upper>-1</upper></limit></axis>\n<dof local_index=\"0\">\n<velocity lower=\"2\"\n upper=\"1\"/></dof></joint>",
        body("a")
    ));
    rejects(
        &text,
        "<upper>-1",
        "position limits of DOF 0 of joint 'r' are [1, -1]",
    );
    rejects(&text, "upper=\"1\"", "velocity limits");
}

#[test]
fn infinite_bounds_that_admit_nothing() {
    let text = arm("<dof>\n<position lower=\"inf\"/></dof>\n");
    rejects(&text, "lower=\"inf\"", "expected lower <= upper");
}

#[test]
fn dof_index_missing_or_out_of_range() {
    let text = doc(&format!(
        "{}<joint type=\"euler\" name=\"e\"><parent>world</parent><child>a</child><axis_order>xyz</axis_order>\n<dof name=\"x\"/>\n<dof local_index=\"3\"/>\n</joint>",
        body("a")
    ));
    rejects(&text, "<dof name", "has no local_index");
    rejects(
        &text,
        "\"3\"",
        "local_index '3'; expected local_index in 0..=2",
    );
}

#[test]
fn explicit_dof_name_collision() {
    let text = arm("<dof name=\"j1\"/>\n");
    rejects(
        &text,
        "\"j2\"",
        "DOF name 'j1' of joint 'j2' is already used",
    );
}

#[test]
fn explicit_dof_names_collide_within_a_joint() {
    let text = doc(&format!(
        "{}<joint type=\"ball\" name=\"b\"><parent>world</parent><child>a</child>\n<dof local_index=\"0\" name=\"q\"/><dof local_index=\"2\" name=\"q\"/></joint>",
        body("a")
    ));
    rejects(
        &text,
        "type=\"ball\"",
        "DOF name 'q' of joint 'b' is already used by DOF 0 of joint 'b'",
    );
}

#[test]
fn user_joint_named_root_after_an_implicit_root() {
    // `a` has no joint, so DART gives it a free joint `root` before building `root` → rename.
    let text = doc(&format!(
        "{}{}{}",
        body("a"),
        body("b"),
        revolute("root", "a", "b", "")
    ));
    rejects(
        &text,
        "name=\"root\"",
        "the free joint DART adds for body 'a'",
    );
}

#[test]
fn problems_are_reported_together_in_file_order() {
    let text = doc(&format!(
        "{}<joint type=\"hinge\" name=\"x\"><parent>world</parent><child>a</child></joint>\n<joint type=\"weld\" name=\"y\" actuator=\"motor\"><parent>world</parent><child>a</child></joint>",
        body("a")
    ));
    let Err(Error::Invalid(d)) = load(&text) else {
        panic!("accepted");
    };
    assert!(d.len() >= 3, "{d}");
    let positions: Vec<(u32, u32)> = d.iter().map(|d| (d.line, d.col)).collect();
    let mut sorted = positions.clone();
    sorted.sort_unstable();
    assert_eq!(positions, sorted);
    assert!(d.to_string().lines().all(|l| l.starts_with("t.skel:")));
}

#[test]
fn columns_count_characters() {
    let text = "<skel>\n<world><skeleton name=\"ä\"><joint type=\"x\"/></skeleton></world></skel>";
    let d = rejects(text, "<world>", "unknown type 'x'");
    // `ä` is two bytes but one column, as roxmltree counts; col 40 is the `x` of `type="x"`.
    let unknown = d.iter().find(|d| d.message.contains("unknown type"));
    assert_eq!(unknown.map(|d| d.col), Some(40), "{d}");
}

#[test]
fn invalid_utf8_is_positioned() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("bad.skel");
    std::fs::write(&path, b"<skel>\n<world>\xff</world></skel>").expect("write");
    let Err(Error::Invalid(d)) = super::load(&path) else {
        panic!("accepted invalid UTF-8");
    };
    assert_eq!((d.0[0].line, d.0[0].col), (2, 8), "{d}");
}

// ---------------------------------------------------------------- what DART does, we do

#[test]
fn inf_limits_and_trimmed_scalars() {
    let text = doc(&format!(
        "{}<joint type=\"prismatic\" name=\"p\"><parent>world</parent><child>a</child>\n<axis><xyz>1 0 0</xyz><limit><lower> -inf </lower><upper>\t1.5 </upper></limit></axis>\n<dof><force lower=\"-inf\" upper=\"+3\"/></dof></joint>",
        body("a")
    ));
    let w = ok(&text);
    let d = &w.skeletons[0].dofs[0];
    assert_eq!(
        d.position,
        Limits {
            lower: f64::NEG_INFINITY,
            upper: 1.5
        }
    );
    assert_eq!(
        d.effort,
        Limits {
            lower: f64::NEG_INFINITY,
            upper: 3.0
        }
    );
    let json = inspect_json(&w);
    assert_eq!(
        json["skeletons"][0]["dofs"][0]["effort"],
        serde_json::json!([null, 3.0])
    );
}

#[test]
fn position_limits_from_axis_then_dof_overrides() {
    let text = doc(&format!(
        "{}<joint type=\"universal\" name=\"u\"><parent>world</parent><child>a</child>\n<axis><xyz>1 0 0</xyz><limit><lower>-1</lower><upper>1</upper></limit></axis>\n<axis2><xyz>0 1 0</xyz><limit><lower>-2</lower></limit></axis2>\n<init_pos>0.1 0.2</init_pos>\n<dof local_index=\"1\"><position upper=\"3\" initial=\"0.5\"/></dof>\n<dof local_index=\"1\"><position lower=\"-3\"/><velocity upper=\"4\"/></dof>\n</joint>",
        body("a")
    ));
    let w = ok(&text);
    let s = &w.skeletons[0];
    assert_eq!(dof_names(s), ["u_1", "u_2"]);
    assert_eq!(
        s.dofs[0].position,
        Limits {
            lower: -1.0,
            upper: 1.0
        }
    );
    assert_eq!(s.dofs[0].initial_position, 0.1);
    assert_eq!(
        s.dofs[1].position,
        Limits {
            lower: -3.0,
            upper: 3.0
        }
    );
    assert_eq!(
        s.dofs[1].velocity,
        Limits {
            lower: f64::NEG_INFINITY,
            upper: 4.0
        }
    );
    assert_eq!(
        s.dofs[1].initial_position, 0.5,
        "dof initial beats init_pos"
    );
}

#[test]
fn implicit_root_and_ancestors_first() {
    // File order: c (parent b), b (parent a). `a` has no joint: DART adds free joint `root`.
    let text = doc(&format!(
        "{}{}{}{}{}",
        body("a"),
        body("b"),
        body("c"),
        revolute("jc", "b", "c", ""),
        revolute("jb", "a", "b", "")
    ));
    let w = ok(&text);
    let s = &w.skeletons[0];
    assert_eq!(joint_names(s), ["root", "jb", "jc"]);
    assert_eq!(
        dof_names(s),
        [
            "root_rot_x",
            "root_rot_y",
            "root_rot_z",
            "root_pos_x",
            "root_pos_y",
            "root_pos_z",
            "jb",
            "jc"
        ]
    );
    assert_eq!(s.joints[0].kind, JointKind::Free);
    assert_eq!(s.joints[0].child, "a");
    assert_eq!(s.joints[0].parent, None);
    assert_eq!(s.joints[0].line, line_of(&text, "\"a\""));
}

#[test]
fn two_implicit_roots_are_renamed() {
    let text = doc(&format!(
        "{}{}{}{}{}{}",
        body("a"),
        body("b"),
        body("c"),
        body("d"),
        revolute("j1", "a", "b", ""),
        revolute("j2", "c", "d", "")
    ));
    let s = &ok(&text).skeletons[0];
    assert_eq!(joint_names(s), ["root", "j1", "root(1)", "j2"]);
    assert_eq!(s.dofs[7].name, "root(1)_rot_x");
}

#[test]
fn body_named_world_is_a_body() {
    let text = doc(&format!(
        "{}{}",
        body("world"),
        body("a") + &revolute("j", "world", "a", "")
    ));
    let s = &ok(&text).skeletons[0];
    assert_eq!(joint_names(s), ["root", "j"]);
    assert_eq!(s.joints[0].child, "world");
    assert_eq!(s.joints[1].parent.as_deref(), Some("world"));
}

#[test]
fn planar_rotation_dofs_are_named_default_as_dart_does() {
    let planar = |name: &str, parent: &str, child: &str, plane: &str| {
        format!(
            "<joint type=\"planar\" name=\"{name}\"><parent>{parent}</parent><child>{child}</child><plane type=\"{plane}\"/></joint>\n"
        )
    };
    let text = doc(&format!(
        "{}{}{}{}{}{}",
        body("a"),
        body("b"),
        body("c"),
        planar("p", "world", "a", "xy"),
        planar("q", "a", "b", "yz"),
        planar("r", "b", "c", "zx"),
    ));
    let s = &ok(&text).skeletons[0];
    assert_eq!(
        dof_names(s),
        [
            "p_x",
            "p_y",
            "default",
            "q_y",
            "q_z",
            "default(1)",
            "r_z",
            "r_x",
            "default(2)"
        ]
    );
}

#[test]
fn generated_dof_name_collisions_are_renamed() {
    // Revolute `k_x` and ball `k`: the ball's first DOF would also be `k_x`.
    let text = doc(&format!(
        "{}{}{}<joint type=\"ball\" name=\"k\"><parent>a</parent><child>b</child></joint>",
        body("a"),
        body("b"),
        revolute("k_x", "world", "a", "")
    ));
    assert_eq!(
        dof_names(&ok(&text).skeletons[0]),
        ["k_x", "k_x(1)", "k_y", "k_z"]
    );
}

#[test]
fn duplicate_skeleton_names_are_renamed() {
    let sk = |name: &str| {
        format!(
            "<skeleton name=\"{name}\">{}<joint type=\"free\" name=\"f\"><parent>world</parent><child>a</child></joint></skeleton>\n",
            body("a")
        )
    };
    let text = format!(
        "<skel><world>\n{}{}{}<skeleton/>\n</world>\n<world><skeleton name=\"ignored\"/></world></skel>",
        sk("s"),
        sk("s"),
        sk("s")
    );
    let w = ok(&text);
    let names: Vec<&str> = w.skeletons.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["s", "s(1)", "s(2)", "skeleton"]);
    assert_eq!(
        w.skeletons[1].dofs.len(),
        6,
        "DOF indices count within a skeleton"
    );
}

#[test]
fn dof_names_per_joint_type() {
    let cases = [
        ("weld", "", vec![]),
        ("ball", "", vec!["j_x", "j_y", "j_z"]),
        ("translational", "", vec!["j_x", "j_y", "j_z"]),
        (
            "euler",
            "<axis_order>zyx</axis_order>",
            vec!["j_z", "j_y", "j_x"],
        ),
        (
            "euler",
            "<axis_order>xyz</axis_order>",
            vec!["j_x", "j_y", "j_z"],
        ),
        (
            "planar",
            "<plane type=\"arbitrary\"><translation_axis1><xyz>1 1 0</xyz></translation_axis1><translation_axis2><xyz>0 0 1</xyz></translation_axis2></plane>",
            vec!["j_1", "j_2", "default"],
        ),
        ("prismatic", "<axis><xyz>0 2 0</xyz></axis>", vec!["j"]),
    ];
    for (ty, extra, names) in cases {
        let text = doc(&format!(
            "{}<joint type=\"{ty}\" name=\"j\"><parent>world</parent><child>a</child>{extra}</joint>",
            body("a")
        ));
        let w = ok(&text);
        assert_eq!(dof_names(&w.skeletons[0]), names, "{ty}");
    }
}

#[test]
fn axes_are_normalised() {
    let text = arm("").replacen("<xyz>0 0 1</xyz>", "<xyz>0\t3 4</xyz>", 1);
    let axis = ok(&text).skeletons[0].joints[0].axes[0];
    assert!((axis.into_inner() - Vector3::new(0.0, 0.6, 0.8)).norm() < 1e-15);
}

#[test]
fn transformation_is_translation_then_xyz_euler() {
    let text = arm("<transformation>1 2 3 0.1 0.2 0.3</transformation>\n");
    let t = ok(&text).skeletons[0].joints[1].transform;
    let (a, b, c) = (0.1f64, 0.2f64, 0.3f64);
    let rx = nalgebra::Matrix3::new(1.0, 0.0, 0.0, 0.0, a.cos(), -a.sin(), 0.0, a.sin(), a.cos());
    let ry = nalgebra::Matrix3::new(b.cos(), 0.0, b.sin(), 0.0, 1.0, 0.0, -b.sin(), 0.0, b.cos());
    let rz = nalgebra::Matrix3::new(c.cos(), -c.sin(), 0.0, c.sin(), c.cos(), 0.0, 0.0, 0.0, 1.0);
    let r = t.rotation.to_rotation_matrix().into_inner();
    assert!((r - rx * ry * rz).norm() < 1e-14);
    assert_eq!(t.translation.vector, Vector3::new(1.0, 2.0, 3.0));
}

#[test]
fn unknown_elements_and_attributes_are_ignored() {
    let text = arm("<mimic joint=\"j1\"/>\n<limit><effort>3</effort></limit>\n").replace(
        "<joint type=\"revolute\" name=\"j2\"",
        "<joint foo=\"\" type=\"revolute\" name=\"j2\"",
    );
    let s = &ok(&text).skeletons[0];
    assert!(s.dofs[1].effort.is_unbounded());
}

#[test]
fn empty_world_and_empty_skeleton() {
    assert!(ok("<skel><world/></skel>").skeletons.is_empty());
    let w = ok(&doc(""));
    assert_eq!((w.skeletons.len(), w.skeletons[0].dofs.len()), (1, 0));
}

#[test]
fn inspect_json_shape() {
    let w = ok(&arm(
        "<dof><position lower=\"-1\" upper=\"1\" initial=\"0.25\"/></dof>\n",
    ));
    let json = inspect_json(&w);
    assert_eq!(
        json,
        serde_json::json!({"skeletons": [{
            "name": "s",
            "joints": [
                {"name": "j1", "type": "revolute", "actuator": "force", "parent": null,
                 "child": "a", "dofs": [0]},
                {"name": "j2", "type": "revolute", "actuator": "force", "parent": "a",
                 "child": "b", "dofs": [1]},
            ],
            "dofs": [
                {"index": 0, "name": "j1", "joint": "j1", "position": [null, null],
                 "velocity": [null, null], "acceleration": [null, null], "effort": [null, null],
                 "initial_position": 0.0, "initial_velocity": 0.0},
                {"index": 1, "name": "j2", "joint": "j2", "position": [-1.0, 1.0],
                 "velocity": [null, null], "acceleration": [null, null], "effort": [null, null],
                 "initial_position": 0.25, "initial_velocity": 0.0},
            ],
        }]})
    );
}

// ---------------------------------------------------------------- properties

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = load(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn xml_like_noise_never_panics(
        pieces in proptest::collection::vec(
            prop_oneof![
                Just("<skel>"), Just("</skel>"), Just("<world>"), Just("</world>"),
                Just("<skeleton name=\"s\">"), Just("</skeleton>"), Just("<body name=\"a\"/>"),
                Just("<body name=\"world\"/>"), Just("<joint type=\"free\" name=\"j\">"),
                Just("<joint type=\"planar\">"), Just("</joint>"), Just("<parent>a</parent>"),
                Just("<parent>world</parent>"), Just("<child>a</child>"), Just("<dof local_index=\"9\">"),
                Just("<init_pos>1 2</init_pos>"), Just("&amp;"), Just("<![CDATA[x]]>"), Just("nan"),
            ],
            0..40,
        )
    ) {
        let _ = load(&pieces.concat());
    }

    /// Random forests in random file order: always accepted, every joint after its parent body's
    /// joint, DOF ranges contiguous.
    #[test]
    fn random_trees_are_built_ancestors_first(
        parents in proptest::collection::vec(any::<prop::sample::Index>(), 1..12),
        roots in proptest::collection::vec(any::<bool>(), 12),
        order in Just((0..12).collect::<Vec<usize>>()).prop_shuffle(),
    ) {
        let n = parents.len();
        let mut text = String::new();
        for b in 0..n {
            text += &body(&format!("b{b}"));
        }
        for &b in order.iter().filter(|&&b| b < n) {
            // Body b hangs from an earlier body, or from the world when b is 0 or marked a root.
            let parent = if b == 0 || roots[b] {
                "world".to_string()
            } else {
                format!("b{}", parents[b].index(b))
            };
            text += &revolute(&format!("j{b}"), &parent, &format!("b{b}"), "");
        }
        let w = ok(&doc(&text));
        let s = &w.skeletons[0];
        prop_assert_eq!(s.joints.len(), n);
        prop_assert_eq!(s.dofs.len(), n);
        for (i, j) in s.joints.iter().enumerate() {
            prop_assert_eq!(j.dofs.clone(), i..i + 1);
            if let Some(p) = &j.parent {
                let pj = s.joints.iter().position(|q| &q.child == p);
                prop_assert!(pj < Some(i));
            }
        }
    }

    /// Arbitrary parent links (cycles, self-loops, dangling names) never panic or hang.
    #[test]
    fn arbitrary_graphs_terminate(edges in proptest::collection::vec((0usize..6, 0usize..7), 0..8)) {
        let mut text = String::new();
        for b in 0..6 {
            text += &body(&format!("b{b}"));
        }
        for (i, (child, parent)) in edges.iter().enumerate() {
            let parent = if *parent == 6 { "world".to_string() } else { format!("b{parent}") };
            text += &revolute(&format!("j{i}"), &parent, &format!("b{child}"), "");
        }
        if let Ok(w) = load(&doc(&text)) {
            let s = &w.skeletons[0];
            for (i, j) in s.joints.iter().enumerate() {
                if let Some(p) = &j.parent {
                    let pj = s.joints.iter().position(|q| &q.child == p);
                    prop_assert!(pj < Some(i));
                }
            }
        }
    }
}
