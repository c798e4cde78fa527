//! Who owns a stream, with two real clients on a daemon's control socket (simulated backend): a
//! stream belongs to the connection that opened it. Another connection's chunks, close and open
//! are `not_owner`, naming whose stream it is and how the slot becomes free; the owner's
//! connection going away closes it (the path brakes past its last row, as when starved); a
//! `stop` ends it and its owner is told; a stream's first chunk does not take over a motion it
//! did not start. Nothing asserts on wall time: the waits are liveness bounds.
//!
//! Then every mode of a slot × the stream requests of the owner and of another client, as
//! rehearsals (`client:` steps, manual clock): each reply is the one the rules give, and every
//! commanded setpoint stays inside the limits.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};

use motiond::rehearse::{Rehearsal, Script};
use motiond::session::{Robot, RobotSpec};
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

// ---------------------------------------------------------------------------------------------
// Modes × requests, rehearsed.

/// Client 1's stream of base_yaw, whose rows play from 0.4 s to 1.1 s.
macro_rules! stream_1 {
    () => {
        "- {at: 0.1, request: {cmd: stream_open, joints: [base_yaw], horizon_s: 0.1}}\n\
         - {at: 0.3, request: {cmd: stream_chunk, seq: 1, t0: 0.3, dt: 0.1, positions: \
           [[0.0], [0.01], [0.02], [0.03], [0.04], [0.05], [0.06], [0.07]]}}\n"
    };
}

/// Steps that bring the whole robot's slot into a mode by 1 s (client 1 owns any stream; client
/// 3 is an operator), and the mode's name.
const MODES: [(&str, &str); 10] = [
    ("idle", ""),
    (
        "playing",
        "- {at: 0.1, request: {cmd: play, motion: wave}}\n",
    ),
    (
        "paused",
        "- {at: 0.1, request: {cmd: play, motion: wave}}\n\
         - {at: 0.5, request: {cmd: pause}}\n",
    ),
    (
        "teach-in",
        "- {at: 0.1, request: {cmd: record, motion: tk}}\n\
         - {at: 3, client: 3, request: {cmd: record, stop: true}}\n",
    ),
    (
        "waiting",
        "- {at: 0.1, request: {cmd: stream_open, joints: [base_yaw], horizon_s: 0.1}}\n",
    ),
    ("streaming", stream_1!()),
    (
        "starved",
        "- {at: 0.1, request: {cmd: stream_open, joints: [base_yaw], horizon_s: 0.1}}\n\
         - {at: 0.3, request: {cmd: stream_chunk, seq: 1, positions: [[0.0], [0.01], [0.02]]}}\n",
    ),
    (
        "stopped",
        concat!(
            stream_1!(),
            "- {at: 0.5, client: 3, request: {cmd: stop}}\n"
        ),
    ),
    (
        "closed",
        concat!(stream_1!(), "- {at: 0.5, request: {cmd: stream_close}}\n"),
    ),
    (
        "disconnected",
        concat!(stream_1!(), "- {at: 0.5, disconnect: 1}\n"),
    ),
];

/// The requests tried at 1 s, in order: (client, request).
const PROBES: [(u64, &str); 5] = [
    (
        2,
        "{cmd: stream_chunk, seq: 1, positions: [[0.0], [0.01], [0.02]]}",
    ),
    (2, "{cmd: stream_close}"),
    (2, "{cmd: stream_open, joints: [base_yaw], horizon_s: 0.1}"),
    (
        1,
        "{cmd: stream_chunk, seq: 5, positions: [[0.03], [0.03], [0.03]]}",
    ),
    (
        2,
        "{cmd: stream_chunk, seq: 2, positions: [[0.0], [0.01], [0.02]]}",
    ),
];

/// Per mode, what each probe gets (`ok` or the error code): another client's chunk and close,
/// its open, then the former owner's chunk, then the other client's first chunk.
const EXPECTED: [(&str, [&str; 5]); 10] = [
    // No stream: nothing to feed or close; the open takes the free slot (and a stream of client 2
    // is client 2's alone); a first chunk starts from rest.
    ("idle", ["refused", "refused", "ok", "not_owner", "ok"]),
    // A library motion plays or is paused, or a teach-in records: a stream's first chunk does
    // not take over.
    (
        "playing",
        ["refused", "refused", "ok", "not_owner", "refused"],
    ),
    (
        "paused",
        ["refused", "refused", "ok", "not_owner", "refused"],
    ),
    (
        "teach-in",
        ["refused", "refused", "ok", "not_owner", "refused"],
    ),
    // Client 1's stream, open, streaming or starved: client 2 gets nothing of it, client 1's
    // chunks go on (from rest, into the rows, resuming).
    (
        "waiting",
        ["not_owner", "not_owner", "not_owner", "ok", "not_owner"],
    ),
    (
        "streaming",
        ["not_owner", "not_owner", "not_owner", "ok", "not_owner"],
    ),
    (
        "starved",
        ["not_owner", "not_owner", "not_owner", "ok", "not_owner"],
    ),
    // A stop ended client 1's stream: client 2 may open one, and client 1 is told.
    (
        "stopped",
        ["not_owner", "not_owner", "ok", "not_owner", "ok"],
    ),
    // Closed by its owner, or its owner's connection went away: the slot is free, and a new
    // stream's first chunk may splice into what the old one's rows still play.
    ("closed", ["refused", "refused", "ok", "not_owner", "ok"]),
    (
        "disconnected",
        ["refused", "refused", "ok", "not_owner", "ok"],
    ),
];

fn demo_arm() -> Robot {
    let spec = RobotSpec {
        config: Some(daemon_harness::repo().join("config/motiond.yaml")),
        ..RobotSpec::default()
    };
    Robot::load(&spec).unwrap().unwrap()
}

#[test]
fn every_mode_answers_the_owner_and_the_others_by_the_rules() {
    let mut table = Vec::new();
    for ((mode, steps), (expected_mode, expected)) in MODES.iter().zip(EXPECTED) {
        assert_eq!(*mode, expected_mode);
        // The run ends at 4 s whatever plays (a paused motion never comes to rest).
        let mut script = format!("end: 4\nsteps:\n{steps}");
        for (i, (client, request)) in PROBES.iter().enumerate() {
            let at = 1.0 + 0.01 * i as f64;
            script.push_str(&format!(
                "- {{at: {at}, client: {client}, request: {request}}}\n"
            ));
        }
        let robot = demo_arm();
        let script = Script::parse(&script, Path::new("modes.yaml"), &robot.joints)
            .unwrap_or_else(|e| panic!("{mode}: {e}"));
        let report = Rehearsal::new(robot, script).unwrap().run();
        assert_eq!(report.result.limit_violations, 0, "{mode}");
        assert_eq!(report.result.fault, None, "{mode}");
        // The probes' replies, in order (a mode's own steps may come after them).
        let probes: Vec<Value> = report
            .steps
            .iter()
            .filter(|s| (1.0..1.1).contains(&s.step.at_s))
            .map(|s| s.reply_json().unwrap())
            .collect();
        let codes: Vec<&str> = probes
            .iter()
            .map(|reply| match reply["ok"] == true {
                true => "ok",
                false => reply["error"]["code"].as_str().unwrap(),
            })
            .collect();
        let replies: Vec<Value> = report.steps.iter().filter_map(|s| s.reply_json()).collect();
        assert_eq!(codes, expected, "{mode}: {replies:#?}");
        // Every refusal of another connection says whose stream it is; the former owner's after
        // a stop says its stream had ended.
        for (reply, code) in probes.iter().zip(&codes) {
            let message = reply["error"]["message"].as_str().unwrap_or("");
            if *code == "not_owner" {
                assert!(
                    message.contains("belongs to another connection"),
                    "{mode}: {message}"
                );
            }
        }
        if *mode == "stopped" {
            let message = probes[3]["error"]["message"].as_str().unwrap();
            assert!(message.contains("had ended (a stop ended it)"), "{message}");
        }
        table.push(format!("{mode:>12}: {}", codes.join(" ")));
    }
    println!("{}", table.join("\n"));
}
