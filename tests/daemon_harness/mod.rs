//! Starts `motiond serve` on the simulated backend with a temporary config and socket, and talks
//! to it. Shared by `tests/daemon_*.rs` and `benches/daemon.rs`.
#![allow(dead_code)] // each user needs a different part

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub const RATE_HZ: f64 = 1000.0;

/// The demo arm's `.seq` column order (config/motiond.yaml `robot.joints`).
pub const DEMO_JOINTS: [&str; 6] = [
    "base_yaw",
    "shoulder_pitch",
    "elbow_pitch",
    "wrist_pitch",
    "wrist_roll",
    "gripper_slide",
];

/// A short motion of the demo arm: the joints move out and back along a smooth bump, so it ends
/// where it starts. Peaks: velocity `amplitude · π / duration`, acceleration
/// `amplitude · 2π² / duration²` (base_yaw, elbow_pitch and the wrists move by `amplitude`, the
/// shoulder by half of it), to be kept inside the demo arm's limits (2 rad/s, 8 rad/s²).
pub fn bump_seq(duration_s: f64, amplitude: f64) -> String {
    seq(duration_s, |s| {
        amplitude * (1.0 - (2.0 * std::f64::consts::PI * s).cos()) / 2.0
    })
}

/// Like [`bump_seq`] but only the way out: it ends `amplitude` away from where it starts.
pub fn rise_seq(duration_s: f64, amplitude: f64) -> String {
    seq(duration_s, |s| {
        amplitude * (1.0 - (std::f64::consts::PI * s).cos()) / 2.0
    })
}

/// A 100 Hz demo-arm motion whose joints follow `shape(s)`, `s` running from 0 to 1.
fn seq(duration_s: f64, shape: impl Fn(f64) -> f64) -> String {
    let rate = 100.0;
    let frames = (duration_s * rate) as usize + 1;
    let mut text = format!(
        "type: CompositeSeq\ncontent: BodyMotion\nformatVersion: 2\nframeRate: {rate}\nnumFrames: {frames}\n\
         components:\n  - type: MultiValueSeq\n    content: JointDisplacement\n    numParts: 6\n    frames:\n"
    );
    for i in 0..frames {
        let x = shape(i as f64 / (frames - 1) as f64);
        text.push_str(&format!(
            "      - [{x}, {h}, {n}, {x}, {x}, 0.01]\n",
            h = 0.5 * x,
            n = -x
        ));
    }
    text
}

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A running daemon on a temporary socket; killed and cleaned up on drop.
pub struct Daemon {
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    child: Option<Child>,
}

impl Daemon {
    /// The demo arm with a library folder holding `files` (name, contents).
    pub fn start(files: &[(&str, String)]) -> Daemon {
        Daemon::start_with(files, "", &[])
    }

    /// [`Daemon::start`] with `extra` appended to the config (top-level YAML sections) and
    /// `envs` set for the daemon.
    pub fn start_with(files: &[(&str, String)], extra: &str, envs: &[(&str, String)]) -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        let library = dir.path().join("motions");
        std::fs::create_dir(&library).unwrap();
        for (name, text) in files {
            std::fs::write(library.join(name), text).unwrap();
        }
        Daemon::start_in(
            dir,
            &repo().join("config/demo-arm.skel"),
            &DEMO_JOINTS,
            &library,
            extra,
            envs,
        )
    }

    /// Any robot and library folder; config and socket go into `dir`.
    pub fn start_in(
        dir: tempfile::TempDir,
        skel: &Path,
        joints: &[&str],
        library: &Path,
        extra: &str,
        envs: &[(&str, String)],
    ) -> Daemon {
        let socket = Daemon::socket_in(&dir);
        let config = format!(
            "robot:\n  skel: {skel}\n  joints: [{joints}]\n\
             motion:\n  library: {library}\n\
             control:\n  rate_hz: {RATE_HZ}\n\
             rt:\n  lock_memory: false\n  max_late_ms: 1000\n\
             backend: sim\n\
             daemon:\n  socket: {socket}\n  shutdown_timeout_s: 5\n  safe_state: hold\n  watchdog: {watchdog}\n{recorder}{extra}",
            skel = skel.display(),
            joints = joints.join(", "),
            library = library.display(),
            socket = socket.display(),
            watchdog = envs.iter().any(|(k, _)| *k == "WATCHDOG_USEC"),
            // The flight recorder's dumps stay with the test, not in /var/lib/motiond.
            recorder = if extra.contains("recorder:") {
                String::new()
            } else {
                format!(
                    "recorder:\n  dir: {}\n",
                    dir.path().join("flight").display()
                )
            },
        );
        Daemon::start_config(dir, &config, envs)
    }

    /// A daemon on a configuration of the caller's, whose `daemon.socket` must be
    /// [`Daemon::socket_in`] `dir`; returns once its library is loaded.
    pub fn start_config(dir: tempfile::TempDir, config: &str, envs: &[(&str, String)]) -> Daemon {
        let daemon = Daemon::start_loading(dir, config, envs);
        daemon.wait_for_library();
        daemon
    }

    /// [`Daemon::start_config`], returning as soon as the socket answers (the library may still
    /// be loading).
    pub fn start_loading(dir: tempfile::TempDir, config: &str, envs: &[(&str, String)]) -> Daemon {
        let socket = Daemon::socket_in(&dir);
        let config_path = dir.path().join("motiond.yaml");
        std::fs::write(&config_path, config).unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_motiond"));
        command
            .args(["serve", "--config"])
            .arg(&config_path)
            .envs(envs.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        dies_with_this_thread(&mut command);
        let child = command.spawn().unwrap();
        let mut daemon = Daemon {
            dir,
            socket,
            child: Some(child),
        };
        daemon.wait_for_socket();
        daemon
    }

    /// Where the daemon of `dir` listens.
    pub fn socket_in(dir: &tempfile::TempDir) -> PathBuf {
        dir.path().join("control.sock")
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    fn wait_for_socket(&mut self) {
        // A liveness bound for a loaded machine, not a speed assertion.
        let deadline = Instant::now() + Duration::from_secs(60);
        while UnixStream::connect(&self.socket).is_err() {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                let mut err = String::new();
                let _ = child.stderr.take().unwrap().read_to_string(&mut err);
                panic!("motiond exited with {status}: {err}");
            }
            assert!(Instant::now() < deadline, "motiond did not open its socket");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until the daemon's library is loaded (it is read after the socket comes up).
    pub fn wait_for_library(&self) {
        self.client().wait_for_library();
    }

    pub fn client(&self) -> Client {
        Client::connect(&self.socket)
    }

    pub fn motionctl(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_motionctl"))
            .arg("--socket")
            .arg(&self.socket)
            .args(args)
            .output()
            .unwrap()
    }

    /// Sends `signals` one after the other and waits for the exit; returns the exit code and
    /// the log.
    pub fn signal_and_wait(mut self, signals: &[i32]) -> (Option<i32>, String) {
        let mut child = self.child.take().unwrap();
        for &signal in signals {
            // SAFETY: signalling our own child by its pid.
            unsafe { libc::kill(child.id() as i32, signal) };
        }
        let status = child.wait().unwrap();
        (status.code(), stderr_of(&mut child))
    }
}

/// All a child started with a piped stderr wrote there, read to its end (the child's exit).
pub fn stderr_of(child: &mut Child) -> String {
    let mut log = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    log
}

/// Sets a daemon's file-size limit (RLIMIT_FSIZE; `None` lifts it): its writes past `bytes`
/// fail with EFBIG, as on a full disk.
pub fn limit_file_size(pid: u32, bytes: Option<u64>) {
    let limit = libc::rlimit {
        rlim_cur: bytes.unwrap_or(libc::RLIM_INFINITY),
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: our own child's limit, from a valid rlimit; the old value is not asked for.
    let rc = unsafe {
        libc::prlimit(
            pid as libc::pid_t,
            libc::RLIMIT_FSIZE,
            &limit,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(rc, 0, "prlimit: {}", std::io::Error::last_os_error());
}

/// The child is killed when the thread that starts it ends, even if this process is killed
/// before `Drop` runs: a test run never leaves a daemon (and its real-time thread) behind.
pub fn dies_with_this_thread(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec here.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

pub struct Client {
    reader: BufReader<UnixStream>,
    pub writer: UnixStream,
}

impl Client {
    pub fn connect(path: &Path) -> Client {
        let stream = UnixStream::connect(path).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        Client {
            reader: BufReader::new(stream.try_clone().unwrap()),
            writer: stream,
        }
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).unwrap();
    }

    pub fn reply(&mut self) -> Value {
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("reply {line:?}: {e}"))
    }

    pub fn request(&mut self, request: Value) -> Value {
        self.send_raw(format!("{request}\n").as_bytes());
        self.reply()
    }

    pub fn status(&mut self) -> Value {
        let status = self.request(serde_json::json!({"cmd":"status"}));
        assert_eq!(status["ok"], true, "{status}");
        status
    }

    /// Waits until `list` shows no motion loading (a liveness bound, not a speed check).
    pub fn wait_for_library(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let list = self.request(serde_json::json!({"cmd":"list"}));
            if list["loading"] == 0 {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the library never loaded: {list}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Polls the status until `done` holds (a liveness bound of a minute, not a speed check).
    pub fn wait_for(&mut self, what: &str, mut done: impl FnMut(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let status = self.status();
            if done(&status) {
                return status;
            }
            assert!(Instant::now() < deadline, "never {what}: {status}");
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

/// Idle or holding: no motion active.
pub fn at_rest(status: &Value) -> bool {
    matches!(status["state"].as_str(), Some("idle" | "holding"))
}

/// `clients` connections at once, each sending `requests` requests (status, list and an unknown
/// command in turn) and checking every reply; returns how many were answered.
pub fn flood(socket: &Path, clients: usize, requests: usize) -> usize {
    let threads: Vec<_> = (0..clients)
        .map(|i| {
            let socket = socket.to_path_buf();
            std::thread::spawn(move || {
                let mut client = Client::connect(&socket);
                let mut answered = 0;
                for j in 0..requests {
                    let request = match (i + j) % 3 {
                        0 => serde_json::json!({"cmd":"status"}),
                        1 => serde_json::json!({"cmd":"list"}),
                        _ => serde_json::json!({"cmd":"fly"}),
                    };
                    let reply = client.request(request);
                    assert!(reply["ok"] == true || reply["error"]["code"] == "unknown_command");
                    answered += 1;
                }
                answered
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).sum()
}
