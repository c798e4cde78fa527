//! Properties of resampling, the limit proof, the approach and the stop, on random motions.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

use motiond::motion::seq::{MultiValueSeq, Timing};
use motiond::robot::Limits;
use motiond::trajectory::{
    self, BuildError, ColumnMap, Cursor, DofLimits, Envelope, Interpolation, JointSet, LimitPolicy,
    Options, Setpoint, Stop, StopKind, Trajectory,
};
use proptest::prelude::*;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 32,
        ..ProptestConfig::default()
    }
}

fn limits(lower: f64, upper: f64) -> Limits {
    Limits { lower, upper }
}

/// `n` DOFs with the given limits (the same for all).
fn joints(n: usize, position: Limits, velocity: Limits, acceleration: Limits) -> JointSet {
    JointSet::uniform(
        n,
        DofLimits {
            position,
            velocity,
            acceleration,
            effort: Limits::UNBOUNDED,
        },
    )
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

fn all_ticks(t: &Trajectory) -> Vec<Vec<Setpoint>> {
    let mut cursor = Cursor::default();
    (0..t.ticks())
        .map(|k| {
            let mut out = vec![Setpoint::default(); t.dofs()];
            t.sample(&mut cursor, k, &mut out);
            out
        })
        .collect()
}

/// Strictly increasing times from random gaps (1 ms to 50 ms), starting anywhere.
fn uneven_times(max_rows: usize) -> impl Strategy<Value = Vec<f64>> {
    (
        0.0..10.0f64,
        prop::collection::vec(0.001..0.05f64, 1..max_rows),
    )
        .prop_map(|(start, gaps)| {
            let mut t = start;
            let mut times = vec![t];
            for g in gaps {
                t += g;
                times.push(t);
            }
            times
        })
}

proptest! {
    #![proptest_config(config())]

    /// pchip never overshoots its samples: samples inside the position limits give ticks inside.
    #[test]
    fn pchip_stays_within_position_limits(
        times in uneven_times(60),
        seed in prop::collection::vec(-1.0..1.0f64, 60 * 3),
        rate in prop::sample::select(vec![250.0, 1000.0, 8000.0]),
    ) {
        let cols = 3;
        let values: Vec<f64> = seed.iter().take(times.len() * cols).copied().collect();
        let js = joints(cols, limits(-1.0, 1.0), Limits::UNBOUNDED, Limits::UNBOUNDED);
        let map = ColumnMap::in_dof_order(&js, cols).unwrap();
        let options = Options { rate_hz: rate, ..Options::default() };
        let proved = trajectory::build_values(&js, &timed(times, values, cols), &map, &options).unwrap();
        for tick in all_ticks(&proved.trajectory) {
            for s in tick {
                prop_assert!((-1.0..=1.0).contains(&s.position), "{}", s.position);
            }
        }
    }

    /// Every interpolation passes through the samples (knots placed on ticks).
    #[test]
    fn interpolants_pass_through_the_samples(
        steps in prop::collection::vec(1u32..40, 1..40),
        values in prop::collection::vec(-2.0..2.0f64, 40),
        interp in prop::sample::select(vec![Interpolation::Hold, Interpolation::Linear, Interpolation::Pchip, Interpolation::Cubic]),
    ) {
        let rate = 1000.0;
        let mut ticks = vec![0u64];
        for s in &steps {
            ticks.push(ticks.last().unwrap() + u64::from(*s));
        }
        let times: Vec<f64> = ticks.iter().map(|&k| k as f64 / rate).collect();
        let values: Vec<f64> = values.iter().cycle().take(times.len()).copied().collect();
        let js = joints(1, Limits::UNBOUNDED, Limits::UNBOUNDED, Limits::UNBOUNDED);
        let map = ColumnMap::in_dof_order(&js, 1).unwrap();
        let options = Options { rate_hz: rate, interpolation: interp, ..Options::default() };
        let t = trajectory::build_values(&js, &timed(times, values.clone(), 1), &map, &options).unwrap().trajectory;
        let samples = all_ticks(&t);
        for (&k, &v) in ticks.iter().zip(&values) {
            prop_assert!((samples[k as usize][0].position - v).abs() < 1e-9, "tick {k}: {} vs {v}", samples[k as usize][0].position);
        }
    }

    /// Linear and pchip reproduce straight-line data exactly, between the samples too; and
    /// tick k lands at exactly k / rate.
    #[test]
    fn linear_and_pchip_are_exact_on_linear_data(
        times in uneven_times(50),
        a in -1.0..1.0f64,
        b in -3.0..3.0f64,
        rate in prop::sample::select(vec![250.0, 333.0, 1000.0, 8000.0]),
        interp in prop::sample::select(vec![Interpolation::Linear, Interpolation::Pchip]),
    ) {
        let t0 = times[0];
        let values: Vec<f64> = times.iter().map(|t| a + b * (t - t0)).collect();
        let js = joints(1, Limits::UNBOUNDED, Limits::UNBOUNDED, Limits::UNBOUNDED);
        let map = ColumnMap::in_dof_order(&js, 1).unwrap();
        let options = Options { rate_hz: rate, interpolation: interp, ..Options::default() };
        let t = trajectory::build_values(&js, &timed(times.clone(), values, 1), &map, &options).unwrap().trajectory;
        let end = times.last().unwrap() - t0;
        prop_assert!(((t.ticks() - 1) as f64 / rate) <= end + 1e-9);
        prop_assert!((t.ticks() as f64 / rate) > end);
        for (k, tick) in all_ticks(&t).iter().enumerate() {
            let time = k as f64 / rate;
            prop_assert!((tick[0].position - (a + b * time)).abs() < 1e-9);
            prop_assert!((tick[0].velocity - b).abs() < 1e-6);
        }
    }

    /// The analytic proof is sound and tight: when it passes, every tick sample is inside the
    /// limits; when a tick sample is outside, it refuses.
    #[test]
    fn the_proof_agrees_with_the_ticks(
        times in uneven_times(25),
        values in prop::collection::vec(-1.0..1.0f64, 25),
        bound in 0.5..1.2f64,
        interp in prop::sample::select(vec![Interpolation::Pchip, Interpolation::Cubic]),
    ) {
        let values: Vec<f64> = values.iter().take(times.len()).copied().collect();
        let js = joints(1, limits(-bound, bound), limits(-30.0, 30.0), Limits::UNBOUNDED);
        let map = ColumnMap::in_dof_order(&js, 1).unwrap();
        let options = Options { interpolation: interp, ..Options::default() };
        let seq = timed(times.clone(), values.clone(), 1);
        match trajectory::build_values(&js, &seq, &map, &options) {
            Ok(proved) => {
                for tick in all_ticks(&proved.trajectory) {
                    prop_assert!(js.dofs[0].limits.position.contains(tick[0].position));
                    prop_assert!(js.dofs[0].limits.velocity.contains(tick[0].velocity));
                }
            }
            Err(BuildError::Refused(report)) => {
                prop_assert!(!report.violations.is_empty());
                // Refused only when the motion really crosses a bound (acceleration is unbounded
                // here, so no step into or out of rest can be the reason).
                let free = joints(1, Limits::UNBOUNDED, Limits::UNBOUNDED, Limits::UNBOUNDED);
                let t = trajectory::build_values(&free, &seq, &map, &options).unwrap();
                let d = &t.report.dofs[0];
                let crossed = d.position.min < -bound || d.position.max > bound
                    || d.velocity.min < -30.0 || d.velocity.max > 30.0;
                prop_assert!(crossed, "{report}");
            }
            Err(e) => prop_assert!(false, "{e}"),
        }
    }

    /// The retime policy's result meets the velocity and acceleration limits.
    #[test]
    fn retime_meets_velocity_and_acceleration_limits(
        gaps in prop::collection::vec(0.02..0.1f64, 1..20),
        values in prop::collection::vec(-0.3..0.3f64, 20),
    ) {
        // Gentle enough that the slowed-down motion stays short to sample tick by tick.
        let times: Vec<f64> = std::iter::once(0.0).chain(gaps.iter().scan(0.0, |t, g| { *t += g; Some(*t) })).collect();
        let values: Vec<f64> = values.iter().take(times.len()).copied().collect();
        let js = joints(1, Limits::UNBOUNDED, limits(-2.0, 2.0), limits(-8.0, 8.0));
        let map = ColumnMap::in_dof_order(&js, 1).unwrap();
        let options = Options { policy: LimitPolicy::Retime, ..Options::default() };
        let proved = trajectory::build_values(&js, &timed(times, values, 1), &map, &options).unwrap();
        for tick in all_ticks(&proved.trajectory) {
            prop_assert!(tick[0].velocity.abs() <= 2.0 && tick[0].acceleration.abs() <= 8.0, "{:?}", tick[0]);
        }
    }

    /// The approach respects velocity and acceleration limits and arrives at rest.
    #[test]
    fn approach_respects_limits_and_ends_at_rest(
        from in prop::collection::vec(-2.0..2.0f64, 4),
        to in prop::collection::vec(-2.0..2.0f64, 4),
        v in 0.1..5.0f64,
        a in 0.5..20.0f64,
    ) {
        let js = joints(4, limits(-2.0, 2.0), limits(-v, v), limits(-a, a));
        let target: Vec<Setpoint> = to.iter().map(|&position| Setpoint { position, ..Setpoint::default() }).collect();
        let t = trajectory::approach(&js, &from, &target, 1000.0).unwrap();
        let ticks = all_ticks(&t);
        for tick in &ticks {
            for s in tick {
                prop_assert!(s.velocity.abs() <= v && s.acceleration.abs() <= a, "{s:?}");
            }
        }
        let first = &ticks[0];
        let last = ticks.last().unwrap();
        for i in 0..4 {
            prop_assert!((first[i].position - from[i]).abs() < 1e-12 && first[i].velocity == 0.0);
            prop_assert!((last[i].position - to[i]).abs() < 1e-9);
            prop_assert!(last[i].velocity.abs() < 1e-9 && last[i].acceleration.abs() < 1e-9);
        }
    }

    /// The stop decelerates within the limits from any state and ends at rest, never backing up.
    #[test]
    fn stop_respects_limits_and_ends_at_rest(
        state in prop::collection::vec((-2.0..2.0f64, -3.0..3.0f64, -3.0..3.0f64, -10.0..10.0f64), 4),
        a in 0.5..20.0f64,
        rate in prop::sample::select(vec![250.0, 1000.0, 8000.0]),
        quick in any::<bool>(),
    ) {
        let js = joints(4, Limits::UNBOUNDED, limits(-3.0, 3.0), limits(-a, a));
        // The positions moved at one velocity, the field says another (as after a linear corner).
        let previous: Vec<Setpoint> = state.iter().map(|&(p, step, velocity, _)| Setpoint { position: p - step / rate, velocity, acceleration: 0.0 }).collect();
        let last: Vec<Setpoint> = state.iter().map(|&(position, _, velocity, acceleration)| Setpoint { position, velocity, acceleration }).collect();
        let kind = if quick { StopKind::Quick } else { StopKind::Planned };
        let mut stop = Stop::new(&js, rate, &[]);
        stop.plan(&previous, &last, kind);
        let mut envelope = Envelope::new(&js, rate);
        envelope.push(&previous).unwrap();
        // The acceleration field the stop starts from is not the planner's business.
        let mut l = last.clone();
        for s in &mut l { s.acceleration = 0.0; }
        envelope.push(&l).unwrap();
        let mut out = vec![Setpoint::default(); 4];
        let mut prev: Vec<f64> = last.iter().map(|s| s.position).collect();
        for k in 1..stop.ticks() + 2 {
            stop.sample(k, &mut out);
            if let Err(b) = envelope.push(&out) { prop_assert!(false, "{b}"); }
            for (i, s) in out.iter().enumerate() {
                let step = state[i].1;
                prop_assert!((s.position - prev[i]) * step >= -1e-12, "backs up");
                prev[i] = s.position;
            }
        }
        stop.sample(stop.ticks() - 1, &mut out);
        prop_assert!(out.iter().all(|s| s.velocity == 0.0 && s.acceleration == 0.0));
    }
}

#[test]
fn memory_does_not_grow_with_the_control_rate() {
    let rows = 2000;
    let cols = 8;
    let times: Vec<f64> = (0..rows)
        .map(|i| i as f64 * 0.004 + (i % 3) as f64 * 0.001)
        .collect();
    let values: Vec<f64> = (0..rows * cols)
        .map(|i| (i as f64 * 0.01).sin() * 0.1)
        .collect();
    let js = joints(
        cols,
        Limits::UNBOUNDED,
        Limits::UNBOUNDED,
        Limits::UNBOUNDED,
    );
    let map = ColumnMap::in_dof_order(&js, cols).unwrap();
    let source = rows * cols * std::mem::size_of::<f64>();
    let mut sizes = Vec::new();
    for rate in [250.0, 1000.0, 8000.0] {
        let options = Options {
            rate_hz: rate,
            ..Options::default()
        };
        let t = trajectory::build_values(
            &js,
            &timed(times.clone(), values.clone(), cols),
            &map,
            &options,
        )
        .unwrap()
        .trajectory;
        assert!(
            t.heap_bytes() <= 4 * source,
            "{} > 4 × {source}",
            t.heap_bytes()
        );
        sizes.push(t.heap_bytes());
    }
    assert!(sizes.windows(2).all(|w| w[0] == w[1]), "{sizes:?}");
}
