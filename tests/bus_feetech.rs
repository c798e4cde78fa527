//! Feetech STS and SCS servos through the `Backend` trait on an in-memory line, against scripted
//! servos that decode every packet with motiond's codec and answer as the SDK's servos do: the
//! enable sequence (positions read before anything is written, goal = present, torque on), one
//! Sync Write of Goal_Position and the reads every tick, byte for byte, a fault bit in the status
//! byte as a named drive fault, teach-in with torque off, and the bus budget at 1 Mbit/s.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

mod bus_peer;

use bus_peer::{FeetechServo, FeetechServos, feetech_line, feetech_packets as packets};

use motiond::backend::bus::{BusBackend, serial_bus};
use motiond::backend::family::find;
use motiond::backend::feetech::codec::{self as ft, Series, inst, reg};
use motiond::backend::lerobot_calibration::{self, Mismatch, Register};
use motiond::backend::{Backend, FaultKind, Feedback, Readiness};
use motiond::config::bus::{RawBus, validate};
use motiond::session::describe_fault;
use motiond::trajectory::{JointSet, Setpoint};

const RATE: f64 = 250.0;
const TAU: f64 = std::f64::consts::TAU;

fn joints() -> JointSet {
    bus_peer::servos(&["a", "b"])
}

/// The servo series a bus of `protocol` (feetech or feetech_scs) speaks to.
fn series(protocol: &str) -> Series {
    if protocol == "feetech" {
        Series::Sts
    } else {
        Series::Scs
    }
}

fn rig(protocol: &str, positions: [i32; 2]) -> (BusBackend, FeetechServos) {
    let js = joints();
    let yaml = format!(
        "- {{name: arm, transport: serial, device: /dev/null, baud: 1000000, protocol: {protocol}, joints: {{a: {{id: 1}}, b: {{id: 2, direction: -1}}}}}}"
    );
    let buses = bus_peer::rig::buses(&yaml, &js, RATE);
    let series = series(protocol);
    let (port, servos) = feetech_line(
        series,
        vec![
            FeetechServo::new(1, positions[0]),
            FeetechServo::new(2, positions[1]),
        ],
    );
    let bus = serial_bus(&buses[0], &js, RATE, Box::new(port)).unwrap();
    (BusBackend::new(vec![bus]), servos)
}

fn enable(b: &mut BusBackend, s: &mut FeetechServos) {
    for _ in 0..10 {
        if b.enable().unwrap() == Readiness::Ready {
            s.step();
            return;
        }
        s.step();
    }
    panic!("not ready after 10 ticks");
}

fn at(a: f64, b: f64) -> [Setpoint; 2] {
    [a, b].map(|position| Setpoint {
        position,
        ..Setpoint::default()
    })
}

#[test]
fn sts_servos_are_read_first_then_held_where_they_are_and_follow_byte_for_byte() {
    let (mut b, mut s) = rig("feetech", [2100, 1900]);
    enable(&mut b, &mut s);
    // The positions first, nothing written before them (a servo with torque on keeps it).
    assert_eq!(
        s.log[0],
        (
            ft::BROADCAST,
            inst::SYNC_READ,
            vec![reg::PRESENT_POSITION, 2, 1, 2]
        )
    );
    let writes: Vec<_> = s.log.iter().filter(|p| p.1 == inst::SYNC_WRITE).collect();
    assert_eq!(writes[0].2[..2], [reg::GOAL_POSITION, 2]);
    assert_eq!(writes[1].2, vec![reg::TORQUE_ENABLE, 1, 1, 1, 2, 1]);
    assert_eq!(s.servos[0].goals, vec![2100]);
    assert_eq!(s.servos[1].goals, vec![1900]);
    assert!(s.servos.iter().all(|v| v.torque));
    let mut fb = [Feedback::default(); 2];
    b.read(&mut fb).unwrap();
    let per_rad = 4096.0 / TAU;
    assert!((fb[0].position - 52.0 / per_rad).abs() < 1e-9, "{fb:?}");
    assert!((fb[1].position - 148.0 / per_rad).abs() < 1e-9, "{fb:?}");
    // Each tick: one Sync Write of the goals (STS words little-endian), then one Sync Read.
    for tick in 0..20u64 {
        let (pa, pb) = (0.01 * tick as f64, -0.02 * tick as f64);
        b.write(tick, &at(pa, pb)).unwrap();
        let sent = s.step();
        let ga = (2048.0 + pa * per_rad).round() as i32;
        let gb = (2048.0 - pb * per_rad).round() as i32;
        let mut want = [0u8; 32];
        let [a0, a1] = Series::Sts.encode_position(ga).unwrap();
        let [b0, b1] = Series::Sts.encode_position(gb).unwrap();
        let n = ft::sync_write(
            &mut want,
            reg::GOAL_POSITION,
            2,
            [(1, &[a0, a1][..]), (2, &[b0, b1][..])],
        );
        let mut line = want[..n].to_vec();
        let mut read = [0u8; 16];
        let n = ft::sync_read(&mut read, reg::PRESENT_POSITION, 2, &[1, 2]);
        line.extend(&read[..n]);
        assert_eq!(sent, packets(&line));
        b.read(&mut fb).unwrap();
        assert!(fb.iter().all(|f| f.valid));
    }
}

#[test]
fn scs_servos_are_read_one_by_one_in_big_endian_words() {
    let (mut b, mut s) = rig("feetech_scs", [600, 400]);
    enable(&mut b, &mut s);
    assert_eq!(s.log[0], (1, inst::READ, vec![reg::PRESENT_POSITION, 2]));
    assert_eq!(s.log[1], (2, inst::READ, vec![reg::PRESENT_POSITION, 2]));
    assert_eq!(s.servos[0].goals, vec![600]);
    b.write(0, &at(0.0, 0.0)).unwrap();
    let sent = s.step();
    // Goal 512 (the middle of 1024 counts), big-endian, then a Read each.
    assert_eq!(
        sent[0].2,
        vec![reg::GOAL_POSITION, 2, 1, 0x02, 0x00, 2, 0x02, 0x00]
    );
    assert_eq!(sent[1].1, inst::READ);
    assert_eq!(sent[2].1, inst::READ);
}

#[test]
fn a_fault_bit_in_the_status_byte_is_a_named_drive_fault() {
    let (mut b, mut s) = rig("feetech", [2048, 2048]);
    enable(&mut b, &mut s);
    let mut fb = [Feedback::default(); 2];
    s.servos[1].error = ft::Fault::Overload.bit() | ft::Fault::Overheat.bit();
    b.write(0, &at(0.0, 0.0)).unwrap();
    s.step();
    let e = b.read(&mut fb).unwrap_err();
    assert_eq!(
        (e.kind, e.dof, e.code),
        (FaultKind::DriveFault, Some(1), 0x24)
    );
    let words = find("feetech")
        .unwrap()
        .fault_words(e.kind, e.code)
        .unwrap();
    assert_eq!(words, "status 0x24: overheat, overload");
}

#[test]
fn teach_in_turns_torque_off_reads_the_hand_and_stiffens_where_it_left_them() {
    let (mut b, mut s) = rig("feetech", [2048, 2048]);
    enable(&mut b, &mut s);
    let mut dofs = [false; 2];
    assert_eq!(b.compliant(true, &mut dofs).unwrap(), Readiness::Ready);
    assert_eq!(dofs, [true, true]);
    s.step();
    assert!(s.servos.iter().all(|v| !v.torque));
    let mut fb = [Feedback::default(); 2];
    for tick in 0..5u64 {
        s.servos[0].position = 2048 + 10 * tick as i32;
        b.write(tick, &at(0.0, 0.0)).unwrap();
        let sent = s.step();
        assert!(
            sent.iter().all(|p| p.1 == inst::SYNC_READ),
            "no goals while limp"
        );
        b.read(&mut fb).unwrap();
    }
    b.write(5, &at(0.0, 0.0)).unwrap();
    s.step();
    b.read(&mut fb).unwrap();
    assert_eq!(b.compliant(false, &mut dofs).unwrap(), Readiness::Ready);
    s.step();
    assert_eq!(
        s.servos[0].goals.last(),
        Some(&2088),
        "goal = where the hand left it"
    );
    assert!(s.servos.iter().all(|v| v.torque));
}

/// `Backend::holding`: nothing while enabling or in teach-in; from the enable (or a teach-in's
/// end) on, the goal each servo was last sent — not its report, which a hand or a load may move.
#[test]
fn holding_is_the_goal_a_servo_came_up_at_not_its_report() {
    let (mut b, mut s) = rig("feetech", [2100, 1900]);
    let per_rad = 4096.0 / TAU;
    let holding = |b: &BusBackend| {
        let mut h = [f64::NAN; 2];
        b.holding(&mut h);
        h
    };
    assert_eq!(b.enable().unwrap(), Readiness::Pending);
    assert!(holding(&b).iter().all(|h| h.is_nan()), "not while enabling");
    enable(&mut b, &mut s);
    let came_up = [52.0 / per_rad, 148.0 / per_rad];
    assert_eq!(holding(&b), came_up);
    let mut fb = [Feedback::default(); 2];
    let mut dofs = [false; 2];
    b.compliant(true, &mut dofs).unwrap();
    s.step();
    assert!(holding(&b).iter().all(|h| h.is_nan()), "not in teach-in");
    s.servos[0].position = 2200;
    b.write(1, &at(0.0, 0.0)).unwrap();
    s.step();
    b.read(&mut fb).unwrap();
    assert_eq!(b.compliant(false, &mut dofs).unwrap(), Readiness::Ready);
    s.step();
    // The hand moves it on before the loop reads again: held where it stiffened.
    s.servos[0].position = 2210;
    assert_eq!(holding(&b), [152.0 / per_rad, came_up[1]]);
}

/// A bus of servos 1 and 2 (joints `a`, `b`) with a LeRobot calibration file: homing offsets
/// −1019 and 1106, ranges [700, 3400] and [600, 3500] (SCS, 1024 counts a turn: [100, 900] and
/// [60, 960]).
fn calibrated_rig(protocol: &str, servos: Vec<FeetechServo>) -> (BusBackend, FeetechServos) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("arm.json");
    let [(a0, a1), (b0, b1)] = if protocol == "feetech" {
        [(700, 3400), (600, 3500)]
    } else {
        [(100, 900), (60, 960)]
    };
    std::fs::write(
        &file,
        format!(
            r#"{{"a": {{"id": 1, "drive_mode": 0, "homing_offset": -1019, "range_min": {a0}, "range_max": {a1}}},
                "b": {{"id": 2, "drive_mode": 0, "homing_offset": 1106, "range_min": {b0}, "range_max": {b1}}}}}"#
        ),
    )
    .unwrap();
    let js = joints();
    let yaml = format!(
        "- {{name: arm, transport: serial, device: /dev/null, baud: 1000000, protocol: {protocol}, lerobot_calibration: arm.json, joints: {{a: {{id: 1}}, b: {{id: 2}}}}}}"
    );
    let mut buses = bus_peer::rig::buses(&yaml, &js, RATE);
    let config = dir.path().join("robot.yaml");
    let problems = lerobot_calibration::apply(&mut buses, &config, &js, &|_| None);
    assert!(problems.is_empty(), "{problems:?}");
    let series = series(protocol);
    let (port, servos) = feetech_line(series, servos);
    let bus = serial_bus(&buses[0], &js, RATE, Box::new(port)).unwrap();
    (BusBackend::new(vec![bus]), servos)
}

/// Servo `id` at `position`, its registers as the calibration file says.
fn calibrated(id: u8, position: i32) -> FeetechServo {
    let (homing_offset, limits) = if id == 1 {
        (-1019, (700, 3400))
    } else {
        (1106, (600, 3500))
    };
    FeetechServo {
        homing_offset,
        limits,
        ..FeetechServo::new(id, position)
    }
}

/// Enables until ready or refused; the refusal, if any.
fn try_enable(b: &mut BusBackend, s: &mut FeetechServos) -> Option<motiond::backend::BackendError> {
    for _ in 0..10 {
        match b.enable() {
            Ok(Readiness::Ready) => {
                s.step();
                return None;
            }
            Ok(Readiness::Pending) => {}
            Err(e) => return Some(e),
        }
        s.step();
    }
    panic!("neither ready nor refused after 10 ticks");
}

#[test]
fn a_calibrated_servo_is_read_back_and_enabled_when_its_registers_agree() {
    let (mut b, mut s) = calibrated_rig("feetech", vec![calibrated(1, 2000), calibrated(2, 2100)]);
    assert_eq!(try_enable(&mut b, &mut s), None);
    // The calibration registers first (9 through 32, one Read a servo), then the positions;
    // nothing is written before both.
    let len = reg::HOMING_OFFSET + 2 - reg::MIN_POSITION_LIMIT;
    assert_eq!(
        s.log[0],
        (1, inst::READ, vec![reg::MIN_POSITION_LIMIT, len])
    );
    assert_eq!(
        s.log[1],
        (2, inst::READ, vec![reg::MIN_POSITION_LIMIT, len])
    );
    assert_eq!(s.log[2].1, inst::SYNC_READ);
    assert!(s.servos.iter().all(|x| x.torque));
    // LeRobot's Acceleration (RAM: a servo power-cycled since the bus opened lost it) is
    // written before torque goes on, at every enable.
    let acceleration = s
        .log
        .iter()
        .position(|p| p.1 == inst::SYNC_WRITE && p.2[0] == reg::ACCELERATION);
    let torque = s
        .log
        .iter()
        .position(|p| p.1 == inst::SYNC_WRITE && p.2[0] == reg::TORQUE_ENABLE);
    assert!(acceleration.unwrap() < torque.unwrap(), "{:?}", s.log);
    assert!(s.servos.iter().all(|x| x.acceleration == 254));
    for x in &mut s.servos {
        x.acceleration = 0; // power-cycled
        x.torque = false;
    }
    b.disable().unwrap();
    assert_eq!(try_enable(&mut b, &mut s), None);
    assert!(s.servos.iter().all(|x| x.acceleration == 254 && x.torque));
}

#[test]
fn a_servo_calibrated_otherwise_is_refused_naming_the_register_and_both_values() {
    // STS: Homing_Offset (negative: sign-magnitude bit 11) and the limits; SCS: the limits only,
    // as LeRobot's `is_calibrated` compares them.
    let mut shifted = calibrated(2, 2100);
    shifted.homing_offset = -1000;
    let (mut b, mut s) = calibrated_rig("feetech", vec![calibrated(1, 2000), shifted]);
    let e = try_enable(&mut b, &mut s).expect("refused");
    assert_eq!((e.kind, e.dof), (FaultKind::CalibrationMismatch, Some(1)));
    let m = Mismatch::of_code(e.code).unwrap();
    assert_eq!((m.register, m.read), (Register::HomingOffset, -1000));
    let text = describe_fault(&e, &joints(), b.status().as_deref());
    assert!(
        text.contains(
            "bus arm, servo 2 (b): its Homing_Offset reads -1000, the bus's LeRobot calibration \
             file says 1106"
        ),
        "{text}"
    );
    assert!(text.contains("lerobot-calibrate"), "{text}");
    // Nothing written: torque stays off.
    assert!(s.log.iter().all(|p| p.1 == inst::READ));
    assert!(s.servos.iter().all(|x| !x.torque));

    let narrowed = FeetechServo {
        limits: (100, 800),
        homing_offset: 5, // not compared on SCS
        ..FeetechServo::new(1, 500)
    };
    let other = FeetechServo {
        limits: (60, 960),
        ..FeetechServo::new(2, 510)
    };
    let (mut b, mut s) = calibrated_rig("feetech_scs", vec![narrowed, other]);
    let e = try_enable(&mut b, &mut s).expect("refused");
    let m = Mismatch::of_code(e.code).unwrap();
    assert_eq!(
        (m.register, m.read, e.dof),
        (Register::MaxPositionLimit, 800, Some(0))
    );
}

#[test]
fn the_budget_at_one_megabit_fits_the_so101_at_500_hz_not_1_khz() {
    let names = ["a", "b", "c", "d", "e", "f"];
    let yaml = "- {name: arm, transport: serial, device: /dev/null, baud: 1000000, protocol: feetech, joints: {a: {id: 1}, b: {id: 2}, c: {id: 3}, d: {id: 4}, e: {id: 5}, f: {id: 6}}}";
    let raw: Vec<RawBus> = serde_yaml::from_str(yaml).unwrap();
    assert!(validate(&raw, &names, 500.0).is_ok());
    let p = validate(&raw, &names, 1000.0).unwrap_err();
    assert!(
        p[0].message.contains("at 1000 Hz this bus fits"),
        "{}",
        p[0].message
    );
    // The advice is the family's: a DYNAMIXEL key means nothing here.
    assert!(
        p[0].message.ends_with(
            "(1 Mbit/s is the servos' fastest line rate: put the others on a bus of their own, \
             on a second adapter; give the servos Return_Delay_Time 0 as LeRobot does \
             (`servo: {return_delay_time: 0}`))"
        ),
        "{}",
        p[0].message
    );
    assert!(!p[0].message.contains("sync_read"));
}

/// How many servos one Feetech bus at 1 Mbit/s carries at 100, 250 and 500 Hz within the default
/// maximum load (70 %), as the budget counts them (Return_Delay_Time 0): the most `n` for which
/// `validate` accepts a bus of `n` servos. `-- --nocapture` prints them.
#[test]
fn servos_per_feetech_bus_at_100_250_and_500_hz() {
    let names: Vec<String> = (1..=80).map(|i| format!("j{i}")).collect();
    let fits = |protocol: &str, n: usize, rate: f64| {
        let joints: Vec<String> = (1..=n).map(|i| format!("j{i}: {{id: {i}}}")).collect();
        let yaml = format!(
            "- {{name: arm, transport: serial, device: /dev/null, baud: 1000000, protocol: \
             {protocol}, joints: {{{}}}}}",
            joints.join(", ")
        );
        let raw: Vec<RawBus> = serde_yaml::from_str(&yaml).unwrap();
        let names: Vec<&str> = names[..n].iter().map(String::as_str).collect();
        validate(&raw, &names, rate).is_ok()
    };
    for (protocol, expect) in [("feetech", [57, 22, 10]), ("feetech_scs", [36, 14, 6])] {
        let most: Vec<usize> = [100.0, 250.0, 500.0]
            .iter()
            .map(|&rate| {
                (1..=80)
                    .take_while(|&n| fits(protocol, n, rate))
                    .last()
                    .unwrap_or(0)
            })
            .collect();
        println!("{protocol}: servos per bus at 100/250/500 Hz: {most:?}");
        assert_eq!(most, expect, "{protocol}");
    }
}

/// `motiond check` runs the checks of the backend's open against the robot model without opening
/// a device: a velocity joint on a Feetech bus (position servos) is refused by `check` too.
#[test]
fn check_refuses_a_velocity_joint_on_a_feetech_bus() {
    let dir = tempfile::tempdir().unwrap();
    let skel =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance/robot.skel");
    let config = dir.path().join("motiond.yaml");
    std::fs::write(
        &config,
        format!(
            "robot:\n  skel: {}\n  joints: [a, b, v]\ncontrol:\n  rate_hz: 250\nbackend: buses\n\
             buses:\n  - name: arm\n    transport: serial\n    device: /dev/nonexistent\n    \
             baud: 1000000\n    protocol: feetech\n    joints:\n      a: {{id: 1}}\n      \
             b: {{id: 2}}\n      v: {{id: 3}}\n",
            skel.display()
        ),
    )
    .unwrap();
    let motion = dir.path().join("still.seq");
    std::fs::write(
        &motion,
        "type: CompositeSeq\ncontent: BodyMotion\nformatVersion: 2\nframeRate: 10\nnumFrames: 2\n\
         components:\n  - type: MultiValueSeq\n    content: JointDisplacement\n    numParts: 3\n    \
         frames:\n      - [0, 0, 0]\n      - [0, 0, 0]\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_motiond"))
        .args(["check", motion.to_str().unwrap(), "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "{}:16:7: buses[0].joints.v.protocol: `v` has actuator `velocity`, but feetech drives \
             here support servo and force (both by position) only",
            config.display()
        )),
        "{err}"
    );
}
