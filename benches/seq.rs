//! .seq load throughput (MB/s of file text) and peak heap during a load.
//!
//! `cargo bench --bench seq` measures:
//! - `SR1WalkPattern2.seq` (corpus, 2.5 MB, fixed rate) through `seq::parse` (the fast scanner) and
//!   through the general YAML reader alone, for the ratio between the two;
//! - a generated 100 000-frame × 32-joint variable-interval file (the layout of
//!   ../shared/tools/make_big_seq.py, ~33 MB) through `seq::load`, file read included.
//!
//! Then it loads the big file once more under a counting allocator and prints the peak heap in use
//! during the load next to the decoded f64 size (frames × (joints + 1 time) × 8 bytes).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark fails loudly where its setup breaks"
)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::fmt::Write as _;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use motiond::motion::seq;

/// Counts live heap bytes and their high-water mark.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            // A growing realloc may copy, so old and new count together for the peak; a
            // shrinking one never needs both.
            let old = layout.size();
            let during = if new_size > old { old + new_size } else { old };
            PEAK.fetch_max(
                LIVE.load(Ordering::Relaxed) - old + during,
                Ordering::Relaxed,
            );
            LIVE.fetch_add(new_size, Ordering::Relaxed);
            LIVE.fetch_sub(old, Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const FRAMES: usize = 100_000;
const JOINTS: usize = 32;

fn corpus() -> PathBuf {
    std::env::var_os("MOTIOND_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus"))
}

/// C's `%.6g`, as the Python generator writes numbers.
fn g6(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let exp = v.abs().log10().floor() as i32;
    let s = if (-5..6).contains(&exp) {
        let decimals = usize::try_from(5 - exp).unwrap_or(0);
        format!("{v:.decimals$}")
    } else {
        let m = format!("{v:.5e}");
        let (mantissa, e) = m.split_once('e').unwrap_or((&m, "0"));
        let e: i32 = e.parse().unwrap_or(0);
        return format!(
            "{}e{}{:02}",
            trim_zeros(mantissa),
            if e < 0 { '-' } else { '+' },
            e.abs()
        );
    };
    trim_zeros(&s).to_owned()
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// ../shared/tools/make_big_seq.py in Rust (time steps 1–20 ms from a fixed-seed generator).
fn make_big_seq(path: &Path) {
    let mut out = String::with_capacity(FRAMES * JOINTS * 11);
    out.push_str("type: CompositeSeq\ncontent: BodyMotion\nformatVersion: 2\nhasFrameTime: true\n");
    let _ = write!(
        out,
        "numFrames: {FRAMES}\ncomponents:\n  -\n    type: MultiValueSeq\n    content: JointDisplacement\n    numParts: {JOINTS}\n    frames:\n"
    );
    let freqs: Vec<f64> = (0..JOINTS).map(|k| 0.1 + 0.05 * k as f64).collect();
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut t = 0.0f64;
    for _ in 0..FRAMES {
        let _ = write!(out, "      - [ {t:.6}");
        for (k, f) in freqs.iter().enumerate() {
            let v = 0.8 * (2.0 * std::f64::consts::PI * f * t + k as f64).sin();
            let _ = write!(out, ", {}", g6(v));
        }
        out.push_str(" ]\n");
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        t += 0.001 + 0.019 * (state >> 11) as f64 / (1u64 << 53) as f64;
    }
    std::fs::write(path, out).expect("write the generated file");
}

fn benches(c: &mut Criterion) {
    let sr1 = corpus().join("seq/v2/SR1WalkPattern2.seq");
    let text = std::fs::read_to_string(&sr1).expect("corpus file SR1WalkPattern2.seq");
    let mut group = c.benchmark_group("seq");
    group
        .sample_size(10)
        .warm_up_time(std::time::Duration::from_secs(1))
        .measurement_time(std::time::Duration::from_secs(4));
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.bench_function("SR1WalkPattern2.seq fast", |b| {
        b.iter(|| seq::parse(black_box(&text), &sr1).expect("loads"))
    });
    group.bench_function("SR1WalkPattern2.seq general", |b| {
        b.iter(|| seq::parse_general(black_box(&text), &sr1).expect("loads"))
    });

    let dir = tempfile::tempdir().expect("temp dir");
    let big = dir.path().join("big.seq");
    make_big_seq(&big);
    let size = std::fs::metadata(&big).map(|m| m.len()).unwrap_or(0);
    group.throughput(Throughput::Bytes(size));
    group.bench_function("100000x32 timed load", |b| {
        b.iter(|| seq::load(black_box(&big)).expect("loads"))
    });
    group.finish();

    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let motion = seq::load(&big).expect("loads");
    let peak = PEAK.load(Ordering::Relaxed) - base;
    let rows = motion.joint_displacement().map_or(0, |j| j.rows());
    let decoded = rows * (JOINTS + 1) * 8;
    println!(
        "seq peak heap while loading {:.1} MB file ({rows} x {JOINTS} timed): {:.1} MB = {:.2}x the decoded f64 size ({:.1} MB)",
        size as f64 / 1e6,
        peak as f64 / 1e6,
        peak as f64 / decoded as f64,
        decoded as f64 / 1e6
    );
}

criterion_group!(seq_benches, benches);
criterion_main!(seq_benches);
