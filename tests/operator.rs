//! The operator's side of both binaries: exit codes, argument checks shared with the
//! configuration, the default configuration, quiet ends on a closed pipe, completions and man
//! pages, OS error hints, and what `status`, `--watch` and the journal tell about a daemon on the
//! simulated backend.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

mod daemon_harness;

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard, PoisonError};

use daemon_harness::{Daemon, bump_seq, repo};

fn motiond(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_motiond"))
        .args(args)
        .current_dir(repo())
        .env_remove("MOTIOND_CONFIG")
        .output()
        .unwrap()
}

fn motionctl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_motionctl"))
        .args(args)
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Daemons run their loops under SCHED_FIFO: one at a time, as in daemon_serve.
fn one_daemon_at_a_time() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    TURN.lock().unwrap_or_else(PoisonError::into_inner)
}

#[test]
fn rates_and_priorities_are_checked_as_the_configuration_checks_them() {
    let wave = "config/motions/wave.seq";
    let out = motiond(&["play", wave, "--priority", "120"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("120 is outside the SCHED_FIFO priorities 1..=99"));
    let out = motiond(&["play", wave, "--rate", "9000"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("9000 Hz is outside 1..=8000 Hz"));
    let out = motiond(&["check", wave, "--rate", "fast"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("\"fast\" is not a number (Hz)"));
    let out = motiond(&["resample", wave, "--rate", "0"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn check_and_resample_use_the_default_configuration() {
    // In a checkout: config/motiond.yaml, the demo arm (6 named columns, proved).
    let out = motiond(&["resample", "config/motions/wave.seq", "--rate", "10"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).starts_with("time,base_yaw,shoulder_pitch,"));
    let out = motiond(&["check", "config/motions/wave.seq"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("on demo_arm"));

    // Elsewhere: the installed configuration, named in the error when it is missing.
    let dir = tempfile::tempdir().unwrap();
    let wave = repo().join("config/motions/wave.seq");
    let out = Command::new(env!("CARGO_BIN_EXE_motiond"))
        .args(["check", wave.to_str().unwrap()])
        .current_dir(dir.path())
        .env_remove("MOTIOND_CONFIG")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    if !Path::new("/etc/motiond/motiond.yaml").exists() {
        assert!(
            stderr(&out).contains("no configuration at /etc/motiond/motiond.yaml"),
            "{}",
            stderr(&out)
        );
    }
    // MOTIOND_CONFIG names it from anywhere.
    let out = Command::new(env!("CARGO_BIN_EXE_motiond"))
        .args(["check", wave.to_str().unwrap()])
        .current_dir(dir.path())
        .env("MOTIOND_CONFIG", repo().join("config/motiond.yaml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// Reads one line of a child's stdout, closes it, and returns how the child ended.
fn read_one_line_then_close(mut cmd: Command) -> (std::process::ExitStatus, String, String) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    {
        let mut out = BufReader::new(child.stdout.take().unwrap());
        out.read_line(&mut first).unwrap();
    }
    let status = child.wait().unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (status, first, err)
}

fn quiet_end(status: std::process::ExitStatus, err: &str) {
    use std::os::unix::process::ExitStatusExt;
    assert!(
        status.code() == Some(0) || status.signal() == Some(libc::SIGPIPE),
        "{status:?}"
    );
    assert_eq!(err, "", "nothing on stderr");
}

#[test]
fn a_closed_pipe_ends_quietly() {
    let mut resample = Command::new(env!("CARGO_BIN_EXE_motiond"));
    resample
        .args(["resample", "config/motions/wave.seq", "--rate", "8000"])
        .current_dir(repo());
    let (status, first, err) = read_one_line_then_close(resample);
    assert!(first.starts_with("time,"));
    quiet_end(status, &err);

    let mut completions = Command::new(env!("CARGO_BIN_EXE_motionctl"));
    completions.args(["completions", "zsh"]);
    let (status, _, err) = read_one_line_then_close(completions);
    quiet_end(status, &err);

    let _turn = one_daemon_at_a_time();
    let daemon = Daemon::start(&[]);
    let mut watch = Command::new(env!("CARGO_BIN_EXE_motionctl"));
    watch
        .arg("--socket")
        .arg(&daemon.socket)
        .args(["status", "--watch", "--json"]);
    let (status, first, err) = read_one_line_then_close(watch);
    assert!(first.contains("\"state\""), "{first}");
    quiet_end(status, &err);
}

#[test]
fn completions_and_man_pages_come_from_the_command_lines() {
    for (bin, subcommand) in [
        (env!("CARGO_BIN_EXE_motiond"), "resample"),
        (env!("CARGO_BIN_EXE_motionctl"), "quick-stop"),
    ] {
        let name = Path::new(bin).file_name().unwrap().to_str().unwrap();
        for (shell, marker) in [
            ("bash", "complete -F"),
            ("zsh", "#compdef"),
            ("fish", "complete -c"),
        ] {
            let out = Command::new(bin)
                .args(["completions", shell])
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(0));
            let text = stdout(&out);
            assert!(text.contains(marker), "{name} {shell}");
            assert!(text.contains(subcommand), "{name} {shell}");
        }
        let out = Command::new(bin).arg("man").output().unwrap();
        assert_eq!(out.status.code(), Some(0));
        let page = stdout(&out);
        assert!(page.starts_with(".ie") || page.contains(".TH"), "{name}");
        assert!(page.contains(&format!(".TH {name}")), "{name}");
        assert!(page.contains(&subcommand.replace('-', "\\-")), "{name}");
        // Every subcommand the page refers to has a page of its own.
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new(bin)
            .args(["man", "--dir"])
            .arg(dir.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(dir.path().join(format!("{name}.1")).is_file());
        assert!(dir.path().join(format!("{name}-{subcommand}.1")).is_file());
    }
}

#[test]
fn motionctl_without_a_daemon_exits_3_with_a_hint() {
    let out = motionctl(&["--socket", "/nonexistent/control.sock", "status"]);
    assert_eq!(out.status.code(), Some(3));
    let err = stderr(&out);
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
    assert!(err.contains("hint: is motiond running?"), "{err}");
}

#[test]
fn serve_without_its_runtime_folder_says_what_to_do() {
    let out = motiond(&[
        "serve",
        "--dry-run",
        "--socket",
        "/nonexistent-motiond-dir/control.sock",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
    assert!(
        err.contains("create it") && err.contains("--socket PATH"),
        "{err}"
    );
}

#[test]
fn a_missing_bus_device_suggests_dry_run() {
    let dir = tempfile::tempdir().unwrap();
    let repo = env!("CARGO_MANIFEST_DIR");
    let config = dir.path().join("motiond.yaml");
    std::fs::write(
        &config,
        format!(
            "robot:\n  skel: {repo}/config/demo-arm.skel\n  joints: [base_yaw, shoulder_pitch, \
             elbow_pitch, wrist_pitch, wrist_roll, gripper_slide]\n\
             motion:\n  library: {repo}/config/motions\n\
             backend: buses\n\
             buses:\n  - name: arm\n    transport: serial\n    device: {dev}\n    \
             baud: 4000000\n    protocol: dynamixel\n    joints:\n      \
             base_yaw: {{id: 1}}\n      shoulder_pitch: {{id: 2}}\n      elbow_pitch: {{id: 3}}\n      \
             wrist_pitch: {{id: 4}}\n      wrist_roll: {{id: 5}}\n      gripper_slide: {{id: 6}}\n\
             daemon:\n  socket: {socket}\n  watchdog: false\n",
            dev = dir.path().join("ttyNONE").display(),
            socket = dir.path().join("control.sock").display(),
        ),
    )
    .unwrap();
    let config = config.to_str().unwrap();
    for args in [
        &["serve", "--config", config][..],
        &["play", "config/motions/wave.seq", "--config", config][..],
    ] {
        let out = motiond(args);
        let err = stderr(&out);
        assert_ne!(out.status.code(), Some(0), "{err}");
        assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
        assert!(
            err.contains("cannot open") && err.contains("hint: ") && err.contains("--dry-run"),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn status_watch_at_and_the_journal() {
    let _turn = one_daemon_at_a_time();
    let daemon = Daemon::start(&[("bump.seq", bump_seq(1.0, 0.02))]);
    let socket = daemon.socket.to_str().unwrap().to_string();
    let ctl = |args: &[&str]| {
        let mut all = vec!["--socket", socket.as_str()];
        all.extend(args);
        motionctl(&all)
    };

    let status = ctl(&["--json", "status"]);
    let reply: serde_json::Value = serde_json::from_str(stdout(&status).trim()).unwrap();
    assert_eq!(reply["backend"], "sim");
    assert_eq!(reply["rate_hz"], 1000.0);
    let text = stdout(&ctl(&["status"]));
    assert!(text.contains("backend    sim at 1000 Hz"), "{text}");
    // What the loop obtained: unpinned, the PM QoS request is the global one (held as root,
    // else a warning saying why and what to do).
    let rt = &reply["rt"];
    assert!(text.contains("real time  cpu any, "), "{text}");
    match rt["cpu_wakeup_latency"]["path"].as_str() {
        Some(path) => {
            assert_eq!(path, "/dev/cpu_dma_latency");
            assert_eq!(rt["cpu_wakeup_latency"]["latency_us"], 0);
            assert!(
                text.contains("CPU held awake (0 µs, /dev/cpu_dma_latency)"),
                "{text}"
            );
        }
        None => {
            let warnings = rt["warnings"].to_string();
            assert!(
                warnings.contains("cannot hold the loop's CPU awake"),
                "{warnings}"
            );
            assert!(text.contains("not obtained: cannot hold"), "{text}");
        }
    }

    // A start time in the past is a bad request (exit 2), saying how far in the past.
    let out = ctl(&["play", "bump", "--at", "10"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("s in the past"), "{}", stderr(&out));

    // --watch counts down to --at and ends with the result.
    let out = ctl(&["play", "bump", "--at", "+0.5", "--watch"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("starts in"), "{text}");
    let last = text.lines().last().unwrap();
    assert!(
        last.starts_with("bump finished after") && last.contains("worst following error"),
        "{last}"
    );
    assert!(last.contains(" overruns"), "{last}");

    let out = ctl(&["stop"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (_, log) = daemon.signal_and_wait(&[libc::SIGTERM]);
    // Who (SO_PEERCRED), what, and the result: once per request.
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let lines = |what: &str| -> Vec<&str> {
        let needle = format!("request {what} from uid {uid} gid ");
        log.lines().filter(|l| l.contains(&needle)).collect()
    };
    let refused = lines("play bump --at 10");
    assert_eq!(refused.len(), 1, "{log}");
    assert!(refused[0].contains(": bad_request: "), "{}", refused[0]);
    assert_eq!(log.matches("request play bump --at ").count(), 2, "{log}");
    assert!(log.contains(": ok (playback 1)"), "{log}");
    let stops = lines("stop");
    assert_eq!(stops.len(), 1, "{log}");
    assert!(stops[0].ends_with(": ok"), "{}", stops[0]);
    assert!(!log.contains("request status"), "{log}");
}

#[test]
fn a_fault_is_logged_at_once_with_kind_joint_and_code() {
    let _turn = one_daemon_at_a_time();
    let daemon = Daemon::start_with(
        &[],
        "sim:\n  fault: {kind: error, at_tick: 200, dof: elbow_pitch}\n",
        &[],
    );
    let socket = daemon.socket.to_str().unwrap().to_string();
    daemon
        .client()
        .wait_for("faulted", |s| s["state"] == "fault");
    // `status --watch` ends with the fault, in the words of status and the journal.
    let out = motionctl(&["--socket", &socket, "status", "--watch"]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("drive_fault on elbow_pitch"),
        "{}",
        stderr(&out)
    );
    let (_, log) = daemon.signal_and_wait(&[libc::SIGTERM]);
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("fault: drive_fault on elbow_pitch"))
        .collect();
    assert_eq!(lines.len(), 1, "{log}");
    assert!(
        lines[0].contains("kind drive_fault, joint elbow_pitch, code"),
        "{}",
        lines[0]
    );
}

/// A tmux session running `motionctl top` against a daemon; killed on drop.
struct Tmux(String);

impl Tmux {
    fn start(name: &str, command: &str) -> Option<Tmux> {
        Tmux::sized(name, command, 140, 40)
    }

    /// A session of `width` × `height` cells.
    fn sized(name: &str, command: &str, width: u16, height: u16) -> Option<Tmux> {
        if Command::new("tmux").arg("-V").output().is_err() {
            assert!(
                std::env::var("CI").is_err(),
                "tmux is missing (CI installs it in .ci/run)"
            );
            eprintln!("skipped: no tmux");
            return None;
        }
        let ok = Command::new("tmux")
            .args([
                "new-session",
                "-d",
                "-x",
                &width.to_string(),
                "-y",
                &height.to_string(),
                "-s",
                name,
                command,
            ])
            .status()
            .unwrap()
            .success();
        assert!(ok, "tmux new-session");
        Some(Tmux(name.to_string()))
    }

    fn screen(&self) -> String {
        let out = Command::new("tmux")
            .args(["capture-pane", "-p", "-t", &self.0])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits until the screen shows `what` (a liveness bound, not a speed check).
    fn wait_for(&self, what: &str) -> String {
        self.wait_for_all(&[what])
    }

    /// Waits until one capture shows every text of `all`: a capture may catch `top` halfway
    /// through drawing a frame, so what a test reads from one screen is waited for together.
    fn wait_for_all(&self, all: &[&str]) -> String {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let screen = self.screen();
            if all.iter().all(|what| screen.contains(what)) {
                return screen;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the screen never showed all of {all:?}:\n{screen}"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    fn keys(&self, keys: &str) {
        let ok = Command::new("tmux")
            .args(["send-keys", "-t", &self.0, keys])
            .status()
            .unwrap()
            .success();
        assert!(ok, "tmux send-keys");
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.0])
            .status();
    }
}

#[test]
fn top_shows_the_daemon_and_its_keys_stop_pause_and_resume() {
    let _turn = one_daemon_at_a_time();
    let daemon = Daemon::start(&[("slow.seq", bump_seq(20.0, 0.3))]);
    let command = format!(
        "{} --socket {} top --refresh 0.05; echo motionctl-top-exited-$?; sleep 60",
        env!("CARGO_BIN_EXE_motionctl"),
        daemon.socket.display()
    );
    let name = format!("motiond-top-{}", std::process::id());
    let Some(tmux) = Tmux::start(&name, &command) else {
        return;
    };
    // A whole frame: the joints' table, the loop's and the faults' boxes, the keys' line.
    tmux.wait_for_all(&[
        "base_yaw",
        "backend sim at 1000 Hz",
        "shoulder_pitch",
        "gripper_slide",
        "measured ● commanded │",
        "wake-up latency µs",
        "overruns",
        "faults",
        "quick stop",
        "pause/resume",
        "-2.80",
        "2.80",
    ]);

    let mut client = daemon.client();
    let reply = client.request(serde_json::json!({"cmd":"play","motion":"slow"}));
    assert_eq!(reply["ok"], true, "{reply}");
    tmux.wait_for("state playing");
    tmux.wait_for("slow ");
    tmux.keys("p");
    tmux.wait_for("last: pause: ok");
    client.wait_for("paused", |s| s["state"] == "paused");
    tmux.wait_for("state paused");
    tmux.keys("p");
    tmux.wait_for("last: resume: ok");
    client.wait_for("playing again", |s| s["state"] != "paused");
    tmux.keys("s");
    tmux.wait_for("last: stop: ok");
    client.wait_for("at rest", daemon_harness::at_rest);
    tmux.wait_for("last: slow stopped");
    tmux.keys("q");
    tmux.wait_for("motionctl-top-exited-0");
}

#[test]
fn top_at_80_by_24_scales_its_bars_and_shows_the_recorders_events() {
    let _turn = one_daemon_at_a_time();
    let daemon = Daemon::start(&[("slow.seq", bump_seq(20.0, 0.3))]);
    let command = format!(
        "{} --socket {} top --refresh 0.05; echo motionctl-top-exited-$?; sleep 60",
        env!("CARGO_BIN_EXE_motionctl"),
        daemon.socket.display()
    );
    let name = format!("motiond-top80-{}", std::process::id());
    let Some(tmux) = Tmux::sized(&name, &command, 80, 24) else {
        return;
    };
    // A whole frame (the keys' line is its last), then every joint's bar whole, both ends
    // inside the 80 columns.
    let screen = tmux.wait_for_all(&["gripper_slide", "quit"]);
    for joint in [
        "base_yaw",
        "shoulder_pitch",
        "elbow_pitch",
        "wrist_pitch",
        "wrist_roll",
        "gripper_slide",
    ] {
        let line = screen
            .lines()
            .find(|l| l.contains(joint))
            .unwrap_or_else(|| panic!("no {joint}:\n{screen}"));
        assert!(
            line.contains('├') && line.contains('┤'),
            "{joint}'s bar is cut:\n{screen}"
        );
        assert!(line.chars().count() <= 80, "{line}");
    }
    let mut client = daemon.client();
    let reply = client.request(serde_json::json!({"cmd":"play","motion":"slow"}));
    assert_eq!(reply["ok"], true, "{reply}");
    client.wait_for("playing", |s| s["state"] == "playing");
    let reply = client.request(serde_json::json!({"cmd":"stop"}));
    assert_eq!(reply["ok"], true, "{reply}");
    // The flight recorder's events, with their age: the stop asked for, the state it led to.
    tmux.wait_for("request stop from uid");
    tmux.wait_for_all(&["→ holding", " s ago  ", "quit"]);
    tmux.keys("q");
    tmux.wait_for("motionctl-top-exited-0");
}

#[test]
fn drives_lists_every_drive_and_a_dry_run_names_the_buses_it_stands_in_for() {
    let _turn = one_daemon_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let socket = Daemon::socket_in(&dir);
    let example = std::fs::read_to_string(repo().join("config/examples/mit.yaml")).unwrap();
    let config = example
        .replace(
            "../demo-arm.skel",
            &repo().join("config/demo-arm.skel").display().to_string(),
        )
        .replace(
            "../motions",
            &repo().join("config/motions").display().to_string(),
        )
        + &format!(
            "rt:\n  lock_memory: false\n  max_late_ms: 1000\ndaemon:\n  socket: {}\nrecorder:\n  dir: {}\n",
            socket.display(),
            dir.path().join("flight").display()
        );
    let config_path = dir.path().join("motiond.yaml");
    std::fs::write(&config_path, config).unwrap();
    let mut serve = Command::new(env!("CARGO_BIN_EXE_motiond"))
        .args(["serve", "--dry-run", "--config"])
        .arg(&config_path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut reply = serde_json::Value::Null;
    for _ in 0..600 {
        let out = motionctl(&["--socket", socket.to_str().unwrap(), "--json", "drives"]);
        if out.status.success() {
            reply = serde_json::from_slice(&out.stdout).unwrap();
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let table = motionctl(&["--socket", socket.to_str().unwrap(), "drives"]);
    let _ = serve.kill();
    let _ = serve.wait();
    let drives = reply["drives"].as_array().expect("a drives reply");
    assert_eq!(drives.len(), 6, "{reply}");
    assert_eq!(reply["backend"], "dry-run");
    let elbow = drives.iter().find(|d| d["joint"] == "elbow_pitch").unwrap();
    assert_eq!(
        (&elbow["bus"], &elbow["family"], &elbow["id"]),
        (
            &serde_json::json!("legs"),
            &serde_json::json!("mit"),
            &serde_json::json!(3)
        )
    );
    assert_eq!(elbow["state"], "ready", "{elbow}");
    assert!(
        elbow["position"].is_number() && elbow["velocity"].is_number(),
        "{elbow}"
    );
    assert_eq!(elbow["status_word"], 1, "{elbow}");
    let text = stdout(&table);
    assert!(text.starts_with("joint"), "{text}");
    assert!(
        text.contains("elbow_pitch") && text.contains("legs") && text.contains("mit"),
        "{text}"
    );
    assert!(
        text.contains("dry-run: simulated motors stand in"),
        "{text}"
    );
}

#[test]
fn play_names_what_went_wrong_and_where_it_wrote() {
    // A library name where a path is wanted.
    let out = motiond(&["play", "wave"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("takes the path of a .seq file"), "{err}");
    assert!(err.contains("`motionctl play wave`"), "{err}");
    // A play the session refuses (too fast for the limits): no loop report of the few ticks it
    // ran, only why.
    let out = motiond(&[
        "play",
        "config/motions/wave.seq",
        "--clock",
        "manual",
        "--speed",
        "8",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(!stdout(&out).contains("ticks at"), "{}", stdout(&out));
    assert!(stderr(&out).contains("refused"), "{}", stderr(&out));
    // A fault says when; the trace and plot say where they went; speeds are short.
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.csv");
    let plot = dir.path().join("p.svg");
    let out = motiond(&[
        "play",
        "config/motions/wave.seq",
        "--clock",
        "manual",
        "--fault",
        "elbow_pitch:stall:2",
        "--trace",
        trace.to_str().unwrap(),
        "--plot",
        plot.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    // Stalled at 2 s, caught by the following error at 4.8 s.
    assert!(
        err.contains("the loop faulted 4.8")
            && err.contains(" s into the motion: stall on elbow_pitch"),
        "{err}"
    );
    assert!(
        err.contains("wrote the trace (") && err.contains(trace.to_str().unwrap()),
        "{err}"
    );
    assert!(
        err.contains(&format!("wrote the plot to {}", plot.display())),
        "{err}"
    );
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(
        svg.lines().any(|l| l.trim() == "fault"),
        "the plot marks the fault"
    );
    let out = motiond(&[
        "play",
        "config/motions/wave.seq",
        "--clock",
        "manual",
        "--policy",
        "retime",
        "--speed",
        "3",
    ]);
    let text = stdout(&out);
    let speed = text
        .lines()
        .find(|l| l.starts_with("speed "))
        .unwrap_or_else(|| panic!("{text}"));
    let played = speed.split_whitespace().nth(1).unwrap();
    assert!(
        played.split('.').nth(1).is_none_or(|d| d.len() <= 4),
        "{speed}"
    );
}

#[test]
fn check_prints_a_table_with_units() {
    let out = motiond(&["check", "config/motions/wave.seq"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let header = text.lines().nth(1).unwrap();
    for column in ["DOF", "position", "limits", "velocity", "acceleration"] {
        assert!(header.contains(column), "{text}");
    }
    let units = text.lines().nth(2).unwrap();
    assert!(
        units.contains("rad or m")
            && units.contains("rad/s or m/s")
            && units.contains("rad/s² or m/s²"),
        "{text}"
    );
    assert!(text.contains("-2.8 … 2.8"), "{text}");
}

#[test]
fn limits_the_configuration_gives_silence_the_urdf_warning_and_a_model_without_any_is_refused_for_motors()
 {
    // The URDF demo arm: its configuration gives every acceleration, so nothing to warn.
    let out = motiond(&[
        "check",
        "config/motions/wave.seq",
        "--config",
        "config/demo-arm-urdf.yaml",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stderr(&out).contains("acceleration"), "{}", stderr(&out));
    // Without it, the model alone: warned, naming the DOFs.
    let out = motiond(&[
        "check",
        "config/motions/wave.seq",
        "--model",
        "config/demo-arm.urdf",
    ]);
    assert!(
        stderr(&out).contains("have no velocity or acceleration limit (base_yaw: acceleration"),
        "{}",
        stderr(&out)
    );
    // A bus configuration on that model: refused for the motors, rehearsed with --dry-run.
    let dir = tempfile::tempdir().unwrap();
    let config = std::fs::read_to_string(repo().join("config/examples/mit.yaml"))
        .unwrap()
        .replace(
            "skel: ../demo-arm.skel",
            &format!("model: {}", repo().join("config/demo-arm.urdf").display()),
        )
        .replace(
            "../motions",
            &repo().join("config/motions").display().to_string(),
        );
    let path = dir.path().join("mit.yaml");
    std::fs::write(&path, &config).unwrap();
    let wave = "config/motions/wave.seq";
    let out = motiond(&["play", wave, "--config", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("refusing to drive real motors"), "{err}");
    assert!(err.contains("robot.allow_unlimited: true"), "{err}");
    let out = motiond(&["serve", "--config", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("refusing to drive real motors"),
        "{}",
        stderr(&out)
    );
    let out = motiond(&[
        "play",
        wave,
        "--config",
        path.to_str().unwrap(),
        "--dry-run",
        "--clock",
        "manual",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("have no velocity or acceleration limit"));
    // Said explicitly: motiond goes on to open the bus (absent here).
    let allowed = config.replace("robot:\n", "robot:\n  allow_unlimited: true\n");
    std::fs::write(&path, allowed).unwrap();
    let out = motiond(&["play", wave, "--config", path.to_str().unwrap()]);
    assert!(
        !stderr(&out).contains("refusing to drive real motors"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn inspect_prints_a_table_for_people_and_json_for_scripts() {
    let out = motiond(&["inspect", "model", "config/demo-arm.urdf", "--table"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("position (rad|m)") && text.contains("elbow_pitch"),
        "{text}"
    );
    assert!(text.contains("revolute"), "{text}");
    // Piped (as here) it is JSON, as scripts expect; --json says so explicitly.
    let piped = motiond(&["inspect", "model", "config/demo-arm.urdf"]);
    let json = motiond(&["inspect", "model", "config/demo-arm.urdf", "--json"]);
    assert_eq!(stdout(&piped), stdout(&json));
    let _: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let out = motiond(&["inspect", "seq", "config/motions/wave.seq", "--table"]);
    assert!(
        stdout(&out).contains("JointDisplacement"),
        "{}",
        stdout(&out)
    );
    let help = stdout(&motiond(&["inspect", "--help"]));
    assert!(
        help.contains("URDF") && help.contains("SDF") && help.contains("XODE"),
        "{help}"
    );
}

/// `serve` and `play` open the E-stop line through the same library call and say the same when it
/// cannot be: the configuration's line of the key it is about, exit 2, before a socket or a loop.
#[test]
fn serve_and_play_place_a_missing_estop_chip_at_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let config = std::fs::read_to_string(repo().join("config/motiond.yaml"))
        .unwrap()
        .replace(
            "model: demo-arm.skel",
            &format!("model: {}", repo().join("config/demo-arm.skel").display()),
        )
        .replace(
            "library: motions",
            &format!("library: {}", repo().join("config/motions").display()),
        );
    let config = format!(
        "{config}estop:\n  gpio:\n    chip: /dev/gpiochip-none\n    line: 3\n    active: low\n"
    );
    let chip_line = config.lines().count() - 2;
    let path = dir.path().join("motiond.yaml");
    std::fs::write(&path, &config).unwrap();
    let path = path.to_str().unwrap();
    let socket = dir.path().join("control.sock");
    let expected =
        format!("{path}:{chip_line}:11: estop.gpio.chip /dev/gpiochip-none: no such GPIO chip");
    for args in [
        &[
            "serve",
            "--config",
            path,
            "--socket",
            socket.to_str().unwrap(),
        ][..],
        &[
            "play",
            "config/motions/wave.seq",
            "--config",
            path,
            "--clock",
            "manual",
        ][..],
    ] {
        let out = motiond(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).starts_with(&expected),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}
