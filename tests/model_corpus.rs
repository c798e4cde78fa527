//! The URDF/SDF corpus (real robots, with the model real DART 6.20 builds) and the XODE corpus
//! (with the model PyODE's reader implies) through `robot::load`, compared field by field in the
//! `inspect skel` JSON shape, as tests/skel_corpus.rs does for SKEL.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

mod common;

use std::path::{Path, PathBuf};

use motiond::robot::{self, skel};
use serde_json::Value;

fn close(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (
                x.as_f64().unwrap_or(f64::NAN),
                y.as_f64().unwrap_or(f64::NAN),
            );
            x == y || (x - y).abs() <= 1e-9 * x.abs().max(1.0)
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| close(p, q))
        }
        _ => a == b,
    }
}

/// Differences between our model JSON and the expected one, one line each.
fn compare(ours: &Value, expected: &Value) -> Vec<String> {
    let mut diffs = Vec::new();
    let empty = Vec::new();
    let ours_s = ours["skeletons"].as_array().unwrap_or(&empty);
    let exp_s = expected["skeletons"].as_array().unwrap_or(&empty);
    if ours_s.len() != exp_s.len() {
        diffs.push(format!(
            "{} skeletons, expected {}",
            ours_s.len(),
            exp_s.len()
        ));
        return diffs;
    }
    for (o, d) in ours_s.iter().zip(exp_s) {
        let name = d["name"].to_string();
        if o["name"] != d["name"] {
            diffs.push(format!("skeleton name {} vs expected {name}", o["name"]));
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
                diffs.push(format!(
                    "{name}: {} {list}, expected {}",
                    ol.len(),
                    dl.len()
                ));
            }
            for (i, (oe, de)) in ol.iter().zip(dl).enumerate() {
                for f in fields {
                    if !close(&oe[f], &de[f]) {
                        diffs.push(format!(
                            "{name} {list}[{i}].{f}: {} vs expected {}",
                            oe[f], de[f]
                        ));
                    }
                }
            }
        }
    }
    diffs
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Loads `file` and checks it against `expected`; `None` when they agree, else why not.
fn check(file: &Path, shown: &str, expected: &Value) -> Option<String> {
    let result = robot::load(file, &robot::Options::default());
    match (&result, expected.get("error")) {
        (Ok(_), Some(why)) => Some(format!("{shown}: loaded, but must be refused: {why}")),
        (Err(e), None) => Some(format!("{shown}: refused: {e}")),
        (Err(e), Some(_)) => {
            // A refusal names the file, line and column of every problem.
            let text = e.to_string();
            let prefix = format!("{}:", file.display());
            (!text.lines().all(|l| {
                l.strip_prefix(&prefix).is_some_and(|rest| {
                    let mut parts = rest.splitn(3, ':');
                    parts.next().is_some_and(|n| n.parse::<u32>().is_ok())
                        && parts.next().is_some_and(|n| n.parse::<u32>().is_ok())
                })
            }))
            .then(|| format!("{shown}: refusal without FILE:LINE:COL: {text}"))
        }
        (Ok(world), None) => {
            let diffs = compare(&skel::inspect_json(world), expected);
            (!diffs.is_empty()).then(|| format!("{shown}:\n  {}", diffs.join("\n  ")))
        }
    }
}

fn expected_files(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("corpus entry is readable").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    out.sort();
    out
}

#[test]
fn urdf_and_sdf_corpus_matches_dart() {
    let Some(corpus) = common::corpus() else {
        return;
    };
    let expected = expected_files(&corpus.join("urdf/expected"));
    assert!(
        !expected.is_empty(),
        "no expected models in the URDF corpus"
    );
    let mut failures = Vec::new();
    let (mut urdf, mut sdf) = ((0, 0), (0, 0));
    for path in &expected {
        let exp = read_json(path);
        let relative = exp["file"].as_str().expect("expected model names its file");
        let file = corpus.join("urdf/files").join(relative);
        let failure = check(&file, relative, &exp);
        let tally = if relative.ends_with(".sdf") {
            &mut sdf
        } else {
            &mut urdf
        };
        tally.1 += 1;
        match failure {
            Some(f) => failures.push(f),
            None => tally.0 += 1,
        }
    }
    eprintln!(
        "urdf corpus: {}/{} URDF files and {}/{} SDF files agree with DART",
        urdf.0, urdf.1, sdf.0, sdf.1
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn xode_corpus_matches_the_expected_models() {
    let Some(corpus) = common::corpus() else {
        return;
    };
    let expected = expected_files(&corpus.join("xode/expected"));
    assert!(
        !expected.is_empty(),
        "no expected models in the XODE corpus"
    );
    let mut failures = Vec::new();
    let mut lines_agree = (0, 0);
    for path in &expected {
        let exp = read_json(path);
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("file name");
        let file = corpus.join("xode/files").join(format!("{stem}.xode"));
        if let Some(f) = check(&file, stem, &exp) {
            failures.push(f);
            continue;
        }
        // PyODE's error line is informative: count how often ours names the same line.
        if let (Some(line), Err(e)) = (
            exp.get("line").and_then(Value::as_u64),
            robot::load(&file, &robot::Options::default()),
        ) {
            lines_agree.1 += 1;
            let first = e.to_string();
            let ours = first.split(':').nth(1).and_then(|n| n.parse::<u64>().ok());
            if ours == Some(line) {
                lines_agree.0 += 1;
            }
        }
    }
    eprintln!(
        "xode corpus: {}/{} documents agree with the expected model; {}/{} refusals at PyODE's line",
        expected.len() - failures.len(),
        expected.len(),
        lines_agree.0,
        lines_agree.1
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// DART refuses nothing in cassie_v2.sdf: it discards each joint that claims an already claimed
/// child and loads the rest. motiond refuses the file, but without those joints it must build
/// exactly DART's model (`dart_model`): same order, names, types and limits.
#[test]
fn sdf_without_the_joints_dart_discards_is_dart_s_model() {
    let Some(corpus) = common::corpus() else {
        return;
    };
    let expected = read_json(&corpus.join(
        "urdf/expected/example-robot-data__robots__cassie_description__robots__cassie_v2.sdf.json",
    ));
    let relative = expected["file"].as_str().expect("file");
    let text = std::fs::read_to_string(corpus.join("urdf/files").join(relative)).expect("cassie");
    let doc = roxmltree::Document::parse(&text).expect("XML");
    let mut claimed = std::collections::HashSet::new();
    let mut cuts: Vec<std::ops::Range<usize>> = Vec::new();
    for j in doc.descendants().filter(|n| n.has_tag_name("joint")) {
        let child = j
            .children()
            .find(|c| c.has_tag_name("child"))
            .and_then(|c| c.text())
            .unwrap_or_default();
        if !claimed.insert(child.to_string()) {
            cuts.push(j.range());
        }
    }
    assert_eq!(cuts.len(), 4, "DART logs 4 discarded joints");
    let mut kept = text.clone();
    for r in cuts.iter().rev() {
        kept.replace_range(r.clone(), "");
    }
    let world = robot::parse(
        &kept,
        Path::new("cassie_v2.sdf"),
        &robot::Options::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let diffs = compare(&skel::inspect_json(&world), &expected["dart_model"]);
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}
