//! URDF → [`World`], as DART 6.20's `DartLoader` builds it on urdfdom 4.0
//! (../shared/docs/urdf-semantics.md).
//!
//! `read` applies urdfdom's validity rules (strict numbers, required attributes and elements, unique
//! names, one root); `build` makes DART's model from what is left: joints depth-first from the root
//! with siblings in byte order of their names, the synthetic `rootJoint`, DART's joint types, DOF
//! names, limits, initial positions and actuators (`force`, `mimic`). Where DART hangs, builds a
//! wrong model or silently drops part of the robot, the file is refused (../shared/docs/policy.md).
//! `<ros2_control>` blocks choose how each joint is driven (`ros2_control`). Meshes are never read.

use std::path::Path;

use crate::diag::FileError;
use crate::robot::world::Options;
use crate::robot::world::World;
use crate::robot::xml::{self, Ctx};

mod build;
mod read;
mod ros2_control;

pub use ros2_control::{Hardware, HardwareBlock, HardwareJoint, HardwareParam, Located, hardware};
#[cfg(test)]
mod tests;

/// Reads a URDF file.
pub fn load(path: &Path, options: &Options) -> Result<World, FileError> {
    let text = xml::read_text(path, "a URDF file")?;
    parse(&text, path, options)
}

/// Parses URDF text; `path` is only used in messages.
pub fn parse(text: &str, path: &Path, options: &Options) -> Result<World, FileError> {
    let mut ctx = Ctx::new(text, path);
    let Some(doc) = ctx.parse(text) else {
        return Err(ctx.into_error());
    };
    let Some(robot) = read::robot(&mut ctx, &doc) else {
        return Err(ctx.into_error());
    };
    let commands = ros2_control::read(&mut ctx, doc.root_element(), &robot);
    let skeleton = build::skeleton(&mut ctx, &robot, &commands, options);
    match skeleton {
        Some(s) if !ctx.failed() => {
            if !options.limits_judged_by_caller {
                build::warn_missing_acceleration_limits(&ctx, &s, robot.at);
            }
            Ok(World { skeletons: vec![s] })
        }
        _ => Err(ctx.into_error()),
    }
}
