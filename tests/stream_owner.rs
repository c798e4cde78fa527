//! Who owns a stream, with two real clients on a daemon's control socket (simulated backend): a
//! stream belongs to the connection that opened it. Another connection's chunks, close and open
//! are `not_owner`, naming whose stream it is and how the slot becomes free; the owner's
//! connection going away closes it (the path brakes past its last row, as when starved); a
//! `stop` ends it and its owner is told; a stream's first chunk does not take over a motion it
//! did not start. Nothing asserts on wall time: the waits are liveness bounds.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

use std::sync::{Mutex, MutexGuard, PoisonError};

use serde_json::{Value, json};

mod daemon_harness;
use daemon_harness::{Client, Daemon, at_rest, bump_seq};

/// A long horizon: a loaded machine's pauses never make these chunks `late`.
fn open() -> Value {
    json!({"cmd":"stream_open","joints":["base_yaw"],"horizon_s":1.0})
}

fn chunk(seq: u64, at: f64) -> Value {
    json!({"cmd":"stream_chunk","seq":seq,"positions":[[at],[at + 0.01],[at + 0.02]]})
}

fn accepted(client: &mut Client, request: Value) -> Value {
    let reply = client.request(request);
    assert_eq!(reply["ok"], true, "{reply}");
    reply
}

/// Asserts `reply` is `not_owner` and its message says each of `says`; the message.
fn not_owner(reply: &Value, says: &[&str]) -> String {
    assert_eq!(reply["error"]["code"], "not_owner", "{reply}");
    let message = reply["error"]["message"].as_str().unwrap().to_string();
    for s in says {
        assert!(message.contains(s), "{s:?} not in {message}");
    }
    message
}

/// One daemon (and its real-time loop) at a time on a small machine.
fn one_daemon_at_a_time() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    TURN.lock().unwrap_or_else(PoisonError::into_inner)
}

fn streams(status: &Value) -> &Vec<Value> {
    static NONE: Vec<Value> = Vec::new();
    status["streams"].as_array().unwrap_or(&NONE)
}

#[test]
fn a_stream_belongs_to_the_connection_that_opened_it() {
    let _turn = one_daemon_at_a_time();
    let daemon = Daemon::start(&[]);
    let mut a = daemon.client();
    let mut b = daemon.client();
    accepted(&mut a, open());
    accepted(&mut a, chunk(1, 0.0));
    // The outside tester's case: B's open no longer replaces A's stream, and neither B's chunks
    // nor its close reach it; each refusal names A's connection and what frees the slot.
    let pid = std::process::id().to_string();
    let refusal = not_owner(
        &b.request(open()),
        &[
            "stream_open: the stream for the whole robot belongs to another connection",
            &format!("pid {pid}, connection "),
            "opened it",
            "stream_close",
            "motionctl stop",
        ],
    );
    not_owner(
        &b.request(chunk(1, -0.3)),
        &[
            "stream_chunk: the stream for the whole robot",
            "do not feed",
        ],
    );
    not_owner(
        &b.request(json!({"cmd":"stream_close"})),
        &["stream_close: the stream for the whole robot"],
    );
    // A's stream goes on as A sends it: seq 2 follows seq 1, and nothing of B's was counted.
    let second = accepted(&mut a, chunk(2, 0.03));
    assert_eq!(second["seq"], 2);
    let status = a.status();
    let [stream] = streams(&status).as_slice() else {
        panic!("one stream: {status}")
    };
    assert_eq!(stream["accepted"], 2, "{stream}");
    assert_eq!(stream["seq"], 2, "{stream}");
    assert_eq!(stream["owner"]["pid"].to_string(), pid, "{stream}");
    let connection = stream["owner"]["connection"].as_u64().unwrap();
    assert!(
        refusal.contains(&format!("connection {connection})")),
        "{refusal}"
    );

    // A's connection goes away: its stream closes, the path brakes to rest past its last row,
    // and the slot is free for B.
    drop(a);
    let rest = b.wait_for("A's stream closed and the robot at rest", |s| {
        streams(s).is_empty() && at_rest(s)
    });
    assert_eq!(rest["limit_violations"], 0, "{rest}");
    assert_eq!(rest["faults"], json!([]), "{rest}");
    accepted(&mut b, open());
    accepted(&mut b, chunk(1, 0.0));
    let status = b.status();
    let [stream] = streams(&status).as_slice() else {
        panic!("one stream: {status}")
    };
    assert!(stream["owner"]["connection"].as_u64().unwrap() > connection);
}

#[test]
fn a_stop_ends_a_held_stream_and_its_owner_is_told() {
    let _turn = one_daemon_at_a_time();
    let daemon = Daemon::start(&[]);
    let mut a = daemon.client();
    let mut b = daemon.client();
    accepted(&mut a, open());
    not_owner(&b.request(open()), &["stream_open"]);
    // Nothing moves (A sent no chunk), yet the stop ends A's stream: the operator's way to free
    // a slot a stuck client holds.
    accepted(&mut b, json!({"cmd":"stop"}));
    accepted(&mut b, open());
    accepted(&mut b, chunk(1, 0.0));
    // A learns that its stream ended and that another connection holds the slot now.
    not_owner(
        &a.request(chunk(1, 0.0)),
        &[
            "belongs to another connection",
            "this connection's stream there had ended (a stop ended it) before it opened",
        ],
    );
    // The owner closes its own stream: the rows accepted play out; then A may open again.
    let report = accepted(&mut b, json!({"cmd":"stream_close"}));
    assert_eq!(report["accepted"], 1, "{report}");
    accepted(&mut a, open());
}

#[test]
fn a_streams_first_chunk_does_not_take_over_a_playing_motion() {
    let _turn = one_daemon_at_a_time();
    let daemon = Daemon::start(&[("long.seq", bump_seq(20.0, 0.05))]);
    let mut client = daemon.client();
    accepted(&mut client, json!({"cmd":"play","motion":"long"}));
    accepted(&mut client, open());
    let refused = client.request(chunk(1, 0.0));
    assert_eq!(refused["error"]["code"], "refused", "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("a stream does not take over a motion it did not start")
            && message.contains("motionctl stop"),
        "{message}"
    );
    let status = client.status();
    assert_eq!(status["motion"], "long", "{status}");
    // The stop ends the motion and the open stream; a fresh stream starts from rest.
    accepted(&mut client, json!({"cmd":"stop"}));
    client.wait_for("at rest", at_rest);
    let ended = client.request(chunk(1, 0.0));
    assert_eq!(ended["error"]["code"], "refused", "{ended}");
    accepted(&mut client, open());
    accepted(&mut client, chunk(1, 0.0));
}
