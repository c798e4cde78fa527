//! Mimic joints (URDF `<mimic>`): a follower is commanded `multiplier · leader + offset`.
//!
//! Followers get no motion column of their own. Before interpolation each follower gets a column
//! derived from its leader's samples; hold, linear, cubic and pchip are all affine-equivariant, so
//! interpolating that column equals `multiplier · q + offset` of the interpolated leader (velocity
//! and acceleration scaled by the multiplier), and the proof checks the follower against its own
//! limits like any other DOF.

use super::{ColumnMap, JointSet, JointSetError};
use crate::robot::{Actuator, Joint, World};

/// The leader a follower DOF is derived from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MimicOf {
    /// Index of the leader in [`JointSet::dofs`]; the leader is never a follower itself (chains
    /// are composed into one relation).
    pub leader: usize,
    pub multiplier: f64,
    pub offset: f64,
}

impl MimicOf {
    pub fn apply(&self, leader: f64) -> f64 {
        self.multiplier * leader + self.offset
    }
}

/// How motiond drives a joint's DOFs: a ros2_control command interface chooses; else DART's
/// actuator, except that a mimic follower takes position setpoints derived from its leader.
pub(super) fn drive_actuator(joint: &Joint) -> Actuator {
    match (joint.command, joint.actuator) {
        (Some(c), _) => c.actuator(),
        (None, Actuator::Mimic) => Actuator::Servo,
        (None, a) => a,
    }
}

/// Records each follower's leader, composing chains (a follows b follows c) into one relation.
pub(super) fn link(set: &mut JointSet, world: &World) -> Result<(), JointSetError> {
    // Per set entry: the direct leader relation from the model, by set index.
    let mut direct: Vec<Option<MimicOf>> = vec![None; set.dofs.len()];
    for (i, dof) in set.dofs.iter().enumerate() {
        let Some(skeleton) = world.skeletons.get(dof.skeleton) else {
            continue;
        };
        let Some(joint) = skeleton
            .dofs
            .get(dof.dof)
            .and_then(|d| skeleton.joints.get(d.joint))
        else {
            continue;
        };
        let Some(m) = &joint.mimic else { continue };
        let problem = |p: String| JointSetError::Mimic {
            name: joint.name.clone(),
            problem: p,
        };
        let leader = skeleton
            .joints
            .iter()
            .find(|j| j.name == m.joint)
            .ok_or_else(|| problem(format!("follows `{}`, which is not a joint", m.joint)))?;
        if joint.dofs.len() != 1 || leader.dofs.len() != 1 {
            return Err(problem(format!(
                "and its leader `{}` must have one DOF each (they have {} and {})",
                leader.name,
                joint.dofs.len(),
                leader.dofs.len()
            )));
        }
        let leader_index = set
            .dofs
            .iter()
            .position(|d| d.skeleton == dof.skeleton && d.dof == leader.dofs.start)
            .ok_or_else(|| {
                problem(format!(
                    "follows `{}`, which is not a commanded DOF (passive?)",
                    leader.name
                ))
            })?;
        direct[i] = Some(MimicOf {
            leader: leader_index,
            multiplier: m.multiplier,
            offset: m.offset,
        });
    }
    for i in 0..set.dofs.len() {
        let Some(mut rel) = direct[i] else { continue };
        let mut steps = 0;
        while let Some(next) = direct[rel.leader] {
            steps += 1;
            if steps > direct.len() {
                return Err(JointSetError::Mimic {
                    name: set.dofs[i].name.clone(),
                    problem: "is part of a mimic cycle: no joint in it is driven".to_string(),
                });
            }
            // a = m1·b + o1, b = m2·c + o2  ⇒  a = m1·m2·c + (m1·o2 + o1)
            rel = MimicOf {
                leader: next.leader,
                multiplier: rel.multiplier * next.multiplier,
                offset: rel.multiplier * next.offset + rel.offset,
            };
        }
        set.dofs[i].mimic = Some(rel);
    }
    Ok(())
}

/// Appends one column per follower to the motion's `values` (row-major, `map.len()` columns):
/// its leader's column mapped through the relation, or the constant the held leader gives.
/// Returns the extended column list (set indices) and values; unchanged when there is no follower.
pub(super) fn extend(
    joints: &JointSet,
    map: &ColumnMap,
    values: Vec<f64>,
) -> (Vec<usize>, Vec<f64>) {
    let columns = map.columns();
    let followers: Vec<(usize, MimicOf)> = joints
        .dofs
        .iter()
        .enumerate()
        .filter_map(|(i, d)| d.mimic.map(|m| (i, m)))
        .collect();
    if followers.is_empty() || columns.is_empty() {
        return (columns.to_vec(), values);
    }
    let cols = columns.len();
    let sources: Vec<Option<usize>> = followers
        .iter()
        .map(|(_, m)| columns.iter().position(|&c| c == m.leader))
        .collect();
    let mut out = Vec::with_capacity(values.len() / cols * (cols + followers.len()));
    for row in values.chunks_exact(cols) {
        out.extend_from_slice(row);
        for ((_, m), source) in followers.iter().zip(&sources) {
            let leader = match source {
                Some(c) => row[*c],
                None => joints.dofs[m.leader].initial_position,
            };
            out.push(m.apply(leader));
        }
    }
    let mut all = columns.to_vec();
    all.extend(followers.iter().map(|(i, _)| *i));
    (all, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::robot::Limits;
    use crate::trajectory::{DofLimits, JointSet};

    fn set(n: usize) -> JointSet {
        JointSet::uniform(
            n,
            DofLimits {
                position: Limits::UNBOUNDED,
                velocity: Limits::UNBOUNDED,
                acceleration: Limits::UNBOUNDED,
                effort: Limits::UNBOUNDED,
            },
        )
    }

    #[test]
    fn followers_get_their_leaders_column_mapped() {
        let mut joints = set(3);
        joints.dofs[2].mimic = Some(MimicOf {
            leader: 0,
            multiplier: -2.0,
            offset: 0.5,
        });
        joints.dofs[1].initial_position = 0.25;
        let map = ColumnMap::by_name(&joints, &["c0", "c1"], 2).unwrap();
        let (columns, values) = extend(&joints, &map, vec![1.0, 3.0, 2.0, 4.0]);
        assert_eq!(columns, vec![0, 1, 2]);
        assert_eq!(values, vec![1.0, 3.0, -1.5, 2.0, 4.0, -3.5]);
    }

    #[test]
    fn a_follower_of_a_held_leader_holds_the_mapped_initial_position() {
        let mut joints = set(3);
        joints.dofs[0].initial_position = 0.25;
        joints.dofs[2].mimic = Some(MimicOf {
            leader: 0,
            multiplier: 2.0,
            offset: 1.0,
        });
        let map = ColumnMap::by_name(&joints, &["c1"], 1).unwrap();
        let (columns, values) = extend(&joints, &map, vec![7.0, 8.0]);
        assert_eq!(columns, vec![1, 2]);
        assert_eq!(values, vec![7.0, 1.5, 8.0, 1.5]);
    }
}
