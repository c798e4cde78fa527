//! The flight recorder's ring: what the loop commanded and measured, tick by tick. The loop writes
//! one row per tick into preallocated slots without allocating, locking or waiting, overwriting
//! the oldest row; readers copy rows out whenever they like and never hold the loop up.
//!
//! Two kinds of reader share it: one that drains every row in order ([`Trace::drain_into`]:
//! `motiond play --trace`, teach-in) — rows the loop overwrote before it came are counted as
//! lost — and any number that copy the newest rows ([`Trace::rows_from`], [`Trace::latest`]:
//! the flight recorder's dumps). Each slot is a sequence lock: a row being overwritten while a
//! reader copies it is dropped by that reader, never returned torn.
//!
//! The trace is the loop's own record, so it shows every path the drives saw — approach, motion,
//! pauses, stops, the fault's quick stop and the hold — on every backend alike.

use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering, fence};

use super::EStop;
use super::State;
use super::status::{pack_estop, pack_fault, unpack_estop, unpack_fault};
use crate::backend::{BackendError, Feedback};
use crate::trajectory::{JointSet, Setpoint};

/// Words per row before the DOFs: sequence, tick and state, lateness, execution time, guard
/// count, fault, E-stop.
const HEAD: usize = 7;
/// Words per DOF and row: commanded position, velocity, acceleration; measured position,
/// velocity, effort; the drive's status and error words; whether its feedback was fresh.
const PER_DOF: usize = 9;

/// The ring between the loop (single writer) and its readers.
#[derive(Debug)]
pub struct Trace {
    dofs: usize,
    capacity: u64,
    /// Rows written since the start.
    written: AtomicU64,
    /// The draining reader's next row, and the rows it lost to the loop lapping it.
    read: AtomicU64,
    dropped: AtomicU64,
    /// Slot-major: per slot [`HEAD`] words, then per DOF [`PER_DOF`] words (f64 bit patterns
    /// or packed integers).
    words: Box<[AtomicU64]>,
}

/// What the loop knew at the end of one tick, besides the per-DOF values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RowHead {
    pub tick: u64,
    /// The state after the tick.
    pub state: State,
    /// How late the loop woke up for this tick (actual wake-up − deadline), ns.
    pub late_ns: u64,
    /// Time from the wake-up to the end of the tick's work, ns.
    pub exec_ns: u64,
    /// Setpoints the loop's guard intervened on since the loop started.
    pub guard: u64,
    /// The fault the loop is in, if any.
    pub fault: Option<BackendError>,
    pub estop: EStop,
}

/// One tick of the trace.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceRow {
    pub tick: u64,
    pub state: State,
    pub late_ns: u64,
    pub exec_ns: u64,
    pub guard: u64,
    pub fault: Option<BackendError>,
    pub estop: EStop,
    /// What the drives were sent this tick (the held setpoint when nothing new went out).
    pub commanded: Vec<Setpoint>,
    /// The positions the drives reported after it (the last valid one for a DOF whose feedback
    /// is late).
    pub measured: Vec<f64>,
    /// What each drive reported this tick as it came: velocity, effort, its status and error
    /// words, whether it was fresh (`position` is [`measured`](Self::measured)).
    pub feedback: Vec<Feedback>,
}

impl TraceRow {
    /// Commanded − measured position of DOF `j`: the following error, signed.
    pub fn following_error(&self, j: usize) -> f64 {
        match (self.commanded.get(j), self.measured.get(j)) {
            (Some(c), Some(m)) => c.position - m,
            _ => 0.0,
        }
    }
}

impl Trace {
    /// A ring of `capacity` rows (at least 1) for `dofs` DOFs.
    pub fn new(dofs: usize, capacity: usize) -> Trace {
        let capacity = capacity.max(1);
        Trace {
            dofs,
            capacity: capacity as u64,
            written: AtomicU64::new(0),
            read: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            words: (0..capacity * (HEAD + PER_DOF * dofs))
                .map(|_| AtomicU64::new(0))
                .collect(),
        }
    }

    /// Rows the ring holds.
    pub fn capacity(&self) -> usize {
        self.capacity as usize
    }

    /// Rows written since the loop started (the next row's number).
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Acquire)
    }

    fn slot(&self, row: u64) -> &[AtomicU64] {
        let width = HEAD + PER_DOF * self.dofs;
        let at = (row % self.capacity) as usize * width;
        self.words.get(at..at + width).unwrap_or(&[])
    }

    /// Called by the loop only: overwrites the oldest row, never waits.
    pub(crate) fn record(
        &self,
        head: &RowHead,
        commanded: &[Setpoint],
        measured: &[f64],
        feedback: &[Feedback],
    ) {
        let w = self.written.load(Ordering::Relaxed);
        let slot = self.slot(w);
        let Some((seq, rest)) = slot.split_first() else {
            return;
        };
        // Sequence lock: 0 while the slot is rewritten; a reader that copied any of the new
        // words sees that (its acquire fence pairs with this release fence) and drops the row.
        seq.store(0, Ordering::Relaxed);
        fence(Ordering::Release);
        let (heads, dofs) = rest.split_at(HEAD - 1);
        for (a, v) in heads.iter().zip([
            head.tick << 8 | head.state as u64,
            head.late_ns,
            head.exec_ns,
            head.guard,
            pack_fault(head.fault),
            pack_estop(head.estop),
        ]) {
            a.store(v, Ordering::Relaxed);
        }
        for (cells, ((c, m), f)) in dofs
            .chunks_exact(PER_DOF)
            .zip(commanded.iter().zip(measured).zip(feedback))
        {
            for (a, v) in cells.iter().zip([
                c.position.to_bits(),
                c.velocity.to_bits(),
                c.acceleration.to_bits(),
                m.to_bits(),
                f.velocity.to_bits(),
                f.effort.to_bits(),
                u64::from(f.status),
                u64::from(f.error),
                u64::from(f.valid),
            ]) {
                a.store(v, Ordering::Relaxed);
            }
        }
        seq.store(w + 1, Ordering::Release);
        self.written.store(w + 1, Ordering::Release);
    }

    /// Row `row` as it is in its slot, or `None` when the loop overwrote it (or is doing so).
    fn copy(&self, row: u64) -> Option<TraceRow> {
        let slot = self.slot(row);
        let (seq, rest) = slot.split_first()?;
        if seq.load(Ordering::Acquire) != row + 1 {
            return None;
        }
        let word = |i: usize| rest.get(i).map_or(0, |a| a.load(Ordering::Relaxed));
        let float = |i: usize| f64::from_bits(word(i));
        let n = self.dofs;
        let at = |j: usize, k: usize| HEAD - 1 + PER_DOF * j + k;
        let tick_state = word(0);
        let copied = TraceRow {
            tick: tick_state >> 8,
            state: State::from_u8(tick_state as u8),
            late_ns: word(1),
            exec_ns: word(2),
            guard: word(3),
            fault: unpack_fault(word(4)),
            estop: unpack_estop(word(5)),
            commanded: (0..n)
                .map(|j| Setpoint {
                    position: float(at(j, 0)),
                    velocity: float(at(j, 1)),
                    acceleration: float(at(j, 2)),
                })
                .collect(),
            measured: (0..n).map(|j| float(at(j, 3))).collect(),
            feedback: (0..n)
                .map(|j| Feedback {
                    position: float(at(j, 3)),
                    velocity: float(at(j, 4)),
                    effort: float(at(j, 5)),
                    status: word(at(j, 6)) as u32,
                    error: word(at(j, 7)) as u32,
                    valid: word(at(j, 8)) != 0,
                })
                .collect(),
        };
        fence(Ordering::Acquire);
        (seq.load(Ordering::Relaxed) == row + 1).then_some(copied)
    }

    /// Copies rows `from..` (those still in the ring) into `rows`, oldest first. Returns the
    /// number of the next row to ask for and how many of the asked rows were already
    /// overwritten.
    pub fn rows_from(&self, from: u64, rows: &mut Vec<TraceRow>) -> (u64, u64) {
        let w = self.written.load(Ordering::Acquire);
        let start = from.max(w.saturating_sub(self.capacity));
        let mut lost = start.saturating_sub(from);
        for r in start..w {
            match self.copy(r) {
                Some(row) => rows.push(row),
                None => lost += 1,
            }
        }
        (w.max(from), lost)
    }

    /// The newest `n` rows still in the ring, oldest first.
    pub fn latest(&self, n: usize) -> Vec<TraceRow> {
        let mut rows = Vec::new();
        self.rows_from(self.written().saturating_sub(n as u64), &mut rows);
        rows
    }

    /// Moves every row since the last drain into `rows` (one draining reader at a time); rows
    /// the loop overwrote first are counted in [`dropped`](Self::dropped). Returns how many
    /// this drain lost: they came before the rows it moved.
    pub fn drain_into(&self, rows: &mut Vec<TraceRow>) -> u64 {
        let from = self.read.load(Ordering::Relaxed);
        let (next, lost) = self.rows_from(from, rows);
        if lost > 0 {
            self.dropped.fetch_add(lost, Ordering::Relaxed);
        }
        self.read.store(next, Ordering::Relaxed);
        lost
    }

    /// Skips every row written so far (the draining reader does not want them).
    pub fn discard(&self) {
        self.read.store(self.written(), Ordering::Relaxed);
    }

    /// Rows the draining reader lost because the loop overwrote them before it came.
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

    fn head(tick: u64, state: State) -> RowHead {
        RowHead {
            tick,
            state,
            late_ns: tick * 10,
            exec_ns: 7,
            guard: 0,
            fault: None,
            estop: EStop::default(),
        }
    }

    fn fb(v: f64) -> Feedback {
        Feedback {
            position: 0.0,
            velocity: v,
            effort: -v,
            status: 0x27,
            error: 0,
            valid: true,
        }
    }

    #[test]
    fn the_ring_keeps_the_newest_rows_and_a_lapped_drain_counts_what_it_lost() {
        let trace = Trace::new(2, 3);
        let mut rows = Vec::new();
        for k in 0..5u64 {
            let p = k as f64;
            trace.record(
                &head(k, State::Playing),
                &[sp(p), sp(-p)],
                &[p + 0.5, -p],
                &[fb(p), fb(-p)],
            );
        }
        // The draining reader came late: rows 0 and 1 were overwritten.
        trace.drain_into(&mut rows);
        assert_eq!(trace.dropped(), 2);
        assert_eq!(rows.iter().map(|r| r.tick).collect::<Vec<_>>(), [2, 3, 4]);
        assert_eq!(rows[0].commanded[1], sp(-2.0));
        assert_eq!(rows[0].measured, vec![2.5, -2.0]);
        assert_eq!(rows[0].late_ns, 20);
        assert_eq!(rows[0].feedback[1].velocity, -2.0);
        assert_eq!(rows[0].feedback[1].status, 0x27);
        for k in 5..9u64 {
            trace.record(
                &head(k, State::Holding),
                &[sp(0.0), sp(0.0)],
                &[0.0, 0.0],
                &[fb(0.0), fb(0.0)],
            );
            trace.drain_into(&mut rows);
        }
        assert_eq!(rows.len(), 7);
        assert_eq!(rows[6].tick, 8);
        assert_eq!(rows[6].state, State::Holding);
        assert_eq!(trace.dropped(), 2);
        // A snapshot reader sees the newest rows without moving the drain.
        let latest = trace.latest(10);
        assert_eq!(latest.iter().map(|r| r.tick).collect::<Vec<_>>(), [6, 7, 8]);
        assert_eq!(trace.latest(1)[0].tick, 8);
    }

    #[test]
    fn faults_and_the_estop_come_back_as_recorded() {
        let trace = Trace::new(1, 4);
        let fault = BackendError {
            kind: crate::backend::FaultKind::Stall,
            dof: Some(0),
            code: 3,
        };
        let estop = EStop {
            input: Some(true),
            cause: Some(super::super::EStopCause::Input),
            reenable: true,
        };
        trace.record(
            &RowHead {
                fault: Some(fault),
                estop,
                guard: 4,
                ..head(9, State::Fault)
            },
            &[sp(1.0)],
            &[1.0],
            &[fb(0.0)],
        );
        let row = &trace.latest(1)[0];
        assert_eq!(
            (row.fault, row.estop, row.guard, row.state),
            (Some(fault), estop, 4, State::Fault)
        );
    }
}
