//! Trajectory engine speed: resampling a long uneven motion, sampling one tick for many joints,
//! the limit proof at two control rates (it should cost the same: it works per segment), and what
//! accepting a looped playback costs the loop (constant: first/last ticks and the seam verdict are
//! kept at build).
//!
//! `cargo bench --bench trajectory`

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark fails loudly where its setup breaks"
)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use motiond::motion::seq::{MultiValueSeq, Timing};
use motiond::robot::Limits;
use motiond::trajectory::{
    self, ColumnMap, Cursor, DofLimits, Interpolation, JointSet, Options, Setpoint, Trajectory,
};

/// What ../shared/tools/make_big_seq.py writes: `rows × cols` of smooth motion within ±1 rad,
/// time stamps 1–20 ms apart.
fn uneven_motion(rows: usize, cols: usize) -> MultiValueSeq {
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut uniform = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let freqs: Vec<f64> = (0..cols).map(|k| 0.1 + 0.05 * k as f64).collect();
    let mut times = Vec::with_capacity(rows);
    let mut values = Vec::with_capacity(rows * cols);
    let mut t = 0.0;
    for _ in 0..rows {
        times.push(t);
        for (k, f) in freqs.iter().enumerate() {
            values.push(0.8 * (2.0 * std::f64::consts::PI * f * t + k as f64).sin());
        }
        t += 0.001 + 0.019 * uniform();
    }
    MultiValueSeq {
        num_parts: cols,
        timing: Timing::Timed {
            times,
            frame_rate: None,
        },
        values,
    }
}

fn joints(n: usize) -> JointSet {
    JointSet::uniform(
        n,
        DofLimits {
            position: Limits::symmetric(1.0),
            velocity: Limits::symmetric(50.0),
            acceleration: Limits::UNBOUNDED,
            effort: Limits::UNBOUNDED,
        },
    )
}

fn build(seq: &MultiValueSeq, js: &JointSet, rate_hz: f64) -> Trajectory {
    build_with(seq, js, rate_hz, Interpolation::Pchip)
}

fn build_with(
    seq: &MultiValueSeq,
    js: &JointSet,
    rate_hz: f64,
    interpolation: Interpolation,
) -> Trajectory {
    let map = ColumnMap::in_dof_order(js, seq.num_parts).unwrap();
    let options = Options {
        rate_hz,
        interpolation,
        ..Options::default()
    };
    trajectory::build_values(js, seq, &map, &options)
        .unwrap_or_else(|e| panic!("{e}"))
        .trajectory
}

/// Every tick's positions into one buffer, as `motiond resample` does.
fn resample(seq: &MultiValueSeq, js: &JointSet, out: &mut Vec<f64>) {
    let t = build(seq, js, 1000.0);
    let mut cursor = Cursor::default();
    let mut tick = vec![0.0; seq.num_parts];
    out.clear();
    for k in 0..t.ticks() {
        t.column_positions(&mut cursor, k, &mut tick);
        out.extend_from_slice(&tick);
    }
}

/// CPU time of the calling thread: on a machine shared with other jobs, wall time mostly measures
/// waiting for a core.
fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write into; the clock id is a constant Linux provides.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Runs `f` `iters` times and returns the thread CPU time it took.
fn cpu_time(iters: u64, mut f: impl FnMut()) -> Duration {
    let start = thread_cpu_time();
    for _ in 0..iters {
        f();
    }
    thread_cpu_time() - start
}

fn benches(c: &mut Criterion) {
    let big = uneven_motion(100_000, 32);
    let js32 = joints(32);
    let ticks = build(&big, &js32, 1000.0).ticks();
    let mut g = c.benchmark_group("resample 100000 uneven frames x 32 joints to 1 kHz");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(8));
    g.throughput(Throughput::Elements(ticks * 32));
    let mut out = Vec::new();
    g.bench_function("build + prove + sample every tick, CPU time", |b| {
        b.iter_custom(|iters| cpu_time(iters, || resample(black_box(&big), &js32, &mut out)))
    });
    g.finish();

    let mut g = c.benchmark_group("limit proof (with pchip slopes), 100000 frames x 32 joints");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    for rate in [1000.0, 8000.0] {
        g.bench_function(format!("{rate} Hz, CPU time"), |b| {
            b.iter_custom(|iters| {
                cpu_time(iters, || {
                    black_box(build(black_box(&big), &js32, rate));
                })
            })
        });
    }
    // Linear: every step and corner as the drives see it, at any phase of the ticks.
    g.bench_function("linear, 1000 Hz, CPU time", |b| {
        b.iter_custom(|iters| {
            cpu_time(iters, || {
                black_box(build_with(
                    black_box(&big),
                    &js32,
                    1000.0,
                    Interpolation::Linear,
                ));
            })
        })
    });
    g.finish();

    let seq64 = uneven_motion(2_000, 64);
    let js64 = joints(64);
    let t = build(&seq64, &js64, 1000.0);
    let mut out = vec![Setpoint::default(); 64];
    let mut g = c.benchmark_group("one tick, 64 joints");
    g.warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    g.throughput(Throughput::Elements(64));
    let mut cursor = Cursor::default();
    let mut k = 0;
    g.bench_function("sample in tick order, CPU time", |b| {
        b.iter_custom(|iters| {
            cpu_time(iters, || {
                t.sample(&mut cursor, k, &mut out);
                k = (k + 1) % t.ticks();
                black_box(&out);
            })
        })
    });
    g.finish();
}

/// Accepting a 2 M-sample looped playback on the loop thread: the first and last ticks and the
/// seam verdict, kept at build, against sampling the last tick from a fresh cursor.
fn accept(c: &mut Criterion) {
    let rows = 2_000_000;
    let seq = MultiValueSeq {
        num_parts: 1,
        timing: Timing::Fixed { frame_rate: 1000.0 },
        values: (0..rows)
            .map(|i| {
                let x = 2.0 * std::f64::consts::PI * i as f64 / (rows - 1) as f64;
                0.5 * (1.0 - x.cos())
            })
            .collect(),
    };
    let js = joints(1);
    let t = build(&seq, &js, 1000.0);
    assert!(t.loop_seam().is_ok());
    let mut g = c.benchmark_group("accept a looped playback of 2 M samples");
    g.warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2));
    g.bench_function("first/last setpoints + seam verdict, CPU time", |b| {
        b.iter_custom(|iters| {
            cpu_time(iters, || {
                let t = black_box(&t);
                black_box((
                    t.first_setpoints(),
                    t.last_setpoints(),
                    t.loop_seam().is_ok(),
                ));
            })
        })
    });
    let mut out = [Setpoint::default()];
    g.bench_function("sample the last tick from a fresh cursor, CPU time", |b| {
        b.iter_custom(|iters| {
            cpu_time(iters, || {
                t.sample(&mut Cursor::default(), t.ticks() - 1, &mut out);
                black_box(&out);
            })
        })
    });
    g.finish();
}

criterion_group!(trajectory_benches, benches, accept);
criterion_main!(trajectory_benches);
