//! `motiond`: the motion playback daemon and its offline tools.

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

mod check;
mod doctor;
mod estop;
mod hint;
mod import;
mod inspect;
mod play;
mod plot;
mod rehearse;
mod resample;
mod robot;
mod serve;
mod signals;
mod trace_out;

#[derive(Parser)]
#[command(
    name = "motiond",
    version,
    about = "Plays recorded robot motions on motors"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print a robot model (SKEL, URDF, SDF or XODE: joints, DOFs and limits) or a .seq motion:
    /// a table for people on a terminal, JSON for scripts (when piped, or with --json).
    #[command(subcommand)]
    Inspect(inspect::Target),
    /// Import a recorded motion from another format as a .seq for the robot.
    #[command(subcommand)]
    Import(import::Source),
    /// Resample a motion onto a fixed control rate.
    Resample(resample::Args),
    /// Map a motion onto a robot and prove every sample against its limits.
    Check(check::Args),
    /// Play one motion once, without the daemon, and report.
    Play(play::Args),
    /// Run the daemon: the loop, the motion library and the control socket.
    Serve(serve::Args),
    /// Is this machine ready for the configured loop? Kernel, CPU isolation, IRQs, idle states,
    /// limits, the PM QoS request and a measured wake-up test; exit 0 ready, 1 warnings, 2 not
    /// ready.
    Doctor(doctor::Args),
    /// Rehearse an operator session (requests, E-stop, faults, a hand, signals) against the
    /// daemon on the simulated backend and a manual clock: the same report every run.
    Rehearse(rehearse::Args),
    /// Watch the E-stop input as the loop does and print each change (wiring checks, tests).
    Estop(estop::Args),
    /// Print a shell completion script: bash, zsh, fish, elvish or powershell.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff; `motiond man | man -l -`; `motiond man motiond.yaml` for
    /// the configuration file's), or with --dir write every page into a folder: motiond.1, one
    /// motiond-SUBCOMMAND.1 per subcommand and motiond.yaml.5.
    Man {
        /// `motiond` or `motiond.yaml`.
        #[arg(value_name = "PAGE", default_value = "motiond", value_parser = ["motiond", "motiond.yaml"])]
        page: String,
        #[arg(long, value_name = "DIR")]
        dir: Option<std::path::PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Serve(_) | Command::Play(_)) {
        // Tools that only print end quietly when their reader goes away (`| head`). The daemon
        // and `play` keep SIGPIPE ignored: they drive motors and must stop them properly.
        // SAFETY: nothing else runs yet; SIG_DFL is a valid disposition for SIGPIPE.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    } else {
        // A file-size limit (LimitFSIZE=, ulimit -f) must not kill a process that drives motors
        // mid-motion: with SIGXFSZ ignored the write fails with EFBIG like a full disk, and a
        // teach-in take keeps its frames (motion::take).
        // SAFETY: nothing else runs yet; SIG_IGN is a valid disposition for SIGXFSZ.
        unsafe {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        }
    }
    // The daemon narrates its life; the offline tools speak up only when something is off. A
    // rehearsal keeps the daemon's journal for its report (the library captures it).
    match cli.command {
        Command::Serve(_) => init_logging("info"),
        _ => init_logging("warn"),
    }
    let result = match cli.command {
        Command::Inspect(target) => inspect::run(target),
        Command::Import(source) => import::run(source),
        Command::Resample(args) => resample::run(args),
        Command::Check(args) => check::run(args),
        Command::Play(args) => play::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Rehearse(args) => rehearse::run(args),
        Command::Estop(args) => estop::run(args),
        Command::Doctor(args) => doctor::run(args),
        Command::Completions { shell } => {
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "motiond",
                &mut std::io::stdout(),
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Man { page, dir: None } => {
            let mut out = std::io::stdout().lock();
            let written = if page == "motiond.yaml" {
                motiond::manual::config_page(env!("CARGO_PKG_VERSION"), &mut out)
            } else {
                motiond::manual::render(Cli::command(), &mut out)
            };
            written.map(|()| ExitCode::SUCCESS).map_err(Into::into)
        }
        Command::Man { dir: Some(dir), .. } => {
            if let Err(why) = motiond::diag::check_output_folder(&dir) {
                eprintln!("motiond: man --dir {why}");
                return ExitCode::from(2);
            }
            write_manual(&dir)
                .map(|()| ExitCode::SUCCESS)
                .map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))
        }
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("motiond: {}", crate::hint::explain(err.as_ref()));
            ExitCode::from(1)
        }
    }
}

/// Every page of motiond's: the command's and its subcommands', and motiond.yaml(5).
fn write_manual(dir: &std::path::Path) -> std::io::Result<()> {
    motiond::manual::write_pages(Cli::command(), dir)?;
    let mut file = std::fs::File::create(dir.join("motiond.yaml.5"))?;
    motiond::manual::config_page(env!("CARGO_PKG_VERSION"), &mut file)
}

/// Plain lines on stderr for journald: no colours, and no timestamps when journald adds its own.
/// `RUST_LOG` overrides the level.
fn init_logging(default_level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_target(false)
        .with_writer(std::io::stderr);
    let _ = if std::env::var_os("JOURNAL_STREAM").is_some() {
        builder.without_time().try_init()
    } else {
        builder.try_init()
    };
}
