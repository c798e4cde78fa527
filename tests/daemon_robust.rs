//! End to end: the daemon under an operator's bad day — a flood of idle and half-written
//! connections, ambiguous requests, files replaced or odd files in the library, recovery back to
//! back. Nothing here asserts on wall time; hang guards are generous liveness bounds.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

mod daemon_harness;
use daemon_harness::{Client, DEMO_JOINTS, Daemon, RATE_HZ, at_rest, bump_seq, repo, rise_seq};

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

/// The demo arm's configuration for a daemon in `dir` serving `dir/motions`, with `robot_extra`
/// indented under `robot:` and `motion_extra` under `motion:`.
fn config(dir: &tempfile::TempDir, robot_extra: &str, motion_extra: &str) -> String {
    format!(
        "robot:\n  skel: {skel}\n  joints: [{joints}]\n{robot_extra}\
         motion:\n  library: {library}\n{motion_extra}\
         control:\n  rate_hz: {RATE_HZ}\n\
         rt:\n  lock_memory: false\n  max_late_ms: 1000\n\
         backend: sim\n\
         daemon:\n  socket: {socket}\n  shutdown_timeout_s: 5\n  watchdog: false\n",
        skel = repo().join("config/demo-arm.skel").display(),
        joints = DEMO_JOINTS.join(", "),
        library = dir.path().join("motions").display(),
        socket = Daemon::socket_in(dir).display(),
    )
}

/// A temporary folder with `motions/` holding `files`.
fn library(files: &[(&str, String)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("motions")).unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join("motions").join(name), text).unwrap();
    }
    dir
}

/// `list` once nothing is loading any more, as a map from name to entry.
fn loaded(client: &mut Client) -> serde_json::Map<String, Value> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let list = client.request(json!({"cmd":"list"}));
        assert_eq!(list["ok"], true, "{list}");
        if list["loading"] == 0 {
            return list["motions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| (m["name"].as_str().unwrap().to_owned(), m.clone()))
                .collect();
        }
        assert!(Instant::now() < deadline, "still loading: {list}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn odd_library_files_are_reported_and_the_daemon_comes_up() {
    let _turn = one_daemon_at_a_time();
    let bump = bump_seq(0.3, 0.008);
    let rows = bump
        .lines()
        .filter(|l| l.trim_start().starts_with("- ["))
        .count();
    let cut_at_a_line = bump.replace(
        &format!("numFrames: {rows}"),
        &format!("numFrames: {}", rows + 40),
    );
    let zero_filled = format!("{}{}", &bump[..bump.len() / 2], "\0".repeat(4096));
    let dir = library(&[
        ("wave.seq", bump.clone()),
        ("cut.seq", cut_at_a_line),
        ("zeroed.seq", zero_filled),
        ("long.seq", format!("{bump}{}", "# padding\n".repeat(2000))),
    ]);
    let motions = dir.path().join("motions");
    std::os::unix::fs::symlink("/dev/zero", motions.join("zero.seq")).unwrap();
    std::fs::write(dir.path().join("outside.seq"), &bump).unwrap();
    std::os::unix::fs::symlink(dir.path().join("outside.seq"), motions.join("out.seq")).unwrap();
    let fifo = std::ffi::CString::new(motions.join("x.seq").into_os_string().into_encoded_bytes())
        .unwrap();
    // SAFETY: mkfifo reads a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    // 16 KiB: wave.seq fits, long.seq (padded) does not.
    let text = config(&dir, "", "  max_file_mib: 0.015625\n");
    let daemon = Daemon::start_config(dir, &text, &[]);
    let mut client = daemon.client();
    let list = loaded(&mut client);
    let error = |name: &str| {
        let entry = &list[name];
        assert_eq!(entry["ok"], false, "{entry}");
        entry["error"].as_str().unwrap().to_owned()
    };
    assert_eq!(list["wave"]["ok"], true, "{}", list["wave"]);
    assert!(error("x").contains("a FIFO"), "{}", error("x"));
    assert!(
        error("zero").contains("outside the library folder"),
        "{}",
        error("zero")
    );
    assert!(
        error("out").contains("outside the library folder"),
        "{}",
        error("out")
    );
    assert!(
        error("long").contains("motion.max_file_mib"),
        "{}",
        error("long")
    );
    assert!(error("zeroed").contains("NUL byte"), "{}", error("zeroed"));
    assert!(
        error("cut").contains(&format!("numFrames is {}", rows + 40)),
        "{}",
        error("cut")
    );
    let refused = client.request(json!({"cmd":"play","motion":"cut"}));
    assert_eq!(refused["error"]["code"], "invalid_motion", "{refused}");
    assert_eq!(
        client.request(json!({"cmd":"play","motion":"wave"}))["ok"],
        true
    );
    client.wait_for("done", at_rest);
}

#[test]
fn the_socket_answers_while_the_library_loads() {
    let _turn = one_daemon_at_a_time();
    // Ten minutes at 100 Hz: proving it at 1 kHz takes a while, so the first answers come
    // while it loads (and whenever they come, they are consistent).
    let dir = library(&[
        ("long.seq", bump_seq(600.0, 0.008)),
        ("wave.seq", bump_seq(0.3, 0.008)),
    ]);
    let text = config(&dir, "", "");
    let daemon = Daemon::start_loading(dir, &text, &[]);
    let mut client = daemon.client();
    let list = client.request(json!({"cmd":"list"}));
    let still_loading: Vec<&Value> = list["motions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["loading"] == true)
        .collect();
    assert_eq!(list["loading"], still_loading.len(), "{list}");
    for entry in &still_loading {
        assert_eq!(entry["ok"], false);
        let reply = client.request(json!({"cmd":"play","motion":entry["name"]}));
        // It may have finished loading in between.
        if reply["ok"] == false {
            assert_eq!(reply["error"]["code"], "refused", "{reply}");
            assert!(
                reply["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("still loading")
            );
        } else {
            client.request(json!({"cmd":"quick_stop"}));
        }
    }
    eprintln!(
        "{} of 2 motions loading at the first list",
        still_loading.len()
    );
    let list = loaded(&mut client);
    assert_eq!(list["long"]["ok"], true, "{}", list["long"]);
}

#[test]
fn sighup_reloads_the_library_and_the_daemon_keeps_serving() {
    let _turn = one_daemon_at_a_time();
    let daemon = Daemon::start(&[("wave.seq", bump_seq(0.3, 0.008))]);
    let mut client = daemon.client();
    assert!(!loaded(&mut client).contains_key("new"));
    std::fs::write(
        daemon.dir.path().join("motions/new.seq"),
        bump_seq(0.4, 0.008),
    )
    .unwrap();
    std::fs::remove_file(daemon.dir.path().join("motions/wave.seq")).unwrap();
    // SAFETY: signalling our own child by its pid.
    assert_eq!(unsafe { libc::kill(daemon.pid() as i32, libc::SIGHUP) }, 0);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !loaded(&mut client).contains_key("new") {
        assert!(Instant::now() < deadline, "SIGHUP did not reload");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!loaded(&mut client).contains_key("wave"));
    assert_eq!(
        client.request(json!({"cmd":"play","motion":"new"}))["ok"],
        true
    );
    client.wait_for("done", at_rest);
    let (code, log) = daemon.signal_and_wait(&[libc::SIGTERM]);
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("SIGHUP: reloading"), "{log}");
}

#[test]
fn clear_fault_enable_and_play_back_to_back() {
    let _turn = one_daemon_at_a_time();
    let dir = library(&[("slow.seq", bump_seq(3.0, 1.0))]);
    // The simulated elbow lags up to ~5e-4 rad behind in this motion: it faults, the robot at
    // rest does not.
    let text = config(
        &dir,
        "  limits:\n    elbow_pitch: {following_error: 0.0001}\n",
        "",
    );
    let daemon = Daemon::start_config(dir, &text, &[]);
    let mut client = daemon.client();
    loaded(&mut client);
    assert_eq!(
        client.request(json!({"cmd":"play","motion":"slow"}))["ok"],
        true
    );
    let fault = client.wait_for("faulted", |s| s["state"] == "fault");
    assert_eq!(fault["faults"][0]["joint"], "elbow_pitch", "{fault}");
    // All three in one write: each is answered only once it has taken effect, so the next
    // finds the state it needs.
    client.send_raw(
        b"{\"cmd\":\"clear_fault\"}\n{\"cmd\":\"enable\"}\n{\"cmd\":\"play\",\"motion\":\"slow\"}\n",
    );
    for cmd in ["clear_fault", "enable", "play"] {
        let reply = client.reply();
        assert_eq!(reply["ok"], true, "{cmd}: {reply}");
    }
    client.wait_for("faulted again", |s| s["state"] == "fault");
    // One step back: clear-fault and enable, one reply.
    let out = daemon.motionctl(&["--json", "recover"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        serde_json::from_slice::<Value>(&out.stdout).unwrap(),
        json!({"ok": true})
    );
    let holding = client.status();
    assert_eq!(holding["state"], "holding", "{holding}");
    assert_eq!(holding["faults"], json!([]), "{holding}");
}

#[test]
fn recover_goes_to_a_named_pose_in_one_step() {
    let _turn = one_daemon_at_a_time();
    let daemon = Daemon::start(&[("rise.seq", rise_seq(1.0, 0.2))]);
    let mut client = daemon.client();
    let played = client.request(json!({"cmd":"play","motion":"rise"}));
    assert_eq!(played["ok"], true, "{played}");
    let away = client.wait_for("at the end of rise", |s| {
        at_rest(s) && s["positions"]["base_yaw"].as_f64().unwrap() > 0.19
    });
    assert_eq!(client.request(json!({"cmd":"disable"}))["ok"], true);
    client.wait_for("disabled", |s| s["state"] == "disabled");
    let out = daemon.motionctl(&["--json", "recover", "--pose", "rise"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let reply: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(reply["pose"], "rise", "{reply}");
    assert!(reply["approach_s"].as_f64().unwrap() > 0.0, "{reply}");
    let back = client.wait_for("back at rise's first pose", |s| {
        at_rest(s) && s["commanded"]["base_yaw"].as_f64().unwrap().abs() < 1e-9
    });
    assert_eq!(back["faults"], json!([]), "{away} → {back}");
    // A play right after the recovery starts from the commanded pose.
    assert_eq!(
        client.request(json!({"cmd":"play","motion":"rise"}))["ok"],
        true
    );
    client.wait_for("done", at_rest);
}
