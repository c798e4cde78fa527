//! The real-time loop on the bus backend (stepped on a manual clock, no threads): a CiA 402 drive
//! faults, the loop goes to its safe state and names the fault; after `clear-fault` and `enable`
//! the drive comes up where it now is and the loop holds exactly that — never a jump. A transmit
//! queue that fills mid-motion, then drains: the drive's stop goes on from what it applied.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

mod bus_peer;

use bus_peer::{Cia402Drive, rig};
use motiond::backend::FaultKind;
use motiond::backend::frame::CanFrame;
use motiond::backend::transport::FrameIo;
use motiond::motion::seq::{MultiValueSeq, Timing};
use motiond::robot::Actuator;
use motiond::rt::{Command, Playback, State, Status};
use motiond::trajectory::{ColumnMap, Interpolation, Options, Trajectory, build_values};

#[test]
fn drive_fault_holds_then_clear_fault_and_enable_come_up_at_the_measured_position() {
    let joints = bus_peer::joint_set(&[("base_yaw", Actuator::Servo)]);
    let (backend, mut io) = rig::can_backend(
        "- {name: c, transport: can, interface: can0, joints: {base_yaw: {protocol: cia402, id: 5, counts_per_unit: 10000}}}",
        &joints,
        1000.0,
        64,
    );
    let (mut lp, handle) = rig::stepped_loop(backend, &joints);
    let mut drive = Cia402Drive::new(5, 12_345);
    let mut drive_io = io.clone();
    let mut until = |drive: &mut Cia402Drive, what: &str, done: &dyn Fn(&Status) -> bool| {
        for _ in 0..3000 {
            lp.step();
            drive.step(&mut drive_io);
            let s = handle.status();
            if done(&s) {
                return s;
            }
        }
        panic!("{what} not reached: {:?}", handle.status());
    };

    handle.send(Command::Enable).unwrap();
    // Idle, and the first hold command written (commanded is published once written).
    let s = until(&mut drive, "idle", &|s| {
        s.state == State::Idle && s.commanded[0] != 0.0
    });
    assert!((s.positions[0] - 1.2345).abs() < 1e-12);
    assert!((s.commanded[0] - 1.2345).abs() < 1e-12, "{s:?}");

    // The drive faults with an EMCY (following error) and its statusword.
    drive.statusword = 0x0218;
    io.send(&CanFrame::new(0x085, &[0x11, 0x86, 0x81, 0, 0, 0, 0, 0]))
        .unwrap();
    let s = until(&mut drive, "fault", &|s| s.state == State::Fault);
    let f = s.fault.unwrap();
    assert_eq!(
        (f.kind, f.dof, f.code),
        (FaultKind::DriveFault, Some(0), 0x0081_8611)
    );

    // While it is faulted the axis is moved by hand; clear-fault leaves it disabled, and enable
    // brings it up targeting where it is now.
    drive.position = 4321;
    handle.send(Command::ClearFault).unwrap();
    until(&mut drive, "disabled", &|s| s.state == State::Disabled);
    drive.rpdos.clear();
    handle.send(Command::Enable).unwrap();
    let s = until(&mut drive, "idle again", &|s| {
        s.state == State::Idle && s.commanded[0] != 1.2345
    });
    assert!((s.positions[0] - 0.4321).abs() < 1e-12, "{s:?}");
    assert!((s.commanded[0] - 0.4321).abs() < 1e-12, "{s:?}");
    assert!(
        drive.rpdos.iter().all(|&(_, t)| t == 4321),
        "every target since enable is the measured position: {:?}",
        drive.rpdos
    );
    let later = s.tick + 20;
    let s = until(&mut drive, "20 more ticks", &|s| s.tick >= later);
    assert!(drive.rpdos.iter().all(|&(_, t)| t == 4321));
    assert_eq!(s.state, State::Idle);
}

/// Issue 28: mid-motion the drive side stops taking frames, so the transmit queue fills (the
/// loop faults `queue_full` and quick-stops, its holds refused too); then it drains. Every
/// target the drive applied at a SYNC, before, during and after, is inside the limits by finite
/// differences: the stop goes on from what the drive applied, never jumping to where the stop
/// would have been by then (it jumped 0.198 rad in one SYNC).
#[test]
fn a_queue_full_mid_motion_then_drained_the_drive_applies_one_continuous_stop() {
    const COUNTS: f64 = 1e6;
    let joints = bus_peer::joint_set(&[("base_yaw", Actuator::Servo)]);
    // Room for two ticks of RPDO + SYNC.
    let (backend, io) = rig::can_backend(
        "- {name: c, transport: can, interface: can0, joints: {base_yaw: {protocol: cia402, id: 5, counts_per_unit: 1000000}}}",
        &joints,
        1000.0,
        4,
    );
    let (mut lp, handle) = rig::stepped_loop(backend, &joints);
    let mut drive = Cia402Drive::new(5, 0);
    let mut drive_io = io.clone();
    let mut steps = |drive: &mut Cia402Drive, n: usize, taking: bool| {
        for _ in 0..n {
            lp.step();
            if taking {
                drive.step(&mut drive_io);
            }
        }
        handle.status()
    };
    handle.send(Command::Enable).unwrap();
    steps(&mut drive, 200, true);
    // 0 → 1 rad and back over 2 s (about 1.6 rad/s half-way out), at rest 0.2 s either side.
    let values = (-10..=110)
        .map(|i: i32| {
            let t = f64::from(i.clamp(0, 100)) / 100.0;
            0.5 * (1.0 - (std::f64::consts::TAU * t).cos())
        })
        .collect();
    let seq = MultiValueSeq {
        num_parts: 1,
        timing: Timing::Fixed { frame_rate: 50.0 },
        values,
    };
    let options = Options {
        rate_hz: 1000.0,
        interpolation: Interpolation::Cubic,
        ..Options::default()
    };
    let map = ColumnMap::in_dof_order(&joints, 1).unwrap();
    let motion = build_values(&joints, &seq, &map, &options)
        .unwrap()
        .trajectory;
    let hold = Trajectory::hold(&[0.0], 1000.0);
    handle
        .send(Command::Play(Box::new(Playback::new(1, hold, motion))))
        .unwrap();
    let s = steps(&mut drive, 500, true);
    assert_eq!(s.state, State::Playing, "{s:?}");
    // The drive side takes nothing for 50 ticks: the queue fills; the loop faults.
    let s = steps(&mut drive, 50, false);
    assert_eq!(s.state, State::Fault, "{s:?}");
    assert_eq!(s.fault.unwrap().kind, FaultKind::QueueFull, "{s:?}");
    // Drained: the quick stop reaches the drive, to rest.
    steps(&mut drive, 1000, true);
    let applied: Vec<f64> = drive
        .applied
        .iter()
        .map(|&t| f64::from(t) / COUNTS)
        .collect();
    let dt = 1e-3;
    // Within one count of what was meant: slack of 1 count per difference order.
    let q = 1.0 / COUNTS;
    let (mut fastest, mut hardest) = (0.0f64, 0.0f64);
    for (k, w) in applied.windows(3).enumerate() {
        let v = (w[2] - w[1]) / dt;
        let a = (w[2] - 2.0 * w[1] + w[0]) / (dt * dt);
        assert!(v.abs() <= 2.0 + q / dt, "SYNC {}: {v} rad/s", k + 2);
        assert!(
            a.abs() <= 8.0 + 2.0 * q / (dt * dt),
            "SYNC {}: {a} rad/s²",
            k + 2
        );
        fastest = fastest.max(v.abs());
        hardest = hardest.max(a.abs());
    }
    assert!(fastest > 1.0, "the drive moved at speed: {fastest}");
    // At rest at the end, short of where the motion was going.
    let [.., b, c] = applied[..] else { panic!() };
    assert_eq!(b, c);
    assert!(c > 0.3 && c < 1.0, "{c}");
    println!(
        "worst share (less one count of rounding): velocity {:.4}, acceleration {:.4}",
        (fastest - q / dt) / 2.0,
        (hardest - 2.0 * q / (dt * dt)) / 8.0
    );
}
