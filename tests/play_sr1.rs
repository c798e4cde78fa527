//! `motiond play` end to end on the simulated backend: each SR1 walk pattern (on the manual clock,
//! as fast as the CPU allows) and a demo arm motion in real time with the default configuration.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

mod common;

use std::process::Command;

fn motiond(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_motiond"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap()
}

fn play(args: &[&str]) -> (i32, serde_json::Value, String) {
    let out = motiond(&[&["play"], args, &["--report", "json"]].concat());
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON report ({e}); stderr: {stderr}"));
    (out.status.code().unwrap_or(-1), report, stderr)
}

#[test]
fn every_sr1_walk_pattern_plays_on_the_sim_without_a_limit_violation() {
    let Some(corpus) = common::corpus() else {
        return;
    };
    let skel = corpus.join("robots/sr1.skel");
    let map = corpus.join("robots/sr1-joints.yaml");
    let mut played = 0;
    for n in 1..=3 {
        let seq = corpus.join(format!("seq/v2/SR1WalkPattern{n}.seq"));
        let robot = [
            "--skel",
            skel.to_str().unwrap(),
            "--joint-map",
            map.to_str().unwrap(),
        ];
        // What the trajectory proof refuses, play refuses too, before anything moves (exit 1,
        // nothing on stdout); everything it accepts must play without a violation.
        let proved = motiond(&[&["check", seq.to_str().unwrap()], &robot[..]].concat());
        if proved.status.code() == Some(1) {
            let out = motiond(
                &[
                    &["play", seq.to_str().unwrap()],
                    &robot[..],
                    &["--clock", "manual"],
                ]
                .concat(),
            );
            assert_eq!(out.status.code(), Some(1), "SR1WalkPattern{n}");
            assert!(out.stdout.is_empty());
            assert!(String::from_utf8_lossy(&out.stderr).contains("refused"));
            eprintln!("SR1WalkPattern{n}: refused by the limit proof, and by play");
            continue;
        }
        let (code, report, stderr) = play(
            &[
                &[seq.to_str().unwrap()],
                &robot[..],
                &["--backend", "sim", "--clock", "manual"],
            ]
            .concat(),
        );
        assert_eq!(code, 0, "SR1WalkPattern{n}: {stderr}\n{report}");
        assert_eq!(report["limit_violations"], 0, "SR1WalkPattern{n}");
        assert_eq!(report["overruns"], 0);
        assert_eq!(report["rate_hz"], 1000.0);
        // The motion alone is 13.4 s at 1 kHz; the approach comes on top.
        assert!(report["ticks"].as_u64().unwrap() > 13_400, "{report}");
        let tracking = report["max_tracking_error"].as_object().unwrap();
        assert_eq!(tracking.len(), 29);
        assert!(
            tracking.values().all(|e| e.as_f64().unwrap() < 0.05),
            "{report}"
        );
        played += 1;
    }
    assert!(played >= 1, "no SR1 walk pattern passed the proof");
}

#[test]
fn the_default_configuration_plays_a_demo_motion_in_real_time() {
    // The README's first command.
    // The loop's CPU (rt.cpu 1) is held awake while it plays and given back afterwards.
    let request = "/sys/devices/system/cpu/cpu1/power/pm_qos_resume_latency_us";
    let before = std::fs::read_to_string(request).ok();
    let (code, report, stderr) = play(&["config/motions/wave.seq"]);
    assert_eq!(code, 0, "{stderr}\n{report}");
    assert_eq!(std::fs::read_to_string(request).ok(), before);
    assert_eq!(report["limit_violations"], 0);
    assert_eq!(report["rate_hz"], 1000.0);
    for key in ["min", "p50", "p99", "p999", "max"] {
        assert!(report["latency_us"][key].is_number(), "{report}");
    }
    for key in ["p50", "p99", "max"] {
        assert!(report["exec_us"][key].is_number(), "{report}");
    }
    let rt = &report["rt"];
    assert!(
        rt["policy"] == "fifo" || rt["policy"] == "other",
        "{report}"
    );
    assert!(rt["memory_locked"].is_boolean());
    match rt["cpu_wakeup_latency"]["path"].as_str() {
        Some(path) => {
            assert!(
                path == request || path == "/dev/cpu_dma_latency",
                "{report}"
            );
            assert_eq!(rt["cpu_wakeup_latency"]["latency_us"], 0, "{report}");
        }
        None => assert!(
            rt["warnings"]
                .to_string()
                .contains("cannot hold the loop's CPU awake"),
            "{report}"
        ),
    }
    assert_eq!(report["max_tracking_error"].as_object().unwrap().len(), 6);
}

#[test]
fn a_motion_the_robot_cannot_play_is_refused_before_anything_moves() {
    let Some(corpus) = common::corpus() else {
        return;
    };
    // SR1's 29 columns on the 6-DOF demo arm: an input error, exit 2, nothing on stdout.
    let out = motiond(&[
        "play",
        corpus.join("seq/v2/SR1WalkPattern1.seq").to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
}
