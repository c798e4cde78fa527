//! End to end: the daemon under an operator's bad day — a flood of idle and half-written
//! connections, ambiguous requests, files replaced or odd files in the library, recovery back to
//! back. Nothing here asserts on wall time; hang guards are generous liveness bounds.

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde_json::{Value, json};

mod daemon_harness;
use daemon_harness::{Daemon, at_rest, bump_seq};

/// The daemons of this file run their loops under SCHED_FIFO where permitted; they take turns.
fn one_daemon_at_a_time() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    TURN.lock().unwrap_or_else(PoisonError::into_inner)
}

#[test]
fn stop_gets_through_three_hundred_idle_connections() {
    let _turn = one_daemon_at_a_time();
    let daemon = Daemon::start(&[("slow.seq", bump_seq(4.0, 1.0))]);
    let mut client = daemon.client();
    assert_eq!(
        client.request(json!({"cmd":"play","motion":"slow"}))["ok"],
        true
    );
    client.wait_for("playing", |s| s["state"] == "playing");
    // Every slot, the reserved pool and more: idle connections and half-written requests.
    let hogs: Vec<UnixStream> = (0..300)
        .map(|i| {
            let mut stream = UnixStream::connect(&daemon.socket).unwrap();
            if i % 2 == 1 {
                stream.write_all(br#"{"cmd":"pl"#).unwrap();
            }
            stream
        })
        .collect();
    let out = daemon.motionctl(&["--json", "stop"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let reply: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(reply, json!({"ok": true}));
    // `status` is answered too, and shows the motion stopping or stopped.
    let out = daemon.motionctl(&["--json", "status"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    let state = status["state"].as_str().unwrap();
    assert!(matches!(state, "stopping" | "holding"), "{status}");
    // What needs a slot waits for one: `play` from a new connection is `busy`, not queued.
    let out = daemon.motionctl(&["--json", "play", "slow"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let refused: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(refused["error"]["code"], "busy", "{refused}");
    // The connection that held a slot from before keeps it.
    client.wait_for("at rest", at_rest);
    drop(hogs);
}

#[test]
fn blank_lines_and_duplicate_keys_are_bad_requests() {
    let _turn = one_daemon_at_a_time();
    let daemon = Daemon::start(&[("bump.seq", bump_seq(0.3, 0.008))]);
    let mut client = daemon.client();
    client.send_raw(b"\n");
    let blank = client.reply();
    assert_eq!(blank["error"]["code"], "bad_request", "{blank}");
    client.send_raw(b"   \r\n");
    assert_eq!(client.reply()["error"]["code"], "bad_request");
    client.send_raw(b"{\"cmd\":\"play\",\"motion\":\"bump\",\"speed\":1,\"speed\":2}\n");
    let twice = client.reply();
    assert_eq!(twice["error"]["code"], "bad_request", "{twice}");
    assert!(
        twice["error"]["message"]
            .as_str()
            .unwrap()
            .contains("\"speed\""),
        "{twice}"
    );
    // Nothing was played.
    assert!(at_rest(&client.status()));
}
