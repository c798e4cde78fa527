//! Reading an input file whole (a configuration, a robot model, a motion, a script) without
//! letting the path stall or exhaust the process: a FIFO blocks its reader until a writer comes,
//! possibly never, and a device such as `/dev/zero` never ends, so `std::fs::read` on either hangs
//! `serve` at start or reads until the machine runs out of memory.

use std::fs::{File, FileType, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// The bytes of the regular file at `path` (symbolic links followed). Anything else — a FIFO, a
/// device, a socket, a folder — is refused with an `InvalidInput` error that says what it is.
pub fn read(path: &Path) -> io::Result<Vec<u8>> {
    let mut file = open_nonblocking(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}; give a regular file", what(meta.file_type())),
        ));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// [`read`] as UTF-8 text (an `InvalidData` error otherwise, as `std::fs::read_to_string`).
pub fn read_to_string(path: &Path) -> io::Result<String> {
    String::from_utf8(read(path)?).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        )
    })
}

/// At most `max` bytes of whatever `path` is, without waiting for a FIFO's writer: for files of
/// the kernel's (`/proc`, `/sys`, `/dev/cpu_dma_latency`) that are small but not all regular.
pub fn read_at_most(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    match open_nonblocking(path)?.take(max).read_to_end(&mut bytes) {
        // An empty FIFO: nothing to read.
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(bytes),
        Err(e) => Err(e),
        Ok(_) => Ok(bytes),
    }
}

/// Opening a FIFO for reading waits for a writer unless non-blocking; a regular file ignores
/// the flag.
fn open_nonblocking(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
}

fn what(kind: FileType) -> &'static str {
    if kind.is_fifo() {
        "a FIFO, not a regular file"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device, not a regular file"
    } else if kind.is_socket() {
        "a socket, not a regular file"
    } else if kind.is_dir() {
        "a folder, not a file"
    } else {
        "not a regular file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_are_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let text = dir.path().join("a.yaml");
        std::fs::write(&text, "x: 1\n").unwrap();
        assert_eq!(read_to_string(&text).unwrap(), "x: 1\n");
        let fifo = dir.path().join("f.seq");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = read(&fifo).unwrap_err();
        assert!(err.to_string().contains("a FIFO"), "{err}");
        let err = read(Path::new("/dev/zero")).unwrap_err();
        assert!(err.to_string().contains("a device"), "{err}");
        assert!(read(dir.path()).is_err());
        // The kernel's files are read up to a bound, an empty FIFO as nothing.
        assert_eq!(read_at_most(Path::new("/dev/zero"), 10).unwrap().len(), 10);
        assert!(read_at_most(&fifo, 10).unwrap().is_empty());
    }
}
