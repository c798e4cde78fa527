//! Which commanded DOF each JointDisplacement column drives.

use std::fmt;

use super::JointSet;
use crate::robot::Actuator;

/// Column `c` of the motion drives `JointSet::dofs[columns[c]]`. DOFs no column names hold their
/// initial position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnMap {
    columns: Vec<usize>,
}

/// One problem with a mapping; `column` is the 0-based position in the `joints:` list, so a file
/// reader can point at the offending line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MappingError {
    #[error("joint `{name}` (column {column}) is not a DOF the robot commands{hint}")]
    Unknown {
        column: usize,
        name: String,
        /// Closest commanded DOF name, as `; did you mean …?`, or empty.
        hint: String,
    },
    #[error(
        "joint `{name}` (column {column}) is locked: it holds its initial position and cannot follow a motion"
    )]
    Locked { column: usize, name: String },
    #[error(
        "joint `{name}` (column {column}) mimics `{leader}`: it follows its leader and cannot have a column of its own"
    )]
    Mimic {
        column: usize,
        name: String,
        leader: String,
    },
    #[error("joint `{name}` is listed twice: columns {first} and {column}")]
    Duplicate {
        column: usize,
        first: usize,
        name: String,
    },
    #[error(
        "the joint list names {names} joints but the motion has {num_parts} columns (numParts)"
    )]
    Count { names: usize, num_parts: usize },
}

impl MappingError {
    /// The `joints:` entry the problem is about, if it is about one.
    pub fn column(&self) -> Option<usize> {
        match self {
            MappingError::Unknown { column, .. }
            | MappingError::Locked { column, .. }
            | MappingError::Mimic { column, .. }
            | MappingError::Duplicate { column, .. } => Some(*column),
            MappingError::Count { .. } => None,
        }
    }
}

/// Every problem found with one mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappingErrors(pub Vec<MappingError>);

impl fmt::Display for MappingErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for MappingErrors {}

impl ColumnMap {
    /// Maps the columns by the names of a `joints:` list.
    pub fn by_name<S: AsRef<str>>(
        joints: &JointSet,
        names: &[S],
        num_parts: usize,
    ) -> Result<ColumnMap, MappingErrors> {
        let mut errors = Vec::new();
        let mut columns = Vec::with_capacity(names.len());
        for (column, name) in names.iter().enumerate() {
            let name = name.as_ref();
            if let Some(first) = names[..column].iter().position(|n| n.as_ref() == name) {
                errors.push(MappingError::Duplicate {
                    column,
                    first,
                    name: name.to_string(),
                });
                continue;
            }
            match joints.index_of(name) {
                Some(i) if joints.dofs[i].actuator == Actuator::Locked => {
                    errors.push(MappingError::Locked {
                        column,
                        name: name.to_string(),
                    })
                }
                Some(i) if let Some(m) = &joints.dofs[i].mimic => {
                    errors.push(MappingError::Mimic {
                        column,
                        name: name.to_string(),
                        leader: joints.dofs[m.leader].name.clone(),
                    })
                }
                Some(i) => columns.push(i),
                None => errors.push(MappingError::Unknown {
                    column,
                    name: name.to_string(),
                    hint: closest(joints, name)
                        .map(|n| format!("; did you mean `{n}`?"))
                        .unwrap_or_default(),
                }),
            }
        }
        if names.len() != num_parts {
            errors.push(MappingError::Count {
                names: names.len(),
                num_parts,
            });
        }
        if errors.is_empty() {
            Ok(ColumnMap { columns })
        } else {
            Err(MappingErrors(errors))
        }
    }

    /// Without a `joints:` list: the driven (not locked) DOFs in DOF index order. Callers warn that
    /// this is a guess, as a robot's DOF order often differs from its motion files' column order.
    pub fn in_dof_order(joints: &JointSet, num_parts: usize) -> Result<ColumnMap, MappingErrors> {
        let columns: Vec<usize> = joints.driven().map(|(i, _)| i).collect();
        if columns.len() != num_parts {
            return Err(MappingErrors(vec![MappingError::Count {
                names: columns.len(),
                num_parts,
            }]));
        }
        Ok(ColumnMap { columns })
    }

    /// Column `c` drives `JointSet::dofs[columns()[c]]`.
    pub fn columns(&self) -> &[usize] {
        &self.columns
    }

    pub fn len(&self) -> usize {
        self.columns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.columns.is_empty()
    }

    /// The DOF names of the columns, in column order.
    pub fn names<'a>(&'a self, joints: &'a JointSet) -> impl Iterator<Item = &'a str> + 'a {
        self.columns
            .iter()
            .filter_map(|&i| joints.dofs.get(i).map(|d| d.name.as_str()))
    }
}

/// The commanded DOF whose name is nearest (edit distance ≤ 3) — typos in joint lists are common.
fn closest<'a>(joints: &'a JointSet, name: &str) -> Option<&'a str> {
    joints
        .dofs
        .iter()
        .map(|d| (strsim::levenshtein(&d.name, name), d.name.as_str()))
        .filter(|(d, _)| *d <= 3)
        .min_by_key(|(d, _)| *d)
        .map(|(_, n)| n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trajectory::tests::demo_joints;

    #[test]
    fn maps_by_name_in_any_order() {
        let joints = demo_joints();
        let map = ColumnMap::by_name(&joints, &["elbow_pitch", "base_yaw"], 2).unwrap();
        assert_eq!(map.columns(), &[2, 0]);
        assert_eq!(
            map.names(&joints).collect::<Vec<_>>(),
            ["elbow_pitch", "base_yaw"]
        );
    }

    #[test]
    fn reports_every_problem_together() {
        let joints = demo_joints();
        let err = ColumnMap::by_name(
            &joints,
            &["base_yaw", "elbow_pich", "base_yaw", "tool_spring", "brake"],
            4,
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("`elbow_pich` (column 1) is not a DOF the robot commands; did you mean `elbow_pitch`?"), "{text}");
        assert!(
            text.contains("`base_yaw` is listed twice: columns 0 and 2"),
            "{text}"
        );
        assert!(
            text.contains("`tool_spring` (column 3) is not a DOF"),
            "{text}"
        );
        assert!(text.contains("`brake` (column 4) is locked"), "{text}");
        assert!(
            text.contains("names 5 joints but the motion has 4 columns"),
            "{text}"
        );
        assert_eq!(err.0.len(), 5);
    }

    #[test]
    fn dof_order_skips_locked_and_checks_the_count() {
        let joints = demo_joints();
        let map = ColumnMap::in_dof_order(&joints, 6).unwrap();
        assert_eq!(map.columns(), &[0, 1, 2, 3, 4, 5]);
        assert!(ColumnMap::in_dof_order(&joints, 7).is_err());
    }
}
