//! What to do when `motionctl` cannot reach the daemon.

use std::io;
use std::path::Path;

/// What to do about a daemon that does not answer.
pub const HUNG: &str =
    "is it hung or overloaded? Check `systemctl status motiond` and `journalctl -u motiond -e`";

/// `motionctl` could not connect to the daemon's socket at `path`.
pub fn connect(path: &Path, err: &io::Error) -> Option<String> {
    match err.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused => Some(format!(
            "is motiond running? (`systemctl status motiond`); or name its socket with --socket \
             PATH (now {})",
            path.display()
        )),
        io::ErrorKind::PermissionDenied => Some(
            "the socket is for the motiond group: `sudo usermod -aG motiond $USER`, then log in \
             again"
                .into(),
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_hints_name_the_group_and_the_daemon() {
        let denied = io::Error::from_raw_os_error(libc::EACCES);
        assert!(
            connect(Path::new("/run/motiond/control.sock"), &denied)
                .unwrap()
                .contains("usermod -aG motiond")
        );
        let missing = io::Error::from_raw_os_error(libc::ENOENT);
        assert!(
            connect(Path::new("/x.sock"), &missing)
                .unwrap()
                .contains("systemctl status motiond")
        );
    }
}
