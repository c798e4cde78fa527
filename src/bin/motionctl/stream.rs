//! `motionctl stream FILE.csv --rate HZ`: a CSV of joint positions streamed in real time, a chunk
//! of rows at a time, as a policy would send its actions.

use std::path::Path;
use std::time::{Duration, Instant};

use motiond::daemon::protocol::{ErrorCode, MAX_CHUNK_ROWS, MAX_STREAM_HORIZON_S, Request};
use motiond::daemon::reply::{ChunkReply, StreamOpenReply, StreamReport};
use motiond::diag::Num;

use crate::{Client, Failure, out, refusal};

/// A CSV of positions: a header of joint names, then one row of numbers a line.
pub struct Rows {
    pub joints: Vec<String>,
    pub rows: Vec<Vec<f64>>,
}

/// Reads `path`: blank lines and lines starting with `#` are skipped; every row has one number
/// per header column. Errors name FILE:LINE:COL.
pub fn read_csv(path: &Path) -> Result<Rows, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut joints: Option<Vec<String>> = None;
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let Some(header) = &joints else {
            let names: Vec<String> = trimmed.split(',').map(|s| s.trim().to_string()).collect();
            if let Some(c) = names.iter().position(String::is_empty) {
                return Err(format!(
                    "{}:{}:1: header column {} is empty; the header names the joints, e.g. `shoulder,elbow`",
                    path.display(),
                    i + 1,
                    c + 1
                ));
            }
            joints = Some(names);
            continue;
        };
        let mut row = Vec::with_capacity(header.len());
        let mut col = 1;
        for field in line.split(',') {
            let value: f64 = field.trim().parse().ok().filter(|v: &f64| v.is_finite()).ok_or_else(|| {
                format!(
                    "{}:{}:{col}: {:?} is not a finite number; every row holds one position per joint",
                    path.display(),
                    i + 1,
                    field.trim()
                )
            })?;
            row.push(value);
            col += field.len() + 1;
        }
        if row.len() != header.len() {
            return Err(format!(
                "{}:{}:1: {} values for the header's {} joints ({})",
                path.display(),
                i + 1,
                row.len(),
                header.len(),
                header.join(", ")
            ));
        }
        rows.push(row);
    }
    match joints {
        Some(joints) if !rows.is_empty() => Ok(Rows { joints, rows }),
        _ => Err(format!(
            "{}: no rows; expected a header of joint names and at least one row of positions",
            path.display()
        )),
    }
}

/// What the daemon did with the chunks.
#[derive(Default)]
struct Tally {
    accepted: u64,
    late: u64,
    refused: u64,
    resumed: u64,
}

/// How to stream.
pub struct Options<'a> {
    pub rate_hz: f64,
    /// Rows a request.
    pub chunk: usize,
    pub horizon_s: Option<f64>,
    pub group: Option<&'a str>,
    /// Print each reply line as received.
    pub json: bool,
}

impl Options<'_> {
    /// The rate and the chunk size within what the daemon takes.
    pub fn check(&self) -> Result<(), Failure> {
        if !(self.rate_hz.is_finite() && (1.0..=1000.0).contains(&self.rate_hz)) {
            return Err(Failure::Invalid(format!(
                "--rate {}: expected 1 to 1000 rows per second",
                Num(self.rate_hz)
            )));
        }
        if let Some(h) = self.horizon_s
            && !(h.is_finite() && (0.0..=MAX_STREAM_HORIZON_S).contains(&h))
        {
            return Err(Failure::Invalid(format!(
                "--horizon {}: expected 0 to {MAX_STREAM_HORIZON_S} seconds",
                Num(h)
            )));
        }
        if !(1..=MAX_CHUNK_ROWS).contains(&self.chunk) {
            return Err(Failure::Invalid(format!(
                "--chunk {}: expected 1 to {MAX_CHUNK_ROWS} rows",
                self.chunk
            )));
        }
        Ok(())
    }
}

/// Streams `csv` at `rate_hz`, `chunk` rows a request, each sent when its first row is due.
pub fn run(client: &mut Client, csv: &Rows, options: &Options) -> Result<(), Failure> {
    let Options {
        rate_hz,
        chunk,
        horizon_s,
        group,
        json,
    } = *options;
    let _: StreamOpenReply = client.call(
        &Request::StreamOpen {
            group: group.map(str::to_string),
            joints: Some(csv.joints.clone()),
            rate_hz: Some(rate_hz),
            horizon_s,
        },
        json,
    )?;
    let started = Instant::now();
    let mut tally = Tally::default();
    for (seq, rows) in csv.rows.chunks(chunk).enumerate() {
        let first = seq * chunk;
        let t0 = first as f64 / rate_hz;
        // Sent when its first row is due: the daemon's horizon absorbs the delay.
        let due = started + Duration::from_secs_f64(t0);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let (line, reply) = client.request::<ChunkReply>(&Request::StreamChunk {
            group: group.map(str::to_string),
            seq: seq as u64,
            positions: rows.to_vec(),
            t0: Some(t0),
            dt: None,
        })?;
        if json {
            out!("{line}");
        }
        let error = match reply {
            Ok(chunk) => {
                tally.accepted += 1;
                if chunk.resumed {
                    tally.resumed += 1;
                }
                continue;
            }
            Err(error) => error,
        };
        match error.code {
            ErrorCode::Late => tally.late += 1,
            ErrorCode::InvalidMotion => tally.refused += 1,
            // The stream ended (a stop, a fault) or the daemon cannot go on.
            _ => return Err(refusal(error)),
        }
        if !json {
            eprintln!(
                "motionctl: rows {first}..{}: {}: {}",
                first + rows.len(),
                error.code.as_str(),
                error.message
            );
        }
    }
    let _: StreamReport = client.call(
        &Request::StreamClose {
            group: group.map(str::to_string),
        },
        json,
    )?;
    if !json {
        out!(
            "streamed {} rows in {} chunks at {rate_hz} Hz: {} accepted, {} late, {} refused; resumed after starving {} times",
            csv.rows.len(),
            csv.rows.len().div_ceil(chunk),
            tally.accepted,
            tally.late,
            tally.refused,
            tally.resumed
        );
    }
    if tally.accepted == 0 {
        return Err(Failure::Refused("no chunk was accepted".into()));
    }
    Ok(())
}
