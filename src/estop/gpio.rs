//! An E-stop on a line of a Linux GPIO character device (`/dev/gpiochipN`, uAPI v2).
//!
//! The line is requested once as an input, active low or high as configured (the kernel inverts
//! an active-low line, so "active" always means asserted), with the kernel's debounce when the
//! chip offers it — then reads are already debounced and the software [`Debounce`] passes levels
//! straight through; otherwise the software debounce does the work, counted in polls. Each poll
//! is one `GPIO_V2_LINE_GET_VALUES` ioctl, which never blocks.

use std::path::{Path, PathBuf};
use std::time::Duration;

use gpiocdev::line::Value;
use gpiocdev::{Chip, Request};

use super::{Debounce, EStopError, EStopInput};
use crate::config::{ActiveLevel, GpioLine};

/// The consumer name the line is requested under (`gpioinfo` shows it).
pub const CONSUMER: &str = "motiond-estop";

/// A requested GPIO line, polled without blocking.
#[derive(Debug)]
pub struct GpioInput {
    request: Request,
    offset: u32,
    debounce: Debounce,
    kernel_debounce: bool,
}

/// Why the E-stop line could not be opened; each message names the chip and line and says what
/// to do.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(
        "estop.gpio.chip {}: no such GPIO chip; `ls /dev/gpiochip*` or gpiodetect (Debian's gpiod) lists them",
        chip.display()
    )]
    NoChip { chip: PathBuf },
    #[error(
        "estop.gpio.chip {}: permission denied; give the daemon's user access to the chip: add it \
         to the group that owns the device (often `gpio`, e.g. with a udev rule \
         SUBSYSTEM==\"gpio\", KERNEL==\"gpiochip*\", GROUP=\"gpio\", MODE=\"0660\"), and under \
         systemd allow the device (DeviceAllow=char-gpiochip rw)",
        chip.display()
    )]
    Permission { chip: PathBuf },
    #[error("estop.gpio.chip {}: {why}; name a GPIO character device such as /dev/gpiochip0", chip.display())]
    NotAChip { chip: PathBuf, why: String },
    #[error(
        "estop.gpio.line {line}: {} ({label}) has lines 0 to {}; name one of them",
        chip.display(),
        lines.saturating_sub(1)
    )]
    NoSuchLine {
        chip: PathBuf,
        line: u32,
        lines: u32,
        label: String,
    },
    #[error(
        "estop.gpio.line {line} of {}: in use by {consumer:?}; free it (another process, a \
         device-tree driver or a sysfs export holds it) or wire the E-stop to another line",
        chip.display()
    )]
    Busy {
        chip: PathBuf,
        line: u32,
        consumer: String,
    },
    #[error("estop.gpio: line {line} of {}: {error}", chip.display())]
    Os {
        chip: PathBuf,
        line: u32,
        error: std::io::Error,
    },
}

impl OpenError {
    /// The configuration key the error is about.
    pub fn key(&self) -> &'static str {
        match self {
            OpenError::NoChip { .. }
            | OpenError::Permission { .. }
            | OpenError::NotAChip { .. } => "estop.gpio.chip",
            OpenError::NoSuchLine { .. } | OpenError::Busy { .. } | OpenError::Os { .. } => {
                "estop.gpio.line"
            }
        }
    }
}

impl GpioInput {
    /// Requests `line` as an input and reads it once: the first poll already reports its level.
    /// `debounce` is asked of the kernel; if the chip cannot debounce, the software debounce
    /// counts it in polls at `rate_hz`.
    pub fn open(line: &GpioLine, debounce: Duration, rate_hz: f64) -> Result<GpioInput, OpenError> {
        let chip_path = &line.chip;
        let chip = Chip::from_path(chip_path).map_err(|e| chip_error(chip_path, line.line, e))?;
        let info = chip
            .info()
            .map_err(|e| chip_error(chip_path, line.line, e))?;
        if line.line >= info.num_lines {
            return Err(OpenError::NoSuchLine {
                chip: chip_path.clone(),
                line: line.line,
                lines: info.num_lines,
                label: info.label,
            });
        }
        let line_info = chip
            .line_info(line.line)
            .map_err(|e| chip_error(chip_path, line.line, e))?;
        if line_info.used {
            return Err(OpenError::Busy {
                chip: chip_path.clone(),
                line: line.line,
                consumer: line_info.consumer,
            });
        }
        let request = |kernel_debounce: Option<Duration>| {
            let mut builder = Request::builder();
            builder
                .on_chip(chip_path)
                .with_consumer(CONSUMER)
                .with_line(line.line)
                .as_input();
            if line.active == ActiveLevel::Low {
                builder.as_active_low();
            }
            if let Some(period) = kernel_debounce {
                builder.with_debounce_period(period);
            }
            builder.request()
        };
        // A chip without debounce support (no interrupt for the line, an old kernel) refuses the
        // request; the line is then requested plainly and debounced in software.
        let (request, kernel_debounce) = match request((!debounce.is_zero()).then_some(debounce)) {
            Ok(r) => (r, !debounce.is_zero()),
            Err(with_debounce) if !debounce.is_zero() => match request(None) {
                Ok(r) => {
                    tracing::info!(
                        "{}: line {}: the kernel does not debounce it ({with_debounce}); debouncing \
                         in software",
                        chip_path.display(),
                        line.line
                    );
                    (r, false)
                }
                Err(e) => return Err(chip_error(chip_path, line.line, e)),
            },
            Err(e) => return Err(chip_error(chip_path, line.line, e)),
        };
        let polls = if kernel_debounce {
            0
        } else {
            Debounce::polls_for(debounce, rate_hz)
        };
        let initial = request
            .value(line.line)
            .map_err(|e| chip_error(chip_path, line.line, e))?;
        Ok(GpioInput {
            request,
            offset: line.line,
            debounce: Debounce::new(polls, initial == Value::Active),
            kernel_debounce,
        })
    }

    /// Whether the kernel debounces the line (else the software debounce does).
    pub fn kernel_debounce(&self) -> bool {
        self.kernel_debounce
    }
}

impl EStopInput for GpioInput {
    fn asserted(&mut self) -> Result<bool, EStopError> {
        match self.request.value(self.offset) {
            Ok(value) => Ok(self.debounce.update(value == Value::Active)),
            Err(e) => Err(EStopError::LineLost(errno(&e))),
        }
    }
}

/// The errno inside a gpiocdev error (EIO when it carries none).
fn errno(e: &gpiocdev::Error) -> i32 {
    match e {
        gpiocdev::Error::Os(errno) => errno.0,
        gpiocdev::Error::Uapi(_, gpiocdev_uapi::Error::Os(errno)) => errno.0,
        _ => libc::EIO,
    }
}

fn chip_error(chip: &Path, line: u32, e: gpiocdev::Error) -> OpenError {
    let chip = chip.to_path_buf();
    match &e {
        gpiocdev::Error::GpioChip(_, kind) => OpenError::NotAChip {
            chip,
            why: kind.to_string(),
        },
        _ => match errno(&e) {
            libc::ENOENT | libc::ENODEV => OpenError::NoChip { chip },
            libc::EACCES | libc::EPERM => OpenError::Permission { chip },
            libc::EBUSY => OpenError::Busy {
                chip,
                line,
                consumer: "another consumer".into(),
            },
            n => OpenError::Os {
                chip,
                line,
                error: std::io::Error::from_raw_os_error(n),
            },
        },
    }
}
