//! A blend: from a moving state into a new motion without a seam, for replacing a motion mid-flight.
//!
//! Per DOF a quintic matches position, velocity and acceleration at both ends (the state the old
//! motion is in at the switch tick; the new motion's first sample), all DOFs over one duration.
//! It is sampled at every tick and kept in Hermite form (values and slopes at the ticks), and the
//! shortest duration is taken whose stream — the old motion's last two setpoints before the switch,
//! the blend, the new motion's first ticks — is within every limit as the drives see it
//! ([`Envelope`]). Built and proved off the loop; the loop only swaps it in.

use super::envelope::Envelope;
use super::track::Knots;
use super::{Cursor, JointSet, Setpoint, Stop, Trajectory};

/// Longest blend tried, s.
const LONGEST_S: f64 = 60.0;
/// Each duration tried is this much longer than the last.
const GROWTH: f64 = 1.25;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BlendError {
    #[error("the state to blend from has {got} DOFs; expected {expected}")]
    Length { expected: usize, got: usize },
    #[error(
        "no blend of up to {LONGEST_S} s from here into the motion stays within the limits ({0}); stop first, then play it"
    )]
    Infeasible(String),
}

/// One DOF's quintic over `[0, t]`: coefficients of 1, t, …, t⁵.
pub(super) fn quintic(from: &Setpoint, to: &Setpoint, t: f64) -> [f64; 6] {
    let (p0, v0, a0) = (from.position, from.velocity, from.acceleration);
    let (p1, v1, a1) = (to.position, to.velocity, to.acceleration);
    let d = p1 - p0;
    [
        p0,
        v0,
        a0 / 2.0,
        (20.0 * d - (8.0 * v1 + 12.0 * v0) * t - (3.0 * a0 - a1) * t * t) / (2.0 * t.powi(3)),
        (-30.0 * d + (14.0 * v1 + 16.0 * v0) * t + (3.0 * a0 - 2.0 * a1) * t * t)
            / (2.0 * t.powi(4)),
        (12.0 * d - 6.0 * (v1 + v0) * t - (a0 - a1) * t * t) / (2.0 * t.powi(5)),
    ]
}

pub(super) fn eval(c: &[f64; 6], t: f64) -> (f64, f64) {
    let p = c[0] + t * (c[1] + t * (c[2] + t * (c[3] + t * (c[4] + t * c[5]))));
    let v = c[1] + t * (2.0 * c[2] + t * (3.0 * c[3] + t * (4.0 * c[4] + t * 5.0 * c[5])));
    (p, v)
}

/// The blend over `ticks` ticks from `from[2]` into `to`'s first sample.
fn over(
    joints: &JointSet,
    from: &Setpoint3,
    to: &[Setpoint],
    ticks: u64,
    rate_hz: f64,
) -> Trajectory {
    let t = ticks as f64 / rate_hz;
    let n = joints.len();
    let coefficients: Vec<[f64; 6]> = (0..n).map(|j| quintic(&from[2][j], &to[j], t)).collect();
    let rows = ticks as usize + 1;
    let mut values = Vec::with_capacity(rows * n);
    let mut slopes = Vec::with_capacity(rows * n);
    let times: Vec<f64> = (0..rows).map(|k| k as f64 / rate_hz).collect();
    for (k, &tk) in times.iter().enumerate() {
        for (j, c) in coefficients.iter().enumerate() {
            // The ends exactly as given: the switch must match bit for bit.
            let (p, v) = if k == 0 {
                (from[2][j].position, from[2][j].velocity)
            } else if k + 1 == rows {
                (to[j].position, to[j].velocity)
            } else {
                eval(c, tk)
            };
            values.push(p);
            slopes.push(v);
        }
    }
    let knots = Knots::hermite(times, (0..n).collect(), values, slopes, joints);
    Trajectory::from_knots(knots, rate_hz)
}

/// The old motion's last three setpoints up to and including the switch tick.
pub type Setpoint3 = [Vec<Setpoint>; 3];

/// The shortest blend (s) from `from` to `target` the velocity and acceleration limits allow
/// for the distance and the change of velocity.
pub(super) fn shortest(joints: &JointSet, from: &[Setpoint], target: &[Setpoint]) -> f64 {
    let mut least: f64 = 0.0;
    for ((d, a), b) in joints.dofs.iter().zip(from).zip(target) {
        let vmax = d.limits.velocity.upper.min(-d.limits.velocity.lower);
        let amax = d
            .limits
            .acceleration
            .upper
            .min(-d.limits.acceleration.lower);
        if vmax > 0.0 {
            least = least.max((b.position - a.position).abs() / vmax);
        }
        if amax > 0.0 {
            least = least.max((b.velocity - a.velocity).abs() / amax);
        }
    }
    least
}

/// The shortest blend from `from` (the setpoints two ticks before the switch, one tick before,
/// and at it — the blend's tick 0) into `motion`'s first sample whose stream is within the limits.
/// `recovering`: positions outside the limits may only move back in.
pub fn blend(
    joints: &JointSet,
    from: &Setpoint3,
    motion: &Trajectory,
    rate_hz: f64,
    recovering: bool,
) -> Result<Trajectory, BlendError> {
    let n = joints.len();
    if let Some(bad) = from.iter().find(|s| s.len() != n) {
        return Err(BlendError::Length {
            expected: n,
            got: bad.len(),
        });
    }
    let to = motion.first_setpoints();
    let least = shortest(joints, &from[2], to).max(2.0 / rate_hz);
    let mut ticks = (least * rate_hz).ceil().max(2.0) as u64;
    let mut last_breach = String::new();
    let mut out = vec![Setpoint::default(); n];
    let mut before = from[2].clone();
    let mut probe = Stop::new(joints, rate_hz, &[]);
    while ticks as f64 <= LONGEST_S * rate_hz {
        let candidate = over(joints, from, to, ticks, rate_hz);
        let mut envelope = Envelope::new(joints, rate_hz);
        if recovering {
            envelope = envelope.recovering();
        }
        let mut cursor = Cursor::default();
        let mut check = || -> Result<(), String> {
            envelope.push(&from[0]).map_err(|b| b.to_string())?;
            envelope.push(&from[1]).map_err(|b| b.to_string())?;
            envelope.push(&from[2]).map_err(|b| b.to_string())?;
            before.clone_from(&from[2]);
            for k in 1..candidate.ticks() {
                candidate.sample(&mut cursor, k, &mut out);
                envelope.push(&out).map_err(|b| b.to_string())?;
                // Stoppable everywhere: a quick stop from here ends inside the limits.
                if let Some((j, rest)) = probe.unstoppable(&before, &out) {
                    let t = k as f64 / rate_hz;
                    return Err(format!(
                        "tick {k} ({t:.4} s), DOF {j}: a quick stop from there would end at {rest}, past its position limit"
                    ));
                }
                before.clone_from(&out);
            }
            // Into the motion: its first ticks after the blend's last (which is its tick 0).
            let mut cursor = Cursor::default();
            for k in 1..4.min(motion.ticks()) {
                motion.sample(&mut cursor, k, &mut out);
                envelope.push(&out).map_err(|b| b.to_string())?;
            }
            Ok(())
        };
        match check() {
            Ok(()) => return Ok(candidate),
            Err(breach) => last_breach = breach,
        }
        ticks = ((ticks as f64 * GROWTH).ceil() as u64).max(ticks + 1);
    }
    Err(BlendError::Infeasible(last_breach))
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
                acceleration: Limits::symmetric(10.0),
                effort: Limits::symmetric(10.0),
            },
        )
    }

    fn moving(p: [f64; 2], v: [f64; 2], rate: f64) -> Setpoint3 {
        let at = |k: f64| -> Vec<Setpoint> {
            (0..2)
                .map(|j| Setpoint {
                    position: p[j] + v[j] * k / rate,
                    velocity: v[j],
                    acceleration: 0.0,
                })
                .collect()
        };
        [at(-2.0), at(-1.0), at(0.0)]
    }

    #[test]
    fn a_blend_starts_exactly_at_the_switch_and_ends_in_the_motion_within_the_limits() {
        let rate = 1000.0;
        let js = joints();
        let from = moving([0.5, -0.2], [1.5, -1.0], rate);
        let target = Trajectory::hold(&[-1.0, 1.0], rate);
        let b = blend(&js, &from, &target, rate, false).unwrap();
        let first = b.first_setpoints();
        for j in 0..2 {
            assert_eq!(first[j].position, from[2][j].position);
            assert_eq!(first[j].velocity, from[2][j].velocity);
        }
        let last = b.last_setpoints();
        assert_eq!(last[0].position, -1.0);
        assert_eq!(last[1].position, 1.0);
        // The whole stream, old motion into blend into the target, within the envelope.
        let mut e = Envelope::new(&js, rate);
        for s in &from {
            e.push(s).unwrap();
        }
        let mut out = vec![Setpoint::default(); 2];
        let mut cursor = Cursor::default();
        for k in 1..b.ticks() {
            b.sample(&mut cursor, k, &mut out);
            e.push(&out).unwrap();
        }
        e.push(&out).unwrap();
    }

    #[test]
    fn a_blend_the_limits_cannot_allow_is_refused_with_the_reason() {
        let rate = 1000.0;
        let js = joints();
        // Already at full speed towards a limit 1 mm away: no blend can turn it in time.
        let from = moving([2.999, 0.0], [2.0, 0.0], rate);
        let target = Trajectory::hold(&[2.999, 0.0], rate);
        let err = blend(&js, &from, &target, rate, false).unwrap_err();
        assert!(matches!(err, BlendError::Infeasible(_)), "{err}");
    }
}
