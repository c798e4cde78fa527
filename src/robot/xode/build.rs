//! Bodies, joints and names → one [`Skeleton`] per `<world>`.
//!
//! Links resolve by name over the whole document (postlink included); the table of
//! xode-semantics.md §4 gives `attach(body1, body2)`, and parent = body1, child = body2 (the
//! environment is `null`). Names must be unambiguous: duplicate body names, joint names used twice
//! in one world (each world is its own skeleton, so two worlds may both have a joint `j`), and a
//! name a body shares with any other element, are refused.

use std::collections::HashSet;

use nalgebra::Isometry3;

use super::read::{Document, JointType, Link, Named};
use crate::robot::world::{Actuator, Dof, Joint, JointKind, Limits, Skeleton};
use crate::robot::xml::Ctx;

pub(super) fn skeletons(ctx: &mut Ctx, doc: &Document) -> Vec<Skeleton> {
    check_names(ctx, doc);
    if ctx.failed() {
        return Vec::new();
    }
    (0..doc.worlds.len())
        .map(|w| skeleton(ctx, doc, w))
        .collect()
}

/// Duplicate body names, a joint name used twice in one world, and a name shared by a body and
/// anything else, make a link (or a motion column) ambiguous.
fn check_names(ctx: &mut Ctx, doc: &Document) {
    let mut clashes: Vec<(usize, String)> = Vec::new();
    for (name, uses) in &doc.names {
        let bodies = uses
            .iter()
            .filter(|(n, _)| matches!(n, Named::Body(_)))
            .count();
        for (i, &(what, at)) in uses.iter().enumerate().skip(1) {
            let same_world_joint = match what {
                Named::Joint(w) => uses[..i].iter().find(|(n, _)| *n == Named::Joint(w)),
                _ => None,
            };
            let (first_at, problem) = match (what, same_world_joint) {
                (Named::Body(_), _) if bodies > 1 => (uses[0].1, "body names must be unique"),
                (_, Some(&(_, earlier))) => (
                    earlier,
                    "joint names must be unique within a world (motions and drives refer to \
                     joints by name)",
                ),
                _ if bodies > 0 => (
                    uses[0].1,
                    "a body's name must not name anything else (links would be ambiguous)",
                ),
                _ => continue,
            };
            let (line, _) = ctx.line_col(first_at);
            clashes.push((
                at,
                format!(
                    "name '{name}' of this <{}> is already used at line {line}; {problem}",
                    what.tag()
                ),
            ));
        }
    }
    clashes.sort_by_key(|c| c.0);
    for (at, message) in clashes {
        ctx.error(at, message);
    }
}

fn body_name(doc: &Document, b: usize) -> String {
    let body = &doc.bodies[b];
    body.name
        .clone()
        .unwrap_or_else(|| format!("body_{}", body.index))
}

/// The body a link names, in the joint's world.
fn lookup(ctx: &mut Ctx, doc: &Document, link: &Link, world: usize, who: &str) -> Option<usize> {
    let uses = doc.names.get(&link.name);
    let body = uses.and_then(|u| {
        u.iter().find_map(|(n, _)| match n {
            Named::Body(b) => Some(*b),
            _ => None,
        })
    });
    match (body, uses.and_then(|u| u.first())) {
        (Some(b), _) if doc.bodies[b].world == world => Some(b),
        (Some(_), _) => {
            ctx.error(
                link.at,
                format!(
                    "{who} links body '{}' of another <world>; expected a body of the joint's \
                     own world (ODE cannot attach across worlds)",
                    link.name
                ),
            );
            None
        }
        (None, Some((what, _))) => {
            ctx.error(
                link.at,
                format!(
                    "{who} links '{}', which is a <{}>, not a body; expected a <body> name",
                    link.name,
                    what.tag()
                ),
            );
            None
        }
        (None, None) => {
            ctx.error(
                link.at,
                format!(
                    "{who} links '{}', but no <body> has that name; expected a <body> name",
                    link.name
                ),
            );
            None
        }
    }
}

fn skeleton(ctx: &mut Ctx, doc: &Document, w: usize) -> Skeleton {
    let name = doc.worlds[w]
        .name
        .clone()
        .unwrap_or_else(|| format!("world_{w}"));
    let mut joints: Vec<Joint> = Vec::new();
    let mut dofs: Vec<Dof> = Vec::new();
    let mut dof_names: HashSet<String> = HashSet::new();
    for j in doc.joints.iter().filter(|j| j.world == w) {
        let index = joints.len();
        let joint_name = j.name.clone().unwrap_or_else(|| format!("joint_{index}"));
        let who = format!("joint '{joint_name}'");
        let link1 = j.link1.as_ref().map(|l| lookup(ctx, doc, l, w, &who));
        let link2 = j.link2.as_ref().map(|l| lookup(ctx, doc, l, w, &who));
        if matches!(link1, Some(None)) || matches!(link2, Some(None)) {
            continue;
        }
        let (link1, link2) = (link1.flatten(), link2.flatten());
        let body1 = link1.or(j.enclosing);
        let body2 = match (link2, j.link1.is_some()) {
            (Some(b), _) => Some(b),
            (None, true) => j.enclosing,
            (None, false) => None,
        };
        let (line, col) = ctx.line_col(j.at + 1);
        let (parent, child) = match (body1, body2) {
            (None, None) => {
                ctx.error(
                    j.at + 1,
                    format!(
                        "{who} connects nothing: it is neither inside a <body> nor has <link1> or \
                         <link2>; expected two objects (PyODE: Joint requires two objects)"
                    ),
                );
                continue;
            }
            (Some(a), Some(b)) if a == b => {
                ctx.error(
                    j.at + 1,
                    format!(
                        "{who} links body '{}' to itself; expected two different objects",
                        body_name(doc, a)
                    ),
                );
                continue;
            }
            (Some(a), Some(b)) => (Some(body_name(doc, a)), body_name(doc, b)),
            (Some(a), None) | (None, Some(a)) => (None, body_name(doc, a)),
        };
        if j.kind == JointType::Hinge2 && parent.is_none() {
            ctx.error(
                j.at + 1,
                format!(
                    "{who} is a hinge2 attached to the static environment; ODE needs two bodies \
                     for hinge2"
                ),
            );
            continue;
        }
        let (kind, suffixes): (JointKind, &[&str]) = match j.kind {
            // Adds no degree of freedom: a motor on DOFs another joint has.
            JointType::AMotor => continue,
            JointType::Hinge => (JointKind::Revolute, &[""]),
            JointType::Slider => (JointKind::Prismatic, &[""]),
            JointType::Universal | JointType::Hinge2 => (JointKind::Universal, &["_1", "_2"]),
            JointType::Ball => (JointKind::Ball, &["_x", "_y", "_z"]),
            JointType::Fixed => (JointKind::Weld, &[]),
        };
        let first = dofs.len();
        for (i, suffix) in suffixes.iter().enumerate() {
            let dof_name = format!("{joint_name}{suffix}");
            if !dof_names.insert(dof_name.clone()) {
                ctx.error(
                    j.at + 1,
                    format!(
                        "{who}: its DOF name '{dof_name}' is already the name of another DOF; \
                         expected distinct DOF names (rename one of the joints)"
                    ),
                );
            }
            let position = j.axes.get(i).map_or(Limits::UNBOUNDED, |a| Limits {
                lower: a.lo.unwrap_or(f64::NEG_INFINITY),
                upper: a.hi.unwrap_or(f64::INFINITY),
            });
            dofs.push(Dof {
                name: dof_name,
                joint: index,
                position,
                ..Dof::unbounded()
            });
        }
        joints.push(Joint {
            name: joint_name,
            kind,
            actuator: Actuator::Force,
            parent,
            child,
            dofs: first..dofs.len(),
            transform: Isometry3::identity(),
            axes: Vec::new(),
            line,
            col,
            mimic: None,
            command: None,
        });
    }
    Skeleton {
        name,
        transform: Isometry3::identity(),
        joints,
        dofs,
    }
}
