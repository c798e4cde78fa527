//! Bus settings from the robot model: the `<ros2_control>` blocks of a URDF name the hardware that
//! drives each joint, and their `<param>`s fill the `buses:` keys this file leaves out.
//!
//! A block fills the bus of its name (`<ros2_control name="arm">` → the `buses` entry `name:
//! arm`): its `<hardware><plugin>` the transport and protocol that plugin speaks, its `<hardware>`
//! `<param>`s the bus keys. Each `<joint>`'s `<param>`s fill the drive of that joint, on whichever
//! bus the configuration puts it; a commanded joint (in `robot.joints`) no bus lists joins the
//! block's bus. The configuration always wins: only keys it leaves out are filled, so nothing is
//! overridden silently. What a param name means is each protocol's to say (`Param` lists in
//! `backend::<family>::settings`, the common keys in [`super::bus`]); a name no setting
//! has is a warning, a value of the wrong kind an error, both at the param's FILE:LINE:COL. Values
//! filled in are validated with the rest of the file, and a problem with one is placed in the
//! robot model where the value was written.
//!
//! This works on the YAML tree before the `buses` section is deserialized, so the filled values
//! go through exactly the checks written ones do.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_yaml::{Mapping, Value};

use super::bus;
use crate::backend::bus::settings::{Param, ParamKind, Plugin};
use crate::diag::{Diagnostic, FileError};
use crate::robot;
use crate::robot::urdf::{self, HardwareBlock, HardwareJoint, HardwareParam, Located};

/// Where a value of the robot model was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub path: PathBuf,
    pub line: u32,
    pub col: u32,
    /// What wrote it, e.g. `<param name="node_id"> of <ros2_control> 'arm' joint 'base_yaw'`.
    pub what: String,
}

impl Origin {
    /// A diagnostic for the configuration key `key`, placed where the model wrote its value.
    pub fn diagnostic(&self, key: &str, message: impl std::fmt::Display) -> Diagnostic {
        Diagnostic::new(
            &self.path,
            self.line,
            self.col,
            format!("{key}: {message} (from {})", self.what),
        )
    }
}

/// A configuration key the robot model filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FromModel {
    /// E.g. `buses[0].joints.base_yaw.id`.
    pub key: String,
    /// The value as the model wrote it.
    pub value: String,
    pub origin: Origin,
}

/// What prefilling found: the keys filled in (and the mappings created for them), warnings and
/// errors, all positioned in the robot model.
#[derive(Debug, Default)]
pub(super) struct Prefill {
    pub(super) filled: Vec<FromModel>,
    /// Every key filled or created, by key path.
    pub(super) origins: HashMap<String, Origin>,
    pub(super) warnings: Vec<Diagnostic>,
    pub(super) errors: Vec<Diagnostic>,
    /// Keys whose param was refused (an error above): not reported again as missing.
    pub(super) refused: Vec<String>,
}

/// Fills the `buses` of `root` (the configuration at `config_path`, as YAML) from the
/// `<ros2_control>` blocks of its robot model, when it configures buses and its `robot.model` (or
/// `robot.skel`) is a readable URDF. A model that cannot be read is reported when it is loaded.
pub(super) fn from_model(root: &mut Value, config_path: &Path) -> Prefill {
    let has_buses = root
        .get("buses")
        .and_then(Value::as_sequence)
        .is_some_and(|b| !b.is_empty());
    let robot = root.get("robot");
    let model = robot
        .and_then(|r| r.get("model").or_else(|| r.get("skel")))
        .and_then(Value::as_str);
    let (true, Some(model)) = (has_buses, model) else {
        return Prefill::default();
    };
    let path = super::resolve(config_path, Path::new(model));
    // Only a regular file: a device or a folder is the model reader's to report.
    if !path.is_file() {
        return Prefill::default();
    }
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Prefill::default();
    };
    if !matches!(robot::detect(&text, &path), Ok(robot::Format::Urdf)) {
        return Prefill::default();
    }
    match urdf::hardware(&text, &path) {
        Ok(hw) => merge(root, &hw, &path, config_path),
        Err(FileError::Invalid(d)) => Prefill {
            errors: d.0,
            ..Prefill::default()
        },
        Err(_) => Prefill::default(),
    }
}

/// Fills `root`'s `buses` from `hw` (read from `model_path`).
pub(super) fn merge(
    root: &mut Value,
    hw: &urdf::Hardware,
    model_path: &Path,
    config_path: &Path,
) -> Prefill {
    let commanded: Vec<String> = root
        .get("robot")
        .and_then(|r| r.get("joints"))
        .and_then(Value::as_sequence)
        .map(|j| {
            j.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    let mut m = Merger {
        model_path,
        config: config_path,
        out: Prefill::default(),
        given: HashMap::new(),
    };
    let Some(buses) = root.get_mut("buses").and_then(Value::as_sequence_mut) else {
        return m.out;
    };
    for block in &hw.blocks {
        m.block(buses, block, &commanded);
    }
    m.out
}

struct Merger<'a> {
    model_path: &'a Path,
    config: &'a Path,
    out: Prefill,
    /// Keys filled from the model, with the line that gave them: a second param for one key is
    /// ambiguous.
    given: HashMap<String, u32>,
}

/// A `<ros2_control>` block as the merge reads it.
struct Hardware<'a> {
    block: &'a HardwareBlock,
    /// `<ros2_control> 'NAME'`, for messages.
    who: &'a str,
    /// The bus of the block's name, if the configuration has one.
    index: Option<usize>,
    plugin: Option<&'static Plugin>,
}

impl Merger<'_> {
    fn origin(&self, at: &Located, what: String) -> Origin {
        Origin {
            path: self.model_path.to_path_buf(),
            line: at.line,
            col: at.col,
            what,
        }
    }

    fn warn(&mut self, at: &Located, message: String) {
        self.out
            .warnings
            .push(Diagnostic::new(self.model_path, at.line, at.col, message));
    }

    fn error(&mut self, at: &Located, message: String) {
        self.out
            .errors
            .push(Diagnostic::new(self.model_path, at.line, at.col, message));
    }

    /// One `<ros2_control>` block: its `<hardware>` settings go to the bus of its name, its
    /// joints' `<param>`s to the bus that drives each joint.
    fn block(&mut self, buses: &mut [Value], block: &HardwareBlock, commanded: &[String]) {
        let name = &block.name.value;
        let who = format!("<ros2_control> '{name}'");
        let index = buses
            .iter()
            .position(|b| b.get("name").and_then(Value::as_str) == Some(name.as_str()));
        let plugin = block.plugin.as_ref().and_then(|p| bus::plugin(&p.value));
        let states_anything = block.plugin.is_some() || !block.params.is_empty();
        if index.is_none() && states_anything {
            self.warn(
                &block.name,
                format!(
                    "{who}: no bus in {} is named '{name}', so its <hardware> settings are not \
                     used; name a `buses` entry '{name}' to use them",
                    self.config.display()
                ),
            );
        }
        let hardware = Hardware {
            block,
            who: &who,
            index,
            plugin,
        };
        self.hardware(buses, &hardware);
        for joint in &block.joints {
            self.joint(buses, &hardware, joint, commanded);
        }
    }

    /// The block's `<plugin>` (transport, protocol) and `<hardware>` `<param>`s, into the bus of
    /// its name.
    fn hardware(&mut self, buses: &mut [Value], hw: &Hardware) {
        let who = hw.who;
        if let (Some(i), Some(plugin), Some(at)) = (hw.index, hw.plugin, &hw.block.plugin) {
            let what = format!("<plugin>{}</plugin> of {who}", plugin.name);
            let transport = Value::String(plugin.transport.into());
            self.fill(&mut buses[i], i, "transport", transport, at, &what);
            if plugin.transport == "serial" {
                let protocol = Value::String(plugin.protocol.into());
                self.fill(&mut buses[i], i, "protocol", protocol, at, &what);
            }
        }
        for p in &hw.block.params {
            let what = format!("<param name=\"{}\"> of {who} <hardware>", p.name.value);
            let Some(setting) = self.known(p, bus::bus_param(&p.name.value), || {
                format!(
                    "{who} <hardware>: {} of a bus; expected one of {}",
                    unknown_param(p),
                    bus::bus_param_names().join(", ")
                )
            }) else {
                continue;
            };
            let Some(value) = self.value(p, setting, &what) else {
                if let Some(i) = hw.index {
                    self.out.refused.push(format!("buses[{i}].{}", setting.key));
                }
                continue;
            };
            if let Some(i) = hw.index {
                self.fill(&mut buses[i], i, setting.key, value, &p.value, &what);
            }
        }
    }

    /// One `<joint>` of the block: its `<param>`s into the drive entry of the bus that lists it
    /// (else the block's bus, when the joint is commanded).
    fn joint(
        &mut self,
        buses: &mut [Value],
        hw: &Hardware,
        joint: &HardwareJoint,
        commanded: &[String],
    ) {
        let dof = joint.name.value.as_str();
        let listed = buses.iter().position(|b| {
            b.get("joints")
                .and_then(Value::as_mapping)
                .is_some_and(|j| j.contains_key(dof))
        });
        let target = listed.or(hw.index.filter(|_| commanded.iter().any(|c| c == dof)));
        let jwho = format!("{} joint '{dof}'", hw.who);
        let Some(t) = target else {
            if !joint.params.is_empty() {
                self.warn(
                    &joint.name,
                    format!(
                        "{jwho}: no bus in {} drives this joint, so its <param>s are not \
                         used; list it under a bus's joints (and in robot.joints)",
                        self.config.display()
                    ),
                );
            }
            return;
        };
        let bus = &mut buses[t];
        let entry = self.joint_entry(bus, t, dof, &joint.name, &jwho);
        let Some(entry) = entry else { return };
        let protocol = entry
            .get("protocol")
            .and_then(Value::as_str)
            .map(String::from);
        let protocol = match protocol {
            Some(p) => Some(p),
            None => self.joint_protocol(bus, t, hw, joint),
        };
        let protocol = protocol.filter(|p| bus::joint_param(Some(p), "id").is_some());
        for p in &joint.params {
            let what = format!("<param name=\"{}\"> of {jwho}", p.name.value);
            let lookup = bus::joint_param(protocol.as_deref(), &p.name.value);
            let Some(setting) = self.known(p, lookup, || {
                let drives = protocol
                    .as_deref()
                    .map_or("a drive".to_string(), |p| format!("`{p}` drives"));
                format!(
                    "{jwho}: {} of {drives}; expected one of {}",
                    unknown_param(p),
                    bus::joint_param_names(protocol.as_deref()).join(", ")
                )
            }) else {
                continue;
            };
            let Some(value) = self.value(p, setting, &what) else {
                let key = format!("buses[{t}].joints.{dof}.{}", setting.key);
                self.out.refused.push(key);
                continue;
            };
            self.fill_joint(bus, t, dof, setting.key, value, &p.value, &what);
        }
    }

    /// The protocol of a joint whose drive entry names none, which decides what its other
    /// params mean: the joint's `protocol` param, else the plugin's (filled into the entry),
    /// else DYNAMIXEL on a serial bus.
    fn joint_protocol(
        &mut self,
        bus: &mut Value,
        t: usize,
        hw: &Hardware,
        joint: &HardwareJoint,
    ) -> Option<String> {
        let protocol_param = joint.params.iter().find(|p| p.name.value == "protocol");
        match (protocol_param, hw.plugin) {
            (Some(p), _) => Some(p.value.value.clone()),
            (None, Some(plugin)) => {
                if let Some(at) = &hw.block.plugin {
                    let what = format!("<plugin>{}</plugin> of {}", plugin.name, hw.who);
                    let value = Value::String(plugin.protocol.into());
                    let dof = joint.name.value.as_str();
                    self.fill_joint(bus, t, dof, "protocol", value, at, &what);
                }
                Some(plugin.protocol.into())
            }
            (None, None) => {
                let serial = bus.get("transport").and_then(Value::as_str) == Some("serial");
                serial.then(|| "dynamixel".to_string())
            }
        }
    }

    /// The drive entry of `dof` on bus `t`, created (empty) when the bus does not list it.
    fn joint_entry<'v>(
        &mut self,
        bus: &'v mut Value,
        t: usize,
        dof: &str,
        at: &Located,
        who: &str,
    ) -> Option<&'v mut Value> {
        let map = bus.as_mapping_mut()?;
        let joints_key = format!("buses[{t}].joints");
        if !map.contains_key("joints") {
            map.insert("joints".into(), Value::Mapping(Mapping::new()));
            let origin = self.origin(at, format!("{who} of the robot model"));
            self.out.origins.insert(joints_key.clone(), origin);
        }
        let joints = map.get_mut("joints")?.as_mapping_mut()?;
        if !joints.contains_key(dof) {
            joints.insert(dof.into(), Value::Mapping(Mapping::new()));
            let origin = self.origin(at, format!("{who} of the robot model"));
            self.out
                .origins
                .insert(format!("{joints_key}.{dof}"), origin);
        }
        joints.get_mut(dof)
    }

    /// The setting a param names, or a warning that it names none.
    fn known(
        &mut self,
        p: &HardwareParam,
        setting: Option<&'static Param>,
        unknown: impl FnOnce() -> String,
    ) -> Option<&'static Param> {
        if setting.is_none() {
            let message = unknown();
            self.warn(&p.name, format!("{message}; ignored"));
        }
        setting
    }

    /// The param's text as the kind of value its setting takes, or an error at the value.
    fn value(&mut self, p: &HardwareParam, setting: &Param, what: &str) -> Option<Value> {
        let text = p.value.value.as_str();
        let value = match setting.kind {
            ParamKind::Integer => text.parse::<i64>().ok().map(Value::from),
            ParamKind::Number => crate::robot::xml::c_number(text).map(Value::from),
            ParamKind::Text => (!text.is_empty()).then(|| Value::String(text.into())),
            ParamKind::Bool => match text {
                "true" => Some(Value::Bool(true)),
                "false" => Some(Value::Bool(false)),
                _ => None,
            },
            ParamKind::IntegerOrKeep if text == "keep" => Some(Value::String(text.into())),
            ParamKind::IntegerOrKeep => text.parse::<i64>().ok().map(Value::from),
        };
        if value.is_none() {
            let expected = match setting.kind {
                ParamKind::Integer => "a whole number",
                ParamKind::Number => "a finite number",
                ParamKind::Text => "a value",
                ParamKind::Bool => "true or false",
                ParamKind::IntegerOrKeep => "a whole number or `keep`",
            };
            self.error(
                &p.value,
                format!(
                    "{what}: expected {expected} for the bus setting `{}`, found '{text}'",
                    setting.key
                ),
            );
        }
        value
    }

    /// Fills `key` (dotted: nested mappings) of a drive on bus `t`.
    #[allow(clippy::too_many_arguments)]
    fn fill_joint(
        &mut self,
        bus: &mut Value,
        t: usize,
        dof: &str,
        key: &str,
        value: Value,
        at: &Located,
        what: &str,
    ) {
        let Some(entry) = bus
            .get_mut("joints")
            .and_then(|j| j.get_mut(dof))
            .filter(|e| e.is_mapping())
        else {
            return;
        };
        let prefix = format!("buses[{t}].joints.{dof}");
        self.fill_at(entry, &prefix, key, value, at, what);
    }

    /// Fills `key` of bus `t` itself.
    fn fill(
        &mut self,
        bus: &mut Value,
        t: usize,
        key: &str,
        value: Value,
        at: &Located,
        what: &str,
    ) {
        if bus.is_mapping() {
            self.fill_at(bus, &format!("buses[{t}]"), key, value, at, what);
        }
    }

    /// Sets `key` (dotted) below `node` (at key path `prefix`) unless the configuration gives it;
    /// a second param for a key the model already filled is an error.
    fn fill_at(
        &mut self,
        node: &mut Value,
        prefix: &str,
        key: &str,
        value: Value,
        at: &Located,
        what: &str,
    ) {
        let full = format!("{prefix}.{key}");
        if let Some(line) = self.given.insert(full.clone(), at.line) {
            self.given.insert(full.clone(), line);
            self.error(
                at,
                format!(
                    "{what}: `{full}` is already given at line {line}; expected one value for \
                     each setting"
                ),
            );
            return;
        }
        let mut path = prefix.to_string();
        let mut node = node;
        let mut parts = key.split('.').peekable();
        while let Some(part) = parts.next() {
            path = format!("{path}.{part}");
            let Some(map) = node.as_mapping_mut() else {
                return;
            };
            if parts.peek().is_none() {
                if map.contains_key(part) {
                    // The configuration wins.
                    return;
                }
                map.insert(part.into(), value.clone());
                break;
            }
            if !map.contains_key(part) {
                map.insert(part.into(), Value::Mapping(Mapping::new()));
                let origin = self.origin(at, what.to_string());
                self.out.origins.insert(path.clone(), origin);
            }
            match map.get_mut(part) {
                Some(next) => node = next,
                None => return,
            }
        }
        let origin = self.origin(at, what.to_string());
        self.out.origins.insert(full.clone(), origin.clone());
        self.out.filled.push(FromModel {
            key: full,
            // Numbers as the model wrote them (`15`, not serde's `15.0`).
            value: match value {
                Value::String(s) => s,
                _ => at.value.clone(),
            },
            origin,
        });
    }
}

fn unknown_param(p: &HardwareParam) -> String {
    if p.name.value.is_empty() {
        "<param> has no name attribute".to_string()
    } else {
        format!("param '{}' is not a setting", p.name.value)
    }
}
