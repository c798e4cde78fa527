//! The socket file: bound with mode 0660 and the configured group, a stale one from a crash
//! replaced, removed again when the daemon exits.

use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

/// Why the socket could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error("{}: another motiond is already listening there", path.display())]
    InUse { path: PathBuf },
    #[error("{}: exists and is not a socket; refusing to replace it", path.display())]
    NotASocket { path: PathBuf },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// What binding did about the socket group, for the caller to log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupOutcome {
    /// No group configured: the socket keeps the daemon's group.
    NotConfigured,
    Applied,
    /// The group does not exist on this machine: the socket keeps the daemon's group.
    Unknown(String),
}

/// A listening control socket that removes its file when dropped.
#[derive(Debug)]
pub struct ControlSocket {
    listener: UnixListener,
    path: PathBuf,
    /// Device and inode of the file we bound: on drop only our own file is removed, never one a
    /// successor bound at the same path.
    identity: (u64, u64),
}

impl ControlSocket {
    /// Binds `path` with mode 0660. A socket file nobody listens on (left by a crash) is removed
    /// first; a live one is an error, as is a non-socket file at that path.
    pub fn bind(path: &Path, group: Option<&str>) -> Result<(Self, GroupOutcome), SocketError> {
        let io_err = |source| SocketError::Io {
            path: path.to_path_buf(),
            source,
        };
        match std::fs::symlink_metadata(path) {
            Ok(meta) if !meta.file_type().is_socket() => {
                return Err(SocketError::NotASocket {
                    path: path.to_path_buf(),
                });
            }
            Ok(_) => match UnixStream::connect(path) {
                Ok(_) => {
                    return Err(SocketError::InUse {
                        path: path.to_path_buf(),
                    });
                }
                Err(err) if err.kind() == io::ErrorKind::ConnectionRefused => {
                    std::fs::remove_file(path).map_err(io_err)?;
                }
                Err(err) => return Err(io_err(err)),
            },
            Err(err) if err.kind() == io::ErrorKind::NotFound => {}
            Err(err) => return Err(io_err(err)),
        }
        // The umask decides the mode bind() creates the file with: restrict it for the bind so
        // there is no moment in which the socket is open to others.
        // SAFETY: umask only swaps the process's file creation mask.
        let previous = unsafe { libc::umask(0o117) };
        let bound = UnixListener::bind(path);
        // SAFETY: as above, restoring the previous mask.
        unsafe { libc::umask(previous) };
        let listener = bound.map_err(io_err)?;
        let meta = std::fs::metadata(path).map_err(io_err)?;
        let socket = Self {
            listener,
            path: path.to_path_buf(),
            identity: (meta.dev(), meta.ino()),
        };
        let outcome = match group {
            None => GroupOutcome::NotConfigured,
            Some(name) => match group_id(name) {
                Some(gid) => {
                    std::os::unix::fs::lchown(path, None, Some(gid)).map_err(io_err)?;
                    GroupOutcome::Applied
                }
                None => GroupOutcome::Unknown(name.to_string()),
            },
        };
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660)).map_err(io_err)?;
        Ok((socket, outcome))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn listener(&self) -> &UnixListener {
        &self.listener
    }
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        let ours = std::fs::symlink_metadata(&self.path)
            .is_ok_and(|meta| (meta.dev(), meta.ino()) == self.identity);
        if ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// The id of the group called `name`, if it exists.
fn group_id(name: &str) -> Option<u32> {
    let name = std::ffi::CString::new(name).ok()?;
    let mut group: libc::group = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::group = std::ptr::null_mut();
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: every pointer refers to live storage of the stated size; getgrnam_r is the
    // thread-safe variant and writes only into `group` and `buf`.
    let rc = unsafe {
        libc::getgrnam_r(
            name.as_ptr(),
            &mut group,
            buf.as_mut_ptr(),
            buf.len(),
            &mut result,
        )
    };
    (rc == 0 && !result.is_null()).then_some(group.gr_gid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn binds_with_mode_0660_and_removes_the_file_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sock");
        let (socket, outcome) = ControlSocket::bind(&path, None).unwrap();
        assert_eq!(outcome, GroupOutcome::NotConfigured);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o660);
        drop(socket);
        assert!(!path.exists());
    }

    #[test]
    fn applies_an_existing_group_and_reports_a_missing_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sock");
        let gid = std::fs::metadata(dir.path()).unwrap().gid();
        // Our own primary group always exists; resolve its name the way an operator writes it.
        let name = unsafe {
            let group = libc::getgrgid(gid);
            assert!(!group.is_null());
            std::ffi::CStr::from_ptr((*group).gr_name)
                .to_string_lossy()
                .into_owned()
        };
        let (socket, outcome) = ControlSocket::bind(&path, Some(&name)).unwrap();
        assert_eq!(outcome, GroupOutcome::Applied);
        assert_eq!(std::fs::metadata(&path).unwrap().gid(), gid);
        drop(socket);
        let (_socket, outcome) = ControlSocket::bind(&path, Some("no-such-group-xyz")).unwrap();
        assert_eq!(outcome, GroupOutcome::Unknown("no-such-group-xyz".into()));
    }

    #[test]
    fn replaces_a_stale_socket_but_not_a_live_one_or_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sock");
        // A crash leaves the file behind with nobody listening.
        drop(UnixListener::bind(&path).unwrap());
        assert!(path.exists());
        let (live, _) = ControlSocket::bind(&path, None).unwrap();
        assert!(matches!(
            ControlSocket::bind(&path, None),
            Err(SocketError::InUse { .. })
        ));
        drop(live);
        std::fs::write(&path, "not a socket").unwrap();
        assert!(matches!(
            ControlSocket::bind(&path, None),
            Err(SocketError::NotASocket { .. })
        ));
        assert!(path.exists());
    }
}
