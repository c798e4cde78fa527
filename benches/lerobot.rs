//! `motiond import lerobot` throughput: frames a second for one 50 000-frame episode.
//!
//! `cargo bench --bench lerobot` writes a LeRobot v3.0 dataset with pyarrow
//! (`tests/lerobot/write_dataset.py`: episodes of 1 000, 50 000 and 1 000 frames in one data file,
//! six joints, snappy, one row group an episode — LeRobot's layout) and measures the import of
//! the long episode: locating it in `meta/episodes/`, reading `action` and `timestamp`,
//! converting to radians and writing the .seq file (atomically, fsync included) — what the
//! command does once the robot is loaded. Criterion prints the throughput in frames/s. Needs
//! `python3` with pyarrow (`pip install pyarrow`); without it the benchmark says so and ends.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark fails loudly where its setup breaks"
)]

use std::hint::black_box;
use std::path::PathBuf;
use std::process::Command;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use motiond::motion::lerobot::{self, Dataset, Joint};

const FRAMES: u64 = 50_000;

fn so101() -> Vec<Joint> {
    [
        ("shoulder_pan", -1.91986, 1.91986),
        ("shoulder_lift", -1.74533, 1.74533),
        ("elbow_flex", -1.69, 1.69),
        ("wrist_flex", -1.65806, 1.65806),
        ("wrist_roll", -2.74385, 2.84121),
        ("gripper", -0.174533, 1.74533),
    ]
    .into_iter()
    .map(|(name, lower, upper)| Joint {
        name: name.into(),
        lower,
        upper,
    })
    .collect()
}

fn import(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/lerobot/write_dataset.py");
    let spec = format!(r#"{{"episodes": [1000, {FRAMES}, 1000], "episodes_per_file": 3}}"#);
    let made = Command::new("python3")
        .arg(&script)
        .arg(dir.path())
        .arg(spec)
        .status();
    if !made.is_ok_and(|s| s.success()) {
        eprintln!("skipping: python3 with pyarrow is needed to write the dataset");
        return;
    }
    let out = dir.path().join("episode.seq");
    let joints = so101();
    let percent = ["gripper".to_string()];
    let mut group = c.benchmark_group("lerobot_import");
    group.throughput(Throughput::Elements(FRAMES));
    group.sample_size(20);
    group.bench_function("episode_50000_frames", |b| {
        b.iter(|| {
            let dataset = Dataset::open(dir.path()).unwrap();
            let episode = dataset.read(1, "action").unwrap();
            let imported = lerobot::convert(
                dataset.info_path(),
                &episode,
                dataset.fps(),
                &joints,
                &percent,
            )
            .unwrap();
            assert_eq!(imported.frame_count() as u64, FRAMES);
            imported.write(&out).unwrap();
            black_box(imported.rows.len())
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    // No plots: the report needs only the numbers (and plotters finds no font here).
    config = Criterion::default().without_plots();
    targets = import
}
criterion_main!(benches);
