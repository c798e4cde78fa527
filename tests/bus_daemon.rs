//! End to end through the daemon: `motiond serve` with the demo arm on a DYNAMIXEL bus whose far
//! end is a pseudo-terminal. The servos check CRCs and answer Sync Reads; a motion played over the
//! control socket reaches them as goals that equal the trajectory (built here from the same file
//! with the same settings); then the servos vanish mid-motion, the daemon reports the lost device
//! and keeps serving. The same through `motiond play`, which reports the fault and exits 1.
//!
//! The daemon runs in real time in a child process: a governor (`bus_peer::Governor`) pauses it
//! whenever the servos fall behind on the line, as a loaded machine would, so the line never
//! fills (no `queue_full` before the servos vanish) however long the peer waits for a core; the
//! pauses make ticks late, which the configuration tolerates (the bus is under test, not timing).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

mod bus_peer;
mod daemon_harness;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bus_peer::{Vanish, openpty};
use daemon_harness::{Client, DEMO_JOINTS, repo};
use motiond::trajectory::{ColumnMap, Cursor, JointSet, Options, Setpoint, build};
use serde_json::json;

/// 3 s out and back on the three servo joints of the arm; the wrists (velocity actuators) and the
/// gripper stay put.
fn motion_text() -> String {
    let frames = 301;
    let mut text = String::from(
        "type: CompositeSeq\ncontent: BodyMotion\nformatVersion: 2\nframeRate: 100\nnumFrames: 301\n\
         components:\n  - type: MultiValueSeq\n    content: JointDisplacement\n    numParts: 6\n    frames:\n",
    );
    for i in 0..frames {
        let x = 0.3 * (1.0 - (2.0 * std::f64::consts::PI * i as f64 / 300.0).cos()) / 2.0;
        text.push_str(&format!("      - [{x}, {}, {}, 0, 0, 0.01]\n", 0.5 * x, -x));
    }
    text
}

fn expected(skel: &Path, seq: &Path) -> Vec<[Setpoint; 6]> {
    let world = motiond::robot::skel::load(skel).unwrap();
    let joints = JointSet::from_world(&world, &[]).unwrap();
    let motion = motiond::motion::seq::load(seq).unwrap();
    let map = ColumnMap::by_name(&joints, &DEMO_JOINTS, 6).unwrap();
    let options = Options {
        rate_hz: 1000.0,
        ..Options::default()
    };
    let t = build(&joints, &motion, &map, &options).unwrap().trajectory;
    let mut cursor = Cursor::default();
    (0..t.ticks())
        .map(|k| {
            let mut out = [Setpoint::default(); 6];
            t.sample(&mut cursor, k, &mut out);
            out
        })
        .collect()
}

/// The demo arm on a DYNAMIXEL bus at the slave end of `pty`, a library with the motion, a socket
/// path: (config file, skel, motion file, socket).
fn setup(dir: &Path, device: &Path) -> (PathBuf, PathBuf, PathBuf, PathBuf) {
    let library = dir.join("motions");
    std::fs::create_dir(&library).unwrap();
    let seq = library.join("nod.seq");
    std::fs::write(&seq, motion_text()).unwrap();
    let skel = repo().join("config/demo-arm.skel");
    let socket = dir.join("control.sock");
    let config = format!(
        "robot:\n  skel: {skel}\n  joints: [{joints}]\n\
         motion:\n  library: {library}\n\
         control:\n  rate_hz: 1000\n\
         rt:\n  lock_memory: false\n  max_consecutive_overruns: 4000000000\n  max_late_ms: 3600000\n\
         backend: buses\n\
         buses:\n  - name: arm\n    transport: serial\n    device: {device}\n    baud: 4000000\n    \
         protocol: dynamixel\n    feedback_timeout_ms: 2000\n    joints:\n      \
         base_yaw: {{id: 1}}\n      shoulder_pitch: {{id: 2}}\n      elbow_pitch: {{id: 3}}\n      \
         wrist_pitch: {{id: 4}}\n      wrist_roll: {{id: 5}}\n      \
         gripper_slide: {{id: 6, counts_per_unit: 50000, zero_offset: 100}}\n\
         daemon:\n  socket: {socket}\n  watchdog: false\n",
        skel = skel.display(),
        joints = DEMO_JOINTS.join(", "),
        library = library.display(),
        device = device.display(),
        socket = socket.display(),
    );
    let config_path = dir.join("motiond.yaml");
    std::fs::write(&config_path, config).unwrap();
    (config_path, skel, seq, socket)
}

/// Servos at the demo arm's initial pose (the gripper at 0.01 m: 100 + 500 counts), vanishing
/// 1500 goal packets into the motion.
fn servos(master: std::fs::File) -> bus_peer::Peer {
    bus_peer::dynamixel(
        master,
        BTreeMap::from([
            (1, 2048),
            (2, 2048),
            (3, 2048),
            (4, 2048),
            (5, 2048),
            (6, 600),
        ]),
        Vanish::AfterMoving(1500),
    )
}

/// Every goal the servos received is a sample of the motion in tick order (holding before it is
/// sample 0; an overrun on a busy machine may skip samples, never reorder or invent one), and the
/// servos vanished mid-motion.
fn assert_goals_follow(log: &bus_peer::Log, skel: &Path, seq: &Path) {
    assert!(log.vanished);
    assert_eq!(log.crc_errors, 0);
    let samples = expected(skel, seq);
    let per_rad = 4096.0 / std::f64::consts::TAU;
    let counts = |sp: &[Setpoint; 6]| -> Vec<(u8, i32)> {
        let mut c: Vec<(u8, i32)> = (0..3)
            .map(|j| {
                (
                    j as u8 + 1,
                    (sp[j].position * per_rad).round() as i32 + 2048,
                )
            })
            .collect();
        c.push((6, (sp[5].position * 50000.0).round() as i32 + 100));
        c
    };
    let mut k = 0;
    for (i, goals) in log.goals.iter().enumerate() {
        let mut goals = goals.clone();
        goals.sort();
        while samples.get(k).is_some_and(|s| counts(s) != goals) {
            k += 1;
        }
        assert!(
            k < samples.len(),
            "goal packet {i} {goals:?} is no later sample"
        );
    }
    assert!(
        k > 300 && k + 100 < samples.len(),
        "vanished mid-motion at {k}"
    );
}

#[test]
fn play_on_dynamixel_servos_follows_the_trajectory_then_reports_the_vanished_bus() {
    let pty = openpty();
    let dir = tempfile::tempdir().unwrap();
    let (config, skel, seq, _) = setup(dir.path(), &pty.slave_path);
    let peer = servos(pty.master);
    let mut command = Command::new(env!("CARGO_BIN_EXE_motiond"));
    command
        .args(["play", "--config"])
        .arg(&config)
        .arg(&seq)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    daemon_harness::dies_with_this_thread(&mut command);
    let child = command.spawn().unwrap();
    let governor = peer.govern(&pty.slave_path, child.id(), "motiond-rt");
    let out = child.wait_with_output().unwrap();
    drop(governor);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("device_lost"), "{stderr}");
    let log = peer.stop();
    assert_goals_follow(&log, &skel, &seq);
}

#[test]
fn serve_plays_on_dynamixel_servos_then_reports_the_vanished_bus_and_keeps_serving() {
    let pty = openpty();
    let dir = tempfile::tempdir().unwrap();
    let (config_path, skel, seq, socket) = setup(dir.path(), &pty.slave_path);
    let peer = servos(pty.master);
    let mut command = Command::new(env!("CARGO_BIN_EXE_motiond"));
    command
        .args(["serve", "--config"])
        .arg(&config_path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    daemon_harness::dies_with_this_thread(&mut command);
    let mut child = command.spawn().unwrap();
    let governor = peer.govern(&pty.slave_path, child.id(), "motiond-rt");
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        if let Ok(Some(status)) = child.try_wait() {
            let mut err = String::new();
            let _ = child.stderr.take().unwrap().read_to_string(&mut err);
            panic!("motiond exited with {status}: {err}");
        }
        assert!(Instant::now() < deadline, "motiond did not open its socket");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut client = Client::connect(&socket);
    client.wait_for_library();
    let reply = client.request(json!({"cmd": "play", "motion": "nod"}));
    assert_eq!(reply["ok"], true, "{reply}");
    let fault = client.wait_for("fault", |s| s["state"] == "fault");
    assert!(fault.to_string().contains("device_lost"), "{fault}");
    // The bus's own counters: the port was lost, not a servo.
    let bus = &fault["buses"][0];
    assert_eq!(bus["transport"], "serial", "{bus}");
    assert_eq!(bus["last_fault"]["kind"], "device_lost", "{bus}");
    assert!(bus["sent"].as_u64().unwrap() > 0, "{bus}");
    let drives = bus["drives"].as_object().unwrap();
    assert!(!drives.is_empty(), "{bus}");
    assert!(
        drives
            .values()
            .all(|d| d["protocol"] == "dynamixel" && d["faults"] == 0),
        "{bus}"
    );
    // motionctl status: a line for the bus and one for each servo; exit 4 for the fault.
    let shown = Command::new(env!("CARGO_BIN_EXE_motionctl"))
        .arg("--socket")
        .arg(&socket)
        .arg("status")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&shown.stdout);
    assert_eq!(shown.status.code(), Some(4), "{text}");
    assert!(
        text.contains("bus arm") && text.contains("  base_yaw") && text.contains("dynamixel"),
        "{text}"
    );
    // Still serving: status, a refused play, clear-fault all answered.
    let refused = client.request(json!({"cmd": "play", "motion": "nod"}));
    assert_eq!(refused["ok"], false, "{refused}");
    let cleared = client.request(json!({"cmd": "clear_fault"}));
    assert_eq!(cleared["ok"], true, "{cleared}");
    assert!(client.status()["state"].is_string());
    let _ = child.kill();
    let _ = child.wait();
    drop(governor);

    let log = peer.stop();
    assert_goals_follow(&log, &skel, &seq);
}
