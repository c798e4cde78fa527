//! The .seq writer against the format: what `seq::write_motion` and `motiond resample --format seq`
//! write loads again with `seq::load` and `motiond inspect seq` (same values), and with PyYAML,
//! checked against Choreonoid's format document (`../shared/specs/choreonoid-body-motion-seq.txt`):
//! the top node, each component's type, content, numParts, SE3Format and frame shapes.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use motiond::motion::seq::{self, LinkPoses, Motion, Written, Zmp};
use nalgebra::{Isometry3, Translation3, UnitQuaternion, Vector3};
use serde_json::Value;

const MOTIOND: &str = env!("CARGO_BIN_EXE_motiond");

/// Checks a .seq file the way the format document describes it and prints what it read as JSON.
/// Uses PyYAML's safe loader (libyaml's when built with it), as a Choreonoid user's script would.
const PYYAML_CHECK: &str = r#"
import json, sys, yaml
Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
with open(sys.argv[1]) as f:
    doc = yaml.load(f, Loader=Loader)
problems = []
def need(cond, what):
    if not cond:
        problems.append(what)
need(isinstance(doc, dict), "the top node is a mapping")
need(doc.get("type") == "CompositeSeq", "type: CompositeSeq")
need(doc.get("content") == "BodyMotion", "content: BodyMotion")
need(doc.get("formatVersion") == 2, "formatVersion: 2")
rate = doc.get("frameRate")
need(isinstance(rate, (int, float)) and rate > 0, "frameRate > 0")
frames_top = doc.get("numFrames")
out = {"frameRate": rate, "components": []}
for c in doc.get("components", []):
    t, content, frames = c.get("type"), c.get("content"), c.get("frames")
    need(isinstance(frames, list) and len(frames) > 0, f"{content}: frames")
    need(c.get("numFrames") == len(frames) == frames_top, f"{content}: numFrames = rows")
    need(c.get("frameRate", rate) == rate, f"{content}: frameRate")
    for row in frames:
        cells = [x for part in row for x in (part if isinstance(part, list) else [part])]
        need(all(isinstance(x, float) for x in cells), f"{content}: every value is a YAML float")
    # Numbers as Python's repr (shortest round trip): the comparison is exact, not at the mercy
    # of another JSON reader's float parsing.
    entry = {"type": t, "content": content, "frames": [
        [repr(x) for part in row for x in (part if isinstance(part, list) else [part])]
        for row in frames]}
    if t == "MultiValueSeq":
        need(content == "JointDisplacement", "MultiValueSeq is JointDisplacement")
        n = c.get("numParts")
        need(all(len(r) == n for r in frames), f"{content}: numParts values a frame")
        labels = c.get("partLabels")
        if labels is not None:
            need(len(labels) == n and all(isinstance(x, str) for x in labels), "partLabels")
            entry["partLabels"] = labels
    elif t == "MultiSE3Seq":
        need(content == "LinkPosition", "MultiSE3Seq is LinkPosition")
        need(c.get("SE3Format") == "XYZQWQXQYQZ", "SE3Format: XYZQWQXQYQZ")
        n = c.get("numParts")
        need(all(len(r) == n and all(len(p) == 7 for p in r) for r in frames),
             "numParts SE3 values of 7 a frame")
    elif t == "Vector3Seq":
        need(content == "ZMP", "Vector3Seq is ZMP")
        need(all(len(r) == 3 for r in frames), "3 values a frame")
        entry["isRootRelative"] = c.get("isRootRelative", False)
    else:
        problems.append(f"unknown component type {t}")
    out["components"].append(entry)
if problems:
    sys.exit("not as the format document says: " + "; ".join(problems))
print(json.dumps(out))
"#;

/// `$MOTIOND_PYTHON` (default `python3`) if it can import PyYAML; `None` to skip outside CI.
fn python() -> Option<String> {
    let python = std::env::var("MOTIOND_PYTHON").unwrap_or_else(|_| "python3".into());
    let ok = Command::new(&python)
        .args(["-c", "import yaml"])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        return Some(python);
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{python} cannot import yaml (CI=true): .ci/run installs PyYAML");
    }
    eprintln!("skipping the PyYAML check: {python} cannot import yaml");
    None
}

/// What PyYAML reads from `path`, after the format check.
fn pyyaml(python: &str, path: &Path) -> Value {
    let out = Command::new(python)
        .args(["-c", PYYAML_CHECK])
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn floats(v: &Value) -> Vec<f64> {
    match v {
        Value::Array(items) => items.iter().flat_map(floats).collect(),
        Value::String(text) => vec![text.parse().unwrap()],
        other => panic!("not a number: {other}"),
    }
}

/// Every number of a loaded motion, per component, in file order (quaternions w first).
fn motion_numbers(m: &Motion) -> Vec<(String, Vec<f64>)> {
    m.components
        .iter()
        .map(|c| {
            let values = match &c.data {
                seq::Channel::Values(v) => v.values.clone(),
                seq::Channel::Poses(p) => p
                    .poses
                    .iter()
                    .flat_map(|pose| {
                        let (t, q) = (pose.translation.vector, pose.rotation.coords);
                        [t.x, t.y, t.z, q.w, q.x, q.y, q.z]
                    })
                    .collect(),
                seq::Channel::Vectors(v) => v.values.iter().flat_map(|p| [p.x, p.y, p.z]).collect(),
            };
            (c.content.clone(), values)
        })
        .collect()
}

fn assert_pyyaml_reads(python: &str, path: &Path, motion: &Motion) {
    let read = pyyaml(python, path);
    assert_eq!(read["frameRate"].as_f64(), motion.frame_rate);
    let components = read["components"].as_array().unwrap();
    let ours = motion_numbers(motion);
    assert_eq!(components.len(), ours.len());
    for (c, (content, values)) in components.iter().zip(&ours) {
        assert_eq!(c["content"].as_str(), Some(content.as_str()));
        // Quaternions are normalised on load, so poses agree to rounding; the rest exactly.
        let theirs = floats(&c["frames"]);
        assert_eq!(theirs.len(), values.len(), "{content}");
        for (a, b) in theirs.iter().zip(values) {
            if content == "LinkPosition" {
                assert!((a - b).abs() < 1e-12, "{content}: {a} vs {b}");
            } else {
                assert_eq!(a.to_bits(), b.to_bits(), "{content}: {a} vs {b}");
            }
        }
    }
    if let Some(names) = motion.joint_names() {
        let jd = components
            .iter()
            .find(|c| c["content"] == "JointDisplacement")
            .unwrap();
        let labels: Vec<&str> = jd["partLabels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(labels, names);
    }
}

/// A Choreonoid sample motion with joints, the root link's pose and the ZMP, written back by
/// motiond: every value survives, and PyYAML reads it as the format document says.
#[test]
fn a_choreonoid_motion_written_back_is_the_same_motion() {
    let Some(corpus) = common::corpus() else {
        return;
    };
    let source = seq::load(&corpus.join("seq/v1/SR1WalkPattern2.yaml")).unwrap();
    let jd = source.joint_displacement().unwrap();
    let link = source.link_position().unwrap();
    let zmp = source.zmp().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("walk.seq");
    seq::write_motion(
        &path,
        &Written {
            frame_rate: jd.timing.frame_rate().unwrap(),
            columns: jd.num_parts,
            joint_names: None,
            rows: &jd.values,
            link: Some(LinkPoses {
                parts: link.num_parts,
                poses: &link.poses,
            }),
            zmp: Some(Zmp {
                root_relative: zmp.root_relative,
                points: &zmp.values,
            }),
        },
    )
    .unwrap();
    let back = seq::load(&path).unwrap();
    assert_eq!(back.joint_displacement().unwrap().values, jd.values);
    assert_eq!(back.zmp().unwrap().values, zmp.values);
    let poses = &back.link_position().unwrap().poses;
    assert_eq!(poses.len(), link.poses.len());
    for (a, b) in poses.iter().zip(&link.poses) {
        assert_eq!(a.translation, b.translation);
        assert!(a.rotation.angle_to(&b.rotation) < 1e-12);
    }
    if let Some(python) = python() {
        assert_pyyaml_reads(&python, &path, &back);
    }
}

/// A demo-arm motion with all three components, at 50 Hz.
fn demo_motion_with_link_and_zmp(dir: &Path) -> PathBuf {
    let frames = 101;
    let rows: Vec<f64> = (0..frames)
        .flat_map(|i| {
            // At rest at both ends, as a played motion must be.
            let s = (i as f64 / (frames - 1) as f64 * std::f64::consts::PI)
                .sin()
                .powi(2);
            [0.3 * s, 0.2 * s, -0.3 * s, 0.1 * s, 0.2 * s, 0.01 * s]
        })
        .collect();
    let poses: Vec<Isometry3<f64>> = (0..frames)
        .map(|i| {
            let t = i as f64 / 50.0;
            Isometry3::from_parts(
                Translation3::new(0.6 + 0.01 * t, -0.1 * t, 0.2),
                UnitQuaternion::from_euler_angles(0.0, 0.1 * t, -0.2 * t),
            )
        })
        .collect();
    let points: Vec<Vector3<f64>> = (0..frames)
        .map(|i| Vector3::new(0.001 * i as f64, 0.0, -0.002 * i as f64))
        .collect();
    let names: Vec<String> = [
        "base_yaw",
        "shoulder_pitch",
        "elbow_pitch",
        "wrist_pitch",
        "wrist_roll",
        "gripper_slide",
    ]
    .map(String::from)
    .to_vec();
    let path = dir.join("source.seq");
    seq::write_motion(
        &path,
        &Written {
            frame_rate: 50.0,
            columns: 6,
            joint_names: Some(&names),
            rows: &rows,
            link: Some(LinkPoses {
                parts: 1,
                poses: &poses,
            }),
            zmp: Some(Zmp {
                root_relative: true,
                points: &points,
            }),
        },
    )
    .unwrap();
    path
}

/// `motiond resample --format seq` keeps LinkPosition and ZMP, resampled onto the same frames as
/// the joints; `inspect seq` and PyYAML read the result.
#[test]
fn resample_to_seq_keeps_link_position_and_zmp() {
    let dir = tempfile::tempdir().unwrap();
    let source_path = demo_motion_with_link_and_zmp(dir.path());
    let source = seq::load(&source_path).unwrap();
    let out = dir.path().join("out.seq");
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/motiond.yaml");
    let run = Command::new(MOTIOND)
        .args(["resample", "--rate", "100", "--format", "seq"])
        .arg("--config")
        .arg(&config)
        .arg(&source_path)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert!(!stderr.contains("not written"), "{stderr}");

    let inspect = Command::new(MOTIOND)
        .args(["inspect", "seq"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(inspect.status.success());
    let json: Value = serde_json::from_slice(&inspect.stdout).unwrap();
    let summary: Vec<(String, u64, f64)> = json["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["content"].as_str().unwrap().to_string(),
                c["rows"].as_u64().unwrap(),
                c["frame_rate"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("LinkPosition".to_string(), 201, 100.0),
            ("JointDisplacement".to_string(), 201, 100.0),
            ("ZMP".to_string(), 201, 100.0)
        ]
    );

    // Every second frame is a source frame: the values there are the source's.
    let back = seq::load(&out).unwrap();
    assert_eq!(back.joint_names(), source.joint_names());
    let (jd, src) = (
        back.joint_displacement().unwrap(),
        source.joint_displacement().unwrap(),
    );
    for i in 0..src.rows() {
        for (a, b) in jd.row(2 * i).iter().zip(src.row(i)) {
            assert!((a - b).abs() < 1e-12, "joint frame {i}: {a} vs {b}");
        }
    }
    let (link, src_link) = (
        back.link_position().unwrap(),
        source.link_position().unwrap(),
    );
    for (i, b) in src_link.poses.iter().enumerate() {
        let a = link.poses[2 * i];
        assert!((a.translation.vector - b.translation.vector).norm() < 1e-12);
        assert!(a.rotation.angle_to(&b.rotation) < 1e-9);
    }
    // Halfway between two source frames: the straight line and the slerp.
    let mid = link.poses[1];
    let (p0, p1) = (src_link.poses[0], src_link.poses[1]);
    let expected = p0.translation.vector.lerp(&p1.translation.vector, 0.5);
    assert!((mid.translation.vector - expected).norm() < 1e-12);
    assert!(mid.rotation.angle_to(&p0.rotation.slerp(&p1.rotation, 0.5)) < 1e-9);
    let (zmp, src_zmp) = (back.zmp().unwrap(), source.zmp().unwrap());
    assert!(zmp.root_relative);
    for (i, b) in src_zmp.values.iter().enumerate() {
        assert!((zmp.values[2 * i] - b).norm() < 1e-12);
    }
    if let Some(python) = python() {
        assert_pyyaml_reads(&python, &out, &back);
    }
}
