//! One case per SDF rule of ../shared/docs/urdf-semantics.md §10 and per SDF refusal of policy.md.

use std::path::Path;

use serde_json::{Value, json};

use super::parse;
use crate::skel::inspect_json;

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
