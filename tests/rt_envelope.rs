//! The safety envelope of the whole playback, as a property: random motions under every
//! interpolation and limit policy at random speeds, played through the library `Session` on the
//! simulated backend with a stop, a quick stop, a pause and resume or a drive fault at a random
//! time — and every setpoint the drives were sent (approach, motion, pause, stop, quick stop,
//! hold) is inside the position, velocity and acceleration limits, measured by finite
//! differences of the loop's own trace (`trajectory::Envelope`). Looped motions the same, across
//! their seam.
//!
//! `PROPTEST_CASES` sets the number of cases (default 64); the worst share of each limit used is
//! printed (`--nocapture`).

use std::sync::Mutex;
use std::time::Duration;

use motiond::backend::sim::{Sim, SimFaultKind, SimSettings};
use motiond::rt::{ManualClock, Outcome, Repeat, Settings, State, TraceRow};
use motiond::seq::{MultiValueSeq, Timing};
use motiond::session::{Action, Scripted, Session};
use motiond::skel::Limits;
use motiond::trajectory::{
    BuildError, ColumnMap, DofLimits, Envelope, Interpolation, JointSet, LimitPolicy, Options,
    Usage, build_values,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

const RATE: f64 = 1000.0;

#[derive(Debug, Clone)]
struct Case {
    /// Per DOF: position, velocity and acceleration limit magnitudes.
    limits: Vec<(f64, f64, f64)>,
    frame_rate: f64,
    /// Rows of fractions in [-1, 1] of each DOF's position limit (before shaping).
    rows: Vec<Vec<f64>>,
    interpolation: Interpolation,
    policy: LimitPolicy,
    speed: f64,
    event: Event,
    /// When the event happens, as a fraction of the motion's duration.
    at: f64,
}

#[derive(Debug, Clone)]
enum Event {
    Nothing,
    Stop,
    QuickStop,
    PauseResume,
    Fault { dof: usize, kind: SimFaultKind },
}

fn joints(case: &Case) -> JointSet {
    let mut js = JointSet::uniform(
        case.limits.len(),
        DofLimits {
            position: Limits::symmetric(1.0),
            velocity: Limits::symmetric(1.0),
            acceleration: Limits::symmetric(1.0),
            effort: Limits::symmetric(100.0),
        },
    );
    for (d, &(p, v, a)) in js.dofs.iter_mut().zip(&case.limits) {
        d.limits.position = Limits::symmetric(p);
        d.limits.velocity = Limits::symmetric(v);
        d.limits.acceleration = Limits::symmetric(a);
    }
    js
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        Just(Event::Nothing),
        Just(Event::Stop),
        Just(Event::QuickStop),
        Just(Event::PauseResume),
        (
            0..3usize,
            prop_oneof![
                Just(SimFaultKind::Error),
                Just(SimFaultKind::Stall),
                Just(SimFaultKind::NoFeedback)
            ]
        )
            .prop_map(|(dof, kind)| Event::Fault { dof, kind }),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    (1..=3usize)
        .prop_flat_map(|n| {
            (
                prop::collection::vec((0.3f64..3.0, 0.5f64..4.0, 2.0f64..40.0), n),
                prop_oneof![Just(25.0), Just(50.0), Just(100.0), Just(250.0)],
                prop::collection::vec(prop::collection::vec(-1.0f64..1.0, n), 4..40),
                prop_oneof![
                    Just(Interpolation::Hold),
                    Just(Interpolation::Linear),
                    Just(Interpolation::Pchip),
                    Just(Interpolation::Cubic)
                ],
                prop_oneof![
                    Just(LimitPolicy::Reject),
                    Just(LimitPolicy::Clamp),
                    Just(LimitPolicy::Retime)
                ],
                0.25f64..2.0,
                event(),
                0.0f64..1.0,
            )
        })
        .prop_map(
            |(limits, frame_rate, rows, interpolation, policy, speed, event, at)| Case {
                limits,
                frame_rate,
                rows,
                interpolation,
                policy,
                speed,
                event,
                at,
            },
        )
}

/// The source samples: per DOF a random walk in acceleration (each row's fraction of half the
/// acceleration limit), its velocity kept to 80 % of the limit, its position clamped at 110 % of
/// the position limit (so that clamping has work to do) — most such motions pass the proof under
/// some policy, and enough cross a limit somewhere to exercise the rest.
fn samples(case: &Case, looped: bool) -> MultiValueSeq {
    let n = case.limits.len();
    let h = 1.0 / case.frame_rate;
    let mut x = vec![0.0; n];
    let mut w = vec![0.0; n];
    // At rest before and after, as recorded motions are.
    let mut rows: Vec<Vec<f64>> = vec![x.clone(); 3];
    for r in &case.rows {
        for (j, &(p, v, a)) in case.limits.iter().enumerate() {
            w[j] = (w[j] + r[j] * 0.15 * a * h).clamp(-0.8 * v, 0.8 * v);
            x[j] = (x[j] + w[j] * h).clamp(-1.1 * p, 1.1 * p);
        }
        rows.push(x.clone());
    }
    // Brake to rest gently, then stay.
    while w.iter().any(|wj| wj.abs() > 1e-12) {
        for (j, &(p, _, a)) in case.limits.iter().enumerate() {
            w[j] -= w[j].signum() * (0.15 * a * h).min(w[j].abs());
            x[j] = (x[j] + w[j] * h).clamp(-1.1 * p, 1.1 * p);
        }
        rows.push(x.clone());
    }
    rows.extend(std::iter::repeat_n(x.clone(), 3));
    if looped {
        // Back the way it came: the end meets the start in position and (zero) velocity.
        let back: Vec<Vec<f64>> = rows.iter().rev().skip(1).cloned().collect();
        rows.extend(back);
        rows.insert(0, vec![0.0; n]);
        rows.push(vec![0.0; n]);
    }
    MultiValueSeq {
        num_parts: n,
        timing: Timing::Fixed {
            frame_rate: case.frame_rate,
        },
        values: rows.concat(),
    }
}

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
        ..Settings::default()
    };
    let session =
        Session::stepped(settings, Box::new(sim), js.clone(), ManualClock::new(0)).unwrap();
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
    let script = match &case.event {
        Event::Nothing => vec![],
        Event::Stop => vec![Scripted {
            at_s: at,
            action: Action::Stop,
        }],
        Event::QuickStop => vec![Scripted {
            at_s: at,
            action: Action::QuickStop,
        }],
        Event::PauseResume => vec![
            Scripted {
                at_s: at,
                action: Action::Pause,
            },
            Scripted {
                at_s: at + 0.7,
                action: Action::Resume,
            },
        ],
        Event::Fault { dof, kind } => vec![Scripted {
            at_s: at,
            action: Action::Fault {
                injector,
                kind: *kind,
                dof: Some(dof % js.len()),
            },
        }],
    };
    let limit = Duration::from_secs_f64(started.approach_s + 3.0 * duration + 30.0);
    let outcome = session.run(started.motion_id, &script, limit, || None);
    // A while at rest afterwards: the hold is part of the stream too.
    session.wait_for(Duration::from_millis(50), |_| None::<()>);
    let (rows, dropped) = session.trace();
    assert_eq!(dropped, 0);
    Some(Run { rows, outcome })
}

/// Every setpoint sent is inside the envelope; the usage of each limit.
fn check(run: &Run, js: &JointSet) -> Result<Usage, TestCaseError> {
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
