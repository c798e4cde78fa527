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
            let reply = step.reply.as_ref().expect("every request answered");
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
                // Rows it could not join before they end are reached at their last one, later.
                let reached = reply["end_s"].as_f64().unwrap().max(reply["join_s"].as_f64().unwrap());
                path_end = Some(reached + case.horizon_s);
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
            let reply = step.reply.as_ref().expect("every request answered");
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
                let reached = reply["end_s"].as_f64().unwrap().max(reply["join_s"].as_f64().unwrap());
                path_end = Some(reached + case.horizon_s);
            }
        }
        prop_assert!(accepted > 0, "no chunk accepted: {:?}", report.steps);
    }
}
