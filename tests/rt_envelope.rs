//! The safety envelope of the whole playback, as a property: random motions under every
//! interpolation and limit policy at random speeds, played through the library `Session` on the
//! simulated backend with a stop, a quick stop, a pause and resume, a drive fault, the E-stop
//! input or a drive's own E-stop at a random time — and every setpoint the drives were sent
//! (approach, motion, pause, stop, quick stop, hold) is inside the position, velocity and
//! acceleration limits, measured by finite differences of the loop's own trace
//! (`trajectory::Envelope`). Looped motions the same, across their seam.
//!
//! `PROPTEST_CASES` sets the number of cases (default 64); the worst share of each limit used is
//! printed (`--nocapture`).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use motiond::backend::sim::{Sim, SimSettings};
use motiond::backend::{Backend, BackendError, FaultKind, Feedback, Readiness};
use motiond::estop::SimInput;
use motiond::rt::{ManualClock, Outcome, Repeat, Settings, State, TraceRow};
use motiond::session::{Action, Scripted, Session};
use motiond::trajectory::{
    BuildError, ColumnMap, Envelope, JointSet, Options, Setpoint, Stream, Usage, build_values,
};
use proptest::prelude::{Just, Strategy, prop_oneof};
use proptest::prop_assert;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

#[path = "support/random_motion.rs"]
mod random_motion;
use random_motion::{Case, Event, case, joints, samples};

const RATE: f64 = 1000.0;

struct Run {
    rows: Vec<TraceRow>,
    outcome: Option<Outcome>,
    /// The loop tick a silent bus takes frames again (`u64::MAX`: never).
    drains: u64,
}

/// Plays the case through a stepped session; `None` when the proof refused the motion.
fn play(case: &Case, js: &JointSet, looped: bool) -> Option<Run> {
    play_muted(case, js, looped, None).map(|(run, _)| run)
}

/// [`play`], the bus muted as `mute` says; what each drive took.
fn play_muted(
    case: &Case,
    js: &JointSet,
    looped: bool,
    mute: Option<Mute>,
) -> Option<(Run, Arc<Mutex<Took>>)> {
    let seq = samples(case, looped);
    let map = ColumnMap::in_dof_order(js, js.len()).unwrap();
    let options = Options {
        rate_hz: RATE,
        interpolation: case.interpolation,
        policy: case.policy,
        speed: case.speed,
    };
    let proved = match build_values(js, &seq, &map, &options) {
        Ok(p) => p,
        Err(BuildError::Refused(_)) => return None,
        Err(e) => panic!("{e}"),
    };
    if looped && proved.trajectory.loop_seam().is_err() {
        return None;
    }
    let duration = proved.trajectory.duration_s();
    // Retiming can slow a jerky motion a hundredfold: the property is the same at any length.
    if duration > 20.0 {
        return None;
    }
    let sim = Sim::new(
        js,
        RATE,
        &SimSettings {
            following_error: 1e9,
            ..SimSettings::default()
        },
    );
    let injector = sim.injector();
    let took: Arc<Mutex<Took>> = Arc::default();
    let from = Arc::new(AtomicU64::new(u64::MAX));
    let backend: Box<dyn Backend> = match mute {
        Some(mute) => Box::new(Muted {
            from: from.clone(),
            tick: 0,
            had: vec![Setpoint::default(); js.len()],
            taken: vec![true; js.len()],
            bursts: 0,
            inner: sim,
            mute,
            took: took.clone(),
        }),
        None => Box::new(sim),
    };
    let settings = Settings {
        trace_ticks: 1 << 12,
        // A drive's own E-stop (an injected `Estop` fault) takes the E-stop path.
        estop_drive: true,
        ..Settings::default()
    };
    let (estop, switch) = SimInput::new(0);
    let session = Session::stepped(
        settings,
        backend,
        Some(Box::new(estop)),
        js.clone(),
        ManualClock::new(0),
    )
    .unwrap();
    session.keep_trace();
    session.enable().unwrap();
    let repeat = if looped {
        Repeat::Times(2)
    } else {
        Repeat::Once
    };
    let started = session
        .play_trajectory("case", proved, repeat, None)
        .unwrap();
    let at = case.at * duration;
    if let Some(mute) = mute {
        // From the motion's start: the tick play was taken, the approach, then the fraction.
        let now = session.peek().tick;
        let after = (started.approach_s + mute.at * duration) * RATE;
        from.store(now + after as u64, Ordering::Relaxed);
    }
    let scripted = |event: &Event, at_s: f64| -> Vec<Scripted> {
        let action = |action| Scripted { at_s, action };
        match event {
            Event::Nothing => vec![],
            Event::Stop => vec![action(Action::Stop)],
            Event::QuickStop => vec![action(Action::QuickStop)],
            Event::PauseResume => vec![
                action(Action::Pause),
                Scripted {
                    at_s: at_s + 0.7,
                    action: Action::Resume,
                },
            ],
            Event::EStop => vec![action(Action::EStop(switch.clone()))],
            Event::Fault { dof, kind } => vec![action(Action::Fault {
                injector: injector.clone(),
                kind: *kind,
                dof: Some(dof % js.len()),
            })],
            Event::Disable => vec![action(Action::Disable)],
            Event::Shutdown => vec![action(Action::Shutdown)],
        }
    };
    let mut script = scripted(&case.event, at);
    if let Some((second, after)) = &case.then {
        script.extend(scripted(second, at + after));
    }
    let limit = Duration::from_secs_f64(started.approach_s + 3.0 * duration + 30.0);
    let outcome = session.run(started.motion_id, &script, limit, || None);
    // A while at rest afterwards: the hold is part of the stream too. A silent bus drains
    // first, and the drives get what the loop sends then.
    let drains = from
        .load(Ordering::Relaxed)
        .saturating_add(mute.map_or(0, |m| m.ticks));
    let wait = drains
        .saturating_sub(session.peek().tick)
        .min(4 * SILENT_TICKS);
    session.wait_for(
        Duration::from_millis(50) + Duration::from_secs_f64(wait as f64 / RATE),
        |_| None::<()>,
    );
    let (rows, dropped) = session.trace();
    assert_eq!(dropped, 0);
    Some((
        Run {
            rows,
            outcome,
            drains,
        },
        took,
    ))
}

/// Every setpoint sent is inside the envelope, and power goes off (and the loop ends) only at
/// rest: the drives could hold their last setpoint from the next tick. The usage of each limit.
fn check(run: &Run, js: &JointSet) -> Result<Usage, TestCaseError> {
    let at_rest = |rows: &[TraceRow]| -> bool {
        let [.., before, last] = rows else {
            return true;
        };
        js.dofs.iter().enumerate().all(|(j, d)| {
            let hold = Setpoint {
                position: last.commanded[j].position,
                velocity: 0.0,
                acceleration: 0.0,
            };
            let stream = Stream {
                dt: 1.0 / RATE,
                history: 2,
                scale: 4.0,
                recovering: true,
            };
            let (b, l) = (&before.commanded[j], &last.commanded[j]);
            stream.judge(&d.limits, [b, l, &hold], |_, _, _| {}).is_ok()
        })
    };
    // A row's setpoints are what the drives took in its tick, its state the loop's after the
    // tick: a first disabled row with new setpoints holds the last ones sent before power off.
    for (i, pair) in run.rows.windows(2).enumerate() {
        let sent = if pair[1].commanded != pair[0].commanded {
            i + 1
        } else {
            i
        };
        if pair[0].state != State::Disabled
            && pair[1].state == State::Disabled
            && !at_rest(&run.rows[..=sent])
        {
            return Err(TestCaseError::fail(format!(
                "tick {}: power off while moving",
                pair[1].tick
            )));
        }
    }
    if !at_rest(&run.rows) {
        return Err(TestCaseError::fail("ended moving"));
    }
    let mut usage = Usage::default();
    for stream in run.rows.split(|r| r.state == State::Disabled) {
        let mut e = Envelope::new(js, RATE);
        for row in stream {
            e.push(&row.commanded).map_err(|b| {
                TestCaseError::fail(format!("tick {} ({}): {b}", row.tick, row.state.as_str()))
            })?;
        }
        usage = usage.max(e.usage());
    }
    Ok(usage)
}

fn run_property(looped: bool) {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(64);
    let mut runner = TestRunner::new(Config {
        cases,
        ..Config::default()
    });
    let worst = Mutex::new((Usage::default(), 0u32, 0u32));
    runner
        .run(&case(), |case| {
            let js = joints(&case);
            let Some(run) = play(&case, &js, looped) else {
                return Ok(());
            };
            prop_assert!(run.outcome.is_some(), "the playback never ended: {case:?}");
            let usage = check(&run, &js)?;
            let mut w = worst.lock().unwrap();
            w.0 = w.0.max(usage);
            w.1 += 1;
            if matches!(run.outcome, Some(Outcome::Finished)) {
                w.2 += 1;
            }
            Ok(())
        })
        .unwrap();
    let (usage, played, finished) = *worst.lock().unwrap();
    println!(
        "{} cases, {played} played ({finished} to the end): worst share of the limit — \
         finite-difference velocity {:.4}, finite-difference acceleration {:.4}, velocity field \
         {:.4}, acceleration field {:.4}, velocity field step {:.4}",
        cases,
        usage.step_velocity,
        usage.step_acceleration,
        usage.velocity,
        usage.acceleration,
        usage.velocity_step
    );
    // The generator must give the proof something to pass, or the property says nothing.
    assert!(
        played * 4 >= cases,
        "only {played} of {cases} motions passed the proof"
    );
}

#[test]
fn every_setpoint_of_random_playbacks_with_stops_pauses_and_faults_is_within_the_limits() {
    run_property(false);
}

#[test]
fn looped_playbacks_stay_within_the_limits_across_their_seam() {
    run_property(true);
}

// ---------------------------------------------------------------------------------------------
// Bus silences: the same random playbacks and events, and a bus that takes nothing for a while.

/// A drive no setpoint reached for this long (the loop's 1 s, docs/src/loop.md) is left to its
/// watchdog: its stream restarts at rest where it was last reached.
const SILENT_TICKS: u64 = RATE as u64;

/// Which drives a silent bus does not reach.
#[derive(Debug, Clone, Copy)]
enum Who {
    All,
    /// One drive (its own bus), the others take everything.
    One(usize),
    /// Partial bursts: in turn the first drive only takes the tick's setpoints, none does, all
    /// but the first do.
    Partial,
}

/// The bus takes nothing from `at` (a fraction of the motion's duration, past its end too) for
/// `ticks` ticks (`u64::MAX`: never again).
#[derive(Debug, Clone, Copy)]
struct Mute {
    at: f64,
    ticks: u64,
    who: Who,
}

fn mute() -> impl Strategy<Value = Mute> {
    (
        0.0f64..1.2,
        prop_oneof![
            1..SILENT_TICKS,
            Just(SILENT_TICKS),
            SILENT_TICKS + 1..3 * SILENT_TICKS,
            Just(u64::MAX),
        ],
        prop_oneof![
            Just(Who::All),
            (0..3usize).prop_map(Who::One),
            Just(Who::Partial)
        ],
    )
        .prop_map(|(at, ticks, who)| Mute { at, ticks, who })
}

/// Per DOF, what its drive took, in order.
#[derive(Debug, Default)]
struct Took {
    dofs: Vec<Vec<Taken>>,
    /// Bursts some drive did not take.
    missed: u64,
}

#[derive(Debug, Clone, Copy)]
enum Taken {
    /// A setpoint at a loop tick.
    At(u64, Setpoint),
    /// The drive came up (its stream starts again) or took a disable.
    Up,
    Down,
}

/// The simulated drives behind a bus muted as [`Mute`] says, from the tick `Muted::from` (set
/// once the motion's duration is known): a setpoint a drive does not take leaves it with the one
/// it had; enable, disable and teach-in get through to none while any drive is not reached.
struct Muted {
    inner: Sim,
    mute: Mute,
    /// The loop tick the silence begins, and the tick of the last write or hold.
    from: Arc<AtomicU64>,
    tick: u64,
    /// Per DOF, the setpoint the drive has.
    had: Vec<Setpoint>,
    taken: Vec<bool>,
    bursts: usize,
    took: Arc<Mutex<Took>>,
}

impl Muted {
    /// Which drives this tick's burst reaches (`None`: every one).
    fn reaches(&mut self, tick: u64) -> Option<usize> {
        let from = self.from.load(Ordering::Relaxed);
        if !(from..from.saturating_add(self.mute.ticks)).contains(&tick) {
            return None;
        }
        let n = self.had.len();
        let burst = self.bursts;
        self.bursts += 1;
        for (j, t) in self.taken.iter_mut().enumerate() {
            *t = match self.mute.who {
                Who::All => false,
                Who::One(d) => j != d % n,
                Who::Partial => [j == 0, false, j != 0][burst % 3],
            };
        }
        let took = self.taken.iter().filter(|&&t| t).count();
        (took < n).then_some(took)
    }

    /// Whether any drive is out of reach now (the loop's next tick).
    fn muted(&self) -> bool {
        let from = self.from.load(Ordering::Relaxed);
        let now = self.tick + 1;
        (from..from.saturating_add(self.mute.ticks)).contains(&now)
    }

    fn send(&mut self, tick: u64, setpoints: &[Setpoint], hold: bool) -> Result<(), BackendError> {
        self.tick = tick;
        let reached = self.reaches(tick);
        if reached.is_some() {
            self.took.lock().unwrap().missed += 1;
        }
        if reached == Some(0) {
            return Err(BackendError::new(FaultKind::QueueFull));
        }
        if reached.is_none() {
            self.taken.iter_mut().for_each(|t| *t = true);
        }
        // What each drive has then: the setpoint when it takes it, the one it had when not.
        let row: Vec<Setpoint> = self
            .had
            .iter()
            .zip(&self.taken)
            .zip(setpoints)
            .map(|((h, &t), sp)| if t { *sp } else { *h })
            .collect();
        let result = if hold {
            self.inner.hold(tick, &row)
        } else {
            self.inner.write(tick, &row)
        };
        if result.is_err() {
            // What the drives behind the bus did with what reached them.
            let mut inner = vec![false; self.taken.len()];
            self.inner.taken(&mut inner);
            for (t, i) in self.taken.iter_mut().zip(inner) {
                *t &= i;
            }
        } else {
            self.had = row;
            let mut took = self.took.lock().unwrap();
            took.dofs.resize_with(setpoints.len(), Vec::new);
            for ((d, &t), sp) in took.dofs.iter_mut().zip(&self.taken).zip(setpoints) {
                if t {
                    d.push(Taken::At(tick, *sp));
                }
            }
        }
        match (result, reached) {
            (Ok(()), Some(_)) => Err(BackendError::new(FaultKind::QueueFull)),
            (result, _) => result,
        }
    }

    fn mark(&self, event: Taken) {
        let mut took = self.took.lock().unwrap();
        took.dofs.resize_with(self.had.len(), Vec::new);
        took.dofs.iter_mut().for_each(|d| d.push(event));
    }
}

impl Backend for Muted {
    fn enable(&mut self) -> Result<Readiness, BackendError> {
        if self.muted() {
            // Not every drive answers: the loop's enable timeout ends it.
            return Ok(Readiness::Pending);
        }
        let r = self.inner.enable()?;
        if r == Readiness::Ready {
            self.mark(Taken::Up);
        }
        Ok(r)
    }
    fn disable(&mut self) -> Result<(), BackendError> {
        if self.muted() {
            return Err(BackendError::new(FaultKind::QueueFull));
        }
        self.inner.disable()?;
        self.mark(Taken::Down);
        Ok(())
    }
    fn write(&mut self, tick: u64, setpoints: &[Setpoint]) -> Result<(), BackendError> {
        self.send(tick, setpoints, false)
    }
    fn hold(&mut self, tick: u64, setpoints: &[Setpoint]) -> Result<(), BackendError> {
        self.send(tick, setpoints, true)
    }
    fn taken(&self, dofs: &mut [bool]) {
        dofs.copy_from_slice(&self.taken);
    }
    fn read(&mut self, feedback: &mut [Feedback]) -> Result<(), BackendError> {
        self.inner.read(feedback)
    }
}

/// Every setpoint each drive took is inside its limits as it saw consecutive setpoints; after a
/// silence of [`SILENT_TICKS`] or more, from rest where it was last reached (a shorter one
/// continues the stream the drive has). Power goes off only at rest (or long silent). The usage.
fn check_taken(took: &Took, js: &JointSet) -> Result<Usage, TestCaseError> {
    let mut usage = Usage::default();
    for (j, events) in took.dofs.iter().enumerate() {
        let single = JointSet {
            dofs: vec![js.dofs[j].clone()],
        };
        let mut e = Envelope::new(&single, RATE);
        // The last two setpoints taken, with the tick of the last.
        let mut last: Option<(u64, Setpoint)> = None;
        let mut before: Option<Setpoint> = None;
        let rest = |p: f64| Setpoint {
            position: p,
            velocity: 0.0,
            acceleration: 0.0,
        };
        for event in events {
            match *event {
                Taken::Up => {
                    usage = usage.max(e.usage());
                    e = Envelope::new(&single, RATE);
                    (last, before) = (None, None);
                }
                Taken::Down => {
                    if let (Some((_, l)), Some(b)) = (last, before) {
                        let stream = Stream {
                            dt: 1.0 / RATE,
                            history: 2,
                            scale: 4.0,
                            recovering: true,
                        };
                        let lim = &js.dofs[j].limits;
                        if stream
                            .judge(lim, [&b, &l, &rest(l.position)], |_, _, _| {})
                            .is_err()
                        {
                            return Err(TestCaseError::fail(format!(
                                "DOF {j}: power off after {b:?}, {l:?}"
                            )));
                        }
                    }
                }
                Taken::At(tick, sp) => {
                    if let Some((at, l)) = last
                        && tick - at >= SILENT_TICKS
                    {
                        usage = usage.max(e.usage());
                        e = Envelope::new(&single, RATE);
                        for _ in 0..2 {
                            e.push(&[rest(l.position)]).unwrap();
                        }
                    }
                    e.push(&[sp]).map_err(|b| {
                        TestCaseError::fail(format!("DOF {j} took {sp:?} at tick {tick}: {b}"))
                    })?;
                    before = last.map(|(_, l)| l);
                    last = Some((tick, sp));
                }
            }
        }
        usage = usage.max(e.usage());
    }
    Ok(usage)
}

/// The random playbacks, events and second events of the property above, and a bus that takes
/// nothing — from every drive, one, or in partial bursts — from a random time for a random
/// length (below, at and above the loop's 1 s silence, or never again): what each drive took is
/// inside its limits by finite differences, across the drain; the playback ends; every drive the
/// bus reaches at the end holds still.
#[test]
fn every_setpoint_each_drive_took_through_bus_silences_is_within_the_limits() {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(64);
    let mut runner = TestRunner::new(Config {
        cases,
        ..Config::default()
    });
    let worst = Mutex::new((Usage::default(), 0u32, 0u32));
    runner
        .run(&(case(), mute()), |(case, mute)| {
            let js = joints(&case);
            let Some((run, took)) = play_muted(&case, &js, false, Some(mute)) else {
                return Ok(());
            };
            prop_assert!(run.outcome.is_some(), "the playback never ended: {case:?}");
            let took = took.lock().unwrap();
            let usage = check_taken(&took, &js)?;
            // Every drive the bus reached after the silence (the loop still running) holds
            // still at the end.
            let n = js.len();
            for (j, events) in took.dofs.iter().enumerate() {
                let reached = |tick: u64| match mute.who {
                    _ if tick >= run.drains => true,
                    Who::One(d) => j != d % n,
                    Who::All | Who::Partial => false,
                };
                if let [.., Taken::At(_, b), Taken::At(tick, l)] = &events[..]
                    && reached(*tick)
                {
                    prop_assert!(
                        b.position == l.position && l.velocity == 0.0,
                        "DOF {j} still moves at the end: {b:?}, {l:?}"
                    );
                }
            }
            let mut w = worst.lock().unwrap();
            w.0 = w.0.max(usage);
            w.1 += 1;
            if took.missed > 0 {
                w.2 += 1;
            }
            Ok(())
        })
        .unwrap();
    let (usage, played, missed) = *worst.lock().unwrap();
    println!(
        "{cases} cases, {played} played ({missed} with bursts a drive missed): worst share of the limit \
         on what each drive took — finite-difference velocity {:.4}, finite-difference \
         acceleration {:.4}, velocity field {:.4}, acceleration field {:.4}, velocity field step \
         {:.4}",
        usage.step_velocity,
        usage.step_acceleration,
        usage.velocity,
        usage.acceleration,
        usage.velocity_step
    );
    assert!(
        played * 4 >= cases,
        "only {played} of {cases} motions passed the proof"
    );
    // Not vacuous: most silences reach the loop while it sends.
    assert!(
        missed * 2 >= played,
        "only {missed} of {played} runs missed a burst"
    );
}

/// Found by the property above (a checker's error): `disable` during a playback, then
/// `shutdown` 0.32 s later. The disable's stop sends its last setpoint, at rest, in the tick power
/// goes off; the drives took it (the first disabled row of the trace), so they stopped at rest.
#[test]
fn a_shutdown_during_a_disables_stop_powers_off_at_rest() {
    use motiond::trajectory::{Interpolation, LimitPolicy};
    let rows: Vec<Vec<f64>> = vec![
        vec![0.311391752779941, 0.2832435511081487],
        vec![-0.06946428468505757, 0.6460748018628475],
        vec![0.6801580648696485, -0.7485351188058577],
        vec![-0.6555894395397949, 0.8332008549591188],
        vec![0.8448308552534006, 0.4483377438063395],
        vec![-0.5109839548258057, -0.3453175004591801],
        vec![-0.17963804896819222, 0.7253649500760037],
        vec![-0.9070656012644195, -0.6124758509974085],
        vec![0.6560136650360137, -0.1989966486745139],
        vec![0.8690511070533644, -0.19792935962681346],
        vec![-0.8854700564662837, -0.4756082324234504],
        vec![0.33525343652250383, -0.3561077599543123],
        vec![-0.7574028071997271, 0.015079844981696679],
        vec![0.6809182340826033, -0.3661928993717242],
        vec![-0.6877411187318494, 0.8264985115765968],
        vec![-0.202022705472555, 0.10951309735578742],
        vec![-0.6531646595648855, 0.48075942040698827],
        vec![-0.2976978427932677, -0.0017529256322629024],
        vec![-0.9602876082829223, -0.4964932987473109],
        vec![-0.15225320729806177, -0.3662881295747778],
        vec![0.10787462457681257, 0.5626799680621823],
        vec![-0.43798506168012136, 0.7038143371908602],
        vec![-0.10120034787030491, -0.5769116765768623],
        vec![-0.5286261210589381, 0.9305022171457277],
        vec![0.24969447247243096, 0.09956860277852468],
        vec![-0.09692988273042452, -0.44564666070029046],
        vec![-0.9345616529073995, 0.8368589692284724],
        vec![-0.8174440742530489, -0.8547137561766952],
        vec![0.8482980509030742, -0.6223550428036833],
    ];
    let case = Case {
        limits: vec![(0.3, 0.5, 2.0), (0.3, 0.5, 2.0)],
        frame_rate: 100.0,
        rows,
        interpolation: Interpolation::Cubic,
        policy: LimitPolicy::Clamp,
        speed: 1.512966818220072,
        event: Event::Disable,
        at: 0.7874154572316193,
        then: Some((Event::Shutdown, 0.32037899695954625)),
    };
    let js = joints(&case);
    let run = play(&case, &js, false).expect("the proof passes the motion");
    let off = run
        .rows
        .iter()
        .position(|r| r.state == State::Disabled)
        .unwrap();
    let last = &run.rows[off].commanded;
    assert!(last.iter().all(|s| s.velocity == 0.0), "{last:?}");
    check(&run, &js).unwrap();
}
