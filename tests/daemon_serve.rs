//! End to end: `motiond serve` on the simulated backend with a temporary config, library and
//! socket, driven by `motionctl` and by raw socket clients.
//!
//! Motions here are short (well under a second) so the suite stays fast; nothing asserts on wall
//! time — progress and positions are compared in loop ticks.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

use std::process::Command;
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde_json::Value;

mod daemon_harness;
use daemon_harness::{DEMO_JOINTS, Daemon, RATE_HZ, at_rest, bump_seq, rise_seq};

/// Each test starts a daemon whose loop runs under SCHED_FIFO where permitted. Several at once on
/// a 2-core machine would compete for the CPUs with each other, so the tests of this file take
/// turns.
fn one_daemon_at_a_time() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    TURN.lock().unwrap_or_else(PoisonError::into_inner)
}

#[test]
fn play_shows_progress_then_finishes() {
    let _turn = one_daemon_at_a_time();
    let daemon = Daemon::start(&[("bump.seq", bump_seq(0.6, 0.02))]);
    let mut client = daemon.client();
    let out = daemon.motionctl(&["--json", "play", "bump"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let reply: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(reply["ok"], true);
    assert_eq!(reply["motion"], "bump");
    let playing = client.wait_for("playing", |s| {
        s["state"] == "playing" && s["progress"].as_f64().unwrap() > 0.0
    });
    assert_eq!(playing["motion"], "bump");
    let positions = playing["positions"].as_object().unwrap();
    assert_eq!(positions.len(), 6);
    assert!(positions.contains_key("elbow_pitch"));
    let done = client.wait_for("done", at_rest);
    assert_eq!(done["faults"], serde_json::json!([]));
    // The arm ends where the motion ends: back at the start pose.
    let elbow = done["positions"]["elbow_pitch"].as_f64().unwrap();
    assert!(elbow.abs() < 1e-2, "{done}");

    let out = daemon.motionctl(&["status"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("state") && text.contains("elbow_pitch"),
        "{text}"
    );
    let out = daemon.motionctl(&["play", "bump", "--watch"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(String::from_utf8(out.stdout).unwrap().contains("bump"));
}

#[test]
fn stop_mid_motion_decelerates_without_a_jump() {
    let _turn = one_daemon_at_a_time();
    let daemon = Daemon::start(&[("slow.seq", bump_seq(3.0, 1.0))]);
    let mut client = daemon.client();
    assert_eq!(
        client.request(serde_json::json!({"cmd":"play","motion":"slow"}))["ok"],
        true
    );
    client.wait_for("well into the motion", |s| {
        s["state"] == "playing" && s["progress"].as_f64().unwrap() > 0.3
    });
    assert_eq!(
        client.request(serde_json::json!({"cmd":"stop"}))["ok"],
        true
    );
    // Every status carries the tick it was taken at: between two of them no joint may move
    // further than its velocity limit allows (the trace has no jump).
    let vmax = [2.0, 1.8, 2.0, 3.0, 4.0, 0.05];
    let mut previous: Option<Value> = None;
    let end = client.wait_for("at rest", |s| {
        if let Some(p) = &previous {
            let dt = (s["tick"].as_u64().unwrap() - p["tick"].as_u64().unwrap()) as f64 / RATE_HZ;
            for (name, v) in DEMO_JOINTS.iter().zip(vmax) {
                let a = p["commanded"][name].as_f64().unwrap();
                let b = s["commanded"][name].as_f64().unwrap();
                assert!(
                    (b - a).abs() <= v * dt + 1e-6,
                    "{name} jumped {a} → {b} in {dt} s"
                );
            }
        }
        previous = Some(s.clone());
        at_rest(s)
    });
    assert_eq!(end["faults"], serde_json::json!([]));
}

#[test]
fn bad_requests_get_errors_and_the_daemon_keeps_serving() {
    let _turn = one_daemon_at_a_time();
    let daemon = Daemon::start(&[("bump.seq", bump_seq(0.3, 0.008))]);
    let mut client = daemon.client();
    client.send_raw(b"this is not json\n");
    assert_eq!(client.reply()["error"]["code"], "invalid_json");
    client.send_raw(&vec![b'{'; 70 * 1024]);
    client.send_raw(b"\n");
    assert_eq!(client.reply()["error"]["code"], "too_large");
    for (request, code) in [
        (r#"{"cmd":"dance"}"#, "unknown_command"),
        (r#"{"cmd":"stop","now":1}"#, "unknown_field"),
        (r#"{"cmd":"play"}"#, "bad_request"),
        (r#"{"cmd":"play","motion":"../motiond"}"#, "unknown_motion"),
        (r#"{"cmd":"play","motion":"nope"}"#, "unknown_motion"),
        (
            r#"{"cmd":"play","motion":"bump","speed":-2}"#,
            "bad_request",
        ),
        (r#"{"cmd":"resume"}"#, "refused"),
    ] {
        client.send_raw(format!("{request}\n").as_bytes());
        let reply = client.reply();
        assert_eq!(reply["error"]["code"], code, "{request} → {reply}");
    }
    // Half a request, then the client hangs up its sending side.
    let mut half = daemon.client();
    half.send_raw(br#"{"cmd":"sta"#);
    half.writer.shutdown(std::net::Shutdown::Write).unwrap();
    assert_eq!(half.reply()["error"]["code"], "incomplete");
    // The first connection is still usable, and so is a new one.
    assert_eq!(client.status()["ok"], true);
    assert_eq!(daemon.client().status()["ok"], true);
    // motionctl maps the answers to its exit codes.
    assert_eq!(daemon.motionctl(&["play", "nope"]).status.code(), Some(1));
    let gone = Command::new(env!("CARGO_BIN_EXE_motionctl"))
        .args(["--socket", "/nonexistent/motiond.sock", "status"])
        .output()
        .unwrap();
    assert_eq!(gone.status.code(), Some(3));
}

#[test]
fn a_broken_file_is_listed_and_the_others_are_served() {
    let _turn = one_daemon_at_a_time();
    let daemon = Daemon::start(&[
        ("good.seq", bump_seq(0.3, 0.008)),
        (
            "broken.seq",
            "type: CompositeSeq\nframeRate: [\n".to_string(),
        ),
        // Crosses elbow_pitch's position limit (±2.4 rad): refused by the proof.
        ("too_far.seq", bump_seq(10.0, 3.0)),
        ("one_way.seq", rise_seq(0.5, 0.01)),
    ]);
    let mut client = daemon.client();
    let list = client.request(serde_json::json!({"cmd":"list"}));
    let motions = list["motions"].as_array().unwrap();
    let by_name = |name: &str| motions.iter().find(|m| m["name"] == name).unwrap().clone();
    assert_eq!(by_name("good")["ok"], true);
    assert!(by_name("good")["duration_s"].as_f64().unwrap() > 0.2);
    assert_eq!(by_name("broken")["ok"], false);
    assert!(
        by_name("broken")["error"]
            .as_str()
            .unwrap()
            .contains("broken.seq:")
    );
    assert_eq!(by_name("too_far")["ok"], false);
    let reply = client.request(serde_json::json!({"cmd":"play","motion":"broken"}));
    assert_eq!(reply["error"]["code"], "invalid_motion");
    // Only a motion that ends where it starts can loop.
    let reply = client.request(serde_json::json!({"cmd":"play","motion":"one_way","loop":true}));
    assert_eq!(reply["error"]["code"], "refused", "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cannot loop")
    );
    let reply = client.request(serde_json::json!({"cmd":"play","motion":"good"}));
    assert_eq!(reply["ok"], true, "{reply}");
    client.wait_for("done", |s| s["state"] != "approaching" && at_rest(s));

    // Reload picks up a repaired file and keeps serving.
    std::fs::write(
        daemon.dir.path().join("motions/broken.seq"),
        bump_seq(0.3, 0.008),
    )
    .unwrap();
    let reply = client.request(serde_json::json!({"cmd":"reload"}));
    assert_eq!(reply["ok"], true, "{reply}");
    let out = daemon.motionctl(&["list"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("broken") && text.contains("too_far"),
        "{text}"
    );
    assert_eq!(
        client.request(serde_json::json!({"cmd":"play","motion":"broken"}))["ok"],
        true
    );
}

#[test]
fn fifty_clients_are_all_answered_during_playback() {
    let _turn = one_daemon_at_a_time();
    let daemon = Daemon::start(&[("bump.seq", bump_seq(1.0, 0.1))]);
    let mut client = daemon.client();
    let reply = client.request(serde_json::json!({"cmd":"play","motion":"bump","loop":true}));
    assert_eq!(reply["ok"], true, "{reply}");
    let answered = daemon_harness::flood(&daemon.socket, 50, 200);
    assert_eq!(answered, 50 * 200);
    // The loop kept playing throughout; whether the clients cost it any overruns is measured by
    // `cargo bench --bench daemon` (a timing comparison has no place in a test).
    assert_eq!(client.status()["state"], "playing");
    assert_eq!(
        client.request(serde_json::json!({"cmd":"stop"}))["ok"],
        true
    );
    client.wait_for("at rest", at_rest);
}

#[test]
fn sigterm_mid_motion_stops_then_exits_zero() {
    let _turn = one_daemon_at_a_time();
    let daemon = Daemon::start(&[("slow.seq", bump_seq(3.0, 1.0))]);
    let socket = daemon.socket.clone();
    let mut client = daemon.client();
    let reply = client.request(serde_json::json!({"cmd":"play","motion":"slow"}));
    assert_eq!(reply["ok"], true, "{reply}");
    client.wait_for("moving", |s| {
        s["state"] == "playing" && s["progress"].as_f64().unwrap() > 0.2
    });
    let (code, log) = daemon.signal_and_wait(&[libc::SIGTERM]);
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("stopped at rest"), "{log}");
    assert!(!socket.exists(), "the socket file was left behind");
}

#[test]
fn a_fault_is_reported_with_its_own_exit_code() {
    let _turn = one_daemon_at_a_time();
    // The simulated drives fail every write from tick 200 on.
    let daemon = Daemon::start_with(
        &[("bump.seq", bump_seq(0.3, 0.008))],
        "sim:\n  fault: {kind: error, at_tick: 200, dof: wrist_roll}\n",
        &[],
    );
    let mut client = daemon.client();
    let status = client.wait_for("faulted", |s| s["state"] == "fault");
    let fault = &status["faults"][0];
    assert_eq!(fault["kind"], "drive_fault", "{status}");
    assert_eq!(fault["joint"], "wrist_roll", "{status}");
    let out = daemon.motionctl(&["status"]);
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert!(
        String::from_utf8(out.stderr)
            .unwrap()
            .contains("drive_fault")
    );
    let reply = client.request(serde_json::json!({"cmd":"play","motion":"bump"}));
    assert_eq!(reply["error"]["code"], "fault", "{reply}");
    assert_eq!(daemon.motionctl(&["play", "bump"]).status.code(), Some(4));
    assert_eq!(daemon.motionctl(&["clear-fault"]).status.code(), Some(0));
}

#[test]
fn systemd_hears_ready_watchdog_and_stopping() {
    let _turn = one_daemon_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let notify_path = dir.path().join("notify");
    let systemd = std::os::unix::net::UnixDatagram::bind(&notify_path).unwrap();
    systemd
        .set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    let daemon = Daemon::start_with(
        &[],
        "",
        &[
            ("NOTIFY_SOCKET", notify_path.display().to_string()),
            ("WATCHDOG_USEC", "100000".to_string()),
        ],
    );
    let next = || {
        let mut buf = [0u8; 256];
        let n = systemd.recv(&mut buf).unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    assert_eq!(next(), "READY=1");
    // Pings keep coming while the loop ticks.
    for _ in 0..3 {
        assert_eq!(next(), "WATCHDOG=1");
    }
    let (code, log) = daemon.signal_and_wait(&[libc::SIGINT]);
    assert_eq!(code, Some(0), "{log}");
    let mut rest = Vec::new();
    while let Ok(message) = systemd.set_nonblocking(true).and_then(|()| {
        let mut buf = [0u8; 256];
        systemd
            .recv(&mut buf)
            .map(|n| String::from_utf8_lossy(&buf[..n]).into_owned())
    }) {
        rest.push(message);
    }
    assert!(rest.iter().any(|m| m == "STOPPING=1"), "{rest:?}");
}

#[test]
fn a_second_signal_stops_quickly() {
    let _turn = one_daemon_at_a_time();
    let daemon = Daemon::start(&[("slow.seq", bump_seq(3.0, 1.0))]);
    let mut client = daemon.client();
    let reply = client.request(serde_json::json!({"cmd":"play","motion":"slow"}));
    assert_eq!(reply["ok"], true, "{reply}");
    client.wait_for("moving fast", |s| {
        s["state"] == "playing" && s["progress"].as_f64().unwrap() > 0.3
    });
    // Two different signals, so the kernel cannot merge them into one.
    let (code, log) = daemon.signal_and_wait(&[libc::SIGTERM, libc::SIGINT]);
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("second signal: stopping quickly"), "{log}");
    assert!(log.contains("stopped quickly"), "{log}");
}

/// A configuration whose motion library does not exist (the SO-101 example served from the
/// checkout, where `motions` beside it is missing) stops the start with what to do.
#[test]
fn a_missing_library_says_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("motiond.yaml");
    std::fs::write(
        &config,
        format!(
            "robot:\n  model: {}\n  joints: [{}]\nbackend: sim\n",
            daemon_harness::repo()
                .join("config/demo-arm.skel")
                .display(),
            DEMO_JOINTS.join(", ")
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_motiond"))
        .args(["serve", "--config", config.to_str().unwrap(), "--dry-run"])
        .arg("--socket")
        .arg(dir.path().join("m.sock"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "{}:1:1: motion.library: {} (relative paths are resolved against {}, the folder of \
             {}): No such file or directory (os error 2); create the folder, or set motion.library",
            config.display(),
            dir.path().join("motions").display(),
            dir.path().display(),
            config.display(),
        )),
        "{err}"
    );
}
