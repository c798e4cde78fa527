//! The operator's side of both binaries: exit codes, argument checks shared with the
//! configuration, the default configuration, quiet ends on a closed pipe, completions and man
//! pages, OS error hints, and what `status`, `--watch` and the journal tell about a daemon on the
//! simulated backend.

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
                "140",
                "-y",
                "40",
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
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let screen = self.screen();
            if screen.contains(what) {
                return screen;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the screen never showed {what:?}:\n{screen}"
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
    // The keys' line is drawn last: a screen caught mid-draw lacks the boxes below the joints.
    let screen = tmux.wait_for("pause/resume");
    for text in [
        "backend sim at 1000 Hz",
        "shoulder_pitch",
        "gripper_slide",
        "measured ● commanded │",
        "wake-up latency µs",
        "overruns",
        "faults",
        "quick stop",
        "pause/resume",
    ] {
        assert!(screen.contains(text), "no {text:?}:\n{screen}");
    }
    assert!(
        screen.contains("-2.80") && screen.contains("2.80"),
        "{screen}"
    );

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
