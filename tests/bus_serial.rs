//! The serial backends through the `Backend` trait over a real pseudo-terminal: DYNAMIXEL servos
//! and an SLCAN adapter with MIT motors answer on the far end, check every packet, and vanish
//! mid-motion; the backend must report the lost device.

mod bus_peer;

use std::collections::BTreeMap;
use std::time::Duration;

use bus_peer::{Vanish, openpty};
use motiond::backend::buses::{BusBackend, open};
use motiond::backend::{Backend, BackendError, FaultKind, Feedback, Readiness};
use motiond::config::bus::{RawBus, validate};
use motiond::trajectory::{JointSet, Setpoint};

const RATE: f64 = 1000.0;

fn open_backend(yaml: &str, joints: &JointSet) -> BusBackend {
    let raw: Vec<RawBus> = serde_yaml::from_str(yaml).unwrap();
    let names: Vec<&str> = joints.dofs.iter().map(|d| d.name.as_str()).collect();
    let buses = validate(&raw, &names, RATE).unwrap();
    open(&buses, joints, RATE).unwrap()
}

fn tick() {
    std::thread::sleep(Duration::from_millis(1));
}

fn enable(b: &mut BusBackend) {
    for _ in 0..5000 {
        if b.enable().unwrap() == Readiness::Ready {
            return;
        }
        tick();
    }
    panic!("drives did not come up");
}

/// Streams a slow ramp from `start` until the backend fails; returns the setpoints sent and the error.
fn stream_until_fault(b: &mut BusBackend, start: &[f64]) -> (Vec<Vec<f64>>, BackendError) {
    let mut sent = Vec::new();
    let mut fb = vec![Feedback::default(); start.len()];
    for k in 0..20_000u64 {
        let sps: Vec<Setpoint> = start
            .iter()
            .map(|&s| Setpoint {
                position: s + 0.002 * (k + 1) as f64,
                velocity: 2.0,
                acceleration: 0.0,
            })
            .collect();
        if let Err(e) = b.write(k, &sps) {
            return (sent, e);
        }
        sent.push(sps.iter().map(|s| s.position).collect());
        tick();
        if let Err(e) = b.read(&mut fb) {
            return (sent, e);
        }
    }
    panic!("the peer's disappearance was never reported");
}

#[test]
fn dynamixel_over_a_pty_enables_in_place_follows_setpoints_and_reports_the_lost_device() {
    let pty = openpty();
    let yaml = format!(
        "
- name: arm
  transport: serial
  device: {}
  baud: 4000000
  protocol: dynamixel
  feedback_timeout_ms: 5000
  joints:
    base_yaw: {{id: 1}}
    shoulder_pitch: {{id: 2, direction: -1}}
",
        pty.slave_path.display()
    );
    let joints = bus_peer::servos(&["base_yaw", "shoulder_pitch"]);
    let peer = bus_peer::dynamixel(
        pty.master.try_clone().unwrap(),
        BTreeMap::from([(1, 2148), (2, 2048)]),
        Vanish::AfterCommands(40),
    );
    drop(pty.master);
    let mut b = open_backend(&yaml, &joints);
    enable(&mut b);
    let mut fb = [Feedback::default(); 2];
    b.read(&mut fb).unwrap();
    let per_rad = 4096.0 / std::f64::consts::TAU;
    assert!((fb[0].position - 100.0 / per_rad).abs() < 1e-12, "{fb:?}");
    assert_eq!(fb[1].position, 0.0);

    let start = [fb[0].position, fb[1].position];
    let (sent, err) = stream_until_fault(&mut b, &start);
    assert_eq!(err.kind, FaultKind::DeviceLost, "{err}");
    // The loop's safe state: holding fails the same way, without a panic or a wait.
    let hold = [Setpoint::default(); 2];
    assert_eq!(b.hold(0, &hold).unwrap_err().kind, FaultKind::DeviceLost);

    let log = peer.stop();
    assert!(log.vanished);
    assert_eq!(log.crc_errors, 0);
    // Torque off first, then on only after the goals were set to the present positions.
    assert_eq!(log.torque, [(1, 0), (2, 0), (1, 1), (2, 1)]);
    assert_eq!(log.goals[0], [(1, 2148), (2, 2048)]);
    // Every goal the servos received is the setpoint in counts (shoulder reversed).
    let streamed = &log.goals[1..];
    assert_eq!(streamed.len(), 39);
    for (goals, sp) in streamed.iter().zip(&sent) {
        let want = [
            (1, (sp[0] * per_rad).round() as i32 + 2048),
            (2, (-sp[1] * per_rad).round() as i32 + 2048),
        ];
        assert_eq!(goals[..], want);
    }
}

#[test]
fn slcan_mit_over_a_pty_enters_motor_mode_streams_and_reports_the_lost_device() {
    let pty = openpty();
    let yaml = format!(
        "
- name: can-over-usb
  transport: slcan
  device: {}
  feedback_timeout_ms: 5000
  joints:
    base_yaw: {{protocol: mit, id: 1, mit: {{kp: 40, kd: 1}}}}
    elbow_pitch: {{protocol: mit, id: 2, mit: {{kp: 40, kd: 1}}}}
",
        pty.slave_path.display()
    );
    let joints = bus_peer::servos(&["base_yaw", "elbow_pitch"]);
    let peer = bus_peer::slcan_mit(
        pty.master.try_clone().unwrap(),
        BTreeMap::from([(1, 0.5), (2, -0.25)]),
        Vanish::AfterCommands(60),
    );
    drop(pty.master);
    let mut b = open_backend(&yaml, &joints);
    enable(&mut b);
    let mut fb = [Feedback::default(); 2];
    b.read(&mut fb).unwrap();
    assert!((fb[0].position - 0.5).abs() < 1e-3, "{fb:?}");
    assert!((fb[1].position + 0.25).abs() < 1e-3, "{fb:?}");

    let start = [fb[0].position, fb[1].position];
    let (sent, err) = stream_until_fault(&mut b, &start);
    assert_eq!(err.kind, FaultKind::DeviceLost, "{err}");

    let log = peer.stop();
    assert!(log.vanished);
    assert_eq!(log.bad_lines, 0);
    assert_eq!(
        log.mit_special,
        [(1, 0xFC), (2, 0xFC)],
        "enter motor mode, once each"
    );
    // Each motor first holds its measured position, then gets one command per tick.
    for (k, start) in start.iter().enumerate() {
        let id = k as u8 + 1;
        let cmds: Vec<_> = log.mit.iter().filter(|c| c.0 == id).map(|c| c.1).collect();
        let holds = cmds
            .iter()
            .take_while(|c| (f64::from(c.p) - start).abs() < 1e-3)
            .count();
        assert!(
            holds >= 1,
            "motor {id} starts by holding in place: {cmds:?}"
        );
        let streamed = &cmds[holds..];
        assert!(streamed.len() >= 20, "{}", streamed.len());
        for (c, sp) in streamed.iter().zip(&sent) {
            // 16 bits over ±12.5 rad: within one step of the setpoint.
            assert!(
                (f64::from(c.p) - sp[k]).abs() <= 25.0 / 65535.0,
                "{c:?} vs {sp:?}"
            );
            assert!(
                (c.kp - 40.0).abs() < 0.2 && (c.kd - 1.0).abs() < 0.01,
                "{c:?}"
            );
        }
    }
}

#[test]
fn dynamixel_without_sync_read_reads_once_at_enable_then_runs_open_loop() {
    let pty = openpty();
    let yaml = format!(
        "- {{name: s, transport: serial, device: {}, baud: 1000000, protocol: dynamixel, sync_read: false, joints: {{base_yaw: {{id: 1}}}}}}",
        pty.slave_path.display()
    );
    let joints = bus_peer::servos(&["base_yaw"]);
    let peer = bus_peer::dynamixel(pty.master, BTreeMap::from([(1, 3072)]), Vanish::Never);
    let mut b = open_backend(&yaml, &joints);
    enable(&mut b);
    let mut fb = [Feedback::default()];
    b.read(&mut fb).unwrap();
    assert!(
        (fb[0].position - std::f64::consts::FRAC_PI_2).abs() < 1e-12,
        "{fb:?}"
    );
    let sp = Setpoint {
        position: 1.0,
        ..Setpoint::default()
    };
    for tick in 0..100 {
        b.write(tick, &[sp]).unwrap();
        b.read(&mut fb).unwrap();
        // The goal in counts, reported back: valid without any reply.
        assert!(fb[0].valid && (fb[0].position - 1.0).abs() < 1e-3, "{fb:?}");
    }
    for _ in 0..5000 {
        if peer.log.lock().unwrap().goals.len() >= 101 {
            break;
        }
        tick();
    }
    let log = peer.stop();
    assert_eq!(log.goals.len(), 101);
    assert_eq!(log.goals[100], [(1, 652 + 2048)]);
}
