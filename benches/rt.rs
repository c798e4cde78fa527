//! Per-tick cost of the loop for 64 DOFs: commands, sample, path speed, guard, sim write and read,
//! status publish and timing statistics — one `Loop::step` on the manual clock (which never
//! sleeps), so the figure is the tick's own work. Target: ≤ 5 µs p99 (see `motiond play` for the
//! per-tick execution time under real scheduling).
//!
//! Also the tick that takes a looped playback, for a motion of 2 000 and of 2 000 000 samples:
//! accepting must cost the same (no walk over the motion on the loop thread).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark fails loudly where its setup breaks"
)]

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use motiond::backend::sim::{Sim, SimSettings};
use motiond::motion::seq::{MultiValueSeq, Timing};
use motiond::robot::Limits;
use motiond::rt::{
    Command, Loop, LoopHandle, ManualClock, Playback, Repeat, Scope, Settings, State,
};
use motiond::trajectory::{ColumnMap, DofLimits, JointSet, Options, Trajectory, build_values};

const RATE: f64 = 1000.0;
const N: usize = 64;

fn joints() -> JointSet {
    JointSet::uniform(
        N,
        DofLimits {
            position: Limits::symmetric(3.0),
            velocity: Limits::symmetric(4.0),
            acceleration: Limits::symmetric(40.0),
            effort: Limits::symmetric(100.0),
        },
    )
}

/// 10 s sampled at 100 Hz, every DOF out and back (so it loops), each at its own amplitude.
fn motion(js: &JointSet) -> Trajectory {
    swings(js, 1000)
}

/// `rows` samples at 100 Hz per DOF, every DOF out and back a whole number of times.
fn swings(js: &JointSet, rows: usize) -> Trajectory {
    let n = js.len();
    let secs = (rows - 1) as f64 / 100.0;
    let values = (0..rows)
        .flat_map(|i| {
            let t = i as f64 / 100.0;
            (0..n).map(move |j| {
                let w = std::f64::consts::TAU * (1 + j % 4) as f64 / secs;
                0.25 * (1.0 - (w * t).cos())
            })
        })
        .collect();
    let seq = MultiValueSeq {
        num_parts: n,
        timing: Timing::Fixed { frame_rate: 100.0 },
        values,
    };
    let map = ColumnMap::in_dof_order(js, n).unwrap();
    let options = Options {
        rate_hz: RATE,
        ..Options::default()
    };
    build_values(js, &seq, &map, &options).unwrap().trajectory
}

/// A loop of 64 DOFs playing a looped motion on the sim; with `trace_ticks` rows of flight
/// recorder.
fn playing(trace_ticks: usize) -> (Loop<ManualClock>, LoopHandle) {
    let js = joints();
    let sim = Sim::new(&js, RATE, &SimSettings::default());
    let settings = Settings {
        trace_ticks,
        ..Settings::default()
    };
    let (mut lp, handle) =
        Loop::new(&settings, Box::new(sim), None, &js, ManualClock::new(0)).unwrap();
    handle.send(Command::Enable).unwrap();
    while handle.state() != State::Idle {
        lp.step();
    }
    let pb = Playback {
        repeat: Repeat::Forever,
        ..Playback::new(1, Trajectory::hold(&[0.0; N], RATE), motion(&js))
    };
    handle.send(Command::Play(Box::new(pb))).unwrap();
    lp.step();
    assert_eq!(handle.state(), State::Playing);
    (lp, handle)
}

fn still_playing(handle: &LoopHandle) {
    let s = handle.status();
    assert_eq!(
        (s.state, s.fault, s.limit_violations),
        (State::Playing, None, 0)
    );
}

/// The flight recorder's ring as `serve` keeps it by default: ten seconds of ticks.
const RECORDER_TICKS: usize = 10 * RATE as usize;

fn bench(c: &mut Criterion) {
    let (mut lp, handle) = playing(0);
    c.bench_function("rt tick, 64 DOFs playing on the sim", |b| {
        b.iter(|| lp.step())
    });
    still_playing(&handle);
    let (mut lp, handle) = playing(RECORDER_TICKS);
    c.bench_function(
        "rt tick, 64 DOFs playing on the sim, flight recorder on",
        |b| b.iter(|| lp.step()),
    );
    still_playing(&handle);
}

/// The flight recorder's cost per tick as ratios, in one run: the two loops step in turns (so
/// the machine's load falls on both alike), in rounds of a ring's worth of ticks, every tick
/// timed; p50 and p99 of each, and their ratios. `cargo bench --bench rt -- recorder`.
fn recorder_ratio(_: &mut Criterion) {
    const ROUNDS: usize = 15;
    let (mut off, off_handle) = playing(0);
    let (mut on, on_handle) = playing(RECORDER_TICKS);
    let time = |lp: &mut Loop<ManualClock>, ticks: &mut Vec<f64>| {
        for _ in 0..RECORDER_TICKS {
            let t = Instant::now();
            lp.step();
            ticks.push(t.elapsed().as_secs_f64() * 1e6);
        }
    };
    let mut without = Vec::with_capacity(ROUNDS * RECORDER_TICKS);
    let mut with = Vec::with_capacity(ROUNDS * RECORDER_TICKS);
    for _ in 0..ROUNDS {
        time(&mut off, &mut without);
        time(&mut on, &mut with);
    }
    still_playing(&off_handle);
    still_playing(&on_handle);
    let quantile = |v: &mut Vec<f64>, q: f64| {
        v.sort_by(f64::total_cmp);
        v[((v.len() - 1) as f64 * q).round() as usize]
    };
    let (off50, on50) = (quantile(&mut without, 0.5), quantile(&mut with, 0.5));
    let (off99, on99) = (quantile(&mut without, 0.99), quantile(&mut with, 0.99));
    println!(
        "flight recorder, 64 DOFs, ring of {RECORDER_TICKS} ticks, {} ticks each in turns: \
         p50 {on50:.2} µs with it, {off50:.2} without (ratio {:.3}); \
         p99 {on99:.2} µs with it, {off99:.2} without (ratio {:.3})",
        ROUNDS * RECORDER_TICKS,
        on50 / off50,
        on99 / off99,
    );
}

/// The tick that takes a looped playback of `samples` samples (4 DOFs), averaged.
fn accept(c: &mut Criterion, samples: usize) {
    const DOFS: usize = 4;
    let js = JointSet::uniform(DOFS, joints().dofs[0].limits);
    let motion = swings(&js, samples / DOFS);
    assert!(motion.loop_seam().is_ok());
    let sim = Sim::new(&js, RATE, &SimSettings::default());
    let (mut lp, handle) = Loop::new(
        &Settings::default(),
        Box::new(sim),
        None,
        &js,
        ManualClock::new(0),
    )
    .unwrap();
    handle.send(Command::Enable).unwrap();
    while handle.state() != State::Idle {
        lp.step();
    }
    let name = format!("accept a looped playback of {samples} samples ({DOFS} DOFs)");
    c.bench_function(&name, |b| {
        b.iter_custom(|iters| {
            let mut took = Duration::ZERO;
            for _ in 0..iters {
                let pb = Playback {
                    repeat: Repeat::Forever,
                    ..Playback::new(1, Trajectory::hold(&[0.0; DOFS], RATE), motion.clone())
                };
                // Copying a big motion evicts the caches: let the loop touch its own state again
                // first, so the figure is the accept, not a cold cache.
                for _ in 0..3 {
                    lp.step();
                }
                handle.send(Command::Play(Box::new(pb))).unwrap();
                let t = Instant::now();
                lp.step();
                took += t.elapsed();
                assert_eq!(handle.state(), State::Playing);
                handle.send(Command::QuickStop(Scope::All)).unwrap();
                while handle.peek().moving {
                    lp.step();
                }
                // Back to the start, where the next playback's approach begins.
                let back = Playback::new(
                    2,
                    motiond::trajectory::approach(
                        &js,
                        &handle.peek().commanded,
                        &[Default::default(); DOFS],
                        RATE,
                    )
                    .unwrap(),
                    Trajectory::hold(&[0.0; DOFS], RATE),
                );
                handle.send(Command::Play(Box::new(back))).unwrap();
                lp.step();
                while handle.state() != State::Holding {
                    lp.step();
                }
            }
            took
        })
    });
}

fn accepts(c: &mut Criterion) {
    for samples in [2_000, 20_000, 200_000, 2_000_000] {
        accept(c, samples);
    }
}

criterion_group!(benches, bench, recorder_ratio, accepts);
criterion_main!(benches);
