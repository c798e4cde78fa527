//! What a Feetech bus writes to its servos when it opens (`Family::prepare`, before the loop):
//! LeRobot's connect-time values with a LeRobot calibration, the `servo:` keys of the bus and of
//! a joint, `keep`, the Lock register around EEPROM writes, a read-back that refuses a value a
//! servo did not take (naming bus, servo, joint, register, both values), and the bus budget with
//! the Return_Delay_Time the servos hold. The servos are a control table each behind an in-memory
//! line, answering Read and Write as the SDK's servos do (motiond's codec decodes the packets).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

mod bus_peer;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use motiond::backend::bus::OpenError;
use motiond::backend::family::find;
use motiond::backend::feetech::codec::{self as ft, inst, reg};
use motiond::config::bus::{RawBus, validate};

use bus_peer::{HostPort, Line};

const LOCK: usize = 55;

/// An STS servo's control table with values other than LeRobot's (the factory Return_Delay_Time
/// 250, P 32, Max_Torque_Limit 1000, Protection_Current 500, Overload_Torque 80, Phase 0x1C).
fn table() -> [u8; 128] {
    let mut t = [0u8; 128];
    t[7] = 250;
    t[16..18].copy_from_slice(&1000u16.to_le_bytes());
    t[18] = 0x1C;
    t[21] = 32;
    t[22] = 32;
    t[28..30].copy_from_slice(&500u16.to_le_bytes());
    t[33] = 0;
    t[36] = 80;
    t[LOCK] = 1;
    t
}

struct Servo {
    id: u8,
    table: [u8; 128],
    /// Addresses whose writes it ignores (a register its firmware lacks).
    deaf: Vec<u8>,
}

#[derive(Default)]
struct Seen {
    /// (id, instruction, params) of every packet.
    log: Vec<(u8, u8, Vec<u8>)>,
    /// EEPROM writes while Lock was 1, or with torque on.
    violations: Vec<String>,
}

/// Servos answering on the line from a thread of their own until dropped.
struct Servos {
    servos: Arc<Mutex<Vec<Servo>>>,
    seen: Arc<Mutex<Seen>>,
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Servos {
    fn start(line: Arc<Mutex<Line>>, servos: Vec<Servo>) -> Servos {
        let servos = Arc::new(Mutex::new(servos));
        let seen = Arc::new(Mutex::new(Seen::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, k, st) = (servos.clone(), seen.clone(), stop.clone());
        let thread = thread::spawn(move || {
            while !st.load(Ordering::Relaxed) {
                let bytes: Vec<u8> = line.lock().unwrap().to_servos.drain(..).collect();
                if bytes.is_empty() {
                    thread::sleep(Duration::from_micros(100));
                    continue;
                }
                for (id, instruction, params) in bus_peer::feetech_packets(&bytes) {
                    let reply = answer(
                        &mut s.lock().unwrap(),
                        &mut k.lock().unwrap(),
                        id,
                        instruction,
                        &params,
                    );
                    k.lock().unwrap().log.push((id, instruction, params));
                    if let Some(r) = reply {
                        line.lock().unwrap().to_host.extend(r);
                    }
                }
            }
        });
        Servos {
            servos,
            seen,
            stop,
            thread: Some(thread),
        }
    }

    fn table(&self, id: u8) -> [u8; 128] {
        self.servos
            .lock()
            .unwrap()
            .iter()
            .find(|s| s.id == id)
            .unwrap()
            .table
    }

    fn writes(&self) -> Vec<(u8, Vec<u8>)> {
        let seen = self.seen.lock().unwrap();
        seen.log
            .iter()
            .filter(|p| p.1 == inst::WRITE)
            .map(|p| (p.0, p.2.clone()))
            .collect()
    }
}

impl Drop for Servos {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

fn answer(
    servos: &mut [Servo],
    seen: &mut Seen,
    id: u8,
    instruction: u8,
    params: &[u8],
) -> Option<Vec<u8>> {
    let s = servos.iter_mut().find(|s| s.id == id)?;
    let data: Vec<u8> = match (instruction, params) {
        (inst::READ, [address, len]) => {
            let a = usize::from(*address);
            s.table[a..a + usize::from(*len)].to_vec()
        }
        (inst::WRITE, [address, data @ ..]) => {
            let a = usize::from(*address);
            let eeprom = a < usize::from(reg::TORQUE_ENABLE) || a == 85;
            if eeprom && s.table[LOCK] != 0 {
                seen.violations
                    .push(format!("servo {id}: {a} written while locked"));
            }
            if eeprom && s.table[usize::from(reg::TORQUE_ENABLE)] != 0 {
                seen.violations
                    .push(format!("servo {id}: {a} written with torque on"));
            }
            if !s.deaf.contains(address) {
                s.table[a..a + data.len()].copy_from_slice(data);
            }
            Vec::new()
        }
        other => panic!("unexpected packet to {id}: {other:02x?}"),
    };
    let mut out = [0u8; 160];
    let n = ft::packet(&mut out, id, 0, &data);
    Some(out[..n].to_vec())
}

fn servo(id: u8) -> Servo {
    Servo {
        id,
        table: table(),
        deaf: Vec::new(),
    }
}

/// Prepares the bus of `yaml` (joints `shoulder_pan` id 1, `gripper` id 6) at `rate_hz`.
fn prepare(yaml: &str, rate_hz: f64, line: &Arc<Mutex<Line>>) -> Result<(), String> {
    let raw: Vec<RawBus> = serde_yaml::from_str(yaml).unwrap();
    let buses = validate(&raw, &["gripper", "shoulder_pan"], rate_hz).unwrap();
    let mut port = HostPort(line.clone());
    find("feetech")
        .unwrap()
        .prepare(&mut port, &buses[0], rate_hz)
        .map_err(|e| e.to_string())
}

fn rig(servos: Vec<Servo>) -> (Servos, Arc<Mutex<Line>>) {
    let line = Arc::new(Mutex::new(Line::default()));
    (Servos::start(line.clone(), servos), line)
}

const LEROBOT: &str = "- {name: arm, transport: serial, device: /dev/null, baud: 1000000, protocol: feetech, lerobot_calibration: arm.json, joints: {shoulder_pan: {id: 1}, gripper: {id: 6}}}";

#[test]
fn lerobots_values_end_in_the_control_tables_written_with_torque_off_and_the_eeprom_unlocked() {
    let (s, line) = rig(vec![servo(1), servo(6)]);
    prepare(LEROBOT, 500.0, &line).unwrap();
    for id in [1, 6] {
        let t = s.table(id);
        assert_eq!(t[7], 0, "Return_Delay_Time");
        assert_eq!(t[41], 254, "Acceleration");
        assert_eq!(t[85], 254, "Maximum_Acceleration");
        assert_eq!(t[18], 0x0C, "Phase: bit 4 cleared, the others kept");
        assert_eq!(t[33], 0, "Operating_Mode");
        assert_eq!((t[21], t[23], t[22]), (16, 0, 32), "P, I, D");
        assert_eq!(
            t[LOCK], 1,
            "locked again, as LeRobot's enable_torque leaves it"
        );
        assert_eq!(t[40], 0, "torque stays off until the loop enables");
    }
    let pan = s.table(1);
    assert_eq!(
        u16::from_le_bytes([pan[16], pan[17]]),
        1000,
        "only the gripper's torque"
    );
    let grip = s.table(6);
    assert_eq!(
        u16::from_le_bytes([grip[16], grip[17]]),
        500,
        "Max_Torque_Limit"
    );
    assert_eq!(
        u16::from_le_bytes([grip[28], grip[29]]),
        250,
        "Protection_Current"
    );
    assert_eq!(grip[36], 25, "Overload_Torque");
    assert!(
        s.seen.lock().unwrap().violations.is_empty(),
        "{:?}",
        s.seen.lock().unwrap().violations
    );
    // Per servo: torque off and unlock first, lock last.
    let writes = s.writes();
    let of = |id: u8| -> Vec<Vec<u8>> {
        writes
            .iter()
            .filter(|w| w.0 == id)
            .map(|w| w.1.clone())
            .collect()
    };
    for id in [1, 6] {
        let w = of(id);
        assert_eq!(w[0], vec![reg::TORQUE_ENABLE, 0]);
        assert_eq!(w[1], vec![55, 0]);
        assert_eq!(w.last().unwrap(), &vec![55, 1]);
    }
    // Only what differs: D_Coefficient, I_Coefficient and Operating_Mode held LeRobot's values
    // already.
    assert!(
        !of(1).iter().any(|w| [22, 23, 33].contains(&w[0])),
        "{:?}",
        of(1)
    );
    assert_eq!(of(1).len(), 2 + 5 + 1, "{:?}", of(1));

    // Opened again: everything holds, nothing is written (no EEPROM wear, torque untouched).
    let before = s.writes().len();
    prepare(LEROBOT, 500.0, &line).unwrap();
    assert_eq!(s.writes().len(), before);
}

#[test]
fn the_bus_and_joint_keys_and_keep_override_lerobots_values() {
    let (s, line) = rig(vec![servo(1), servo(6)]);
    let yaml = "- {name: arm, transport: serial, device: /dev/null, baud: 1000000, protocol: feetech, lerobot_calibration: arm.json, servo: {acceleration: keep, p_coefficient: 20}, joints: {shoulder_pan: {id: 1, servo: {p_coefficient: keep}}, gripper: {id: 6, servo: {max_torque_limit: 300, overload_torque: keep}}}}";
    prepare(yaml, 500.0, &line).unwrap();
    let (pan, grip) = (s.table(1), s.table(6));
    assert_eq!((pan[41], grip[41]), (0, 0), "Acceleration kept");
    assert_eq!(
        (pan[21], grip[21]),
        (32, 20),
        "P kept on the joint, the bus's 20 on the other"
    );
    assert_eq!(u16::from_le_bytes([grip[16], grip[17]]), 300);
    assert_eq!(grip[36], 80, "Overload_Torque kept");
    assert_eq!(
        u16::from_le_bytes([grip[28], grip[29]]),
        250,
        "LeRobot's where no key says"
    );
}

#[test]
fn without_a_calibration_or_keys_nothing_is_written() {
    let (s, line) = rig(vec![servo(1), servo(6)]);
    let yaml = "- {name: arm, transport: serial, device: /dev/null, baud: 1000000, protocol: feetech, joints: {shoulder_pan: {id: 1}, gripper: {id: 6}}}";
    prepare(yaml, 100.0, &line).unwrap();
    assert!(s.writes().is_empty());
    // The Return_Delay_Time is read, for the budget.
    let reads = s
        .seen
        .lock()
        .unwrap()
        .log
        .iter()
        .filter(|p| p.1 == inst::READ)
        .count();
    assert_eq!(reads, 2);
}

#[test]
fn a_servo_that_does_not_take_a_value_refuses_the_open_naming_what_and_where() {
    let mut gripper = servo(6);
    gripper.deaf = vec![28];
    let (s, line) = rig(vec![servo(1), gripper]);
    let err = prepare(LEROBOT, 500.0, &line).unwrap_err();
    for part in [
        "bus `arm`",
        "servo 6 (gripper)",
        "did not take Protection_Current",
        "wanted 250 (LeRobot's value)",
        "it reads 500",
        "`servo: {protection_current: keep}` under joint gripper",
        "nothing was enabled",
    ] {
        assert!(err.contains(part), "{part}: {err}");
    }
    // Torque stays off, and nothing later is written to it.
    assert_eq!(s.table(6)[40], 0);
    assert_ne!(
        s.table(6)[LOCK],
        1,
        "left unlocked: the open stopped at the refusal"
    );
}

#[test]
fn a_value_a_key_gave_and_a_servo_did_not_take_names_the_key_for_its_file_position() {
    // `play` and `serve` print the refusal at the key's FILE:LINE:COL (session::start).
    for (servo_key, key) in [
        (
            "joints: {shoulder_pan: {id: 1}, gripper: {id: 6, servo: {protection_current: 300}}}",
            Some("joints.gripper.servo.protection_current"),
        ),
        (
            "servo: {protection_current: 300}, joints: {shoulder_pan: {id: 1}, gripper: {id: 6}}",
            Some("servo.protection_current"),
        ),
    ] {
        let mut gripper = servo(6);
        gripper.deaf = vec![28];
        let (_s, line) = rig(vec![servo(1), gripper]);
        let yaml = format!(
            "- {{name: arm, transport: serial, device: /dev/null, baud: 1000000, protocol: feetech, {servo_key}}}"
        );
        let raw: Vec<RawBus> = serde_yaml::from_str(&yaml).unwrap();
        let buses = validate(&raw, &["gripper", "shoulder_pan"], 500.0).unwrap();
        let e = find("feetech")
            .unwrap()
            .prepare(&mut HostPort(line.clone()), &buses[0], 500.0)
            .unwrap_err();
        let OpenError::Setup { key: got, what, .. } = e else {
            panic!("{e}");
        };
        assert_eq!(got.as_deref(), key, "{what}");
        assert!(what.contains("wanted 300 (the "), "{what}");
    }
}

#[test]
fn the_budget_counts_the_return_delay_the_servos_hold() {
    // Factory 250 (500 µs a reply): two servos at 1 kHz need 160 + 240 + 1000 µs of the 1000 µs
    // period; with nothing to write, the value read refuses the open.
    let (s, line) = rig(vec![servo(1), servo(6)]);
    let yaml = "- {name: arm, transport: serial, device: /dev/null, baud: 1000000, protocol: feetech, joints: {shoulder_pan: {id: 1}, gripper: {id: 6}}}";
    let err = prepare(yaml, 1000.0, &line).unwrap_err();
    for part in [
        "bus `arm`",
        "its servos hold Return_Delay_Time (servo 1: 250, servo 6: 250; 2 µs units) and answer \
         that much later, so 2 drives at 1000 Hz",
        "140%",
        "`servo: {return_delay_time: 0}`",
    ] {
        assert!(err.contains(part), "{part}: {err}");
    }
    // Written 0, the same bus fits.
    let zero = yaml.replace(
        "protocol: feetech,",
        "protocol: feetech, servo: {return_delay_time: 0},",
    );
    prepare(&zero, 1000.0, &line).unwrap();
    assert_eq!(s.table(1)[7], 0);
}

#[test]
fn a_servo_that_does_not_answer_refuses_the_open() {
    let (_s, line) = rig(vec![servo(1)]);
    let err = prepare(LEROBOT, 500.0, &line).unwrap_err();
    assert!(
        err.contains("servo 6 (gripper) did not answer the Read of Return_Delay_Time"),
        "{err}"
    );
}
