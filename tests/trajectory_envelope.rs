//! The safety envelope of the trajectory engine, measured on the commanded stream as a drive sees
//! it (`trajectory::Envelope`: positions, finite-difference velocity and acceleration, the fields
//! and their steps), over random motions with bounded limits × every interpolation × every limit
//! policy × speed; stops planned at random ticks; loops across their seam; and the cases of
//! issue 10 one by one.
//!
//! `PROPTEST_CASES=5000 cargo test --release --test trajectory_envelope -- --nocapture` prints
//! the worst share of each limit used.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

use std::cell::Cell;
use std::path::Path;

use motiond::motion::seq::{MultiValueSeq, Timing};
use motiond::robot::{Limits, skel};
use motiond::trajectory::{
    self, BuildError, ColumnMap, Cursor, DofLimits, Envelope, Interpolation, JointSet, LimitPolicy,
    Measure, Options, Quantity, SeamError, Setpoint, Stop, StopKind, Trajectory, Usage,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

const INTERPOLATIONS: [Interpolation; 4] = [
    Interpolation::Hold,
    Interpolation::Linear,
    Interpolation::Pchip,
    Interpolation::Cubic,
];

fn cases(default: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default);
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

fn timed(times: Vec<f64>, values: Vec<f64>, cols: usize) -> MultiValueSeq {
    MultiValueSeq {
        num_parts: cols,
        timing: Timing::Timed {
            times,
            frame_rate: None,
        },
        values,
    }
}

fn at_rest(s: &[Setpoint]) -> Vec<Setpoint> {
    s.iter()
        .map(|s| Setpoint {
            position: s.position,
            ..Setpoint::default()
        })
        .collect()
}

/// What the drives receive when `t` is played from rest and back to rest: two ticks at rest at the
/// first sample, the trajectory's ticks (at tick times shifted by `phase` periods, for a player
/// sampling between ticks), two ticks at rest at the end.
fn stream(t: &Trajectory, phase: f64) -> Vec<Vec<Setpoint>> {
    let n = t.dofs();
    let rest = at_rest(t.first_setpoints());
    let mut out = vec![rest.clone(), rest];
    let mut cursor = Cursor::default();
    let end = (t.ticks() - 1) as f64 / t.rate_hz();
    for k in 0..t.ticks() {
        let time = (k as f64 + phase) / t.rate_hz();
        if phase > 0.0 && time > end {
            break;
        }
        let mut s = vec![Setpoint::default(); n];
        t.sample_at_time(&mut cursor, time, &mut s);
        out.push(s);
    }
    for _ in 0..2 {
        let mut s = vec![Setpoint::default(); n];
        t.sample(&mut cursor, t.ticks(), &mut s);
        out.push(s);
    }
    out
}

fn check(joints: &JointSet, rate: f64, stream: &[Vec<Setpoint>]) -> Result<Usage, String> {
    Envelope::check(joints, rate, stream.iter().map(Vec::as_slice)).map_err(|b| {
        let from = b.tick.saturating_sub(3) as usize;
        let to = (b.tick as usize + 3).min(stream.len());
        let around: Vec<f64> = stream[from..to].iter().map(|s| s[b.dof].position).collect();
        format!("{b}; positions from tick {from}: {around:?}")
    })
}

/// Limits per DOF: bounded position (asymmetric), signed velocity and acceleration.
fn limits() -> impl Strategy<Value = DofLimits> {
    (
        -1.5..-0.5f64,
        0.5..1.5f64,
        0.3..3.0f64,
        0.5..1.5f64,
        1.0..30.0f64,
        0.5..1.5f64,
    )
        .prop_map(|(lo, hi, v, v_skew, a, a_skew)| DofLimits {
            position: Limits {
                lower: lo,
                upper: hi,
            },
            velocity: Limits {
                lower: -v,
                upper: v * v_skew,
            },
            acceleration: Limits {
                lower: -a * a_skew,
                upper: a,
            },
            effort: Limits::UNBOUNDED,
        })
}

#[derive(Debug, Clone)]
struct Case {
    limits: Vec<DofLimits>,
    times: Vec<f64>,
    values: Vec<f64>,
    options: Options,
}

impl Case {
    fn joints(&self) -> JointSet {
        let mut js = JointSet::uniform(self.limits.len(), self.limits[0]);
        for (d, l) in js.dofs.iter_mut().zip(&self.limits) {
            d.limits = *l;
        }
        js
    }

    fn build(&self) -> Result<trajectory::Proved, BuildError> {
        let js = self.joints();
        let cols = js.len();
        let map = ColumnMap::in_dof_order(&js, cols).unwrap();
        let seq = timed(self.times.clone(), self.values.clone(), cols);
        trajectory::build_values(&js, &seq, &map, &self.options)
    }
}

/// A random motion: a random walk of 3 to 24 frames 20–300 ms apart (a few frames a little
/// outside the position limits, for clamp), held still for one frame at each end, so a fair
/// share of them can be proved.
fn motions() -> impl Strategy<Value = Case> {
    (1usize..=3)
        .prop_flat_map(|dofs| {
            (
                prop::collection::vec(limits(), dofs),
                prop::collection::vec(0.02..0.3f64, 2..24),
                prop::collection::vec(-0.25..0.25f64, 24 * dofs),
                prop::collection::vec(-0.8..0.8f64, dofs),
                prop::sample::select(INTERPOLATIONS.to_vec()),
                prop::sample::select(vec![
                    LimitPolicy::Reject,
                    LimitPolicy::Clamp,
                    LimitPolicy::Retime,
                ]),
                prop::sample::select(vec![100.0, 250.0, 1000.0]),
                0.3..2.0f64,
            )
        })
        .prop_map(
            |(limits, gaps, steps, start, interpolation, policy, rate_hz, speed)| {
                let dofs = limits.len();
                let mut times = vec![0.0];
                for g in &gaps {
                    times.push(times.last().unwrap() + g);
                }
                let mut row = start.clone();
                let mut values = row.clone();
                for (i, _) in gaps.iter().enumerate() {
                    // Still between the first two and the last two frames.
                    if i > 0 && i + 1 < gaps.len() {
                        for (c, p) in row.iter_mut().enumerate() {
                            *p += steps[i * dofs + c] * gaps[i] * 4.0;
                        }
                    }
                    values.extend_from_slice(&row);
                }
                Case {
                    limits,
                    times,
                    values,
                    options: Options {
                        rate_hz,
                        interpolation,
                        policy,
                        speed,
                    },
                }
            },
        )
}

/// Every proved trajectory, played from rest to rest (and at a shifted phase for hold and
/// linear), and stops planned at any tick of it, stay within the envelope.
#[test]
fn proved_motions_and_their_stops_stay_within_the_envelope() {
    let mut runner = TestRunner::new(cases(64));
    let worst = Cell::new(Usage::default());
    let proved = Cell::new(0u32);
    let strategy = (motions(), 0.0..1.0f64, 0.0..1.0f64, 0.0..1.0f64);
    runner
        .run(&strategy, |(case, phase, at, quick_share)| {
            let Ok(p) = case.build() else {
                return Ok(());
            };
            proved.set(proved.get() + 1);
            let js = case.joints();
            let rate = case.options.rate_hz;
            let t = &p.trajectory;
            let shifted = matches!(
                case.options.interpolation,
                Interpolation::Hold | Interpolation::Linear
            );
            let phases: &[f64] = if shifted { &[0.0, phase] } else { &[0.0] };
            for &phase in phases {
                let s = stream(t, phase);
                let usage = check(&js, rate, &s).map_err(TestCaseError::fail)?;
                worst.set(worst.get().max(usage));
                // A stop from any tick of that stream, planned or quick.
                let i = 1 + ((s.len() - 2) as f64 * at) as usize;
                let quick: Vec<f64> = js
                    .dofs
                    .iter()
                    .map(|d| quick_share.max(0.2) * d.limits.acceleration.upper)
                    .collect();
                for (kind, quick) in [
                    (StopKind::Planned, &[][..]),
                    (StopKind::Quick, &[][..]),
                    (StopKind::Quick, &quick[..]),
                ] {
                    let mut stop = Stop::new(&js, rate, quick);
                    stop.plan(&s[i - 1], &s[i], kind);
                    let mut with_stop = s[..=i].to_vec();
                    for k in 1..stop.ticks() + 2 {
                        let mut out = vec![Setpoint::default(); js.len()];
                        stop.sample(k, &mut out);
                        with_stop.push(out);
                    }
                    let result = check(&js, rate, &with_stop);
                    if quick.is_empty() {
                        let usage = result.map_err(|e| {
                            TestCaseError::fail(format!("{kind:?} stop at {i}: {e}"))
                        })?;
                        worst.set(worst.get().max(usage));
                    } else if let Err(e) = result {
                        // Slower than the limit: it may run past a position limit, nothing else.
                        prop_assert!(e.contains("position"), "{kind:?} stop at {i}: {e}");
                    }
                }
            }
            Ok(())
        })
        .unwrap();
    println!(
        "envelope: {proved} proved motions of {} cases; worst share of the limits: {worst:.6?}",
        runner.config().cases,
        proved = proved.get(),
        worst = worst.get(),
    );
    assert!(proved.get() > 0);
}

/// A looped motion whose seam passes `loop_seam` stays within the envelope across it, loop after
/// loop.
#[test]
fn loops_that_pass_the_seam_check_stay_within_the_envelope_across_it() {
    let mut runner = TestRunner::new(cases(48));
    let looped = Cell::new(0u32);
    let strategy = (
        limits(),
        6usize..30,
        0.05..0.2f64,
        -0.5..0.5f64,
        0.05..0.5f64,
        any::<bool>(),
        prop::sample::select(INTERPOLATIONS.to_vec()),
        prop::sample::select(vec![LimitPolicy::Reject, LimitPolicy::Retime]),
        prop::sample::select(vec![100.0, 250.0, 1000.0]),
    );
    runner
        .run(
            &strategy,
            |(limits, frames, gap, offset, amplitude, at_rest, interpolation, policy, rate_hz)| {
                // One period of a wave, sampled so the last frame repeats the first.
                let period = frames as f64 * gap;
                let times: Vec<f64> = (0..=frames).map(|i| i as f64 * gap).collect();
                let values: Vec<f64> = times
                    .iter()
                    .map(|t| {
                        let x = 2.0 * std::f64::consts::PI * t / period;
                        offset
                            + amplitude
                                * if at_rest {
                                    0.5 * (1.0 - x.cos())
                                } else {
                                    x.sin()
                                }
                    })
                    .collect();
                let case = Case {
                    limits: vec![limits],
                    times,
                    values,
                    options: Options {
                        rate_hz,
                        interpolation,
                        policy,
                        speed: 1.0,
                    },
                };
                let Ok(p) = case.build() else {
                    return Ok(());
                };
                let t = &p.trajectory;
                if t.loop_seam().is_err() {
                    return Ok(());
                }
                looped.set(looped.get() + 1);
                let js = case.joints();
                // Three times round: the last tick of a lap is replaced by the next lap's first.
                let played = stream(t, 0.0);
                let ticks = t.ticks() as usize;
                let lap = &played[2..2 + ticks - 1];
                let mut s = played[..2].to_vec();
                s.extend(lap.iter().cloned());
                s.extend(lap.iter().cloned());
                s.extend(played[2..].iter().cloned());
                check(&js, rate_hz, &s).map_err(TestCaseError::fail)?;
                Ok(())
            },
        )
        .unwrap();
    println!(
        "loops: {} of {} cases passed the seam check",
        looped.get(),
        runner.config().cases
    );
    assert!(looped.get() > 0);
}

fn one_dof(position: f64, velocity: f64, acceleration: f64) -> JointSet {
    JointSet::uniform(
        1,
        DofLimits {
            position: Limits::symmetric(position),
            velocity: Limits::symmetric(velocity),
            acceleration: Limits::symmetric(acceleration),
            effort: Limits::UNBOUNDED,
        },
    )
}

fn build_one(
    js: &JointSet,
    times: &[f64],
    values: &[f64],
    interpolation: Interpolation,
    policy: LimitPolicy,
    rate_hz: f64,
) -> Result<trajectory::Proved, BuildError> {
    let map = ColumnMap::in_dof_order(js, 1).unwrap();
    let options = Options {
        rate_hz,
        interpolation,
        policy,
        speed: 1.0,
    };
    trajectory::build_values(
        js,
        &timed(times.to_vec(), values.to_vec(), 1),
        &map,
        &options,
    )
}

/// Issue 10: slopes +0.15, 0, −0.15 rad/s with a 4 ms middle segment at 100 Hz. Each corner alone
/// is a 15 rad/s² step over one tick; both inside one tick the velocity field steps by 0.3 rad/s
/// (30 rad/s²) and the positions' second difference reaches 24 rad/s². With a 20 rad/s² limit
/// the proof refuses it, at any phase of the ticks.
#[test]
fn two_corners_inside_one_tick_are_refused() {
    let js = one_dof(1.0, 1.0, 20.0);
    // Rest, up at +0.15 rad/s, 4 ms still, down at -0.15 rad/s, rest; each ramp 0.5 s.
    let times = [0.0, 0.1, 0.6, 0.604, 1.104, 1.2];
    let values = [0.0, 0.0, 0.075, 0.075, 0.0, 0.0];
    for interpolation in [Interpolation::Linear, Interpolation::Hold] {
        let err = build_one(
            &js,
            &times,
            &values,
            interpolation,
            LimitPolicy::Reject,
            100.0,
        )
        .unwrap_err();
        let BuildError::Refused(report) = err else {
            panic!("{err}")
        };
        assert!(
            report
                .violations
                .iter()
                .any(|v| v.quantity == Quantity::Acceleration),
            "{report}"
        );
    }
    // With a 4 ms middle segment but an acceleration limit of 31 rad/s² it plays, and within it.
    let js = one_dof(1.0, 1.0, 31.0);
    let p = build_one(
        &js,
        &times,
        &values,
        Interpolation::Linear,
        LimitPolicy::Reject,
        100.0,
    )
    .unwrap();
    for phase in [0.0, 0.2, 0.4, 0.6, 0.8] {
        check(&js, 100.0, &stream(&p.trajectory, phase)).unwrap();
    }
}

/// Issue 10: a loop that leaves at +0.8 rad/s and comes back at −0.8 rad/s is refused for looping
/// (and still plays once); one that leaves and returns at +0.8 rad/s loops.
#[test]
fn a_seam_that_reverses_the_velocity_is_refused() {
    // An acceleration limit that lets the motion start and end at 0.8 rad/s (800 rad/s² over one
    // tick at 1 kHz) but not reverse 1.6 rad/s in one tick.
    let js = one_dof(2.0, 2.0, 1500.0);
    let times: Vec<f64> = (0..=40).map(|i| i as f64 * 0.05).collect();
    // Up at 0.8 rad/s for 1 s, then down at 0.8 rad/s (pchip rounds the top).
    let tent: Vec<f64> = times.iter().map(|&t| 0.8 * t.min(2.0 - t)).collect();
    let p = build_one(
        &js,
        &times,
        &tent,
        Interpolation::Pchip,
        LimitPolicy::Reject,
        1000.0,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let err = p.trajectory.loop_seam().unwrap_err();
    let SeamError::Jump {
        dof,
        measure,
        value,
        ..
    } = &err
    else {
        panic!("{err}")
    };
    assert_eq!(dof, "c0");
    assert!(
        matches!(measure, Measure::StepAcceleration | Measure::VelocityStep),
        "{err}"
    );
    assert!(value.abs() > 1500.0, "{err}");
    assert!(
        err.to_string().contains("`c0` jumps where the loop closes"),
        "{err}"
    );

    // A sine period leaving and returning at 0.8 rad/s loops.
    let period = std::f64::consts::PI;
    let times: Vec<f64> = (0..=60).map(|i| i as f64 * period / 60.0).collect();
    let wave: Vec<f64> = times
        .iter()
        .map(|&t| 0.4 * (2.0 * std::f64::consts::PI * t / period).sin())
        .collect();
    for interpolation in [
        Interpolation::Linear,
        Interpolation::Pchip,
        Interpolation::Cubic,
    ] {
        let p = build_one(
            &js,
            &times,
            &wave,
            interpolation,
            LimitPolicy::Reject,
            1000.0,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        p.trajectory
            .loop_seam()
            .unwrap_or_else(|e| panic!("{interpolation:?}: {e}"));
    }
}

/// Issue 10: retime left no margin (1.3 % over the acceleration limit from rest, measured by finite
/// differences). Retimed motions start and end within the limits, as the drives see them.
#[test]
fn retime_from_rest_stays_within_the_limits() {
    let js = one_dof(3.0, 2.0, 8.0);
    // 2 rad in 0.5 s starting and ending at rest: far too fast.
    let times: Vec<f64> = (0..=50).map(|i| i as f64 * 0.01).collect();
    let values: Vec<f64> = times
        .iter()
        .map(|&t| 1.0 - (2.0 * std::f64::consts::PI * t).cos())
        .collect();
    for interpolation in INTERPOLATIONS {
        for rate in [100.0, 1000.0, 8000.0] {
            let Ok(p) = build_one(
                &js,
                &times,
                &values,
                interpolation,
                LimitPolicy::Retime,
                rate,
            ) else {
                assert_eq!(interpolation, Interpolation::Hold);
                continue;
            };
            let factor = p.report.retimed.unwrap();
            assert!(factor > 1.0, "{factor}");
            let usage = check(&js, rate, &stream(&p.trajectory, 0.0))
                .unwrap_or_else(|e| panic!("{interpolation:?} at {rate} Hz: {e}"));
            assert!(usage.step_acceleration <= 1.0 + 1e-9, "{usage:?}");
        }
    }
}

/// Issue 10: a robot outside its position limits can always be brought back: the approach to a
/// motion's first sample moves it inward only, within the velocity and acceleration limits.
#[test]
fn the_approach_recovers_a_robot_outside_its_limits() {
    let world = skel::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("config/demo-arm.skel"))
        .unwrap_or_else(|e| panic!("{e}"));
    let js = JointSet::from_world(&world, &[]).unwrap();
    let n = js.len();
    // base_yaw 0.1 rad past +2.8, elbow 0.05 below -2.4; the gripper inside.
    let mut from: Vec<f64> = js.dofs.iter().map(|d| d.initial_position).collect();
    from[0] = 2.9;
    from[2] = -2.45;
    let to: Vec<Setpoint> = js
        .dofs
        .iter()
        .map(|d| Setpoint {
            position: 0.5 * (d.limits.position.lower + d.limits.position.upper)
                + 0.05 * (d.limits.position.upper - d.limits.position.lower),
            ..Setpoint::default()
        })
        .collect();
    for rate in [100.0, 1000.0] {
        let a = trajectory::approach(&js, &from, &to, rate).unwrap();
        let mut e = Envelope::new(&js, rate).recovering();
        let rest: Vec<Setpoint> = from
            .iter()
            .map(|&position| Setpoint {
                position,
                ..Setpoint::default()
            })
            .collect();
        e.push(&rest).unwrap();
        let mut cursor = Cursor::default();
        let mut out = vec![Setpoint::default(); n];
        for k in 0..a.ticks() + 2 {
            a.sample(&mut cursor, k, &mut out);
            e.push(&out).unwrap_or_else(|b| panic!("{b}"));
        }
        assert!((a.last_setpoints()[0].position - to[0].position).abs() < 1e-12);
    }
    // Moving further out is what it must not do: a target outside is refused.
    let mut outside = to.clone();
    outside[0].position = 2.85;
    assert!(trajectory::approach(&js, &from, &outside, 1000.0).is_err());
}

/// Stop distances of the demo arm: each DOF cruising at its velocity limit, stopped by a planned
/// and by a quick stop, at 1 kHz. Printed for the README; the stop covers at most
/// v²/(2a) + v·dt (the discrete ramp's extra tick).
#[test]
fn demo_arm_stop_distances_at_peak_speed() {
    let world = skel::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("config/demo-arm.skel"))
        .unwrap_or_else(|e| panic!("{e}"));
    let js = JointSet::from_world(&world, &[]).unwrap();
    let rate = 1000.0;
    let n = js.len();
    for (i, d) in js.dofs.iter().enumerate() {
        let v = d.limits.velocity.upper;
        let a = -d.limits.acceleration.lower;
        if !(v.is_finite() && a.is_finite() && v > 0.0) {
            continue;
        }
        let mut previous: Vec<Setpoint> = js
            .dofs
            .iter()
            .map(|d| Setpoint {
                position: d.initial_position,
                ..Setpoint::default()
            })
            .collect();
        previous[i].position = 0.0;
        previous[i].velocity = v;
        let mut last = previous.clone();
        last[i].position = v / rate;
        let mut figures = Vec::new();
        for kind in [StopKind::Planned, StopKind::Quick] {
            let mut stop = Stop::new(&js, rate, &[]);
            stop.plan(&previous, &last, kind);
            let distance = stop.rest_position(i).unwrap() - last[i].position;
            let bound = v * v / (2.0 * a);
            assert!(
                distance <= bound + v / rate && distance >= bound - v / rate,
                "{} {distance} vs {bound}",
                d.name
            );
            let mut s = vec![previous.clone()];
            for k in 0..stop.ticks() + 1 {
                let mut out = vec![Setpoint::default(); n];
                stop.sample(k, &mut out);
                s.push(out);
            }
            // Not inside the position limits here (the DOF is placed anywhere), the rest holds.
            let mut free = js.clone();
            free.dofs[i].limits.position = Limits::UNBOUNDED;
            check(&free, rate, &s).unwrap();
            figures.push((distance, stop.ticks() - 1));
        }
        println!(
            "stop distance {:>15} at {v} (limit {a}/s²): planned {:.5} in {} ticks, quick {:.5} in {} ticks (v²/2a = {:.5})",
            d.name,
            figures[0].0,
            figures[0].1,
            figures[1].0,
            figures[1].1,
            v * v / (2.0 * a)
        );
    }
}
