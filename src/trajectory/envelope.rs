//! "Within the limits", measured the way a drive sees the commanded stream: one checker for every
//! test of the trajectory engine and of the loop.
//!
//! At the control period `dt`, for each DOF and each tick `k` of a stream of setpoints:
//! - the position `p_k` is inside `[lower, upper]` (or, [`Envelope::recovering`], no further
//!   outside than `p_{k-1}`: a robot outside its limits may only be moved back in);
//! - the finite-difference velocity `(p_k − p_{k−1}) / dt` is inside the signed velocity limits;
//! - the finite-difference acceleration `(p_{k+1} − 2 p_k + p_{k−1}) / dt²` is inside the signed
//!   acceleration limits;
//! - the setpoint's own velocity and acceleration fields are inside their limits, and the
//!   velocity field's step `(v_k − v_{k−1}) / dt` inside the acceleration limits.
//!
//! Tolerance: `1e-9 × |limit|`, plus what rounding the positions alone can produce in a finite
//! difference (`8 ε P / dt` for a velocity, `16 ε P / dt²` for an acceleration, with ε the f64
//! machine epsilon and `P` the largest magnitude of the DOF's finite position limits and of the
//! positions so far: the scale at which positions are computed). Nothing else: a value over by
//! more is a breach.

use std::fmt;

use super::{DofLimits, JointSet, Setpoint};
use crate::robot::Limits;

/// Relative tolerance on every limit.
pub const RELATIVE_TOLERANCE: f64 = 1e-9;

/// What a breach crossed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    Position,
    /// `(p_k − p_{k−1}) / dt`.
    StepVelocity,
    /// `(p_{k+1} − 2 p_k + p_{k−1}) / dt²`, reported at tick `k`.
    StepAcceleration,
    /// The setpoint's velocity field.
    Velocity,
    /// The setpoint's acceleration field.
    Acceleration,
    /// `(v_k − v_{k−1}) / dt` of the velocity field.
    VelocityStep,
}

impl Measure {
    pub fn as_str(self) -> &'static str {
        match self {
            Measure::Position => "position",
            Measure::StepVelocity => "finite-difference velocity",
            Measure::StepAcceleration => "finite-difference acceleration",
            Measure::Velocity => "velocity field",
            Measure::Acceleration => "acceleration field",
            Measure::VelocityStep => "velocity field step per period",
        }
    }
}

impl fmt::Display for Measure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The first sample of a stream outside the envelope.
#[derive(Debug, Clone, PartialEq)]
pub struct Breach {
    /// Index of the sample in the stream (0 = the first pushed).
    pub tick: u64,
    pub dof: usize,
    pub measure: Measure,
    pub value: f64,
    pub limits: Limits,
}

impl fmt::Display for Breach {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "tick {}, DOF {}: {} {} is outside [{}, {}]",
            self.tick,
            self.dof,
            self.measure.as_str(),
            self.value,
            self.limits.lower,
            self.limits.upper
        )
    }
}

impl std::error::Error for Breach {}

/// The largest share of a limit a stream used, over every DOF with that limit bounded
/// (`value / upper` for positive values, `value / lower` for negative ones).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    pub step_velocity: f64,
    pub step_acceleration: f64,
    pub velocity: f64,
    pub acceleration: f64,
    pub velocity_step: f64,
}

impl Usage {
    /// The larger of each share.
    pub fn max(self, other: Usage) -> Usage {
        Usage {
            step_velocity: self.step_velocity.max(other.step_velocity),
            step_acceleration: self.step_acceleration.max(other.step_acceleration),
            velocity: self.velocity.max(other.velocity),
            acceleration: self.acceleration.max(other.acceleration),
            velocity_step: self.velocity_step.max(other.velocity_step),
        }
    }
}

/// A streaming checker: push the stream one tick at a time. Allocates only in [`Envelope::new`].
#[derive(Debug, Clone)]
pub struct Envelope {
    limits: Vec<DofLimits>,
    dt: f64,
    recovering: bool,
    /// The two samples before the newest, and the newest.
    older: Vec<Setpoint>,
    previous: Vec<Setpoint>,
    newest: Vec<Setpoint>,
    /// Per DOF: the scale positions are computed at (see the module's tolerance).
    magnitude: Vec<f64>,
    pushed: u64,
    usage: Usage,
}

impl Envelope {
    pub fn new(joints: &JointSet, rate_hz: f64) -> Envelope {
        let n = joints.len();
        Envelope {
            limits: joints.dofs.iter().map(|d| d.limits).collect(),
            dt: 1.0 / rate_hz,
            recovering: false,
            older: vec![Setpoint::default(); n],
            previous: vec![Setpoint::default(); n],
            newest: vec![Setpoint::default(); n],
            magnitude: joints
                .dofs
                .iter()
                .map(|d| position_scale(d.limits.position))
                .collect(),
            pushed: 0,
            usage: Usage::default(),
        }
    }

    /// Positions outside the position limits pass as long as they are no further outside than the
    /// sample before (the first sample may be anywhere): a stream that recovers a robot.
    pub fn recovering(mut self) -> Envelope {
        self.recovering = true;
        self
    }

    /// Samples pushed so far.
    pub fn pushed(&self) -> u64 {
        self.pushed
    }

    pub fn usage(&self) -> Usage {
        self.usage
    }

    /// Checks the next sample of the stream (JointSet order, one entry per DOF).
    pub fn push(&mut self, sample: &[Setpoint]) -> Result<(), Breach> {
        std::mem::swap(&mut self.older, &mut self.previous);
        std::mem::swap(&mut self.previous, &mut self.newest);
        for (n, s) in self.newest.iter_mut().zip(sample) {
            *n = *s;
        }
        let k = self.pushed;
        self.pushed += 1;
        for (j, lim) in self.limits.iter().enumerate() {
            let (Some(now), Some(before), Some(oldest), Some(scale)) = (
                self.newest.get(j),
                self.previous.get(j),
                self.older.get(j),
                self.magnitude.get_mut(j),
            ) else {
                continue;
            };
            *scale = scale.max(now.position.abs());
            let mut usage = self.usage;
            let stream = Stream {
                dt: self.dt,
                history: k,
                scale: *scale,
                recovering: self.recovering,
            };
            let judged = stream.judge(lim, [oldest, before, now], |measure, value, limits| {
                usage = usage.max(usage_of(measure, value, limits));
            });
            self.usage = usage;
            if let Err((measure, value, limits)) = judged {
                let tick = if measure == Measure::StepAcceleration {
                    k - 1
                } else {
                    k
                };
                return Err(Breach {
                    tick,
                    dof: j,
                    measure,
                    value,
                    limits,
                });
            }
        }
        Ok(())
    }

    /// Checks a whole stream; returns the usage.
    pub fn check<'a>(
        joints: &JointSet,
        rate_hz: f64,
        stream: impl IntoIterator<Item = &'a [Setpoint]>,
    ) -> Result<Usage, Breach> {
        let mut e = Envelope::new(joints, rate_hz);
        for s in stream {
            e.push(s)?;
        }
        Ok(e.usage())
    }
}

/// Where a sample sits in its stream, for [`Stream::judge`].
#[derive(Debug, Clone, Copy)]
pub struct Stream {
    /// The control period, s.
    pub dt: f64,
    /// Samples before this one in the stream (the finite differences need 1 and 2).
    pub history: u64,
    /// The magnitude positions are computed at (the rounding tolerance scales with it).
    pub scale: f64,
    /// Positions outside the limits pass when no farther outside than the sample before.
    pub recovering: bool,
}

impl Stream {
    /// The one definition of "within the limits" for one DOF: `now` after `before` after `oldest`
    /// (`[oldest, before, now]`), as the drive sees it. `seen` is told every measure it computes;
    /// the first one outside its limits is the error.
    pub fn judge(
        &self,
        lim: &DofLimits,
        [oldest, before, now]: [&Setpoint; 3],
        mut seen: impl FnMut(Measure, f64, Limits),
    ) -> Result<(), (Measure, f64, Limits)> {
        let (dt, eps, scale) = (self.dt, f64::EPSILON, self.scale);
        let p = now.position;
        if !inside(lim.position, p, 4.0 * eps * scale) {
            let outside = distance_outside(lim.position, p);
            let allowed = if !self.recovering {
                false
            } else if self.history == 0 {
                !outside.is_nan()
            } else {
                let was = distance_outside(lim.position, before.position);
                outside <= was + tolerance(was, 4.0 * eps * scale)
            };
            if !allowed {
                return Err((Measure::Position, p, lim.position));
            }
        }
        let mut check = |measure: Measure, value: f64, limits: Limits, rounding: f64| {
            seen(measure, value, limits);
            if inside(limits, value, rounding) {
                Ok(())
            } else {
                Err((measure, value, limits))
            }
        };
        check(Measure::Velocity, now.velocity, lim.velocity, 0.0)?;
        check(
            Measure::Acceleration,
            now.acceleration,
            lim.acceleration,
            0.0,
        )?;
        if self.history >= 1 {
            let w = (p - before.position) / dt;
            check(
                Measure::StepVelocity,
                w,
                lim.velocity,
                8.0 * eps * scale / dt,
            )?;
            let dv = (now.velocity - before.velocity) / dt;
            let dv_rounding = 4.0 * eps * now.velocity.abs().max(before.velocity.abs()) / dt;
            check(Measure::VelocityStep, dv, lim.acceleration, dv_rounding)?;
        }
        if self.history >= 2 {
            let a = (p - 2.0 * before.position + oldest.position) / (dt * dt);
            let rounding = 16.0 * eps * scale / (dt * dt);
            check(Measure::StepAcceleration, a, lim.acceleration, rounding)?;
        }
        Ok(())
    }
}

/// The largest magnitude of `l`'s finite bounds: the scale positions on that DOF are computed at.
pub fn position_scale(l: Limits) -> f64 {
    [l.lower, l.upper]
        .into_iter()
        .filter(|x| x.is_finite())
        .fold(0.0, |m: f64, x| m.max(x.abs()))
}

/// How far `x` is outside `l` (≤ 0 inside; NaN for NaN).
fn distance_outside(l: Limits, x: f64) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    (l.lower - x).max(x - l.upper)
}

fn tolerance(limit: f64, rounding: f64) -> f64 {
    let relative = if limit.is_finite() {
        RELATIVE_TOLERANCE * limit.abs()
    } else {
        0.0
    };
    relative + rounding
}

/// Inside the limits with the tolerance; false for NaN.
fn inside(l: Limits, x: f64, rounding: f64) -> bool {
    x >= l.lower - tolerance(l.lower, rounding) && x <= l.upper + tolerance(l.upper, rounding)
}

fn usage_of(measure: Measure, value: f64, l: Limits) -> Usage {
    let bound = if value >= 0.0 { l.upper } else { l.lower };
    let share = if bound.is_finite() && bound != 0.0 {
        value / bound
    } else {
        0.0
    };
    let mut u = Usage::default();
    match measure {
        Measure::StepVelocity => u.step_velocity = share,
        Measure::StepAcceleration => u.step_acceleration = share,
        Measure::Velocity => u.velocity = share,
        Measure::Acceleration => u.acceleration = share,
        Measure::VelocityStep => u.velocity_step = share,
        Measure::Position => {}
    }
    u
}

#[cfg(test)]
mod tests {
    use super::*;

    fn joints() -> JointSet {
        JointSet::uniform(
            1,
            DofLimits {
                position: Limits::symmetric(1.0),
                velocity: Limits {
                    lower: -1.0,
                    upper: 2.0,
                },
                acceleration: Limits::symmetric(10.0),
                effort: Limits::UNBOUNDED,
            },
        )
    }

    fn at(position: f64) -> [Setpoint; 1] {
        [Setpoint {
            position,
            ..Setpoint::default()
        }]
    }

    #[test]
    fn measures_finite_differences_with_signed_limits() {
        let js = joints();
        // 100 Hz: 1.5 rad/s up is inside [-1, 2], down is not.
        let mut e = Envelope::new(&js, 100.0);
        for p in [0.0, 0.0, 0.0005, 0.0015, 0.0030] {
            e.push(&at(p)).unwrap();
        }
        let mut e = Envelope::new(&js, 100.0);
        e.push(&at(0.0)).unwrap();
        e.push(&at(0.015)).unwrap();
        let mut e = Envelope::new(&js, 100.0);
        e.push(&at(0.0)).unwrap();
        let err = e.push(&at(-0.015)).unwrap_err();
        assert_eq!((err.measure, err.tick), (Measure::StepVelocity, 1));
        // The acceleration into -0.15 rad/s over one tick is 15 rad/s²: reported at tick 1.
        let mut e = Envelope::new(&js, 100.0);
        e.push(&at(0.0)).unwrap();
        e.push(&at(0.0)).unwrap();
        let err = e.push(&at(-0.0015)).unwrap_err();
        assert_eq!((err.measure, err.tick), (Measure::StepAcceleration, 1));
        assert!((err.value + 15.0).abs() < 1e-9, "{err}");
    }

    #[test]
    fn checks_the_fields_and_their_steps() {
        let js = joints();
        let mut e = Envelope::new(&js, 100.0);
        let s = |velocity: f64, acceleration: f64| {
            [Setpoint {
                position: 0.0,
                velocity,
                acceleration,
            }]
        };
        e.push(&s(0.0, 0.0)).unwrap();
        e.push(&s(0.1, 10.0)).unwrap();
        assert_eq!(
            e.push(&s(0.3, 0.0)).unwrap_err().measure,
            Measure::VelocityStep
        );
        let mut e = Envelope::new(&js, 100.0);
        assert_eq!(
            e.push(&s(0.0, -11.0)).unwrap_err().measure,
            Measure::Acceleration
        );
        assert!((e.usage().acceleration - 1.1).abs() < 1e-12);
    }

    #[test]
    fn recovery_only_moves_inward() {
        let js = joints();
        let mut e = Envelope::new(&js, 100.0);
        assert_eq!(e.push(&at(1.2)).unwrap_err().measure, Measure::Position);
        let mut e = Envelope::new(&js, 100.0).recovering();
        for p in [1.2, 1.2, 1.1999, 1.1997] {
            e.push(&at(p)).unwrap();
        }
        let err = e.push(&at(1.1998)).unwrap_err();
        assert_eq!((err.measure, err.tick), (Measure::Position, 4));
    }

    #[test]
    fn nan_is_a_breach() {
        let mut e = Envelope::new(&joints(), 100.0);
        assert!(e.push(&at(f64::NAN)).is_err());
    }
}
