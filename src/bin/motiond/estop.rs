//! `motiond estop`: watches the E-stop input the way the loop does and prints each change — for
//! checking the wiring on the robot, and for the system tests (a gpio-sim line toggled in a VM).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use motiond::config::{self, ActiveLevel, Config, GpioLine};
use motiond::diag::Num;
use motiond::estop::{EStopInput, GpioInput};

use crate::robot::Failure;

#[derive(clap::Args)]
pub struct Args {
    /// Configuration whose `estop.gpio` names the line (default: $MOTIOND_CONFIG, else the
    /// installed or checkout configuration); not read when --chip is given.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// GPIO chip to watch instead of the configuration's, e.g. /dev/gpiochip0.
    #[arg(
        long,
        value_name = "DEVICE",
        requires = "line",
        conflicts_with = "config"
    )]
    chip: Option<PathBuf>,
    /// Line offset on --chip.
    #[arg(long, value_name = "N", requires = "chip")]
    line: Option<u32>,
    /// Level at which the E-stop is asserted, with --chip.
    #[arg(long, value_name = "LEVEL", value_parser = ["low", "high"], requires = "chip")]
    active: Option<String>,
    /// Debounce in milliseconds (default: the configuration's estop.debounce_ms, else 10).
    #[arg(long, value_name = "MS")]
    debounce_ms: Option<f64>,
    /// Polls a second (default: the configuration's control.rate_hz, else 1000).
    #[arg(long, value_name = "HZ", value_parser = crate::robot::parse_rate)]
    rate: Option<f64>,
    /// Exit 0 once the level has changed this many times.
    #[arg(long, value_name = "N")]
    changes: Option<u64>,
    /// Stop watching after this many seconds: exit 0, or 1 if --changes were not all seen.
    #[arg(long, value_name = "SECONDS")]
    timeout: Option<f64>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match watch(&args) {
        Ok(code) => Ok(code),
        Err(f) => f.exit(),
    }
}

fn watch(args: &Args) -> Result<ExitCode, Failure> {
    let invalid = |s: String| Failure::Invalid(vec![format!("motiond estop: {s}")]);
    let (line, debounce, rate) = match (&args.chip, args.line) {
        (Some(chip), Some(line)) => {
            let active = match args.active.as_deref() {
                Some("high") => ActiveLevel::High,
                Some(_) => ActiveLevel::Low,
                None => return Err(invalid("--active low|high is required with --chip".into())),
            };
            let line = GpioLine {
                chip: chip.clone(),
                line,
                active,
            };
            (line, None, None)
        }
        _ => {
            let path = args.config.clone().unwrap_or_else(config::default_path);
            let config = Config::load(&path)?;
            let Some(gpio) = config.estop.as_ref().and_then(|e| e.gpio.clone()) else {
                return Err(invalid(format!(
                    "{} has no estop.gpio line to watch; add one or give --chip, --line and --active",
                    path.display()
                )));
            };
            let debounce = config.estop.as_ref().map(|e| e.debounce);
            (gpio, debounce, Some(config.control.rate_hz))
        }
    };
    let debounce = match args.debounce_ms {
        Some(ms) if ms.is_finite() && (0.0..=config::MAX_ESTOP_DEBOUNCE_MS).contains(&ms) => {
            Duration::from_secs_f64(ms / 1000.0)
        }
        Some(ms) => {
            return Err(invalid(format!(
                "--debounce-ms {} is outside 0..={}",
                Num(ms),
                config::MAX_ESTOP_DEBOUNCE_MS
            )));
        }
        None => debounce.unwrap_or(Duration::from_millis(10)),
    };
    let rate = args.rate.or(rate).unwrap_or(1000.0);
    if let Some(t) = args.timeout
        && !(t.is_finite() && t > 0.0)
    {
        return Err(invalid(format!(
            "--timeout {} is not a positive number of seconds",
            Num(t)
        )));
    }
    let mut input = GpioInput::open(&line, debounce, rate)
        .map_err(|e| Failure::Invalid(vec![format!("motiond estop: {e}")]))?;
    let start = Instant::now();
    let period = Duration::from_secs_f64(1.0 / rate);
    let mut level = input.asserted().map_err(|e| Failure::Runtime(e.into()))?;
    println!(
        "{:>9.3} s  {}  ({} line {}, active {}, debounce {} ms {}, {} polls/s)",
        0.0,
        word(level),
        line.chip.display(),
        line.line,
        match line.active {
            ActiveLevel::Low => "low",
            ActiveLevel::High => "high",
        },
        debounce.as_secs_f64() * 1000.0,
        if input.kernel_debounce() {
            "by the kernel"
        } else {
            "in software"
        },
        rate
    );
    let mut seen = 0u64;
    let mut next = start;
    loop {
        if args.changes.is_some_and(|n| seen >= n) {
            return Ok(ExitCode::SUCCESS);
        }
        if let Some(t) = args.timeout
            && start.elapsed().as_secs_f64() >= t
        {
            if let Some(n) = args.changes {
                eprintln!("motiond estop: {seen} of {n} changes within {t} s");
                return Ok(ExitCode::from(1));
            }
            return Ok(ExitCode::SUCCESS);
        }
        next += period;
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        match input.asserted() {
            Ok(now) if now != level => {
                level = now;
                seen += 1;
                println!("{:>9.3} s  {}", start.elapsed().as_secs_f64(), word(level));
            }
            Ok(_) => {}
            Err(e) => {
                println!("{:>9.3} s  line lost: {e}", start.elapsed().as_secs_f64());
                return Ok(ExitCode::from(1));
            }
        }
    }
}

fn word(asserted: bool) -> &'static str {
    if asserted { "asserted" } else { "released" }
}
