//! The loop neither allocates nor frees: a counting global allocator, armed only while the loop
//! steps, over 10 000 ticks of a real trajectory on the simulated backend — approach, play,
//! pause, resume, stop, a second playback, a hold and a fault.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use motiond::backend::sim::{Sim, SimSettings};
use motiond::rt::{Command, Loop, ManualClock, Playback, Settings, State};
use motiond::seq::{MultiValueSeq, Timing};
use motiond::skel::Limits;
use motiond::trajectory::{
    ColumnMap, DofLimits, JointSet, Options, Setpoint, Trajectory, approach, build_values,
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

fn playback(js: &JointSet, id: u32, from: &[f64]) -> Box<Playback> {
    let motion = motion(js);
    let mut first = vec![Setpoint::default(); N];
    motion.sample(&mut Default::default(), 0, &mut first);
    let approach = approach(js, from, &first, RATE).unwrap();
    Box::new(Playback {
        motion_id: id,
        approach,
        motion,
        looped: false,
        start_at: None,
    })
}

#[test]
fn ten_thousand_ticks_without_an_allocation_or_a_free() {
    // The counter counts: one box made and dropped while armed is one of each.
    ARMED.with(|a| a.set(true));
    drop(std::hint::black_box(Box::new(7u64)));
    ARMED.with(|a| a.set(false));
    assert_eq!(ALLOCATIONS.swap(0, Ordering::Relaxed), 1);
    assert_eq!(FREES.swap(0, Ordering::Relaxed), 1);

    let js = joints();
    let sim = Sim::new(
        &js,
        RATE,
        &SimSettings {
            trace_ticks: 10_000,
            ..SimSettings::default()
        },
    );
    let (mut lp, handle) = Loop::new(
        &Settings::default(),
        Box::new(sim),
        &js,
        ManualClock::new(0),
    )
    .unwrap();
    let mut seen = Vec::new();
    let step = |lp: &mut Loop<ManualClock>| {
        ARMED.with(|a| a.set(true));
        lp.step();
        ARMED.with(|a| a.set(false));
    };
    for k in 0..10_000u64 {
        // Commands are built and sent here, unarmed: only the loop's own work is counted.
        match k {
            0 => handle.send(Command::Enable).unwrap(),
            20 => {
                let from = handle.status().positions;
                handle.send(Command::Play(playback(&js, 1, &from))).unwrap();
            }
            2_500 => handle.send(Command::Pause).unwrap(),
            3_500 => handle.send(Command::Resume).unwrap(),
            5_000 => handle.send(Command::Stop).unwrap(),
            6_500 => {
                let from = handle.status().positions;
                handle.send(Command::Play(playback(&js, 2, &from))).unwrap();
            }
            8_000 => handle.send(Command::Hold).unwrap(),
            9_000 => handle
                .send(Command::Play(playback(&js, 3, &[9.0; N])))
                .unwrap(),
            9_500 => handle.send(Command::Disable).unwrap(),
            _ => {}
        }
        step(&mut lp);
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
            Holding,
            Disabled
        ]
    );
    let s = handle.status();
    assert_eq!((s.limit_violations, s.refused, s.fault), (0, 1, None));
}
