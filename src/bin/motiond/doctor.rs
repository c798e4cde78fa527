//! `motiond doctor`: is this machine ready for the configured loop? The checks are the library's
//! (`motiond::doctor`); this parses the arguments and prints.

use std::path::PathBuf;
use std::process::ExitCode;

use motiond::config::{self, Config};
use motiond::doctor::{self, Level, MeasuredHere, Report, System};
use motiond::rt::Settings;
use motiond::trajectory::JointSet;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Configuration whose control.rate_hz and rt section describe the loop (default: the
    /// default configuration, else the defaults).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Length of each run of the wake-up test (as configured, then the machine's floor); 0
    /// skips it.
    #[arg(long, value_name = "S", default_value_t = 3.0, value_parser = parse_seconds)]
    seconds: f64,
}

fn parse_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if (0.0..=600.0).contains(&s) => Ok(s),
        _ => Err(format!("{text} is not a number of seconds in 0..=600")),
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let path = args.config.clone().or_else(|| {
        let default = config::default_path();
        default.is_file().then_some(default)
    });
    let settings = match &path {
        Some(path) => match Config::load(path) {
            Ok(c) => Settings::from_config(&c, &JointSet { dofs: Vec::new() }),
            Err(config::Error::Invalid(d)) => {
                for line in d.0 {
                    eprintln!("{line}");
                }
                return Ok(ExitCode::from(2));
            }
            Err(e) => {
                eprintln!("motiond doctor: {e}");
                return Ok(ExitCode::from(2));
            }
        },
        // The loop as `motiond play` runs it without a configuration.
        None => Settings {
            priority: Some(config::DEFAULT_PRIORITY),
            lock_memory: true,
            cpu_wakeup_latency_us: Some(0),
            ..Settings::default()
        },
    };
    let report = doctor::examine(&System, &settings, &MeasuredHere, args.seconds);
    if args.json {
        let mut value = serde_json::to_value(&report)?;
        value["config"] = serde_json::json!(path);
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        print!("{}", text(&report, path.as_deref()));
    }
    Ok(ExitCode::from(report.exit))
}

fn text(report: &Report, path: Option<&std::path::Path>) -> String {
    let t = &report.target;
    let mut out = format!(
        "motiond doctor: the loop of {} at {} Hz on {}, {}, PM QoS {}; a wake-up later than \
         {:.0} µs faults\n",
        path.map_or("the defaults (no configuration found)".to_string(), |p| p
            .display()
            .to_string()),
        t.rate_hz,
        t.cpu.map_or("any CPU".to_string(), |c| format!("CPU {c}")),
        t.priority
            .map_or("normal scheduling".to_string(), |p| format!(
                "SCHED_FIFO {p}"
            )),
        t.cpu_wakeup_latency_us
            .map_or("off".to_string(), |us| format!("{us} µs")),
        t.max_late_us,
    );
    for f in &report.findings {
        let level = match f.level {
            Level::Ok => "ok",
            Level::Note => "note",
            Level::Warn => "WARN",
            Level::Fail => "FAIL",
        };
        out.push_str(&format!("{level:<5} {:<13} {}\n", f.check, f.finding));
        if let Some(todo) = &f.todo {
            out.push_str(&format!("{:<19}→ {todo}\n", ""));
        }
    }
    out.push_str(&format!(
        "verdict: {} (exit {})\n",
        report.verdict, report.exit
    ));
    out
}
