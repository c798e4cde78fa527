//! An outside tester's scenarios that once failed, each kept as a regression test: what a
//! client, a file or a device may send that the daemon must refuse, naming what and what to do,
//! without panicking, aborting, hanging or moving the robot outside its limits. Rehearsals
//! (manual clock, simulated backend) keep them deterministic.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

use std::path::Path;

use motiond::rehearse::{Rehearsal, Script};
use motiond::session::{Robot, RobotSpec};
use serde_json::{Value, json};

mod bus_peer;
mod daemon_harness;
use daemon_harness::{limit_file_size, repo, stderr_of};

fn demo_arm() -> Robot {
    let spec = RobotSpec {
        config: Some(repo().join("config/motiond.yaml")),
        ..RobotSpec::default()
    };
    Robot::load(&spec).unwrap().unwrap()
}

/// The replies of a rehearsal of `steps` (JSON) on the demo arm, every one of them (a step
/// never taken fails the test).
fn rehearse(steps: &str) -> Vec<Value> {
    let robot = demo_arm();
    let script = Script::parse(steps, Path::new("outside.yaml"), &robot.joints).unwrap();
    let report = Rehearsal::new(robot, script).unwrap().run();
    assert_eq!(report.result.limit_violations, 0);
    report
        .steps
        .into_iter()
        .map(|s| {
            s.reply_json()
                .unwrap_or_else(|| panic!("a step was not taken: {:?}", s.note))
        })
        .collect()
}

/// A chunk whose rows lie far in the stream's future is refused at once. The splice sampled the
/// path up to its last row: `t0: 1e9` asked for 144 TB and aborted the daemon, `t0: 10000` held
/// the control socket for 85 s. The stream goes on: the next chunk in time plays.
#[test]
fn a_chunk_far_ahead_is_refused_and_the_stream_goes_on() {
    let replies = rehearse(
        r#"{"steps": [
          {"at": 0.05, "request": {"cmd": "stream_open", "joints": ["base_yaw"], "horizon_s": 0.1}},
          {"at": 0.1, "request": {"cmd": "stream_chunk", "seq": 1, "t0": 0.1, "positions": [[0.0], [0.01], [0.02]]}},
          {"at": 0.15, "request": {"cmd": "stream_chunk", "seq": 2, "t0": 1e9, "positions": [[0.1]]}},
          {"at": 0.2, "request": {"cmd": "stream_chunk", "seq": 3, "t0": 10000.05, "positions": [[0.1]]}},
          {"at": 0.25, "request": {"cmd": "stream_chunk", "seq": 4, "t0": 1, "dt": 1, "positions": [[0.0], [0.1], [0.2], [0.3], [0.4], [0.5], [0.6], [0.7], [0.8], [0.9], [1.0],
             [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0],
             [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0],
             [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0]]}},
          {"at": 0.3, "request": {"cmd": "stream_chunk", "seq": 5, "t0": 0.3, "positions": [[0.03], [0.04], [0.05]]}},
          {"at": 0.35, "request": {"cmd": "status"}}
        ]}"#,
    );
    assert_eq!(replies[1]["ok"], true, "{}", replies[1]);
    for (reply, ahead) in [(&replies[2], "1000000000.0"), (&replies[3], "10000.0")] {
        assert_eq!(reply["error"]["code"], "refused", "{reply}");
        let message = reply["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("{ahead} s ahead of the robot"))
                && message.contains("at most 60 s ahead: send rows closer to their time"),
            "{message}"
        );
    }
    // 63 rows a second apart end 63.1 s on: refused too, however few its rows.
    assert_eq!(replies[4]["error"]["code"], "refused", "{}", replies[4]);
    assert_eq!(replies[5]["ok"], true, "{}", replies[5]);
    let stream = &replies[6]["streams"][0];
    assert_eq!(
        (&stream["accepted"], &stream["refused"], &stream["seq"]),
        (&Value::from(2), &Value::from(3), &Value::from(5)),
        "{stream}"
    );
}

/// A motion whose positions are absurd (an import of a dataset holding 1e30°, a typo) is refused
/// by `check` naming the joint and limit: the stop proof's tick count overflowed and hung it,
/// and `serve` proves every library motion at start and at `reload` the same way.
#[test]
fn check_refuses_a_motion_with_absurd_positions_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let seq = dir.path().join("absurd.seq");
    let mut text = String::from(
        "type: CompositeSeq\ncontent: BodyMotion\nformatVersion: 2\nframeRate: 10\nnumFrames: 4\n\
         components:\n  - type: MultiValueSeq\n    content: JointDisplacement\n    frameRate: 10\n\
         \x20   numFrames: 4\n    numParts: 6\n    frames:\n",
    );
    for v in ["0", "1e20", "0", "0"] {
        text.push_str(&format!("      - [ {v}, 0, 0, 0, 0, 0.01 ]\n"));
    }
    std::fs::write(&seq, text).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_motiond"))
        .arg("check")
        .arg(&seq)
        .arg("--config")
        .arg(repo().join("config/motiond.yaml"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{out:?}");
    assert!(
        stdout.contains("base_yaw") && stdout.contains("position limit"),
        "{stdout}"
    );
}

/// A v2.1 LeRobot dataset's metadata (no data file) with `data_path` and `episodes.jsonl` as
/// given, in a new folder.
fn v2_dataset(data_path: &str, episodes: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let meta = dir.path().join("meta");
    std::fs::create_dir(&meta).unwrap();
    let names = r#"["shoulder_pan.pos", "shoulder_lift.pos", "elbow_flex.pos", "wrist_flex.pos", "wrist_roll.pos", "gripper.pos"]"#;
    std::fs::write(
        meta.join("info.json"),
        format!(
            r#"{{"codebase_version": "v2.1", "fps": 30, "chunks_size": 1000,
              "features": {{"action": {{"dtype": "float32", "shape": [6], "names": {names}}}}},
              "data_path": "{data_path}"}}"#
        ),
    )
    .unwrap();
    std::fs::write(meta.join("episodes.jsonl"), episodes).unwrap();
    dir
}

/// `motiond import lerobot DIR --episode 0` for the SO-101: its exit code and stderr.
fn import_episode_0(dir: &Path) -> (Option<i32>, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_motiond"))
        .args(["import", "lerobot"])
        .arg(dir)
        .args(["--episode", "0", "--config"])
        .arg(repo().join("config/examples/so101.yaml"))
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const V2_DATA_PATH: &str = "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet";

/// A LeRobot dataset whose `data_path` asks for an absurd zero-padding is refused naming the
/// file and the field: the formatter's width overflowed and `motiond import` panicked.
#[test]
fn import_refuses_an_absurd_data_path_padding_naming_the_field() {
    let dir = v2_dataset(
        "data/chunk-{episode_chunk:0999999999d}/episode_{episode_index:06d}.parquet",
        "{\"episode_index\": 0, \"length\": 3}\n",
    );
    let meta = dir.path().join("meta");
    let (code, stderr) = import_episode_0(dir.path());
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{}:1:1: data_path",
            meta.join("info.json").display()
        )) && stderr
            .contains("format {episode_chunk:0999999999d} is not {name:0Nd} with N at most 20"),
        "{stderr}"
    );
}

/// A broken line in `episodes.jsonl` is refused with its FILE:LINE:COL wherever it is: the
/// import read only as far as the chosen episode and took a broken list.
#[test]
fn import_refuses_a_broken_episode_list_after_the_episode_too() {
    let dir = v2_dataset(
        V2_DATA_PATH,
        "{\"episode_index\": 0, \"length\": 3}\n{\"episode_index\": 1, \"length\": 3}\n{broken\n",
    );
    let (code, stderr) = import_episode_0(dir.path());
    assert_eq!(code, Some(2), "{stderr}");
    let at = format!("{}:3:2: ", dir.path().join("meta/episodes.jsonl").display());
    assert!(stderr.starts_with(&at), "{stderr}");
}

/// A data file that is a FIFO is refused at once: opening it waited for a writer forever.
#[test]
fn import_refuses_a_data_file_that_is_a_fifo() {
    let dir = v2_dataset(V2_DATA_PATH, "{\"episode_index\": 0, \"length\": 3}\n");
    let data = dir.path().join("data/chunk-000");
    std::fs::create_dir_all(&data).unwrap();
    let fifo = data.join("episode_000000.parquet");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let (code, stderr) = import_episode_0(dir.path());
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{}: not a regular file (a folder, FIFO or device); expected a parquet file",
            fifo.display()
        )),
        "{stderr}"
    );
}

/// The whole number just before `after` in `text`.
fn number_before(text: &str, after: &str) -> u64 {
    let at = text
        .find(after)
        .unwrap_or_else(|| panic!("no {after:?} in {text}"));
    let head = text[..at].trim_end_matches(|c: char| c.is_ascii_digit());
    text[head.len()..at]
        .parse()
        .unwrap_or_else(|_| panic!("no number before {after:?} in {text}"))
}

/// A take on a disk that refuses its writes (here a file-size limit; a full 64 KiB tmpfs did the
/// same), and a flight-recorder dump there. The frames waiting in the take's write buffer were counted as in the file. `record
/// --stop` said "202 frames are in …/demo1.seq and 0 more are held in memory" of an empty file,
/// and at SIGTERM the journal said all was in the file "but for the last 0 frames" as the frames
/// were lost. The counts now say what the file holds, and the journal says what is lost.
#[test]
fn a_take_the_disk_refuses_counts_only_what_the_file_holds() {
    let daemon = daemon_harness::Daemon::start(&[]);
    let mut client = daemon.client();
    // The header and a few dozen frames fit; the 64 KiB the take's buffer writes at once do not.
    limit_file_size(daemon.pid(), Some(4096));
    let started = client.request(json!({"cmd":"record","motion":"taught","rate_hz":1000}));
    assert_eq!(started["ok"], true, "{started}");
    let take = std::path::PathBuf::from(started["take"].as_str().unwrap());
    let recording = client.wait_for("recording", |s| s["state"] == "recording");
    let from = recording["tick"].as_u64().unwrap();
    client.wait_for("frames", |s| s["tick"].as_u64().unwrap() > from + 1500);

    let refused = client.request(json!({"cmd":"record","stop":true}));
    assert_eq!(refused["error"]["code"], "refused", "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    let in_file = number_before(message, " frames are in ");
    let held = number_before(message, " more are held in memory");
    let text = std::fs::read_to_string(&take).unwrap();
    let rows = text.lines().filter(|l| l.starts_with("      - [")).count() as u64
        - u64::from(!text.ends_with('\n'));
    assert_eq!(
        in_file, rows,
        "the file holds {rows} whole frames: {message}"
    );
    assert!(held > 1000, "the rest is held in memory: {message}");

    // A flight-recorder dump the disk refuses said only "I/O error from writing, or reading a
    // compression stream": now the cause and what to do.
    let dump = client.request(json!({"cmd":"dump"}));
    let message = dump["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("{dump}"));
    assert!(
        message.contains("File too large") && message.contains("recorder.dir"),
        "{message}"
    );

    let (code, log) = daemon.signal_and_wait(&[libc::SIGTERM]);
    assert_eq!(code, Some(0), "{log}");
    let line = log
        .lines()
        .find(|l| l.contains("teach-in taught stopped by the signal"))
        .unwrap_or_else(|| panic!("{log}"));
    assert_eq!(number_before(line, " of its "), rows, "{line}");
    assert!(line.contains("are lost"), "{line}");
}

/// A FIFO or a device given where a file is read whole: `motiond check X --config /dev/zero` read
/// 5.5 GB in 4 s on its way to running out of memory, a FIFO as a motion, model or script blocked
/// for ever (`robot.model: /dev/zero` would do the same to `serve`). Each is refused at once,
/// saying what the path is.
#[test]
fn a_fifo_or_a_device_is_no_input_file() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("motion.seq");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let zero = Path::new("/dev/zero");
    for path in [fifo.as_path(), zero] {
        let motion = motiond::session::load_motion(path).unwrap_err().to_string();
        let config = motiond::config::Config::load(path).unwrap_err().to_string();
        let model = motiond::robot::load(path, &motiond::robot::Options::default())
            .unwrap_err()
            .to_string();
        let script = Script::load(path, &demo_arm().joints)
            .unwrap_err()
            .to_string();
        for message in [motion, config, model, script] {
            assert!(
                message.contains(&path.display().to_string())
                    && (message.contains("a FIFO") || message.contains("a device")),
                "{message}"
            );
        }
    }
}

/// `serve` installed its signal handlers only once the buses were open and the drives enabled:
/// until then SIGTERM, SIGINT or SIGHUP (`systemctl reload motiond` just after a start) ended it
/// at once, with no controlled stop and no safe state. Here Feetech servos that never answer
/// holds the start in the bus's open; a SIGTERM meanwhile waits for the start to end (it fails,
/// the servo being silent) instead of killing the daemon.
#[test]
fn a_signal_during_the_start_does_not_kill_serve() {
    use std::io::Read;
    use std::os::unix::process::ExitStatusExt;

    // Its slave end stays open here until the test ends: the master sees no hang-up.
    let mut pty = bus_peer::openpty();
    let device = pty.slave_path.display().to_string();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("motiond.yaml");
    std::fs::create_dir(dir.path().join("motions")).unwrap();
    // The SO-101 example, its bus on the pseudo-terminal.
    let example = std::fs::read_to_string(repo().join("config/examples/so101.yaml")).unwrap();
    let so101 = repo().join("config/so101");
    std::fs::write(
        &config,
        example
            .replace("../so101", &so101.display().to_string())
            .replace("/dev/ttyACM0", &device)
            + &format!(
                "motion:\n  library: {library}\n\
                 rt:\n  lock_memory: false\n\
                 daemon:\n  socket: {socket}\n  watchdog: false\n\
                 recorder:\n  dir: {flight}\n",
                library = dir.path().join("motions").display(),
                socket = dir.path().join("s.sock").display(),
                flight = dir.path().join("flight").display(),
            ),
    )
    .unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_motiond"))
        .args(["serve", "--config"])
        .arg(&config)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The daemon asks the servo something: it is inside the bus's open. (Polled, so a daemon
    // that ends before fails the test instead of leaving it waiting.)
    loop {
        let mut ready = libc::pollfd {
            fd: std::os::fd::AsRawFd::as_raw_fd(&pty.master),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(&mut ready, 1, 100) } == 1 {
            let mut first = [0u8; 1];
            pty.master.read_exact(&mut first).unwrap();
            break;
        }
        if let Some(status) = child.try_wait().unwrap() {
            let log = stderr_of(&mut child);
            panic!("serve ended ({status}) before it opened the bus: {log}");
        }
    }
    // SAFETY: signalling our own child by its pid.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let status = child.wait().unwrap();
    let log = stderr_of(&mut child);
    assert_eq!(status.signal(), None, "killed by a signal: {log}");
    assert!(log.contains("did not answer"), "{log}");
}

/// A rehearsal run through the library returned an empty journal: only `motiond rehearse`
/// captured the daemon's log lines. The library's report now holds what the CLI prints, such as
/// a stream closed because its connection went away.
#[test]
fn the_library_rehearsal_returns_the_journal_the_cli_prints() {
    let robot = demo_arm();
    let steps = "steps:\n\
                 - {at: 0.1, request: {cmd: stream_open, joints: [base_yaw], horizon_s: 0.1}}\n\
                 - {at: 0.3, disconnect: 1}\n";
    let script = Script::parse(steps, Path::new("journal.yaml"), &robot.joints).unwrap();
    let report = Rehearsal::new(robot, script).unwrap().run();
    let lines: Vec<&str> = report.journal.iter().map(|(_, l)| l.as_str()).collect();
    assert!(lines.iter().any(|l| l.contains("went away")), "{lines:#?}");
    assert!(
        lines.iter().any(|l| l.contains("motions ready")),
        "{lines:#?}"
    );
}
