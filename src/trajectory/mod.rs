//! (Skeleton, Motion, mapping, rate) → limit-proved [`Trajectory`] the real-time loop samples.
//!
//! Everything that allocates for a trajectory happens here, before the loop sees it. The loop
//! only calls [`Trajectory::sample`] and the in-place [`Stop`] planner, which neither allocate nor
//! block.

use crate::skel::{Actuator, Limits};

/// What a drive receives for one DOF at one tick: position with velocity and acceleration
/// feed-forward (rad, rad/s, rad/s² — or m, m/s, m/s²).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Setpoint {
    pub position: f64,
    pub velocity: f64,
    pub acceleration: f64,
}

/// Position, velocity and acceleration bounds of one commanded DOF (skeleton limits, possibly
/// tightened by config).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DofLimits {
    pub position: Limits,
    pub velocity: Limits,
    pub acceleration: Limits,
    pub effort: Limits,
}

/// One DOF the daemon commands.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandedDof {
    /// DOF name as in the skeleton (unique within the set).
    pub name: String,
    /// Skeleton index in the world and DOF index within that skeleton.
    pub skeleton: usize,
    pub dof: usize,
    pub actuator: Actuator,
    pub limits: DofLimits,
    pub initial_position: f64,
}

/// The robot's commanded DOFs in a fixed order: every trajectory, setpoint slice and feedback slice
/// uses this order. Driven DOFs (servo, force, velocity, acceleration on a joint that is not weld
/// or free) and locked DOFs (which hold their initial position); passive DOFs are never commanded.
#[derive(Debug, Clone, PartialEq)]
pub struct JointSet {
    pub dofs: Vec<CommandedDof>,
}

impl JointSet {
    pub fn len(&self) -> usize {
        self.dofs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.dofs.is_empty()
    }

    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.dofs.iter().position(|d| d.name == name)
    }
}

/// Remembers where the last sample was found so sampling in tick order is constant time.
/// Reset (or replace with `Cursor::default()`) when switching trajectories.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cursor {
    pub segment: usize,
}

/// How samples between source frames are computed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Interpolation {
    /// Zero-order hold, as Choreonoid imports timed data (for comparison only).
    Hold,
    Linear,
    /// Monotone cubic Hermite: never overshoots its samples.
    #[default]
    Pchip,
    /// C2 natural cubic spline: may overshoot, and must then pass the limit proof.
    Cubic,
}

impl Interpolation {
    pub fn as_str(self) -> &'static str {
        match self {
            Interpolation::Hold => "hold",
            Interpolation::Linear => "linear",
            Interpolation::Pchip => "pchip",
            Interpolation::Cubic => "cubic",
        }
    }
}

/// What to do with a motion some sample of which crosses a limit. Never a silent change.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LimitPolicy {
    /// Refuse the motion with a report naming joint, time, value and limit.
    #[default]
    Reject,
    /// Clamp positions into their limits and report what was clamped.
    Clamp,
    /// Slow the whole motion uniformly by the smallest factor that meets velocity and
    /// acceleration limits, and report the factor.
    Retime,
}

impl LimitPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            LimitPolicy::Reject => "reject",
            LimitPolicy::Clamp => "clamp",
            LimitPolicy::Retime => "retime",
        }
    }
}
