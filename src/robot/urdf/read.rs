//! urdfdom 4.0's validity rules: what makes `parseURDF` return no model, each reported at the
//! offending element or value (all of them, not only the first urdfdom stops at).

use std::collections::HashMap;

use roxmltree::{Document, Node};

use crate::robot::xml::{Attr, Ctx, c_number as number, child, children, raw_attr as attr, start};

/// URDF joint types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Type {
    Revolute,
    Continuous,
    Prismatic,
    Fixed,
    Floating,
    Planar,
}

const TYPES: &str = "revolute, continuous, prismatic, fixed, floating or planar";

/// A number as written, with where it was written.
#[derive(Debug, Clone, Copy)]
pub(super) struct Num {
    pub(super) value: f64,
    pub(super) at: usize,
}

pub(super) struct Limit {
    pub(super) at: usize,
    /// `None` when not written (urdfdom then uses 0).
    pub(super) lower: Option<Num>,
    pub(super) upper: Option<Num>,
    pub(super) effort: Num,
    pub(super) velocity: Num,
}

pub(super) struct Mimic {
    /// The leader's name, and where it is written.
    pub(super) joint: String,
    pub(super) joint_at: usize,
    pub(super) multiplier: f64,
    pub(super) offset: f64,
}

pub(super) struct Link {
    pub(super) name: String,
    pub(super) at: usize,
}

pub(super) struct Joint {
    pub(super) name: String,
    pub(super) at: usize,
    pub(super) kind: Type,
    pub(super) parent: String,
    pub(super) parent_at: usize,
    pub(super) child: String,
    pub(super) child_at: usize,
    /// urdfdom's axis: `1 0 0` without `<axis>`, `0 0 0` for an `<axis>` without `xyz`.
    pub(super) axis: [f64; 3],
    pub(super) axis_at: usize,
    pub(super) limit: Option<Limit>,
    pub(super) mimic: Option<Mimic>,
}

pub(super) struct Robot {
    pub(super) name: String,
    pub(super) at: usize,
    /// In document order.
    pub(super) links: Vec<Link>,
    pub(super) joints: Vec<Joint>,
    /// Every `<joint>` was read; otherwise the tree is not checked (a joint left out would make
    /// its child look like a second root).
    pub(super) complete: bool,
}

/// The `<robot>` element's model, or `None` when urdfdom would return no model (reported).
pub(super) fn robot(ctx: &mut Ctx, doc: &Document) -> Option<Robot> {
    let root = doc.root_element();
    if root.tag_name().name() != "robot" {
        ctx.error(
            start(root) + 1,
            format!(
                "root element <{}> is not a URDF robot; expected <robot name=\"…\">",
                root.tag_name().name()
            ),
        );
        return None;
    }
    let name = match attr(ctx.text, root, "name") {
        Some(a) => a.value.to_string(),
        None => {
            ctx.error(
                start(root) + 1,
                "<robot> has no name attribute; expected <robot name=\"…\"> (urdfdom refuses a \
                 robot without a name)",
            );
            String::new()
        }
    };
    if let Some(v) = attr(ctx.text, root, "version")
        && !version_is_1_0(v.value)
    {
        ctx.error(
            v.at,
            format!(
                "URDF version '{}' is not supported; expected \"1.0\" (or no version attribute)",
                v.value
            ),
        );
    }
    materials(ctx, root);
    let links = links(ctx, root);
    let before = ctx.diags.len();
    let joints = joints(ctx, root);
    Some(Robot {
        name,
        at: start(root),
        links,
        joints,
        complete: ctx.diags.len() == before,
    })
}

/// urdfdom's `URDFVersion`: `major.minor` in digits, equal to 1.0.
fn version_is_1_0(v: &str) -> bool {
    let Some((major, minor)) = v.split_once('.') else {
        return false;
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    digits(major)
        && digits(minor)
        && major.trim_start_matches('0') == "1"
        && minor.trim_start_matches('0').is_empty()
}

/// Top-level materials must have unique names (a missing name counts as the empty name).
fn materials(ctx: &mut Ctx, root: Node) {
    let mut seen: HashMap<String, usize> = HashMap::new();
    for m in children(root, "material") {
        let name = attr(ctx.text, m, "name")
            .map_or("", |a| a.value)
            .to_string();
        if let Some(first) = seen.get(&name) {
            let (line, _) = ctx.line_col(*first);
            ctx.error(
                start(m) + 1,
                format!(
                    "material '{name}' is already defined at line {line}; expected unique \
                     material names (urdfdom refuses the file)"
                ),
            );
        } else {
            seen.insert(name, start(m));
        }
    }
    // A visual's `<material name>` defined nowhere is no refusal: urdfdom keeps the visual's own
    // (name-only) material and DART loads the model.
}

fn links(ctx: &mut Ctx, root: Node) -> Vec<Link> {
    let mut links: Vec<Link> = Vec::new();
    let mut by_name: HashMap<String, usize> = HashMap::new();
    for l in children(root, "link") {
        let Some(name) = attr(ctx.text, l, "name") else {
            ctx.error(
                start(l) + 1,
                "<link> has no name attribute; expected <link name=\"…\">",
            );
            continue;
        };
        if let Some(&first) = by_name.get(name.value) {
            let (line, _) = ctx.line_col(links[first].at);
            ctx.error(
                name.at,
                format!(
                    "link name '{}' is already used by the link at line {line}; expected unique \
                     link names",
                    name.value
                ),
            );
            continue;
        }
        by_name.insert(name.value.to_string(), links.len());
        links.push(Link {
            name: name.value.to_string(),
            at: start(l),
        });
    }
    if links.is_empty() && !ctx.failed() {
        ctx.error(
            start(root) + 1,
            "the robot has no <link>; expected at least one link",
        );
    }
    links
}

fn joints(ctx: &mut Ctx, root: Node) -> Vec<Joint> {
    let mut joints: Vec<Joint> = Vec::new();
    let mut by_name: HashMap<String, usize> = HashMap::new();
    for j in children(root, "joint") {
        let Some(joint) = joint(ctx, j) else { continue };
        if let Some(&first) = by_name.get(&joint.name) {
            let (line, _) = ctx.line_col(joints[first].at);
            ctx.error(
                attr(ctx.text, j, "name").map_or(start(j), |a| a.at),
                format!(
                    "joint name '{}' is already used by the joint at line {line}; expected unique \
                     joint names (motions and drives refer to joints by name)",
                    joint.name
                ),
            );
            continue;
        }
        by_name.insert(joint.name.clone(), joints.len());
        joints.push(joint);
    }
    joints
}

fn joint(ctx: &mut Ctx, j: Node) -> Option<Joint> {
    let Some(name) = attr(ctx.text, j, "name") else {
        ctx.error(
            start(j) + 1,
            "<joint> has no name attribute; expected <joint name=\"…\" type=\"…\">",
        );
        return None;
    };
    let who = format!("joint '{}'", name.value);
    let before = ctx.diags.len();
    let kind = match attr(ctx.text, j, "type") {
        None => {
            ctx.error(
                start(j) + 1,
                format!("{who} has no type attribute; expected type=\"{TYPES}\""),
            );
            None
        }
        Some(t) => {
            let kind = match t.value {
                "revolute" => Some(Type::Revolute),
                "continuous" => Some(Type::Continuous),
                "prismatic" => Some(Type::Prismatic),
                "fixed" => Some(Type::Fixed),
                "floating" => Some(Type::Floating),
                "planar" => Some(Type::Planar),
                _ => None,
            };
            if kind.is_none() {
                ctx.error(
                    t.at,
                    format!("{who}: unknown joint type '{}'; expected {TYPES}", t.value),
                );
            }
            kind
        }
    };
    if let Some(origin) = child(j, "origin") {
        for key in ["xyz", "rpy"] {
            if let Some(a) = attr(ctx.text, origin, key) {
                vector(ctx, a, &format!("{who}: <origin> {key}"));
            }
        }
    }
    let (parent, parent_at) = link_ref(ctx, j, "parent");
    let (child_name, child_at) = link_ref(ctx, j, "child");
    let mut axis = [1.0, 0.0, 0.0];
    let mut axis_at = start(j);
    if !matches!(kind, Some(Type::Floating | Type::Fixed) | None)
        && let Some(a) = child(j, "axis")
    {
        axis_at = start(a) + 1;
        axis = [0.0; 3];
        if let Some(xyz) = attr(ctx.text, a, "xyz") {
            axis_at = xyz.at;
            axis = vector(ctx, xyz, &format!("{who}: <axis> xyz")).unwrap_or(axis);
        }
    }
    let limit = match child(j, "limit") {
        Some(l) => limit(ctx, l, &who),
        None => {
            if matches!(kind, Some(Type::Revolute | Type::Prismatic)) {
                ctx.error(
                    start(j) + 1,
                    format!(
                        "{who} is {} but has no <limit>; expected <limit effort=\"…\" \
                         velocity=\"…\" lower=\"…\" upper=\"…\"/>",
                        if kind == Some(Type::Revolute) {
                            "revolute"
                        } else {
                            "prismatic"
                        }
                    ),
                );
            }
            None
        }
    };
    if let Some(s) = child(j, "safety_controller") {
        optional_numbers(
            ctx,
            s,
            &["soft_lower_limit", "soft_upper_limit", "k_position"],
            &who,
        );
        required_number(ctx, s, "k_velocity", &who);
    }
    if let Some(c) = child(j, "calibration") {
        optional_numbers(ctx, c, &["rising", "falling"], &who);
    }
    let mimic = child(j, "mimic").and_then(|m| mimic(ctx, m, &who));
    if let Some(d) = child(j, "dynamics") {
        optional_numbers(ctx, d, &["damping", "friction"], &who);
        if d.attribute("damping").is_none() && d.attribute("friction").is_none() {
            ctx.error(
                start(d) + 1,
                format!(
                    "{who}: <dynamics> has neither damping nor friction; expected at least one"
                ),
            );
        }
    }
    if ctx.diags.len() != before {
        return None;
    }
    Some(Joint {
        name: name.value.to_string(),
        at: start(j),
        kind: kind?,
        parent,
        parent_at,
        child: child_name,
        child_at,
        axis,
        axis_at,
        limit,
        mimic,
    })
}

/// `<parent link="…">`: urdfdom reads a missing element or attribute as the empty name.
fn link_ref(ctx: &Ctx, j: Node, tag: &str) -> (String, usize) {
    match child(j, tag) {
        Some(el) => match attr(ctx.text, el, "link") {
            Some(a) => (a.value.to_string(), a.at),
            None => (String::new(), start(el) + 1),
        },
        None => (String::new(), start(j) + 1),
    }
}

fn limit(ctx: &mut Ctx, l: Node, who: &str) -> Option<Limit> {
    let lower = optional_number(ctx, l, "lower", who);
    let upper = optional_number(ctx, l, "upper", who);
    let effort = required_number(ctx, l, "effort", who);
    let velocity = required_number(ctx, l, "velocity", who);
    Some(Limit {
        at: start(l) + 1,
        lower: lower?,
        upper: upper?,
        effort: effort?,
        velocity: velocity?,
    })
}

fn mimic(ctx: &mut Ctx, m: Node, who: &str) -> Option<Mimic> {
    let Some(joint) = attr(ctx.text, m, "joint") else {
        ctx.error(
            start(m) + 1,
            format!("{who}: <mimic> names no joint; expected <mimic joint=\"…\"/>"),
        );
        return None;
    };
    let multiplier = optional_number(ctx, m, "multiplier", who)?;
    let offset = optional_number(ctx, m, "offset", who)?;
    Some(Mimic {
        joint: joint.value.to_string(),
        joint_at: joint.at,
        multiplier: multiplier.map_or(1.0, |n| n.value),
        offset: offset.map_or(0.0, |n| n.value),
    })
}

/// `Some(None)` when absent, `None` (reported) when malformed.
fn optional_number(ctx: &mut Ctx, el: Node, key: &str, who: &str) -> Option<Option<Num>> {
    match attr(ctx.text, el, key) {
        None => Some(None),
        Some(a) => checked_number(ctx, a, el, key, who).map(Some),
    }
}

fn optional_numbers(ctx: &mut Ctx, el: Node, keys: &[&str], who: &str) {
    for key in keys {
        let _ = optional_number(ctx, el, key, who);
    }
}

fn required_number(ctx: &mut Ctx, el: Node, key: &str, who: &str) -> Option<Num> {
    match attr(ctx.text, el, key) {
        None => {
            ctx.error(
                start(el) + 1,
                format!(
                    "{who}: <{}> has no {key} attribute; expected {key}=\"…\" (urdfdom requires it)",
                    el.tag_name().name()
                ),
            );
            None
        }
        Some(a) => checked_number(ctx, a, el, key, who),
    }
}

fn checked_number(ctx: &mut Ctx, a: Attr, el: Node, key: &str, who: &str) -> Option<Num> {
    match number(a.value) {
        Some(value) => Some(Num { value, at: a.at }),
        None => {
            ctx.error(
                a.at,
                format!(
                    "{who}: <{}> {key}: expected a number, found '{}' (URDF numbers are plain \
                     finite decimals: no units, expressions, inf/nan or trailing spaces)",
                    el.tag_name().name(),
                    a.value
                ),
            );
            None
        }
    }
}

/// Three numbers separated by spaces (urdfdom's `Vector3::init`).
fn vector(ctx: &mut Ctx, a: Attr, what: &str) -> Option<[f64; 3]> {
    let mut out = [0.0; 3];
    let mut n = 0;
    let base = a.value.as_ptr() as usize;
    for piece in a.value.split(' ').filter(|p| !p.is_empty()) {
        let Some(x) = number(piece) else {
            ctx.error(
                a.at + (piece.as_ptr() as usize - base),
                format!("{what}: expected a number, found '{piece}'"),
            );
            return None;
        };
        if let Some(slot) = out.get_mut(n) {
            *slot = x;
        }
        n += 1;
    }
    if n != 3 {
        ctx.error(
            a.at,
            format!("{what}: expected 3 numbers separated by spaces, found {n}"),
        );
        return None;
    }
    Some(out)
}
