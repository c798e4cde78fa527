//! The loop on its real-time thread and the kernel's clock: 2 s of motion at 1 kHz on the
//! simulated backend. Checks the tick count and that the simulated motors followed; no timing
//! assertions (the machine is shared). Where SCHED_FIFO or mlockall is not permitted the loop
//! runs with warnings, and so does this test.

use std::time::{Duration, Instant};

use motiond::backend::sim::{Sim, SimSettings};
use motiond::rt::{self, Command, MonotonicClock, Outcome, Playback, Settings, State};
use motiond::seq::{MultiValueSeq, Timing};
use motiond::skel::Limits;
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
    let sim = Sim::new(
        &js,
        RATE,
        &SimSettings {
            trace_ticks: 10_000,
            ..SimSettings::default()
        },
    );
    let trace = sim.trace();
    let settings = Settings {
        cpu: Some(1),
        priority: Some(80),
        lock_memory: true,
        ..Settings::default()
    };
    let handle = rt::spawn(settings, Box::new(sim), js.clone(), MonotonicClock).unwrap();
    eprintln!("obtained: {:?}", handle.obtained());
    handle.send(Command::Enable).unwrap();
    wait_for(&handle, State::Idle);
    let motion = motion(&js);
    let approach = Trajectory::hold(&[0.0; N], RATE);
    let expected = motion.clone();
    let pb = Playback {
        motion_id: 1,
        approach,
        motion,
        looped: false,
        start_at: None,
    };
    handle.send(Command::Play(Box::new(pb))).unwrap();
    wait_for(&handle, State::Holding);
    let status = handle.status();
    assert_eq!(handle.outcomes(), vec![(1, Outcome::Finished)]);
    assert_eq!((status.limit_violations, status.fault), (0, None));
    let first = status.first_command_tick.unwrap();
    handle.shutdown(Duration::from_secs(5)).unwrap();

    // Every loop tick of the motion is in the trace once, unless an overrun skipped it; the
    // commanded value at tick `first + i` is sample i, and the motors followed it.
    let mut rows = 0u64;
    let mut skipped = 0u64;
    let mut previous = None;
    let mut out = [Setpoint::default(); N];
    let mut cursor = Cursor::default();
    for i in 0..trace.len() {
        let row = trace.row(i).unwrap();
        if row.tick < first || row.tick > first + 2000 {
            continue;
        }
        if let Some(p) = previous {
            skipped += row.tick - p - 1;
        }
        previous = Some(row.tick);
        rows += 1;
        expected.sample(&mut cursor, row.tick - first, &mut out);
        for j in 0..N {
            assert!(
                (row.commanded[j] - out[j].position).abs() < 1e-12,
                "{row:?} {out:?} {first}"
            );
            // A late tick skips the path ahead while the simulated motor steps once: it only
            // tracks this closely when no tick was late (other real-time loops on the machine).
            if status.overruns == 0 {
                assert!((row.simulated[j] - out[j].position).abs() < 0.01, "{row:?}");
            }
        }
    }
    assert_eq!(expected.ticks(), 2001);
    assert_eq!(rows + skipped, 2001, "{} overruns", status.overruns);
    assert!(skipped <= status.overruns * 1000);
}
