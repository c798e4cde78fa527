//! What a Feetech bus writes to its servos' control tables when it opens, before the loop starts
//! and before any torque goes on: the settings LeRobot writes when it connects an arm
//! (`FeetechMotorsBus.configure_motors` and the SO followers' `configure`, lerobot 0.6.2), as
//! `servo:` keys of the bus (every servo) and of each joint (that servo), each register's value
//! or `keep` (leave what the servo has).
//!
//! With a LeRobot calibration on the bus, LeRobot's values are the defaults: every servo gets
//! Return_Delay_Time 0, Acceleration 254 and on STS Maximum_Acceleration 254, Operating_Mode 0
//! (position), P/I/D_Coefficient 16/0/32 and the Phase register's bit 4 cleared (angle feedback
//! mode 0: positions within one turn); the motor named `gripper` on STS also Max_Torque_Limit 500,
//! Protection_Current 250 and Overload_Torque 25. Without one nothing is written unless a key
//! says so.
//!
//! At open each servo's registers are read; only a servo with a register to change is touched:
//! Torque_Enable 0, Lock 0 (EEPROM writes kept, as the SDK's `unLockEprom` and LeRobot's
//! `disable_torque` do), a Write of each register that differs, each read back, then Lock 1 (as
//! LeRobot's `enable_torque` leaves it). A servo whose settings hold already is not written
//! (its EEPROM is not worn, and a servo holding a position keeps its torque). A value a servo
//! does not take refuses the open, naming the bus, the servo, the register, both values and what
//! to do. Return_Delay_Time is read from every servo, whatever the keys, and the bus budget is
//! checked again with what the servos hold.

use std::io;
use std::time::{Duration, Instant};

use super::calibration;
use super::codec::{self as ft, Fault, Series, reg};
use crate::backend::bus::settings::{
    BusSettings, DriveSettings, KeyValue, Keys, Param, ParamKind, Problems,
};
use crate::backend::lerobot_calibration as lerobot;
use crate::backend::servo_registers::ServoRegisters;
use crate::backend::transport::serial::Port;

/// A register (or, for the angle feedback mode, a bit of one) a `servo:` key sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    ReturnDelayTime,
    Acceleration,
    MaximumAcceleration,
    OperatingMode,
    PCoefficient,
    ICoefficient,
    DCoefficient,
    AngleFeedbackMode,
    MaxTorqueLimit,
    ProtectionCurrent,
    OverloadTorque,
}

/// Where a register sits: address, bytes, and the bits of it the setting is (`0xFF`: all).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    pub address: u8,
    pub len: u8,
    pub mask: u16,
    pub shift: u8,
}

impl Setting {
    /// In the order they are written (LeRobot's).
    pub const ALL: [Setting; 11] = [
        Setting::ReturnDelayTime,
        Setting::MaximumAcceleration,
        Setting::Acceleration,
        Setting::AngleFeedbackMode,
        Setting::OperatingMode,
        Setting::PCoefficient,
        Setting::ICoefficient,
        Setting::DCoefficient,
        Setting::MaxTorqueLimit,
        Setting::ProtectionCurrent,
        Setting::OverloadTorque,
    ];

    /// Its key under `servo:`.
    pub const fn key(self) -> &'static str {
        match self {
            Setting::ReturnDelayTime => "servo.return_delay_time",
            Setting::Acceleration => "servo.acceleration",
            Setting::MaximumAcceleration => "servo.maximum_acceleration",
            Setting::OperatingMode => "servo.operating_mode",
            Setting::PCoefficient => "servo.p_coefficient",
            Setting::ICoefficient => "servo.i_coefficient",
            Setting::DCoefficient => "servo.d_coefficient",
            Setting::AngleFeedbackMode => "servo.angle_feedback_mode",
            Setting::MaxTorqueLimit => "servo.max_torque_limit",
            Setting::ProtectionCurrent => "servo.protection_current",
            Setting::OverloadTorque => "servo.overload_torque",
        }
    }

    /// The register's name in LeRobot's control table (`lerobot/motors/feetech/tables.py`).
    pub const fn register(self) -> &'static str {
        match self {
            Setting::ReturnDelayTime => "Return_Delay_Time",
            Setting::Acceleration => "Acceleration",
            Setting::MaximumAcceleration => "Maximum_Acceleration",
            Setting::OperatingMode => "Operating_Mode",
            Setting::PCoefficient => "P_Coefficient",
            Setting::ICoefficient => "I_Coefficient",
            Setting::DCoefficient => "D_Coefficient",
            Setting::AngleFeedbackMode => "Phase bit 4",
            Setting::MaxTorqueLimit => "Max_Torque_Limit",
            Setting::ProtectionCurrent => "Protection_Current",
            Setting::OverloadTorque => "Overload_Torque",
        }
    }

    /// Where it is on `series`; `None` where the series has no such register (SCS: LeRobot's
    /// `SCS_SERIES_CONTROL_TABLE` has no Operating_Mode, Protection_Current, Overload_Torque or
    /// Maximum_Acceleration, and LeRobot changes the Phase bit on the STS3215 only).
    pub const fn place(self, series: Series) -> Option<Place> {
        let sts = matches!(series, Series::Sts);
        let (address, len, mask, shift) = match self {
            Setting::ReturnDelayTime => (reg::RETURN_DELAY, 1, 0xFF, 0),
            Setting::MaxTorqueLimit => (16, 2, 0xFFFF, 0),
            Setting::AngleFeedbackMode if sts => (18, 1, 0x10, 4),
            Setting::PCoefficient => (21, 1, 0xFF, 0),
            Setting::DCoefficient => (22, 1, 0xFF, 0),
            Setting::ICoefficient => (23, 1, 0xFF, 0),
            Setting::ProtectionCurrent if sts => (28, 2, 0xFFFF, 0),
            Setting::OperatingMode if sts => (33, 1, 0xFF, 0),
            Setting::OverloadTorque if sts => (36, 1, 0xFF, 0),
            Setting::Acceleration => (reg::ACCELERATION, 1, 0xFF, 0),
            Setting::MaximumAcceleration if sts => (85, 1, 0xFF, 0),
            _ => return None,
        };
        Some(Place {
            address,
            len,
            mask,
            shift,
        })
    }

    /// The values a key may give.
    pub const fn range(self) -> (u16, u16) {
        match self {
            // 2 µs units (LeRobot writes 0, the factory 250).
            Setting::ReturnDelayTime => (0, 254),
            // 100 counts/s² units (0: no ramp).
            Setting::Acceleration | Setting::MaximumAcceleration => (0, 254),
            // motiond commands positions only.
            Setting::OperatingMode => (0, 0),
            Setting::PCoefficient | Setting::ICoefficient | Setting::DCoefficient => (0, 255),
            Setting::AngleFeedbackMode => (0, 1),
            // 0.1 % of the stall torque.
            Setting::MaxTorqueLimit => (0, 1000),
            Setting::ProtectionCurrent => (0, u16::MAX),
            // % of the stall torque.
            Setting::OverloadTorque => (0, 100),
        }
    }

    /// LeRobot's value on connect for a servo of `series` (`gripper`: the motor named so).
    pub const fn lerobot(self, series: Series, gripper: bool) -> Option<u16> {
        let sts = matches!(series, Series::Sts);
        match self {
            Setting::ReturnDelayTime => Some(0),
            Setting::Acceleration => Some(254),
            // The SO followers' `configure` (STS3215 arms).
            Setting::MaximumAcceleration if sts => Some(254),
            Setting::OperatingMode if sts => Some(0),
            Setting::PCoefficient if sts => Some(16),
            Setting::ICoefficient if sts => Some(0),
            Setting::DCoefficient if sts => Some(32),
            Setting::AngleFeedbackMode if sts => Some(0),
            Setting::MaxTorqueLimit if sts && gripper => Some(500),
            Setting::ProtectionCurrent if sts && gripper => Some(250),
            Setting::OverloadTorque if sts && gripper => Some(25),
            _ => None,
        }
    }
}

/// The keys of `servo:`, on a bus and on a joint.
pub const PARAMS: [Param; 11] = {
    let mut out = [Param::same("", ParamKind::IntegerOrKeep); 11];
    let mut i = 0;
    while i < Setting::ALL.len() {
        out[i] = Param::same(Setting::ALL[i].key(), ParamKind::IntegerOrKeep);
        i += 1;
    }
    out
};

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
fn given(keys: &Keys, setting: Setting) -> Result<Option<u16>, ()> {
    match keys.get(setting.key()) {
        Some(KeyValue::Integer(v)) => Ok(u16::try_from(*v).ok()),
        Some(_) => Ok(None),
        None => Err(()),
    }
}

/// The values the servo of `drive` on `bus` is to hold, in writing order, each with where it
/// comes from (`keep` and registers the series lacks left out).
pub fn wanted(
    drive: &DriveSettings,
    bus: &BusSettings,
    series: Series,
) -> Vec<(Setting, u16, Source)> {
    let lerobot = bus.keys.get(lerobot::KEY).is_some();
    let gripper = drive.keys.text(lerobot::MOTOR_KEY).unwrap_or(&drive.dof) == "gripper";
    Setting::ALL
        .into_iter()
        .filter(|s| s.place(series).is_some())
        .filter_map(|s| {
            let (value, source) = match (given(&drive.keys, s), given(&bus.keys, s)) {
                (Ok(v), _) => (v, Source::Joint),
                (Err(()), Ok(v)) => (v, Source::Bus),
                _ if lerobot => (s.lerobot(series, gripper), Source::LeRobot),
                _ => (None, Source::LeRobot),
            };
            value.map(|v| (s, v, source))
        })
        .collect()
}

/// The Return_Delay_Time the budget counts for the servo of `drive`: what it is to hold, else
/// 0 (the value read at open is checked then).
pub fn return_delay(drive: &DriveSettings, bus: &BusSettings, series: Series) -> u16 {
    wanted(drive, bus, series)
        .into_iter()
        .find(|(s, ..)| *s == Setting::ReturnDelayTime)
        .map_or(0, |(_, v, _)| v)
}

/// Checks the `servo:` keys in `keys` (at `key`, a bus or a joint) for `series` and `family`.
pub fn check_keys(keys: &Keys, key: &str, series: Series, family: &str, p: &mut Problems) {
    for s in Setting::ALL {
        let Some(value) = keys.get(s.key()) else {
            continue;
        };
        let at = format!("{key}.{}", s.key());
        if s.place(series).is_none() {
            p.add(
                at,
                format!(
                    "{family} servos have no {}: remove the key (or use protocol `feetech` for \
                     STS/SMS servos)",
                    s.register()
                ),
            );
            continue;
        }
        let (lo, hi) = s.range();
        match value {
            KeyValue::Integer(v) if (i64::from(lo)..=i64::from(hi)).contains(v) => {}
            KeyValue::Integer(v) if s == Setting::OperatingMode => p.add(
                at,
                format!(
                    "motiond commands positions only: Operating_Mode must be 0 (position) or \
                     `keep`, got {v}"
                ),
            ),
            KeyValue::Integer(v) => p.add(
                at,
                format!(
                    "{} must be within {lo}..={hi} or `keep`, got {v}",
                    s.register()
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
         power, wiring and id (`lerobot-find-port`, `lerobot-setup-motors`); nothing was enabled"
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
        "servo {id} ({joint}) did not take {register}: wanted {wanted} ({from}), it reads \
         {read}; check that the servo is the model the bus's protocol says and its firmware \
         has the register, or leave the servo's value with `{key}: keep` under this joint; \
         nothing was enabled"
    )]
    NotTaken {
        id: u8,
        joint: String,
        register: &'static str,
        key: &'static str,
        wanted: u16,
        read: u16,
        from: &'static str,
    },
    /// Its calibration registers differ from the file (see
    /// [`Mismatch::describe`](crate::backend::servo_registers::Mismatch::describe), which names
    /// the servo).
    #[error("{text}")]
    Calibration { id: u8, text: String },
    #[error("the line to the servos failed: {0}")]
    Io(String),
}

/// A servo to set up: its id, joint and values.
#[derive(Debug, Clone, PartialEq)]
pub struct ServoSetup {
    pub id: u8,
    pub joint: String,
    pub wanted: Vec<(Setting, u16, Source)>,
    /// What its LeRobot calibration file says its calibration registers hold.
    pub calibration: Option<ServoRegisters>,
}

/// What setting up a bus found: each servo's Return_Delay_Time and the registers written.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    /// (id, Return_Delay_Time) of every servo, as they hold it now.
    pub return_delays: Vec<(u8, u16)>,
    /// (id, setting, value) of every register written.
    pub written: Vec<(u8, Setting, u16)>,
}

/// One request and its status packet at a time, off the loop, with a deadline per try.
struct Wire<'a> {
    port: &'a mut dyn Port,
    series: Series,
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
            if let Some((error, params)) = self.answer(id)? {
                if Fault::of(error).next().is_some() {
                    let faults: Vec<&str> = Fault::of(error).map(Fault::as_str).collect();
                    return Err(SetupError::Refused {
                        id,
                        joint: joint.to_string(),
                        what: what.to_string(),
                        status: error,
                        faults: faults.join(", "),
                    });
                }
                return Ok(params);
            }
        }
        Err(SetupError::NoAnswer {
            id,
            joint: joint.to_string(),
            what: what.to_string(),
            timeout_ms: self.timeout.as_millis() as u64,
        })
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

    /// The status packet of `id` (its status byte and parameters), `None` at the deadline.
    fn answer(&mut self, id: u8) -> Result<Option<(u8, Vec<u8>)>, SetupError> {
        let deadline = Instant::now() + self.timeout;
        let mut buf = [0u8; 256];
        loop {
            let n = read_port(self.port, &mut buf)?;
            self.rx.extend_from_slice(buf.get(..n).unwrap_or_default());
            loop {
                match ft::scan(&self.rx) {
                    ft::Scan::Status {
                        id: from,
                        error,
                        params,
                        len,
                    } => {
                        let found = (from == id).then(|| (error, params.to_vec()));
                        self.rx.drain(..len);
                        if found.is_some() {
                            return Ok(found);
                        }
                    }
                    ft::Scan::Corrupt { len } | ft::Scan::Skip(len) => {
                        self.rx.drain(..len.min(self.rx.len()));
                    }
                    ft::Scan::More => break,
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

    /// Reads the register `name` at `place` (its whole bytes, in the series' byte order).
    fn read(&mut self, id: u8, joint: &str, name: &str, place: Place) -> Result<u16, SetupError> {
        let mut out = [0u8; 8];
        let n = ft::read(&mut out, id, place.address, place.len);
        let what = format!("the Read of {name}");
        match (
            place.len,
            self.ask(id, joint, &what, out.get(..n).unwrap_or_default())?
                .as_slice(),
        ) {
            (1, [b]) => Ok(u16::from(*b)),
            (2, [a, b]) => Ok(self.series.unword([*a, *b])),
            _ => Err(SetupError::NoAnswer {
                id,
                joint: joint.to_string(),
                what: format!("{what} with {} bytes", place.len),
                timeout_ms: self.timeout.as_millis() as u64,
            }),
        }
    }

    fn read_register(
        &mut self,
        id: u8,
        joint: &str,
        setting: Setting,
        place: Place,
    ) -> Result<u16, SetupError> {
        self.read(id, joint, setting.register(), place)
    }

    /// Compares the calibration registers of servo `id` with its file's `motor`, by the rule the
    /// enable sequence applies too ([`calibration::check`]).
    fn verify(
        &mut self,
        (bus, id, joint): (&str, u8, &str),
        motor: &ServoRegisters,
    ) -> Result<(), SetupError> {
        let mut out = [0u8; 8];
        let n = ft::read(&mut out, id, calibration::ADDRESS, calibration::LEN);
        let what = "the Read of the calibration registers";
        let block = self.ask(id, joint, what, out.get(..n).unwrap_or_default())?;
        if block.len() != usize::from(calibration::LEN) {
            return Err(SetupError::NoAnswer {
                id,
                joint: joint.to_string(),
                what: format!("{what} with {} bytes", calibration::LEN),
                timeout_ms: self.timeout.as_millis() as u64,
            });
        }
        calibration::check(self.series, motor, &block).map_err(|m| SetupError::Calibration {
            id,
            text: m.describe(joint, Some((bus, id, Some(*motor)))),
        })
    }

    fn write_bytes(
        &mut self,
        id: u8,
        joint: &str,
        what: &str,
        address: u8,
        data: &[u8],
    ) -> Result<(), SetupError> {
        let mut out = [0u8; 16];
        let n = ft::write(&mut out, id, address, data);
        self.ask(id, joint, what, out.get(..n).unwrap_or_default())
            .map(drop)
    }

    fn write_register(
        &mut self,
        id: u8,
        joint: &str,
        setting: Setting,
        place: Place,
        raw: u16,
    ) -> Result<(), SetupError> {
        let what = format!("the Write of {}", setting.register());
        if place.len == 1 {
            self.write_bytes(id, joint, &what, place.address, &[raw as u8])
        } else {
            let word = self.series.word(raw);
            self.write_bytes(id, joint, &what, place.address, &word)
        }
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
    port: &mut dyn Port,
    bus: &str,
    series: Series,
    servos: &[ServoSetup],
    timeout: Duration,
) -> Result<Outcome, SetupError> {
    let mut wire = Wire {
        port,
        series,
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
            let Some(place) = setting.place(series) else {
                continue;
            };
            let raw = wire.read_register(id, joint, setting, place)?;
            let want = (raw & !place.mask) | ((value << place.shift) & place.mask);
            if want != raw {
                changes.push((setting, place, value, want, source));
            }
        }
        if !changes.is_empty() {
            wire.write_bytes(id, joint, "Torque_Enable 0", reg::TORQUE_ENABLE, &[0])?;
            wire.write_bytes(id, joint, "Lock 0", series.lock(), &[0])?;
            for &(setting, place, value, want, _) in &changes {
                wire.write_register(id, joint, setting, place, want)?;
                outcome.written.push((id, setting, value));
            }
            for &(setting, place, value, _, source) in &changes {
                let raw = wire.read_register(id, joint, setting, place)?;
                let read = (raw & place.mask) >> place.shift;
                if read != value {
                    return Err(SetupError::NotTaken {
                        id,
                        joint: joint.to_string(),
                        register: setting.register(),
                        key: setting.key(),
                        wanted: value,
                        read,
                        from: source.as_str(),
                    });
                }
            }
            wire.write_bytes(id, joint, "Lock 1", series.lock(), &[1])?;
        }
        let place = Setting::ReturnDelayTime.place(series);
        if let Some(place) = place {
            let delay = wire.read_register(id, joint, Setting::ReturnDelayTime, place)?;
            outcome.return_delays.push((id, delay));
        }
    }
    Ok(outcome)
}
