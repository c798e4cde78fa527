//! The CAN drives through the `Backend` trait on an in-memory bus, against scripted drives:
//! CiA 402 enable sequence and fault reaction, ODrive and MIT enable and streaming, and the bus
//! faults (full queue, lost device, missing feedback). A vcan test runs where the kernel has CAN.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

mod bus_peer;

use bus_peer::{Cia402Drive, joint_set, rig};
use motiond::backend::bus::{BusBackend, can_bus};
use motiond::backend::frame::CanFrame;
use motiond::backend::transport::FrameIo;
use motiond::backend::transport::memory::{MemoryIo, memory_pair};
use motiond::backend::{Backend, FaultKind, Feedback, Readiness};
use motiond::backend::{cia402, mit, odrive};
use motiond::robot::Actuator;
use motiond::trajectory::Setpoint;

const RATE: f64 = 1000.0;

const CIA402_YAML: &str = "
- name: can0
  transport: can
  interface: can0
  joints:
    base_yaw: {protocol: cia402, id: 5, counts_per_unit: 10000}
";

/// Controlwords in order with repeats removed.
fn sequence(rpdos: &[(u16, i32)]) -> Vec<u16> {
    let mut s: Vec<u16> = rpdos.iter().map(|r| r.0).collect();
    s.dedup();
    s
}

#[test]
fn cia402_enables_at_the_actual_position_then_streams_rpdo_and_sync() {
    let joints = joint_set(&[("base_yaw", Actuator::Servo)]);
    let (mut b, mut io) = rig::can_backend(CIA402_YAML, &joints, RATE, 64);
    let drive = std::cell::RefCell::new(Cia402Drive::new(5, 12_345));
    rig::enable(&mut b, || drive.borrow_mut().step(&mut io.clone()), 200);
    let d = drive.borrow();
    assert_eq!(
        d.sdos,
        cia402::SETUP_LEN,
        "the whole PDO/mode setup is acknowledged"
    );
    assert!(d.operational);
    assert_eq!(sequence(&d.rpdos), [0x06, 0x07, 0x0F]);
    assert!(
        d.rpdos.iter().all(|&(_, t)| t == 12_345),
        "every enable RPDO targets the actual position: {:?}",
        d.rpdos
    );
    drop(d);

    let mut fb = [Feedback::default()];
    b.read(&mut fb).unwrap();
    assert!((fb[0].position - 1.2345).abs() < 1e-12);
    // The final enable step's frames (hold at the actual position, SYNC) are still queued.
    assert_eq!(io.recv().unwrap(), Some(cia402::rpdo1(5, 0x0F, 12_345)));
    assert_eq!(io.recv().unwrap(), Some(cia402::sync()));
    // Stream: each tick one RPDO with CW 0x0F and the target in counts, then SYNC.
    for tick in 0..5u64 {
        let sp = Setpoint {
            position: 1.2345 + 0.001 * tick as f64,
            velocity: 1.0,
            acceleration: 0.0,
        };
        b.write(tick, &[sp]).unwrap();
        // motiond's own heartbeat (node 127) comes every few ticks for the drive's consumer.
        let frames: Vec<CanFrame> = std::iter::from_fn(|| io.recv().unwrap())
            .filter(|f| *f != cia402::master_heartbeat(127))
            .collect();
        assert_eq!(
            frames,
            [
                cia402::rpdo1(5, 0x0F, 12_345 + 10 * tick as i32),
                cia402::sync()
            ]
        );
    }
}

#[test]
fn cia402_fault_goes_to_hold_and_reenables_from_the_measured_position() {
    let joints = joint_set(&[("base_yaw", Actuator::Servo)]);
    let (mut b, mut io) = rig::can_backend(CIA402_YAML, &joints, RATE, 64);
    let drive = std::cell::RefCell::new(Cia402Drive::new(5, 0));
    rig::enable(&mut b, || drive.borrow_mut().step(&mut io.clone()), 200);
    let mut fb = [Feedback::default()];
    for tick in 0..10u64 {
        let sp = Setpoint {
            position: 0.01 * tick as f64,
            ..Setpoint::default()
        };
        b.write(tick, &[sp]).unwrap();
        drive.borrow_mut().step(&mut io);
        b.read(&mut fb).unwrap();
    }
    assert_eq!(drive.borrow().position, 900);

    // The drive faults: EMCY 0x8611 (following error), statusword Fault.
    drive.borrow_mut().statusword = 0x0218;
    io.send(&CanFrame::new(0x085, &[0x11, 0x86, 0x81, 0, 0, 0, 0, 0]))
        .unwrap();
    let err = b.read(&mut fb).unwrap_err();
    assert_eq!(err.kind, FaultKind::DriveFault);
    assert_eq!((err.dof, err.code), (Some(0), 0x0081_8611));

    // Safe state: hold at the last commanded position (counts 900), every tick. Meanwhile the
    // faulted drive is pushed by hand to 4321 counts.
    drive.borrow_mut().position = 4321;
    drive.borrow_mut().rpdos.clear();
    let held = [Setpoint {
        position: 0.09,
        ..Setpoint::default()
    }];
    b.hold(10, &held).unwrap();
    b.hold(11, &held).unwrap();
    drive.borrow_mut().step(&mut io);
    assert!(drive.borrow().rpdos.iter().all(|&(_, t)| t == 900));

    // Clear-fault + enable resets the fault with a rising edge and re-enables targeting the new
    // measured position.
    drive.borrow_mut().rpdos.clear();
    rig::enable(&mut b, || drive.borrow_mut().step(&mut io.clone()), 200);
    let d = drive.borrow();
    let seq = sequence(&d.rpdos);
    let reset = seq
        .iter()
        .position(|&c| c == 0x80)
        .expect("fault reset sent");
    assert_eq!(&seq[reset..], [0x80, 0x06, 0x07, 0x0F], "{seq:x?}");
    let after_reset: Vec<i32> = d
        .rpdos
        .iter()
        .skip_while(|r| r.0 != 0x80)
        .map(|r| r.1)
        .collect();
    assert!(after_reset.iter().all(|&t| t == 4321), "{after_reset:?}");
    assert_eq!(
        d.sdos,
        cia402::SETUP_LEN,
        "no reconfiguration without a reboot"
    );
    drop(d);
    b.read(&mut fb).unwrap();
    assert!((fb[0].position - 0.4321).abs() < 1e-12);
}

#[test]
fn missing_feedback_is_a_fault_after_the_configured_time() {
    let joints = joint_set(&[("base_yaw", Actuator::Servo)]);
    let yaml = CIA402_YAML.replace("  joints:", "  feedback_timeout_ms: 5\n  joints:");
    let (mut b, mut io) = rig::can_backend(&yaml, &joints, RATE, 64);
    let drive = std::cell::RefCell::new(Cia402Drive::new(5, 0));
    rig::enable(&mut b, || drive.borrow_mut().step(&mut io.clone()), 200);
    drive.borrow_mut().silent = true;
    let mut fb = [Feedback::default()];
    let mut failed_at = None;
    for tick in 0..20u64 {
        b.write(tick, &[Setpoint::default()]).unwrap();
        drive.borrow_mut().step(&mut io);
        if let Err(e) = b.read(&mut fb) {
            assert_eq!(e.kind, FaultKind::FeedbackMissing);
            assert_eq!(e.dof, Some(0));
            failed_at = Some(tick);
            break;
        }
        // The last report came with the final enable step; nothing after it.
        assert_eq!(fb[0].valid, tick == 0);
    }
    // 5 ms at 1 kHz: the 6th read after the last report fails.
    assert_eq!(failed_at, Some(6));
}

#[test]
fn full_queue_and_lost_device_are_faults_not_waits() {
    let joints = joint_set(&[("base_yaw", Actuator::Servo)]);
    let (mut b, io) = rig::can_backend(CIA402_YAML, &joints, RATE, 3);
    // Nobody drains the bus: the enable sequence's frames fill the 3-frame queue.
    let err = (0..10).find_map(|_| b.enable().err()).expect("queue fills");
    assert_eq!(err.kind, FaultKind::QueueFull);
    io.close();
    assert_eq!(
        b.hold(0, &[Setpoint::default()]).unwrap_err().kind,
        FaultKind::DeviceLost
    );
    assert_eq!(
        b.read(&mut [Feedback::default()]).unwrap_err().kind,
        FaultKind::DeviceLost
    );
}

/// A transport that can be unplugged: every send and receive is `device_lost` while it is, and
/// `reopen` succeeds once it is plugged in again.
struct Unpluggable {
    io: MemoryIo,
    unplugged: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Unpluggable {
    fn check(&self) -> Result<(), motiond::backend::BackendError> {
        if self.unplugged.load(std::sync::atomic::Ordering::Relaxed) {
            Err(motiond::backend::BackendError {
                kind: FaultKind::DeviceLost,
                dof: None,
                code: ENETDOWN,
            })
        } else {
            Ok(())
        }
    }
}

/// Linux's errno for a send on an interface that is down.
const ENETDOWN: u32 = 100;

impl FrameIo for Unpluggable {
    fn send(&mut self, frame: &CanFrame) -> Result<(), motiond::backend::BackendError> {
        self.check()?;
        self.io.send(frame)
    }
    fn recv(&mut self) -> Result<Option<CanFrame>, motiond::backend::BackendError> {
        self.check()?;
        self.io.recv()
    }
    fn reopen(&mut self) -> Result<(), motiond::backend::BackendError> {
        self.check()
    }
}

#[test]
fn a_lost_interface_is_reopened_on_enable_and_its_drives_configured_again() {
    use std::sync::atomic::Ordering::Relaxed;
    let joints = joint_set(&[("base_yaw", Actuator::Servo)]);
    let (host, io) = memory_pair(64);
    let unplugged = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let transport = Unpluggable {
        io: host,
        unplugged: unplugged.clone(),
    };
    let can = can_bus(
        &rig::bus(CIA402_YAML, &joints, RATE),
        &joints,
        RATE,
        Box::new(transport),
    );
    let mut b = BusBackend::new(vec![Box::new(can)]);
    let status = b.status().expect("buses report status");
    let drive = std::cell::RefCell::new(Cia402Drive::new(5, 100));
    rig::enable(&mut b, || drive.borrow_mut().step(&mut io.clone()), 200);
    b.write(0, &[Setpoint::default()]).unwrap();

    // `ip link set can0 down`: the next write is `device_lost`, the hold fails while it lasts,
    // and so does an enable (the reopen is refused).
    unplugged.store(true, Relaxed);
    let err = b.write(1, &[Setpoint::default()]).unwrap_err();
    assert_eq!((err.kind, err.code), (FaultKind::DeviceLost, 100));
    assert!(b.hold(2, &[Setpoint::default()]).is_err());
    assert_eq!(b.enable().unwrap_err().kind, FaultKind::DeviceLost);
    assert_eq!(status.snapshot()[0].link.reopened, 0);

    // Back up: the enable reopens it once, and the drive (maybe power-cycled meanwhile) is set up
    // again from NMT pre-operational before it is powered.
    unplugged.store(false, Relaxed);
    // Its heartbeat consumer stopped it (switch on disabled), and it was moved by hand.
    drive.borrow_mut().statusword = 0x0250;
    drive.borrow_mut().position = 2500;
    rig::enable(&mut b, || drive.borrow_mut().step(&mut io.clone()), 200);
    assert_eq!(drive.borrow().sdos, 2 * cia402::SETUP_LEN);
    assert_eq!(status.snapshot()[0].link.reopened, 1);
    let mut fb = [Feedback::default()];
    b.read(&mut fb).unwrap();
    assert!((fb[0].position - 0.25).abs() < 1e-12, "{fb:?}");
}

#[test]
fn odrive_requests_closed_loop_at_the_measured_position_and_streams_feed_forward() {
    let joints = joint_set(&[("shoulder_pitch", Actuator::Force)]);
    let yaml = "
- name: can0
  transport: can
  interface: can0
  joints:
    shoulder_pitch: {protocol: odrive, id: 1, turns_per_unit: 1.0, gear_ratio: 2, inertia: 0.5}
";
    let (mut b, mut io) = rig::can_backend(yaml, &joints, RATE, 64);
    let estimates = |pos: f32| {
        let mut d = [0u8; 8];
        d[..4].copy_from_slice(&pos.to_le_bytes());
        CanFrame::new(odrive::can_id(1, odrive::GET_ENCODER_ESTIMATES), &d)
    };
    let heartbeat = |state: u8, error: u32| {
        let e = error.to_le_bytes();
        CanFrame::new(
            odrive::can_id(1, odrive::HEARTBEAT),
            &[e[0], e[1], e[2], e[3], state, 0, 0, 0],
        )
    };
    let mut sent = Vec::new();
    let mut state = 1u8;
    for _ in 0..50 {
        if b.enable().unwrap() == Readiness::Ready {
            break;
        }
        while let Some(f) = io.recv().unwrap() {
            if f == odrive::set_axis_state(1, odrive::AXIS_STATE_CLOSED_LOOP_CONTROL) {
                state = 8;
            }
            sent.push(f);
        }
        io.send(&estimates(3.0)).unwrap();
        io.send(&heartbeat(state, 0)).unwrap();
    }
    assert_eq!(sent[0], odrive::clear_errors(1, odrive::Firmware::V06));
    assert_eq!(
        sent[1],
        odrive::set_controller_mode(
            1,
            odrive::CONTROL_MODE_POSITION,
            odrive::INPUT_MODE_PASSTHROUGH
        )
    );
    let request = sent
        .iter()
        .position(|f| f.id == odrive::can_id(1, odrive::SET_AXIS_STATE))
        .unwrap();
    // The input position is set to the measured one before closed loop is requested.
    assert_eq!(sent[request - 1], odrive::set_input_pos(1, 3.0, 0.0, 0.0));
    while io.recv().unwrap().is_some() {}
    // 3 turns / (1 turn per rad · gear 2) = 1.5 rad.
    let mut fb = [Feedback::default()];
    b.read(&mut fb).unwrap();
    assert!((fb[0].position - 1.5).abs() < 1e-6);
    let sp = Setpoint {
        position: 1.6,
        velocity: 0.25,
        acceleration: 2.0,
    };
    b.write(0, &[sp]).unwrap();
    // Force actuator: torque feed-forward = inertia · acceleration / gear = 0.5 N·m.
    assert_eq!(
        io.recv().unwrap().unwrap(),
        odrive::set_input_pos(1, 3.2, 0.5, 0.5)
    );
    // An axis error is a drive fault naming the error bits.
    io.send(&heartbeat(1, 0x40)).unwrap();
    let e = b.read(&mut fb).unwrap_err();
    assert_eq!((e.kind, e.code), (FaultKind::DriveFault, 0x40));
}

#[test]
fn odrive_estop_requested_is_the_drives_own_estop() {
    let joints = joint_set(&[("shoulder_pitch", Actuator::Servo)]);
    for (firmware, bit) in [("0.5", 0x4000u32), ("0.6", 0x0200_0000)] {
        let yaml = format!(
            "
- name: can0
  transport: can
  interface: can0
  joints:
    shoulder_pitch: {{protocol: odrive, id: 1, firmware: \"{firmware}\"}}
"
        );
        let (mut b, mut io) = rig::can_backend(&yaml, &joints, RATE, 64);
        let heartbeat = |state: u8, error: u32| {
            let e = error.to_le_bytes();
            CanFrame::new(
                odrive::can_id(1, odrive::HEARTBEAT),
                &[e[0], e[1], e[2], e[3], state, 0, 0, 0],
            )
        };
        let mut state = 1u8;
        for _ in 0..50 {
            if b.enable().unwrap() == Readiness::Ready {
                break;
            }
            while let Some(f) = io.recv().unwrap() {
                if f == odrive::set_axis_state(1, odrive::AXIS_STATE_CLOSED_LOOP_CONTROL) {
                    state = 8;
                }
            }
            io.send(&CanFrame::new(
                odrive::can_id(1, odrive::GET_ENCODER_ESTIMATES),
                &[0; 8],
            ))
            .unwrap();
            io.send(&heartbeat(state, 0)).unwrap();
        }
        io.send(&heartbeat(1, bit | 0x1)).unwrap();
        let mut fb = [Feedback::default()];
        let e = b.read(&mut fb).unwrap_err();
        assert_eq!(
            (e.kind, e.code),
            (FaultKind::DriveEStop, bit | 0x1),
            "{firmware}"
        );
    }
}

#[test]
fn cia402_quick_stop_active_is_the_drives_own_estop_and_enabling_leaves_it() {
    let joints = joint_set(&[("base_yaw", Actuator::Servo)]);
    let (mut b, mut io) = rig::can_backend(CIA402_YAML, &joints, RATE, 64);
    let drive = std::cell::RefCell::new(Cia402Drive::new(5, 0));
    rig::enable(&mut b, || drive.borrow_mut().step(&mut io.clone()), 200);
    let mut fb = [Feedback::default()];
    b.write(0, &[Setpoint::default()]).unwrap();
    // The drive's quick-stop input: quick stop active, unasked.
    drive.borrow_mut().statusword = 0x0217;
    drive.borrow_mut().step(&mut io);
    let err = b.read(&mut fb).unwrap_err();
    assert_eq!(
        (err.kind, err.dof, err.code),
        (FaultKind::DriveEStop, Some(0), 0x0217)
    );
    // Enabling again takes it out through disable voltage, then the usual sequence.
    b.disable().unwrap();
    drive.borrow_mut().rpdos.clear();
    rig::enable(&mut b, || drive.borrow_mut().step(&mut io.clone()), 200);
    let seq = sequence(&drive.borrow().rpdos);
    assert_eq!(seq.last(), Some(&0x0F), "{seq:x?}");
    assert!(seq.windows(3).any(|w| w == [0x06, 0x07, 0x0F]), "{seq:x?}");
}

#[test]
fn mit_enters_motor_mode_and_packs_commands_with_the_configured_gains() {
    let joints = joint_set(&[
        ("wrist_roll", Actuator::Velocity),
        ("elbow_pitch", Actuator::Servo),
    ]);
    let yaml = "
- name: can0
  transport: can
  interface: can0
  joints:
    elbow_pitch: {protocol: mit, id: 2, mit: {kp: 50, kd: 1}}
    wrist_roll: {protocol: mit, id: 3, direction: -1, mit: {kp: 20, kd: 2}}
";
    let (mut b, mut io) = rig::can_backend(yaml, &joints, RATE, 64);
    let r = mit::Ranges::MINI_CHEETAH;
    let reply = |id: u8, p: f32| {
        let d = mit::pack(
            &mit::Command {
                p,
                ..Default::default()
            },
            &r,
        );
        CanFrame::new(0, &[id, d[0], d[1], d[2], d[3] & 0xF0, 0x00])
    };
    let mut first = Vec::new();
    for _ in 0..10 {
        if b.enable().unwrap() == Readiness::Ready {
            break;
        }
        while let Some(f) = io.recv().unwrap() {
            first.push(f);
            io.send(&reply(f.id as u8, 1.0)).unwrap();
        }
    }
    assert!(first.contains(&CanFrame::new(2, &mit::ENTER_MOTOR_MODE)));
    assert!(first.contains(&CanFrame::new(3, &mit::ENTER_MOTOR_MODE)));
    while io.recv().unwrap().is_some() {}
    let mut fb = [Feedback::default(); 2];
    b.read(&mut fb).unwrap();
    assert!((fb[1].position - 1.0).abs() < 1e-3, "{fb:?}");
    assert!((fb[0].position + 1.0).abs() < 1e-3, "direction -1: {fb:?}");
    let sps = [
        Setpoint {
            position: -1.0,
            velocity: 2.0,
            acceleration: 0.0,
        },
        Setpoint {
            position: 1.0,
            velocity: 0.0,
            acceleration: 0.0,
        },
    ];
    b.write(0, &sps).unwrap();
    let frames: Vec<CanFrame> = std::iter::from_fn(|| io.recv().unwrap()).collect();
    let elbow = mit::pack(
        &mit::Command {
            p: 1.0,
            v: 0.0,
            kp: 50.0,
            kd: 1.0,
            t: 0.0,
        },
        &r,
    );
    // Velocity actuator: no position gain, velocity command (direction -1), damping gain.
    let wrist = mit::pack(
        &mit::Command {
            p: 1.0,
            v: -2.0,
            kp: 0.0,
            kd: 2.0,
            t: 0.0,
        },
        &r,
    );
    assert!(frames.contains(&CanFrame::new(2, &elbow)), "{frames:x?}");
    assert!(frames.contains(&CanFrame::new(3, &wrist)), "{frames:x?}");
    b.disable().unwrap();
    let frames: Vec<CanFrame> = std::iter::from_fn(|| io.recv().unwrap()).collect();
    assert!(frames.contains(&CanFrame::new(2, &mit::EXIT_MOTOR_MODE)));
}

#[test]
fn vcan_round_trip_where_the_kernel_has_can() {
    use motiond::backend::transport::socketcan::SocketCanIo;
    let (mut a, mut b) = match (
        SocketCanIo::open("vcan0", false),
        SocketCanIo::open("vcan0", false),
    ) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!(
                "skipping: no vcan0 interface ({e}); see docs/src/buses.md (Without hardware) to create one"
            );
            return;
        }
    };
    let f = cia402::rpdo1(5, 0x0F, 100_000);
    a.send(&f).unwrap();
    let got = (0..1000)
        .find_map(|_| {
            std::thread::sleep(std::time::Duration::from_millis(1));
            b.recv().unwrap()
        })
        .expect("frame crosses vcan0");
    assert_eq!(got, f);
}

#[test]
fn a_neighbour_fault_holds_every_drive_where_it_was_commanded_with_one_sync_a_tick() {
    let joints = joint_set(&[
        ("base_yaw", Actuator::Servo),
        ("elbow_pitch", Actuator::Servo),
    ]);
    let yaml = "
- name: can0
  transport: can
  interface: can0
  joints:
    base_yaw: {protocol: cia402, id: 5, counts_per_unit: 10000}
    elbow_pitch: {protocol: cia402, id: 6, counts_per_unit: 10000}
";
    let (mut b, mut io) = rig::can_backend(yaml, &joints, RATE, 64);
    let mut d5 = Cia402Drive::new(5, 0);
    let mut d6 = Cia402Drive::new(6, 0);
    // Both drives share one in-memory bus end: each takes its own frames.
    let step = |d5: &mut Cia402Drive, d6: &mut Cia402Drive, io: &mut MemoryIo| {
        let frames: Vec<CanFrame> = std::iter::from_fn(|| io.recv().unwrap()).collect();
        let (mut a, mut z) = memory_pair(256);
        for f in &frames {
            z.send(f).unwrap();
        }
        d5.step(&mut a);
        let (mut a2, mut z2) = memory_pair(256);
        for f in std::iter::from_fn(|| z.recv().unwrap()) {
            io.send(&f).unwrap();
        }
        for f in &frames {
            z2.send(f).unwrap();
        }
        d6.step(&mut a2);
        for f in std::iter::from_fn(|| z2.recv().unwrap()) {
            io.send(&f).unwrap();
        }
        frames
    };
    for _ in 0..200 {
        if b.enable().unwrap() == Readiness::Ready {
            break;
        }
        step(&mut d5, &mut d6, &mut io);
    }
    // Drive 5 trails its target by 160 counts (16 mrad) while moving.
    d5.lag = 160;
    let mut fb = [Feedback::default(); 2];
    let mut last = [Setpoint::default(); 2];
    for tick in 0..20u64 {
        last = [
            Setpoint {
                position: 0.002 * tick as f64,
                ..Setpoint::default()
            },
            Setpoint::default(),
        ];
        b.write(tick, &last).unwrap();
        step(&mut d5, &mut d6, &mut io);
        b.read(&mut fb).unwrap();
    }
    assert!((fb[0].position - (0.038 - 0.016)).abs() < 1e-9, "{fb:?}");
    // The neighbour faults (EMCY with the generic error bit) right after tick 20's write.
    b.write(20, &last).unwrap();
    io.send(&CanFrame::new(0x086, &[0x10, 0x23, 0x01, 0, 0, 0, 0, 0]))
        .unwrap();
    let err = b.read(&mut fb).unwrap_err();
    assert_eq!((err.kind, err.dof), (FaultKind::DriveFault, Some(1)));
    // The loop holds the last commanded setpoints in the same tick, then every tick.
    b.hold(20, &last).unwrap();
    let frames = step(&mut d5, &mut d6, &mut io);
    assert_eq!(
        frames.iter().filter(|f| **f == cia402::sync()).count(),
        1,
        "one SYNC in the tick of the write and the hold: {frames:?}"
    );
    d5.rpdos.clear();
    for tick in 21..30 {
        b.hold(tick, &last).unwrap();
        step(&mut d5, &mut d6, &mut io);
    }
    assert_eq!(d5.rpdos.len(), 9);
    assert!(
        d5.rpdos.iter().all(|&(_, t)| t == 380),
        "held at the last commanded 0.038 rad, not the measured 0.022: {:?}",
        d5.rpdos
    );
}

#[test]
fn hold_is_retried_until_the_bus_takes_it() {
    let joints = joint_set(&[("base_yaw", Actuator::Servo)]);
    let (mut b, mut io) = rig::can_backend(CIA402_YAML, &joints, RATE, 3);
    let held = [Setpoint {
        position: 0.5,
        ..Setpoint::default()
    }];
    // Nobody drains the 3-frame queue: the holds soon do not fit, and say so.
    let err = (0..5).find_map(|k| b.hold(k, &held).err()).unwrap();
    assert_eq!(err.kind, FaultKind::QueueFull);
    // Drained: the next tick's hold goes through whole.
    while io.recv().unwrap().is_some() {}
    b.hold(10, &held).unwrap();
    assert_eq!(
        io.recv().unwrap().unwrap().data()[2..],
        5000i32.to_le_bytes()
    );
    assert_eq!(io.recv().unwrap(), Some(cia402::sync()));
}

/// A transmit queue that refuses the next `refuse` frames, then takes everything: a full queue
/// that drains while a tick's burst is being sent.
struct DrainingQueue {
    io: MemoryIo,
    refuse: usize,
}

impl FrameIo for DrainingQueue {
    fn send(&mut self, frame: &CanFrame) -> Result<(), motiond::backend::BackendError> {
        if self.refuse > 0 {
            self.refuse -= 1;
            return Err(motiond::backend::BackendError::new(FaultKind::QueueFull));
        }
        self.io.send(frame)
    }

    fn recv(&mut self) -> Result<Option<CanFrame>, motiond::backend::BackendError> {
        self.io.recv()
    }
}

#[test]
fn a_hold_the_queue_cut_short_is_not_synced() {
    let joints = joint_set(&[
        ("base_yaw", Actuator::Servo),
        ("elbow_pitch", Actuator::Servo),
    ]);
    let b = rig::bus(
        "
- name: can0
  transport: can
  interface: can0
  joints:
    base_yaw: {protocol: cia402, id: 5, counts_per_unit: 10000}
    elbow_pitch: {protocol: cia402, id: 6, counts_per_unit: 10000}
",
        &joints,
        RATE,
    );
    let (host, mut io) = memory_pair(64);
    let queue = DrainingQueue {
        io: host,
        refuse: 1,
    };
    let mut b = BusBackend::new(vec![Box::new(can_bus(&b, &joints, RATE, Box::new(queue)))]);
    let held = [
        Setpoint {
            position: 0.5,
            ..Setpoint::default()
        },
        Setpoint {
            position: 0.25,
            ..Setpoint::default()
        },
    ];
    let ids = |io: &mut MemoryIo| {
        std::iter::from_fn(|| io.recv().unwrap())
            .map(|f| f.id)
            .collect::<Vec<_>>()
    };
    // Node 5's target was refused, node 6's went: a SYNC now would apply node 6 alone.
    assert_eq!(b.hold(0, &held).unwrap_err().kind, FaultKind::QueueFull);
    assert_eq!(ids(&mut io), [0x206], "no SYNC after a truncated hold");
    // The next tick's hold goes whole, SYNC last.
    b.hold(1, &held).unwrap();
    assert_eq!(ids(&mut io), [0x205, 0x206, cia402::COB_SYNC]);
}

#[test]
fn a_tick_burst_longer_than_the_interface_queue_is_refused_with_the_command_that_fixes_it() {
    use motiond::backend::bus::{OpenError, burst_frames, check_tx_queue};
    let joints = joint_set(&[
        ("base_yaw", Actuator::Servo),
        ("elbow_pitch", Actuator::Servo),
    ]);
    let b = rig::bus(
        "
- name: arm
  transport: can
  interface: can0
  joints:
    base_yaw: {protocol: cia402, id: 5, counts_per_unit: 10000}
    elbow_pitch: {protocol: cia402, id: 6, counts_per_unit: 10000}
",
        &joints,
        RATE,
    );
    // Two RPDOs, the SYNC and motiond's heartbeat.
    assert_eq!(burst_frames(&b), 4);
    let sysfs = tempfile::tempdir().unwrap();
    std::fs::create_dir(sysfs.path().join("can0")).unwrap();
    let queue = sysfs.path().join("can0/tx_queue_len");
    std::fs::write(&queue, "3\n").unwrap();
    let err = check_tx_queue(&b, "can0", sysfs.path()).unwrap_err();
    assert!(matches!(
        err,
        OpenError::TxQueue {
            burst: 4,
            queue: 3,
            ..
        }
    ));
    let text = err.to_string();
    assert!(text.contains("ip link set can0 txqueuelen 64"), "{text}");
    std::fs::write(&queue, "10\n").unwrap();
    check_tx_queue(&b, "can0", sysfs.path()).unwrap();
    // vcan's length: no queue discipline, nothing to overflow.
    std::fs::write(&queue, "0\n").unwrap();
    check_tx_queue(&b, "can0", sysfs.path()).unwrap();
}

/// Frames sent since the last call, without motiond's own heartbeat.
fn frames(io: &mut MemoryIo) -> Vec<CanFrame> {
    std::iter::from_fn(|| io.recv().unwrap())
        .filter(|f| *f != cia402::master_heartbeat(127))
        .collect()
}

#[test]
fn cia402_teach_in_switches_on_without_torque_then_enables_at_the_measured_position() {
    let joints = joint_set(&[("base_yaw", Actuator::Servo)]);
    let (mut b, mut io) = rig::can_backend(CIA402_YAML, &joints, RATE, 64);
    let drive = std::cell::RefCell::new(Cia402Drive::new(5, 1_000));
    rig::enable(&mut b, || drive.borrow_mut().step(&mut io.clone()), 200);
    let mut fb = [Feedback::default()];
    b.read(&mut fb).unwrap();
    frames(&mut io);

    let mut dofs = [false];
    assert_eq!(b.compliant(true, &mut dofs).unwrap(), Readiness::Ready);
    assert_eq!(dofs, [true]);
    // Compliant: controlword 0x07 (disable operation) with the measured position as the target,
    // whatever the loop says; SYNC goes on; "switched on" is not a fault.
    let far = [Setpoint {
        position: 9.0,
        ..Setpoint::default()
    }];
    let mut measured = 1_000;
    for tick in 0..5u64 {
        b.write(tick, &far).unwrap();
        // A hand moves the joint between ticks.
        let hand = 1_000 + 500 * (tick as i32 + 1);
        drive.borrow_mut().position = hand;
        let sent = frames(&mut io);
        for f in &sent {
            drive.borrow_mut().on_frame(f, &mut io);
        }
        assert_eq!(sent, [cia402::rpdo1(5, 0x07, measured), cia402::sync()]);
        assert_eq!(drive.borrow().statusword, 0x0233, "switched on");
        b.read(&mut fb).unwrap();
        assert!(fb[0].valid);
        assert!((fb[0].position - f64::from(hand) / 10_000.0).abs() < 1e-12);
        measured = hand;
    }

    // Stiff again: enable operation targeting the measured position until operation enabled.
    assert_eq!(b.compliant(false, &mut dofs).unwrap(), Readiness::Pending);
    drive.borrow_mut().rpdos.clear();
    rig::enable(&mut b, || drive.borrow_mut().step(&mut io.clone()), 200);
    let d = drive.borrow();
    assert_eq!(sequence(&d.rpdos), [0x0F]);
    assert!(d.rpdos.iter().all(|&(_, t)| t == 3_500), "{:?}", d.rpdos);
    assert_eq!(d.statusword, 0x1237);
    drop(d);
    frames(&mut io);
    b.write(10, &[Setpoint::default()]).unwrap();
    assert_eq!(frames(&mut io), [cia402::rpdo1(5, 0x0F, 0), cia402::sync()]);
}

#[test]
fn odrive_teach_in_idles_the_axis_then_closes_the_loop_at_the_measured_position() {
    let joints = joint_set(&[("shoulder_pitch", Actuator::Servo)]);
    let yaml = "
- name: can0
  transport: can
  interface: can0
  joints:
    shoulder_pitch: {protocol: odrive, id: 1, turns_per_unit: 1.0}
";
    let (mut b, mut io) = rig::can_backend(yaml, &joints, RATE, 64);
    let estimates = |pos: f32| {
        let mut d = [0u8; 8];
        d[..4].copy_from_slice(&pos.to_le_bytes());
        CanFrame::new(odrive::can_id(1, odrive::GET_ENCODER_ESTIMATES), &d)
    };
    let heartbeat = |state: u8| {
        CanFrame::new(
            odrive::can_id(1, odrive::HEARTBEAT),
            &[0, 0, 0, 0, state, 0, 0, 0],
        )
    };
    // Enables against a scripted axis that reports `pos`; the frames sent meanwhile.
    fn up(b: &mut BusBackend, io: &mut MemoryIo, pos: f32) -> Vec<CanFrame> {
        let mut state = 1u8;
        let mut sent = Vec::new();
        for _ in 0..50 {
            if b.enable().unwrap() == Readiness::Ready {
                return sent;
            }
            for f in frames(io) {
                if f == odrive::set_axis_state(1, odrive::AXIS_STATE_CLOSED_LOOP_CONTROL) {
                    state = 8;
                }
                sent.push(f);
            }
            let mut d = [0u8; 8];
            d[..4].copy_from_slice(&pos.to_le_bytes());
            io.send(&CanFrame::new(
                odrive::can_id(1, odrive::GET_ENCODER_ESTIMATES),
                &d,
            ))
            .unwrap();
            io.send(&CanFrame::new(
                odrive::can_id(1, odrive::HEARTBEAT),
                &[0, 0, 0, 0, state, 0, 0, 0],
            ))
            .unwrap();
        }
        panic!("not ready");
    }
    up(&mut b, &mut io, 0.5);
    frames(&mut io);
    let mut fb = [Feedback::default()];
    b.read(&mut fb).unwrap();

    let mut dofs = [false];
    assert_eq!(b.compliant(true, &mut dofs).unwrap(), Readiness::Ready);
    assert_eq!(dofs, [true]);
    assert_eq!(
        frames(&mut io),
        [odrive::set_axis_state(1, odrive::AXIS_STATE_IDLE)]
    );
    // Idle: heartbeats say so (not a fault), estimates follow the hand, the input position fed
    // to the watchdog is the measured one.
    for (tick, pos) in [0.5f32, 0.75, 1.25].into_iter().enumerate() {
        io.send(&heartbeat(1)).unwrap();
        io.send(&estimates(pos)).unwrap();
        b.read(&mut fb).unwrap();
        assert!((fb[0].position - f64::from(pos)).abs() < 1e-6);
        b.write(tick as u64, &[Setpoint::default()]).unwrap();
        assert_eq!(frames(&mut io), [odrive::set_input_pos(1, pos, 0.0, 0.0)]);
    }

    // Stiff: the input position is the measured one before closed loop is asked for.
    assert_eq!(b.compliant(false, &mut dofs).unwrap(), Readiness::Pending);
    let sent = up(&mut b, &mut io, 1.25);
    let request = sent
        .iter()
        .position(|f| f.id == odrive::can_id(1, odrive::SET_AXIS_STATE))
        .unwrap();
    assert_eq!(
        sent[request],
        odrive::set_axis_state(1, odrive::AXIS_STATE_CLOSED_LOOP_CONTROL)
    );
    assert!(request > 0);
    assert!(
        sent.iter()
            .filter(|f| f.id == odrive::can_id(1, odrive::SET_INPUT_POS))
            .all(|f| *f == odrive::set_input_pos(1, 1.25, 0.0, 0.0)),
        "{sent:?}"
    );
    // Following again: an idle heartbeat now is a fault.
    io.send(&heartbeat(1)).unwrap();
    let e = b.read(&mut fb).unwrap_err();
    assert_eq!((e.kind, e.code), (FaultKind::DriveFault, 1));
}

#[test]
fn mit_has_no_compliant_mode_and_keeps_holding() {
    let joints = joint_set(&[("j", Actuator::Servo)]);
    let yaml = "
- name: can0
  transport: can
  interface: can0
  joints:
    j: {protocol: mit, id: 1, mit: {kp: 5, kd: 1}}
";
    let (mut b, mut io) = rig::can_backend(yaml, &joints, RATE, 64);
    let r = mit::Ranges::MINI_CHEETAH;
    rig::enable(
        &mut b,
        || {
            let mut io = io.clone();
            while io.recv().unwrap().is_some() {}
            io.send(&bus_peer::mit_reply(1, 0.2, &r)).unwrap();
        },
        50,
    );
    frames(&mut io);
    let mut dofs = [true];
    assert_eq!(b.compliant(true, &mut dofs).unwrap(), Readiness::Ready);
    assert_eq!(dofs, [false]);
    assert!(frames(&mut io).is_empty(), "nothing sent for MIT");
    assert_eq!(b.compliant(false, &mut dofs).unwrap(), Readiness::Ready);
}

#[test]
fn a_cia402_report_from_before_a_disable_does_not_end_the_next_enable() {
    let joints = joint_set(&[("base_yaw", Actuator::Servo)]);
    let (mut b, mut io) = rig::can_backend(CIA402_YAML, &joints, RATE, 64);
    let drive = std::cell::RefCell::new(Cia402Drive::new(5, 700));
    rig::enable(&mut b, || drive.borrow_mut().step(&mut io.clone()), 200);
    b.disable().unwrap();
    assert_eq!(b.enable().unwrap(), Readiness::Pending);
    // A TPDO the drive sent before it took the disable: operation enabled.
    let mut stale = io.clone();
    stale
        .send(&CanFrame::new(0x185, &[0x37, 0x12, 0xBC, 0x02, 0, 0]))
        .unwrap();
    assert_eq!(b.enable().unwrap(), Readiness::Pending);
    let sent = frames(&mut io);
    // The disable, then: not taken as enabled; operation disabled first.
    assert!(sent.contains(&cia402::rpdo1(5, 0x07, 700)), "{sent:x?}");
    for f in &sent {
        drive.borrow_mut().on_frame(f, &mut io);
    }
    drive.borrow_mut().rpdos.clear();
    rig::enable(&mut b, || drive.borrow_mut().step(&mut io.clone()), 200);
    assert_eq!(sequence(&drive.borrow().rpdos).last(), Some(&0x0F));
    assert_eq!(drive.borrow().statusword, 0x1237);
}
