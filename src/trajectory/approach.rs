//! The approach: from where the robot is to a motion's first sample, smoothly and as fast as the
//! velocity and acceleration limits allow.
//!
//! Every DOF follows the same normalised profile, so all of them start and arrive together along a
//! straight line in joint space. The profile accelerates with a raised-cosine acceleration
//! (`A·sin²`), cruises, and decelerates symmetrically: velocity and acceleration are zero at both
//! ends and continuous in between. The ramp's share of the duration is chosen to make the
//! duration the shortest that keeps every DOF within its limits.

use super::track::{MAX_RATE_HZ, Profile, Trajectory};
use super::{JointSet, Setpoint};
use crate::diag::Num;

/// Velocity used for a DOF whose skeleton gives no velocity limit (rad/s or m/s).
pub const DEFAULT_VELOCITY: f64 = 0.5;
/// Without an acceleration limit, the approach reaches a DOF's velocity limit over this long (s).
pub const DEFAULT_RAMP_S: f64 = 1.0;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApproachError {
    #[error("the approach needs {expected} positions (one per commanded DOF), got {from} and {to}")]
    Length {
        expected: usize,
        from: usize,
        to: usize,
    },
    #[error("`{dof}`: {what} position {} is not a finite number", Num(*value))]
    NonFinite {
        dof: String,
        what: &'static str,
        value: f64,
    },
    #[error("`{dof}`: target position {} is outside the position limits [{}, {}]", Num(*value), Num(*lower), Num(*upper))]
    TargetOutside {
        dof: String,
        value: f64,
        lower: f64,
        upper: f64,
    },
    #[error("`{dof}`: the velocity or acceleration limits do not allow moving by {}", Num(*distance))]
    CannotMove { dof: String, distance: f64 },
    #[error("the control rate must be a number in (0, {MAX_RATE_HZ}] Hz, not {}", Num(*.0))]
    Rate(f64),
}

/// A trajectory from `from` (positions, at rest) to `to`'s positions, arriving at rest.
pub fn approach(
    joints: &JointSet,
    from: &[f64],
    to: &[Setpoint],
    rate_hz: f64,
) -> Result<Trajectory, ApproachError> {
    if !(rate_hz > 0.0 && rate_hz <= MAX_RATE_HZ) {
        return Err(ApproachError::Rate(rate_hz));
    }
    if from.len() != joints.len() || to.len() != joints.len() {
        return Err(ApproachError::Length {
            expected: joints.len(),
            from: from.len(),
            to: to.len(),
        });
    }
    // (distance, velocity limit, acceleration limit) per moving DOF.
    let mut moves = Vec::with_capacity(joints.len());
    for ((d, &a), b) in joints.dofs.iter().zip(from).zip(to) {
        let b = b.position;
        for (what, value) in [("current", a), ("target", b)] {
            if !value.is_finite() {
                return Err(ApproachError::NonFinite {
                    dof: d.name.clone(),
                    what,
                    value,
                });
            }
        }
        let p = d.limits.position;
        if !p.contains(b) {
            return Err(ApproachError::TargetOutside {
                dof: d.name.clone(),
                value: b,
                lower: p.lower,
                upper: p.upper,
            });
        }
        let distance = b - a;
        if distance == 0.0 {
            continue;
        }
        let v = if distance > 0.0 {
            d.limits.velocity.upper
        } else {
            -d.limits.velocity.lower
        };
        let v = if v == f64::INFINITY {
            DEFAULT_VELOCITY
        } else {
            v
        };
        // No harder than a quick stop brakes: from anywhere along it, one ends before the target.
        let acc = d.limits.acceleration;
        let acc = acc
            .upper
            .min(-acc.lower)
            .min(d.quick_stop_deceleration.unwrap_or(f64::INFINITY));
        let acc = if acc == f64::INFINITY {
            2.0 * v / DEFAULT_RAMP_S
        } else {
            acc
        };
        if !(v > 0.0 && acc > 0.0) {
            return Err(ApproachError::CannotMove {
                dof: d.name.clone(),
                distance,
            });
        }
        moves.push((distance.abs(), v, acc));
    }
    let start = from.to_vec();
    let delta: Vec<f64> = from.iter().zip(to).map(|(a, b)| b.position - a).collect();
    if moves.is_empty() {
        return Ok(Trajectory::from_profile(Profile::at_rest(&start), rate_hz));
    }
    let (duration, ramp) = shortest(&moves);
    // Whole ticks, so the last tick is exactly at the target and at rest; only slower.
    let ticks = (duration * rate_hz).ceil();
    let (duration, ramp) = (ticks / rate_hz, ramp * ticks / (duration * rate_hz));
    let mut trajectory = Trajectory::from_profile(
        Profile {
            start,
            delta,
            duration,
            ramp,
        },
        rate_hz,
    );
    trajectory.judge_seam(joints);
    Ok(trajectory)
}

/// With ramp share `r` of duration `T`, a DOF moving `D` peaks at velocity `D / (T (1 - r))` and
/// acceleration `2 D / (r (1 - r) T²)`: the shortest `T` for that DOF.
fn duration_for(r: f64, (d, v, a): (f64, f64, f64)) -> f64 {
    (d / (v * (1.0 - r))).max((2.0 * d / (a * r * (1.0 - r))).sqrt())
}

/// The ramp share minimising the synchronised duration, and that duration and ramp length. The
/// slowest DOF's duration is a maximum of terms increasing and decreasing in `r`, so it has one
/// minimum in `(0, 0.5]`: golden-section search finds it.
fn shortest(moves: &[(f64, f64, f64)]) -> (f64, f64) {
    let cost = |r: f64| {
        moves
            .iter()
            .map(|&m| duration_for(r, m))
            .fold(0.0, f64::max)
    };
    let golden = 0.5 * (5f64.sqrt() - 1.0);
    let (mut lo, mut hi) = (1e-6, 0.5);
    for _ in 0..80 {
        let a = hi - golden * (hi - lo);
        let b = lo + golden * (hi - lo);
        if cost(a) <= cost(b) {
            hi = b;
        } else {
            lo = a;
        }
    }
    let r = 0.5 * (lo + hi);
    // A hair longer than the bound so rounding cannot put a peak a few ulps over a limit.
    let t = cost(r) * (1.0 + 1e-9);
    (t, r * t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trajectory::Cursor;
    use crate::trajectory::tests::demo_joints;

    fn targets(p: &[f64]) -> Vec<Setpoint> {
        p.iter()
            .map(|&position| Setpoint {
                position,
                ..Setpoint::default()
            })
            .collect()
    }

    #[test]
    fn arrives_at_rest_within_limits_and_is_limited_by_the_slowest_dof() {
        let joints = demo_joints();
        let from = [0.0, 0.0, 0.0, 0.0, 0.0, 0.01, 0.0];
        let to = targets(&[1.0, -0.5, 0.2, 0.0, 0.0, 0.03, 0.0]);
        let rate = 1000.0;
        let t = approach(&joints, &from, &to, rate).unwrap();
        let mut out = vec![Setpoint::default(); joints.len()];
        let mut cursor = Cursor::default();
        let mut peak = vec![(0.0f64, 0.0f64); joints.len()];
        for k in 0..t.ticks() {
            t.sample(&mut cursor, k, &mut out);
            for ((p, o), d) in peak.iter_mut().zip(&out).zip(&joints.dofs) {
                assert!(d.limits.velocity.contains(o.velocity), "{} {o:?}", d.name);
                assert!(
                    d.limits.acceleration.contains(o.acceleration),
                    "{} {o:?}",
                    d.name
                );
                p.0 = p.0.max(o.velocity.abs() / d.limits.velocity.upper);
                p.1 = p.1.max(o.acceleration.abs() / d.limits.acceleration.upper);
            }
        }
        t.sample(&mut cursor, t.ticks() - 1, &mut out);
        for (o, want) in out.iter().zip(&to) {
            assert!((o.position - want.position).abs() < 1e-9);
            assert!(o.velocity.abs() < 1e-9 && o.acceleration.abs() < 1e-9);
        }
        assert_eq!(out[0].position, 1.0);
        // Time-optimal for the profile: some DOF uses (nearly) all of a limit.
        let used = peak.iter().map(|p| p.0.max(p.1)).fold(0.0, f64::max);
        assert!(used > 0.99, "{used}");
    }

    #[test]
    fn starts_at_rest_and_standing_still_is_one_tick() {
        let joints = demo_joints();
        let from = [0.0, 0.0, 0.0, 0.0, 0.0, 0.01, 0.0];
        let t = approach(&joints, &from, &targets(&from), 1000.0).unwrap();
        assert_eq!(t.ticks(), 1);
        let to = targets(&[0.5, 0.0, 0.0, 0.0, 0.0, 0.01, 0.0]);
        let t = approach(&joints, &from, &to, 1000.0).unwrap();
        let mut out = vec![Setpoint::default(); joints.len()];
        t.sample(&mut Cursor::default(), 0, &mut out);
        assert_eq!(out[0], Setpoint::default());
    }

    #[test]
    fn refuses_bad_input() {
        let joints = demo_joints();
        let from = [0.0; 7];
        let mut to = targets(&[0.0; 7]);
        to[0].position = 9.0;
        assert!(matches!(
            approach(&joints, &from, &to, 1000.0),
            Err(ApproachError::TargetOutside { .. })
        ));
        assert!(matches!(
            approach(&joints, &[f64::NAN; 7], &targets(&[0.0; 7]), 1000.0),
            Err(ApproachError::NonFinite { .. })
        ));
        assert!(matches!(
            approach(&joints, &[0.0; 3], &targets(&[0.0; 7]), 1000.0),
            Err(ApproachError::Length { .. })
        ));
    }
}
