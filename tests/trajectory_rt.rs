//! The loop's side of trajectories allocates nothing: sampling in tick order, the stop planner.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use motiond::motion::seq::{MultiValueSeq, Timing};
use motiond::robot::Limits;
use motiond::trajectory::{
    self, ColumnMap, Cursor, DofLimits, JointSet, Options, Setpoint, Stop, StopKind, Trajectory,
};

/// Counts allocations made by the current thread (tests run on several threads at once).
struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations_during(f: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

fn joints(n: usize) -> JointSet {
    JointSet::uniform(
        n,
        DofLimits {
            position: Limits::symmetric(3.0),
            velocity: Limits::symmetric(5.0),
            acceleration: Limits::symmetric(1e4),
            effort: Limits::UNBOUNDED,
        },
    )
}

fn motion(js: &JointSet, cols: usize) -> Trajectory {
    let rows = 400;
    let times: Vec<f64> = (0..rows)
        .map(|i| i as f64 * 0.01 + (i % 4) as f64 * 0.002)
        .collect();
    let values = (0..rows * cols)
        .map(|i| {
            let (r, c) = ((i / cols) as f64, (i % cols) as f64);
            0.5 * (1.0 - (r * 0.02 + c).cos())
                * (1.0 - (std::f64::consts::PI * r / (rows - 1) as f64).cos())
                * 0.1
        })
        .collect();
    let seq = MultiValueSeq {
        num_parts: cols,
        timing: Timing::Timed {
            times,
            frame_rate: None,
        },
        values,
    };
    let map = ColumnMap::in_dof_order(js, cols).unwrap();
    trajectory::build_values(js, &seq, &map, &Options::default())
        .unwrap_or_else(|e| panic!("{e}"))
        .trajectory
}

#[test]
fn sampling_a_motion_and_an_approach_allocates_nothing() {
    let js = joints(6);
    let t = motion(&js, 6);
    let from = [0.3; 6];
    let mut first = vec![Setpoint::default(); 6];
    t.sample(&mut Cursor::default(), 0, &mut first);
    let a = trajectory::approach(&js, &from, &first, 1000.0).unwrap();
    let mut out = vec![Setpoint::default(); 6];
    let n = allocations_during(|| {
        for traj in [&a, &t] {
            let mut cursor = Cursor::default();
            for k in 0..traj.ticks() + 10 {
                traj.sample(&mut cursor, k, &mut out);
            }
            // Out of order, as after a pause and seek.
            traj.sample(&mut cursor, 5, &mut out);
        }
    });
    assert_eq!(n, 0);
}

#[test]
fn planning_and_sampling_a_stop_allocates_nothing() {
    let js = joints(6);
    let t = motion(&js, 6);
    let mut stop = Stop::new(&js, 1000.0, &[]);
    let mut out = vec![Setpoint::default(); 6];
    let mut previous = vec![Setpoint::default(); 6];
    let n = allocations_during(|| {
        let mut cursor = Cursor::default();
        for (k, kind) in [
            (10u64, StopKind::Planned),
            (700, StopKind::Quick),
            (2500, StopKind::Planned),
        ] {
            t.sample(&mut cursor, k - 1, &mut previous);
            t.sample(&mut cursor, k, &mut out);
            stop.plan(&previous, &out, kind);
            for s in 0..stop.ticks() {
                stop.sample(s, &mut out);
            }
        }
    });
    assert_eq!(n, 0);
}

#[test]
fn trajectories_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Trajectory>();
    send_sync::<Stop>();
}
