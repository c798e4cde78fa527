//! What a serial servo bus writes to its servos' control tables when it opens, before the loop
//! starts and before any torque goes on: the settings LeRobot writes when it connects an arm, as
//! `servo:` keys of the bus (every servo) and of each joint (that servo), each a register's value
//! or `keep` (leave what the servo has). One rule for every serial servo family; a family gives
//! only its register table and its packets ([`ServoTable`]: Feetech's in
//! `backend::feetech::setup`, DYNAMIXEL's in `backend::dynamixel::setup`).
//!
//! With a LeRobot calibration on the bus, LeRobot's values are the defaults; without one nothing
//! is written unless a key says so.
//!
//! At open every servo with a LeRobot calibration is first compared with its file (a servo
//! calibrated otherwise is refused before anything is written to any servo); then each servo's
//! registers are read, and only a servo with a register to change is touched: torque off (and
//! the family's unlock, Feetech's Lock 0), a Write of each register that differs, each read
//! back, then the family's relock (Feetech's Lock 1). A servo whose settings hold already is not
//! written (its EEPROM is not worn, and a servo holding a position keeps its torque). A value a
//! servo does not take refuses the open, naming the bus, the servo, the register, both values
//! and what to do. Return_Delay_Time is read from every servo, whatever the keys, and the bus
//! budget is checked again with what the servos hold.

use std::fmt::Write as _;
use std::io;
use std::time::{Duration, Instant};

use crate::backend::bus::OpenError;
use crate::backend::bus::budget;
use crate::backend::bus::settings::{
    BusSettings, DriveSettings, KeyValue, Keys, Param, ParamKind, Problems, Transport,
};
use crate::backend::lerobot_calibration as lerobot;
use crate::backend::servo_registers::{Mismatch, ServoRegisters};
use crate::backend::transport::serial::Port;

/// Where a register sits: address, bytes, and the bits of it the setting is (all: `u32::MAX`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    pub address: u16,
    pub len: u8,
    pub mask: u32,
    pub shift: u8,
}

impl Place {
    /// A whole register of `len` bytes.
    pub const fn whole(address: u16, len: u8) -> Place {
        Place {
            address,
            len,
            mask: u32::MAX,
            shift: 0,
        }
    }
}

/// A register (or bits of one) a `servo:` key sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    /// Its key under `servo:` as the family's keys hold it (`servo.return_delay_time`).
    pub key: &'static str,
    /// The register's name in the vendor's (and LeRobot's) control table.
    pub register: &'static str,
    pub place: Place,
    /// The values a key may give.
    pub range: (u32, u32),
}

impl Setting {
    /// Its name as written in the YAML, inside the `servo:` mapping (`return_delay_time`).
    pub fn name(&self) -> &'static str {
        self.key.strip_prefix("servo.").unwrap_or(self.key)
    }
}

/// The `servo:` keys of `table`, on a bus and on a joint.
pub const fn params<const N: usize>(table: &[Setting; N]) -> [Param; N] {
    let mut out = [Param::same("", ParamKind::IntegerOrKeep); N];
    let mut i = 0;
    while i < N {
        out[i] = Param::same(table[i].key, ParamKind::IntegerOrKeep);
        i += 1;
    }
    out
}

/// A status packet found in what came in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scan {
    /// From servo `id`: its error byte and parameters; `len` bytes of input are its.
    Status {
        id: u8,
        error: u8,
        params: Vec<u8>,
        len: usize,
    },
    /// `len` bytes are no status packet (junk, a corrupt packet, an echo).
    Drop(usize),
    /// A packet has begun: more bytes are needed.
    More,
}

/// A serial servo family's part in the set-up: its register table, what LeRobot writes, and its
/// packets.
pub trait ServoTable: Sync {
    /// The family's name in messages (`feetech`, `dynamixel`).
    fn family(&self) -> &'static str;
    /// Its settings, in the order they are written (LeRobot's).
    fn settings(&self) -> &'static [Setting];
    /// Whether these servos have `setting`'s register.
    fn has(&self, setting: &Setting) -> bool;
    /// What to do about a key for a register these servos lack.
    fn lacking(&self, setting: &Setting) -> String;
    /// A value in range the register still does not take, in words (`None`: fine).
    fn refuses(&self, setting: &Setting, value: u32) -> Option<String> {
        let _ = (setting, value);
        None
    }
    /// LeRobot's value on connect for the servo of motor `motor` (the LeRobot motor name).
    fn lerobot(&self, setting: &Setting, motor: &str) -> Option<u32>;
    /// The setting the servo's answer delay is (it counts in the bus budget), if any.
    fn return_delay(&self) -> Option<&'static Setting>;
    /// The Return_Delay_Time unit, in µs.
    fn return_delay_unit_us(&self) -> u32;

    /// A Read of `len` bytes at `address` from servo `id`, appended to `out`.
    fn read(&self, out: &mut Vec<u8>, id: u8, address: u16, len: u8);
    /// A Write of `data` at `address` to servo `id`, appended to `out`.
    fn write(&self, out: &mut Vec<u8>, id: u8, address: u16, data: &[u8]);
    /// The first packet of `input`.
    fn scan(&self, input: &[u8]) -> Scan;
    /// The error byte of a status packet as a refusal, in words (`None`: the request was done).
    fn refusal(&self, error: u8) -> Option<String>;
    /// A register's value from its bytes (the family's byte order).
    fn decode(&self, bytes: &[u8]) -> u32;
    /// A register's bytes for `value`.
    fn encode(&self, value: u32, len: u8) -> Vec<u8>;
    /// The single-byte Writes before a servo's registers are written (torque off first), and
    /// after them: (what, address, value).
    fn unlock(&self) -> &'static [(&'static str, u16, u8)];
    fn relock(&self) -> &'static [(&'static str, u16, u8)];

    /// The blocks read to compare a servo's calibration with its file: (address, bytes).
    fn calibration_blocks(&self) -> &'static [(u16, u8)];
    /// Those blocks against the file's `motor`: the first register that differs.
    fn check_calibration(&self, motor: &ServoRegisters, blocks: &[Vec<u8>])
    -> Result<(), Mismatch>;
}

/// Where a servo's value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `buses[i].joints.<dof>.servo`.
    Joint,
    /// `buses[i].servo`.
    Bus,
    /// LeRobot's value (the bus has a LeRobot calibration).
    LeRobot,
}

impl Source {
    pub const fn as_str(self) -> &'static str {
        match self {
            Source::Joint => "the joint's servo key",
            Source::Bus => "the bus's servo key",
            Source::LeRobot => "LeRobot's value",
        }
    }
}

/// `Some(value)`, or `None` for `keep`; absent keys are `Err(())`.
fn given(keys: &Keys, setting: &Setting) -> Result<Option<u32>, ()> {
    match keys.get(setting.key) {
        Some(KeyValue::Integer(v)) => Ok(u32::try_from(*v).ok()),
        Some(_) => Ok(None),
        None => Err(()),
    }
}

/// The values the servo of `drive` on `bus` is to hold, in writing order, each with where it
/// comes from (`keep` and registers the servos lack left out).
pub fn wanted(
    table: &dyn ServoTable,
    drive: &DriveSettings,
    bus: &BusSettings,
) -> Vec<(&'static Setting, u32, Source)> {
    let lerobot = bus.keys.get(lerobot::KEY).is_some();
    let motor = drive.keys.text(lerobot::MOTOR_KEY).unwrap_or(&drive.dof);
    table
        .settings()
        .iter()
        .filter(|s| table.has(s))
        .filter_map(|s| {
            let (value, source) = match (given(&drive.keys, s), given(&bus.keys, s)) {
                (Ok(v), _) => (v, Source::Joint),
                (Err(()), Ok(v)) => (v, Source::Bus),
                _ if lerobot => (table.lerobot(s, motor), Source::LeRobot),
                _ => (None, Source::LeRobot),
            };
            value.map(|v| (s, v, source))
        })
        .collect()
}

/// The value `drive`'s servo is to hold of `setting`, if any.
pub fn wanted_of(
    table: &dyn ServoTable,
    setting: &Setting,
    drive: &DriveSettings,
    bus: &BusSettings,
) -> Option<(u32, Source)> {
    wanted(table, drive, bus)
        .into_iter()
        .find(|(s, ..)| *s == setting)
        .map(|(_, v, source)| (v, source))
}

/// The bytes `drives`' answer delays take on a line at `baud`: each servo's Return_Delay_Time
/// as it is to hold it, else 0 (the values read at open are checked then).
pub fn delay_bytes(
    table: &dyn ServoTable,
    drives: &[&DriveSettings],
    bus: &BusSettings,
    baud: f64,
) -> f64 {
    let Some(delay) = table.return_delay() else {
        return 0.0;
    };
    let units: f64 = drives
        .iter()
        .map(|d| wanted_of(table, delay, d, bus).map_or(0.0, |(v, _)| f64::from(v)))
        .sum();
    units * f64::from(table.return_delay_unit_us()) * 1e-6 * baud / 10.0
}

/// Checks the `servo:` keys in `keys` (at `key`, a bus or a joint).
pub fn check_keys(table: &dyn ServoTable, keys: &Keys, key: &str, p: &mut Problems) {
    for s in table.settings() {
        let Some(value) = keys.get(s.key) else {
            continue;
        };
        let at = format!("{key}.{}", s.key);
        if !table.has(s) {
            p.add(at, table.lacking(s));
            continue;
        }
        let (lo, hi) = s.range;
        match value {
            KeyValue::Integer(v) if (i64::from(lo)..=i64::from(hi)).contains(v) => {
                if let Some(why) = u32::try_from(*v).ok().and_then(|v| table.refuses(s, v)) {
                    p.add(at, why);
                }
            }
            KeyValue::Integer(v) => p.add(
                at,
                format!(
                    "{} must be within {lo}..={hi} or `keep`, got {v}",
                    s.register
                ),
            ),
            KeyValue::Text(t) if t == "keep" => {}
            other => p.add(
                at,
                format!("expected a whole number or `keep`, got {other:?}"),
            ),
        }
    }
}

/// Why a bus's servos could not be set up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SetupError {
    #[error(
        "servo {id} ({joint}) did not answer {what} (3 tries of {timeout_ms} ms); check its \
         power, wiring and id (`lerobot-find-port`, `lerobot-setup-motors`); nothing was \
         enabled"
    )]
    NoAnswer {
        id: u8,
        joint: String,
        what: String,
        timeout_ms: u64,
    },
    #[error(
        "servo {id} ({joint}) refused {what} with status {status:#04x} ({faults}); clear its \
         fault (power it off and on) and start again; nothing was enabled"
    )]
    Refused {
        id: u8,
        joint: String,
        what: String,
        status: u8,
        faults: String,
    },
    #[error(
        "servo {id} ({joint}) did not take {register}: wanted {wanted} ({}), it reads \
         {read}; check that the servo is the model the bus's protocol says and its firmware \
         has the register, or leave the servo's value with `servo: {{{name}: keep}}` under \
         joint {joint}; nothing was enabled",
        from.as_str()
    )]
    NotTaken {
        id: u8,
        joint: String,
        register: &'static str,
        name: &'static str,
        wanted: u32,
        read: u32,
        from: Source,
    },
    /// Its calibration registers differ from the file (see
    /// [`Mismatch::describe`], which names the servo).
    #[error("{text}")]
    Calibration { id: u8, text: String },
    #[error(
        "the adapter echoes what motiond sends: {what} to servo {id} ({joint}) came back as \
         sent — a half-duplex adapter that does not switch direction itself (or TX wired to \
         RX); the servos' answers cannot be told from the echo: use an adapter with automatic \
         direction control (Feetech FE-URT-1, Waveshare Bus Servo Adapter, ROBOTIS U2D2) or \
         set its jumper for the servos' side; nothing was enabled"
    )]
    Echo { id: u8, joint: String, what: String },
    #[error("the line to the servos failed: {0}")]
    Io(String),
}

impl SetupError {
    /// The key below the bus (`joints.<dof>.servo.<name>` or `servo.<name>`) whose value a
    /// servo did not take, when a key gave it.
    pub fn key(&self) -> Option<String> {
        match self {
            SetupError::NotTaken {
                joint,
                name,
                from: Source::Joint,
                ..
            } => Some(format!("joints.{joint}.servo.{name}")),
            SetupError::NotTaken {
                name,
                from: Source::Bus,
                ..
            } => Some(format!("servo.{name}")),
            _ => None,
        }
    }
}

/// A servo to set up: its id, joint and values.
#[derive(Debug, Clone, PartialEq)]
pub struct ServoSetup {
    pub id: u8,
    pub joint: String,
    pub wanted: Vec<(&'static Setting, u32, Source)>,
    /// What its LeRobot calibration file says its calibration registers hold.
    pub calibration: Option<ServoRegisters>,
}

/// What setting up a bus found: each servo's Return_Delay_Time and the registers written.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    /// (id, Return_Delay_Time) of every servo, as they hold it now.
    pub return_delays: Vec<(u8, u32)>,
    /// (id, setting, value) of every register written.
    pub written: Vec<(u8, &'static Setting, u32)>,
}

/// One request and its status packet at a time, off the loop, with a deadline per try.
struct Wire<'a> {
    port: &'a mut dyn Port,
    table: &'a dyn ServoTable,
    timeout: Duration,
    rx: Vec<u8>,
}

const TRIES: u32 = 3;

impl Wire<'_> {
    /// Sends `packet` to servo `id` and returns its status packet's parameters.
    fn ask(
        &mut self,
        id: u8,
        joint: &str,
        what: &str,
        packet: &[u8],
    ) -> Result<Vec<u8>, SetupError> {
        for _ in 0..TRIES {
            self.drop_input()?;
            self.send(packet)?;
            if let Some((error, params)) = self.answer(id, packet).map_err(|e| match e {
                Answer::Echo => SetupError::Echo {
                    id,
                    joint: joint.to_string(),
                    what: what.to_string(),
                },
                Answer::Failed(e) => e,
            })? {
                if let Some(faults) = self.table.refusal(error) {
                    return Err(SetupError::Refused {
                        id,
                        joint: joint.to_string(),
                        what: what.to_string(),
                        status: error,
                        faults,
                    });
                }
                return Ok(params);
            }
        }
        Err(self.no_answer(id, joint, what.to_string()))
    }

    fn no_answer(&self, id: u8, joint: &str, what: String) -> SetupError {
        SetupError::NoAnswer {
            id,
            joint: joint.to_string(),
            what,
            timeout_ms: self.timeout.as_millis() as u64,
        }
    }

    fn drop_input(&mut self) -> Result<(), SetupError> {
        self.rx.clear();
        let mut buf = [0u8; 256];
        // Bounded: a line that never stops talking is not waited out.
        for _ in 0..64 {
            if read_port(self.port, &mut buf)? == 0 {
                break;
            }
        }
        Ok(())
    }

    fn send(&mut self, mut bytes: &[u8]) -> Result<(), SetupError> {
        let deadline = Instant::now() + self.timeout;
        while !bytes.is_empty() {
            match self.port.write(bytes) {
                Ok(n) if n > 0 => bytes = bytes.get(n..).unwrap_or_default(),
                Ok(_) if Instant::now() < deadline => pause(),
                Err(e) if retry(&e) && Instant::now() < deadline => pause(),
                Ok(_) => return Err(SetupError::Io("the device takes no bytes".into())),
                Err(e) => return Err(SetupError::Io(e.to_string())),
            }
        }
        Ok(())
    }

    /// The status packet of `id` (its error byte and parameters), `None` at the deadline.
    /// `request`, the bytes just sent, coming back first is an adapter's echo, never an answer:
    /// a servo answers only after the whole request, and its status packet differs from it (a
    /// Feetech Read echoed reads as a status with the instruction as its error byte).
    fn answer(&mut self, id: u8, request: &[u8]) -> Result<Option<(u8, Vec<u8>)>, Answer> {
        let deadline = Instant::now() + self.timeout;
        let mut buf = [0u8; 256];
        loop {
            let n = read_port(self.port, &mut buf)?;
            self.rx.extend_from_slice(buf.get(..n).unwrap_or_default());
            if self.rx.starts_with(request) {
                return Err(Answer::Echo);
            }
            let echo_so_far = !self.rx.is_empty() && request.starts_with(&self.rx);
            if echo_so_far && Instant::now() < deadline {
                // Maybe the start of an echo: wait for the rest before taking it as a packet.
                pause();
                continue;
            }
            loop {
                match self.table.scan(&self.rx) {
                    Scan::Status {
                        id: from,
                        error,
                        params,
                        len,
                    } => {
                        self.rx.drain(..len.min(self.rx.len()));
                        if from == id {
                            return Ok(Some((error, params)));
                        }
                    }
                    Scan::Drop(len) => {
                        // At least a byte: a scan that drops nothing would spin.
                        self.rx.drain(..len.max(1).min(self.rx.len()));
                    }
                    Scan::More => break,
                }
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            if n == 0 {
                pause();
            }
        }
    }

    /// Reads `len` bytes at `address` (`name`: what they are, for messages).
    fn read(
        &mut self,
        id: u8,
        joint: &str,
        name: &str,
        address: u16,
        len: u8,
    ) -> Result<Vec<u8>, SetupError> {
        let mut out = Vec::with_capacity(16);
        self.table.read(&mut out, id, address, len);
        let what = format!("the Read of {name}");
        let data = self.ask(id, joint, &what, &out)?;
        if data.len() != usize::from(len) {
            return Err(self.no_answer(id, joint, format!("{what} with {len} bytes")));
        }
        Ok(data)
    }

    /// Reads the whole register `setting` is in.
    fn read_register(&mut self, id: u8, joint: &str, setting: &Setting) -> Result<u32, SetupError> {
        let p = setting.place;
        let bytes = self.read(id, joint, setting.register, p.address, p.len)?;
        Ok(self.table.decode(&bytes))
    }

    /// Compares the calibration registers of servo `id` with its file's `motor`, by the rule
    /// the enable sequence applies too.
    fn verify(
        &mut self,
        (bus, id, joint): (&str, u8, &str),
        motor: &ServoRegisters,
    ) -> Result<(), SetupError> {
        let mut blocks = Vec::new();
        for &(address, len) in self.table.calibration_blocks() {
            blocks.push(self.read(id, joint, "the calibration registers", address, len)?);
        }
        self.table
            .check_calibration(motor, &blocks)
            .map_err(|m| SetupError::Calibration {
                id,
                text: m.describe(joint, Some((bus, id, Some(*motor)))),
            })
    }

    fn write(
        &mut self,
        id: u8,
        joint: &str,
        what: &str,
        address: u16,
        data: &[u8],
    ) -> Result<(), SetupError> {
        let mut out = Vec::with_capacity(16);
        self.table.write(&mut out, id, address, data);
        self.ask(id, joint, what, &out).map(drop)
    }
}

/// Why [`Wire::answer`] has no answer.
enum Answer {
    /// The request came back as sent.
    Echo,
    Failed(SetupError),
}

impl From<SetupError> for Answer {
    fn from(e: SetupError) -> Self {
        Answer::Failed(e)
    }
}

fn retry(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    )
}

/// A short wait between polls of a non-blocking port (at open only, never on the loop).
fn pause() {
    std::thread::sleep(Duration::from_micros(200));
}

fn read_port(port: &mut dyn Port, buf: &mut [u8]) -> Result<usize, SetupError> {
    loop {
        return match port.read(buf) {
            Ok(0) => Err(SetupError::Io("the device closed".into())),
            Ok(n) => Ok(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => Err(SetupError::Io(e.to_string())),
        };
    }
}

/// Sets up `servos` of bus `bus` on `port` (see the module's introduction); `timeout` per try
/// of a request.
pub fn set_up(
    table: &dyn ServoTable,
    port: &mut dyn Port,
    bus: &str,
    servos: &[ServoSetup],
    timeout: Duration,
) -> Result<Outcome, SetupError> {
    let mut wire = Wire {
        port,
        table,
        timeout,
        rx: Vec::with_capacity(256),
    };
    let mut outcome = Outcome::default();
    // A servo calibrated otherwise is refused before anything is written to any servo.
    for servo in servos {
        if let Some(motor) = &servo.calibration {
            wire.verify((bus, servo.id, &servo.joint), motor)?;
        }
    }
    for servo in servos {
        let (id, joint) = (servo.id, servo.joint.as_str());
        let mut changes = Vec::new();
        for &(setting, value, source) in &servo.wanted {
            let p = setting.place;
            let raw = wire.read_register(id, joint, setting)?;
            let want = (raw & !p.mask) | ((value << p.shift) & p.mask);
            if want != raw {
                changes.push((setting, value, want, source));
            }
        }
        if !changes.is_empty() {
            for &(what, address, value) in table.unlock() {
                wire.write(id, joint, what, address, &[value])?;
            }
            for &(setting, value, want, _) in &changes {
                let what = format!("the Write of {}", setting.register);
                let p = setting.place;
                wire.write(id, joint, &what, p.address, &table.encode(want, p.len))?;
                outcome.written.push((id, setting, value));
            }
            for &(setting, value, _, source) in &changes {
                let p = setting.place;
                let read = (wire.read_register(id, joint, setting)? & p.mask) >> p.shift;
                if read != value {
                    return Err(SetupError::NotTaken {
                        id,
                        joint: joint.to_string(),
                        register: setting.register,
                        name: setting.name(),
                        wanted: value,
                        read,
                        from: source,
                    });
                }
            }
            for &(what, address, value) in table.relock() {
                wire.write(id, joint, what, address, &[value])?;
            }
        }
        if let Some(delay) = table.return_delay().filter(|s| table.has(s)) {
            let held =
                (wire.read_register(id, joint, delay)? & delay.place.mask) >> delay.place.shift;
            outcome.return_delays.push((id, held));
        }
    }
    Ok(outcome)
}

/// A serial servo family's [`Family::prepare`](crate::backend::bus::Family::prepare): its servos `drives` on
/// `bus` set up (see the module's introduction), then the budget checked with the
/// Return_Delay_Time they hold.
pub fn prepare(
    table: &dyn ServoTable,
    port: &mut dyn Port,
    bus: &BusSettings,
    drives: &[&DriveSettings],
    rate_hz: f64,
    timeout: Duration,
) -> Result<(), OpenError> {
    let failed = |what: String| OpenError::Setup {
        bus: bus.name.clone(),
        what,
        key: None,
    };
    let servos: Vec<ServoSetup> = drives
        .iter()
        .map(|d| ServoSetup {
            id: d.id,
            joint: d.dof.clone(),
            wanted: wanted(table, d, bus),
            calibration: d.lerobot,
        })
        .collect();
    let outcome =
        set_up(table, port, &bus.name, &servos, timeout).map_err(|e| OpenError::Setup {
            bus: bus.name.clone(),
            what: match (&e, &bus.transport) {
                // The line itself is in question: say which one.
                (
                    SetupError::NoAnswer { .. } | SetupError::Echo { .. } | SetupError::Io(_),
                    Transport::Serial { device, baud, .. },
                ) => format!("{} at {baud} baud: {e}", device.display()),
                _ => e.to_string(),
            },
            key: e.key(),
        })?;
    for servo in &servos {
        let written: Vec<String> = outcome
            .written
            .iter()
            .filter(|(id, ..)| *id == servo.id)
            .map(|(_, setting, value)| format!("{} = {value}", setting.register))
            .collect();
        if !written.is_empty() {
            tracing::info!(
                "bus `{}`: servo {} ({}): wrote {} (torque off; read back)",
                bus.name,
                servo.id,
                servo.joint,
                written.join(", ")
            );
        }
    }
    let Some(delay) = table.return_delay() else {
        return Ok(());
    };
    let mut held = bus.clone();
    for d in &mut held.joints {
        if let Some((_, v)) = outcome.return_delays.iter().find(|(id, _)| *id == d.id) {
            d.keys.insert(delay.key, KeyValue::Integer(i64::from(*v)));
        }
    }
    let mut p = Problems::default();
    budget::check(&held, &bus.name, rate_hz, &mut p);
    if p.is_empty() {
        return Ok(());
    }
    let mut delays = outcome.return_delays;
    delays.sort_unstable();
    let delays: Vec<String> = delays
        .iter()
        .map(|(id, d)| format!("servo {id}: {d}"))
        .collect();
    let prefix = format!("bus `{}`: ", bus.name);
    let why: Vec<String> =
        p.0.iter()
            .map(|p| {
                p.message
                    .strip_prefix(&prefix)
                    .unwrap_or(&p.message)
                    .to_string()
            })
            .collect();
    Err(failed(format!(
        "its servos hold Return_Delay_Time ({}; {} µs units) and answer that much later, so {}",
        delays.join(", "),
        table.return_delay_unit_us(),
        why.join("; ")
    )))
}

/// What [`prepare`] would write to `drives` on `bus`, a line a servo, for `motiond check`.
pub fn prepared(
    table: &dyn ServoTable,
    bus: &BusSettings,
    drives: &[&DriveSettings],
) -> Vec<String> {
    let mut drives = drives.to_vec();
    drives.sort_by_key(|d| d.id);
    drives
        .into_iter()
        .filter_map(|d| {
            let wanted = wanted(table, d, bus);
            if wanted.is_empty() {
                return None;
            }
            let mut line = format!("bus {}, servo {} ({}):", bus.name, d.id, d.dof);
            for (k, (setting, value, source)) in wanted.iter().enumerate() {
                let sep = if k == 0 { " " } else { ", " };
                let _ = write!(line, "{sep}{} = {value}", setting.register);
                if *source != Source::LeRobot {
                    let _ = write!(line, " ({})", source.as_str());
                }
            }
            Some(line)
        })
        .collect()
}
