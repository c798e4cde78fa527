//! What the backend is built from: plain, validated data (buses, their drives, each family's own
//! keys) and the vocabulary the families use to declare and check their keys. `config` builds
//! these from the YAML file (positions and all); tests and tools may build them directly. Nothing
//! here reads a file.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::Family;
use crate::backend::servo_registers::ServoRegisters;

/// A problem in one configured value: the key path (e.g. `buses[0].joints.base_yaw.mit.kp`) and
/// what is wrong with the value. Whoever read the file turns the key into FILE:LINE:COL.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub key: String,
    pub message: String,
    /// The problem is the key itself (unknown, misplaced), not its value.
    pub about_key: bool,
}

/// Problems found while validating, all reported together.
#[derive(Debug, Default)]
pub struct Problems(pub Vec<Problem>);

impl Problems {
    pub fn add(&mut self, key: impl Into<String>, message: impl Into<String>) {
        self.0.push(Problem {
            key: key.into(),
            message: message.into(),
            about_key: false,
        });
    }

    /// A problem with the key itself (unknown, misplaced).
    pub fn add_key(&mut self, key: impl Into<String>, message: impl Into<String>) {
        self.0.push(Problem {
            key: key.into(),
            message: message.into(),
            about_key: true,
        });
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Joint units (rad or m) ↔ drive units (counts, turns or motor rad): `drive = scale·joint + offset`,
/// with gear ratio and direction folded into `scale`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Units {
    pub scale: f64,
    pub offset: f64,
}

impl Units {
    pub fn to_drive(&self, joint: f64) -> f64 {
        self.scale * joint + self.offset
    }

    pub fn to_joint(&self, drive: f64) -> f64 {
        (drive - self.offset) / self.scale
    }

    /// Rates (velocity, acceleration) carry no offset.
    pub fn rate_to_drive(&self, joint_rate: f64) -> f64 {
        self.scale * joint_rate
    }

    pub fn rate_to_joint(&self, drive_rate: f64) -> f64 {
        drive_rate / self.scale
    }
}

/// How a family's drives count position: the key giving drive units per joint unit (before the
/// gear), its default, and the drive position at joint position 0 by default.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UnitKeys {
    /// `counts_per_unit`, `turns_per_unit`, or `None` when the drive takes joint units (MIT).
    pub per_unit: Option<&'static str>,
    pub default_per_unit: Option<f64>,
    pub default_zero_offset: f64,
}

/// How a servo family's position counts relate to LeRobot's normalisation: counts a turn, and
/// whether LeRobot's bus for the family applies a motor's `drive_mode` in software (Feetech) or
/// leaves it to the servo's own Drive_Mode register (DYNAMIXEL).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServoCounts {
    pub resolution: u32,
    pub applies_drive_mode: bool,
    /// The largest Homing_Offset the servo holds (either sign).
    pub homing_offset_max: i64,
}

/// A key a family owns (`Param::same`), or a `<ros2_control>` `<param name>` and the configuration
/// key it fills (`Param::alias`; below `buses[i]` or `buses[i].joints.<dof>`; `.` nests, as in
/// `mit.kp`). Each family lists its own, so what a key means is decided where the protocol is
/// understood.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Param {
    /// The key as written (the `<param name>` for an alias).
    pub name: &'static str,
    /// The configuration key it fills.
    pub key: &'static str,
    pub kind: ParamKind,
}

impl Param {
    /// A key the family owns, also taken as a `<param>` of that name.
    pub const fn same(key: &'static str, kind: ParamKind) -> Param {
        Param {
            name: key,
            key,
            kind,
        }
    }

    /// A param of a ros2_control hardware plugin's own name for a configuration key.
    pub const fn alias(name: &'static str, key: &'static str, kind: ParamKind) -> Param {
        Param { name, key, kind }
    }

    /// Whether this is a key of its own rather than another name for one.
    pub fn is_key(&self) -> bool {
        self.name == self.key
    }

    /// `head` then `tail` as one list, in a const: a family's keys from lists shared with
    /// others. `N` is their lengths' sum (checked when the const is evaluated).
    pub const fn joined<const N: usize>(head: &[Param], tail: &[Param]) -> [Param; N] {
        assert!(
            head.len() + tail.len() == N,
            "N must be head.len() + tail.len()"
        );
        let mut out = [Param::same("", ParamKind::Number); N];
        let mut i = 0;
        while i < N {
            out[i] = if i < head.len() {
                head[i]
            } else {
                tail[i - head.len()]
            };
            i += 1;
        }
        out
    }
}

/// What a setting's value must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamKind {
    /// A whole number (ids, bit rates).
    Integer,
    /// A finite decimal number.
    Number,
    /// Text as written, without surrounding whitespace.
    Text,
    /// `true` or `false`.
    Bool,
    /// A whole number, or `keep`: leave what the device holds (a servo register).
    IntegerOrKeep,
}

impl ParamKind {
    /// What a value of this kind is, in people's words.
    pub fn words(self) -> &'static str {
        match self {
            ParamKind::Integer => "a whole number",
            ParamKind::Number => "a number",
            ParamKind::Text => "text",
            ParamKind::Bool => "true or false",
            ParamKind::IntegerOrKeep => "a whole number or `keep`",
        }
    }
}

/// What a ros2_control hardware plugin says about its bus: the transport and drive protocol it
/// speaks, which a block naming it in `<hardware><plugin>` implies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plugin {
    pub name: &'static str,
    /// `can` or `serial`.
    pub transport: &'static str,
    /// The drives' protocol.
    pub protocol: &'static str,
}

/// One value of a family's own key, of the kind its [`Param`] declares.
#[derive(Debug, Clone, PartialEq)]
pub enum KeyValue {
    Integer(i64),
    Number(f64),
    Text(String),
    Bool(bool),
}

/// A family's own keys of one drive or bus as written, by dotted key (`mit.kp`), each of the kind
/// the family declares. The family reads its typed settings from them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Keys(BTreeMap<String, KeyValue>);

impl Keys {
    pub fn insert(&mut self, key: impl Into<String>, value: KeyValue) {
        self.0.insert(key.into(), value);
    }

    pub fn get(&self, key: &str) -> Option<&KeyValue> {
        self.0.get(key)
    }

    /// A number (whole numbers too).
    pub fn number(&self, key: &str) -> Option<f64> {
        match self.0.get(key)? {
            KeyValue::Number(x) => Some(*x),
            KeyValue::Integer(i) => Some(*i as f64),
            _ => None,
        }
    }

    pub fn integer(&self, key: &str) -> Option<i64> {
        match self.0.get(key)? {
            KeyValue::Integer(i) => Some(*i),
            _ => None,
        }
    }

    pub fn text(&self, key: &str) -> Option<&str> {
        match self.0.get(key)? {
            KeyValue::Text(t) => Some(t),
            _ => None,
        }
    }

    pub fn bool(&self, key: &str) -> Option<bool> {
        match self.0.get(key)? {
            KeyValue::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// Whether any key starts with `prefix` (a nested mapping such as `mit` was given).
    pub fn any_under(&self, prefix: &str) -> bool {
        self.0
            .keys()
            .any(|k| k.strip_prefix(prefix).is_some_and(|r| r.starts_with('.')))
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &KeyValue)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }
}

/// The link a bus runs on.
#[derive(Debug, Clone, PartialEq)]
pub enum Transport {
    /// A SocketCAN interface; `data_bitrate`: its CAN-FD data phase (for the budget).
    Can {
        interface: String,
        bitrate: u32,
        data_bitrate: u32,
    },
    /// A serial CAN adapter speaking SLCAN; `data_bitrate`: its CAN-FD data phase, set with `Yn`
    /// when the bus carries CAN-FD frames.
    Slcan {
        device: PathBuf,
        baud: Option<u32>,
        bitrate: u32,
        data_bitrate: u32,
    },
    /// A serial line owned by one serial family (DYNAMIXEL).
    Serial {
        device: PathBuf,
        baud: u32,
        /// The family speaking on the line.
        family: &'static dyn Family,
    },
}

impl Transport {
    /// `can`, `slcan` or `serial`: whose words the bus's own codes are in.
    pub fn name(&self) -> &'static str {
        match self {
            Transport::Can { .. } => "can",
            Transport::Slcan { .. } => "slcan",
            Transport::Serial { .. } => "serial",
        }
    }

    /// Whether CAN frames flow on it (SocketCAN or SLCAN).
    pub fn is_can(&self) -> bool {
        !matches!(self, Transport::Serial { .. })
    }
}

/// One validated bus.
#[derive(Debug, Clone, PartialEq)]
pub struct BusSettings {
    pub name: String,
    pub transport: Transport,
    pub max_load: f64,
    pub feedback_timeout_ms: f64,
    /// The drives' watchdog timeout in ms (0: off).
    pub watchdog_ms: f64,
    /// The families' own bus keys as written (CiA 402's `heartbeat_ms`, DYNAMIXEL's `sync_read`).
    pub keys: Keys,
    /// In ascending DOF-name order.
    pub joints: Vec<DriveSettings>,
}

impl BusSettings {
    /// Whether a drive here speaks CAN-FD.
    pub fn fd(&self) -> bool {
        self.joints.iter().any(|j| j.family.fd())
    }
}

/// One validated drive.
#[derive(Debug, Clone, PartialEq)]
pub struct DriveSettings {
    pub dof: String,
    pub id: u8,
    /// The family that speaks to it (`protocol:`), one of [`FAMILIES`](crate::backend::family::FAMILIES).
    pub family: &'static dyn Family,
    pub units: Units,
    /// Joint-side inertia for the torque feed-forward of force actuators.
    pub inertia: f64,
    pub gear_ratio: f64,
    pub direction: f64,
    /// The family's own keys of this drive as written.
    pub keys: Keys,
    /// What the bus's LeRobot calibration file (`lerobot_calibration`) says its servo's own
    /// registers hold, checked before it is enabled.
    pub lerobot: Option<ServoRegisters>,
}
