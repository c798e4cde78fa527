//! `motiond`: the motion playback daemon and its offline tools.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod check;
mod inspect;
mod play;
mod resample;
mod robot;
mod serve;

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
    /// Print a SKEL robot model or a .seq motion as JSON.
    #[command(subcommand)]
    Inspect(inspect::Target),
    /// Resample a motion onto a fixed control rate.
    Resample(resample::Args),
    /// Map a motion onto a robot and prove every sample against its limits.
    Check(check::Args),
    /// Play one motion once, without the daemon, and report.
    Play(play::Args),
    /// Run the daemon: the loop, the motion library and the control socket.
    Serve(serve::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Inspect(target) => inspect::run(target),
        Command::Resample(args) => resample::run(args),
        Command::Check(args) => check::run(args),
        Command::Play(args) => play::run(args),
        Command::Serve(args) => serve::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("motiond: {err:#}");
            ExitCode::from(1)
        }
    }
}
