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
