//! The bus backends' real-time calls (write, read, hold) allocate nothing: a counting allocator
//! watches the calling thread while drives stream over an in-memory CAN bus and a Dynamixel chain
//! on a pseudo-terminal.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

mod bus_peer;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::BTreeMap;

use bus_peer::rig;
use motiond::backend::bus::{BusBackend, open};
use motiond::backend::frame::CanFrame;
use motiond::backend::mit;
use motiond::backend::transport::FrameIo;
use motiond::backend::{Backend, FaultKind, Feedback, Readiness};
use motiond::trajectory::Setpoint;

struct Counting;

thread_local! {
    static WATCHING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; only counts on the side.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if WATCHING.with(Cell::get) {
            ALLOCATIONS.with(|a| a.set(a.get() + 1));
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if WATCHING.with(Cell::get) {
            ALLOCATIONS.with(|a| a.set(a.get() + 1));
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn watched<T>(f: impl FnOnce() -> T) -> (T, usize) {
    ALLOCATIONS.with(|a| a.set(0));
    WATCHING.with(|w| w.set(true));
    let r = f();
    WATCHING.with(|w| w.set(false));
    (r, ALLOCATIONS.with(Cell::get))
}

const RATE: f64 = 1000.0;

#[test]
fn can_write_read_hold_allocate_nothing() {
    let joints = bus_peer::servos(&["a", "b"]);
    let (mut backend, mut motors) = rig::can_backend(
        "- {name: c, transport: can, interface: can0, joints: {a: {protocol: mit, id: 1, mit: {kp: 5, kd: 1}}, b: {protocol: mit, id: 2, mit: {kp: 5, kd: 1}}}}",
        &joints,
        RATE,
        64,
    );
    let r = mit::Ranges::MINI_CHEETAH;
    let answer = |io: &mut dyn FrameIo| {
        while let Some(f) = io.recv().unwrap() {
            let d = mit::pack(&mit::Command::default(), &r);
            io.send(&CanFrame::new(
                0,
                &[f.id as u8, d[0], d[1], d[2], d[3] & 0xF0, 0],
            ))
            .unwrap();
        }
    };
    while backend.enable().unwrap() != Readiness::Ready {
        answer(&mut motors);
    }
    let mut fb = [Feedback::default(); 2];
    let mut total = 0;
    for tick in 0..200u64 {
        let sps = [Setpoint {
            position: 0.001 * tick as f64,
            ..Setpoint::default()
        }; 2];
        let (r, n) = watched(|| backend.write(tick, &sps).and(backend.read(&mut fb)));
        r.unwrap();
        total += n;
        answer(&mut motors);
    }
    let held = [Setpoint::default(); 3];
    let (r, n) = watched(|| backend.hold(200, &held));
    r.unwrap();
    assert_eq!(total + n, 0, "allocations on the real-time path");
}

#[test]
fn cia402_teach_in_allocates_nothing() {
    let joints = bus_peer::servos(&["a"]);
    let (mut backend, mut io) = rig::can_backend(
        "- {name: c, transport: can, interface: can0, joints: {a: {protocol: cia402, id: 5, counts_per_unit: 10000}}}",
        &joints,
        RATE,
        64,
    );
    let mut drive = bus_peer::Cia402Drive::new(5, 0);
    while backend.enable().unwrap() != Readiness::Ready {
        drive.step(&mut io);
    }
    let mut fb = [Feedback::default()];
    let sps = [Setpoint::default()];
    let mut dofs = [false];
    let (r, mut total) = watched(|| backend.compliant(true, &mut dofs));
    assert_eq!(r.unwrap(), Readiness::Ready);
    assert_eq!(dofs, [true]);
    for tick in 0..50u64 {
        let (r, n) = watched(|| backend.write(tick, &sps).and(backend.read(&mut fb)));
        r.unwrap();
        total += n;
        drive.step(&mut io);
    }
    let (r, n) = watched(|| backend.compliant(false, &mut dofs));
    assert_eq!(r.unwrap(), Readiness::Pending);
    total += n;
    let mut ready = false;
    for _ in 0..50 {
        let (r, n) = watched(|| backend.enable());
        total += n;
        if r.unwrap() == Readiness::Ready {
            ready = true;
            break;
        }
        drive.step(&mut io);
    }
    assert!(ready, "the drive never followed again");
    let (r, n) = watched(|| backend.write(50, &sps).and(backend.hold(51, &sps)));
    r.unwrap();
    assert_eq!(total + n, 0, "allocations on the real-time path");
}

#[test]
fn dynamixel_write_read_hold_allocate_nothing() {
    let pty = bus_peer::openpty();
    let joints = bus_peer::servos(&["a", "b", "c"]);
    let b = rig::buses(
        &format!(
            "- {{name: s, transport: serial, device: {}, baud: 4000000, protocol: dynamixel, feedback_timeout_ms: 5000, joints: {{a: {{id: 1}}, b: {{id: 2}}, c: {{id: 3}}}}}}",
            pty.slave_path.display()
        ),
        &joints,
        RATE,
    );
    let peer = bus_peer::dynamixel(
        pty.master.try_clone().unwrap(),
        BTreeMap::from([(1, 2048), (2, 2048), (3, 2048)]),
        bus_peer::Vanish::Never,
    );
    let mut backend = open(&b, &joints, RATE).unwrap();
    while backend.enable().unwrap() != Readiness::Ready {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let mut fb = [Feedback::default(); 3];
    let mut total = 0;
    for tick in 0..200u64 {
        let sps = [Setpoint {
            position: 0.001 * tick as f64,
            ..Setpoint::default()
        }; 3];
        let (r, n) = watched(|| backend.write(tick, &sps).and(backend.read(&mut fb)));
        r.unwrap();
        total += n;
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    let held = [Setpoint::default(); 3];
    let (r, n) = watched(|| backend.hold(200, &held));
    r.unwrap();
    total += n;
    // Teach-in: torque off, positions read, torque on again.
    let mut dofs = [false; 3];
    let (r, n) = watched(|| backend.compliant(true, &mut dofs));
    assert_eq!(r.unwrap(), Readiness::Ready);
    assert_eq!(dofs, [true; 3]);
    total += n;
    for tick in 201..220u64 {
        let (r, n) = watched(|| backend.write(tick, &held).and(backend.read(&mut fb)));
        r.unwrap();
        total += n;
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    let (r, n) = watched(|| backend.compliant(false, &mut dofs));
    assert_eq!(r.unwrap(), Readiness::Ready);
    assert_eq!(total + n, 0, "allocations on the real-time path");
    // The peer reads the pty on its own thread, which a loaded machine may leave behind: let it
    // take what was written before stopping it (a liveness bound, not a speed check).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while peer.log.lock().unwrap().goals.len() <= 200 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let log = peer.stop();
    assert_eq!(log.crc_errors, 0);
    assert!(log.goals.len() > 200);
}

#[test]
fn damiao_and_robstride_stream_hold_and_teach_in_allocate_nothing() {
    let joints = bus_peer::servos(&["a", "b"]);
    let (mut backend, mut io) = rig::can_backend(
        "- {name: c, transport: can, interface: can0, watchdog_ms: 20, joints: {a: {protocol: damiao, id: 1, damiao: {kp: 30, kd: 1, master_id: 17, p_max: 12.5, v_max: 10, t_max: 28}}, b: {protocol: robstride, id: 2, robstride: {model: rs-03, kp: 60, kd: 2}}}}",
        &joints,
        RATE,
        64,
    );
    let mut damiao = bus_peer::DamiaoMotor::new(1, 17, (12.5, 10.0, 28.0), 0.2);
    let mut robstride = bus_peer::RobstrideMotor::new(
        2,
        motiond::backend::robstride::codec::model("rs-03").unwrap(),
        -0.1,
    );
    let mut answer = |io: &mut motiond::backend::transport::memory::MemoryIo| {
        while let Some(f) = io.recv().unwrap() {
            damiao.on_frame(&f, io);
            robstride.on_frame(&f, io);
        }
    };
    let mut total = 0;
    loop {
        let (r, n) = watched(|| backend.enable());
        total += n;
        if r.unwrap() == Readiness::Ready {
            break;
        }
        answer(&mut io);
    }
    let mut fb = [Feedback::default(); 2];
    for tick in 0..100u64 {
        let sps = [Setpoint {
            position: 0.001 * tick as f64,
            ..Setpoint::default()
        }; 2];
        let (r, n) = watched(|| backend.write(tick, &sps).and(backend.read(&mut fb)));
        r.unwrap();
        total += n;
        answer(&mut io);
    }
    let held = [Setpoint::default(); 2];
    let (r, n) = watched(|| backend.hold(100, &held));
    r.unwrap();
    total += n;
    let mut dofs = [false; 2];
    let (r, n) = watched(|| backend.compliant(true, &mut dofs));
    assert_eq!(r.unwrap(), Readiness::Ready);
    assert_eq!(dofs, [true; 2]);
    total += n;
    for tick in 101..120u64 {
        let (r, n) = watched(|| backend.write(tick, &held).and(backend.read(&mut fb)));
        r.unwrap();
        total += n;
        answer(&mut io);
    }
    let (r, n) = watched(|| backend.compliant(false, &mut dofs).and(backend.enable()));
    assert_eq!(r.unwrap(), Readiness::Ready);
    assert_eq!(total + n, 0, "allocations on the real-time path");
}

#[test]
fn moteus_write_read_hold_and_teach_in_allocate_nothing() {
    let joints = bus_peer::servos(&["a", "b"]);
    let (mut backend, mut io) = rig::can_backend(
        "- {name: c, transport: can, interface: can0, joints: {a: {protocol: moteus, id: 1}, b: {protocol: moteus, id: 2, moteus: {kp_scale: 0.5, kd_scale: 0.5}}}}",
        &joints,
        RATE,
        64,
    );
    let mut servos = [
        bus_peer::MoteusServo::new(1, 0.0),
        bus_peer::MoteusServo::new(2, 0.0),
    ];
    let mut answer = |io: &mut motiond::backend::transport::memory::MemoryIo| {
        while let Some(f) = io.recv().unwrap() {
            for s in servos.iter_mut() {
                s.on_frame(&f, io);
            }
        }
    };
    while backend.enable().unwrap() != Readiness::Ready {
        answer(&mut io);
    }
    let mut fb = [Feedback::default(); 2];
    let mut dofs = [false; 2];
    let mut total = 0;
    for tick in 0..200u64 {
        let sps = [Setpoint {
            position: 0.001 * tick as f64,
            ..Setpoint::default()
        }; 2];
        let (r, n) = watched(|| {
            // Teach-in in the middle: compliant for 50 ticks, then stiff again.
            let teach = match tick {
                100 => backend.compliant(true, &mut dofs).map(|_| ()),
                150 => backend.compliant(false, &mut dofs).map(|_| ()),
                _ => Ok(()),
            };
            teach
                .and(backend.write(tick, &sps))
                .and(backend.read(&mut fb))
        });
        r.unwrap();
        total += n;
        answer(&mut io);
    }
    let (r, n) = watched(|| backend.hold(200, &[Setpoint::default(); 2]));
    r.unwrap();
    assert_eq!(total + n, 0, "allocations on the real-time path");
}

#[test]
fn feetech_write_read_hold_and_teach_in_allocate_nothing() {
    use motiond::backend::feetech::codec::Series;
    for (protocol, series) in [("feetech", Series::Sts), ("feetech_scs", Series::Scs)] {
        let joints = bus_peer::servos(&["a", "b"]);
        let b = rig::buses(
            &format!(
                "- {{name: s, transport: serial, device: /dev/null, baud: 1000000, protocol: {protocol}, joints: {{a: {{id: 1}}, b: {{id: 2}}}}}}"
            ),
            &joints,
            RATE,
        );
        let mid = series.resolution() as i32 / 2;
        let (port, mut servos) = bus_peer::feetech_line(
            series,
            vec![
                bus_peer::FeetechServo::new(1, mid),
                bus_peer::FeetechServo::new(2, mid),
            ],
        );
        let bus = motiond::backend::bus::serial_bus(&b[0], &joints, RATE, Box::new(port)).unwrap();
        let mut backend = BusBackend::new(vec![bus]);
        while backend.enable().unwrap() != Readiness::Ready {
            servos.step();
        }
        servos.step();
        let mut fb = [Feedback::default(); 2];
        let mut dofs = [false; 2];
        let mut total = 0;
        for tick in 0..200u64 {
            let sps = [Setpoint {
                position: 0.001 * tick as f64,
                ..Setpoint::default()
            }; 2];
            let (r, n) = watched(|| {
                // Teach-in in the middle: torque off for 50 ticks, then on again.
                let teach = match tick {
                    100 => backend.compliant(true, &mut dofs).map(|_| ()),
                    150 => backend.compliant(false, &mut dofs).map(|_| ()),
                    _ => Ok(()),
                };
                teach
                    .and(backend.write(tick, &sps))
                    .and(backend.read(&mut fb))
            });
            r.unwrap();
            total += n;
            servos.step();
        }
        let (r, n) = watched(|| backend.hold(200, &[Setpoint::default(); 2]));
        r.unwrap();
        assert_eq!(
            total + n,
            0,
            "allocations on the real-time path ({protocol})"
        );
    }
}

#[test]
fn feetech_calibration_read_back_allocates_nothing() {
    // The enable sequence reads each servo's calibration registers back on the loop thread:
    // agreeing (enabled) and not (refused), neither allocates.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("arm.json"),
        r#"{"a": {"id": 1, "drive_mode": 0, "homing_offset": -1019, "range_min": 700, "range_max": 3400},
            "b": {"id": 2, "drive_mode": 0, "homing_offset": 1106, "range_min": 600, "range_max": 3500}}"#,
    )
    .unwrap();
    let joints = bus_peer::servos(&["a", "b"]);
    let mut b = rig::buses(
        "- {name: s, transport: serial, device: /dev/null, baud: 1000000, protocol: feetech, lerobot_calibration: arm.json, joints: {a: {id: 1}, b: {id: 2}}}",
        &joints,
        RATE,
    );
    let problems = motiond::backend::lerobot_calibration::apply(
        &mut b,
        &dir.path().join("robot.yaml"),
        &joints,
        &|_| None,
    );
    assert!(problems.is_empty(), "{problems:?}");
    for offset in [1106, -1000] {
        let servo = |id, homing_offset, limits| bus_peer::FeetechServo {
            homing_offset,
            limits,
            ..bus_peer::FeetechServo::new(id, 2048)
        };
        let (port, mut servos) = bus_peer::feetech_line(
            motiond::backend::feetech::codec::Series::Sts,
            vec![servo(1, -1019, (700, 3400)), servo(2, offset, (600, 3500))],
        );
        let bus = motiond::backend::bus::serial_bus(&b[0], &joints, RATE, Box::new(port)).unwrap();
        let mut backend = BusBackend::new(vec![bus]);
        let mut total = 0;
        let mut outcome = Ok(Readiness::Pending);
        for _ in 0..10 {
            let (r, n) = watched(|| backend.enable());
            total += n;
            outcome = r;
            if outcome != Ok(Readiness::Pending) {
                break;
            }
            servos.step();
        }
        let want = if offset == 1106 {
            Ok(Readiness::Ready)
        } else {
            Err(FaultKind::CalibrationMismatch)
        };
        assert_eq!(outcome.map_err(|e| e.kind), want);
        assert_eq!(total, 0, "allocations in the enable sequence");
    }
}

#[test]
fn dynamixel_calibration_read_back_allocates_nothing() {
    // As Feetech's: the DYNAMIXEL enable sequence reads Drive_Mode, Homing_Offset and the
    // position limits back on the loop thread; agreeing (enabled) and not (refused), neither
    // allocates (holding, asked once it is up, neither).
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("arm.json"),
        r#"{"a": {"id": 1, "drive_mode": 0, "homing_offset": -1019, "range_min": 700, "range_max": 3400}}"#,
    )
    .unwrap();
    let joints = bus_peer::servos(&["a"]);
    // The servo agrees when the bus opens (the set-up at open compares it too), then holds
    // `homing_offset` when it is enabled (1000: calibrated again since).
    for homing_offset in [-1019i32, 1000] {
        let pty = bus_peer::openpty();
        let mut b = rig::buses(
            &format!(
                "- {{name: s, transport: serial, device: {}, baud: 4000000, protocol: dynamixel, feedback_timeout_ms: 5000, lerobot_calibration: arm.json, joints: {{a: {{id: 1}}}}}}",
                pty.slave_path.display()
            ),
            &joints,
            RATE,
        );
        let problems = motiond::backend::lerobot_calibration::apply(
            &mut b,
            &dir.path().join("robot.yaml"),
            &joints,
            &|_| None,
        );
        assert!(problems.is_empty(), "{problems:?}");
        let mut eeprom = [0u8; 64];
        eeprom[11] = 3;
        eeprom[20..24].copy_from_slice(&(-1019i32).to_le_bytes());
        eeprom[48..52].copy_from_slice(&3400u32.to_le_bytes());
        eeprom[52..56].copy_from_slice(&700u32.to_le_bytes());
        let eeproms = bus_peer::Eeproms::default();
        eeproms.lock().unwrap().insert(1, eeprom);
        let peer = bus_peer::dynamixel_with_eeprom(
            pty.master.try_clone().unwrap(),
            BTreeMap::from([(1, 2048)]),
            eeproms.clone(),
            bus_peer::Vanish::Never,
        );
        let mut backend = open(&b, &joints, RATE).unwrap();
        eeprom[20..24].copy_from_slice(&homing_offset.to_le_bytes());
        eeproms.lock().unwrap().insert(1, eeprom);
        let mut total = 0;
        let outcome = loop {
            let (r, n) = watched(|| backend.enable());
            total += n;
            if r != Ok(Readiness::Pending) {
                break r;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        };
        let mut held = [f64::NAN];
        let (_, n) = watched(|| backend.holding(&mut held));
        total += n;
        let want = if homing_offset == -1019 {
            Ok(Readiness::Ready)
        } else {
            Err(FaultKind::CalibrationMismatch)
        };
        assert_eq!(outcome.map_err(|e| e.kind), want);
        assert_eq!(held[0].is_finite(), want.is_ok(), "{held:?}");
        assert_eq!(total, 0, "allocations in the enable sequence");
        peer.stop();
    }
}

/// A serial line nobody answers on, counting the port calls of the enable sequence.
#[derive(Clone, Default)]
struct SilentLine(std::sync::Arc<std::sync::Mutex<(usize, usize)>>);

impl std::io::Read for SilentLine {
    fn read(&mut self, _buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().0 += 1;
        Err(std::io::ErrorKind::WouldBlock.into())
    }
}

impl std::io::Write for SilentLine {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().1 += 1;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl motiond::backend::transport::serial::Port for SilentLine {}

/// The enable sequence of a serial bus whose servos never answer, and the loop giving up on it
/// (`enable_timed_out`), allocate nothing, and each tick does a bounded number of port calls
/// however long the silence lasts (nothing waits, nothing piles up).
#[test]
fn a_silent_serial_enable_and_its_timeout_allocate_nothing_and_never_pile_up() {
    use motiond::config::bus::{RawBus, validate};
    for protocol in ["dynamixel", "feetech"] {
        let yaml = format!(
            "- {{name: s, transport: serial, device: /dev/null, baud: 1000000, protocol: \
             {protocol}, joints: {{a: {{id: 1}}, b: {{id: 2}}}}}}"
        );
        let raw: Vec<RawBus> = serde_yaml::from_str(&yaml).unwrap();
        let buses = validate(&raw, &["a", "b"], 250.0).unwrap();
        let joints = bus_peer::servos(&["a", "b"]);
        let line = SilentLine::default();
        let bus =
            motiond::backend::bus::serial_bus(&buses[0], &joints, 250.0, Box::new(line.clone()))
                .unwrap();
        let mut backend = BusBackend::new(vec![bus]);
        let mut most = (0, 0);
        for _ in 0..2000 {
            *line.0.lock().unwrap() = (0, 0);
            let (r, n) = watched(|| backend.enable());
            assert_eq!((r.unwrap(), n), (Readiness::Pending, 0), "{protocol}");
            let calls = *line.0.lock().unwrap();
            most = (most.0.max(calls.0), most.1.max(calls.1));
        }
        // At most one drain's reads (8) and one write a tick.
        assert!(most.0 <= 8 && most.1 <= 1, "{protocol}: {most:?}");
        let (e, n) = watched(|| backend.enable_timed_out());
        assert_eq!(n, 0, "{protocol}");
        assert_eq!(e.unwrap().kind, FaultKind::EnableTimeout, "{protocol}");
    }
}
