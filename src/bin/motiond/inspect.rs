//! `motiond inspect model|skel|urdf|sdf|xode|seq FILE`: the model as JSON
//! (../shared/docs/inspect-json.md).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use motiond::motion::seq;
use motiond::robot::{self, skel};

#[derive(clap::Subcommand)]
pub enum Target {
    /// A robot model: SKEL, URDF, SDF or XODE, chosen by the root element.
    #[command(visible_aliases = ["urdf", "sdf", "xode"])]
    Model {
        file: PathBuf,
        /// URDF: weld the root link to the world instead of DART's floating `rootJoint`
        /// (as config robot.fixed_base).
        #[arg(long)]
        fixed_base: bool,
    },
    /// A DART SKEL robot model.
    Skel { file: PathBuf },
    /// A Choreonoid .seq body motion.
    Seq { file: PathBuf },
}

/// Exit 0 with JSON on stdout, or exit 2 with one `FILE:LINE:COL: message` line per problem on
/// stderr and nothing on stdout.
pub fn run(target: Target) -> anyhow::Result<ExitCode> {
    let json = match target {
        Target::Model { file, fixed_base } => {
            match robot::load(&file, &robot::Options { fixed_base }) {
                Ok(world) => skel::inspect_json(&world),
                Err(err) => return Ok(rejected(&err)),
            }
        }
        Target::Skel { file } => match skel::load(&file) {
            Ok(world) => skel::inspect_json(&world),
            Err(err) => return Ok(rejected(&err)),
        },
        Target::Seq { file } => match seq::load(&file) {
            Ok(motion) => {
                for s in &motion.skipped {
                    tracing::warn!(
                        "{}:{}:{}: skipped component of type {}: {}",
                        file.display(),
                        s.line,
                        s.col,
                        s.type_name,
                        s.reason
                    );
                }
                for mismatch in motion.frame_count_mismatches(&file) {
                    tracing::warn!("{mismatch}");
                }
                seq::inspect_json(&motion)
            }
            Err(err) => return Ok(rejected(&err)),
        },
    };
    // A closed or full stdout is an error to report, not a panic (as println! would make it).
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, &json)?;
    writeln!(out)?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn rejected(err: &dyn std::error::Error) -> ExitCode {
    eprintln!("{err}");
    ExitCode::from(2)
}
