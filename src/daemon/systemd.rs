//! The daemon's side of `Type=notify`: readiness, watchdog and stopping messages sent as
//! datagrams to `$NOTIFY_SOCKET` (the whole sd_notify protocol is one `sendto`).
//!
//! The watchdog is fed from the loop's heartbeat, never from a timer alone: [`Watchdog::beat`]
//! says "ping" only when the heartbeat moved since the last ping, so a stuck loop stops the pings
//! and systemd restarts the service.

use std::io;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

/// Sends notifications to systemd, or nothing when not started by systemd.
#[derive(Debug)]
pub struct Notifier {
    target: Option<(UnixDatagram, SocketAddr)>,
}

impl Notifier {
    /// From `$NOTIFY_SOCKET`; without it every notification is a no-op.
    pub fn from_env() -> io::Result<Self> {
        match std::env::var_os("NOTIFY_SOCKET") {
            Some(address) => Self::new(&address.to_string_lossy()),
            None => Ok(Self { target: None }),
        }
    }

    /// `address` is a path, or `@name` for the abstract namespace.
    pub fn new(address: &str) -> io::Result<Self> {
        let addr = match address.strip_prefix('@') {
            Some(name) => {
                use std::os::linux::net::SocketAddrExt;
                SocketAddr::from_abstract_name(name.as_bytes())?
            }
            None => SocketAddr::from_pathname(address)?,
        };
        Ok(Self {
            target: Some((UnixDatagram::unbound()?, addr)),
        })
    }

    pub fn is_active(&self) -> bool {
        self.target.is_some()
    }

    /// Sends `state`, e.g. `READY=1` (several assignments separated by newlines).
    pub fn notify(&self, state: &str) -> io::Result<()> {
        match &self.target {
            Some((socket, addr)) => socket.send_to_addr(state.as_bytes(), addr).map(|_| ()),
            None => Ok(()),
        }
    }
}

/// The watchdog period systemd expects pings within (`$WATCHDOG_USEC`), if it is for this process
/// (`$WATCHDOG_PID` unset or ours).
pub fn watchdog_timeout() -> Option<Duration> {
    let pid = std::env::var("WATCHDOG_PID").ok();
    let usec = std::env::var("WATCHDOG_USEC").ok();
    watchdog_timeout_from(pid.as_deref(), usec.as_deref(), std::process::id())
}

fn watchdog_timeout_from(pid: Option<&str>, usec: Option<&str>, own: u32) -> Option<Duration> {
    if let Some(pid) = pid
        && pid.trim().parse::<u32>().ok() != Some(own)
    {
        return None;
    }
    let usec: u64 = usec?.trim().parse().ok()?;
    (usec > 0).then(|| Duration::from_micros(usec))
}

/// Decides when to send `WATCHDOG=1`: only when the loop's heartbeat advanced.
#[derive(Debug, Default)]
pub struct Watchdog {
    last: Option<u64>,
}

impl Watchdog {
    /// True when `heartbeat` differs from the one seen at the last ping.
    pub fn beat(&mut self, heartbeat: u64) -> bool {
        let moved = self.last != Some(heartbeat);
        self.last = Some(heartbeat);
        moved
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notifications_arrive_as_datagrams() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let receiver = UnixDatagram::bind(&path).unwrap();
        let notifier = Notifier::new(path.to_str().unwrap()).unwrap();
        assert!(notifier.is_active());
        notifier.notify("READY=1").unwrap();
        notifier.notify("STOPPING=1").unwrap();
        let mut buf = [0u8; 64];
        let n = receiver.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1");
        let n = receiver.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"STOPPING=1");
    }

    #[test]
    fn abstract_addresses_are_supported() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("motiond-test-{}", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let receiver = UnixDatagram::bind_addr(&addr).unwrap();
        Notifier::new(&format!("@{name}"))
            .unwrap()
            .notify("WATCHDOG=1")
            .unwrap();
        let mut buf = [0u8; 64];
        let n = receiver.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"WATCHDOG=1");
    }

    #[test]
    fn watchdog_timeout_is_for_this_process_only() {
        assert_eq!(
            watchdog_timeout_from(None, Some("2000000"), 7),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            watchdog_timeout_from(Some("7"), Some("500"), 7),
            Some(Duration::from_micros(500))
        );
        assert_eq!(watchdog_timeout_from(Some("8"), Some("500"), 7), None);
        assert_eq!(watchdog_timeout_from(None, Some("0"), 7), None);
        assert_eq!(watchdog_timeout_from(None, Some("x"), 7), None);
        assert_eq!(watchdog_timeout_from(None, None, 7), None);
    }

    #[test]
    fn watchdog_pings_only_while_the_heartbeat_moves() {
        let mut watchdog = Watchdog::default();
        assert!(watchdog.beat(0));
        assert!(!watchdog.beat(0));
        assert!(watchdog.beat(5));
        assert!(!watchdog.beat(5));
        assert!(watchdog.beat(6));
    }
}
