//! `motionctl`: talks to `motiond serve` over its control socket.
//!
//! Exit codes: 0 done; 1 refused (the daemon answered with an error); 2 invalid arguments (also
//! the daemon's `bad_request`); 3 daemon not reachable (no socket, connection lost, unreadable
//! reply); 4 fault (the daemon reports a fault, or a watched motion ended in one); 5 the daemon
//! took the request but did not answer it in time (hung or overloaded).

use std::io::{BufRead, BufReader, ErrorKind, IsTerminal, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::{Parser, Subcommand};

mod hint;
mod stream;
mod top;
use motiond::daemon::protocol::{
    ErrorCode, MAX_AT_AHEAD_S, MAX_SPEED, RECORD_RATE_HZ, Request, library_name,
};
use motiond::daemon::reply::{
    self, BusReport, DoneReply, DrivesReply, DumpReply, EStopReport, ErrorBody, FaultReport,
    GroupStatus, JointValue, LinkReport, ListReply, MotionState, Outcome, PlayReply, Playback,
    RecordReply, RecordStopReply, RtReport, StatusReply,
};
use motiond::rt::State;
use serde::Serialize;
use serde::de::DeserializeOwned;

const EXIT_REFUSED: u8 = 1;
const EXIT_INVALID: u8 = 2;
const EXIT_UNREACHABLE: u8 = 3;
const EXIT_FAULT: u8 = 4;
const EXIT_NO_ANSWER: u8 = 5;

/// How long a request the daemon answers at once (state changes, status, stream chunks) may go
/// unanswered. A stop or a quick stop never waits longer, whatever `--timeout` says: a stop the
/// daemon has not confirmed by then is a reason to reach for the E-stop, not to keep waiting.
const QUICK_ANSWER: Duration = Duration::from_secs(5);
/// How long a request that proves motions (`play`, `reload`, `recover`) or writes a file (`dump`,
/// `record --stop`) may go unanswered: `reload` proves every motion in the library.
const SLOW_ANSWER: Duration = Duration::from_secs(60);

/// How often `--watch` asks for the status.
const WATCH_PERIOD: Duration = Duration::from_millis(100);

#[derive(Parser)]
#[command(
    name = "motionctl",
    version,
    about = "Controls a running motiond over its control socket",
    after_help = "Exit codes: 0 ok, 1 refused, 2 invalid arguments, 3 daemon not reachable, 4 fault, 5 no answer in time; a closed output pipe ends quietly."
)]
struct Cli {
    /// The daemon's control socket.
    #[arg(long, global = true, default_value = "/run/motiond/control.sock")]
    socket: PathBuf,
    /// Seconds to wait for the daemon's answer to each request (default 5; 60 for play, reload,
    /// recover, dump and record --stop); stop and quick-stop never wait more than 5.
    #[arg(long, global = true, value_name = "SECONDS", value_parser = parse_timeout)]
    timeout: Option<f64>,
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
        /// The library motion to record into: a new name that starts with a letter or a digit
        /// and holds only letters, digits, `_`, `-` and `.`.
        #[arg(required_unless_present = "stop", conflicts_with = "stop", value_parser = parse_record_name)]
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

fn parse_timeout(text: &str) -> Result<f64, String> {
    finite_in(text, 0.01, 3600.0, "seconds")
}

/// How long `request` may go unanswered: `--timeout` when given, else what the request needs;
/// never more than [`QUICK_ANSWER`] for a stop.
fn answer_timeout(request: &Request, option: Option<Duration>) -> Duration {
    let needs = match request {
        Request::Play { .. }
        | Request::Reload
        | Request::Recover { .. }
        | Request::Dump
        | Request::Record { stop: true, .. } => SLOW_ANSWER,
        _ => QUICK_ANSWER,
    };
    let wait = option.unwrap_or(needs);
    match request {
        Request::Stop { .. } | Request::QuickStop { .. } => wait.min(QUICK_ANSWER),
        _ => wait,
    }
}

fn parse_speed(text: &str) -> Result<f64, String> {
    let speed = finite_in(text, 0.0, MAX_SPEED, "a speed")?;
    if speed == 0.0 {
        return Err(format!("expected a speed above 0, got {text:?}"));
    }
    Ok(speed)
}

/// The daemon's rule for a new motion name, checked before anything is sent.
fn parse_record_name(text: &str) -> Result<String, String> {
    library_name(text).map(|()| text.to_string())
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
    /// The daemon took the request and did not answer it in time.
    NoAnswer(String),
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
    socket: PathBuf,
    /// `--timeout`: how long every request may go unanswered (see [`answer_timeout`]).
    timeout: Option<Duration>,
}

impl Client {
    /// Connects; `stop` says whether the connection is for a stop (which waits no longer than
    /// [`QUICK_ANSWER`] for the daemon to take it, as for its answer).
    fn connect(path: &Path, timeout: Option<Duration>, stop: bool) -> Result<Self, Failure> {
        let wait = timeout.unwrap_or(QUICK_ANSWER);
        let wait = if stop { wait.min(QUICK_ANSWER) } else { wait };
        let stream = connect_within(path, wait)?;
        let lost = |err| Failure::Unreachable(format!("{}: {err}", path.display()));
        let reader = BufReader::new(stream.try_clone().map_err(lost)?);
        Ok(Self {
            reader,
            writer: stream,
            socket: path.to_path_buf(),
            timeout,
        })
    }

    /// Sends a request; returns the reply line and the daemon's answer (of the type the request
    /// is answered with) or its refusal.
    pub(crate) fn request<T: DeserializeOwned>(
        &mut self,
        request: &Request,
    ) -> Result<(String, Result<T, ErrorBody>), Failure> {
        let wait = answer_timeout(request, self.timeout);
        let socket = self.socket.clone();
        let lost = |err: std::io::Error| match err.kind() {
            // A read or write timeout (EAGAIN on a socket with SO_RCVTIMEO/SO_SNDTIMEO).
            ErrorKind::WouldBlock | ErrorKind::TimedOut => {
                Failure::NoAnswer(no_answer(&socket, request, wait))
            }
            _ => Failure::Unreachable(format!(
                "connection to the daemon at {} lost during `{}`: {err}",
                socket.display(),
                request.cmd()
            )),
        };
        let timeouts = self
            .writer
            .set_write_timeout(Some(wait))
            .and_then(|()| self.writer.set_read_timeout(Some(wait)));
        timeouts
            .and_then(|()| self.writer.write_all(request.to_line().as_bytes()))
            .map_err(lost)?;
        let mut line = String::new();
        if self.reader.read_line(&mut line).map_err(lost)? == 0 {
            return Err(Failure::Unreachable(
                "the daemon closed the connection".into(),
            ));
        }
        let answer = reply::read(&line)
            .map_err(|err| Failure::Unreachable(format!("unreadable reply: {err}")))?;
        Ok((line.trim_end().to_string(), answer))
    }

    /// Sends a request, prints the reply line under `--json`, and returns the answer; a refusal
    /// is the [`Failure`] it maps to.
    pub(crate) fn call<T: DeserializeOwned>(
        &mut self,
        request: &Request,
        json: bool,
    ) -> Result<T, Failure> {
        let (line, answer) = self.request(request)?;
        if json {
            out!("{line}");
        }
        answer.map_err(refusal)
    }
}

/// Connects to the socket at `path`, giving up after `wait`: a daemon whose server is stuck stops
/// accepting, and once its listen backlog is full a connect blocks for as long as it stays stuck.
/// std has no timed connect for Unix sockets, so the connect runs on a thread of its own that is
/// left behind (and ends with the process) if it never returns.
fn connect_within(path: &Path, wait: Duration) -> Result<UnixStream, Failure> {
    let (done, result) = std::sync::mpsc::channel();
    let target = path.to_path_buf();
    std::thread::spawn(move || {
        let _ = done.send(UnixStream::connect(target));
    });
    match result.recv_timeout(wait) {
        Ok(Ok(stream)) => Ok(stream),
        Ok(Err(err)) => {
            let mut text = format!("cannot connect to {}: {err}", path.display());
            if let Some(hint) = crate::hint::connect(path, &err) {
                text.push_str("\nhint: ");
                text.push_str(&hint);
            }
            Err(Failure::Unreachable(text))
        }
        Err(_) => Err(Failure::NoAnswer(format!(
            "the daemon at {} did not take the connection within {}; {}",
            path.display(),
            seconds(wait),
            crate::hint::HUNG
        ))),
    }
}

/// The daemon at `socket` did not answer `request` within `wait`, and what to do.
fn no_answer(socket: &Path, request: &Request, wait: Duration) -> String {
    let stop = matches!(request, Request::Stop { .. } | Request::QuickStop { .. });
    format!(
        "the daemon at {} did not answer `{}` within {}{}; {}{}",
        socket.display(),
        request.cmd(),
        seconds(wait),
        if stop {
            " (the robot may still be moving: use the E-stop)"
        } else {
            ""
        },
        crate::hint::HUNG,
        if stop {
            ""
        } else {
            "; a slow request can be given more time with --timeout SECONDS"
        }
    )
}

/// `5 s`, `0.2 s`.
fn seconds(wait: Duration) -> String {
    format!("{} s", wait.as_secs_f64())
}

/// The [`Failure`] a refusal is: a fault code is a fault, `bad_request` invalid arguments,
/// anything else a refusal.
pub(crate) fn refusal(error: ErrorBody) -> Failure {
    let text = format!("{}: {}", error.code.as_str(), error.message);
    match error.code {
        ErrorCode::Fault => Failure::Fault(text),
        ErrorCode::BadRequest => Failure::Invalid(text),
        _ => Failure::Refused(text),
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
                Some(dir) => motiond::diag::check_output_folder(dir)
                    .map_err(|why| format!("man --dir {why}"))
                    .and_then(|()| {
                        motiond::manual::write_pages(cmd, dir)
                            .map(|_| ())
                            .map_err(|e| format!("{}: {e}", dir.display()))
                    }),
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
                Failure::NoAnswer(m) => (EXIT_NO_ANSWER, m),
            };
            eprintln!("motionctl: {message}");
            ExitCode::from(code)
        }
    }
}

fn run(cli: &Cli) -> Result<(), Failure> {
    let timeout = cli.timeout.map(Duration::from_secs_f64);
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
        let mut client = Client::connect(&cli.socket, timeout, false)?;
        return stream::run(&mut client, &csv, &options);
    }
    let stop = matches!(
        cli.command,
        Command::Stop { .. } | Command::QuickStop { .. }
    );
    let mut client = Client::connect(&cli.socket, timeout, stop)?;
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
    answer(&mut client, &request, watch, cli.json)
}

/// Sends `request` and prints its answer (or, with `--json`, the reply lines); `--watch` then
/// follows the motion.
fn answer(client: &mut Client, request: &Request, watch: bool, json: bool) -> Result<(), Failure> {
    match request {
        Request::Status if watch => watch_status(client, json, None, None),
        Request::Status => {
            let status: StatusReply = client.call(request, json)?;
            if !json {
                print_status(&status);
            }
            if status.state == State::Fault {
                return Err(Failure::Fault(fault_text(&status)));
            }
            Ok(())
        }
        Request::Play { motion, .. } => {
            let play: PlayReply = client.call(request, json)?;
            if !json {
                out!(
                    "playing {motion} ({:.2} s after a {:.2} s approach)",
                    play.duration_s,
                    play.approach_s
                );
            }
            if watch {
                return watch_status(client, json, Some(play.motion_id), play.at);
            }
            Ok(())
        }
        Request::Record { stop: false, .. } => {
            let record: RecordReply = client.call(request, json)?;
            if !json {
                out!(
                    "recording {} joints at {} Hz into {}; `motionctl record --stop` ends it",
                    record.joints.len(),
                    record.rate_hz,
                    record.motion
                );
            }
            Ok(())
        }
        Request::Record { stop: true, .. } => {
            let recorded: RecordStopReply = client.call(request, json)?;
            if !json {
                out!(
                    "recorded {} frames ({:.2} s) into {}",
                    recorded.frames,
                    recorded.duration_s,
                    recorded.path
                );
            }
            Ok(())
        }
        Request::List | Request::Reload => {
            let library: ListReply = client.call(request, json)?;
            match request {
                _ if json => {}
                Request::List => print_list(&library),
                _ => print_reload(&library),
            }
            Ok(())
        }
        Request::Drives => {
            let drives: DrivesReply = client.call(request, json)?;
            if !json {
                print_drives(&drives);
            }
            Ok(())
        }
        Request::Dump => {
            let dumped: DumpReply = client.call(request, json)?;
            if !json {
                out!(
                    "wrote the last {:.1} s ({} ticks, {:.1} MB) to {}",
                    dumped.seconds,
                    dumped.ticks,
                    dumped.bytes as f64 / 1e6,
                    dumped.path
                );
            }
            Ok(())
        }
        // The rest answer `{"ok":true}` (`recover --pose` says more, for scripts).
        _ => {
            let _: DoneReply = client.call(request, json)?;
            if !json {
                out!("ok");
            }
            Ok(())
        }
    }
}

/// Shows the progress until the motion `motion_id` ends (or forever when `None`), counting down
/// to `at` first, and then prints how it ended.
fn watch_status(
    client: &mut Client,
    json: bool,
    motion_id: Option<u32>,
    at: Option<f64>,
) -> Result<(), Failure> {
    let tty = std::io::stdout().is_terminal() && !json;
    let mut seen = Watched::default();
    loop {
        let status: StatusReply = client.call(&Request::Status, json)?;
        seen.update(&status, motion_id);
        if !json {
            let mut bar = progress_line(status.state, &status.playback);
            if let Some(left) = at.map(|at| at - unix_now()).filter(|s| *s > 0.0) {
                bar = format!("starts in {left:.1} s  {bar}");
            }
            if tty {
                print_over(&bar);
            } else {
                out!("{bar}");
            }
        }
        let fault = status.state == State::Fault;
        let under_way = matches!(
            status.state,
            State::Approaching
                | State::Playing
                | State::Streaming
                | State::Starved
                | State::Paused
                | State::Stopping
        );
        let ended = fault
            || motion_id.is_some_and(|id| !(under_way && status.playback.motion_id == Some(id)));
        if ended {
            if tty {
                out!("");
            }
            let result = seen.result(&status);
            if json {
                // A summary of plain fields always serialises.
                out!("{}", serde_json::to_string(&result).unwrap_or_default());
            } else {
                out!("{}", result.text(&seen));
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
    motion_id: Option<u32>,
    overruns_at_start: Option<u64>,
    time_s: f64,
    progress: f64,
    duration_s: Option<f64>,
    motion: Option<String>,
}

/// How a watched motion ended: `--watch --json`'s last line.
#[derive(Debug, Serialize)]
struct WatchResult {
    result: Ended,
    motion: Option<String>,
    /// Time into the motion when it ended, seconds.
    duration_s: f64,
    progress: f64,
    worst_following_error: Option<JointValue>,
    /// Overruns while it was watched.
    overruns: u64,
    fault: Option<String>,
}

/// How a watched motion ended, in `--watch --json`'s words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Ended {
    Finished,
    Stopped,
    Replaced,
    Refused,
    Fault,
}

impl Watched {
    fn update(&mut self, status: &StatusReply, motion_id: Option<u32>) {
        self.motion_id = motion_id;
        self.overruns_at_start.get_or_insert(status.overruns);
        let p = &status.playback;
        let ours = motion_id.is_none() || p.motion_id == motion_id;
        if ours && let Some(t) = p.time_s {
            self.time_s = t;
            self.progress = p.progress.unwrap_or(self.progress);
            if let Some(d) = p.duration_s {
                self.duration_s = Some(d);
            }
            if let Some(m) = &p.motion {
                self.motion = Some(m.clone());
            }
        }
    }

    fn result(&self, status: &StatusReply) -> WatchResult {
        let overruns = status.overruns - self.overruns_at_start.unwrap_or(0).min(status.overruns);
        // The largest following error the daemon reports, and on which joint.
        let worst = status
            .following_error
            .iter()
            .filter(|(_, v)| !v.is_nan())
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map(|(joint, value)| JointValue {
                joint: joint.clone(),
                value: *value,
            });
        let fault = (status.state == State::Fault).then(|| fault_text(status));
        // The daemon's word for how the playback ended; progress only when it has none.
        let said = status
            .last_outcome
            .as_ref()
            .filter(|last| Some(last.motion_id) == self.motion_id)
            .map(|last| last.outcome);
        let result = match said {
            _ if fault.is_some() => Ended::Fault,
            Some(Outcome::Faulted) => Ended::Fault,
            Some(Outcome::Finished) => Ended::Finished,
            Some(Outcome::Stopped) => Ended::Stopped,
            Some(Outcome::Replaced) => Ended::Replaced,
            Some(Outcome::Refused) => Ended::Refused,
            None if self.progress >= 0.999 => Ended::Finished,
            None => Ended::Stopped,
        };
        WatchResult {
            result,
            motion: self.motion.clone(),
            duration_s: self.time_s,
            progress: self.progress,
            worst_following_error: worst,
            overruns,
            fault,
        }
    }
}

impl WatchResult {
    /// The result in words, for people.
    fn text(&self, seen: &Watched) -> String {
        let name = self.motion.as_deref().unwrap_or("the motion");
        let mut text = match self.result {
            Ended::Finished => format!(
                "{name} finished after {:.2} s",
                seen.duration_s.unwrap_or(self.duration_s)
            ),
            Ended::Refused => format!("{name} was refused by the loop"),
            Ended::Stopped => format!(
                "{name} stopped at {:.0}% after {:.2} s",
                self.progress * 100.0,
                self.duration_s
            ),
            Ended::Replaced => format!(
                "{name} was replaced at {:.0}% after {:.2} s",
                self.progress * 100.0,
                self.duration_s
            ),
            Ended::Fault => format!("{name} ended by a fault after {:.2} s", self.duration_s),
        };
        if let Some(worst) = &self.worst_following_error {
            text.push_str(&format!(
                "; worst following error {:.4} on {}",
                worst.value, worst.joint
            ));
        }
        text.push_str(&format!("; {} overruns", self.overruns));
        if let Some(f) = &self.fault {
            text.push_str(&format!("; {f}"));
        }
        text
    }
}

fn fault_text(status: &StatusReply) -> String {
    if status.faults.is_empty() {
        return "the daemon is in a fault state".into();
    }
    status
        .faults
        .iter()
        .map(describe_fault)
        .collect::<Vec<_>>()
        .join("; ")
}

/// A fault in the daemon's own words, as its replies and journal give them.
fn describe_fault(fault: &FaultReport) -> String {
    format!("fault: {}", fault.text)
}

/// `[##########··········]  50%  2.00 / 4.00 s  wave  playing`
fn progress_line(state: State, playback: &Playback) -> String {
    const WIDTH: usize = 30;
    let state = state.as_str();
    let Some(motion) = &playback.motion else {
        return state.to_string();
    };
    let progress = playback.progress.unwrap_or(0.0).clamp(0.0, 1.0);
    let filled = (progress * WIDTH as f64).round() as usize;
    let mut bar = "#".repeat(filled);
    bar.push_str(&"·".repeat(WIDTH - filled.min(WIDTH)));
    let time = playback.time_s.unwrap_or(0.0);
    let duration = match playback.duration_s {
        Some(d) => format!(" / {d:.2}"),
        None => String::new(),
    };
    format!(
        "[{bar}] {:>3.0}%  {time:.2}{duration} s  {motion}  {state}",
        progress * 100.0
    )
}

/// What the loop obtained of the real-time settings, one line (and one per warning).
fn rt_line(rt: &RtReport) -> String {
    let cpu = rt.cpu.map_or("any".to_string(), |c| c.to_string());
    let memory = if rt.memory_locked {
        "locked"
    } else {
        "not locked"
    };
    let awake = match &rt.cpu_wakeup_latency {
        Some(w) => format!("CPU held awake ({} µs, {})", w.latency_us, w.path),
        None => "CPU not held awake".to_string(),
    };
    let mut line = format!(
        "real time  cpu {cpu}, {} priority {}, memory {memory}, {awake}",
        rt.policy, rt.priority
    );
    for w in &rt.warnings {
        line.push_str(&format!("\n  not obtained: {w}"));
    }
    line
}

/// `drives` as a table: one line per drive.
fn print_drives(reply: &DrivesReply) {
    let num =
        |v: Option<f64>, decimals: usize| v.map_or("-".to_string(), |x| format!("{x:.decimals$}"));
    let word = |v: Option<u32>| v.map_or("-".to_string(), |x| format!("{x:#06x}"));
    let rows: Vec<[String; 11]> = reply
        .drives
        .iter()
        .map(|d| {
            [
                d.joint.clone(),
                d.bus.clone(),
                d.family.clone(),
                d.id.to_string(),
                d.state.as_str().to_string(),
                num(d.position, 4),
                num(d.velocity, 4),
                num(d.effort, 3),
                word(d.status_word),
                word(d.error_word),
                d.last_error
                    .as_ref()
                    .and_then(|e| e.text.clone())
                    .unwrap_or_else(|| "-".to_string()),
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
    if reply.backend != reply::BackendKind::Buses {
        out!(
            "({}: simulated motors stand in for these drives)",
            reply.backend.as_str()
        );
    }
}

fn print_status(status: &StatusReply) {
    out!("state      {}", status.state.as_str());
    out!(
        "backend    {} at {} Hz",
        status.backend.as_str(),
        status.rate_hz
    );
    if status.playback.motion.is_some() {
        out!(
            "motion     {}",
            progress_line(status.state, &status.playback)
        );
    }
    for line in group_lines(&status.groups) {
        out!("{line}");
    }
    if let Some((line, _)) = estop_line(status.estop.as_ref()) {
        out!("{line}");
    }
    let l = &status.latency_us;
    out!(
        "latency    p50 {:.1} µs  p99 {:.1} µs  max {:.1} µs  overruns {}",
        l.p50,
        l.p99,
        l.max,
        status.overruns
    );
    out!("{}", rt_line(&status.rt));
    if status.faults.is_empty() {
        out!("faults     none");
    }
    for fault in &status.faults {
        out!("fault      {}", describe_fault(fault));
    }
    for (line, _) in bus_lines(status.buses.as_deref().unwrap_or_default()) {
        out!("{line}");
    }
    out!("positions");
    for (joint, value) in &status.positions {
        if value.is_nan() {
            // Not a number: the wire's null.
            out!("  {joint:<20} null");
        } else {
            out!("  {joint:<20} {value:>10.4}");
        }
    }
}

/// One line per joint group: its name and what it plays, as [`progress_line`] shows the robot.
fn group_lines(groups: &indexmap::IndexMap<String, GroupStatus>) -> Vec<String> {
    groups
        .iter()
        .map(|(name, g)| format!("group {name:<10} {}", progress_line(g.state, &g.playback)))
        .collect()
}

/// The E-stop when one is watched (or has stopped the robot), and whether it holds the robot.
fn estop_line(estop: Option<&EStopReport>) -> Option<(String, bool)> {
    let e = estop?;
    let text = e.text.as_deref().unwrap_or("E-stop");
    let what = match (e.cause.is_some(), e.input) {
        (true, Some(reply::InputLevel::Asserted)) => {
            format!("STOPPED: {text}; release it, then clear-fault")
        }
        (true, _) if e.reenable => {
            format!("STOPPED: {text}; released: clear-fault brings the drives back")
        }
        (true, _) => format!("STOPPED: {text}; released: clear-fault ends it"),
        (false, Some(level)) => format!("input {}", level.as_str()),
        (false, None) => return None,
    };
    Some((format!("estop      {what}"), e.cause.is_some()))
}

/// A bus's or a drive's state and counters, and whether it is faulted (for colour).
fn link_text(l: &LinkReport) -> (String, bool) {
    let state = l.state.as_str();
    let mut text = format!("{state:<9} faults {}", l.faults);
    if let Some(fault) = l.last_fault.as_ref().and_then(|f| f.text.as_deref()) {
        text.push_str(&format!(" (last: {fault})"));
    }
    if let Some(warning) = &l.last_warning {
        text.push_str(&format!(
            "  warnings {} (last: {})",
            l.warnings, warning.text
        ));
    }
    if l.reopened > 0 {
        text.push_str(&format!("  reopened {}", l.reopened));
    }
    (text, state == "fault")
}

/// Each bus of `status`, then its drives indented, one line each, with whether the line
/// reports a fault (for colour). Faults and warnings in the protocol's words, as the daemon
/// gives them.
fn bus_lines(buses: &[BusReport]) -> Vec<(String, bool)> {
    let width = buses
        .iter()
        .flat_map(|b| b.drives.keys().map(|dof| dof.chars().count() + 2))
        .max()
        .unwrap_or(0)
        .max(12);
    let mut lines = Vec::new();
    for bus in buses {
        let (text, fault) = link_text(&bus.link);
        let name = format!("bus {}", bus.name);
        lines.push((
            format!(
                "{name:<width$} {text}  {} frames sent {} received {} ignored {}",
                bus.transport, bus.sent, bus.received, bus.ignored
            ),
            fault,
        ));
        for (dof, drive) in &bus.drives {
            let (text, fault) = link_text(&drive.link);
            lines.push((
                format!("{:<width$} {text}  {}", format!("  {dof}"), drive.protocol),
                fault,
            ));
        }
    }
    lines
}

fn print_list(library: &ListReply) {
    if library.motions.is_empty() {
        out!("the library is empty");
    }
    for motion in &library.motions {
        let name = &motion.name;
        match &motion.state {
            MotionState::Ready { duration_s, .. } => out!("{name:<24} {duration_s:>8.2} s  ok"),
            MotionState::Failed { error, .. } | MotionState::Loading { error, .. } => {
                out!("{name:<24} {:>10}  refused: {error}", "-")
            }
        }
    }
}

fn print_reload(library: &ListReply) {
    let bad: Vec<_> = library
        .motions
        .iter()
        .filter_map(|m| match &m.state {
            MotionState::Ready { .. } => None,
            MotionState::Failed { error, .. } | MotionState::Loading { error, .. } => {
                Some((&m.name, error))
            }
        })
        .collect();
    out!(
        "reloaded: {} motions, {} left out",
        library.motions.len() - bad.len(),
        bad.len()
    );
    for (name, error) in bad {
        out!("  {name}: {error}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reply line as the daemon would write it, read back as the client reads it.
    fn read<T: DeserializeOwned>(line: &str) -> T {
        reply::read(line).unwrap().unwrap()
    }

    #[test]
    fn buses_and_drives_one_line_each_faults_marked() {
        let buses: Vec<BusReport> = serde_json::from_str(
            r#"[{"name": "arm", "transport": "serial", "state": "fault", "faults": 1,
            "last_fault": {"kind": "device_lost", "code": 5, "text": "device lost (code 0x5)"},
            "warnings": 0, "last_warning": null, "reopened": 1,
            "sent": 10, "received": 9, "ignored": 0,
            "drives": {"base_yaw": {"protocol": "cia402", "state": "ready", "faults": 0,
                        "last_fault": null, "warnings": 2,
                        "last_warning": {"code": 33296, "text": "EMCY 0x8210"},
                        "reopened": 0}}}]"#,
        )
        .unwrap();
        let lines = bus_lines(&buses);
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
        assert!(bus_lines(&[]).is_empty());
    }

    #[test]
    fn stops_wait_briefly_whatever_the_timeout_and_proofs_get_longer() {
        let stop = Request::Stop { group: None };
        let quick = Request::QuickStop { group: None };
        let long = Some(Duration::from_secs(600));
        assert_eq!(answer_timeout(&stop, None), QUICK_ANSWER);
        assert_eq!(answer_timeout(&stop, long), QUICK_ANSWER);
        assert_eq!(answer_timeout(&quick, long), QUICK_ANSWER);
        let short = Some(Duration::from_millis(200));
        assert_eq!(answer_timeout(&stop, short), Duration::from_millis(200));
        assert_eq!(answer_timeout(&Request::Status, None), QUICK_ANSWER);
        assert_eq!(answer_timeout(&Request::Reload, None), SLOW_ANSWER);
        assert_eq!(answer_timeout(&Request::Dump, None), SLOW_ANSWER);
        assert_eq!(
            answer_timeout(&Request::Status, long),
            Duration::from_secs(600)
        );
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
        let groups: indexmap::IndexMap<String, GroupStatus> = serde_json::from_str(
            r#"{"arm": {"state": "playing", "motion": "wave", "progress": 0.5,
                        "time_s": 1.0, "duration_s": 2.0},
                "legs": {"state": "idle"}}"#,
        )
        .unwrap();
        let lines = group_lines(&groups);
        assert!(lines[0].starts_with("group arm        [") && lines[0].ends_with("wave  playing"));
        assert_eq!(lines[1], "group legs       idle");
        let estop: EStopReport = serde_json::from_str(
            r#"{"input": "asserted", "cause": "input", "joint": null,
                "text": "the E-stop input is asserted", "reenable": true}"#,
        )
        .unwrap();
        assert_eq!(
            estop_line(Some(&estop)),
            Some((
                "estop      STOPPED: the E-stop input is asserted; release it, then clear-fault"
                    .into(),
                true
            ))
        );
        let clear: EStopReport = serde_json::from_str(
            r#"{"input": "released", "cause": null, "joint": null, "text": null,
                "reenable": false}"#,
        )
        .unwrap();
        assert_eq!(
            estop_line(Some(&clear)),
            Some(("estop      input released".into(), false))
        );
        assert_eq!(estop_line(None), None);
    }

    #[test]
    fn progress_line_shows_bar_time_and_motion() {
        let playing: GroupStatus = serde_json::from_str(
            r#"{"state":"playing","motion":"wave","progress":0.5,"time_s":2.0,"duration_s":4.0}"#,
        )
        .unwrap();
        let line = progress_line(playing.state, &playing.playback);
        assert!(line.starts_with(&format!("[{}{}]", "#".repeat(15), "·".repeat(15))));
        assert!(line.contains("50%") && line.contains("2.00 / 4.00 s") && line.contains("wave"));
        let idle = State::Idle;
        assert_eq!(progress_line(idle, &Playback::default()), "idle");
    }

    #[test]
    fn fault_replies_are_faults_and_others_refusals() {
        let refusal_of = |line: &str| refusal(reply::read::<DoneReply>(line).unwrap().unwrap_err());
        let fault = r#"{"ok":false,"error":{"code":"fault","message":"m"}}"#;
        assert!(matches!(refusal_of(fault), Failure::Fault(_)));
        let refused = r#"{"ok":false,"error":{"code":"refused","message":"m"}}"#;
        assert!(matches!(refusal_of(refused), Failure::Refused(_)));
        let bad = r#"{"ok":false,"error":{"code":"bad_request","message":"m"}}"#;
        assert!(matches!(refusal_of(bad), Failure::Invalid(_)));
        let _: DoneReply = read(r#"{"ok":true}"#);
    }

    #[test]
    fn a_watched_motion_ends_in_the_daemons_word() {
        let seen = Watched {
            motion_id: Some(3),
            overruns_at_start: Some(1),
            time_s: 1.5,
            progress: 0.4,
            duration_s: Some(4.0),
            motion: Some("wave".into()),
        };
        let status = |outcome: &str| -> StatusReply {
            read(&format!(
                r#"{{"ok":true,"state":"idle","backend":"sim","rate_hz":1000.0,
                "last_outcome":{{"motion_id":3,"motion":"wave","outcome":"{outcome}"}},
                "tick":9,"moving":false,"positions":{{"a":0.1}},"commanded":{{"a":0.1}},
                "following_error":{{"a":0.002,"b":null}},"position_limits":{{"a":[-1.0,null]}},
                "latency_us":{{"min":1.0,"p50":2.0,"p99":3.0,"p999":4.0,"max":5.0}},
                "overruns":3,"limit_violations":0,
                "rt":{{"cpu":null,"policy":"other","priority":0,"memory_locked":false,
                       "cpu_wakeup_latency":null,"warnings":[]}},"faults":[]}}"#
            ))
        };
        let replaced = seen.result(&status("replaced"));
        assert_eq!(replaced.result, Ended::Replaced);
        assert_eq!(
            replaced.text(&seen),
            "wave was replaced at 40% after 1.50 s; worst following error 0.0020 on a; 2 overruns"
        );
        assert_eq!(
            serde_json::to_string(&seen.result(&status("finished"))).unwrap(),
            r#"{"result":"finished","motion":"wave","duration_s":1.5,"progress":0.4,"worst_following_error":{"joint":"a","value":0.002},"overruns":2,"fault":null}"#
        );
    }
}
