//! A rehearsal script: YAML → [`Script`], every problem at `FILE:LINE:COL`.
//!
//! ```yaml
//! epoch: 1800000000          # CLOCK_REALTIME at tick 0 (for `at` in requests); the default
//! end: 12                    # seconds; default: at rest after the last step
//! steps:
//!   - {at: 0, request: {cmd: record, motion: demo1}}
//!   - {at: 0.5, hand: {dof: base_yaw, to: 0.8, over_s: 2}}
//!   - {at: 1.2, estop: pressed}
//!   - {at: 3, request: {cmd: record, stop: true}}
//! ```

use std::path::{Path, PathBuf};

use serde_yaml::Value;

use crate::backend::SimFaultKind;
use crate::config::Locations;
use crate::diag::{Diagnostic, Diagnostics, FileError, Num};
use crate::trajectory::JointSet;

/// CLOCK_REALTIME at tick 0 when the script gives no `epoch` (2027-01-15, a fixed instant so
/// that every run of a script sees the same times).
pub const DEFAULT_EPOCH_S: f64 = 1_800_000_000.0;

/// The longest a script may run, and the latest a step may come: a day of loop time.
pub const MAX_SCRIPT_S: f64 = 86_400.0;

/// The longest a hand move or a stalled loop may take in one step: an hour.
pub const MAX_STEP_S: f64 = 3_600.0;

/// A script's file may not be larger than this (it is read whole).
const MAX_SCRIPT_BYTES: u64 = 16 << 20;

/// A parsed, checked script.
#[derive(Debug, Clone, PartialEq)]
pub struct Script {
    /// The file it came from (for messages), or a name given by the caller.
    pub path: PathBuf,
    /// CLOCK_REALTIME at tick 0, seconds since the Unix epoch.
    pub epoch_s: f64,
    /// When the run ends, in seconds from tick 0; `None`: at rest after the last step.
    pub end_s: Option<f64>,
    /// The steps in the order they are taken (by `at`, in file order for equal times).
    pub steps: Vec<Step>,
}

/// One step: at a time, one thing that happens.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Seconds from tick 0 (taken at the first tick at or after it).
    pub at_s: f64,
    pub action: Action,
    /// Where the step is written (1-based line and column; 0 for a step built in code).
    pub line: u32,
    pub col: u32,
}

/// The clients a script may name (`client:` 1 to this); 1 unless a step says otherwise.
pub const MAX_CLIENTS: u64 = 64;

/// What a step does.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// A control-socket request line, exactly as a client sends it (without the newline), on
    /// the connection of `client` (each client its own connection, as the daemon numbers them).
    Request { line: String, client: u64 },
    /// `client`'s connection closes: the daemon lets go of what it held (its stream).
    Disconnect(u64),
    /// The E-stop input.
    EStop(EStopEvent),
    /// A simulated drive fault from now on, on one DOF (JointSet index) or all of them.
    Fault {
        dof: Option<usize>,
        kind: SimFaultKind,
    },
    /// Every injected fault is gone (the drive was repaired).
    FaultCleared,
    /// A hand moves a DOF (JointSet index) from where it is measured to `to` over `over_s`
    /// seconds (a smooth, raised-cosine move), then lets go. It moves only a compliant joint.
    Hand { dof: usize, to: f64, over_s: f64 },
    /// SIGTERM or SIGINT, handled as `motiond serve` handles them (a second one too).
    Signal(Signal),
    /// The loop thread misses this many seconds before its next tick.
    Stall(f64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EStopEvent {
    Pressed,
    Released,
    /// The input cannot be read any more (what a removed GPIO chip looks like).
    Lost,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Term,
    Int,
}

impl Signal {
    pub fn as_str(self) -> &'static str {
        match self {
            Signal::Term => "term",
            Signal::Int => "int",
        }
    }
}

impl EStopEvent {
    pub fn as_str(self) -> &'static str {
        match self {
            EStopEvent::Pressed => "pressed",
            EStopEvent::Released => "released",
            EStopEvent::Lost => "lost",
        }
    }
}

impl Action {
    /// Taken on the control side, one after the other (requests, disconnections, signals);
    /// the rest happen to the robot at their tick.
    pub fn is_control(&self) -> bool {
        matches!(
            self,
            Action::Request { .. } | Action::Disconnect(_) | Action::Signal(_)
        )
    }
}

/// The step kinds, in the order the documentation lists them.
const KINDS: [&str; 7] = [
    "request",
    "disconnect",
    "estop",
    "fault",
    "hand",
    "signal",
    "stall_s",
];

impl Script {
    /// Reads and checks the script at `path` for a robot commanding `joints`.
    pub fn load(path: &Path, joints: &JointSet) -> Result<Script, FileError> {
        let io = |source| FileError::Io {
            path: path.to_path_buf(),
            source,
        };
        let size = std::fs::metadata(path).map_err(io)?.len();
        if size > MAX_SCRIPT_BYTES {
            return Err(FileError::Invalid(Diagnostics(vec![Diagnostic::new(
                path,
                1,
                1,
                format!(
                    "{size} bytes; a rehearsal script may hold at most {MAX_SCRIPT_BYTES} bytes"
                ),
            )])));
        }
        let text = crate::file::read_to_string(path).map_err(io)?;
        Script::parse(&text, path, joints).map_err(FileError::Invalid)
    }

    /// Checks the script `text` (from `path`, for messages): every problem at once.
    pub fn parse(text: &str, path: &Path, joints: &JointSet) -> Result<Script, Diagnostics> {
        if let Some(d) = crate::config::too_deeply_nested(text, path) {
            return Err(Diagnostics(vec![d]));
        }
        let value: Value = match serde_yaml::from_str(text) {
            Ok(v) => v,
            Err(err) => return Err(Diagnostics(vec![crate::config::syntax(path, &err)])),
        };
        let mut p = Problems {
            path,
            at: Locations::index(text),
            found: Vec::new(),
        };
        let script = read(&value, joints, &mut p);
        if p.found.is_empty() {
            Ok(script)
        } else {
            Err(Diagnostics(p.found).sorted())
        }
    }
}

struct Problems<'a> {
    path: &'a Path,
    at: Locations,
    found: Vec<Diagnostic>,
}

impl Problems<'_> {
    /// A problem with the value at `key` (a key path such as `steps[2].hand.to`).
    fn value(&mut self, key: &str, message: impl std::fmt::Display) {
        let pos = self.at.value(key);
        self.found.push(Diagnostic::new(
            self.path,
            pos.line,
            pos.col,
            format!("{key}: {message}"),
        ));
    }

    /// A problem with the key itself (unknown, misplaced).
    fn key(&mut self, key: &str, message: impl std::fmt::Display) {
        let pos = self.at.key(key);
        self.found.push(Diagnostic::new(
            self.path,
            pos.line,
            pos.col,
            format!("{key}: {message}"),
        ));
    }
}

fn read(value: &Value, joints: &JointSet, p: &mut Problems) -> Script {
    let mut script = Script {
        path: p.path.to_path_buf(),
        epoch_s: DEFAULT_EPOCH_S,
        end_s: None,
        steps: Vec::new(),
    };
    let Value::Mapping(top) = value else {
        p.value(
            "",
            "a rehearsal script is a mapping with `steps:` (a list of steps), and optionally \
             `epoch:` and `end:`",
        );
        return script;
    };
    for (key, value) in top {
        let Some(key) = key.as_str() else {
            p.value("", "keys must be plain names (`steps`, `epoch`, `end`)");
            continue;
        };
        match key {
            "epoch" => {
                // Seconds since 1970 as a wall clock could read them (a day short of year 10000).
                if let Some(s) = number(value, "epoch", 0.0, 253_402_214_400.0, "seconds", p) {
                    script.epoch_s = s;
                }
            }
            "end" => {
                if let Some(s) = number(value, "end", 0.0, MAX_SCRIPT_S, "seconds", p) {
                    script.end_s = Some(s);
                }
            }
            "steps" => match value {
                Value::Sequence(items) => {
                    for (i, item) in items.iter().enumerate() {
                        if let Some(step) = read_step(item, &format!("steps[{i}]"), joints, p) {
                            script.steps.push(step);
                        }
                    }
                }
                Value::Null => {}
                _ => p.value(
                    "steps",
                    "expected a list of steps (`- {at: 1, request: …}`)",
                ),
            },
            other => p.key(
                other,
                "unknown key; a rehearsal script has `steps`, `epoch` and `end`",
            ),
        }
    }
    if !top.contains_key("steps") {
        p.value(
            "",
            "no `steps:`; a rehearsal script lists what happens when",
        );
    }
    // Stable: steps at one time are taken in file order.
    script.steps.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
    script
}

fn read_step(item: &Value, key: &str, joints: &JointSet, p: &mut Problems) -> Option<Step> {
    let Value::Mapping(map) = item else {
        p.value(
            key,
            "a step is a mapping with `at:` and one of request (with `client:`), disconnect, \
             estop, fault, hand, signal, stall_s",
        );
        return None;
    };
    let pos = p.at.key(key);
    let mut at_s = None;
    let mut client = None;
    let mut action = None;
    let mut kinds = Vec::new();
    let mut ok = true;
    for (k, value) in map {
        let Some(k) = k.as_str() else {
            p.value(key, "keys must be plain names");
            ok = false;
            continue;
        };
        let path = format!("{key}.{k}");
        if k == "at" {
            at_s = number(value, &path, 0.0, MAX_SCRIPT_S, "seconds from tick 0", p);
            ok &= at_s.is_some();
            continue;
        }
        if k == "client" {
            client = client_number(value, &path, p);
            ok &= client.is_some();
            continue;
        }
        if !KINDS.contains(&k) {
            p.key(
                &path,
                format!(
                    "unknown key; a step has `at` and one of {}",
                    KINDS.join(", ")
                ),
            );
            ok = false;
            continue;
        }
        kinds.push(k.to_string());
        let read = match k {
            "request" => request(value, &path, p).map(|line| Action::Request { line, client: 1 }),
            "disconnect" => client_number(value, &path, p).map(Action::Disconnect),
            "estop" => estop(value, &path, p),
            "fault" => fault(value, &path, joints, p),
            "hand" => hand(value, &path, joints, p),
            "signal" => signal(value, &path, p),
            _ => number(value, &path, 0.0, MAX_STEP_S, "seconds", p)
                .filter(|s| {
                    let positive = *s > 0.0;
                    if !positive {
                        p.value(&path, "a stall lasts more than 0 s");
                    }
                    positive
                })
                .map(Action::Stall),
        };
        ok &= read.is_some();
        action = action.or(read);
    }
    if kinds.len() > 1 {
        p.value(
            key,
            format!(
                "one thing per step, found {}; give each its own step (they may share `at`)",
                kinds.join(" and ")
            ),
        );
        return None;
    }
    if let Some(c) = client {
        match &mut action {
            Some(Action::Request { client, .. }) => *client = c,
            _ if ok => {
                p.value(
                    key,
                    "`client:` says whose connection a `request` comes on; this step has none",
                );
                return None;
            }
            _ => {}
        }
    }
    if at_s.is_none() && ok {
        p.value(key, "no `at:` (seconds from tick 0)");
        return None;
    }
    if kinds.is_empty() && ok {
        p.value(
            key,
            format!("nothing happens; give one of {}", KINDS.join(", ")),
        );
        return None;
    }
    Some(Step {
        at_s: at_s?,
        action: action?,
        line: pos.line,
        col: pos.col,
    })
}

/// A finite number in `[lo, hi]`.
fn number(value: &Value, key: &str, lo: f64, hi: f64, unit: &str, p: &mut Problems) -> Option<f64> {
    let Some(x) = value.as_f64() else {
        p.value(key, format!("{} is not a number ({unit})", describe(value)));
        return None;
    };
    if !(x.is_finite() && x >= lo && x <= hi) {
        p.value(key, format!("{} is outside {lo} ..= {hi} ({unit})", Num(x)));
        return None;
    }
    Some(x)
}

fn describe(value: &Value) -> String {
    match value {
        Value::Null => "nothing".into(),
        Value::String(s) => format!("{s:?}"),
        Value::Sequence(_) => "a list".into(),
        Value::Mapping(_) => "a mapping".into(),
        other => serde_yaml::to_string(other)
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "this".into()),
    }
}

/// A client's number: 1 to [`MAX_CLIENTS`].
fn client_number(value: &Value, key: &str, p: &mut Problems) -> Option<u64> {
    match value.as_u64() {
        Some(c) if (1..=MAX_CLIENTS).contains(&c) => Some(c),
        _ => {
            p.value(
                key,
                format!(
                    "{} is not a client's number; give 1 to {MAX_CLIENTS}",
                    describe(value)
                ),
            );
            None
        }
    }
}

/// The request line a client would send: a mapping becomes its JSON object (numbers a client
/// could not send as numbers — NaN, infinities — become `null`, as serde_json writes them); a
/// string is sent as it is (malformed requests too).
fn request(value: &Value, key: &str, p: &mut Problems) -> Option<String> {
    match value {
        Value::String(line) => {
            if line.contains('\n') {
                p.value(key, "a request is one line (no newline inside)");
                return None;
            }
            Some(line.clone())
        }
        Value::Mapping(_) => match json(value) {
            Ok(v) => Some(v.to_string()),
            Err(why) => {
                p.value(key, why);
                None
            }
        },
        other => {
            p.value(
                key,
                format!(
                    "{} is not a request; give a mapping (`{{cmd: play, motion: wave}}`) or the \
                     JSON line as a string",
                    describe(other)
                ),
            );
            None
        }
    }
}

fn json(value: &Value) -> Result<serde_json::Value, String> {
    use serde_json::Value as J;
    Ok(match value {
        Value::Null => J::Null,
        Value::Bool(b) => J::Bool(*b),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                J::from(i)
            } else if let Some(u) = n.as_u64() {
                J::from(u)
            } else {
                n.as_f64()
                    .and_then(serde_json::Number::from_f64)
                    .map_or(J::Null, J::Number)
            }
        }
        Value::String(s) => J::String(s.clone()),
        Value::Sequence(items) => J::Array(items.iter().map(json).collect::<Result<_, _>>()?),
        Value::Mapping(map) => {
            let mut object = serde_json::Map::new();
            for (k, v) in map {
                let Some(k) = k.as_str() else {
                    return Err("request keys must be strings".into());
                };
                object.insert(k.to_string(), json(v)?);
            }
            J::Object(object)
        }
        Value::Tagged(t) => json(&t.value)?,
    })
}

fn estop(value: &Value, key: &str, p: &mut Problems) -> Option<Action> {
    let event = match value.as_str() {
        Some("pressed") => EStopEvent::Pressed,
        Some("released") => EStopEvent::Released,
        Some("lost") => EStopEvent::Lost,
        _ => {
            p.value(
                key,
                format!("{} is not one of pressed, released, lost", describe(value)),
            );
            return None;
        }
    };
    Some(Action::EStop(event))
}

fn dof(value: Option<&Value>, key: &str, joints: &JointSet, p: &mut Problems) -> Option<usize> {
    let Some(name) = value.and_then(Value::as_str) else {
        p.value(key, "expected the name of a commanded DOF");
        return None;
    };
    let found = joints.index_of(name);
    if found.is_none() {
        let names: Vec<&str> = joints.dofs.iter().map(|d| d.name.as_str()).collect();
        p.value(
            key,
            format!(
                "{name:?} is not a commanded DOF; the robot commands {}",
                names.join(", ")
            ),
        );
    }
    found
}

fn fields<'v>(
    value: &'v Value,
    key: &str,
    allowed: &[&str],
    what: &str,
    p: &mut Problems,
) -> Option<&'v serde_yaml::Mapping> {
    let Value::Mapping(map) = value else {
        p.value(key, format!("expected {what}"));
        return None;
    };
    let mut ok = true;
    for k in map.keys() {
        match k.as_str() {
            Some(k) if allowed.contains(&k) => {}
            Some(k) => {
                p.key(
                    &format!("{key}.{k}"),
                    format!("unknown key; expected {}", allowed.join(", ")),
                );
                ok = false;
            }
            None => {
                p.value(key, "keys must be plain names");
                ok = false;
            }
        }
    }
    for k in allowed {
        if !map.contains_key(*k) {
            p.value(key, format!("no `{k}:`; expected {what}"));
            ok = false;
        }
    }
    ok.then_some(map)
}

fn fault(value: &Value, key: &str, joints: &JointSet, p: &mut Problems) -> Option<Action> {
    if value.as_str() == Some("cleared") {
        return Some(Action::FaultCleared);
    }
    if value.as_str().is_some() {
        p.value(
            key,
            format!(
                "{} is not `cleared` or a mapping {{dof: NAME|all, kind: error|stall|no_feedback|estop}}",
                describe(value)
            ),
        );
        return None;
    }
    let what = "{dof: NAME|all, kind: error|stall|no_feedback|estop}, or `cleared`";
    let map = fields(value, key, &["dof", "kind"], what, p)?;
    let dof_key = format!("{key}.dof");
    let dof = match map.get("dof") {
        Some(v) if v.as_str() == Some("all") => Some(None),
        v => dof(v, &dof_key, joints, p).map(Some),
    };
    let kind_key = format!("{key}.kind");
    let kind = match map.get("kind").and_then(Value::as_str) {
        Some("error") => Some(SimFaultKind::Error),
        Some("stall") => Some(SimFaultKind::Stall),
        Some("no_feedback") => Some(SimFaultKind::NoFeedback),
        Some("estop") => Some(SimFaultKind::Estop),
        _ => {
            let found = map.get("kind").map_or("nothing".into(), describe);
            p.value(
                &kind_key,
                format!("{found} is not one of error, stall, no_feedback, estop"),
            );
            None
        }
    };
    Some(Action::Fault {
        dof: dof?,
        kind: kind?,
    })
}

fn hand(value: &Value, key: &str, joints: &JointSet, p: &mut Problems) -> Option<Action> {
    let map = fields(
        value,
        key,
        &["dof", "to", "over_s"],
        "{dof: NAME, to: POSITION, over_s: SECONDS}",
        p,
    )?;
    let dof = dof(map.get("dof"), &format!("{key}.dof"), joints, p);
    let to = map.get("to").and_then(|v| {
        number(
            v,
            &format!("{key}.to"),
            -1e6,
            1e6,
            "a position in rad or m",
            p,
        )
    });
    let over_s = map
        .get("over_s")
        .and_then(|v| number(v, &format!("{key}.over_s"), 0.0, MAX_STEP_S, "seconds", p));
    Some(Action::Hand {
        dof: dof?,
        to: to?,
        over_s: over_s?,
    })
}

fn signal(value: &Value, key: &str, p: &mut Problems) -> Option<Action> {
    match value.as_str() {
        Some("term") => Some(Action::Signal(Signal::Term)),
        Some("int") => Some(Action::Signal(Signal::Int)),
        _ => {
            p.value(key, format!("{} is not one of term, int", describe(value)));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::robot::{Actuator, Limits};
    use crate::trajectory::{CommandedDof, DofLimits};

    fn joints() -> JointSet {
        let dof = |name: &str| CommandedDof {
            name: name.into(),
            skeleton: 0,
            dof: 0,
            actuator: Actuator::Servo,
            limits: DofLimits {
                position: Limits::symmetric(1.0),
                velocity: Limits::symmetric(1.0),
                acceleration: Limits::symmetric(1.0),
                effort: Limits::symmetric(1.0),
            },
            initial_position: 0.0,
            mimic: None,
            quick_stop_deceleration: None,
        };
        JointSet {
            dofs: vec![dof("a"), dof("b")],
        }
    }

    fn parse(text: &str) -> Result<Script, String> {
        Script::parse(text, Path::new("s.yaml"), &joints()).map_err(|d| d.to_string())
    }

    #[test]
    fn every_step_kind_reads() {
        let s = parse(
            "epoch: 1700000000\nend: 9\nsteps:\n\
             - {at: 2, request: {cmd: play, motion: wave, speed: 0.5}}\n\
             - {at: 1, estop: pressed}\n\
             - {at: 1, fault: {dof: b, kind: stall}}\n\
             - {at: 3, fault: cleared}\n\
             - {at: 3, fault: {dof: all, kind: no_feedback}}\n\
             - {at: 4, hand: {dof: a, to: -0.5, over_s: 2}}\n\
             - {at: 5, signal: term}\n\
             - {at: 6, stall_s: 0.3}\n\
             - {at: 7, client: 2, request: '{\"cmd\":\"stop\"'}\n\
             - {at: 8, disconnect: 2}\n",
        )
        .unwrap();
        assert_eq!(s.epoch_s, 1.7e9);
        assert_eq!(s.end_s, Some(9.0));
        let actions: Vec<&Action> = s.steps.iter().map(|s| &s.action).collect();
        assert_eq!(actions[0], &Action::EStop(EStopEvent::Pressed));
        assert_eq!(
            actions[1],
            &Action::Fault {
                dof: Some(1),
                kind: SimFaultKind::Stall
            }
        );
        assert_eq!(
            actions[2],
            &Action::Request {
                line: r#"{"cmd":"play","motion":"wave","speed":0.5}"#.into(),
                client: 1
            }
        );
        assert_eq!(actions[3], &Action::FaultCleared);
        assert_eq!(
            actions[4],
            &Action::Fault {
                dof: None,
                kind: SimFaultKind::NoFeedback
            }
        );
        assert_eq!(
            actions[5],
            &Action::Hand {
                dof: 0,
                to: -0.5,
                over_s: 2.0
            }
        );
        assert_eq!(actions[6], &Action::Signal(Signal::Term));
        assert_eq!(actions[7], &Action::Stall(0.3));
        assert_eq!(
            actions[8],
            &Action::Request {
                line: r#"{"cmd":"stop""#.into(),
                client: 2
            }
        );
        assert_eq!(actions[9], &Action::Disconnect(2));
        assert_eq!((s.steps[0].line, s.steps[0].col), (5, 3));
    }

    #[test]
    fn numbers_a_client_cannot_send_go_as_null() {
        let s = parse("steps:\n- {at: 0, request: {cmd: play, motion: w, speed: .nan}}\n").unwrap();
        assert_eq!(
            s.steps[0].action,
            Action::Request {
                line: r#"{"cmd":"play","motion":"w","speed":null}"#.into(),
                client: 1
            }
        );
    }

    #[test]
    fn a_client_is_named_for_a_request_only() {
        let err = parse(
            "steps:\n\
             - {at: 1, client: 0, request: {cmd: stop}}\n\
             - {at: 1, client: 2, estop: pressed}\n\
             - {at: 1, disconnect: x}\n",
        )
        .unwrap_err();
        let lines: Vec<&str> = err.lines().collect();
        assert!(
            lines[0]
                .contains("s.yaml:2:19: steps[0].client: 0 is not a client's number; give 1 to 64"),
            "{err}"
        );
        assert!(
            lines[1].contains(
                "s.yaml:3:3: steps[1]: `client:` says whose connection a `request` comes on"
            ),
            "{err}"
        );
        assert!(
            lines[2].contains("steps[2].disconnect: \"x\" is not a client's number"),
            "{err}"
        );
        assert_eq!(lines.len(), 3, "{err}");
    }

    #[test]
    fn every_problem_is_placed() {
        let err = parse(
            "steps:\n\
             - {at: -1, request: {cmd: stop}}\n\
             - {at: 1, estop: maybe}\n\
             - {at: 1, hand: {dof: c, to: .inf, over_s: 1}}\n\
             - {at: 1, signal: term, estop: pressed}\n\
             - {request: {cmd: stop}}\n\
             - {at: 2, wave: 1}\n\
             - {at: 2}\n\
             - {at: 2, stall_s: 0}\n\
             - {at: 2, fault: {dof: a}}\n\
             extra: 1\n",
        )
        .unwrap_err();
        let lines: Vec<&str> = err.lines().collect();
        assert!(
            lines[0].starts_with("s.yaml:2:8: steps[0].at: -1 is outside"),
            "{err}"
        );
        assert!(
            lines[1].starts_with("s.yaml:3:18: steps[1].estop: \"maybe\""),
            "{err}"
        );
        assert!(lines[2].contains("s.yaml:4:23: steps[2].hand.dof: \"c\" is not a commanded DOF; the robot commands a, b"), "{err}");
        assert!(
            lines[3].contains("steps[2].hand.to: inf is outside"),
            "{err}"
        );
        assert!(
            lines[4].contains("s.yaml:5:3: steps[3]: one thing per step, found signal and estop"),
            "{err}"
        );
        assert!(lines[5].contains("s.yaml:6:3: steps[4]: no `at:`"), "{err}");
        assert!(
            lines[6].contains("s.yaml:7:11: steps[5].wave: unknown key"),
            "{err}"
        );
        assert!(
            lines[7].contains("s.yaml:8:3: steps[6]: nothing happens"),
            "{err}"
        );
        assert!(
            lines[8].contains("steps[7].stall_s: a stall lasts more than 0 s"),
            "{err}"
        );
        assert!(lines[9].contains("steps[8].fault: no `kind:`"), "{err}");
        assert!(
            lines[10].contains("s.yaml:11:1: extra: unknown key"),
            "{err}"
        );
        assert_eq!(lines.len(), 11, "{err}");
        assert!(
            parse("[1, 2]")
                .unwrap_err()
                .contains("s.yaml:1:1: : a rehearsal script is a mapping")
        );
        assert!(parse("steps: [\n").unwrap_err().starts_with("s.yaml:"));
    }
}
