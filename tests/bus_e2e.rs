//! End to end below the command line: the real-time loop on its thread and the kernel's clock,
//! the bus backend opened from a validated `buses:` section, DYNAMIXEL servos on the far end of a
//! real pseudo-terminal. The servos check every packet's CRC and answer the Sync Reads; every
//! goal they receive must be a sample of the trajectory. Then they vanish mid-motion: the loop
//! must report the lost device and keep serving (status, clear-fault, enable refused again).
//! The same with MIT motors behind an SLCAN adapter. The loop's clock is paced by the peer
//! (`bus_peer::PacedClock`): each tick starts once the servos took the last one's bytes and their
//! answers wait on the line, so the run is the same on an idle machine and a loaded one — the
//! line never fills (no `queue_full` before the vanishing), no tick is late or skipped.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

mod bus_peer;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bus_peer::{Vanish, openpty};
use motiond::backend::FaultKind;
use motiond::backend::bus::{BusBackend, open};
use motiond::motion::seq::{MultiValueSeq, Timing};
use motiond::rt::{self, Command, Playback, Settings, State};
use motiond::trajectory::{ColumnMap, Cursor, JointSet, Options, Setpoint, approach, build_values};

const RATE: f64 = 1000.0;
const N: usize = 3;

fn wait_for(handle: &rt::LoopHandle, what: &str, done: impl Fn(&rt::Status) -> bool) -> rt::Status {
    let give_up = Instant::now() + Duration::from_secs(30);
    loop {
        let s = handle.status();
        if done(&s) {
            return s;
        }
        assert!(Instant::now() < give_up, "never {what}: {s:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Plays a 6 s motion from rest at 0 on `backend` (the loop's time paced by `clock`) until the
/// bus vanishes; checks the fault and that the loop keeps serving; returns the motion's samples.
fn play_until_the_bus_vanishes(
    backend: BusBackend,
    js: &JointSet,
    clock: bus_peer::PacedClock,
) -> Vec<[Setpoint; N]> {
    let settings = Settings {
        feedback_timeout_s: 2.0,
        ..Settings::default()
    };
    let handle = rt::spawn(settings, Box::new(backend), None, js.clone(), clock).unwrap();
    handle.send(Command::Enable).unwrap();
    let s = wait_for(&handle, "idle", |s| s.state == State::Idle);
    assert!(s.positions.iter().all(|p| p.abs() < 1e-3), "{s:?}");

    // Resampled and proved by the trajectory module.
    let values = (0..=300)
        .flat_map(|i| {
            let t = i as f64 / 50.0;
            (0..N).map(move |j| {
                0.1 * (j as f64 + 1.0) * (1.0 - (std::f64::consts::PI * t / 3.0).cos())
            })
        })
        .collect();
    let seq = MultiValueSeq {
        num_parts: N,
        timing: Timing::Fixed { frame_rate: 50.0 },
        values,
    };
    let map = ColumnMap::in_dof_order(js, N).unwrap();
    let options = Options {
        rate_hz: RATE,
        ..Options::default()
    };
    let motion = build_values(js, &seq, &map, &options).unwrap().trajectory;
    let mut cursor = Cursor::default();
    let samples = (0..motion.ticks())
        .map(|k| {
            let mut out = [Setpoint::default(); N];
            motion.sample(&mut cursor, k, &mut out);
            out
        })
        .collect();
    // From the commanded pose (the measured one, quantised by the drive, at enable).
    let approach = approach(js, &s.commanded, motion.first_setpoints(), RATE).unwrap();
    let pb = Playback::new(7, approach, motion);
    handle.send(Command::Play(Box::new(pb))).unwrap();

    let s = wait_for(&handle, "fault", |s| s.state == State::Fault);
    let fault = s.fault.unwrap();
    assert_eq!(fault.kind, FaultKind::DeviceLost, "{fault}");
    // The loop keeps serving: it ticks, answers, clears the fault, and refuses to enable a bus
    // that is gone with the same fault.
    let beat = s.heartbeat;
    wait_for(&handle, "ticking", |s| s.heartbeat > beat + 10);
    handle.send(Command::ClearFault).unwrap();
    wait_for(&handle, "disabled", |s| s.state == State::Disabled);
    handle.send(Command::Enable).unwrap();
    let s = wait_for(&handle, "fault again", |s| s.state == State::Fault);
    assert_eq!(s.fault.unwrap().kind, FaultKind::DeviceLost);
    handle.shutdown(Duration::from_secs(5)).unwrap();
    samples
}

/// Checks that each command is a sample of the motion, in tick order (held samples repeat one),
/// and that the bus vanished mid-motion.
fn assert_commands_follow<C: std::fmt::Debug>(
    commands: &[C],
    samples: &[[Setpoint; N]],
    is: impl Fn(&C, &[Setpoint; N]) -> bool,
) {
    let mut k = 0;
    for (i, c) in commands.iter().enumerate() {
        while samples.get(k).is_some_and(|s| !is(c, s)) {
            k += 1;
        }
        assert!(
            k < samples.len(),
            "command {i} {c:?} is no later sample of the motion"
        );
    }
    assert!(
        k > 300 && k + 100 < samples.len(),
        "vanished mid-motion at sample {k}"
    );
}

#[test]
fn dynamixel_play_follows_the_trajectory_then_the_lost_device_faults_and_the_loop_keeps_serving() {
    let pty = openpty();
    let names = ["base_yaw", "shoulder_pitch", "elbow_pitch"];
    let js = bus_peer::servos(&names);
    let yaml = format!(
        "- name: arm
  transport: serial
  device: {}
  baud: 4000000
  protocol: dynamixel
  feedback_timeout_ms: 2000
  joints:
    base_yaw: {{id: 1}}
    shoulder_pitch: {{id: 2, direction: -1}}
    elbow_pitch: {{id: 3, zero_offset: 1500}}
",
        pty.slave_path.display()
    );
    let buses = bus_peer::rig::buses(&yaml, &js, RATE);
    // The peer owns the only master fd: when it vanishes, the device's end sees the hang-up.
    // It answers the set-up at open (the servos' Return_Delay_Time is read).
    let peer = bus_peer::dynamixel(
        pty.master,
        BTreeMap::from([(1, 2048), (2, 2048), (3, 1500)]),
        Vanish::AfterMoving(1000),
    );
    let backend = open(&buses, &js, RATE).unwrap();
    let clock = peer.clock(&pty.slave_path);
    let samples = play_until_the_bus_vanishes(backend, &js, clock);
    let log = peer.stop();
    assert!(log.vanished);
    assert_eq!(log.crc_errors, 0);
    let per_rad = 4096.0 / std::f64::consts::TAU;
    let counts = |sp: &[Setpoint; N]| {
        [
            (1, (sp[0].position * per_rad).round() as i32 + 2048),
            (2, (-sp[1].position * per_rad).round() as i32 + 2048),
            (3, (sp[2].position * per_rad).round() as i32 + 1500),
        ]
    };
    // Packet order is the bus's (by DOF name); compare by id.
    let goals: Vec<Vec<(u8, i32)>> = log
        .goals
        .iter()
        .map(|g| {
            let mut g = g.clone();
            g.sort();
            g
        })
        .collect();
    assert_commands_follow(&goals, &samples, |g, sp| g[..] == counts(sp));
}

#[test]
fn slcan_mit_play_follows_the_trajectory_then_the_lost_adapter_faults_and_the_loop_keeps_serving() {
    let pty = openpty();
    let names = ["base_yaw", "shoulder_pitch", "elbow_pitch"];
    let js = bus_peer::servos(&names);
    let yaml = format!(
        "- name: usb-can
  transport: slcan
  device: {}
  max_load: 0.85
  feedback_timeout_ms: 2000
  joints:
    base_yaw: {{protocol: mit, id: 1, mit: {{kp: 40, kd: 1}}}}
    shoulder_pitch: {{protocol: mit, id: 2, mit: {{kp: 40, kd: 1}}}}
    elbow_pitch: {{protocol: mit, id: 3, mit: {{kp: 40, kd: 1}}}}
",
        pty.slave_path.display()
    );
    let buses = bus_peer::rig::buses(&yaml, &js, RATE);
    let backend = open(&buses, &js, RATE).unwrap();
    let peer = bus_peer::slcan_mit(
        pty.master,
        BTreeMap::from([(1, 0.0), (2, 0.0), (3, 0.0)]),
        Vanish::AfterMoving(3000),
    );
    let clock = peer.clock(&pty.slave_path);
    let samples = play_until_the_bus_vanishes(backend, &js, clock);
    let log = peer.stop();
    assert!(log.vanished);
    assert_eq!(log.bad_lines, 0);
    assert_eq!(log.mit_special, [(1, 0xFC), (3, 0xFC), (2, 0xFC)]);
    // One command per motor per tick, in bus order (by DOF name): regroup them by tick. Motors
    // that answered their enter command a tick apart start holding a tick apart: skip to the
    // first whole tick.
    let ids: Vec<u8> = log.mit.iter().map(|c| c.0).collect();
    let start = (0..ids.len())
        .find(|&k| ids.get(k..k + 2 * N) == Some(&[1, 3, 2, 1, 3, 2][..]))
        .expect("a whole tick of commands");
    let ticks: Vec<[f32; N]> = log.mit[start..]
        .chunks_exact(N)
        .map(|c| {
            assert_eq!([c[0].0, c[1].0, c[2].0], [1, 3, 2]);
            [c[0].1.p, c[2].1.p, c[1].1.p]
        })
        .collect();
    // 16 bits over ±12.5 rad: within one step of the sample.
    assert_commands_follow(&ticks, &samples, |p, sp| {
        (0..N).all(|j| (f64::from(p[j]) - sp[j].position).abs() <= 25.0 / 65535.0)
    });
}
