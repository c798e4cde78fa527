//! Errors as operators read them: each message of an error's chain once (a wrapper that already
//! quotes its cause does not repeat it), and for the OS errors met most often, what to do.

use std::error::Error;
use std::io;
use std::path::Path;

use motiond::backend::{self, bus};
use motiond::daemon::socket::SocketError;

/// The error and its causes, each message once, joined with `: `, then a hint when one applies.
pub fn explain(err: &(dyn Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut cause = err.source();
    while let Some(c) = cause {
        let message = c.to_string();
        if !text.contains(&message) {
            text.push_str(": ");
            text.push_str(&message);
        }
        cause = c.source();
    }
    if let Some(hint) = hint(err) {
        text.push_str("\nhint: ");
        text.push_str(&hint);
    }
    text
}

/// What to do about the first error of the chain that has a known remedy.
pub fn hint(err: &(dyn Error + 'static)) -> Option<String> {
    let mut next = Some(err);
    while let Some(e) = next {
        if let Some(SocketError::Io { path, source }) = e.downcast_ref::<SocketError>() {
            return socket_bind(path, source);
        }
        // `backend::OpenError` is transparent: its source() skips the bus error, so it is
        // unwrapped here.
        let bus = match e.downcast_ref::<backend::OpenError>() {
            Some(backend::OpenError::Buses(bus)) => Some(bus),
            _ => e.downcast_ref::<bus::OpenError>(),
        };
        if let Some(bus::OpenError::Io { source, .. }) = bus {
            return device(source);
        }
        next = e.source();
    }
    None
}

/// The daemon could not create its control socket at `path`.
fn socket_bind(path: &Path, err: &io::Error) -> Option<String> {
    let dir = path.parent().unwrap_or(Path::new("/"));
    match err.kind() {
        io::ErrorKind::NotFound => Some(format!(
            "{} does not exist: create it (`sudo install -d -o motiond -g motiond {}`; the \
             systemd unit's RuntimeDirectory= does this), or listen elsewhere with --socket PATH, \
             or rehearse offline with `motiond play --dry-run`",
            dir.display(),
            dir.display()
        )),
        io::ErrorKind::PermissionDenied => Some(format!(
            "this user may not create files in {}: run as the motiond user (the service does), \
             or listen elsewhere with --socket PATH",
            dir.display()
        )),
        _ => None,
    }
}

/// A serial device or CAN interface of a bus could not be opened.
fn device(err: &io::Error) -> Option<String> {
    let no_device = err.raw_os_error() == Some(libc::ENODEV);
    match err.kind() {
        io::ErrorKind::NotFound => Some(missing_device()),
        _ if no_device => Some(missing_device()),
        io::ErrorKind::PermissionDenied => Some(
            "this user may not open the device: add it to the `dialout` group (serial adapters) \
             and log in again, or run as the motiond user"
                .into(),
        ),
        _ => None,
    }
}

fn missing_device() -> String {
    "is the adapter plugged in and the bus's device (or CAN interface, brought up with `ip link \
     set can0 up type can bitrate …`) named right in the configuration? --dry-run runs the same \
     configuration on the simulated backend, without motors"
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_already_quoted_is_not_repeated() {
        let err = SocketError::Io {
            path: "/run/motiond/control.sock".into(),
            source: io::Error::from_raw_os_error(libc::ENOENT),
        };
        let text = explain(&err);
        assert_eq!(
            text.matches("No such file or directory").count(),
            1,
            "{text}"
        );
        assert!(text.contains("hint: /run/motiond does not exist"), "{text}");
        assert!(text.contains("--socket PATH") && text.contains("--dry-run"));
    }

    #[test]
    fn a_missing_device_suggests_dry_run() {
        let err = bus::OpenError::Io {
            bus: "arm".into(),
            what: "/dev/ttyUSB0".into(),
            source: io::Error::from_raw_os_error(libc::ENOENT),
        };
        assert!(explain(&err).contains("--dry-run"));
        // As backend::open returns it.
        let err = backend::OpenError::Buses(err);
        assert!(explain(&err).contains("--dry-run"), "{}", explain(&err));
    }
}
