//! Random motions for the property tests of the whole playback (`tests/rt_envelope.rs`,
//! `tests/session_features.rs`): per DOF a random walk in acceleration within a fraction of the
//! limits, at rest at both ends, with random limits, interpolation, policy, speed and an event.

#![allow(dead_code)]

use motiond::backend::sim::SimFaultKind;
use motiond::motion::seq::{MultiValueSeq, Timing};
use motiond::robot::Limits;
use motiond::trajectory::{DofLimits, Interpolation, JointSet, LimitPolicy};
use proptest::prelude::*;

#[derive(Debug, Clone)]
pub struct Case {
    /// Per DOF: position, velocity and acceleration limit magnitudes.
    pub limits: Vec<(f64, f64, f64)>,
    pub frame_rate: f64,
    /// Rows of fractions in [-1, 1] of each DOF's position limit (before shaping).
    pub rows: Vec<Vec<f64>>,
    pub interpolation: Interpolation,
    pub policy: LimitPolicy,
    pub speed: f64,
    pub event: Event,
    /// When the event happens, as a fraction of the motion's duration.
    pub at: f64,
    /// A second event this many seconds after the first (a fault during a disable's or a
    /// shutdown's stop, a disable during a fault's quick stop, …).
    pub then: Option<(Event, f64)>,
}

#[derive(Debug, Clone)]
pub enum Event {
    Nothing,
    Stop,
    QuickStop,
    PauseResume,
    Fault {
        dof: usize,
        kind: SimFaultKind,
    },
    /// The E-stop input is pressed.
    EStop,
    /// `disable`: decelerate to rest, then power off.
    Disable,
    /// `shutdown`: decelerate to rest, then the loop ends.
    Shutdown,
}

pub fn joints(case: &Case) -> JointSet {
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

pub fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        Just(Event::Nothing),
        Just(Event::Stop),
        Just(Event::QuickStop),
        Just(Event::PauseResume),
        Just(Event::EStop),
        Just(Event::Disable),
        Just(Event::Shutdown),
        (
            0..3usize,
            prop_oneof![
                Just(SimFaultKind::Error),
                Just(SimFaultKind::Stall),
                Just(SimFaultKind::NoFeedback),
                Just(SimFaultKind::Estop)
            ]
        )
            .prop_map(|(dof, kind)| Event::Fault { dof, kind }),
    ]
}

pub fn case() -> impl Strategy<Value = Case> {
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
                prop::option::of((event(), 0.0f64..0.5)),
            )
        })
        .prop_map(
            |(limits, frame_rate, rows, interpolation, policy, speed, event, at, then)| Case {
                limits,
                frame_rate,
                rows,
                interpolation,
                policy,
                speed,
                event,
                at,
                then,
            },
        )
}

/// The source samples: per DOF a random walk in acceleration (each row's fraction of half the
/// acceleration limit), its velocity kept to 80 % of the limit, its position clamped at 110 % of
/// the position limit (so that clamping has work to do) — most such motions pass the proof under
/// some policy, and enough cross a limit somewhere to exercise the rest.
pub fn samples(case: &Case, looped: bool) -> MultiValueSeq {
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
