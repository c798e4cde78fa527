//! Positioned diagnostics shared by the file readers (`skel`, `seq`, `config`).
//!
//! Every problem in an input file is reported as `FILE:LINE:COL: message`, and a reader collects all
//! the problems of a file before it gives up, so an operator can fix them in one pass.

use std::fmt;
use std::path::{Path, PathBuf};

/// One problem at one place in one file. Lines and columns are 1-based.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub path: PathBuf,
    pub line: u32,
    pub col: u32,
    pub message: String,
}

impl Diagnostic {
    pub fn new(path: impl AsRef<Path>, line: u32, col: u32, message: impl Into<String>) -> Self {
        Self {
            path: path.as_ref().to_path_buf(),
            line,
            col,
            message: message.into(),
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.path.display(),
            self.line,
            self.col,
            self.message
        )
    }
}

/// Byte offset → 1-based line and column (columns count characters, as roxmltree does).
pub struct LineIndex<'t> {
    text: &'t str,
    /// Byte offset where each line starts.
    starts: Vec<usize>,
    /// Per line: all ASCII, so a column is a byte distance (keeps one-line files linear).
    ascii: Vec<bool>,
}

impl<'t> LineIndex<'t> {
    pub fn new(text: &'t str) -> Self {
        let mut starts = vec![0];
        let mut ascii = Vec::new();
        let mut start = 0;
        for line in text.split_inclusive('\n') {
            ascii.push(line.is_ascii());
            start += line.len();
            if line.ends_with('\n') {
                starts.push(start);
            }
        }
        // An empty last line (after a final newline, or of an empty text).
        ascii.resize(starts.len(), true);
        LineIndex {
            text,
            starts,
            ascii,
        }
    }

    pub fn line_col(&self, offset: usize) -> (u32, u32) {
        let offset = offset.min(self.text.len());
        let line = self.starts.partition_point(|&s| s <= offset).max(1);
        let start = self.starts.get(line - 1).copied().unwrap_or(0);
        let col = if self.ascii.get(line - 1).copied().unwrap_or(false) {
            offset - start
        } else {
            self.text
                .get(start..offset)
                .map_or(offset - start, |s| s.chars().count())
        };
        (to_u32(line), to_u32(col + 1))
    }
}

fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// All the problems found in one file, in file order. Never empty when returned as an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    pub fn iter(&self) -> std::slice::Iter<'_, Diagnostic> {
        self.0.iter()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Sorts by position so reports read top to bottom regardless of discovery order.
    pub fn sorted(mut self) -> Self {
        self.0.sort_by_key(|d| (d.line, d.col));
        self
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostics {}

/// Why an input file (SKEL, .seq, configuration, joint map) could not be used.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Every problem found in the file, one `FILE:LINE:COL: message` per line.
    #[error("{0}")]
    Invalid(Diagnostics),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn displays_one_line_per_problem() {
        let d = Diagnostics(vec![
            Diagnostic::new("a.skel", 3, 5, "first"),
            Diagnostic::new("a.skel", 9, 1, "second"),
        ]);
        assert_eq!(d.to_string(), "a.skel:3:5: first\na.skel:9:1: second");
    }
}
