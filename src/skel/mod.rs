//! SKEL (DART's XML robot description) → [`World`].
//!
//! The reader agrees with DART 6.20 wherever DART loads a file cleanly: the same joints, DOF names,
//! DOF order, limits, actuators and initial values. Where DART silently renames, drops, hangs or
//! crashes, the reader refuses with `FILE:LINE:COL: message` (see `../shared/docs/policy.md`).
//! This is the only module that knows XML.

use std::ops::Range;
use std::path::{Path, PathBuf};

use nalgebra::{Isometry3, Unit, Vector3};

use crate::diag::Diagnostics;

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
    /// Axes in the order the joint type reads them (`axis`, `axis2`, …), normalised; empty for types
    /// without axes (weld, ball, free, translational, euler).
    pub axes: Vec<Unit<Vector3<f64>>>,
    /// Where the `<joint>` element starts (1-based line and column), for later messages.
    pub line: u32,
    pub col: u32,
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

/// Why a SKEL file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Every problem found in the file, one `FILE:LINE:COL: message` per line.
    #[error("{0}")]
    Invalid(Diagnostics),
}

/// Reads and validates a SKEL file.
pub fn load(path: &Path) -> Result<World, Error> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&text, path)
}

/// Parses SKEL text; `path` is only used in messages.
pub fn parse(text: &str, path: &Path) -> Result<World, Error> {
    let _ = (text, path);
    unimplemented!("skel::parse is being written (issue 2)")
}

/// The `inspect skel` JSON shape of ../shared/docs/inspect-json.md.
pub fn inspect_json(world: &World) -> serde_json::Value {
    let _ = world;
    unimplemented!("skel::inspect_json is being written (issue 2)")
}
