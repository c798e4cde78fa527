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

use std::sync::Mutex;
use std::time::Duration;

use motiond::backend::sim::{Sim, SimSettings};
use motiond::estop::SimInput;
use motiond::rt::{ManualClock, Outcome, Repeat, Settings, State, TraceRow};
use motiond::session::{Action, Scripted, Session};
use motiond::trajectory::{
    BuildError, ColumnMap, Envelope, JointSet, Options, Setpoint, Stream, Usage, build_values,
};
use proptest::prop_assert;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

#[path = "support/random_motion.rs"]
mod random_motion;
use random_motion::{Case, Event, case, joints, samples};

const RATE: f64 = 1000.0;

struct Run {
    rows: Vec<TraceRow>,
    outcome: Option<Outcome>,
}

/// Plays the case through a stepped session; `None` when the proof refused the motion.
fn play(case: &Case, js: &JointSet, looped: bool) -> Option<Run> {
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
    let settings = Settings {
        trace_ticks: 1 << 12,
        // A drive's own E-stop (an injected `Estop` fault) takes the E-stop path.
        estop_drive: true,
        ..Settings::default()
    };
    let (estop, switch) = SimInput::new(0);
    let session = Session::stepped(
        settings,
        Box::new(sim),
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
    // A while at rest afterwards: the hold is part of the stream too.
    session.wait_for(Duration::from_millis(50), |_| None::<()>);
    let (rows, dropped) = session.trace();
    assert_eq!(dropped, 0);
    Some(Run { rows, outcome })
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
