//! PyODE's element rules: which children each element takes (anything else is its `ChildError`),
//! transparent `<group>`/`<jointgroup>`, pass-through children of links and axes, vectors, axis
//! parameters and transforms. Collects every body, joint and named element of the document.

use crate::diag::Num;
use std::collections::HashMap;

use roxmltree::{Document as Xml, Node};

use crate::robot::xml::{Ctx, attr, start};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum JointType {
    Hinge,
    Slider,
    Universal,
    Hinge2,
    Ball,
    Fixed,
    AMotor,
}

impl JointType {
    fn of(tag: &str) -> Option<JointType> {
        Some(match tag {
            "hinge" => JointType::Hinge,
            "slider" => JointType::Slider,
            "universal" => JointType::Universal,
            "hinge2" => JointType::Hinge2,
            "ball" => JointType::Ball,
            "fixed" => JointType::Fixed,
            "amotor" => JointType::AMotor,
            _ => return None,
        })
    }

    pub(super) fn tag(self) -> &'static str {
        match self {
            JointType::Hinge => "hinge",
            JointType::Slider => "slider",
            JointType::Universal => "universal",
            JointType::Hinge2 => "hinge2",
            JointType::Ball => "ball",
            JointType::Fixed => "fixed",
            JointType::AMotor => "amotor",
        }
    }

    /// How many `<axis>` elements PyODE requires.
    fn axes(self) -> std::ops::RangeInclusive<usize> {
        match self {
            JointType::Hinge | JointType::Slider => 1..=1,
            JointType::Universal | JointType::Hinge2 => 2..=2,
            JointType::Ball | JointType::Fixed => 0..=0,
            JointType::AMotor => 0..=3,
        }
    }

    fn children(self) -> &'static [&'static str] {
        match self {
            JointType::Hinge | JointType::Universal | JointType::Hinge2 => &["anchor", "axis"],
            JointType::Slider | JointType::AMotor => &["axis"],
            JointType::Ball => &["anchor"],
            JointType::Fixed => &[],
        }
    }
}

/// The position stops of one axis as declared (`None` = no stop or an infinite one).
#[derive(Debug, Clone, Copy)]
pub(super) struct Axis {
    pub(super) lo: Option<f64>,
    pub(super) hi: Option<f64>,
}

/// `body="…"` of a `<link1>`/`<link2>`.
pub(super) struct Link {
    pub(super) name: String,
    pub(super) at: usize,
}

pub(super) struct Joint {
    pub(super) name: Option<String>,
    pub(super) at: usize,
    pub(super) world: usize,
    /// The nearest enclosing `<body>`, by index into [`Document::bodies`].
    pub(super) enclosing: Option<usize>,
    pub(super) link1: Option<Link>,
    pub(super) link2: Option<Link>,
    pub(super) kind: JointType,
    pub(super) axes: Vec<Axis>,
}

pub(super) struct Body {
    pub(super) name: Option<String>,
    pub(super) world: usize,
    /// Index of its start tag among the bodies of its world (nested ones count).
    pub(super) index: usize,
}

/// The geom type elements PyODE builds (geom.py); `<cone>` it does not implement.
const GEOM_TYPES: &str = "box, cappedCylinder, cylinder, plane, ray, sphere, trimesh";

/// What a named element is, for link lookups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Named {
    Body(usize),
    /// A joint of the world with this index.
    Joint(usize),
    Geom,
    Mass,
    Space,
    World,
    Group,
}

impl Named {
    pub(super) fn tag(self) -> &'static str {
        match self {
            Named::Body(_) => "body",
            Named::Joint(_) => "joint",
            Named::Geom => "geom",
            Named::Mass => "mass",
            Named::Space => "space",
            Named::World => "world",
            Named::Group => "group",
        }
    }
}

pub(super) struct WorldDoc {
    pub(super) name: Option<String>,
}

#[derive(Default)]
pub(super) struct Document {
    pub(super) worlds: Vec<WorldDoc>,
    pub(super) bodies: Vec<Body>,
    /// In document order of their start tags, amotors included.
    pub(super) joints: Vec<Joint>,
    /// Every `name` in the document: what carries it and where.
    pub(super) names: HashMap<String, Vec<(Named, usize)>>,
}

pub(super) fn document(ctx: &mut Ctx, xml: &Xml) -> Option<Document> {
    let root = xml.root_element();
    if root.tag_name().name() != "xode" {
        ctx.error(
            start(root) + 1,
            format!(
                "root element <{}> is not XODE; expected <xode>",
                root.tag_name().name()
            ),
        );
        return None;
    }
    let mut r = Reader {
        ctx,
        doc: Document::default(),
        bodies: Vec::new(),
        world_bodies: 0,
    };
    for c in elements(root) {
        match c.tag_name().name() {
            "world" => r.world(c),
            "ext" => {}
            _ => r.child_error(c, "xode", "world, ext"),
        }
    }
    Some(r.doc)
}

fn elements<'a, 'i>(el: Node<'a, 'i>) -> impl Iterator<Item = Node<'a, 'i>> {
    el.children().filter(|c| c.is_element())
}

/// Where a check made at an element's end tag is reported (PyODE raises there).
fn end_tag(el: Node, text: &str) -> usize {
    let range = el.range();
    text.get(range.clone())
        .and_then(|s| s.rfind("</"))
        .map_or(range.start + 1, |i| range.start + i)
}

struct Reader<'c, 'x> {
    ctx: &'c mut Ctx<'x>,
    doc: Document,
    /// Enclosing `<body>` elements, innermost last.
    bodies: Vec<usize>,
    /// Bodies seen so far in the current world.
    world_bodies: usize,
}

impl Reader<'_, '_> {
    fn child_error(&mut self, c: Node, parent: &str, expected: &str) {
        self.ctx.error(
            start(c) + 1,
            format!(
                "<{}> is not a valid child of <{parent}>; expected {expected} (PyODE: ChildError)",
                c.tag_name().name()
            ),
        );
    }

    fn name(&mut self, el: Node, what: Named) -> Option<String> {
        let a = attr(el, "name")?;
        self.doc
            .names
            .entry(a.value.to_string())
            .or_default()
            .push((what, a.at));
        Some(a.value.to_string())
    }

    fn world(&mut self, el: Node) {
        let name = self.name(el, Named::World);
        self.doc.worlds.push(WorldDoc { name });
        self.world_bodies = 0;
        for c in elements(el) {
            match c.tag_name().name() {
                "transform" => self.transform(c),
                "space" => self.space(c),
                "ext" => {}
                _ => self.child_error(c, "world", "transform, space, ext"),
            }
        }
    }

    fn space(&mut self, el: Node) {
        self.name(el, Named::Space);
        self.space_children(el, "space");
    }

    /// Children of a `<space>`; `<group>` and `<jointgroup>` are transparent.
    fn space_children(&mut self, el: Node, parent: &str) {
        for c in elements(el) {
            match c.tag_name().name() {
                "transform" => self.transform(c),
                "geom" => self.geom(c),
                "body" => self.body(c),
                "joint" => self.joint(c),
                "group" | "jointgroup" => {
                    self.name(c, Named::Group);
                    self.space_children(c, parent);
                }
                "ext" => {}
                _ => self.child_error(
                    c,
                    parent,
                    "transform, geom, body, joint, group, jointgroup, ext",
                ),
            }
        }
    }

    fn body(&mut self, el: Node) {
        let index = self.doc.bodies.len();
        let name = self.name(el, Named::Body(index));
        self.doc.bodies.push(Body {
            name,
            world: self.doc.worlds.len().saturating_sub(1),
            index: self.world_bodies,
        });
        self.world_bodies += 1;
        if let Some(a) = attr(el, "enabled")
            && a.value != "true"
            && a.value != "false"
        {
            self.ctx.error(
                a.at,
                format!(
                    "<body> enabled: '{}' is not a boolean; expected \"true\" or \"false\"",
                    a.value
                ),
            );
        }
        if let Some(a) = attr(el, "gravitymode")
            && py_int(a.value).is_none()
        {
            self.ctx.error(
                a.at,
                format!(
                    "<body> gravitymode: expected an integer, found '{}'",
                    a.value
                ),
            );
        }
        self.bodies.push(index);
        for c in elements(el) {
            match c.tag_name().name() {
                "transform" => self.transform(c),
                "torque" | "force" | "linearVel" | "angularVel" => {
                    self.vector(c);
                }
                "finiteRotation" => self.finite_rotation(c),
                "mass" => self.mass(c),
                "joint" => self.joint(c),
                "body" => self.body(c),
                "geom" => self.geom(c),
                "ext" => {}
                _ => self.child_error(
                    c,
                    "body",
                    "transform, torque, force, linearVel, angularVel, finiteRotation, mass, \
                     joint, body, geom, ext",
                ),
            }
        }
        self.bodies.pop();
    }

    fn finite_rotation(&mut self, el: Node) {
        if let Some(a) = attr(el, "mode")
            && py_int(a.value).is_none()
        {
            self.ctx.error(
                a.at,
                format!(
                    "<finiteRotation> mode: expected an integer, found '{}'",
                    a.value
                ),
            );
        }
        self.numbers(el, &["xaxis", "yaxis", "zaxis"]);
    }

    /// Mass data is not part of the joint model, but PyODE's element rules hold (body.py,
    /// `Mass`): a `<mass>` takes `mass_struct` and `transform` (which pass their children on to
    /// the mass), `mass_shape` (content unchecked), `adjust` and nested masses.
    fn mass(&mut self, el: Node) {
        self.name(el, Named::Mass);
        self.mass_children(el);
    }

    fn mass_children(&mut self, el: Node) {
        for c in elements(el) {
            match c.tag_name().name() {
                "mass_struct" | "transform" => self.mass_children(c),
                "mass_shape" | "adjust" | "ext" => {}
                "mass" => self.mass(c),
                _ => self.child_error(
                    c,
                    "mass",
                    "mass_struct, mass_shape, transform, adjust, mass, ext",
                ),
            }
        }
    }

    /// Collision geometry is not part of the joint model, but PyODE's element rules hold
    /// (geom.py): a `<geom>` needs a type element (PyODE raises at its end tag without one), a
    /// type element takes nothing but `<ext>`, and a joint inside a geom crashes PyODE.
    fn geom(&mut self, el: Node) {
        self.name(el, Named::Geom);
        let mut typed = false;
        self.geom_children(el, &mut typed);
        if !typed {
            let at = end_tag(el, self.ctx.text);
            self.ctx.error(
                at,
                format!(
                    "<geom> has no geom type element; expected one of {GEOM_TYPES} (PyODE: No \
                     geom type element found)"
                ),
            );
        }
    }

    /// Children of a `<geom>`; `<jointgroup>` passes its children on to the geom.
    fn geom_children(&mut self, el: Node, typed: &mut bool) {
        for c in elements(el) {
            let tag = c.tag_name().name();
            match tag {
                "transform" => self.transform(c),
                "box" | "cappedCylinder" | "cylinder" | "plane" | "ray" | "sphere" => {
                    *typed = true;
                    for d in elements(c).filter(|d| d.tag_name().name() != "ext") {
                        self.child_error(d, tag, "ext");
                    }
                }
                "trimesh" => {
                    *typed = true;
                    self.trimesh_children(c);
                }
                "cone" => self.ctx.error(
                    start(c) + 1,
                    format!(
                        "<cone> geoms are not implemented by PyODE (NotImplementedError); \
                         expected one of {GEOM_TYPES}"
                    ),
                ),
                "geom" => self.geom(c),
                "body" => self.body(c),
                "joint" => self.ctx.error(
                    start(c) + 1,
                    "<joint> inside <geom>: a joint belongs in a <space> or a <body> (PyODE \
                     crashes on this)",
                ),
                "jointgroup" => self.geom_children(c, typed),
                "ext" => {}
                _ => self.child_error(
                    c,
                    "geom",
                    &format!("transform, {GEOM_TYPES}, geom, body, jointgroup, ext"),
                ),
            }
        }
    }

    /// A `<trimesh>` takes vertices, triangles, `v` and `t`; each passes its children on to the
    /// trimesh (geom.py, `_parseTriMesh`).
    fn trimesh_children(&mut self, el: Node) {
        for c in elements(el) {
            match c.tag_name().name() {
                "vertices" | "triangles" | "v" | "t" => self.trimesh_children(c),
                "ext" => {}
                _ => self.child_error(c, "trimesh", "vertices, triangles, v, t, ext"),
            }
        }
    }

    fn transform(&mut self, el: Node) {
        if let Some(a) = attr(el, "scale")
            && py_float(a.value).is_none()
        {
            self.ctx.error(
                a.at,
                format!("<transform> scale: expected a number, found '{}'", a.value),
            );
        }
        self.transform_children(el);
    }

    /// `<rotation>` passes its children to the transform, as in PyODE.
    fn transform_children(&mut self, el: Node) {
        for c in elements(el) {
            match c.tag_name().name() {
                "matrix4f" => {
                    let keys: Vec<String> = (0..4)
                        .flat_map(|i| (0..4).map(move |j| format!("m{i}{j}")))
                        .collect();
                    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
                    self.numbers(c, &keys);
                }
                "position" | "euler" => {
                    self.vector(c);
                }
                "quaternion" => self.numbers(c, &["x", "y", "z", "w"]),
                "axisangle" => self.numbers(c, &["x", "y", "z", "angle"]),
                "rotation" => self.transform_children(c),
                "ext" => {}
                _ => self.child_error(
                    c,
                    "transform",
                    "matrix4f, position, rotation, euler, quaternion, axisangle",
                ),
            }
        }
    }

    fn joint(&mut self, el: Node) {
        let world = self.doc.worlds.len().saturating_sub(1);
        let name = self.name(el, Named::Joint(world));
        let mut joint = Joint {
            name,
            at: start(el),
            world,
            enclosing: self.bodies.last().copied(),
            link1: None,
            link2: None,
            kind: JointType::Fixed,
            axes: Vec::new(),
        };
        let mut typed = false;
        self.joint_children(el, &mut joint, &mut typed);
        if !typed {
            let at = end_tag(el, self.ctx.text);
            self.ctx.error(
                at,
                "<joint> has no joint type element; expected one of hinge, slider, universal, \
                 hinge2, ball, fixed, amotor",
            );
            return;
        }
        self.doc.joints.push(joint);
    }

    fn joint_children(&mut self, el: Node, joint: &mut Joint, typed: &mut bool) {
        for c in elements(el) {
            let tag = c.tag_name().name();
            match tag {
                "link1" | "link2" => {
                    if *typed {
                        self.ctx.error(
                            start(c) + 1,
                            format!(
                                "<{tag}> after the joint type element is ignored by PyODE; \
                                 expected the links before <{}>",
                                joint.kind.tag()
                            ),
                        );
                    }
                    match attr(c, "body") {
                        Some(a) => {
                            let link = Some(Link {
                                name: a.value.to_string(),
                                at: a.at,
                            });
                            if tag == "link1" {
                                joint.link1 = link;
                            } else {
                                joint.link2 = link;
                            }
                        }
                        None => self.ctx.error(
                            start(c) + 1,
                            format!("<{tag}> has no body attribute; expected <{tag} body=\"…\"/>"),
                        ),
                    }
                    // PyODE hands a link's children to the joint.
                    self.joint_children(c, joint, typed);
                }
                "ext" => {}
                _ => match JointType::of(tag) {
                    Some(kind) => {
                        if *typed {
                            self.ctx.error(
                                start(c) + 1,
                                format!(
                                    "a second joint type element <{tag}> (the first is <{}>); \
                                     expected one per <joint>",
                                    joint.kind.tag()
                                ),
                            );
                            continue;
                        }
                        *typed = true;
                        joint.kind = kind;
                        let mut axes = Vec::new();
                        self.type_children(c, kind, &mut axes);
                        if !kind.axes().contains(&axes.len()) {
                            let at = end_tag(c, self.ctx.text);
                            let want = kind.axes();
                            self.ctx.error(
                                at,
                                format!(
                                    "wrong number of axes for {tag} joint: {} <axis>; expected {}",
                                    axes.len(),
                                    if want.start() == want.end() {
                                        want.start().to_string()
                                    } else {
                                        format!("{} to {}", want.start(), want.end())
                                    }
                                ),
                            );
                        }
                        joint.axes = axes;
                    }
                    None => self.child_error(
                        c,
                        "joint",
                        "link1, link2, ext and one of hinge, slider, universal, hinge2, ball, \
                         fixed, amotor",
                    ),
                },
            }
        }
    }

    /// Children of a joint type element; an axis's or anchor's children pass through to it.
    fn type_children(&mut self, el: Node, kind: JointType, axes: &mut Vec<Axis>) {
        for c in elements(el) {
            let tag = c.tag_name().name();
            if tag == "ext" {
                continue;
            }
            if !kind.children().contains(&tag) {
                let expected = match kind.children() {
                    [] => "no child elements".to_string(),
                    list => list.join(", "),
                };
                self.child_error(c, kind.tag(), &expected);
                continue;
            }
            self.vector(c);
            if tag == "axis" {
                // A bad parameter is reported; the axis still counts.
                axes.push(self.axis_params(c).unwrap_or(Axis { lo: None, hi: None }));
            }
            self.type_children(c, kind, axes);
        }
    }

    /// The attributes of an `<axis>` besides x, y, z: PyODE's exact list, stops read as limits.
    fn axis_params(&mut self, el: Node) -> Option<Axis> {
        const PARAMS: [&str; 12] = [
            "LoStop",
            "LowStop",
            "HiStop",
            "Vel",
            "FMax",
            "FudgeFactor",
            "Bounce",
            "CFM",
            "StopERP",
            "StopCFM",
            "SuspensionERP",
            "SuspensionCFM",
        ];
        let mut ok = true;
        let mut values: HashMap<&str, (f64, usize)> = HashMap::new();
        for a in el.attributes() {
            let key = a.name();
            if matches!(key, "x" | "y" | "z") {
                continue;
            }
            let at = a.range_value().start;
            let Some(key) = PARAMS.iter().find(|p| **p == key) else {
                self.ctx.error(
                    a.range().start,
                    format!(
                        "invalid attribute '{key}' of <axis>; expected x, y, z, {} (names are \
                         case-sensitive; stops are in radians or length units, no aformat)",
                        PARAMS.join(", ")
                    ),
                );
                ok = false;
                continue;
            };
            match py_float(a.value()) {
                Some(v) if v.is_nan() && matches!(*key, "LoStop" | "LowStop" | "HiStop") => {
                    self.ctx.error(
                        at,
                        format!("<axis> {key}: NaN is not a stop; expected a number"),
                    );
                    ok = false;
                }
                Some(v) => {
                    values.insert(key, (v, at));
                }
                None => {
                    self.ctx.error(
                        at,
                        format!("<axis> {key}: expected a number, found '{}'", a.value()),
                    );
                    ok = false;
                }
            }
        }
        if let (Some(_), Some((_, at))) = (values.get("LowStop"), values.get("LoStop")) {
            self.ctx.error(
                *at,
                "<axis> has both LowStop and LoStop; expected one of them (PyODE would silently \
                 use LowStop)",
            );
            ok = false;
        }
        let stop = |v: Option<&(f64, usize)>| v.map(|s| s.0).filter(|x| x.is_finite());
        let lo = stop(values.get("LowStop").or(values.get("LoStop")));
        let hi = stop(values.get("HiStop"));
        if let (Some(l), Some(h)) = (lo, hi)
            && l > h
        {
            let at = values.get("HiStop").map_or(start(el), |s| s.1);
            self.ctx.error(
                at,
                format!(
                    "<axis> low stop {} is above high stop {}; expected low ≤ high",
                    Num(l),
                    Num(h)
                ),
            );
            ok = false;
        }
        ok.then_some(Axis { lo, hi })
    }

    /// `x`, `y` and `z`, all required numbers (PyODE's `parseVector`).
    fn vector(&mut self, el: Node) {
        self.numbers(el, &["x", "y", "z"]);
    }

    /// Every attribute of `keys` must be present and a number.
    fn numbers(&mut self, el: Node, keys: &[&str]) {
        let tag = el.tag_name().name();
        let missing: Vec<&str> = keys
            .iter()
            .copied()
            .filter(|k| el.attribute(*k).is_none())
            .collect();
        if !missing.is_empty() {
            self.ctx.error(
                start(el) + 1,
                format!(
                    "<{tag}> has no {} attribute; expected {}",
                    missing.join(", "),
                    keys.join(", ")
                ),
            );
        }
        for key in keys {
            if let Some(a) = attr(el, key)
                && py_float(a.value).is_none()
            {
                self.ctx.error(
                    a.at,
                    format!("<{tag}> {key}: expected a number, found '{}'", a.value),
                );
            }
        }
    }
}

/// Python's `float()`: surrounding whitespace, a sign, `inf`/`infinity`/`nan` in any case, digits
/// with single underscores between them, an optional fraction and exponent.
pub(super) fn py_float(s: &str) -> Option<f64> {
    let t = s.trim();
    let (sign, body) = match t.as_bytes().first() {
        Some(b'-') => (-1.0, &t[1..]),
        Some(b'+') => (1.0, &t[1..]),
        _ => (1.0, t),
    };
    let lower = body.to_ascii_lowercase();
    if lower == "inf" || lower == "infinity" {
        return Some(sign * f64::INFINITY);
    }
    if lower == "nan" {
        return Some(f64::NAN);
    }
    let b = body.as_bytes();
    let mut i = 0;
    let digits = |i: &mut usize| -> Option<usize> {
        let begin = *i;
        let mut last_digit = false;
        while let Some(&c) = b.get(*i) {
            if c.is_ascii_digit() {
                last_digit = true;
            } else if c == b'_' && last_digit && b.get(*i + 1).is_some_and(u8::is_ascii_digit) {
                last_digit = false;
            } else {
                break;
            }
            *i += 1;
        }
        Some(*i - begin)
    };
    let int = digits(&mut i)?;
    let mut frac = 0;
    if b.get(i) == Some(&b'.') {
        i += 1;
        frac = digits(&mut i)?;
    }
    if int + frac == 0 {
        return None;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if digits(&mut i)? == 0 {
            return None;
        }
    }
    if i != b.len() {
        return None;
    }
    let clean: String = body.chars().filter(|c| *c != '_').collect();
    clean.parse::<f64>().ok().map(|x| sign * x)
}

/// Python's `int()` on a string.
fn py_int(s: &str) -> Option<i64> {
    let t = s.trim();
    let digits = t.strip_prefix(['+', '-']).unwrap_or(t);
    (!digits.is_empty() && digits.bytes().all(|c| c.is_ascii_digit() || c == b'_'))
        .then(|| t.replace('_', "").parse().ok())
        .flatten()
}
