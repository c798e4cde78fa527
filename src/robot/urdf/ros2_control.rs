//! `<ros2_control>` blocks: the command interfaces a robot builder declared per joint choose how
//! motiond drives that joint (position → servo, velocity → velocity, acceleration →
//! acceleration, effort → force). DART ignores these blocks; the model's `actuator` stays DART's.
//!
//! A joint with several command interfaces is driven through the first of position, velocity,
//! acceleration, effort it declares (position is what a motion file states). Interfaces of other
//! names (custom gains, …) are skipped with a warning. A joint listed with state interfaces only
//! is measured, never commanded (passive). `<param name="initial_value">` of a state interface
//! is not read: DART does not read it, so the initial position stays DART's.
//!
//! [`hardware`] hands the blocks' `<hardware>` and `<joint>` `<param>`s, as written and with their
//! positions, to the configuration, which prefills the bus settings the file leaves out.

use std::collections::HashMap;
use std::path::Path;

use roxmltree::Node;

use super::read::{Robot, Type};
use crate::diag::FileError;
use crate::robot::world::CommandInterface;
use crate::robot::xml::{self, Ctx, children, raw_attr as attr, start};

/// What `<ros2_control>` says about one joint.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Ros2Joint {
    pub(super) command: CommandInterface,
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
            commands.insert(name.value.to_string(), Ros2Joint { command: *chosen });
        }
    }
    commands
}

/// Text of a robot model with where it starts (1-based line and column).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    pub value: String,
    pub line: u32,
    pub col: u32,
}

/// A `<param name="…">value</param>`: the name (empty when the attribute is missing) and the
/// value without surrounding whitespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HardwareParam {
    pub name: Located,
    pub value: Located,
}

/// One `<ros2_control>` block: its name, the `<hardware><plugin>`, the `<hardware>` `<param>`s and
/// each `<joint>` with its own `<param>`s (those inside interfaces are not bus settings).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HardwareBlock {
    pub name: Located,
    pub plugin: Option<Located>,
    pub params: Vec<HardwareParam>,
    pub joints: Vec<HardwareJoint>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HardwareJoint {
    pub name: Located,
    pub params: Vec<HardwareParam>,
}

/// The `<ros2_control>` blocks of a URDF as written, for the configuration to prefill bus
/// settings from (`config` decides, with each protocol's settings, what a param means).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Hardware {
    pub blocks: Vec<HardwareBlock>,
}

/// The `<ros2_control>` blocks of URDF text; a document whose root is not `<robot>` has none.
/// Only XML errors are reported here: the URDF's own rules are checked when the model is read.
pub fn hardware(text: &str, path: &Path) -> Result<Hardware, FileError> {
    let mut ctx = Ctx::new(text, path);
    let Some(doc) = ctx.parse(text) else {
        return Err(ctx.into_error());
    };
    let root = doc.root_element();
    if root.tag_name().name() != "robot" {
        return Ok(Hardware::default());
    }
    let at = |offset: usize, value: &str| {
        let (line, col) = ctx.line_col(offset);
        Located {
            value: value.to_string(),
            line,
            col,
        }
    };
    let name_of = |el: Node| match attr(text, el, "name") {
        Some(a) => at(a.at, a.value),
        None => at(start(el) + 1, ""),
    };
    let params = |el: Node| -> Vec<HardwareParam> {
        children(el, "param")
            .map(|p| HardwareParam {
                name: name_of(p),
                value: match xml::text(p) {
                    Some(t) => {
                        let lead = t.value.len() - t.value.trim_start().len();
                        at(t.at + lead, t.value.trim())
                    }
                    None => at(start(p) + 1, ""),
                },
            })
            .collect()
    };
    let blocks = children(root, "ros2_control")
        .map(|block| {
            let hw = xml::child(block, "hardware");
            HardwareBlock {
                name: name_of(block),
                plugin: hw
                    .and_then(|h| xml::child(h, "plugin"))
                    .map(|p| match xml::text(p) {
                        Some(t) => {
                            let lead = t.value.len() - t.value.trim_start().len();
                            at(t.at + lead, t.value.trim())
                        }
                        None => at(start(p) + 1, ""),
                    }),
                params: hw.map(params).unwrap_or_default(),
                joints: children(block, "joint")
                    .map(|j| HardwareJoint {
                        name: name_of(j),
                        params: params(j),
                    })
                    .collect(),
            }
        })
        .collect();
    Ok(Hardware { blocks })
}
