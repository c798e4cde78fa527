//! Issue 21's findings as `motiond rehearse` scripts on the demo arm: each runs the daemon's own
//! request handling on the stepped loop, and the report shows what an operator would have seen.
//! F6, F11, F12 (numbers from outside), F8 (a group that splits a mimic coupling), F10 and F14
//! (a teach-in take cut short by the E-stop or a signal is kept); F1 and F7 (memory that grew with
//! `at` or the motion's length).
//! F9 and F15 need a file system that changes under the daemon: tests/daemon_features.rs.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn motiond(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_motiond"))
        .current_dir(repo())
        .args(args)
        .output()
        .unwrap()
}

/// Runs the script file `path` on the demo arm and returns the JSON report.
fn rehearse_file(path: &Path) -> Value {
    let out = motiond(&["rehearse", path.to_str().unwrap(), "--report", "json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Runs `script` on the demo arm and returns the JSON report.
fn rehearse(script: &str) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("script.yaml");
    std::fs::write(&path, script).unwrap();
    rehearse_file(&path)
}

fn reply(report: &Value, step: usize) -> &Value {
    &report["steps"][step]["reply"]
}

fn journal(report: &Value) -> Vec<String> {
    report["journal"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["line"].as_str().unwrap().to_string())
        .collect()
}

fn refused_as_bad_request(reply: &Value, says: &str) {
    assert_eq!(reply["ok"], false, "{reply}");
    assert_eq!(reply["error"]["code"], "bad_request", "{reply}");
    let message = reply["error"]["message"].as_str().unwrap();
    assert!(message.contains(says), "{message}");
}

/// F6: `at` ≥ ~1.8e16 s started at once (a saturating cast, then a wrapping add). Now a start
/// more than a day ahead is refused, and nothing moves.
#[test]
fn f06_a_start_time_beyond_a_day_is_refused() {
    let report = rehearse(
        "steps:\n\
         - {at: 0.1, request: {cmd: play, motion: wave, at: 1.8e16}}\n\
         - {at: 0.1, request: {cmd: play, motion: wave, at: 9.3e18}}\n\
         - {at: 0.1, request: {cmd: play, motion: wave, at: 1800086401}}\n\
         - {at: 0.2, request: {cmd: status}}\n\
         - {at: 0.3, request: {cmd: play, motion: wave, at: 1800000001}}\n\
         - {at: 0.4, request: {cmd: status}}\n\
         - {at: 1.5, request: {cmd: status}}\n",
    );
    for step in 0..3 {
        refused_as_bad_request(reply(&report, step), "at most 86400 s (a day) ahead");
    }
    assert_eq!(reply(&report, 3)["state"], "idle");
    // A start a second ahead waits at the first sample, then plays.
    assert_eq!(reply(&report, 4)["ok"], true, "{}", reply(&report, 4));
    assert_eq!(reply(&report, 5)["progress"], 0.0);
    assert!(reply(&report, 6)["progress"].as_f64().unwrap() > 0.0);
}

/// F11: `motionctl --speed inf|nan` went as `null` and played at speed 1; `record --rate nan`
/// recorded. The daemon now refuses a null number, and motionctl refuses them itself.
#[test]
fn f11_numbers_that_are_not_finite_are_refused() {
    let report = rehearse(
        "steps:\n\
         - {at: 0.1, request: {cmd: play, motion: wave, speed: .nan}}\n\
         - {at: 0.1, request: {cmd: play, motion: wave, speed: .inf}}\n\
         - {at: 0.1, request: '{\"cmd\":\"play\",\"motion\":\"wave\",\"speed\":1e999}'}\n\
         - {at: 0.1, request: {cmd: record, motion: take, rate_hz: .nan}}\n\
         - {at: 0.1, request: {cmd: play, motion: wave, at: .nan}}\n\
         - {at: 0.2, request: {cmd: status}}\n",
    );
    for step in 0..5 {
        let r = reply(&report, step);
        // A number beyond f64 is not JSON serde_json reads at all.
        let code = if step == 2 {
            "invalid_json"
        } else {
            "bad_request"
        };
        assert_eq!(r["error"]["code"], code, "step {step}: {r}");
    }
    refused_as_bad_request(reply(&report, 0), "null is not a number");
    refused_as_bad_request(reply(&report, 3), "null is not a number");
    assert_eq!(reply(&report, 5)["state"], "idle");
    // motionctl refuses them before it connects (exit 2, not 3 for a missing daemon).
    for args in [
        ["play", "wave", "--speed", "inf"],
        ["play", "wave", "--speed", "nan"],
        ["record", "t", "--rate", "NaN"],
        ["record", "t", "--rate", "1e-300"],
        ["play", "wave", "--at", "+1e300"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_motionctl"))
            .args(["--socket", "/nonexistent/motiond.sock"])
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("expected"), "{args:?}: {stderr}");
    }
}

/// F12: `record` at rate 1e-300 wrapped and recorded every tick. The rate is bounded.
#[test]
fn f12_a_record_rate_outside_its_range_is_refused() {
    let report = rehearse(
        "steps:\n\
         - {at: 0.1, request: {cmd: record, motion: take, rate_hz: 1e-300}}\n\
         - {at: 0.1, request: {cmd: record, motion: take, rate_hz: 1e300}}\n\
         - {at: 0.2, request: {cmd: status}}\n\
         - {at: 0.3, request: {cmd: record, motion: take, rate_hz: 0.1}}\n\
         - {at: 25, request: {cmd: record, stop: true}}\n",
    );
    refused_as_bad_request(reply(&report, 0), "must be 0.1 to 8000 frames per second");
    refused_as_bad_request(reply(&report, 1), "must be 0.1 to 8000 frames per second");
    assert_eq!(reply(&report, 2)["state"], "idle");
    let stop = reply(&report, 4);
    assert_eq!(stop["ok"], true, "{stop}");
    // One frame every 10 s over 24.7 s, from the first.
    assert_eq!(stop["frames"], 3, "{stop}");
    assert_eq!(stop["rate_hz"], 0.1, "{stop}");
}

/// Motion names are at most 200 bytes, checked when the request arrives.
#[test]
fn long_motion_names_are_refused_when_the_request_arrives() {
    let long = "n".repeat(201);
    let report = rehearse(&format!(
        "steps:\n\
         - {{at: 0.1, request: {{cmd: record, motion: {long}}}}}\n\
         - {{at: 0.1, request: {{cmd: play, motion: {long}}}}}\n\
         - {{at: 0.1, request: {{cmd: recover, pose: {long}}}}}\n"
    ));
    for step in 0..3 {
        refused_as_bad_request(reply(&report, step), "a motion name has at most 200");
    }
}

/// The demo gripper of F8: `finger` drives, `mirror` follows it (−1·q + 0.01), `wrist` is its
/// own; a library motion `squeeze` moving the finger 0 → 0.03 → 0 in 2 s (columns finger,
/// wrist).
fn gripper(dir: &Path, groups: &str) -> PathBuf {
    std::fs::write(
        dir.join("gripper.urdf"),
        r#"<robot name="g"><link name="world"/><link name="palm"/><link name="f"/><link name="m"/><link name="w"/>
  <joint name="mount" type="fixed"><parent link="world"/><child link="palm"/></joint>
  <joint name="finger" type="prismatic"><parent link="palm"/><child link="f"/>
    <limit lower="0" upper="0.04" effort="10" velocity="0.1"/></joint>
  <joint name="mirror" type="prismatic"><parent link="palm"/><child link="m"/>
    <limit lower="-0.04" upper="0.04" effort="10" velocity="0.1"/>
    <mimic joint="finger" multiplier="-1" offset="0.01"/></joint>
  <joint name="wrist" type="revolute"><parent link="palm"/><child link="w"/>
    <limit lower="-1" upper="1" effort="10" velocity="1"/></joint>
</robot>"#,
    )
    .unwrap();
    std::fs::create_dir_all(dir.join("motions")).unwrap();
    let mut seq = String::from(
        "type: CompositeSeq\ncontent: BodyMotion\nformatVersion: 2\nframeRate: 10\nnumFrames: 21\n\
         components:\n  - type: MultiValueSeq\n    content: JointDisplacement\n    frameRate: 10\n\
         \x20   numFrames: 21\n    numParts: 2\n    frames:\n",
    );
    for i in 0..21 {
        let x = 0.015 * (1.0 - (std::f64::consts::PI * f64::from(i) / 10.0).cos());
        seq.push_str(&format!("      - [{x}, 0.0]\n"));
    }
    std::fs::write(dir.join("motions/squeeze.seq"), seq).unwrap();
    let config = dir.join("motiond.yaml");
    let yaml = format!(
        "robot:\n  model: gripper.urdf\n  joints: [finger, wrist]\n  limits:\n    \
         finger: {{acceleration: 10}}\n    mirror: {{acceleration: 10}}\n    wrist: {{acceleration: 5}}\n\
         motion: {{interpolation: cubic}}\ngroups:\n{groups}"
    );
    std::fs::write(&config, yaml).unwrap();
    config
}

/// F8: a group holding a mimic leader but not its follower broke the coupling (0.44 rad apart).
/// A follower now moves with the group that holds its leader, and is never listed on its own.
#[test]
fn f08_a_mimic_follower_moves_with_the_group_of_its_leader() {
    let dir = tempfile::tempdir().unwrap();
    // Listing the follower itself is refused where it is listed.
    let config = gripper(dir.path(), "  hand: [finger]\n  arm: [wrist, mirror]\n");
    let script = dir.path().join("s.yaml");
    std::fs::write(
        &script,
        "end: 4\nsteps:\n  - {at: 0.1, request: {cmd: play, motion: squeeze, group: hand}}\n  \
         - {at: 3.5, request: {cmd: status}}\n",
    )
    .unwrap();
    let run = |config: &Path, trace: &Path| {
        motiond(&[
            "rehearse",
            script.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
            "--report",
            "json",
            "--trace",
            trace.to_str().unwrap(),
        ])
    };
    let trace = dir.path().join("trace.csv");
    let out = run(&config, &trace);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let shown = config.display().to_string();
    assert!(
        stderr.contains(&format!("{shown}:11:16: groups.arm[1]: \"mirror\"")),
        "{stderr}"
    );
    // The group of the leader moves the follower with it: the coupling holds at every tick.
    let config = gripper(dir.path(), "  hand: [finger]\n  arm: [wrist]\n");
    let out = run(&config, &trace);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(reply(&report, 0)["ok"], true, "{}", reply(&report, 0));
    assert_eq!(reply(&report, 1)["groups"]["hand"]["state"], "holding");
    let text = std::fs::read_to_string(&trace).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (finger, mirror) = (col("finger.commanded"), col("mirror.commanded"));
    let mut moved = 0.0f64;
    let mut checked = 0;
    // From the motion's start (the approach first puts the follower where its leader says).
    for line in lines.skip_while(|l| l.split(',').nth(2) != Some("playing")) {
        checked += 1;
        let cells: Vec<f64> = line
            .split(',')
            .enumerate()
            .filter(|(i, _)| *i != 2)
            .map(|(_, c)| c.parse().unwrap())
            .collect();
        // Column 2 (the state) is left out: the indices after it shift by one.
        let (f, m) = (cells[finger - 1], cells[mirror - 1]);
        assert!((m - (0.01 - f)).abs() < 1e-9, "{line}");
        moved = moved.max(f);
    }
    assert!(moved > 0.025, "the finger moved by {moved}");
    assert!(checked > 3000, "{checked} ticks checked");
}

/// F10: an E-stop during the take lost it (`record --stop` found no teach-in). The rows went to
/// disk as they were recorded; `record --stop` after the E-stop saves them into the library.
#[test]
fn f10_a_take_cut_short_by_the_estop_is_saved_by_record_stop() {
    let report = rehearse(
        "steps:\n\
         - {at: 0.1, request: {cmd: record, motion: demo1}}\n\
         - {at: 0.2, hand: {dof: wrist_roll, to: 0.5, over_s: 1}}\n\
         - {at: 1.6, estop: pressed}\n\
         - {at: 2, estop: released}\n\
         - {at: 2.5, request: {cmd: record, stop: true}}\n\
         - {at: 3, request: {cmd: list}}\n",
    );
    let stop = reply(&report, 4);
    assert_eq!(stop["ok"], true, "{stop}");
    assert_eq!(stop["interrupted"], "estop", "{stop}");
    assert_eq!(stop["path"], "<rehearsal>/motions/demo1.seq", "{stop}");
    // From 0.1 s to the E-stop at 1.6 s (debounced 10 ms), at 100 Hz.
    let frames = stop["frames"].as_u64().unwrap();
    assert!((150..=152).contains(&frames), "{stop}");
    let listed = reply(&report, 5)["motions"].as_array().unwrap().clone();
    assert!(
        listed
            .iter()
            .any(|m| m["name"] == "demo1" && m["ok"] == true),
        "{listed:?}"
    );
    let journal = journal(&report);
    assert!(
        journal
            .iter()
            .any(|l| l.contains("teach-in demo1 interrupted by the E-stop")
                && l.contains("<rehearsal>/takes/demo1.seq")
                && l.contains("record --stop")),
        "{journal:#?}"
    );
}

/// F14: SIGTERM during the take lost it. The take is closed on disk and the journal says where
/// it is and how to keep it.
#[test]
fn f14_a_take_cut_short_by_a_signal_is_kept_and_the_journal_says_where() {
    let report = rehearse(
        "steps:\n\
         - {at: 0.1, request: {cmd: record, motion: demo2}}\n\
         - {at: 0.2, hand: {dof: base_yaw, to: 0.3, over_s: 0.5}}\n\
         - {at: 1.1, signal: term}\n",
    );
    assert_eq!(report["result"]["ended"], "shutdown");
    assert_eq!(report["result"]["exit"], 0);
    let journal = journal(&report);
    assert!(
        journal.iter().any(|l| l.contains("teach-in demo2")
            && l.contains("kept at <rehearsal>/takes/demo2.seq")
            && l.contains("mv ")),
        "{journal:#?}"
    );
}

/// Runs `motiond ARGS` to its end and returns its peak resident memory in KiB (wait4's
/// ru_maxrss).
// The child is reaped by wait4, which std's Child::wait cannot do: it gives the child's rusage.
#[allow(clippy::zombie_processes)]
fn peak_rss_kib(args: &[&str]) -> i64 {
    let child = Command::new(env!("CARGO_BIN_EXE_motiond"))
        .current_dir(repo())
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; it is filled in by wait4.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child (std's Child does not wait on drop), into valid pointers.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid, "{}", std::io::Error::last_os_error());
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "motiond {args:?}: status {status:#x}"
    );
    usage.ru_maxrss
}

/// F7: `motiond play` kept every trace row in memory, with or without --trace (~550 B a tick:
/// 188 MB for wave at speed 0.02, an abort at 0.01 under a 400 MB limit). The trace now streams
/// to its file: ten times the ticks in the same memory.
#[test]
fn f07_play_runs_in_memory_independent_of_the_motions_length() {
    let dir = tempfile::tempdir().unwrap();
    let play = |speed: &str, trace: &Path| {
        peak_rss_kib(&[
            "play",
            "config/motions/wave.seq",
            "--config",
            "config/motiond.yaml",
            "--clock",
            "manual",
            "--speed",
            speed,
            "--trace",
            trace.to_str().unwrap(),
        ])
    };
    let (short, long) = (dir.path().join("short.csv"), dir.path().join("long.csv"));
    let at_1 = play("1", &short);
    let at_0_1 = play("0.1", &long);
    let rows = |p: &Path| std::fs::read_to_string(p).unwrap().lines().count();
    // wave lasts 6 s: some 54 000 more ticks at speed 0.1, every one in the trace file. Kept in
    // memory they would add about 30 MB.
    assert!(rows(&long) > rows(&short) + 50_000);
    println!(
        "motiond play wave --clock manual: peak RSS {at_1} KiB at speed 1, {at_0_1} KiB at 0.1"
    );
    assert!(
        at_0_1 - at_1 < 8 * 1024,
        "peak RSS {at_1} KiB at speed 1, {at_0_1} KiB at speed 0.1"
    );
}

/// F1: `play … --replace --at` far ahead sized the path prediction by `at` (an abort at 240 TB,
/// a capacity overflow at 9e18, ~180 B a tick at +600 s on a looped motion). A start more than a
/// day ahead is refused, and the prediction up to the switch takes the same memory however far
/// ahead it is: peak RSS of a replacement 5 s ahead against one 60 s ahead (55 000 ticks more,
/// some 9 MB with the old prediction).
#[test]
fn f01_a_replacement_far_ahead_takes_constant_memory() {
    let dir = tempfile::tempdir().unwrap();
    let run = |ahead: u64| {
        let script = dir.path().join(format!("replace-{ahead}.yaml"));
        std::fs::write(
            &script,
            format!(
                "end: 2\nsteps:\n\
                 - {{at: 0.1, request: {{cmd: play, motion: wave, loop: true}}}}\n\
                 - {{at: 1, request: {{cmd: play, motion: pick, replace: true, at: 9.0e18}}}}\n\
                 - {{at: 1, request: {{cmd: play, motion: pick, replace: true, at: {}}}}}\n",
                1_800_000_001 + ahead
            ),
        )
        .unwrap();
        let report = rehearse_file(&script);
        refused_as_bad_request(reply(&report, 1), "at most 86400 s (a day) ahead");
        let replaced = reply(&report, 2);
        assert_eq!(replaced["ok"], true, "{replaced}");
        let tick = report["result"]["tick"].as_u64().unwrap();
        assert!(
            tick > 1000 * ahead,
            "the switch at +{ahead} s was waited for: {tick}"
        );
        peak_rss_kib(&["rehearse", script.to_str().unwrap()])
    };
    let (near, far) = (run(5), run(60));
    println!("motiond rehearse, replace at +5 s: peak RSS {near} KiB; at +60 s: {far} KiB");
    assert!(
        far - near < 4 * 1024,
        "{near} KiB at +5 s, {far} KiB at +60 s"
    );
}
