//! The motion library: the `.seq` files of one folder, each loaded and proved when the library is
//! (re)loaded, so a `play` request only looks a name up.
//!
//! A motion's name is its file name without `.seq`. Names are resolved only among the files found
//! in the folder, never as paths, so no request can reach a file outside it. A file that fails to
//! load or prove stays listed with its error and cannot be played.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

/// One file of the library: what it compiled to, or why it did not.
#[derive(Debug)]
pub struct Entry<T> {
    pub path: PathBuf,
    pub motion: Result<T, String>,
}

/// Every `.seq` file of a folder, by name, in name order.
#[derive(Debug)]
pub struct Library<T> {
    dir: PathBuf,
    entries: BTreeMap<String, Entry<T>>,
}

impl<T> Library<T> {
    /// Compiles every `*.seq` file directly in `dir` (symlinks followed; subfolders and other files
    /// ignored). Fails only when the folder itself cannot be read.
    pub fn load(dir: &Path, compile: impl Fn(&Path) -> Result<T, String>) -> io::Result<Self> {
        let mut entries = BTreeMap::new();
        for item in std::fs::read_dir(dir)? {
            let path = item?.path();
            if path.extension().is_none_or(|ext| ext != "seq") || path.is_dir() {
                continue;
            }
            let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned());
            let Some(name) = stem.filter(|s| !s.is_empty()) else {
                continue;
            };
            let motion = if name.contains(char::REPLACEMENT_CHARACTER) {
                Err(format!(
                    "{}: file name is not valid UTF-8; rename it to play it",
                    path.display()
                ))
            } else {
                compile(&path)
            };
            entries.insert(name, Entry { path, motion });
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            entries,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The motion called `name`, if the folder had such a file.
    pub fn get(&self, name: &str) -> Option<&Entry<T>> {
        self.entries.get(name)
    }

    /// All entries in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Entry<T>)> {
        self.entries
            .iter()
            .map(|(name, entry)| (name.as_str(), entry))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// "Compiles" a file to its length; files containing "bad" fail.
    fn compile(path: &Path) -> Result<usize, String> {
        let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
        if text.contains("bad") {
            Err(format!("{}:1:1: bad motion", path.display()))
        } else {
            Ok(text.len())
        }
    }

    #[test]
    fn loads_seq_files_and_keeps_the_broken_ones_as_errors() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("wave.seq"), "good").unwrap();
        std::fs::write(dir.path().join("broken.seq"), "bad").unwrap();
        std::fs::write(dir.path().join("notes.txt"), "x").unwrap();
        std::fs::create_dir(dir.path().join("sub.seq")).unwrap();
        let library = Library::load(dir.path(), compile).unwrap();
        let names: Vec<&str> = library.iter().map(|(name, _)| name).collect();
        assert_eq!(names, ["broken", "wave"]);
        assert_eq!(library.get("wave").unwrap().motion, Ok(4));
        assert!(
            library
                .get("broken")
                .unwrap()
                .motion
                .as_ref()
                .unwrap_err()
                .contains("bad motion")
        );
    }

    #[test]
    fn names_resolve_only_inside_the_folder() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("motions");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(root.path().join("secret.seq"), "good").unwrap();
        std::fs::write(dir.join("wave.seq"), "good").unwrap();
        let library = Library::load(&dir, compile).unwrap();
        for name in [
            "../secret",
            "wave.seq",
            "/etc/passwd",
            "",
            "./wave",
            "motions/wave",
        ] {
            assert!(library.get(name).is_none(), "{name} resolved");
        }
        assert!(library.get("wave").is_some());
    }

    #[test]
    fn follows_symlinks_to_files() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("walk.seq"), "good").unwrap();
        let dir = root.path().join("lib");
        std::fs::create_dir(&dir).unwrap();
        std::os::unix::fs::symlink(root.path().join("walk.seq"), dir.join("walk.seq")).unwrap();
        let library = Library::load(&dir, compile).unwrap();
        assert_eq!(library.get("walk").unwrap().motion, Ok(4));
    }

    #[test]
    fn a_missing_folder_is_an_error() {
        let root = tempfile::tempdir().unwrap();
        assert!(Library::load(&root.path().join("nope"), compile).is_err());
    }
}
