//! `motiond serve`: the daemon. Loads the robot and the motion library, starts the loop, serves
//! the control socket, talks to systemd, and turns SIGINT/SIGTERM into a controlled stop.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use crossbeam::channel::{self, Receiver};
use motiond::backend;
use motiond::config::{self, Config};
use motiond::control::daemon::{self, Daemon, Robot};
use motiond::control::server::Server;
use motiond::control::socket::{ControlSocket, GroupOutcome};
use motiond::control::systemd::{self, Notifier, Watchdog};
use motiond::rt::{self, Command, LoopHandle, MonotonicClock, State};
use motiond::trajectory::Options;

use crate::robot::{self, RobotArgs};

#[derive(clap::Args)]
pub struct Args {
    /// The configuration file.
    #[arg(long, default_value = config::DEFAULT_PATH)]
    config: PathBuf,
    /// Listen on this socket instead of the configured `daemon.socket`.
    #[arg(long)]
    socket: Option<PathBuf>,
    /// Serve the same configuration with every bus replaced by the simulated backend.
    #[arg(long)]
    dry_run: bool,
}

/// How long the loop may take to tick for the first time before the start is given up.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// After the shutdown timeout (or a second signal) the loop gets this long to hold and end.
const HOLD_GRACE: Duration = Duration::from_secs(1);

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let robot_args = RobotArgs {
        config: Some(args.config.clone()),
        ..RobotArgs::default()
    };
    let (config, joints) = match robot::load(&robot_args) {
        Ok(Some(robot::Robot {
            config: Some(config),
            joints,
            ..
        })) => (config, joints),
        Ok(_) => anyhow::bail!("{}: no robot configured", args.config.display()),
        Err(failure) => return failure.exit(),
    };
    let config = if args.dry_run {
        config.dry_run()
    } else {
        config
    };
    let robot = Robot {
        joints: joints.clone(),
        columns: config.robot.joints.clone(),
        options: Options {
            rate_hz: config.control.rate_hz,
            interpolation: config.motion.interpolation,
            policy: config.motion.limit_policy,
            speed: 1.0,
        },
    };
    let library = match robot.load_library(&config.motion.library) {
        Ok(library) => library,
        Err(err) => {
            let where_ = format!("{}: {err}", config.motion.library.display());
            eprintln!("{}", config.diagnostic("motion.library", where_));
            return Ok(ExitCode::from(2));
        }
    };
    daemon::log_library(&library);

    let socket_path = args.socket.unwrap_or_else(|| config.daemon.socket.clone());
    let (socket, group) = ControlSocket::bind(&socket_path, config.daemon.socket_group.as_deref())?;
    if let GroupOutcome::Unknown(name) = group {
        tracing::warn!(
            "socket group {name:?} does not exist; {} keeps the daemon's group",
            socket_path.display()
        );
    }

    let backend = backend::open(&config, &joints)?;
    let handle = rt::spawn(
        rt::Settings::from_config(&config),
        backend,
        joints,
        MonotonicClock,
    )
    .context("starting the real-time loop")?;
    let rt = Arc::new(handle);
    wait_for_first_tick(&rt)?;
    enable(&rt)?;
    let daemon = Arc::new(Daemon::new(
        robot,
        config.motion.library.clone(),
        library,
        rt.clone(),
    ));
    let server = Server::start(socket, daemon.clone()).context("serving the control socket")?;

    let signals = signal_channel()?;
    let notifier = Notifier::from_env().context("$NOTIFY_SOCKET")?;
    notify(&notifier, "READY=1");
    tracing::info!(
        "serving {} at {} Hz on the {} backend",
        socket_path.display(),
        config.control.rate_hz,
        if args.dry_run {
            "simulated (dry run)"
        } else {
            backend_name(&config)
        }
    );

    let watchdog = config
        .daemon
        .watchdog
        .then(systemd::watchdog_timeout)
        .flatten();
    // Ping at half the watchdog period, as systemd recommends; without a watchdog just wake
    // up now and then to log what the loop reports.
    let period = watchdog.map_or(Duration::from_millis(500), |t| {
        (t / 2).min(Duration::from_millis(500))
    });
    let mut beats = Watchdog::default();
    loop {
        match signals.recv_timeout(period) {
            Ok(()) => break,
            Err(channel::RecvTimeoutError::Disconnected) => break,
            Err(channel::RecvTimeoutError::Timeout) => {}
        }
        if watchdog.is_some() && beats.beat(rt.heartbeat()) {
            notify(&notifier, "WATCHDOG=1");
        }
        daemon.collect_outcomes();
    }

    // The deceleration starts before anything else; `controlled_stop` repeats the command.
    let _ = rt.send(Command::Shutdown);
    let stop_started = Instant::now();
    notify(&notifier, "STOPPING=1");
    tracing::info!("signal received: stopping the motion (a second signal holds at once)");
    // No new requests from here on; the socket file goes away with the server.
    server.stop();
    drop(daemon);
    let deadline = stop_started + config.daemon.shutdown_timeout;
    let stopped = controlled_stop(&rt, deadline, &signals);
    if let Ok(handle) = Arc::try_unwrap(rt) {
        // The loop has ended; this only joins its thread.
        let _ = handle.shutdown(HOLD_GRACE);
    }
    match stopped {
        Ok(Stop::AtRest) => {
            tracing::info!("stopped at rest; drives {}", safe_state_name(&config));
            Ok(ExitCode::SUCCESS)
        }
        Ok(Stop::Held) => {
            tracing::warn!(
                "held at once before reaching rest; drives {}",
                safe_state_name(&config)
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(err) => {
            tracing::error!("{err}");
            Ok(ExitCode::from(1))
        }
    }
}

enum Stop {
    /// The motion decelerated to rest within the limits.
    AtRest,
    /// A second signal or the timeout cut the deceleration short: held where it was.
    Held,
}

/// Decelerates to rest and ends the loop; a second signal, or the configured timeout, holds at
/// once instead.
fn controlled_stop(
    rt: &LoopHandle,
    deadline: Instant,
    signals: &Receiver<()>,
) -> Result<Stop, String> {
    let mut held_at: Option<Instant> = None;
    loop {
        // `Shutdown` is idempotent: repeating it is how we learn that the loop has ended (the
        // channel is then closed). After a `Hold` it ends the loop at once.
        if let Err(rt::Error::Ended) = rt.send(Command::Shutdown) {
            return Ok(if held_at.is_some() {
                Stop::Held
            } else {
                Stop::AtRest
            });
        }
        let second_signal = signals.recv_timeout(Duration::from_millis(5)).is_ok();
        match held_at {
            None if second_signal || Instant::now() >= deadline => {
                if second_signal {
                    tracing::warn!("second signal: holding at once");
                } else {
                    tracing::warn!("not at rest within daemon.shutdown_timeout_s: holding at once");
                }
                let _ = rt.send(Command::Hold);
                held_at = Some(Instant::now());
            }
            Some(at) if at.elapsed() >= HOLD_GRACE => {
                return Err(format!(
                    "the loop did not end within {HOLD_GRACE:?} of holding"
                ));
            }
            _ => {}
        }
    }
}

/// Waits until the loop has ticked, so READY=1 means the robot is under control.
fn wait_for_first_tick(rt: &LoopHandle) -> anyhow::Result<()> {
    let deadline = Instant::now() + START_TIMEOUT;
    while rt.heartbeat() == 0 {
        if Instant::now() >= deadline {
            anyhow::bail!("the real-time loop did not tick within {START_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

/// Powers the drives (they come up holding their measured position; `disable` takes the power
/// off again) and waits for the enable sequence to end, so the first request finds them ready.
/// A drive that fails to enable leaves the loop in its fault state, reported by `status`.
fn enable(rt: &LoopHandle) -> anyhow::Result<()> {
    rt.send(Command::Enable).context("enabling the drives")?;
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        match rt.state() {
            State::Disabled if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(1));
            }
            State::Disabled => anyhow::bail!("the drives did not enable within {START_TIMEOUT:?}"),
            State::Fault => {
                tracing::error!(
                    "enabling the drives failed: {}",
                    rt.status()
                        .fault
                        .map_or_else(String::new, |f| f.to_string())
                );
                return Ok(());
            }
            _ => return Ok(()),
        }
    }
}

/// SIGINT, SIGTERM and SIGHUP arrive here (ctrlc's termination feature).
fn signal_channel() -> anyhow::Result<Receiver<()>> {
    let (tx, rx) = channel::bounded(4);
    ctrlc::set_handler(move || {
        let _ = tx.try_send(());
    })
    .context("installing the signal handler")?;
    Ok(rx)
}

fn notify(notifier: &Notifier, state: &str) {
    if let Err(err) = notifier.notify(state) {
        tracing::warn!("sd_notify {state}: {err}");
    }
}

fn backend_name(config: &Config) -> &'static str {
    match config.backend {
        config::BackendConfig::Sim => "simulated",
        _ => "bus",
    }
}

fn safe_state_name(config: &Config) -> &'static str {
    match config.daemon.safe_state {
        config::SafeState::Hold => "holding",
        config::SafeState::Disable => "disabled",
    }
}
