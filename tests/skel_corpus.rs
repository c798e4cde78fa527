//! Every DART corpus file through `skel::parse`, compared with what real DART 6.20 built from it
//! (../shared/corpus/skel/expected), plus the SR1 robot and robustness against mangled input.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

mod common;

use std::path::{Path, PathBuf};

use motiond::robot::skel;
use serde_json::Value;

fn skel_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("corpus directory is readable") {
            let path = entry.expect("corpus entry is readable").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "skel") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// `data/skel/biped.skel` → `data__skel__biped.skel.json`.
fn expected_name(relative: &Path) -> String {
    let parts: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    format!("{}.json", parts.join("__"))
}

fn close(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (
                x.as_f64().unwrap_or(f64::NAN),
                y.as_f64().unwrap_or(f64::NAN),
            );
            (x - y).abs() <= 1e-9
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| close(p, q))
        }
        _ => a == b,
    }
}

/// Differences between our skeleton JSON and DART's, one line each.
fn compare(ours: &Value, dart: &Value) -> Vec<String> {
    let mut diffs = Vec::new();
    let empty = Vec::new();
    let ours_s = ours["skeletons"].as_array().unwrap_or(&empty);
    let dart_s = dart["skeletons"].as_array().unwrap_or(&empty);
    if ours_s.len() != dart_s.len() {
        diffs.push(format!("{} skeletons, DART {}", ours_s.len(), dart_s.len()));
        return diffs;
    }
    for (o, d) in ours_s.iter().zip(dart_s) {
        let name = d["name"].to_string();
        if o["name"] != d["name"] {
            diffs.push(format!("skeleton name {} vs DART {name}", o["name"]));
        }
        for (list, fields) in [
            (
                "joints",
                &["name", "type", "actuator", "parent", "child", "dofs"][..],
            ),
            (
                "dofs",
                &[
                    "index",
                    "name",
                    "joint",
                    "position",
                    "velocity",
                    "acceleration",
                    "effort",
                    "initial_position",
                    "initial_velocity",
                ][..],
            ),
        ] {
            let (ol, dl) = (
                o[list].as_array().unwrap_or(&empty),
                d[list].as_array().unwrap_or(&empty),
            );
            if ol.len() != dl.len() {
                diffs.push(format!("{name}: {} {list}, DART {}", ol.len(), dl.len()));
                continue;
            }
            for (i, (oe, de)) in ol.iter().zip(dl).enumerate() {
                for f in fields {
                    if !close(&oe[f], &de[f]) {
                        diffs.push(format!(
                            "{name} {list}[{i}].{f}: {} vs DART {}",
                            oe[f], de[f]
                        ));
                    }
                }
            }
        }
    }
    diffs
}

#[test]
fn corpus_matches_dart() {
    let Some(corpus) = common::corpus() else {
        return;
    };
    let files_dir = corpus.join("skel/files");
    let expected_dir = corpus.join("skel/expected");
    let files = skel_files(&files_dir);
    assert!(
        !files.is_empty(),
        "no .skel files under {}",
        files_dir.display()
    );
    let mut failures = Vec::new();
    for file in &files {
        let relative = file
            .strip_prefix(&files_dir)
            .expect("file is under the corpus");
        let expected_path = expected_dir.join(expected_name(relative));
        let expected: Value = serde_json::from_str(
            &std::fs::read_to_string(&expected_path)
                .unwrap_or_else(|e| panic!("{}: {e}", expected_path.display())),
        )
        .expect("expected file is JSON");
        let result = skel::load(file);
        match (&result, expected.get("error")) {
            (Ok(_), Some(why)) => failures.push(format!(
                "{}: loaded, but DART's verdict is an error: {why}",
                relative.display()
            )),
            (Err(e), None) => failures.push(format!("{}: rejected: {e}", relative.display())),
            (Err(e), Some(_)) => {
                // A rejection must name file, line and column.
                let text = e.to_string();
                assert!(
                    text.lines()
                        .all(|l| l.starts_with(&file.display().to_string())),
                    "{text}"
                );
            }
            (Ok(world), None) => {
                let diffs = compare(&skel::inspect_json(world), &expected);
                if !diffs.is_empty() {
                    failures.push(format!("{}:\n  {}", relative.display(), diffs.join("\n  ")));
                }
            }
        }
    }
    eprintln!(
        "skel corpus: {}/{} files agree with DART",
        files.len() - failures.len(),
        files.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// SR1's joints are written limb by limb, but the arms hang from CHEST, whose joint comes last in
/// the file: DART pulls WAIST_P, WAIST_R and CHEST in before the first arm joint. Motion columns
/// must therefore be mapped by name, never by file position.
#[test]
fn sr1_dof_order_differs_from_file_order() {
    let Some(corpus) = common::corpus() else {
        return;
    };
    let path = corpus.join("robots/sr1.skel");
    let world = skel::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let [sr1] = world.skeletons.as_slice() else {
        panic!("expected one skeleton");
    };
    assert_eq!(sr1.name, "SR1");
    assert_eq!(sr1.joints.len(), 30);
    assert_eq!(sr1.dofs.len(), 6 + 29);

    let text = std::fs::read_to_string(&path).expect("sr1.skel is readable");
    let doc = roxmltree::Document::parse(&text).expect("sr1.skel is XML");
    let file_order: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("joint"))
        .filter_map(|n| n.attribute("name"))
        .collect();
    let dof_order: Vec<&str> = sr1.joints.iter().map(|j| j.name.as_str()).collect();
    assert_ne!(dof_order, file_order);
    let mut sorted_file = file_order.clone();
    let mut sorted_dofs = dof_order.clone();
    sorted_file.sort_unstable();
    sorted_dofs.sort_unstable();
    assert_eq!(sorted_dofs, sorted_file, "same joints, different order");

    let position = |name: &str| dof_order.iter().position(|&j| j == name);
    assert!(position("CHEST") < position("RARM_SHOULDER_P"));
    assert!(position("WAIST_R") < position("CHEST"));
    assert!(position("WAIST_P") < position("WAIST_R"));
    assert_eq!(
        &dof_order[..8],
        [
            "WAIST_ROOT",
            "RLEG_HIP_R",
            "RLEG_HIP_P",
            "RLEG_HIP_Y",
            "RLEG_KNEE",
            "RLEG_ANKLE_P",
            "RLEG_ANKLE_R",
            "WAIST_P"
        ]
    );
    // Every joint comes after the joint of its parent body.
    for (i, j) in sr1.joints.iter().enumerate() {
        if let Some(parent) = &j.parent {
            let parent_joint = sr1.joints.iter().position(|p| &p.child == parent);
            assert!(parent_joint < Some(i), "{} before its parent", j.name);
        }
    }
    let knee = sr1
        .dofs
        .iter()
        .find(|d| d.name == "RLEG_KNEE")
        .expect("knee DOF");
    assert_eq!(
        sr1.joints[knee.joint].actuator,
        motiond::robot::Actuator::Servo
    );
    assert!(knee.velocity.lower.is_finite() && knee.effort.upper.is_finite());
}

/// Small edits of real files: a deleted span, a duplicated span, or a token swapped for another.
fn mutate(text: &str, edits: &[(usize, usize, usize)]) -> String {
    const TOKENS: [&str; 12] = [
        "<",
        ">",
        "/",
        "\"",
        "nan",
        "inf",
        "-1e308",
        "world",
        "</joint>",
        "<dof local_index=\"7\">",
        "<parent>",
        "&amp;",
    ];
    let mut bytes = text.as_bytes().to_vec();
    for &(kind, at, len) in edits {
        if bytes.is_empty() {
            break;
        }
        let at = at % bytes.len();
        let end = (at + len % 64).min(bytes.len());
        match kind % 3 {
            0 => {
                bytes.drain(at..end);
            }
            1 => {
                let span = bytes[at..end].to_vec();
                bytes.splice(at..at, span);
            }
            _ => {
                bytes.splice(at..end, TOKENS[len % TOKENS.len()].bytes());
            }
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]

    /// Mangled corpus files are accepted or refused with positioned messages, never a panic.
    #[test]
    fn mutated_corpus_files_never_panic(
        file in 0usize..64,
        edits in proptest::collection::vec((0usize..3, 0usize..1_000_000, 0usize..1000), 1..6),
    ) {
        let Some(corpus) = common::corpus() else {
            return Ok(());
        };
        let mut files = skel_files(&corpus.join("skel/files"));
        files.push(corpus.join("robots/sr1.skel"));
        let path = &files[file % files.len()];
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let mutated = mutate(&text, &edits);
        if let Err(skel::Error::Invalid(diags)) = skel::parse(&mutated, path) {
            proptest::prop_assert!(!diags.is_empty());
            for d in diags.iter() {
                proptest::prop_assert!(d.line >= 1 && d.col >= 1);
            }
        }
    }
}
