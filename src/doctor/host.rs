//! Where the doctor reads the machine: `/sys`, `/proc`, `/dev` and `/etc/group` through one
//! trait, so that every finding can be tested from a fake tree.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The most the doctor reads of one file: `/proc/interrupts` of a machine with hundreds of CPUs
/// is a few hundred KiB, sysfs attributes a page.
const MAX_BYTES: u64 = 16 << 20;

/// The machine as the doctor sees it. Paths are absolute, as on the machine.
pub trait Host {
    fn read(&self, path: &str) -> io::Result<Vec<u8>>;
    /// The names in a folder, sorted.
    fn list(&self, dir: &str) -> io::Result<Vec<String>>;
    /// Whether this process may write the file.
    fn writable(&self, path: &str) -> bool;
    /// The file's mode bits and group id.
    fn owner(&self, path: &str) -> Option<(u32, u32)>;

    /// A text file, trimmed; `None` when it cannot be read. For tables the doctor parses
    /// (`/proc/interrupts`); a value it may print comes from [`Host::value`].
    fn text(&self, path: &str) -> Option<String> {
        self.read(path)
            .ok()
            .map(|b| String::from_utf8_lossy(&b).trim().to_string())
    }

    /// A one-value file (a sysfs attribute) as the doctor prints it: see [`printable`].
    fn value(&self, path: &str) -> Option<String> {
        self.text(path).map(|t| printable(&t))
    }
}

/// The most characters of one kernel value the doctor prints.
const MAX_SHOWN_CHARS: usize = 64;

/// Text read from the machine made fit for a one-line finding: control characters (newlines,
/// escape sequences, NULs) escaped as `\n`, `\u{1b}`, and at most [`MAX_SHOWN_CHARS`] characters
/// with `…` after them. A sysfs attribute is one short line; anything else (a damaged or fake
/// file) must not reach the terminal raw.
pub fn printable(text: &str) -> String {
    let mut shown = String::new();
    for (i, c) in text.chars().enumerate() {
        if i == MAX_SHOWN_CHARS {
            shown.push('…');
            break;
        }
        if c.is_control() {
            shown.extend(c.escape_default());
        } else {
            shown.push(c);
        }
    }
    shown
}

/// This machine.
#[derive(Debug, Default, Clone, Copy)]
pub struct System;

impl Host for System {
    fn read(&self, path: &str) -> io::Result<Vec<u8>> {
        // The kernel writes these files; a bound keeps an odd one (a FIFO, a device) from
        // stalling or filling the doctor.
        crate::file::read_at_most(Path::new(path), MAX_BYTES)
    }

    fn list(&self, dir: &str) -> io::Result<Vec<String>> {
        list_dir(Path::new(dir))
    }

    fn writable(&self, path: &str) -> bool {
        let Ok(c) = std::ffi::CString::new(path) else {
            return false;
        };
        // SAFETY: `c` is a valid NUL-terminated path for the duration of the call.
        unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
    }

    fn owner(&self, path: &str) -> Option<(u32, u32)> {
        std::fs::metadata(path).ok().map(|m| (m.mode(), m.gid()))
    }
}

fn list_dir(dir: &Path) -> io::Result<Vec<String>> {
    let mut names: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    Ok(names)
}

/// A kernel CPU list (`0-3,5,8-9`); `None` when it is not one. Empty text is no CPU.
pub fn cpu_list(text: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
                if b < a || b - a > 65_536 {
                    return None;
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().ok()?),
        }
    }
    Some(cpus)
}

/// A fake machine for the doctor's tests.
#[cfg(test)]
pub mod fake {
    use std::collections::{HashMap, HashSet};
    use std::io;
    use std::os::unix::fs::MetadataExt;
    use std::path::PathBuf;

    use super::{Host, list_dir};

    /// A fake machine: the files under a folder stand for the same paths under `/`; files named
    /// read-only are not writable and `owners` stand in for ownership (tests run as any user).
    #[derive(Debug, Clone)]
    pub struct Tree {
        root: PathBuf,
        read_only: HashSet<String>,
        owners: HashMap<String, (u32, u32)>,
    }

    impl Tree {
        pub fn new(root: impl Into<PathBuf>) -> Tree {
            Tree {
                root: root.into(),
                read_only: HashSet::new(),
                owners: HashMap::new(),
            }
        }

        fn at(&self, path: &str) -> PathBuf {
            self.root.join(path.trim_start_matches('/'))
        }

        /// Writes a file of the fake machine (its folders made as needed).
        pub fn put(&self, path: &str, content: impl AsRef<[u8]>) -> &Self {
            let at = self.at(path);
            if let Some(dir) = at.parent() {
                std::fs::create_dir_all(dir).expect("fake tree folder");
            }
            std::fs::write(at, content).expect("fake tree file");
            self
        }

        pub fn read_only(mut self, path: &str) -> Self {
            self.read_only.insert(path.to_string());
            self
        }

        pub fn owned(mut self, path: &str, mode: u32, gid: u32) -> Self {
            self.owners.insert(path.to_string(), (mode, gid));
            self
        }
    }

    impl Host for Tree {
        fn read(&self, path: &str) -> io::Result<Vec<u8>> {
            std::fs::read(self.at(path))
        }

        fn list(&self, dir: &str) -> io::Result<Vec<String>> {
            list_dir(&self.at(dir))
        }

        fn writable(&self, path: &str) -> bool {
            self.at(path).exists() && !self.read_only.contains(path)
        }

        fn owner(&self, path: &str) -> Option<(u32, u32)> {
            if let Some(o) = self.owners.get(path) {
                return Some(*o);
            }
            std::fs::metadata(self.at(path))
                .ok()
                .map(|m| (m.mode(), m.gid()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_as_the_kernel_writes_them() {
        assert_eq!(cpu_list("0-2,5,7-8\n"), Some(vec![0, 1, 2, 5, 7, 8]));
        assert_eq!(cpu_list(""), Some(vec![]));
        assert_eq!(cpu_list("3"), Some(vec![3]));
        assert_eq!(cpu_list("x"), None);
        assert_eq!(cpu_list("4-2"), None);
    }
}
