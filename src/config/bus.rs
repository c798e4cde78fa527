//! Bus and per-joint drive settings: the `buses:` section of the configuration (issue 7).
//!
//! The config module deserializes `buses:` into [`RawBus`] entries and calls [`validate`], which
//! checks every value (naming the key path and the value), converts units into one affine map per
//! joint, checks CAN ids for collisions and refuses a bus whose traffic per tick would exceed its
//! maximum load at the control rate. What depends on the skeleton (actuator → command mode, joint
//! limits inside the drive's range) is checked by [`check_joints`] when the backend opens.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use serde::Deserialize;

use crate::backend::proto::{
    self, Param, ParamKind, Plugin, Problem, Problems, UnitKeys, Units, cia402, dynamixel, mit,
    odrive, slcan,
};
use crate::robot::Actuator;
use crate::trajectory::JointSet;

/// One `buses:` entry as written.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBus {
    pub name: String,
    /// `can` (SocketCAN interface), `slcan` (serial CAN adapter) or `serial` (Dynamixel).
    pub transport: String,
    /// SocketCAN interface name (`can`).
    pub interface: Option<String>,
    /// Serial device path (`slcan`, `serial`).
    pub device: Option<String>,
    /// Serial line rate in bit/s (`serial`: required; `slcan`: optional, then also budgeted).
    pub baud: Option<u32>,
    /// CAN bitrate in bit/s (`can`, `slcan`; default 1 000 000).
    pub bitrate: Option<u32>,
    /// Serial protocol (`serial`): `dynamixel`.
    pub protocol: Option<String>,
    /// Highest fraction of the bus the per-tick traffic may take (default 0.7).
    pub max_load: Option<f64>,
    /// A drive whose feedback is missing this long is a fault (default 50 ms).
    pub feedback_timeout_ms: Option<f64>,
    /// Dynamixel: read Present Position every tick with a Sync Read (default true).
    pub sync_read: Option<bool>,
    /// The drives' own watchdog: a drive that hears nothing from motiond this long stops its
    /// motor (default: 5 control periods, rounded up to what the protocol can express; 0: off).
    pub watchdog_ms: Option<f64>,
    /// CiA 402: the drives' heartbeat period (0x1017); one missing for twice this long is a fault
    /// (default 20 ms).
    pub heartbeat_ms: Option<f64>,
    /// CiA 402: the node id motiond's own heartbeat is sent with, which the drives consume
    /// (0x1016; default 127).
    pub master_id: Option<i64>,
    /// CiA 402: what a drive does when motiond's heartbeat stops (0x6007): `quick_stop`
    /// (default), `disable_voltage` or `fault`.
    pub on_connection_loss: Option<String>,
    /// Drives on this bus, keyed by DOF name.
    #[serde(default)]
    pub joints: BTreeMap<String, RawJoint>,
}

/// One drive as written, under `buses[i].joints.<dof>`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawJoint {
    /// `cia402`, `odrive` or `mit` on CAN buses; `dynamixel` (the default) on serial buses.
    pub protocol: Option<String>,
    /// CANopen node id, ODrive node id, MIT motor id or Dynamixel id.
    pub id: i64,
    /// Drive position units per joint unit (rad or m) before the gear: encoder counts (CiA 402,
    /// Dynamixel; default 4096/2π for Dynamixel).
    pub counts_per_unit: Option<f64>,
    /// Motor turns per joint unit before the gear (ODrive; default 1/2π).
    pub turns_per_unit: Option<f64>,
    /// Motor turns per output turn (default 1).
    pub gear_ratio: Option<f64>,
    /// 1 or -1 (default 1).
    pub direction: Option<i64>,
    /// Drive position at joint position 0, in drive units (default 0; Dynamixel 2048).
    pub zero_offset: Option<f64>,
    /// Joint-side inertia [kg·m² or kg] for the torque feed-forward of `force` actuators (default 0).
    pub inertia: Option<f64>,
    /// MIT mode ranges and gains.
    pub mit: Option<mit::settings::RawMit>,
    /// ODrive firmware line: `"0.5"` or `"0.6"` (default): Clear_Errors and the watchdog differ.
    pub firmware: Option<String>,
    /// ODrive 0.6: endpoint ids of `axis0.config.watchdog_timeout` and
    /// `axis0.config.enable_watchdog` in the firmware's flat_endpoints.json, so the axis watchdog
    /// is armed over CAN at enable. Without them it must be enabled on the drive.
    pub endpoints: Option<odrive::settings::RawEndpoints>,
}

/// One validated bus.
#[derive(Debug, Clone, PartialEq)]
pub struct Bus {
    pub name: String,
    pub transport: Transport,
    pub max_load: f64,
    pub feedback_timeout_ms: f64,
    /// The drives' watchdog timeout in ms (0: off).
    pub watchdog_ms: f64,
    /// CiA 402 settings of this bus (defaults when it has no CiA 402 drive).
    pub cia402: cia402::settings::BusSettings,
    /// In ascending DOF-name order.
    pub joints: Vec<BusJoint>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Transport {
    Can {
        interface: String,
        bitrate: u32,
    },
    Slcan {
        device: PathBuf,
        baud: Option<u32>,
        bitrate: u32,
    },
    Dynamixel {
        device: PathBuf,
        baud: u32,
        sync_read: bool,
    },
}

/// One validated drive.
#[derive(Debug, Clone, PartialEq)]
pub struct BusJoint {
    pub dof: String,
    pub id: u8,
    pub protocol: Protocol,
    pub units: Units,
    /// Joint-side inertia for the torque feed-forward of force actuators.
    pub inertia: f64,
    pub gear_ratio: f64,
    pub direction: f64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Protocol {
    Cia402,
    Odrive(odrive::settings::Settings),
    Mit(mit::settings::Settings),
    Dynamixel,
}

impl Protocol {
    pub fn as_str(&self) -> &'static str {
        match self {
            Protocol::Cia402 => "cia402",
            Protocol::Odrive(_) => "odrive",
            Protocol::Mit(_) => "mit",
            Protocol::Dynamixel => "dynamixel",
        }
    }

    /// Lowest and highest id a drive of this protocol can have.
    fn ids(name: &str) -> (u8, u8) {
        match name {
            "cia402" => cia402::settings::IDS,
            "odrive" => odrive::settings::IDS,
            "mit" => mit::settings::IDS,
            _ => dynamixel::settings::IDS,
        }
    }

    fn units(name: &str) -> UnitKeys {
        match name {
            "cia402" => cia402::settings::UNITS,
            "odrive" => odrive::settings::UNITS,
            "mit" => mit::settings::UNITS,
            _ => dynamixel::settings::UNITS,
        }
    }
}

/// The keys of every bus a robot model's `<ros2_control>` `<hardware>` `<param>`s may prefill,
/// named as in this file; the protocols add their own ([`bus_param`]).
const BUS_PARAMS: &[Param] = &[
    Param::same("transport", ParamKind::Text),
    Param::same("interface", ParamKind::Text),
    Param::same("device", ParamKind::Text),
    Param::same("baud", ParamKind::Integer),
    Param::same("bitrate", ParamKind::Integer),
    Param::same("protocol", ParamKind::Text),
    Param::same("max_load", ParamKind::Number),
    Param::same("feedback_timeout_ms", ParamKind::Number),
    Param::same("watchdog_ms", ParamKind::Number),
];

/// The keys of every drive a `<ros2_control>` `<joint>`'s `<param>`s may prefill; the drive's
/// protocol adds its own ([`joint_param`]).
const JOINT_PARAMS: &[Param] = &[
    Param::same("protocol", ParamKind::Text),
    Param::same("id", ParamKind::Integer),
    Param::same("gear_ratio", ParamKind::Number),
    Param::same("direction", ParamKind::Integer),
    Param::same("zero_offset", ParamKind::Number),
    Param::same("inertia", ParamKind::Number),
];

/// Every protocol's `<hardware>` params, after the common ones.
fn bus_params() -> impl Iterator<Item = &'static Param> {
    BUS_PARAMS
        .iter()
        .chain(cia402::settings::BUS_PARAMS)
        .chain(dynamixel::settings::BUS_PARAMS)
        .chain(odrive::settings::BUS_PARAMS)
}

/// The `<joint>` params of a drive of `protocol`; of every protocol when it is not known.
fn joint_params(protocol: Option<&str>) -> impl Iterator<Item = &'static Param> {
    let own: &[&[Param]] = match protocol {
        Some("cia402") => &[cia402::settings::JOINT_PARAMS],
        Some("odrive") => &[odrive::settings::JOINT_PARAMS],
        Some("mit") => &[mit::settings::JOINT_PARAMS],
        Some("dynamixel") => &[dynamixel::settings::JOINT_PARAMS],
        _ => &[
            cia402::settings::JOINT_PARAMS,
            odrive::settings::JOINT_PARAMS,
            mit::settings::JOINT_PARAMS,
            dynamixel::settings::JOINT_PARAMS,
        ],
    };
    JOINT_PARAMS.iter().chain(own.iter().flat_map(|p| p.iter()))
}

/// What a `<ros2_control>` `<hardware>` `<param name>` sets on a bus, if anything.
pub fn bus_param(name: &str) -> Option<&'static Param> {
    bus_params().find(|p| p.name == name)
}

/// The `<hardware>` param names a bus takes, for messages.
pub fn bus_param_names() -> Vec<&'static str> {
    bus_params().map(|p| p.name).collect()
}

/// What a `<ros2_control>` `<joint>` `<param name>` sets on a drive of `protocol` (any protocol
/// when `None`), if anything.
pub fn joint_param(protocol: Option<&str>, name: &str) -> Option<&'static Param> {
    joint_params(protocol).find(|p| p.name == name)
}

/// The `<joint>` param names a drive of `protocol` takes, for messages.
pub fn joint_param_names(protocol: Option<&str>) -> Vec<&'static str> {
    joint_params(protocol).map(|p| p.name).collect()
}

/// The transport and protocol a ros2_control hardware plugin implies, when motiond knows it.
pub fn plugin(name: &str) -> Option<&'static Plugin> {
    dynamixel::settings::PLUGINS
        .iter()
        .chain(odrive::settings::PLUGINS)
        .find(|p| p.name == name)
}

const DEFAULT_MAX_LOAD: f64 = 0.7;
const DEFAULT_FEEDBACK_TIMEOUT_MS: f64 = 50.0;
const DEFAULT_CAN_BITRATE: u32 = 1_000_000;
/// The drives' watchdog by default: this many control periods.
const DEFAULT_WATCHDOG_PERIODS: f64 = 5.0;

/// Validates the `buses:` entries against the commanded DOF names and the control rate.
pub fn validate(
    raw: &[RawBus],
    dof_names: &[&str],
    rate_hz: f64,
) -> Result<Vec<Bus>, Vec<Problem>> {
    let mut problems = Problems::default();
    let mut buses = Vec::new();
    let mut owner: BTreeMap<&str, String> = BTreeMap::new();
    let mut names: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, rb) in raw.iter().enumerate() {
        let key = format!("buses[{i}]");
        if let Some(first) = names.insert(rb.name.as_str(), i) {
            problems.add(
                format!("{key}.name"),
                format!("bus name `{}` is already used by buses[{first}]", rb.name),
            );
        }
        for dof in rb.joints.keys() {
            let jkey = format!("{key}.joints.{dof}");
            if !dof_names.contains(&dof.as_str()) {
                problems.add(
                    &jkey,
                    format!(
                        "`{dof}` is not a commanded DOF (expected one of: {})",
                        dof_names.join(", ")
                    ),
                );
            } else if let Some(prev) = owner.insert(dof.as_str(), jkey.clone()) {
                problems.add(&jkey, format!("`{dof}` is already driven by {prev}"));
            }
        }
        if let Some(bus) = validate_bus(rb, &key, rate_hz, &mut problems) {
            check_budget(&bus, &key, rate_hz, &mut problems);
            buses.push(bus);
        }
    }
    if !raw.is_empty() {
        for dof in dof_names {
            if !owner.contains_key(dof) {
                problems.add("buses", format!("commanded DOF `{dof}` is on no bus"));
            }
        }
    }
    if problems.0.is_empty() {
        Ok(buses)
    } else {
        Err(problems.0)
    }
}

fn positive(
    p: &mut Problems,
    key: String,
    value: Option<f64>,
    default: Option<f64>,
) -> Option<f64> {
    match value.or(default) {
        Some(v) if v.is_finite() && v > 0.0 => Some(v),
        Some(v) => {
            p.add(key, format!("must be a positive number, got {v}"));
            None
        }
        None => {
            p.add(
                key,
                "is required for this protocol: drive units per rad (or m), e.g. 651.9 for a \
                 4096-count encoder",
            );
            None
        }
    }
}

fn validate_bus(rb: &RawBus, key: &str, rate_hz: f64, p: &mut Problems) -> Option<Bus> {
    let before = p.0.len();
    let mut unused = |field: &str, present: bool, transport: &str| {
        if present {
            p.add(
                format!("{key}.{field}"),
                format!("does not apply to transport `{transport}`"),
            );
        }
    };
    let t = rb.transport.as_str();
    let transport = match t {
        "can" => {
            unused("device", rb.device.is_some(), t);
            unused("baud", rb.baud.is_some(), t);
            unused("protocol", rb.protocol.is_some(), t);
            unused("sync_read", rb.sync_read.is_some(), t);
            let interface = rb.interface.clone().unwrap_or_default();
            if interface.is_empty() {
                p.add(
                    format!("{key}.interface"),
                    "a SocketCAN interface name (e.g. can0) is required for transport `can`",
                );
            }
            Some(Transport::Can {
                interface,
                bitrate: rb.bitrate.unwrap_or(DEFAULT_CAN_BITRATE),
            })
        }
        "slcan" => {
            unused("interface", rb.interface.is_some(), t);
            unused("protocol", rb.protocol.is_some(), t);
            unused("sync_read", rb.sync_read.is_some(), t);
            let bitrate = rb.bitrate.unwrap_or(DEFAULT_CAN_BITRATE);
            slcan::settings::check_bitrate(bitrate, key, p);
            Some(Transport::Slcan {
                device: device(rb, key, p),
                baud: rb.baud,
                bitrate,
            })
        }
        "serial" => {
            unused("interface", rb.interface.is_some(), t);
            unused("bitrate", rb.bitrate.is_some(), t);
            match rb.protocol.as_deref() {
                Some("dynamixel") => {}
                Some(other) => p.add(
                    format!("{key}.protocol"),
                    format!("expected `dynamixel`, got `{other}`"),
                ),
                None => p.add(
                    format!("{key}.protocol"),
                    "is required for transport `serial` (expected `dynamixel`)",
                ),
            }
            let baud = rb.baud.unwrap_or(0);
            if baud == 0 {
                p.add(
                    format!("{key}.baud"),
                    "the servos' line rate in bit/s is required for transport `serial`",
                );
            }
            Some(Transport::Dynamixel {
                device: device(rb, key, p),
                baud,
                sync_read: rb.sync_read.unwrap_or(true),
            })
        }
        other => {
            p.add(
                format!("{key}.transport"),
                format!("expected `can`, `slcan` or `serial`, got `{other}`"),
            );
            None
        }
    };
    if let Some(b) = rb.bitrate
        && b == 0
    {
        p.add(format!("{key}.bitrate"), "must be positive, got 0");
    }
    let max_load = match rb.max_load.unwrap_or(DEFAULT_MAX_LOAD) {
        l if l > 0.0 && l <= 1.0 => l,
        l => {
            p.add(
                format!("{key}.max_load"),
                format!("must be a fraction in (0, 1], got {l}"),
            );
            DEFAULT_MAX_LOAD
        }
    };
    let feedback_timeout_ms = positive(
        p,
        format!("{key}.feedback_timeout_ms"),
        rb.feedback_timeout_ms,
        Some(DEFAULT_FEEDBACK_TIMEOUT_MS),
    )
    .unwrap_or(DEFAULT_FEEDBACK_TIMEOUT_MS);
    let watchdog_ms = match rb.watchdog_ms {
        Some(w) if w.is_finite() && w >= 0.0 => w,
        Some(w) => {
            p.add(
                format!("{key}.watchdog_ms"),
                format!("must be 0 (off) or a positive time in ms, got {w}"),
            );
            0.0
        }
        None => (DEFAULT_WATCHDOG_PERIODS * 1000.0 / rate_hz.max(1e-3)).ceil(),
    };
    let cia402 = cia402::settings::validate_bus(
        cia402::settings::RawBusKeys {
            heartbeat_ms: rb.heartbeat_ms,
            master_id: rb.master_id,
            on_connection_loss: rb.on_connection_loss.as_deref(),
        },
        key,
        p,
    );
    let serial = matches!(transport, Some(Transport::Dynamixel { .. }));
    let mut joints = Vec::new();
    for (dof, rj) in &rb.joints {
        if let Some(j) = validate_joint(dof, rj, serial, &format!("{key}.joints.{dof}"), p) {
            joints.push(j);
        }
    }
    if rb.joints.is_empty() {
        p.add(format!("{key}.joints"), "a bus needs at least one joint");
    }
    check_ids(&joints, key, p);
    if let Some(j) = joints.iter().find(|j| j.protocol == Protocol::Cia402) {
        cia402::settings::check_drive(&j.dof, j.id, &cia402, rate_hz, key, p);
    }
    let transport = transport?;
    (p.0.len() == before).then(|| Bus {
        name: rb.name.clone(),
        transport,
        max_load,
        feedback_timeout_ms,
        watchdog_ms,
        cia402,
        joints,
    })
}

fn device(rb: &RawBus, key: &str, p: &mut Problems) -> PathBuf {
    match rb.device.as_deref() {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => {
            p.add(
                format!("{key}.device"),
                format!(
                    "a serial device path (e.g. /dev/ttyUSB0) is required for transport `{}`",
                    rb.transport
                ),
            );
            PathBuf::new()
        }
    }
}

fn validate_joint(
    dof: &str,
    rj: &RawJoint,
    serial: bool,
    key: &str,
    p: &mut Problems,
) -> Option<BusJoint> {
    let before = p.0.len();
    let name = rj
        .protocol
        .as_deref()
        .unwrap_or(if serial { "dynamixel" } else { "" });
    let protocol_ok = match (serial, name) {
        (true, "dynamixel") | (false, "cia402" | "odrive" | "mit") => true,
        (true, other) => {
            p.add(
                format!("{key}.protocol"),
                format!("a serial bus speaks `dynamixel`, got `{other}`"),
            );
            false
        }
        (false, "") => {
            p.add(
                format!("{key}.protocol"),
                "is required on a CAN bus (expected `cia402`, `odrive` or `mit`)",
            );
            false
        }
        (false, other) => {
            p.add(
                format!("{key}.protocol"),
                format!("expected `cia402`, `odrive` or `mit`, got `{other}`"),
            );
            false
        }
    };
    let (lo, hi) = Protocol::ids(name);
    if !(i64::from(lo)..=i64::from(hi)).contains(&rj.id) {
        p.add(
            format!("{key}.id"),
            format!("{name} ids are {lo}..={hi}, got {}", rj.id),
        );
    }
    let gear_ratio =
        positive(p, format!("{key}.gear_ratio"), rj.gear_ratio, Some(1.0)).unwrap_or(1.0);
    let direction = match rj.direction.unwrap_or(1) {
        1 => 1.0,
        -1 => -1.0,
        d => {
            p.add(
                format!("{key}.direction"),
                format!("must be 1 or -1, got {d}"),
            );
            1.0
        }
    };
    let inertia = match rj.inertia.unwrap_or(0.0) {
        i if i.is_finite() && i >= 0.0 => i,
        i => {
            p.add(
                format!("{key}.inertia"),
                format!("must be a non-negative number, got {i}"),
            );
            0.0
        }
    };
    let unit_keys = Protocol::units(name);
    let zero_offset = rj.zero_offset.unwrap_or(unit_keys.default_zero_offset);
    if !zero_offset.is_finite() {
        p.add(
            format!("{key}.zero_offset"),
            format!("must be a finite number, got {zero_offset}"),
        );
    }
    let not_here = |p: &mut Problems, field: &str, present: bool| {
        if present {
            p.add(
                format!("{key}.{field}"),
                format!("does not apply to protocol `{name}`"),
            );
        }
    };
    let mut per_unit = unit_keys.default_per_unit;
    for (field, value) in [
        ("counts_per_unit", rj.counts_per_unit),
        ("turns_per_unit", rj.turns_per_unit),
    ] {
        if unit_keys.per_unit == Some(field) {
            per_unit = positive(p, format!("{key}.{field}"), value, per_unit);
        } else {
            not_here(p, field, value.is_some());
        }
    }
    if name != "mit" {
        not_here(p, "mit", rj.mit.is_some());
    }
    if name != "odrive" {
        not_here(p, "firmware", rj.firmware.is_some());
        not_here(p, "endpoints", rj.endpoints.is_some());
    }
    let protocol = match name {
        "cia402" => Protocol::Cia402,
        "odrive" => Protocol::Odrive(odrive::settings::validate(
            rj.firmware.as_deref(),
            rj.endpoints,
            key,
            p,
        )),
        "dynamixel" => Protocol::Dynamixel,
        _ => match &rj.mit {
            Some(m) => Protocol::Mit(mit::settings::validate(m, &format!("{key}.mit"), p)?),
            None => {
                if protocol_ok {
                    p.add(
                        format!("{key}.mit"),
                        "MIT mode needs its gains `kp` and `kd` (and the motor's ranges if they \
                         differ from the Mini Cheetah defaults)",
                    );
                }
                return None;
            }
        },
    };
    let units = Units {
        scale: per_unit? * gear_ratio * direction,
        offset: zero_offset,
    };
    let id = u8::try_from(rj.id).ok()?;
    (p.0.len() == before && protocol_ok).then(|| BusJoint {
        dof: dof.to_string(),
        id,
        protocol,
        units,
        inertia,
        gear_ratio,
        direction,
    })
}

/// CAN ids a drive answers on or is addressed by (beyond the shared NMT/SYNC ids), as its
/// protocol lays them out.
fn can_ids(j: &BusJoint) -> Vec<u32> {
    match j.protocol {
        Protocol::Cia402 => cia402::ids(j.id).to_vec(),
        Protocol::Odrive(_) => odrive::ids(j.id).collect(),
        Protocol::Mit(_) => mit::settings::ids(j.id).to_vec(),
        Protocol::Dynamixel => vec![u32::from(j.id)],
    }
}

fn check_ids(joints: &[BusJoint], key: &str, p: &mut Problems) {
    let mut seen: BTreeMap<u32, &str> = BTreeMap::new();
    for j in joints {
        let mut clash = None;
        for id in can_ids(j) {
            if let Some(other) = seen.insert(id, &j.dof)
                && other != j.dof
            {
                clash.get_or_insert((id, other));
            }
        }
        if let Some((id, other)) = clash {
            let what = if j.protocol == Protocol::Dynamixel {
                "id"
            } else {
                "CAN id"
            };
            p.add(
                format!("{key}.joints.{}.id", j.dof),
                format!(
                    "{} id {} uses {what} {id:#05x}, which `{other}` on this bus also uses",
                    j.protocol.as_str(),
                    j.id
                ),
            );
        }
    }
}

/// Traffic of one tick on a bus: wire bits (CAN) and serial bytes.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Traffic {
    /// Worst-case CAN bits per tick (frames both ways, SYNC, heartbeats).
    pub can_bits: f64,
    /// Serial characters (8N1, 10 bits each) per tick both ways.
    pub serial_bytes: f64,
}

impl Traffic {
    fn add(&mut self, loads: &[proto::FrameLoad]) {
        for l in loads {
            self.can_bits += l.can_bits();
            self.serial_bytes += l.slcan_bytes();
        }
    }
}

/// What one tick costs on `bus` with `joints` (a prefix of its joints: used to say what fits) at
/// `rate_hz`: the sum of what each drive's protocol reports, plus the services a protocol runs
/// once per bus.
pub fn traffic(bus: &Bus, joints: &[BusJoint], rate_hz: f64) -> Traffic {
    let period_ms = 1000.0 / rate_hz;
    match &bus.transport {
        Transport::Dynamixel { sync_read, .. } => Traffic {
            can_bits: 0.0,
            serial_bytes: dynamixel::tick_bytes(joints.len(), *sync_read) as f64,
        },
        _ => {
            let mut t = Traffic::default();
            if joints.iter().any(|j| j.protocol == Protocol::Cia402) {
                t.add(&cia402::bus_load(bus.watchdog_ms, period_ms));
            }
            for j in joints {
                match j.protocol {
                    Protocol::Cia402 => t.add(&cia402::drive_load(
                        f64::from(bus.cia402.heartbeat_ms),
                        period_ms,
                    )),
                    Protocol::Odrive(_) => t.add(&odrive::drive_load(period_ms)),
                    Protocol::Mit(_) => t.add(&mit::DRIVE_LOAD),
                    Protocol::Dynamixel => {}
                }
            }
            t
        }
    }
}

/// (bits per second of capacity, bits per tick, what is counted) for each limited medium of a bus.
fn media(bus: &Bus, t: Traffic) -> Vec<(u32, f64, &'static str)> {
    match &bus.transport {
        Transport::Can { bitrate, .. } => vec![(*bitrate, t.can_bits, "CAN")],
        Transport::Slcan { baud, bitrate, .. } => {
            let mut m = vec![(*bitrate, t.can_bits, "CAN")];
            if let Some(b) = baud {
                m.push((*b, t.serial_bytes * 10.0, "serial"));
            }
            m
        }
        Transport::Dynamixel { baud, .. } => {
            vec![(*baud, t.serial_bytes * 10.0, "serial")]
        }
    }
}

/// Refuses a bus whose per-tick traffic at `rate_hz` exceeds `max_load`, saying what fits.
fn check_budget(bus: &Bus, key: &str, rate_hz: f64, p: &mut Problems) {
    if !(rate_hz.is_finite() && rate_hz > 0.0) || bus.joints.is_empty() {
        return;
    }
    let load = |joints: &[BusJoint]| {
        media(bus, traffic(bus, joints, rate_hz))
            .into_iter()
            .map(|(cap, bits, what)| (bits * rate_hz / f64::from(cap.max(1)), bits, cap, what))
            .fold((0.0f64, 0.0, 1, ""), |a, b| if b.0 > a.0 { b } else { a })
    };
    let (worst, bits, cap, what) = load(&bus.joints);
    if worst <= bus.max_load {
        return;
    }
    let fitting = (0..bus.joints.len())
        .rev()
        .find(|&n| load(&bus.joints[..n]).0 <= bus.max_load)
        .unwrap_or(0);
    let max_rate = bus.max_load * f64::from(cap) / bits;
    let mut msg = format!(
        "bus `{}`: {} drives at {rate_hz} Hz need {:.0} {what} bit/s ({:.0}% of {cap} bit/s), over \
         the maximum load of {:.0}%; ",
        bus.name,
        bus.joints.len(),
        bits * rate_hz,
        worst * 100.0,
        bus.max_load * 100.0
    );
    let _ = write!(
        msg,
        "at {rate_hz} Hz this bus fits {fitting} of these drives, and all {} fit up to {:.0} Hz",
        bus.joints.len(),
        max_rate.floor()
    );
    if matches!(bus.transport, Transport::Dynamixel { .. }) {
        msg.push_str(" (a faster baud rate or sync_read: false also frees time)");
    }
    p.add(format!("{key}.joints"), msg);
}

/// Checks what depends on the skeleton, when the backend opens: the command mode each actuator
/// needs is one the protocol can do, and the joint limits fit the drive's units and ranges.
pub fn check_joints(buses: &[Bus], joints: &JointSet) -> Vec<Problem> {
    let mut p = Problems::default();
    let mut driven = vec![false; joints.len()];
    for (b, bus) in buses.iter().enumerate() {
        for j in &bus.joints {
            let key = format!("buses[{b}].joints.{}", j.dof);
            let Some(index) = joints.index_of(&j.dof) else {
                p.add(key, format!("`{}` is not a commanded DOF", j.dof));
                continue;
            };
            driven[index] = true;
            let Some(dof) = joints.dofs.get(index) else {
                continue;
            };
            let proto_name = j.protocol.as_str();
            let ok = match (dof.actuator, &j.protocol) {
                (Actuator::Servo | Actuator::Locked, _) => true,
                (Actuator::Velocity, p) => *p != Protocol::Cia402,
                (Actuator::Force, Protocol::Odrive(_) | Protocol::Mit(_)) => true,
                _ => false,
            };
            if !ok {
                let can = match j.protocol {
                    Protocol::Cia402 => "servo (cyclic synchronous position)",
                    Protocol::Dynamixel => "servo (position) and velocity",
                    _ => "servo, velocity and force",
                };
                p.add(
                    format!("{key}.protocol"),
                    format!(
                        "`{}` has actuator `{}`, but {proto_name} drives here support {can} only",
                        j.dof,
                        dof.actuator.as_str()
                    ),
                );
            }
            let pos = dof.limits.position;
            let range = |x: f64| j.units.to_drive(x);
            let (a, b2) = (range(pos.lower), range(pos.upper));
            let (lo, hi) = (a.min(b2), a.max(b2));
            let fits = match j.protocol {
                Protocol::Cia402 => lo >= f64::from(i32::MIN) && hi <= f64::from(i32::MAX),
                // Beyond one turn the servo runs in extended position mode (±256 turns).
                Protocol::Dynamixel if dof.actuator != Actuator::Velocity => {
                    lo >= -dynamixel::EXTENDED_POSITION_LIMIT
                        && hi <= dynamixel::EXTENDED_POSITION_LIMIT
                }
                Protocol::Mit(m) => {
                    lo >= f64::from(m.ranges.p_min) && hi <= f64::from(m.ranges.p_max)
                }
                _ => lo.is_finite() && hi.is_finite(),
            };
            if !fits {
                p.add(
                    key.clone(),
                    format!(
                        "the position limits [{}, {}] of `{}` map to drive positions [{lo:.1}, \
                         {hi:.1}], outside what the {proto_name} drive accepts; check \
                         counts_per_unit, gear_ratio and zero_offset",
                        pos.lower, pos.upper, j.dof
                    ),
                );
            }
            if let Protocol::Mit(mit::settings::Settings { ranges, .. }) = j.protocol {
                let v = dof.limits.velocity;
                let (a, b2) = (
                    j.units.rate_to_drive(v.lower),
                    j.units.rate_to_drive(v.upper),
                );
                if a.min(b2) < f64::from(ranges.v_min) || a.max(b2) > f64::from(ranges.v_max) {
                    p.add(
                        format!("{key}.mit.v_max"),
                        format!(
                            "the velocity limits [{}, {}] of `{}` exceed the motor's range \
                             [{}, {}]",
                            v.lower, v.upper, j.dof, ranges.v_min, ranges.v_max
                        ),
                    );
                }
            }
        }
    }
    for (dof, driven) in joints.dofs.iter().zip(&driven) {
        if !driven {
            p.add(
                "buses",
                format!("commanded DOF `{}` is on no bus", dof.name),
            );
        }
    }
    p.0
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOFS: [&str; 6] = [
        "base_yaw",
        "shoulder_pitch",
        "elbow_pitch",
        "wrist_pitch",
        "wrist_roll",
        "gripper_slide",
    ];

    fn parse(yaml: &str) -> Vec<RawBus> {
        serde_yaml::from_str(yaml).unwrap()
    }

    fn problems(yaml: &str, rate: f64) -> Vec<Problem> {
        validate(&parse(yaml), &DOFS, rate).unwrap_err()
    }

    const DXL: &str = "
- name: arm
  transport: serial
  device: /dev/ttyUSB0
  baud: 4000000
  protocol: dynamixel
  joints:
    base_yaw: {id: 1}
    shoulder_pitch: {id: 2, direction: -1}
    elbow_pitch: {id: 3}
    wrist_pitch: {id: 4}
    wrist_roll: {id: 5}
    gripper_slide: {id: 6, counts_per_unit: 50000, zero_offset: 1000}
";

    #[test]
    fn dynamixel_bus_with_defaults() {
        let buses = validate(&parse(DXL), &DOFS, 1000.0).unwrap();
        assert_eq!(buses.len(), 1);
        let b = &buses[0];
        assert_eq!(
            b.transport,
            Transport::Dynamixel {
                device: "/dev/ttyUSB0".into(),
                baud: 4_000_000,
                sync_read: true
            }
        );
        assert_eq!((b.max_load, b.feedback_timeout_ms), (0.7, 50.0));
        let yaw = b.joints.iter().find(|j| j.dof == "base_yaw").unwrap();
        assert_eq!(yaw.protocol, Protocol::Dynamixel);
        // 90° → 3072 counts, the Dynamixel centre convention.
        assert!((yaw.units.to_drive(std::f64::consts::FRAC_PI_2) - 3072.0).abs() < 1e-9);
        let sh = b.joints.iter().find(|j| j.dof == "shoulder_pitch").unwrap();
        assert!((sh.units.to_drive(std::f64::consts::FRAC_PI_2) - 1024.0).abs() < 1e-9);
        let g = b.joints.iter().find(|j| j.dof == "gripper_slide").unwrap();
        assert_eq!(g.units.to_drive(0.01), 1500.0);
        assert_eq!(g.units.to_joint(1500.0), 0.01);
    }

    #[test]
    fn can_bus_protocols_and_unit_conversion() {
        let yaml = "
- name: can
  transport: can
  interface: can0
  joints:
    base_yaw: {protocol: cia402, id: 5, counts_per_unit: 651.8986469044033, zero_offset: 10}
    shoulder_pitch: {protocol: odrive, id: 1, gear_ratio: 9}
    elbow_pitch: {protocol: mit, id: 3, mit: {kp: 50, kd: 1, v_max: 37.5, v_min: -37.5}}
- name: can2
  transport: slcan
  device: /dev/ttyACM0
  bitrate: 500000
  max_load: 0.8
  joints:
    wrist_pitch: {protocol: odrive, id: 2}
    wrist_roll: {protocol: odrive, id: 3}
    gripper_slide: {protocol: cia402, id: 7, counts_per_unit: 100000}
";
        let buses = validate(&parse(yaml), &DOFS, 400.0).unwrap();
        let yaw = &buses[0].joints[0];
        assert_eq!(yaw.dof, "base_yaw");
        // 1 rad, gear 1, 4096 CPR → 652 counts (protocols.md §1.5), plus the offset.
        assert_eq!(yaw.units.to_drive(1.0).round(), 662.0);
        let sh = buses[0]
            .joints
            .iter()
            .find(|j| j.dof == "shoulder_pitch")
            .unwrap();
        assert!((sh.units.to_drive(std::f64::consts::TAU) - 9.0).abs() < 1e-12);
        let el = buses[0]
            .joints
            .iter()
            .find(|j| j.dof == "elbow_pitch")
            .unwrap();
        let Protocol::Mit(mit::settings::Settings { ranges, kp, kd, .. }) = el.protocol else {
            panic!("not mit");
        };
        assert_eq!(
            (ranges.v_max, ranges.p_max, kp, kd),
            (37.5, 12.5, 50.0, 1.0)
        );
        assert_eq!(
            buses[1].transport,
            Transport::Slcan {
                device: "/dev/ttyACM0".into(),
                baud: None,
                bitrate: 500_000
            }
        );
    }

    #[test]
    fn errors_name_key_path_and_value() {
        let yaml = "
- name: a
  transport: can
  interface: can0
  max_load: 1.5
  joints:
    base_yaw: {protocol: canopen, id: 5}
    shoulder_pitch: {protocol: odrive, id: 70, direction: 2, gear_ratio: -3}
    elbow_pitch: {protocol: cia402, id: 5}
    nope: {protocol: mit, id: 1, mit: {kp: 900, kd: 1}}
- name: a
  transport: usb
  joints:
    elbow_pitch: {id: 1}
";
        let p = problems(yaml, 1000.0);
        let has = |key: &str, text: &str| {
            assert!(
                p.iter().any(|b| b.key == key && b.message.contains(text)),
                "no `{key}` problem containing `{text}` in {p:#?}"
            )
        };
        has("buses[0].max_load", "1.5");
        has("buses[0].joints.base_yaw.protocol", "`canopen`");
        has("buses[0].joints.shoulder_pitch.id", "70");
        has("buses[0].joints.shoulder_pitch.direction", "got 2");
        has("buses[0].joints.shoulder_pitch.gear_ratio", "-3");
        has("buses[0].joints.elbow_pitch.counts_per_unit", "required");
        has("buses[0].joints.nope", "not a commanded DOF");
        has("buses[0].joints.nope.mit.kp", "900");
        has("buses[1].name", "already used");
        has("buses[1].transport", "`usb`");
        has(
            "buses[1].joints.elbow_pitch",
            "already driven by buses[0].joints.elbow_pitch",
        );
        has("buses", "`wrist_roll` is on no bus");
    }

    #[test]
    fn can_id_collisions_are_refused() {
        // ODrive node 16 occupies 0x200..0x21F, which holds CiA 402 node 5's RPDO 0x205.
        let yaml = "
- name: a
  transport: can
  interface: can0
  joints:
    base_yaw: {protocol: cia402, id: 5, counts_per_unit: 1000}
    shoulder_pitch: {protocol: odrive, id: 16}
    elbow_pitch: {protocol: mit, id: 5, mit: {kp: 5, kd: 1}}
    wrist_pitch: {protocol: mit, id: 5, mit: {kp: 5, kd: 1}}
    wrist_roll: {protocol: odrive, id: 1}
    gripper_slide: {protocol: odrive, id: 2}
";
        let p = problems(yaml, 100.0);
        assert!(
            p.iter()
                .any(|b| b.key == "buses[0].joints.shoulder_pitch.id"
                    && b.message.contains("base_yaw")),
            "{p:#?}"
        );
        assert!(
            p.iter()
                .any(|b| b.key == "buses[0].joints.wrist_pitch.id"
                    && b.message.contains("elbow_pitch")),
            "{p:#?}"
        );
    }

    #[test]
    fn budget_refuses_an_overloaded_bus_and_says_what_fits() {
        // Six Dynamixels at 57 600 baud cannot be written and read at 1 kHz.
        let slow = DXL.replace("4000000", "57600");
        let p = problems(&slow, 1000.0);
        assert_eq!(p.len(), 1, "{p:#?}");
        assert_eq!(p[0].key, "buses[0].joints");
        assert!(
            p[0].message.contains("over the maximum load of 70%"),
            "{}",
            p[0].message
        );
        assert!(
            p[0].message.contains("fits 0 of these drives"),
            "{}",
            p[0].message
        );
        // The message's rate fits.
        let hz: f64 = p[0]
            .message
            .split("fit up to ")
            .nth(1)
            .unwrap()
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(validate(&parse(&slow), &DOFS, hz).is_ok());
        assert!(validate(&parse(&slow), &DOFS, hz + 2.0).is_err());
        // 12 CiA 402 drives at 1 kHz on 1 Mbit/s do not fit in 70%: 12·2·115 + 55 bits per tick.
        let mut yaml = String::from("- name: c\n  transport: can\n  interface: can0\n  joints:\n");
        let names: Vec<String> = (1..=12).map(|i| format!("j{i}")).collect();
        for (i, n) in names.iter().enumerate() {
            yaml += &format!(
                "    {n}: {{protocol: cia402, id: {}, counts_per_unit: 1000}}\n",
                i + 1
            );
        }
        let dofs: Vec<&str> = names.iter().map(String::as_str).collect();
        let p = validate(&parse(&yaml), &dofs, 1000.0).unwrap_err();
        // The README's example, word for word.
        assert_eq!(
            p[0].message,
            "bus `c`: 12 drives at 1000 Hz need 2893000 CAN bit/s (289% of 1000000 bit/s), over \
             the maximum load of 70%; at 1000 Hz this bus fits 2 of these drives, and all 12 fit \
             up to 241 Hz"
        );
        assert!(validate(&parse(&yaml), &dofs, 200.0).is_ok());
    }

    #[test]
    fn command_modes_and_ranges_are_checked_against_the_skeleton() {
        use crate::robot::Limits;
        use crate::trajectory::{CommandedDof, DofLimits};
        let dof = |name: &str, actuator, position: f64, velocity: f64| CommandedDof {
            name: name.into(),
            skeleton: 0,
            dof: 0,
            actuator,
            limits: DofLimits {
                position: Limits::symmetric(position),
                velocity: Limits::symmetric(velocity),
                acceleration: Limits::symmetric(10.0),
                effort: Limits::symmetric(10.0),
            },
            initial_position: 0.0,
            mimic: None,
            quick_stop_deceleration: None,
        };
        let joints = JointSet {
            dofs: vec![
                dof("base_yaw", Actuator::Velocity, 2.0, 2.0),
                dof("shoulder_pitch", Actuator::Force, 2.0, 2.0),
                dof("elbow_pitch", Actuator::Servo, 20.0, 2.0),
                dof("wrist_pitch", Actuator::Force, 1.0, 100.0),
                dof("wrist_roll", Actuator::Velocity, 1.0, 1.0),
                dof("gripper_slide", Actuator::Servo, 1.0, 1.0),
            ],
        };
        let yaml = "
- name: a
  transport: can
  interface: can0
  bitrate: 1000000
  max_load: 1.0
  joints:
    base_yaw: {protocol: cia402, id: 1, counts_per_unit: 1000}
    elbow_pitch: {protocol: mit, id: 3, mit: {kp: 1, kd: 1}}
    wrist_pitch: {protocol: mit, id: 4, mit: {kp: 1, kd: 1}}
    wrist_roll: {protocol: odrive, id: 5}
- name: b
  transport: serial
  device: /dev/ttyUSB0
  baud: 4000000
  protocol: dynamixel
  joints:
    shoulder_pitch: {id: 1}
";
        let buses = validate(&parse(yaml), &DOFS[..5], 100.0).unwrap();
        let p = check_joints(&buses, &joints);
        let has = |key: &str, text: &str| {
            assert!(
                p.iter().any(|b| b.key == key && b.message.contains(text)),
                "no `{key}` problem containing `{text}` in {p:#?}"
            )
        };
        has("buses[0].joints.base_yaw.protocol", "actuator `velocity`");
        has(
            "buses[1].joints.shoulder_pitch.protocol",
            "actuator `force`",
        );
        has("buses[0].joints.elbow_pitch", "[-20, 20]");
        has("buses[0].joints.wrist_pitch.mit.v_max", "[-100, 100]");
        has("buses", "`gripper_slide` is on no bus");
        assert_eq!(p.len(), 5, "{p:#?}");
    }

    #[test]
    fn cia402_rates_the_drive_cannot_be_told_are_refused_naming_the_rate() {
        let yaml = "
- name: c
  transport: slcan
  device: /dev/ttyACM0
  bitrate: 750000
  heartbeat_ms: 25
  master_id: 100
  on_connection_loss: disable_voltage
  joints:
    base_yaw: {protocol: cia402, id: 5, counts_per_unit: 1000}
";
        for rate in [250.0, 400.0, 800.0] {
            let b = validate(&parse(yaml), &DOFS[..1], rate).unwrap();
            assert_eq!(
                b[0].cia402,
                cia402::settings::BusSettings {
                    heartbeat_ms: 25,
                    master_id: 100,
                    on_connection_loss: cia402::OnConnectionLoss::DisableVoltage
                }
            );
            assert_eq!(b[0].watchdog_ms, (5000.0 / rate).ceil());
        }
        let p = validate(&parse(yaml), &DOFS[..1], 300.0).unwrap_err();
        assert_eq!(p.len(), 1, "{p:#?}");
        assert_eq!(p[0].key, "buses[0].joints.base_yaw");
        assert!(p[0].message.contains("300 Hz"), "{}", p[0].message);
        assert!(p[0].message.contains("3.3333 ms"), "{}", p[0].message);
        assert!(
            p[0].message.contains("250 Hz or 400 Hz"),
            "{}",
            p[0].message
        );
    }

    #[test]
    fn protocol_options_are_checked() {
        let yaml = "
- name: c
  transport: can
  interface: can0
  master_id: 5
  on_connection_loss: coast
  watchdog_ms: -1
  joints:
    base_yaw: {protocol: cia402, id: 5, counts_per_unit: 1000}
    shoulder_pitch: {protocol: odrive, id: 1, firmware: '0.4'}
    elbow_pitch: {protocol: odrive, id: 2, firmware: '0.5', endpoints: {watchdog_timeout: 1, enable_watchdog: 2}}
    wrist_pitch: {protocol: mit, id: 3, mit: {kp: 1, kd: 1, reply_id: 4096}}
    wrist_roll: {protocol: mit, id: 4, firmware: '0.6', mit: {kp: 1, kd: 1}}
";
        let p = problems(yaml, 1000.0);
        let has = |key: &str, text: &str| {
            assert!(
                p.iter().any(|b| b.key == key && b.message.contains(text)),
                "no `{key}` problem containing `{text}` in {p:#?}"
            )
        };
        has("buses[0].master_id", "`base_yaw`");
        has("buses[0].on_connection_loss", "`coast`");
        has("buses[0].watchdog_ms", "-1");
        has("buses[0].joints.shoulder_pitch.firmware", "0.4");
        has("buses[0].joints.elbow_pitch.endpoints", "firmware 0.5");
        has("buses[0].joints.wrist_pitch.mit.reply_id", "4096");
        has("buses[0].joints.wrist_roll.firmware", "does not apply");
        let ok = "
- name: c
  transport: can
  interface: can0
  joints:
    shoulder_pitch: {protocol: odrive, id: 1, firmware: '0.5'}
    elbow_pitch: {protocol: odrive, id: 2, endpoints: {watchdog_timeout: 200, enable_watchdog: 201}}
    wrist_pitch: {protocol: mit, id: 3, mit: {kp: 1, kd: 1, reply_id: 3}}
";
        let b = validate(&parse(ok), &DOFS[1..4], 500.0).unwrap();
        let protocols: Vec<Protocol> = b[0].joints.iter().map(|j| j.protocol).collect();
        assert_eq!(
            protocols[0],
            Protocol::Odrive(odrive::settings::Settings {
                firmware: odrive::Firmware::V06,
                endpoints: Some((200, 201))
            })
        );
        assert!(matches!(
            protocols[2],
            Protocol::Mit(mit::settings::Settings { reply_id: 3, .. })
        ));
        assert_eq!(
            protocols[1],
            Protocol::Odrive(odrive::settings::Settings {
                firmware: odrive::Firmware::V05,
                endpoints: None
            })
        );
    }

    #[test]
    fn unknown_keys_are_rejected() {
        let r: Result<Vec<RawBus>, _> = serde_yaml::from_str(
            "- {name: a, transport: can, interface: can0, joints: {base_yaw: {protocol: mit, id: 1, speed: 3}}}",
        );
        assert!(r.is_err());
    }
}
