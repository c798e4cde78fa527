//! `motiond inspect model|skel|urdf|sdf|xode|seq FILE`: the model or motion as a table for
//! people (on a terminal, or with `--table`), or as JSON for scripts (piped, or with `--json`;
//! ../shared/docs/inspect-json.md).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use motiond::motion::seq;
use motiond::robot::{self, skel};

#[derive(clap::Subcommand)]
pub enum Target {
    /// A robot model: SKEL, URDF, SDF or XODE, chosen by the root element; its joints, DOFs and
    /// limits.
    #[command(visible_aliases = ["urdf", "sdf", "xode"])]
    Model {
        file: PathBuf,
        /// URDF: weld the root link to the world instead of DART's floating `rootJoint`
        /// (as config robot.fixed_base).
        #[arg(long)]
        fixed_base: bool,
        #[command(flatten)]
        output: Output,
    },
    /// A DART SKEL robot model (read by the SKEL reader alone).
    Skel {
        file: PathBuf,
        #[command(flatten)]
        output: Output,
    },
    /// A Choreonoid .seq body motion.
    Seq {
        file: PathBuf,
        #[command(flatten)]
        output: Output,
    },
}

/// Table or JSON.
#[derive(clap::Args, Clone, Copy)]
pub struct Output {
    /// Print JSON (../shared/docs/inspect-json.md), as when stdout is not a terminal.
    #[arg(long, conflicts_with = "table")]
    json: bool,
    /// Print the table for people, also when stdout is not a terminal.
    #[arg(long)]
    table: bool,
}

impl Output {
    fn json(self) -> bool {
        self.json || (!self.table && !std::io::stdout().is_terminal())
    }
}

/// Exit 0 with the table or JSON on stdout, or exit 2 with one `FILE:LINE:COL: message` line per
/// problem on stderr and nothing on stdout.
pub fn run(target: Target) -> anyhow::Result<ExitCode> {
    let (json, output, people): (_, _, fn(&serde_json::Value) -> String) = match target {
        Target::Model {
            file,
            fixed_base,
            output,
        } => {
            match robot::load(
                &file,
                &robot::Options {
                    fixed_base,
                    ..Default::default()
                },
            ) {
                Ok(world) => (skel::inspect_json(&world), output, model_table),
                Err(err) => return Ok(rejected(&err)),
            }
        }
        Target::Skel { file, output } => match skel::load(&file) {
            Ok(world) => (skel::inspect_json(&world), output, model_table),
            Err(err) => return Ok(rejected(&err)),
        },
        Target::Seq { file, output } => match seq::load(&file) {
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
                (seq::inspect_json(&motion), output, seq_table)
            }
            Err(err) => return Ok(rejected(&err)),
        },
    };
    // A closed or full stdout is an error to report, not a panic (as println! would make it).
    let mut out = std::io::stdout().lock();
    if output.json() {
        serde_json::to_writer_pretty(&mut out, &json)?;
        writeln!(out)?;
    } else {
        write!(out, "{}", people(&json))?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// Columns padded to their widest cell, two spaces apart.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut text = String::from(" ");
        for (cell, w) in cells.iter().zip(&widths) {
            text.push_str(&format!(" {cell:<w$} "));
        }
        format!("{}\n", text.trim_end())
    };
    let mut text = line(header.to_vec());
    for row in rows {
        text.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    text
}

/// `[lo, hi]` of the JSON as `lo … hi`, `—` for unbounded sides (`null`).
fn range(v: &serde_json::Value) -> String {
    let side = |x: &serde_json::Value| x.as_f64().map_or("—".to_string(), |x| format!("{x}"));
    match v.as_array().map(Vec::as_slice) {
        Some([lo, hi]) if lo.is_null() && hi.is_null() => "none".into(),
        Some([lo, hi]) => format!("{} … {}", side(lo), side(hi)),
        _ => "?".into(),
    }
}

/// A model for people: per skeleton its joints, then its DOFs with their limits (rad for
/// turning joints, m for sliding ones).
fn model_table(json: &serde_json::Value) -> String {
    let mut text = String::new();
    for s in json["skeletons"].as_array().map_or(&[][..], Vec::as_slice) {
        let joints = s["joints"].as_array().map_or(&[][..], Vec::as_slice);
        let dofs = s["dofs"].as_array().map_or(&[][..], Vec::as_slice);
        text.push_str(&format!(
            "{}: {} joints, {} DOFs\n",
            s["name"].as_str().unwrap_or("?"),
            joints.len(),
            dofs.len()
        ));
        let joint_of = |name: &str| joints.iter().find(|j| j["name"] == name);
        let rows: Vec<Vec<String>> = dofs
            .iter()
            .map(|d| {
                let joint = d["joint"].as_str().unwrap_or("?");
                let j = joint_of(joint);
                let str_of = |v: Option<&serde_json::Value>, key: &str| {
                    v.and_then(|v| v[key].as_str()).unwrap_or("?").to_string()
                };
                vec![
                    d["name"].as_str().unwrap_or("?").to_string(),
                    joint.to_string(),
                    str_of(j, "type"),
                    str_of(j, "actuator"),
                    range(&d["position"]),
                    range(&d["velocity"]),
                    range(&d["acceleration"]),
                    range(&d["effort"]),
                ]
            })
            .collect();
        text.push_str(&table(
            &[
                "DOF",
                "joint",
                "type",
                "actuator",
                "position (rad|m)",
                "velocity (/s)",
                "acceleration (/s²)",
                "effort (N·m|N)",
            ],
            &rows,
        ));
    }
    text.push_str("(JSON for scripts: --json, or pipe the output)\n");
    text
}

/// A motion for people: its components, frames and times.
fn seq_table(json: &serde_json::Value) -> String {
    let mut text = format!(
        "format version {}, {} Hz\n",
        json["format_version"],
        json["frame_rate"]
            .as_f64()
            .map_or("no frame rate".into(), |r| r.to_string())
    );
    let rows: Vec<Vec<String>> = json["components"]
        .as_array()
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .map(|c| {
            let time = |k: &str| c[k].as_f64().map_or("?".into(), |t| format!("{t}"));
            vec![
                c["content"].as_str().unwrap_or("?").to_string(),
                c["type"].as_str().unwrap_or("?").to_string(),
                c["num_parts"].to_string(),
                c["rows"].to_string(),
                format!("{} … {} s", time("first_time"), time("last_time")),
                if c["timed"] == true {
                    "timed"
                } else {
                    "fixed rate"
                }
                .to_string(),
            ]
        })
        .collect();
    text.push_str(&table(
        &["content", "type", "parts", "rows", "time", "timing"],
        &rows,
    ));
    for s in json["skipped"].as_array().map_or(&[][..], Vec::as_slice) {
        text.push_str(&format!(
            "skipped {}: {}\n",
            s["type"].as_str().unwrap_or("?"),
            s["reason"].as_str().unwrap_or("?")
        ));
    }
    text.push_str("(JSON for scripts: --json, or pipe the output)\n");
    text
}

fn rejected(err: &dyn std::error::Error) -> ExitCode {
    eprintln!("{err}");
    ExitCode::from(2)
}
