//! Requests and replies of the control socket, and the mapping from bytes to a [`Request`].
//!
//! Parsing is done in steps so that every failure gets the code a script can match: bytes that are
//! not JSON (`invalid_json`), JSON that is not an object with a `cmd` string (`bad_request`), a
//! `cmd` nobody knows (`unknown_command`), a field the command does not take (`unknown_field`), a
//! field of the wrong type or out of range (`bad_request`). Nothing ambiguous is guessed at: a
//! blank line and an object with a key twice (at any depth) are `bad_request` too.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use super::reply::ErrorCode;
use super::reply::{
    Bool, ChunkReply, DoneReply, DrivesReply, DumpReply, ErrorBody, ErrorReply, ListReply,
    PlayReply, RecordReply, RecordStopReply, RecoverReply, StatusReply, StreamOpenReply,
    StreamReport,
};
use crate::diag::Num;

/// Requests longer than this (excluding the newline) are refused with `too_large`.
pub const MAX_REQUEST_BYTES: usize = 64 * 1024;

/// Playback speeds outside `(0, MAX_SPEED]` are refused before any trajectory is built.
pub const MAX_SPEED: f64 = 10.0;

/// A teach-in's frame rate when the request gives none.
pub const DEFAULT_RECORD_RATE_HZ: f64 = 100.0;

/// A teach-in's frame rate: at least one frame every 10 s, at most the highest control rate
/// (the daemon rounds it to a whole number of loop ticks per frame).
pub const RECORD_RATE_HZ: (f64, f64) = (0.1, *crate::config::RATE_HZ_RANGE.end());

/// How far ahead a `play` may be scheduled (`at`): a day. Later is a mistake (a time in ms, a
/// date in the wrong year), not a plan.
pub const MAX_AT_AHEAD_S: f64 = 86_400.0;

/// The longest motion name, in bytes: `NAME.seq` and the temporary names written beside it
/// stay well inside a file name's 255 bytes.
pub const MAX_NAME_BYTES: usize = 200;

/// One request line. `cmd` names the variant; every other key is a field of that variant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "cmd", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// Plays a library motion: approach from the measured positions, then the motion.
    Play {
        /// The library motion (its file name without `.seq`).
        motion: String,
        /// Time scale: 0.5 plays at half speed. The scaled motion is proved again.
        #[serde(
            default,
            deserialize_with = "number",
            skip_serializing_if = "Option::is_none"
        )]
        #[schemars(with = "f64")]
        speed: Option<f64>,
        /// Repeat until stopped.
        #[serde(default, rename = "loop", skip_serializing_if = "std::ops::Not::not")]
        looped: bool,
        /// Absolute start time, seconds since the Unix epoch on CLOCK_REALTIME, so several robots
        /// can start together. The approach runs first; the motion starts at `at`.
        #[serde(
            default,
            deserialize_with = "number",
            skip_serializing_if = "Option::is_none"
        )]
        #[schemars(with = "f64")]
        at: Option<f64>,
        /// While a motion plays (in the same group), take over from it without a seam: a blend
        /// from its state leads into this one (at `at`, or now).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        replace: bool,
        /// The joint group that plays it (config `groups`); none: the whole robot.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        group: Option<String>,
    },
    /// Decelerates to rest within the limits, then holds (one group's motion, or every one).
    Stop {
        /// Only this joint group's motion (and a whole-robot motion, which moves its joints too).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        group: Option<String>,
    },
    /// Decelerates to rest along the path; `resume` continues where it paused.
    Pause {
        /// Only this joint group's motion.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        group: Option<String>,
    },
    /// Continues a paused motion where it paused.
    Resume {
        /// Only this joint group's motion.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        group: Option<String>,
    },
    /// The fastest stop within the quick-stop decelerations, then hold (`hold` and
    /// `quick-stop` are the same).
    #[serde(alias = "quick-stop", alias = "hold")]
    QuickStop {
        /// Only this joint group's motion (and a whole-robot motion, which moves its joints too).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        group: Option<String>,
    },
    /// Teach-in: with `motion`, starts recording the measured positions (drives compliant where
    /// they can be) into that library motion; with `"stop": true`, ends it and writes the file.
    Record {
        /// The library motion to record into (a new name).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        motion: Option<String>,
        /// Frames per second of the recording (default [`DEFAULT_RECORD_RATE_HZ`]).
        #[serde(
            default,
            deserialize_with = "number",
            skip_serializing_if = "Option::is_none"
        )]
        #[schemars(with = "f64")]
        rate_hz: Option<f64>,
        /// DOF names to record (default: every commanded DOF).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        joints: Option<Vec<String>>,
        /// `true` ends the teach-in under way and saves its take into the library.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        stop: bool,
    },
    /// The loop's state, the motion, positions, latency, faults, buses.
    Status,
    /// The library: each motion's duration and proof result.
    List,
    /// Loads the library folder again; motions that fail are reported and left out.
    Reload,
    /// Powers the drives.
    Enable,
    /// Unpowers the drives.
    Disable,
    /// Acknowledges a fault once its quick stop is at rest, or ends a released E-stop
    /// (`clear-fault` is the same).
    #[serde(alias = "clear-fault")]
    ClearFault,
    /// Clears a fault and enables the drives in one step; with `pose`, then approaches that
    /// library motion's first pose and holds it there.
    Recover {
        /// The library motion whose first pose to go to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pose: Option<String>,
    },
    /// Writes the flight recorder's ring (the loop's last seconds) to an MCAP file now.
    Dump,
    /// Every drive: bus, family, id, state, last error and the values it reports.
    Drives,
    /// Opens a stream of timed positions for the whole robot or a group (one stream a group),
    /// owned by this connection: only its chunks feed it and only it closes it; its own new open
    /// replaces it, another connection's is `not_owner` until the owner closes it, its connection
    /// ends or a `stop` ends it. Nothing moves until the first chunk.
    StreamOpen {
        /// The joint group it streams; none: the whole robot.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        group: Option<String>,
        /// The DOFs each row gives, in row order (default: every DOF a motion may drive).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        joints: Option<Vec<String>>,
        /// Nominal rate of the rows (Hz): a chunk's row spacing unless it gives `dt`.
        #[serde(
            default,
            deserialize_with = "number",
            skip_serializing_if = "Option::is_none"
        )]
        #[schemars(with = "f64")]
        rate_hz: Option<f64>,
        /// Buffering horizon (s): a row at stream time t plays at t + horizon_s.
        #[serde(
            default,
            deserialize_with = "number",
            skip_serializing_if = "Option::is_none"
        )]
        #[schemars(with = "f64")]
        horizon_s: Option<f64>,
    },
    /// One chunk of rows for this connection's open stream, spliced in at a tick chosen ahead of
    /// the loop.
    StreamChunk {
        /// The group's stream (as opened).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        group: Option<String>,
        /// Strictly increasing over the chunks of a stream (gaps are drops, allowed).
        seq: u64,
        /// Rows of positions, one value per stream joint.
        positions: Vec<Vec<f64>>,
        /// Stream time (s since the stream opened) of the first row; default: the arrival.
        #[serde(
            default,
            deserialize_with = "number",
            skip_serializing_if = "Option::is_none"
        )]
        #[schemars(with = "f64")]
        t0: Option<f64>,
        /// Row spacing (s); default 1 / the stream's rate_hz.
        #[serde(
            default,
            deserialize_with = "number",
            skip_serializing_if = "Option::is_none"
        )]
        #[schemars(with = "f64")]
        dt: Option<f64>,
    },
    /// Closes this connection's stream: the path plays to its last row and brakes to rest there
    /// (as when the connection closes).
    StreamClose {
        /// The group's stream (as opened).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        group: Option<String>,
    },
}

/// Rows a stream chunk may hold.
pub const MAX_CHUNK_ROWS: usize = 1000;
/// Stream rates (Hz) and horizons (s) accepted by `stream_open`.
pub const STREAM_RATE_HZ: (f64, f64) = (1.0, 1000.0);
pub const MAX_STREAM_HORIZON_S: f64 = 10.0;

/// A number field that is present: `null` is refused, not taken for "absent" — it is what
/// serde_json writes for NaN and the infinities, so a client that computed one would otherwise
/// get the default (speed 1, the default frame rate) without a word.
fn number<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    match Option::<f64>::deserialize(d)? {
        Some(x) => Ok(Some(x)),
        None => Err(serde::de::Error::custom(format!(
            "null is not a number ({NULL_NUMBER}); give a finite number or leave the field out"
        ))),
    }
}

/// Why a client sent `null` where a number belongs.
const NULL_NUMBER: &str = "JSON has no NaN or Infinity: a client's encoder writes null for them";

/// The number fields of every command: `null` in one is named before serde reads the request
/// (whose message could not say which field).
const NUMBER_FIELDS: [&str; 6] = ["speed", "at", "rate_hz", "horizon_s", "t0", "dt"];

/// Refuses a `null` where a number belongs, naming the field (and a `positions` row and
/// column): what serde would otherwise call "invalid type: null, expected f64".
fn null_numbers(cmd: &str, object: &serde_json::Map<String, Value>) -> Result<(), RequestError> {
    let null = |field: String, what: &str| {
        RequestError::new(
            ErrorCode::BadRequest,
            format!("{cmd}: {field}: null is not a number ({NULL_NUMBER}); {what}"),
        )
    };
    if let Some(field) = NUMBER_FIELDS
        .iter()
        .find(|f| object.get(**f).is_some_and(Value::is_null))
    {
        return Err(null(
            format!("\"{field}\""),
            "give a finite number or leave the field out",
        ));
    }
    if let Some(Value::Array(rows)) = object.get("positions") {
        for (i, row) in rows.iter().enumerate() {
            let Value::Array(values) = row else { continue };
            if let Some(j) = values.iter().position(Value::is_null) {
                return Err(null(
                    format!("\"positions\" row {i} value {j}"),
                    "give a finite position for every joint of every row",
                ));
            }
        }
    }
    Ok(())
}

/// Every command with the fields it takes, for the `unknown_command`/`unknown_field` replies.
const COMMANDS: &[(&str, &[&str])] = &[
    (
        "play",
        &["motion", "speed", "loop", "at", "replace", "group"],
    ),
    ("stop", &["group"]),
    ("pause", &["group"]),
    ("resume", &["group"]),
    ("hold", &["group"]),
    ("status", &[]),
    ("list", &[]),
    ("reload", &[]),
    ("enable", &[]),
    ("disable", &[]),
    ("quick_stop", &["group"]),
    ("quick-stop", &["group"]),
    ("record", &["motion", "rate_hz", "joints", "stop"]),
    ("clear_fault", &[]),
    ("clear-fault", &[]),
    ("recover", &["pose"]),
    ("dump", &[]),
    ("drives", &[]),
    ("stream_open", &["group", "joints", "rate_hz", "horizon_s"]),
    ("stream_chunk", &["group", "seq", "positions", "t0", "dt"]),
    ("stream_close", &["group"]),
];

/// A failed request: the code and a sentence for the operator.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}: {message}", code.as_str())]
pub struct RequestError {
    pub code: ErrorCode,
    pub message: String,
}

impl RequestError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

/// One reply line: `{"ok":true, …fields}` or `{"ok":false,"error":{"code","message"}}`.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Ok(Answer),
    Error(RequestError),
}

/// The fields of a successful reply, one type per kind of request ([`reply`](super::reply)).
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum Answer {
    Done(DoneReply),
    Play(Box<PlayReply>),
    Status(Box<StatusReply>),
    /// `list` and `reload`.
    List(ListReply),
    Record(RecordReply),
    RecordStop(Box<RecordStopReply>),
    Recover(RecoverReply),
    Dump(DumpReply),
    Drives(DrivesReply),
    StreamOpen(StreamOpenReply),
    StreamChunk(ChunkReply),
    /// `stream_close`: the stream as it was when closed.
    StreamClose(StreamReport),
}

/// `{"ok":true, …answer}`, `ok` first.
#[derive(Serialize)]
struct OkLine<'a> {
    ok: Bool<true>,
    #[serde(flatten)]
    answer: &'a Answer,
}

impl Reply {
    /// `{"ok":true}`.
    pub fn ok() -> Self {
        Reply::Ok(Answer::Done(DoneReply {}))
    }

    pub fn error(error: &RequestError) -> Self {
        Reply::Error(error.clone())
    }

    pub fn is_ok(&self) -> bool {
        matches!(self, Reply::Ok(_))
    }

    /// The reply as one line, newline included.
    pub fn to_line(&self) -> String {
        let written = match self {
            Reply::Ok(answer) => serde_json::to_string(&OkLine { ok: Bool, answer }),
            Reply::Error(err) => serde_json::to_string(&ErrorReply {
                ok: Bool,
                error: ErrorBody {
                    code: err.code,
                    message: err.message.clone(),
                },
            }),
        };
        // Replies are structs of strings, numbers (non-finite ones become null), booleans and
        // string-keyed maps: serialising them cannot fail. Should it ever, the client still
        // gets a reply line, and one a script can match.
        let mut line = written.unwrap_or_else(|err| {
            format!(
                r#"{{"ok":false,"error":{{"code":"unavailable","message":{}}}}}"#,
                serde_json::Value::from(format!("the reply could not be written: {err}"))
            )
        });
        line.push('\n');
        line
    }
}

impl From<Result<Answer, RequestError>> for Reply {
    fn from(result: Result<Answer, RequestError>) -> Self {
        match result {
            Ok(answer) => Reply::Ok(answer),
            Err(err) => Reply::Error(err),
        }
    }
}

/// Parses one request line (without its newline).
pub fn parse_request(line: &[u8]) -> Result<Request, RequestError> {
    let text = std::str::from_utf8(line)
        .map_err(|err| RequestError::new(ErrorCode::InvalidJson, format!("not UTF-8: {err}")))?;
    if text.trim().is_empty() {
        return Err(RequestError::new(
            ErrorCode::BadRequest,
            "blank line; expected a JSON object with a \"cmd\" field",
        ));
    }
    let value = strict_json(text)?;
    let Value::Object(object) = &value else {
        return Err(RequestError::new(
            ErrorCode::BadRequest,
            "expected a JSON object with a \"cmd\" field",
        ));
    };
    let cmd = match object.get("cmd") {
        Some(Value::String(cmd)) => cmd.clone(),
        Some(_) => {
            return Err(RequestError::new(
                ErrorCode::BadRequest,
                "\"cmd\" must be a string",
            ));
        }
        None => {
            return Err(RequestError::new(
                ErrorCode::BadRequest,
                "missing \"cmd\" field",
            ));
        }
    };
    let Some((_, fields)) = COMMANDS.iter().find(|(name, _)| *name == cmd.as_str()) else {
        let known: Vec<&str> = COMMANDS
            .iter()
            .map(|(name, _)| *name)
            .filter(|name| !name.contains('-'))
            .collect();
        return Err(RequestError::new(
            ErrorCode::UnknownCommand,
            format!(
                "unknown command {cmd:?}; expected one of {}",
                known.join(", ")
            ),
        ));
    };
    if let Some(field) = object
        .keys()
        .find(|key| *key != "cmd" && !fields.contains(&key.as_str()))
    {
        let expected = if fields.is_empty() {
            format!("{cmd:?} takes no fields")
        } else {
            format!("{cmd:?} takes {}", fields.join(", "))
        };
        return Err(RequestError::new(
            ErrorCode::UnknownField,
            format!("unknown field {field:?}; {expected}"),
        ));
    }
    null_numbers(&cmd, object)?;
    let request: Request = serde_json::from_value(value)
        .map_err(|err| RequestError::new(ErrorCode::BadRequest, format!("{cmd}: {err}")))?;
    request.validate()?;
    Ok(request)
}

/// Parses JSON text, refusing an object that has a key twice (serde_json would keep the last).
fn strict_json(text: &str) -> Result<Value, RequestError> {
    use serde::de::DeserializeSeed;
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let parsed = UniqueKeys
        .deserialize(&mut deserializer)
        .and_then(|value| deserializer.end().map(|()| value));
    parsed.map_err(|err| match err.classify() {
        serde_json::error::Category::Data => {
            RequestError::new(ErrorCode::BadRequest, err.to_string())
        }
        _ => RequestError::new(ErrorCode::InvalidJson, format!("invalid JSON: {err}")),
    })
}

/// Builds a [`Value`] like serde_json does, but fails on a repeated object key.
struct UniqueKeys;

impl<'de> serde::de::DeserializeSeed<'de> for UniqueKeys {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for UniqueKeys {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(v.into())
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(v.into())
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(UniqueKeys)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(serde::de::Error::custom(format_args!(
                    "key {key:?} appears twice; give each field once"
                )));
            }
            let value = map.next_value_seed(UniqueKeys)?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

impl Request {
    /// Range checks serde cannot express.
    fn validate(&self) -> Result<(), RequestError> {
        match self {
            Request::Stop { group: Some(g) }
            | Request::Pause { group: Some(g) }
            | Request::Resume { group: Some(g) }
            | Request::QuickStop { group: Some(g) }
            | Request::StreamOpen { group: Some(g), .. }
            | Request::StreamChunk { group: Some(g), .. }
            | Request::StreamClose { group: Some(g) }
                if g.is_empty() =>
            {
                bad("\"group\" must not be empty".into())
            }
            Request::Play { group: Some(g), .. } if g.is_empty() => {
                bad("play: \"group\" must not be empty".into())
            }
            Request::StreamOpen {
                joints,
                rate_hz,
                horizon_s,
                ..
            } => validate_stream_open(joints.as_deref(), *rate_hz, *horizon_s),
            Request::StreamChunk {
                positions, t0, dt, ..
            } => validate_stream_chunk(positions, *t0, *dt),
            Request::Record {
                motion,
                rate_hz,
                joints,
                stop,
            } => validate_record(motion.as_deref(), *rate_hz, joints.as_deref(), *stop),
            Request::Recover { pose: Some(pose) } => {
                name_length(pose).or_else(|why| bad(format!("recover: \"pose\": {why}")))
            }
            Request::Play {
                motion, speed, at, ..
            } => validate_play(motion, *speed, *at),
            _ => Ok(()),
        }
    }

    /// The command's name on the wire (`cmd`).
    pub fn cmd(&self) -> &'static str {
        match self {
            Request::Play { .. } => "play",
            Request::Stop { .. } => "stop",
            Request::Pause { .. } => "pause",
            Request::Resume { .. } => "resume",
            Request::QuickStop { .. } => "quick_stop",
            Request::Record { .. } => "record",
            Request::Status => "status",
            Request::List => "list",
            Request::Reload => "reload",
            Request::Enable => "enable",
            Request::Disable => "disable",
            Request::ClearFault => "clear_fault",
            Request::Recover { .. } => "recover",
            Request::Dump => "dump",
            Request::Drives => "drives",
            Request::StreamOpen { .. } => "stream_open",
            Request::StreamChunk { .. } => "stream_chunk",
            Request::StreamClose { .. } => "stream_close",
        }
    }

    /// The request as one line, newline included (what `motionctl` sends).
    pub fn to_line(&self) -> String {
        // Strings and finite numbers always serialise; a non-finite f64 becomes null and is then
        // refused by the daemon, which is the right outcome.
        let mut line = serde_json::to_string(self).unwrap_or_default();
        line.push('\n');
        line
    }
}

/// A motion name no longer than [`MAX_NAME_BYTES`] (no library file has a longer one).
fn name_length(name: &str) -> Result<(), String> {
    if name.len() > MAX_NAME_BYTES {
        return Err(format!(
            "{} bytes; a motion name has at most {MAX_NAME_BYTES}",
            name.len()
        ));
    }
    Ok(())
}

/// Whether `name` can name a new library motion (a teach-in's take): it starts with a letter or
/// a digit and holds only letters, digits, `_`, `-` and `.` (any script's letters and digits), at
/// most [`MAX_NAME_BYTES`] bytes, without `.seq`. A name that starts with `-` reads as an option on
/// every command line (`motionctl play -x`), spaces and control characters make it unreadable in
/// listings and scripts, and `/` would leave the library folder.
pub fn library_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("must not be empty".into());
    }
    name_length(name)?;
    if name.ends_with(".seq") {
        return Err(format!(
            "give the name without `.seq` ({:?})",
            name.trim_end_matches(".seq")
        ));
    }
    let rule = "a motion name starts with a letter or a digit and holds only letters, digits, \
                `_`, `-` and `.`";
    if name.chars().next().is_some_and(|c| !c.is_alphanumeric()) {
        return Err(format!(
            "{name:?} does not start with a letter or a digit; {rule}"
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|&c| !(c.is_alphanumeric() || matches!(c, '_' | '-' | '.')))
    {
        let what = match c {
            ' ' => "a space".to_string(),
            '/' | '\\' => format!("{c:?} (a folder separator)"),
            c if c.is_whitespace() || c.is_control() => {
                format!("{:?}", c.escape_default().to_string())
            }
            c => format!("{c:?}"),
        };
        return Err(format!("{name:?} contains {what}; {rule}"));
    }
    Ok(())
}

/// A `bad_request` saying `message`.
fn bad(message: String) -> Result<(), RequestError> {
    Err(RequestError::new(ErrorCode::BadRequest, message))
}

fn validate_play(motion: &str, speed: Option<f64>, at: Option<f64>) -> Result<(), RequestError> {
    if motion.is_empty() {
        return bad("play: \"motion\" must not be empty".into());
    }
    if let Err(why) = name_length(motion) {
        return bad(format!("play: \"motion\": {why}"));
    }
    if let Some(speed) = speed
        && !(speed.is_finite() && speed > 0.0 && speed <= MAX_SPEED)
    {
        return bad(format!(
            "play: \"speed\" must be in (0, {MAX_SPEED}], got {}",
            Num(speed)
        ));
    }
    if let Some(at) = at
        && !(at.is_finite() && at >= 0.0)
    {
        return bad(format!(
            "play: \"at\" must be seconds since the Unix epoch (CLOCK_REALTIME), got {}",
            Num(at)
        ));
    }
    Ok(())
}

fn validate_record(
    motion: Option<&str>,
    rate_hz: Option<f64>,
    joints: Option<&[String]>,
    stop: bool,
) -> Result<(), RequestError> {
    let name = match (motion, stop) {
        (None, false) => {
            return bad(
                "record: give \"motion\" (the library name to record into) or \"stop\": true"
                    .into(),
            );
        }
        (Some(_), true) => {
            return bad("record: \"stop\" ends a recording and takes no \"motion\"".into());
        }
        (None, true) if rate_hz.is_some() || joints.is_some() => {
            return bad("record: \"stop\" takes no \"rate_hz\" or \"joints\"".into());
        }
        (None, true) => return Ok(()),
        (Some(name), false) => name,
    };
    if let Err(why) = library_name(name) {
        return bad(format!("record: \"motion\": {why}"));
    }
    let (lo, hi) = RECORD_RATE_HZ;
    if let Some(rate) = rate_hz
        && !(rate.is_finite() && rate >= lo && rate <= hi)
    {
        return bad(format!(
            "record: \"rate_hz\" must be {lo} to {hi} frames per second, got {}",
            Num(rate)
        ));
    }
    if joints.is_some_and(|j| j.is_empty()) {
        return bad(
            "record: \"joints\" must name at least one DOF (or leave it out for all)".into(),
        );
    }
    Ok(())
}

fn validate_stream_open(
    joints: Option<&[String]>,
    rate_hz: Option<f64>,
    horizon_s: Option<f64>,
) -> Result<(), RequestError> {
    let (lo, hi) = STREAM_RATE_HZ;
    if let Some(r) = rate_hz
        && !(r.is_finite() && r >= lo && r <= hi)
    {
        return bad(format!(
            "stream_open: \"rate_hz\" must be in [{lo}, {hi}] rows per second, got {}",
            Num(r)
        ));
    }
    if let Some(h) = horizon_s
        && !(h.is_finite() && (0.0..=MAX_STREAM_HORIZON_S).contains(&h))
    {
        return bad(format!(
            "stream_open: \"horizon_s\" must be in [0, {MAX_STREAM_HORIZON_S}] s, got {}",
            Num(h)
        ));
    }
    if joints.is_some_and(|j| j.is_empty()) {
        return bad(
            "stream_open: \"joints\" must name at least one DOF (or leave it out for all)".into(),
        );
    }
    Ok(())
}

fn validate_stream_chunk(
    positions: &[Vec<f64>],
    t0: Option<f64>,
    dt: Option<f64>,
) -> Result<(), RequestError> {
    if positions.is_empty() || positions.len() > MAX_CHUNK_ROWS {
        return bad(format!(
            "stream_chunk: \"positions\" must hold 1 to {MAX_CHUNK_ROWS} rows, got {}",
            positions.len()
        ));
    }
    if let Some((i, _)) = positions
        .iter()
        .enumerate()
        .find(|(_, row)| row.iter().any(|v| !v.is_finite()))
    {
        return bad(format!(
            "stream_chunk: \"positions\" row {i} holds a value that is not a finite number"
        ));
    }
    if let Some(t) = t0
        && !(t.is_finite() && t.abs() <= 1e9)
    {
        return bad(format!(
            "stream_chunk: \"t0\" must be stream seconds, within ±1e9, got {}",
            Num(t)
        ));
    }
    if let Some(d) = dt
        && !(d.is_finite() && (1e-4..=1.0).contains(&d))
    {
        return bad(format!(
            "stream_chunk: \"dt\" must be in [0.0001, 1] s, got {}",
            Num(d)
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn code(line: &str) -> ErrorCode {
        match parse_request(line.as_bytes()) {
            Ok(request) => panic!("{line} parsed as {request:?}"),
            Err(err) => err.code,
        }
    }

    /// A number a client sends arrives as the f64 it names, to the last bit: a position or a
    /// time is never silently moved by the parser (serde_json's `float_roundtrip`).
    #[test]
    fn numbers_arrive_exactly_as_written() {
        let exact = |text: &str| {
            let line = format!(
                r#"{{"cmd":"stream_chunk","seq":0,"t0":{text},"dt":0.01,"positions":[[{text}]]}}"#
            );
            let Ok(Request::StreamChunk { positions, t0, .. }) = parse_request(line.as_bytes())
            else {
                panic!("{line} did not parse");
            };
            let want: f64 = text.parse().unwrap();
            assert_eq!(positions[0][0].to_bits(), want.to_bits(), "{text}");
            assert_eq!(t0.map(f64::to_bits), Some(want.to_bits()), "{text}");
        };
        exact("0.010000000000000009");
        proptest!(|(x in -1.0e3f64..1.0e3, digits in 15usize..25)| {
            exact(&format!("{x:.digits$e}"));
            exact(&format!("{x:?}"));
        });
    }

    #[test]
    fn parses_every_command() {
        assert_eq!(
            parse_request(br#"{"cmd":"play","motion":"wave","speed":0.5,"loop":true,"at":1.5e9}"#),
            Ok(Request::Play {
                motion: "wave".into(),
                speed: Some(0.5),
                looped: true,
                at: Some(1.5e9),
                replace: false,
                group: None,
            })
        );
        assert_eq!(
            parse_request(br#"{"cmd":"play","motion":"wave"}"#),
            Ok(Request::Play {
                motion: "wave".into(),
                speed: None,
                looped: false,
                at: None,
                replace: false,
                group: None,
            })
        );
        for (line, request) in [
            ("stop", Request::Stop { group: None }),
            ("pause", Request::Pause { group: None }),
            ("resume", Request::Resume { group: None }),
            ("hold", Request::QuickStop { group: None }),
            ("quick_stop", Request::QuickStop { group: None }),
            ("quick-stop", Request::QuickStop { group: None }),
            ("recover", Request::Recover { pose: None }),
            ("status", Request::Status),
            ("list", Request::List),
            ("reload", Request::Reload),
            ("enable", Request::Enable),
            ("disable", Request::Disable),
            ("clear_fault", Request::ClearFault),
            ("clear-fault", Request::ClearFault),
            ("dump", Request::Dump),
            ("drives", Request::Drives),
        ] {
            let text = format!(r#"{{"cmd":"{line}"}}"#);
            assert_eq!(parse_request(text.as_bytes()), Ok(request));
        }
    }

    #[test]
    fn requests_round_trip_through_their_line() {
        let request = Request::Play {
            motion: "pick".into(),
            speed: Some(2.0),
            looped: true,
            at: None,
            replace: true,
            group: Some("arms".into()),
        };
        let line = request.to_line();
        assert!(line.ends_with('\n'));
        assert_eq!(parse_request(line.trim_end().as_bytes()), Ok(request));
        assert_eq!(Request::ClearFault.to_line(), "{\"cmd\":\"clear_fault\"}\n");
    }

    #[test]
    fn record_and_groups_are_checked() {
        assert_eq!(
            parse_request(br#"{"cmd":"record","motion":"taught","rate_hz":50,"joints":["a"]}"#),
            Ok(Request::Record {
                motion: Some("taught".into()),
                rate_hz: Some(50.0),
                joints: Some(vec!["a".into()]),
                stop: false,
            })
        );
        assert!(parse_request(br#"{"cmd":"record","stop":true}"#).is_ok());
        for bad in [
            r#"{"cmd":"record"}"#,
            r#"{"cmd":"record","motion":"a","stop":true}"#,
            r#"{"cmd":"record","stop":true,"rate_hz":5}"#,
            r#"{"cmd":"record","motion":"../a"}"#,
            r#"{"cmd":"record","motion":"a/b"}"#,
            r#"{"cmd":"record","motion":".hidden"}"#,
            r#"{"cmd":"record","motion":"a.seq"}"#,
            r#"{"cmd":"record","motion":"a","rate_hz":0}"#,
            r#"{"cmd":"record","motion":"a","rate_hz":1e-300}"#,
            r#"{"cmd":"record","motion":"a","rate_hz":0.09}"#,
            r#"{"cmd":"record","motion":"a","rate_hz":8001}"#,
            r#"{"cmd":"record","motion":"a","rate_hz":null}"#,
            r#"{"cmd":"record","motion":"a","joints":[]}"#,
            r#"{"cmd":"stop","group":""}"#,
            r#"{"cmd":"play","motion":"a","group":""}"#,
        ] {
            assert_eq!(code(bad), ErrorCode::BadRequest, "{bad}");
        }
        assert_eq!(
            parse_request(br#"{"cmd":"pause","group":"arm"}"#),
            Ok(Request::Pause {
                group: Some("arm".into())
            })
        );
    }

    #[test]
    fn stream_requests_are_checked() {
        assert_eq!(
            parse_request(
                br#"{"cmd":"stream_chunk","seq":3,"positions":[[0.1,0.2],[0.3,0.4]],"t0":1.5}"#
            ),
            Ok(Request::StreamChunk {
                group: None,
                seq: 3,
                positions: vec![vec![0.1, 0.2], vec![0.3, 0.4]],
                t0: Some(1.5),
                dt: None,
            })
        );
        assert!(
            parse_request(br#"{"cmd":"stream_open","joints":["a"],"rate_hz":30,"horizon_s":0.1}"#)
                .is_ok()
        );
        assert!(parse_request(br#"{"cmd":"stream_close","group":"arm"}"#).is_ok());
        let many = format!(
            r#"{{"cmd":"stream_chunk","seq":1,"positions":[{}[0]]}}"#,
            "[0],".repeat(MAX_CHUNK_ROWS)
        );
        for bad in [
            r#"{"cmd":"stream_open","rate_hz":0.5}"#,
            r#"{"cmd":"stream_open","rate_hz":5000}"#,
            r#"{"cmd":"stream_open","horizon_s":-1}"#,
            r#"{"cmd":"stream_open","horizon_s":11}"#,
            r#"{"cmd":"stream_open","joints":[]}"#,
            r#"{"cmd":"stream_open","group":""}"#,
            r#"{"cmd":"stream_chunk","seq":1,"positions":[]}"#,
            r#"{"cmd":"stream_chunk","seq":-1,"positions":[[0]]}"#,
            r#"{"cmd":"stream_chunk","positions":[[0]]}"#,
            r#"{"cmd":"stream_chunk","seq":1,"positions":[[0]],"dt":0}"#,
            r#"{"cmd":"stream_chunk","seq":1,"positions":[[0]],"t0":1e300}"#,
            r#"{"cmd":"stream_chunk","seq":1,"positions":[["a"]]}"#,
            r#"{"cmd":"stream_chunk","seq":1,"positions":[[null]]}"#,
            r#"{"cmd":"stream_chunk","seq":1,"positions":[[0]],"t0":null}"#,
            r#"{"cmd":"stream_open","rate_hz":null}"#,
            &many,
        ] {
            assert_eq!(code(bad), ErrorCode::BadRequest, "{bad}");
        }
    }

    #[test]
    fn numbers_are_finite_and_present_and_names_short() {
        for bad in [
            r#"{"cmd":"play","motion":"w","speed":null}"#,
            r#"{"cmd":"play","motion":"w","at":null}"#,
            r#"{"cmd":"play","motion":"w","speed":10.000001}"#,
        ] {
            let err = parse_request(bad.as_bytes()).unwrap_err();
            assert_eq!(err.code, ErrorCode::BadRequest, "{bad}");
        }
        // A number beyond f64 is not JSON serde_json reads (no infinity gets in).
        assert_eq!(
            code(r#"{"cmd":"play","motion":"w","speed":1e999}"#),
            ErrorCode::InvalidJson
        );
        // A null where a number belongs says where, why (NaN and the infinities) and what to send,
        // in a field and in a chunk's rows alike.
        for (bad, says) in [
            (
                r#"{"cmd":"play","motion":"w","speed":null}"#,
                r#"play: "speed": null is not a number (JSON has no NaN or Infinity"#,
            ),
            (
                r#"{"cmd":"stream_chunk","seq":1,"positions":[[0]],"t0":null}"#,
                r#"stream_chunk: "t0": null is not a number (JSON has no NaN or Infinity"#,
            ),
            (
                r#"{"cmd":"stream_chunk","seq":1,"positions":[[0,1],[2,null]]}"#,
                r#"stream_chunk: "positions" row 1 value 1: null is not a number (JSON has no NaN or Infinity"#,
            ),
        ] {
            let err = parse_request(bad.as_bytes()).unwrap_err();
            assert_eq!(err.code, ErrorCode::BadRequest, "{bad}");
            assert!(err.message.starts_with(says), "{bad}: {}", err.message);
            assert!(err.message.contains("give a finite"), "{}", err.message);
        }
        let long = "m".repeat(MAX_NAME_BYTES + 1);
        for cmd in [
            format!(r#"{{"cmd":"play","motion":"{long}"}}"#),
            format!(r#"{{"cmd":"record","motion":"{long}"}}"#),
            format!(r#"{{"cmd":"recover","pose":"{long}"}}"#),
        ] {
            let err = parse_request(cmd.as_bytes()).unwrap_err();
            assert_eq!(err.code, ErrorCode::BadRequest);
            assert!(err.message.contains("at most 200"), "{}", err.message);
        }
        let fits = "m".repeat(MAX_NAME_BYTES);
        assert!(
            parse_request(format!(r#"{{"cmd":"record","motion":"{fits}"}}"#).as_bytes()).is_ok()
        );
        // What a client sends for a speed it could not represent is refused, not defaulted.
        let nan = Request::Play {
            motion: "w".into(),
            speed: Some(f64::NAN),
            looped: false,
            at: None,
            replace: false,
            group: None,
        };
        assert_eq!(
            parse_request(nan.to_line().trim_end().as_bytes()).map_err(|e| e.code),
            Err(ErrorCode::BadRequest)
        );
    }

    #[test]
    fn each_failure_has_its_code() {
        assert_eq!(code("{"), ErrorCode::InvalidJson);
        assert_eq!(code("play wave"), ErrorCode::InvalidJson);
        assert_eq!(code("[1,2]"), ErrorCode::BadRequest);
        assert_eq!(code(r#"{"motion":"wave"}"#), ErrorCode::BadRequest);
        assert_eq!(code(r#"{"cmd":7}"#), ErrorCode::BadRequest);
        assert_eq!(code(r#"{"cmd":"dance"}"#), ErrorCode::UnknownCommand);
        assert_eq!(
            code(r#"{"cmd":"stop","now":true}"#),
            ErrorCode::UnknownField
        );
        assert_eq!(
            code(r#"{"cmd":"play","motion":"wave","sped":2}"#),
            ErrorCode::UnknownField
        );
        assert_eq!(code(r#"{"cmd":"play"}"#), ErrorCode::BadRequest);
        assert_eq!(code(r#"{"cmd":"play","motion":3}"#), ErrorCode::BadRequest);
        assert_eq!(code(r#"{"cmd":"play","motion":""}"#), ErrorCode::BadRequest);
        assert_eq!(
            code(r#"{"cmd":"play","motion":"w","speed":0}"#),
            ErrorCode::BadRequest
        );
        assert_eq!(
            code(r#"{"cmd":"play","motion":"w","speed":-1}"#),
            ErrorCode::BadRequest
        );
        assert_eq!(
            code(r#"{"cmd":"play","motion":"w","speed":"fast"}"#),
            ErrorCode::BadRequest
        );
        assert_eq!(
            code(r#"{"cmd":"play","motion":"w","at":-5}"#),
            ErrorCode::BadRequest
        );
        assert_eq!(
            code(r#"{"cmd":"play","motion":"w","loop":1}"#),
            ErrorCode::BadRequest
        );
        assert_eq!(
            parse_request(&[0xff, 0xfe]).map_err(|e| e.code),
            Err(ErrorCode::InvalidJson)
        );
        assert_eq!(code(r#"{"cmd":"stop"} x"#), ErrorCode::InvalidJson);
    }

    #[test]
    fn ambiguous_requests_are_refused() {
        for line in ["", "  ", "\t"] {
            let err = parse_request(line.as_bytes()).unwrap_err();
            assert_eq!(err.code, ErrorCode::BadRequest, "{line:?}");
            assert!(err.message.contains("blank line"), "{}", err.message);
        }
        for line in [
            r#"{"cmd":"play","motion":"wave","speed":1,"speed":2}"#,
            r#"{"cmd":"stop","cmd":"play","motion":"wave"}"#,
            r#"{"cmd":"play","motion":"wave","\u0073peed":1,"speed":2}"#,
            r#"{"cmd":"stop","x":{"a":1,"a":1}}"#,
        ] {
            let err = parse_request(line.as_bytes()).unwrap_err();
            assert_eq!(err.code, ErrorCode::BadRequest, "{line}");
            assert!(err.message.contains("appears twice"), "{}", err.message);
        }
    }

    #[test]
    fn messages_say_what_was_expected() {
        let err = parse_request(br#"{"cmd":"dance"}"#).unwrap_err();
        assert!(err.message.contains("play") && err.message.contains("clear_fault"));
        let err = parse_request(br#"{"cmd":"play","motion":"w","sped":2}"#).unwrap_err();
        assert!(err.message.contains("sped") && err.message.contains("speed"));
    }

    #[test]
    fn replies_follow_the_envelope() {
        assert_eq!(Reply::ok().to_line(), "{\"ok\":true}\n");
        let err = Reply::error(&RequestError::new(ErrorCode::TooLarge, "x"));
        assert!(!err.is_ok());
        assert_eq!(
            err.to_line(),
            "{\"ok\":false,\"error\":{\"code\":\"too_large\",\"message\":\"x\"}}\n"
        );
        let reply = Reply::Ok(Answer::Recover(super::super::reply::RecoverReply {
            pose: "home".into(),
            approach_s: 1.5,
        }));
        assert!(reply.is_ok());
        assert_eq!(
            reply.to_line(),
            "{\"ok\":true,\"pose\":\"home\",\"approach_s\":1.5}\n"
        );
    }

    #[test]
    fn error_codes_and_commands_are_spelled_as_on_the_wire() {
        let words = crate::daemon::reply::wire_words::<ErrorCode>();
        assert!(words.len() >= 15, "{words:?}");
        for word in words {
            let text = format!("\"{word}\"");
            let code: ErrorCode = serde_json::from_str(&text).unwrap();
            assert_eq!(code.as_str(), word);
            assert_eq!(serde_json::to_string(&code).unwrap(), text);
        }
        for (name, _) in COMMANDS.iter().filter(|(name, _)| !name.contains('-')) {
            let request = parse_request(format!(r#"{{"cmd":"{name}","stop":true}}"#).as_bytes())
                .or_else(|_| {
                    parse_request(format!(r#"{{"cmd":"{name}","motion":"m"}}"#).as_bytes())
                })
                .or_else(|_| parse_request(format!(r#"{{"cmd":"{name}"}}"#).as_bytes()))
                .or_else(|_| {
                    let chunk = format!(r#"{{"cmd":"{name}","seq":1,"positions":[[0.0]]}}"#);
                    parse_request(chunk.as_bytes())
                })
                .unwrap();
            let cmd = serde_json::to_value(&request).unwrap()["cmd"].clone();
            assert_eq!(cmd, request.cmd(), "{name}");
            if *name != "hold" {
                assert_eq!(request.cmd(), *name);
            }
        }
    }

    /// JSON values of a few levels (object keys are unique by construction).
    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            (-1e300f64..1e300).prop_map(Value::from),
            ".{0,8}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map(".{0,4}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = parse_request(&bytes);
        }

        /// Apart from duplicate keys, the strict reader reads JSON exactly as serde_json does.
        #[test]
        fn strict_json_agrees_with_serde_json(value in json_value()) {
            let text = value.to_string();
            let lax: Value = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(strict_json(&text).ok(), Some(lax));
        }

        #[test]
        fn arbitrary_json_objects_never_panic(
            cmd in prop_oneof![Just("play".to_string()), Just("stop".to_string()), "[a-z_]{0,8}"],
            key in "[a-z]{1,6}",
            number in any::<f64>(),
            text in ".{0,12}",
        ) {
            // Arbitrary objects, not requests: a map of values, not a type.
            let object: Map<String, Value> = [
                ("cmd".to_string(), Value::from(cmd)),
                ("motion".to_string(), Value::from(text)),
                (key, Value::from(number)),
            ]
            .into_iter()
            .collect();
            let _ = parse_request(Value::Object(object).to_string().as_bytes());
        }
    }
}
