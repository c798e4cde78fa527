//! End to end on the simulated backend: joint groups, replace and teach-in through the control
//! socket and `motionctl`. Nothing asserts on wall time; the waits are liveness bounds.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

use std::sync::{Mutex, MutexGuard, PoisonError};

use serde_json::{Value, json};

mod daemon_harness;
use daemon_harness::{Daemon, at_rest, bump_seq, limit_file_size, rise_seq};

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

fn take_path(started: &Value) -> std::path::PathBuf {
    std::path::PathBuf::from(started["take"].as_str().expect("the reply names the take"))
}

/// Records into `name` at the control rate until `ticks` ticks after the loop took the teach-in;
/// returns the `record` reply.
fn record_for(client: &mut daemon_harness::Client, name: &str, ticks: u64) -> Value {
    let started = client.request(json!({"cmd":"record","motion":name,"rate_hz":1000}));
    assert_eq!(started["ok"], true, "{started}");
    let recording = client.wait_for("recording", |s| s["state"] == "recording");
    let from = recording["tick"].as_u64().unwrap();
    client.wait_for("frames", |s| s["tick"].as_u64().unwrap() > from + ticks);
    started
}

/// F15: a motion created in the library while a take was recorded was replaced by it (the name
/// was checked at the start, and a rename replaces). The take is linked in, which never replaces:
/// the motion stays, the take is kept and the refusal says where and how to keep it.
#[test]
fn f15_a_take_never_replaces_a_motion_created_meanwhile() {
    let _turn = one_daemon_at_a_time();
    let daemon = Daemon::start(&[("bump.seq", bump_seq(1.0, 0.05))]);
    let mut client = daemon.client();
    let started = record_for(&mut client, "taught", 300);
    let take = take_path(&started);
    let library = daemon.dir.path().join("motions");
    let theirs = rise_seq(1.0, 0.05);
    std::fs::write(library.join("taught.seq"), &theirs).unwrap();

    let stop = client.request(json!({"cmd":"record","stop":true}));
    assert_eq!(stop["error"]["code"], "refused", "{stop}");
    let message = stop["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("created meanwhile")
            && message.contains(&format!("kept at {}", take.display()))
            && message.contains("mv "),
        "{message}"
    );
    assert_eq!(
        std::fs::read_to_string(library.join("taught.seq")).unwrap(),
        theirs
    );
    // The kept take is a complete motion: moved into the library under a free name, it plays.
    std::fs::rename(&take, library.join("taught-2.seq")).unwrap();
    client.request(json!({"cmd":"reload"}));
    let list = client.request(json!({"cmd":"list"}));
    let entry = list["motions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "taught-2")
        .cloned();
    assert_eq!(
        entry.as_ref().map(|m| &m["ok"]),
        Some(&json!(true)),
        "{list}"
    );
    // A new teach-in is not blocked by the refused one.
    let again = client.request(json!({"cmd":"record","motion":"taught-3"}));
    assert_eq!(again["ok"], true, "{again}");
}

/// F9: a take whose write failed (a full disk, a read-only library, a file-size limit) was lost.
/// Here the take's file stops taking writes in the middle of the take (the daemon's file-size
/// limit: EFBIG, as ENOSPC would): the frames are held in memory, `record --stop` is refused
/// saying where they are and what to do, and once the disk takes them again `record --stop`
/// saves every frame into the library.
#[test]
fn f09_a_take_the_disk_cannot_take_is_held_until_it_can() {
    let _turn = one_daemon_at_a_time();
    let daemon = Daemon::start(&[("bump.seq", bump_seq(1.0, 0.05))]);
    let mut client = daemon.client();
    // The header and the first frames fit, the 64 KiB the take's buffer writes at once do not.
    limit_file_size(daemon.pid(), Some(4096));
    let started = record_for(&mut client, "taught", 2000);
    let take = take_path(&started);

    let refused = client.request(json!({"cmd":"record","stop":true}));
    assert_eq!(refused["error"]["code"], "refused", "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("held in memory")
            && message.contains(&take.display().to_string())
            && message.contains("record --stop` again"),
        "{message}"
    );
    assert!(std::fs::metadata(&take).unwrap().len() <= 4096);
    // Nothing else is started over an unsaved take.
    let busy = client.request(json!({"cmd":"record","motion":"other"}));
    assert!(
        busy["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not saved yet"),
        "{busy}"
    );

    limit_file_size(daemon.pid(), None);
    let saved = client.request(json!({"cmd":"record","stop":true}));
    assert_eq!(saved["ok"], true, "{saved}");
    let frames = saved["frames"].as_u64().unwrap();
    // Some 2000 ticks at one frame a tick, of which 4096 bytes hold a few dozen.
    assert!(frames > 1000, "{saved}");
    assert_eq!(saved["lost_frames"], 0, "{saved}");
    assert_eq!(saved["library"]["ok"], true, "{saved}");
    let motion =
        motiond::motion::seq::load(std::path::Path::new(saved["path"].as_str().unwrap())).unwrap();
    let seq = motion.joint_displacement().unwrap();
    assert_eq!(seq.values.len() as u64, frames * 6);
    assert!(!take.exists(), "the take was moved into the library");
}

/// The takes folder removed during a take (`rm -rf`, an unmounted stick): the frames went into a
/// file no name reached and were lost at `record --stop`. They are written back and saved; and a
/// takes folder that cannot be made is refused at record start, with what to do.
#[test]
fn a_takes_folder_removed_during_the_take_loses_nothing() {
    let _turn = one_daemon_at_a_time();
    let daemon = Daemon::start(&[("bump.seq", bump_seq(1.0, 0.05))]);
    let mut client = daemon.client();
    let started = record_for(&mut client, "kept", 200);
    let take = take_path(&started);
    let takes = take.parent().unwrap().to_path_buf();
    std::fs::remove_dir_all(&takes).unwrap();
    let from = client.status()["tick"].as_u64().unwrap();
    client.wait_for("frames", |s| s["tick"].as_u64().unwrap() > from + 100);
    let saved = client.request(json!({"cmd":"record","stop":true}));
    assert_eq!(saved["ok"], true, "{saved}");
    let frames = saved["frames"].as_u64().unwrap();
    assert!(frames > 300, "{saved}");
    let saved_at = std::path::PathBuf::from(saved["path"].as_str().unwrap());
    let motion = motiond::motion::seq::load(&saved_at).unwrap();
    assert_eq!(
        motion.joint_displacement().unwrap().rows() as u64,
        frames,
        "{saved}"
    );

    // The takes folder (made again for the take) cannot be made now: a file took its name.
    std::fs::remove_dir_all(&takes).unwrap();
    std::fs::write(&takes, "").unwrap();
    let refused = client.request(json!({"cmd":"record","motion":"again"}));
    assert_eq!(refused["error"]["code"], "refused", "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("make it a folder the daemon can write, or set")
            && message.contains("motion.takes"),
        "{message}"
    );
}
