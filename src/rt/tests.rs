//! The loop's logic on the manual clock and the simulated backend: no threads, no sleeping.

use super::*;
use crate::backend::FaultKind;
use crate::backend::Feedback;
use crate::backend::SimFaultKind;
use crate::backend::sim::{Sim, SimFault, SimSettings};
use crate::estop::EStopInput;
use crate::motion::seq::{MultiValueSeq, Timing};
use crate::robot::Limits;
use crate::rt::Scope;
use crate::trajectory::{ColumnMap, Cursor, DofLimits, Envelope, Options, Setpoint, build_values};

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
    through_for(&JointSet::unconstrained(n), secs, f)
}

/// The same, built for `js` (its loop seam judged against its limits; proved when they pass).
fn through_for(js: &JointSet, secs: f64, f: impl Fn(f64) -> f64) -> Trajectory {
    let n = js.len();
    let rows = (secs * 100.0).round() as usize + 1;
    let values = (0..rows)
        .flat_map(|i| std::iter::repeat_n(f(i as f64 / 100.0), n))
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
    injector: Arc<crate::backend::sim::Injector>,
    rows: Vec<TraceRow>,
}

fn rig(n: usize, sim: SimSettings) -> Rig {
    rig_with(n, sim, Settings::default())
}

fn rig_with(n: usize, sim: SimSettings, settings: Settings) -> Rig {
    rig_watching(n, sim, settings, None)
}

/// A rig whose loop polls a simulated E-stop switch (no debounce).
fn rig_with_estop(settings: Settings) -> (Rig, crate::estop::SimSwitch) {
    let (input, switch) = crate::estop::SimInput::new(0);
    let r = rig_watching(2, SimSettings::default(), settings, Some(Box::new(input)));
    (r, switch)
}

fn rig_watching(
    n: usize,
    sim: SimSettings,
    settings: Settings,
    estop: Option<Box<dyn EStopInput>>,
) -> Rig {
    let js = joints(n);
    let settings = Settings {
        trace_ticks: 64,
        ..settings
    };
    let backend = Sim::new(&js, RATE, &sim);
    let injector = backend.injector();
    let (lp, handle) = Loop::new(
        &settings,
        Box::new(backend),
        estop,
        &js,
        ManualClock::new(0),
    )
    .unwrap();
    Rig {
        lp,
        handle,
        injector,
        rows: Vec::new(),
    }
}

impl Rig {
    fn step(&mut self) -> Step {
        let step = self.lp.step();
        if let Some(t) = self.handle.trace() {
            t.drain_into(&mut self.rows);
        }
        step
    }

    fn run(&mut self, ticks: u64) {
        for _ in 0..ticks {
            self.step();
        }
    }

    /// Steps until `done` holds for the published values (cheap: no statistics).
    fn until(&mut self, max: u64, done: impl Fn(&status::Published) -> bool) -> Status {
        for _ in 0..max {
            self.step();
            if done(&self.handle.shared.read().values) {
                return self.handle.status();
            }
        }
        panic!("not reached in {max} ticks: {:?}", self.handle.status());
    }

    fn send(&mut self, command: Command) -> Ack {
        let seq = self.handle.send(command).unwrap();
        self.step();
        self.handle.ack(seq).expect("taken on the next tick")
    }

    fn enable(&mut self) {
        self.send(Command::Enable);
        self.until(100, |s| s.state == State::Idle);
    }

    fn play(&mut self, id: u32, approach: Trajectory, motion: Trajectory, repeat: Repeat) -> Ack {
        let pb = Playback {
            repeat,
            ..Playback::new(id, approach, motion)
        };
        self.send(Command::Play(Box::new(pb)))
    }

    /// Two DOFs moving 0 → 1.5 over 1.5 s, 0.7 s into it (near full speed).
    fn move_at_full_speed(&mut self) {
        self.play(
            1,
            move_between(2, 0.0, 0.0, 0.0),
            move_between(2, 0.0, 1.5, 1.5),
            Repeat::Once,
        );
        self.until(800, |s| s.time_s >= 0.7);
    }

    /// The commanded positions of DOF `j`, one per tick recorded.
    fn commanded(&self, j: usize) -> Vec<f64> {
        self.rows.iter().map(|r| r.commanded[j].position).collect()
    }

    /// Every recorded tick within `js`'s limits as the drive saw it (the one checker:
    /// [`Envelope`]; a robot outside its position limits may only move back in). Nothing is sent
    /// while disabled: each run of ticks between enables is one stream.
    fn assert_envelope_of(&self, js: &JointSet) {
        for run in self.rows.split(|r| r.state == State::Disabled) {
            let mut e = Envelope::new(js, RATE).recovering();
            for row in run {
                if let Err(breach) = e.push(&row.commanded) {
                    panic!("tick {}: {breach}", row.tick);
                }
            }
        }
    }

    /// The same within the rig's own joints' limits.
    fn assert_envelope(&self) {
        let n = self.rows.first().map_or(0, |r| r.commanded.len());
        self.assert_envelope_of(&joints(n));
    }
}

#[test]
fn plays_a_motion_to_its_end_then_holds_its_last_sample() {
    let mut r = rig(2, SimSettings::default());
    assert_eq!(r.handle.status().state, State::Disabled);
    r.enable();
    let ack = r.play(
        7,
        move_between(2, 0.0, 0.0, 0.0),
        move_between(2, 0.0, 1.0, 1.0),
        Repeat::Once,
    );
    assert_eq!(ack, Ack::Done);
    let s = r.handle.status();
    assert_eq!(s.state, State::Playing);
    assert_eq!(s.motion_id, Some(7));
    let first = s.first_command_tick.unwrap();
    assert_eq!(first, s.tick);
    assert_eq!(s.motion_start_tick, Some(first));
    let s = r.until(2000, |s| s.state == State::Holding);
    assert_eq!(s.motion_id, None);
    assert_eq!(s.commanded, vec![1.0, 1.0]);
    r.run(500);
    let s = r.handle.status();
    assert!(s.positions.iter().all(|p| (p - 1.0).abs() < 1e-6), "{s:?}");
    assert!(s.max_tracking_error.iter().all(|&e| e < 0.01), "{s:?}");
    assert_eq!((s.limit_violations, s.overruns, s.fault), (0, 0, None));
    assert_eq!(r.handle.outcomes(), vec![(7, Outcome::Finished)]);
    // Taken once; still known by its id (one history, kept here for the session too).
    assert_eq!(r.handle.outcomes(), vec![]);
    assert_eq!(r.handle.outcome(7), Some(Outcome::Finished));
    assert_eq!(r.handle.outcome(8), None);
    // The drives got the trajectory, tick by tick, and then its last sample: no step back.
    let expect = move_between(1, 0.0, 1.0, 1.0);
    let mut out = [Setpoint::default()];
    let mut cursor = Cursor::default();
    let rows: Vec<&TraceRow> = r.rows.iter().filter(|row| row.tick >= first).collect();
    for (k, row) in rows.iter().enumerate().take(1001) {
        expect.sample(&mut cursor, k as u64, &mut out);
        assert_eq!(row.commanded[0].position, out[0].position, "tick {k}");
        assert!((row.measured[0] - out[0].position).abs() < 0.01);
    }
    assert!(
        rows[1000..]
            .iter()
            .all(|row| row.commanded[0].position == 1.0)
    );
    r.assert_envelope();
}

#[test]
fn stop_decelerates_within_the_limits_and_holds() {
    let mut r = rig(1, SimSettings::default());
    r.enable();
    r.play(
        1,
        move_between(1, 0.0, 0.0, 0.0),
        move_between(1, 0.0, 1.5, 1.5),
        Repeat::Once,
    );
    r.until(800, |s| s.time_s >= 0.7);
    assert_eq!(r.send(Command::Stop(Scope::All)), Ack::Done);
    let s = r.handle.status();
    assert_eq!(s.state, State::Stopping);
    let at = s.commanded[0];
    let s = r.until(2000, |s| s.state == State::Holding);
    assert!(s.commanded[0] > at && s.commanded[0] < 1.5);
    assert_eq!(s.limit_violations, 0);
    assert_eq!(r.handle.outcomes(), vec![(1, Outcome::Stopped)]);
    r.assert_envelope();
}

#[test]
fn a_quick_stop_is_shorter_than_a_stop_and_never_a_step() {
    let stop_ticks = |quick: bool| {
        let mut r = rig(1, SimSettings::default());
        r.enable();
        r.play(
            1,
            move_between(1, 0.0, 0.0, 0.0),
            move_between(1, 0.0, 1.5, 1.5),
            Repeat::Once,
        );
        r.until(800, |s| s.time_s >= 0.75);
        let from = r.handle.status().tick;
        r.send(if quick {
            Command::QuickStop(Scope::All)
        } else {
            Command::Stop(Scope::All)
        });
        let s = r.until(2000, |s| s.state == State::Holding);
        r.assert_envelope();
        assert_eq!((s.limit_violations, s.fault), (0, None));
        s.tick - from
    };
    let (planned, quick) = (stop_ticks(false), stop_ticks(true));
    assert!(quick <= planned, "quick {quick} ticks, planned {planned}");
    assert!(quick > 1);
}

#[test]
fn pause_slows_along_the_path_and_resume_continues() {
    let mut r = rig(1, SimSettings::default());
    r.enable();
    r.play(
        1,
        move_between(1, 0.0, 0.0, 0.0),
        move_between(1, 0.0, 1.5, 2.0),
        Repeat::Once,
    );
    r.until(1000, |s| s.time_s >= 0.5);
    assert_eq!(r.send(Command::Pause(Scope::All)), Ack::Done);
    r.run(2000);
    let s = r.handle.status();
    assert_eq!(s.state, State::Paused);
    let t = s.time_s;
    r.run(100);
    assert_eq!(r.handle.status().time_s, t, "paused motion stays put");
    assert_eq!(
        r.send(Command::Pause(Scope::All)),
        Ack::Ignored(State::Paused)
    );
    assert_eq!(r.send(Command::Resume(Scope::All)), Ack::Done);
    let s = r.until(10, |s| s.state == State::Playing);
    assert!(s.time_s >= t);
    let s = r.until(5000, |s| s.state == State::Holding);
    assert_eq!(s.commanded[0], 1.5);
    assert_eq!((s.limit_violations, s.fault), (0, None));
    r.assert_envelope();
}

#[test]
fn a_repeated_motion_plays_its_laps_and_a_non_looping_motion_is_refused() {
    let mut r = rig(1, SimSettings::default());
    r.enable();
    let one_way = through_for(&joints(1), 1.0, |t| {
        0.5 * (1.0 - (std::f64::consts::PI * t).cos())
    });
    let ack = r.play(1, move_between(1, 0.0, 0.0, 0.0), one_way, Repeat::Forever);
    assert_eq!(ack, Ack::Refused(Refusal::NotLoopable { dof: 0 }));
    let s = r.handle.status();
    assert_eq!((s.state, s.refused), (State::Idle, 1));
    assert_eq!(
        r.handle.outcomes(),
        vec![(1, Outcome::Refused(Refusal::NotLoopable { dof: 0 }))]
    );
    r.play(
        2,
        move_between(1, 0.0, 0.0, 0.0),
        there_and_back(1, 0.0, 0.2, 1.0),
        Repeat::Times(3),
    );
    r.run(2300);
    let s = r.handle.status();
    assert_eq!(s.state, State::Playing, "{s:?}");
    assert!(s.time_s > 0.2 && s.time_s < 0.4, "{s:?}");
    let s = r.until(1000, |s| s.state == State::Holding);
    // Three laps of 1 s from the first command, and the motion's end.
    assert_eq!(s.tick - s.first_command_tick.unwrap(), 3000);
    assert_eq!(r.handle.outcomes(), vec![(2, Outcome::Finished)]);
    r.assert_envelope();
}

#[test]
fn an_approach_that_starts_elsewhere_is_refused() {
    let mut r = rig(1, SimSettings::default());
    r.enable();
    let ack = r.play(
        3,
        move_between(1, 0.5, 0.5, 0.0),
        move_between(1, 0.5, 1.0, 0.5),
        Repeat::Once,
    );
    assert_eq!(ack, Ack::Refused(Refusal::Jump { dof: 0 }));
}

#[test]
fn a_motion_heading_past_a_limit_faults_and_brakes_inside_it() {
    let mut r = rig(1, SimSettings::default());
    r.enable();
    // 3 rad is outside ±2: the guard brakes while the quick stop still ends inside the limit,
    // before the backend sees anything past it.
    r.play(
        4,
        move_between(1, 0.0, 0.0, 0.0),
        move_between(1, 0.0, 3.0, 3.0),
        Repeat::Once,
    );
    let s = r.until(3000, |s| s.state == State::Fault);
    let f = s.fault.unwrap();
    assert_eq!(
        (f.kind, f.dof, f.code),
        (FaultKind::Limit, Some(0), guard::LIMIT_STOPPABLE)
    );
    assert_eq!(s.limit_violations, 1);
    assert_eq!(r.handle.outcomes(), vec![(4, Outcome::Faulted)]);
    // Braking from where it was, within every limit, then it holds.
    let s = r.until(1000, |s| !s.moving);
    assert!(s.commanded[0] <= 2.0, "{s:?}");
    assert!(s.commanded[0] > 1.99, "braked late, not early: {s:?}");
    r.assert_envelope();
    let held = s.commanded[0];
    r.run(50);
    assert!(
        r.commanded(0)[r.rows.len() - 50..]
            .iter()
            .all(|&p| p == held)
    );
    assert_eq!(r.send(Command::ClearFault), Ack::Done);
    let s = r.handle.status();
    assert_eq!((s.state, s.fault), (State::Holding, None));
    r.run(10);
    assert_eq!(r.handle.status().state, State::Holding);
    let back = Trajectory::hold(&[1.0], RATE);
    let approach =
        crate::trajectory::approach(&joints(1), &[held], back.first_setpoints(), RATE).unwrap();
    assert_eq!(r.play(5, approach, back, Repeat::Once), Ack::Done);
    let s = r.until(5000, |s| s.state == State::Holding);
    assert_eq!((s.commanded[0], s.fault), (1.0, None));
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
            Repeat::Once,
        );
        let s = r.until(2000, |s| s.state == State::Fault);
        let f = s.fault.unwrap();
        assert_eq!((f.kind, f.dof), (expect, Some(1)), "{kind:?}");
        assert!(s.tick >= 300);
        // The healthy DOF comes to rest from where it was sent, never back.
        r.until(1000, |s| !s.moving);
        r.assert_envelope();
        let x = r.commanded(0);
        assert!(x.windows(2).all(|w| w[1] >= w[0]), "{kind:?}: a step back");
    }
}

/// The simulated backend, with a hold and a disable that fail a number of times first.
struct FlakyHold {
    inner: Sim,
    failures_left: u32,
    holds: Arc<std::sync::atomic::AtomicU32>,
    disable_failures_left: u32,
    disables: Arc<std::sync::atomic::AtomicU32>,
}

impl Backend for FlakyHold {
    fn enable(&mut self) -> Result<crate::backend::Readiness, BackendError> {
        self.inner.enable()
    }
    fn disable(&mut self) -> Result<(), BackendError> {
        self.disables
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if self.disable_failures_left > 0 {
            self.disable_failures_left -= 1;
            return Err(BackendError::new(FaultKind::QueueFull));
        }
        self.inner.disable()
    }
    fn write(&mut self, tick: u64, sp: &[Setpoint]) -> Result<(), BackendError> {
        self.inner.write(tick, sp)
    }
    fn read(&mut self, fb: &mut [Feedback]) -> Result<(), BackendError> {
        self.inner.read(fb)
    }
    fn hold(&mut self, tick: u64, sp: &[Setpoint]) -> Result<(), BackendError> {
        self.holds
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if self.failures_left > 0 {
            self.failures_left -= 1;
            return Err(BackendError::new(FaultKind::QueueFull));
        }
        self.inner.hold(tick, sp)
    }
}

#[test]
fn the_fault_hold_is_sent_every_tick_until_and_after_it_is_taken() {
    let js = joints(1);
    let holds = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let backend = FlakyHold {
        inner: Sim::new(&js, RATE, &SimSettings::default()),
        failures_left: 5,
        holds: holds.clone(),
        disable_failures_left: 0,
        disables: Arc::default(),
    };
    let (mut lp, handle) = Loop::new(
        &Settings::default(),
        Box::new(backend),
        None,
        &js,
        ManualClock::new(0),
    )
    .unwrap();
    handle.send(Command::Enable).unwrap();
    for _ in 0..10 {
        lp.step();
    }
    lp.player.loop_fault(BackendError::new(FaultKind::Overrun));
    for _ in 0..20 {
        lp.step();
    }
    assert_eq!(holds.load(std::sync::atomic::Ordering::Relaxed), 20);
    assert_eq!(handle.status().state, State::Fault);
}

/// A backend that takes too long: every write moves the manual clock on by `stall_ns`.
struct Slow {
    inner: Sim,
    clock: ManualClock,
    slow: std::ops::Range<u64>,
    stall_ns: u64,
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
            self.clock.advance(self.stall_ns);
        }
        self.inner.write(tick, sp)
    }
    fn read(&mut self, fb: &mut [Feedback]) -> Result<(), BackendError> {
        self.inner.read(fb)
    }
    fn hold(&mut self, tick: u64, sp: &[Setpoint]) -> Result<(), BackendError> {
        self.inner.hold(tick, sp)
    }
}

fn slow_loop(slow: std::ops::Range<u64>, stall_ns: u64) -> (Loop<ManualClock>, LoopHandle) {
    let js = joints(1);
    let clock = ManualClock::new(0);
    let slow = Slow {
        inner: Sim::new(&js, RATE, &SimSettings::default()),
        clock: clock.clone(),
        slow,
        stall_ns,
    };
    let settings = Settings {
        trace_ticks: 4096,
        ..Settings::default()
    };
    Loop::new(&settings, Box::new(slow), None, &js, clock).unwrap()
}

#[test]
fn overruns_skip_deadlines_and_too_many_in_a_row_fault() {
    let (mut lp, handle) = slow_loop(100..u64::MAX, 2_500_000);
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
fn after_an_overrun_the_motion_goes_on_from_where_it_was() {
    let (mut lp, handle) = slow_loop(300..301, 1_500_000);
    handle.send(Command::Enable).unwrap();
    for _ in 0..10 {
        lp.step();
    }
    let motion = move_between(1, 0.0, 1.0, 1.0);
    let expect = motion.clone();
    let pb = Playback::new(1, move_between(1, 0.0, 0.0, 0.0), motion);
    handle.send(Command::Play(Box::new(pb))).unwrap();
    lp.step();
    let mut out = [Setpoint::default()];
    for n in 1..600u64 {
        lp.step();
        let s = handle.shared.read();
        expect.sample(&mut Cursor::default(), n, &mut out);
        assert_eq!(s.commanded[0], out[0].position, "tick {}", s.values.tick);
    }
    // One overrun, and a wake-up 0.5 ms late: within the default two periods, no fault.
    let s = handle.status();
    assert_eq!((s.overruns, s.state), (1, State::Playing));
}

/// The loop thread stops at tick 500 (SIGSTOP, a higher-priority hog) for `stall_ns`, then runs
/// `ticks` more ticks; the commanded position of each tick recorded, and the index of tick 500's.
fn stalled_for(stall_ns: u64, ticks: usize) -> (Status, Vec<f64>, usize) {
    let (mut lp, handle) = slow_loop(500..501, stall_ns);
    handle.send(Command::Enable).unwrap();
    for _ in 0..10 {
        lp.step();
    }
    let pb = Playback::new(
        1,
        move_between(1, 0.0, 0.0, 0.0),
        move_between(1, 0.0, 1.9, 2.0),
    );
    handle.send(Command::Play(Box::new(pb))).unwrap();
    let mut rows = Vec::new();
    for _ in 0..ticks {
        lp.step();
        handle.trace().unwrap().drain_into(&mut rows);
    }
    let s = handle.status();
    let f = s.fault.unwrap();
    assert_eq!(f.kind, FaultKind::Overrun);
    assert!(
        u64::from(f.code) + 1000 >= stall_ns / 1000,
        "late by {} µs",
        f.code
    );
    assert_eq!(s.state, State::Fault);
    let stalled = rows.iter().position(|r| r.tick == 500).unwrap();
    (
        s,
        rows.iter().map(|r| r.commanded[0].position).collect(),
        stalled,
    )
}

/// Inside the limits by finite differences, one period between consecutive setpoints.
fn assert_steps_inside(x: &[f64]) {
    let dt = 1.0 / RATE;
    for k in 2..x.len() {
        assert!(((x[k] - x[k - 1]) / dt).abs() <= 2.0 + 1e-9, "tick {k}");
        assert!(
            ((x[k] - 2.0 * x[k - 1] + x[k - 2]) / (dt * dt)).abs() <= 20.0 + 1e-6,
            "tick {k}"
        );
    }
}

#[test]
fn a_stalled_loop_faults_and_stops_quickly_from_where_it_was_without_a_jump() {
    // Stalled for half a second: the stop goes on from the setpoint the drive has, one period
    // between consecutive setpoints whatever the wall clock did.
    let (_, x, _) = stalled_for(500_000_000, 1500);
    assert_steps_inside(&x);
}

#[test]
fn a_loop_stalled_past_the_silence_holds_the_drives_where_they_were_last_reached() {
    // Stalled for 1 s: no drive heard anything for that long (its watchdog, or the target it
    // held, stopped it), so the stop is over and the drive gets the hold where it stopped, not
    // the rest of a stop from its old speed.
    let (s, x, stalled) = stalled_for(1_000_000_000, 1000);
    assert!(!s.moving);
    assert_steps_inside(&x[..=stalled]);
    assert!(x[stalled] > 0.1, "the motion was under way: {}", x[stalled]);
    assert!(
        x[stalled..].iter().all(|&p| p == x[stalled]),
        "{:?}",
        &x[stalled..stalled + 5]
    );
}

#[test]
fn following_error_beyond_the_path_tolerance_faults() {
    let mut r = rig_with(
        2,
        SimSettings {
            faults: vec![SimFault {
                kind: SimFaultKind::Stall,
                dof: Some(1),
                from_tick: 400,
            }],
            following_error: 10.0,
            ..SimSettings::default()
        },
        Settings {
            path_tolerance: vec![0.05, 0.05],
            ..Settings::default()
        },
    );
    r.enable();
    r.play(
        1,
        move_between(2, 0.0, 0.0, 0.0),
        move_between(2, 0.0, 1.0, 1.0),
        Repeat::Once,
    );
    let s = r.until(2000, |s| s.state == State::Fault);
    let f = s.fault.unwrap();
    assert_eq!(
        (f.kind, f.dof, f.code),
        (FaultKind::FollowingError, Some(1), player::FOLLOWING_PATH)
    );
    r.until(1000, |s| !s.moving);
    r.assert_envelope();
}

#[test]
fn a_goal_not_reached_in_time_faults() {
    let mut r = rig_with(
        1,
        SimSettings {
            faults: vec![SimFault {
                kind: SimFaultKind::Stall,
                dof: Some(0),
                from_tick: 700,
            }],
            following_error: 10.0,
            ..SimSettings::default()
        },
        Settings {
            goal_tolerance: 0.01,
            goal_time_s: 0.2,
            ..Settings::default()
        },
    );
    r.enable();
    r.play(
        1,
        move_between(1, 0.0, 0.0, 0.0),
        move_between(1, 0.0, 1.0, 1.0),
        Repeat::Once,
    );
    let s = r.until(2000, |s| s.state == State::Holding);
    let done = s.tick;
    let s = r.until(1000, |s| s.state == State::Fault);
    assert_eq!(s.tick - done, 200);
    let f = s.fault.unwrap();
    assert_eq!(
        (f.kind, f.code),
        (FaultKind::FollowingError, player::FOLLOWING_GOAL)
    );
}

#[test]
fn a_drive_fault_clears_to_disabled_and_enable_brings_the_drives_back() {
    let mut r = rig(2, SimSettings::default());
    r.enable();
    r.play(
        1,
        move_between(2, 0.0, 0.0, 0.0),
        move_between(2, 0.0, 1.0, 1.0),
        Repeat::Once,
    );
    r.run(300);
    r.injector.inject(SimFaultKind::Error, Some(1));
    let s = r.until(10, |s| s.state == State::Fault);
    assert_eq!(s.fault.unwrap().kind, FaultKind::DriveFault);
    // Cleared while the quick stop still runs: it finishes first.
    assert_eq!(r.send(Command::ClearFault), Ack::Done);
    assert_eq!(r.handle.status().state, State::Fault);
    r.injector.clear();
    let s = r.until(1000, |s| s.state == State::Disabled);
    assert_eq!(s.fault, None);
    assert_eq!(r.send(Command::Enable), Ack::Done);
    let s = r.until(10, |s| s.state == State::Idle);
    for (c, p) in s.commanded.iter().zip(&s.positions) {
        assert!(
            (c - p).abs() < 1e-12,
            "the drives come up where they are: {s:?}"
        );
    }
    r.assert_envelope();
}

#[test]
fn start_at_holds_the_first_sample_until_the_wall_clock_instant() {
    let js = joints(1);
    // Wall clock at monotonic 0 is 1000 s after the epoch.
    let clock = ManualClock::new(1_000_000_000_000);
    let backend = Sim::new(&js, RATE, &SimSettings::default());
    let (mut lp, handle) =
        Loop::new(&Settings::default(), Box::new(backend), None, &js, clock).unwrap();
    handle.send(Command::Enable).unwrap();
    for _ in 0..10 {
        lp.step();
    }
    let at = std::time::UNIX_EPOCH + Duration::from_millis(1_000_500);
    let pb = Playback {
        start_at: Some(at),
        ..Playback::new(
            9,
            move_between(1, 0.0, 0.0, 0.0),
            move_between(1, 0.0, 0.1, 0.5),
        )
    };
    handle.send(Command::Play(Box::new(pb))).unwrap();
    let mut started = None;
    for _ in 0..1000 {
        lp.step();
        let s = handle.status();
        if s.state == State::Playing && started.is_none() {
            started = Some(s.tick);
            assert_eq!(s.motion_start_tick, Some(s.tick));
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
        Repeat::Once,
    );
    r.run(700);
    r.handle.send(Command::Shutdown).unwrap();
    let mut ended = false;
    for _ in 0..2000 {
        if r.step() == Step::Ended {
            ended = true;
            break;
        }
    }
    assert!(ended);
    let s = r.handle.status();
    assert_eq!(s.state, State::Holding);
    assert_eq!(s.limit_violations, 0);
    r.assert_envelope();
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
        Loop::new(&bad, Box::new(sim), None, &js, ManualClock::new(0)),
        Err(Error::Settings(_))
    ));
}

/// Two joint groups: DOFs 0 and 1 (slot 1), DOF 2 (slot 2).
fn grouped_rig() -> Rig {
    rig_with(
        3,
        SimSettings::default(),
        Settings {
            groups: vec![vec![0, 1], vec![2]],
            ..Settings::default()
        },
    )
}

fn in_slot(slot: u8, pb: Playback) -> Box<Playback> {
    Box::new(Playback { slot, ..pb })
}

#[test]
fn groups_play_side_by_side_and_stop_apart() {
    let mut r = grouped_rig();
    r.enable();
    let arms = Playback::new(
        1,
        move_between(2, 0.0, 0.0, 0.0),
        move_between(2, 0.0, 1.0, 2.0),
    );
    assert_eq!(r.send(Command::Play(in_slot(1, arms))), Ack::Done);
    let legs = Playback::new(
        2,
        move_between(1, 0.0, 0.0, 0.0),
        move_between(1, 0.0, -1.0, 1.0),
    );
    assert_eq!(r.send(Command::Play(in_slot(2, legs))), Ack::Done);
    // The whole robot overlaps both: refused while they move.
    let whole = Playback::new(
        3,
        move_between(3, 0.0, 0.0, 0.0),
        move_between(3, 0.0, 0.5, 1.0),
    );
    assert!(matches!(
        r.send(Command::Play(Box::new(whole))),
        Ack::Refused(Refusal::Busy(_))
    ));
    r.run(500);
    let s = r.handle.status();
    assert_eq!(s.slots.len(), 3);
    assert_eq!(
        (s.slots[1].state, s.slots[2].state),
        (State::Playing, State::Playing)
    );
    assert_eq!(
        (s.slots[1].motion_id, s.slots[2].motion_id),
        (Some(1), Some(2))
    );
    // Stopping the arms leaves the legs playing.
    assert_eq!(r.send(Command::Stop(Scope::Slot(1))), Ack::Done);
    let s = r.until(2000, |_| true);
    assert_eq!(s.slots[1].state, State::Stopping);
    assert_eq!(s.slots[2].state, State::Playing);
    let s = r.until(3000, |s| s.state == State::Holding);
    assert_eq!(s.commanded[2], -1.0);
    assert!(s.commanded[0] < 1.0);
    let mut outcomes = r.handle.outcomes();
    outcomes.sort_by_key(|o| o.0);
    assert_eq!(
        outcomes,
        vec![
            (1, Outcome::Stopped),
            (2, Outcome::Finished),
            (3, Outcome::Refused(Refusal::Busy(State::Playing)))
        ]
    );
    r.assert_envelope();
}

/// A group's stop (or quick stop) while a whole-robot motion moves the group's joints stops that
/// motion: before, the stop was acknowledged as done and the group's joints moved on.
#[test]
fn a_groups_stop_stops_a_whole_robot_motion_moving_its_joints() {
    for quick in [false, true] {
        let mut r = grouped_rig();
        r.enable();
        let whole = Playback::new(
            1,
            move_between(3, 0.0, 0.0, 0.0),
            move_between(3, 0.0, 1.0, 2.0),
        );
        assert_eq!(r.send(Command::Play(Box::new(whole))), Ack::Done);
        r.run(500);
        assert_eq!(r.handle.status().slots[0].state, State::Playing);
        let command = if quick {
            Command::QuickStop(Scope::Slot(1))
        } else {
            Command::Stop(Scope::Slot(2))
        };
        assert_eq!(r.send(command), Ack::Done);
        assert_eq!(
            r.handle.status().slots[0].state,
            State::Stopping,
            "quick {quick}"
        );
        let s = r.until(3000, |s| s.state == State::Holding);
        assert!(s.commanded.iter().all(|&c| c < 1.0), "quick {quick}: {s:?}");
        assert_eq!(
            r.handle.outcomes(),
            vec![(1, Outcome::Stopped)],
            "quick {quick}"
        );
        r.assert_envelope();
    }
}

#[test]
fn a_fault_stops_every_group() {
    let mut r = grouped_rig();
    r.enable();
    let arms = Playback::new(
        1,
        move_between(2, 0.0, 0.0, 0.0),
        move_between(2, 0.0, 1.0, 2.0),
    );
    let legs = Playback::new(
        2,
        move_between(1, 0.0, 0.0, 0.0),
        move_between(1, 0.0, -1.0, 2.0),
    );
    r.send(Command::Play(in_slot(1, arms)));
    r.send(Command::Play(in_slot(2, legs)));
    r.run(700);
    r.injector.inject(SimFaultKind::Error, Some(2));
    let s = r.until(10, |s| s.state == State::Fault);
    assert_eq!(s.fault.unwrap().dof, Some(2));
    r.until(2000, |s| !s.moving);
    let mut outcomes = r.handle.outcomes();
    outcomes.sort_by_key(|o| o.0);
    assert_eq!(outcomes, vec![(1, Outcome::Faulted), (2, Outcome::Faulted)]);
    r.assert_envelope();
}

#[test]
fn a_replacement_takes_over_exactly_where_the_old_motion_is_and_a_late_one_is_refused() {
    let mut r = rig(1, SimSettings::default());
    r.enable();
    let a = Playback::new(
        1,
        move_between(1, 0.0, 0.0, 0.0),
        move_between(1, 0.0, 1.0, 2.0),
    );
    r.send(Command::Play(Box::new(a)));
    r.run(300);
    // Paused at rest, the loop's next setpoints are known: the approach from there is a blend.
    r.send(Command::Pause(Scope::All));
    r.until(2000, |s| s.state == State::Paused);
    // The pause ramp takes up to half a second to bring the path to rest.
    r.run(800);
    let s = r.handle.status();
    let path = s.slots[0].path.unwrap();
    assert!(path.steady() && path.speed == 0.0);
    let at = s.slots[0].ran + 20;
    let b_motion = move_between(1, 0.5, 0.5, 0.0);
    let blend =
        crate::trajectory::approach(&joints(1), &s.commanded, b_motion.first_setpoints(), RATE)
            .unwrap();
    let b = Playback::new(2, blend, b_motion);
    assert_eq!(
        r.send(Command::Replace {
            playback: Box::new(b),
            at_tick: at
        }),
        Ack::Done
    );
    let s = r.until(5000, |s| s.state == State::Holding);
    assert_eq!(s.commanded[0], 0.5);
    assert_eq!(
        r.handle.outcomes(),
        vec![(1, Outcome::Replaced), (2, Outcome::Finished)]
    );
    r.assert_envelope();
    // A switch tick already past is refused at once; nothing changes.
    let c = Playback::new(
        3,
        move_between(1, 0.5, 0.5, 0.0),
        move_between(1, 0.5, 0.0, 1.0),
    );
    r.send(Command::Play(Box::new(c)));
    let late = Playback::new(
        4,
        move_between(1, 0.5, 0.5, 0.0),
        move_between(1, 0.5, 0.5, 0.0),
    );
    let past = r.handle.status().slots[0].ran;
    assert_eq!(
        r.send(Command::Replace {
            playback: Box::new(late),
            at_tick: past
        }),
        Ack::Refused(Refusal::Missed)
    );
    assert_eq!(r.handle.status().slots[0].motion_id, Some(3));
}

#[test]
fn a_replacement_that_does_not_start_where_the_motion_is_is_refused_at_its_tick() {
    let mut r = rig(1, SimSettings::default());
    r.enable();
    let a = Playback::new(
        1,
        move_between(1, 0.0, 0.0, 0.0),
        move_between(1, 0.0, 1.0, 2.0),
    );
    r.send(Command::Play(Box::new(a)));
    r.run(300);
    let at = r.handle.status().slots[0].ran + 10;
    let wrong = Playback::new(
        2,
        move_between(1, 0.3, 0.3, 0.0),
        move_between(1, 0.3, 0.3, 0.0),
    );
    assert_eq!(
        r.send(Command::Replace {
            playback: Box::new(wrong),
            at_tick: at
        }),
        Ack::Done
    );
    r.run(20);
    assert_eq!(
        r.handle.outcomes(),
        vec![(2, Outcome::Refused(Refusal::Missed))]
    );
    assert_eq!(r.handle.status().state, State::Playing);
}

#[test]
fn teach_in_follows_the_hand_and_holds_where_it_lets_go() {
    let js = joints(2);
    let sim = Sim::new(&js, RATE, &SimSettings::default());
    let hand = sim.hand();
    let settings = Settings {
        trace_ticks: 64,
        ..Settings::default()
    };
    let (lp, handle) = Loop::new(&settings, Box::new(sim), None, &js, ManualClock::new(0)).unwrap();
    let mut r = Rig {
        lp,
        handle,
        injector: Arc::new(Default::default()),
        rows: Vec::new(),
    };
    r.enable();
    assert_eq!(r.send(Command::Record(true)), Ack::Done);
    assert_eq!(r.handle.status().state, State::Recording);
    for k in 0..1000 {
        let t = k as f64 / RATE;
        hand.put(0, 0.5 * t);
        hand.put(1, -0.2 * t);
        r.step();
    }
    let s = r.handle.status();
    assert!((s.positions[0] - 0.4995).abs() < 1e-9, "{s:?}");
    // The commanded pose follows the measured one, a tick behind.
    assert!((s.commanded[0] - s.positions[0]).abs() < 1e-3, "{s:?}");
    assert_eq!(r.send(Command::Record(false)), Ack::Done);
    let s = r.handle.status();
    assert_eq!(s.state, State::Holding);
    let held = s.positions.clone();
    r.run(200);
    let s = r.handle.status();
    for ((p, c), h) in s.positions.iter().zip(&s.commanded).zip(&held) {
        assert!((p - h).abs() < 1e-9, "moved after letting go: {s:?}");
        assert!((c - h).abs() < 1e-9, "holds where it was let go: {s:?}");
    }
    assert_eq!(s.fault, None);
}

/// Asserts that the drives came up holding exactly where they are measured.
fn assert_resynced(s: &Status) {
    for (c, p) in s.commanded.iter().zip(&s.positions) {
        assert!((c - p).abs() < 1e-12, "commanded {c} measured {p}: {s:?}");
    }
}

#[test]
fn the_estop_stops_quickly_and_nothing_moves_until_it_is_released_and_cleared() {
    let (mut r, switch) = rig_with_estop(Settings::default());
    r.enable();
    assert_eq!(r.handle.status().estop.input, Some(false));
    r.move_at_full_speed();
    switch.press();
    r.step();
    let s = r.handle.status();
    assert_eq!(s.state, State::EStop);
    assert_eq!(
        s.estop,
        EStop {
            input: Some(true),
            cause: Some(EStopCause::Input),
            reenable: true,
        }
    );
    assert!(s.moving, "a quick stop from full speed takes time");
    let s = r.until(1000, |s| !s.moving);
    let held = s.commanded.clone();
    assert_eq!(r.handle.outcomes(), vec![(1, Outcome::Faulted)]);
    // Nothing starts, and clearing is refused, while it is asserted.
    let at = move_between(2, held[0], held[0], 0.0);
    let ack = r.play(
        2,
        at.clone(),
        move_between(2, held[0], 0.0, 1.0),
        Repeat::Once,
    );
    assert_eq!(ack, Ack::Refused(Refusal::Busy(State::EStop)));
    assert_eq!(r.send(Command::ClearFault), Ack::Ignored(State::EStop));
    assert_eq!(r.send(Command::Enable), Ack::Ignored(State::EStop));
    // Released: still stopped, holding what was commanded, until cleared.
    switch.release();
    r.run(200);
    let s = r.handle.status();
    assert_eq!((s.state, s.estop.input), (State::EStop, Some(false)));
    assert_eq!(s.commanded, held);
    assert_eq!(r.send(Command::ClearFault), Ack::Done);
    let s = r.until(100, |s| s.state == State::Idle);
    assert_eq!(s.estop.cause, None);
    assert_resynced(&s);
    // And it plays again from there.
    let from = s.commanded[0];
    let ack = r.play(
        3,
        move_between(2, from, from, 0.0),
        move_between(2, from, 0.0, 1.0),
        Repeat::Once,
    );
    assert_eq!(ack, Ack::Done);
    r.until(2000, |s| s.state == State::Holding);
    r.assert_envelope();
}

#[test]
fn a_press_again_before_rest_cancels_a_clear_and_a_lost_line_counts_as_pressed() {
    let (mut r, switch) = rig_with_estop(Settings::default());
    r.enable();
    r.move_at_full_speed();
    switch.press();
    r.step();
    switch.release();
    r.step();
    // Cleared while the quick stop runs: it waits for rest...
    assert_eq!(r.send(Command::ClearFault), Ack::Done);
    // ...but a press meanwhile takes that clear back.
    switch.press();
    r.step();
    switch.release();
    r.until(1000, |s| !s.moving);
    r.run(100);
    assert_eq!(r.handle.status().state, State::EStop);
    // The line goes away: asserted, by a lost input.
    switch.lose_line();
    r.step();
    let s = r.handle.status();
    assert_eq!(s.estop.input, Some(true));
    assert_eq!(r.send(Command::ClearFault), Ack::Ignored(State::EStop));
    switch.release();
    r.step();
    assert_eq!(r.send(Command::ClearFault), Ack::Done);
    r.until(100, |s| s.state == State::Idle);
    r.assert_envelope();
}

#[test]
fn an_estop_while_disabled_clears_to_disabled() {
    let (mut r, switch) = rig_with_estop(Settings::default());
    switch.press();
    r.step();
    assert_eq!(r.handle.status().state, State::EStop);
    assert!(!r.handle.status().estop.reenable);
    switch.release();
    r.step();
    assert_eq!(r.send(Command::ClearFault), Ack::Done);
    assert_eq!(r.handle.status().state, State::Disabled);
    r.enable();
}

#[test]
fn the_estop_with_a_disabling_safe_state_clears_by_enabling_again() {
    let settings = Settings {
        safe_state: SafeState::Disable,
        ..Settings::default()
    };
    let (mut r, switch) = rig_with_estop(settings);
    r.enable();
    r.move_at_full_speed();
    switch.press();
    r.until(1000, |s| !s.moving);
    assert!(r.handle.status().estop.reenable);
    switch.release();
    assert_eq!(r.send(Command::ClearFault), Ack::Done);
    let s = r.until(100, |s| s.state == State::Idle);
    assert_resynced(&s);
    r.assert_envelope();
}

#[test]
fn a_drive_estop_is_the_loops_estop_when_honoured_and_a_fault_otherwise() {
    for honour in [true, false] {
        let settings = Settings {
            estop_drive: honour,
            ..Settings::default()
        };
        let mut r = rig_with(2, SimSettings::default(), settings);
        r.enable();
        r.move_at_full_speed();
        r.injector.inject(SimFaultKind::Estop, Some(1));
        let s = r.until(10, |s| matches!(s.state, State::EStop | State::Fault));
        if honour {
            assert_eq!(s.state, State::EStop);
            assert_eq!(s.estop.cause, Some(EStopCause::Drive { dof: Some(1) }));
            assert_eq!(s.fault, None);
        } else {
            assert_eq!(s.state, State::Fault);
            assert_eq!(s.fault.map(|f| f.kind), Some(FaultKind::DriveEStop));
        }
        r.until(1000, |s| !s.moving);
        // The drive's E-stop is over once it lets itself be enabled again.
        r.injector.clear();
        assert_eq!(r.send(Command::ClearFault), Ack::Done);
        if !honour {
            r.until(10, |s| s.state == State::Disabled);
            r.send(Command::Enable);
        }
        let s = r.until(100, |s| s.state == State::Idle);
        assert_resynced(&s);
        r.assert_envelope();
    }
}

#[test]
fn a_disable_the_bus_did_not_take_is_sent_again_and_the_hold_goes_on_meanwhile() {
    let js = joints(1);
    let holds = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let disables = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let backend = FlakyHold {
        inner: Sim::new(&js, RATE, &SimSettings::default()),
        failures_left: 0,
        holds: holds.clone(),
        disable_failures_left: 4,
        disables: disables.clone(),
    };
    let settings = Settings {
        safe_state: SafeState::Disable,
        ..Settings::default()
    };
    let (mut lp, handle) =
        Loop::new(&settings, Box::new(backend), None, &js, ManualClock::new(0)).unwrap();
    handle.send(Command::Enable).unwrap();
    for _ in 0..10 {
        lp.step();
    }
    // At rest already: the safe state follows the fault's first tick.
    lp.player.loop_fault(BackendError::new(FaultKind::Overrun));
    let count =
        |a: &Arc<std::sync::atomic::AtomicU32>| a.load(std::sync::atomic::Ordering::Relaxed);
    for _ in 0..10 {
        lp.step();
    }
    // Four refusals, then taken; a hold every tick until then, none after.
    assert_eq!(count(&disables), 5);
    assert_eq!(count(&holds), 5);
    handle.send(Command::ClearFault).unwrap();
    lp.step();
    assert_eq!(handle.status().state, State::Disabled);
}

#[test]
fn a_replacement_takes_over_where_it_was_predicted_even_after_the_loop_ran_late() {
    let settings = Settings {
        max_late_s: Some(1.0),
        max_consecutive_overruns: 0,
        ..Settings::default()
    };
    let mut r = rig_with(1, SimSettings::default(), settings);
    r.enable();
    let a = Playback::new(
        1,
        move_between(1, 0.0, 0.0, 0.0),
        move_between(1, 0.0, 1.0, 2.0),
    );
    let route = a.route.clone();
    r.send(Command::Play(Box::new(a)));
    r.run(300);
    let s = r.handle.status();
    let slot = s.slots[0];
    let lead = 20;
    let from = route
        .predict(slot.path.unwrap(), s.tick, lead, RATE)
        .unwrap();
    let motion = move_between(1, 1.0, 1.0, 0.0);
    let blend = crate::trajectory::blend(&joints(1), &from, &motion, RATE, false).unwrap();
    let b = Playback::new(2, blend, motion);
    let replace = Command::Replace {
        playback: Box::new(b),
        at_tick: slot.ran + lead,
    };
    assert_eq!(r.send(replace), Ack::Done);
    r.run(5);
    // The loop wakes 5 periods late: loop ticks are skipped, the path goes on where it was.
    r.lp.clock().advance(5_000_000);
    r.until(5000, |s| s.state == State::Holding);
    assert_eq!(
        r.handle.outcomes(),
        vec![(1, Outcome::Replaced), (2, Outcome::Finished)]
    );
    assert!(r.handle.status().overruns > 0);
    r.assert_envelope();
}

/// The simulated backend as one bus among others, the other's reads failing once `failing` is
/// set: this bus's reports still arrive, the backend reports the other bus's fault.
struct OtherBusFails {
    inner: Sim,
    failing: Arc<std::sync::atomic::AtomicBool>,
}

impl Backend for OtherBusFails {
    fn enable(&mut self) -> Result<crate::backend::Readiness, BackendError> {
        self.inner.enable()
    }
    fn disable(&mut self) -> Result<(), BackendError> {
        self.inner.disable()
    }
    fn write(&mut self, tick: u64, sp: &[Setpoint]) -> Result<(), BackendError> {
        self.inner.write(tick, sp)
    }
    fn read(&mut self, fb: &mut [Feedback]) -> Result<(), BackendError> {
        self.inner.read(fb)?;
        if self.failing.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(BackendError::new(FaultKind::DeviceLost));
        }
        Ok(())
    }
    fn hold(&mut self, tick: u64, sp: &[Setpoint]) -> Result<(), BackendError> {
        self.inner.hold(tick, sp)
    }
    fn compliant(
        &mut self,
        on: bool,
        dofs: &mut [bool],
    ) -> Result<crate::backend::Readiness, BackendError> {
        self.inner.compliant(on, dofs)
    }
}

#[test]
fn a_fault_on_another_bus_in_teach_in_stiffens_the_drives_where_their_last_report_says() {
    let js = joints(1);
    let sim = Sim::new(&js, RATE, &SimSettings::default());
    let hand = sim.hand();
    let failing = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let backend = OtherBusFails {
        inner: sim,
        failing: failing.clone(),
    };
    let (lp, handle) = Loop::new(
        &Settings::default(),
        Box::new(backend),
        None,
        &js,
        ManualClock::new(0),
    )
    .unwrap();
    let mut r = Rig {
        lp,
        handle,
        injector: Arc::new(Default::default()),
        rows: Vec::new(),
    };
    r.enable();
    assert_eq!(r.send(Command::Record(true)), Ack::Done);
    let mut k = 0;
    let mut put = |r: &mut Rig| {
        hand.put(0, 0.5 * k as f64 / RATE);
        k += 1;
        r.step();
    };
    for _ in 0..200 {
        put(&mut r);
    }
    // From the next read on, the other bus fails; the hand has moved the joint once more.
    failing.store(true, std::sync::atomic::Ordering::Relaxed);
    put(&mut r);
    let s = r.handle.status();
    assert_eq!(s.state, State::Fault);
    let last_report = 0.5 * (k - 1) as f64 / RATE;
    r.run(100);
    let s = r.handle.status();
    assert!(
        (s.commanded[0] - last_report).abs() < 1e-9,
        "held at {} instead of the last report {last_report}",
        s.commanded[0]
    );
    assert!((s.positions[0] - last_report).abs() < 1e-9, "{s:?}");
}

/// The simulated backend as a bus that says where its drive holds ([`Backend::holding`]): told
/// a goal (its last report) on the first request to come up — an enable, or a teach-in's
/// stiffening — it follows only [`Holds::TICKS`] enable steps later, and its reports meanwhile
/// say otherwise: a load deflecting it by `sag` once torque is on, a hand still moving it.
struct Holds {
    inner: Sim,
    sag: f64,
    /// DOF 0 as the simulated motor last reported it (before the sag).
    reported: f64,
    /// Where DOF 0 is told to hold, from the request to come up on.
    goal: Option<f64>,
    /// Enable steps left before it follows.
    left: u32,
    /// A teach-in's stiffening (the simulated motor stays compliant until it follows).
    stiffening: bool,
    /// The last goal, for the test to see.
    told: Arc<std::sync::atomic::AtomicU64>,
}

impl Holds {
    const TICKS: u32 = 5;

    fn tell(&mut self) {
        self.goal = Some(self.reported);
        self.left = Self::TICKS;
        self.told.store(
            self.reported.to_bits(),
            std::sync::atomic::Ordering::Relaxed,
        );
    }
}

impl Backend for Holds {
    fn enable(&mut self) -> Result<crate::backend::Readiness, BackendError> {
        if self.goal.is_none() {
            self.tell();
        }
        if self.left > 0 {
            self.left -= 1;
            return Ok(crate::backend::Readiness::Pending);
        }
        if self.stiffening {
            self.stiffening = false;
            self.inner.compliant(false, &mut [false])?;
        }
        while self.inner.enable()? == crate::backend::Readiness::Pending {}
        Ok(crate::backend::Readiness::Ready)
    }
    fn disable(&mut self) -> Result<(), BackendError> {
        self.goal = None;
        self.inner.disable()
    }
    fn write(&mut self, tick: u64, sp: &[Setpoint]) -> Result<(), BackendError> {
        self.inner.write(tick, sp)
    }
    fn read(&mut self, fb: &mut [Feedback]) -> Result<(), BackendError> {
        self.inner.read(fb)?;
        self.reported = fb[0].position;
        if self.goal.is_some() && !self.stiffening {
            fb[0].position += self.sag;
        }
        Ok(())
    }
    fn hold(&mut self, tick: u64, sp: &[Setpoint]) -> Result<(), BackendError> {
        self.inner.hold(tick, sp)
    }
    fn compliant(
        &mut self,
        on: bool,
        dofs: &mut [bool],
    ) -> Result<crate::backend::Readiness, BackendError> {
        if on {
            self.goal = None;
            return self.inner.compliant(true, dofs);
        }
        if self.goal.is_none() {
            self.stiffening = true;
            self.tell();
        }
        Ok(crate::backend::Readiness::Pending)
    }
    fn holding(&self, positions: &mut [f64]) {
        if let Some(goal) = self.goal.filter(|_| self.left == 0 && !self.stiffening) {
            positions[0] = goal;
        }
    }
}

/// A rig on [`Holds`]; the hand that moves its DOF and the goal it was last told (f64 bits).
fn holds_rig(
    sag: f64,
) -> (
    Rig,
    Arc<crate::backend::sim::Hand>,
    Arc<std::sync::atomic::AtomicU64>,
) {
    let js = joints(1);
    let sim = Sim::new(&js, RATE, &SimSettings::default());
    let hand = sim.hand();
    let injector = sim.injector();
    let told = Arc::new(std::sync::atomic::AtomicU64::new(f64::NAN.to_bits()));
    let backend = Holds {
        inner: sim,
        sag,
        reported: 0.0,
        goal: None,
        left: 0,
        stiffening: false,
        told: told.clone(),
    };
    let (lp, handle) = Loop::new(
        &Settings::default(),
        Box::new(backend),
        None,
        &js,
        ManualClock::new(0),
    )
    .unwrap();
    let rig = Rig {
        lp,
        handle,
        injector,
        rows: Vec::new(),
    };
    (rig, hand, told)
}

/// An enabled drive's history starts where the backend says it holds, not at its report (a
/// servo deflected by its load reports 0.01 rad off the goal it came up at): the loop holds the
/// goal, never chasing the report.
#[test]
fn an_enable_restarts_the_history_where_the_backend_says_the_drive_holds() {
    let (mut r, _, _) = holds_rig(0.01);
    r.enable();
    r.run(50);
    let s = r.handle.status();
    assert_eq!(
        s.commanded[0], 0.0,
        "held at the report, not the goal: {s:?}"
    );
    assert!((s.positions[0] - 0.01).abs() < 1e-12, "{s:?}");
}

/// A teach-in's drive that takes ticks to stiffen holds where it was told to on the first
/// request, while the hand still moves it until torque is on: its history restarts there, not
/// at the hand's later position.
#[test]
fn a_teach_in_restarts_the_history_where_the_backend_says_the_drive_stiffened() {
    let (mut r, hand, told) = holds_rig(0.0);
    r.enable();
    assert_eq!(r.send(Command::Record(true)), Ack::Done);
    let mut k = 0;
    let mut put = |r: &mut Rig| {
        hand.put(0, 0.5 * k as f64 / RATE);
        k += 1;
        r.step();
    };
    for _ in 0..100 {
        put(&mut r);
    }
    r.handle.send(Command::Record(false)).unwrap();
    // The hand still moves it while the stiffening takes the next ticks.
    for _ in 0..3 {
        put(&mut r);
    }
    r.run(50);
    let s = r.handle.status();
    let stiffened_at = f64::from_bits(told.load(std::sync::atomic::Ordering::Relaxed));
    let hand_left_it = 0.5 * (k - 1) as f64 / RATE;
    assert!(
        stiffened_at > 0.04 && stiffened_at < hand_left_it,
        "told to hold at {stiffened_at}, the hand left it at {hand_left_it}"
    );
    assert_eq!(
        s.commanded[0], stiffened_at,
        "held at {} instead of where it stiffened ({stiffened_at})",
        s.commanded[0]
    );
}

/// The simulated backend behind a bus that takes nothing for `silence` ticks from the tick
/// stored in `from` (a transmit queue that stopped draining), then everything again.
struct Blocked {
    inner: Sim,
    from: Arc<std::sync::atomic::AtomicU64>,
    silence: u64,
    /// The tick of the last write or hold (a teach-in's stiffening is asked between them).
    tick: u64,
}

impl Blocked {
    fn takes(&self, tick: u64) -> Result<(), BackendError> {
        let from = self.from.load(std::sync::atomic::Ordering::Relaxed);
        if (from..from.saturating_add(self.silence)).contains(&tick) {
            return Err(BackendError::new(FaultKind::QueueFull));
        }
        Ok(())
    }
}

impl Backend for Blocked {
    fn enable(&mut self) -> Result<crate::backend::Readiness, BackendError> {
        self.inner.enable()
    }
    fn disable(&mut self) -> Result<(), BackendError> {
        self.inner.disable()
    }
    fn write(&mut self, tick: u64, sp: &[Setpoint]) -> Result<(), BackendError> {
        self.tick = tick;
        self.takes(tick)?;
        self.inner.write(tick, sp)
    }
    fn read(&mut self, fb: &mut [Feedback]) -> Result<(), BackendError> {
        self.inner.read(fb)
    }
    fn hold(&mut self, tick: u64, sp: &[Setpoint]) -> Result<(), BackendError> {
        self.tick = tick;
        self.takes(tick)?;
        self.inner.hold(tick, sp)
    }
    fn compliant(
        &mut self,
        on: bool,
        dofs: &mut [bool],
    ) -> Result<crate::backend::Readiness, BackendError> {
        self.takes(self.tick + 1)?;
        self.inner.compliant(on, dofs)
    }
}

/// A bus that stops taking frames mid-motion faults the loop; once it has reached no drive for
/// [`player::SILENT_S`] the loop reports the stop over (the drives are left to their own watchdogs, at
/// rest where they were last reached). When the bus drains, the drives get that rest pose: the
/// quick stop does not resume from the speed they had before the silence, which a drive at
/// rest would see as a jump.
#[test]
fn a_bus_silent_past_the_watchdog_gets_the_rest_pose_when_it_drains() {
    for silence in [50, 900, 1000, 1001, 1500, 3000] {
        let js = joints(2);
        let from = Arc::new(std::sync::atomic::AtomicU64::new(u64::MAX));
        let backend = Blocked {
            inner: Sim::new(&js, RATE, &SimSettings::default()),
            from: from.clone(),
            silence,
            tick: 0,
        };
        let settings = Settings {
            trace_ticks: 64,
            ..Settings::default()
        };
        let (lp, handle) =
            Loop::new(&settings, Box::new(backend), None, &js, ManualClock::new(0)).unwrap();
        let mut r = Rig {
            lp,
            handle,
            injector: Arc::default(),
            rows: Vec::new(),
        };
        r.enable();
        r.move_at_full_speed();
        let blocked_at = r.handle.status().tick + 1;
        from.store(blocked_at, std::sync::atomic::Ordering::Relaxed);
        r.until(silence + 1000, |s| s.state == State::Fault && !s.moving);
        let reported_at = r.handle.status().tick;
        r.run(silence + 500);
        let rest = r.rows.iter().find(|row| row.tick == reported_at).unwrap();
        for row in r.rows.iter().filter(|row| row.tick > reported_at) {
            assert_eq!(
                row.commanded, rest.commanded,
                "silent {silence} ticks: tick {} moves after the stop was reported over at {reported_at}",
                row.tick
            );
        }
        // From the last silent ticks on, through the drain: the hold, no step. (Silent for less,
        // the quick stop goes on from the setpoint each drive has: see `Stop::step`.)
        if silence >= (RATE * player::SILENT_S) as u64 {
            let mut e = Envelope::new(&js, RATE).recovering();
            let drained = blocked_at + silence;
            for row in r.rows.iter().filter(|row| row.tick + 1 >= drained) {
                if let Err(breach) = e.push(&row.commanded) {
                    panic!("silent {silence} ticks: tick {}: {breach}", row.tick);
                }
            }
        }
    }
}

/// A fault during a teach-in, then the bus takes nothing — not even the stiffening. Once no bus
/// has reached the compliant drives for [`player::SILENT_S`] they are left to their watchdogs as
/// the others are: the stop is over and a shutdown ends (before, the loop waited for the
/// stiffening forever: "fault, stopping", moving, and a shutdown that never ended). When the
/// bus drains, they stiffen where the hand left them and hold there.
#[test]
fn a_teach_in_whose_bus_falls_silent_is_stopped_after_the_silence() {
    let silent = (RATE * player::SILENT_S) as u64;
    for (silence, drains) in [(3 * silent, false), (silent + silent / 2, true)] {
        let js = joints(2);
        let from = Arc::new(std::sync::atomic::AtomicU64::new(u64::MAX));
        let sim = Sim::new(&js, RATE, &SimSettings::default());
        let hand = sim.hand();
        let backend = Blocked {
            inner: sim,
            from: from.clone(),
            silence,
            tick: 0,
        };
        let (lp, handle) = Loop::new(
            &Settings::default(),
            Box::new(backend),
            None,
            &js,
            ManualClock::new(0),
        )
        .unwrap();
        let mut r = Rig {
            lp,
            handle,
            injector: Arc::default(),
            rows: Vec::new(),
        };
        r.enable();
        assert_eq!(r.send(Command::Record(true)), Ack::Done);
        for k in 0..200 {
            hand.put(0, 0.001 * f64::from(k));
            r.step();
        }
        let blocked_at = r.handle.status().tick + 1;
        from.store(blocked_at, std::sync::atomic::Ordering::Relaxed);
        let s = r.until(silence, |s| s.state == State::Fault && !s.moving);
        assert!(
            s.tick <= blocked_at + silent,
            "the stop was over {} ticks into the silence",
            s.tick - blocked_at
        );
        if !drains {
            let seq = r.handle.send(Command::Shutdown).unwrap();
            assert_eq!(r.step(), Step::Ended, "{:?}", r.handle.status());
            assert_eq!(r.handle.ack(seq), Some(Ack::Done));
            continue;
        }
        // The hand moves the compliant joint on during the silence; once the bus drains the
        // drive stiffens where it is, and holds there.
        hand.put(0, 0.4);
        r.run(silence + 100);
        let s = r.handle.status();
        assert_eq!((s.state, s.moving), (State::Fault, false), "{s:?}");
        assert!((s.commanded[0] - 0.4).abs() < 1e-9, "{s:?}");
        assert!((s.positions[0] - 0.4).abs() < 1e-9, "{s:?}");
        r.run(100);
        assert_eq!(r.handle.status().commanded, s.commanded);
    }
}
