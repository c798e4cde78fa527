//! `motiond serve`: the daemon. Loads the robot, starts the loop, serves the control socket,
//! loads the motion library behind it, talks to systemd, turns SIGINT/SIGTERM into a controlled
//! stop and SIGHUP into a library reload.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use crossbeam::channel::{self, Receiver};
use motiond::config::{self, Config};
use motiond::daemon::reply::BackendKind;
use motiond::daemon::requests::{Daemon, DriveInfo, Motions};
use motiond::daemon::server::Server;
use motiond::daemon::socket::{ControlSocket, GroupOutcome};
use motiond::daemon::systemd::{self, Notifier, Watchdog};
use motiond::recorder::FlightRecorder;
use motiond::rt;
use motiond::session::Session;
use motiond::session::start;

use crate::robot::{self, Failure, RobotArgs};
use crate::signals::{self, Hangup, Signals};

#[derive(clap::Args)]
pub struct Args {
    /// The configuration file; default: $MOTIOND_CONFIG, else /etc/motiond/motiond.yaml for an
    /// installed motiond, else config/motiond.yaml of a checkout.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Listen on this socket instead of the configured `daemon.socket`.
    #[arg(long)]
    socket: Option<PathBuf>,
    /// Serve the same configuration with every bus replaced by the simulated backend.
    #[arg(long)]
    dry_run: bool,
}

/// How often the daemon looks for faults and finished playbacks to log.
const LOG_PERIOD: Duration = Duration::from_millis(50);

/// How long the loop may take to tick for the first time before the start is given up.
const START_TIMEOUT: Duration = Duration::from_secs(10);

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    // First of all: until the handlers are in, SIGTERM, SIGINT and SIGHUP end the process at
    // once, and the start opens the buses and enables the drives. A stop that comes during the
    // start waits on the channel, and the main loop takes it as a controlled stop.
    let Signals {
        stops: signals,
        reloads,
    } = signals::install(Hangup::Reload)?;
    let config_path = args.config.clone().unwrap_or_else(config::default_path);
    let robot_args = RobotArgs {
        config: Some(config_path.clone()),
        ..RobotArgs::default()
    };
    let mut robot = match robot::load(&robot_args) {
        Ok(Some(robot)) => robot,
        Ok(None) => anyhow::bail!("{}: no robot configured", config_path.display()),
        Err(failure) => return failure.exit(),
    };
    let Some(config) = robot.config.take() else {
        anyhow::bail!("{}: no robot configured", config_path.display());
    };
    // The drives as configured: a dry run names the ones its simulated motors stand in for.
    let drives = DriveInfo::of(&config, &robot.joints);
    let config = if args.dry_run {
        config.dry_run()
    } else {
        config
    };
    robot.config = Some(config.clone());
    let permit = match start::permit(&robot, &config) {
        Ok(permit) => permit,
        Err(e) => return Failure::from(e).exit(),
    };
    let joints = robot.joints.clone();
    let motions = Motions::new(robot);
    // Only the folder is listed here; its files are read once the socket answers, so a slow
    // or odd file cannot hold up the start.
    let library = match motions.scan_library(&config.motion.library) {
        Ok(library) => library,
        Err(err) => {
            let todo = match err.kind() {
                std::io::ErrorKind::NotFound => {
                    "create the folder, or set motion.library to the folder of the .seq files \
                     to serve (unset, it is `motions` beside the configuration file)"
                }
                std::io::ErrorKind::PermissionDenied => {
                    "let the daemon's user read the folder (the motiond unit runs as user motiond)"
                }
                _ => "set motion.library to the folder of the .seq files to serve",
            };
            let library = &config.motion.library;
            eprintln!(
                "{}",
                config.path_diagnostic("motion.library", library, &err, todo)
            );
            return Ok(ExitCode::from(2));
        }
    };

    // The default recorder folder (the state directory) is the recorder thread's to report.
    let recorder_dir = config
        .recorder
        .dir
        .as_deref()
        .filter(|_| config.recorder.seconds > 0.0);
    for problem in start::output_folders(&config, recorder_dir) {
        tracing::warn!("{problem}");
    }

    let socket_path = args.socket.unwrap_or_else(|| config.daemon.socket.clone());
    let (socket, group) = ControlSocket::bind(&socket_path, config.daemon.socket_group.as_deref())?;
    if let GroupOutcome::Unknown(name) = group {
        tracing::warn!(
            "socket group {name:?} does not exist; {} keeps the daemon's group",
            socket_path.display()
        );
    }

    let groups = match config.group_dofs(&joints) {
        Ok(groups) => groups,
        Err(found) => {
            for diagnostic in found {
                eprintln!("{diagnostic}");
            }
            return Ok(ExitCode::from(2));
        }
    };
    let group_names: Vec<String> = config.groups.iter().map(|g| g.name.clone()).collect();
    let backend = match start::open_backend(permit, &config, &joints) {
        Ok(backend) => backend,
        Err(e) => return Failure::from(e).exit(),
    };
    let rate = config.control.rate_hz;
    let settings = rt::Settings {
        groups,
        // The flight recorder's seconds, and half a second more for its thread to come by
        // after a trigger; at least a second: a teach-in records from the same ring, drained
        // every LOG_PERIOD.
        trace_ticks: ((config.recorder.seconds + 0.5) * rate)
            .max(rate)
            .ceil()
            .max(64.0) as usize,
        ..rt::Settings::from_config(&config, &joints)
    };
    let estop = match start::open_estop(&config, config.control.rate_hz) {
        Ok(estop) => estop,
        Err(e) => return Failure::from(e).exit(),
    };
    let session = Session::spawn(settings, backend, estop, joints)
        .context("starting the real-time loop")?
        .name_groups(&group_names);
    let session = Arc::new(session);
    wait_for_first_tick(&session)?;
    // The drives come up holding their measured position (`motionctl disable` takes the power
    // off again); a drive that fails leaves the loop faulted, which `status` reports.
    if let Err(err) = session.enable() {
        tracing::error!("enabling the drives failed: {err}");
    }
    let backend_kind = if args.dry_run {
        BackendKind::DryRun
    } else if matches!(config.backend, config::BackendConfig::Sim) {
        BackendKind::Sim
    } else {
        BackendKind::Buses
    };
    let mut daemon = Daemon::new(
        motions,
        config.motion.library.clone(),
        library,
        session.clone(),
        backend_kind,
    );
    daemon = daemon.with_drives(drives);
    if let Some(recorder) = start_recorder(&config, &session)? {
        daemon = daemon.with_recorder(recorder);
    }
    let daemon = Arc::new(daemon);
    let server = Server::start(socket, daemon.clone()).context("serving the control socket")?;

    let notifier = Arc::new(Notifier::from_env().context("$NOTIFY_SOCKET")?);
    notify(&notifier, "READY=1");
    spawn_librarian(daemon.clone(), reloads, notifier.clone())?;
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
    // Ping at half the watchdog period, as systemd recommends, and look at the loop often
    // enough that a fault reaches the journal as it happens.
    let period = watchdog.map_or(LOG_PERIOD, |t| (t / 2).min(LOG_PERIOD));
    let mut beats = Watchdog::default();
    loop {
        match signals.recv_timeout(period) {
            Ok(()) => break,
            Err(channel::RecvTimeoutError::Disconnected) => break,
            Err(channel::RecvTimeoutError::Timeout) => {}
        }
        if watchdog.is_some() && beats.beat(session.heartbeat()) {
            notify(&notifier, "WATCHDOG=1");
        }
        daemon.log_outcomes();
    }

    notify(&notifier, "STOPPING=1");
    // No new requests from here on; the socket file goes away with the server.
    server.stop();
    let mut stopping = daemon.begin_stop(config.daemon.shutdown_timeout);
    loop {
        let second = signals.try_recv().is_ok();
        if let Some(code) = daemon.poll_stop(&mut stopping, second) {
            return Ok(ExitCode::from(code));
        }
        session.advance();
    }
}

/// The flight recorder on the loop's ring, dumping into `recorder.dir` (default: the state
/// directory systemd gives the service, else /var/lib/motiond, folder `flight`); `None` when
/// `recorder.seconds` is 0.
fn start_recorder(config: &Config, session: &Session) -> anyhow::Result<Option<FlightRecorder>> {
    let (Some(ring), true) = (session.trace_ring(), config.recorder.seconds > 0.0) else {
        return Ok(None);
    };
    let dir = config.recorder.dir.clone().unwrap_or_else(|| {
        let state = std::env::var_os("STATE_DIRECTORY")
            .and_then(|dirs| std::env::split_paths(&dirs).next())
            .unwrap_or_else(|| PathBuf::from("/var/lib/motiond"));
        state.join("flight")
    });
    let settings = motiond::recorder::Settings {
        seconds: config.recorder.seconds,
        dir: dir.clone(),
        max_files: config.recorder.max_files,
        max_bytes: config.recorder.max_bytes,
    };
    let recorder =
        FlightRecorder::start(ring, session.joints().clone(), session.rate_hz(), settings)
            .context("starting the flight recorder")?;
    tracing::info!(
        "flight recorder: the last {} s of the loop go to {} on a fault, an E-stop, a guard \
         intervention or `motionctl dump`",
        config.recorder.seconds,
        dir.display()
    );
    Ok(Some(recorder))
}

/// Waits until the loop has ticked, so READY=1 means the robot is under control.
fn wait_for_first_tick(session: &Session) -> anyhow::Result<()> {
    let deadline = Instant::now() + START_TIMEOUT;
    while session.heartbeat() == 0 {
        if Instant::now() >= deadline {
            anyhow::bail!("the real-time loop did not tick within {START_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

/// Loads the library the daemon started with, then reloads it at each SIGHUP, on a thread of
/// its own: the main thread keeps feeding the watchdog meanwhile.
fn spawn_librarian(
    daemon: Arc<Daemon>,
    reloads: Receiver<()>,
    notifier: Arc<Notifier>,
) -> anyhow::Result<()> {
    std::thread::Builder::new()
        .name("library".into())
        .spawn(move || {
            daemon.finish_loading();
            for () in reloads {
                tracing::info!("SIGHUP: reloading the motion library");
                // systemd (Type=notify) shows the service reloading until READY=1.
                let now = motiond::rt::Clock::now_ns(&motiond::rt::MonotonicClock) / 1000;
                notify(&notifier, &format!("RELOADING=1\nMONOTONIC_USEC={now}"));
                if let Err(err) = daemon.reload() {
                    tracing::error!("reload: {}", err.message);
                }
                notify(&notifier, "READY=1");
            }
        })
        .context("starting the library thread")?;
    Ok(())
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
