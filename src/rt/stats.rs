//! Timing statistics the loop records without allocating, read by the control side without a lock.
//!
//! The loop is the only writer of a [`Histogram`]: it updates plain atomics (a relaxed load and
//! store each, as cheap as ordinary memory on x86), so a reader can never make it wait. A reader
//! may see a tick half recorded; percentiles of thousands of samples do not care.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// 0.1 µs buckets up to 100 µs, where wake-up latencies and execution times live…
const FINE_NS: u64 = 100;
const FINE_BUCKETS: usize = 1_000;
const FINE_END_NS: u64 = FINE_NS * FINE_BUCKETS as u64;
/// …then 1 µs buckets up to 10 ms, then one overflow bucket (the exact maximum is kept apart).
const COARSE_NS: u64 = 1_000;
const COARSE_END_NS: u64 = 10_000_000;
const COARSE_BUCKETS: usize = ((COARSE_END_NS - FINE_END_NS) / COARSE_NS) as usize;
const BUCKETS: usize = FINE_BUCKETS + COARSE_BUCKETS + 1;

/// A fixed-bucket histogram of durations in nanoseconds.
#[derive(Debug)]
pub struct Histogram {
    buckets: Box<[AtomicU64]>,
    count: AtomicU64,
    sum_ns: AtomicU64,
    min_ns: AtomicU64,
    max_ns: AtomicU64,
}

/// Percentiles of a [`Histogram`], in microseconds. All zero while empty.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Summary {
    pub count: u64,
    pub min: f64,
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

fn bucket_of(ns: u64) -> usize {
    if ns < FINE_END_NS {
        (ns / FINE_NS) as usize
    } else if ns < COARSE_END_NS {
        FINE_BUCKETS + ((ns - FINE_END_NS) / COARSE_NS) as usize
    } else {
        BUCKETS - 1
    }
}

/// The upper edge of bucket `i`: a percentile is reported as the bound it is known to be below.
fn upper_edge_ns(i: usize) -> u64 {
    if i < FINE_BUCKETS {
        (i as u64 + 1) * FINE_NS
    } else if i < BUCKETS - 1 {
        FINE_END_NS + (i - FINE_BUCKETS + 1) as u64 * COARSE_NS
    } else {
        u64::MAX
    }
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

/// `n` zeroed atomics in one zeroed allocation: 11 000 buckets made one by one cost a millisecond
/// unoptimized, and tests build loops by the thousand.
fn zeroed(n: usize) -> Box<[AtomicU64]> {
    let Ok(layout) = std::alloc::Layout::array::<AtomicU64>(n) else {
        return (0..n).map(|_| AtomicU64::new(0)).collect();
    };
    if layout.size() == 0 {
        return Box::new([]);
    }
    // SAFETY: the layout is not zero-sized; all-zero bytes are a valid AtomicU64 (0); the box owns
    // an allocation of the global allocator made with exactly the layout it frees with.
    unsafe {
        let ptr = std::alloc::alloc_zeroed(layout).cast::<AtomicU64>();
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, n))
    }
}

impl Histogram {
    pub fn new() -> Self {
        Self {
            buckets: zeroed(BUCKETS),
            count: AtomicU64::new(0),
            sum_ns: AtomicU64::new(0),
            min_ns: AtomicU64::new(u64::MAX),
            max_ns: AtomicU64::new(0),
        }
    }

    /// Records one duration. Only one thread may record (the loop); any thread may read.
    pub fn record(&self, ns: u64) {
        let bump = |a: &AtomicU64, by: u64| a.store(a.load(Relaxed).wrapping_add(by), Relaxed);
        if let Some(b) = self.buckets.get(bucket_of(ns)) {
            bump(b, 1);
        }
        bump(&self.count, 1);
        bump(&self.sum_ns, ns);
        if ns < self.min_ns.load(Relaxed) {
            self.min_ns.store(ns, Relaxed);
        }
        if ns > self.max_ns.load(Relaxed) {
            self.max_ns.store(ns, Relaxed);
        }
    }

    pub fn summary(&self) -> Summary {
        let counts: Vec<u64> = self.buckets.iter().map(|b| b.load(Relaxed)).collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return Summary::default();
        }
        let min = self.min_ns.load(Relaxed);
        let max = self.max_ns.load(Relaxed);
        let percentile = |q: f64| {
            let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
            let mut seen = 0;
            for (i, c) in counts.iter().enumerate() {
                seen += c;
                if seen >= rank {
                    return upper_edge_ns(i).clamp(min, max);
                }
            }
            max
        };
        let us = |ns: u64| ns as f64 / 1_000.0;
        let count = self.count.load(Relaxed).max(1);
        Summary {
            count: total,
            min: us(min),
            mean: self.sum_ns.load(Relaxed) as f64 / count as f64 / 1_000.0,
            p50: us(percentile(0.50)),
            p99: us(percentile(0.99)),
            p999: us(percentile(0.999)),
            max: us(max),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn empty_histogram_summarises_to_zero() {
        assert_eq!(Histogram::new().summary(), Summary::default());
    }

    #[test]
    fn percentiles_fall_on_bucket_edges_within_min_and_max() {
        let h = Histogram::new();
        for i in 1..=1000u64 {
            h.record(i * 1_000); // 1 µs … 1 ms
        }
        let s = h.summary();
        assert_eq!(s.count, 1000);
        assert_eq!(s.min, 1.0);
        assert_eq!(s.max, 1000.0);
        assert_eq!(s.p50, 501.0);
        assert_eq!(s.p99, 991.0);
        assert!((s.mean - 500.5).abs() < 1e-9);
    }

    #[test]
    fn overflow_is_reported_by_the_exact_maximum() {
        let h = Histogram::new();
        h.record(50);
        h.record(60_000_000);
        let s = h.summary();
        assert_eq!(s.max, 60_000.0);
        assert_eq!(s.p99, 60_000.0);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn a_percentile_is_an_upper_bound_no_coarser_than_its_bucket(
            values in proptest::collection::vec(0u64..20_000_000, 1..200)
        ) {
            let h = Histogram::new();
            for &v in &values {
                h.record(v);
            }
            let s = h.summary();
            let mut sorted = values.clone();
            sorted.sort_unstable();
            let rank = ((0.99 * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
            let exact = sorted[rank - 1] as f64 / 1_000.0;
            let width = if exact < 100.0 { 0.1 } else { 1.0 };
            prop_assert!(s.p99 >= exact - 1e-9);
            prop_assert!(s.p99 <= exact + width + 1e-9 || exact >= 10_000.0);
            prop_assert!(s.min <= s.p50 && s.p50 <= s.p99 && s.p99 <= s.p999 && s.p999 <= s.max);
        }
    }
}
