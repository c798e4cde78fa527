//! The trajectory engine on real motions: Choreonoid's SR1 walk patterns on the SR1 SKEL model.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

mod common;

use std::path::{Path, PathBuf};

use motiond::config::joint_map::JointMap;
use motiond::motion::seq::{self, Channel, Motion};
use motiond::robot::skel;
use motiond::trajectory::{
    self, BuildError, ColumnMap, Cursor, Interpolation, JointSet, Options, Quantity, Setpoint,
    Trajectory,
};

struct Sr1 {
    joints: JointSet,
    names: Vec<String>,
    corpus: PathBuf,
}

fn sr1() -> Option<Sr1> {
    let corpus = common::corpus()?;
    let world = skel::load(&corpus.join("robots/sr1.skel")).unwrap();
    let joints = JointSet::from_world(&world, &[]).unwrap();
    let names = JointMap::load(corpus.join("robots/sr1-joints.yaml"))
        .unwrap()
        .joints;
    Some(Sr1 {
        joints,
        names,
        corpus,
    })
}

fn load(path: &Path) -> Motion {
    seq::load(path).unwrap_or_else(|e| panic!("{e}"))
}

fn at_1khz() -> Options {
    Options {
        rate_hz: 1000.0,
        ..Options::default()
    }
}

/// Positions of every tick, row-major in JointSet order.
fn positions(t: &Trajectory) -> Vec<f64> {
    let mut cursor = Cursor::default();
    let mut out = vec![Setpoint::default(); t.dofs()];
    let mut all = Vec::with_capacity(t.ticks() as usize * t.dofs());
    for k in 0..t.ticks() {
        t.sample(&mut cursor, k, &mut out);
        all.extend(out.iter().map(|s| s.position));
    }
    all
}

#[test]
fn sr1_walk_patterns_resample_to_1khz_and_are_proved() {
    let Some(sr1) = sr1() else { return };
    // sr1.skel gives RARM_ELBOW a velocity limit of [-0, 0] (LARM_ELBOW has [-10, 10]): a motion
    // that moves that elbow at all must be refused, and pattern 1 is the one that does not.
    let elbow = sr1.joints.index_of("RARM_ELBOW").unwrap();
    assert_eq!(sr1.joints.dofs[elbow].limits.velocity.upper, 0.0);
    let mut mirrored = sr1.joints.clone();
    let left = sr1.joints.dofs[sr1.joints.index_of("LARM_ELBOW").unwrap()].limits;
    mirrored.dofs[elbow].limits.velocity = left.velocity;

    for (pattern, seconds) in [(1, 13.4), (2, 14.29), (3, 8.9)] {
        let path = sr1
            .corpus
            .join(format!("seq/v2/SR1WalkPattern{pattern}.seq"));
        let motion = load(&path);
        let rows = motion.joint_displacement().unwrap().rows();
        assert!(
            ((rows - 1) as f64 / 500.0 - seconds).abs() < 1e-9,
            "{pattern}: {rows}"
        );
        let map = ColumnMap::by_name(&sr1.joints, &sr1.names, 29).unwrap();
        let result = trajectory::build(&sr1.joints, &motion, &map, &at_1khz());
        if pattern == 1 {
            let proved = result.unwrap();
            assert!(proved.report.passed());
            assert_eq!(proved.trajectory.ticks(), 13401);
        } else {
            let Err(BuildError::Refused(report)) = result else {
                panic!("pattern {pattern} moves RARM_ELBOW and must be refused")
            };
            assert!(
                report
                    .violations
                    .iter()
                    .all(|v| v.dof == "RARM_ELBOW" && v.quantity == Quantity::Velocity),
                "{report}"
            );
        }
        // Every other limit holds: with the right elbow limited like the left one, all pass.
        let proved = trajectory::build(&mirrored, &motion, &map, &at_1khz())
            .unwrap_or_else(|e| panic!("pattern {pattern}: {e}"));
        let ticks = (seconds * 1000.0).round() as u64 + 1;
        assert_eq!(proved.trajectory.ticks(), ticks, "pattern {pattern}");
        // The 500 Hz samples come back exactly on the even ticks.
        let jd = motion.joint_displacement().unwrap();
        let p = positions(&proved.trajectory);
        let n = proved.trajectory.dofs();
        for row in (0..rows).step_by(97) {
            for (c, &i) in map.columns().iter().enumerate() {
                let want = jd.values[row * 29 + c];
                let got = p[2 * row * n + i];
                assert!(
                    (got - want).abs() < 1e-12,
                    "pattern {pattern} row {row} col {c}"
                );
            }
        }
    }
}

#[test]
fn a_motion_pushed_past_a_limit_is_refused_with_the_joint_and_time() {
    let Some(sr1) = sr1() else { return };
    let mut motion = load(&sr1.corpus.join("seq/v2/SR1WalkPattern1.seq"));
    let knee = sr1.names.iter().position(|n| n == "RLEG_KNEE").unwrap();
    // Bend the right knee past its upper limit (2.618 rad) from 5 s to 5.2 s.
    for c in &mut motion.components {
        if let Channel::Values(v) = &mut c.data {
            for row in 2500..=2600 {
                let t = (row - 2500) as f64 / 100.0;
                v.values[row * 29 + knee] += 2.0 * (std::f64::consts::PI * t).sin();
            }
        }
    }
    let map = ColumnMap::by_name(&sr1.joints, &sr1.names, 29).unwrap();
    let Err(BuildError::Refused(report)) =
        trajectory::build(&sr1.joints, &motion, &map, &at_1khz())
    else {
        panic!("must be refused")
    };
    let v = report
        .violations
        .iter()
        .find(|v| v.quantity == Quantity::Position)
        .unwrap_or_else(|| panic!("{report}"));
    assert_eq!(v.dof, "RLEG_KNEE");
    assert_eq!(v.limit, 2.61799388);
    assert!(v.value > 2.61799388);
    assert!(
        v.first_s > 5.0 && v.time_s < 5.2 && v.first_s <= v.time_s,
        "{v}"
    );
    assert!(
        report.to_string().contains("RLEG_KNEE: position"),
        "{report}"
    );
}

/// (max, RMS) error of resampling the irregular log to 500 Hz against the original 500 Hz motion.
fn error_vs_ground_truth(corpus: &Path, interpolation: Interpolation) -> (f64, f64) {
    let truth = load(&corpus.join("seq/v2/SR1WalkPattern3.seq"));
    let truth = truth.joint_displacement().unwrap();
    let log = load(&corpus.join("seq/timed/SR1WalkPattern3-irregular.seq"));
    let joints = JointSet::unconstrained(29);
    let map = ColumnMap::in_dof_order(&joints, 29).unwrap();
    let options = Options {
        rate_hz: 500.0,
        interpolation,
        ..Options::default()
    };
    let t = trajectory::build(&joints, &log, &map, &options)
        .unwrap()
        .trajectory;
    assert_eq!(t.ticks() as usize, truth.rows());
    let p = positions(&t);
    let (mut max, mut sum) = (0.0f64, 0.0);
    for (got, want) in p.iter().zip(&truth.values) {
        let e = got - want;
        max = max.max(e.abs());
        sum += e * e;
    }
    (max, (sum / p.len() as f64).sqrt())
}

#[test]
fn pchip_is_far_closer_to_ground_truth_than_hold() {
    let Some(corpus) = common::corpus() else {
        return;
    };
    let mut results = Vec::new();
    for interpolation in [
        Interpolation::Hold,
        Interpolation::Linear,
        Interpolation::Pchip,
        Interpolation::Cubic,
    ] {
        let (max, rms) = error_vs_ground_truth(&corpus, interpolation);
        println!(
            "SR1WalkPattern3-irregular → 500 Hz vs SR1WalkPattern3: {:6} max {max:.6} rad, RMS {rms:.6} rad",
            interpolation.as_str()
        );
        results.push((max, rms));
    }
    let (hold, pchip) = (results[0], results[2]);
    assert!(
        pchip.0 < 0.5 * hold.0,
        "max: pchip {} vs hold {}",
        pchip.0,
        hold.0
    );
    assert!(
        pchip.1 < 0.25 * hold.1,
        "RMS: pchip {} vs hold {}",
        pchip.1,
        hold.1
    );
}
