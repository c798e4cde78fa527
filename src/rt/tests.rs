//! The loop's logic on the manual clock and the simulated backend: no threads, no sleeping.

use super::*;
use crate::backend::FaultKind;
use crate::backend::sim::{Sim, SimFault, SimFaultKind, SimSettings};
use crate::seq::{MultiValueSeq, Timing};
use crate::skel::Limits;
use crate::trajectory::{ColumnMap, Cursor, DofLimits, Options, Setpoint, build_values};

const RATE: f64 = 1000.0;

fn joints(n: usize) -> JointSet {
    JointSet::uniform(
        n,
        DofLimits {
            position: Limits::symmetric(2.0),
            velocity: Limits::symmetric(2.0),
            acceleration: Limits::symmetric(20.0),
            effort: Limits::symmetric(100.0),
        },
    )
}

/// A trajectory through `f(t)` sampled at 100 Hz for `secs`, resampled (pchip) without a proof:
/// the loop's own guard is under test.
fn through(n: usize, secs: f64, f: impl Fn(f64) -> f64) -> Trajectory {
    let rows = (secs * 100.0).round() as usize + 1;
    let values = (0..rows)
        .flat_map(|i| std::iter::repeat_n(f(i as f64 / 100.0), n))
        .collect();
    let seq = MultiValueSeq {
        num_parts: n,
        timing: Timing::Fixed { frame_rate: 100.0 },
        values,
    };
    let free = JointSet::unconstrained(n);
    let map = ColumnMap::in_dof_order(&free, n).unwrap();
    let options = Options {
        rate_hz: RATE,
        ..Options::default()
    };
    build_values(&free, &seq, &map, &options)
        .unwrap()
        .trajectory
}

/// A smooth rest-to-rest move from `from` to `to` over `secs` (cosine profile); `secs` = 0 is a
/// single sample at `from`.
fn move_between(n: usize, from: f64, to: f64, secs: f64) -> Trajectory {
    if secs == 0.0 {
        return Trajectory::hold(&vec![from; n], RATE);
    }
    let w = std::f64::consts::PI / secs;
    through(n, secs, |t| {
        from + (to - from) / 2.0 * (1.0 - (w * t).cos())
    })
}

/// Out to `to` and back to `from` (loopable).
fn there_and_back(n: usize, from: f64, to: f64, secs: f64) -> Trajectory {
    let w = 2.0 * std::f64::consts::PI / secs;
    through(n, secs, |t| {
        from + (to - from) / 2.0 * (1.0 - (w * t).cos())
    })
}

struct Rig {
    lp: Loop<ManualClock>,
    handle: LoopHandle,
    trace: Arc<crate::backend::sim::Trace>,
}

fn rig(n: usize, sim: SimSettings) -> Rig {
    let js = joints(n);
    let settings = Settings::default();
    let backend = Sim::new(
        &js,
        RATE,
        &SimSettings {
            trace_ticks: 100_000,
            ..sim
        },
    );
    let trace = backend.trace();
    let (lp, handle) = Loop::new(&settings, Box::new(backend), &js, ManualClock::new(0)).unwrap();
    Rig { lp, handle, trace }
}

impl Rig {
    fn run(&mut self, ticks: u64) {
        for _ in 0..ticks {
            self.lp.step();
        }
    }

    /// Steps until `done` holds for the published values (cheap: no statistics).
    fn until(&mut self, max: u64, done: impl Fn(&status::Published) -> bool) -> Status {
        for _ in 0..max {
            self.lp.step();
            if done(&self.handle.shared.read().values) {
                return self.handle.status();
            }
        }
        panic!("not reached in {max} ticks: {:?}", self.handle.status());
    }

    fn enable(&mut self) {
        self.handle.send(Command::Enable).unwrap();
        self.until(100, |s| s.state == State::Idle);
    }

    fn play(&mut self, id: u32, approach: Trajectory, motion: Trajectory, looped: bool) {
        let pb = Playback {
            motion_id: id,
            approach,
            motion,
            looped,
            start_at: None,
        };
        self.handle.send(Command::Play(Box::new(pb))).unwrap();
    }
}

#[test]
fn plays_a_motion_to_its_end_then_holds_its_last_sample() {
    let mut r = rig(2, SimSettings::default());
    assert_eq!(r.handle.status().state, State::Disabled);
    r.enable();
    r.play(
        7,
        move_between(2, 0.0, 0.0, 0.0),
        move_between(2, 0.0, 1.0, 1.0),
        false,
    );
    let s = r.until(10, |s| s.state == State::Playing);
    assert_eq!(s.motion_id, Some(7));
    let first = s.first_command_tick.unwrap();
    assert_eq!(first, s.tick);
    let s = r.until(2000, |s| s.state == State::Holding);
    assert_eq!(s.motion_id, None);
    assert_eq!(s.commanded, vec![1.0, 1.0]);
    r.run(500);
    let s = r.handle.status();
    assert!(s.positions.iter().all(|p| (p - 1.0).abs() < 1e-6), "{s:?}");
    assert!(s.max_tracking_error.iter().all(|&e| e < 0.01), "{s:?}");
    assert_eq!((s.limit_violations, s.overruns, s.fault), (0, 0, None));
    assert_eq!(r.handle.outcomes(), vec![(7, Outcome::Finished)]);
    // The sim followed the trajectory.
    let expect = move_between(1, 0.0, 1.0, 1.0);
    let mut out = [Setpoint::default()];
    let mut cursor = Cursor::default();
    let mut compared = 0;
    for i in 0..r.trace.len() {
        let row = r.trace.row(i).unwrap();
        if row.tick >= first && row.tick < first + 1000 {
            expect.sample(&mut cursor, row.tick - first, &mut out);
            assert!((row.commanded[0] - out[0].position).abs() < 1e-12);
            assert!((row.simulated[0] - out[0].position).abs() < 0.01);
            compared += 1;
        }
    }
    assert_eq!(compared, 1000);
}

#[test]
fn stop_decelerates_within_the_limits_and_holds() {
    let mut r = rig(1, SimSettings::default());
    r.enable();
    r.play(
        1,
        move_between(1, 0.0, 0.0, 0.0),
        move_between(1, 0.0, 1.5, 1.5),
        false,
    );
    r.until(800, |s| s.time_s >= 0.7);
    r.handle.send(Command::Stop).unwrap();
    let s = r.until(10, |s| s.state == State::Stopping);
    let at = s.commanded[0];
    let s = r.until(2000, |s| s.state == State::Holding);
    assert!(s.commanded[0] > at && s.commanded[0] < 1.5);
    assert_eq!(s.limit_violations, 0);
    assert_eq!(r.handle.outcomes(), vec![(1, Outcome::Stopped)]);
}

#[test]
fn pause_slows_along_the_path_and_resume_continues() {
    let mut r = rig(1, SimSettings::default());
    r.enable();
    r.play(
        1,
        move_between(1, 0.0, 0.0, 0.0),
        move_between(1, 0.0, 1.5, 2.0),
        false,
    );
    r.until(1000, |s| s.time_s >= 0.5);
    r.handle.send(Command::Pause).unwrap();
    r.run(2000);
    let s = r.handle.status();
    assert_eq!(s.state, State::Paused);
    let t = s.time_s;
    r.run(100);
    assert_eq!(r.handle.status().time_s, t, "paused motion stays put");
    r.handle.send(Command::Resume).unwrap();
    let s = r.until(10, |s| s.state == State::Playing);
    assert!(s.time_s >= t);
    let s = r.until(5000, |s| s.state == State::Holding);
    assert_eq!(s.commanded[0], 1.5);
    assert_eq!((s.limit_violations, s.fault), (0, None));
}

#[test]
fn looped_playback_wraps_and_a_non_looping_motion_is_refused() {
    let mut r = rig(1, SimSettings::default());
    r.enable();
    r.play(
        1,
        move_between(1, 0.0, 0.0, 0.0),
        move_between(1, 0.0, 1.0, 0.5),
        true,
    );
    r.run(20);
    let s = r.handle.status();
    assert_eq!(s.state, State::Idle);
    assert_eq!(s.refused, 1);
    assert_eq!(
        r.handle.outcomes(),
        vec![(1, Outcome::Refused(Refusal::NotLoopable { dof: 0 }))]
    );
    r.play(
        2,
        move_between(1, 0.0, 0.0, 0.0),
        there_and_back(1, 0.0, 0.2, 1.0),
        true,
    );
    r.run(2300);
    let s = r.handle.status();
    assert_eq!(s.state, State::Playing, "{s:?}");
    assert!(s.time_s > 0.2 && s.time_s < 0.4, "{s:?}");
    r.handle.send(Command::Stop).unwrap();
    let s = r.until(2000, |s| s.state == State::Holding);
    assert_eq!((s.limit_violations, s.fault), (0, None));
}

#[test]
fn an_approach_that_starts_elsewhere_is_refused() {
    let mut r = rig(1, SimSettings::default());
    r.enable();
    r.play(
        3,
        move_between(1, 0.5, 0.5, 0.0),
        move_between(1, 0.5, 1.0, 0.5),
        false,
    );
    r.run(2);
    assert_eq!(
        r.handle.outcomes(),
        vec![(3, Outcome::Refused(Refusal::Jump { dof: 0 }))]
    );
}

#[test]
fn a_sample_outside_the_limits_faults_and_holds() {
    let mut r = rig(1, SimSettings::default());
    r.enable();
    // 3 rad is outside ±2: the guard stops it before the backend sees it.
    r.play(
        4,
        move_between(1, 0.0, 0.0, 0.0),
        move_between(1, 0.0, 3.0, 3.0),
        false,
    );
    let s = r.until(3000, |s| s.state == State::Fault);
    let f = s.fault.unwrap();
    assert_eq!(
        (f.kind, f.dof, f.code),
        (FaultKind::Limit, Some(0), player::LIMIT_POSITION)
    );
    assert_eq!(s.limit_violations, 1);
    assert!(s.commanded[0] <= 2.0);
    assert_eq!(r.handle.outcomes(), vec![(4, Outcome::Faulted)]);
    r.handle.send(Command::ClearFault).unwrap();
    r.until(5, |s| s.state == State::Holding && s.fault.is_none());
}

#[test]
fn backend_faults_and_missing_feedback_fault_the_loop() {
    for (kind, expect) in [
        (SimFaultKind::Error, FaultKind::DriveFault),
        (SimFaultKind::NoFeedback, FaultKind::FeedbackMissing),
        (SimFaultKind::Stall, FaultKind::Stall),
    ] {
        let fault = SimFault {
            kind,
            dof: Some(1),
            from_tick: 300,
        };
        let mut r = rig(
            2,
            SimSettings {
                faults: vec![fault],
                ..SimSettings::default()
            },
        );
        r.enable();
        r.play(
            5,
            move_between(2, 0.0, 0.0, 0.0),
            move_between(2, 0.0, 1.0, 1.0),
            false,
        );
        let s = r.until(2000, |s| s.state == State::Fault);
        let f = s.fault.unwrap();
        assert_eq!((f.kind, f.dof), (expect, Some(1)), "{kind:?}");
        assert!(s.tick >= 300);
    }
}

/// A backend that takes too long: every write moves the manual clock past the next deadline.
struct Slow {
    inner: Sim,
    clock: ManualClock,
    slow: std::ops::Range<u64>,
}

impl Backend for Slow {
    fn enable(&mut self) -> Result<crate::backend::Readiness, BackendError> {
        self.inner.enable()
    }
    fn disable(&mut self) -> Result<(), BackendError> {
        self.inner.disable()
    }
    fn write(&mut self, tick: u64, sp: &[Setpoint]) -> Result<(), BackendError> {
        if self.slow.contains(&tick) {
            self.clock.advance(2_500_000);
        }
        self.inner.write(tick, sp)
    }
    fn read(&mut self, fb: &mut [crate::backend::Feedback]) -> Result<(), BackendError> {
        self.inner.read(fb)
    }
    fn hold(&mut self, tick: u64, sp: &[Setpoint]) -> Result<(), BackendError> {
        self.inner.hold(tick, sp)
    }
}

#[test]
fn overruns_skip_ahead_and_too_many_in_a_row_fault() {
    let js = joints(1);
    let clock = ManualClock::new(0);
    let slow = Slow {
        inner: Sim::new(&js, RATE, &SimSettings::default()),
        clock: clock.clone(),
        slow: 100..u64::MAX,
    };
    let (mut lp, handle) = Loop::new(&Settings::default(), Box::new(slow), &js, clock).unwrap();
    handle.send(Command::Enable).unwrap();
    for _ in 0..99 {
        lp.step();
    }
    assert_eq!(handle.status().overruns, 0);
    lp.step();
    let s = handle.status();
    assert_eq!(s.tick, 99);
    lp.step();
    let s = handle.status();
    // Tick 100 ran 2.5 ms: deadlines 101 and 102 passed, the next is 103.
    assert_eq!((s.tick, s.overruns), (100, 1));
    lp.step();
    assert_eq!(handle.status().tick, 103);
    for _ in 0..8 {
        lp.step();
    }
    let s = handle.status();
    assert_eq!(s.overruns, 10);
    assert_eq!(s.state, State::Fault);
    assert_eq!(s.fault.unwrap().kind, FaultKind::Overrun);
    assert_eq!(s.heartbeat, 110);
}

#[test]
fn start_at_holds_the_first_sample_until_the_wall_clock_instant() {
    let js = joints(1);
    // Wall clock at monotonic 0 is 1000 s after the epoch.
    let clock = ManualClock::new(1_000_000_000_000);
    let backend = Sim::new(&js, RATE, &SimSettings::default());
    let (mut lp, handle) = Loop::new(&Settings::default(), Box::new(backend), &js, clock).unwrap();
    handle.send(Command::Enable).unwrap();
    for _ in 0..10 {
        lp.step();
    }
    let at = std::time::UNIX_EPOCH + Duration::from_millis(1_000_500);
    let pb = Playback {
        motion_id: 9,
        approach: move_between(1, 0.0, 0.0, 0.0),
        motion: move_between(1, 0.0, 0.1, 0.5),
        looped: false,
        start_at: Some(at),
    };
    handle.send(Command::Play(Box::new(pb))).unwrap();
    let mut started = None;
    for _ in 0..1000 {
        lp.step();
        let s = handle.status();
        if s.state == State::Playing && started.is_none() {
            started = Some(s.tick);
        }
    }
    // Loop tick k wakes at (k + 1) ms monotonic, i.e. wall time 1000 s + (k + 1) ms.
    assert_eq!(started, Some(499));
    assert_eq!(handle.status().state, State::Holding);
}

#[test]
fn shutdown_stops_holds_and_ends_the_loop() {
    let mut r = rig(1, SimSettings::default());
    r.enable();
    r.play(
        1,
        move_between(1, 0.0, 0.0, 0.0),
        move_between(1, 0.0, 1.5, 1.5),
        false,
    );
    r.run(700);
    r.handle.send(Command::Shutdown).unwrap();
    let mut ended = false;
    for _ in 0..2000 {
        if r.lp.step() == Step::Ended {
            ended = true;
            break;
        }
    }
    assert!(ended);
    let s = r.handle.status();
    assert_eq!(s.state, State::Holding);
    assert_eq!(s.limit_violations, 0);
}

#[test]
fn invalid_settings_are_refused() {
    let js = joints(1);
    let bad = Settings {
        rate_hz: 0.0,
        ..Settings::default()
    };
    let sim = Sim::new(&js, RATE, &SimSettings::default());
    assert!(matches!(
        Loop::new(&bad, Box::new(sim), &js, ManualClock::new(0)),
        Err(Error::Settings(_))
    ));
}

#[test]
fn after_an_overrun_the_motion_stays_on_the_clock() {
    let js = joints(1);
    let clock = ManualClock::new(0);
    let slow = Slow {
        inner: Sim::new(&js, RATE, &SimSettings::default()),
        clock: clock.clone(),
        slow: 300..301,
    };
    let (mut lp, handle) = Loop::new(&Settings::default(), Box::new(slow), &js, clock).unwrap();
    handle.send(Command::Enable).unwrap();
    for _ in 0..10 {
        lp.step();
    }
    let motion = move_between(1, 0.0, 1.0, 1.0);
    let expect = motion.clone();
    let pb = Playback {
        motion_id: 1,
        approach: move_between(1, 0.0, 0.0, 0.0),
        motion,
        looped: false,
        start_at: None,
    };
    handle.send(Command::Play(Box::new(pb))).unwrap();
    lp.step();
    let first = handle.status().first_command_tick.unwrap();
    let mut out = [Setpoint::default()];
    for _ in 0..600 {
        lp.step();
        let s = handle.shared.read();
        expect.sample(&mut Cursor::default(), s.values.tick - first, &mut out);
        assert_eq!(s.commanded[0], out[0].position, "tick {}", s.values.tick);
    }
    assert_eq!(handle.status().overruns, 1);
}

#[test]
fn the_loop_waits_for_feedback_as_long_as_the_buses_allow() {
    let config = |one: &str, two: &str| {
        let text = format!(
            "robot:\n  skel: arm.skel\n  joints: [a, b]\nbackend: buses\nbuses:\n\
             - name: one\n  transport: can\n  interface: can0\n  feedback_timeout_ms: {}\n  joints:\n    \
             a: {{protocol: odrive, id: 1}}\n\
             - name: two\n  transport: can\n  interface: can1\n  feedback_timeout_ms: {}\n  joints:\n    \
             b: {{protocol: odrive, id: 2}}\n",
            one, two
        );
        crate::config::Config::parse(&text, std::path::Path::new("motiond.yaml")).unwrap()
    };
    assert_eq!(
        Settings::from_config(&config("300", "1000")).feedback_timeout_s,
        1.0
    );
    // Shorter bus timeouts never make the loop's own check stricter than its default.
    let default = Settings::default().feedback_timeout_s;
    assert_eq!(
        Settings::from_config(&config("5", "5")).feedback_timeout_s,
        default
    );
}
