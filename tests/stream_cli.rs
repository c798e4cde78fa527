//! `motionctl stream` against a running daemon and its refusals, and what ends a stream, as a
//! rehearsal (deterministic: manual clock).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

use std::path::Path;

mod daemon_harness;
use daemon_harness::Daemon;
use std::sync::{Arc, Mutex};

use motiond::config::JointGroup;
use motiond::rehearse::{Rehearsal, Script};
use motiond::rt::TraceRow;
use motiond::session::{Robot, RobotSpec};
use motiond::trajectory::Setpoint;
use serde_json::Value;

#[test]
fn motionctl_streams_a_csv_in_real_time_and_the_robot_ends_at_rest() {
    let daemon = Daemon::start(&[]);
    let out = daemon.motionctl(&["enable"]);
    assert!(out.status.success(), "{out:?}");
    // A generous horizon: a loaded machine delays requests, never the outcome.
    let csv = daemon_harness::repo().join("config/streams/reach30.csv");
    let out = daemon.motionctl(&[
        "stream",
        csv.to_str().unwrap(),
        "--rate",
        "30",
        "--chunk",
        "5",
        "--horizon",
        "0.5",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("streamed 121 rows in 25 chunks at 30 Hz"),
        "{stdout}"
    );
    let out = daemon.motionctl(&["--json", "status"]);
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["limit_violations"], 0, "{status}");
}

#[test]
fn a_bad_csv_is_refused_before_the_daemon_is_asked_naming_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("bad.csv");
    std::fs::write(&csv, "# actions\nbase_yaw,elbow_pitch\n0.1,0.2\n0.1,nan\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_motionctl"))
        .args(["--socket", "/nonexistent/sock", "stream"])
        .arg(&csv)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{}:4:5: \"nan\" is not a finite number",
            csv.display()
        )),
        "{stderr}"
    );
}

fn demo_arm() -> Robot {
    let spec = RobotSpec {
        config: Some(daemon_harness::repo().join("config/motiond.yaml")),
        ..RobotSpec::default()
    };
    Robot::load(&spec).unwrap().unwrap()
}

/// The replies of a rehearsal of `steps` (JSON) on the demo arm.
fn rehearse(steps: &str) -> Vec<Value> {
    let robot = demo_arm();
    let script = Script::parse(steps, Path::new("stream.yaml"), &robot.joints).unwrap();
    let report = Rehearsal::new(robot, script).unwrap().run();
    assert_eq!(report.result.limit_violations, 0);
    report
        .steps
        .into_iter()
        .filter_map(|s| s.reply_json())
        .collect()
}

#[test]
fn the_loop_reads_streaming_while_a_stream_plays_and_starved_past_its_last_row() {
    let robot = demo_arm();
    let path = daemon_harness::repo().join("config/rehearse/stream-starve-resume.yaml");
    let script = Script::load(&path, &robot.joints).unwrap();
    let report = Rehearsal::new(robot, script).unwrap().run();
    assert_eq!(report.result.limit_violations, 0);
    // The loop's own state, tick by tick (the report's timeline): each chunk's blend and rows
    // are one stream, never an approach or a play; past the last row it brakes (starved), and
    // at rest it holds until a chunk resumes the stream.
    let states: Vec<&str> = report.states.iter().map(|(_, s)| s.as_str()).collect();
    assert_eq!(
        states,
        [
            "disabled",
            "idle",
            "streaming",
            "starved",
            "holding",
            "streaming",
            "starved",
            "holding"
        ],
        "{:?}",
        report.states
    );
    let reply = |i: usize| report.steps[i].reply_json().unwrap();
    // The first chunk starts the stream at the tick its reply names; the resuming chunk too.
    assert_eq!(json_tick(&reply(1)), report.states[2].0);
    assert_eq!(json_tick(&reply(6)), report.states[5].0);
    // Braking after the last row (0.6 s), the loop and the stream say starved alike; at rest
    // (1.5 s) the loop holds and the stream is still starved.
    let braking = reply(4);
    assert!(
        report.states[3].0 < 600 && 600 < report.states[4].0,
        "{:?}",
        report.states
    );
    assert_eq!(
        (&braking["state"], &braking["streams"][0]["state"]),
        (&Value::from("starved"), &Value::from("starved")),
        "{braking}"
    );
    assert_eq!(reply(5)["streams"][0]["state"], "starved", "{}", reply(5));
}

fn json_tick(reply: &Value) -> u64 {
    reply["tick"].as_u64().unwrap_or_else(|| panic!("{reply}"))
}

#[test]
fn a_stop_ends_the_stream_and_later_chunks_are_refused_until_it_is_opened_again() {
    let replies = rehearse(
        r#"{"steps": [
          {"at": 0.1, "request": {"cmd": "stream_open", "joints": ["base_yaw"]}},
          {"at": 0.2, "request": {"cmd": "stream_chunk", "seq": 1, "positions": [[0.1], [0.2], [0.3], [0.4], [0.5], [0.6], [0.7], [0.8]]}},
          {"at": 0.3, "request": {"cmd": "stop"}},
          {"at": 0.8, "request": {"cmd": "stream_chunk", "seq": 2, "positions": [[0.5]]}},
          {"at": 0.9, "request": {"cmd": "status"}},
          {"at": 1.0, "request": {"cmd": "stream_open", "joints": ["base_yaw"]}},
          {"at": 1.1, "request": {"cmd": "stream_chunk", "seq": 1, "positions": [[0.3]]}},
          {"at": 1.2, "request": {"cmd": "stream_chunk", "group": "nope", "seq": 2, "positions": [[0.3]]}},
          {"at": 1.3, "request": {"cmd": "stream_chunk", "seq": 2, "positions": [[0.3, 0.1]]}}
        ]}"#,
    );
    let code = |r: &Value| r["error"]["code"].as_str().map(str::to_string);
    assert_eq!(replies[1]["ok"], true, "{}", replies[1]);
    assert_eq!(
        code(&replies[3]).as_deref(),
        Some("refused"),
        "{}",
        replies[3]
    );
    assert!(
        replies[3]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("a stop ended it"),
        "{}",
        replies[3]
    );
    assert_eq!(replies[4]["streams"][0]["state"], "ended", "{}", replies[4]);
    // Opened again: a new stream, seq from anywhere.
    assert_eq!(replies[6]["ok"], true, "{}", replies[6]);
    assert_eq!(
        code(&replies[7]).as_deref(),
        Some("refused"),
        "{}",
        replies[7]
    );
    assert_eq!(
        code(&replies[8]).as_deref(),
        Some("bad_request"),
        "{}",
        replies[8]
    );
}

#[test]
fn stream_open_refuses_joints_it_cannot_stream_naming_them() {
    let replies = rehearse(
        r#"{"steps": [
          {"at": 0.1, "request": {"cmd": "stream_open", "joints": ["gripper_nope"]}},
          {"at": 0.2, "request": {"cmd": "stream_open", "joints": ["base_yaw", "base_yaw"]}},
          {"at": 0.3, "request": {"cmd": "stream_chunk", "seq": 1, "positions": [[0.1]]}}
        ]}"#,
    );
    assert_eq!(replies[0]["error"]["code"], "bad_request");
    assert!(
        replies[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("\"gripper_nope\" is not a DOF the whole robot drives"),
        "{}",
        replies[0]
    );
    assert_eq!(replies[1]["error"]["code"], "bad_request");
    assert_eq!(replies[2]["error"]["code"], "refused", "{}", replies[2]);
}

#[test]
fn a_group_streams_while_another_plays_and_the_joints_of_no_group_hold() {
    let mut robot = demo_arm();
    robot.config.as_mut().unwrap().groups = vec![
        JointGroup {
            name: "arm".into(),
            dofs: vec!["shoulder_pitch".into(), "elbow_pitch".into()],
        },
        JointGroup {
            name: "wrist".into(),
            dofs: vec!["wrist_pitch".into(), "wrist_roll".into()],
        },
    ];
    let joints = robot.joints.clone();
    let script = Script::parse(
        r#"{"steps": [
          {"at": 0.05, "request": {"cmd": "play", "motion": "wave", "group": "wrist"}},
          {"at": 0.1, "request": {"cmd": "stream_open", "group": "arm", "joints": ["elbow_pitch"], "rate_hz": 30, "horizon_s": 0.1}},
          {"at": 0.2, "request": {"cmd": "stream_chunk", "group": "arm", "seq": 1, "positions": [[0.0], [0.01], [0.02], [0.03], [0.04], [0.05], [0.06], [0.07]]}},
          {"at": 0.3, "request": {"cmd": "stream_chunk", "group": "arm", "seq": 2, "positions": [[0.08], [0.09], [0.10], [0.11], [0.12], [0.13]]}},
          {"at": 0.35, "request": {"cmd": "status"}},
          {"at": 1.0, "request": {"cmd": "status"}},
          {"at": 1.1, "request": {"cmd": "stream_chunk", "group": "arm", "seq": 3, "positions": [[0.14], [0.15], [0.16], [0.17], [0.18], [0.19], [0.2], [0.21]]}},
          {"at": 1.2, "request": {"cmd": "stream_chunk", "seq": 4, "positions": [[0.3]]}},
          {"at": 1.3, "request": {"cmd": "stop", "group": "wrist"}},
          {"at": 2.0, "request": {"cmd": "stream_close", "group": "arm"}}
        ]}"#,
        Path::new("group-stream.yaml"),
        &joints,
    )
    .unwrap();
    let mut rehearsal = Rehearsal::new(robot, script).unwrap();
    let trace: Arc<Mutex<Vec<Vec<Setpoint>>>> = Arc::default();
    let sink = trace.clone();
    rehearsal.trace_to(Box::new(move |row: &TraceRow| {
        sink.lock().unwrap().push(row.commanded.clone());
    }));
    let report = rehearsal.run();
    assert_eq!(report.result.limit_violations, 0);
    let replies: Vec<Value> = report
        .steps
        .into_iter()
        .filter_map(|s| s.reply_json())
        .collect();
    for (i, r) in replies.iter().enumerate().filter(|(i, _)| *i != 7) {
        assert_eq!(r["ok"], true, "{i}: {r}");
    }
    // While the arm streams, the wrist plays its own motion; once the arm's rows run out it is
    // starved (the wrist plays on), and a chunk resumes it.
    let streaming = &replies[4];
    assert_eq!(
        streaming["groups"]["arm"]["state"], "streaming",
        "{streaming}"
    );
    assert_eq!(
        streaming["groups"]["wrist"]["state"], "playing",
        "{streaming}"
    );
    assert_eq!(streaming["streams"][0]["group"], "arm", "{streaming}");
    let starved = &replies[5];
    assert_eq!(starved["groups"]["arm"]["state"], "starved", "{starved}");
    assert_eq!(starved["groups"]["wrist"]["state"], "playing", "{starved}");
    assert_eq!(replies[6]["resumed"], true, "{}", replies[6]);
    // A chunk for the whole robot has no stream there.
    assert_eq!(replies[7]["error"]["code"], "refused", "{}", replies[7]);
    // Stopping the wrist leaves the arm's stream alone.
    assert_eq!(replies[9]["state"], "starved", "{}", replies[9]);
    assert_eq!(replies[9]["accepted"], 3, "{}", replies[9]);
    // Joints of no group, and the arm's joint the stream does not name, hold where they were;
    // the streamed one and the wrist move.
    let trace = trace.lock().unwrap();
    let column = |name: &str| -> Vec<f64> {
        let j = joints.index_of(name).unwrap();
        trace.iter().map(|c| c[j].position).collect()
    };
    for name in ["base_yaw", "gripper_slide", "shoulder_pitch"] {
        let c = column(name);
        assert!(c.iter().all(|&p| p == c[0]), "{name} moved");
    }
    for name in ["elbow_pitch", "wrist_pitch"] {
        let c = column(name);
        assert!(c.iter().any(|&p| p != c[0]), "{name} never moved");
    }
    // At rest a little past the last row (0.21 at 0.3 rad/s: v²/2a = 7.5 mrad at 6 rad/s²).
    let rest = *column("elbow_pitch").last().unwrap();
    assert!((0.21..0.2176).contains(&rest), "{rest}");
}
