//! What the loop commanded and measured, tick by tick: a preallocated ring the loop writes one
//! row per tick into without allocating or locking, and the control side drains into a growing
//! record ([`Trace::drain_into`]) — so a run of any length is kept whole as long as the reader
//! drains at least once per ring's worth of ticks (rows it could not keep are counted).
//!
//! The trace is the loop's own record, so it shows every path the drives saw — approach, motion,
//! pauses, stops, the fault's quick stop and the hold — on every backend alike.

use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};

use super::State;
use crate::trajectory::{JointSet, Setpoint};

/// Values stored per DOF and row: commanded position, velocity, acceleration; measured position.
const PER_DOF: usize = 4;

/// The ring between the loop (single writer) and one reader.
#[derive(Debug)]
pub struct Trace {
    dofs: usize,
    capacity: u64,
    /// Rows written and rows read since the start; `written - read` are waiting.
    written: AtomicU64,
    read: AtomicU64,
    dropped: AtomicU64,
    /// Per slot: the loop tick and the state after it (`tick << 8 | state`).
    heads: Box<[AtomicU64]>,
    /// Slot-major: per slot, per DOF, [`PER_DOF`] f64 bit patterns.
    values: Box<[AtomicU64]>,
}

/// One tick of the trace.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceRow {
    pub tick: u64,
    pub state: State,
    /// What the drives were sent this tick (the held setpoint when nothing new went out).
    pub commanded: Vec<Setpoint>,
    /// The positions the drives reported after it.
    pub measured: Vec<f64>,
}

impl Trace {
    /// A ring of `capacity` rows (at least 1) for `dofs` DOFs.
    pub fn new(dofs: usize, capacity: usize) -> Trace {
        let capacity = capacity.max(1);
        let atomics = |len: usize| (0..len).map(|_| AtomicU64::new(0)).collect();
        Trace {
            dofs,
            capacity: capacity as u64,
            written: AtomicU64::new(0),
            read: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            heads: atomics(capacity),
            values: atomics(capacity * PER_DOF * dofs),
        }
    }

    /// Called by the loop only. A full ring drops the row (counted), never waits.
    pub(crate) fn record(&self, tick: u64, state: State, commanded: &[Setpoint], measured: &[f64]) {
        let w = self.written.load(Ordering::Relaxed);
        if w - self.read.load(Ordering::Acquire) >= self.capacity {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let slot = (w % self.capacity) as usize;
        let n = self.dofs;
        if let Some(h) = self.heads.get(slot) {
            h.store(tick << 8 | state as u64, Ordering::Relaxed);
        }
        if let Some(row) = self
            .values
            .get(slot * PER_DOF * n..(slot + 1) * PER_DOF * n)
        {
            for (cell, (c, m)) in row
                .chunks_exact(PER_DOF)
                .zip(commanded.iter().zip(measured))
            {
                for (a, v) in cell
                    .iter()
                    .zip([c.position, c.velocity, c.acceleration, *m])
                {
                    a.store(v.to_bits(), Ordering::Relaxed);
                }
            }
        }
        // Release: a reader that sees the new count sees the row.
        self.written.store(w + 1, Ordering::Release);
    }

    /// Moves every waiting row into `rows` (one reader at a time).
    pub fn drain_into(&self, rows: &mut Vec<TraceRow>) {
        let w = self.written.load(Ordering::Acquire);
        let mut r = self.read.load(Ordering::Relaxed);
        let n = self.dofs;
        while r < w {
            let slot = (r % self.capacity) as usize;
            let head = self
                .heads
                .get(slot)
                .map_or(0, |h| h.load(Ordering::Relaxed));
            let cells = self
                .values
                .get(slot * PER_DOF * n..(slot + 1) * PER_DOF * n)
                .unwrap_or(&[]);
            let get =
                |k: usize| f64::from_bits(cells.get(k).map_or(0, |a| a.load(Ordering::Relaxed)));
            rows.push(TraceRow {
                tick: head >> 8,
                state: State::from_u8(head as u8),
                commanded: (0..n)
                    .map(|j| Setpoint {
                        position: get(PER_DOF * j),
                        velocity: get(PER_DOF * j + 1),
                        acceleration: get(PER_DOF * j + 2),
                    })
                    .collect(),
                measured: (0..n).map(|j| get(PER_DOF * j + 3)).collect(),
            });
            r += 1;
        }
        // Release: the loop may reuse the slots only after they were read.
        self.read.store(r, Ordering::Release);
    }

    /// Drops every waiting row unread (nobody wants them now; the ring stays free).
    pub fn discard(&self) {
        let w = self.written.load(Ordering::Acquire);
        self.read.store(w, Ordering::Release);
    }

    /// Rows the loop could not keep because the ring was full (the reader fell behind).
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// CSV of a drained trace: `tick,time,state`, then per DOF `<dof>.commanded,<dof>.velocity,
/// <dof>.acceleration,<dof>.measured`; ticks and times count from the first row. Numbers are
/// written in full (shortest round-trip form), so two runs that commanded the same stream give
/// byte-identical files.
pub fn write_csv(
    rows: &[TraceRow],
    joints: &JointSet,
    rate_hz: f64,
    out: impl Write,
) -> io::Result<()> {
    let mut csv = CsvWriter::new(out, joints, rate_hz)?;
    for r in rows {
        csv.row(r)?;
    }
    Ok(())
}

/// [`write_csv`] a row at a time, as the rows come: a trace of any length in constant memory.
#[derive(Debug)]
pub struct CsvWriter<W: Write> {
    out: W,
    rate_hz: f64,
    first: Option<u64>,
}

impl<W: Write> CsvWriter<W> {
    /// Writes the header for `joints`.
    pub fn new(mut out: W, joints: &JointSet, rate_hz: f64) -> io::Result<Self> {
        write!(out, "tick,time,state")?;
        for d in &joints.dofs {
            let name = &d.name;
            write!(
                out,
                ",{name}.commanded,{name}.velocity,{name}.acceleration,{name}.measured"
            )?;
        }
        writeln!(out)?;
        Ok(CsvWriter {
            out,
            rate_hz,
            first: None,
        })
    }

    pub fn row(&mut self, r: &TraceRow) -> io::Result<()> {
        let first = *self.first.get_or_insert(r.tick);
        let k = r.tick - first;
        let out = &mut self.out;
        write!(out, "{k},{},{}", k as f64 / self.rate_hz, r.state.as_str())?;
        for (c, m) in r.commanded.iter().zip(&r.measured) {
            write!(out, ",{},{},{},{m}", c.position, c.velocity, c.acceleration)?;
        }
        writeln!(out)
    }

    /// Flushes and hands the writer back.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sp(p: f64) -> Setpoint {
        Setpoint {
            position: p,
            velocity: 2.0 * p,
            acceleration: 3.0 * p,
        }
    }

    #[test]
    fn rows_come_out_in_order_and_a_full_ring_counts_what_it_drops() {
        let trace = Trace::new(2, 3);
        let mut rows = Vec::new();
        for k in 0..5u64 {
            let p = k as f64;
            trace.record(k, State::Playing, &[sp(p), sp(-p)], &[p + 0.5, -p]);
        }
        assert_eq!(trace.dropped(), 2);
        trace.drain_into(&mut rows);
        assert_eq!(rows.iter().map(|r| r.tick).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(rows[2].commanded[1], sp(-2.0));
        assert_eq!(rows[2].measured, vec![2.5, -2.0]);
        for k in 5..9u64 {
            trace.record(k, State::Holding, &[sp(0.0), sp(0.0)], &[0.0, 0.0]);
            trace.drain_into(&mut rows);
        }
        assert_eq!(rows.len(), 7);
        assert_eq!(rows[6].tick, 8);
        assert_eq!(rows[6].state, State::Holding);
        assert_eq!(trace.dropped(), 2);
    }
}
