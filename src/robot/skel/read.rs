//! First pass: XML elements → raw skeleton descriptions, with every value checked.
//!
//! This pass knows DART's element lookup rules (first occurrence wins, repeated children in document
//! order, unknown elements ignored) and its value syntax. Structure (parents, children, DOF order,
//! names) is `assemble`'s job.

use crate::diag::Num;
use std::fmt;
use std::path::Path;

use nalgebra::{Isometry3, Translation3, Unit, UnitQuaternion, Vector3};
use roxmltree::Node;

use crate::diag::{Diagnostic, Diagnostics, LineIndex};
use crate::robot::world::{Actuator, EulerOrder, JointKind, Limits, Plane};

/// Collects the diagnostics of one file.
pub(super) struct Ctx<'t> {
    pub(super) path: &'t Path,
    pub(super) lines: LineIndex<'t>,
    pub(super) diags: Vec<Diagnostic>,
}

impl<'t> Ctx<'t> {
    pub(super) fn new(text: &'t str, path: &'t Path) -> Self {
        Ctx {
            path,
            lines: LineIndex::new(text),
            diags: Vec::new(),
        }
    }

    pub(super) fn error(&mut self, at: usize, message: impl Into<String>) {
        let (line, col) = self.lines.line_col(at);
        self.diags
            .push(Diagnostic::new(self.path, line, col, message));
    }

    pub(super) fn into_error(self) -> super::Error {
        super::Error::Invalid(Diagnostics(self.diags).sorted())
    }

    pub(super) fn warn(&self, at: usize, message: &str) {
        let (line, col) = self.lines.line_col(at);
        tracing::warn!("{}:{line}:{col}: {message}", self.path.display());
    }
}

/// A `<body>`: only its name matters for the joint tree.
pub(super) struct RawBody {
    pub(super) name: String,
    pub(super) at: usize,
}

/// One DOF's settings before naming: limits and initial values after `init_*`, axis limits and
/// `<dof>` overrides are applied. The default is unbounded at 0 (`Limits`' default is unbounded).
#[derive(Debug, Clone, PartialEq, Default)]
pub(super) struct RawDof {
    /// Set by `<dof name=…>`: written by the user, so never renamed.
    pub(super) name: Option<String>,
    pub(super) position: Limits,
    pub(super) velocity: Limits,
    pub(super) acceleration: Limits,
    pub(super) effort: Limits,
    pub(super) initial_position: f64,
    pub(super) initial_velocity: f64,
}

/// A name with the offset of the text it came from.
pub(super) struct Located {
    pub(super) text: String,
    pub(super) at: usize,
}

pub(super) struct RawJoint {
    /// The `name` attribute; DART reads a missing one as `""`.
    pub(super) name: String,
    pub(super) at: usize,
    /// `None` when the type was missing or refused (already reported).
    pub(super) kind: Option<JointKind>,
    pub(super) actuator: Actuator,
    pub(super) parent: Option<Located>,
    pub(super) child: Option<Located>,
    pub(super) transform: Isometry3<f64>,
    pub(super) axes: Vec<Unit<Vector3<f64>>>,
    pub(super) dofs: Vec<RawDof>,
}

pub(super) struct RawSkeleton {
    pub(super) name: String,
    pub(super) at: usize,
    pub(super) transform: Isometry3<f64>,
    pub(super) bodies: Vec<RawBody>,
    pub(super) joints: Vec<RawJoint>,
}

const JOINT_TYPES: &str =
    "weld, revolute, prismatic, universal, ball, euler, translational, planar, free";
const ACTUATORS: &str = "force, passive, servo, acceleration, velocity, locked";
const AXIS_ELEMENTS: [&str; 3] = ["axis", "axis2", "axis3"];

pub(super) fn element<'a, 'i>(el: Node<'a, 'i>, name: &str) -> Option<Node<'a, 'i>> {
    el.children()
        .find(|c| c.is_element() && c.tag_name().name() == name)
}

pub(super) fn elements<'a, 'i: 'a>(
    el: Node<'a, 'i>,
    name: &'a str,
) -> impl Iterator<Item = Node<'a, 'i>> + 'a {
    el.children()
        .filter(move |c| c.is_element() && c.tag_name().name() == name)
}

/// Text of an element (its first child, as tinyxml2's `GetText`), where it starts, and whether byte
/// offsets inside it map one-to-one onto the file (no entities or CDATA).
struct Text<'a> {
    s: &'a str,
    at: usize,
    exact: bool,
}

fn text_of<'a>(el: Node<'a, '_>) -> Option<Text<'a>> {
    let node = el.first_child().filter(|n| n.is_text())?;
    let s = node.text()?;
    let range = node.range();
    Some(Text {
        s,
        at: range.start,
        exact: range.len() == s.len(),
    })
}

fn attribute_of<'a>(el: Node<'a, '_>, name: &str) -> Option<Text<'a>> {
    let attr = el.attribute_node(name)?;
    let range = attr.range_value();
    let s = attr.value();
    Some(Text {
        s,
        at: range.start,
        exact: range.len() == s.len(),
    })
}

/// Whitespace-separated tokens with their byte offsets (DART 6.20 accepts spaces and tabs).
fn tokens(s: &str) -> impl Iterator<Item = (usize, &str)> {
    let base = s.as_ptr() as usize;
    s.split(|c: char| c.is_ascii_whitespace())
        .filter(|t| !t.is_empty())
        .map(move |t| (t.as_ptr() as usize - base, t))
}

impl Text<'_> {
    fn offset(&self, within: usize) -> usize {
        if self.exact {
            self.at + within
        } else {
            self.at
        }
    }
}

/// Whether a number may be infinite: limits may (`inf` means unbounded), poses and values may not.
#[derive(Clone, Copy, PartialEq)]
enum Range {
    Finite,
    MayBeInfinite,
}

/// Names a value in messages; formatted only when there is a problem to report.
type What<'a> = &'a dyn fmt::Display;

impl Ctx<'_> {
    fn number(&mut self, tok: &str, at: usize, what: What, range: Range) -> Option<f64> {
        match tok.parse::<f64>() {
            Ok(v) if v.is_nan() => {
                self.error(at, format!("{what}: NaN is not allowed; expected a number"));
                None
            }
            Ok(v) if v.is_infinite() && range == Range::Finite => {
                self.error(
                    at,
                    format!("{what}: '{tok}' is not allowed here; expected a finite number"),
                );
                None
            }
            Ok(v) => Some(v),
            Err(_) => {
                self.error(at, format!("{what}: expected a number, found '{tok}'"));
                None
            }
        }
    }

    /// Exactly `out.len()` numbers into `out`; `false` (after reporting) on any problem.
    fn numbers(&mut self, text: &Text, out: &mut [f64], what: What, range: Range) -> bool {
        let found = tokens(text.s).count();
        if found != out.len() {
            let values = if found == 1 { "value" } else { "values" };
            self.error(
                text.at,
                format!("{what} has {found} {values}; expected {}", out.len()),
            );
            return false;
        }
        let mut ok = true;
        for ((off, tok), slot) in tokens(text.s).zip(out.iter_mut()) {
            match self.number(tok, text.offset(off), what, range) {
                Some(v) => *slot = v,
                None => ok = false,
            }
        }
        ok
    }

    fn element_numbers(&mut self, el: Node, out: &mut [f64], what: What, range: Range) -> bool {
        match text_of(el) {
            Some(t) => self.numbers(&t, out, what, range),
            None => {
                let expected = match out.len() {
                    1 => "a number".to_string(),
                    n => format!("{n} numbers"),
                };
                self.error(
                    el.range().start,
                    format!("{what} is empty; expected {expected}"),
                );
                false
            }
        }
    }

    fn scalar(&mut self, el: Node, what: What, range: Range) -> Option<f64> {
        let mut v = [0.0];
        self.element_numbers(el, &mut v, what, range)
            .then_some(v[0])
    }

    /// `<transformation>x y z a b c</transformation>` = Translation · Rx(a)·Ry(b)·Rz(c); identity when
    /// absent.
    fn transformation(&mut self, parent: Node, owner: What) -> Isometry3<f64> {
        let Some(el) = element(parent, "transformation") else {
            return Isometry3::identity();
        };
        if text_of(el).is_none() {
            return Isometry3::identity();
        }
        let mut v = [0.0; 6];
        let what = format_args!("<transformation> of {owner}");
        if !self.element_numbers(el, &mut v, &what, Range::Finite) {
            return Isometry3::identity();
        }
        let [x, y, z, a, b, c] = v;
        let rotation = UnitQuaternion::from_axis_angle(&Vector3::x_axis(), a)
            * UnitQuaternion::from_axis_angle(&Vector3::y_axis(), b)
            * UnitQuaternion::from_axis_angle(&Vector3::z_axis(), c);
        Isometry3::from_parts(Translation3::new(x, y, z), rotation)
    }

    /// A direction read from `<xyz>` under `el`, normalised (with a warning when it was not unit).
    fn direction(&mut self, el: Node, what: What) -> Option<Unit<Vector3<f64>>> {
        let Some(xyz) = element(el, "xyz") else {
            self.error(
                el.range().start,
                format!("{what} has no <xyz>; expected a direction such as <xyz>0 0 1</xyz>"),
            );
            return None;
        };
        let mut v = [0.0; 3];
        if !self.element_numbers(xyz, &mut v, &format_args!("<xyz> of {what}"), Range::Finite) {
            return None;
        }
        let v = Vector3::from(v);
        let norm = v.norm();
        match Unit::try_new(v, 1e-12) {
            None => {
                self.error(
                    xyz.range().start,
                    format!("<xyz> of {what} is the zero vector; expected a direction"),
                );
                None
            }
            Some(unit) => {
                if (norm - 1.0).abs() > 1e-9 {
                    self.warn(
                        xyz.range().start,
                        &format!("<xyz> of {what} has length {}; normalised", Num(norm)),
                    );
                }
                Some(unit)
            }
        }
    }
}

/// Reads the first `<world>` of a parsed document.
pub(super) fn world(ctx: &mut Ctx, doc: &roxmltree::Document) -> Vec<RawSkeleton> {
    let root = doc.root_element();
    if root.tag_name().name() != "skel" {
        ctx.error(
            root.range().start,
            format!(
                "root element is <{}>; expected <skel>",
                root.tag_name().name()
            ),
        );
        return Vec::new();
    }
    for stray in elements(root, "skeleton") {
        ctx.warn(
            stray.range().start,
            "<skeleton> directly under <skel> is ignored (only skeletons inside the first <world> are read)",
        );
    }
    let mut worlds = elements(root, "world");
    let Some(world) = worlds.next() else {
        ctx.error(
            root.range().start,
            "<skel> has no <world>; expected <world> with the skeletons",
        );
        return Vec::new();
    };
    for extra in worlds {
        ctx.warn(
            extra.range().start,
            "only the first <world> is read; this one is ignored",
        );
    }
    elements(world, "skeleton")
        .map(|s| skeleton(ctx, s))
        .collect()
}

fn skeleton(ctx: &mut Ctx, el: Node) -> RawSkeleton {
    let name = el.attribute("name").unwrap_or_default().to_string();
    let transform = ctx.transformation(el, &format_args!("skeleton '{name}'"));
    let bodies = elements(el, "body")
        .map(|b| {
            let name = b.attribute("name").unwrap_or_default().to_string();
            // Only validated: body poses are not part of the playback model.
            ctx.transformation(b, &format_args!("body '{name}'"));
            RawBody {
                name,
                at: b.range().start,
            }
        })
        .collect();
    let joints = elements(el, "joint").map(|j| joint(ctx, j)).collect();
    RawSkeleton {
        name,
        at: el.range().start,
        transform,
        bodies,
        joints,
    }
}

fn joint(ctx: &mut Ctx, el: Node) -> RawJoint {
    let at = el.range().start;
    let name = match el.attribute("name") {
        Some(n) => n.to_string(),
        None => {
            ctx.warn(at, "<joint> has no name attribute; DART names it 'default'");
            String::new()
        }
    };
    let who = format!("joint '{name}'");
    let kind = joint_kind(ctx, el, &who);
    let actuator = actuator(ctx, el, &who);
    let parent = body_ref(ctx, el, "parent", &who);
    let child = body_ref(ctx, el, "child", &who);
    let transform = ctx.transformation(el, &who);

    let mut axes = Vec::new();
    let mut dofs = Vec::new();
    if let Some(kind) = kind {
        axes = joint_axes(ctx, el, kind, &who);
        dofs = vec![RawDof::default(); kind.dof_count()];
        let mut limit_at = vec![[[0usize; 2]; 4]; dofs.len()];
        initial_values(ctx, el, kind, &who, &mut dofs);
        axis_limits(ctx, el, kind, &who, &mut dofs, &mut limit_at);
        dof_elements(ctx, el, kind, &who, &mut dofs, &mut limit_at);
        check_limits(ctx, &who, &dofs, &limit_at, at);
    }
    RawJoint {
        name,
        at,
        kind,
        actuator,
        parent,
        child,
        transform,
        axes,
        dofs,
    }
}

fn joint_kind(ctx: &mut Ctx, el: Node, who: &str) -> Option<JointKind> {
    let Some(ty) = attribute_of(el, "type") else {
        ctx.error(
            el.range().start,
            format!("{who} has no type attribute; expected one of {JOINT_TYPES}"),
        );
        return None;
    };
    let kind = match ty.s {
        "weld" => JointKind::Weld,
        "revolute" => JointKind::Revolute,
        "prismatic" => JointKind::Prismatic,
        "universal" => JointKind::Universal,
        "ball" => JointKind::Ball,
        "translational" => JointKind::Translational,
        "free" => JointKind::Free,
        "euler" => JointKind::Euler(euler_order(ctx, el, who)?),
        "planar" => JointKind::Planar(plane(ctx, el, who)?),
        "screw" | "translational2d" => {
            ctx.error(
                ty.at,
                format!(
                    "{who} has type '{}', which DART reads but cannot build (it drops the rest of \
                     the skeleton and crashes); expected one of {JOINT_TYPES}",
                    ty.s
                ),
            );
            return None;
        }
        other => {
            ctx.error(
                ty.at,
                format!("{who} has unknown type '{other}'; expected one of {JOINT_TYPES}"),
            );
            return None;
        }
    };
    Some(kind)
}

fn euler_order(ctx: &mut Ctx, el: Node, who: &str) -> Option<EulerOrder> {
    let Some(order) = element(el, "axis_order") else {
        ctx.error(
            el.range().start,
            format!(
                "euler {who} has no <axis_order>; expected <axis_order>xyz</axis_order> or zyx"
            ),
        );
        return None;
    };
    match text_of(order).map(|t| t.s.trim()) {
        Some("xyz") => Some(EulerOrder::Xyz),
        Some("zyx") => Some(EulerOrder::Zyx),
        other => {
            ctx.error(
                order.range().start,
                format!(
                    "euler {who} has axis_order '{}'; expected xyz or zyx",
                    other.unwrap_or_default()
                ),
            );
            None
        }
    }
}

fn plane(ctx: &mut Ctx, el: Node, who: &str) -> Option<Plane> {
    let Some(plane) = element(el, "plane") else {
        ctx.warn(
            el.range().start,
            &format!("planar {who} has no <plane>; the xy plane is used, as in DART"),
        );
        return Some(Plane::Xy);
    };
    let ty = attribute_of(plane, "type");
    match ty.as_ref().map(|t| t.s.trim()) {
        Some("xy") => Some(Plane::Xy),
        Some("yz") => Some(Plane::Yz),
        Some("zx") => Some(Plane::Zx),
        Some("arbitrary") => Some(Plane::Arbitrary),
        other => {
            let at = ty.as_ref().map_or(plane.range().start, |t| t.at);
            let found = other.map_or("no type attribute".to_string(), |t| format!("type '{t}'"));
            ctx.error(
                at,
                format!("<plane> of planar {who} has {found}; expected xy, yz, zx or arbitrary"),
            );
            None
        }
    }
}

fn actuator(ctx: &mut Ctx, el: Node, who: &str) -> Actuator {
    let Some(a) = attribute_of(el, "actuator") else {
        return Actuator::Force;
    };
    match a.s {
        // `torque` is the original SKEL spec's name for force control.
        "force" | "torque" => Actuator::Force,
        "passive" => Actuator::Passive,
        "servo" => Actuator::Servo,
        "acceleration" => Actuator::Acceleration,
        "velocity" => Actuator::Velocity,
        "locked" => Actuator::Locked,
        "mimic" => {
            ctx.error(
                a.at,
                format!(
                    "{who} has actuator 'mimic', which SKEL cannot express (no mimicked joint); \
                     expected one of {ACTUATORS}"
                ),
            );
            Actuator::Force
        }
        other => {
            ctx.error(
                a.at,
                format!("{who} has unknown actuator '{other}'; expected one of {ACTUATORS}"),
            );
            Actuator::Force
        }
    }
}

/// `<parent>` or `<child>`: a body name, compared exactly (DART does not trim names).
fn body_ref(ctx: &mut Ctx, el: Node, tag: &str, who: &str) -> Option<Located> {
    let expected = if tag == "parent" {
        "a body name or world"
    } else {
        "a body name"
    };
    let Some(r) = element(el, tag) else {
        ctx.error(
            el.range().start,
            format!("{who} has no <{tag}>; expected <{tag}> with {expected}"),
        );
        return None;
    };
    match text_of(r) {
        Some(t) if !t.s.is_empty() => Some(Located {
            text: t.s.to_string(),
            at: t.at,
        }),
        _ => {
            ctx.error(
                r.range().start,
                format!("<{tag}> of {who} is empty; expected {expected}"),
            );
            None
        }
    }
}

/// The axes the joint type reads: revolute/prismatic `<axis>`, universal `<axis>`+`<axis2>`, and for
/// planar joints the two translation directions of the plane.
fn joint_axes(ctx: &mut Ctx, el: Node, kind: JointKind, who: &str) -> Vec<Unit<Vector3<f64>>> {
    let required = match kind {
        JointKind::Revolute | JointKind::Prismatic => &AXIS_ELEMENTS[..1],
        JointKind::Universal => &AXIS_ELEMENTS[..2],
        JointKind::Planar(plane) => {
            return planar_axes(ctx, el, plane, who);
        }
        _ => &[],
    };
    required_axes(ctx, el, required, &format!("{} {who}", kind.as_str()), who)
}

/// `<tag><xyz>x y z</xyz></tag>` under `el` for each tag, all required; `owner` names `el` in
/// messages.
fn required_axes(
    ctx: &mut Ctx,
    el: Node,
    tags: &[&str],
    owner: &str,
    who: &str,
) -> Vec<Unit<Vector3<f64>>> {
    let mut axes = Vec::with_capacity(tags.len());
    for &tag in tags {
        match element(el, tag) {
            Some(axis) => axes.extend(ctx.direction(axis, &format_args!("<{tag}> of {who}"))),
            None => ctx.error(
                el.range().start,
                format!("{owner} has no <{tag}>; expected <{tag}><xyz>x y z</xyz></{tag}>"),
            ),
        }
    }
    axes
}

fn planar_axes(ctx: &mut Ctx, el: Node, plane: Plane, who: &str) -> Vec<Unit<Vector3<f64>>> {
    let (x, y, z) = (Vector3::x_axis(), Vector3::y_axis(), Vector3::z_axis());
    match plane {
        Plane::Xy => vec![x, y],
        Plane::Yz => vec![y, z],
        Plane::Zx => vec![z, x],
        Plane::Arbitrary => {
            let Some(plane_el) = element(el, "plane") else {
                return Vec::new();
            };
            let axes = required_axes(
                ctx,
                plane_el,
                &["translation_axis1", "translation_axis2"],
                &format!("arbitrary <plane> of {who}"),
                who,
            );
            if let [a, b] = axes.as_slice()
                && a.cross(b).norm() < 1e-9
            {
                ctx.error(
                    plane_el.range().start,
                    format!("the translation axes of {who} are parallel; expected two directions spanning a plane"),
                );
            }
            axes
        }
    }
}

/// `<init_pos>`/`<init_vel>`: one value per DOF (DART reads past the end of its buffer otherwise).
fn initial_values(ctx: &mut Ctx, el: Node, kind: JointKind, who: &str, dofs: &mut [RawDof]) {
    if kind == JointKind::Weld {
        return;
    }
    for tag in ["init_pos", "init_vel"] {
        let Some(init) = element(el, tag) else {
            continue;
        };
        let what = format_args!("<{tag}> of {} {who}", kind.as_str());
        let Some(t) = text_of(init) else {
            ctx.error(
                init.range().start,
                format!("{what} is empty; expected {} numbers", dofs.len()),
            );
            continue;
        };
        let n = tokens(t.s).count();
        if n != dofs.len() {
            ctx.error(
                t.at,
                format!(
                    "{what} has {n} value{}; expected {} (one per DOF)",
                    if n == 1 { "" } else { "s" },
                    dofs.len()
                ),
            );
            continue;
        }
        let mut values = [0.0; 6];
        let Some(values) = values.get_mut(..n) else {
            continue;
        };
        if !ctx.numbers(&t, values, &what, Range::Finite) {
            continue;
        }
        for (dof, &v) in dofs.iter_mut().zip(values.iter()) {
            if tag == "init_pos" {
                dof.initial_position = v;
            } else {
                dof.initial_velocity = v;
            }
        }
    }
}

/// Position limits from `<axis{,2,3}><limit><lower|upper>`, for as many axes as the type reads.
fn axis_limits(
    ctx: &mut Ctx,
    el: Node,
    kind: JointKind,
    who: &str,
    dofs: &mut [RawDof],
    limit_at: &mut [LimitSources],
) {
    let n_axes = match kind {
        JointKind::Revolute | JointKind::Prismatic => 1,
        JointKind::Universal => 2,
        JointKind::Euler(_) | JointKind::Translational | JointKind::Planar(_) => 3,
        JointKind::Weld | JointKind::Ball | JointKind::Free => 0,
    };
    for (i, tag) in AXIS_ELEMENTS.iter().take(n_axes).enumerate() {
        let Some(limit) = element(el, tag).and_then(|a| element(a, "limit")) else {
            continue;
        };
        let (Some(dof), Some(at)) = (dofs.get_mut(i), limit_at.get_mut(i)) else {
            continue;
        };
        for (side, bound) in ["lower", "upper"].into_iter().enumerate() {
            let Some(b) = element(limit, bound) else {
                continue;
            };
            let what = format_args!("<{tag}><limit><{bound}> of {who}");
            if let Some(v) = ctx.scalar(b, &what, Range::MayBeInfinite) {
                if side == 0 {
                    dof.position.lower = v;
                } else {
                    dof.position.upper = v;
                }
                at[0][side] = b.range().start;
            }
        }
    }
}

/// Where each bound of a DOF's position, velocity, acceleration and effort limits was written
/// (0 = not written), so a bad interval is reported where it was set.
type LimitSources = [[usize; 2]; 4];

/// Which limit of a DOF a `<dof>` child sets.
const DOF_CHILDREN: [&str; 4] = ["position", "velocity", "acceleration", "force"];

/// `<dof local_index=… name=…>` with `<position|velocity|acceleration|force lower upper initial>`;
/// several `<dof>` for one index merge attribute by attribute, later ones winning.
fn dof_elements(
    ctx: &mut Ctx,
    el: Node,
    kind: JointKind,
    who: &str,
    dofs: &mut [RawDof],
    limit_at: &mut [LimitSources],
) {
    let n = dofs.len();
    for dof_el in elements(el, "dof") {
        let index = match attribute_of(dof_el, "local_index") {
            None if n == 1 => 0,
            None => {
                ctx.error(
                    dof_el.range().start,
                    format!(
                        "<dof> of {} {who} has no local_index; expected local_index in 0..={}",
                        kind.as_str(),
                        n.saturating_sub(1)
                    ),
                );
                continue;
            }
            Some(t) => match t.s.trim().parse::<usize>() {
                Ok(i) if i < n => i,
                _ => {
                    let expected = if n == 0 {
                        format!("no <dof> (a {} joint has no DOFs)", kind.as_str())
                    } else {
                        format!("local_index in 0..={}", n - 1)
                    };
                    ctx.error(
                        t.at,
                        format!(
                            "<dof> of {who} has local_index '{}'; expected {expected}",
                            t.s
                        ),
                    );
                    continue;
                }
            },
        };
        let (Some(dof), Some(at)) = (dofs.get_mut(index), limit_at.get_mut(index)) else {
            continue;
        };
        if let Some(name) = attribute_of(dof_el, "name") {
            if name.s.is_empty() {
                ctx.error(
                    name.at,
                    format!("<dof> {index} of {who} has an empty name; expected a DOF name"),
                );
            } else {
                dof.name = Some(name.s.to_string());
            }
        }
        for tag in DOF_CHILDREN {
            let Some(child) = element(dof_el, tag) else {
                continue;
            };
            let what = |attr| Label {
                attr,
                tag,
                index,
                who,
            };
            let (limits, sources) = match tag {
                "position" => (&mut dof.position, &mut at[0]),
                "velocity" => (&mut dof.velocity, &mut at[1]),
                "acceleration" => (&mut dof.acceleration, &mut at[2]),
                _ => (&mut dof.effort, &mut at[3]),
            };
            for (side, attr) in ["lower", "upper"].into_iter().enumerate() {
                let Some(t) = attribute_of(child, attr) else {
                    continue;
                };
                let mut v = [0.0];
                if !ctx.numbers(&t, &mut v, &what(attr), Range::MayBeInfinite) {
                    continue;
                }
                let [v] = v;
                if side == 0 {
                    limits.lower = v;
                } else {
                    limits.upper = v;
                }
                sources[side] = t.at;
            }
            // `initial` on acceleration/force sets DART's initial command, not part of this model.
            if (tag == "position" || tag == "velocity")
                && let Some(t) = attribute_of(child, "initial")
                && let mut v = [0.0]
                && ctx.numbers(&t, &mut v, &what("initial"), Range::Finite)
            {
                let [v] = v;
                if tag == "position" {
                    dof.initial_position = v;
                } else {
                    dof.initial_velocity = v;
                }
            }
        }
    }
}

/// "lower of <velocity> in <dof> 0 of joint 'j'", formatted only for a message.
struct Label<'a> {
    attr: &'a str,
    tag: &'a str,
    index: usize,
    who: &'a str,
}

impl fmt::Display for Label<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Label {
            attr,
            tag,
            index,
            who,
        } = self;
        write!(f, "{attr} of <{tag}> in <dof> {index} of {who}")
    }
}

/// Every interval must admit a value: lower ≤ upper, lower ≠ +inf, upper ≠ −inf.
fn check_limits(ctx: &mut Ctx, who: &str, dofs: &[RawDof], limit_at: &[LimitSources], at: usize) {
    for (i, (dof, sources)) in dofs.iter().zip(limit_at).enumerate() {
        for ((what, l), [lower_at, upper_at]) in [
            ("position", dof.position),
            ("velocity", dof.velocity),
            ("acceleration", dof.acceleration),
            ("effort", dof.effort),
        ]
        .into_iter()
        .zip(*sources)
        {
            let empty =
                l.lower > l.upper || l.lower == f64::INFINITY || l.upper == f64::NEG_INFINITY;
            if empty {
                // The bound written last is the likelier mistake; 0 means "not written".
                let written = lower_at.max(upper_at);
                ctx.error(
                    if written == 0 { at } else { written },
                    format!(
                        "{what} limits of DOF {i} of {who} are [{}, {}]; expected lower <= upper",
                        Num(l.lower),
                        Num(l.upper)
                    ),
                );
            } else if what == "position" && !l.contains(dof.initial_position) {
                ctx.warn(
                    at,
                    &format!(
                        "initial position {} of DOF {i} of {who} is outside its limits [{}, {}]",
                        Num(dof.initial_position),
                        Num(l.lower),
                        Num(l.upper)
                    ),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::LineIndex;

    proptest! {
        /// Lines and columns as roxmltree counts them: 1-based, columns in characters.
        #[test]
        fn line_col_counts_lines_and_characters(text in "(a|é|\n|\t|<|€){0,60}", at in 0usize..200) {
            let index = LineIndex::new(&text);
            let mut offset = at.min(text.len());
            while !text.is_char_boundary(offset) {
                offset -= 1;
            }
            let before = &text[..offset];
            let line = before.matches('\n').count() + 1;
            let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            prop_assert_eq!(index.line_col(offset), (line as u32, col as u32));
        }
    }
}
