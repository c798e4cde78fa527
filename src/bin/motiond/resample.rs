//! `motiond resample`.

use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`motiond resample` is not yet available")
}
