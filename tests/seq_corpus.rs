//! Every .seq file of the third-party corpus loads, with the shape the files declare.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

mod common;

use std::path::{Path, PathBuf};

use motiond::motion::seq::{self, Channel, Motion, Timing};

fn corpus_file(rel: &str) -> Option<PathBuf> {
    common::corpus().map(|c| c.join("seq").join(rel))
}

fn load(path: &Path) -> Motion {
    seq::load(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn every_corpus_file_loads() {
    let Some(dir) = common::corpus() else { return };
    let mut loaded = 0;
    for sub in ["v2", "v1", "timed"] {
        let mut files: Vec<_> = std::fs::read_dir(dir.join("seq").join(sub))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        for f in files {
            let m = load(&f);
            assert!(m.joint_displacement().is_some(), "{}", f.display());
            loaded += 1;
        }
    }
    assert_eq!(loaded, 7);
}

#[test]
fn frame_counts_and_rates_are_as_written() {
    let Some(v2) = corpus_file("v2") else { return };
    for (name, frames) in [
        ("SR1WalkPattern1.seq", 6701),
        ("SR1WalkPattern2.seq", 7146),
        ("SR1WalkPattern3.seq", 4451),
    ] {
        let m = load(&v2.join(name));
        assert_eq!(m.format_version, 2.0);
        assert_eq!(m.frame_rate, Some(500.0));
        let j = m.joint_displacement().unwrap();
        assert_eq!((j.num_parts, j.rows()), (29, frames), "{name}");
        assert_eq!(j.timing, Timing::Fixed { frame_rate: 500.0 });
    }
    let timed = load(&corpus_file("timed/SR1WalkPattern3-irregular.seq").unwrap());
    let j = timed.joint_displacement().unwrap();
    assert_eq!((j.num_parts, j.rows()), (29, 419));
    let Timing::Timed { times, frame_rate } = &j.timing else {
        panic!("not timed")
    };
    assert_eq!(*frame_rate, None);
    assert_eq!((times[0], times[1]), (0.0, 0.016));
    assert!(times.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn v1_and_v2_joint_arrays_are_equal() {
    let Some(dir) = common::corpus() else { return };
    for (v1, v2) in [
        ("SR1WalkPattern.yaml", "SR1WalkPattern1.seq"),
        ("SR1WalkPattern2.yaml", "SR1WalkPattern2.seq"),
        ("SR1WalkPattern3.yaml", "SR1WalkPattern3.seq"),
    ] {
        let a = load(&dir.join("seq/v1").join(v1));
        let b = load(&dir.join("seq/v2").join(v2));
        assert_eq!(a.format_version, 1.0);
        assert_eq!(
            a.joint_displacement(),
            b.joint_displacement(),
            "{v1} vs {v2}"
        );
    }
}

#[test]
fn v1_walk_pattern_2_has_root_link_position_and_global_zmp() {
    let Some(f) = corpus_file("v1/SR1WalkPattern2.yaml") else {
        return;
    };
    let m = load(&f);
    let links = m.link_position().expect("LinkPosition");
    assert_eq!((links.num_parts, links.rows()), (1, 7146));
    let root = links.poses[0];
    assert!((root.translation.vector.z - 0.707499435).abs() < 1e-12);
    assert!((root.rotation.norm() - 1.0).abs() < 1e-12);
    let zmp = m.zmp().expect("ZMP");
    assert!(!zmp.root_relative);
    assert_eq!(zmp.values.len(), 7146);
    assert!((zmp.values[0].x - 0.0345011543).abs() < 1e-15);
    // The v2 file's ZMP is root-relative and inherits the top-level frame rate.
    let v2 = load(&corpus_file("v2/SR1WalkPattern2.seq").unwrap());
    let zmp2 = v2.zmp().expect("ZMP");
    assert!(zmp2.root_relative);
    assert_eq!(zmp2.timing, Timing::Fixed { frame_rate: 500.0 });
    assert!(
        v2.components
            .iter()
            .all(|c| !matches!(c.data, Channel::Poses(_)))
    );
}

#[test]
fn inspect_json_matches_the_documented_shape() {
    let Some(f) = corpus_file("v2/SR1WalkPattern1.seq") else {
        return;
    };
    let json = seq::inspect_json(&load(&f));
    assert_eq!(
        json,
        serde_json::json!({
            "format_version": 2,
            "frame_rate": 500.0,
            "components": [
                {"type": "MultiValueSeq", "content": "JointDisplacement", "num_parts": 29,
                 "rows": 6701, "timed": false, "frame_rate": 500.0, "se3_format": null,
                 "first_time": 0.0, "last_time": 13.4}
            ],
            "skipped": []
        })
    );
}

#[test]
fn corpus_files_take_the_fast_path() {
    let Some(dir) = common::corpus() else { return };
    for rel in [
        "v2/SR1WalkPattern1.seq",
        "v2/SR1WalkPattern2.seq",
        "v2/SR1WalkPattern3.seq",
        "v1/SR1WalkPattern.yaml",
        "v1/SR1WalkPattern2.yaml",
        "v1/SR1WalkPattern3.yaml",
        "timed/SR1WalkPattern3-irregular.seq",
    ] {
        let path = dir.join("seq").join(rel);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            seq::parse_fast(&text, &path).is_some_and(|r| r.is_ok()),
            "{rel}"
        );
    }
}

#[test]
fn general_reader_gives_the_same_motion_on_a_corpus_file() {
    // One small file: the general reader is the slow path (the proptests cover many more shapes).
    let Some(path) = corpus_file("timed/SR1WalkPattern3-irregular.seq") else {
        return;
    };
    let text = std::fs::read_to_string(&path).unwrap();
    let fast = seq::parse_fast(&text, &path).unwrap().unwrap();
    let general = seq::parse_general(&text, &path).unwrap();
    assert_eq!(fast, general);
}
