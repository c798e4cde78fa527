//! moteus controllers through the `Backend` trait on an in-memory CAN-FD bus, against a scripted
//! controller (tests/bus_peer, decoding with mjbots' `moteus-protocol`): stop then position mode
//! at the measured position, every command byte for byte with its watchdog and query, velocity
//! control, a fault code, a controller in mode timeout, teach-in in mode stopped with query-only
//! frames, and the budget of a CAN-FD bus.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

mod bus_peer;

use bus_peer::{MoteusServo, joint_set, moteus_reply, moteus_writes, rig};
use motiond::backend::bus::BusBackend;
use motiond::backend::frame::CanFrame;
use motiond::backend::moteus::codec::{self as moteus, Command};
use motiond::backend::transport::FrameIo;
use motiond::backend::transport::memory::MemoryIo;
use motiond::backend::{Backend, FaultKind, Feedback, Readiness};
use motiond::config::bus::{RawBus, validate};
use motiond::robot::Actuator;
use motiond::trajectory::{JointSet, Setpoint};

const RATE: f64 = 1000.0;
const TAU: f64 = std::f64::consts::TAU;

const YAML: &str = "
- name: legs
  transport: can
  interface: can0
  watchdog_ms: 20
  joints:
    a: {protocol: moteus, id: 1}
    v: {protocol: moteus, id: 2, moteus: {kp_scale: 0.5, kd_scale: 0.25, max_torque: 3}}
";

fn joints() -> JointSet {
    joint_set(&[("a", Actuator::Servo), ("v", Actuator::Velocity)])
}

/// Every frame motiond sent since the last call, each answered by its controller.
fn step(io: &mut MemoryIo, servos: &mut [MoteusServo]) -> Vec<CanFrame> {
    let mut sent = Vec::new();
    while let Some(f) = io.recv().unwrap() {
        sent.push(f);
        for s in servos.iter_mut() {
            s.on_frame(&f, io);
        }
    }
    sent
}

fn enable(b: &mut BusBackend, io: &mut MemoryIo, servos: &mut [MoteusServo]) -> Vec<CanFrame> {
    let mut all = Vec::new();
    for _ in 0..50 {
        if b.enable().unwrap() == Readiness::Ready {
            // The tick that becomes ready also commands the measured position: answered here.
            all.extend(step(io, servos));
            return all;
        }
        all.extend(step(io, servos));
    }
    panic!("not ready after 50 ticks");
}

#[test]
fn the_command_frame_is_moteus_register_protocol_byte_for_byte() {
    let c = Command {
        position: 0.5,
        velocity: -1.0,
        feedforward_torque: 0.25,
        kp_scale: None,
        kd_scale: None,
        maximum_torque: None,
        watchdog_timeout: 0.02,
    };
    let f = moteus::position(0, 1, &c);
    assert_eq!((f.id, f.extended, f.fd, f.brs), (0x8001, true, true, true));
    let mut want = vec![
        0x01, 0x00, 0x0A, // write int8 ×1 at 0x000: mode 10 (position)
        0x0F, 0x20, // write float ×3 at 0x020: position, velocity, feed-forward torque
    ];
    for v in [0.5f32, -1.0, 0.25] {
        want.extend(v.to_le_bytes());
    }
    want.extend([0x0D, 0x27]); // write float ×1 at 0x027: watchdog timeout
    want.extend(0.02f32.to_le_bytes());
    want.extend([0x11, 0x00, 0x1F, 0x01, 0x11, 0x0F]); // read mode, position..torque, fault
    want.extend([0x50; 3]); // NOP padding to 32 bytes
    assert_eq!(f.data(), want.as_slice());
    assert_eq!(
        moteus::stop(0, 3).data(),
        [
            0x01, 0x00, 0x00, 0x11, 0x00, 0x1F, 0x01, 0x11, 0x0F, 0x50, 0x50, 0x50
        ]
    );
    assert_eq!(
        moteus::query(0, 3).data(),
        [0x11, 0x00, 0x1F, 0x01, 0x11, 0x0F]
    );
    // Gains and a torque limit when configured: kp and kd scale (0x023, 0x024) with the
    // command's floats, the maximum torque (0x025) and the watchdog after it.
    let scaled = moteus::position(
        0,
        2,
        &Command {
            kp_scale: Some(0.5),
            kd_scale: Some(0.25),
            maximum_torque: Some(3.0),
            ..c
        },
    );
    let w = moteus_writes(scaled.data());
    assert_eq!(
        (w.kp_scale, w.kd_scale, w.max_torque),
        (Some(0.5), Some(0.25), Some(3.0))
    );
    assert_eq!(scaled.data()[3..6], [0x0C, 0x06, 0x20]); // write float ×6 from 0x020 (long form)
}

#[test]
fn a_reply_decodes_and_other_frames_are_not_taken() {
    let r = moteus_reply(2, 10, 1.25, -0.5, 0);
    assert_eq!(r.id, 0x200);
    let got = moteus::decode_reply(&r, 0).unwrap().unwrap();
    assert_eq!(
        (got.id, got.mode, got.position, got.velocity),
        (2, 10, 1.25, -0.5)
    );
    // A command (reply bit), another host's reply, a classic frame: not replies to us.
    assert!(moteus::decode_reply(&moteus::stop(0, 2), 0).is_none());
    assert!(moteus::decode_reply(&moteus_reply(2, 10, 0.0, 0.0, 0), 5).is_none());
    assert!(moteus::decode_reply(&CanFrame::new(0x200, &[0x21, 0x00, 0x0A]), 0).is_none());
}

#[test]
fn moteus_stops_then_takes_position_mode_at_the_measured_position_and_streams() {
    let js = joints();
    let (mut b, mut io) = rig::can_backend(YAML, &js, RATE, 64);
    let mut servos = [MoteusServo::new(1, 0.25), MoteusServo::new(2, -0.5)];
    let sent = enable(&mut b, &mut io, &mut servos);
    // Stopped first (clears a fault), then position mode at the measured position.
    assert_eq!(sent[0], moteus::stop(0, 1));
    assert_eq!(servos[0].stops, 1);
    let first = servos[0].commands[0];
    assert_eq!((first.position, first.velocity), (Some(0.25), Some(0.0)));
    assert_eq!(first.watchdog, Some(0.02));
    // The velocity joint: position "use the current one", the configured gains.
    let v = servos[1].commands[0];
    assert!(v.position.unwrap().is_nan());
    assert_eq!(
        (v.kp_scale, v.kd_scale, v.max_torque),
        (Some(0.5), Some(0.25), Some(3.0))
    );
    let mut fb = [Feedback::default(); 2];
    b.read(&mut fb).unwrap();
    assert!((fb[0].position - 0.25 * TAU).abs() < 1e-6, "{fb:?}");
    for tick in 0..20u64 {
        let sps = [
            Setpoint {
                position: 0.25 * TAU + 0.001 * tick as f64,
                ..Setpoint::default()
            },
            Setpoint {
                velocity: 0.5 * TAU,
                ..Setpoint::default()
            },
        ];
        b.write(tick, &sps).unwrap();
        let frames = step(&mut io, &mut servos);
        assert_eq!(frames.len(), 2, "one command per controller a tick");
        let want = Command {
            position: ((0.25 * TAU + 0.001 * tick as f64) / TAU) as f32,
            velocity: 0.0,
            feedforward_torque: 0.0,
            kp_scale: None,
            kd_scale: None,
            maximum_torque: None,
            watchdog_timeout: 0.02,
        };
        assert_eq!(frames[0], moteus::position(0, 1, &want));
        assert_eq!(moteus_writes(frames[1].data()).velocity, Some(0.5));
        b.read(&mut fb).unwrap();
    }
}

#[test]
fn a_fault_code_and_a_timeout_are_drive_faults_and_enabling_clears_them() {
    let js = joints();
    let (mut b, mut io) = rig::can_backend(YAML, &js, RATE, 64);
    let mut servos = [MoteusServo::new(1, 0.0), MoteusServo::new(2, 0.0)];
    enable(&mut b, &mut io, &mut servos);
    let sps = [Setpoint::default(); 2];
    let mut fb = [Feedback::default(); 2];
    servos[1].inject = Some(39);
    b.write(0, &sps).unwrap();
    step(&mut io, &mut servos);
    let e = b.read(&mut fb).unwrap_err();
    assert_eq!(
        (e.kind, e.dof, e.code),
        (FaultKind::DriveFault, Some(1), 39)
    );
    // Enabling again stops (clearing the fault) and takes position mode.
    let sent = enable(&mut b, &mut io, &mut servos);
    assert!(sent.contains(&moteus::stop(0, 2)));
    assert_eq!(servos[1].mode, 10);
    // The controller's own watchdog expired: mode 11, a drive fault 0x10B.
    servos[0].mode = 11;
    io.send(&moteus_reply(1, 11, 0.0, 0.0, 0)).unwrap();
    let e = b.read(&mut fb).unwrap_err();
    assert_eq!(
        (e.kind, e.dof, e.code),
        (FaultKind::DriveFault, Some(0), 0x10B)
    );
}

#[test]
fn teach_in_stops_the_controllers_reads_positions_and_stiffens_at_the_measured_one() {
    let js = joint_set(&[("a", Actuator::Servo), ("v", Actuator::Servo)]);
    let (mut b, mut io) = rig::can_backend(YAML, &js, RATE, 64);
    let mut servos = [MoteusServo::new(1, 0.0), MoteusServo::new(2, 0.0)];
    enable(&mut b, &mut io, &mut servos);
    let mut dofs = [false; 2];
    assert_eq!(b.compliant(true, &mut dofs).unwrap(), Readiness::Ready);
    assert_eq!(dofs, [true, true]);
    let sps = [Setpoint::default(); 2];
    let mut fb = [Feedback::default(); 2];
    let sent = step(&mut io, &mut servos);
    assert_eq!(sent[0], moteus::stop(0, 1), "torque off once: mode stopped");
    // While compliant: query-only frames; the hand moves the joint, the position follows.
    for tick in 0..10u64 {
        servos[0].position = 0.01 * tick as f32;
        b.write(tick, &sps).unwrap();
        assert_eq!(step(&mut io, &mut servos)[0], moteus::query(0, 1));
        b.read(&mut fb).unwrap();
    }
    assert!((fb[0].position - 0.09 * TAU).abs() < 1e-6);
    // Off: position mode at the measured position, Pending until a report shows it.
    assert_eq!(b.compliant(false, &mut dofs).unwrap(), Readiness::Pending);
    let mut ready = false;
    for _ in 0..10 {
        if b.enable().unwrap() == Readiness::Ready {
            ready = true;
            break;
        }
        for f in step(&mut io, &mut servos) {
            if f.id == 0x8001 {
                let w = moteus_writes(f.data());
                assert_eq!(w.mode, Some(10));
                // Where the hand left it (rev → rad → rev: within a float's rounding).
                assert!(
                    (w.position.unwrap() - 0.09).abs() < 1e-6,
                    "{:?}",
                    w.position
                );
            }
        }
    }
    assert!(ready);
    assert_eq!(servos[0].mode, 10);
}

#[test]
fn moteus_needs_an_fd_bus_and_its_budget_counts_the_data_phase() {
    let names = ["a", "b", "c", "d"];
    let js = bus_peer::servos(&names);
    let yaml = |n: usize| {
        let mut y = String::from("- {name: legs, transport: can, interface: can0, joints: {");
        for (i, name) in names[..n].iter().enumerate() {
            y += &format!("{name}: {{protocol: moteus, id: {}}}, ", i + 1);
        }
        y + "}}"
    };
    let raw = |n: usize| -> Vec<RawBus> { serde_yaml::from_str(&yaml(n)).unwrap() };
    // 233.2 µs a joint a tick at 1 Mbit/s + 5 Mbit/s (worst-case stuffing): three fit in 70%
    // of a 1 ms period, four do not.
    assert!(validate(&raw(3), &names[..3], 1000.0).is_ok());
    let p = validate(&raw(4), &names, 1000.0).unwrap_err();
    assert_eq!(
        p[0].message,
        "bus `legs`: 4 drives at 1000 Hz need 932.8 µs of CAN a tick (93% of the 1000 µs period \
         at 1000000 bit/s, data phase 5000000 bit/s), over the maximum load of 70%; at 1000 Hz \
         this bus fits 3 of these drives, and all 4 fit up to 750 Hz"
    );
    let _ = js;
}
