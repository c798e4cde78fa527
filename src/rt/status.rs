//! The snapshot the loop publishes every tick, read by the control side without a lock.
//!
//! A sequence lock over atomics: the loop (the only writer) makes the sequence odd, stores the
//! fields, makes it even again; a reader retries until it has read the fields between two equal
//! even sequence values. The writer never waits for a reader.

use std::sync::atomic::{AtomicU8, AtomicU64, Ordering, fence};

use super::path::{Path, Segment};
use super::stats::Histogram;
use super::table::{PHASES, Phase};
use super::{Ack, EStop, EStopCause, Refusal, State};
use crate::backend::{BackendError, FaultKind};

const NONE: u64 = u64::MAX;

/// Everything the loop shares with the control side.
#[derive(Debug)]
pub(crate) struct Shared {
    seq: AtomicU64,
    state: AtomicU8,
    phase: AtomicU8,
    moving: AtomicU8,
    motion_id: AtomicU64,
    tick: AtomicU64,
    progress: AtomicU64,
    time_s: AtomicU64,
    limit_violations: AtomicU64,
    refused: AtomicU64,
    fault: AtomicU64,
    estop: AtomicU64,
    first_command_tick: AtomicU64,
    first_command_ns: AtomicU64,
    motion_start_tick: AtomicU64,
    slots: Box<[SlotCells]>,
    commanded: Box<[AtomicU64]>,
    measured: Box<[AtomicU64]>,
    tracking: Box<[AtomicU64]>,
    /// Outside the sequence lock: advanced once per completed tick.
    pub heartbeat: AtomicU64,
    /// Outside the sequence lock: counted by the period logic after the tick.
    pub overruns: AtomicU64,
    pub latency: Histogram,
    pub exec: Histogram,
    /// Outside the sequence lock: per slot the acknowledged command's sequence number and its
    /// packed [`Ack`], the sequence number written last (see [`Shared::ack`]).
    acks: Box<[(AtomicU64, AtomicU64)]>,
}

/// The per-tick values the loop publishes (the joint slices are passed separately).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Published {
    pub state: State,
    pub phase: Phase,
    pub motion_id: Option<u32>,
    pub tick: u64,
    pub progress: f64,
    pub time_s: f64,
    pub limit_violations: u64,
    pub refused: u64,
    pub fault: Option<BackendError>,
    pub estop: EStop,
    pub first_command: Option<(u64, u64)>,
    pub motion_start_tick: Option<u64>,
    pub moving: bool,
}

/// One slot's per-tick values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct SlotPublished {
    pub state: State,
    pub motion_id: Option<u32>,
    pub progress: f64,
    pub time_s: f64,
    pub motion_start_tick: Option<u64>,
    pub first_command: Option<(u64, u64)>,
    pub path: Option<Path>,
    pub ran: u64,
}

impl Default for SlotPublished {
    fn default() -> Self {
        SlotPublished {
            state: State::Idle,
            motion_id: None,
            progress: 0.0,
            time_s: 0.0,
            motion_start_tick: None,
            first_command: None,
            path: None,
            ran: 0,
        }
    }
}

/// A slot's values as atomics: state, motion id, progress, time, motion start, first command
/// (tick, ns), and the path (segment, wait tick, base, frac, speed, target, laps left, wait-until;
/// `NONE` in the segment cell when there is none).
#[derive(Debug)]
struct SlotCells([AtomicU64; 16]);

const SEG_APPROACH: u64 = 0;
const SEG_WAIT: u64 = 1;
const SEG_MOTION: u64 = 2;
const FRESH: u64 = 1 << 8;

impl SlotCells {
    fn new() -> SlotCells {
        SlotCells(std::array::from_fn(|_| AtomicU64::new(NONE)))
    }

    fn store(&self, p: &SlotPublished) {
        use Ordering::Relaxed;
        let c = &self.0;
        c[0].store(p.state as u64, Relaxed);
        c[1].store(opt(p.motion_id.map(u64::from)), Relaxed);
        c[2].store(p.progress.to_bits(), Relaxed);
        c[3].store(p.time_s.to_bits(), Relaxed);
        c[4].store(opt(p.motion_start_tick), Relaxed);
        c[5].store(opt(p.first_command.map(|f| f.0)), Relaxed);
        c[6].store(opt(p.first_command.map(|f| f.1)), Relaxed);
        c[15].store(p.ran, Relaxed);
        match p.path {
            None => c[7].store(NONE, Relaxed),
            Some(path) => {
                let (seg, until) = match path.segment {
                    Segment::Approach => (SEG_APPROACH, 0),
                    Segment::Wait { until } => (SEG_WAIT, until),
                    Segment::Motion => (SEG_MOTION, 0),
                };
                c[7].store(seg | if path.fresh { FRESH } else { 0 }, Relaxed);
                c[8].store(until, Relaxed);
                c[9].store(path.base, Relaxed);
                c[10].store(path.frac.to_bits(), Relaxed);
                c[11].store(path.speed.to_bits(), Relaxed);
                c[12].store(path.target_speed.to_bits(), Relaxed);
                c[13].store(opt(path.laps_left.map(u64::from)), Relaxed);
                c[14].store(opt(path.wait_until), Relaxed);
            }
        }
    }

    fn load(&self) -> SlotPublished {
        use Ordering::Relaxed;
        let c = &self.0;
        let get = |i: usize| c[i].load(Relaxed);
        let f = |i: usize| f64::from_bits(get(i));
        let seg = get(7);
        let path = (seg != NONE).then(|| Path {
            segment: match seg & 0xFF {
                SEG_WAIT => Segment::Wait { until: get(8) },
                SEG_MOTION => Segment::Motion,
                _ => Segment::Approach,
            },
            fresh: seg & FRESH != 0,
            base: get(9),
            frac: f(10),
            speed: f(11),
            target_speed: f(12),
            laps_left: unopt(get(13)).map(|l| l as u32),
            wait_until: unopt(get(14)),
        });
        SlotPublished {
            state: State::from_u8(get(0) as u8),
            motion_id: unopt(get(1)).map(|v| v as u32),
            progress: f(2),
            time_s: f(3),
            motion_start_tick: unopt(get(4)),
            first_command: unopt(get(5)).zip(unopt(get(6))),
            path,
            ran: get(15),
        }
    }
}

/// What a reader gets: [`Published`] plus the slots and the joint values.
#[derive(Debug, Clone)]
pub(crate) struct Snapshot {
    pub values: Published,
    pub slots: Vec<SlotPublished>,
    pub commanded: Vec<f64>,
    pub measured: Vec<f64>,
    pub tracking: Vec<f64>,
}

fn atomics(n: usize) -> Box<[AtomicU64]> {
    (0..n).map(|_| AtomicU64::new(0)).collect()
}

pub(crate) fn pack_fault(f: Option<BackendError>) -> u64 {
    match f {
        None => NONE,
        Some(e) => {
            let dof = e.dof.map_or(0xFFFF, u64::from);
            (kind_index(e.kind) << 48) | (dof << 32) | u64::from(e.code)
        }
    }
}

pub(crate) fn unpack_fault(v: u64) -> Option<BackendError> {
    if v == NONE {
        return None;
    }
    let kind = *FaultKind::ALL.get((v >> 48) as usize)?;
    let dof = ((v >> 32) & 0xFFFF) as u16;
    Some(BackendError {
        kind,
        dof: (dof != 0xFFFF).then_some(dof),
        code: v as u32,
    })
}

/// Input level in bits 0–1 (0 none, 1 released, 2 asserted), re-enable in bit 2, cause in bits 8–15 (0 none,
/// 1 input, 2 input lost, 3 drive, 4 drive with its DOF in bits 16–31).
pub(crate) fn pack_estop(e: EStop) -> u64 {
    let input = match e.input {
        None => 0,
        Some(false) => 1,
        Some(true) => 2,
    };
    let cause = match e.cause {
        None => 0,
        Some(EStopCause::Input) => 1,
        Some(EStopCause::InputLost) => 2,
        Some(EStopCause::Drive { dof: None }) => 3,
        Some(EStopCause::Drive { dof: Some(d) }) => 4 | u64::from(d) << 8,
    };
    input | u64::from(e.reenable) << 2 | cause << 8
}

pub(crate) fn unpack_estop(v: u64) -> EStop {
    EStop {
        reenable: v & 4 != 0,
        input: match v & 3 {
            1 => Some(false),
            2 => Some(true),
            _ => None,
        },
        cause: match (v >> 8) & 0xFF {
            1 => Some(EStopCause::Input),
            2 => Some(EStopCause::InputLost),
            3 => Some(EStopCause::Drive { dof: None }),
            4 => Some(EStopCause::Drive {
                dof: Some((v >> 16) as u16),
            }),
            _ => None,
        },
    }
}

fn kind_index(k: FaultKind) -> u64 {
    FaultKind::ALL.iter().position(|&x| x == k).unwrap_or(0) as u64
}

fn opt(v: Option<u64>) -> u64 {
    v.unwrap_or(NONE)
}

fn unopt(v: u64) -> Option<u64> {
    (v != NONE).then_some(v)
}

const ACK_DONE: u64 = 1;
const ACK_IGNORED: u64 = 2;
const REFUSED_BUSY: u64 = 3;
const REFUSED_MISMATCH: u64 = 4;
const REFUSED_JUMP: u64 = 5;
const REFUSED_NOT_LOOPABLE: u64 = 6;
const REFUSED_MISSED: u64 = 7;
const REFUSED_SUPERSEDED: u64 = 8;
const REFUSED_ENDED: u64 = 9;

fn pack_ack(a: Ack) -> u64 {
    let (tag, arg) = match a {
        Ack::Done => (ACK_DONE, 0),
        Ack::Ignored(s) => (ACK_IGNORED, s as u64),
        Ack::Refused(Refusal::Busy(s)) => (REFUSED_BUSY, s as u64),
        Ack::Refused(Refusal::Mismatch) => (REFUSED_MISMATCH, 0),
        Ack::Refused(Refusal::Jump { dof }) => (REFUSED_JUMP, u64::from(dof)),
        Ack::Refused(Refusal::NotLoopable { dof }) => (REFUSED_NOT_LOOPABLE, u64::from(dof)),
        Ack::Refused(Refusal::Missed) => (REFUSED_MISSED, 0),
        Ack::Refused(Refusal::Superseded) => (REFUSED_SUPERSEDED, 0),
        Ack::Refused(Refusal::Ended) => (REFUSED_ENDED, 0),
    };
    tag << 32 | arg
}

fn unpack_ack(v: u64) -> Option<Ack> {
    let arg = v as u32;
    let dof = arg as u16;
    Some(match v >> 32 {
        ACK_DONE => Ack::Done,
        ACK_IGNORED => Ack::Ignored(State::from_u8(arg as u8)),
        REFUSED_BUSY => Ack::Refused(Refusal::Busy(State::from_u8(arg as u8))),
        REFUSED_MISMATCH => Ack::Refused(Refusal::Mismatch),
        REFUSED_JUMP => Ack::Refused(Refusal::Jump { dof }),
        REFUSED_NOT_LOOPABLE => Ack::Refused(Refusal::NotLoopable { dof }),
        REFUSED_MISSED => Ack::Refused(Refusal::Missed),
        REFUSED_SUPERSEDED => Ack::Refused(Refusal::Superseded),
        REFUSED_ENDED => Ack::Refused(Refusal::Ended),
        _ => return None,
    })
}

impl Shared {
    pub fn new(n: usize, slots: usize, acks: usize) -> Self {
        Self {
            seq: AtomicU64::new(0),
            state: AtomicU8::new(State::Disabled as u8),
            phase: AtomicU8::new(Phase::Disabled as u8),
            moving: AtomicU8::new(0),
            motion_id: AtomicU64::new(NONE),
            tick: AtomicU64::new(0),
            progress: AtomicU64::new(0),
            time_s: AtomicU64::new(0),
            overruns: AtomicU64::new(0),
            limit_violations: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            fault: AtomicU64::new(NONE),
            estop: AtomicU64::new(pack_estop(EStop::default())),
            first_command_tick: AtomicU64::new(NONE),
            first_command_ns: AtomicU64::new(NONE),
            motion_start_tick: AtomicU64::new(NONE),
            slots: (0..slots).map(|_| SlotCells::new()).collect(),
            commanded: atomics(n),
            measured: atomics(n),
            tracking: atomics(n),
            heartbeat: AtomicU64::new(0),
            latency: Histogram::new(),
            exec: Histogram::new(),
            acks: (0..acks.max(1))
                .map(|_| (AtomicU64::new(0), AtomicU64::new(0)))
                .collect(),
        }
    }

    /// Called by the loop only: command `seq` was taken with result `ack`.
    pub fn acknowledge(&self, seq: u64, ack: Ack) {
        let (s, a) = &self.acks[(seq % self.acks.len() as u64) as usize];
        // Invalidate the slot first, so a reader never pairs the new result with the old number.
        s.store(0, Ordering::Relaxed);
        fence(Ordering::Release);
        a.store(pack_ack(ack), Ordering::Relaxed);
        s.store(seq, Ordering::Release);
    }

    /// The result of command `seq`, once the loop has taken it.
    pub fn ack(&self, seq: u64) -> Option<Ack> {
        let (s, a) = &self.acks[(seq % self.acks.len() as u64) as usize];
        if s.load(Ordering::Acquire) != seq {
            return None;
        }
        let v = a.load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        if s.load(Ordering::Relaxed) != seq {
            return None;
        }
        unpack_ack(v)
    }

    /// Called by the loop only.
    pub fn publish(
        &self,
        p: &Published,
        slots: &[SlotPublished],
        commanded: &[f64],
        measured: &[f64],
        tracking: &[f64],
    ) {
        use Ordering::Relaxed;
        let s = self.seq.load(Relaxed);
        self.seq.store(s.wrapping_add(1), Relaxed);
        fence(Ordering::Release);
        self.state.store(p.state as u8, Relaxed);
        self.phase.store(p.phase as u8, Relaxed);
        self.moving.store(u8::from(p.moving), Relaxed);
        self.motion_id
            .store(opt(p.motion_id.map(u64::from)), Relaxed);
        self.tick.store(p.tick, Relaxed);
        self.progress.store(p.progress.to_bits(), Relaxed);
        self.time_s.store(p.time_s.to_bits(), Relaxed);
        self.limit_violations.store(p.limit_violations, Relaxed);
        self.refused.store(p.refused, Relaxed);
        self.fault.store(pack_fault(p.fault), Relaxed);
        self.estop.store(pack_estop(p.estop), Relaxed);
        self.first_command_tick
            .store(opt(p.first_command.map(|f| f.0)), Relaxed);
        self.first_command_ns
            .store(opt(p.first_command.map(|f| f.1)), Relaxed);
        self.motion_start_tick
            .store(opt(p.motion_start_tick), Relaxed);
        for (cells, slot) in self.slots.iter().zip(slots) {
            cells.store(slot);
        }
        for (dst, src) in [
            (&self.commanded, commanded),
            (&self.measured, measured),
            (&self.tracking, tracking),
        ] {
            for (a, v) in dst.iter().zip(src) {
                a.store(v.to_bits(), Relaxed);
            }
        }
        self.seq.store(s.wrapping_add(2), Ordering::Release);
    }

    /// Called by the control side; retries while the loop is mid-publish.
    pub fn read(&self) -> Snapshot {
        use Ordering::Relaxed;
        let load = |v: &[AtomicU64]| -> Vec<f64> {
            v.iter().map(|a| f64::from_bits(a.load(Relaxed))).collect()
        };
        loop {
            let s1 = self.seq.load(Ordering::Acquire);
            if s1 % 2 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let values = Published {
                state: State::from_u8(self.state.load(Relaxed)),
                phase: PHASES
                    .get(usize::from(self.phase.load(Relaxed)))
                    .copied()
                    .unwrap_or(Phase::Fault),
                motion_id: unopt(self.motion_id.load(Relaxed)).map(|v| v as u32),
                tick: self.tick.load(Relaxed),
                progress: f64::from_bits(self.progress.load(Relaxed)),
                time_s: f64::from_bits(self.time_s.load(Relaxed)),
                limit_violations: self.limit_violations.load(Relaxed),
                refused: self.refused.load(Relaxed),
                fault: unpack_fault(self.fault.load(Relaxed)),
                estop: unpack_estop(self.estop.load(Relaxed)),
                first_command: unopt(self.first_command_tick.load(Relaxed))
                    .zip(unopt(self.first_command_ns.load(Relaxed))),
                motion_start_tick: unopt(self.motion_start_tick.load(Relaxed)),
                moving: self.moving.load(Relaxed) != 0,
            };
            let slots = self.slots.iter().map(SlotCells::load).collect();
            let commanded = load(&self.commanded);
            let measured = load(&self.measured);
            let tracking = load(&self.tracking);
            fence(Ordering::Acquire);
            if self.seq.load(Relaxed) == s1 {
                return Snapshot {
                    values,
                    slots,
                    commanded,
                    measured,
                    tracking,
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_published_snapshot_reads_back_whole() {
        let shared = Shared::new(2, 1, 4);
        let fault = BackendError {
            kind: FaultKind::Stall,
            dof: Some(1),
            code: 7,
        };
        let p = Published {
            state: State::Fault,
            phase: Phase::FaultStopping,
            motion_id: Some(9),
            tick: 42,
            progress: 0.5,
            time_s: 1.25,
            limit_violations: 1,
            refused: 2,
            fault: Some(fault),
            estop: EStop {
                input: Some(false),
                cause: Some(EStopCause::Drive { dof: Some(300) }),
                reenable: true,
            },
            first_command: Some((10, 12345)),
            motion_start_tick: Some(20),
            moving: true,
        };
        shared.publish(&p, &[], &[1.0, 2.0], &[1.5, 2.5], &[0.1, 0.2]);
        let s = shared.read();
        assert_eq!(s.values.state, State::Fault);
        assert_eq!(s.values.phase, Phase::FaultStopping);
        assert_eq!(s.values.motion_id, Some(9));
        assert_eq!(s.values.fault, Some(fault));
        assert_eq!(s.values.estop, p.estop);
        assert_eq!(s.values.first_command, Some((10, 12345)));
        assert_eq!(s.commanded, vec![1.0, 2.0]);
        assert_eq!(s.measured, vec![1.5, 2.5]);
        assert_eq!(s.tracking, vec![0.1, 0.2]);
        let p = Published {
            fault: None,
            motion_id: None,
            first_command: None,
            motion_start_tick: None,
            ..p
        };
        shared.publish(&p, &[], &[0.0, 0.0], &[0.0, 0.0], &[0.0, 0.0]);
        let s = shared.read();
        assert_eq!((s.values.fault, s.values.motion_id), (None, None));
    }

    #[test]
    fn readers_never_see_a_torn_snapshot() {
        let shared = std::sync::Arc::new(Shared::new(8, 1, 4));
        let writer = {
            let shared = shared.clone();
            std::thread::spawn(move || {
                for i in 0..20_000u64 {
                    let v = [i as f64; 8];
                    let p = Published {
                        state: State::Playing,
                        phase: Phase::Moving,
                        motion_id: Some(1),
                        tick: i,
                        progress: 0.0,
                        time_s: 0.0,
                        limit_violations: 0,
                        refused: 0,
                        fault: None,
                        estop: EStop::default(),
                        first_command: None,
                        motion_start_tick: None,
                        moving: false,
                    };
                    shared.publish(&p, &[], &v, &v, &v);
                }
            })
        };
        for _ in 0..2_000 {
            let s = shared.read();
            assert!(s.commanded.iter().all(|&x| x == s.values.tick as f64));
        }
        writer.join().unwrap();
    }

    #[test]
    fn acknowledgements_read_back_by_sequence_number() {
        let shared = Shared::new(1, 1, 4);
        assert_eq!(shared.ack(1), None);
        shared.acknowledge(1, Ack::Done);
        shared.acknowledge(2, Ack::Refused(Refusal::Jump { dof: 3 }));
        shared.acknowledge(3, Ack::Ignored(State::Paused));
        assert_eq!(shared.ack(1), Some(Ack::Done));
        assert_eq!(shared.ack(2), Some(Ack::Refused(Refusal::Jump { dof: 3 })));
        assert_eq!(shared.ack(3), Some(Ack::Ignored(State::Paused)));
        // Slot 1 again: the older number is gone, not confused with the new one.
        shared.acknowledge(5, Ack::Refused(Refusal::Busy(State::Playing)));
        assert_eq!(shared.ack(1), None);
        assert_eq!(
            shared.ack(5),
            Some(Ack::Refused(Refusal::Busy(State::Playing)))
        );
    }
}
