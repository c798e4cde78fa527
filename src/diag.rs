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

/// Why a file cannot be written where an output option (`--trace`, `--plot`, `-o`, `--dir`)
/// names it, and what to do. Checked before any work is done, so a long run never ends in a file
/// it cannot write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutputError {
    #[error(
        "{}: the folder {} does not exist; create it (`mkdir -p {}`) or choose another",
        path.display(), folder.display(), folder.display()
    )]
    NoFolder { path: PathBuf, folder: PathBuf },
    #[error(
        "{}: {} is not a folder; choose a path inside an existing folder",
        path.display(), folder.display()
    )]
    NotFolder { path: PathBuf, folder: PathBuf },
    #[error(
        "{}: the folder {} is not writable by this user; choose another, or make it writable",
        path.display(), folder.display()
    )]
    ReadOnly { path: PathBuf, folder: PathBuf },
    #[error("{}: is a folder; give a file name inside it", path.display())]
    IsFolder { path: PathBuf },
}

/// Whether a file can be created at `path`: its folder exists, is a folder and is writable, and
/// `path` is not itself a folder.
pub fn check_output(path: &Path) -> Result<(), OutputError> {
    if path.is_dir() {
        return Err(OutputError::IsFolder {
            path: path.to_path_buf(),
        });
    }
    // `out.csv` lies in the working folder.
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    check_folder(path, folder)
}

/// Whether files can be created inside the folder `dir` (`man --dir`).
pub fn check_output_folder(dir: &Path) -> Result<(), OutputError> {
    check_folder(dir, dir)
}

fn check_folder(path: &Path, folder: &Path) -> Result<(), OutputError> {
    let owned = || (path.to_path_buf(), folder.to_path_buf());
    match std::fs::metadata(folder) {
        Err(_) => {
            let (path, folder) = owned();
            Err(OutputError::NoFolder { path, folder })
        }
        Ok(m) if !m.is_dir() => {
            let (path, folder) = owned();
            Err(OutputError::NotFolder { path, folder })
        }
        Ok(_) if !writable(folder) => {
            let (path, folder) = owned();
            Err(OutputError::ReadOnly { path, folder })
        }
        Ok(_) => Ok(()),
    }
}

/// access(2) asks the kernel, which knows root, ACLs and read-only mounts; the mode bits alone
/// do not.
fn writable(folder: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(folder.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a NUL-terminated path that outlives the call.
    unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) == 0 }
}

/// `err` from creating the file at `path`, with what to do where [`check_output`] knows it
/// (the folder may have gone since it was checked).
pub fn output_failure(path: &Path, err: &std::io::Error) -> String {
    match check_output(path) {
        Err(why) => why.to_string(),
        Ok(()) => format!("{}: {err}", path.display()),
    }
}

/// A number as messages show it: `{}` gives the shortest form that reads back as the same f64
/// (`0.5`, `2`, `1e308`; `NaN`, `inf`); `{:.N}` rounds to N decimals. Rust's own f64 Display never
/// switches to an exponent, so a value someone typed as `1e308` would come back as 309 digits
/// (and `{:.4}` of it as 314): from 1e16 up (and, without a precision, below 1e-5) this writes
/// the shortest exponent form, as serde_json and `{:?}` do. Every user-given number echoed in an error goes through it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Num(pub f64);

impl fmt::Display for Num {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let x = self.0;
        let magnitude = x.abs();
        let huge = x.is_finite() && magnitude >= 1e16;
        let tiny = x != 0.0 && magnitude < 1e-5;
        match f.precision() {
            // Rounded as asked (a tiny value to 0.0000, as a table expects) unless huge.
            Some(decimals) if !huge => write!(f, "{x:.decimals$}"),
            None if !(huge || tiny) => write!(f, "{x}"),
            // Shortest round-trip digits with an exponent: `1e308`, `-2.5e-300`.
            _ => write!(f, "{x:e}"),
        }
    }
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

    #[test]
    fn outputs_name_the_missing_folder_and_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no/such/t.csv");
        let err = check_output(&missing).unwrap_err().to_string();
        let folder = dir.path().join("no/such");
        assert_eq!(
            err,
            format!(
                "{}: the folder {} does not exist; create it (`mkdir -p {}`) or choose another",
                missing.display(),
                folder.display(),
                folder.display()
            )
        );
        assert!(check_output(&dir.path().join("t.csv")).is_ok());
        assert!(check_output(Path::new("t.csv")).is_ok());
        assert!(matches!(
            check_output(dir.path()),
            Err(OutputError::IsFolder { .. })
        ));
        let file = dir.path().join("f");
        std::fs::write(&file, "").unwrap();
        assert!(matches!(
            check_output(&file.join("t.csv")),
            Err(OutputError::NotFolder { .. })
        ));
        assert!(matches!(
            check_output_folder(&folder),
            Err(OutputError::NoFolder { .. })
        ));
        let gone = std::io::Error::from_raw_os_error(libc::ENOENT);
        assert!(output_failure(&missing, &gone).contains("mkdir -p"));
    }

    #[test]
    fn numbers_read_as_typed_and_huge_ones_stay_short() {
        let shown = |x: f64| Num(x).to_string();
        assert_eq!(shown(1e308), "1e308");
        assert_eq!(shown(-1e300), "-1e300");
        assert_eq!(shown(f64::MAX), "1.7976931348623157e308");
        assert_eq!(shown(5e-324), "5e-324");
        assert_eq!(shown(1e16), "1e16");
        assert_eq!(shown(9999999999999998.0), "9999999999999998");
        assert_eq!(shown(0.5), "0.5");
        assert_eq!(shown(2.0), "2");
        assert_eq!(shown(0.0), "0");
        assert_eq!(shown(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(shown(f64::NAN), "NaN");
        assert_eq!(shown(f64::NEG_INFINITY), "-inf");
        assert_eq!(format!("{:.2}", Num(1.23456)), "1.23");
        assert_eq!(format!("{:.4}", Num(1e300)), "1e300");
        assert_eq!(format!("{:.2}", Num(0.000001)), "0.00");
        assert_eq!(format!("{:.4}", Num(-1e-9)), "-0.0000");
    }
}
