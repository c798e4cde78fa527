//! Properties of the model readers over random input: no input makes a reader panic or hang
//! (mangled corpus files and random XML), and random URDF and SDF trees come out in DART's
//! joint order with every link placed once.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use motiond::robot::{self, Options};
use proptest::prelude::*;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 64,
        ..ProptestConfig::default()
    }
}

/// Small documents of every format, written to exercise many rules at once.
const SEEDS: [&str; 4] = [
    r#"<robot name="r"><material name="m"><color rgba="1 0 0 1"/></material>
  <link name="world"/><link name="b"><visual><geometry><box size="1 1 1"/></geometry><material name="m"/></visual></link>
  <link name="c"/><link name="d"/>
  <joint name="fix" type="fixed"><parent link="world"/><child link="b"/></joint>
  <joint name="j" type="revolute"><parent link="b"/><child link="c"/><axis xyz="0 0 1"/>
    <limit lower="-1" upper="1" effort="2" velocity="3"/><mimic joint="k" multiplier="2"/></joint>
  <joint name="k" type="planar"><parent link="b"/><child link="d"/><axis xyz="0 1 0"/></joint>
  <ros2_control name="h"><joint name="k"><command_interface name="velocity"/></joint></ros2_control>
</robot>"#,
    r#"<sdf version="1.6"><model name="m"><link name="a"/><link name="b"/><link name="c"/>
  <joint name="j" type="revolute"><parent>a</parent><child>b</child>
    <axis><xyz>0 0 1</xyz><limit><lower>-1</lower><upper>1</upper><effort>3</effort></limit></axis></joint>
  <joint name="u" type="universal"><parent>world</parent><child>c</child></joint>
</model></sdf>"#,
    r#"<xode><world name="w"><space><group><body name="a"><transform><position x="0" y="0" z="1"/></transform>
  <joint name="h"><link2 body="b"/><hinge><axis x="1" y="0" z="0" LoStop="-1" HiStop="1"/></hinge></joint></body></group>
  <body name="b"/><joint name="u"><link1 body="a"/><link2 body="b"/><universal><anchor x="0" y="0" z="0"/>
  <axis x="1" y="0" z="0"/><axis x="0" y="1" z="0"/></universal></joint></space></world></xode>"#,
    r#"<skel version="1.0"><world name="w"><skeleton name="s"><body name="a"/><body name="b"/>
  <joint type="revolute" name="j"><parent>a</parent><child>b</child><axis><xyz>0 0 1</xyz></axis></joint>
</skeleton></world></skel>"#,
];

/// Every reader returns (a model or a positioned refusal) on whatever it is given.
fn must_return(text: &str) {
    let path = Path::new("fuzz.xml");
    if let Err(e) = robot::parse(text, path, &Options::default()) {
        let shown = e.to_string();
        assert!(shown.lines().all(|l| l.starts_with("fuzz.xml:")), "{shown}");
    }
    let _ = robot::parse(
        text,
        path,
        &Options {
            fixed_base: true,
            ..Default::default()
        },
    );
}

/// A seed with random bytes replaced, inserted or removed.
fn mangled() -> impl Strategy<Value = String> {
    (
        0..SEEDS.len(),
        prop::collection::vec((any::<prop::sample::Index>(), 0u8..5, any::<u8>()), 1..12),
    )
        .prop_map(|(seed, edits)| {
            let mut bytes = SEEDS[seed].as_bytes().to_vec();
            for (at, op, byte) in edits {
                if bytes.is_empty() {
                    break;
                }
                let i = at.index(bytes.len());
                // Mostly XML-significant bytes, so structure breaks in interesting ways.
                let b = b"<>/=\"' 0-.aZ_"[usize::from(byte) % 13];
                match op {
                    0 => bytes[i] = b,
                    1 => bytes.insert(i, b),
                    2 => {
                        bytes.remove(i);
                    }
                    3 => {
                        // Duplicate a slice: repeated elements, names and attributes.
                        let end = (i + usize::from(byte)).min(bytes.len());
                        let copy = bytes[i..end].to_vec();
                        bytes.splice(i..i, copy);
                    }
                    _ => bytes.truncate(i),
                }
            }
            String::from_utf8_lossy(&bytes).into_owned()
        })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn mangled_documents_never_panic(text in mangled()) {
        must_return(&text);
    }

    #[test]
    fn arbitrary_text_never_panics(text in ".{0,200}") {
        must_return(&text);
        must_return(&format!("<robot name='r'>{text}</robot>"));
        must_return(&format!("<xode>{text}</xode>"));
        must_return(&format!("<sdf version='1.6'><model name='m'>{text}</model></sdf>"));
    }
}

/// A random tree: `parents[i]` is the parent of link `i + 1` (an earlier link), joint names random.
fn tree() -> impl Strategy<Value = (Vec<usize>, Vec<String>)> {
    prop::collection::vec(any::<prop::sample::Index>(), 1..40).prop_flat_map(|parents| {
        let n = parents.len();
        let parents: Vec<usize> = parents
            .iter()
            .enumerate()
            .map(|(i, p)| p.index(i + 1))
            .collect();
        (
            Just(parents),
            prop::collection::hash_set("[A-Za-z_][A-Za-z0-9_]{0,6}", n)
                .prop_map(|s| s.into_iter().collect::<Vec<_>>()),
        )
    })
}

/// DART's URDF order: depth-first from link 0, children in byte order of their joint names.
fn urdf_order(parents: &[usize], names: &[String]) -> Vec<String> {
    let mut children: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (j, &p) in parents.iter().enumerate() {
        children.entry(p).or_default().push(j);
    }
    for c in children.values_mut() {
        c.sort_by(|&a, &b| names[a].as_bytes().cmp(names[b].as_bytes()));
    }
    let mut order = Vec::new();
    let mut pending: Vec<Vec<usize>> = vec![children.get(&0).cloned().unwrap_or_default()];
    while let Some(top) = pending.last_mut() {
        if top.is_empty() {
            pending.pop();
            continue;
        }
        let j = top.remove(0);
        order.push(names[j].clone());
        pending.push(children.get(&(j + 1)).cloned().unwrap_or_default());
    }
    order
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn random_urdf_trees_load_in_dart_order((parents, names) in tree()) {
        let mut text = String::from("<robot name='r'>");
        for i in 0..=parents.len() {
            text.push_str(&format!("<link name='l{i}'/>"));
        }
        for (j, p) in parents.iter().enumerate() {
            text.push_str(&format!(
                "<joint name='{}' type='revolute'><parent link='l{p}'/><child link='l{}'/>\
                 <limit lower='-1' upper='1' effort='1' velocity='1'/></joint>",
                names[j],
                j + 1
            ));
        }
        text.push_str("</robot>");
        let world = robot::parse(&text, Path::new("t.urdf"), &Options::default())
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let s = &world.skeletons[0];
        let got: Vec<&str> = s.joints.iter().skip(1).map(|j| j.name.as_str()).collect();
        prop_assert_eq!(got, urdf_order(&parents, &names));
        // DOFs follow joints, one per revolute joint.
        for (i, d) in s.dofs.iter().enumerate().skip(6) {
            prop_assert_eq!(&s.joints[d.joint].dofs, &(i..i + 1));
        }
    }

    #[test]
    fn random_sdf_trees_place_every_link_once_after_its_parent((parents, names) in tree()) {
        let mut text = String::from("<sdf version='1.5'><model name='m'>");
        for i in 0..=parents.len() {
            text.push_str(&format!("<link name='{}'/>", link_name(i, &names)));
        }
        for (j, &p) in parents.iter().enumerate() {
            text.push_str(&format!(
                "<joint name='j{j}' type='revolute'><parent>{}</parent><child>{}</child></joint>",
                link_name(p, &names),
                link_name(j + 1, &names)
            ));
        }
        text.push_str("</model></sdf>");
        let world = robot::parse(&text, Path::new("t.sdf"), &Options::default())
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let s = &world.skeletons[0];
        prop_assert_eq!(s.joints.len(), parents.len() + 1);
        prop_assert_eq!(s.joints[0].name.as_str(), "root");
        let mut built = std::collections::HashSet::new();
        for j in &s.joints {
            if let Some(p) = &j.parent {
                prop_assert!(built.contains(p), "{} built before its parent {}", j.child, p);
            }
            prop_assert!(built.insert(j.child.clone()), "{} built twice", j.child);
        }
    }
}

/// Link names in SDF order matter: derive them from the random joint names.
fn link_name(i: usize, names: &[String]) -> String {
    match i {
        0 => "base".to_string(),
        _ => format!("{}_{i}", names[i - 1]),
    }
}

#[test]
fn every_corpus_file_survives_truncation_at_every_hundredth_byte() {
    let Some(corpus) = common::corpus() else {
        return;
    };
    let mut files = Vec::new();
    let mut stack = vec![corpus.join("urdf/files"), corpus.join("xode/files")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("corpus directory") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                stack.push(p);
            } else if p
                .extension()
                .is_some_and(|x| x == "urdf" || x == "sdf" || x == "xode")
            {
                files.push(p);
            }
        }
    }
    assert!(!files.is_empty());
    for f in files {
        let text = std::fs::read_to_string(&f).expect("corpus file");
        let step = (text.len() / 100).max(1);
        for cut in (0..text.len()).step_by(step) {
            if text.is_char_boundary(cut) {
                must_return(&text[..cut]);
            }
        }
    }
}
