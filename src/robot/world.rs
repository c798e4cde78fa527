//! The robot as motiond sees it, whatever file it came from: skeletons, joints, DOFs, limits,
//! actuators. Every reader ([`skel`](super::skel), [`urdf`](super::urdf), [`sdf`](super::sdf),
//! [`xode`](super::xode)) builds these and nothing else.

use std::ops::Range;

use nalgebra::{Isometry3, Unit, Vector3};

/// Everything a SKEL file's first `<world>` describes that matters for playback.
#[derive(Debug, Clone, PartialEq)]
pub struct World {
    /// In document order; duplicate names renamed the way DART renames them (`name(1)`, …).
    pub skeletons: Vec<Skeleton>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Skeleton {
    pub name: String,
    /// `<skeleton><transformation>`: the skeleton frame in the world.
    pub transform: Isometry3<f64>,
    /// In the order DART creates them, which is also the DOF order.
    pub joints: Vec<Joint>,
    /// In DOF index order (indices count within this skeleton).
    pub dofs: Vec<Dof>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Joint {
    pub name: String,
    pub kind: JointKind,
    pub actuator: Actuator,
    /// Parent body name; `None` when attached to the world.
    pub parent: Option<String>,
    pub child: String,
    /// This joint's DOFs as indices into [`Skeleton::dofs`].
    pub dofs: Range<usize>,
    /// `<joint><transformation>`: the joint frame in the child body frame.
    pub transform: Isometry3<f64>,
    /// Axes in the order the joint type reads them (`axis`, `axis2`, …), normalised; for planar
    /// joints the plane's two translation directions (xy: x, y; yz: y, z; zx: z, x; arbitrary:
    /// `translation_axis1`, `translation_axis2`); empty for types without axes (weld, ball, free,
    /// translational, euler).
    pub axes: Vec<Unit<Vector3<f64>>>,
    /// Where the `<joint>` element starts (1-based line and column), for later messages; for the
    /// implicit free joint `root` DART adds, where its child's `<body>` starts.
    pub line: u32,
    pub col: u32,
    /// URDF `<mimic>`: this joint follows another (its actuator is then [`Actuator::Mimic`]).
    pub mimic: Option<Mimic>,
    /// URDF `<ros2_control>`: the command interface that chooses how motiond drives this joint,
    /// whatever DART's actuator says.
    pub command: Option<CommandInterface>,
}

impl Joint {
    /// The joint DART adds above a root body that has none of its own: `kind` free (or weld for
    /// a fixed base), attached to the world, force-actuated; `line:col` where its child starts.
    /// Its DOFs are filled in when the skeleton takes it.
    pub fn world_root(name: String, kind: JointKind, child: String, line: u32, col: u32) -> Joint {
        Joint {
            name,
            kind,
            actuator: Actuator::Force,
            parent: None,
            child,
            dofs: 0..0,
            transform: Isometry3::identity(),
            axes: Vec::new(),
            line,
            col,
            mimic: None,
            command: None,
        }
    }
}

/// `q = multiplier · q_leader + offset`, per DOF of a one-DOF joint.
#[derive(Debug, Clone, PartialEq)]
pub struct Mimic {
    /// The leader joint's name.
    pub joint: String,
    pub multiplier: f64,
    pub offset: f64,
}

/// A ros2_control command interface motiond can drive a joint through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandInterface {
    Position,
    Velocity,
    Acceleration,
    Effort,
    /// Listed with state interfaces only: measured, never commanded.
    None,
}

impl CommandInterface {
    pub fn as_str(self) -> &'static str {
        match self {
            CommandInterface::Position => "position",
            CommandInterface::Velocity => "velocity",
            CommandInterface::Acceleration => "acceleration",
            CommandInterface::Effort => "effort",
            CommandInterface::None => "none",
        }
    }

    /// The actuator type that drives a joint through this interface.
    pub fn actuator(self) -> Actuator {
        match self {
            CommandInterface::Position => Actuator::Servo,
            CommandInterface::Velocity => Actuator::Velocity,
            CommandInterface::Acceleration => Actuator::Acceleration,
            CommandInterface::Effort => Actuator::Force,
            CommandInterface::None => Actuator::Passive,
        }
    }
}

/// The joint types DART builds from SKEL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JointKind {
    Weld,
    Revolute,
    Prismatic,
    Universal,
    Ball,
    Euler(EulerOrder),
    Translational,
    Planar(Plane),
    Free,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EulerOrder {
    Xyz,
    Zyx,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plane {
    Xy,
    Yz,
    Zx,
    Arbitrary,
}

impl JointKind {
    /// The spelling used by `inspect skel` (and by the `type` attribute).
    pub fn as_str(self) -> &'static str {
        match self {
            JointKind::Weld => "weld",
            JointKind::Revolute => "revolute",
            JointKind::Prismatic => "prismatic",
            JointKind::Universal => "universal",
            JointKind::Ball => "ball",
            JointKind::Euler(_) => "euler",
            JointKind::Translational => "translational",
            JointKind::Planar(_) => "planar",
            JointKind::Free => "free",
        }
    }

    pub fn dof_count(self) -> usize {
        match self {
            JointKind::Weld => 0,
            JointKind::Revolute | JointKind::Prismatic => 1,
            JointKind::Universal => 2,
            JointKind::Ball | JointKind::Euler(_) | JointKind::Translational => 3,
            JointKind::Planar(_) => 3,
            JointKind::Free => 6,
        }
    }

    /// DOF name suffixes in local order (DART's `updateDegreeOfFreedomNames`); `None` marks the planar
    /// rotation DOF, which DART never names.
    pub fn dof_suffixes(self) -> &'static [Option<&'static str>] {
        const XYZ: &[Option<&str>] = &[Some("_x"), Some("_y"), Some("_z")];
        match self {
            JointKind::Weld => &[],
            JointKind::Revolute | JointKind::Prismatic => &[Some("")],
            JointKind::Universal => &[Some("_1"), Some("_2")],
            JointKind::Ball | JointKind::Translational | JointKind::Euler(EulerOrder::Xyz) => XYZ,
            JointKind::Euler(EulerOrder::Zyx) => &[Some("_z"), Some("_y"), Some("_x")],
            JointKind::Planar(Plane::Xy) => &[Some("_x"), Some("_y"), None],
            JointKind::Planar(Plane::Yz) => &[Some("_y"), Some("_z"), None],
            JointKind::Planar(Plane::Zx) => &[Some("_z"), Some("_x"), None],
            JointKind::Planar(Plane::Arbitrary) => &[Some("_1"), Some("_2"), None],
            JointKind::Free => &[
                Some("_rot_x"),
                Some("_rot_y"),
                Some("_rot_z"),
                Some("_pos_x"),
                Some("_pos_y"),
                Some("_pos_z"),
            ],
        }
    }
}

/// How a joint is driven (DART's `ActuatorType`, per joint).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Actuator {
    Force,
    Passive,
    Servo,
    Acceleration,
    Velocity,
    Locked,
    /// Follows another joint (URDF `<mimic>`); see [`Joint::mimic`].
    Mimic,
}

impl Actuator {
    pub fn as_str(self) -> &'static str {
        match self {
            Actuator::Force => "force",
            Actuator::Passive => "passive",
            Actuator::Servo => "servo",
            Actuator::Acceleration => "acceleration",
            Actuator::Velocity => "velocity",
            Actuator::Locked => "locked",
            Actuator::Mimic => "mimic",
        }
    }
}

/// A closed interval; an unbounded side is `-inf` or `+inf`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    pub lower: f64,
    pub upper: f64,
}

impl Limits {
    pub const UNBOUNDED: Limits = Limits {
        lower: f64::NEG_INFINITY,
        upper: f64::INFINITY,
    };

    /// `[-x, x]`.
    pub fn symmetric(x: f64) -> Limits {
        Limits {
            lower: -x,
            upper: x,
        }
    }

    pub fn contains(self, x: f64) -> bool {
        self.lower <= x && x <= self.upper
    }

    pub fn is_unbounded(self) -> bool {
        self.lower == f64::NEG_INFINITY && self.upper == f64::INFINITY
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits::UNBOUNDED
    }
}

/// One degree of freedom: radians or metres, with per-DOF limits.
#[derive(Debug, Clone, PartialEq)]
pub struct Dof {
    pub name: String,
    /// Index into [`Skeleton::joints`].
    pub joint: usize,
    pub position: Limits,
    pub velocity: Limits,
    pub acceleration: Limits,
    pub effort: Limits,
    pub initial_position: f64,
    pub initial_velocity: f64,
}

impl Dof {
    /// A DOF with no limits at 0, before a reader names it, places it in its joint and sets
    /// the limits its file gives.
    pub fn unbounded() -> Dof {
        Dof {
            name: String::new(),
            joint: 0,
            position: Limits::UNBOUNDED,
            velocity: Limits::UNBOUNDED,
            acceleration: Limits::UNBOUNDED,
            effort: Limits::UNBOUNDED,
            initial_position: 0.0,
            initial_velocity: 0.0,
        }
    }
}

/// Reader settings that are not in the file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Options {
    /// URDF: weld the root link to the world (`rootJoint` becomes a weld) instead of DART's
    /// default floating base (config `robot.fixed_base`).
    pub fixed_base: bool,
    /// The caller judges the limits itself once its configuration has tightened them (a
    /// session: see [`crate::session::Robot::load`]), so the URDF reader does not warn that the
    /// file has no acceleration limits.
    pub limits_judged_by_caller: bool,
}

/// DART's initial position of a DOF with position limits (URDF and SDF): 0, unless 0 is outside
/// them; then their midpoint, or the finite bound when one side is unbounded.
pub(crate) fn initial_position(limits: Limits) -> f64 {
    let Limits { lower, upper } = limits;
    if lower <= 0.0 && 0.0 <= upper {
        return 0.0;
    }
    match (lower.is_finite(), upper.is_finite()) {
        (true, true) => {
            let mid = (lower + upper) / 2.0;
            // Halve first where the sum of two huge bounds would overflow.
            if mid.is_finite() {
                mid
            } else {
                lower / 2.0 + upper / 2.0
            }
        }
        (true, false) => lower,
        (false, true) => upper,
        (false, false) => 0.0,
    }
}
