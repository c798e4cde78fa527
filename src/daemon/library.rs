//! The motion library: the `.seq` files of one folder, each loaded and proved when the library is
//! (re)loaded, so a `play` request only looks a name up.
//!
//! A motion's name is its file name without `.seq`. Names are resolved only among the files found
//! in the folder, never as paths, so no request can reach a file outside it. A file that fails to
//! load or prove stays listed with its error and cannot be played.
//!
//! Only regular files are read, none larger than the configured cap, and a symlink only when it
//! stays inside the folder: a FIFO would block the reader, a device such as `/dev/zero` never ends,
//! and a link may point anywhere. Files are opened with `O_NONBLOCK | O_NOFOLLOW` and checked on
//! the open descriptor, so what is read is what was checked. Listing the folder ([`Library::scan`])
//! opens no file; the daemon loads the entries afterwards ([`Library::load_all`]) and `list` shows
//! the ones still loading.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// One file of the library: what it compiled to, or why it did not, once it is loaded.
#[derive(Debug)]
pub struct Entry<T> {
    pub path: PathBuf,
    motion: OnceLock<Result<T, String>>,
}

impl<T> Entry<T> {
    /// The compiled motion or the reason it cannot be played; `None` while it is still loading.
    pub fn motion(&self) -> Option<&Result<T, String>> {
        self.motion.get()
    }
}

/// Every `.seq` file of a folder, by name, in name order.
#[derive(Debug)]
pub struct Library<T> {
    dir: PathBuf,
    /// The folder with every symlink resolved: a linked file must lie below it.
    canonical_dir: PathBuf,
    max_file_bytes: u64,
    entries: BTreeMap<String, Entry<T>>,
}

impl<T> Library<T> {
    /// Lists the `*.seq` entries directly in `dir` (subfolders ignored), every one still loading.
    /// Opens no file, so nothing in the folder can hold it up. Fails only when the folder itself
    /// cannot be read.
    pub fn scan(dir: &Path, max_file_bytes: u64) -> io::Result<Self> {
        let canonical_dir = dir.canonicalize()?;
        let mut entries = BTreeMap::new();
        for item in std::fs::read_dir(dir)? {
            let path = item?.path();
            // `is_dir` follows a symlink with stat(), which opens nothing.
            if path.extension().is_none_or(|ext| ext != "seq") || path.is_dir() {
                continue;
            }
            let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned());
            let Some(name) = stem.filter(|s| !s.is_empty()) else {
                continue;
            };
            entries.insert(
                name,
                Entry {
                    path,
                    motion: OnceLock::new(),
                },
            );
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            canonical_dir,
            max_file_bytes,
            entries,
        })
    }

    /// Loads every entry still loading, in name order: reads the file (see [`Library::read`]) and
    /// hands its text to `compile`. Entries loaded already are left as they are.
    pub fn load_all(&self, compile: impl Fn(&Path, String) -> Result<T, String>) {
        for (name, entry) in &self.entries {
            if entry.motion.get().is_some() {
                continue;
            }
            let motion = if name.contains(char::REPLACEMENT_CHARACTER) {
                Err(format!(
                    "{}: file name is not valid UTF-8; rename it to play it",
                    entry.path.display()
                ))
            } else {
                self.read(&entry.path)
                    .and_then(|text| compile(&entry.path, text))
            };
            let _ = entry.motion.set(motion);
        }
    }

    /// [`Library::scan`] and [`Library::load_all`] in one go.
    pub fn load(
        dir: &Path,
        max_file_bytes: u64,
        compile: impl Fn(&Path, String) -> Result<T, String>,
    ) -> io::Result<Self> {
        let library = Self::scan(dir, max_file_bytes)?;
        library.load_all(compile);
        Ok(library)
    }

    /// The text of one library file, refused (with the reason, path first) unless it is a regular
    /// file inside the folder, at most `max_file_bytes` long and UTF-8.
    fn read(&self, path: &Path) -> Result<String, String> {
        let shown = path.display();
        let linked = std::fs::symlink_metadata(path)
            .map_err(|err| format!("{shown}: {err}"))?
            .file_type()
            .is_symlink();
        let target = if linked {
            let target = path
                .canonicalize()
                .map_err(|err| format!("{shown}: a symlink that cannot be followed: {err}"))?;
            if !target.starts_with(&self.canonical_dir) {
                return Err(format!(
                    "{shown}: a symlink to {}, outside the library folder {}; copy the file into \
                     the folder instead",
                    target.display(),
                    self.dir.display()
                ));
            }
            target
        } else {
            path.to_path_buf()
        };
        // Refused unopened where possible (opening a socket fails, a device may act on open)…
        let stat = std::fs::metadata(&target).map_err(|err| format!("{shown}: {err}"))?;
        regular(path, stat.file_type())?;
        // …and checked again on the open descriptor, which is what is read. O_NONBLOCK: opening a
        // FIFO swapped in meanwhile must not wait for a writer; O_NOFOLLOW: nor a symlink.
        let mut file = File::options()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
            .open(&target)
            .map_err(|err| format!("{shown}: {err}"))?;
        let meta = file.metadata().map_err(|err| format!("{shown}: {err}"))?;
        regular(path, meta.file_type())?;
        let cap = self.max_file_bytes;
        if meta.len() > cap {
            return Err(too_large(path, meta.len(), cap));
        }
        // The file may grow while it is read: never read more than the cap allows.
        let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
        (&mut file)
            .take(cap.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|err| format!("{shown}: {err}"))?;
        if bytes.len() as u64 > cap {
            return Err(too_large(path, bytes.len() as u64, cap));
        }
        String::from_utf8(bytes).map_err(|err| {
            format!(
                "{shown}: not UTF-8 text (byte {} is not); .seq files are UTF-8 YAML",
                err.utf8_error().valid_up_to()
            )
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

    /// Entries not loaded yet.
    pub fn loading(&self) -> usize {
        self.entries
            .values()
            .filter(|entry| entry.motion.get().is_none())
            .count()
    }
}

/// `Err` naming what `path` is when it is not a regular file.
fn regular(path: &Path, kind: std::fs::FileType) -> Result<(), String> {
    if kind.is_file() {
        return Ok(());
    }
    let what = if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    };
    Err(format!(
        "{}: {what}; the library reads only regular .seq files",
        path.display()
    ))
}

fn too_large(path: &Path, bytes: u64, cap: u64) -> String {
    format!(
        "{}: {bytes} bytes is more than the library takes ({cap} bytes, motion.max_file_mib); \
         raise motion.max_file_mib for a motion this long",
        path.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// "Compiles" a file to its length; files containing "bad" fail.
    fn compile(path: &Path, text: String) -> Result<usize, String> {
        if text.contains("bad") {
            Err(format!("{}:1:1: bad motion", path.display()))
        } else {
            Ok(text.len())
        }
    }

    const CAP: u64 = 1 << 20;

    fn error(library: &Library<usize>, name: &str) -> String {
        library
            .get(name)
            .unwrap_or_else(|| panic!("no entry {name}"))
            .motion()
            .unwrap_or_else(|| panic!("{name} still loading"))
            .clone()
            .unwrap_err()
    }

    #[test]
    fn loads_seq_files_and_keeps_the_broken_ones_as_errors() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("wave.seq"), "good").unwrap();
        std::fs::write(dir.path().join("broken.seq"), "bad").unwrap();
        std::fs::write(dir.path().join("notes.txt"), "x").unwrap();
        std::fs::create_dir(dir.path().join("sub.seq")).unwrap();
        let library = Library::load(dir.path(), CAP, compile).unwrap();
        let names: Vec<&str> = library.iter().map(|(name, _)| name).collect();
        assert_eq!(names, ["broken", "wave"]);
        assert_eq!(library.get("wave").unwrap().motion(), Some(&Ok(4)));
        assert!(error(&library, "broken").contains("bad motion"));
        assert_eq!(library.loading(), 0);
    }

    #[test]
    fn scanning_opens_nothing_and_loading_fills_in() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("wave.seq"), "good").unwrap();
        let library = Library::<usize>::scan(dir.path(), CAP).unwrap();
        assert_eq!(library.loading(), 1);
        assert_eq!(library.get("wave").unwrap().motion(), None);
        library.load_all(compile);
        assert_eq!(library.get("wave").unwrap().motion(), Some(&Ok(4)));
    }

    #[test]
    fn names_resolve_only_inside_the_folder() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("motions");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(root.path().join("secret.seq"), "good").unwrap();
        std::fs::write(dir.join("wave.seq"), "good").unwrap();
        let library = Library::load(&dir, CAP, compile).unwrap();
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
    fn follows_symlinks_only_inside_the_folder() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("walk.seq"), "good").unwrap();
        let dir = root.path().join("lib");
        std::fs::create_dir_all(dir.join("takes")).unwrap();
        std::fs::write(dir.join("takes/run.seq"), "good!").unwrap();
        std::os::unix::fs::symlink(root.path().join("walk.seq"), dir.join("walk.seq")).unwrap();
        std::os::unix::fs::symlink("takes/run.seq", dir.join("run.seq")).unwrap();
        std::os::unix::fs::symlink("nowhere.seq", dir.join("dangling.seq")).unwrap();
        let library = Library::load(&dir, CAP, compile).unwrap();
        assert_eq!(library.get("run").unwrap().motion(), Some(&Ok(5)));
        assert!(error(&library, "walk").contains("outside the library folder"));
        assert!(error(&library, "dangling").contains("cannot be followed"));
    }

    #[test]
    fn devices_fifos_and_sockets_are_refused_without_reading_them() {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero.seq")).unwrap();
        let fifo = std::ffi::CString::new(
            dir.path()
                .join("x.seq")
                .into_os_string()
                .into_encoded_bytes(),
        )
        .unwrap();
        // SAFETY: mkfifo reads a NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let _socket = std::os::unix::net::UnixListener::bind(dir.path().join("sock.seq")).unwrap();
        let library = Library::load(dir.path(), CAP, compile).unwrap();
        // /dev/zero lies outside the folder; inside it, it would be refused as a device.
        assert!(error(&library, "zero").contains("outside the library folder"));
        assert!(
            error(&library, "x").contains("a FIFO"),
            "{}",
            error(&library, "x")
        );
        assert!(error(&library, "sock").contains("socket"));
    }

    #[test]
    fn a_device_linked_from_inside_the_folder_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let library = Library::<usize>::scan(dir.path(), CAP).unwrap();
        let refused = library.read(Path::new("/dev/zero")).unwrap_err();
        assert!(refused.contains("a device"), "{refused}");
    }

    #[test]
    fn files_over_the_cap_are_refused_before_reading() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("long.seq"), vec![b'x'; 2000]).unwrap();
        std::fs::write(dir.path().join("short.seq"), vec![b'x'; 1000]).unwrap();
        std::fs::write(dir.path().join("latin1.seq"), b"caf\xe9").unwrap();
        let library = Library::load(dir.path(), 1000, compile).unwrap();
        assert!(error(&library, "long").contains("2000 bytes is more than"));
        assert_eq!(library.get("short").unwrap().motion(), Some(&Ok(1000)));
        assert!(error(&library, "latin1").contains("not UTF-8"));
    }

    #[test]
    fn a_missing_folder_is_an_error() {
        let root = tempfile::tempdir().unwrap();
        assert!(Library::load(&root.path().join("nope"), CAP, compile).is_err());
    }
}
