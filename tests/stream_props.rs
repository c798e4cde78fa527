//! Streams under a bad network, rehearsed on the demo arm: random chunk contents (now and then a
//! row past the limits or a leap), rates from 10 to 100 Hz, 1–8 rows a chunk, arrival jitter,
//! dropped and duplicated chunks and a stall long enough to starve the path. Whatever arrives,
//! every commanded setpoint stays inside the limits as the drives see consecutive setpoints
//! (finite differences of the trace, the one checker), so position and velocity are continuous
//! at every seam; every reply is an acceptance or one of the defined refusals (`late`, `stale`,
//! `invalid_motion`); a duplicate is `stale`; the stream is `starved` once the path has passed
//! its last accepted row; the run ends at rest.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

use std::path::Path;
use std::sync::{Arc, Mutex};

use motiond::config::JointGroup;
use motiond::rehearse::{Rehearsal, Script};
use motiond::rt::{State, TraceRow};
use motiond::session::{Robot, RobotSpec};
use motiond::trajectory::{Envelope, Setpoint};
use proptest::prelude::*;
use serde_json::{Value, json};

const CONFIG: &str = "config/motiond.yaml";
/// The joints streamed (the rest hold).
const JOINTS: [&str; 3] = ["base_yaw", "shoulder_pitch", "elbow_pitch"];

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(12);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn robot() -> Robot {
    let spec = RobotSpec {
        config: Some(Path::new(env!("CARGO_MANIFEST_DIR")).join(CONFIG)),
        ..RobotSpec::default()
    };
    Robot::load(&spec).unwrap().unwrap()
}

/// Per tick: the loop's state and the setpoints sent.
type Trace = Vec<(State, Vec<Setpoint>)>;

#[derive(Debug, Clone)]
struct Case {
    rate_hz: f64,
    rows_per_chunk: usize,
    horizon_s: f64,
    /// Per chunk: arrival jitter (s), dropped, sent twice, and a wild row (past a limit, or a leap).
    chunks: Vec<(f64, bool, bool, Option<usize>)>,
    /// Per row and joint, a step in [-1, 1] of the largest a row may move.
    steps: Vec<[f64; 3]>,
    /// The chunk after which the policy stalls, and for how long (s).
    stall: (usize, f64),
}

fn case() -> impl Strategy<Value = Case> {
    (10.0f64..=100.0, 1usize..=8, 0.03f64..0.3, 6usize..=16).prop_flat_map(
        |(rate_hz, rows_per_chunk, horizon_s, n)| {
            let chunk = (
                0.0f64..0.5,
                prop::bool::weighted(0.12),
                prop::bool::weighted(0.12),
                prop::option::weighted(0.1, 0usize..8),
            );
            (
                Just(rate_hz),
                Just(rows_per_chunk),
                Just(horizon_s),
                prop::collection::vec(chunk, n),
                prop::collection::vec(prop::array::uniform3(-1.0f64..=1.0), n * rows_per_chunk),
                (1usize..n, 0.2f64..1.2),
            )
                .prop_map(
                    |(rate_hz, rows_per_chunk, horizon_s, chunks, steps, stall)| Case {
                        rate_hz,
                        rows_per_chunk,
                        horizon_s,
                        chunks,
                        steps,
                        stall,
                    },
                )
        },
    )
}

/// A random walk of the streamed joints, at most 0.6 rad/s, within ±1 rad.
fn rows(case: &Case) -> Vec<[f64; 3]> {
    let dt = 1.0 / case.rate_hz;
    let mut p = [0.0f64; 3];
    case.steps
        .iter()
        .map(|s| {
            for j in 0..3 {
                p[j] = (p[j] + s[j] * 0.6 * dt).clamp(-1.0, 1.0);
            }
            p
        })
        .collect()
}

/// What a step expects of its reply.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    Any,
    Stale,
    /// A status taken at this stream time (s).
    Status(f64),
}

fn script(case: &Case) -> (String, Vec<Expect>) {
    script_for(case, None, &JOINTS, Vec::new())
}

/// The script of `case` for a stream of `joints` (the first columns of the rows) in `group`,
/// after `before` (steps with their times).
fn script_for(
    case: &Case,
    group: Option<&str>,
    joints: &[&str],
    before: Vec<(f64, Value)>,
) -> (String, Vec<Expect>) {
    let all = rows(case);
    let dt = 1.0 / case.rate_hz;
    let open_at = 0.1;
    let with_group = |mut v: Value| {
        if let Some(g) = group {
            v["group"] = json!(g);
        }
        v
    };
    let mut steps: Vec<(f64, Value, Expect)> = before
        .into_iter()
        .map(|(at, request)| (at, request, Expect::Any))
        .collect();
    steps.push((
        open_at,
        with_group(
            json!({"cmd": "stream_open", "joints": joints, "rate_hz": case.rate_hz,
               "horizon_s": case.horizon_s}),
        ),
        Expect::Any,
    ));
    let mut delay = 0.0;
    for (c, &(jitter, dropped, twice, wild)) in case.chunks.iter().enumerate() {
        // The first chunk comes on time, whole: the stream moves the robot in every case.
        let (jitter, dropped, wild) = if c == 0 {
            (0.0, false, None)
        } else {
            (jitter, dropped, wild)
        };
        let first = c * case.rows_per_chunk;
        let t0 = first as f64 * dt + delay;
        let mut positions: Vec<Vec<f64>> = all[first..first + case.rows_per_chunk]
            .iter()
            .map(|r| r[..joints.len()].to_vec())
            .collect();
        if let Some(w) = wild {
            let row = w % positions.len();
            // Alternately past base_yaw's limit (2.8) and a leap no limit allows in one row.
            positions[row][0] = if c % 2 == 0 {
                3.5
            } else {
                -positions[row][0] - 1.5
            };
        }
        let at = open_at + 0.01 + t0 + jitter * dt * case.rows_per_chunk as f64;
        let chunk = with_group(
            json!({"cmd": "stream_chunk", "seq": c + 1, "t0": t0, "positions": positions}),
        );
        if !dropped {
            steps.push((at, chunk.clone(), Expect::Any));
            if twice {
                steps.push((at + 0.002, chunk, Expect::Stale));
            }
        }
        if c + 1 == case.stall.0 {
            // The policy stalls; a status near the end of the stall.
            let stall = case.stall.1;
            let seen = at + stall - 0.005;
            steps.push((
                seen,
                json!({"cmd": "status"}),
                Expect::Status(seen - open_at),
            ));
            delay += stall;
        }
    }
    let last = steps.iter().map(|s| s.0).fold(0.0, f64::max);
    steps.push((
        last + 0.05,
        with_group(json!({"cmd": "stream_close"})),
        Expect::Any,
    ));
    // Stable: equal times keep their order.
    steps.sort_by(|a, b| a.0.total_cmp(&b.0));
    let expect = steps.iter().map(|s| s.2).collect();
    let steps: Vec<Value> = steps
        .into_iter()
        .map(|(at, request, _)| json!({"at": (at * 1000.0).round() / 1000.0, "request": request}))
        .collect();
    (json!({ "steps": steps }).to_string(), expect)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn a_stream_stays_within_the_limits_whatever_arrives(case in case()) {
        let robot = robot();
        let joints = robot.joints.clone();
        let (text, expect) = script(&case);
        let script = Script::parse(&text, Path::new("stream.yaml"), &joints).unwrap();
        let mut rehearsal = Rehearsal::new(robot, script).unwrap();
        let rate = rehearsal.rate_hz();
        let trace: Arc<Mutex<Trace>> = Arc::default();
        let sink = trace.clone();
        rehearsal.trace_to(Box::new(move |row: &TraceRow| {
            sink.lock().unwrap().push((row.state, row.commanded.clone()));
        }));
        let report = rehearsal.run();

        let mut envelope = Envelope::new(&joints, rate);
        for (tick, (state, commanded)) in trace.lock().unwrap().iter().enumerate() {
            if *state == State::Disabled {
                continue;
            }
            if let Err(breach) = envelope.push(commanded) {
                panic!("tick {tick} ({state:?}): {breach}\n{case:?}");
            }
        }
        prop_assert_eq!(report.result.limit_violations, 0);
        prop_assert_eq!(report.result.state, State::Holding, "{:?}", report.result);
        // At rest at the end (the spline's last knot holds its velocity to rounding).
        let trace = trace.lock().unwrap();
        let (_, last) = trace.last().unwrap();
        prop_assert!(last.iter().all(|s| s.velocity.abs() < 1e-12), "{last:?}");

        // When the path reaches the last accepted chunk's last row, in stream time plus the
        // horizon.
        let mut path_end: Option<f64> = None;
        let mut accepted = 0;
        for (step, want) in report.steps.iter().zip(&expect) {
            let reply = step.reply_json().expect("every request answered");
            let code = reply["error"]["code"].as_str();
            match want {
                Expect::Stale => prop_assert_eq!(code, Some("stale"), "{}", reply),
                Expect::Any => prop_assert!(
                    matches!(code, None | Some("late" | "stale" | "invalid_motion")),
                    "{}", reply
                ),
                Expect::Status(now) => {
                    let state = reply["streams"][0]["state"].as_str();
                    if path_end.is_some_and(|end| end + 0.002 < *now) {
                        prop_assert_eq!(state, Some("starved"), "{}", reply);
                        prop_assert_eq!(reply["state"].as_str(), Some("starved"));
                    }
                }
            }
            if reply["ok"] == json!(true) && reply["end_s"].is_number() {
                accepted += 1;
                // Past the last row's time the path brakes, joined or not.
                path_end = Some(reply["end_s"].as_f64().unwrap() + case.horizon_s);
            }
        }
        // Not vacuous: the stream moved the robot.
        prop_assert!(accepted > 0, "no chunk accepted: {:?}", report.steps);
    }
}

/// The demo arm with two joint groups: `arm` (shoulder_pitch, elbow_pitch) and `wrist`
/// (wrist_pitch, wrist_roll); base_yaw and the gripper belong to none.
fn robot_with_groups() -> Robot {
    let mut robot = robot();
    let config = robot.config.as_mut().unwrap();
    config.groups = [
        ("arm", ["shoulder_pitch", "elbow_pitch"]),
        ("wrist", ["wrist_pitch", "wrist_roll"]),
    ]
    .map(|(name, dofs)| JointGroup {
        name: name.into(),
        dofs: dofs.map(String::from).to_vec(),
    })
    .to_vec();
    robot
}

/// Rehearses `text`: the report and, per tick, the loop's state and the setpoints sent.
fn rehearse_traced(robot: Robot, text: &str) -> (motiond::rehearse::Report, Trace) {
    let joints = robot.joints.clone();
    let script = Script::parse(text, Path::new("stream.yaml"), &joints).unwrap();
    let mut rehearsal = Rehearsal::new(robot, script).unwrap();
    let trace: Arc<Mutex<Trace>> = Arc::default();
    let sink = trace.clone();
    rehearsal.trace_to(Box::new(move |row: &TraceRow| {
        sink.lock()
            .unwrap()
            .push((row.state, row.commanded.clone()));
    }));
    let report = rehearsal.run();
    let trace = std::mem::take(&mut *trace.lock().unwrap());
    (report, trace)
}

proptest! {
    #![proptest_config(config())]

    /// A stream for the `arm` group (both its joints, or only elbow_pitch with shoulder_pitch
    /// held) while the `wrist` group holds or plays a motion: the whole robot stays within the
    /// limits, the wrist plays exactly as it does without the stream, the joints of no group
    /// never move, and the arm's stream starves, resumes and ends at rest as a whole-robot one.
    #[test]
    fn a_group_stream_leaves_the_other_joints_holding_or_playing_as_they_would(
        case in case(),
        wrist_plays in any::<bool>(),
        both in any::<bool>(),
    ) {
        let streamed: &[&str] = if both { &["shoulder_pitch", "elbow_pitch"] } else { &["elbow_pitch"] };
        let before = if wrist_plays {
            vec![(0.05, json!({"cmd": "play", "motion": "wave", "group": "wrist"}))]
        } else {
            Vec::new()
        };
        let (text, expect) = script_for(&case, Some("arm"), streamed, before.clone());
        let robot = robot_with_groups();
        let joints = robot.joints.clone();
        let rate = robot.config.as_ref().unwrap().control.rate_hz;
        let (report, trace) = rehearse_traced(robot, &text);
        // The same without the stream: what the wrist does alone.
        let steps: Vec<Value> = before
            .iter()
            .map(|(at, r)| json!({"at": at, "request": r}))
            .collect();
        let end = report.result.tick as f64 / rate;
        let alone = json!({"steps": steps, "end": end}).to_string();
        let (_, baseline) = rehearse_traced(robot_with_groups(), &alone);

        let mut envelope = Envelope::new(&joints, rate);
        for (tick, (state, commanded)) in trace.iter().enumerate() {
            if *state == State::Disabled {
                continue;
            }
            if let Err(breach) = envelope.push(commanded) {
                panic!("tick {tick} ({state:?}): {breach}\n{case:?}");
            }
        }
        prop_assert_eq!(report.result.limit_violations, 0);
        let index = |name: &str| joints.index_of(name).unwrap();
        let arm = [index("shoulder_pitch"), index("elbow_pitch")];
        let others: Vec<usize> = (0..joints.len()).filter(|j| !arm.contains(j)).collect();
        prop_assert!(baseline.len() + 1 >= trace.len(), "{} {}", trace.len(), baseline.len());
        for (tick, ((_, with), (_, without))) in trace.iter().zip(&baseline).enumerate() {
            for &j in &others {
                prop_assert_eq!(
                    with[j], without[j],
                    "tick {}: {} differs from the run without the stream", tick, &joints.dofs[j].name
                );
            }
        }
        // A joint of the group the stream does not name holds where it was.
        if !both {
            let held = trace[0].1[arm[0]].position;
            prop_assert!(trace.iter().all(|(_, c)| c[arm[0]].position == held));
        }
        let (_, last) = trace.last().unwrap();
        prop_assert!(last.iter().all(|s| s.velocity.abs() < 1e-12), "{:?}", last);

        let mut path_end: Option<f64> = None;
        let mut accepted = 0;
        let skip = before.len();
        for (step, want) in report.steps.iter().zip(&expect).skip(skip) {
            let reply = step.reply_json().expect("every request answered");
            let code = reply["error"]["code"].as_str();
            match want {
                Expect::Stale => prop_assert_eq!(code, Some("stale"), "{}", reply),
                Expect::Any => prop_assert!(
                    matches!(code, None | Some("late" | "stale" | "invalid_motion")),
                    "{}", reply
                ),
                Expect::Status(now) => {
                    if path_end.is_some_and(|end| end + 0.002 < *now) {
                        prop_assert_eq!(reply["streams"][0]["state"].as_str(), Some("starved"), "{}", reply);
                        prop_assert_eq!(reply["streams"][0]["group"].as_str(), Some("arm"));
                        prop_assert_eq!(reply["groups"]["arm"]["state"].as_str(), Some("starved"), "{}", reply);
                    }
                }
            }
            if reply["ok"] == json!(true) && reply["end_s"].is_number() {
                accepted += 1;
                path_end = Some(reply["end_s"].as_f64().unwrap() + case.horizon_s);
            }
        }
        prop_assert!(accepted > 0, "no chunk accepted: {:?}", report.steps);
    }
}

/// Where a stream's ending starts and each streamed joint's stop, from a trace: the tick of the
/// last row (the last `Streaming` one), and per joint in `dofs` the velocity there, the ticks
/// until it is at rest and the distance it travels meanwhile. The loop reads `Starved` from the
/// tick after the last row until the last joint is at rest, then `Holding` (a stop of one tick
/// is over before a tick could read starved).
fn ending(trace: &Trace, dofs: &[usize]) -> (usize, Vec<(f64, usize, f64)>) {
    let last = trace
        .iter()
        .rposition(|(s, _)| *s == State::Streaming)
        .expect("the stream played");
    let stops: Vec<(f64, usize, f64)> = dofs
        .iter()
        .map(|&j| {
            let at = &trace[last].1[j];
            let stopped = (last..trace.len())
                .find(|&k| trace[k..].iter().all(|(_, c)| c[j].velocity.abs() < 1e-12))
                .unwrap();
            let past = trace[stopped].1[j].position - at.position;
            (at.velocity, stopped - last, past)
        })
        .collect();
    let rest = last + stops.iter().map(|s| s.1).max().unwrap_or(0).max(1);
    let states: Vec<State> = trace[last + 1..=rest].iter().map(|(s, _)| *s).collect();
    let mut want = vec![State::Starved; rest - last - 1];
    want.push(State::Holding);
    assert_eq!(states, want, "from the last row (tick {last}) to rest");
    (last, stops)
}

/// The time-optimal stop from velocity `v` at acceleration limits `a` (the model gives no jerk
/// limit, so the deceleration starts at once): its duration (s) and distance.
fn optimal_stop(v: f64, a: motiond::robot::Limits) -> (f64, f64) {
    let decel = if v > 0.0 { -a.lower } else { a.upper };
    (v.abs() / decel, v * v.abs() / (2.0 * decel))
}

/// Each joint's stop after the last row is the time-optimal one: ending on the first control
/// tick at or after the continuous optimum, so at most one tick longer, and as the stop is
/// stretched to that tick at a constant deceleration (v·T/2), at most half a tick's travel
/// (|v|/2 per tick) farther than v²/2a.
fn assert_time_optimal(
    joints: &motiond::trajectory::JointSet,
    dofs: &[usize],
    stops: &[(f64, usize, f64)],
    rate: f64,
) -> Result<(), TestCaseError> {
    for (&j, &(v, ticks, past)) in dofs.iter().zip(stops) {
        let (t, d) = optimal_stop(v, joints.dofs[j].limits.acceleration);
        let name = &joints.dofs[j].name;
        prop_assert!(
            ticks as f64 >= t * rate - 1e-6 && (ticks as f64) < t * rate + 1.0 + 1e-6,
            "{name}: at rest {ticks} ticks after the last row at {v} rad/s; optimum {} ticks",
            t * rate
        );
        prop_assert!(
            (past - d).abs() <= v.abs() / rate / 2.0 + 1e-9,
            "{name}: braked {past} rad from {v} rad/s; optimum {d}"
        );
    }
    Ok(())
}

fn within_limits(joints: &motiond::trajectory::JointSet, trace: &Trace, rate: f64) {
    let mut envelope = Envelope::new(joints, rate);
    for (tick, (state, commanded)) in trace.iter().enumerate() {
        if *state == State::Disabled {
            continue;
        }
        if let Err(breach) = envelope.push(commanded) {
            panic!("tick {tick} ({state:?}): {breach}");
        }
    }
}

#[derive(Debug, Clone)]
struct Ending {
    rate_hz: f64,
    rows_per_chunk: usize,
    horizon_s: f64,
    chunks: usize,
    /// Per chunk, how long before its first row is due it arrives, as a share of the horizon
    /// (below 0: after, up to its last row).
    early: Vec<f64>,
    /// How the last chunk arrives: `None` as the others, else this many control ticks before
    /// its last row is due (0: exactly at it).
    last_early_ticks: Option<u64>,
    /// Each streamed joint's velocity (rad/s): the rows lie on lines, so it is also the
    /// velocity at the last row.
    velocity: [f64; 3],
    /// None: the whole robot; Some(both): the `arm` group, both its joints or elbow_pitch only.
    group: Option<bool>,
}

fn ending_case() -> impl Strategy<Value = Ending> {
    (10.0f64..=100.0, 1usize..=8, 0.02f64..0.3).prop_flat_map(
        |(rate_hz, rows_per_chunk, horizon_s)| {
            // Up to about a second of rows.
            let most = ((rate_hz / rows_per_chunk as f64) as usize).clamp(1, 6);
            (1usize..=most).prop_flat_map(move |chunks| {
                (
                    prop::collection::vec(-1.0f64..=1.0, chunks),
                    prop::option::weighted(0.4, 0u64..4),
                    prop::array::uniform3(-0.6f64..=0.6),
                    prop::option::of(any::<bool>()),
                )
                    .prop_map(move |(early, last_early_ticks, velocity, group)| {
                        Ending {
                            rate_hz,
                            rows_per_chunk,
                            horizon_s,
                            chunks,
                            early,
                            last_early_ticks,
                            velocity,
                            group,
                        }
                    })
            })
        },
    )
}

proptest! {
    #![proptest_config(config())]

    /// However the chunks come — rate, rows a chunk, horizon, arrival (early, late, the last
    /// one exactly at or just before its end), group — the stream ends one way: past its last
    /// row it is `starved` and each joint brakes from the state there by its time-optimal stop
    /// (within a tick), all within the limits by finite differences, and it rests `starved`.
    #[test]
    fn a_stream_ends_starved_with_each_joints_time_optimal_stop_whatever_the_timing(
        case in ending_case(),
    ) {
        let (group, streamed): (Option<&str>, &[&str]) = match case.group {
            None => (None, &JOINTS),
            Some(true) => (Some("arm"), &["shoulder_pitch", "elbow_pitch"]),
            Some(false) => (Some("arm"), &["elbow_pitch"]),
        };
        let robot = robot_with_groups();
        let joints = robot.joints.clone();
        let rate = robot.config.as_ref().unwrap().control.rate_hz;
        let tick = 1.0 / rate;
        let dt = 1.0 / case.rate_hz;
        let open_at = 0.1;
        let with_group = |mut v: Value| {
            if let Some(g) = group {
                v["group"] = json!(g);
            }
            v
        };
        let mut steps = vec![json!({"at": open_at, "request": with_group(json!({
            "cmd": "stream_open", "joints": streamed, "rate_hz": case.rate_hz,
            "horizon_s": case.horizon_s}))})];
        let mut at = open_at;
        let span = (case.rows_per_chunk - 1) as f64 * dt;
        for c in 0..case.chunks {
            let t0 = (c * case.rows_per_chunk) as f64 * dt;
            let due = open_at + t0 + case.horizon_s;
            let e = case.early[c];
            let mut arrive = if e >= 0.0 { due - e * case.horizon_s } else { due - e * span };
            if c + 1 == case.chunks
                && let Some(ticks) = case.last_early_ticks
            {
                arrive = due + span - ticks as f64 * tick;
            }
            // The first chunk comes on time: the stream moves the robot in every case.
            if c == 0 {
                arrive = (due - case.horizon_s).max(open_at + tick);
            }
            // In order (a millisecond apart at least), on the rehearsal's millisecond grid.
            at = ((arrive.max(at + 0.001)) * 1000.0).round() / 1000.0;
            let positions: Vec<Vec<f64>> = (0..case.rows_per_chunk)
                .map(|i| {
                    let t = t0 + i as f64 * dt;
                    (0..streamed.len()).map(|j| case.velocity[j] * t).collect()
                })
                .collect();
            steps.push(json!({"at": at, "request": with_group(json!({
                "cmd": "stream_chunk", "seq": c + 1, "t0": t0, "positions": positions}))}));
        }
        let end = at + span + 1.5;
        steps.push(json!({"at": end - 0.01, "request": {"cmd": "status"}}));
        let text = json!({"steps": steps, "end": end}).to_string();
        let (report, trace) = rehearse_traced(robot, &text);

        within_limits(&joints, &trace, rate);
        prop_assert_eq!(report.result.limit_violations, 0);
        let replies: Vec<Value> = report.steps.iter().filter_map(|s| s.reply_json()).collect();
        let accepted: Vec<&Value> = replies
            .iter()
            .filter(|r| r["ok"] == json!(true) && r["end_s"].is_number())
            .collect();
        prop_assert!(!accepted.is_empty(), "{:?}", replies);
        for r in &replies {
            let code = r["error"]["code"].as_str();
            prop_assert!(matches!(code, None | Some("late")), "{}", r);
        }
        // Still open, no chunk since: starved, the loop at rest.
        let status = replies.last().unwrap();
        prop_assert_eq!(status["streams"][0]["state"].as_str(), Some("starved"), "{}", status);

        let dofs: Vec<usize> = streamed.iter().map(|n| joints.index_of(n).unwrap()).collect();
        let (last, stops) = ending(&trace, &dofs);
        // The braking starts at the last accepted row's tick: on the rows when the path joined
        // them (within a tick's travel: the row need not fall on a tick), moving as they do;
        // else wherever the path heading for the last row is then.
        let final_chunk = accepted.last().unwrap();
        let end_s = final_chunk["end_s"].as_f64().unwrap();
        prop_assert!(((last as f64 / rate) - (open_at + case.horizon_s + end_s)).abs() <= 2.0 * tick + 1e-9,
            "last row at {} s, braking from {} s", open_at + case.horizon_s + end_s, last as f64 / rate);
        if final_chunk["join_s"].is_number() {
            for (j, (&d, &(v, _, _))) in dofs.iter().zip(&stops).enumerate() {
                let p = trace[last].1[d].position;
                let row = case.velocity[j] * end_s;
                prop_assert!((p - row).abs() <= case.velocity[j].abs() * tick + 1e-9, "{}: {p} vs {row}", streamed[j]);
                // A single row has no velocity of its own (a chunk of one after starvation).
                if case.rows_per_chunk > 1 {
                    prop_assert!((v - case.velocity[j]).abs() < 1e-6, "{}: {v}", streamed[j]);
                }
            }
        }
        assert_time_optimal(&joints, &dofs, &stops, rate)?;
    }
}

/// The outsider rehearsals of issue 25's closing note: each chunk of a 30 Hz stream (3 rows,
/// every 0.1 s, horizon 0.1 s) arrives as its first row is due, and its last row passes 33 ms
/// before the next chunk comes. The path used to chase each chunk's last row at rest past its
/// time, reading `streaming` while a blend eased it to rest at ~3 rad/s². Now no chunk can be
/// joined before its rows end (each reply says `join_s` null, every row skipped), the path heads
/// for the last row while the rows last, and every gap is what it is — `starved`, each joint
/// braking by its time-optimal stop from the state at the last row — within the limits.
#[test]
fn late_rows_end_as_every_stream_does_starved_and_time_optimal() {
    for script in [
        "stream-late-rows-then-starved.yaml",
        "stream-late-rows-sigterm.yaml",
    ] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/config")
            .join(script);
        let text = std::fs::read_to_string(&path).unwrap();
        let robot = robot();
        let joints = robot.joints.clone();
        let rate = robot.config.as_ref().unwrap().control.rate_hz;
        let (report, trace) = rehearse_traced(robot, &text);
        within_limits(&joints, &trace, rate);
        assert_eq!(report.result.limit_violations, 0, "{script}");
        for reply in report.steps.iter().filter_map(|s| s.reply_json()) {
            if reply["end_s"].is_number() {
                assert_eq!(
                    (&reply["join_s"], &reply["skipped_rows"]),
                    (&Value::Null, &json!(3)),
                    "{reply}"
                );
            }
        }
        // Every chunk's rows end starved, never straight from streaming to rest.
        let states: Vec<&str> = report.states.iter().map(|(_, s)| s.as_str()).collect();
        assert!(
            states
                .windows(2)
                .all(|w| w[0] != "streaming" || w[1] != "holding"),
            "{script}: {states:?}"
        );
        assert_eq!(
            states.iter().filter(|s| **s == "starved").count(),
            14,
            "{script}: {states:?}"
        );
        if script.contains("sigterm") {
            // The shutdown's stop takes over from the last braking tail.
            assert_eq!(
                states[states.len() - 3..],
                ["starved", "stopping", "holding"],
                "{states:?}"
            );
            continue;
        }
        let dofs = [
            joints.index_of("base_yaw").unwrap(),
            joints.index_of("shoulder_pitch").unwrap(),
        ];
        let (_, stops) = ending(&trace, &dofs);
        assert!(stops.iter().all(|s| s.0.abs() > 0.1), "{script}: {stops:?}");
        assert_time_optimal(&joints, &dofs, &stops, rate).unwrap();
    }
}

/// What stops the robot in [`a_stop_hold_estop_or_fault_stops_what_it_covers_and_nothing_else`].
#[derive(Debug, Clone, Copy)]
enum Stopper {
    /// `stop` or `hold`, for every slot or one group.
    Request(&'static str, Option<&'static str>),
    EStop,
    /// A drive fault on this joint.
    Fault(&'static str),
}

const STOPPERS: [Stopper; 10] = [
    Stopper::Request("stop", None),
    Stopper::Request("stop", Some("arm")),
    Stopper::Request("stop", Some("wrist")),
    Stopper::Request("hold", None),
    Stopper::Request("hold", Some("arm")),
    Stopper::Request("hold", Some("wrist")),
    Stopper::Request("quick_stop", Some("arm")),
    Stopper::EStop,
    Stopper::Fault("elbow_pitch"),
    Stopper::Fault("wrist_pitch"),
];

/// A stream (of the `arm` group beside `wave` on the `wrist` group, or of the whole robot) at
/// 50 Hz, five rows a chunk for 2 s, a smooth swing of its joints from where they are; `stopper`
/// at `at` s (none: the run as it is without it). Chunks keep coming after the stop, as a policy
/// that has not noticed sends them. The run lasts 3.5 s.
fn stopped_stream_script(group: bool, stopper: Option<(Stopper, f64)>) -> String {
    let (joints, group_field): (&[&str], Option<&str>) = if group {
        (&["shoulder_pitch", "elbow_pitch"], Some("arm"))
    } else {
        (&["base_yaw", "shoulder_pitch", "elbow_pitch"], None)
    };
    let with_group = |mut v: Value| {
        if let Some(g) = group_field {
            v["group"] = json!(g);
        }
        v
    };
    let mut steps: Vec<(f64, Value)> = Vec::new();
    if group {
        steps.push((
            0.05,
            json!({"request": {"cmd": "play", "motion": "wave", "group": "wrist"}}),
        ));
    }
    let open_at = 0.1;
    steps.push((
        open_at,
        json!({"request": with_group(json!({"cmd": "stream_open", "joints": joints,
            "rate_hz": 50, "horizon_s": 0.1}))}),
    ));
    let swing = |t: f64, j: usize| {
        let sign = if j.is_multiple_of(2) { 1.0 } else { -1.0 };
        sign * 0.15 * (1.0 - (std::f64::consts::TAU * t / 1.6).cos())
    };
    for c in 0..20 {
        let t0 = 0.1 * c as f64;
        let positions: Vec<Vec<f64>> = (0..5)
            .map(|r| {
                let t = t0 + r as f64 / 50.0;
                (0..joints.len()).map(|j| swing(t, j)).collect()
            })
            .collect();
        steps.push((
            open_at + 0.01 + t0,
            json!({"request": with_group(json!({"cmd": "stream_chunk", "seq": c + 1,
                "t0": t0, "positions": positions}))}),
        ));
    }
    if let Some((stopper, at)) = stopper {
        let step = match stopper {
            Stopper::Request(cmd, g) => {
                let mut r = json!({ "cmd": cmd });
                if let Some(g) = g {
                    r["group"] = json!(g);
                }
                json!({ "request": r })
            }
            Stopper::EStop => json!({"estop": "pressed"}),
            Stopper::Fault(dof) => json!({"fault": {"dof": dof, "kind": "error"}}),
        };
        steps.push((at, step));
    }
    steps.push((3.4, json!({"request": {"cmd": "status"}})));
    // Stable: equal times keep their order.
    steps.sort_by(|a, b| a.0.total_cmp(&b.0));
    let steps: Vec<Value> = steps
        .into_iter()
        .map(|(at, mut step)| {
            step["at"] = json!((at * 1000.0).round() / 1000.0);
            step
        })
        .collect();
    json!({ "end": 3.5, "steps": steps }).to_string()
}

/// Group streams and whole-robot streams against every stop: `stop`, `hold` and `quick_stop`
/// for every slot or one group, the E-stop and a drive fault (in the streamed group or the
/// other), just after the stream began, mid-swing and while it brakes past its last row. On what
/// the drives were sent: every setpoint inside the limits by finite differences; the joints
/// the stop covers (every joint for the E-stop, a fault, or a stop without a group; the group's
/// joints for a group's stop, and every joint when a whole-robot stream moves them) come to rest
/// within a second and never move again, whatever chunks still arrive (none is accepted once
/// the stream's slot is stopped); the joints it does not cover move exactly as they do in the
/// run without it (the other group's motion plays on). Found: a group's stop during a
/// whole-robot stream was answered ok and the group's joints moved on.
#[test]
fn a_stop_hold_estop_or_fault_stops_what_it_covers_and_nothing_else() {
    let joints = robot_with_groups().joints.clone();
    let index = |name: &str| joints.index_of(name).unwrap();
    let arm = [index("shoulder_pitch"), index("elbow_pitch")];
    let wrist = [index("wrist_pitch"), index("wrist_roll")];
    let mut runs = 0;
    let mut worst_rest = 0;
    for group in [true, false] {
        let (report, baseline) =
            rehearse_traced(robot_with_groups(), &stopped_stream_script(group, None));
        let rate = report.rate_hz;
        within_limits(&joints, &baseline, rate);
        let streamed: Vec<usize> = if group {
            arm.to_vec()
        } else {
            vec![index("base_yaw"), arm[0], arm[1]]
        };
        // Not vacuous: the stream (and in the group run the wrist's motion) moved.
        let moved = |trace: &Trace, j: usize| {
            trace
                .iter()
                .any(|(_, c)| c[j].position != trace[0].1[j].position)
        };
        assert!(
            streamed.iter().all(|&j| moved(&baseline, j)),
            "the stream did not move"
        );
        if group {
            assert!(
                wrist.iter().any(|&j| moved(&baseline, j)),
                "wave did not move the wrist"
            );
        }
        for stopper in STOPPERS {
            for at in [0.15, 0.75, 2.2] {
                let text = stopped_stream_script(group, Some((stopper, at)));
                let what = format!(
                    "{} stream, {stopper:?} at {at} s",
                    if group { "arm" } else { "whole-robot" }
                );
                let (report, trace) = rehearse_traced(robot_with_groups(), &text);
                runs += 1;
                within_limits(&joints, &trace, rate);
                let covered: Vec<usize> = match stopper {
                    Stopper::Request(_, Some("arm")) => arm.to_vec(),
                    Stopper::Request(_, Some(_)) => wrist.to_vec(),
                    _ => (0..joints.len()).collect(),
                };
                // A group's stop stops a whole-robot stream moving the group's joints: all of it.
                let covered: Vec<usize> =
                    if !group && matches!(stopper, Stopper::Request(_, Some(_))) {
                        (0..joints.len()).collect()
                    } else {
                        covered
                    };
                let stream_stopped = streamed.iter().all(|j| covered.contains(j));
                let event = (at * rate).round() as usize;
                for &j in &covered {
                    let held = &trace.last().unwrap().1[j];
                    let rest = trace
                        .iter()
                        .rposition(|(_, c)| c[j].position != held.position || c[j].velocity != 0.0)
                        .map_or(0, |k| k + 1);
                    assert!(
                        rest <= event + rate as usize,
                        "{what}: {} still moved {} ticks after the stop\n{text}",
                        joints.dofs[j].name,
                        rest - event
                    );
                    worst_rest = worst_rest.max(rest.saturating_sub(event));
                }
                for j in (0..joints.len()).filter(|j| !covered.contains(j)) {
                    for (k, ((_, with), (_, without))) in trace.iter().zip(&baseline).enumerate() {
                        assert_eq!(
                            with[j], without[j],
                            "{what}: tick {k}: {} differs from the run without the stop\n{text}",
                            joints.dofs[j].name
                        );
                    }
                }
                // Once the stream's slot is stopped, no chunk is taken.
                if !covered.is_empty() && stream_stopped {
                    for step in &report.steps {
                        let (Some(tick), Some(reply)) = (step.tick, step.reply_json()) else {
                            continue;
                        };
                        let chunk = reply["end_s"].is_number();
                        assert!(
                            !(chunk && tick as usize > event + 1),
                            "{what}: a chunk was taken at tick {tick} after the stop: {reply}"
                        );
                    }
                }
            }
        }
    }
    println!(
        "{runs} rehearsals (arm group stream beside wave on the wrist, and a whole-robot stream; \
         {} stops at 3 times): the stopped joints at rest within {worst_rest} ticks",
        STOPPERS.len()
    );
}
