//! End to end on the simulated backend: joint groups, replace and teach-in through the control
//! socket and `motionctl`. Nothing asserts on wall time; the waits are liveness bounds.

use std::sync::{Mutex, MutexGuard, PoisonError};

use serde_json::{Value, json};

mod daemon_harness;
use daemon_harness::{Daemon, at_rest, bump_seq, rise_seq};

/// One daemon (and its real-time loop) at a time on a small machine.
fn one_daemon_at_a_time() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    TURN.lock().unwrap_or_else(PoisonError::into_inner)
}

const GROUPS: &str =
    "groups:\n  arm: [shoulder_pitch, elbow_pitch]\n  wrist: [wrist_pitch, wrist_roll]\n";

fn group_state<'a>(status: &'a Value, group: &str) -> &'a str {
    status["groups"][group]["state"].as_str().unwrap_or("?")
}

fn groups_at_rest(status: &Value) -> bool {
    ["arm", "wrist"]
        .iter()
        .all(|g| matches!(group_state(status, g), "idle" | "holding"))
        && at_rest(status)
}

#[test]
fn groups_play_side_by_side_and_leave_the_other_joints_alone() {
    let _turn = one_daemon_at_a_time();
    let daemon = Daemon::start_with(&[("bump.seq", bump_seq(1.0, 0.05))], GROUPS, &[]);
    let mut client = daemon.client();
    let start = client.status();

    let out = daemon.motionctl(&["--json", "play", "bump", "--group", "arm"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let reply: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(reply["group"], "arm");
    let wrist = client.request(json!({"cmd":"play","motion":"bump","group":"wrist"}));
    assert_eq!(wrist["ok"], true, "{wrist}");
    // A whole-robot motion needs every group at rest.
    let whole = client.request(json!({"cmd":"play","motion":"bump"}));
    assert_eq!(whole["error"]["code"], "refused", "{whole}");
    let unknown = client.request(json!({"cmd":"play","motion":"bump","group":"legs"}));
    assert_eq!(unknown["error"]["code"], "refused", "{unknown}");
    assert!(
        unknown["error"]["message"]
            .as_str()
            .unwrap()
            .contains("arm, wrist"),
        "{unknown}"
    );

    let mut saw_both = false;
    let end = client.wait_for("both groups done", |s| {
        saw_both |= group_state(s, "arm") != "idle"
            && group_state(s, "wrist") != "idle"
            && s["groups"]["arm"]["motion"] == "bump";
        for dof in ["base_yaw", "gripper_slide"] {
            assert_eq!(
                s["commanded"][dof], start["commanded"][dof],
                "{dof} is in no group and must not move: {s}"
            );
        }
        groups_at_rest(s) && s["tick"].as_u64() > start["tick"].as_u64()
    });
    assert!(saw_both, "the groups never played together");
    assert_eq!(end["faults"], json!([]), "{end}");

    // Stop one group: the other keeps playing.
    assert_eq!(
        daemon
            .motionctl(&["play", "bump", "--group", "arm"])
            .status
            .code(),
        Some(0)
    );
    assert_eq!(
        daemon
            .motionctl(&["play", "bump", "--group", "wrist"])
            .status
            .code(),
        Some(0)
    );
    let out = daemon.motionctl(&["stop", "--group", "arm"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let arm_stopped = client.wait_for("arm at rest", |s| {
        matches!(group_state(s, "arm"), "idle" | "holding")
    });
    assert_ne!(group_state(&arm_stopped, "wrist"), "idle", "{arm_stopped}");
    client.wait_for("all at rest", groups_at_rest);
}

#[test]
fn replace_takes_over_without_a_stop() {
    let _turn = one_daemon_at_a_time();
    let daemon = Daemon::start(&[
        ("long.seq", bump_seq(3.0, 0.3)),
        ("rise.seq", rise_seq(1.0, 0.1)),
    ]);
    let mut client = daemon.client();
    let first = client.request(json!({"cmd":"play","motion":"long"}));
    assert_eq!(first["ok"], true, "{first}");
    client.wait_for("long playing", |s| {
        s["state"] == "playing" && s["progress"].as_f64().unwrap() > 0.2
    });
    // Without replace a busy robot refuses.
    let busy = client.request(json!({"cmd":"play","motion":"rise"}));
    assert_eq!(busy["error"]["code"], "refused", "{busy}");
    let out = daemon.motionctl(&["--json", "play", "rise", "--replace"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let reply: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(reply["replace"], true);
    let end = client.wait_for("rise done", at_rest);
    assert_eq!(end["faults"], json!([]), "{end}");
    assert_eq!(end["last_outcome"]["motion"], "rise", "{end}");
    assert_eq!(end["last_outcome"]["outcome"], "finished", "{end}");
    // rise ends with elbow_pitch at -0.1, where long never is at its end.
    let elbow = end["commanded"]["elbow_pitch"].as_f64().unwrap();
    assert!((elbow + 0.1).abs() < 1e-6, "{end}");
}

#[test]
fn a_teach_in_is_written_into_the_library_and_plays_back() {
    let _turn = one_daemon_at_a_time();
    let daemon = Daemon::start(&[("bump.seq", bump_seq(1.0, 0.05))]);
    let mut client = daemon.client();

    let exists = client.request(json!({"cmd":"record","motion":"bump"}));
    assert_eq!(exists["error"]["code"], "refused", "{exists}");
    let outside = client.request(json!({"cmd":"record","motion":"../escape"}));
    assert_eq!(outside["error"]["code"], "bad_request", "{outside}");
    let nothing = client.request(json!({"cmd":"record","stop":true}));
    assert_eq!(nothing["error"]["code"], "refused", "{nothing}");

    let out = daemon.motionctl(&["--json", "record", "taught", "--rate", "50"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let started: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(started["rate_hz"], 50.0, "{started}");
    assert_eq!(started["joints"].as_array().unwrap().len(), 6);
    let recording = client.wait_for("recording", |s| s["state"] == "recording");
    let from = recording["tick"].as_u64().unwrap();
    let busy = client.request(json!({"cmd":"play","motion":"bump"}));
    assert_eq!(busy["error"]["code"], "refused", "{busy}");
    client.wait_for("a few frames", |s| s["tick"].as_u64().unwrap() > from + 200);

    let out = daemon.motionctl(&["--json", "record", "--stop"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let written: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(written["frames"].as_u64().unwrap() >= 4, "{written}");
    assert_eq!(written["library"]["ok"], true, "{written}");
    let path = written["path"].as_str().unwrap();
    let text = std::fs::read_to_string(path).unwrap();
    assert!(
        text.contains("JointDisplacement") && text.contains("elbow_pitch"),
        "{text}"
    );

    let list = client.request(json!({"cmd":"list"}));
    assert!(
        list["motions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["name"] == "taught" && m["ok"] == true),
        "{list}"
    );
    let played = client.request(json!({"cmd":"play","motion":"taught"}));
    assert_eq!(played["ok"], true, "{played}");
    let end = client.wait_for("played back", |s| {
        at_rest(s) && s["last_outcome"]["motion"] == "taught"
    });
    assert_eq!(end["last_outcome"]["outcome"], "finished", "{end}");
}
