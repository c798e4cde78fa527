//! The problems of one configuration file as they are found, each placed at its key or value
//! (or where the robot model wrote a value it filled in).

use std::collections::HashMap;
use std::path::Path;

use super::{Locations, Origin, Pos};
use crate::diag::Diagnostic;

/// Collects the problems of one file.
pub(super) struct Problems<'a> {
    pub(super) path: &'a Path,
    pub(super) locations: Locations,
    /// Keys the robot model filled in: their problems are placed where the model wrote them.
    pub(super) origins: HashMap<String, Origin>,
    pub(super) found: Vec<Diagnostic>,
    /// Sections that did not deserialize: they hold defaults, so rules that need a value the
    /// file did give (robot.model, buses) are not checked again.
    pub(super) failed: Vec<String>,
    /// Unknown keys and values of the wrong type reported (and left out of validation), as key
    /// paths.
    pub(super) unknown: Vec<String>,
}

impl Problems<'_> {
    pub(super) fn section_failed(&self, name: &str) -> bool {
        self.failed.iter().any(|f| f == name)
    }

    /// Whether an unknown key was reported directly under `parent`: then a key found missing
    /// there is most likely that one misspelled, and is not reported a second time.
    pub(super) fn unknown_under(&self, parent: &str) -> bool {
        self.unknown
            .iter()
            .any(|k| k.rsplit_once('.').is_some_and(|(up, _)| up == parent))
    }

    /// A problem with the value of `key`; the message is prefixed with the key path.
    pub(super) fn value(&mut self, key: &str, message: impl std::fmt::Display) {
        if let Some(origin) = self.origins.get(key) {
            self.found.push(origin.diagnostic(key, message));
            return;
        }
        let pos = self.locations.value(key);
        self.push(pos, key, message);
    }

    /// Reports `key` missing, unless its value was already reported (and left out) for its type.
    pub(super) fn missing(&mut self, key: &str, message: impl std::fmt::Display) {
        if !self.unknown.iter().any(|k| k == key) {
            self.key(key, message);
        }
    }

    /// A problem with the key itself (unknown, misplaced).
    pub(super) fn key(&mut self, key: &str, message: impl std::fmt::Display) {
        let pos = self.locations.key(key);
        self.push(pos, key, message);
    }

    pub(super) fn push(&mut self, pos: Pos, key: &str, message: impl std::fmt::Display) {
        let message = if key.is_empty() {
            message.to_string()
        } else {
            format!("{key}: {message}")
        };
        self.found
            .push(Diagnostic::new(self.path, pos.line, pos.col, message));
    }
}
