//! Damiao and Robstride motors through the `Backend` trait on an in-memory bus, against the
//! scripted motors of tests/bus_peer: each enable sequence (registers checked and written, faults
//! cleared, enabled at the measured position), the stream, every fault the motors report by
//! name, the drive-side watchdog set from `watchdog_ms`, teach-in, CAN-FD frames for Damiao
//! motors set to it, and the configuration refusing what cannot work.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

mod bus_peer;

use bus_peer::{DamiaoMotor, RobstrideMotor, joint_set, rig};
use motiond::backend::damiao::codec as dm;
use motiond::backend::family;
use motiond::backend::frame::CanFrame;
use motiond::backend::robstride::codec as rs;
use motiond::backend::transport::FrameIo;
use motiond::backend::transport::memory::MemoryIo;
use motiond::backend::{Backend, FaultKind, Feedback, Readiness};
use motiond::config::bus::{RawBus, validate};
use motiond::robot::Actuator;
use motiond::trajectory::Setpoint;

const RATE: f64 = 1000.0;

fn at(position: f64) -> Setpoint {
    Setpoint {
        position,
        ..Setpoint::default()
    }
}

const DAMIAO_YAML: &str = "
- name: arm
  transport: can
  interface: can0
  watchdog_ms: 15
  joints:
    j1: {protocol: damiao, id: 1, damiao: {kp: 30, kd: 1, master_id: 0x11, p_max: 12.5, v_max: 10, t_max: 28}}
    j2: {protocol: damiao, id: 2, damiao: {kp: 30, kd: 1, master_id: 0x12, p_max: 12.5, v_max: 10, t_max: 28}}
";

fn dm4340(id: u8, position: f32) -> DamiaoMotor {
    DamiaoMotor::new(id, 0x10 + u32::from(id), (12.5, 10.0, 28.0), position)
}

/// Both motors answer what is waiting on the bus.
fn answer_damiao(io: &mut MemoryIo, motors: &mut [DamiaoMotor]) {
    while let Some(f) = io.recv().unwrap() {
        for m in motors.iter_mut() {
            m.on_frame(&f, io);
        }
    }
}

#[test]
fn damiao_checks_the_scaling_writes_mit_mode_and_timeout_then_enables_at_the_measured_position() {
    let joints = joint_set(&[("j1", Actuator::Servo), ("j2", Actuator::Servo)]);
    let (mut b, mut io) = rig::can_backend(DAMIAO_YAML, &joints, RATE, 256);
    let mut motors = [dm4340(1, 0.3), dm4340(2, -0.2)];
    rig::enable(&mut b, || answer_damiao(&mut io.clone(), &mut motors), 50);
    for m in &motors {
        // Enabled without being disabled first (a motor still holding keeps its torque); never
        // cleared without an error, never zeroed.
        assert_eq!(m.specials, [0xFC], "motor {}", m.id);
        let rids: Vec<(u8, u8)> = m.register_requests.iter().map(|r| (r.0, r.1)).collect();
        assert_eq!(
            rids,
            [
                (dm::READ, dm::RID_PMAX),
                (dm::READ, dm::RID_VMAX),
                (dm::READ, dm::RID_TMAX),
                (dm::READ, dm::RID_CTRL_MODE),
                (dm::WRITE, dm::RID_TIMEOUT),
            ]
        );
        // 15 ms in 50 µs units.
        assert_eq!(m.registers[&dm::RID_TIMEOUT], 300u32.to_le_bytes());
        assert_eq!(m.state, dm::STATE_ENABLED);
    }
    answer_damiao(&mut io, &mut motors);
    let mut fb = [Feedback::default(); 2];
    b.read(&mut fb).unwrap();
    assert!((fb[0].position - 0.3).abs() < 1e-3 && (fb[1].position + 0.2).abs() < 1e-3);
    // The first command holds where each motor was measured, with the configured gains.
    let first = motors[0].commands[0];
    assert!(
        (first.p - 0.3).abs() < 1e-3 && (first.kp - 30.0).abs() < 0.13,
        "{first:?}"
    );
    for tick in 0..5u64 {
        let p = 0.3 + 0.01 * tick as f64;
        b.write(tick, &[at(p), at(-0.2)]).unwrap();
        answer_damiao(&mut io, &mut motors);
        b.read(&mut fb).unwrap();
        assert!((fb[0].position - p).abs() < 1e-3, "tick {tick}");
    }
    b.disable().unwrap();
    answer_damiao(&mut io, &mut motors);
    assert_eq!(motors[0].specials.last(), Some(&0xFD));
}

#[test]
fn damiao_refuses_a_motor_whose_scaling_registers_disagree_with_the_configuration() {
    let joints = joint_set(&[("j1", Actuator::Servo), ("j2", Actuator::Servo)]);
    let (mut b, mut io) = rig::can_backend(DAMIAO_YAML, &joints, RATE, 256);
    // LeRobot's table says VMAX 8 for a DM4340, OpenArm's 10: this motor holds 8.
    let mut motors = [
        dm4340(1, 0.0),
        DamiaoMotor::new(2, 0x12, (12.5, 8.0, 28.0), 0.0),
    ];
    let err = (0..20)
        .find_map(|_| {
            let r = b.enable();
            answer_damiao(&mut io, &mut motors);
            r.err()
        })
        .expect("the mismatch is refused");
    assert_eq!((err.kind, err.dof), (FaultKind::DriveFault, Some(1)));
    let words = family::fault_words("damiao", err.kind, err.code).unwrap();
    assert!(
        words.contains("VMAX register (RID 22) holds 8.00000"),
        "{words}"
    );
    assert!(words.contains("`damiao.v_max`"), "{words}");
    assert!(motors[1].specials.is_empty(), "never enabled");
}

#[test]
fn damiao_takes_over_an_enabled_motor_without_disabling_it_and_refuses_another_mode() {
    let joints = joint_set(&[("j1", Actuator::Servo), ("j2", Actuator::Servo)]);
    let (mut b, io) = rig::can_backend(DAMIAO_YAML, &joints, RATE, 256);
    let mut motors = [dm4340(1, 0.4), dm4340(2, 0.0)];
    // Still enabled and holding (the loop faulted and held it, or another run left it so).
    motors[0].state = dm::STATE_ENABLED;
    rig::enable(&mut b, || answer_damiao(&mut io.clone(), &mut motors), 50);
    assert!(!motors[0].specials.contains(&0xFD) && !motors[0].specials.contains(&0xFB));
    // Every command it got targets where it was: it never lost its torque nor moved.
    assert!(
        motors[0]
            .commands
            .iter()
            .all(|c| (c.p - 0.4).abs() < 1e-3 && c.kp > 29.0)
    );

    let (mut b, mut io) = rig::can_backend(DAMIAO_YAML, &joints, RATE, 256);
    let mut motors = [dm4340(1, 0.0), dm4340(2, 0.0)];
    motors[1]
        .registers
        .insert(dm::RID_CTRL_MODE, 2u32.to_le_bytes());
    let err = (0..20)
        .find_map(|_| {
            let r = b.enable();
            answer_damiao(&mut io, &mut motors);
            r.err()
        })
        .expect("a motor in POS_VEL mode is refused");
    let words = family::fault_words("damiao", err.kind, err.code).unwrap();
    assert!(
        words.contains("control mode 2 (CTRL_MODE, RID 10), not MIT"),
        "{words}"
    );
}

#[test]
fn damiao_clears_a_latched_error_and_names_each_state_nibble_while_following() {
    let joints = joint_set(&[("j1", Actuator::Servo), ("j2", Actuator::Servo)]);
    let (mut b, mut io) = rig::can_backend(DAMIAO_YAML, &joints, RATE, 256);
    let mut motors = [dm4340(1, 0.0), dm4340(2, 0.0)];
    // Communication lost latched from an earlier run: the enable's answer shows it, FB clears it.
    motors[0].state = 0xD;
    rig::enable(&mut b, || answer_damiao(&mut io.clone(), &mut motors), 50);
    assert_eq!(motors[0].state, dm::STATE_ENABLED);
    assert_eq!(motors[0].specials, [0xFC, 0xFB, 0xFC]);
    assert_eq!(motors[1].specials, [0xFC]);
    let mut fb = [Feedback::default(); 2];
    for (state, name) in [(0xB, "MOS over-temperature"), (0x8, "over-voltage")] {
        motors[1].state = state;
        b.write(0, &[at(0.0), at(0.0)]).unwrap();
        answer_damiao(&mut io, &mut motors);
        let err = b.read(&mut fb).unwrap_err();
        assert_eq!(
            (err.kind, err.dof, err.code),
            (FaultKind::DriveFault, Some(1), u32::from(state))
        );
        let words = family::fault_words("damiao", err.kind, err.code).unwrap();
        assert!(words.contains(name), "{words}");
        // Held while faulted; clear-fault + enable clears the motor and enables it again.
        b.hold(1, &[at(0.0), at(0.0)]).unwrap();
        motors[1].state = dm::STATE_DISABLED;
        rig::enable(&mut b, || answer_damiao(&mut io.clone(), &mut motors), 50);
    }
    // A motor that disabled itself (another host's FD) is a fault too.
    motors[0].state = dm::STATE_DISABLED;
    b.write(2, &[at(0.0), at(0.0)]).unwrap();
    answer_damiao(&mut io, &mut motors);
    let err = b.read(&mut fb).unwrap_err();
    let words = family::fault_words("damiao", err.kind, err.code).unwrap();
    assert!(words.contains("disabled"), "{words}");
}

#[test]
fn damiao_teach_in_sends_zero_gains_at_the_measured_position_and_stiffens_there() {
    let joints = joint_set(&[("j1", Actuator::Servo), ("j2", Actuator::Servo)]);
    let (mut b, mut io) = rig::can_backend(DAMIAO_YAML, &joints, RATE, 256);
    let mut motors = [dm4340(1, 0.1), dm4340(2, 0.1)];
    rig::enable(&mut b, || answer_damiao(&mut io.clone(), &mut motors), 50);
    answer_damiao(&mut io, &mut motors);
    let mut dofs = [false; 2];
    assert_eq!(b.compliant(true, &mut dofs).unwrap(), Readiness::Ready);
    assert_eq!(dofs, [true, true]);
    let mut fb = [Feedback::default(); 2];
    for tick in 0..10u64 {
        // A hand moves joint 1.
        motors[0].position = 0.1 + 0.05 * tick as f32;
        b.write(tick, &[at(0.1), at(0.1)]).unwrap();
        answer_damiao(&mut io, &mut motors);
        b.read(&mut fb).unwrap();
        let c = motors[0].commands.last().unwrap();
        assert_eq!((c.kp, c.kd, c.t.abs() < 0.01), (0.0, 0.0, true), "{c:?}");
    }
    assert!((fb[0].position - 0.55).abs() < 1e-3);
    assert_eq!(b.compliant(false, &mut dofs).unwrap(), Readiness::Pending);
    assert_eq!(b.enable().unwrap(), Readiness::Ready);
    answer_damiao(&mut io, &mut motors);
    let c = motors[0].commands.last().unwrap();
    assert!(
        (c.p - 0.55).abs() < 1e-3 && c.kp > 29.0,
        "stiff at the measured position: {c:?}"
    );
    assert_eq!(motors[0].specials, [0xFC], "no state change for teach-in");
}

#[test]
fn damiao_fd_motors_get_can_fd_frames_with_the_bit_rate_switch() {
    let joints = joint_set(&[("j1", Actuator::Servo)]);
    let yaml = "
- name: arm
  transport: can
  interface: can0
  joints:
    j1: {protocol: damiao_fd, id: 1, damiao: {kp: 30, kd: 1, master_id: 0x11, p_max: 12.5, v_max: 10, t_max: 28}}
";
    let (mut b, io) = rig::can_backend(yaml, &joints, RATE, 256);
    let mut motors = [dm4340(1, 0.0)];
    motors[0].fd = true;
    let mut sent = Vec::new();
    rig::enable(
        &mut b,
        || {
            let mut tap = io.clone();
            while let Some(f) = tap.recv().unwrap() {
                sent.push(f);
                motors[0].on_frame(&f, &mut tap);
            }
        },
        50,
    );
    assert!(!sent.is_empty() && sent.iter().all(|f| f.fd && f.brs && f.len() == 8));
}

const ROBSTRIDE_YAML: &str = "
- name: legs
  transport: can
  interface: can0
  watchdog_ms: 300
  joints:
    hip: {protocol: robstride, id: 1, robstride: {model: rs-03, kp: 60, kd: 2}}
    knee: {protocol: robstride, id: 2, robstride: {model: cybergear, kp: 30, kd: 1}}
";

fn answer_robstride(io: &mut MemoryIo, motors: &mut [RobstrideMotor]) {
    while let Some(f) = io.recv().unwrap() {
        for m in motors.iter_mut() {
            m.on_frame(&f, io);
        }
    }
}

fn robstride_motors() -> [RobstrideMotor; 2] {
    [
        RobstrideMotor::new(1, rs::model("rs-03").unwrap(), 0.5),
        RobstrideMotor::new(2, rs::model("cybergear").unwrap(), -0.4),
    ]
}

#[test]
fn robstride_clears_sets_motion_mode_and_can_timeout_then_enables_at_the_measured_position() {
    let joints = joint_set(&[("hip", Actuator::Servo), ("knee", Actuator::Force)]);
    let (mut b, mut io) = rig::can_backend(ROBSTRIDE_YAML, &joints, RATE, 256);
    let mut motors = robstride_motors();
    rig::enable(
        &mut b,
        || answer_robstride(&mut io.clone(), &mut motors),
        50,
    );
    for m in &motors {
        let setup: Vec<u8> = m
            .kinds
            .iter()
            .copied()
            .filter(|&k| k != rs::MOTION)
            .collect();
        assert_eq!(
            setup,
            [rs::READ_PARAM, rs::WRITE_PARAM, rs::ENABLE],
            "motor {}",
            m.id
        );
        assert_eq!(m.host, 0xFD);
        // 300 ms in 50 µs units.
        assert_eq!(m.params[&rs::PARAM_CAN_TIMEOUT], 6000u32.to_le_bytes());
        assert_eq!(m.mode, rs::MODE_RUN);
    }
    answer_robstride(&mut io, &mut motors);
    let first = motors[0].commands[0];
    assert!(
        (first.p - 0.5).abs() < 1e-3 && (first.kp - 60.0).abs() < 0.1,
        "{first:?}"
    );
    let mut fb = [Feedback::default(); 2];
    for tick in 0..5u64 {
        let (p, q) = (0.5 - 0.01 * tick as f64, -0.4 + 0.02 * tick as f64);
        let sps = [
            at(p),
            Setpoint {
                position: q,
                velocity: 0.5,
                acceleration: 0.0,
            },
        ];
        b.write(tick, &sps).unwrap();
        answer_robstride(&mut io, &mut motors);
        b.read(&mut fb).unwrap();
        assert!((fb[0].position - p).abs() < 1e-3 && (fb[1].position - q).abs() < 1e-3);
        let c = motors[1].commands.last().unwrap();
        assert!(
            (c.v - 0.5).abs() < 1e-3 && (c.kd - 1.0).abs() < 1e-3,
            "{c:?}"
        );
    }
    b.disable().unwrap();
    answer_robstride(&mut io, &mut motors);
    assert_eq!(motors[0].kinds.last(), Some(&rs::STOP));
    assert_eq!(motors[0].mode, rs::MODE_RESET);
}

#[test]
fn robstride_takes_over_a_motor_in_run_mode_and_refuses_another_run_mode() {
    let joints = joint_set(&[("hip", Actuator::Servo), ("knee", Actuator::Servo)]);
    let (mut b, io) = rig::can_backend(ROBSTRIDE_YAML, &joints, RATE, 256);
    let mut motors = robstride_motors();
    // Still in run mode, holding (the loop faulted and held it, or another run left it so).
    motors[0].mode = rs::MODE_RUN;
    rig::enable(
        &mut b,
        || answer_robstride(&mut io.clone(), &mut motors),
        50,
    );
    assert!(!motors[0].kinds.contains(&rs::STOP), "never stopped");
    assert!(
        motors[0]
            .commands
            .iter()
            .all(|c| (c.p - 0.5).abs() < 1e-3 && c.kp > 59.0)
    );

    let (mut b, mut io) = rig::can_backend(ROBSTRIDE_YAML, &joints, RATE, 256);
    let mut motors = robstride_motors();
    motors[1].params.insert(rs::PARAM_RUN_MODE, [1, 0, 0, 0]);
    let err = (0..20)
        .find_map(|_| {
            let r = b.enable();
            answer_robstride(&mut io, &mut motors);
            r.err()
        })
        .expect("a motor in position mode is refused");
    let words = family::fault_words("robstride", err.kind, err.code).unwrap();
    assert!(
        words.contains("run_mode is 1, not motion control"),
        "{words}"
    );
    assert!(!motors[1].kinds.contains(&rs::ENABLE), "never enabled");
}

#[test]
fn robstride_every_frame_has_a_29_bit_id_and_the_motion_frame_carries_the_torque() {
    let joints = joint_set(&[("hip", Actuator::Force), ("knee", Actuator::Servo)]);
    let (mut b, mut io) = rig::can_backend(ROBSTRIDE_YAML, &joints, RATE, 256);
    let mut motors = robstride_motors();
    let mut sent: Vec<CanFrame> = Vec::new();
    let step = |io: &mut MemoryIo, motors: &mut [RobstrideMotor], sent: &mut Vec<CanFrame>| {
        while let Some(f) = io.recv().unwrap() {
            sent.push(f);
            for m in motors.iter_mut() {
                m.on_frame(&f, io);
            }
        }
    };
    rig::enable(&mut b, || step(&mut io.clone(), &mut motors, &mut sent), 50);
    // A force joint: torque feed-forward = inertia · acceleration (inertia 0 here: torque 0).
    b.write(0, &[at(0.5), at(-0.4)]).unwrap();
    step(&mut io, &mut motors, &mut sent);
    assert!(
        sent.iter()
            .all(|f| f.extended && !f.fd && f.id <= 0x1FFF_FFFF)
    );
    let motion: Vec<&CanFrame> = sent
        .iter()
        .filter(|f| rs::split_id(f.id).0 == rs::MOTION)
        .collect();
    assert!(!motion.is_empty());
    let zero_torque = mit_code(0.0, 60.0);
    assert!(
        motion
            .iter()
            .filter(|f| f.id & 0xFF == 1)
            .all(|f| rs::split_id(f.id).1 == zero_torque)
    );
}

fn mit_code(x: f32, max: f32) -> u16 {
    motiond::backend::mit::float_to_uint(x, -max, max, 16)
}

#[test]
fn robstride_faults_by_feedback_bits_fault_frame_and_leaving_run_mode_each_named() {
    let joints = joint_set(&[("hip", Actuator::Servo), ("knee", Actuator::Servo)]);
    let (mut b, mut io) = rig::can_backend(ROBSTRIDE_YAML, &joints, RATE, 256);
    let mut motors = robstride_motors();
    // A fault latched before: the canTimeout write's answer shows it, so the enable comes after a
    // stop with data[0] = 1 that clears it.
    motors[1].faults = 0x04;
    rig::enable(
        &mut b,
        || answer_robstride(&mut io.clone(), &mut motors),
        50,
    );
    let setup: Vec<u8> = motors[1]
        .kinds
        .iter()
        .copied()
        .filter(|&k| k != rs::MOTION)
        .collect();
    assert_eq!(
        setup,
        [rs::READ_PARAM, rs::WRITE_PARAM, rs::STOP, rs::ENABLE]
    );
    let mut fb = [Feedback::default(); 2];
    let sps = [at(0.5), at(-0.4)];

    motors[1].faults = 0x04;
    b.write(0, &sps).unwrap();
    answer_robstride(&mut io, &mut motors);
    let err = b.read(&mut fb).unwrap_err();
    assert_eq!((err.kind, err.dof), (FaultKind::DriveFault, Some(1)));
    let words = family::fault_words("robstride", err.kind, err.code).unwrap();
    assert_eq!(words, "the motor's feedback reports over-temperature");
    b.hold(1, &sps).unwrap();
    rig::enable(
        &mut b,
        || answer_robstride(&mut io.clone(), &mut motors),
        50,
    );

    // A fault frame (type 21): over-voltage; its warning word counts as a warning.
    let frame = CanFrame::new_extended(
        rs::ext_id(rs::FAULT, 1, 0xFD),
        &[0x08, 0, 0, 0, 0x01, 0, 0, 0],
    );
    io.send(&frame).unwrap();
    let err = b.read(&mut fb).unwrap_err();
    assert_eq!((err.dof, err.code), (Some(0), 0x08));
    let words = family::fault_words("robstride", err.kind, err.code).unwrap();
    assert!(words.contains("over-voltage"), "{words}");
    let status = b.status().unwrap().snapshot();
    let hip = &status[0].drives[0].link;
    assert_eq!((hip.warnings, hip.last_warning), (1, 1), "{hip:?}");
    rig::enable(
        &mut b,
        || answer_robstride(&mut io.clone(), &mut motors),
        50,
    );

    // Its CAN timeout tripped (or another host stopped it): back in reset mode.
    motors[0].mode = rs::MODE_RESET;
    b.write(2, &sps).unwrap();
    answer_robstride(&mut io, &mut motors);
    let err = b.read(&mut fb).unwrap_err();
    let words = family::fault_words("robstride", err.kind, err.code).unwrap();
    assert!(words.contains("left run mode for reset"), "{words}");
}

#[test]
fn robstride_teach_in_sends_zero_gains_and_stiffens_at_the_measured_position() {
    let joints = joint_set(&[("hip", Actuator::Servo), ("knee", Actuator::Servo)]);
    let (mut b, mut io) = rig::can_backend(ROBSTRIDE_YAML, &joints, RATE, 256);
    let mut motors = robstride_motors();
    rig::enable(
        &mut b,
        || answer_robstride(&mut io.clone(), &mut motors),
        50,
    );
    answer_robstride(&mut io, &mut motors);
    let mut dofs = [false; 2];
    assert_eq!(b.compliant(true, &mut dofs).unwrap(), Readiness::Ready);
    assert_eq!(dofs, [true, true]);
    let mut fb = [Feedback::default(); 2];
    for tick in 0..10u64 {
        motors[0].position = 0.5 - 0.03 * tick as f32;
        b.write(tick, &[at(0.5), at(-0.4)]).unwrap();
        answer_robstride(&mut io, &mut motors);
        b.read(&mut fb).unwrap();
        let c = motors[0].commands.last().unwrap();
        assert_eq!((c.kp, c.kd), (0.0, 0.0), "{c:?}");
    }
    assert!((fb[0].position - 0.23).abs() < 1e-3);
    assert_eq!(b.compliant(false, &mut dofs).unwrap(), Readiness::Pending);
    assert_eq!(b.enable().unwrap(), Readiness::Ready);
    answer_robstride(&mut io, &mut motors);
    let c = motors[0].commands.last().unwrap();
    assert!((c.p - 0.23).abs() < 1e-3 && c.kp > 59.0, "{c:?}");
}

#[test]
fn the_configuration_refuses_what_these_motors_cannot_do() {
    let joints = joint_set(&[("a", Actuator::Servo), ("b", Actuator::Servo)]);
    let case = |joints_yaml: &str| {
        rig::problems(
            &format!("- name: c\n  transport: can\n  interface: can0\n  joints:\n{joints_yaml}"),
            &joints,
            RATE,
        )
    };
    let p = case(
        "    a: {protocol: damiao, id: 1, damiao: {kp: 30, kd: 1, master_id: 0x11}}\n    b: {protocol: damiao, id: 2, damiao: {kp: 30, kd: 1, master_id: 0x11, p_max: 12.5, v_max: 10, t_max: 28}}\n",
    );
    assert!(
        p.contains("buses[0].joints.a.damiao: a Damiao motor needs"),
        "{p}"
    );
    let p = case(
        "    a: {protocol: damiao, id: 1, damiao: {kp: 30, kd: 1, master_id: 0x11, p_max: 12.5, v_max: 10, t_max: 28}}\n    b: {protocol: damiao, id: 2, damiao: {kp: 30, kd: 1, master_id: 0x11, p_max: 12.5, v_max: 10, t_max: 28}}\n",
    );
    assert!(
        p.contains("CAN id 0x011, which `a` on this bus also uses"),
        "{p}"
    );
    // ±2 rad/s limits against VMAX 1.
    let p = case(
        "    a: {protocol: damiao, id: 1, damiao: {kp: 30, kd: 1, master_id: 0x11, p_max: 12.5, v_max: 1, t_max: 28}}\n    b: {protocol: robstride, id: 2, robstride: {model: rs-04, kp: 30, kd: 1, v_max: 1}}\n",
    );
    assert!(
        p.contains("a.damiao.v_max") && p.contains("b.robstride.v_max"),
        "{p}"
    );
    let p = case(
        "    a: {protocol: robstride, id: 1, robstride: {model: rs-99, kp: 30, kd: 1}}\n    b: {protocol: robstride, id: 2, robstride: {model: rs-01, kp: 30, kd: 1, host_id: 1}}\n",
    );
    assert!(
        p.contains("a.robstride.model: `rs-99` is not a model"),
        "{p}"
    );
    assert!(
        p.contains("b.robstride.host_id: host id 1 is the id of `a`"),
        "{p}"
    );
    let p = case(
        "    a: {protocol: robstride, id: 1, robstride: {model: rs-01, kp: 30, kd: 1}}\n    b: {protocol: robstride, id: 1, robstride: {model: rs-01, kp: 30, kd: 1}}\n",
    );
    assert!(p.contains("which `a` on this bus also uses"), "{p}");
}

/// Joints per 1 Mbit/s bus at 1 kHz, by the bus budget at its default maximum load (70%):
/// a command and its reply per joint and tick, worst-case stuffing.
#[test]
fn joints_per_bus_at_1_khz() {
    let names = ["j1", "j2", "j3", "j4", "j5", "j6", "j7"];
    let fits = |protocol: &str, n: usize| {
        let rows: String = names[..n]
            .iter()
            .enumerate()
            .map(|(i, j)| {
                let id = i + 1;
                let own = if protocol == "robstride" {
                    "robstride: {model: rs-03, kp: 60, kd: 2}".to_string()
                } else {
                    format!(
                        "damiao: {{kp: 30, kd: 1, master_id: {}, p_max: 12.5, v_max: 10, t_max: 28}}",
                        0x10 + id
                    )
                };
                format!("    {j}: {{protocol: {protocol}, id: {id}, {own}}}\n")
            })
            .collect();
        let yaml = format!("- name: c\n  transport: can\n  interface: can0\n  joints:\n{rows}");
        let raw: Vec<RawBus> = serde_yaml::from_str(&yaml).unwrap();
        validate(&raw, &names[..n], RATE)
            .map(|_| n.to_string())
            .unwrap_or_else(|p| p[0].message.clone())
    };
    // Classic 8-byte frames, 135 bits each: 270 µs a joint and tick.
    assert_eq!(fits("damiao", 2), "2");
    assert!(
        fits("damiao", 3).contains("fits 2 of these drives"),
        "{}",
        fits("damiao", 3)
    );
    // CAN-FD at 5 Mbit/s data phase: 56.6 µs a frame, 113.2 µs a joint.
    assert_eq!(fits("damiao_fd", 6), "6");
    let seven = fits("damiao_fd", 7);
    assert!(seven.contains("fits 6 of these drives"), "{seven}");
    // 29-bit ids: 160 bits a frame, 320 µs a joint.
    assert_eq!(fits("robstride", 2), "2");
    let three = fits("robstride", 3);
    assert!(three.contains("fits 2 of these drives"), "{three}");
}
