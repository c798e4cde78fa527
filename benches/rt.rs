//! Per-tick cost of the loop for 64 DOFs: commands, sample, path speed, guard, sim write and read,
//! status publish and timing statistics — one `Loop::step` on the manual clock (which never
//! sleeps), so the figure is the tick's own work. Target: ≤ 5 µs p99 (see `motiond play` for the
//! per-tick execution time under real scheduling).

use criterion::{Criterion, criterion_group, criterion_main};
use motiond::backend::sim::{Sim, SimSettings};
use motiond::rt::{Command, Loop, ManualClock, Playback, Repeat, Settings, State};
use motiond::seq::{MultiValueSeq, Timing};
use motiond::skel::Limits;
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
    let values = (0..=1000)
        .flat_map(|i| {
            let t = i as f64 / 100.0;
            (0..N).map(move |j| {
                let w = std::f64::consts::TAU * (1 + j % 4) as f64 / 10.0;
                0.5 * (1.0 - (w * t).cos())
            })
        })
        .collect();
    let seq = MultiValueSeq {
        num_parts: N,
        timing: Timing::Fixed { frame_rate: 100.0 },
        values,
    };
    let map = ColumnMap::in_dof_order(js, N).unwrap();
    let options = Options {
        rate_hz: RATE,
        ..Options::default()
    };
    build_values(js, &seq, &map, &options).unwrap().trajectory
}

fn bench(c: &mut Criterion) {
    let js = joints();
    let sim = Sim::new(&js, RATE, &SimSettings::default());
    let (mut lp, handle) = Loop::new(
        &Settings::default(),
        Box::new(sim),
        &js,
        ManualClock::new(0),
    )
    .unwrap();
    handle.send(Command::Enable).unwrap();
    while handle.state() != State::Idle {
        lp.step();
    }
    let pb = Playback {
        motion_id: 1,
        approach: Trajectory::hold(&[0.0; N], RATE),
        motion: motion(&js),
        repeat: Repeat::Forever,
        start_at: None,
    };
    handle.send(Command::Play(Box::new(pb))).unwrap();
    lp.step();
    assert_eq!(handle.state(), State::Playing);
    c.bench_function("rt tick, 64 DOFs playing on the sim", |b| {
        b.iter(|| lp.step())
    });
    let s = handle.status();
    assert_eq!(
        (s.state, s.fault, s.limit_violations),
        (State::Playing, None, 0)
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
