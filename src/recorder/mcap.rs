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
    fn time_ns(&self, tick: u64) -> u64 {
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
    let options = ::mcap::WriteOptions::new()
        .compression(Some(::mcap::Compression::Zstd))
        // Off the loop, but on a robot's computer: no compression threads of its own, and the
        // same bytes for the same rows.
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
    let mut sequence = 0u32;
    let mut put = |w: &mut ::mcap::Writer<W>, channel: u16, tick: u64, value: &Value| {
        sequence = sequence.wrapping_add(1);
        let t = meta.time_ns(tick);
        let header = ::mcap::records::MessageHeader {
            channel_id: channel,
            sequence,
            log_time: t,
            publish_time: t,
        };
        let data = serde_json::to_vec(value)?;
        w.write_to_known_channel(&header, &data)?;
        Ok::<(), Error>(())
    };
    let first = rows.first().map_or(0, |r| r.tick);
    let mut pending = events.iter().peekable();
    for row in rows {
        // Events before the first row (or between rows) go out before the row after them.
        while let Some(e) = pending.next_if(|e| e.tick < row.tick) {
            put(&mut w, channels.events, e.tick, &log_message(meta, e))?;
        }
        let time = (row.tick - first) as f64 / meta.rate_hz;
        put(
            &mut w,
            channels.lp,
            row.tick,
            &loop_message(meta, row, time),
        )?;
        put(
            &mut w,
            channels.joints,
            row.tick,
            &joints_message(&dofs, row, time),
        )?;
        put(
            &mut w,
            channels.drives,
            row.tick,
            &drives_message(&dofs, row, time),
        )?;
        while let Some(e) = pending.next_if(|e| e.tick <= row.tick) {
            put(&mut w, channels.events, e.tick, &log_message(meta, e))?;
        }
    }
    for e in pending {
        put(&mut w, channels.events, e.tick, &log_message(meta, e))?;
    }
    w.finish()?;
    Ok(())
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

fn loop_message(meta: &Meta, row: &TraceRow, time: f64) -> Value {
    let fault = row.fault.map(|f| {
        let joint = f
            .dof
            .and_then(|d| meta.joints.dofs.get(usize::from(d)))
            .map(|d| d.name.as_str());
        json!({"kind": f.kind.as_str(), "joint": joint, "code": f.code})
    });
    json!({
        "tick": row.tick,
        "time": time,
        "state": row.state.as_str(),
        "state_id": row.state as u8,
        "late_us": row.late_ns as f64 / 1e3,
        "exec_us": row.exec_ns as f64 / 1e3,
        "guard_interventions": row.guard,
        "fault": fault,
        "estop": row.estop.cause.is_some(),
    })
}

fn joints_message(dofs: &[&str], row: &TraceRow, time: f64) -> Value {
    let mut m = Map::new();
    m.insert("tick".into(), json!(row.tick));
    m.insert("time".into(), json!(time));
    for (j, ((name, c), measured)) in dofs
        .iter()
        .zip(&row.commanded)
        .zip(&row.measured)
        .enumerate()
    {
        m.insert(
            (*name).to_string(),
            json!({
                "commanded": c.position,
                "velocity": c.velocity,
                "acceleration": c.acceleration,
                "measured": measured,
                "following_error": row.following_error(j),
            }),
        );
    }
    Value::Object(m)
}

fn drives_message(dofs: &[&str], row: &TraceRow, time: f64) -> Value {
    let mut m = Map::new();
    m.insert("tick".into(), json!(row.tick));
    m.insert("time".into(), json!(time));
    for (name, f) in dofs.iter().zip(&row.feedback) {
        m.insert(
            (*name).to_string(),
            json!({
                "velocity": f.velocity,
                "effort": f.effort,
                "status": f.status,
                "error": f.error,
                "fresh": f.valid,
            }),
        );
    }
    Value::Object(m)
}

fn log_message(meta: &Meta, e: &Event) -> Value {
    let t = meta.time_ns(e.tick);
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
                3 paused, 4 stopping, 5 holding, 6 fault, 7 disabled, 8 recording, 9 estop"},
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
