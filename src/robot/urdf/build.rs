//! urdfdom's tree and DART's `DartLoader`: links and joints → one [`Skeleton`].
//!
//! Joint order is DART's: depth-first, pre-order from the root link, each link's child joints in
//! byte order of their names (urdfdom keeps joints in a `std::map`). The root link gets the
//! synthetic `rootJoint` (free, or a weld with a fixed base), except a root link named `world`,
//! whose child joints become root joints themselves.

use crate::diag::Num;
use std::collections::HashMap;

use nalgebra::{Isometry3, Unit, Vector3};

use super::read::{Joint as UrdfJoint, Robot, Type};
use super::ros2_control::Commands;
use crate::diag::Diagnostic;
use crate::robot::world::Options;
use crate::robot::world::{
    Actuator, CommandInterface, Dof, Joint, JointKind, Limits, Mimic, Plane, Skeleton,
};
use crate::robot::xml::{Ctx, Names};

/// DART's name for the joint it adds above the root link.
const ROOT_JOINT: &str = "rootJoint";

/// The link DART treats as the world when it is the root.
const WORLD: &str = "world";

pub(super) fn skeleton(
    ctx: &mut Ctx,
    robot: &Robot,
    commands: &Commands,
    options: &Options,
) -> Option<Skeleton> {
    let links: HashMap<&str, usize> = robot
        .links
        .iter()
        .enumerate()
        .map(|(i, l)| (l.name.as_str(), i))
        .collect();
    let tree = Tree::of(ctx, robot, &links);
    if !tree.ok || !robot.complete || robot.links.is_empty() {
        return None;
    }
    let root = tree.root(ctx, robot)?;
    let child_link: Vec<usize> = robot
        .joints
        .iter()
        .map(|j| links.get(j.child.as_str()).copied().unwrap_or(root))
        .collect();
    let order = creation_order(root, &tree.children, &child_link);
    if order.len() != robot.joints.len() {
        refuse_unreached(ctx, robot, root, &order);
        return None;
    }
    Builder::new(ctx, robot, commands, links).build(root, &order, options)
}

/// The links' tree as the joints describe it.
struct Tree {
    /// Per link: its parent joint.
    parent_of: Vec<Option<usize>>,
    /// Per link: its child joints in byte order of their names.
    children: Vec<Vec<usize>>,
    /// Every joint names two existing, different links and no link has two parent joints.
    ok: bool,
}

impl Tree {
    fn of(ctx: &mut Ctx, robot: &Robot, links: &HashMap<&str, usize>) -> Tree {
        let mut tree = Tree {
            parent_of: vec![None; robot.links.len()],
            children: vec![Vec::new(); robot.links.len()],
            ok: true,
        };
        for (j, joint) in robot.joints.iter().enumerate() {
            let parent = link_of(ctx, links, joint, &joint.parent, joint.parent_at, "parent");
            let child = link_of(ctx, links, joint, &joint.child, joint.child_at, "child");
            let (Some(parent), Some(child)) = (parent, child) else {
                tree.ok = false;
                continue;
            };
            if parent == child {
                ctx.error(
                    joint.child_at,
                    format!(
                        "joint '{}' connects link '{}' to itself; expected two different links \
                         (DART would never finish loading this)",
                        joint.name, joint.child
                    ),
                );
                tree.ok = false;
                continue;
            }
            if let Some(first) = tree.parent_of[child] {
                let (line, _) = ctx.line_col(robot.joints[first].at);
                ctx.error(
                    joint.child_at,
                    format!(
                        "link '{}' is already the child of joint '{}' (line {line}); expected one \
                         parent joint per link (DART would build a garbled model)",
                        joint.child, robot.joints[first].name
                    ),
                );
                tree.ok = false;
                continue;
            }
            tree.parent_of[child] = Some(j);
            tree.children[parent].push(j);
        }
        for c in &mut tree.children {
            c.sort_by(|&a, &b| {
                robot.joints[a]
                    .name
                    .as_bytes()
                    .cmp(robot.joints[b].name.as_bytes())
            });
        }
        tree
    }

    /// The one link no joint has as its child.
    fn root(&self, ctx: &mut Ctx, robot: &Robot) -> Option<usize> {
        let roots: Vec<usize> = (0..robot.links.len())
            .filter(|&l| self.parent_of[l].is_none())
            .collect();
        match roots.as_slice() {
            [root] => Some(*root),
            [] => {
                ctx.error(
                    robot.at + 1,
                    "no root link: every link is the child of a joint, so the joints form a \
                     cycle; expected exactly one link that no joint has as its child",
                );
                None
            }
            [_, ..] => {
                for &r in &roots[1..] {
                    ctx.error(
                        robot.links[r].at + 1,
                        format!(
                            "link '{}' is a second root (no joint has it as its child; the first \
                             root is '{}'); expected exactly one root link — connect it with a \
                             joint",
                            robot.links[r].name, robot.links[roots[0]].name
                        ),
                    );
                }
                None
            }
        }
    }
}

/// The link `joint` names as its `role` (parent or child), if it exists.
fn link_of(
    ctx: &mut Ctx,
    links: &HashMap<&str, usize>,
    joint: &UrdfJoint,
    name: &str,
    at: usize,
    role: &str,
) -> Option<usize> {
    let who = format!("joint '{}'", joint.name);
    if name.is_empty() {
        ctx.error(
            at,
            format!("{who} has no {role} link; expected <{role} link=\"…\"/>"),
        );
        return None;
    }
    let found = links.get(name).copied();
    if found.is_none() {
        ctx.error(
            at,
            format!("{who}: {role} link '{name}' does not exist; expected the name of a <link>"),
        );
    }
    found
}

/// Every joint the root cannot reach (not in `order`) is an error. Every link has one parent
/// and only one link has none, so what the root cannot reach is a cycle: DART hangs on it below
/// the root, or drops it silently beside the tree.
fn refuse_unreached(ctx: &mut Ctx, robot: &Robot, root: usize, order: &[usize]) {
    let mut reached = vec![false; robot.joints.len()];
    for &j in order {
        reached[j] = true;
    }
    for (j, joint) in robot.joints.iter().enumerate() {
        if !reached[j] {
            ctx.error(
                joint.at + 1,
                format!(
                    "joint '{}' is part of a cycle of joints not connected to the root link \
                     '{}'; expected a tree (DART would hang or silently drop these links)",
                    joint.name, robot.links[root].name
                ),
            );
        }
    }
}

/// Joints in DART's creation order: depth-first, pre-order, siblings in name order. Visits each
/// link once, so it ends even on a cycle.
fn creation_order(root: usize, children: &[Vec<usize>], child_link: &[usize]) -> Vec<usize> {
    let mut order = Vec::new();
    let mut seen = vec![false; children.len()];
    seen[root] = true;
    // An explicit stack: a long chain of links must not overflow the thread's stack.
    let mut stack: Vec<std::slice::Iter<usize>> = vec![children[root].iter()];
    while let Some(top) = stack.last_mut() {
        let Some(&j) = top.next() else {
            stack.pop();
            continue;
        };
        let link = child_link[j];
        if std::mem::replace(&mut seen[link], true) {
            continue;
        }
        order.push(j);
        stack.push(children[link].iter());
    }
    order
}

struct Builder<'r, 'c, 'x> {
    ctx: &'c mut Ctx<'x>,
    robot: &'r Robot,
    links: HashMap<&'r str, usize>,
    commands: &'r Commands,
    joints: Vec<Joint>,
    dofs: Vec<Dof>,
    dof_names: Names,
}

impl<'r, 'c, 'x> Builder<'r, 'c, 'x> {
    fn new(
        ctx: &'c mut Ctx<'x>,
        robot: &'r Robot,
        commands: &'r Commands,
        links: HashMap<&'r str, usize>,
    ) -> Self {
        Builder {
            ctx,
            robot,
            links,
            commands,
            joints: Vec::new(),
            dofs: Vec::new(),
            dof_names: Names::default(),
        }
    }

    fn build(mut self, root: usize, order: &[usize], options: &Options) -> Option<Skeleton> {
        let robot = self.robot;
        let root_link = &robot.links[root];
        if let Some(clash) = robot.joints.iter().find(|j| j.name == ROOT_JOINT)
            && root_link.name != WORLD
        {
            self.ctx.error(
                clash.at + 1,
                "joint name 'rootJoint' is the name DART gives the joint it adds above the root \
                 link (it would rename this one 'rootJoint(1)'); expected another name",
            );
        }
        if root_link.name != WORLD {
            let kind = if options.fixed_base {
                JointKind::Weld
            } else {
                JointKind::Free
            };
            let (line, col) = self.ctx.line_col(root_link.at + 1);
            self.push(
                Joint::world_root(
                    ROOT_JOINT.to_string(),
                    kind,
                    root_link.name.clone(),
                    line,
                    col,
                ),
                None,
            );
        }
        for &j in order {
            self.user_joint(&robot.joints[j], root);
        }
        self.mimics();
        if self.ctx.failed() {
            return None;
        }
        Some(Skeleton {
            name: robot.name.clone(),
            transform: Isometry3::identity(),
            joints: self.joints,
            dofs: self.dofs,
        })
    }

    fn user_joint(&mut self, u: &UrdfJoint, root: usize) {
        let who = format!("joint '{}'", u.name);
        let axis = Vector3::new(u.axis[0], u.axis[1], u.axis[2]);
        let kind = match u.kind {
            Type::Revolute | Type::Continuous => JointKind::Revolute,
            Type::Prismatic => JointKind::Prismatic,
            Type::Fixed => JointKind::Weld,
            Type::Floating => JointKind::Free,
            Type::Planar => JointKind::Planar(plane(u.axis)),
        };
        if matches!(
            kind,
            JointKind::Revolute | JointKind::Prismatic | JointKind::Planar(_)
        ) && axis.norm() == 0.0
        {
            self.ctx.error(
                u.axis_at,
                format!(
                    "{who} has the zero axis '0 0 0'; expected a direction (an <axis> without \
                     xyz is the zero axis too)"
                ),
            );
        }
        let axes = match kind {
            JointKind::Revolute | JointKind::Prismatic if axis.norm() > 0.0 => {
                vec![Unit::new_normalize(axis)]
            }
            _ => Vec::new(),
        };
        let limits = u.limit.as_ref().map(|l| {
            let lower = l.lower.map_or(0.0, |n| n.value);
            let upper = l.upper.map_or(0.0, |n| n.value);
            if u.kind != Type::Fixed {
                if lower > upper {
                    self.ctx.error(
                        l.lower.or(l.upper).map_or(l.at, |n| n.at),
                        format!(
                            "{who}: lower limit {} is above upper limit {}; expected lower ≤ upper",
                            Num(lower),
                            Num(upper)
                        ),
                    );
                }
                for (what, n) in [("velocity", l.velocity), ("effort", l.effort)] {
                    if n.value < 0.0 {
                        self.ctx.error(
                            n.at,
                            format!(
                                "{who}: negative {what} limit {}; expected a magnitude ≥ 0",
                                n.value
                            ),
                        );
                    }
                }
            }
            (lower, upper, l.velocity.value, l.effort.value)
        });
        let count = kind.dof_count();
        let mut dofs = Vec::with_capacity(count);
        for _ in 0..count {
            let mut dof = Dof::unbounded();
            if let Some((lower, upper, velocity, effort)) = limits {
                dof.position = Limits { lower, upper };
                dof.velocity = Limits::symmetric(velocity);
                dof.effort = Limits::symmetric(effort);
                dof.initial_position =
                    crate::robot::world::initial_position(Limits { lower, upper });
            }
            if u.kind == Type::Continuous {
                dof.position = Limits::UNBOUNDED;
            }
            dofs.push(dof);
        }
        let parent = self.links.get(u.parent.as_str()).copied();
        // Child joints of a root `world` link are attached to the world.
        let parent = match parent {
            Some(p) if p == root && self.robot.links[root].name == WORLD => None,
            Some(_) => Some(u.parent.clone()),
            None => None,
        };
        if parent.is_some() && u.parent == WORLD {
            self.ctx.warn(
                u.parent_at,
                "a link named 'world' below the root is an ordinary body (DART warns too)",
            );
        }
        let (line, col) = self.ctx.line_col(u.at + 1);
        let ros2 = self.commands.get(&u.name).copied();
        let command = ros2.map(|r| r.command);
        self.push(
            Joint {
                name: u.name.clone(),
                kind,
                actuator: Actuator::Force,
                parent,
                child: u.child.clone(),
                dofs: 0..0,
                transform: Isometry3::identity(),
                axes,
                line,
                col,
                mimic: u.mimic.as_ref().map(|m| Mimic {
                    joint: m.joint.clone(),
                    multiplier: m.multiplier,
                    offset: m.offset,
                }),
                command,
            },
            Some(dofs),
        );
    }

    /// Appends a joint with its DOFs (default ones for `None`), named as DART names them.
    fn push(&mut self, mut joint: Joint, dofs: Option<Vec<Dof>>) {
        let index = self.joints.len();
        let count = joint.kind.dof_count();
        let dofs = dofs.unwrap_or_else(|| vec![Dof::unbounded(); count]);
        let first = self.dofs.len();
        for (dof, suffix) in dofs.into_iter().zip(joint.kind.dof_suffixes()) {
            let base = match suffix {
                Some(s) => format!("{}{s}", joint.name),
                None => "default".to_string(),
            };
            let name = self.dof_names.issue(&base);
            if *suffix == Some("") && name != base {
                // The DOF carries the joint's own name: DART would rename what the user wrote.
                self.ctx.diags.push(Diagnostic::new(
                    self.ctx.path,
                    joint.line,
                    joint.col,
                    format!(
                        "joint '{}': its DOF name is already the name of a DOF DART makes up \
                         (DART would rename this one '{name}'); expected another joint name",
                        joint.name
                    ),
                ));
            }
            self.dofs.push(Dof {
                name,
                joint: index,
                ..dof
            });
        }
        joint.dofs = first..self.dofs.len();
        self.joints.push(joint);
    }

    /// DART's `addMimicJointsRecursive`: a joint whose `<mimic>` names an existing joint becomes a
    /// mimic joint. A missing, own or cyclic leader, or DOF counts that do not match, are refused.
    fn mimics(&mut self) {
        let index: HashMap<String, usize> = self
            .joints
            .iter()
            .enumerate()
            .map(|(i, j)| (j.name.clone(), i))
            .collect();
        for u in &self.robot.joints {
            let Some(m) = &u.mimic else { continue };
            let who = format!("joint '{}'", u.name);
            let Some(&follower) = index.get(&u.name) else {
                continue;
            };
            let Some(&leader) = index.get(&m.joint) else {
                self.ctx.error(
                    m.joint_at,
                    format!(
                        "{who} mimics '{}', which is not a joint of this robot; expected the name \
                         of its leader joint (DART would leave the rest of this branch unmimicked)",
                        m.joint
                    ),
                );
                continue;
            };
            if leader == follower {
                self.ctx.error(
                    m.joint_at,
                    format!("{who} mimics itself; expected the name of another joint"),
                );
                continue;
            }
            let (fd, ld) = (
                self.joints[follower].dofs.len(),
                self.joints[leader].dofs.len(),
            );
            if fd != 0 && (fd != 1 || ld != 1) {
                self.ctx.error(
                    m.joint_at,
                    format!(
                        "{who} ({fd} DOFs) mimics '{}' ({ld} DOFs); expected one DOF each",
                        m.joint
                    ),
                );
                continue;
            }
            // A chain that comes back to this joint means no joint of the cycle is driven.
            let mut at = leader;
            for _ in 0..self.joints.len() {
                let Some(next) = self.joints[at]
                    .mimic
                    .as_ref()
                    .and_then(|n| index.get(&n.joint).copied())
                else {
                    break;
                };
                if next == follower {
                    self.ctx.error(
                        m.joint_at,
                        format!(
                            "{who} is part of a mimic cycle through '{}'; expected a chain that \
                             ends at a joint a motion drives",
                            m.joint
                        ),
                    );
                    break;
                }
                at = next;
            }
            self.joints[follower].actuator = Actuator::Mimic;
        }
    }
}

/// The plane of a planar joint from its normal (`<axis>`), as DART chooses it.
fn plane(normal: [f64; 3]) -> Plane {
    let unit = |i: usize| {
        (0..3).all(|k| {
            if k == i {
                normal[k].abs() == 1.0
            } else {
                normal[k] == 0.0
            }
        })
    };
    if unit(2) {
        Plane::Xy
    } else if unit(0) {
        Plane::Yz
    } else if unit(1) {
        Plane::Zx
    } else {
        Plane::Arbitrary
    }
}

/// URDF cannot state acceleration limits; the proof then has none to check unless the
/// configuration gives them.
pub(super) fn warn_missing_acceleration_limits(ctx: &Ctx, s: &Skeleton, at: usize) {
    let missing: Vec<&str> = s
        .dofs
        .iter()
        .filter(|d| {
            d.acceleration.is_unbounded()
                && s.joints.get(d.joint).is_some_and(|j| {
                    !matches!(j.kind, JointKind::Free | JointKind::Weld)
                        && j.command != Some(CommandInterface::None)
                })
        })
        .map(|d| d.name.as_str())
        .collect();
    if !missing.is_empty() {
        ctx.warn(
            at + 1,
            &format!(
                "URDF has no acceleration limits: {} DOF(s) have none ({}); give them with \
                 robot.limits.<dof>.acceleration in the configuration",
                missing.len(),
                abbreviate(&missing)
            ),
        );
    }
}

fn abbreviate(names: &[&str]) -> String {
    const SHOWN: usize = 6;
    let mut s = names
        .iter()
        .take(SHOWN)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > SHOWN {
        s.push_str(&format!(", … {} more", names.len() - SHOWN));
    }
    s
}
