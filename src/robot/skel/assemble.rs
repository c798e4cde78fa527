//! Second pass: raw skeletons → [`Skeleton`]s, built the way DART builds them.
//!
//! Resolves `<parent>`/`<child>`, refuses what DART would hang or crash on (unknown bodies, a second
//! joint for one child, cycles, bodies no joint reaches), then creates joints in DART's order: file
//! order, except that a joint whose parent body is not built yet first pulls in its ancestors, and a
//! parent body that is nobody's child gets an implicit free joint `root`. Names go through DART's
//! NameManager rules: names DART makes up are renamed `x(1)`, `x(2)`, … on collision; names the user
//! wrote are never changed, so a collision there is an error.

use std::collections::HashMap;

use super::read::{Ctx, RawBody, RawDof, RawJoint, RawSkeleton};
use crate::robot::world::{Dof, Joint, JointKind, Skeleton};

/// DART's NameManager: the taken names, each with the index of what took it (for messages).
#[derive(Default)]
struct Names {
    taken: HashMap<String, usize>,
}

impl Names {
    /// `base` if free, else `base(1)`, `base(2)`, … as DART's NameManager issues them.
    fn issue(&mut self, base: &str, origin: usize) -> String {
        let mut name = base.to_string();
        let mut n = 1u64;
        while self.taken.contains_key(&name) {
            name = format!("{base}({n})");
            n += 1;
        }
        self.taken.insert(name.clone(), origin);
        name
    }

    fn origin(&self, name: &str) -> Option<usize> {
        self.taken.get(name).copied()
    }
}

/// Assembles every skeleton; skeleton names are renamed as DART's World renames them.
pub(super) fn world(ctx: &mut Ctx, raw: Vec<RawSkeleton>) -> Vec<Skeleton> {
    let mut names = Names::default();
    raw.into_iter()
        .filter_map(|s| {
            let base = if s.name.is_empty() {
                "skeleton"
            } else {
                s.name.as_str()
            };
            let name = names.issue(base, 0);
            let at = s.at;
            let built = skeleton(ctx, s, name);
            if built.is_none() && ctx.diags.is_empty() {
                // Never drop a skeleton silently.
                ctx.error(at, "skeleton could not be assembled");
            }
            built
        })
        .collect()
}

/// A joint's resolved parent (`None` = the world) and child body indices.
#[derive(Clone, Copy)]
struct Link {
    parent: Option<usize>,
    child: usize,
}

fn skeleton(ctx: &mut Ctx, raw: RawSkeleton, name: String) -> Option<Skeleton> {
    let RawSkeleton {
        at: _,
        transform,
        bodies,
        joints,
        name: _,
    } = raw;
    let body_index = index_bodies(ctx, &bodies, &name);
    // `world` names the world unless a body is literally called that.
    let world_is_body = body_index.contains_key("world");
    if let Some(body) = body_index.get("world").and_then(|&b| bodies.get(b)) {
        ctx.warn(
            body.at,
            "a body named 'world': <parent>world</parent> means this body, not the world (as in DART)",
        );
    }
    let tree = Tree {
        bodies: &bodies,
        joints: &joints,
        body_index,
        world_is_body,
        name: &name,
    };
    // Unresolved joints make reachability and order meaningless; their errors are reported.
    let (links, joint_of_child) = tree.link(ctx)?;
    let mut ok = tree.check_attached(ctx, &links, &joint_of_child);
    let body_names: Vec<&str> = bodies.iter().map(|b| b.name.as_str()).collect();
    ok &= report_cycles(ctx, &joints, &links, &joint_of_child, &body_names);
    if !ok {
        return None;
    }
    let b = tree.build(ctx, &links, &joint_of_child)?;
    Some(Skeleton {
        name,
        transform,
        joints: b.joints,
        dofs: b.dofs,
    })
}

/// Body name → index of its first body; a repeated name is reported.
fn index_bodies<'a>(ctx: &mut Ctx, bodies: &'a [RawBody], name: &str) -> HashMap<&'a str, usize> {
    let mut body_index: HashMap<&str, usize> = HashMap::with_capacity(bodies.len());
    for (i, body) in bodies.iter().enumerate() {
        if let Some(&first) = body_index.get(body.name.as_str()) {
            let line = bodies.get(first).map_or(0, |b| ctx.lines.line_col(b.at).0);
            ctx.error(
                body.at,
                format!(
                    "duplicate body name '{}' in skeleton '{name}' (first at line {line}); \
                     expected unique body names",
                    body.name
                ),
            );
        } else {
            body_index.insert(&body.name, i);
        }
    }
    body_index
}

/// One skeleton's bodies and joints as read, while they are resolved into a tree.
struct Tree<'a> {
    bodies: &'a [RawBody],
    joints: &'a [RawJoint],
    body_index: HashMap<&'a str, usize>,
    world_is_body: bool,
    name: &'a str,
}

impl Tree<'_> {
    /// Each joint's parent and child bodies, and each body's joint; `None` when a joint could not
    /// be resolved (reported).
    fn link(&self, ctx: &mut Ctx) -> Option<(Vec<Link>, Vec<Option<usize>>)> {
        let (bodies, joints, body_index, world_is_body, name) = (
            self.bodies,
            self.joints,
            &self.body_index,
            self.world_is_body,
            self.name,
        );
        let mut links: Vec<Option<Link>> = Vec::with_capacity(joints.len());
        let mut joint_of_child: Vec<Option<usize>> = vec![None; bodies.len()];
        for (j, joint) in joints.iter().enumerate() {
            let child = joint.child.as_ref().and_then(|c| {
                let found = body_index.get(c.text.as_str()).copied();
                if found.is_none() {
                    ctx.error(
                    c.at,
                    format!(
                        "child '{}' of joint '{}' is not a body of skeleton '{name}'; expected the \
                         name of a <body>",
                        c.text, joint.name
                    ),
                );
                }
                found
            });
            let parent = joint.parent.as_ref().and_then(|p| {
                if p.text == "world" && !world_is_body {
                    return Some(None);
                }
                let found = body_index.get(p.text.as_str()).copied();
                if found.is_none() {
                    ctx.error(
                    p.at,
                    format!(
                        "parent '{}' of joint '{}' is not a body of skeleton '{name}'; expected \
                         the name of a <body> or world",
                        p.text, joint.name
                    ),
                );
                }
                found.map(Some)
            });
            let mut link = None;
            if let Some(c) = child {
                match joint_of_child.get(c).copied().flatten() {
                    Some(first) => {
                        let first = joints.get(first);
                        let line = first.map_or(0, |f| ctx.lines.line_col(f.at).0);
                        ctx.error(
                            joint.at,
                            format!(
                                "body '{}' already has parent joint '{}' (line {line}); a body has \
                             exactly one parent joint",
                                bodies.get(c).map_or("", |b| b.name.as_str()),
                                first.map_or("", |f| f.name.as_str()),
                            ),
                        );
                    }
                    None => {
                        if let Some(slot) = joint_of_child.get_mut(c) {
                            *slot = Some(j);
                        }
                        link = parent.map(|parent| Link { parent, child: c });
                    }
                }
            }
            links.push(link);
        }
        if links.iter().any(Option::is_none) {
            return None;
        }
        Some((links.into_iter().flatten().collect(), joint_of_child))
    }

    /// Every body is some joint's child or parent (else reported; DART drops it and may crash).
    fn check_attached(
        &self,
        ctx: &mut Ctx,
        links: &[Link],
        joint_of_child: &[Option<usize>],
    ) -> bool {
        let (bodies, body_index) = (self.bodies, &self.body_index);
        let mut ok = true;
        let mut is_parent = vec![false; bodies.len()];
        for l in links {
            if let Some(slot) = l.parent.and_then(|p| is_parent.get_mut(p)) {
                *slot = true;
            }
        }
        for (b, body) in bodies.iter().enumerate() {
            if body_index.get(body.name.as_str()) != Some(&b) {
                continue; // a duplicate, already reported
            }
            let has_joint = joint_of_child.get(b).copied().flatten().is_some();
            let parent_of_some = is_parent.get(b).copied().unwrap_or(false);
            if !has_joint && !parent_of_some {
                ok = false;
                ctx.error(
                body.at,
                format!(
                    "body '{}' is attached by no joint (DART drops it and may crash); expected a \
                     <joint> with <child>{}</child>",
                    body.name, body.name
                ),
            );
            } else if !has_joint {
                ctx.warn(
                body.at,
                &format!(
                    "body '{}' is a parent but nobody's child; DART gives it a free joint 'root'",
                    body.name
                ),
            );
            }
        }
        ok
    }

    /// The joints and DOFs in DART's creation order, named by DART's rules.
    fn build(
        &self,
        ctx: &mut Ctx,
        links: &[Link],
        joint_of_child: &[Option<usize>],
    ) -> Option<Builder> {
        let (bodies, joints, name) = (self.bodies, self.joints, self.name);
        let mut b = Builder {
            joints: Vec::with_capacity(joints.len()),
            implicit: Vec::with_capacity(joints.len()),
            dofs: Vec::new(),
            joint_names: Names::default(),
            dof_names: Names::default(),
        };
        let Some(steps) = creation_order(links, joint_of_child, bodies.len()) else {
            // Unreachable after the cycle check; refuse rather than guess an order.
            let at = joints.first().map_or(0, |j| j.at);
            ctx.error(at, format!("cannot order the joints of skeleton '{name}'"));
            return None;
        };
        for step in steps {
            match step {
                Step::Root(body) => {
                    if let Some(body) = bodies.get(body) {
                        b.add_root(ctx, &body.name, body.at);
                    }
                }
                Step::Joint(j) => {
                    if let (Some(joint), Some(link)) = (joints.get(j), links.get(j)) {
                        let parent = link
                            .parent
                            .and_then(|p| bodies.get(p))
                            .map(|p| p.name.clone());
                        b.add_user(ctx, joint, parent);
                    }
                }
            }
        }

        Some(b)
    }
}

/// One step of DART's assembly: the implicit free joint of a body, or a joint of the file.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Step {
    Root(usize),
    Joint(usize),
}

/// DART's assembly loop (SkelParser L1032-1074): take the first joint not built yet; while its
/// parent body is not built, switch to the joint whose child that body is, or give the body an
/// implicit free joint when it has none; build, and start again from the first joint not built.
///
/// Starting again walks the same chain and stops one joint lower each time, so DART builds the
/// whole chain top-down; doing that directly gives the same order in linear rather than quadratic
/// time. `None` if the links are not a forest.
fn creation_order(
    links: &[Link],
    joint_of_child: &[Option<usize>],
    n_bodies: usize,
) -> Option<Vec<Step>> {
    let mut steps = Vec::with_capacity(links.len() + 1);
    let mut built = vec![false; n_bodies];
    let mut done = vec![false; links.len()];
    let mut chain = Vec::new();
    for first in 0..links.len() {
        if *done.get(first)? {
            continue;
        }
        chain.clear();
        let mut it = first;
        loop {
            chain.push(it);
            match links.get(it)?.parent {
                Some(p) if !*built.get(p)? => match joint_of_child.get(p).copied().flatten() {
                    // A chain longer than the joint count has a cycle.
                    Some(j) if chain.len() <= links.len() => it = j,
                    Some(_) => return None,
                    None => {
                        steps.push(Step::Root(p));
                        *built.get_mut(p)? = true;
                        break;
                    }
                },
                _ => break,
            }
        }
        for &j in chain.iter().rev() {
            steps.push(Step::Joint(j));
            *built.get_mut(links.get(j)?.child)? = true;
            *done.get_mut(j)? = true;
        }
    }
    Some(steps)
}

/// Follows each body's parent chain; reports every cycle once, at its first joint in the file.
fn report_cycles(
    ctx: &mut Ctx,
    joints: &[RawJoint],
    links: &[Link],
    joint_of_child: &[Option<usize>],
    body_names: &[&str],
) -> bool {
    const UNSEEN: u8 = 0;
    const ON_PATH: u8 = 1;
    const DONE: u8 = 2;
    let mut state = vec![UNSEEN; body_names.len()];
    let mut ok = true;
    let mut path = Vec::new();
    for start in 0..body_names.len() {
        path.clear();
        let mut b = start;
        loop {
            match state.get(b).copied() {
                Some(UNSEEN) => {}
                Some(ON_PATH) => {
                    let from = path.iter().position(|&x| x == b).unwrap_or(0);
                    let cycle = path.get(from..).unwrap_or_default();
                    report_cycle(ctx, joints, joint_of_child, body_names, cycle);
                    ok = false;
                    break;
                }
                _ => break,
            }
            if let Some(s) = state.get_mut(b) {
                *s = ON_PATH;
            }
            path.push(b);
            let parent = joint_of_child
                .get(b)
                .copied()
                .flatten()
                .and_then(|j| links.get(j))
                .and_then(|l| l.parent);
            match parent {
                Some(p) => b = p,
                None => break,
            }
        }
        for &x in &path {
            if let Some(s) = state.get_mut(x) {
                *s = DONE;
            }
        }
    }
    ok
}

fn report_cycle(
    ctx: &mut Ctx,
    joints: &[RawJoint],
    joint_of_child: &[Option<usize>],
    body_names: &[&str],
    cycle: &[usize],
) {
    let mut in_cycle: Vec<usize> = cycle
        .iter()
        .filter_map(|&b| joint_of_child.get(b).copied().flatten())
        .collect();
    in_cycle.sort_unstable();
    let Some(first) = in_cycle.first().and_then(|&j| joints.get(j)) else {
        return;
    };
    let message = if let [only] = cycle {
        format!(
            "joint '{}' has body '{}' as both parent and child; expected a tree hanging from the world",
            first.name,
            body_names.get(*only).copied().unwrap_or_default()
        )
    } else {
        let names: Vec<String> = in_cycle
            .iter()
            .filter_map(|&j| joints.get(j))
            .map(|j| format!("'{}'", j.name))
            .collect();
        let bodies: Vec<String> = cycle
            .iter()
            .map(|&b| format!("'{}'", body_names.get(b).copied().unwrap_or_default()))
            .collect();
        format!(
            "joints {} form a cycle through bodies {}; expected a tree hanging from the world",
            names.join(", "),
            bodies.join(", ")
        )
    };
    ctx.error(first.at, message);
}

/// Builds joints and DOFs in creation order, naming them as DART does.
struct Builder {
    joints: Vec<Joint>,
    /// Parallel to `joints`: the free joints DART adds, which the user never wrote.
    implicit: Vec<bool>,
    dofs: Vec<Dof>,
    joint_names: Names,
    dof_names: Names,
}

/// DART's NameManager turns an empty name into this.
const DEFAULT_NAME: &str = "default";

impl Builder {
    /// The free joint DART adds for a parent body that has no joint of its own.
    fn add_root(&mut self, ctx: &mut Ctx, body: &str, at: usize) {
        let (line, col) = ctx.lines.line_col(at);
        let name = self.joint_names.issue("root", self.joints.len());
        let dofs = vec![RawDof::default(); JointKind::Free.dof_count()];
        self.push(
            ctx,
            Joint::world_root(name, JointKind::Free, body.to_string(), line, col),
            &dofs,
            at,
        );
        self.implicit.push(true);
    }

    fn add_user(&mut self, ctx: &mut Ctx, raw: &RawJoint, parent: Option<String>) {
        let (line, col) = ctx.lines.line_col(raw.at);
        let index = self.joints.len();
        let name = if raw.name.is_empty() {
            self.joint_names.issue(DEFAULT_NAME, index)
        } else {
            if let Some(first) = self.joint_names.origin(&raw.name) {
                let first = self.describe_joint(first);
                ctx.error(
                    raw.at,
                    format!(
                        "joint name '{}' is already used by {first}; expected unique joint names \
                         (motions and drives refer to joints by name)",
                        raw.name
                    ),
                );
            }
            self.joint_names.taken.insert(raw.name.clone(), index);
            raw.name.clone()
        };
        let joint = Joint {
            name,
            // A refused type was reported; 0 DOFs lets the rest be checked.
            kind: raw.kind.unwrap_or(JointKind::Weld),
            actuator: raw.actuator,
            parent,
            child: raw
                .child
                .as_ref()
                .map(|c| c.text.clone())
                .unwrap_or_default(),
            dofs: 0..0,
            transform: raw.transform,
            axes: raw.axes.clone(),
            line,
            col,
            mimic: None,
            command: None,
        };
        self.push(ctx, joint, &raw.dofs, raw.at);
        self.implicit.push(false);
    }

    fn describe_joint(&self, index: usize) -> String {
        match (self.joints.get(index), self.implicit.get(index)) {
            (Some(j), Some(true)) => format!(
                "the free joint DART adds for body '{}' (line {})",
                j.child, j.line
            ),
            (Some(j), _) => format!("the joint at line {}", j.line),
            (None, _) => "another joint".to_string(),
        }
    }

    /// `current` is the joint being built, whose DOFs are not in `joints` yet.
    fn describe_dof(&self, index: usize, current: &Joint) -> String {
        let Some(dof) = self.dofs.get(index) else {
            return "another DOF".to_string();
        };
        let joint = self.joints.get(dof.joint).unwrap_or(current);
        format!(
            "DOF {} of joint '{}'",
            index.saturating_sub(joint.dofs.start),
            joint.name
        )
    }

    fn push(&mut self, ctx: &mut Ctx, mut joint: Joint, raw_dofs: &[RawDof], at: usize) {
        let index = self.joints.len();
        let start = self.dofs.len();
        joint.dofs = start..start;
        for (raw, suffix) in raw_dofs.iter().zip(joint.kind.dof_suffixes()) {
            let origin = self.dofs.len();
            let name = match (&raw.name, suffix) {
                (Some(explicit), _) => {
                    if let Some(first) = self.dof_names.origin(explicit) {
                        let first = self.describe_dof(first, &joint);
                        ctx.error(
                            at,
                            format!(
                                "DOF name '{explicit}' of joint '{}' is already used by {first}; \
                                 expected unique DOF names",
                                joint.name
                            ),
                        );
                    }
                    self.dof_names.taken.insert(explicit.clone(), origin);
                    explicit.clone()
                }
                (None, Some(suffix)) => self
                    .dof_names
                    .issue(&format!("{}{suffix}", joint.name), origin),
                (None, None) => self.dof_names.issue(DEFAULT_NAME, origin),
            };
            self.dofs.push(Dof {
                name,
                joint: index,
                position: raw.position,
                velocity: raw.velocity,
                acceleration: raw.acceleration,
                effort: raw.effort,
                initial_position: raw.initial_position,
                initial_velocity: raw.initial_velocity,
            });
        }
        joint.dofs = start..self.dofs.len();
        self.joints.push(joint);
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// SkelParser's loop transcribed literally (quadratic on long chains): the reference for
    /// `creation_order`.
    fn dart_loop(links: &[Link], joint_of_child: &[Option<usize>], n_bodies: usize) -> Vec<Step> {
        let mut steps = Vec::new();
        let mut built = vec![false; n_bodies];
        let mut pending: Vec<usize> = (0..links.len()).collect();
        while let Some(&first) = pending.first() {
            let mut it = first;
            while let Some(p) = links[it].parent.filter(|&p| !built[p]) {
                match joint_of_child[p].filter(|j| pending.contains(j)) {
                    Some(j) => it = j,
                    None => {
                        steps.push(Step::Root(p));
                        built[p] = true;
                    }
                }
            }
            steps.push(Step::Joint(it));
            built[links[it].child] = true;
            pending.retain(|&j| j != it);
        }
        steps
    }

    proptest! {
        /// Random forests (some bodies without joints, which get implicit roots) in random file
        /// order: the linear walk builds exactly what DART's loop builds.
        #[test]
        fn creation_order_is_darts(
            parent_of in proptest::collection::vec((any::<prop::sample::Index>(), 0u8..4), 1..40),
            order in Just((0..40).collect::<Vec<usize>>()).prop_shuffle(),
        ) {
            let n = parent_of.len();
            // Body b's parent is an earlier body (an acyclic forest) or the world; body 0 and
            // bodies drawn with tag 0 have no joint of their own.
            let mut links = Vec::new();
            let mut joint_of_child = vec![None; n];
            for &b in order.iter().filter(|&&b| b < n) {
                let (index, tag) = parent_of[b];
                if b == 0 || tag == 0 {
                    continue;
                }
                let parent = if tag == 1 { None } else { Some(index.index(b)) };
                joint_of_child[b] = Some(links.len());
                links.push(Link { parent, child: b });
            }
            let ours = creation_order(&links, &joint_of_child, n);
            prop_assert_eq!(ours, Some(dart_loop(&links, &joint_of_child, n)));
        }
    }
}
