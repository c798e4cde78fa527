//! `--trace OUT.csv|OUT.mcap` (play, rehearse): the loop's rows written as they come, as CSV or,
//! for a name ending in `.mcap`, as the flight recorder's MCAP with the loop's events — a trace of
//! any length in constant memory.

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;

use motiond::recorder::{events, mcap};
use motiond::rt::{TraceCsv, TraceRow};
use motiond::trajectory::JointSet;

pub enum TraceOut {
    Csv(TraceCsv<BufWriter<File>>),
    Mcap {
        stream: Box<mcap::Stream<BufWriter<File>>>,
        joints: JointSet,
        /// The row before, whose changes to the next one are the events.
        before: Option<TraceRow>,
    },
}

impl TraceOut {
    /// Creates `path`; `epoch_ns` is CLOCK_REALTIME at loop tick 0 (the MCAP's log times).
    pub fn create(
        path: &Path,
        joints: &JointSet,
        rate_hz: f64,
        epoch_ns: u64,
    ) -> anyhow::Result<Self> {
        let file = File::create(path)
            .map_err(|e| anyhow::anyhow!(motiond::diag::output_failure(path, &e)))?;
        let out = BufWriter::new(file);
        if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("mcap"))
        {
            let meta = mcap::Meta {
                joints,
                rate_hz,
                epoch_ns,
                reason: "trace",
            };
            return Ok(TraceOut::Mcap {
                stream: Box::new(mcap::Stream::new(out, &meta)?),
                joints: joints.clone(),
                before: None,
            });
        }
        Ok(TraceOut::Csv(TraceCsv::new(out, joints, rate_hz)?))
    }

    pub fn row(&mut self, row: &TraceRow) -> anyhow::Result<()> {
        match self {
            TraceOut::Csv(csv) => Ok(csv.row(row)?),
            TraceOut::Mcap {
                stream,
                joints,
                before,
            } => {
                stream.row(row)?;
                // The first row's state, then what changed from the row before.
                let (pair, skip) = match before.take() {
                    Some(b) => (vec![b, row.clone()], 1),
                    None => (vec![row.clone()], 0),
                };
                for e in events::from_rows(&pair, joints).iter().skip(skip) {
                    stream.event(e)?;
                }
                *before = pair.into_iter().last();
                Ok(())
            }
        }
    }

    /// Completes the file (the CSV flushed; the MCAP's summary and index written).
    pub fn finish(self) -> anyhow::Result<()> {
        match self {
            TraceOut::Csv(csv) => {
                csv.finish()?;
            }
            TraceOut::Mcap { stream, .. } => stream.finish()?,
        }
        Ok(())
    }
}
