//! Joint maps: the `joints:` list naming the DOF of each .seq column (`--joint-map FILE`), e.g.
//!
//! ```yaml
//! joints: [RLEG_HIP_R, RLEG_HIP_P, RLEG_HIP_Y]
//! ```
//!
//! The same list as the configuration's `robot.joints`, for tools run without a configuration.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::Locations;
use crate::diag::{Diagnostic, Diagnostics};

/// A validated joint map: at least one name, every name non-empty and listed once.
#[derive(Debug, Clone, PartialEq)]
pub struct JointMap {
    pub path: PathBuf,
    /// DOF names of the .seq columns, in column order.
    pub joints: Vec<String>,
    locations: Locations,
}

/// Why a joint map could not be used: unreadable, or every problem found in it.
pub use crate::diag::FileError as Error;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    joints: Vec<String>,
}

impl JointMap {
    pub fn load(path: impl AsRef<Path>) -> Result<JointMap, Error> {
        let path = path.as_ref();
        let text = crate::file::read_to_string(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        JointMap::parse(&text, path)
    }

    /// Validates joint map text; `path` names it in diagnostics.
    pub fn parse(text: &str, path: &Path) -> Result<JointMap, Error> {
        if let Some(deep) = super::too_deeply_nested(text, path) {
            return Err(Error::Invalid(Diagnostics(vec![deep])));
        }
        let raw: Raw = serde_yaml::from_str(text).map_err(|err| {
            let (line, col) = err
                .location()
                .map(|l| (to_u32(l.line()), to_u32(l.column())))
                .unwrap_or((1, 1));
            let mut message = err.to_string();
            // The position is in the diagnostic; drop serde_yaml's prose copy of it.
            if let Some(cut) = message.find(" at line ") {
                message.truncate(cut);
            }
            Error::Invalid(Diagnostics(vec![Diagnostic::new(
                path,
                line.max(1),
                col.max(1),
                format!("{message} (expected `joints:` and a list of DOF names)"),
            )]))
        })?;
        let map = JointMap {
            path: path.to_path_buf(),
            joints: raw.joints,
            locations: Locations::index(text),
        };
        let mut problems = Vec::new();
        if map.joints.is_empty() {
            problems.push(map.diagnostic_at(
                "joints",
                "the list is empty; expected the DOF name of each .seq column",
            ));
        }
        for (i, name) in map.joints.iter().enumerate() {
            if name.trim().is_empty() {
                problems.push(map.diagnostic(i, "expected a DOF name, found an empty string"));
            } else if let Some(first) = map.joints[..i].iter().position(|n| n == name) {
                problems.push(map.diagnostic(
                    i,
                    format!("joint `{name}` is listed twice (first as joints[{first}])"),
                ));
            }
        }
        if problems.is_empty() {
            Ok(map)
        } else {
            Err(Error::Invalid(Diagnostics(problems).sorted()))
        }
    }

    /// A diagnostic at entry `column` of the list.
    pub fn diagnostic(&self, column: usize, message: impl std::fmt::Display) -> Diagnostic {
        self.diagnostic_at(&format!("joints[{column}]"), message)
    }

    /// A diagnostic at the value of `key` (`joints` for the list as a whole).
    pub fn diagnostic_at(&self, key: &str, message: impl std::fmt::Display) -> Diagnostic {
        let pos = self.locations.value(key);
        Diagnostic::new(&self.path, pos.line, pos.col, message.to_string())
    }
}

fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<JointMap, Error> {
        JointMap::parse(text, Path::new("map.yaml"))
    }

    fn errors(text: &str) -> String {
        match parse(text) {
            Err(Error::Invalid(d)) => d.to_string(),
            other => panic!("expected diagnostics, got {other:?}"),
        }
    }

    #[test]
    fn reads_block_and_flow_lists() {
        let map = parse("# columns\njoints:\n  - a\n  - b\n").unwrap();
        assert_eq!(map.joints, ["a", "b"]);
        assert_eq!(map.diagnostic(1, "x").to_string(), "map.yaml:4:5: x");
        assert_eq!(parse("joints: [a, b, c]").unwrap().joints.len(), 3);
    }

    #[test]
    fn rejects_unknown_keys_and_wrong_shapes_with_positions() {
        let text = errors("joints: [a]\nextra: 1\n");
        assert!(
            text.starts_with("map.yaml:2:1: unknown field `extra`"),
            "{text}"
        );
        let text = errors("joints: a\n");
        assert!(text.starts_with("map.yaml:1:9:"), "{text}");
        assert!(text.contains("expected `joints:`"), "{text}");
        let text = errors("names: [a]\n");
        assert!(text.contains("unknown field `names`"), "{text}");
    }

    #[test]
    fn reports_every_duplicate_and_empty_name() {
        let text = errors("joints:\n  - a\n  - ''\n  - a\n");
        assert_eq!(
            text,
            "map.yaml:3:5: expected a DOF name, found an empty string\n\
             map.yaml:4:5: joint `a` is listed twice (first as joints[0])"
        );
        assert!(errors("joints: []").contains("the list is empty"));
    }
}
