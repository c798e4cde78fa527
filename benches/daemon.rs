//! The daemon's two service figures, measured on a real `motiond serve` (simulated backend):
//!
//! 1. play latency: from a client sending `play` to that motion's first command reaching the
//!    backend (the loop publishes the CLOCK_MONOTONIC time of that command; the client reads the
//!    same clock before sending). Target: p99 ≤ 2 control periods.
//! 2. resident memory with the SR1 walk patterns loaded (29 joints, three 500 Hz motions from
//!    the corpus), against the same daemon with an empty library.
//! 3. overruns of a looped playback while 50 clients flood the socket, against the same
//!    playback for as long again with nobody talking (the loop never waits for the socket: the
//!    ratio should stay near 1 plus the machine's own noise).
//!
//! `cargo bench --bench daemon` (add `-- --plays N` to change the number of plays, default 300).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark fails loudly where its setup breaks"
)]

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/daemon_harness/mod.rs"]
mod daemon_harness;

use daemon_harness::{Client, Daemon, RATE_HZ, at_rest, bump_seq, flood};
use serde_json::json;

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec for clock_gettime to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn play_latency(plays: usize) {
    // 20 ms motion that ends where it starts, so every play needs no approach travel.
    let daemon = Daemon::start(&[("blip.seq", bump_seq(0.05, 0.0002))]);
    let mut client = daemon.client();
    let mut latencies_us = Vec::with_capacity(plays);
    let mut in_daemon_us = Vec::with_capacity(plays);
    for _ in 0..plays {
        client.wait_for("at rest", at_rest);
        let sent = monotonic_ns();
        let reply = client.request(json!({"cmd":"play","motion":"blip"}));
        assert_eq!(reply["ok"], true, "{reply}");
        let id = reply["motion_id"].as_u64().unwrap();
        let status = client.wait_for("first command", |s| {
            s["motion_id"].as_u64() != Some(id) || s["first_command_ns"].is_u64()
        });
        if let Some(first) = status["first_command_ns"].as_u64() {
            latencies_us.push(first.saturating_sub(sent) as f64 / 1000.0);
        }
        if let Some(us) = reply["first_command_us"].as_f64() {
            in_daemon_us.push(us);
        }
    }
    let period_us = 1e6 / RATE_HZ;
    for (what, values) in [
        ("client send → first command", &mut latencies_us),
        ("daemon request → first command", &mut in_daemon_us),
    ] {
        values.sort_by(f64::total_cmp);
        if values.is_empty() {
            println!("{what}: no samples");
            continue;
        }
        let p50 = percentile(values, 0.5);
        let p99 = percentile(values, 0.99);
        let max = percentile(values, 1.0);
        println!(
            "play latency, {what} ({} plays): p50 {p50:.0} µs, p99 {p99:.0} µs ({:.2} periods), max {max:.0} µs",
            values.len(),
            p99 / period_us
        );
    }
}

fn rss_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn sr1_memory() {
    let Some(corpus) = common::corpus() else {
        return;
    };
    let joints_yaml = std::fs::read_to_string(corpus.join("robots/sr1-joints.yaml")).unwrap();
    let joints: Vec<&str> = joints_yaml
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- "))
        .map(str::trim)
        .collect();
    let skel = corpus.join("robots/sr1.skel");
    let empty = tempfile::tempdir().unwrap();
    let library = empty.path().join("motions");
    std::fs::create_dir(&library).unwrap();
    let baseline = Daemon::start_in(
        tempfile::tempdir().unwrap(),
        &skel,
        &joints,
        &library,
        "",
        &[],
    );
    let walk = Daemon::start_in(
        tempfile::tempdir().unwrap(),
        &skel,
        &joints,
        &corpus.join("seq/v2"),
        "",
        &[],
    );
    let list = walk.client().request(json!({"cmd":"list"}));
    let motions = list["motions"].as_array().cloned().unwrap_or_default();
    let ready = motions.iter().filter(|m| m["ok"] == true).count();
    for m in &motions {
        if m["ok"] != true {
            println!("  {}: {}", m["name"], m["error"]);
        }
    }
    let (base_rss, base_hwm) = rss_kib(baseline.pid());
    let (rss, hwm) = rss_kib(walk.pid());
    println!(
        "RSS with the SR1 walk patterns ({ready}/{} motions ready): {:.1} MiB (peak {:.1} MiB); \
         empty library: {:.1} MiB (peak {:.1} MiB)",
        motions.len(),
        rss as f64 / 1024.0,
        hwm as f64 / 1024.0,
        base_rss as f64 / 1024.0,
        base_hwm as f64 / 1024.0
    );
}

fn overruns_under_clients() {
    let daemon = Daemon::start(&[("bump.seq", bump_seq(1.0, 0.1))]);
    let mut client = daemon.client();
    let overruns = |client: &mut Client| client.status()["overruns"].as_u64().unwrap_or(0);
    let reply = client.request(json!({"cmd":"play","motion":"bump","loop":true}));
    assert_eq!(reply["ok"], true, "{reply}");
    let before = overruns(&mut client);
    let since = std::time::Instant::now();
    let answered = flood(&daemon.socket, 50, 200);
    let loaded = overruns(&mut client) - before;
    let window = since.elapsed();
    let before = overruns(&mut client);
    std::thread::sleep(window);
    let quiet = overruns(&mut client) - before;
    println!(
        "overruns over {:.1} s: {loaded} with 50 clients ({answered} requests answered), {quiet} without",
        window.as_secs_f64()
    );
    client.request(json!({"cmd":"stop"}));
    client.wait_for("at rest", at_rest);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let plays = args
        .iter()
        .position(|a| a == "--plays")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(300);
    // `cargo test --benches` runs this with `--bench` absent: keep that run short.
    if !args.iter().any(|a| a == "--bench") {
        play_latency(5);
        return;
    }
    play_latency(plays);
    sr1_memory();
    overruns_under_clients();
}
