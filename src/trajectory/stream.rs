//! A streamed motion's next piece: timed positions (a policy's action chunks) joined into the
//! running path at a splice tick, built and proved off the loop.
//!
//! The rows become a C2 natural cubic spline (as ros2_controllers' `positions_upsampling` builds
//! one over positions-only points). From the setpoints the loop will have sent up to the splice
//! tick, a quintic matching position, velocity and acceleration joins the spline at the earliest
//! time whose whole stream stays inside the limits; the path follows the spline to its last row
//! and then brakes to rest (each DOF's time-optimal stop at its acceleration limits, by Ruckig),
//! so a stream the next piece does not reach in time ends at rest (starved) rather than at
//! speed. Rows play at their time or not at all: when no blend joins them before their last
//! one, the path heads for that row (to rest there) while they last and is cut at the last
//! row's tick — every piece ends the same way, braking from its state at its last row's tick,
//! whatever the chunk's timing. The stream the drives would see —
//! the three setpoints before the splice, the blend, the rows, the braking tail — is checked by
//! the [`Envelope`] sample by sample, and from every sample a quick stop must end inside the
//! position limits. The loop only swaps the result in, as it does a replacement.

use super::blend::{Setpoint3, eval, quintic, shortest};
use super::envelope::Envelope;
use super::interp::{Cubic, natural_spline_slopes};
use super::track::Knots;
use super::{Cursor, JointSet, Setpoint, Stop, Trajectory};

/// Each blend duration tried is this much longer than the last.
const GROWTH: f64 = 1.25;
/// Longest blend tried into a stream's rows, s: beyond it the rows are too far from where the
/// robot is for a stream to reach.
pub const LONGEST_BLEND_S: f64 = 10.0;

/// The path a stream plays from a splice tick on.
#[derive(Debug, Clone)]
pub struct Spliced {
    /// The blend: its tick 0 is the setpoint the loop sends at the splice tick.
    pub approach: Trajectory,
    /// The rows from the join on, then the braking tail to rest.
    pub motion: Trajectory,
    /// The motion's tick at the last row (0 when the rows are not joined: the motion is the
    /// braking tail): past it the stream is starved (braking or at rest).
    pub tail_tick: u64,
    /// Stream time (s) at which the path reaches the rows; `None`: it cannot before they end,
    /// and brakes from where it is at the last row's tick.
    pub join_s: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SpliceError {
    #[error(
        "late: its last row was due at {end_s:.4} s, before the earliest splice at {join_s:.4} s (stream time, horizon included)"
    )]
    Late { end_s: f64, join_s: f64 },
    #[error(
        "no path from where the robot is into its rows, or toward their last one while they last (within {LONGEST_BLEND_S} s), stays within the limits and can stop inside them: {0}"
    )]
    Unsafe(String),
}

/// The rows as one spline over time: constant for a single row.
struct Curve<'a> {
    times: &'a [f64],
    values: &'a [f64],
    slopes: Vec<f64>,
    n: usize,
    seg: usize,
}

impl<'a> Curve<'a> {
    fn new(times: &'a [f64], values: &'a [f64], n: usize) -> Curve<'a> {
        let slopes = if times.len() >= 2 {
            natural_spline_slopes(times, values, n)
        } else {
            vec![0.0; values.len()]
        };
        Curve {
            times,
            values,
            slopes,
            n,
            seg: 0,
        }
    }

    /// Position, velocity and acceleration at stream time `t` (clamped to the rows' span).
    fn at(&mut self, t: f64, out: &mut [Setpoint]) {
        let rows = self.times.len();
        if rows < 2 {
            for (o, &p) in out.iter_mut().zip(self.values) {
                *o = Setpoint {
                    position: p,
                    velocity: 0.0,
                    acceleration: 0.0,
                };
            }
            return;
        }
        let t = t.clamp(self.times[0], self.times[rows - 1]);
        if self.times[self.seg] > t {
            self.seg = 0;
        }
        while self.seg + 2 < rows && self.times[self.seg + 1] < t {
            self.seg += 1;
        }
        let (s, n) = (self.seg, self.n);
        let h = self.times[s + 1] - self.times[s];
        let local = t - self.times[s];
        for (j, o) in out.iter_mut().enumerate() {
            let c = Cubic::hermite(
                self.values[s * n + j],
                self.values[(s + 1) * n + j],
                self.slopes[s * n + j],
                self.slopes[(s + 1) * n + j],
                1.0 / h,
            );
            *o = Setpoint {
                position: c.position(local),
                velocity: c.velocity(local),
                acceleration: c.acceleration(local),
            };
        }
    }
}

/// Per-tick samples in Hermite form, as a trajectory the loop samples exactly at its knots.
fn knotted(joints: &JointSet, samples: &[Setpoint], rate_hz: f64) -> Trajectory {
    let n = joints.len();
    let rows = samples.len() / n;
    let times = (0..rows).map(|k| k as f64 / rate_hz).collect();
    let values = samples.iter().map(|s| s.position).collect();
    let slopes = samples.iter().map(|s| s.velocity).collect();
    Trajectory::from_knots(
        Knots::hermite(times, (0..n).collect(), values, slopes, joints),
        rate_hz,
    )
}

/// The path from the splice into the rows: `from` are the setpoints the loop sends two ticks
/// before the splice, one tick before and at it (the blend's tick 0), `splice_s` the stream time
/// of the splice tick, `times` (strictly increasing, stream seconds) and `values` (row-major,
/// one column per DOF of `joints`) the rows. Every sample must be stoppable at each DOF's
/// quick-stop deceleration ([`Stop::unstoppable`]). `recovering`: positions outside the limits may only move back in.
/// The blend joins the rows at the earliest tick that keeps the whole stream safe; when none
/// joins them by their last row, the blend heads for that row at rest and is cut at its tick,
/// where the braking starts ([`Spliced::join_s`] is `None`).
/// `min_blend_s`: the shortest blend taken — a row period keeps a chunk's difference from the
/// path it replaces from becoming a jerk spike (the shortest blend the limits allow is a few ticks).
#[allow(clippy::too_many_arguments)]
pub fn splice(
    joints: &JointSet,
    from: &Setpoint3,
    splice_s: f64,
    times: &[f64],
    values: &[f64],
    rate_hz: f64,
    recovering: bool,
    min_blend_s: f64,
) -> Result<Spliced, SpliceError> {
    let n = joints.len();
    let dt = 1.0 / rate_hz;
    let (Some(&first_s), Some(&end_s)) = (times.first(), times.last()) else {
        return Err(SpliceError::Unsafe("no rows".into()));
    };
    if values.len() != times.len() * n || from.iter().any(|f| f.len() != n) {
        return Err(SpliceError::Unsafe(format!(
            "{} values for {} rows of {n} DOFs",
            values.len(),
            times.len()
        )));
    }
    if end_s < splice_s {
        return Err(SpliceError::Late {
            end_s,
            join_s: splice_s,
        });
    }
    for (i, row) in values.chunks_exact(n).enumerate() {
        for (d, &p) in joints.dofs.iter().zip(row) {
            let l = d.limits.position;
            if !l.contains(p) {
                return Err(SpliceError::Unsafe(format!(
                    "row {i}: {} at {p} is outside its position limits [{}, {}]",
                    d.name, l.lower, l.upper
                )));
            }
        }
    }
    let mut curve = Curve::new(times, values, n);
    let mut target = vec![Setpoint::default(); n];
    // No shorter than the limits allow, nor than until the rows start.
    curve.at(splice_s.max(first_s), &mut target);
    let least = shortest(joints, &from[2], &target)
        .max(first_s - splice_s)
        .max(min_blend_s);
    // The latest join on time: at the last row.
    let longest = (LONGEST_BLEND_S * rate_hz) as u64;
    let on_time = (((end_s - splice_s) * rate_hz + 1e-9).floor() as u64).min(longest);
    let mut last_breach = None;
    for ticks in blends(least, rate_hz, on_time) {
        let join_s = splice_s + ticks as f64 * dt;
        match attempt(
            joints,
            from,
            &mut curve,
            (join_s, end_s),
            ticks,
            rate_hz,
            recovering,
            None,
        ) {
            Ok(spliced) => return Ok(spliced),
            Err(breach) => last_breach = Some(breach),
        }
    }
    // No path joins the rows before they end. Rows play at their time or not at all: the path
    // heads for the last row (to rest there) while the rows last, and past the last row's tick
    // it brakes from where it is, as every stream ends; it reaches none of the rows.
    let last = times.len() - 1;
    let mut toward = Curve::new(&times[last..], &values[last * n..], n);
    toward.at(end_s, &mut target);
    let least = shortest(joints, &from[2], &target).max(min_blend_s);
    for ticks in blends(least, rate_hz, longest) {
        let join_s = splice_s + ticks as f64 * dt;
        let cut = Some(on_time.max(1));
        match attempt(
            joints,
            from,
            &mut toward,
            (join_s, end_s),
            ticks,
            rate_hz,
            recovering,
            cut,
        ) {
            Ok(spliced) => return Ok(spliced),
            Err(breach) => last_breach = Some(breach),
        }
    }
    Err(SpliceError::Unsafe(last_breach.unwrap_or_else(|| {
        format!("no blend of up to {LONGEST_BLEND_S} s reaches them")
    })))
}

/// The blend lengths tried (ticks), from `least` (s; two ticks at least) each [`GROWTH`] times
/// the last, up to `longest` ticks, which is tried last.
fn blends(least: f64, rate_hz: f64, longest: u64) -> impl Iterator<Item = u64> {
    let first = (least * rate_hz - 1e-9).ceil().max(2.0) as u64;
    std::iter::successors(Some(first), move |&ticks| {
        (ticks < longest).then(|| {
            ((ticks as f64 * GROWTH).ceil() as u64)
                .max(ticks + 1)
                .min(longest)
        })
    })
    .take_while(move |&ticks| ticks <= longest)
}

/// The path with a blend of `ticks` ticks into `curve` at `join_s`, or the first breach of its
/// stream. With `cut` (the last row's tick) the blend only heads for the curve (the last row):
/// the braking starts at that tick, or the path holds the row until it when it gets there first.
#[allow(clippy::too_many_arguments)]
fn attempt(
    joints: &JointSet,
    from: &Setpoint3,
    curve: &mut Curve,
    (join_s, end_s): (f64, f64),
    ticks: u64,
    rate_hz: f64,
    recovering: bool,
    cut: Option<u64>,
) -> Result<Spliced, String> {
    let n = joints.len();
    let dt = 1.0 / rate_hz;
    let mut row = vec![Setpoint::default(); n];
    curve.at(join_s, &mut row);
    let target = row.clone();
    let span = ticks as f64 * dt;
    let coefficients: Vec<[f64; 6]> = (0..n)
        .map(|j| quintic(&from[2][j], &target[j], span))
        .collect();
    // A blend cut short (at the last row's tick) ends where the braking starts.
    let short = cut.filter(|&c| c < ticks);
    let end = short.unwrap_or(ticks);
    let mut blend = Vec::with_capacity((end as usize + 1) * n);
    for k in 0..=end {
        for (j, c) in coefficients.iter().enumerate() {
            // The ends exactly as given: the switch must match bit for bit.
            let (position, velocity) = if k == 0 {
                (from[2][j].position, from[2][j].velocity)
            } else if k == ticks {
                (target[j].position, target[j].velocity)
            } else {
                eval(c, k as f64 * dt)
            };
            blend.push(Setpoint {
                position,
                velocity,
                acceleration: 0.0,
            });
        }
    }
    // The rows from the join to the last one, tick by tick.
    let tail_tick = if short.is_none() && end_s > join_s {
        ((end_s - join_s) * rate_hz + 1e-9).floor() as u64
    } else {
        0
    };
    let mut motion = Vec::with_capacity((tail_tick as usize + 1) * n);
    motion.extend_from_slice(&blend[end as usize * n..]);
    for m in 1..=tail_tick {
        curve.at(join_s + m as f64 * dt, &mut row);
        motion.extend_from_slice(&row);
    }
    let approach = knotted(joints, &blend, rate_hz);
    // Then to rest, as fast as the limits allow.
    let last: Vec<Setpoint> = motion[motion.len() - n..].to_vec();
    brake(joints, &last, rate_hz, &mut motion)?;
    let path = knotted(joints, &motion, rate_hz);
    prove(joints, from, &approach, &path, rate_hz, recovering)?;
    Ok(Spliced {
        approach,
        motion: path,
        tail_tick,
        join_s: cut.is_none().then_some(join_s),
    })
}

/// Appends the braking tail, tick by tick after `last` (the last row's setpoints): each DOF's
/// time-optimal stop at its acceleration limits whose duration is a whole number of ticks,
/// computed by Ruckig (velocity interface, to rest, discrete durations). On the tick grid the
/// stop is then exactly what the loop's Hermite sampling between ticks reproduces (a stop ending
/// between two ticks would read as a higher deceleration there); it brakes at most a tick
/// longer than the continuous optimum. The model gives no jerk limits, so none bounds it
/// (Ruckig's acceleration-limited profiles). Each DOF stops on its own, as soon as it can: the
/// shortest stop for every DOF, not a synchronised one. Off the loop: Ruckig allocates.
fn brake(
    joints: &JointSet,
    last: &[Setpoint],
    rate_hz: f64,
    out: &mut Vec<Setpoint>,
) -> Result<(), String> {
    use rsruckig::prelude::{
        ControlInterface, DataArrayOrVec, DurationDiscretization, InputParameter, Ruckig,
        ThrowErrorHandler, Trajectory as Profile,
    };
    let dt = 1.0 / rate_hz;
    let mut stops = Vec::with_capacity(last.len());
    for (d, s) in joints.dofs.iter().zip(last) {
        let a = d.limits.acceleration;
        let mut input = InputParameter::<1>::new(None);
        input.control_interface = ControlInterface::Velocity;
        input.duration_discretization = DurationDiscretization::Discrete;
        input.current_position[0] = s.position;
        input.current_velocity[0] = s.velocity;
        input.current_acceleration[0] = s.acceleration.clamp(a.lower, a.upper);
        input.max_velocity[0] = d.limits.velocity.upper;
        input.max_acceleration[0] = a.upper;
        input.min_acceleration = Some(DataArrayOrVec::new(None, a.lower));
        let mut profile = Profile::new(None);
        Ruckig::<1, ThrowErrorHandler>::new(None, dt)
            .calculate(&input, &mut profile)
            .map_err(|e| format!("{}: no stop from the last row: {e}", d.name))?;
        stops.push(profile);
    }
    // Whole ticks (discrete durations), to rounding.
    let ends: Vec<u64> = stops
        .iter()
        .map(|p| (p.get_duration() * rate_hz).round() as u64)
        .collect();
    let ticks = ends.iter().copied().max().unwrap_or(0).max(1);
    let mut position = DataArrayOrVec::new(None, 0.0);
    let mut velocity = DataArrayOrVec::new(None, 0.0);
    for k in 1..=ticks {
        for (stop, &end) in stops.iter().zip(&ends) {
            let t = k.min(end) as f64 * dt;
            stop.at_time(
                t,
                &mut Some(&mut position),
                &mut Some(&mut velocity),
                &mut None,
                &mut None,
                &mut None,
            );
            out.push(Setpoint {
                position: position[0],
                // At rest exactly once stopped.
                velocity: if k >= end { 0.0 } else { velocity[0] },
                acceleration: 0.0,
            });
        }
    }
    Ok(())
}

/// The stream the drives see from the splice on, as the loop samples it: within the envelope,
/// stoppable from every sample, at rest at the end.
fn prove(
    joints: &JointSet,
    from: &Setpoint3,
    approach: &Trajectory,
    motion: &Trajectory,
    rate_hz: f64,
    recovering: bool,
) -> Result<(), String> {
    let n = joints.len();
    let mut envelope = Envelope::new(joints, rate_hz);
    if recovering {
        envelope = envelope.recovering();
    }
    for f in from {
        envelope.push(f).map_err(|b| b.to_string())?;
    }
    let mut before = from[2].clone();
    let mut probe = Stop::new(joints, rate_hz, &[]);
    let mut out = vec![Setpoint::default(); n];
    let mut check = |out: &[Setpoint], t: f64| -> Result<(), String> {
        envelope.push(out).map_err(|b| b.to_string())?;
        // Stoppable everywhere: a quick stop from here ends inside the limits.
        if let Some((j, rest)) = probe.unstoppable(&before, out) {
            let d = &joints.dofs[j];
            return Err(format!(
                "{}: a quick stop from {t:.4} s after the splice would end at {rest}, past its position limits [{}, {}]",
                d.name, d.limits.position.lower, d.limits.position.upper
            ));
        }
        before.copy_from_slice(out);
        Ok(())
    };
    let mut cursor = Cursor::default();
    for k in 1..approach.ticks() {
        approach.sample(&mut cursor, k, &mut out);
        check(&out, k as f64 / rate_hz)?;
    }
    let offset = approach.ticks().saturating_sub(1);
    let mut cursor = Cursor::default();
    // One tick past the end: held at rest.
    for k in 1..=motion.ticks() {
        motion.sample(&mut cursor, k, &mut out);
        check(&out, (offset + k) as f64 / rate_hz)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::robot::Limits;
    use crate::trajectory::DofLimits;

    fn joints() -> JointSet {
        JointSet::uniform(
            2,
            DofLimits {
                position: Limits::symmetric(3.0),
                velocity: Limits::symmetric(2.0),
                acceleration: Limits::symmetric(20.0),
                effort: Limits::symmetric(10.0),
            },
        )
    }

    fn at_rest(p: [f64; 2]) -> Setpoint3 {
        let s: Vec<Setpoint> = p
            .iter()
            .map(|&position| Setpoint {
                position,
                ..Setpoint::default()
            })
            .collect();
        [s.clone(), s.clone(), s]
    }

    /// 30 Hz rows of a slow sine from `t0`.
    fn rows(t0: f64, count: usize) -> (Vec<f64>, Vec<f64>) {
        let times: Vec<f64> = (0..count).map(|i| t0 + i as f64 / 30.0).collect();
        let values = times
            .iter()
            .flat_map(|&t| [0.5 * (t * 2.0).sin(), -0.3 * (t * 3.0).sin()])
            .collect();
        (times, values)
    }

    #[test]
    fn a_splice_starts_exactly_at_the_splice_tick_follows_the_rows_and_ends_at_rest() {
        let rate = 500.0;
        let js = joints();
        let from = at_rest([0.0, 0.0]);
        let (times, values) = rows(0.1, 10);
        let s = splice(&js, &from, 0.0, &times, &values, rate, false, 0.0).unwrap();
        assert_eq!(s.approach.first_setpoints()[0].position, 0.0);
        assert_eq!(s.approach.first_setpoints()[0].velocity, 0.0);
        let join_s = s.join_s.unwrap();
        assert!(join_s >= 0.1 && join_s <= *times.last().unwrap());
        // At the last row the path is on it.
        let mut out = vec![Setpoint::default(); 2];
        s.motion
            .sample(&mut Cursor::default(), s.tail_tick, &mut out);
        let end = join_s + s.tail_tick as f64 / rate;
        assert!((end - times[9]).abs() < 1.0 / rate);
        assert!((out[0].position - values[18]).abs() < 0.01, "{out:?}");
        for l in s.motion.last_setpoints() {
            assert!(l.velocity.abs() < 1e-12, "{l:?}");
        }
    }

    #[test]
    fn past_its_last_row_each_dof_stops_as_fast_as_its_acceleration_limit_allows() {
        let rate = 500.0;
        let js = joints();
        // Straight lines (a natural spline keeps them straight): 0.5 and -1 rad/s at the end.
        let times: Vec<f64> = (0..10).map(|i| 0.1 + i as f64 / 30.0).collect();
        let values: Vec<f64> = times.iter().flat_map(|&t| [0.5 * t, -t]).collect();
        let from = at_rest([0.05, -0.1]);
        let s = splice(&js, &from, 0.0, &times, &values, rate, false, 0.0).unwrap();
        let mut out = vec![Setpoint::default(); 2];
        s.motion
            .sample(&mut Cursor::default(), s.tail_tick, &mut out);
        let last = out.clone();
        assert!((last[0].velocity - 0.5).abs() < 1e-9, "{last:?}");
        // v/a at 20 rad/s²: 25 ms and 50 ms (12.5 and 25 ticks), to the next tick at most (the
        // stop ends on one): 13 and 25.
        let mut at_rest = |j: usize| {
            (1..)
                .find(|&k| {
                    s.motion
                        .sample(&mut Cursor::default(), s.tail_tick + k, &mut out);
                    out[j].velocity.abs() < 1e-12
                })
                .unwrap()
        };
        let stopped = [at_rest(0), at_rest(1)];

        assert_eq!(stopped, [13, 25]);
        assert_eq!(s.motion.ticks() - 1, s.tail_tick + stopped[1]);
        // At a constant deceleration: v·T/2, within half a tick's travel of v²/2a.
        let end = s.motion.last_setpoints();
        for j in 0..2 {
            let t = stopped[j] as f64 / rate;
            let past = end[j].position - last[j].position;
            assert!(
                (past - last[j].velocity * t / 2.0).abs() < 1e-9,
                "{j}: {past}"
            );
            let ideal = last[j].velocity * last[j].velocity.abs() / 40.0;
            assert!(
                (past - ideal).abs() <= last[j].velocity.abs() / rate / 2.0,
                "{j}: {past}"
            );
        }
    }

    #[test]
    fn rows_that_end_before_the_splice_can_reach_them_are_late() {
        let rate = 500.0;
        let (times, values) = rows(0.0, 3);
        let err = splice(
            &joints(),
            &at_rest([0.0, 0.0]),
            1.0,
            &times,
            &values,
            rate,
            false,
            0.0,
        )
        .unwrap_err();
        assert!(matches!(err, SpliceError::Late { .. }), "{err}");
    }

    #[test]
    fn rows_past_the_limits_or_too_close_to_stop_before_them_are_refused_with_the_reason() {
        let rate = 500.0;
        let js = joints();
        let times = vec![0.2, 0.3];
        let values = vec![3.5, 0.0, 3.5, 0.0];
        let err = splice(
            &js,
            &at_rest([0.0, 0.0]),
            0.0,
            &times,
            &values,
            rate,
            false,
            0.0,
        )
        .unwrap_err();
        assert!(err.to_string().contains("row 0"), "{err}");
        // Rows rushing at the limit (about 0.5 rad/s at their last row, 2.9 of 3) with a quick
        // stop at 1 rad/s²: no path along them can stop inside, so none joins them; the path
        // heads for their last row, slowly enough to stop, and brakes at its time, short of it.
        let mut js = js;
        for d in &mut js.dofs {
            d.quick_stop_deceleration = Some(1.0);
        }
        let times = vec![1.0, 1.5, 2.0];
        let values = vec![2.0, 0.0, 2.6, 0.0, 2.9, 0.0];
        let from = at_rest([0.0, 0.0]);
        let s = splice(&js, &from, 0.0, &times, &values, rate, false, 0.0).unwrap();
        assert_eq!((s.join_s, s.tail_tick, s.approach.ticks()), (None, 0, 1001));
        let end = s.motion.last_setpoints()[0].position;
        assert!(end > 1.0 && end < 2.9, "{end}");
        // Already moving at 2 rad/s at 2.5 towards the limit: nothing can stop it in time.
        let moving = |k: f64| -> Vec<Setpoint> {
            vec![
                Setpoint {
                    position: 2.5 + 2.0 * k / rate,
                    velocity: 2.0,
                    acceleration: 0.0,
                },
                Setpoint::default(),
            ]
        };
        let from = [moving(-2.0), moving(-1.0), moving(0.0)];
        let err = splice(&js, &from, 0.0, &times, &values, rate, false, 0.0)
            .err()
            .unwrap();
        assert!(err.to_string().contains("quick stop"), "{err}");
    }

    #[test]
    fn rows_too_far_to_join_before_they_end_are_headed_for_then_braked_at_the_last_rows_tick() {
        let rate = 500.0;
        let js = joints();
        // From rest at 0, rows a whole radian away, due at once: no blend (at most 2 rad/s)
        // joins them before their last row at 0.1167 s. The path heads for that row while the
        // rows last and at its tick (58) brakes from where it is, as every stream ends.
        let times: Vec<f64> = (0..3).map(|i| 0.05 + i as f64 / 30.0).collect();
        let values: Vec<f64> = times.iter().flat_map(|&t| [1.0 + 0.9 * t, 0.0]).collect();
        let s = splice(
            &js,
            &at_rest([0.0, 0.0]),
            0.0,
            &times,
            &values,
            rate,
            false,
            0.0,
        )
        .unwrap();
        assert_eq!((s.join_s, s.tail_tick), (None, 0));
        assert_eq!(s.approach.ticks(), 59);
        let start = s.motion.first_setpoints()[0];
        assert!(start.velocity > 0.1 && start.position < 0.5, "{start:?}");
        // The time-optimal stop at 20 rad/s², ending on the first tick at or after v/a.
        let ticks = (start.velocity / 20.0 * rate - 1e-9).ceil() as u64;
        assert_eq!(s.motion.ticks() - 1, ticks.max(1));
        let end = s.motion.last_setpoints()[0];
        assert!(end.velocity.abs() < 1e-12, "{end:?}");
        let past = end.position - start.position;
        assert!(
            (past - start.velocity * ticks as f64 / rate / 2.0).abs() < 1e-9,
            "{past}"
        );
    }
}
