//! The serial backends through the `Backend` trait over a real pseudo-terminal: DYNAMIXEL servos
//! and an SLCAN adapter with MIT motors answer on the far end, check every packet, and vanish
//! mid-motion; the backend must report the lost device.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

mod bus_peer;

use std::collections::BTreeMap;
use std::time::Duration;

use bus_peer::{Vanish, openpty};
use motiond::backend::bus::{BusBackend, OpenError, open};
use motiond::backend::dynamixel::codec as dxl;
use motiond::backend::lerobot_calibration::{self, Mismatch, Register};
use motiond::backend::{Backend, BackendError, FaultKind, Feedback, Readiness};
use motiond::robot::Actuator;
use motiond::session::describe_fault;
use motiond::trajectory::{JointSet, Setpoint};

const RATE: f64 = 1000.0;

fn open_backend(yaml: &str, joints: &JointSet) -> BusBackend {
    open(&bus_peer::rig::buses(yaml, joints, RATE), joints, RATE).unwrap()
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
    assert_eq!(
        b.hold(0, &[Setpoint::default(); 2]).unwrap_err().kind,
        FaultKind::DeviceLost
    );

    let log = peer.stop();
    assert!(log.vanished);
    assert_eq!(log.crc_errors, 0);
    // Torque off first, then on only after the goals were set to the present positions.
    assert_eq!(log.torque, [(1, 0), (2, 0), (1, 1), (2, 1)]);
    // The Bus Watchdog cleared, then armed with torque on: 5 ms at 1 kHz → one 20 ms unit.
    assert_eq!(log.watchdog, [(1, 0), (2, 0), (1, 1), (2, 1)]);
    // Operating Mode (EEPROM) already position mode: not written.
    assert_eq!(log.mode_writes, []);
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

/// Everything the master end has to read now.
fn drain(master: &mut std::fs::File) -> Vec<u8> {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    let mut out = Vec::new();
    loop {
        let mut p = libc::pollfd {
            fd: master.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(&mut p, 1, 20) } <= 0 {
            return out;
        }
        let mut buf = [0u8; 4096];
        match master.read(&mut buf) {
            Ok(0) | Err(_) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
}

#[test]
fn a_full_serial_queue_never_cuts_a_packet_short() {
    use motiond::backend::frame::CanFrame;
    use motiond::backend::transport::FrameIo;
    use motiond::backend::transport::serial::open_port;
    use motiond::backend::transport::slcan::SlcanIo;
    use motiond::backend::transport::slcan::codec as slcan;
    let mut pty = openpty();
    let port = open_port(&pty.slave_path, 115_200).unwrap();
    let mut io = SlcanIo::new(Box::new(port));
    let frame = CanFrame::new(0x205, &[0x0F, 0, 0xA0, 0x86, 0x01, 0]);
    let line = b"t20560F00A0860100\r";
    // Nobody reads the far end: the queue fills, and the last line fits only in part.
    let mut accepted = 0;
    let err = loop {
        match io.send(&frame) {
            Ok(()) => accepted += 1,
            Err(e) => break e,
        }
        assert!(accepted < 1_000_000, "the pty never filled");
    };
    assert_eq!(err.kind, FaultKind::QueueFull);
    let partial = err.code > 0;
    // Still full: new frames are refused whole, nothing of them reaches the wire.
    for _ in 0..3 {
        assert_eq!(io.send(&frame).unwrap_err().kind, FaultKind::QueueFull);
    }
    let mut wire = drain(&mut pty.master);
    // Room again: the unsent end of the cut line goes out first, then the new line.
    io.send(&frame).unwrap();
    wire.extend(drain(&mut pty.master));
    let lines = accepted + usize::from(partial) + 1;
    assert_eq!(
        wire.len(),
        lines * line.len(),
        "only whole lines on the wire"
    );
    assert!(wire.chunks(line.len()).all(|l| l == line));
    let mut reader = slcan::LineReader::default();
    let frames = wire.iter().filter_map(|&b| reader.push(b)).count();
    assert_eq!(frames, lines);
}

#[test]
fn a_serial_device_that_comes_back_at_the_same_path_is_reopened_on_enable() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("ttyUSB-servos");
    let first = openpty();
    std::os::unix::fs::symlink(&first.slave_path, &link).unwrap();
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
",
        link.display()
    );
    let joints = bus_peer::servos(&["base_yaw"]);
    let peer = bus_peer::dynamixel(
        first.master.try_clone().unwrap(),
        BTreeMap::from([(1, 2048)]),
        Vanish::AfterCommands(20),
    );
    drop(first.master);
    let mut b = open_backend(&yaml, &joints);
    let status = b.status().unwrap();
    enable(&mut b);
    let (_, err) = stream_until_fault(&mut b, &[0.0]);
    assert_eq!(err.kind, FaultKind::DeviceLost);
    assert!(peer.stop().vanished);
    // Still gone: enable says so, and nothing panics or waits.
    assert_eq!(b.enable().unwrap_err().kind, FaultKind::DeviceLost);

    // The adapter is plugged in again: a new device node behind the same path, servos at 3000.
    let second = openpty();
    std::fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink(&second.slave_path, &link).unwrap();
    let peer = bus_peer::dynamixel(second.master, BTreeMap::from([(1, 3000)]), Vanish::Never);
    enable(&mut b);
    let mut fb = [Feedback::default()];
    b.read(&mut fb).unwrap();
    let per_rad = 4096.0 / std::f64::consts::TAU;
    assert!((fb[0].position - 952.0 / per_rad).abs() < 1e-9, "{fb:?}");
    let snapshot = status.snapshot();
    assert_eq!(snapshot[0].link.reopened, 1);
    assert_eq!(
        snapshot[0].drives[0].link.last_fault.map(|f| f.0),
        None,
        "the loss was the bus's, not the servo's"
    );
    assert_eq!(
        snapshot[0].link.last_fault.map(|f| f.0),
        Some(FaultKind::DeviceLost)
    );
    let log = peer.stop();
    assert_eq!(log.crc_errors, 0);
    assert_eq!(log.torque.first(), Some(&(1, 0)));
}

/// Waits (a liveness bound) until the peer's log satisfies `done`.
fn until(peer: &bus_peer::Peer, done: impl Fn(&bus_peer::Log) -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !done(&peer.log.lock().unwrap()) {
        assert!(
            std::time::Instant::now() < deadline,
            "the peer never saw it"
        );
        tick();
    }
}

#[test]
fn dynamixel_teach_in_turns_torque_off_reads_the_hand_then_holds_where_it_was_put() {
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
    shoulder_pitch: {{id: 2}}
",
        pty.slave_path.display()
    );
    let joints = bus_peer::servos(&["base_yaw", "shoulder_pitch"]);
    let peer = bus_peer::dynamixel(
        pty.master.try_clone().unwrap(),
        BTreeMap::from([(1, 2048), (2, 2048)]),
        Vanish::Never,
    );
    drop(pty.master);
    let mut b = open_backend(&yaml, &joints);
    enable(&mut b);
    let mut fb = [Feedback::default(); 2];
    let mut dofs = [false; 2];
    assert_eq!(b.compliant(true, &mut dofs).unwrap(), Readiness::Ready);
    assert_eq!(dofs, [true, true]);
    // Watchdog off before the torque (it would trip), torque off on both.
    until(&peer, |l| l.torque.len() == 6);
    {
        let l = peer.log.lock().unwrap();
        assert_eq!(l.torque[4..], [(1, 0), (2, 0)]);
        assert_eq!(l.watchdog[4..], [(1, 0), (2, 0)]);
    }
    let goals = peer.log.lock().unwrap().goals.len();
    // The hand moves servo 1 by 1024 counts (a quarter turn); the positions are still read and
    // no goal is written while compliant.
    peer.log.lock().unwrap().hand.push((1, 3072));
    let per_rad = 4096.0 / std::f64::consts::TAU;
    let quarter = 1024.0 / per_rad;
    let mut seen = false;
    for k in 0..5000u64 {
        b.write(k, &[Setpoint::default(); 2]).unwrap();
        tick();
        b.read(&mut fb).unwrap();
        if fb[0].valid && (fb[0].position - quarter).abs() < 1e-9 {
            seen = true;
            break;
        }
    }
    assert!(seen, "the hand's position was never read: {fb:?}");
    assert_eq!(peer.log.lock().unwrap().goals.len(), goals);

    // Stiff: goal = present position, then torque on and the watchdog armed again.
    assert_eq!(b.compliant(false, &mut dofs).unwrap(), Readiness::Ready);
    until(&peer, |l| l.torque.len() == 8 && l.goals.len() > goals);
    let log = peer.stop();
    assert_eq!(log.goals[goals], [(1, 3072), (2, 2048)]);
    assert_eq!(log.torque[6..], [(1, 1), (2, 1)]);
    assert_eq!(log.watchdog[6..], [(1, 1), (2, 1)]);
    assert_eq!(log.crc_errors, 0);
}

/// A DYNAMIXEL servo's EEPROM area holding these calibration registers (Operating Mode:
/// position).
fn eeprom(drive_mode: u8, homing_offset: i32, range: (u32, u32)) -> [u8; 64] {
    let mut t = [0u8; 64];
    t[10] = drive_mode;
    t[11] = 3;
    t[20..24].copy_from_slice(&homing_offset.to_le_bytes());
    t[48..52].copy_from_slice(&range.1.to_le_bytes());
    t[52..56].copy_from_slice(&range.0.to_le_bytes());
    t
}

/// The calibration file of `calibrated_dynamixel` (drive modes 0 and 1, homing offsets −1019
/// and 1106, ranges [700, 3400] and [600, 3500]) and the servos' EEPROM areas agreeing with it.
fn agreeing() -> [[u8; 64]; 2] {
    [eeprom(0, -1019, (700, 3400)), eeprom(1, 1106, (600, 3500))]
}

/// A DYNAMIXEL bus of servos 1 and 2 (`base_yaw`, `shoulder_pitch`) with a LeRobot calibration
/// file ([`agreeing`]), opened against servos whose EEPROM holds `at_open`; the open's outcome,
/// the peer (its log cleared after the open) and the servos' EEPROM areas, which a test may
/// change before the enable.
fn calibrated_dynamixel(
    at_open: [[u8; 64]; 2],
) -> (
    Result<BusBackend, OpenError>,
    bus_peer::Peer,
    bus_peer::Eeproms,
) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("arm.json"),
        r#"{"base_yaw": {"id": 1, "drive_mode": 0, "homing_offset": -1019, "range_min": 700, "range_max": 3400},
            "shoulder_pitch": {"id": 2, "drive_mode": 1, "homing_offset": 1106, "range_min": 600, "range_max": 3500}}"#,
    )
    .unwrap();
    let pty = openpty();
    let yaml = format!(
        "- {{name: arm, transport: serial, device: {}, baud: 4000000, protocol: dynamixel, feedback_timeout_ms: 5000, lerobot_calibration: arm.json, joints: {{base_yaw: {{id: 1}}, shoulder_pitch: {{id: 2}}}}}}",
        pty.slave_path.display()
    );
    let joints = bus_peer::servos(&["base_yaw", "shoulder_pitch"]);
    let eeproms = bus_peer::Eeproms::default();
    eeproms
        .lock()
        .unwrap()
        .extend([(1, at_open[0]), (2, at_open[1])]);
    let peer = bus_peer::dynamixel_with_eeprom(
        pty.master.try_clone().unwrap(),
        BTreeMap::from([(1, 2048), (2, 2100)]),
        eeproms.clone(),
        Vanish::Never,
    );
    drop(pty.master);
    let mut buses = bus_peer::rig::buses(&yaml, &joints, RATE);
    let problems =
        lerobot_calibration::apply(&mut buses, &dir.path().join("robot.yaml"), &joints, &|_| {
            None
        });
    assert!(problems.is_empty(), "{problems:?}");
    let opened = open(&buses, &joints, RATE);
    if opened.is_ok() {
        *peer.log.lock().unwrap() = bus_peer::Log::default();
    }
    (opened, peer, eeproms)
}

/// Enables until ready or refused; the refusal, if any.
fn try_enable(b: &mut BusBackend) -> Option<BackendError> {
    for _ in 0..5000 {
        match b.enable() {
            Ok(Readiness::Ready) => return None,
            Ok(Readiness::Pending) => tick(),
            Err(e) => return Some(e),
        }
    }
    panic!("neither ready nor refused");
}

#[test]
fn dynamixel_servos_with_a_lerobot_calibration_are_read_back_before_anything_is_written() {
    let (b, peer, _) = calibrated_dynamixel(agreeing());
    let mut b = b.unwrap();
    assert_eq!(try_enable(&mut b), None);
    let log = peer.stop();
    // Drive_Mode, Homing_Offset and the position limits (each with its neighbour, so a reply's
    // length tells them apart), then torque off and the rest of the enable sequence.
    assert_eq!(
        log.order[..4],
        [
            (dxl::INST_SYNC_READ, dxl::ADDR_DRIVE_MODE),
            (dxl::INST_SYNC_READ, dxl::ADDR_HOMING_OFFSET),
            (dxl::INST_SYNC_READ, dxl::ADDR_VELOCITY_LIMIT),
            (dxl::INST_SYNC_WRITE, dxl::ADDR_TORQUE_ENABLE),
        ]
    );
    assert_eq!(log.torque, [(1, 0), (2, 0), (1, 1), (2, 1)]);
    assert_eq!(log.goals[0], [(1, 2048), (2, 2100)]);
}

#[test]
fn a_dynamixel_servo_calibrated_otherwise_is_refused_naming_bus_servo_register_and_values() {
    let cases = [
        // Calibrated again since: Homing_Offset differs.
        (
            [eeprom(0, -1019, (700, 3400)), eeprom(1, 806, (600, 3500))],
            (Some(1), Register::HomingOffset, 806),
            "bus arm, servo 2 (shoulder_pitch): its Homing_Offset reads 806, the bus's LeRobot \
             calibration file says 1106",
        ),
        // Reversed in the servo, not in the file.
        (
            [eeprom(1, -1019, (700, 3400)), eeprom(1, 1106, (600, 3500))],
            (Some(0), Register::DriveMode, 1),
            "bus arm, servo 1 (base_yaw): its Drive_Mode reads 1, the bus's LeRobot calibration \
             file says 0",
        ),
        // Another range.
        (
            [eeprom(0, -1019, (700, 3400)), eeprom(1, 1106, (600, 4095))],
            (Some(1), Register::MaxPositionLimit, 4095),
            "servo 2 (shoulder_pitch): its Max_Position_Limit reads 4095, the bus's LeRobot \
             calibration file says 3500",
        ),
    ];
    let joints = bus_peer::servos(&["base_yaw", "shoulder_pitch"]);
    for (tables, (dof, register, read), words) in cases {
        // When the bus opens (before it writes any setting) ...
        let (b, peer, _) = calibrated_dynamixel(tables);
        let e = b.err().expect("refused at open").to_string();
        assert!(e.contains(words), "{e}");
        let log = peer.stop();
        assert!(
            log.order.iter().all(|(i, _)| *i == dxl::INST_READ),
            "{:?}",
            log.order
        );
        assert!(log.torque.is_empty() && log.goals.is_empty() && log.mode_writes.is_empty());
        // ... and, calibrated again since it opened, when it is enabled.
        let (b, peer, eeproms) = calibrated_dynamixel(agreeing());
        let mut b = b.unwrap();
        eeproms
            .lock()
            .unwrap()
            .extend([(1, tables[0]), (2, tables[1])]);
        let e = try_enable(&mut b).expect("refused");
        assert_eq!((e.kind, e.dof), (FaultKind::CalibrationMismatch, dof));
        assert_eq!(Mismatch::of_code(e.code), Some(Mismatch { register, read }));
        let text = describe_fault(&e, &joints, b.status().as_deref());
        assert!(text.contains(words), "{text}");
        assert!(text.contains("lerobot-calibrate"), "{text}");
        // Nothing written to any servo: only the calibration reads went out.
        let log = peer.stop();
        assert!(
            log.order.iter().all(|(i, _)| *i == dxl::INST_SYNC_READ),
            "{:?}",
            log.order
        );
        assert!(log.torque.is_empty() && log.goals.is_empty() && log.watchdog.is_empty());
    }
}

/// LeRobot's Koch follower: servos at the factory's Return_Delay_Time (250) in position mode.
#[test]
fn a_dynamixel_bus_with_a_lerobot_calibration_writes_lerobots_settings_with_torque_off_when_it_opens()
 {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("koch.json"),
        r#"{"shoulder_pan": {"id": 1, "drive_mode": 0, "homing_offset": 0, "range_min": 0, "range_max": 4095},
            "elbow_flex": {"id": 3, "drive_mode": 0, "homing_offset": 0, "range_min": 0, "range_max": 4095},
            "gripper": {"id": 6, "drive_mode": 0, "homing_offset": 0, "range_min": 0, "range_max": 4095}}"#,
    )
    .unwrap();
    let names = ["elbow_flex", "gripper", "shoulder_pan"];
    let pty = openpty();
    let yaml = format!(
        "- {{name: koch, transport: serial, device: {}, baud: 4000000, protocol: dynamixel, feedback_timeout_ms: 5000, lerobot_calibration: koch.json, joints: {{shoulder_pan: {{id: 1}}, elbow_flex: {{id: 3}}, gripper: {{id: 6, lerobot_mode: degrees}}}}}}",
        pty.slave_path.display()
    );
    let joints = bus_peer::servos(&names);
    let factory = {
        let mut t = eeprom(0, 0, (0, 4095));
        t[9] = 250;
        t
    };
    let eeproms = bus_peer::Eeproms::default();
    eeproms
        .lock()
        .unwrap()
        .extend([(1, factory), (3, factory), (6, factory)]);
    let peer = bus_peer::dynamixel_with_eeprom(
        pty.master.try_clone().unwrap(),
        BTreeMap::from([(1, 2048), (3, 2048), (6, 2048)]),
        eeproms,
        Vanish::Never,
    );
    drop(pty.master);
    let mut buses = bus_peer::rig::buses(&yaml, &joints, RATE);
    let problems =
        lerobot_calibration::apply(&mut buses, &dir.path().join("robot.yaml"), &joints, &|_| {
            None
        });
    assert!(problems.is_empty(), "{problems:?}");
    let mut b = open(&buses, &joints, RATE).unwrap();
    assert_eq!(try_enable(&mut b), None);
    let log = peer.stop();
    let writes = |id: u8| -> Vec<(u16, Vec<u8>)> {
        log.writes
            .iter()
            .filter(|w| w.0 == id)
            .map(|(_, a, d)| (*a, d.clone()))
            .collect()
    };
    // Torque off first (Return_Delay_Time and Operating_Mode are EEPROM), then what differs:
    // Return_Delay_Time 0, extended position (4), on the gripper current-based position (5),
    // on the elbow the position gains 1500/0/600 (P, I, D at 84, 82, 80).
    let torque_off = (dxl::ADDR_TORQUE_ENABLE, vec![0]);
    let delay = (9, vec![0]);
    assert_eq!(
        writes(1),
        [torque_off.clone(), delay.clone(), (11, vec![4])]
    );
    assert_eq!(
        writes(6),
        [torque_off.clone(), delay.clone(), (11, vec![5])]
    );
    assert_eq!(
        writes(3),
        [
            torque_off,
            delay,
            (11, vec![4]),
            (84, 1500u16.to_le_bytes().to_vec()),
            (80, 600u16.to_le_bytes().to_vec()),
        ]
    );
    // The gains are RAM (a servo power-cycled since the bus opened lost them): the enable
    // writes them again, before torque goes on.
    let at = |a: u16| {
        log.order
            .iter()
            .rposition(|o| *o == (dxl::INST_SYNC_WRITE, a))
    };
    let torque_on = at(dxl::ADDR_TORQUE_ENABLE).unwrap();
    for gain in [84, 82, 80] {
        assert!(at(gain).unwrap() < torque_on, "{gain}: {:?}", log.order);
    }
    // The enable sequence finds the modes set: it writes none again.
    assert!(
        log.mode_writes
            .iter()
            .all(|w| log.writes.iter().any(|x| x.0 == w.0 && x.1 == 11))
    );
    assert_eq!(log.mode_writes.len(), 3);
}

/// The Operating Mode a DYNAMIXEL servo is to hold must be one its joint is commanded in,
/// refused at the key that gives it when the robot is loaded.
#[test]
fn a_dynamixel_operating_mode_the_joint_cannot_be_commanded_in_is_refused_at_its_key() {
    let cases = [
        // A position joint in velocity mode.
        (
            "servo: {operating_mode: 4}, joints: {a: {id: 1, servo: {operating_mode: 1}}}",
            Actuator::Servo,
            "buses[0].joints.a.servo.operating_mode",
            "it needs 3 (position), 4 (extended position) or 5",
        ),
        // A velocity joint, from the bus's key.
        (
            "servo: {operating_mode: 4}, joints: {a: {id: 1}}",
            Actuator::Velocity,
            "buses[0].servo.operating_mode",
            "it needs 1 (velocity)",
        ),
        // Position mode (one turn) for a range that does not fit one.
        (
            "joints: {a: {id: 1, zero_offset: 0, servo: {operating_mode: 3}}}",
            Actuator::Servo,
            "buses[0].joints.a.servo.operating_mode",
            "since its range [-1304, 1304] does not fit one turn",
        ),
    ];
    for (keys, actuator, key, words) in cases {
        let yaml = format!(
            "- {{name: arm, transport: serial, device: /dev/null, baud: 4000000, protocol: dynamixel, {keys}}}"
        );
        let joints = bus_peer::joint_set(&[("a", actuator)]);
        let buses = bus_peer::rig::buses(&yaml, &joints, RATE);
        let Err(OpenError::Config { problems }) = open(&buses, &joints, RATE) else {
            panic!("{keys}: not refused");
        };
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].key, key);
        assert!(
            problems[0].message.contains(words),
            "{}",
            problems[0].message
        );
    }
}
