//! Rows and events as an MCAP file that Foxglove and PlotJuggler open as they are.
//!
//! Messages are JSON (message encoding `json`) described by JSON Schema (schema encoding
//! `jsonschema`): the one encoding both tools decode without a plugin or generated code —
//! Foxglove documents `jsonschema` + `json` for MCAP, and PlotJuggler's built-in JSON parser takes
//! any channel whose message encoding is `json` (it needs a schema record, which it does not
//! read) and flattens objects into series by key. So each DOF's values are keyed by the DOF's
//! name and read as `/motiond/joints/elbow_pitch/measured` in PlotJuggler and
//! `/motiond/joints.elbow_pitch.measured` in Foxglove. Numbers are written in their shortest
//! round-trip form, so they read back equal to what the loop recorded (and to the CSV trace).
//!
//! One channel per kind of message, one message per tick on each of the first three:
//! - `/motiond/loop` (`motiond.Loop`): tick, time, state, lateness, execution time, guard
//!   interventions, fault, E-stop.
//! - `/motiond/joints` (`motiond.Joints`): per DOF commanded position, velocity, acceleration,
//!   measured position, following error.
//! - `/motiond/drives` (`motiond.Drives`): per DOF what the drive reported: velocity, effort,
//!   status and error words, whether it was fresh.
//! - `/motiond/events` (`foxglove.Log`, so Foxglove's Log panel lists them): state changes,
//!   requests with their uid, guard interventions, faults, E-stops.
//!
//! Log and publish times are CLOCK_REALTIME at the tick's deadline.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{Seek, Write};

use serde_json::{Map, Value, json};

use super::events::Event;
use crate::rt::TraceRow;
use crate::trajectory::JointSet;

pub const TOPIC_LOOP: &str = "/motiond/loop";
pub const TOPIC_JOINTS: &str = "/motiond/joints";
pub const TOPIC_DRIVES: &str = "/motiond/drives";
pub const TOPIC_EVENTS: &str = "/motiond/events";

/// What the file is of: the robot's DOFs, the loop's rate and when its tick 0 was.
#[derive(Debug, Clone)]
pub struct Meta<'a> {
    pub joints: &'a JointSet,
    pub rate_hz: f64,
    /// CLOCK_REALTIME at loop tick 0, ns.
    pub epoch_ns: u64,
    /// Why the file was written (`fault`, `estop`, `guard`, `dump`, `trace`), for its metadata.
    pub reason: &'a str,
}

impl Meta<'_> {
    fn clock(&self) -> Clock {
        Clock {
            rate_hz: self.rate_hz,
            epoch_ns: self.epoch_ns,
        }
    }
}

/// Tick → CLOCK_REALTIME: the loop's rate and its tick 0.
#[derive(Debug, Clone, Copy)]
struct Clock {
    rate_hz: f64,
    epoch_ns: u64,
}

impl Clock {
    fn time_ns(self, tick: u64) -> u64 {
        self.epoch_ns
            .saturating_add((tick as f64 * 1e9 / self.rate_hz).round() as u64)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Mcap(#[from] ::mcap::McapError),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

/// Writes `rows` (consecutive loop ticks, oldest first) and `events` (by tick) to `out`: per
/// tick its row's messages, then the events of that tick; events after the last row at the end.
pub fn write<W: Write + Seek>(
    out: W,
    meta: &Meta,
    rows: &[TraceRow],
    events: &[Event],
) -> Result<(), Error> {
    let mut stream = Stream::new(out, meta)?;
    let mut pending = events.iter().peekable();
    for row in rows {
        // Events before the first row (or between rows) go out before the row after them.
        while let Some(e) = pending.next_if(|e| e.tick < row.tick) {
            stream.event(e)?;
        }
        stream.row(row)?;
        while let Some(e) = pending.next_if(|e| e.tick <= row.tick) {
            stream.event(e)?;
        }
    }
    for e in pending {
        stream.event(e)?;
    }
    stream.finish()
}

/// [`write`] a row and an event at a time, as they come (`motiond rehearse --trace X.mcap`): a
/// record of any length in constant memory. The caller keeps rows in tick order and gives each
/// tick's events after its row.
pub struct Stream<W: Write + Seek> {
    w: ::mcap::Writer<W>,
    channels: Channels,
    text: Writer,
    clock: Clock,
    sequence: u32,
    first: Option<u64>,
}

impl<W: Write + Seek> Stream<W> {
    /// Starts the file: its schemas, channels and metadata.
    pub fn new(out: W, meta: &Meta) -> Result<Self, Error> {
        let options = ::mcap::WriteOptions::new()
            .compression(Some(::mcap::Compression::Zstd))
            // Off the loop, but on a robot's computer: no compression threads of its own, and
            // the same bytes for the same rows.
            .compression_threads(0)
            .profile("")
            .library(concat!("motiond ", env!("CARGO_PKG_VERSION")));
        let mut w = options.create(out)?;
        let dofs: Vec<&str> = meta.joints.dofs.iter().map(|d| d.name.as_str()).collect();
        let channels = Channels {
            lp: channel(&mut w, TOPIC_LOOP, "motiond.Loop", &loop_schema())?,
            joints: channel(
                &mut w,
                TOPIC_JOINTS,
                "motiond.Joints",
                &joints_schema(&dofs),
            )?,
            drives: channel(
                &mut w,
                TOPIC_DRIVES,
                "motiond.Drives",
                &drives_schema(&dofs),
            )?,
            events: channel(&mut w, TOPIC_EVENTS, "foxglove.Log", &log_schema())?,
        };
        let mut metadata = BTreeMap::new();
        metadata.insert("reason".to_string(), meta.reason.to_string());
        metadata.insert("rate_hz".to_string(), meta.rate_hz.to_string());
        metadata.insert("joints".to_string(), dofs.join(","));
        w.write_metadata(&::mcap::records::Metadata {
            name: "motiond".into(),
            metadata,
        })?;
        let clock = meta.clock();
        Ok(Stream {
            w,
            channels,
            text: Writer {
                clock,
                keys: dofs
                    .iter()
                    .map(serde_json::to_string)
                    .collect::<Result<_, _>>()?,
                buf: String::new(),
            },
            clock,
            sequence: 0,
            first: None,
        })
    }

    fn put(&mut self, channel: u16, tick: u64) -> Result<(), Error> {
        self.sequence = self.sequence.wrapping_add(1);
        let t = self.clock.time_ns(tick);
        let header = ::mcap::records::MessageHeader {
            channel_id: channel,
            sequence: self.sequence,
            log_time: t,
            publish_time: t,
        };
        self.w
            .write_to_known_channel(&header, self.text.buf.as_bytes())?;
        Ok(())
    }

    /// One row's messages on the loop, joints and drives channels; `time` counts from the first
    /// row written.
    pub fn row(&mut self, row: &TraceRow) -> Result<(), Error> {
        let first = *self.first.get_or_insert(row.tick);
        let time = row.tick.saturating_sub(first) as f64 / self.clock.rate_hz;
        self.text.loop_message(row, time);
        self.put(self.channels.lp, row.tick)?;
        self.text.joints_message(row, time);
        self.put(self.channels.joints, row.tick)?;
        self.text.drives_message(row, time);
        self.put(self.channels.drives, row.tick)
    }

    /// One event on the events channel.
    pub fn event(&mut self, e: &Event) -> Result<(), Error> {
        self.text.log_message(e)?;
        self.put(self.channels.events, e.tick)
    }

    /// Writes the summary and index and flushes them out: the file is complete.
    pub fn finish(mut self) -> Result<(), Error> {
        self.w.finish()?;
        self.w
            .into_inner()
            .flush()
            .map_err(::mcap::McapError::from)?;
        Ok(())
    }
}

struct Channels {
    lp: u16,
    joints: u16,
    drives: u16,
    events: u16,
}

fn channel<W: Write + Seek>(
    w: &mut ::mcap::Writer<W>,
    topic: &str,
    name: &str,
    schema: &Value,
) -> Result<u16, Error> {
    let schema = w.add_schema(name, "jsonschema", &serde_json::to_vec(schema)?)?;
    Ok(w.add_channel(schema, topic, "json", &BTreeMap::new())?)
}

/// A number as JSON: its shortest round-trip decimal (as the CSV trace writes it), `null` when
/// not finite.
fn num(out: &mut String, x: f64) {
    if x.is_finite() {
        let _ = write!(out, "{x}");
    } else {
        out.push_str("null");
    }
}

/// The messages of one row, written straight into reused buffers: a dump is tens of thousands of
/// them, made on the robot's computer.
struct Writer {
    clock: Clock,
    /// Each DOF's name as a JSON string, quoted and escaped once.
    keys: Vec<String>,
    buf: String,
}

impl Writer {
    fn head(&mut self, row: &TraceRow, time: f64) {
        self.buf.clear();
        let _ = write!(self.buf, "{{\"tick\":{},\"time\":", row.tick);
        num(&mut self.buf, time);
    }

    fn loop_message(&mut self, row: &TraceRow, time: f64) {
        self.head(row, time);
        let b = &mut self.buf;
        let _ = write!(
            b,
            ",\"state\":\"{}\",\"state_id\":{},\"late_us\":",
            row.state.as_str(),
            row.state as u8
        );
        num(b, row.late_ns as f64 / 1e3);
        b.push_str(",\"exec_us\":");
        num(b, row.exec_ns as f64 / 1e3);
        let _ = write!(b, ",\"guard_interventions\":{},\"fault\":", row.guard);
        match row.fault {
            None => b.push_str("null"),
            Some(f) => {
                let joint = f
                    .dof
                    .and_then(|d| self.keys.get(usize::from(d)))
                    .map_or("null", String::as_str);
                let _ = write!(
                    b,
                    "{{\"kind\":\"{}\",\"joint\":{joint},\"code\":{}}}",
                    f.kind.as_str(),
                    f.code
                );
            }
        }
        let _ = write!(b, ",\"estop\":{}}}", row.estop.cause.is_some());
    }

    fn joints_message(&mut self, row: &TraceRow, time: f64) {
        self.head(row, time);
        for (j, ((key, c), measured)) in self
            .keys
            .iter()
            .zip(&row.commanded)
            .zip(&row.measured)
            .enumerate()
        {
            let b = &mut self.buf;
            let _ = write!(b, ",{key}:{{\"commanded\":");
            num(b, c.position);
            b.push_str(",\"velocity\":");
            num(b, c.velocity);
            b.push_str(",\"acceleration\":");
            num(b, c.acceleration);
            b.push_str(",\"measured\":");
            num(b, *measured);
            b.push_str(",\"following_error\":");
            num(b, row.following_error(j));
            b.push('}');
        }
        self.buf.push('}');
    }

    fn drives_message(&mut self, row: &TraceRow, time: f64) {
        self.head(row, time);
        for (key, f) in self.keys.iter().zip(&row.feedback) {
            let b = &mut self.buf;
            let _ = write!(b, ",{key}:{{\"velocity\":");
            num(b, f.velocity);
            b.push_str(",\"effort\":");
            num(b, f.effort);
            let _ = write!(
                b,
                ",\"status\":{},\"error\":{},\"fresh\":{}}}",
                f.status, f.error, f.valid
            );
        }
        self.buf.push('}');
    }

    fn log_message(&mut self, e: &Event) -> Result<(), Error> {
        self.buf.clear();
        serde_json::to_writer(StringWriter(&mut self.buf), &log_message(self.clock, e))?;
        Ok(())
    }
}

/// `io::Write` into a `String` (serde_json writes valid UTF-8).
struct StringWriter<'a>(&'a mut String);

impl std::io::Write for StringWriter<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let text = std::str::from_utf8(bytes)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        self.0.push_str(text);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn log_message(clock: Clock, e: &Event) -> Value {
    let t = clock.time_ns(e.tick);
    let mut v = json!({
        "timestamp": {"sec": t / 1_000_000_000, "nsec": t % 1_000_000_000},
        "level": e.kind.level(),
        "message": e.text,
        "name": "motiond",
        "file": e.kind.as_str(),
        "line": 0,
        "tick": e.tick,
        "kind": e.kind.as_str(),
    });
    if let Some(uid) = e.uid {
        v["uid"] = json!(uid);
    }
    if let Some(state) = e.state {
        v["state"] = json!(state.as_str());
    }
    v
}

fn number() -> Value {
    json!({"type": "number"})
}

fn integer() -> Value {
    json!({"type": "integer", "minimum": 0})
}

fn per_dof(dofs: &[&str], title: &str, fields: Value) -> Value {
    let mut properties = Map::new();
    properties.insert("tick".into(), integer());
    properties.insert("time".into(), number());
    for name in dofs {
        properties.insert((*name).to_string(), fields.clone());
    }
    let mut required: Vec<&str> = vec!["tick", "time"];
    required.extend(dofs);
    json!({"title": title, "type": "object", "properties": properties, "required": required})
}

fn loop_schema() -> Value {
    json!({
        "title": "motiond.Loop",
        "description": "One tick of motiond's real-time loop",
        "type": "object",
        "properties": {
            "tick": integer(),
            "time": {"type": "number", "description": "seconds since the first row"},
            "state": {"type": "string"},
            "state_id": {"type": "integer", "description": "0 idle, 1 approaching, 2 playing, \
                3 paused, 4 stopping, 5 holding, 6 fault, 7 disabled, 8 recording, 9 estop, \
                10 streaming, 11 starved"},
            "late_us": {"type": "number", "description": "wake-up − deadline, µs"},
            "exec_us": {"type": "number", "description": "wake-up to the end of the tick, µs"},
            "guard_interventions": {"type": "integer", "description": "since the loop started"},
            "fault": {"type": ["object", "null"], "properties": {
                "kind": {"type": "string"}, "joint": {"type": ["string", "null"]},
                "code": {"type": "integer"}}},
            "estop": {"type": "boolean"},
        },
        "required": ["tick", "time", "state", "state_id", "late_us", "exec_us",
                     "guard_interventions", "fault", "estop"],
    })
}

fn joints_schema(dofs: &[&str]) -> Value {
    per_dof(
        dofs,
        "motiond.Joints",
        json!({"type": "object", "properties": {
            "commanded": number(), "velocity": number(), "acceleration": number(),
            "measured": number(), "following_error": number()},
            "required": ["commanded", "velocity", "acceleration", "measured", "following_error"]}),
    )
}

fn drives_schema(dofs: &[&str]) -> Value {
    per_dof(
        dofs,
        "motiond.Drives",
        json!({"type": "object", "properties": {
            "velocity": number(), "effort": number(), "status": integer(), "error": integer(),
            "fresh": {"type": "boolean"}},
            "required": ["velocity", "effort", "status", "error", "fresh"]}),
    )
}

/// Foxglove's `foxglove.Log`, plus the tick, the event's kind, and for a request the uid.
fn log_schema() -> Value {
    json!({
        "title": "foxglove.Log",
        "description": "A log message",
        "type": "object",
        "properties": {
            "timestamp": {"type": "object", "properties": {
                "sec": integer(), "nsec": integer()}, "required": ["sec", "nsec"]},
            "level": {"type": "integer", "oneOf": [
                {"title": "UNKNOWN", "const": 0}, {"title": "DEBUG", "const": 1},
                {"title": "INFO", "const": 2}, {"title": "WARNING", "const": 3},
                {"title": "ERROR", "const": 4}, {"title": "FATAL", "const": 5}]},
            "message": {"type": "string"},
            "name": {"type": "string"},
            "file": {"type": "string"},
            "line": integer(),
            "tick": integer(),
            "kind": {"type": "string",
                     "enum": ["state", "request", "guard", "fault", "estop"]},
            "uid": integer(),
            "state": {"type": "string"},
        },
        "required": ["timestamp", "level", "message", "name", "file", "line", "tick", "kind"],
    })
}
