//! A teach-in take on disk: its frames go into a file in the takes folder as they are recorded
//! (a Choreonoid `.seq`, complete once closed), so a take cut short — E-stop, fault, signal, a
//! library that cannot take it — is never lost; a finished take is published into the library
//! under its name without ever replacing a file there.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use super::seq::write::{WriteError, Writer};

/// A take being recorded.
#[derive(Debug)]
pub struct Take {
    path: PathBuf,
    /// `None` once closed.
    writer: Option<Writer>,
    frame_rate: f64,
    joints: Vec<String>,
    max_frames: u64,
    capped: bool,
    /// Frames the file could not take yet (the disk is full, a file-size limit, …), row-major,
    /// oldest first: they go into the file, before any later frame, as soon as a write succeeds
    /// again — at the latest when the take is closed. At most `max_frames` of them.
    held: Vec<f64>,
    /// Frames left out: they could not be written at all (a value that is not a number), or
    /// never reached the take ([`lose`](Self::lose)).
    lost: u64,
    /// The first write that failed.
    error: Option<String>,
}

/// What a take holds once closed.
#[derive(Debug, Clone, PartialEq)]
pub struct Closed {
    /// The complete `.seq` file in the takes folder.
    pub path: PathBuf,
    pub frames: u64,
    pub frame_rate: f64,
    pub joints: Vec<String>,
    /// The take reached its longest length; later frames were not recorded.
    pub capped: bool,
    /// Frames left out (a value that is not a number, or frames that never reached the take:
    /// the loop's trace ring overflowed before they were read).
    pub lost: u64,
    /// The first write that failed on the way, if any (its frames were written later).
    pub error: Option<String>,
}

impl Take {
    /// Starts take `name` as `dir/name.seq` (the folder is created when missing). A file of that
    /// name already there is an earlier take nobody saved: it is never overwritten.
    pub fn create(
        dir: &Path,
        name: &str,
        frame_rate: f64,
        joints: Vec<String>,
        max_frames: u64,
    ) -> Result<Take, WriteError> {
        std::fs::create_dir_all(dir).map_err(|error| WriteError::Io {
            path: dir.to_path_buf(),
            action: "create the takes folder",
            error,
        })?;
        let path = dir.join(format!("{name}.seq"));
        let writer = Writer::create_kept(&path, frame_rate, &joints)?;
        Ok(Take {
            path,
            writer: Some(writer),
            frame_rate,
            joints,
            max_frames: max_frames.max(1),
            capped: false,
            held: Vec::new(),
            lost: 0,
            error: None,
        })
    }

    /// Appends one frame (one measured position per joint). Never fails: a frame beyond the
    /// take's longest length is left out (`capped`); one the file cannot take now is held in
    /// memory until it can.
    pub fn push(&mut self, row: &[f64]) {
        if self.writer.is_none() {
            return;
        }
        if self.frames() >= self.max_frames {
            self.capped = true;
            return;
        }
        if !self.held.is_empty() {
            self.held.extend_from_slice(row);
            let _ = self.drain();
            return;
        }
        let Some(writer) = self.writer.as_mut() else {
            return;
        };
        match writer.push(row) {
            Ok(()) => {}
            Err(e @ WriteError::Invalid(_)) => {
                self.lost += 1;
                self.error.get_or_insert(e.to_string());
            }
            Err(e) => {
                self.error.get_or_insert(e.to_string());
                self.held.extend_from_slice(row);
            }
        }
    }

    /// Counts `frames` that never reached the take (the loop overwrote them before they were
    /// read) as lost.
    pub fn lose(&mut self, frames: u64) {
        self.lost = self.lost.saturating_add(frames);
    }

    /// Hands the held frames to the file, oldest first, until one fails (its error).
    fn drain(&mut self) -> Result<(), WriteError> {
        let Some(writer) = self.writer.as_mut() else {
            return Ok(());
        };
        let columns = self.joints.len().max(1);
        let mut written = 0;
        let mut failed = Ok(());
        for row in self.held.chunks(columns) {
            if let Err(e) = writer.push(row) {
                failed = Err(e);
                break;
            }
            written += row.len();
        }
        self.held.drain(..written);
        failed
    }

    /// Frames recorded so far (in the file or held).
    pub fn frames(&self) -> u64 {
        self.writer.as_ref().map_or(0, Writer::frames) + self.waiting()
    }

    /// Frames in memory only: those the file could not take yet, and those the writer's buffer
    /// still holds (a full disk refuses its flush too; they are not in the file until it takes
    /// them).
    pub fn held_frames(&self) -> u64 {
        self.writer.as_ref().map_or(0, Writer::unwritten) + self.waiting()
    }

    /// Frames waiting in `held`, not yet handed to the writer.
    fn waiting(&self) -> u64 {
        (self.held.len() / self.joints.len().max(1)) as u64
    }

    pub fn frame_rate(&self) -> f64 {
        self.frame_rate
    }

    pub fn joints(&self) -> &[String] {
        &self.joints
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn capped(&self) -> bool {
        self.capped
    }

    /// The first write that failed, if any.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// Puts what was recorded on disk now (the take was cut short; it may be a while before it
    /// is closed). What the disk cannot take stays held.
    pub fn sync(&mut self) {
        let synced = self
            .drain()
            .and_then(|()| self.writer.as_mut().map_or(Ok(()), Writer::sync));
        if let Err(e) = synced {
            self.error.get_or_insert(e.to_string());
        }
    }

    /// Completes the file: every held frame written, the frame count filled in, synced to disk.
    /// On failure the take stays as it was (nothing recorded is dropped) and a later call tries
    /// again, e.g. once the disk has room.
    pub fn close(&mut self) -> Result<Closed, WriteError> {
        self.drain()?;
        let frames = match self.writer.as_mut() {
            Some(w) => w.complete()?,
            None => return Err(WriteError::Invalid("the take is closed already".into())),
        };
        // The takes folder removed during the take: the frames are in the open file only.
        if let Some(w) = self.writer.as_ref() {
            match w.restore() {
                Ok(false) => {}
                Ok(true) => {
                    self.error.get_or_insert(format!(
                        "{} was removed during the take; every frame was kept in the open file \
                         and written there again",
                        self.path.display()
                    ));
                }
                Err(error) => {
                    return Err(WriteError::Io {
                        path: self.path.clone(),
                        action: "write again (its folder was removed during the take; every \
                                 frame is held in the open file until this succeeds)",
                        error,
                    });
                }
            }
        }
        self.writer = None;
        Ok(Closed {
            path: self.path.clone(),
            frames,
            frame_rate: self.frame_rate,
            joints: self.joints.clone(),
            capped: self.capped,
            lost: self.lost,
            error: self.error.clone(),
        })
    }

    /// Removes the file: there was nothing worth keeping (no frames).
    pub fn discard(mut self) {
        drop(self.writer.take());
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Closed {
    pub fn duration_s(&self) -> f64 {
        self.frames.saturating_sub(1) as f64 / self.frame_rate
    }
}

/// Gives the closed take at `from` the name `to` (in the library) without replacing anything:
/// a hard link, which fails when `to` exists, then `from` is removed. Across filesystems the
/// take is copied into a hidden file beside `to` (synced) and linked from there. Both folders
/// are synced, so the name survives a power loss. `from` is left in place on every failure.
pub fn publish(from: &Path, to: &Path) -> io::Result<()> {
    let dir = to
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    match std::fs::hard_link(from, to) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
            let name = to.file_name().unwrap_or_default().to_string_lossy();
            let temp = dir.join(format!(".{name}.{}.part", std::process::id()));
            let copied = (|| {
                std::fs::copy(from, &temp)?;
                File::open(&temp)?.sync_all()?;
                std::fs::hard_link(&temp, to)
            })();
            let _ = std::fs::remove_file(&temp);
            copied?;
        }
        Err(e) => return Err(e),
    }
    let from_dir = from.parent().unwrap_or(Path::new("."));
    std::fs::remove_file(from)?;
    for d in [dir, from_dir] {
        File::open(d)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::motion::seq;

    fn names() -> Vec<String> {
        vec!["a".into(), "b".into()]
    }

    #[test]
    fn a_take_is_on_disk_as_it_is_recorded_and_loads_once_closed() {
        let dir = tempfile::tempdir().unwrap();
        let takes = dir.path().join("takes");
        let mut take = Take::create(&takes, "t", 10.0, names(), 100).unwrap();
        for i in 0..25 {
            take.push(&[f64::from(i), -f64::from(i)]);
        }
        take.sync();
        // Synced: the rows are in the file before it is closed.
        let text = std::fs::read_to_string(takes.join("t.seq")).unwrap();
        assert!(text.contains("[ 24.0, -24.0 ]"), "{text}");
        let closed = take.close().unwrap();
        assert_eq!(closed.frames, 25);
        assert!((closed.duration_s() - 2.4).abs() < 1e-12);
        let motion = seq::load(&closed.path).unwrap();
        assert_eq!(motion.joint_names().unwrap(), names());
        // An earlier take of the same name is never overwritten.
        let before = std::fs::read(&closed.path).unwrap();
        let err = Take::create(&takes, "t", 10.0, names(), 100).unwrap_err();
        assert!(err.to_string().contains("t.seq"), "{err}");
        assert_eq!(std::fs::read(&closed.path).unwrap(), before);
    }

    /// The takes folder removed during the take (`rm -rf`, an unmounted stick): the frames were
    /// written into a file no name reaches; closing puts them back, all of them.
    #[test]
    fn a_takes_folder_removed_during_the_take_loses_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let takes = dir.path().join("takes");
        let mut take = Take::create(&takes, "t", 10.0, names(), 100).unwrap();
        take.push(&[1.0, 2.0]);
        take.sync();
        std::fs::remove_dir_all(&takes).unwrap();
        take.push(&[1.5, 2.5]);
        let closed = take.close().unwrap();
        assert_eq!(closed.frames, 2);
        assert!(
            closed
                .error
                .as_deref()
                .unwrap()
                .contains("was removed during the take"),
            "{closed:?}"
        );
        let motion = seq::load(&takes.join("t.seq")).unwrap();
        assert_eq!(motion.joint_names().unwrap(), names());
    }

    #[test]
    fn a_take_stops_at_its_longest_length() {
        let dir = tempfile::tempdir().unwrap();
        let mut take = Take::create(dir.path(), "t", 100.0, names(), 3).unwrap();
        for _ in 0..10 {
            take.push(&[0.0, 1.0]);
        }
        assert!(take.capped());
        let closed = take.close().unwrap();
        assert_eq!((closed.frames, closed.capped, closed.lost), (3, true, 0));
    }

    #[test]
    fn publishing_never_replaces_a_motion() {
        let dir = tempfile::tempdir().unwrap();
        let library = dir.path().join("motions");
        std::fs::create_dir(&library).unwrap();
        let mut take = Take::create(&dir.path().join("takes"), "t", 10.0, names(), 10).unwrap();
        take.push(&[1.0, 2.0]);
        take.push(&[1.5, 2.5]);
        let closed = take.close().unwrap();
        // A motion of that name appeared meanwhile: it stays, and so does the take.
        std::fs::write(library.join("t.seq"), "theirs").unwrap();
        let err = publish(&closed.path, &library.join("t.seq")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(
            std::fs::read_to_string(library.join("t.seq")).unwrap(),
            "theirs"
        );
        assert!(closed.path.exists());
        publish(&closed.path, &library.join("t2.seq")).unwrap();
        assert!(!closed.path.exists());
        assert_eq!(
            seq::load(&library.join("t2.seq"))
                .unwrap()
                .joint_names()
                .unwrap(),
            names()
        );
        // Nothing else is left in the library.
        let mut left: Vec<_> = std::fs::read_dir(&library)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        left.sort();
        assert_eq!(left, ["t.seq", "t2.seq"]);
    }

    #[test]
    fn publishing_across_file_systems_copies_then_links_without_replacing() {
        use std::os::unix::fs::MetadataExt;
        // /dev/shm is a tmpfs: a link from there into a folder on disk fails with EXDEV.
        let shm = tempfile::tempdir_in("/dev/shm").unwrap();
        let disk = tempfile::tempdir().unwrap();
        let dev = |p: &Path| std::fs::metadata(p).unwrap().dev();
        assert_ne!(
            dev(shm.path()),
            dev(disk.path()),
            "the temporary folder is on /dev/shm"
        );
        let library = disk.path();
        let take_of = |name: &str| {
            let mut take = Take::create(shm.path(), name, 10.0, names(), 10).unwrap();
            take.push(&[1.0, 2.0]);
            take.push(&[1.5, 2.5]);
            take.close().unwrap()
        };
        let closed = take_of("t");
        publish(&closed.path, &library.join("t.seq")).unwrap();
        assert!(!closed.path.exists());
        assert_eq!(
            seq::load(&library.join("t.seq"))
                .unwrap()
                .joint_names()
                .unwrap(),
            names()
        );
        // Across file systems too, a motion of that name stays, and so does the take.
        let again = take_of("u");
        std::fs::write(library.join("u.seq"), "theirs").unwrap();
        let err = publish(&again.path, &library.join("u.seq")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(
            std::fs::read_to_string(library.join("u.seq")).unwrap(),
            "theirs"
        );
        assert!(again.path.exists());
        // No copy is left behind.
        let mut left: Vec<_> = std::fs::read_dir(library)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        left.sort();
        assert_eq!(left, ["t.seq", "u.seq"]);
    }

    #[test]
    fn a_discarded_take_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let take = Take::create(dir.path(), "t", 10.0, names(), 10).unwrap();
        take.discard();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
