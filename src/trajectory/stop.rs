//! Bringing a moving robot to rest within its limits, planned on the real-time loop.
//!
//! Every DOF decelerates at a constant rate, all of them together: the robot keeps to the line it
//! was moving along and stops where the slowest-to-stop DOF needs it to, with no DOF above its
//! acceleration limit. Constant deceleration is the shortest stop those limits allow.

use super::{JointSet, Setpoint};

/// Stopping time used for a DOF with no acceleration limit (s).
pub const UNLIMITED_STOP_S: f64 = 0.05;

/// How hard a stop brakes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopKind {
    /// Within the acceleration limits.
    Planned,
    /// At the quick-stop decelerations.
    Quick,
}

/// A stop planner: allocates once in [`Stop::new`]; [`Stop::plan`] and [`Stop::sample`] never
/// allocate, lock or block, so the loop can plan a stop the moment it needs one.
#[derive(Debug, Clone)]
pub struct Stop {
    rate_hz: f64,
    /// Per DOF: the deceleration it can bear (magnitude), position and velocity at the start.
    decel: Vec<f64>,
    quick: Vec<f64>,
    start: Vec<f64>,
    velocity: Vec<f64>,
    duration: f64,
    ticks: u64,
}

impl Stop {
    /// A planner for `joints` at `rate_hz` (a positive number). Until planned, it holds zeros.
    pub fn new(joints: &JointSet, rate_hz: f64, quick: &[f64]) -> Stop {
        let decel = joints
            .dofs
            .iter()
            .map(|d| {
                let a = d.limits.acceleration;
                a.upper.min(-a.lower)
            })
            .collect();
        let n = joints.len();
        Stop {
            rate_hz,
            decel,
            quick: quick.to_vec(),
            start: vec![0.0; n],
            velocity: vec![0.0; n],
            duration: 0.0,
            ticks: 1,
        }
    }

    /// Plans a stop from `from` (the setpoints last sent, JointSet order). Extra or missing
    /// entries are ignored (missing DOFs stay where the previous plan left them).
    pub fn plan(&mut self, _previous: &[Setpoint], from: &[Setpoint], kind: StopKind) {
        let mut duration: f64 = 0.0;
        let decel = match kind {
            StopKind::Planned => &self.decel,
            StopKind::Quick => &self.quick,
        };
        for (((p, v), &a), s) in self
            .start
            .iter_mut()
            .zip(self.velocity.iter_mut())
            .zip(decel)
            .zip(from)
        {
            *p = s.position;
            *v = if s.velocity.is_finite() {
                s.velocity
            } else {
                0.0
            };
            if *v != 0.0 {
                let t = if a > 0.0 && a.is_finite() {
                    v.abs() / a
                } else {
                    UNLIMITED_STOP_S
                };
                duration = duration.max(t);
            }
        }
        // Rounding up to whole ticks only lowers the deceleration.
        let ticks = (duration * self.rate_hz).ceil();
        self.duration = if self.rate_hz > 0.0 {
            ticks / self.rate_hz
        } else {
            0.0
        };
        self.ticks = if ticks.is_finite() && ticks >= 0.0 {
            ticks as u64 + 1
        } else {
            1
        };
    }

    /// Ticks until rest (tick `ticks() - 1` is at rest). At least 1.
    pub fn ticks(&self) -> u64 {
        self.ticks
    }

    pub fn rate_hz(&self) -> f64 {
        self.rate_hz
    }

    /// Where each DOF comes to rest.
    pub fn rest_position(&self, dof: usize) -> Option<f64> {
        let (p, v) = (self.start.get(dof)?, self.velocity.get(dof)?);
        Some(p + 0.5 * v * self.duration)
    }

    /// Tick `tick` of the stop (0 = the state it was planned from, minus its acceleration);
    /// ticks past the end are at rest.
    pub fn sample(&self, tick: u64, out: &mut [Setpoint]) {
        let t = (tick as f64 / self.rate_hz).min(self.duration);
        let total = self.duration;
        for ((o, &p), &v) in out.iter_mut().zip(&self.start).zip(&self.velocity) {
            *o = if total > 0.0 {
                let a = -v / total;
                Setpoint {
                    position: p + v * t + 0.5 * a * t * t,
                    velocity: v + a * t,
                    acceleration: if t < total { a } else { 0.0 },
                }
            } else {
                Setpoint {
                    position: p,
                    velocity: 0.0,
                    acceleration: 0.0,
                }
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trajectory::tests::demo_joints;

    #[test]
    fn stops_within_the_acceleration_limits_along_the_same_line() {
        let joints = demo_joints();
        let mut stop = Stop::new(&joints, 1000.0, &[]);
        let mut from = vec![Setpoint::default(); joints.len()];
        from[0] = Setpoint {
            position: 0.2,
            velocity: 1.6,
            acceleration: 3.0,
        };
        from[1] = Setpoint {
            position: -0.1,
            velocity: -0.3,
            acceleration: 0.0,
        };
        stop.plan(&from, &from, StopKind::Planned);
        // base_yaw: 1.6 rad/s at 8 rad/s² → 0.2 s.
        assert_eq!(stop.ticks(), 201);
        let mut out = vec![Setpoint::default(); joints.len()];
        let mut prev = from.clone();
        for k in 0..stop.ticks() + 5 {
            stop.sample(k, &mut out);
            for ((o, d), p) in out.iter().zip(&joints.dofs).zip(&prev) {
                assert!(d.limits.acceleration.contains(o.acceleration));
                assert!(o.velocity.abs() <= p.velocity.abs() + 1e-12);
            }
            prev.clone_from(&out);
        }
        stop.sample(stop.ticks() - 1, &mut out);
        assert_eq!(out[0].velocity, 0.0);
        assert!((out[0].position - (0.2 + 0.5 * 1.6 * 0.2)).abs() < 1e-12);
        // Same line: both DOFs covered half their velocity × the common duration.
        assert!((out[1].position - (-0.1 - 0.5 * 0.3 * 0.2)).abs() < 1e-12);
        assert!((stop.rest_position(0).unwrap() - out[0].position).abs() < 1e-12);
    }

    #[test]
    fn at_rest_is_one_tick() {
        let joints = demo_joints();
        let mut stop = Stop::new(&joints, 1000.0, &[]);
        let rest = vec![Setpoint::default(); joints.len()];
        stop.plan(&rest, &rest, StopKind::Planned);
        assert_eq!(stop.ticks(), 1);
    }
}
