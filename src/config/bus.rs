//! Bus and per-joint drive settings: the `buses:` section of the configuration.
//!
//! Each `buses:` entry is read as a mapping of keys ([`RawBus`]): the keys every bus and drive
//! has are declared here, each drive family declares its own (`backend::<family>::settings`), and
//! [`validate`] checks every key against them — unknown keys, values of the wrong kind, values out
//! of range, naming the key path — converts units into one affine map per joint, lets each family
//! check its keys, checks CAN ids for collisions and refuses a bus whose traffic per tick would
//! exceed its maximum load at the control rate. The result is the backend's plain
//! [`BusSettings`]. What depends on the robot model (actuator → command mode, joint limits inside
//! the drive's range) is checked when the backend opens
//! ([`check_joints`](crate::backend::bus::check::check_joints)).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_yaml::{Mapping, Value};

use crate::backend::bus::budget;
use crate::backend::bus::settings::{
    BusSettings, DriveSettings, KeyValue, Keys, Param, ParamKind, Plugin, Problem, Problems,
    Transport, Units,
};
use crate::backend::bus::{Family, Medium};
use crate::backend::family::{self, FAMILIES};
use crate::backend::transport::slcan;
use crate::diag::Num;

/// One `buses:` entry as written: a mapping of keys, each checked by [`validate`].
pub type RawBus = Mapping;

/// The keys every bus has, beside `name` and `joints`, as a robot model's `<ros2_control>`
/// `<hardware>` `<param>`s may also give them; the families add their own ([`bus_param`]).
const BUS_PARAMS: &[Param] = &[
    Param::same("transport", ParamKind::Text),
    Param::same("interface", ParamKind::Text),
    Param::same("device", ParamKind::Text),
    Param::same("baud", ParamKind::Integer),
    Param::same("bitrate", ParamKind::Integer),
    Param::same("data_bitrate", ParamKind::Integer),
    Param::same("protocol", ParamKind::Text),
    Param::same("max_load", ParamKind::Number),
    Param::same("feedback_timeout_ms", ParamKind::Number),
    Param::same("watchdog_ms", ParamKind::Number),
];

/// Keys of a bus that are not settings: its name and its drives.
const NAME: Param = Param::same("name", ParamKind::Text);
const JOINTS: &str = "joints";

/// The keys every drive has, as a `<ros2_control>` `<joint>`'s `<param>`s may also give them; the
/// drive's family adds its own ([`joint_param`]).
const JOINT_PARAMS: &[Param] = &[
    Param::same("protocol", ParamKind::Text),
    Param::same("id", ParamKind::Integer),
    Param::same("gear_ratio", ParamKind::Number),
    Param::same("direction", ParamKind::Integer),
    Param::same("zero_offset", ParamKind::Number),
    Param::same("inertia", ParamKind::Number),
];

/// Every family's `<hardware>` params, after the common ones.
fn bus_params() -> impl Iterator<Item = &'static Param> {
    BUS_PARAMS
        .iter()
        .chain(FAMILIES.iter().flat_map(|f| f.bus_keys().iter()))
}

/// The `<joint>` params of a drive of `protocol`; of every family when it is not known.
fn joint_params(protocol: Option<&str>) -> impl Iterator<Item = &'static Param> {
    let own = FAMILIES
        .iter()
        .filter(move |f| protocol.is_none_or(|p| p == f.name()))
        .flat_map(|f| f.joint_keys().iter());
    JOINT_PARAMS.iter().chain(own)
}

/// What a `<ros2_control>` `<hardware>` `<param name>` sets on a bus, if anything.
pub fn bus_param(name: &str) -> Option<&'static Param> {
    bus_params().find(|p| p.name == name)
}

/// The `<hardware>` param names a bus takes, for messages.
pub fn bus_param_names() -> Vec<&'static str> {
    bus_params().map(|p| p.name).collect()
}

/// What a `<ros2_control>` `<joint>` `<param name>` sets on a drive of `protocol` (any family
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
    FAMILIES
        .iter()
        .flat_map(|f| f.plugins().iter())
        .find(|p| p.name == name)
}

const DEFAULT_MAX_LOAD: f64 = 0.7;
const DEFAULT_FEEDBACK_TIMEOUT_MS: f64 = 50.0;
const DEFAULT_CAN_BITRATE: u32 = 1_000_000;
/// The CAN-FD data phase by default: 5 Mbit/s, as moteus and CANable 2.0 adapters run.
const DEFAULT_DATA_BITRATE: u32 = 5_000_000;
/// The drives' watchdog by default: this many control periods.
const DEFAULT_WATCHDOG_PERIODS: f64 = 5.0;

/// A value in a message: `"fast"`, `5`, `a mapping`.
fn value_words(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Sequence(_) => "a list".into(),
        Value::Mapping(_) => "a mapping".into(),
        Value::Null => "nothing".into(),
        Value::Tagged(t) => format!("a value tagged {}", t.tag),
    }
}

/// `v` as a value of `kind`, or the problem with it.
fn key_value(v: &Value, kind: ParamKind) -> Result<KeyValue, String> {
    let value = match kind {
        ParamKind::Integer => v.as_i64().map(KeyValue::Integer),
        ParamKind::Number => v.as_f64().map(KeyValue::Number),
        ParamKind::Text => v.as_str().map(|s| KeyValue::Text(s.to_string())),
        ParamKind::Bool => v.as_bool().map(KeyValue::Bool),
        ParamKind::IntegerOrKeep => match v.as_str() {
            Some("keep") => Some(KeyValue::Text("keep".into())),
            _ => v.as_i64().map(KeyValue::Integer),
        },
    };
    value.ok_or_else(|| format!("{} is not {}", value_words(v), kind.words()))
}

/// The keys of `map` (at `key`) that `known` declares, with dotted names for nested mappings
/// (`mit: {kp: 1}` → `mit.kp`); each other key is unknown (`expected` names the keys that are).
/// `skip` keys are read elsewhere. An empty value (`kp:`) counts as not given.
fn read_keys(
    map: &Mapping,
    key: &str,
    known: &[&'static Param],
    skip: &[&str],
    p: &mut Problems,
) -> Keys {
    let mut keys = Keys::default();
    read_into(map, key, "", known, skip, &mut keys, p);
    keys
}

fn read_into(
    map: &Mapping,
    key: &str,
    prefix: &str,
    known: &[&'static Param],
    skip: &[&str],
    keys: &mut Keys,
    p: &mut Problems,
) {
    for (k, v) in map {
        let Some(k) = k.as_str() else {
            p.add(key, format!("{} is not a key name", value_words(k)));
            continue;
        };
        let name = format!("{prefix}{k}");
        let path = format!("{key}.{k}");
        if skip.contains(&name.as_str()) || v.is_null() {
            continue;
        }
        if let Some(param) = known.iter().find(|p| p.key == name && p.is_key()) {
            match key_value(v, param.kind) {
                Ok(value) => keys.insert(name, value),
                Err(why) => p.add(path, why),
            }
        } else if is_prefix(known, &name) {
            match v.as_mapping() {
                Some(inner) => read_into(inner, &path, &format!("{name}."), known, skip, keys, p),
                None => p.add(path, format!("{} is not a mapping of keys", value_words(v))),
            }
        } else {
            let names: Vec<String> = known
                .iter()
                .filter(|p| p.is_key())
                .filter_map(|p| p.key.strip_prefix(prefix))
                .map(|k| format!("`{}`", k.split('.').next().unwrap_or(k)))
                .fold(Vec::new(), |mut v, k| {
                    if !v.contains(&k) {
                        v.push(k);
                    }
                    v
                });
            let choices: Vec<&str> = names.iter().map(|n| n.trim_matches('`')).collect();
            let near = super::closest(k, &choices)
                .map(|near| format!("; did you mean `{near}`?"))
                .unwrap_or_default();
            // Another family's key: say so, rather than only that it is unknown.
            let what = whose_key(&name).map_or_else(
                || "unknown key".to_string(),
                |f| format!("does not apply here (a key of `{f}`)"),
            );
            p.add_key(
                path,
                format!("{what}; expected one of {}{near}", names.join(", ")),
            );
        }
    }
}

/// Whether some known key nests under `name` (`mit` for `mit.kp`).
fn is_prefix(known: &[&'static Param], name: &str) -> bool {
    known
        .iter()
        .any(|p| p.key.strip_prefix(name).is_some_and(|r| r.starts_with('.')))
}

/// Validates the `buses:` entries against the commanded DOF names and the control rate.
pub fn validate(
    raw: &[RawBus],
    dof_names: &[&str],
    rate_hz: f64,
) -> Result<Vec<BusSettings>, Vec<Problem>> {
    let mut problems = Problems::default();
    let mut buses = Vec::new();
    let mut owner: BTreeMap<String, String> = BTreeMap::new();
    let mut names: BTreeMap<String, usize> = BTreeMap::new();
    for (i, rb) in raw.iter().enumerate() {
        let key = format!("buses[{i}]");
        let name = rb.get(NAME.key).and_then(Value::as_str).unwrap_or_default();
        if let Some(first) = names.insert(name.to_string(), i) {
            problems.add(
                format!("{key}.name"),
                format!("bus name `{name}` is already used by buses[{first}]"),
            );
        }
        for dof in joint_entries(rb).keys() {
            let jkey = format!("{key}.joints.{dof}");
            if !dof_names.contains(&dof.as_str()) {
                problems.add(
                    &jkey,
                    format!(
                        "`{dof}` is not a commanded DOF (expected one of: {})",
                        dof_names.join(", ")
                    ),
                );
            } else if let Some(prev) = owner.insert(dof.clone(), jkey.clone()) {
                problems.add(&jkey, format!("`{dof}` is already driven by {prev}"));
            }
        }
        if let Some(bus) = validate_bus(rb, &key, rate_hz, &mut problems) {
            budget::check(&bus, &key, rate_hz, &mut problems);
            buses.push(bus);
        }
    }
    if !raw.is_empty() {
        for dof in dof_names {
            if !owner.contains_key(*dof) {
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

/// The bus's `joints` mapping as written, by DOF name (in ascending order); entries whose key is
/// not text are left out (reported by [`validate_bus`]).
fn joint_entries(rb: &RawBus) -> BTreeMap<String, &Value> {
    rb.get(JOINTS)
        .and_then(Value::as_mapping)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.as_str()?.to_string(), v)))
                .collect()
        })
        .unwrap_or_default()
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
            p.add(key, format!("must be a positive number, got {}", Num(v)));
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

/// A whole number that fits `u32` (bit rates), or the problem with it.
fn rate_key(keys: &Keys, name: &str, key: &str, p: &mut Problems) -> Option<u32> {
    let v = keys.integer(name)?;
    u32::try_from(v).ok().or_else(|| {
        p.add(
            format!("{key}.{name}"),
            format!("must be a whole number of bit/s, got {v}"),
        );
        None
    })
}

/// The families whose drives a bus on `transport` may carry: every CAN family on CAN, the named
/// one on a serial line.
fn families_on(transport: Option<&Transport>) -> Vec<&'static dyn Family> {
    match transport {
        Some(Transport::Serial { family, .. }) => vec![*family],
        Some(_) => FAMILIES
            .iter()
            .copied()
            .filter(|f| f.medium() == Medium::Can)
            .collect(),
        None => Vec::new(),
    }
}

/// The link of the bus at `key`, from its common keys; the keys that do not apply to it are
/// refused.
fn transport(keys: &Keys, key: &str, p: &mut Problems) -> Option<Transport> {
    let t = keys.text("transport")?;
    let text = |name: &str| keys.text(name).filter(|s| !s.is_empty());
    let device = |p: &mut Problems| match text("device") {
        Some(d) => PathBuf::from(d),
        None => {
            p.add(
                format!("{key}.device"),
                format!("a serial device path (e.g. /dev/ttyUSB0) is required for transport `{t}`"),
            );
            PathBuf::new()
        }
    };
    let applies: &[&str] = match t {
        "can" => &["interface", "bitrate", "data_bitrate"],
        "slcan" => &["device", "baud", "bitrate", "data_bitrate"],
        "serial" => &["device", "baud", "protocol"],
        _ => &[
            "interface",
            "device",
            "baud",
            "bitrate",
            "data_bitrate",
            "protocol",
        ],
    };
    for field in [
        "interface",
        "device",
        "baud",
        "bitrate",
        "data_bitrate",
        "protocol",
    ] {
        if keys.get(field).is_some() && !applies.contains(&field) {
            p.add(
                format!("{key}.{field}"),
                format!("does not apply to transport `{t}`"),
            );
        }
    }
    let bitrate = rate_key(keys, "bitrate", key, p);
    if bitrate == Some(0) {
        p.add(format!("{key}.bitrate"), "must be positive, got 0");
    }
    let bitrate = bitrate.unwrap_or(DEFAULT_CAN_BITRATE);
    let data_bitrate = match rate_key(keys, "data_bitrate", key, p) {
        Some(b) if b < bitrate => {
            p.add(
                format!("{key}.data_bitrate"),
                format!("the CAN-FD data phase must be at least the bitrate ({bitrate}), got {b}"),
            );
            DEFAULT_DATA_BITRATE
        }
        b => b.unwrap_or(DEFAULT_DATA_BITRATE),
    };
    let baud = rate_key(keys, "baud", key, p);
    match t {
        "can" => {
            let interface = text("interface").unwrap_or_default().to_string();
            if interface.is_empty() {
                p.add(
                    format!("{key}.interface"),
                    "a SocketCAN interface name (e.g. can0) is required for transport `can`",
                );
            }
            Some(Transport::Can {
                interface,
                bitrate,
                data_bitrate,
            })
        }
        "slcan" => {
            if let Some(why) = slcan::settings::bitrate_problem(bitrate) {
                p.add(format!("{key}.bitrate"), why);
            }
            let device = device(p);
            Some(Transport::Slcan {
                device,
                baud,
                bitrate,
                data_bitrate,
            })
        }
        "serial" => serial(keys, key, baud, device(p), p),
        other => {
            p.add(
                format!("{key}.transport"),
                format!("expected `can`, `slcan` or `serial`, got `{other}`"),
            );
            None
        }
    }
}

/// A serial line: its family is the bus's `protocol`.
fn serial(
    keys: &Keys,
    key: &str,
    baud: Option<u32>,
    device: PathBuf,
    p: &mut Problems,
) -> Option<Transport> {
    let serial = family::names_on(Medium::Serial);
    let expected = format!("`{}`", serial.join("`, `"));
    let family = match keys.text("protocol") {
        Some(name) => match family::find(name).filter(|f| f.medium() == Medium::Serial) {
            Some(f) => Some(f),
            None => {
                p.add(
                    format!("{key}.protocol"),
                    format!("expected {expected}, got `{name}`"),
                );
                None
            }
        },
        None => {
            p.add(
                format!("{key}.protocol"),
                format!("is required for transport `serial` (expected {expected})"),
            );
            None
        }
    };
    let baud = baud.unwrap_or(0);
    if baud == 0 {
        p.add(
            format!("{key}.baud"),
            "the servos' line rate in bit/s is required for transport `serial`",
        );
    }
    Some(Transport::Serial {
        device,
        baud,
        family: family?,
    })
}

/// The families the bus `rb` carries as its `transport` and `protocol` say, when they name
/// them: a serial line's one family, or the CAN families; `None` (all) when they do not.
fn families_of(rb: &RawBus) -> Option<Vec<&'static dyn Family>> {
    let text = |k: &str| rb.get(k).and_then(Value::as_str);
    match text("transport")? {
        "serial" => {
            let f = family::find(text("protocol")?).filter(|f| f.medium() == Medium::Serial)?;
            Some(vec![f])
        }
        "can" | "slcan" => Some(families_on(Some(&Transport::Can {
            interface: String::new(),
            bitrate: 0,
            data_bitrate: 0,
        }))),
        _ => None,
    }
}

/// Every key a bus of `families` may have (beside `joints`); of every family when `None`, so
/// an unknown key is offered only the keys that apply to it.
fn bus_known(families: Option<&[&'static dyn Family]>) -> Vec<&'static Param> {
    let mut known: Vec<&'static Param> = vec![&NAME];
    match families {
        Some(families) => known.extend(
            BUS_PARAMS
                .iter()
                .chain(families.iter().flat_map(|f| f.bus_keys().iter()))
                .filter(|k| k.is_key()),
        ),
        None => known.extend(bus_params().filter(|k| k.is_key())),
    }
    known
}

/// The family of the drive `map` on the bus `rb`, when its `protocol` or its bus's names it.
fn joint_family_of(
    map: &Mapping,
    rb_families: Option<&[&'static dyn Family]>,
) -> Option<&'static dyn Family> {
    match map.get("protocol").and_then(Value::as_str) {
        Some(name) => family::find(name),
        None => match rb_families? {
            [one] if one.medium() == Medium::Serial => Some(*one),
            _ => None,
        },
    }
}

/// Every key a drive of `family` may have; of every family when `None`.
fn joint_known(family: Option<&'static dyn Family>) -> Vec<&'static Param> {
    joint_params(family.map(|f| f.name()))
        .filter(|k| k.is_key())
        .collect()
}

/// The family whose key `name` (dotted: `servo.acceleration`) is, for an unknown key's message.
fn whose_key(name: &str) -> Option<&'static str> {
    FAMILIES
        .iter()
        .find(|f| {
            f.bus_keys()
                .iter()
                .chain(f.joint_keys())
                .any(|p| p.is_key() && p.key == name)
        })
        .map(|f| f.name())
}

/// The problems of the keys themselves (unknown keys, values of the wrong kind) of every entry,
/// for when the rest cannot be validated (no DOF names or no control rate): every problem of the
/// file is still reported in one pass.
pub fn check_keys(raw: &[RawBus]) -> Vec<Problem> {
    let mut p = Problems::default();
    for (i, rb) in raw.iter().enumerate() {
        let key = format!("buses[{i}]");
        let families = families_of(rb);
        read_keys(rb, &key, &bus_known(families.as_deref()), &[JOINTS], &mut p);
        for (dof, v) in joint_entries(rb) {
            if let Some(m) = v.as_mapping() {
                read_keys(
                    m,
                    &format!("{key}.joints.{dof}"),
                    &joint_known(joint_family_of(m, families.as_deref())),
                    &[],
                    &mut p,
                );
            }
        }
    }
    p.0
}

fn validate_bus(rb: &RawBus, key: &str, rate_hz: f64, p: &mut Problems) -> Option<BusSettings> {
    let before = p.len();
    let keys = read_keys(
        rb,
        key,
        &bus_known(families_of(rb).as_deref()),
        &[JOINTS],
        p,
    );
    for (required, what) in [
        ("name", "the bus's name"),
        ("transport", "`can`, `slcan` or `serial`"),
    ] {
        if keys.get(required).is_none() {
            p.add(format!("{key}.{required}"), format!("is required: {what}"));
        }
    }
    let transport = transport(&keys, key, p);
    let max_load = match keys.number("max_load").unwrap_or(DEFAULT_MAX_LOAD) {
        l if l > 0.0 && l <= 1.0 => l,
        l => {
            p.add(
                format!("{key}.max_load"),
                format!("must be a fraction in (0, 1], got {}", Num(l)),
            );
            DEFAULT_MAX_LOAD
        }
    };
    let feedback_timeout_ms = positive(
        p,
        format!("{key}.feedback_timeout_ms"),
        keys.number("feedback_timeout_ms"),
        Some(DEFAULT_FEEDBACK_TIMEOUT_MS),
    )
    .unwrap_or(DEFAULT_FEEDBACK_TIMEOUT_MS);
    let watchdog_ms = match keys.number("watchdog_ms") {
        Some(w) if w.is_finite() && w >= 0.0 => w,
        Some(w) => {
            p.add(
                format!("{key}.watchdog_ms"),
                format!("must be 0 (off) or a positive time in ms, got {}", Num(w)),
            );
            0.0
        }
        None => (DEFAULT_WATCHDOG_PERIODS * 1000.0 / rate_hz.max(1e-3)).ceil(),
    };
    let families = families_on(transport.as_ref());
    let own = family_keys(&keys, key, transport.as_ref(), &families, p);
    for f in &families {
        f.check_bus(&own, key, p);
    }
    let joints = validate_joints(rb, key, transport.as_ref(), p);
    let bus = BusSettings {
        name: keys.text(NAME.key).unwrap_or_default().to_string(),
        transport: transport?,
        max_load,
        feedback_timeout_ms,
        watchdog_ms,
        keys: own,
        joints,
    };
    check_ids(&bus, key, p);
    if let Transport::Slcan { data_bitrate, .. } = bus.transport
        && bus.fd()
        && slcan::codec::data_bitrate_command(data_bitrate).is_none()
    {
        p.add(
            format!("{key}.data_bitrate"),
            format!(
                "CAN-FD SLCAN adapters (CANable 2.0 firmware) are set to 2000000 (`Y2`) or \
                 5000000 (`Y5`) bit/s, got {data_bitrate}"
            ),
        );
    }
    for j in &bus.joints {
        j.family.check_drive(j, &bus, rate_hz, key, p);
    }
    (p.len() == before).then_some(bus)
}

/// The families' own keys of a bus: those of the families it may carry; another family's are
/// refused as not applying to the transport.
fn family_keys(
    keys: &Keys,
    key: &str,
    transport: Option<&Transport>,
    families: &[&'static dyn Family],
    p: &mut Problems,
) -> Keys {
    let mut own = Keys::default();
    for (name, value) in keys.iter() {
        if BUS_PARAMS.iter().any(|b| b.key == name) || name == NAME.key {
            continue;
        }
        let mine = families
            .iter()
            .any(|f| f.bus_keys().iter().any(|b| b.is_key() && b.key == name));
        if mine {
            own.insert(name, value.clone());
        } else if let Some(Transport::Serial { family, .. }) = transport {
            // A serial line has one family: the key is another family's.
            p.add(
                format!("{key}.{name}"),
                format!("does not apply to protocol `{}`", family.name()),
            );
        } else if let Some(t) = transport {
            p.add(
                format!("{key}.{name}"),
                format!("does not apply to transport `{}`", t.name()),
            );
        }
    }
    own
}

/// Every drive of the bus at `key`, in ascending DOF-name order.
fn validate_joints(
    rb: &RawBus,
    key: &str,
    transport: Option<&Transport>,
    p: &mut Problems,
) -> Vec<DriveSettings> {
    let entries = joint_entries(rb);
    match rb.get(JOINTS) {
        None => p.add(format!("{key}.joints"), "a bus needs at least one joint"),
        Some(Value::Mapping(m)) if m.is_empty() => {
            p.add(format!("{key}.joints"), "a bus needs at least one joint")
        }
        Some(Value::Mapping(_)) => {}
        Some(other) => p.add(
            format!("{key}.joints"),
            format!(
                "{} is not a mapping of DOF names to drives",
                value_words(other)
            ),
        ),
    }
    let mut joints = Vec::new();
    for (dof, value) in entries {
        let jkey = format!("{key}.joints.{dof}");
        let Some(map) = value.as_mapping() else {
            p.add(
                &jkey,
                format!("{} is not a mapping of keys", value_words(value)),
            );
            continue;
        };
        if let Some(j) = validate_joint(&dof, map, transport, &jkey, p) {
            joints.push(j);
        }
    }
    joints
}

/// The family a drive names (`protocol`), on the bus's transport.
fn joint_family(
    name: Option<&str>,
    transport: Option<&Transport>,
    key: &str,
    p: &mut Problems,
) -> Option<&'static dyn Family> {
    if let Some(Transport::Serial { family, .. }) = transport {
        let name = name.unwrap_or(family.name());
        if name != family.name() {
            p.add(
                format!("{key}.protocol"),
                format!("a serial bus speaks `{}`, got `{name}`", family.name()),
            );
            return None;
        }
        return Some(*family);
    }
    let can = family::names_on(Medium::Can);
    let expected = format!("`{}`", can.join("`, `"));
    match name.map(|n| (n, family::find(n).filter(|f| f.medium() == Medium::Can))) {
        Some((_, Some(f))) => Some(f),
        Some((other, None)) => {
            p.add(
                format!("{key}.protocol"),
                format!("expected {expected}, got `{other}`"),
            );
            None
        }
        None => {
            p.add(
                format!("{key}.protocol"),
                format!("is required on a CAN bus (expected {expected})"),
            );
            None
        }
    }
}

/// The common keys of a drive: ids, gear ratio, direction, inertia, zero offset.
struct Common {
    gear_ratio: f64,
    direction: f64,
    inertia: f64,
    zero_offset: f64,
}

fn common(keys: &Keys, default_zero_offset: f64, key: &str, p: &mut Problems) -> Common {
    let gear_ratio = positive(
        p,
        format!("{key}.gear_ratio"),
        keys.number("gear_ratio"),
        Some(1.0),
    )
    .unwrap_or(1.0);
    let direction = match keys.integer("direction").unwrap_or(1) {
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
    let inertia = match keys.number("inertia").unwrap_or(0.0) {
        i if i.is_finite() && i >= 0.0 => i,
        i => {
            p.add(
                format!("{key}.inertia"),
                format!("must be a non-negative number, got {}", Num(i)),
            );
            0.0
        }
    };
    let zero_offset = keys.number("zero_offset").unwrap_or(default_zero_offset);
    if !zero_offset.is_finite() {
        p.add(
            format!("{key}.zero_offset"),
            format!("must be a finite number, got {}", Num(zero_offset)),
        );
    }
    Common {
        gear_ratio,
        direction,
        inertia,
        zero_offset,
    }
}

fn validate_joint(
    dof: &str,
    map: &Mapping,
    transport: Option<&Transport>,
    key: &str,
    p: &mut Problems,
) -> Option<DriveSettings> {
    let before = p.len();
    let serial = match transport {
        Some(Transport::Serial { family, .. }) => Some(vec![*family]),
        _ => None,
    };
    let keys = read_keys(
        map,
        key,
        &joint_known(joint_family_of(map, serial.as_deref())),
        &[],
        p,
    );
    let family = joint_family(keys.text("protocol"), transport, key, p);
    let name = family.map_or("", |f| f.name());
    let (lo, hi) = family.map_or((0, 255), |f| f.ids());
    let id = keys.integer("id");
    match id {
        None => p.add(
            format!("{key}.id"),
            "is required: the drive's id on its bus (node, motor or servo id)",
        ),
        Some(id) if !(i64::from(lo)..=i64::from(hi)).contains(&id) => p.add(
            format!("{key}.id"),
            format!("{name} ids are {lo}..={hi}, got {id}"),
        ),
        Some(_) => {}
    }
    let family = family?;
    let unit_keys = family.units();
    let c = common(&keys, unit_keys.default_zero_offset, key, p);
    // The family's own keys; another family's do not apply.
    let mut own = Keys::default();
    for (k, v) in keys.iter() {
        if JOINT_PARAMS.iter().any(|c| c.key == k) {
            continue;
        }
        if family.joint_keys().iter().any(|j| j.is_key() && j.key == k) {
            own.insert(k, v.clone());
        } else {
            let field = k.split('.').next().unwrap_or(k);
            p.add(
                format!("{key}.{field}"),
                format!("does not apply to protocol `{name}`"),
            );
        }
    }
    let per_unit = match unit_keys.per_unit {
        Some(field) => positive(
            p,
            format!("{key}.{field}"),
            own.number(field),
            unit_keys.default_per_unit,
        ),
        None => unit_keys.default_per_unit,
    };
    let units = Units {
        scale: per_unit? * c.gear_ratio * c.direction,
        offset: c.zero_offset,
    };
    (p.len() == before).then(|| DriveSettings {
        dof: dof.to_string(),
        id: u8::try_from(id.unwrap_or_default()).unwrap_or_default(),
        family,
        units,
        inertia: c.inertia,
        gear_ratio: c.gear_ratio,
        direction: c.direction,
        keys: own,
        lerobot: None,
    })
}

fn check_ids(bus: &BusSettings, key: &str, p: &mut Problems) {
    let mut seen: BTreeMap<u32, &str> = BTreeMap::new();
    let what = if bus.transport.is_can() {
        "CAN id"
    } else {
        "id"
    };
    for j in &bus.joints {
        let mut clash = None;
        for id in j.family.can_ids(j) {
            if let Some(other) = seen.insert(id, &j.dof)
                && other != j.dof
            {
                clash.get_or_insert((id, other));
            }
        }
        if let Some((id, other)) = clash {
            p.add(
                format!("{key}.joints.{}.id", j.dof),
                format!(
                    "{} id {} uses {what} {id:#05x}, which `{other}` on this bus also uses",
                    j.family.name(),
                    j.id
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{cia402, dynamixel::Dynamixel, mit, odrive};
    use crate::robot::Actuator;
    use crate::trajectory::JointSet;

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
            Transport::Serial {
                device: "/dev/ttyUSB0".into(),
                baud: 4_000_000,
                family: &Dynamixel,
            }
        );
        assert_eq!((b.max_load, b.feedback_timeout_ms), (0.7, 50.0));
        let yaw = b.joints.iter().find(|j| j.dof == "base_yaw").unwrap();
        assert_eq!(yaw.family.name(), "dynamixel");
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
        let mit::settings::Settings { ranges, kp, kd, .. } =
            mit::settings::settings(&el.keys, "", &mut Problems::default()).unwrap();
        assert_eq!(
            (ranges.v_max, ranges.p_max, kp, kd),
            (37.5, 12.5, 50.0, 1.0)
        );
        assert_eq!(
            buses[1].transport,
            Transport::Slcan {
                device: "/dev/ttyACM0".into(),
                baud: None,
                bitrate: 500_000,
                data_bitrate: 5_000_000,
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
        // The example of the book's Motor buses page (docs/src/buses.md), word for word.
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
        let p = crate::backend::bus::check::check_joints(&buses, &joints);
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
                cia402::settings::bus_settings(&b[0].keys, "", &mut Problems::default()),
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
        let odrive = |k: usize| {
            odrive::settings::settings(&b[0].joints[k].keys, "", &mut Problems::default())
        };
        assert_eq!(
            odrive(0),
            odrive::settings::Settings {
                firmware: odrive::Firmware::V06,
                endpoints: Some((200, 201))
            }
        );
        assert_eq!(
            mit::settings::settings(&b[0].joints[2].keys, "", &mut Problems::default())
                .unwrap()
                .reply_id,
            3
        );
        assert_eq!(
            odrive(1),
            odrive::settings::Settings {
                firmware: odrive::Firmware::V05,
                endpoints: None
            }
        );
    }

    #[test]
    fn unknown_keys_are_rejected() {
        let p = problems(
            "- {name: a, transport: can, interface: can0, joints: {base_yaw: {protocol: mit, id: 1, speed: 3, mit: {kp: 1, kd: 1, kq: 2}}}}",
            1000.0,
        );
        let mut unknown: Vec<&str> = p
            .iter()
            .filter(|p| p.about_key)
            .map(|p| p.key.as_str())
            .collect();
        unknown.sort();
        assert_eq!(
            unknown,
            [
                "buses[0].joints.base_yaw.mit.kq",
                "buses[0].joints.base_yaw.speed"
            ],
            "{p:#?}"
        );
    }
}
