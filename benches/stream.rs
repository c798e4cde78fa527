//! Streaming (issue 25) on the demo arm: a LeRobot-like 30 Hz action sequence (teleoperated
//! reaches between random poses, minimum-jerk, with a fresh 0.5 mrad of noise in every chunk)
//! sent as an ACT-style policy sends it: every 10 rows a chunk of the next 30 (overlapping:
//! newest wins), 0–8 ms late, 0.1 s horizon. Three figures:
//!
//! 1. latency: on a real `motiond serve` (simulated backend), from the tick a chunk is taken up to
//!    its first command (`ticks_ahead` of the reply), p50/p99, with the look-ahead the splice took
//!    (`lead_ticks`) and how many splices the loop missed and re-aimed further ahead.
//! 2. smoothness: the same schedule rehearsed (manual clock, deterministic); RMS jerk of the
//!    commanded stream (third finite difference at 1 kHz) against SciPy over the same window:
//!    a natural cubic spline through all accepted rows (the offline ideal) and
//!    `positions_upsampling` built chunk by chunk as ros2_controllers does
//!    (`benches/stream_reference.py`; needs python3 with numpy and scipy, else that column says so).
//! 3. starvation: a stream moving every joint at most of its velocity limit stops sending; the
//!    distance and time from its last row to rest, against Ruckig's time-optimal stop from the
//!    same state (`benches/stop_reference.py`; needs python3 with `ruckig`) and v²/2a.
//!
//! `cargo bench --bench stream` (add `-- --seconds S` for the sequence's length, default 20).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark fails loudly where its setup breaks"
)]

#[path = "../tests/daemon_harness/mod.rs"]
mod daemon_harness;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use daemon_harness::Daemon;
use motiond::rehearse::{Rehearsal, Script};
use motiond::rt::TraceRow;
use motiond::session::{Robot, RobotSpec};
use serde_json::{Value, json};

const JOINTS: [&str; 3] = ["base_yaw", "shoulder_pitch", "elbow_pitch"];
const FPS: f64 = 30.0;
const HORIZON_S: f64 = 0.1;
/// A chunk every this many rows, of this many rows.
const EVERY: usize = 10;
const CHUNK: usize = 30;
const OPEN_AT: f64 = 0.1;

/// Deterministic numbers in [0, 1) (PCG's LCG step).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Minimum-jerk reaches between random poses (±0.4 rad) over 1.2–2 s, resting 0.2–0.6 s between.
fn actions(seconds: f64, rng: &mut Lcg) -> Vec<[f64; 3]> {
    let (mut from, mut to) = ([0.0; 3], [0.0; 3]);
    let (mut start, mut span, mut next) = (0.0, 1.0, 0.0);
    (0..(seconds * FPS) as usize)
        .map(|f| {
            let t = f as f64 / FPS;
            if t >= next {
                from = to;
                to = [0; 3].map(|_| rng.next() * 0.8 - 0.4);
                start = t;
                span = 1.2 + 0.8 * rng.next();
                next = start + span + 0.2 + 0.4 * rng.next();
            }
            let s = ((t - start) / span).clamp(0.0, 1.0);
            let m = s * s * s * (10.0 - 15.0 * s + 6.0 * s * s);
            [0, 1, 2].map(|j| from[j] + (to[j] - from[j]) * m)
        })
        .collect()
}

/// The chunks as sent: (send time after the open, t0, rows).
fn schedule(rows: &[[f64; 3]], rng: &mut Lcg) -> Vec<(f64, f64, Vec<Vec<f64>>)> {
    (0..rows.len())
        .step_by(EVERY)
        .map(|first| {
            let t0 = first as f64 / FPS;
            let late = 0.004 + 0.008 * rng.next();
            let chunk = rows[first..(first + CHUNK).min(rows.len())]
                .iter()
                .map(|r| {
                    r.iter()
                        .map(|v| v + 0.0005 * (2.0 * rng.next() - 1.0))
                        .collect()
                })
                .collect();
            (t0 + late, t0, chunk)
        })
        .collect()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn robot() -> Robot {
    let spec = RobotSpec {
        config: Some(daemon_harness::repo().join("config/motiond.yaml")),
        ..RobotSpec::default()
    };
    Robot::load(&spec).unwrap().unwrap()
}

/// A rehearsal of `chunks` on the demo arm: the replies, and per tick the commanded positions of
/// [`JOINTS`].
fn rehearse(chunks: &[(f64, f64, Vec<Vec<f64>>)]) -> (Vec<Value>, Vec<[f64; 3]>) {
    let robot = robot();
    let index = JOINTS.map(|n| robot.joints.index_of(n).unwrap());
    let mut steps = vec![json!({"at": OPEN_AT, "request": {"cmd": "stream_open",
        "joints": JOINTS, "rate_hz": FPS, "horizon_s": HORIZON_S}})];
    for (seq, (sent, t0, rows)) in chunks.iter().enumerate() {
        let at = ((OPEN_AT + sent) * 1000.0).round() / 1000.0;
        steps.push(
            json!({"at": at, "request": {"cmd": "stream_chunk", "seq": seq,
            "t0": t0, "positions": rows}}),
        );
    }
    let text = json!({ "steps": steps }).to_string();
    let script = Script::parse(&text, Path::new("stream.yaml"), &robot.joints).unwrap();
    let mut rehearsal = Rehearsal::new(robot, script).unwrap();
    let trace: Arc<Mutex<Vec<[f64; 3]>>> = Arc::default();
    let sink = trace.clone();
    rehearsal.trace_to(Box::new(move |row: &TraceRow| {
        sink.lock()
            .unwrap()
            .push(index.map(|i| row.commanded[i].position));
    }));
    let report = rehearsal.run();
    assert_eq!(report.result.limit_violations, 0);
    let replies = report
        .steps
        .into_iter()
        .filter_map(|s| s.reply_json())
        .collect();
    let trace = trace.lock().unwrap().clone();
    (replies, trace)
}

fn rms_jerk(positions: &[[f64; 3]], rate: f64) -> [f64; 3] {
    let mut sum = [0.0; 3];
    let n = positions.len().saturating_sub(3);
    for w in positions.windows(4) {
        for j in 0..3 {
            let jerk = (w[3][j] - 3.0 * w[2][j] + 3.0 * w[1][j] - w[0][j]) * rate.powi(3);
            sum[j] += jerk * jerk;
        }
    }
    sum.map(|s| (s / n as f64).sqrt())
}

fn smoothness(chunks: &[(f64, f64, Vec<Vec<f64>>)]) {
    let rate = 1000.0;
    let (replies, trace) = rehearse(chunks);
    let open_tick = replies[0]["tick"].as_u64().unwrap();
    let stream_s = |tick: u64| (tick - open_tick) as f64 / rate;
    // The accepted chunks with their takeover, and the rows as accepted (newest wins).
    let mut accepted = Vec::new();
    let (mut times, mut values): (Vec<f64>, Vec<Vec<f64>>) = (Vec::new(), Vec::new());
    let (mut ahead, mut lead) = (Vec::new(), Vec::new());
    for ((_, t0, rows), reply) in chunks.iter().zip(&replies[1..]) {
        if reply["ok"] != true {
            println!("  chunk at {t0:.3} s: {}", reply["error"]["message"]);
            continue;
        }
        ahead.push(reply["ticks_ahead"].as_f64().unwrap());
        lead.push(reply["lead_ticks"].as_f64().unwrap());
        let first = t0 + HORIZON_S;
        let keep = times.partition_point(|&t| t < first - 1e-9);
        times.truncate(keep);
        values.truncate(keep);
        let ts: Vec<f64> = (0..rows.len()).map(|i| first + i as f64 / FPS).collect();
        times.extend(&ts);
        values.extend(rows.iter().cloned());
        let takeover = stream_s(reply["tick"].as_u64().unwrap());
        accepted.push(json!({"takeover_s": takeover, "times": ts, "values": rows}));
    }
    let start = accepted[0]["takeover_s"].as_f64().unwrap() + 0.5;
    let end = *times.last().unwrap();
    let window = |s: f64| (open_tick as f64 + s * rate).round() as usize;
    let ours = rms_jerk(&trace[window(start)..=window(end)], rate);
    ahead.sort_by(f64::total_cmp);
    lead.sort_by(f64::total_cmp);
    println!(
        "rehearsed ({} of {} chunks accepted): chunk taken up → first command {} ticks p50, {} p99 (look-ahead {} p50)",
        accepted.len(),
        chunks.len(),
        percentile(&ahead, 0.5),
        percentile(&ahead, 0.99),
        percentile(&lead, 0.5)
    );
    let spec = json!({"rate_hz": rate, "window": [start, end], "chunks": accepted,
                      "rows": {"times": times, "values": values}});
    let script = "benches/stream_reference.py";
    let reference = python(script, &spec);
    println!(
        "RMS jerk (rad/s³) over {:.1} s of stream, per joint ({}):",
        end - start,
        JOINTS.join(", ")
    );
    let show = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:>8.1}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    println!("  motiond stream                        {}", show(&ours));
    match reference {
        Some(r) => {
            let col = |k: &str| -> Vec<f64> {
                r[k].as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_f64().unwrap())
                    .collect()
            };
            println!(
                "  natural cubic spline, all rows        {}",
                show(&col("natural"))
            );
            println!(
                "  positions_upsampling, chunk by chunk  {}",
                show(&col("upsampling"))
            );
        }
        None => println!("  (reference: python3 with numpy and scipy is needed for {script})"),
    }
}

fn latency(chunks: &[(f64, f64, Vec<Vec<f64>>)]) {
    let daemon = Daemon::start(&[]);
    let mut client = daemon.client();
    assert_eq!(client.request(json!({"cmd": "enable"}))["ok"], true);
    let open = client.request(
        json!({"cmd": "stream_open", "joints": JOINTS, "rate_hz": FPS,
                                      "horizon_s": HORIZON_S}),
    );
    assert_eq!(open["ok"], true, "{open}");
    let least = open["lead_ticks"].as_f64().unwrap();
    let began = Instant::now();
    let (mut ahead, mut lead, mut beyond, mut refused) = (vec![], vec![], vec![], 0);
    for (seq, (sent, t0, rows)) in chunks.iter().enumerate() {
        let due = began + Duration::from_secs_f64(*sent);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let reply = client.request(json!({"cmd": "stream_chunk", "seq": seq, "t0": t0,
                                          "positions": rows}));
        if reply["ok"] != true {
            refused += 1;
            continue;
        }
        let a = reply["ticks_ahead"].as_f64().unwrap();
        let l = reply["lead_ticks"].as_f64().unwrap();
        ahead.push(a);
        lead.push(l);
        beyond.push(a - l);
    }
    let status = client.status();
    for v in [&mut ahead, &mut lead, &mut beyond] {
        v.sort_by(f64::total_cmp);
    }
    let missed = lead.iter().filter(|&&l| l > least * 2.0).count();
    println!(
        "live serve: {} chunks, {refused} refused; chunk taken up → first command {} ticks p50, {} p99, max {}; look-ahead {} p50, {} p99 (least {least}); beyond it {} p50, {} p99; {missed} splices re-aimed after a miss; overruns {}",
        chunks.len(),
        percentile(&ahead, 0.5),
        percentile(&ahead, 0.99),
        ahead.last().unwrap(),
        percentile(&lead, 0.5),
        percentile(&lead, 0.99),
        percentile(&beyond, 0.5),
        percentile(&beyond, 0.99),
        status["overruns"]
    );
}

fn starvation() {
    let robot = robot();
    let limits = JOINTS.map(|n| {
        let d = &robot.joints.dofs[robot.joints.index_of(n).unwrap()];
        (d.limits.velocity.upper, d.limits.acceleration)
    });
    drop(robot);
    // Every joint at 0.7 of its velocity limit, then nothing.
    let v = limits.map(|(vmax, _)| 0.7 * vmax);
    let rows: Vec<Vec<f64>> = (0..24)
        .map(|i| {
            let t = i as f64 / FPS;
            v.iter().map(|v| -0.6 + v * t).collect()
        })
        .collect();
    let lead_in = vec![rows[0].clone()];
    let chunks = vec![(0.0, 0.0, lead_in), (1.0, 1.0, rows)];
    let (replies, trace) = rehearse(&chunks);
    let open_tick = replies[0]["tick"].as_u64().unwrap();
    let last_row_s = 1.0 + HORIZON_S + 23.0 / FPS;
    let k = (open_tick as f64 + last_row_s * 1000.0).round() as usize;
    let rest = trace.last().unwrap();
    // The rows are straight lines: at the last one each joint moves at v (the natural spline
    // keeps them straight), at no acceleration.
    let state: Vec<Value> = (0..3)
        .map(|j| {
            let (vmax, a) = limits[j];
            json!({"position": trace[k][j], "velocity": v[j], "acceleration": 0.0,
                   "max_velocity": vmax, "max_acceleration": a.upper,
                   "min_acceleration": a.lower})
        })
        .collect();
    let reference = python("benches/stop_reference.py", &json!({ "joints": state }));
    println!(
        "starvation after {:?} at {:?} rad/s: from the last row to rest, motiond vs Ruckig's \
         time-optimal stop (benches/stop_reference.py) vs v²/2a:",
        JOINTS,
        v.map(|x| (x * 100.0).round() / 100.0),
    );
    for j in 0..3 {
        let at_rest = (k..trace.len())
            .find(|&i| trace[i][j] == rest[j])
            .unwrap_or(trace.len());
        let (_, a) = limits[j];
        let ruckig = reference.as_ref().map_or_else(
            || "(python3 with ruckig is needed)".to_string(),
            |r| {
                format!(
                    "{:.1} ms, {:.4} rad",
                    r[j]["duration_s"].as_f64().unwrap() * 1e3,
                    r[j]["distance"].as_f64().unwrap()
                )
            },
        );
        println!(
            "  {:<15} motiond {:.0} ms, {:.4} rad; Ruckig {ruckig}; v²/2a {:.4} rad",
            JOINTS[j],
            (at_rest - k) as f64,
            rest[j] - trace[k][j],
            v[j] * v[j] / (2.0 * a.upper)
        );
    }
}

/// Runs the reference script `script` (repository path) on `input` (as a JSON file): its JSON
/// output, or `None` when python3 or its packages are missing.
fn python(script: &str, input: &Value) -> Option<Value> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("input.json");
    std::fs::write(&file, input.to_string()).unwrap();
    let out = std::process::Command::new("python3")
        .arg(daemon_harness::repo().join(script))
        .arg(&file)
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!("{script}: {}", String::from_utf8_lossy(&out.stderr));
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

fn main() {
    let mut args = std::env::args().skip_while(|a| a != "--seconds").skip(1);
    let seconds: f64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(20.0);
    let mut rng = Lcg(25);
    let rows = actions(seconds, &mut rng);
    let chunks = schedule(&rows, &mut rng);
    println!(
        "{seconds} s of 30 Hz actions: a chunk of {CHUNK} rows every {EVERY}, horizon {HORIZON_S} s"
    );
    smoothness(&chunks);
    starvation();
    latency(&chunks);
}
