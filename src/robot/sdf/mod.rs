//! SDF 1.4–1.6 → [`World`], as DART 6.20's `SdfParser::readSkeleton` builds it
//! (../shared/docs/urdf-semantics.md §10), plus the `<velocity>` and `<effort>` limits DART
//! ignores.
//!
//! The first `<model>` is the skeleton. Joint order is DART's: take the alphabetically first link
//! not built yet, climb its parent joints to the topmost unbuilt ancestor, build that one (its
//! parent joint, or a free joint `root` when it has none), start over. Where DART discards or
//! re-attaches joints, stops at an unsupported type or would loop, the file is refused.

use crate::diag::Num;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use nalgebra::{Isometry3, Unit, Vector3};
use roxmltree::Node;

use crate::diag::FileError;
use crate::robot::world::{Actuator, Dof, Joint, JointKind, Limits, Skeleton, World};
use crate::robot::xml::{self, Ctx, Names, attr, c_number, child, children, start, text};

#[cfg(test)]
mod tests;

const VERSIONS: [&str; 3] = ["1.4", "1.5", "1.6"];

/// DART's name for the free joint of a link that has no parent joint.
const ROOT_JOINT: &str = "root";

/// Reads an SDF file.
pub fn load(path: &Path) -> Result<World, FileError> {
    let text = xml::read_text(path, "an SDF file")?;
    parse(&text, path)
}

/// Parses SDF text; `path` is only used in messages.
pub fn parse(text: &str, path: &Path) -> Result<World, FileError> {
    let mut ctx = Ctx::new(text, path);
    let Some(doc) = ctx.parse(text) else {
        return Err(ctx.into_error());
    };
    let skeleton = model(&mut ctx, doc.root_element());
    match skeleton {
        Some(s) if !ctx.failed() => Ok(World { skeletons: vec![s] }),
        _ => Err(ctx.into_error()),
    }
}

struct SdfJoint<'a> {
    name: String,
    at: usize,
    kind: JointKind,
    parent: String,
    child: String,
    el: Node<'a, 'a>,
}

fn model(ctx: &mut Ctx, root: Node) -> Option<Skeleton> {
    let model = first_model(ctx, root)?;
    let name = attr(model, "name").map_or(String::new(), |a| a.value.to_string());
    let links = links(ctx, model);
    let (joints, joint_names) = joints_by_child(ctx, model, &links);
    if ctx.failed() {
        return None;
    }
    if links.contains_key(ROOT_JOINT) || joint_names.contains_key(ROOT_JOINT) {
        let needs_root = links.keys().any(|l| !joints.contains_key(l));
        if needs_root && let Some(&at) = joint_names.get(ROOT_JOINT) {
            ctx.error(
                at + 1,
                "joint name 'root' is the name DART gives the free joint it adds for a link \
                 without a parent joint; expected another name",
            );
            return None;
        }
    }
    let b = build(ctx, &links, &joints)?;
    if ctx.failed() {
        return None;
    }
    Some(Skeleton {
        name,
        transform: Isometry3::identity(),
        joints: b.joints,
        dofs: b.dofs,
    })
}

/// The `<model>` of an `<sdf>` root of a version DART reads (only the first is read).
fn first_model<'a>(ctx: &mut Ctx, root: Node<'a, 'a>) -> Option<Node<'a, 'a>> {
    if root.tag_name().name() != "sdf" {
        ctx.error(
            start(root) + 1,
            format!(
                "root element <{}> is not SDF; expected <sdf version=\"1.6\">",
                root.tag_name().name()
            ),
        );
        return None;
    }
    match attr(root, "version") {
        Some(v) if VERSIONS.contains(&v.value) => {}
        Some(v) => {
            ctx.error(
                v.at,
                format!(
                    "SDF version '{}' is not read (DART reads 1.4, 1.5 and 1.6); convert the file, \
                     e.g. with `gz sdf`, or export it as URDF",
                    v.value
                ),
            );
            return None;
        }
        None => {
            ctx.error(
                start(root) + 1,
                "<sdf> has no version attribute; expected version=\"1.4\", \"1.5\" or \"1.6\"",
            );
            return None;
        }
    }
    let Some(model) = child(root, "model") else {
        ctx.error(
            start(root) + 1,
            "<sdf> has no <model>; expected the robot as an <sdf><model> (a <world> file is not a \
             robot model)",
        );
        return None;
    };
    if let Some(second) = children(root, "model").nth(1) {
        ctx.warn(
            start(second) + 1,
            "only the first <model> is read (as DART does)",
        );
    }
    Some(model)
}

/// The model's links by name, in name order (DART keeps them in a std::map), with where each
/// starts; a link without a name or with a name already used is an error.
fn links(ctx: &mut Ctx, model: Node) -> BTreeMap<String, usize> {
    let mut links: BTreeMap<String, usize> = BTreeMap::new();
    for l in children(model, "link") {
        let Some(n) = attr(l, "name") else {
            ctx.error(
                start(l) + 1,
                "<link> has no name attribute; expected <link name=\"…\">",
            );
            continue;
        };
        if let Some(first) = links.insert(n.value.to_string(), start(l)) {
            let (line, _) = ctx.line_col(first);
            links.insert(n.value.to_string(), first);
            ctx.error(
                n.at,
                format!(
                    "link name '{}' is already used by the link at line {line}; expected unique \
                     link names",
                    n.value
                ),
            );
        }
    }
    links
}

/// Joints by child link name, and where each joint name is: a joint name used twice, or a link
/// that is the child of two joints (a closed loop), is an error.
fn joints_by_child<'a>(
    ctx: &mut Ctx,
    model: Node<'a, 'a>,
    links: &BTreeMap<String, usize>,
) -> (HashMap<String, SdfJoint<'a>>, HashMap<String, usize>) {
    let mut joints: HashMap<String, SdfJoint> = HashMap::new();
    let mut joint_names: HashMap<String, usize> = HashMap::new();
    for j in children(model, "joint") {
        let Some(joint) = joint(ctx, j, links) else {
            continue;
        };
        if let Some(first) = joint_names.insert(joint.name.clone(), joint.at) {
            let (line, _) = ctx.line_col(first);
            ctx.error(
                joint.at + 1,
                format!(
                    "joint name '{}' is already used by the joint at line {line}; expected unique \
                     joint names",
                    joint.name
                ),
            );
            continue;
        }
        if let Some(first) = joints.get(&joint.child) {
            let (line, _) = ctx.line_col(first.at);
            ctx.error(
                joint.at + 1,
                format!(
                    "joint '{}' claims link '{}' as its child, but joint '{}' (line {line}) \
                     already does; expected one parent joint per link (DART discards this joint, \
                     so a closed kinematic loop cannot be described in SDF for DART)",
                    joint.name, joint.child, first.name
                ),
            );
            continue;
        }
        joints.insert(joint.child.clone(), joint);
    }
    (joints, joint_names)
}

/// The joints and DOFs in DART's build order: the alphabetically first unbuilt link's topmost
/// unbuilt ancestor next, by its parent joint or a free joint DART adds.
fn build(
    ctx: &mut Ctx,
    links: &BTreeMap<String, usize>,
    joints: &HashMap<String, SdfJoint>,
) -> Option<Builder> {
    let mut b = Builder {
        joints: Vec::new(),
        dofs: Vec::new(),
        dof_names: Names::default(),
        joint_names: Names::default(),
    };
    // Names are issued in build order, as DART's NameManager does; the free joints DART adds
    // take the next free `root(k)`, by the link they carry.
    let mut roots: HashMap<String, String> = HashMap::new();
    let mut built: HashSet<String> = HashSet::new();
    let mut pending: Vec<String> = links.keys().cloned().collect();
    pending.reverse();
    while let Some(first) = pending.last().cloned() {
        let current = topmost_unbuilt(ctx, joints, &built, first)?;
        match joints.get(&current) {
            None => {
                let (line, col) = ctx.line_col(links[&current] + 1);
                let name = b.joint_names.issue(ROOT_JOINT);
                roots.insert(name.clone(), current.clone());
                b.push_free_root(name, current.clone(), line, col);
            }
            Some(j) => b.push_user_joint(ctx, j, &roots),
        }
        built.insert(current.clone());
        pending.retain(|l| *l != current);
    }
    Some(b)
}

/// From link `first`, climbs its parent joints to the topmost ancestor not built yet, refusing
/// a cycle (DART would loop forever).
fn topmost_unbuilt(
    ctx: &mut Ctx,
    joints: &HashMap<String, SdfJoint>,
    built: &HashSet<String>,
    first: String,
) -> Option<String> {
    let mut current = first;
    let mut seen: Vec<String> = Vec::new();
    while let Some(j) = joints.get(&current) {
        if j.parent == "world" || built.contains(&j.parent) {
            break;
        }
        if seen.contains(&j.parent) || j.parent == current {
            ctx.error(
                j.at + 1,
                format!(
                    "joint '{}' is part of a cycle of joints (link '{}' is its own ancestor); \
                     expected a tree (DART would never finish loading this)",
                    j.name, j.parent
                ),
            );
            return None;
        }
        seen.push(current.clone());
        current = j.parent.clone();
    }
    Some(current)
}

fn joint<'a>(
    ctx: &mut Ctx,
    j: Node<'a, 'a>,
    links: &BTreeMap<String, usize>,
) -> Option<SdfJoint<'a>> {
    let Some(name) = attr(j, "name") else {
        ctx.error(
            start(j) + 1,
            "<joint> has no name attribute; expected <joint name=\"…\">",
        );
        return None;
    };
    let who = format!("joint '{}'", name.value);
    let kind = match attr(j, "type") {
        None => {
            ctx.error(start(j) + 1, format!("{who} has no type attribute"));
            None
        }
        Some(t) => match t.value {
            "revolute" => Some(JointKind::Revolute),
            "prismatic" => Some(JointKind::Prismatic),
            "ball" => Some(JointKind::Ball),
            "universal" | "revolute2" => Some(JointKind::Universal),
            "fixed" => Some(JointKind::Weld),
            other => {
                let why = match other {
                    "continuous" | "gearbox" => {
                        "DART 6.20 does not read it and stops reading the model there"
                    }
                    "screw" => "motiond has no screw joint",
                    _ => "it is not an SDF joint type",
                };
                ctx.error(
                    t.at,
                    format!(
                        "{who}: joint type '{other}' cannot be used ({why}); expected revolute, \
                         prismatic, ball, universal, revolute2 or fixed"
                    ),
                );
                None
            }
        },
    };
    let link_ref = |ctx: &mut Ctx, tag: &str| -> Option<(String, usize)> {
        let Some(el) = child(j, tag) else {
            ctx.error(
                start(j) + 1,
                format!("{who} has no <{tag}>; expected <{tag}>LINK</{tag}>"),
            );
            return None;
        };
        let (value, at) = text(el).map_or(("", start(el) + 1), |t| (t.value, t.at));
        let known = links.contains_key(value) || (tag == "parent" && value == "world");
        if !known {
            ctx.error(
                at,
                format!(
                    "{who}: {tag} link '{value}' does not exist; expected the name of a <link>{}",
                    if tag == "parent" { " or world" } else { "" }
                ),
            );
            return None;
        }
        Some((value.to_string(), at))
    };
    let parent = link_ref(ctx, "parent");
    let child_link = link_ref(ctx, "child");
    let (kind, (parent, parent_at), (child_name, _)) = (kind?, parent?, child_link?);
    if parent == child_name {
        ctx.error(
            parent_at,
            format!("{who} connects link '{parent}' to itself; expected two different links"),
        );
        return None;
    }
    Some(SdfJoint {
        name: name.value.to_string(),
        at: start(j),
        kind,
        parent,
        child: child_name,
        el: j,
    })
}

/// A user joint with its DOFs: `<axis>`/`<axis2>` `<limit>` lower/upper (as DART), velocity and
/// effort (which DART ignores; negative means unlimited in SDF).
fn user_joint(ctx: &mut Ctx, j: &SdfJoint) -> (Joint, Vec<Dof>) {
    let who = format!("joint '{}'", j.name);
    let axis_tags: &[&str] = match j.kind {
        JointKind::Revolute | JointKind::Prismatic => &["axis"],
        JointKind::Universal => &["axis", "axis2"],
        _ => &[],
    };
    let mut dofs = vec![Dof::unbounded(); j.kind.dof_count()];
    let mut axes = Vec::new();
    for (dof, tag) in dofs.iter_mut().zip(axis_tags) {
        let Some(axis) = child(j.el, tag) else {
            continue;
        };
        if let Some(xyz) = child(axis, "xyz").and_then(text) {
            let v: Vec<Option<f64>> = xyz.value.split_whitespace().map(c_number).collect();
            match v.as_slice() {
                [Some(x), Some(y), Some(z)] if Vector3::new(*x, *y, *z).norm() > 0.0 => {
                    axes.push(Unit::new_normalize(Vector3::new(*x, *y, *z)));
                }
                _ => ctx.error(
                    xyz.at,
                    format!(
                        "{who}: <{tag}><xyz> '{}' is not a direction; expected three numbers, not \
                         all zero",
                        xyz.value.trim()
                    ),
                ),
            }
        }
        let Some(limit) = child(axis, "limit") else {
            continue;
        };
        let value = |ctx: &mut Ctx, key: &str| -> Option<f64> {
            let el = child(limit, key)?;
            let t = text(el);
            let raw = t.map_or("", |t| t.value.trim());
            let parsed = c_number(raw);
            if parsed.is_none() {
                ctx.error(
                    t.map_or(start(el) + 1, |t| t.at),
                    format!("{who}: <{tag}><limit><{key}>: expected a number, found '{raw}'"),
                );
            }
            parsed
        };
        let lower = value(ctx, "lower");
        let upper = value(ctx, "upper");
        let velocity = value(ctx, "velocity");
        let effort = value(ctx, "effort");
        dof.position = Limits {
            lower: lower.unwrap_or(f64::NEG_INFINITY),
            upper: upper.unwrap_or(f64::INFINITY),
        };
        if dof.position.lower > dof.position.upper {
            ctx.error(
                start(limit) + 1,
                format!(
                    "{who}: lower limit {} is above upper limit {}; expected lower ≤ upper",
                    Num(dof.position.lower),
                    Num(dof.position.upper)
                ),
            );
        }
        dof.initial_position = crate::robot::world::initial_position(dof.position);
        if let Some(v) = velocity.filter(|v| *v >= 0.0) {
            dof.velocity = Limits::symmetric(v);
        }
        if let Some(e) = effort.filter(|e| *e >= 0.0) {
            dof.effort = Limits::symmetric(e);
        }
    }
    let (line, col) = ctx.line_col(j.at + 1);
    (
        Joint {
            name: j.name.clone(),
            kind: j.kind,
            actuator: Actuator::Force,
            parent: (j.parent != "world").then(|| j.parent.clone()),
            child: j.child.clone(),
            dofs: 0..0,
            transform: Isometry3::identity(),
            axes,
            line,
            col,
            mimic: None,
            command: None,
        },
        dofs,
    )
}

struct Builder {
    joints: Vec<Joint>,
    dofs: Vec<Dof>,
    dof_names: Names,
    joint_names: Names,
}

impl Builder {
    /// The free joint DART adds for `link`, which has no parent joint. DART renames the DOFs of
    /// the joints it adds itself as it likes: the user never wrote those names.
    fn push_free_root(&mut self, name: String, link: String, line: u32, col: u32) {
        let _ = self.push(
            Joint::world_root(name, JointKind::Free, link, line, col),
            vec![Dof::unbounded(); 6],
        );
    }

    /// A joint of the file; a joint or DOF name DART would rename is an error (`roots`: the free
    /// joints DART added so far, by name, with their link).
    fn push_user_joint(&mut self, ctx: &mut Ctx, j: &SdfJoint, roots: &HashMap<String, String>) {
        let (mut joint, dofs) = user_joint(ctx, j);
        let issued = self.joint_names.issue(&joint.name);
        if issued != joint.name {
            // Only a free joint DART added can hold the name (user names are unique).
            let link = roots.get(&joint.name).map_or("", String::as_str);
            ctx.error(
                j.at + 1,
                format!(
                    "joint name '{}' is already the name of the free joint DART adds for \
                     link '{link}', which has no parent joint (DART would rename this \
                     joint '{issued}'); expected another name (motions and drives refer \
                     to joints by name)",
                    joint.name
                ),
            );
        }
        joint.name = issued;
        for (base, issued, other) in self.push(joint, dofs) {
            ctx.error(
                j.at + 1,
                format!(
                    "joint '{}': its DOF name '{base}' is already the name of a DOF of \
                     joint '{other}' (DART would rename this one '{issued}'); expected \
                     joint names whose DOF names differ (motions and drives refer to DOFs \
                     by name)",
                    j.name
                ),
            );
        }
    }

    /// Appends a joint with its DOFs, named as DART names them. Returns, for a joint of the file,
    /// each DOF name DART would rename because an earlier DOF has it: (name, DART's new name,
    /// the earlier DOF's joint).
    fn push(&mut self, mut joint: Joint, dofs: Vec<Dof>) -> Vec<(String, String, String)> {
        let written = joint.kind != JointKind::Free;
        let mut renamed = Vec::new();
        let index = self.joints.len();
        let suffixes: &[&str] = match joint.kind {
            JointKind::Revolute | JointKind::Prismatic => &[""],
            JointKind::Universal => &["_1", "_2"],
            JointKind::Ball => &["_x", "_y", "_z"],
            JointKind::Free => &["_rot_x", "_rot_y", "_rot_z", "_pos_x", "_pos_y", "_pos_z"],
            _ => &[],
        };
        let first = self.dofs.len();
        for (dof, suffix) in dofs.into_iter().zip(suffixes) {
            let base = format!("{}{suffix}", joint.name);
            let name = self.dof_names.issue(&base);
            if written && name != base {
                let other = self
                    .dofs
                    .iter()
                    .find(|d| d.name == base)
                    .and_then(|d| self.joints.get(d.joint))
                    .map_or(String::new(), |j| j.name.clone());
                renamed.push((base, name.clone(), other));
            }
            self.dofs.push(Dof {
                name,
                joint: index,
                ..dof
            });
        }
        joint.dofs = first..self.dofs.len();
        self.joints.push(joint);
        renamed
    }
}
