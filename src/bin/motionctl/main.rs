//! `motionctl`: talks to `motiond serve` over its control socket.
//!
//! Exit codes: 0 done; 1 refused (the daemon answered with an error); 2 invalid arguments (also
//! the daemon's `bad_request`); 3 daemon not reachable (no socket, connection lost, unreadable
//! reply); 4 fault (the daemon reports a fault, or a watched motion ended in one).

use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::{Parser, Subcommand};

mod hint;
mod stream;
mod top;
use motiond::daemon::protocol::{MAX_AT_AHEAD_S, MAX_SPEED, RECORD_RATE_HZ, Request};
use serde_json::Value;

const EXIT_REFUSED: u8 = 1;
const EXIT_INVALID: u8 = 2;
const EXIT_UNREACHABLE: u8 = 3;
const EXIT_FAULT: u8 = 4;

/// How often `--watch` asks for the status.
const WATCH_PERIOD: Duration = Duration::from_millis(100);

#[derive(Parser)]
#[command(
    name = "motionctl",
    version,
    about = "Controls a running motiond over its control socket",
    after_help = "Exit codes: 0 ok, 1 refused, 2 invalid arguments, 3 daemon not reachable, 4 fault; a closed output pipe ends quietly."
)]
struct Cli {
    /// The daemon's control socket.
    #[arg(long, global = true, default_value = "/run/motiond/control.sock")]
    socket: PathBuf,
    /// Print the daemon's reply exactly as received (one JSON object per line).
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Play a motion from the library (approaching its first pose from where the robot is).
    Play {
        /// Motion name: the .seq file name in the library folder, without `.seq`.
        name: String,
        /// Time scale (0.5 = half speed, at most 10); the scaled motion is proved against the
        /// limits again.
        #[arg(long, value_parser = parse_speed)]
        speed: Option<f64>,
        /// Repeat until stopped.
        #[arg(long = "loop")]
        looped: bool,
        /// Start time: seconds since the Unix epoch (CLOCK_REALTIME), or `+S` for S seconds from now.
        #[arg(long, value_parser = parse_at)]
        at: Option<f64>,
        /// Follow the motion with a progress bar until it ends.
        #[arg(long)]
        watch: bool,
        /// Take over from the motion playing (in the same group) without a seam: a blend within
        /// the limits leads from its state into this motion, now or at --at.
        #[arg(long)]
        replace: bool,
        /// Play it in this joint group (config `groups`); its columns are the group's joints.
        #[arg(long, value_name = "GROUP")]
        group: Option<String>,
    },
    /// Decelerate to rest within the limits, then hold.
    Stop {
        /// Only this joint group's motion.
        #[arg(long, value_name = "GROUP")]
        group: Option<String>,
    },
    /// Pause the motion (decelerating to rest); `resume` continues it.
    Pause {
        /// Only this joint group's motion.
        #[arg(long, value_name = "GROUP")]
        group: Option<String>,
    },
    Resume {
        /// Only this joint group's motion.
        #[arg(long, value_name = "GROUP")]
        group: Option<String>,
    },
    /// Stop as fast as the quick-stop decelerations allow, then hold.
    #[command(alias = "hold")]
    QuickStop {
        /// Only this joint group's motion.
        #[arg(long, value_name = "GROUP")]
        group: Option<String>,
    },
    /// Teach-in: record the joints as you move them (drives compliant where they can be) into
    /// library motion NAME; `record --stop` ends it and writes NAME.seq.
    Record {
        /// The library motion to record into (a new name).
        #[arg(required_unless_present = "stop", conflicts_with = "stop")]
        name: Option<String>,
        /// Frames per second of the recording (0.1 to 8000; at most the control rate is used).
        #[arg(long, value_name = "HZ", value_parser = parse_record_rate)]
        rate: Option<f64>,
        /// DOFs to record, comma-separated (default: every commanded DOF).
        #[arg(long, value_name = "DOF,...", value_delimiter = ',')]
        joints: Option<Vec<String>>,
        /// End the recording and write it into the library.
        #[arg(long, conflicts_with_all = ["rate", "joints"])]
        stop: bool,
    },
    /// Show state, motion, progress, joint positions, latency and faults.
    Status {
        /// Keep showing the progress until interrupted.
        #[arg(long)]
        watch: bool,
    },
    /// A live view: state, motion and progress, each joint inside its limits (measured,
    /// commanded, following error), latency, faults; keys s stop, space quick stop,
    /// p pause/resume, q quit.
    Top {
        /// Seconds between refreshes.
        #[arg(long, value_name = "SECONDS", default_value_t = 0.2, value_parser = parse_refresh)]
        refresh: f64,
    },
    /// Stream a CSV of joint positions (a header of joint names, one row per line) in real
    /// time, as a policy streams its actions: CHUNK rows a request at --rate rows a second, each
    /// spliced into the running path without a seam; the robot brakes to rest after the last row.
    Stream {
        /// The CSV file.
        file: PathBuf,
        /// Rows per second.
        #[arg(long, value_name = "HZ", default_value_t = 30.0)]
        rate: f64,
        /// Rows a request.
        #[arg(long, value_name = "ROWS", default_value_t = 1)]
        chunk: usize,
        /// Buffering horizon (s): a row plays this long after it is due (default 0.1).
        #[arg(long, value_name = "SECONDS")]
        horizon: Option<f64>,
        /// Stream to this joint group (config `groups`).
        #[arg(long, value_name = "GROUP")]
        group: Option<String>,
    },
    /// List the library's motions with their duration and proof result.
    List,
    /// Load the library folder again.
    Reload,
    /// Power the drives.
    Enable,
    /// Remove power from the drives.
    Disable,
    /// Acknowledge a fault so the robot can be enabled again.
    ClearFault,
    /// Clear a fault and enable the drives in one step; with --pose NAME, then go to that
    /// library motion's first pose and hold there.
    Recover {
        /// A library motion whose first pose to go to.
        #[arg(long, value_name = "NAME")]
        pose: Option<String>,
    },
    /// Write the flight recorder's last seconds of the loop to an MCAP file now (for Foxglove
    /// or PlotJuggler) and print where.
    Dump,
    /// Every drive: bus, family, id, state, last error, and the values it reports (position,
    /// velocity, effort, status and error words); the simulated ones under --dry-run.
    Drives,
    /// Print a shell completion script: bash, zsh, fish, elvish or powershell.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff; `motionctl man | man -l -`), or with --dir write it and one
    /// page per subcommand (motionctl-SUBCOMMAND.1) into a folder.
    Man {
        #[arg(long, value_name = "DIR")]
        dir: Option<std::path::PathBuf>,
    },
}

fn parse_refresh(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if (0.02..=10.0).contains(&s) => Ok(s),
        _ => Err(format!("expected seconds from 0.02 to 10, got {text:?}")),
    }
}

/// A finite number in `lo..=hi` (a client never sends what JSON would carry as null).
fn finite_in(text: &str, lo: f64, hi: f64, what: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(x) if x.is_finite() && (lo..=hi).contains(&x) => Ok(x),
        Ok(_) => Err(format!("expected {what} from {lo} to {hi}, got {text:?}")),
        Err(_) => Err(format!("expected {what} (a number), got {text:?}")),
    }
}

fn parse_speed(text: &str) -> Result<f64, String> {
    let speed = finite_in(text, 0.0, MAX_SPEED, "a speed")?;
    if speed == 0.0 {
        return Err(format!("expected a speed above 0, got {text:?}"));
    }
    Ok(speed)
}

fn parse_record_rate(text: &str) -> Result<f64, String> {
    let (lo, hi) = RECORD_RATE_HZ;
    finite_in(text, lo, hi, "frames per second")
}

fn parse_at(text: &str) -> Result<f64, String> {
    let (relative, number) = match text.strip_prefix('+') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("expected seconds since the Unix epoch or +SECONDS, got {text:?}"))?;
    if !value.is_finite() || value < 0.0 {
        return Err(format!("expected a non-negative time, got {text:?}"));
    }
    if relative {
        if value > MAX_AT_AHEAD_S {
            return Err(format!(
                "expected at most +{MAX_AT_AHEAD_S} s (a day ahead), got {text:?}"
            ));
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_err(|_| "the system clock is before 1970".to_string())?;
        Ok(now.as_secs_f64() + value)
    } else {
        Ok(value)
    }
}

/// Why a command did not complete, each with its exit code.
pub(crate) enum Failure {
    Unreachable(String),
    Refused(String),
    /// The daemon found the request's arguments invalid (`bad_request`).
    Invalid(String),
    Fault(String),
}

/// Writes one line to stdout; a reader that went away (`| head`) ends motionctl quietly.
fn emit(args: std::fmt::Arguments) {
    let mut out = std::io::stdout().lock();
    if out
        .write_fmt(args)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush())
        .is_err()
    {
        std::process::exit(0);
    }
}

/// `println!` that ends quietly on a closed pipe instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => { $crate::emit(format_args!($($arg)*)) };
}
pub(crate) use out;

/// One connection to the daemon: request out, reply in.
pub(crate) struct Client {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Client {
    fn connect(path: &PathBuf) -> Result<Self, Failure> {
        let stream = UnixStream::connect(path).map_err(|err| {
            let mut text = format!("cannot connect to {}: {err}", path.display());
            if let Some(hint) = crate::hint::connect(path, &err) {
                text.push_str("\nhint: ");
                text.push_str(&hint);
            }
            Failure::Unreachable(text)
        })?;
        // `reload` proves every motion again; give it time, but never wait forever.
        let lost = |err| Failure::Unreachable(format!("{}: {err}", path.display()));
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .map_err(lost)?;
        let reader = BufReader::new(stream.try_clone().map_err(lost)?);
        Ok(Self {
            reader,
            writer: stream,
        })
    }

    /// Sends a request; returns the reply line and the parsed object.
    pub(crate) fn request(&mut self, request: &Request) -> Result<(String, Value), Failure> {
        let lost = |err: std::io::Error| Failure::Unreachable(format!("connection lost: {err}"));
        self.writer
            .write_all(request.to_line().as_bytes())
            .map_err(lost)?;
        let mut line = String::new();
        if self.reader.read_line(&mut line).map_err(lost)? == 0 {
            return Err(Failure::Unreachable(
                "the daemon closed the connection".into(),
            ));
        }
        let value: Value = serde_json::from_str(&line)
            .map_err(|err| Failure::Unreachable(format!("unreadable reply: {err}")))?;
        Ok((line.trim_end().to_string(), value))
    }
}

/// `Err` for `{"ok":false,…}`: a fault code is a fault, anything else a refusal.
pub(crate) fn check(reply: &Value) -> Result<(), Failure> {
    if reply["ok"] == Value::Bool(true) {
        return Ok(());
    }
    let code = reply["error"]["code"].as_str().unwrap_or("error");
    let message = reply["error"]["message"].as_str().unwrap_or("");
    let text = format!("{code}: {message}");
    match code {
        "fault" => Err(Failure::Fault(text)),
        "bad_request" => Err(Failure::Invalid(text)),
        _ => Err(Failure::Refused(text)),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if matches!(
        cli.command,
        Command::Completions { .. } | Command::Man { .. }
    ) {
        // Only stdout is written: a closed pipe ends the command quietly.
        // SAFETY: single-threaded here; SIG_DFL is a valid disposition for SIGPIPE.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    match &cli.command {
        Command::Completions { shell } => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(*shell, &mut cmd, "motionctl", &mut std::io::stdout());
            return ExitCode::SUCCESS;
        }
        Command::Man { dir } => {
            let cmd = <Cli as clap::CommandFactory>::command();
            let written = match dir {
                Some(dir) => motiond::manual::write_pages(cmd, dir)
                    .map(|_| ())
                    .map_err(|e| format!("{}: {e}", dir.display())),
                None => {
                    let _ = motiond::manual::render(cmd, &mut std::io::stdout());
                    Ok(())
                }
            };
            return match written {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("motionctl: {e}");
                    ExitCode::from(EXIT_INVALID)
                }
            };
        }
        _ => {}
    }
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            let (code, message) = match failure {
                Failure::Refused(m) => (EXIT_REFUSED, m),
                Failure::Invalid(m) => (EXIT_INVALID, m),
                Failure::Unreachable(m) => (EXIT_UNREACHABLE, m),
                Failure::Fault(m) => (EXIT_FAULT, m),
            };
            eprintln!("motionctl: {message}");
            ExitCode::from(code)
        }
    }
}

fn run(cli: &Cli) -> Result<(), Failure> {
    if let Command::Stream {
        file,
        rate,
        chunk,
        horizon,
        group,
    } = &cli.command
    {
        // The file is read and checked before the daemon is asked for anything.
        let options = stream::Options {
            rate_hz: *rate,
            chunk: *chunk,
            horizon_s: *horizon,
            group: group.as_deref(),
            json: cli.json,
        };
        options.check()?;
        let csv = stream::read_csv(file).map_err(Failure::Invalid)?;
        let mut client = Client::connect(&cli.socket)?;
        return stream::run(&mut client, &csv, &options);
    }
    let mut client = Client::connect(&cli.socket)?;
    let (request, watch) = match &cli.command {
        Command::Play {
            name,
            speed,
            looped,
            at,
            watch,
            replace,
            group,
        } => (
            Request::Play {
                motion: name.clone(),
                speed: *speed,
                looped: *looped,
                at: *at,
                replace: *replace,
                group: group.clone(),
            },
            *watch,
        ),
        Command::Stop { group } => (
            Request::Stop {
                group: group.clone(),
            },
            false,
        ),
        Command::Pause { group } => (
            Request::Pause {
                group: group.clone(),
            },
            false,
        ),
        Command::Resume { group } => (
            Request::Resume {
                group: group.clone(),
            },
            false,
        ),
        Command::QuickStop { group } => (
            Request::QuickStop {
                group: group.clone(),
            },
            false,
        ),
        Command::Record {
            name,
            rate,
            joints,
            stop,
        } => (
            Request::Record {
                motion: name.clone(),
                rate_hz: *rate,
                joints: joints.clone(),
                stop: *stop,
            },
            false,
        ),
        Command::Status { watch } => (Request::Status, *watch),
        Command::Top { refresh } => {
            return top::run(&mut client, Duration::from_secs_f64(*refresh));
        }
        Command::Stream { .. } => return Ok(()),
        Command::List => (Request::List, false),
        Command::Reload => (Request::Reload, false),
        Command::Enable => (Request::Enable, false),
        Command::Disable => (Request::Disable, false),
        Command::ClearFault => (Request::ClearFault, false),
        Command::Recover { pose } => (Request::Recover { pose: pose.clone() }, false),
        Command::Dump => (Request::Dump, false),
        Command::Drives => (Request::Drives, false),
        Command::Completions { .. } | Command::Man { .. } => return Ok(()),
    };
    if watch && matches!(request, Request::Status) {
        return watch_status(&mut client, cli.json, None, None);
    }
    let (line, reply) = client.request(&request)?;
    if cli.json {
        out!("{line}");
    }
    check(&reply)?;
    if !cli.json {
        print_reply(&request, &reply);
    }
    if let Request::Status = request
        && reply["state"] == "fault"
    {
        return Err(Failure::Fault(fault_text(&reply)));
    }
    if watch {
        let motion_id = reply["motion_id"].as_u64();
        let at = reply["at"].as_f64();
        return watch_status(&mut client, cli.json, motion_id, at);
    }
    Ok(())
}

/// Shows the progress until the motion `motion_id` ends (or forever when `None`), counting down
/// to `at` first, and then prints how it ended.
fn watch_status(
    client: &mut Client,
    json: bool,
    motion_id: Option<u64>,
    at: Option<f64>,
) -> Result<(), Failure> {
    let tty = std::io::stdout().is_terminal() && !json;
    let mut seen = Watched::default();
    loop {
        let (line, status) = client.request(&Request::Status)?;
        check(&status)?;
        seen.update(&status, motion_id);
        if json {
            out!("{line}");
        } else {
            let mut bar = progress_line(&status);
            if let Some(left) = at.map(|at| at - unix_now()).filter(|s| *s > 0.0) {
                bar = format!("starts in {left:.1} s  {bar}");
            }
            if tty {
                print_over(&bar);
            } else {
                out!("{bar}");
            }
        }
        let state = status["state"].as_str().unwrap_or("");
        let ended = state == "fault"
            || motion_id.is_some_and(|id| {
                !(matches!(
                    state,
                    "approaching" | "playing" | "streaming" | "starved" | "paused" | "stopping"
                ) && status["motion_id"].as_u64() == Some(id))
            });
        if ended {
            if tty {
                out!("");
            }
            let result = seen.result(&status);
            if json {
                out!("{}", result.json);
            } else {
                out!("{}", result.text);
            }
            return match result.fault {
                Some(fault) => Err(Failure::Fault(fault)),
                None => Ok(()),
            };
        }
        std::thread::sleep(WATCH_PERIOD);
    }
}

fn print_over(line: &str) {
    let mut out = std::io::stdout().lock();
    if write!(out, "\r\x1b[2K{line}")
        .and_then(|()| out.flush())
        .is_err()
    {
        std::process::exit(0);
    }
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// What `--watch` saw of one motion.
#[derive(Default)]
struct Watched {
    motion_id: Option<u64>,
    overruns_at_start: Option<u64>,
    time_s: f64,
    progress: f64,
    duration_s: Option<f64>,
    motion: Option<String>,
}

/// How a watched motion ended, for people and for scripts.
struct WatchResult {
    text: String,
    json: Value,
    fault: Option<String>,
}

impl Watched {
    fn update(&mut self, status: &Value, motion_id: Option<u64>) {
        self.motion_id = motion_id;
        let overruns = status["overruns"].as_u64().unwrap_or(0);
        self.overruns_at_start.get_or_insert(overruns);
        let ours = motion_id.is_none() || status["motion_id"].as_u64() == motion_id;
        if ours && let Some(t) = status["time_s"].as_f64() {
            self.time_s = t;
            self.progress = status["progress"].as_f64().unwrap_or(self.progress);
            if let Some(d) = status["duration_s"].as_f64() {
                self.duration_s = Some(d);
            }
            if let Some(m) = status["motion"].as_str() {
                self.motion = Some(m.to_string());
            }
        }
    }

    fn result(&self, status: &Value) -> WatchResult {
        let overruns = status["overruns"].as_u64().unwrap_or(0)
            - self
                .overruns_at_start
                .unwrap_or(0)
                .min(status["overruns"].as_u64().unwrap_or(0));
        // The largest following error the daemon reports, and on which joint.
        let worst = status["following_error"].as_object().and_then(|m| {
            m.iter()
                .filter_map(|(j, v)| v.as_f64().map(|v| (j.clone(), v)))
                .max_by(|a, b| a.1.total_cmp(&b.1))
        });
        let fault = (status["state"] == "fault").then(|| fault_text(status));
        // The daemon's word for how the playback ended; progress only when it has none.
        let last = &status["last_outcome"];
        let ours =
            last["motion_id"].as_u64().is_some() && last["motion_id"].as_u64() == self.motion_id;
        let said = if ours { last["outcome"].as_str() } else { None };
        let outcome = match said {
            _ if fault.is_some() => "fault",
            Some("faulted") => "fault",
            Some(word) => word,
            None if self.progress >= 0.999 => "finished",
            None => "stopped",
        };
        let name = self.motion.as_deref().unwrap_or("the motion");
        let mut text = match outcome {
            "finished" => format!(
                "{name} finished after {:.2} s",
                self.duration_s.unwrap_or(self.time_s)
            ),
            "refused" => format!("{name} was refused by the loop"),
            "stopped" => format!(
                "{name} stopped at {:.0}% after {:.2} s",
                self.progress * 100.0,
                self.time_s
            ),
            _ => format!("{name} ended by a fault after {:.2} s", self.time_s),
        };
        if let Some((joint, e)) = &worst {
            text.push_str(&format!("; worst following error {e:.4} on {joint}"));
        }
        text.push_str(&format!("; {overruns} overruns"));
        if let Some(f) = &fault {
            text.push_str(&format!("; {f}"));
        }
        let json = serde_json::json!({
            "result": outcome,
            "motion": self.motion,
            "duration_s": self.time_s,
            "progress": self.progress,
            "worst_following_error": worst.as_ref().map(|(j, v)| serde_json::json!({"joint": j, "value": v})),
            "overruns": overruns,
            "fault": fault,
        });
        WatchResult { text, json, fault }
    }
}

fn fault_text(status: &Value) -> String {
    match status["faults"].as_array() {
        Some(faults) if !faults.is_empty() => faults
            .iter()
            .map(describe_fault)
            .collect::<Vec<_>>()
            .join("; "),
        _ => "the daemon is in a fault state".into(),
    }
}

fn describe_fault(fault: &Value) -> String {
    // The daemon's own words, as its replies and journal give them.
    if let Some(text) = fault["text"].as_str() {
        return format!("fault: {text}");
    }
    let kind = fault["kind"].as_str().unwrap_or("fault");
    let mut text = format!("fault: {kind}");
    if let Some(joint) = fault["joint"].as_str() {
        text.push_str(&format!(" on {joint}"));
    }
    if let Some(code) = fault["code"].as_u64() {
        text.push_str(&format!(" (code {code:#x})"));
    }
    text
}

/// `[##########··········]  50%  2.00 / 4.00 s  wave  playing`
fn progress_line(status: &Value) -> String {
    const WIDTH: usize = 30;
    let state = status["state"].as_str().unwrap_or("?");
    let Some(motion) = status["motion"].as_str() else {
        return state.to_string();
    };
    let progress = status["progress"].as_f64().unwrap_or(0.0).clamp(0.0, 1.0);
    let filled = (progress * WIDTH as f64).round() as usize;
    let mut bar = "#".repeat(filled);
    bar.push_str(&"·".repeat(WIDTH - filled.min(WIDTH)));
    let time = status["time_s"].as_f64().unwrap_or(0.0);
    let duration = match status["duration_s"].as_f64() {
        Some(d) => format!(" / {d:.2}"),
        None => String::new(),
    };
    format!(
        "[{bar}] {:>3.0}%  {time:.2}{duration} s  {motion}  {state}",
        progress * 100.0
    )
}

fn print_reply(request: &Request, reply: &Value) {
    match request {
        Request::Play { motion, .. } => {
            let mut text = format!("playing {motion}");
            if let Some(d) = reply["duration_s"].as_f64() {
                text.push_str(&format!(" ({d:.2} s"));
                if let Some(a) = reply["approach_s"].as_f64() {
                    text.push_str(&format!(" after a {a:.2} s approach"));
                }
                text.push(')');
            }
            out!("{text}");
        }
        Request::Record { stop: false, .. } => {
            let joints = reply["joints"].as_array().map_or(0, Vec::len);
            out!(
                "recording {} joints at {} Hz into {}; `motionctl record --stop` ends it",
                joints,
                reply["rate_hz"],
                reply["motion"].as_str().unwrap_or("?")
            );
        }
        Request::Record { stop: true, .. } => out!(
            "recorded {} frames ({:.2} s) into {}",
            reply["frames"],
            reply["duration_s"].as_f64().unwrap_or(0.0),
            reply["path"].as_str().unwrap_or("?")
        ),
        Request::Status => print_status(reply),
        Request::List => print_list(reply),
        Request::Drives => print_drives(reply),
        Request::Dump => out!(
            "wrote the last {:.1} s ({} ticks, {:.1} MB) to {}",
            reply["seconds"].as_f64().unwrap_or(0.0),
            reply["ticks"],
            reply["bytes"].as_f64().unwrap_or(0.0) / 1e6,
            reply["path"].as_str().unwrap_or("?")
        ),
        Request::Reload => {
            let motions = reply["motions"].as_array().map_or(&[][..], Vec::as_slice);
            let bad = motions.iter().filter(|m| m["ok"] != Value::Bool(true));
            let bad: Vec<_> = bad.collect();
            out!(
                "reloaded: {} motions, {} left out",
                motions.len() - bad.len(),
                bad.len()
            );
            for motion in bad {
                out!(
                    "  {}: {}",
                    motion["name"].as_str().unwrap_or("?"),
                    motion["error"].as_str().unwrap_or("")
                );
            }
        }
        _ => out!("ok"),
    }
}

/// What the loop obtained of the real-time settings, one line (`None` from a daemon that does
/// not say).
fn rt_line(rt: &Value) -> Option<String> {
    let policy = rt["policy"].as_str()?;
    let cpu = rt["cpu"]
        .as_u64()
        .map_or("any".to_string(), |c| c.to_string());
    let memory = if rt["memory_locked"].as_bool() == Some(true) {
        "locked"
    } else {
        "not locked"
    };
    let wakeup = &rt["cpu_wakeup_latency"];
    let awake = match (wakeup["latency_us"].as_u64(), wakeup["path"].as_str()) {
        (Some(us), Some(path)) => format!("CPU held awake ({us} µs, {path})"),
        _ => "CPU not held awake".to_string(),
    };
    let mut line = format!(
        "real time  cpu {cpu}, {policy} priority {}, memory {memory}, {awake}",
        rt["priority"]
    );
    for warning in rt["warnings"].as_array().into_iter().flatten() {
        if let Some(w) = warning.as_str() {
            line.push_str(&format!("\n  not obtained: {w}"));
        }
    }
    Some(line)
}

/// `drives` as a table: one line per drive.
fn print_drives(reply: &Value) {
    let drives = reply["drives"].as_array().map_or(&[][..], Vec::as_slice);
    let num = |v: &Value, decimals: usize| {
        v.as_f64()
            .map_or("-".to_string(), |x| format!("{x:.decimals$}"))
    };
    let word = |v: &Value| v.as_u64().map_or("-".to_string(), |x| format!("{x:#06x}"));
    let rows: Vec<[String; 11]> = drives
        .iter()
        .map(|d| {
            [
                d["joint"].as_str().unwrap_or("?").to_string(),
                d["bus"].as_str().unwrap_or("?").to_string(),
                d["family"].as_str().unwrap_or("?").to_string(),
                d["id"].to_string(),
                d["state"].as_str().unwrap_or("?").to_string(),
                num(&d["position"], 4),
                num(&d["velocity"], 4),
                num(&d["effort"], 3),
                word(&d["status_word"]),
                word(&d["error_word"]),
                d["last_error"]["text"]
                    .as_str()
                    .map_or("-".to_string(), str::to_string),
            ]
        })
        .collect();
    let header = [
        "joint",
        "bus",
        "family",
        "id",
        "state",
        "position",
        "velocity",
        "effort",
        "status",
        "error",
        "last error",
    ];
    let mut widths = header.map(|h| h.chars().count());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut text = String::new();
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            // Numbers to the right, words to the left.
            let numeric = (3..=9).contains(&i);
            if numeric {
                text.push_str(&format!("{cell:>w$}  "));
            } else {
                text.push_str(&format!("{cell:<w$}  "));
            }
        }
        text.trim_end().to_string()
    };
    out!("{}", line(header.to_vec()));
    for row in &rows {
        out!("{}", line(row.iter().map(String::as_str).collect()));
    }
    if let Some(backend) = reply["backend"].as_str()
        && backend != "buses"
    {
        out!("({backend}: simulated motors stand in for these drives)");
    }
}

fn print_status(status: &Value) {
    let state = status["state"].as_str().unwrap_or("?");
    out!("state      {state}");
    if let (Some(backend), Some(rate)) = (status["backend"].as_str(), status["rate_hz"].as_f64()) {
        out!("backend    {backend} at {rate} Hz");
    }
    if status["motion"].is_string() {
        out!("motion     {}", progress_line(status));
    }
    for line in group_lines(status) {
        out!("{line}");
    }
    if let Some((line, _)) = estop_line(status) {
        out!("{line}");
    }
    let latency = &status["latency_us"];
    let stat = |key: &str| {
        latency[key]
            .as_f64()
            .map_or_else(|| "-".to_string(), |v| format!("{v:.1}"))
    };
    out!(
        "latency    p50 {} µs  p99 {} µs  max {} µs  overruns {}",
        stat("p50"),
        stat("p99"),
        stat("max"),
        status["overruns"]
    );
    if let Some(line) = rt_line(&status["rt"]) {
        out!("{line}");
    }
    match status["faults"].as_array() {
        Some(faults) if !faults.is_empty() => {
            for fault in faults {
                out!("fault      {}", describe_fault(fault));
            }
        }
        _ => out!("faults     none"),
    }
    for (line, _) in bus_lines(status) {
        out!("{line}");
    }
    if let Some(positions) = status["positions"].as_object() {
        out!("positions");
        for (joint, value) in positions {
            match value.as_f64() {
                Some(v) => out!("  {joint:<20} {v:>10.4}"),
                None => out!("  {joint:<20} {value}"),
            }
        }
    }
}

/// One line per joint group: its name and what it plays, as [`progress_line`] shows the robot.
fn group_lines(status: &Value) -> Vec<String> {
    status["groups"]
        .as_object()
        .map(|groups| {
            groups
                .iter()
                .map(|(name, g)| format!("group {name:<10} {}", progress_line(g)))
                .collect()
        })
        .unwrap_or_default()
}

/// The E-stop when one is watched (or has stopped the robot), and whether it holds the robot.
fn estop_line(status: &Value) -> Option<(String, bool)> {
    let e = status.get("estop")?;
    let input = e["input"].as_str();
    let held = e["cause"].is_string();
    let what = match (held, input) {
        (true, Some("asserted")) => format!(
            "STOPPED: {}; release it, then clear-fault",
            e["text"].as_str().unwrap_or("E-stop")
        ),
        (true, _) if e["reenable"].as_bool() == Some(true) => format!(
            "STOPPED: {}; released: clear-fault brings the drives back",
            e["text"].as_str().unwrap_or("E-stop")
        ),
        (true, _) => format!(
            "STOPPED: {}; released: clear-fault ends it",
            e["text"].as_str().unwrap_or("E-stop")
        ),
        (false, Some(level)) => format!("input {level}"),
        (false, None) => return None,
    };
    Some((format!("estop      {what}"), held))
}

/// Each bus of `status`, then its drives indented, one line each, with whether the line
/// reports a fault (for colour). Faults and warnings in the protocol's words, as the daemon
/// gives them.
fn bus_lines(status: &Value) -> Vec<(String, bool)> {
    fn drives(bus: &Value) -> impl Iterator<Item = (&String, &Value)> {
        bus["drives"].as_object().into_iter().flatten()
    }
    fn link(v: &Value) -> (String, bool) {
        let state = v["state"].as_str().unwrap_or("?");
        let mut text = format!("{state:<9} faults {}", v["faults"]);
        if let Some(fault) = v["last_fault"]["text"].as_str() {
            text.push_str(&format!(" (last: {fault})"));
        }
        if let Some(warning) = v["last_warning"]["text"].as_str() {
            text.push_str(&format!("  warnings {} (last: {warning})", v["warnings"]));
        }
        if v["reopened"].as_u64().is_some_and(|n| n > 0) {
            text.push_str(&format!("  reopened {}", v["reopened"]));
        }
        (text, state == "fault")
    }
    let buses = status["buses"].as_array().map_or(&[][..], Vec::as_slice);
    let width = buses
        .iter()
        .flat_map(|b| drives(b).map(|(dof, _)| dof.chars().count() + 2))
        .max()
        .unwrap_or(0)
        .max(12);
    let mut lines = Vec::new();
    for bus in buses {
        let (text, fault) = link(bus);
        let name = format!("bus {}", bus["name"].as_str().unwrap_or("?"));
        lines.push((
            format!(
                "{name:<width$} {text}  {} frames sent {} received {} ignored {}",
                bus["transport"].as_str().unwrap_or("?"),
                bus["sent"],
                bus["received"],
                bus["ignored"]
            ),
            fault,
        ));
        for (dof, drive) in drives(bus) {
            let (text, fault) = link(drive);
            let protocol = drive["protocol"].as_str().unwrap_or("?");
            lines.push((
                format!("{:<width$} {text}  {protocol}", format!("  {dof}")),
                fault,
            ));
        }
    }
    lines
}

fn print_list(reply: &Value) {
    let motions = reply["motions"].as_array().map_or(&[][..], Vec::as_slice);
    if motions.is_empty() {
        out!("the library is empty");
    }
    for motion in motions {
        let name = motion["name"].as_str().unwrap_or("?");
        if motion["ok"] == Value::Bool(true) {
            let duration = motion["duration_s"].as_f64().unwrap_or(0.0);
            out!("{name:<24} {duration:>8.2} s  ok");
        } else {
            let error = motion["error"].as_str().unwrap_or("");
            out!("{name:<24} {:>10}  refused: {error}", "-");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buses_and_drives_one_line_each_faults_marked() {
        use serde_json::json;
        let status = json!({"buses": [{"name": "arm", "transport": "serial", "state": "fault",
            "faults": 1,
            "last_fault": {"kind": "device_lost", "code": 5, "text": "device lost (code 0x5)"},
            "warnings": 0, "last_warning": null, "reopened": 1,
            "sent": 10, "received": 9, "ignored": 0,
            "drives": {"base_yaw": {"protocol": "cia402", "state": "ready", "faults": 0,
                        "last_fault": null, "warnings": 2,
                        "last_warning": {"code": 33296, "text": "EMCY 0x8210"},
                        "reopened": 0}}}]});
        let lines = bus_lines(&status);
        assert_eq!(
            lines,
            [
                (
                    "bus arm      fault     faults 1 (last: device lost (code 0x5))  \
                     reopened 1  serial frames sent 10 received 9 ignored 0"
                        .to_string(),
                    true
                ),
                (
                    "  base_yaw   ready     faults 0  warnings 2 (last: EMCY 0x8210)  cia402"
                        .to_string(),
                    false
                ),
            ]
        );
        assert!(bus_lines(&json!({"buses": []})).is_empty());
    }

    #[test]
    fn cli_is_well_formed() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn at_accepts_absolute_and_relative_times() {
        assert_eq!(parse_at("1790000000.5"), Ok(1_790_000_000.5));
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!(parse_at("+2").unwrap() >= now + 2.0);
        assert!(parse_at("soon").is_err());
        assert!(parse_at("-1").is_err());
        assert!(parse_at("+nan").is_err());
    }

    #[test]
    fn groups_and_the_estop_get_a_line_each() {
        let status = serde_json::json!({"state": "estop",
            "groups": {"arm": {"state": "playing", "motion": "wave", "progress": 0.5,
                               "time_s": 1.0, "duration_s": 2.0},
                       "legs": {"state": "idle"}},
            "estop": {"input": "asserted", "cause": "input", "joint": null,
                      "text": "the E-stop input is asserted", "reenable": true}});
        let groups = group_lines(&status);
        assert!(
            groups[0].starts_with("group arm        [") && groups[0].ends_with("wave  playing")
        );
        assert_eq!(groups[1], "group legs       idle");
        assert_eq!(
            estop_line(&status),
            Some((
                "estop      STOPPED: the E-stop input is asserted; release it, then clear-fault"
                    .into(),
                true
            ))
        );
        let clear = serde_json::json!({"estop": {"input": "released", "cause": null}});
        assert_eq!(
            estop_line(&clear),
            Some(("estop      input released".into(), false))
        );
        assert_eq!(estop_line(&serde_json::json!({"state": "idle"})), None);
    }

    #[test]
    fn progress_line_shows_bar_time_and_motion() {
        let status = serde_json::json!({"state":"playing","motion":"wave","progress":0.5,
            "time_s":2.0,"duration_s":4.0});
        let line = progress_line(&status);
        assert!(line.starts_with(&format!("[{}{}]", "#".repeat(15), "·".repeat(15))));
        assert!(line.contains("50%") && line.contains("2.00 / 4.00 s") && line.contains("wave"));
        assert_eq!(progress_line(&serde_json::json!({"state":"idle"})), "idle");
    }

    #[test]
    fn fault_replies_are_faults_and_others_refusals() {
        let fault = serde_json::json!({"ok":false,"error":{"code":"fault","message":"m"}});
        assert!(matches!(check(&fault), Err(Failure::Fault(_))));
        let refused = serde_json::json!({"ok":false,"error":{"code":"refused","message":"m"}});
        assert!(matches!(check(&refused), Err(Failure::Refused(_))));
        assert!(check(&serde_json::json!({"ok":true})).is_ok());
    }
}
