//! The loop neither allocates nor frees: a counting global allocator, armed only while the loop
//! steps, over 30 000 ticks of real trajectories on the simulated backend — approach, play, pause,
//! resume, stop, a repeated playback through its seam, a quick stop, a playback waiting for its
//! `start_at`, a drive fault with its quick stop and hold, recovery, a refused playback, a late
//! wake-up and disabling, with the flight recorder's ring (ten seconds of rows, as `serve` keeps
//! by default) recording every tick; its rows are then read back and written as MCAP, off the
//! loop, as a dump does; and a stream's pieces spliced in at their ticks, starving to rest and
//! resuming.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use motiond::backend::sim::{Sim, SimFaultKind, SimSettings};
use motiond::estop::SimInput;
use motiond::motion::seq::{MultiValueSeq, Timing};
use motiond::robot::Limits;
use motiond::rt::{
    Clock, Command, Loop, ManualClock, Outcome, Playback, Repeat, Scope, Settings, State,
};
use motiond::trajectory::{
    ColumnMap, DofLimits, JointSet, Options, Setpoint, Setpoint3, Trajectory, approach,
    build_values, splice_stream,
};

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static FREES: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static ARMED: Cell<bool> = const { Cell::new(false) };
}

fn armed() -> bool {
    ARMED.try_with(Cell::get).unwrap_or(false)
}

// SAFETY: forwards to the system allocator; counting touches only atomics and a const-initialised
// thread-local, neither of which allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if armed() {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if armed() {
            FREES.fetch_add(1, Ordering::Relaxed);
        }
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if armed() {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const RATE: f64 = 1000.0;
const N: usize = 6;

fn joints() -> JointSet {
    JointSet::uniform(
        N,
        DofLimits {
            position: Limits::symmetric(2.5),
            velocity: Limits::symmetric(2.0),
            acceleration: Limits::symmetric(20.0),
            effort: Limits::symmetric(40.0),
        },
    )
}

/// A 6 s motion sampled at 50 Hz, at rest at both ends: DOF j swings j + 1 times, resampled by
/// pchip and proved against the limits.
fn motion(js: &JointSet) -> Trajectory {
    let rows = 301;
    let values = (0..rows)
        .flat_map(|i| {
            let t = i as f64 / 50.0;
            (0..N).map(move |j| {
                let w = std::f64::consts::TAU * (j as f64 + 1.0) / 6.0;
                0.2 * (1.0 - (w * t).cos())
            })
        })
        .collect();
    let seq = MultiValueSeq {
        num_parts: N,
        timing: Timing::Fixed { frame_rate: 50.0 },
        values,
    };
    let map = ColumnMap::in_dof_order(js, N).unwrap();
    let options = Options {
        rate_hz: RATE,
        ..Options::default()
    };
    build_values(js, &seq, &map, &options).unwrap().trajectory
}

fn playback(
    js: &JointSet,
    id: u32,
    from: &[f64],
    repeat: Repeat,
    start_at: Option<std::time::SystemTime>,
) -> Box<Playback> {
    let motion = motion(js);
    let approach = approach(js, from, motion.first_setpoints(), RATE).unwrap();
    Box::new(Playback {
        repeat,
        start_at,
        ..Playback::new(id, approach, motion)
    })
}

#[test]
fn thirty_thousand_ticks_without_an_allocation_or_a_free() {
    // The counter counts: one box made and dropped while armed is one of each.
    ARMED.with(|a| a.set(true));
    drop(std::hint::black_box(Box::new(7u64)));
    ARMED.with(|a| a.set(false));
    assert_eq!(ALLOCATIONS.swap(0, Ordering::Relaxed), 1);
    assert_eq!(FREES.swap(0, Ordering::Relaxed), 1);

    let js = joints();
    let sim = Sim::new(&js, RATE, &SimSettings::default());
    let injector = sim.injector();
    let clock = ManualClock::new(0);
    let settings = Settings {
        trace_ticks: 10 * RATE as usize,
        estop_drive: true,
        ..Settings::default()
    };
    let (estop, switch) = SimInput::new(5);
    let (mut lp, handle) = Loop::new(
        &settings,
        Box::new(sim),
        Some(Box::new(estop)),
        &js,
        clock.clone(),
    )
    .unwrap();
    let mut rows = Vec::with_capacity(40_000);
    let mut seen = Vec::new();
    let step = |lp: &mut Loop<ManualClock>| {
        ARMED.with(|a| a.set(true));
        lp.step();
        ARMED.with(|a| a.set(false));
    };
    let once = Repeat::Once;
    for k in 0..30_000u64 {
        // Commands are built and sent here, unarmed: only the loop's own work is counted.
        let commanded = || handle.status().commanded;
        let send = |c: Command| {
            handle.send(c).unwrap();
        };
        match k {
            0 => send(Command::Enable),
            20 => send(Command::Play(playback(&js, 1, &commanded(), once, None))),
            2_500 => send(Command::Pause(Scope::All)),
            3_500 => send(Command::Resume(Scope::All)),
            5_000 => send(Command::Stop(Scope::All)),
            6_500 => send(Command::Play(playback(
                &js,
                2,
                &commanded(),
                Repeat::Times(2),
                None,
            ))),
            // The first lap ends near 13 000: this is the second.
            14_000 => send(Command::QuickStop(Scope::All)),
            15_000 => {
                let at = std::time::UNIX_EPOCH
                    + std::time::Duration::from_nanos(clock.realtime_ns() as u64 + 500_000_000);
                send(Command::Play(playback(
                    &js,
                    3,
                    &commanded(),
                    once,
                    Some(at),
                )));
            }
            19_000 => injector.inject(SimFaultKind::Error, Some(1)),
            19_500 => {
                injector.clear();
                send(Command::ClearFault);
            }
            19_600 => send(Command::Enable),
            20_000 => send(Command::Play(playback(&js, 4, &[9.0; N], once, None))),
            21_000 => send(Command::Play(playback(&js, 5, &commanded(), once, None))),
            // The loop thread stalls for 50 ms (SIGSTOP, a hog): the late wake-up faults.
            22_000 => clock.advance(50_000_000),
            23_000 => send(Command::ClearFault),
            24_000 => send(Command::Play(playback(&js, 6, &commanded(), once, None))),
            // The E-stop input, bouncing, then held; released; cleared: the drives come back.
            25_000 | 25_002 | 25_600 => switch.press(),
            25_001 => switch.release(),
            // The line goes away for a while (it counts as asserted).
            25_500 => switch.lose_line(),
            26_000 => switch.release(),
            26_500 => send(Command::ClearFault),
            // A drive's own E-stop.
            27_500 => injector.inject(SimFaultKind::Estop, Some(0)),
            28_000 => {
                injector.clear();
                send(Command::ClearFault);
            }
            29_000 => send(Command::Disable),
            _ => {}
        }
        step(&mut lp);
        if let Some(t) = handle.trace() {
            t.drain_into(&mut rows);
        }
        let state = handle.state();
        if seen.last() != Some(&state) {
            seen.push(state);
        }
    }
    assert_eq!(
        (
            ALLOCATIONS.load(Ordering::Relaxed),
            FREES.load(Ordering::Relaxed)
        ),
        (0, 0),
        "allocations and frees inside the loop"
    );
    use State::*;
    assert_eq!(
        seen,
        vec![
            Disabled,
            Idle,
            Playing,
            Paused,
            Playing,
            Stopping,
            Holding,
            Approaching,
            Playing,
            Stopping,
            Holding,
            Approaching,
            Playing,
            Fault,
            Disabled,
            Idle,
            Approaching,
            Playing,
            Fault,
            Holding,
            Approaching,
            Playing,
            EStop,
            Disabled,
            Idle,
            EStop,
            Disabled,
            Idle,
            Disabled
        ]
    );
    let s = handle.status();
    assert_eq!((s.limit_violations, s.refused, s.fault), (0, 1, None));
    assert_eq!(s.estop.cause, None);
    assert_eq!(rows.len(), 30_000);
    // The ring holds the last ten seconds whatever the drain did; the dump's MCAP has them all.
    let ring = handle.trace().unwrap();
    let last = ring.latest(ring.capacity());
    assert_eq!(last.len(), 10_000);
    assert_eq!(&last[..], &rows[20_000..]);
    let dir = tempfile::tempdir().unwrap();
    let meta = motiond::recorder::mcap::Meta {
        joints: &js,
        rate_hz: RATE,
        epoch_ns: 0,
        reason: "dump",
    };
    let events = motiond::recorder::events::from_rows(&last, &js);
    assert!(
        events
            .iter()
            .any(|e| e.kind == motiond::recorder::EventKind::EStop)
    );
    let path = dir.path().join("dump.mcap");
    motiond::recorder::write_file(&path, &meta, &last, &events).unwrap();
}

/// 30 Hz rows of a slow swing of every DOF, from stream time `from_s` for `for_s` seconds.
fn stream_rows(from_s: f64, for_s: f64) -> (Vec<f64>, Vec<f64>) {
    let rows = (for_s * 30.0) as usize;
    let times: Vec<f64> = (0..rows).map(|i| from_s + i as f64 / 30.0).collect();
    let values = times
        .iter()
        .flat_map(|&t| (0..N).map(move |j| 0.3 * (t * (1.0 + j as f64 * 0.2)).sin()))
        .collect();
    (times, values)
}

#[test]
fn streamed_pieces_swap_in_without_an_allocation_or_a_free() {
    let js = joints();
    let sim = Sim::new(&js, RATE, &SimSettings::default());
    let clock = ManualClock::new(0);
    let settings = Settings {
        trace_ticks: 64,
        ..Settings::default()
    };
    let (mut lp, handle) = Loop::new(&settings, Box::new(sim), None, &js, clock).unwrap();
    let lead = 5;
    let mut route = None;
    let mut seen = Vec::new();
    let mut rows = Vec::with_capacity(8_000);
    let mut id = 0;
    for k in 0..6_000u64 {
        // Pieces are built and sent here, unarmed: only the loop's own work is counted.
        let status = handle.status();
        let slot = status.slots[0];
        let piece = |from: &Setpoint3, splice_s: f64| {
            let (times, values) = stream_rows(splice_s + 0.02, 0.4);
            splice_stream(
                &js,
                from,
                splice_s,
                &times,
                &values,
                RATE,
                false,
                1.0 / 30.0,
            )
            .unwrap()
        };
        match k {
            0 => {
                handle.send(Command::Enable).unwrap();
            }
            // A piece from rest, then one every 100 ticks (a 10 Hz policy) until 3000; then
            // the path starves to rest; at 4000 a piece resumes it from rest.
            50 | 4_000 => {
                let rest: Vec<Setpoint> = status
                    .commanded
                    .iter()
                    .map(|&position| Setpoint {
                        position,
                        ..Setpoint::default()
                    })
                    .collect();
                let p = piece(&[rest.clone(), rest.clone(), rest], k as f64 / RATE);
                id += 1;
                let pb = Box::new(Playback {
                    stream_tail: Some(p.tail_tick),
                    ..Playback::new(id, p.approach, p.motion)
                });
                route = Some(pb.route.clone());
                handle.send(Command::Play(pb)).unwrap();
            }
            _ if k % 100 == 0 && k < 3_000 && k > 100 => {
                let path = slot.path.unwrap();
                let from = route
                    .as_ref()
                    .unwrap()
                    .predict(path, status.tick, lead, RATE)
                    .unwrap();
                let p = piece(&from, (status.tick + lead) as f64 / RATE);
                id += 1;
                let pb = Box::new(Playback {
                    stream_tail: Some(p.tail_tick),
                    ..Playback::new(id, p.approach, p.motion)
                });
                route = Some(pb.route.clone());
                handle
                    .send(Command::Replace {
                        playback: pb,
                        at_tick: slot.ran + lead,
                    })
                    .unwrap();
            }
            _ => {}
        }
        ARMED.with(|a| a.set(true));
        lp.step();
        ARMED.with(|a| a.set(false));
        if let Some(t) = handle.trace() {
            t.drain_into(&mut rows);
        }
        let state = handle.state();
        if seen.last() != Some(&state) {
            seen.push(state);
        }
    }
    assert_eq!(
        (
            ALLOCATIONS.load(Ordering::Relaxed),
            FREES.load(Ordering::Relaxed)
        ),
        (0, 0),
        "allocations and frees inside the loop"
    );
    // From rest, the pieces stream (blends and rows alike) until the last one's rows run out:
    // starved, braking to rest (holding); resumed from rest (rows too far to join before they
    // end: headed for until the last row's tick), starved and braking from there.
    use State::*;
    assert_eq!(
        seen,
        [
            Disabled, Idle, Streaming, Starved, Holding, Streaming, Starved, Holding
        ]
    );
    let s = handle.status();
    assert_eq!((s.limit_violations, s.refused), (0, 0));
    // Every piece took over at its tick: none was refused or left waiting.
    let outcomes = handle.outcomes();
    assert!(
        outcomes
            .iter()
            .all(|(_, o)| matches!(o, Outcome::Replaced | Outcome::Finished)),
        "{outcomes:?}"
    );
    assert_eq!(outcomes.len() as u32, id);
}
