//! Serial servo buses whose servos do not answer, or whose adapter echoes: what the enable's
//! fault, the drives' status and the set-up at open say (which servo, joint, bus, device, what
//! it did not answer, what to check).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

mod bus_peer;

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::time::Duration;

use bus_peer::{Vanish, openpty};
use motiond::backend::bus::{BusBackend, serial_bus};
use motiond::backend::dynamixel::setup::XSeries;
use motiond::backend::feetech::codec::Series;
use motiond::backend::servo_setup::{ServoSetup, ServoTable, SetupError, set_up};
use motiond::backend::status::LinkState;
use motiond::backend::transport::serial::{Port, SerialDevice};
use motiond::backend::{Backend, FaultKind, Readiness};
use motiond::config::bus::{RawBus, validate};
use motiond::rt::{ManualClock, Settings, State};
use motiond::session::{Session, describe_fault};

const RATE: f64 = 250.0;
const JOINTS: [&str; 2] = ["base_yaw", "shoulder_pitch"];

/// A line nobody answers on: every byte is taken, none comes back.
struct Silent;

impl Read for Silent {
    fn read(&mut self, _buf: &mut [u8]) -> io::Result<usize> {
        Err(io::ErrorKind::WouldBlock.into())
    }
}

impl Write for Silent {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Port for Silent {}

/// An adapter that echoes every byte sent, and no servo behind it.
#[derive(Default)]
struct Echo(Vec<u8>);

impl Read for Echo {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.0.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = buf.len().min(self.0.len());
        buf[..n].copy_from_slice(&self.0[..n]);
        self.0.drain(..n);
        Ok(n)
    }
}

impl Write for Echo {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Port for Echo {}

fn bus_yaml(protocol: &str, device: &str) -> String {
    format!(
        "- {{name: arm, transport: serial, device: {device}, baud: 1000000, protocol: {protocol}, \
         joints: {{base_yaw: {{id: 1}}, shoulder_pitch: {{id: 2}}}}}}"
    )
}

/// The bus of `protocol` with servos 1 (`base_yaw`) and 2 (`shoulder_pitch`) on `port`, built
/// without the set-up at open (the servos answered that, and stopped since).
fn backend(protocol: &str, device: &str, port: Box<dyn Port>) -> BusBackend {
    let raw: Vec<RawBus> = serde_yaml::from_str(&bus_yaml(protocol, device)).unwrap();
    let buses = validate(&raw, &JOINTS, RATE).unwrap();
    let joints = bus_peer::servos(&JOINTS);
    BusBackend::new(vec![serial_bus(&buses[0], &joints, RATE, port).unwrap()])
}

#[test]
fn a_silent_bus_faults_its_enable_naming_each_servo_its_bus_device_request_and_what_to_check() {
    for (protocol, asked) in [
        ("dynamixel", "the Read of its Operating_Mode"),
        ("feetech", "the Read of its Present_Position"),
    ] {
        let b = backend(protocol, "/dev/ttyUSB0", Box::new(Silent));
        let buses = b.status().unwrap();
        let joints = bus_peer::servos(&JOINTS);
        let settings = Settings {
            rate_hz: RATE,
            enable_timeout_s: 0.5,
            ..Settings::default()
        };
        let s = Session::stepped(
            settings,
            Box::new(b),
            None,
            joints.clone(),
            ManualClock::new(0),
        )
        .unwrap();
        let err = s.enable().unwrap_err().to_string();
        let status = s.status();
        assert_eq!(status.state, State::Fault);
        let fault = status.fault.unwrap();
        assert_eq!(fault.kind, FaultKind::EnableTimeout);
        assert_eq!(fault.dof, Some(0), "the first servo that did not answer");
        let text = format!(
            "enable_timeout: {protocol} servo 1 (base_yaw) on bus `arm` (/dev/ttyUSB0 at 1000000 \
             baud) did not answer {asked} while enabling (motiond did not turn its torque \
             on); check its power, wiring and id, and the bus's baud rate"
        );
        assert_eq!(describe_fault(&fault, &joints, Some(&buses)), text);
        assert!(err.contains(&text), "{err}");
        // Every servo that never answered says so in `drives`/`status` (state, last error);
        // none is left `enabling` with no error.
        for (d, id) in buses.buses[0].drives.iter().zip([1, 2]) {
            let link = d.link.snapshot();
            assert_eq!(link.state, LinkState::Fault, "servo {id}");
            let (kind, code) = link.last_fault.unwrap();
            assert_eq!(kind, FaultKind::EnableTimeout, "servo {id}");
            let words = motiond::backend::family::fault_words(d.protocol, kind, code).unwrap();
            assert!(
                words.starts_with(&format!("did not answer {asked}")),
                "{words}"
            );
            assert_eq!(link.faults, 1, "servo {id}: recorded once");
        }
    }
}

#[test]
fn only_the_servo_that_did_not_answer_is_named() {
    let pty = openpty();
    // Only servo 1 is on the line.
    let peer = bus_peer::dynamixel(
        pty.master.try_clone().unwrap(),
        BTreeMap::from([(1, 2048)]),
        Vanish::Never,
    );
    drop(pty.master);
    let device = pty.slave_path.display().to_string();
    let port = SerialDevice::open(&pty.slave_path, 1_000_000).unwrap();
    let mut b = backend("dynamixel", &device, Box::new(port));
    let status = b.status().unwrap();
    // Until servo 1's answer came in (the peer answers in its own time).
    for _ in 0..10_000 {
        assert_eq!(b.enable().unwrap(), Readiness::Pending);
        if status.buses[0]
            .received
            .load(std::sync::atomic::Ordering::Relaxed)
            > 0
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(b.enable().unwrap(), Readiness::Pending);
    let e = b.enable_timed_out().unwrap();
    assert_eq!((e.kind, e.dof), (FaultKind::EnableTimeout, Some(1)));
    let drives = &status.buses[0].drives;
    assert_eq!(
        drives[0].link.snapshot().last_fault,
        None,
        "servo 1 answered"
    );
    assert_eq!(
        drives[1].link.snapshot().last_fault,
        Some((FaultKind::EnableTimeout, e.code))
    );
    let text = describe_fault(&e, &bus_peer::servos(&JOINTS), Some(&status));
    assert!(
        text.starts_with(&format!(
            "enable_timeout: dynamixel servo 2 (shoulder_pitch) on bus `arm` ({device} at \
             1000000 baud) did not answer the Read of its Operating_Mode"
        )),
        "{text}"
    );
    peer.stop();
}

/// One servo, no keys: the set-up still reads its Return_Delay_Time.
fn one_servo() -> Vec<ServoSetup> {
    vec![ServoSetup {
        id: 3,
        joint: "elbow_flex".into(),
        wanted: Vec::new(),
        calibration: None,
    }]
}

#[test]
fn an_adapter_that_echoes_is_refused_at_open_saying_so_for_both_families() {
    let tables: [&dyn ServoTable; 2] = [&Series::Sts, &XSeries];
    for table in tables {
        let err = set_up(
            table,
            &mut Echo::default(),
            "arm",
            &one_servo(),
            Duration::from_millis(50),
        )
        .unwrap_err();
        assert!(
            matches!(err, SetupError::Echo { id: 3, .. }),
            "{}: {err:?}",
            table.family()
        );
        let text = err.to_string();
        assert!(
            text.starts_with(
                "the adapter echoes what motiond sends: the Read of Return_Delay_Time to servo 3 \
                 (elbow_flex) came back as sent"
            ) && text.contains("automatic direction control")
                && text.ends_with("nothing was enabled"),
            "{text}"
        );
    }
}

#[test]
fn a_silent_line_at_open_is_still_no_answer() {
    let err = set_up(
        &Series::Sts,
        &mut Silent,
        "arm",
        &one_servo(),
        Duration::from_millis(5),
    )
    .unwrap_err();
    assert!(matches!(err, SetupError::NoAnswer { id: 3, .. }), "{err:?}");
}

/// `serve` on a DYNAMIXEL bus whose servos answer the set-up at open (single Reads) and then
/// nothing: its log names the servo, bus, device and what to check, and at SIGTERM it does not
/// claim the drives are holding.
#[test]
fn serve_says_which_servo_did_not_answer_and_that_the_drives_never_came_up() {
    use motiond::backend::dynamixel::codec as dxl;
    use std::io::BufRead;
    use std::sync::mpsc;

    let pty = openpty();
    let device = pty.slave_path.display().to_string();
    let mut master = pty.master.try_clone().unwrap();
    // Answers every single Read with zeros (Return_Delay_Time 0); Sync Reads go unanswered.
    std::thread::spawn(move || {
        let (mut buf, mut params, mut out) = (Vec::new(), [0u8; 512], [0u8; 64]);
        let mut chunk = [0u8; 1024];
        while let Ok(n) = master.read(&mut chunk) {
            if n == 0 {
                return;
            }
            buf.extend_from_slice(&chunk[..n]);
            loop {
                match dxl::parse(&buf, &mut params) {
                    dxl::Parse::Incomplete { consumed } => {
                        buf.drain(..consumed);
                        break;
                    }
                    dxl::Parse::Skip { consumed, .. } => {
                        buf.drain(..consumed);
                    }
                    dxl::Parse::Packet { consumed, packet } => {
                        buf.drain(..consumed);
                        if packet.instruction == dxl::INST_READ {
                            let len = u16::from_le_bytes([params[2], params[3]]);
                            let mut s = dxl::Packet::begin(&mut out, packet.id, dxl::INST_STATUS);
                            s.push(0);
                            (0..len).for_each(|_| s.push(0));
                            if master.write_all(s.finish().unwrap()).is_err() {
                                return;
                            }
                        }
                    }
                }
            }
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::create_dir(dir.path().join("motions")).unwrap();
    let example = std::fs::read_to_string(repo.join("config/examples/dynamixel.yaml")).unwrap();
    let config = dir.path().join("motiond.yaml");
    std::fs::write(
        &config,
        example
            .replace(
                "../demo-arm.skel",
                &repo.join("config/demo-arm.skel").display().to_string(),
            )
            .replace(
                "library: ../motions",
                &format!("library: {}", dir.path().join("motions").display()),
            )
            .replace("/dev/ttyUSB0", &device)
            + &format!(
                "rt:\n  lock_memory: false\n  max_late_ms: 1000\n  enable_timeout_s: 0.5\n\
                 daemon:\n  socket: {socket}\n  watchdog: false\n\
                 recorder:\n  dir: {flight}\n",
                socket = dir.path().join("s.sock").display(),
                flight = dir.path().join("flight").display(),
            ),
    )
    .unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_motiond"))
        .args(["serve", "--config"])
        .arg(&config)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let mut log = Vec::new();
    // Until the enable failed (a bound against a hang, not a timing check).
    while !log
        .iter()
        .any(|l: &String| l.contains("enabling the drives failed"))
    {
        match rx.recv_timeout(Duration::from_secs(120)) {
            Ok(line) => log.push(line),
            Err(e) => panic!("{e}: {log:#?}"),
        }
    }
    // SAFETY: signals our child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let exit = child.wait().unwrap();
    log.extend(rx.iter());
    let log = log.join("\n");
    assert!(exit.success(), "{exit}: {log}");
    let servo = format!(
        "dynamixel servo 1 (base_yaw) on bus `servos` ({device} at 4000000 baud) did not \
         answer the Read of its Operating_Mode while enabling (motiond did not turn its torque \
         on); check its power, wiring and id"
    );
    assert!(
        log.lines()
            .any(|l| l.contains("enabling the drives failed") && l.contains(&servo)),
        "{log}"
    );
    // Each servo's own journal line.
    assert!(
        log.contains(
            "bus servos, gripper_slide (dynamixel): enable_timeout (code 0x2): did not answer"
        ),
        "{log}"
    );
    assert!(
        log.contains("stopped at rest; the drives never came up, nothing held them"),
        "{log}"
    );
    assert!(!log.contains("drives hold"), "{log}");
}

/// The same at `open`, on a pseudo-terminal whose far end echoes: the refusal names the bus and
/// its device.
#[test]
fn opening_a_bus_behind_an_echoing_adapter_names_the_bus_device_and_echo() {
    for protocol in ["dynamixel", "feetech"] {
        let pty = openpty();
        let mut master = pty.master.try_clone().unwrap();
        std::thread::spawn(move || {
            let mut chunk = [0u8; 256];
            while let Ok(n) = master.read(&mut chunk) {
                if n == 0 || master.write_all(&chunk[..n]).is_err() {
                    return;
                }
            }
        });
        let device = pty.slave_path.display().to_string();
        let raw: Vec<RawBus> = serde_yaml::from_str(&bus_yaml(protocol, &device)).unwrap();
        let buses = validate(&raw, &JOINTS, RATE).unwrap();
        let err = match motiond::backend::bus::open(&buses, &bus_peer::servos(&JOINTS), RATE) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("{protocol}: opened behind an echo"),
        };
        assert!(
            err.starts_with(&format!(
                "bus `arm`: {device} at 1000000 baud: the adapter echoes what motiond sends: the \
                 Read of Return_Delay_Time to servo 1 (base_yaw) came back as sent"
            )),
            "{protocol}: {err}"
        );
    }
}
