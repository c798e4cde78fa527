//! The real-time loop on the bus backend (stepped on a manual clock, no threads): a CiA 402 drive
//! faults, the loop goes to its safe state and names the fault; after `clear-fault` and `enable`
//! the drive comes up where it now is and the loop holds exactly that — never a jump.

mod bus_peer;

use bus_peer::Cia402Drive;
use motiond::backend::FaultKind;
use motiond::backend::bus::{BusBackend, can_bus};
use motiond::backend::frame::CanFrame;
use motiond::backend::transport::FrameIo;
use motiond::backend::transport::memory::memory_pair;
use motiond::config::bus::{RawBus, validate};
use motiond::robot::Actuator;
use motiond::rt::{Command, Loop, ManualClock, Settings, State, Status};

#[test]
fn drive_fault_holds_then_clear_fault_and_enable_come_up_at_the_measured_position() {
    let joints = bus_peer::joint_set(&[("base_yaw", Actuator::Servo)]);
    let raw: Vec<RawBus> = serde_yaml::from_str(
        "- {name: c, transport: can, interface: can0, joints: {base_yaw: {protocol: cia402, id: 5, counts_per_unit: 10000}}}",
    )
    .unwrap();
    let buses = validate(&raw, &["base_yaw"], 1000.0).unwrap();
    let (host, mut io) = memory_pair(64);
    let backend = BusBackend::new(vec![Box::new(can_bus(
        &buses[0],
        &joints,
        1000.0,
        Box::new(host),
    ))]);
    let (mut lp, handle) = Loop::new(
        &Settings::default(),
        Box::new(backend),
        None,
        &joints,
        ManualClock::new(0),
    )
    .unwrap();
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
