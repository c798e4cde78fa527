//! One case per SDF rule of ../shared/docs/urdf-semantics.md §10 and per SDF refusal of policy.md.

use std::path::Path;

use serde_json::{Value, json};

use super::parse;
use crate::robot::skel::inspect_json;

fn sdf(body: &str) -> String {
    format!("<sdf version='1.6'><model name='m'>\n{body}\n</model></sdf>")
}

fn load(text: &str) -> Value {
    match parse(text, Path::new("t.sdf")) {
        Ok(w) => inspect_json(&w)["skeletons"][0].clone(),
        Err(e) => panic!("{e}"),
    }
}

fn refused(text: &str) -> String {
    match parse(text, Path::new("t.sdf")) {
        Ok(w) => panic!("loaded: {}", inspect_json(&w)),
        Err(e) => e.to_string(),
    }
}

fn joint(name: &str, kind: &str, parent: &str, child: &str) -> String {
    format!(
        "<joint name='{name}' type='{kind}'><parent>{parent}</parent><child>{child}</child></joint>"
    )
}

#[test]
fn joints_come_in_dart_s_climbing_order() {
    // Links in name order: b, base, c, d, e, z_a. `b` climbs to z_a, whose parent `base` is
    // unbuilt and has no parent joint: root first, then j_a, j_b, and so on.
    let body = [
        "<link name='base'/><link name='z_a'/><link name='b'/><link name='c'/><link name='d'/><link name='e'/>",
        &joint("j_b", "revolute", "z_a", "b"),
        &joint("j_a", "revolute", "base", "z_a"),
        &joint("j_c", "prismatic", "base", "c"),
        &joint("j_d", "fixed", "c", "d"),
        &joint("j_e", "ball", "base", "e"),
    ]
    .join("\n");
    let s = load(&sdf(&body));
    let names: Vec<&str> = s["joints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["root", "j_a", "j_b", "j_c", "j_d", "j_e"]);
    assert_eq!(s["joints"][0]["type"], "free");
    assert_eq!(s["joints"][0]["child"], "base");
    assert_eq!(s["dofs"][0]["name"], "root_rot_x");
    assert_eq!(s["dofs"][9]["name"], "j_e_x");
    assert_eq!(s["name"], "m");
}

#[test]
fn world_parents_and_several_roots() {
    let body = [
        "<link name='a'/><link name='b'/><link name='c'/>",
        &joint("w", "revolute", "world", "a"),
    ]
    .join("\n");
    let s = load(&sdf(&body));
    assert_eq!(s["joints"][0]["name"], "w");
    assert_eq!(s["joints"][0]["parent"], Value::Null);
    assert_eq!(s["joints"][1]["name"], "root");
    assert_eq!(s["joints"][2]["name"], "root(1)");
    assert_eq!(s["dofs"][7]["name"], "root(1)_rot_x");
}

#[test]
fn limits_come_from_the_axes_including_velocity_and_effort() {
    let body = "<link name='a'/><link name='b'/><link name='c'/>
      <joint name='r' type='revolute'><parent>a</parent><child>b</child>
        <axis><xyz>0 0 1</xyz><limit><lower>0.5</lower><upper>1.5</upper><velocity>2</velocity><effort>-1</effort></limit></axis></joint>
      <joint name='u' type='universal'><parent>b</parent><child>c</child>
        <axis><limit><lower>-1</lower></limit></axis><axis2><limit><effort>3</effort></limit></axis2></joint>";
    let s = load(&sdf(body));
    let r = &s["dofs"][6];
    assert_eq!(r["position"], json!([0.5, 1.5]));
    assert_eq!(r["velocity"], json!([-2.0, 2.0]));
    assert_eq!(
        r["effort"],
        json!([null, null]),
        "negative effort means unlimited"
    );
    assert_eq!(
        r["initial_position"], 1.0,
        "0 is outside the limits: the midpoint"
    );
    assert_eq!(s["dofs"][7]["name"], "u_1");
    assert_eq!(s["dofs"][7]["position"], json!([-1.0, null]));
    assert_eq!(s["dofs"][8]["effort"], json!([-3.0, 3.0]));
    assert_eq!(s["joints"][2]["type"], "universal");
}

#[test]
fn refusals_name_the_place() {
    let cases: &[(String, &str)] = &[
        (
            "<sdf version='1.9'><model name='m'/></sdf>".into(),
            "t.sdf:1:15: SDF version '1.9' is not read",
        ),
        (
            "<sdf><model name='m'/></sdf>".into(),
            "t.sdf:1:2: <sdf> has no version attribute",
        ),
        (
            "<sdf version='1.6'><world/></sdf>".into(),
            "t.sdf:1:2: <sdf> has no <model>",
        ),
        (
            sdf(
                "<link name='a'/><link name='b'/>\n<joint name='j' type='continuous'><parent>a</parent><child>b</child></joint>",
            ),
            "t.sdf:3:23: joint 'j': joint type 'continuous' cannot be used",
        ),
        (
            sdf(
                "<link name='a'/><link name='b'/>\n<joint name='j' type='gearbox'><parent>a</parent><child>b</child></joint>",
            ),
            "t.sdf:3:23: joint 'j': joint type 'gearbox' cannot be used",
        ),
        (
            sdf(
                "<link name='a'/><link name='b'/>\n<joint name='j' type='screw'><parent>a</parent><child>b</child></joint>",
            ),
            "t.sdf:3:23: joint 'j': joint type 'screw' cannot be used",
        ),
        (
            sdf(
                "<link name='a'/><link name='b'/>\n<joint name='j' type='hinge'><parent>a</parent><child>b</child></joint>",
            ),
            "t.sdf:3:23: joint 'j': joint type 'hinge' cannot be used",
        ),
        (
            sdf(&format!(
                "<link name='a'/><link name='b'/><link name='c'/>\n{}\n{}",
                joint("j1", "revolute", "a", "c"),
                joint("j2", "revolute", "b", "c")
            )),
            "t.sdf:4:2: joint 'j2' claims link 'c' as its child, but joint 'j1' (line 3) already does",
        ),
        (
            sdf(&format!(
                "<link name='a'/>\n{}",
                joint("j", "revolute", "ghost", "a")
            )),
            "t.sdf:3:41: joint 'j': parent link 'ghost' does not exist",
        ),
        (
            sdf(&format!(
                "<link name='a'/><link name='b'/><link name='c'/>\n{}\n{}",
                joint("j1", "revolute", "a", "b"),
                joint("j2", "revolute", "b", "a")
            )),
            "t.sdf:3:2: joint 'j1' is part of a cycle of joints",
        ),
        (
            sdf(&format!(
                "<link name='a'/>\n{}",
                joint("j", "revolute", "a", "a")
            )),
            "t.sdf:3:41: joint 'j' connects link 'a' to itself",
        ),
        (
            sdf(&format!(
                "<link name='a'/><link name='b'/><link name='c'/>\n{}",
                joint("root", "revolute", "a", "b")
            )),
            "t.sdf:3:2: joint name 'root' is the name DART gives",
        ),
        (
            sdf(
                "<link name='a'/><link name='b'/>\n<joint name='j' type='revolute'><parent>a</parent><child>b</child><axis><limit><lower>1</lower><upper>0</upper></limit></axis></joint>",
            ),
            "t.sdf:3:74: joint 'j': lower limit 1 is above upper limit 0",
        ),
        (
            sdf(
                "<link name='a'/><link name='b'/>\n<joint name='j' type='revolute'><parent>a</parent><child>b</child><axis><limit><lower>1rad</lower></limit></axis></joint>",
            ),
            "t.sdf:3:87: joint 'j': <axis><limit><lower>: expected a number, found '1rad'",
        ),
        (
            sdf("<link name='a'/>\n<link name='a'/>"),
            "t.sdf:3:13: link name 'a' is already used",
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
fn names_dart_would_rename_are_refused_where_the_user_wrote_them() {
    // Two links without a parent joint: DART adds `root` for `a`, then `root(1)` for `c`; a
    // joint of the file named `root(1)` built after them would become `root(1)(1)`.
    let text = sdf(&format!(
        "<link name='a'/><link name='c'/><link name='d'/>\n{}",
        joint("root(1)", "revolute", "c", "d")
    ));
    assert_eq!(
        refused(&text),
        "t.sdf:3:2: joint name 'root(1)' is already the name of the free joint DART adds for link \
         'c', which has no parent joint (DART would rename this joint 'root(1)(1)'); expected \
         another name (motions and drives refer to joints by name)"
    );
    // Built before the second root, the file's `root(1)` keeps its name and DART's free joint
    // takes the next one, as DART names it.
    let text = sdf(&format!(
        "<link name='a'/><link name='b'/><link name='c'/>\n{}",
        joint("root(1)", "revolute", "a", "b")
    ));
    let s = load(&text);
    let names: Vec<&str> = s["joints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["root", "root(1)", "root(2)"]);

    // A DOF name DART would rename: the ball joint `j` has DOFs j_x, j_y, j_z, so a revolute
    // joint named `j_x` built after it would get the DOF `j_x(1)`.
    let text = sdf(&format!(
        "<link name='a'/><link name='b'/><link name='c'/>\n{}\n{}",
        joint("j", "ball", "a", "b"),
        joint("j_x", "revolute", "b", "c")
    ));
    assert_eq!(
        refused(&text),
        "t.sdf:4:2: joint 'j_x': its DOF name 'j_x' is already the name of a DOF of joint 'j' \
         (DART would rename this one 'j_x(1)'); expected joint names whose DOF names differ \
         (motions and drives refer to DOFs by name)"
    );
    // The other way round the ball joint's DOF is the one renamed.
    let text = sdf(&format!(
        "<link name='a'/><link name='b'/><link name='c'/>\n{}\n{}",
        joint("u_1", "revolute", "a", "b"),
        joint("u", "universal", "b", "c")
    ));
    assert!(
        refused(&text).starts_with(
            "t.sdf:4:2: joint 'u': its DOF name 'u_1' is already the name of a DOF of joint 'u_1' \
             (DART would rename this one 'u_1(1)')"
        ),
        "{}",
        refused(&text)
    );
    // A joint of the file named like a DOF of DART's free joint, built after it.
    let text = sdf(&format!(
        "<link name='a'/><link name='b'/>\n{}",
        joint("root_rot_x", "revolute", "a", "b")
    ));
    assert!(
        refused(&text).starts_with(
            "t.sdf:3:2: joint 'root_rot_x': its DOF name 'root_rot_x' is already the name of a \
             DOF of joint 'root'"
        ),
        "{}",
        refused(&text)
    );
}

#[test]
fn more_sdf_rules_each_with_its_place() {
    // SDF 1.4 and 1.5 are read like 1.6; a second <model> is ignored (a warning).
    for version in ["1.4", "1.5"] {
        let text = format!(
            "<sdf version='{version}'><model name='m'><link name='a'/></model><model name='n'/></sdf>"
        );
        assert_eq!(load(&text)["joints"][0]["name"], "root");
    }
    // Negative velocity and effort mean unlimited in SDF; a missing <limit> is unbounded.
    let text = sdf(&format!(
        "<link name='a'/><link name='b'/><link name='c'/>\n{}\n<joint name='k' type='prismatic'><parent>b</parent><child>c</child><axis><limit><velocity>-1</velocity><effort>-1</effort></limit></axis></joint>",
        joint("j", "revolute", "a", "b")
    ));
    let s = load(&text);
    for d in [6, 7] {
        for q in ["position", "velocity", "effort", "acceleration"] {
            assert_eq!(s["dofs"][d][q], json!([null, null]), "dof {d} {q}");
        }
    }
    let cases: &[(String, &str)] = &[
        (
            sdf(&format!(
                "<link name='a'/><link name='b'/><link name='c'/>\n{}\n{}",
                joint("j", "revolute", "a", "b"),
                joint("j", "revolute", "b", "c")
            )),
            "t.sdf:4:2: joint name 'j' is already used by the joint at line 3",
        ),
        (
            sdf(
                "<link name='a'/><link name='b'/>\n<joint name='j'><parent>a</parent><child>b</child></joint>",
            ),
            "t.sdf:3:2: joint 'j' has no type attribute",
        ),
        (
            sdf(
                "<link name='a'/><link name='b'/>\n<joint name='j' type='revolute'><child>b</child></joint>",
            ),
            "t.sdf:3:2: joint 'j' has no <parent>",
        ),
        (
            sdf(
                "<link name='a'/><link name='b'/>\n<joint name='j' type='revolute'><parent>a</parent></joint>",
            ),
            "t.sdf:3:2: joint 'j' has no <child>",
        ),
        (
            sdf(&format!(
                "<link name='a'/>\n{}",
                joint("j", "revolute", "a", "ghost")
            )),
            "t.sdf:3:58: joint 'j': child link 'ghost' does not exist",
        ),
        (
            sdf(
                "<link name='a'/><link name='b'/>\n<joint name='j' type='revolute'><parent>a</parent><child>b</child><axis><xyz>0 0 0</xyz></axis></joint>",
            ),
            "t.sdf:3:78: joint 'j': <axis><xyz> '0 0 0' is not a direction",
        ),
        (sdf("<link/>"), "t.sdf:2:2: <link> has no name attribute"),
        (
            sdf(
                "<link name='a'/><link name='b'/>\n<joint type='fixed'><parent>a</parent><child>b</child></joint>",
            ),
            "t.sdf:3:2: <joint> has no name attribute",
        ),
        (
            "<model name='m'/>".into(),
            "t.sdf:1:2: root element <model> is not SDF",
        ),
        ("<sdf version='1.6'>".into(), "t.sdf:1:"),
    ];
    for (text, expected) in cases {
        let e = refused(text);
        assert!(
            e.contains(expected),
            "{text}\n  gave: {e}\n  want: {expected}"
        );
    }
}
