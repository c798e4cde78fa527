//! Motion samples → a [`Trajectory`] on the control rate, proved against the limits.

use super::track::{Knots, MAX_RATE_HZ, Trajectory};
use crate::diag::Num;

use super::mapping::ColumnMap;
use super::proof::{self, ProofReport};
use super::{Interpolation, JointSet, LimitPolicy};
use crate::motion::seq::{Motion, MultiValueSeq, Timing};

/// Most rounds of slowing down the retime policy tries before it refuses.
const RETIME_ROUNDS: usize = 8;

/// Longest motion accepted (as played): a week, far beyond any recorded motion.
pub const MAX_DURATION_S: f64 = crate::motion::seq::MAX_TIME_S;

/// How to turn a motion into a trajectory.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Options {
    /// Control rate (ticks per second).
    pub rate_hz: f64,
    pub interpolation: Interpolation,
    pub policy: LimitPolicy,
    /// Playback speed: 0.5 plays at half speed (twice as long), 2 at double speed. The proof
    /// applies to the motion as played.
    pub speed: f64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            rate_hz: 1000.0,
            interpolation: Interpolation::Pchip,
            policy: LimitPolicy::Reject,
            speed: 1.0,
        }
    }
}

/// A trajectory and the proof that every sample respects the limits.
#[derive(Debug, Clone)]
pub struct Proved {
    pub trajectory: Trajectory,
    pub report: ProofReport,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BuildError {
    #[error("the motion has no JointDisplacement component")]
    NoJointData,
    #[error("the control rate must be a number in (0, {MAX_RATE_HZ}] Hz, not {}", Num(*.0))]
    Rate(f64),
    #[error("the playback speed must be a positive number, not {}", Num(*.0))]
    Speed(f64),
    #[error("the motion has {num_parts} columns but the mapping names {mapped}")]
    Columns { num_parts: usize, mapped: usize },
    #[error("the motion would last {} s; at most {MAX_DURATION_S} s is accepted", Num(*.0))]
    TooLong(f64),
    #[error("the motion has no frames")]
    Empty,
    #[error("frame {row}: time {} s does not come after the previous frame's", Num(*time))]
    Times { row: usize, time: f64 },
    #[error("frame {row}, column {column}: {} is not a finite number", Num(*value))]
    NonFinite {
        row: usize,
        column: usize,
        value: f64,
    },
    /// The proof failed (after clamping or retiming when the policy asked for it).
    #[error("{0}")]
    Refused(Box<ProofReport>),
}

/// Resamples `motion`'s joint displacement onto `options.rate_hz` and proves it.
pub fn build(
    joints: &JointSet,
    motion: &Motion,
    map: &ColumnMap,
    options: &Options,
) -> Result<Proved, BuildError> {
    let seq = motion.joint_displacement().ok_or(BuildError::NoJointData)?;
    build_values(joints, seq, map, options)
}

/// [`build`] for a bare `MultiValueSeq`.
pub fn build_values(
    joints: &JointSet,
    seq: &MultiValueSeq,
    map: &ColumnMap,
    options: &Options,
) -> Result<Proved, BuildError> {
    let rate = options.rate_hz;
    if !(rate > 0.0 && rate <= MAX_RATE_HZ) {
        return Err(BuildError::Rate(rate));
    }
    if !(options.speed > 0.0 && options.speed.is_finite()) {
        return Err(BuildError::Speed(options.speed));
    }
    let cols = seq.num_parts;
    if map.len() != cols {
        return Err(BuildError::Columns {
            num_parts: cols,
            mapped: map.len(),
        });
    }
    let rows = seq.values.len().checked_div(cols).unwrap_or(0);
    if rows == 0 {
        return Err(BuildError::Empty);
    }
    let values = seq.values[..rows * cols].to_vec();
    if let Some(at) = values.iter().position(|v| !v.is_finite()) {
        return Err(BuildError::NonFinite {
            row: at / cols,
            column: at % cols,
            value: values[at],
        });
    }
    let times = knot_times(&seq.timing, rows, options.speed)?;
    let mut report_meta = proof::Meta {
        rate_hz: rate,
        interpolation: options.interpolation,
        policy: options.policy,
        speed: options.speed,
        clamped: Vec::new(),
        retimed: None,
    };
    let mut values = values;
    if options.policy == LimitPolicy::Clamp {
        report_meta.clamped = proof::clamp(joints, map.columns(), &times, &mut values);
    }
    // Mimic followers get their columns from their leaders after any clamping, so a clamped
    // leader moves its followers and the proof sees every follower as commanded.
    let (columns, values) = super::mimic::extend(joints, map, values);
    let knots = |times: Vec<f64>, values: Vec<f64>| {
        Knots::new(
            options.interpolation,
            times,
            columns.clone(),
            values,
            joints,
        )
    };
    let mut k = knots(times, values);
    let mut report = proof::prove(joints, &k, &report_meta);
    if options.policy == LimitPolicy::Retime {
        // The factor each crossing needs is exact for the limits of the interpolant and close for
        // the steps the drives see at the ends and corners: slow down again until the proof
        // passes, a few rounds at most.
        let source_times = k.times.clone();
        let mut total = 1.0;
        for _ in 0..RETIME_ROUNDS {
            let Some(factor) = proof::retime_factor(&report) else {
                break;
            };
            if report.passed() {
                break;
            }
            total *= factor;
            let times = source_times.iter().map(|t| t * total).collect();
            let values = std::mem::take(&mut k.values);
            k = knots(times, values);
            report_meta.retimed = Some(total);
            report = proof::prove(joints, &k, &report_meta);
        }
    }
    if !report.passed() {
        return Err(BuildError::Refused(Box::new(report)));
    }
    let mut trajectory = Trajectory::from_knots(k, rate);
    trajectory.judge_seam(joints);
    debug_assert_eq!(report.ticks, trajectory.ticks());
    Ok(Proved { trajectory, report })
}

/// Knot times relative to the first frame, divided by the speed; strictly increasing.
fn knot_times(timing: &Timing, rows: usize, speed: f64) -> Result<Vec<f64>, BuildError> {
    let mut times = Vec::with_capacity(rows);
    match timing {
        Timing::Fixed { frame_rate } => {
            if !(*frame_rate > 0.0 && frame_rate.is_finite()) {
                return Err(BuildError::Times {
                    row: 1,
                    time: 1.0 / frame_rate,
                });
            }
            // i / (rate · speed) computed from i, like the ticks.
            let scaled = frame_rate * speed;
            times.extend((0..rows).map(|i| i as f64 / scaled));
        }
        Timing::Timed { times: stamps, .. } => {
            let first = stamps.first().copied().unwrap_or(0.0);
            for row in 0..rows {
                let Some(&stamp) = stamps.get(row) else {
                    return Err(BuildError::Times {
                        row,
                        time: f64::NAN,
                    });
                };
                let t = (stamp - first) / speed;
                if !t.is_finite() || times.last().is_some_and(|&p| t <= p) {
                    return Err(BuildError::Times { row, time: stamp });
                }
                times.push(t);
            }
        }
    }
    if let Some(&end) = times.last()
        && (end.is_nan() || end > MAX_DURATION_S)
    {
        return Err(BuildError::TooLong(end));
    }
    Ok(times)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trajectory::tests::demo_joints;
    use crate::trajectory::{Cursor, Quantity, Setpoint};

    /// A 6-column motion for the demo arm's driven DOFs: `f(t)` on column 0, rest at 0 (gripper
    /// at 0.02).
    fn motion(times: &[f64], f: impl Fn(f64) -> f64) -> MultiValueSeq {
        let mut values = Vec::new();
        for &t in times {
            values.extend([f(t), 0.0, 0.0, 0.0, 0.0, 0.02]);
        }
        MultiValueSeq {
            num_parts: 6,
            timing: Timing::Timed {
                times: times.to_vec(),
                frame_rate: None,
            },
            values,
        }
    }

    fn options(interpolation: Interpolation, policy: LimitPolicy) -> Options {
        Options {
            rate_hz: 1000.0,
            interpolation,
            policy,
            speed: 1.0,
        }
    }

    fn samples(t: &Trajectory) -> Vec<Vec<Setpoint>> {
        let mut cursor = Cursor::default();
        (0..t.ticks())
            .map(|k| {
                let mut out = vec![Setpoint::default(); t.dofs()];
                t.sample(&mut cursor, k, &mut out);
                out
            })
            .collect()
    }

    /// A smooth bump that starts and ends at rest.
    fn bump(t: f64) -> f64 {
        0.5 * (1.0 - (std::f64::consts::PI * t).cos())
    }

    /// The demo arm without velocity and acceleration limits, to test sampling alone.
    fn relaxed_joints() -> JointSet {
        let mut joints = demo_joints();
        for d in &mut joints.dofs {
            d.limits.velocity = crate::robot::Limits::UNBOUNDED;
            d.limits.acceleration = crate::robot::Limits::UNBOUNDED;
        }
        joints
    }

    #[test]
    fn passes_through_the_samples_and_holds_unmapped_dofs() {
        let joints = relaxed_joints();
        let map = ColumnMap::in_dof_order(&joints, 6).unwrap();
        let times: Vec<f64> = (0..=20).map(|i| i as f64 / 10.0).collect();
        let seq = motion(&times, bump);
        for interp in [
            Interpolation::Hold,
            Interpolation::Linear,
            Interpolation::Pchip,
            Interpolation::Cubic,
        ] {
            let mut o = options(interp, LimitPolicy::Reject);
            o.rate_hz = 100.0;
            let proved = build_values(&joints, &seq, &map, &o).unwrap();
            let s = samples(&proved.trajectory);
            assert_eq!(s.len(), 201);
            for &t in &times {
                let k = (t * 100.0).round() as usize;
                assert!(
                    (s[k][0].position - bump(t)).abs() < 1e-12,
                    "{interp:?} at {t}"
                );
            }
            // The locked brake holds its initial position; the gripper follows its column.
            assert_eq!(s[57][6].position, 0.25);
            assert_eq!(s[57][5].position, 0.02);
        }
    }

    #[test]
    fn column_positions_agree_with_full_samples() {
        let joints = JointSet::unconstrained(7);
        let map = ColumnMap::by_name(&joints, &["c6", "c0", "c1", "c2", "c3", "c4"], 6).unwrap();
        let times: Vec<f64> = (0..=30).map(|i| (i as f64 * 0.037).powf(1.2)).collect();
        let seq = motion(&times, |t| (3.0 * t).sin());
        for interp in [
            Interpolation::Hold,
            Interpolation::Linear,
            Interpolation::Pchip,
            Interpolation::Cubic,
        ] {
            let t = build_values(&joints, &seq, &map, &options(interp, LimitPolicy::Reject))
                .unwrap()
                .trajectory;
            let (mut c1, mut c2) = (Cursor::default(), Cursor::default());
            let mut full = vec![Setpoint::default(); t.dofs()];
            let mut cols = [0.0; 6];
            for k in 0..t.ticks() + 3 {
                t.sample(&mut c1, k, &mut full);
                t.column_positions(&mut c2, k, &mut cols).unwrap();
                for (c, &i) in map.columns().iter().enumerate() {
                    assert!(
                        (cols[c] - full[i].position).abs() < 1e-12,
                        "{interp:?} tick {k}"
                    );
                }
            }
        }
    }

    #[test]
    fn ticks_land_on_k_over_rate_and_the_end_is_at_rest() {
        let joints = demo_joints();
        let map = ColumnMap::in_dof_order(&joints, 6).unwrap();
        let seq = MultiValueSeq {
            num_parts: 6,
            timing: Timing::Fixed { frame_rate: 500.0 },
            values: (0..6701)
                .flat_map(|i| [bump(i as f64 / 6700.0) * 0.1, 0.0, 0.0, 0.0, 0.0, 0.02])
                .collect(),
        };
        let proved = build_values(
            &joints,
            &seq,
            &map,
            &options(Interpolation::Pchip, LimitPolicy::Reject),
        )
        .unwrap();
        // 6701 frames at 500 Hz end at 13.4 s: ticks 0..=13400.
        assert_eq!(proved.trajectory.ticks(), 13401);
        let mut out = vec![Setpoint::default(); 7];
        proved
            .trajectory
            .sample(&mut Cursor::default(), 1_000_000, &mut out);
        assert_eq!(out[0].velocity, 0.0);
        assert!((out[0].position - 0.1).abs() < 1e-12);
    }

    #[test]
    fn random_access_matches_in_order_sampling() {
        let joints = relaxed_joints();
        let map = ColumnMap::in_dof_order(&joints, 6).unwrap();
        let times: Vec<f64> = (0..=40).map(|i| (i as f64 * 0.05).powf(1.1)).collect();
        let proved = build_values(
            &joints,
            &motion(&times, |t| 0.3 * bump(t)),
            &map,
            &Options::default(),
        )
        .unwrap();
        let in_order = samples(&proved.trajectory);
        let mut cursor = Cursor::default();
        let mut out = vec![Setpoint::default(); 7];
        for k in [900u64, 3, 1500, 0, 1200, 1201, 17] {
            proved.trajectory.sample(&mut cursor, k, &mut out);
            assert_eq!(out, in_order[k as usize]);
        }
    }

    #[test]
    fn rejects_naming_joint_time_value_and_limit() {
        let joints = demo_joints();
        let map = ColumnMap::in_dof_order(&joints, 6).unwrap();
        let times: Vec<f64> = (0..=20).map(|i| i as f64 / 10.0).collect();
        // Peaks at 3.0 rad at t = 1 s: above base_yaw's 2.8.
        let err = build_values(
            &joints,
            &motion(&times, |t| 3.0 * bump(t)),
            &map,
            &options(Interpolation::Pchip, LimitPolicy::Reject),
        )
        .unwrap_err();
        let BuildError::Refused(report) = err else {
            panic!("{err:?}")
        };
        let v = report
            .violations
            .iter()
            .find(|v| v.quantity == Quantity::Position)
            .unwrap();
        assert_eq!(v.dof, "base_yaw");
        assert!((v.time_s - 1.0).abs() < 1e-9, "{v}");
        assert!((v.value - 3.0).abs() < 1e-9);
        assert_eq!(v.limit, 2.8);
        let text = report.to_string();
        assert!(
            text.contains("base_yaw: position 3.000000 at t=1.0000 s is above the limit 2.8"),
            "{text}"
        );
        assert_eq!(report.to_json()["violations"][0]["joint"], "base_yaw");
    }

    #[test]
    fn retime_slows_down_just_enough() {
        let joints = demo_joints();
        let map = ColumnMap::in_dof_order(&joints, 6).unwrap();
        let times: Vec<f64> = (0..=50).map(|i| i as f64 * 0.01).collect();
        // 2 rad in 0.5 s: peak velocity 2π rad/s, way above 2.
        let seq = motion(&times, |t| 2.0 * bump(2.0 * t) - 1.0);
        let refused = build_values(
            &joints,
            &seq,
            &map,
            &options(Interpolation::Pchip, LimitPolicy::Reject),
        );
        assert!(matches!(refused, Err(BuildError::Refused(_))));
        let proved = build_values(
            &joints,
            &seq,
            &map,
            &options(Interpolation::Pchip, LimitPolicy::Retime),
        )
        .unwrap();
        let factor = proved.report.retimed.unwrap();
        assert!(factor > 3.0 && factor < 4.0, "{factor}");
        let peak_v = proved.report.dofs[0].velocity.max;
        let peak_a = proved.report.dofs[0].acceleration.max;
        // The binding limit is met with (almost) no slack.
        assert!(
            (peak_v / 2.0).max(peak_a / 8.0) > 0.999,
            "{peak_v} {peak_a}"
        );
        assert!(proved.report.to_string().contains("retimed"));
    }

    /// Issue 21 F3: base_yaw's quick stop brakes at 1 rad/s², far below its 8 rad/s²
    /// acceleration limit. A motion that comes to rest just inside the limit is fine at 8 but not
    /// at 1: refused naming the sample, or retimed until every tick is stoppable as the loop's
    /// guard judges it.
    #[test]
    fn a_motion_a_quick_stop_could_not_end_inside_the_limits_is_refused_or_retimed() {
        let mut joints = demo_joints();
        let map = ColumnMap::in_dof_order(&joints, 6).unwrap();
        let times: Vec<f64> = (0..=250).map(|i| i as f64 * 0.01).collect();
        let seq = motion(&times, |t| 2.7 * bump(t / 2.5));
        let pchip = |policy| options(Interpolation::Pchip, policy);
        assert!(build_values(&joints, &seq, &map, &pchip(LimitPolicy::Reject)).is_ok());
        joints.dofs[0].quick_stop_deceleration = Some(1.0);
        let Err(BuildError::Refused(report)) =
            build_values(&joints, &seq, &map, &pchip(LimitPolicy::Reject))
        else {
            panic!("accepted");
        };
        let v = &report.violations[0];
        assert_eq!(
            (v.dof.as_str(), v.quantity),
            ("base_yaw", Quantity::QuickStop)
        );
        assert!(v.value > 2.8 && v.limit == 2.8, "{v}");
        assert!(v.first_s > 1.0 && v.time_s < 2.5, "{v}");
        assert!(
            v.to_string()
                .starts_with("base_yaw: a quick stop from the sample at t="),
            "{v}"
        );
        assert_eq!(report.to_json()["violations"][0]["quantity"], "quick stop");
        let proved = build_values(&joints, &seq, &map, &pchip(LimitPolicy::Retime)).unwrap();
        assert!(proved.report.retimed.unwrap() > 1.0);
        let mut stop = crate::trajectory::Stop::new(&joints, 1000.0, &[]);
        let ticks = samples(&proved.trajectory);
        for (k, pair) in ticks.windows(2).enumerate() {
            assert_eq!(stop.unstoppable(&pair[0], &pair[1]), None, "tick {}", k + 1);
        }
    }

    #[test]
    fn clamp_reports_what_it_moved() {
        let joints = demo_joints();
        let map = ColumnMap::in_dof_order(&joints, 6).unwrap();
        let times: Vec<f64> = (0..=40).map(|i| i as f64 * 0.2).collect();
        let seq = motion(&times, |t| 2.9 * bump(t / 4.0));
        let proved = build_values(
            &joints,
            &seq,
            &map,
            &options(Interpolation::Pchip, LimitPolicy::Clamp),
        )
        .unwrap();
        let c = &proved.report.clamped[0];
        assert_eq!(c.dof, "base_yaw");
        assert!(c.samples > 0 && c.max_change > 0.0 && c.max_change <= 0.1 + 1e-12);
        assert!(proved.report.dofs[0].position.max <= 2.8);
    }

    #[test]
    fn speed_scales_time() {
        let joints = demo_joints();
        let map = ColumnMap::in_dof_order(&joints, 6).unwrap();
        let times: Vec<f64> = (0..=20).map(|i| i as f64 / 10.0).collect();
        let seq = motion(&times, |t| 0.2 * bump(t));
        let mut o = Options {
            speed: 0.5,
            ..Options::default()
        };
        let slow = build_values(&joints, &seq, &map, &o).unwrap();
        assert_eq!(slow.trajectory.ticks(), 4001);
        assert_eq!(slow.report.duration_s, 4.0);
        o.speed = 0.0;
        assert!(matches!(
            build_values(&joints, &seq, &map, &o),
            Err(BuildError::Speed(_))
        ));
    }

    #[test]
    fn starting_while_moving_is_a_step_the_proof_sees() {
        let joints = demo_joints();
        let map = ColumnMap::in_dof_order(&joints, 6).unwrap();
        let times: Vec<f64> = (0..=10).map(|i| i as f64 * 0.1).collect();
        // 0.1 rad/s from the first sample: a step of 100 rad/s² over one tick at 1 kHz.
        let err = build_values(
            &joints,
            &motion(&times, |t| 0.1 * t),
            &map,
            &options(Interpolation::Linear, LimitPolicy::Reject),
        )
        .unwrap_err();
        let BuildError::Refused(report) = err else {
            panic!()
        };
        assert_eq!(report.violations[0].quantity, Quantity::Acceleration);
        assert_eq!(report.violations[0].time_s, 0.0);
    }
}
