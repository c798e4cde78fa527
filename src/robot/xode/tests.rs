//! One case per rule of ../shared/docs/xode-semantics.md and per refusal of its project policy.

use std::path::Path;

use serde_json::{Value, json};

use super::parse;
use crate::robot::skel::inspect_json;

fn load(text: &str) -> Value {
    match parse(text, Path::new("t.xode")) {
        Ok(w) => inspect_json(&w),
        Err(e) => panic!("{e}"),
    }
}

fn refused(text: &str) -> String {
    match parse(text, Path::new("t.xode")) {
        Ok(w) => panic!("loaded: {}", inspect_json(&w)),
        Err(e) => e.to_string(),
    }
}

/// Bodies `a` and `b` in a space, then `joints` (one per line, starting on line 4).
fn space(joints: &str) -> String {
    format!(
        "<xode><world name='w'><space>\n<body name='a'/>\n<body name='b'/>\n{joints}\n</space></world></xode>"
    )
}

#[test]
fn joint_types_map_onto_dart_joints() {
    let s = &load(&space(
        "<joint name='h'><link1 body='a'/><link2 body='b'/><hinge><axis x='1' y='0' z='0' LoStop='-1' HiStop='2'/></hinge></joint>
         <joint name='s'><link1 body='a'/><link2 body='b'/><slider><axis x='1' y='0' z='0'/></slider></joint>
         <joint name='u'><link1 body='a'/><link2 body='b'/><universal><axis x='1' y='0' z='0'/><axis x='0' y='1' z='0' HiStop='inf'/></universal></joint>
         <joint name='h2'><link1 body='a'/><link2 body='b'/><hinge2><axis x='0' y='0' z='1'/><axis x='0' y='1' z='0' LoStop='-5' HiStop='5'/></hinge2></joint>
         <joint name='ba'><link1 body='a'/><link2 body='b'/><ball/></joint>
         <joint name='f'><link1 body='a'/><link2 body='b'/><fixed/></joint>
         <joint name='m'><link1 body='a'/><link2 body='b'/><amotor><axis x='1' y='0' z='0'/><axis x='0' y='1' z='0'/><axis x='0' y='0' z='1'/></amotor></joint>",
    ))["skeletons"][0];
    let types: Vec<&str> = s["joints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "revolute",
            "prismatic",
            "universal",
            "universal",
            "ball",
            "weld"
        ],
        "amotor adds no joint"
    );
    let names: Vec<&str> = s["dofs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "h", "s", "u_1", "u_2", "h2_1", "h2_2", "ba_x", "ba_y", "ba_z"
        ]
    );
    assert_eq!(s["dofs"][0]["position"], json!([-1.0, 2.0]));
    assert_eq!(
        s["dofs"][3]["position"],
        json!([null, null]),
        "inf is unbounded"
    );
    assert_eq!(
        s["dofs"][5]["position"],
        json!([-5.0, 5.0]),
        "hinge2 axis 2 as written"
    );
    assert_eq!(s["dofs"][0]["velocity"], json!([null, null]));
    assert_eq!(s["joints"][0]["actuator"], "force");
}

#[test]
fn links_follow_pyodes_table() {
    let s = &load(
        "<xode><world><space>
          <body name='B'>
            <joint name='j1'><hinge><axis x='1' y='0' z='0'/></hinge></joint>
            <joint name='j2'><link1 body='a'/><hinge><axis x='1' y='0' z='0'/></hinge></joint>
            <joint name='j3'><link2 body='a'/><hinge><axis x='1' y='0' z='0'/></hinge></joint>
          </body>
          <body name='a'/>
          <joint name='j4'><link2 body='a'/><hinge><axis x='1' y='0' z='0'/></hinge></joint>
         </space></world></xode>",
    )["skeletons"][0];
    let pc = |i: usize| {
        (
            s["joints"][i]["parent"].clone(),
            s["joints"][i]["child"].clone(),
        )
    };
    assert_eq!(pc(0), (Value::Null, json!("B")), "(B, env)");
    assert_eq!(
        pc(1),
        (json!("a"), json!("B")),
        "(a, B); a is defined later: postlink"
    );
    assert_eq!(pc(2), (json!("B"), json!("a")), "(B, b)");
    assert_eq!(pc(3), (Value::Null, json!("a")), "(env, b)");
    assert_eq!(s["name"], "world_0");
}

#[test]
fn unnamed_elements_get_indexed_names_and_groups_are_transparent() {
    let s = &load(
        "<xode><world/><world><space><group><body/><body><body/></body></group>
          <jointgroup><joint><link1 body='x'/><fixed/></joint></jointgroup>
          <body name='x'/><joint><link1 body='x'/><ball/></joint></space></world></xode>",
    );
    assert_eq!(s["skeletons"][0]["joints"], json!([]));
    let w = &s["skeletons"][1];
    assert_eq!(w["name"], "world_1");
    assert_eq!(w["joints"][0]["name"], "joint_0");
    assert_eq!(w["joints"][1]["name"], "joint_1");
    assert_eq!(w["dofs"][0]["name"], "joint_1_x");
}

#[test]
fn transforms_with_quaternions_and_axis_angles_are_accepted() {
    load(
        "<xode><world><space><body name='a'><transform absolute='true' scale='2'>
           <rotation><quaternion x='0' y='0' z='0' w='1'/></rotation><axisangle x='0' y='0' z='1' angle='0.5'/>
           <euler x='0' y='0' z='90' aformat='degrees'/><position x='1' y='2' z='3'/>
           <matrix4f m00='1' m01='0' m02='0' m03='0' m10='0' m11='1' m12='0' m13='0' m20='0' m21='0' m22='1' m23='0' m30='0' m31='0' m32='0' m33='1'/>
         </transform><mass><mass_shape density='1'><sphere radius='1'/></mass_shape></mass>
         <geom name='g'><box sizex='1' sizey='1' sizez='1'/></geom><ext><anything/></ext></body></space></world></xode>",
    );
}

#[test]
fn python_float_syntax() {
    use super::read::py_float;
    for (s, v) in [
        (" 1.5 ", 1.5),
        ("+.5", 0.5),
        ("1E0", 1.0),
        ("1_000", 1000.0),
        ("-Infinity", f64::NEG_INFINITY),
    ] {
        assert_eq!(py_float(s), Some(v), "{s}");
    }
    assert!(py_float("nan").is_some_and(f64::is_nan));
    for s in ["", "1,5", "1.0rad", "_1", "1__0", "e5", "."] {
        assert_eq!(py_float(s), None, "{s}");
    }
}

#[test]
fn pyode_rejections_name_the_place() {
    let cases: &[(&str, &str)] = &[
        ("<robot/>", "t.xode:1:2: root element <robot> is not XODE"),
        ("<xode><world>", "t.xode:1:1: XML syntax error"),
        (
            "<xode><world>\n<body/></world></xode>",
            "t.xode:2:2: <body> is not a valid child of <world>",
        ),
        (
            "<xode><world><space>\n<space/></space></world></xode>",
            "t.xode:2:2: <space> is not a valid child of <space>",
        ),
        (
            &space("<joint name='j'><link1 body='a'/><color/><hinge/></joint>"),
            "t.xode:4:35: <color> is not a valid child of <joint>",
        ),
        (
            &space("<joint name='j'><link1 body='a'/><Hinge/></joint>"),
            "t.xode:4:35: <Hinge> is not a valid child of <joint>",
        ),
        (
            &space(
                "<joint name='j'><link1 body='a'/><hinge><axis x='1' y='0' z='0'/><axis x='0' y='1' z='0'/></hinge></joint>",
            ),
            "t.xode:4:91: wrong number of axes for hinge joint: 2",
        ),
        (
            &space(
                "<joint name='j'><link1 body='a'/><ball><axis x='1' y='0' z='0'/></ball></joint>",
            ),
            "t.xode:4:41: <axis> is not a valid child of <ball>",
        ),
        (
            &space(
                "<joint name='j'><link1 body='a'/><amotor><anchor x='1' y='0' z='0'/></amotor></joint>",
            ),
            "t.xode:4:43: <anchor> is not a valid child of <amotor>",
        ),
        (
            &space("<joint name='j'><link1 body='a'/><slider><axis x='1' y='0'/></slider></joint>"),
            "t.xode:4:43: <axis> has no z attribute",
        ),
        (
            &space(
                "<joint name='j'><link1 body='a'/><slider><axis x='1' y='0' z='1,5'/></slider></joint>",
            ),
            "t.xode:4:63: <axis> z: expected a number, found '1,5'",
        ),
        (
            &space(
                "<joint name='j'><link1 body='a'/><hinge><anchor x='a' y='0' z='0'/><axis x='1' y='0' z='0'/></hinge></joint>",
            ),
            "t.xode:4:52: <anchor> x: expected a number",
        ),
        (
            &space(
                "<joint name='j'><link1 body='a'/><slider><axis x='1' y='0' z='0' lostop='1'/></slider></joint>",
            ),
            "t.xode:4:66: invalid attribute 'lostop' of <axis>",
        ),
        (
            &space(
                "<joint name='j'><link1 body='a'/><slider><axis x='1' y='0' z='0' HighStop='1'/></slider></joint>",
            ),
            "t.xode:4:66: invalid attribute 'HighStop'",
        ),
        (
            &space(
                "<joint name='j'><link1 body='a'/><slider><axis x='1' y='0' z='0' aformat='degrees'/></slider></joint>",
            ),
            "t.xode:4:66: invalid attribute 'aformat'",
        ),
        (
            &space(
                "<joint name='j'><link1 body='a'/><slider><axis x='1' y='0' z='0' HiStop=''/></slider></joint>",
            ),
            "t.xode:4:74: <axis> HiStop: expected a number, found ''",
        ),
        (
            &space("<joint name='j'><link1 body='ghost'/><fixed/></joint>"),
            "t.xode:4:30: joint 'j' links 'ghost', but no <body> has that name",
        ),
        (
            &space("<joint name='j'><link1 body='a'/><link2 body='a'/><fixed/></joint>"),
            "t.xode:4:2: joint 'j' links body 'a' to itself",
        ),
        (
            &space("<joint name='j'><fixed/></joint>"),
            "t.xode:4:2: joint 'j' connects nothing",
        ),
        (
            &space("<joint name='j'><link1 body='w'/><fixed/></joint>"),
            "t.xode:4:30: joint 'j' links 'w', which is a <world>, not a body",
        ),
        (
            &space("<joint name='j'><link1/><fixed/></joint>"),
            "t.xode:4:18: <link1> has no body attribute",
        ),
        (
            &space(
                "<joint name='j'><link1 body='a'/><hinge2><axis x='1' y='0' z='0'/><axis x='0' y='1' z='0'/></hinge2></joint>",
            ),
            "t.xode:4:2: joint 'j' is a hinge2 attached to the static environment",
        ),
        (
            &space("<joint name='j'><link1 body='a'/></joint>"),
            "t.xode:4:34: <joint> has no joint type element",
        ),
        (
            "<xode><world><space><body name='a'><transform><quaternion x='0' y='0' z='0'/></transform></body></space></world></xode>",
            "t.xode:1:48: <quaternion> has no w attribute",
        ),
        (
            "<xode><world><space><body name='a'><transform><position x='0' y='0' z='q'/></transform></body></space></world></xode>",
            "t.xode:1:72: <position> z: expected a number, found 'q'",
        ),
        (
            "<xode><world><space><body name='a' enabled='yes'/></space></world></xode>",
            "t.xode:1:45: <body> enabled: 'yes' is not a boolean",
        ),
        (
            "<xode><world><space><body name='a'><geom><joint/></geom></body></space></world></xode>",
            "t.xode:1:43: <joint> inside <geom>",
        ),
        (
            "<xode><world name='w1'><space><body name='a'/></space></world><world><space><body name='b'/><joint name='j'><link1 body='a'/><link2 body='b'/><fixed/></joint></space></world></xode>",
            "t.xode:1:122: joint 'j' links body 'a' of another <world>",
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
fn project_policy_refusals() {
    let cases: &[(&str, &str)] = &[
        (
            &space("<joint name='j'><link1 body='a'/><fixed/><link2 body='b'/></joint>"),
            "t.xode:4:43: <link2> after the joint type element",
        ),
        (
            &space(
                "<joint name='j'><link1 body='a'/><slider><axis x='1' y='0' z='0' LowStop='-1' LoStop='-2'/></slider></joint>",
            ),
            "t.xode:4:87: <axis> has both LowStop and LoStop",
        ),
        (
            &space(
                "<joint name='j'><link1 body='a'/><slider><axis x='1' y='0' z='0' LoStop='1' HiStop='-1'/></slider></joint>",
            ),
            "t.xode:4:85: <axis> low stop 1 is above high stop -1",
        ),
        (
            &space(
                "<joint name='j'><link1 body='a'/><slider><axis x='1' y='0' z='0' LoStop='nan'/></slider></joint>",
            ),
            "t.xode:4:74: <axis> LoStop: NaN is not a stop",
        ),
        (
            &space("<body name='a'/>"),
            "t.xode:4:13: name 'a' of this <body> is already used at line 2; body names must be unique",
        ),
        (
            &space(
                "<joint name='j'><link1 body='a'/><fixed/></joint><joint name='j'><link1 body='b'/><fixed/></joint>",
            ),
            "t.xode:4:63: name 'j' of this <joint> is already used",
        ),
        (
            &space("<geom name='a'/>"),
            "t.xode:4:13: name 'a' of this <geom> is already used at line 2; a body's name must not name anything else",
        ),
        (
            &space("<joint name='j'><link1 body='a'/><fixed/><hinge/></joint>"),
            "t.xode:4:43: a second joint type element <hinge>",
        ),
        (
            &space(
                "<joint name='j'><link1 body='a'/><amotor><axis x='1' y='0' z='0'/><axis x='1' y='0' z='0'/><axis x='1' y='0' z='0'/><axis x='1' y='0' z='0'/></amotor></joint>",
            ),
            "t.xode:4:142: wrong number of axes for amotor joint: 4 <axis>; expected 0 to 3",
        ),
        (
            &space(
                "<joint name='j_1'><link1 body='a'/><slider><axis x='1' y='0' z='0'/></slider></joint><joint name='j'><link1 body='a'/><link2 body='b'/><universal><axis x='1' y='0' z='0'/><axis x='0' y='1' z='0'/></universal></joint>",
            ),
            "t.xode:4:87: joint 'j': its DOF name 'j_1' is already the name of another DOF",
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
fn an_amotor_with_fewer_than_three_axes_loads_as_in_pyodes_own_test_document() {
    let s = &load(&space(
        "<joint name='m'><link1 body='a'/><link2 body='b'/><amotor><axis x='0' y='1' z='0'/></amotor></joint>",
    ));
    assert_eq!(s["skeletons"][0]["joints"], json!([]));
}

#[test]
fn more_xode_rules_each_with_its_place() {
    // No world: no skeleton.
    assert_eq!(load("<xode/>"), json!({"skeletons": []}));
    // (a, env) from a space; (a, b) from a body, which is then not used; LowStop alone is the
    // low stop; an unnamed body is body_<k>, counting nested bodies in its world.
    let w = &load(
        "<xode><world><space>
          <body name='a'/><body><body/></body><body name='b'>
            <joint name='ab'><link1 body='a'/><link2 body='b'/><hinge><axis x='1' y='0' z='0' LowStop='-0.5'/></hinge></joint>
          </body>
          <joint name='aenv'><link1 body='a'/><slider><axis x='1' y='0' z='0'/></slider></joint>
          <body><joint name='nested'><ball/></joint></body>
         </space></world></xode>",
    )["skeletons"][0];
    let pc = |i: usize| {
        (
            w["joints"][i]["parent"].clone(),
            w["joints"][i]["child"].clone(),
        )
    };
    assert_eq!(pc(0), (json!("a"), json!("b")));
    assert_eq!(
        pc(1),
        (Value::Null, json!("a")),
        "(a, env): with the environment, parent is null and child the body"
    );
    assert_eq!(pc(2), (Value::Null, json!("body_4")));
    assert_eq!(w["dofs"][0]["position"], json!([-0.5, null]));
    for d in 2..5 {
        assert_eq!(
            w["dofs"][d]["position"],
            json!([null, null]),
            "ball DOFs are unbounded"
        );
        assert_eq!(w["dofs"][d]["initial_position"], 0.0);
    }

    let cases: &[(String, &str)] = &[
        (
            space("<joint name='j'><link1 body='a'/><slider></slider></joint>"),
            "t.xode:4:42: wrong number of axes for slider joint: 0 <axis>; expected 1",
        ),
        (
            space(
                "<joint name='j'><link1 body='a'/><universal><axis x='1' y='0' z='0'/></universal></joint>",
            ),
            "t.xode:4:70: wrong number of axes for universal joint: 1 <axis>; expected 2",
        ),
        (
            space(
                "<joint name='j'><link1 body='a'/><link2 body='b'/><hinge2><axis x='1' y='0' z='0'/></hinge2></joint>",
            ),
            "t.xode:4:84: wrong number of axes for hinge2 joint: 1 <axis>; expected 2",
        ),
        (
            space(
                "<joint name='j'><link1 body='a'/><slider><anchor x='0' y='0' z='0'/></slider></joint>",
            ),
            "t.xode:4:43: <anchor> is not a valid child of <slider>",
        ),
        (
            space(
                "<joint name='j'><link1 body='a'/><fixed><axis x='1' y='0' z='0'/></fixed></joint>",
            ),
            "t.xode:4:42: <axis> is not a valid child of <fixed>",
        ),
        (
            "<xode><world><group/></world></xode>".into(),
            "t.xode:1:15: <group> is not a valid child of <world>",
        ),
        (
            space(
                "<joint name='j'><link1 body='a'/><link2 body='a'/><hinge><axis x='1' y='0' z='0'/></hinge></joint>",
            ),
            "t.xode:4:2: joint 'j' links body 'a' to itself",
        ),
        (
            space(
                "<joint name='j'><link1 body='a'/><hinge><axis x='1' y='0' z='0' LoStop='nan'/></hinge></joint>",
            ),
            "t.xode:4:73: <axis> LoStop: NaN is not a stop",
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
fn an_amotor_with_zero_to_three_axes_loads_as_the_corpus_shows() {
    // The corpus's pyode_test_doc.xode (its expected model made with the real PyODE) has a
    // one-axis amotor; PyODE takes 0..=3 axes. xode-semantics.md's policy table says "other than
    // 3 axes: refused"; the corpus wins (README, XODE).
    for n in 0..=3 {
        let axes = "<axis x='1' y='0' z='0'/>".repeat(n);
        let s = &load(&space(&format!(
            "<joint name='m'><link1 body='a'/><link2 body='b'/><amotor>{axes}</amotor></joint>"
        )));
        assert_eq!(s["skeletons"][0]["joints"], json!([]), "{n} axes");
    }
}

/// §2, geom.py and body.py's `Mass`: geometry and mass data are not part of the joint model, but
/// PyODE's element rules for them hold — a child PyODE raises on is refused where it stands, and
/// a `<geom>` without a type element at its end tag.
#[test]
fn geom_mass_and_trimesh_children_follow_pyode() {
    let body = |inner: &str| {
        format!("<xode><world><space><body name='a'>\n{inner}\n</body></space></world></xode>")
    };
    load(&body(
        "<geom name='g'><transform><position x='1' y='0' z='0'/></transform><sphere radius='1'><ext/></sphere>
           <jointgroup><geom><cylinder radius='1' length='2'/></geom></jointgroup><ext><x/></ext></geom>
         <geom><jointgroup><ray length='1'/></jointgroup></geom>
         <geom><trimesh><vertices><v x='0' y='0' z='0'/><v x='1' y='0' z='0'/><v x='0' y='1' z='0'/></vertices>
           <triangles><t ia='1' ib='2' ic='3'/></triangles></trimesh></geom>
         <mass><mass_struct><adjust total='2'/></mass_struct><transform/><mass_shape density='1'><anything/></mass_shape>
           <mass><adjust total='1'/></mass><ext/></mass>",
    ));
    let cases = [
        (
            "<geom><box sizex='1' sizey='1' sizez='1'/><sphrere radius='1'/></geom>",
            "t.xode:2:44: <sphrere> is not a valid child of <geom>; expected transform, box, \
             cappedCylinder, cylinder, plane, ray, sphere, trimesh, geom, body, jointgroup, ext",
        ),
        (
            "<geom name='g'>\n  <transform/>\n</geom>",
            "t.xode:4:1: <geom> has no geom type element; expected one of box, cappedCylinder, \
             cylinder, plane, ray, sphere, trimesh",
        ),
        ("<geom/>", "t.xode:2:2: <geom> has no geom type element"),
        (
            "<geom><box sizex='1' sizey='1' sizez='1'><color/></box></geom>",
            "t.xode:2:43: <color> is not a valid child of <box>; expected ext",
        ),
        (
            "<geom><cone radius='1' length='1'/></geom>",
            "t.xode:2:8: <cone> geoms are not implemented by PyODE",
        ),
        (
            "<geom><trimesh><vertices><v x='0' y='0' z='0'/></vertices><normals/></trimesh></geom>",
            "t.xode:2:60: <normals> is not a valid child of <trimesh>",
        ),
        (
            "<geom><trimesh><vertices><v x='0' y='0' z='0'><w/></v></vertices></trimesh></geom>",
            "t.xode:2:48: <w> is not a valid child of <trimesh>",
        ),
        (
            "<mass><density value='1'/></mass>",
            "t.xode:2:8: <density> is not a valid child of <mass>; expected mass_struct, \
             mass_shape, transform, adjust, mass, ext",
        ),
        (
            "<mass><mass_struct><density value='1'/></mass_struct></mass>",
            "t.xode:2:21: <density> is not a valid child of <mass>",
        ),
        (
            "<mass><transform><position x='0' y='0' z='0'/></transform></mass>",
            "t.xode:2:19: <position> is not a valid child of <mass>",
        ),
    ];
    for (inner, expected) in cases {
        let e = refused(&body(inner));
        assert!(
            e.contains(expected),
            "{inner}\n  gave: {e}\n  want: {expected}"
        );
    }
}

/// Each world is its own skeleton: joint names are unique within a world, and two worlds may
/// both have a joint `j`. Body names stay unique in the document (links look bodies up by name
/// across worlds).
#[test]
fn joint_names_are_unique_per_world() {
    let world = |w: &str| {
        format!(
            "<world name='{w}'><space><body name='{w}a'/><body name='{w}b'/>\
             <joint name='j'><link1 body='{w}a'/><link2 body='{w}b'/><hinge><axis x='1' y='0' z='0'/></hinge></joint>\
             </space></world>"
        )
    };
    let w = load(&format!("<xode>{}{}</xode>", world("p"), world("q")));
    assert_eq!(w["skeletons"][0]["joints"][0]["name"], "j");
    assert_eq!(w["skeletons"][1]["joints"][0]["name"], "j");
    let e = refused(
        "<xode><world><space><body name='a'/><body name='b'/>
<joint name='j'><link1 body='a'/><link2 body='b'/><ball/></joint>
<joint name='j'><link1 body='a'/><link2 body='b'/><fixed/></joint></space></world>
<world><space><body name='c'/><body name='d'/>
<joint name='j'><link1 body='c'/><link2 body='d'/><fixed/></joint></space></world></xode>",
    );
    assert_eq!(
        e,
        "t.xode:3:14: name 'j' of this <joint> is already used at line 2; joint names must be \
         unique within a world (motions and drives refer to joints by name)"
    );
    let e = refused(&format!(
        "<xode>{}\n<world><space><body name='pa'/></space></world></xode>",
        world("p")
    ));
    assert!(
        e.contains("t.xode:2:27: name 'pa' of this <body> is already used at line 1; body names must be unique"),
        "{e}"
    );
}
