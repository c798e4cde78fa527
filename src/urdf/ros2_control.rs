//! `<ros2_control>` blocks: the command interfaces a robot builder declared per joint choose how
//! motiond drives that joint (position → servo, velocity → velocity, acceleration →
//! acceleration, effort → force). DART ignores these blocks; the model's `actuator` stays DART's.
//!
//! A joint with several command interfaces is driven through the first of position, velocity,
//! acceleration, effort it declares (position is what a motion file states). Interfaces of other
//! names (custom gains, …) are skipped with a warning. A joint listed with state interfaces only
//! is measured, never commanded (passive). `<state_interface name="position">`'s
//! `<param name="initial_value">` is the DOF's initial position, as ros2_control's mock hardware
//! reads it.

use std::collections::HashMap;

use roxmltree::Node;

use super::read::{Robot, Type};
use crate::model::xml::{Ctx, c_number as number, children, raw_attr as attr, start, text};
use crate::skel::CommandInterface;

/// What `<ros2_control>` says about one joint.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Ros2Joint {
    pub(super) command: CommandInterface,
    pub(super) initial_position: Option<f64>,
}

/// Per joint name.
pub(super) type Commands = HashMap<String, Ros2Joint>;

const PREFERENCE: [CommandInterface; 4] = [
    CommandInterface::Position,
    CommandInterface::Velocity,
    CommandInterface::Acceleration,
    CommandInterface::Effort,
];

pub(super) fn read(ctx: &mut Ctx, root: Node, robot: &Robot) -> Commands {
    let mut commands = Commands::new();
    // Where each joint was listed first, for duplicate messages.
    let mut listed: HashMap<String, usize> = HashMap::new();
    for block in children(root, "ros2_control") {
        for j in children(block, "joint") {
            let Some(name) = attr(ctx.text, j, "name") else {
                ctx.error(
                    start(j) + 1,
                    "<ros2_control> <joint> has no name attribute; expected <joint name=\"…\">",
                );
                continue;
            };
            let who = format!("<ros2_control> joint '{}'", name.value);
            let Some(joint) = robot.joints.iter().find(|k| k.name == name.value) else {
                ctx.error(
                    name.at,
                    format!(
                        "{who} is not a joint of this robot; expected a <joint> name of the URDF"
                    ),
                );
                continue;
            };
            if let Some(first) = listed.insert(name.value.to_string(), start(j)) {
                let (line, _) = ctx.line_col(first);
                ctx.error(
                    name.at,
                    format!(
                        "{who} is already listed at line {line}; expected each joint in one \
                         <ros2_control> entry"
                    ),
                );
                continue;
            }
            let mut declared = Vec::new();
            for ci in children(j, "command_interface") {
                let Some(iface) = attr(ctx.text, ci, "name") else {
                    ctx.error(
                        start(ci) + 1,
                        format!("{who}: <command_interface> has no name attribute"),
                    );
                    continue;
                };
                match PREFERENCE.iter().find(|c| c.as_str() == iface.value) {
                    Some(c) => declared.push(*c),
                    None => ctx.warn(
                        iface.at,
                        &format!(
                            "{who}: command interface '{}' is not one motiond drives \
                             (position, velocity, acceleration, effort); skipped",
                            iface.value
                        ),
                    ),
                }
            }
            let chosen = PREFERENCE
                .iter()
                .find(|c| declared.contains(c))
                .unwrap_or(&CommandInterface::None);
            let initial_position = initial_value(ctx, j, &who);
            if *chosen != CommandInterface::None
                && matches!(joint.kind, Type::Fixed | Type::Floating)
            {
                ctx.error(
                    name.at,
                    format!(
                        "{who} has a {} command interface, but it is a {} joint; expected a \
                         joint motiond can command (revolute, continuous, prismatic, planar)",
                        chosen.as_str(),
                        if joint.kind == Type::Fixed {
                            "fixed"
                        } else {
                            "floating"
                        }
                    ),
                );
                continue;
            }
            commands.insert(
                name.value.to_string(),
                Ros2Joint {
                    command: *chosen,
                    initial_position,
                },
            );
        }
    }
    commands
}

/// `<state_interface name="position"><param name="initial_value">…</param>`.
fn initial_value(ctx: &mut Ctx, joint: Node, who: &str) -> Option<f64> {
    let state =
        children(joint, "state_interface").find(|s| s.attribute("name") == Some("position"))?;
    let param = children(state, "param").find(|p| p.attribute("name") == Some("initial_value"))?;
    let Some(t) = text(param) else {
        ctx.error(
            start(param) + 1,
            format!("{who}: initial_value is empty; expected a number"),
        );
        return None;
    };
    match number(t.value.trim()) {
        Some(x) => Some(x),
        None => {
            ctx.error(
                t.at,
                format!(
                    "{who}: initial_value: expected a number, found '{}'",
                    t.value.trim()
                ),
            );
            None
        }
    }
}
