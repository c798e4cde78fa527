//! SKEL parsing speed on real robots: DART's biped (20 joints, 37 DOFs, 36 KB) and SR1 (30 joints,
//! 35 DOFs). Reads the corpus from `$MOTIOND_CORPUS` or ../shared/corpus.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark fails loudly where its setup breaks"
)]

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

fn corpus() -> PathBuf {
    std::env::var_os("MOTIOND_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus"))
}

fn parse(c: &mut Criterion) {
    let corpus = corpus();
    let mut group = c.benchmark_group("skel_parse");
    for (name, path) in [
        ("biped", corpus.join("skel/files/data/skel/biped.skel")),
        ("sr1", corpus.join("robots/sr1.skel")),
    ] {
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (set MOTIOND_CORPUS)", path.display()));
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.bench_function(name, |b| {
            b.iter(|| {
                motiond::robot::skel::parse(black_box(&text), &path).map(|w| w.skeletons.len())
            })
        });
        // The XML parse alone: the floor, so the model-building overhead reads as a ratio.
        group.bench_function(format!("{name}_xml_only"), |b| {
            b.iter(|| roxmltree::Document::parse(black_box(&text)).map(|d| d.descendants().count()))
        });
    }
    group.finish();
}

criterion_group!(benches, parse);
criterion_main!(benches);
