//! The loop on its real-time thread and the kernel's clock: 2 s of motion at 1 kHz on the
//! simulated backend. Checks that every tick run sent the next sample (a late tick delays the
//! path, never skips along it) and that the simulated motors followed; no timing assertions
//! (the machine is shared). Where SCHED_FIFO or mlockall is not permitted the loop runs with
//! warnings, and so does this test.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

use std::time::{Duration, Instant};

use motiond::backend::sim::{Sim, SimSettings};
use motiond::motion::seq::{MultiValueSeq, Timing};
use motiond::robot::Limits;
use motiond::rt::{self, Command, MonotonicClock, Outcome, Playback, Settings, State};
use motiond::trajectory::{
    ColumnMap, Cursor, DofLimits, JointSet, Options, Setpoint, Trajectory, build_values,
};

const RATE: f64 = 1000.0;
const N: usize = 4;

fn joints() -> JointSet {
    JointSet::uniform(
        N,
        DofLimits {
            position: Limits::symmetric(2.0),
            velocity: Limits::symmetric(2.0),
            acceleration: Limits::symmetric(20.0),
            effort: Limits::symmetric(40.0),
        },
    )
}

/// 2 s, at rest at both ends, starting where the robot is (0): no approach needed.
fn motion(js: &JointSet) -> Trajectory {
    let values = (0..=100)
        .flat_map(|i| {
            let t = i as f64 / 50.0;
            (0..N).map(move |j| 0.1 * (j as f64 + 1.0) * (1.0 - (std::f64::consts::PI * t).cos()))
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

fn wait_for(handle: &rt::LoopHandle, state: State) {
    let give_up = Instant::now() + Duration::from_secs(20);
    while handle.state() != state {
        assert!(
            Instant::now() < give_up,
            "never {state:?}: {:?}",
            handle.status()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn two_seconds_at_one_kilohertz_on_the_real_time_thread() {
    let js = joints();
    let sim = Sim::new(&js, RATE, &SimSettings::default());
    let settings = Settings {
        cpu: Some(1),
        priority: Some(80),
        lock_memory: true,
        // Timing is the benchmark's business: a wake-up late on a busy machine must not fault.
        max_late_s: Some(1.0),
        max_consecutive_overruns: 0,
        trace_ticks: 1 << 14,
        ..Settings::default()
    };
    let handle = rt::spawn(settings, Box::new(sim), None, js.clone(), MonotonicClock).unwrap();
    eprintln!("obtained: {:?}", handle.obtained());
    handle.send(Command::Enable).unwrap();
    wait_for(&handle, State::Idle);
    let motion = motion(&js);
    let approach = Trajectory::hold(&[0.0; N], RATE);
    let expected = motion.clone();
    let pb = Playback::new(1, approach, motion);
    handle.send(Command::Play(Box::new(pb))).unwrap();
    wait_for(&handle, State::Holding);
    let status = handle.status();
    assert_eq!(handle.outcomes(), vec![(1, Outcome::Finished)]);
    assert_eq!((status.limit_violations, status.fault), (0, None));
    let first = status.first_command_tick.unwrap();
    let mut rows = Vec::new();
    handle.trace().unwrap().drain_into(&mut rows);
    assert_eq!(handle.trace().unwrap().dropped(), 0);
    handle.shutdown(Duration::from_secs(5)).unwrap();

    // Tick `first + i` sent sample i, whatever the wall clock did, and the motors followed.
    let played: Vec<_> = rows.iter().filter(|r| r.tick >= first).take(2001).collect();
    assert_eq!(played.len(), 2001);
    let mut out = [Setpoint::default(); N];
    let mut cursor = Cursor::default();
    for (i, row) in played.iter().enumerate() {
        expected.sample(&mut cursor, i as u64, &mut out);
        for ((c, m), o) in row.commanded.iter().zip(&row.measured).zip(&out) {
            assert_eq!(c.position, o.position, "{row:?} {i}");
            assert!((m - o.position).abs() < 0.01, "{row:?}");
        }
    }
    assert_eq!(expected.ticks(), 2001);
}
