//! (Skeleton, Motion, mapping, rate) → limit-proved [`Trajectory`] the real-time loop samples.
//!
//! Everything that allocates for a trajectory happens here, before the loop sees it. The loop
//! only calls [`Trajectory::sample`] and the in-place [`Stop`] planner, which neither allocate nor
//! block.

use crate::diag::Num;
use crate::robot::{Actuator, JointKind, Limits, World};

mod approach;
mod blend;
pub mod envelope;
mod interp;
mod mapping;
mod mimic;
mod pose;
mod proof;
mod resample;
mod stop;
mod stream;
mod track;

pub use approach::{ApproachError, approach};
pub use blend::{BlendError, Setpoint3, blend};
pub use envelope::{Breach, Envelope, Measure, Stream, Usage};
pub use interp::Extremes;
pub use mapping::{ColumnMap, MappingError, MappingErrors};
pub use mimic::MimicOf;
pub use pose::{PointTrack, PoseError, PoseTrack};
pub use proof::{Clamped, DofSummary, ProofReport, Quantity, Violation, speed_text};
pub use resample::{BuildError, Options, Proved, build, build_values};
pub use stop::{Stop, StopKind, braking_distance};
pub use stream::{LONGEST_BLEND_S, SpliceError, Spliced as StreamPiece, splice as splice_stream};
pub use track::{SeamError, Trajectory};

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
    /// A mimic follower (URDF `<mimic>`): commanded `multiplier · leader + offset`, never by a
    /// motion column of its own, and proved against its own limits.
    pub mimic: Option<MimicOf>,
    /// Deceleration of a quick stop (magnitude, `robot.limits.<dof>.quick_stop_deceleration`);
    /// `None`: the acceleration limit. Every motion is proved to be stoppable at it.
    pub quick_stop_deceleration: Option<f64>,
}

impl CommandedDof {
    /// The decelerations (magnitudes) a quick stop brakes a positive and a negative velocity at:
    /// the acceleration limit on that side, or the quick-stop deceleration when lower. Infinite
    /// for an unbounded side.
    pub fn quick_brakes(&self) -> (f64, f64) {
        let a = self.limits.acceleration;
        let q = self.quick_stop_deceleration.unwrap_or(f64::INFINITY);
        let side = |x: f64| if x > 0.0 { x.min(q) } else { f64::INFINITY };
        (side(-a.lower), side(a.upper))
    }
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

    /// The commanded DOFs of every skeleton in `world`, in skeleton then DOF index order, with the
    /// skeleton's limits tightened by `overrides` (which may only tighten).
    pub fn from_world(
        world: &World,
        overrides: &[DofLimitOverride],
    ) -> Result<JointSet, JointSetError> {
        let mut dofs: Vec<CommandedDof> = Vec::new();
        for (s, skeleton) in world.skeletons.iter().enumerate() {
            for (d, dof) in skeleton.dofs.iter().enumerate() {
                let Some(joint) = skeleton.joints.get(dof.joint) else {
                    continue;
                };
                let actuator = mimic::drive_actuator(joint);
                if !is_commanded(joint.kind, actuator) {
                    continue;
                }
                if dofs.iter().any(|c| c.name == dof.name) {
                    return Err(JointSetError::AmbiguousName {
                        name: dof.name.clone(),
                    });
                }
                dofs.push(CommandedDof {
                    name: dof.name.clone(),
                    skeleton: s,
                    dof: d,
                    actuator,
                    limits: DofLimits {
                        position: dof.position,
                        velocity: dof.velocity,
                        acceleration: dof.acceleration,
                        effort: dof.effort,
                    },
                    initial_position: dof.initial_position,
                    mimic: None,
                    quick_stop_deceleration: None,
                });
            }
        }
        let mut set = JointSet { dofs };
        mimic::link(&mut set, world)?;
        for (index, o) in overrides.iter().enumerate() {
            set.tighten(index, o)?;
        }
        Ok(set)
    }

    /// A set of `n` unconstrained DOFs named `c0`, `c1`, … for resampling a motion without a robot.
    pub fn unconstrained(n: usize) -> JointSet {
        JointSet::uniform(
            n,
            DofLimits {
                position: Limits::UNBOUNDED,
                velocity: Limits::UNBOUNDED,
                acceleration: Limits::UNBOUNDED,
                effort: Limits::UNBOUNDED,
            },
        )
    }

    /// `n` servo DOFs named `c0`, `c1`, … with the same limits, initially at 0 (tests, benches).
    pub fn uniform(n: usize, limits: DofLimits) -> JointSet {
        JointSet {
            dofs: (0..n)
                .map(|i| CommandedDof {
                    name: format!("c{i}"),
                    skeleton: 0,
                    dof: i,
                    actuator: Actuator::Servo,
                    limits,
                    initial_position: 0.0,
                    mimic: None,
                    quick_stop_deceleration: None,
                })
                .collect(),
        }
    }

    /// DOFs a motion may drive: every commanded DOF but the locked ones and mimic followers, in
    /// set order.
    pub fn driven(&self) -> impl Iterator<Item = (usize, &CommandedDof)> {
        self.dofs
            .iter()
            .enumerate()
            .filter(|(_, d)| d.actuator != Actuator::Locked && d.mimic.is_none())
    }

    fn tighten(&mut self, index: usize, o: &DofLimitOverride) -> Result<(), JointSetError> {
        let Some(dof) = self.dofs.iter_mut().find(|d| d.name == o.dof) else {
            return Err(JointSetError::UnknownDof {
                index,
                name: o.dof.clone(),
            });
        };
        let checks = [
            (Quantity::Position, o.position, &mut dof.limits.position),
            (Quantity::Velocity, o.velocity, &mut dof.limits.velocity),
            (
                Quantity::Acceleration,
                o.acceleration,
                &mut dof.limits.acceleration,
            ),
            (Quantity::Effort, o.effort, &mut dof.limits.effort),
        ];
        for (quantity, wanted, limits) in checks {
            let Some(wanted) = wanted else { continue };
            if wanted.lower > wanted.upper || wanted.lower.is_nan() || wanted.upper.is_nan() {
                return Err(JointSetError::Empty {
                    index,
                    name: o.dof.clone(),
                    quantity,
                    lower: wanted.lower,
                    upper: wanted.upper,
                });
            }
            if wanted.lower < limits.lower || wanted.upper > limits.upper {
                return Err(JointSetError::Loosens {
                    index,
                    name: o.dof.clone(),
                    quantity,
                    wanted,
                    skeleton: *limits,
                });
            }
            *limits = wanted;
        }
        if let Some(q) = o.quick_stop_deceleration {
            // A quick stop may brake gentler than the acceleration limit (every motion is then
            // proved stoppable at it), never harder: that would break the limit it stops within.
            let a = dof.limits.acceleration;
            let hardest = (-a.lower).max(a.upper);
            if !(q > 0.0 && q <= hardest) {
                return Err(JointSetError::QuickStop {
                    index,
                    name: o.dof.clone(),
                    value: q,
                    acceleration: a,
                });
            }
            dof.quick_stop_deceleration = Some(q);
        }
        Ok(())
    }
}

/// Tighter bounds for one DOF than the robot model gives (config `robot.limits.<dof>`); `None`
/// leaves the model's bound as it is. Every bound
/// given is finite with `lower < upper`; velocity, acceleration and effort bounds contain 0.
#[derive(Debug, Clone, PartialEq)]
pub struct DofLimitOverride {
    pub dof: String,
    pub position: Option<Limits>,
    pub velocity: Option<Limits>,
    pub acceleration: Option<Limits>,
    pub effort: Option<Limits>,
    /// Largest |commanded − measured| while moving; exceeding it faults (quick stop, hold).
    pub following_error: Option<f64>,
    /// Deceleration of a quick stop (magnitude); at most the acceleration limit, which is the
    /// default.
    pub quick_stop_deceleration: Option<f64>,
}

/// Driven (servo, force, velocity, acceleration) and locked DOFs on joints that are neither weld
/// nor free; passive DOFs are never commanded, and a free root is the world's, not a motor's.
fn is_commanded(kind: JointKind, actuator: Actuator) -> bool {
    !matches!(kind, JointKind::Weld | JointKind::Free) && actuator != Actuator::Passive
}

/// Why the commanded DOFs could not be assembled. `index` is the position of the offending
/// override in the list given, so a config reader can point at its line (`quantity` names the key).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum JointSetError {
    #[error(
        "DOF name `{name}` is used by more than one skeleton; motion columns could not tell them apart"
    )]
    AmbiguousName { name: String },
    #[error("mimic joint `{name}` {problem}")]
    Mimic { name: String, problem: String },
    #[error("limits given for `{name}`, which is not a commanded DOF of the robot")]
    UnknownDof { index: usize, name: String },
    #[error("{quantity} limits of `{name}` would be empty: [{}, {}]", Num(*lower), Num(*upper))]
    Empty {
        index: usize,
        name: String,
        quantity: Quantity,
        lower: f64,
        upper: f64,
    },
    #[error(
        "{quantity} limits of `{name}` may only be tightened: [{}, {}] is outside the skeleton's [{}, {}]",
        Num(wanted.lower), Num(wanted.upper), Num(skeleton.lower), Num(skeleton.upper)
    )]
    Loosens {
        index: usize,
        name: String,
        quantity: Quantity,
        wanted: Limits,
        skeleton: Limits,
    },
    #[error(
        "quick_stop_deceleration {value} of `{name}` is not within (0, {}]: a quick stop brakes at most as hard as the acceleration limits [{}, {}] allow",
        (-acceleration.lower).max(acceleration.upper), acceleration.lower, acceleration.upper
    )]
    QuickStop {
        index: usize,
        name: String,
        value: f64,
        acceleration: Limits,
    },
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::robot::{Dof, Joint, Skeleton};
    use nalgebra::Isometry3;

    fn limits(lower: f64, upper: f64) -> Limits {
        Limits { lower, upper }
    }

    /// The demo arm of TEAM.md, plus a locked `brake` joint, as a skel reader would build it.
    pub(crate) fn demo_world() -> World {
        // (name, kind, actuator, position, velocity, acceleration, initial)
        let table = [
            (
                "base_yaw",
                JointKind::Revolute,
                Actuator::Servo,
                (-2.8, 2.8),
                2.0,
                8.0,
                0.0,
            ),
            (
                "shoulder_pitch",
                JointKind::Revolute,
                Actuator::Servo,
                (-1.9, 1.9),
                1.8,
                6.0,
                0.0,
            ),
            (
                "elbow_pitch",
                JointKind::Revolute,
                Actuator::Servo,
                (-2.4, 2.4),
                2.2,
                8.0,
                0.0,
            ),
            (
                "wrist_pitch",
                JointKind::Revolute,
                Actuator::Velocity,
                (-1.9, 1.9),
                3.0,
                12.0,
                0.0,
            ),
            (
                "wrist_roll",
                JointKind::Revolute,
                Actuator::Velocity,
                (-3.0, 3.0),
                4.0,
                15.0,
                0.0,
            ),
            (
                "gripper_slide",
                JointKind::Prismatic,
                Actuator::Servo,
                (0.0, 0.04),
                0.05,
                0.5,
                0.01,
            ),
            (
                "tool_spring",
                JointKind::Revolute,
                Actuator::Passive,
                (-0.3, 0.3),
                f64::INFINITY,
                f64::INFINITY,
                0.0,
            ),
            (
                "brake",
                JointKind::Revolute,
                Actuator::Locked,
                (-1.0, 1.0),
                1.0,
                1.0,
                0.25,
            ),
        ];
        let mut joints = vec![Joint {
            name: "base_mount".into(),
            kind: JointKind::Weld,
            actuator: Actuator::Force,
            parent: None,
            child: "base".into(),
            dofs: 0..0,
            transform: Isometry3::identity(),
            axes: vec![],
            line: 1,
            col: 1,
            mimic: None,
            command: None,
        }];
        let mut dofs = Vec::new();
        for (i, (name, kind, actuator, p, v, a, init)) in table.into_iter().enumerate() {
            joints.push(Joint {
                name: name.into(),
                kind,
                actuator,
                parent: Some("base".into()),
                child: format!("link{i}"),
                dofs: i..i + 1,
                transform: Isometry3::identity(),
                axes: vec![],
                line: 1,
                col: 1,
                mimic: None,
                command: None,
            });
            dofs.push(Dof {
                name: name.into(),
                joint: i + 1,
                position: limits(p.0, p.1),
                velocity: limits(-v, v),
                acceleration: limits(-a, a),
                effort: Limits::UNBOUNDED,
                initial_position: init,
                initial_velocity: 0.0,
            });
        }
        World {
            skeletons: vec![Skeleton {
                name: "demo_arm".into(),
                transform: Isometry3::identity(),
                joints,
                dofs,
            }],
        }
    }

    pub(crate) fn demo_joints() -> JointSet {
        JointSet::from_world(&demo_world(), &[]).unwrap()
    }

    #[test]
    fn commands_driven_and_locked_dofs_but_never_passive_ones() {
        let joints = demo_joints();
        let names: Vec<&str> = joints.dofs.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "base_yaw",
                "shoulder_pitch",
                "elbow_pitch",
                "wrist_pitch",
                "wrist_roll",
                "gripper_slide",
                "brake"
            ]
        );
        assert_eq!(joints.dofs[5].initial_position, 0.01);
        assert_eq!(joints.driven().count(), 6);
    }

    #[test]
    fn overrides_only_tighten() {
        let world = demo_world();
        let tighter = DofLimitOverride {
            dof: "elbow_pitch".into(),
            position: None,
            velocity: Some(limits(-2.0, 2.0)),
            acceleration: Some(limits(-6.0, 6.0)),
            effort: None,
            following_error: None,
            quick_stop_deceleration: None,
        };
        let joints = JointSet::from_world(&world, std::slice::from_ref(&tighter)).unwrap();
        assert_eq!(joints.dofs[2].limits.velocity, limits(-2.0, 2.0));
        assert_eq!(joints.dofs[2].limits.acceleration, limits(-6.0, 6.0));

        let looser = DofLimitOverride {
            velocity: Some(limits(-3.0, 3.0)),
            ..tighter.clone()
        };
        let err = JointSet::from_world(&world, &[looser]).unwrap_err();
        assert!(
            matches!(err, JointSetError::Loosens { index: 0, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("may only be tightened"));

        // A quick stop may brake gentler than the acceleration limit, never harder.
        let gentle = DofLimitOverride {
            quick_stop_deceleration: Some(2.0),
            ..tighter.clone()
        };
        let joints = JointSet::from_world(&world, &[gentle]).unwrap();
        assert_eq!(joints.dofs[2].quick_stop_deceleration, Some(2.0));
        assert_eq!(joints.dofs[2].quick_brakes(), (2.0, 2.0));
        let hard = DofLimitOverride {
            quick_stop_deceleration: Some(7.0),
            ..tighter.clone()
        };
        assert!(matches!(
            JointSet::from_world(&world, &[hard]),
            Err(JointSetError::QuickStop { index: 0, .. })
        ));
        let unknown = DofLimitOverride {
            dof: "tool_spring".into(),
            ..tighter.clone()
        };
        assert!(matches!(
            JointSet::from_world(&world, &[unknown]),
            Err(JointSetError::UnknownDof { .. })
        ));
    }
}
