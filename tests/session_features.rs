//! Beyond playback, through the library `Session` on the simulated backend (stepped, so every run
//! is the same):
//! - a replacement at a random time of a random motion, by another, never leaves the limits and
//!   has no seam (the whole stream within `trajectory::Envelope`: position, velocity, acceleration
//!   and the velocity field's steps);
//! - joint groups never command a DOF outside its group's motion or hold;
//! - teach-in: what a hand moves the compliant robot through is recorded, proved and played back
//!   within the simulated drives' tracking error.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

use std::sync::Arc;
use std::time::Duration;

use motiond::backend::sim::{Sim, SimSettings};
use motiond::estop::SimInput;
use motiond::motion::take::Take;
use motiond::robot::Limits;
use motiond::rt::{ManualClock, Outcome, Repeat, Settings, State, TraceRow};
use motiond::session::{PlayRequest, Session};
use motiond::trajectory::{
    BuildError, ColumnMap, DofLimits, Envelope, JointSet, Options, Proved, build_values,
};
use proptest::prop_assert;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

#[path = "support/random_motion.rs"]
mod random_motion;
use random_motion::{Case, case, joints, samples};

const RATE: f64 = 1000.0;

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(48)
}

fn prove(case: &Case, js: &JointSet) -> Option<Proved> {
    let seq = samples(case, false);
    let map = ColumnMap::in_dof_order(js, js.len()).unwrap();
    let options = Options {
        rate_hz: RATE,
        interpolation: case.interpolation,
        policy: case.policy,
        speed: case.speed,
    };
    match build_values(js, &seq, &map, &options) {
        Ok(p) if p.trajectory.duration_s() <= 20.0 => Some(p),
        Ok(_) | Err(BuildError::Refused(_)) => None,
        Err(e) => panic!("{e}"),
    }
}

fn session(js: &JointSet, groups: Vec<Vec<usize>>) -> (Session, Arc<motiond::backend::sim::Hand>) {
    let sim = Sim::new(
        js,
        RATE,
        &SimSettings {
            following_error: 1e9,
            ..SimSettings::default()
        },
    );
    let hand = sim.hand();
    let settings = Settings {
        trace_ticks: 1 << 12,
        groups,
        ..Settings::default()
    };
    let s = Session::stepped(
        settings,
        Box::new(sim),
        None,
        js.clone(),
        ManualClock::new(0),
    )
    .unwrap();
    s.keep_trace();
    s.enable().unwrap();
    (s, hand)
}

fn request(name: &str, group: Option<&str>) -> PlayRequest {
    PlayRequest {
        name: name.into(),
        speed: 1.0,
        repeat: Repeat::Once,
        start_at: None,
        group: group.map(String::from),
    }
}

fn within_envelope(rows: &[TraceRow], js: &JointSet) -> Result<(), TestCaseError> {
    for stream in rows.split(|r| r.state == State::Disabled) {
        let mut e = Envelope::new(js, RATE);
        for row in stream {
            e.push(&row.commanded).map_err(|b| {
                TestCaseError::fail(format!("tick {} ({}): {b}", row.tick, row.state.as_str()))
            })?;
        }
    }
    Ok(())
}

#[test]
fn a_replacement_at_a_random_time_stays_within_the_limits_without_a_seam() {
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        ..Config::default()
    });
    let (replaced, played) = (std::cell::Cell::new(0u32), std::cell::Cell::new(0u32));
    runner
        .run(&(case(), case()), |(a, b)| {
            // The same robot for both motions: b's rows under a's limits.
            let b = Case {
                limits: a.limits.clone(),
                rows: b
                    .rows
                    .iter()
                    .map(|r| r[..1].repeat(a.limits.len()))
                    .collect(),
                ..b
            };
            let js = joints(&a);
            let (Some(pa), Some(pb)) = (prove(&a, &js), prove(&b, &js)) else {
                return Ok(());
            };
            played.set(played.get() + 1);
            let (s, _) = session(&js, vec![]);
            let duration = pa.trajectory.duration_s();
            let started = s.play_trajectory("a", pa, Repeat::Once, None).unwrap();
            let at = started.approach_s + a.at * duration;
            s.wait_for(Duration::from_secs_f64(at), |_| None::<()>);
            match s.replace_proved(pb, &request("b", None)) {
                Ok(_) => replaced.set(replaced.get() + 1),
                // An infeasible blend, or a motion that ends first, is refused: never a jump.
                Err(e) => prop_assert!(
                    e.message.contains("limits") || e.message.contains("ends before"),
                    "{e}"
                ),
            }
            s.settle(Duration::from_secs(60));
            s.wait_for(Duration::from_millis(20), |_| None::<()>);
            let (rows, dropped) = s.trace();
            prop_assert!(dropped == 0);
            within_envelope(&rows, &js)
        })
        .unwrap();
    let (replaced, played) = (replaced.get(), played.get());
    println!("{played} pairs played, {replaced} replaced mid-motion");
    assert!(
        replaced * 4 >= played,
        "only {replaced} of {played} replaced"
    );
}

#[test]
fn groups_never_move_a_joint_outside_their_motion_or_hold() {
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        ..Config::default()
    });
    runner
        .run(&(case(), case(), 0.0f64..1.0), |(a, b, offset)| {
            // Two groups: DOF 0 (a's first column), DOF 1 (b's first column).
            let one = |c: &Case| Case {
                limits: c.limits[..1].to_vec(),
                rows: c.rows.iter().map(|r| r[..1].to_vec()).collect(),
                ..c.clone()
            };
            let (a, b) = (one(&a), one(&b));
            let (ja, jb) = (joints(&a), joints(&b));
            let (Some(pa), Some(pb)) = (prove(&a, &ja), prove(&b, &jb)) else {
                return Ok(());
            };
            let mut js = ja.clone();
            js.dofs.extend(jb.dofs.iter().cloned());
            js.dofs[1].name = "c1".into();
            let (s, _) = session(&js, vec![vec![0], vec![1]]);
            let s = s.name_groups(&["left".into(), "right".into()]);
            let a_duration = pa.trajectory.duration_s();
            let left = s.play_trajectory_in("a", pa, Some("left")).unwrap();
            s.wait_for(
                Duration::from_secs_f64(left.approach_s + offset * a_duration),
                |_| None::<()>,
            );
            let before_b = s.status().tick;
            s.play_trajectory_in("b", pb, Some("right")).unwrap();
            s.settle(Duration::from_secs(120));
            let status = s.status();
            prop_assert!(status.fault.is_none(), "{status:?}");
            let (rows, _) = s.trace();
            within_envelope(&rows, &js)?;
            // The right group's DOF held still until its own motion began.
            let held: Vec<f64> = rows
                .iter()
                .filter(|r| r.state != State::Disabled && r.tick <= before_b)
                .map(|r| r.commanded[1].position)
                .collect();
            prop_assert!(
                held.windows(2).all(|w| w[0] == w[1]),
                "DOF 1 moved before its group played"
            );
            Ok(())
        })
        .unwrap();
}

#[test]
fn a_teach_in_plays_back_what_the_hand_did() {
    let js = JointSet::uniform(
        2,
        DofLimits {
            position: Limits::symmetric(2.0),
            velocity: Limits::symmetric(2.0),
            acceleration: Limits::symmetric(20.0),
            effort: Limits::symmetric(100.0),
        },
    );
    let (s, hand) = session(&js, vec![]);
    // 50 Hz frames from a 1 kHz loop, into a take on disk.
    let dir = tempfile::tempdir().unwrap();
    let names = vec!["c0".to_string(), "c1".to_string()];
    let take = Take::create(dir.path(), "taught", 50.0, names.clone(), 10_000).unwrap();
    s.record_start(vec![0, 1], 20, take).unwrap();
    let path = |t: f64| {
        let x = 0.5 * (1.0 - (std::f64::consts::PI * t / 2.0).cos());
        [x, -0.6 * x]
    };
    for k in 0..=2000u64 {
        let p = path(k as f64 / RATE);
        hand.put(0, p[0]);
        hand.put(1, p[1]);
        s.wait_for(Duration::from_millis(1), |_| None::<()>);
    }
    let mut ended = s.record_stop().unwrap();
    assert_eq!(ended.interrupted, None);
    let closed = ended.take.close().unwrap();
    assert_eq!(closed.frame_rate, 50.0);
    assert_eq!(closed.joints, names);
    assert!(
        (100..=102).contains(&closed.frames),
        "{} frames",
        closed.frames
    );
    // The take is a motion file: proved like any motion, and played back: the drives go
    // through the hand's path.
    let motion = motiond::motion::seq::load(&closed.path).unwrap();
    let seq = motion.joint_displacement().unwrap().clone();
    assert_eq!(seq.num_parts, 2);
    let map = ColumnMap::in_dof_order(&js, 2).unwrap();
    let proved = build_values(
        &js,
        &seq,
        &map,
        &Options {
            rate_hz: RATE,
            ..Options::default()
        },
    )
    .unwrap();
    let started = s
        .play_trajectory("taught", proved, Repeat::Once, None)
        .unwrap();
    let outcome = s.run(started.motion_id, &[], Duration::from_secs(30), || None);
    assert_eq!(outcome, Some(Outcome::Finished));
    let (rows, _) = s.trace();
    let worst = rows
        .iter()
        .filter(|r| r.state == State::Playing)
        // The hand kept both DOFs on one line, y = −0.6 x: the playback must too.
        .map(|r| (r.measured[1] + 0.6 * r.measured[0]).abs())
        .fold(0.0, f64::max);
    assert!(worst < 0.01, "off the taught path by {worst}");
}

/// Issue 21 F2, as a property: a fault, the E-stop, a drive's own E-stop, a `disable` or a
/// `shutdown` at a random time while a hand moves a compliant joint at up to twice its velocity
/// limit: the robot stops where the joint is — once the drives are stiff again they hold one
/// pose, inside the limits, and never continue the hand's motion.
#[test]
fn a_stop_at_a_random_time_in_a_teach_in_holds_where_the_joint_is() {
    use motiond::backend::sim::SimFaultKind;
    use proptest::prelude::*;
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        ..Config::default()
    });
    let events = prop_oneof![Just(0u8), Just(1), Just(2), Just(3), Just(4)];
    let stopped = std::cell::Cell::new(0u32);
    runner
        .run(
            &(events, 0.05f64..0.9, 0.2f64..2.0),
            |(event, at, speed)| {
                let js = JointSet::uniform(
                    2,
                    DofLimits {
                        position: Limits::symmetric(2.0),
                        velocity: Limits::symmetric(2.0),
                        acceleration: Limits::symmetric(20.0),
                        effort: Limits::symmetric(100.0),
                    },
                );
                let sim = Sim::new(
                    &js,
                    RATE,
                    &SimSettings {
                        following_error: 1e9,
                        ..SimSettings::default()
                    },
                );
                let (hand, injector) = (sim.hand(), sim.injector());
                let (input, switch) = SimInput::new(0);
                let settings = Settings {
                    trace_ticks: 1 << 12,
                    estop_drive: true,
                    ..Settings::default()
                };
                let s = Session::stepped(
                    settings,
                    Box::new(sim),
                    Some(Box::new(input)),
                    js.clone(),
                    ManualClock::new(0),
                )
                .unwrap();
                s.keep_trace();
                s.enable().unwrap();
                let takes = tempfile::tempdir().unwrap();
                let names = vec!["a".to_string(), "b".to_string()];
                let take = Take::create(takes.path(), "t", 100.0, names, 1 << 20).unwrap();
                s.record_start(vec![0, 1], 10, take).unwrap();
                // Joint 0 swept towards its limit at `speed` × its velocity limit.
                let event_tick = (at * 1000.0) as u64;
                for k in 0..=1000u64 {
                    let t = k as f64 / RATE;
                    hand.put(0, (2.0 * speed * t).min(1.9));
                    hand.put(1, -0.2 * t);
                    if k == event_tick {
                        match event {
                            0 => injector.inject(SimFaultKind::Error, Some(1)),
                            1 => switch.press(),
                            2 => injector.inject(SimFaultKind::Estop, Some(0)),
                            3 => {
                                let _ = s.disable();
                            }
                            _ => {
                                let _ = s.shutdown(Duration::from_secs(5), || false);
                            }
                        }
                    }
                    s.wait_for(Duration::from_millis(1), |_| None::<()>);
                }
                s.settle(Duration::from_secs(10));
                let (rows, dropped) = s.trace();
                prop_assert!(dropped == 0);
                let after: Vec<&TraceRow> = rows
                    .iter()
                    .filter(|r| r.tick > event_tick + 20 && r.state != State::Disabled)
                    .collect();
                if let (Some(first), Some(last)) = (after.first(), after.last()) {
                    stopped.set(stopped.get() + 1);
                    for (j, d) in js.dofs.iter().enumerate() {
                        let (p0, p1) = (first.commanded[j].position, last.commanded[j].position);
                        prop_assert!(p0 == p1, "DOF {j} moved on after the stop: {p0} → {p1}");
                        prop_assert!(d.limits.position.contains(p1), "DOF {j} at {p1}");
                    }
                }
                Ok(())
            },
        )
        .unwrap();
    println!("{} teach-ins stopped and held", stopped.get());
}

#[test]
fn the_estop_is_refused_in_words_until_released_and_recover_brings_the_robot_back() {
    let js = JointSet::uniform(
        2,
        DofLimits {
            position: Limits::symmetric(2.0),
            velocity: Limits::symmetric(2.0),
            acceleration: Limits::symmetric(20.0),
            effort: Limits::symmetric(100.0),
        },
    );
    let sim = Sim::new(&js, RATE, &SimSettings::default());
    let (input, switch) = SimInput::new(0);
    let s = Session::stepped(
        Settings::default(),
        Box::new(sim),
        Some(Box::new(input)),
        js,
        ManualClock::new(0),
    )
    .unwrap();
    s.enable().unwrap();
    switch.press();
    let stopped = s.wait_for(Duration::from_millis(50), |st| {
        (st.state == State::EStop).then_some(())
    });
    assert!(stopped.is_some(), "{:?}", s.status());
    for e in [s.clear_fault().unwrap_err(), s.enable().unwrap_err()] {
        assert!(
            e.message
                .contains("E-stop: the E-stop input is asserted; release it"),
            "{}",
            e.message
        );
    }
    switch.release();
    s.wait_for(Duration::from_millis(10), |_| None::<()>);
    s.recover().unwrap();
    assert_eq!(s.state(), State::Idle);
}
