//! What the daemon answers each request with, one type per reply, shared by the daemon (which
//! serialises them) and `motionctl` (which reads them back).
//!
//! A reply line is `{"ok":true, …fields}` ([`Reply::Ok`](super::protocol::Reply) with one of
//! these as the fields) or `{"ok":false,"error":{…}}` ([`ErrorReply`]). Field order is the order
//! of declaration, which is the order replies always had on the wire. Optional fields are left
//! out when they do not apply unless their documentation says they are `null`. Readers ignore
//! fields they do not know, so a reply may grow.
//!
//! `ErrorCode` lives here too, so the replies need nothing from [`protocol`](super::protocol),
//! which reads requests and writes these into lines.
//!
//! The doc comments are the protocol's reference: `docs/src/protocol.schema.json` and the
//! reference section of `docs/src/protocol.md` are generated from these types and
//! [`Request`](super::protocol::Request) (`tests/protocol_schema.rs` holds both to them).

use std::borrow::Cow;

use indexmap::IndexMap;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::backend::FaultKind;
use crate::backend::status::LinkState;
use crate::recorder::EventKind;
use crate::rt::State;

/// A boolean that is always `V` (the `ok` of a reply, the `ok` of a library entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Bool<const V: bool>;

impl<const V: bool> Serialize for Bool<V> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bool(V)
    }
}

impl<'de, const V: bool> Deserialize<'de> for Bool<V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        if bool::deserialize(deserializer)? == V {
            Ok(Bool)
        } else {
            Err(serde::de::Error::custom(format_args!("expected {V}")))
        }
    }
}

impl<const V: bool> JsonSchema for Bool<V> {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        if V { "true".into() } else { "false".into() }
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "boolean", "const": V})
    }
}

/// Protocol words the library already spells with `as_str` (the loop's states, fault kinds,
/// link states): written as that word, read back by finding it among `ALL`, listed in the
/// schema. One spelling, the library's.
macro_rules! words {
    ($ty:ty, $all:expr, $name:literal, $doc:literal) => {
        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let word = String::deserialize(deserializer)?;
                $all.into_iter()
                    .find(|w| w.as_str() == word)
                    .ok_or_else(|| {
                        let words: Vec<&str> = $all.into_iter().map(|w| w.as_str()).collect();
                        serde::de::Error::custom(format_args!(
                            "unknown {} {word:?}; expected one of {}",
                            $name,
                            words.join(", ")
                        ))
                    })
            }
        }

        impl JsonSchema for $ty {
            fn schema_name() -> Cow<'static, str> {
                $name.into()
            }

            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                let words: Vec<&str> = $all.into_iter().map(|w| w.as_str()).collect();
                json_schema!({"type": "string", "enum": words, "description": $doc})
            }
        }
    };
}

words!(
    State,
    State::ALL,
    "State",
    "The loop's state: `recording` is a teach-in, `estop` the E-stop holding the robot; in \
     `status`, `starved` also while a stream is past its last row and the loop holds it at rest."
);
words!(
    FaultKind,
    FaultKind::ALL,
    "FaultKind",
    "What kind of failure a bus, a drive or the loop's own checks reported."
);
words!(
    LinkState,
    LINK_STATES,
    "LinkState",
    "A bus's or drive's lifecycle: not enabled, in its enable sequence, following setpoints, \
     faulted (held where it was commanded until enabled again)."
);

words!(
    EventKind,
    EVENT_KINDS,
    "EventKind",
    "What a flight recorder event is about: a state change, a request, the guard's \
     intervention, a fault, the E-stop."
);

/// Every [`EventKind`], for reading it back.
const EVENT_KINDS: [EventKind; 5] = [
    EventKind::State,
    EventKind::Request,
    EventKind::Guard,
    EventKind::Fault,
    EventKind::EStop,
];

// A new event kind stops the build here until [`EVENT_KINDS`] lists it.
const _: fn(EventKind) = |kind| match kind {
    EventKind::State
    | EventKind::Request
    | EventKind::Guard
    | EventKind::Fault
    | EventKind::EStop => {}
};

/// Every [`LinkState`], for reading it back.
const LINK_STATES: [LinkState; 4] = [
    LinkState::Disabled,
    LinkState::Enabling,
    LinkState::Ready,
    LinkState::Fault,
];

// A new link state stops the build here until [`LINK_STATES`] lists it.
const _: fn(LinkState) = |state| match state {
    LinkState::Disabled | LinkState::Enabling | LinkState::Ready | LinkState::Fault => {}
};

/// What a script matches on in `{"ok":false,"error":{"code":…}}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// Not valid JSON (or not UTF-8).
    InvalidJson,
    /// Valid JSON that is not a well-formed request: not an object, no `cmd`, a field of the
    /// wrong type or out of range.
    BadRequest,
    /// `cmd` names no command.
    UnknownCommand,
    /// A field the command does not take.
    UnknownField,
    /// The request line exceeds [`MAX_REQUEST_BYTES`].
    TooLarge,
    /// The connection closed in the middle of a request line.
    Incomplete,
    /// No motion of that name in the library.
    UnknownMotion,
    /// The motion is in the library but failed to load or to prove against the limits.
    InvalidMotion,
    /// Understood, but not possible now (e.g. `resume` when nothing is paused).
    Refused,
    /// The loop is in a fault state; `clear-fault` first.
    Fault,
    /// The loop is not running (shutting down or failed).
    Unavailable,
    /// Too many connections at once.
    Busy,
    /// A request line was begun but not finished in time; the connection is closed.
    Timeout,
    /// A stream chunk whose rows are all past when the path could reach them.
    Late,
    /// A stream chunk whose `seq` is not above the last one's (a duplicate or out of order).
    Stale,
    /// A stream request for a slot whose stream another connection holds: only the connection
    /// that opened a stream sends its chunks and closes it, and a second `stream_open` waits
    /// until the owner closes it, its connection ends or a `stop` ends it.
    NotOwner,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidJson => "invalid_json",
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::UnknownCommand => "unknown_command",
            ErrorCode::UnknownField => "unknown_field",
            ErrorCode::TooLarge => "too_large",
            ErrorCode::Incomplete => "incomplete",
            ErrorCode::UnknownMotion => "unknown_motion",
            ErrorCode::InvalidMotion => "invalid_motion",
            ErrorCode::Refused => "refused",
            ErrorCode::Fault => "fault",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::Busy => "busy",
            ErrorCode::Timeout => "timeout",
            ErrorCode::Late => "late",
            ErrorCode::Stale => "stale",
            ErrorCode::NotOwner => "not_owner",
        }
    }
}

/// `{"ok":false,"error":{"code":"…","message":"…"}}`: the request failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ErrorReply {
    pub ok: Bool<false>,
    /// What failed and why.
    pub error: ErrorBody,
}

/// Why a request failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ErrorBody {
    /// What a script matches on.
    pub code: ErrorCode,
    /// A sentence for the operator: what, where and what to do.
    pub message: String,
}

/// What drives the joints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum BackendKind {
    /// The configuration's simulated backend.
    Sim,
    /// A configuration with buses, served with `--dry-run` (simulated motors stand in).
    DryRun,
    /// The configuration's buses.
    Buses,
}

impl BackendKind {
    /// The word on the wire (the test `enum_words_are_the_wire_words` holds the two together).
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Sim => "sim",
            BackendKind::DryRun => "dry-run",
            BackendKind::Buses => "buses",
        }
    }
}

/// `stop`, `pause`, `resume`, `quick_stop`, `enable`, `disable`, `clear_fault`, and `recover`
/// without `pose`: `{"ok":true}`, nothing more.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct DoneReply {}

/// `play`: sent once the loop has taken the playback.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PlayReply {
    /// The library motion.
    pub motion: String,
    /// The playback's number: `status` names the active playback by it.
    pub motion_id: u32,
    /// The motion's duration as played (after `speed` and any retiming), seconds.
    pub duration_s: f64,
    /// The approach from the commanded pose to the motion's first pose, seconds.
    pub approach_s: f64,
    /// The speed played: lower than `requested_speed` when the proof retimed the motion.
    pub speed: f64,
    /// The request's `speed` (1 when it gave none).
    pub requested_speed: f64,
    /// How much the proof slowed the motion down (a factor), null when it did not.
    pub retimed: Option<f64>,
    /// The joints the proof clamped onto their position limits.
    pub clamped: Vec<Clamped>,
    /// The request's `loop`.
    #[serde(rename = "loop")]
    pub looped: bool,
    /// The request's `group`, when it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// `true` when the playback took over from another (`replace`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub replace: bool,
    /// The request's `at`, when it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<f64>,
    /// The largest difference between a measured and a commanded position when the approach
    /// started from the measured pose (buses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_offset: Option<JointValue>,
    /// From the daemon taking up the request to the motion's first command reaching the
    /// backend, µs (when the first command went out before the reply).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_command_us: Option<f64>,
}

/// A joint the proof moved onto its position limit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Clamped {
    /// The DOF.
    pub joint: String,
    /// Source samples moved onto the limit.
    pub samples: usize,
    /// The largest distance a sample was moved (rad or m).
    pub max_change: f64,
}

/// A value on one joint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JointValue {
    /// The DOF.
    pub joint: String,
    /// In its unit (rad or m).
    pub value: f64,
}

/// `record` with `motion`: the teach-in has started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RecordReply {
    /// The library motion it records into.
    pub motion: String,
    /// Frames per second recorded: the requested rate rounded to whole loop ticks per frame.
    pub rate_hz: f64,
    /// The DOFs recorded, in the robot's order.
    pub joints: Vec<String>,
    /// The take file the frames are written to as they come.
    pub take: String,
}

/// `record` with `stop`: the teach-in was written into the library, which was loaded again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RecordStopReply {
    /// The library motion written.
    pub motion: String,
    /// Its file.
    pub path: String,
    /// Frames recorded.
    pub frames: u64,
    /// Frames per second.
    pub rate_hz: f64,
    /// From its first frame to its last, seconds.
    pub duration_s: f64,
    /// Its columns, in order.
    pub joints: Vec<String>,
    /// The state that cut the teach-in short (the E-stop, a fault), null when `record --stop`
    /// ended it.
    pub interrupted: Option<State>,
    /// The take reached `motion.max_take_s`: later frames were not recorded.
    pub capped: bool,
    /// Frames the loop recorded that could not be handed over in time (the take has a gap).
    pub lost_frames: u64,
    /// The motion as the library now lists it (its proof result), null when the library does
    /// not list it.
    pub library: Option<MotionEntry>,
}

/// `recover` with `pose`: the fault is cleared, the drives are enabled and the robot is on its
/// way to the pose.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RecoverReply {
    /// The library motion whose first pose the robot goes to.
    pub pose: String,
    /// How long going there takes, seconds.
    pub approach_s: f64,
}

/// `list` and `reload`: the library.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ListReply {
    /// Every `.seq` file of the library folder, by name.
    pub motions: Vec<MotionEntry>,
    /// How many motions are still being read after the daemon's start.
    pub loading: usize,
}

/// One motion of the library.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MotionEntry {
    /// The file name without `.seq`: what `play` takes.
    pub name: String,
    #[serde(flatten)]
    pub state: MotionState,
}

/// Whether a library motion can be played.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum MotionState {
    /// Loaded and proved.
    Ready {
        /// Its duration at speed 1, seconds.
        duration_s: f64,
        ok: Bool<true>,
        /// How much the proof slowed it down, null when it did not.
        retimed: Option<f64>,
        /// The joints the proof clamped onto their limits.
        clamped: Vec<Clamped>,
    },
    /// Still being read after the daemon's start.
    Loading {
        ok: Bool<false>,
        loading: Bool<true>,
        /// `still loading`.
        error: String,
    },
    /// Refused: it did not load or failed the proof.
    Failed {
        ok: Bool<false>,
        /// Why (`FILE:LINE:COL: …` where the file is at fault).
        error: String,
    },
}

/// `status`: the loop as of one tick.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StatusReply {
    /// The robot's state (the whole robot's slot; groups have their own).
    pub state: State,
    /// What drives the joints.
    pub backend: BackendKind,
    /// The control rate.
    pub rate_hz: f64,
    /// The robot's playback, while one is active.
    #[serde(flatten)]
    pub playback: Playback,
    /// CLOCK_MONOTONIC time (ns) at which the active playback's first command reached the
    /// backend, for measuring request-to-motion latency from outside.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_command_ns: Option<u64>,
    /// How the newest playback that has ended left the loop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_outcome: Option<LastOutcome>,
    /// Each joint group of the configuration (`groups`) by name: its own state and playback.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub groups: IndexMap<String, GroupStatus>,
    /// Each open stream.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub streams: Vec<StreamReport>,
    /// The loop tick the snapshot was taken at.
    pub tick: u64,
    /// False only at rest: a stop (a fault's, the E-stop's) still under way is moving.
    pub moving: bool,
    /// Measured positions by DOF name, in the robot's order (null: not a number).
    #[serde(deserialize_with = "nan_for_null")]
    #[schemars(with = "IndexMap<String, Option<f64>>")]
    pub positions: IndexMap<String, f64>,
    /// The last setpoints by DOF name.
    #[serde(deserialize_with = "nan_for_null")]
    #[schemars(with = "IndexMap<String, Option<f64>>")]
    pub commanded: IndexMap<String, f64>,
    /// The worst |commanded − measured| per DOF so far.
    #[serde(deserialize_with = "nan_for_null")]
    #[schemars(with = "IndexMap<String, Option<f64>>")]
    pub following_error: IndexMap<String, f64>,
    /// Each DOF's `[lower, upper]` position limits (null: unbounded on that side).
    pub position_limits: IndexMap<String, [Option<f64>; 2]>,
    /// The loop's wake-up latency (actual wake-up − deadline), µs.
    pub latency_us: Latency,
    /// Control periods that overran their deadline.
    pub overruns: u64,
    /// Setpoints the loop's own guard found outside the limits (each one faults).
    pub limit_violations: u64,
    /// What the loop thread obtained of the real-time settings (fixed once it runs).
    pub rt: RtReport,
    /// The fault that stopped the loop's motion, until cleared (at most one).
    pub faults: Vec<FaultReport>,
    /// The E-stop, when an input is watched or one has stopped the robot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estop: Option<EStopReport>,
    /// The flight recorder's newest events, newest last (with the recorder on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<EventReport>>,
    /// Each bus with its drives (configurations with buses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buses: Option<Vec<BusReport>>,
}

/// A playback under way: the robot's in `status`, a group's in its `groups` entry. Every field
/// is there while a playback is active, none otherwise (`motion` and `duration_s` only when the
/// daemon still knows the playback).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Playback {
    /// The playback's number, as `play` replied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub motion_id: Option<u32>,
    /// The library motion (or `NAME's first pose` for `recover --pose`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub motion: Option<String>,
    /// Its duration as played, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<f64>,
    /// Position in the motion, 0 to 1 (0 while approaching).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<f64>,
    /// Time into the motion, seconds (motion time: it slows while pausing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_s: Option<f64>,
}

/// One joint group's part of `status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GroupStatus {
    /// The group's state.
    pub state: State,
    #[serde(flatten)]
    pub playback: Playback,
}

/// What the loop thread obtained of the real-time settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RtReport {
    /// The CPU the loop is pinned to, null when not pinned.
    pub cpu: Option<usize>,
    /// `fifo` or `other`.
    pub policy: String,
    /// SCHED_FIFO priority (0 under `other`).
    pub priority: i32,
    /// Whether the daemon's memory is locked (mlockall).
    pub memory_locked: bool,
    /// The PM QoS wake-up latency request the loop holds, null when none.
    pub cpu_wakeup_latency: Option<WakeupReport>,
    /// Why a setting was not obtained and what to do, one line each.
    pub warnings: Vec<String>,
}

/// A PM QoS wake-up latency request held while the loop runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WakeupReport {
    /// The latency asked for, µs.
    pub latency_us: u32,
    /// The file holding it.
    pub path: String,
}

/// One event of the flight recorder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EventReport {
    /// The loop tick it happened at.
    pub tick: u64,
    pub kind: EventKind,
    /// What happened, in the journal's words.
    pub text: String,
    /// How long ago, seconds (loop time).
    pub ago_s: f64,
}

/// How a playback left the loop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LastOutcome {
    /// The playback's number.
    pub motion_id: u32,
    /// The library motion (or what else it played: `stream`, `NAME's first pose`).
    pub motion: String,
    pub outcome: Outcome,
}

/// How a playback ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Played to its end.
    Finished,
    /// Ended by `stop`, `quick_stop`, `disable` or the daemon's shutdown.
    Stopped,
    /// Ended by a fault.
    Faulted,
    /// Another playback took over from it (`replace`).
    Replaced,
    /// The loop never started it.
    Refused,
}

impl Outcome {
    /// The word on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Finished => "finished",
            Outcome::Stopped => "stopped",
            Outcome::Faulted => "faulted",
            Outcome::Replaced => "replaced",
            Outcome::Refused => "refused",
        }
    }
}

/// Percentiles of the loop's wake-up latency, µs (all 0 before the first tick).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Latency {
    /// The lowest so far.
    pub min: f64,
    /// The median.
    pub p50: f64,
    /// The 99th percentile.
    pub p99: f64,
    /// The 99.9th percentile.
    pub p999: f64,
    /// The highest so far.
    pub max: f64,
}

/// A fault of the loop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FaultReport {
    /// What failed.
    pub kind: FaultKind,
    /// The DOF at fault, null when no single joint is.
    pub joint: Option<String>,
    /// The protocol's own code (a CiA 402 error code, an SDO abort code, µs late for an
    /// overrun, …).
    pub code: u32,
    /// The fault in the words replies and the journal use.
    pub text: String,
}

/// The E-stop as `status` reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EStopReport {
    /// The input's debounced level, null when no input is watched.
    pub input: Option<InputLevel>,
    /// What stopped the robot, null while the E-stop does not hold it.
    pub cause: Option<EStopCause>,
    /// The DOF whose drive reported its own E-stop (`cause` `drive`), else null.
    pub joint: Option<String>,
    /// The cause in the words of the journal, null with `cause`.
    pub text: Option<String>,
    /// `clear_fault` brings the drives back up (they were up when the E-stop was asserted).
    pub reenable: bool,
}

/// The E-stop input's level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum InputLevel {
    Asserted,
    Released,
}

impl InputLevel {
    /// The word on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            InputLevel::Asserted => "asserted",
            InputLevel::Released => "released",
        }
    }
}

/// What asserted the E-stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EStopCause {
    /// The E-stop input (`estop.gpio`).
    Input,
    /// The input could not be read (treated as asserted).
    InputLost,
    /// A drive reported its own E-stop (`estop.drive`).
    Drive,
}

/// A bus's or a drive's counters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LinkReport {
    /// Where it is in its lifecycle.
    pub state: LinkState,
    /// Faults reported so far.
    pub faults: u32,
    /// The last of them, null before the first.
    pub last_fault: Option<LastFault>,
    /// Warnings reported so far (the drive kept running).
    pub warnings: u32,
    /// The last of them, null before the first.
    pub last_warning: Option<LastWarning>,
    /// Times the device was opened again after it was lost.
    pub reopened: u32,
}

/// A bus's or a drive's last fault.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LastFault {
    pub kind: FaultKind,
    /// The protocol's own code.
    pub code: u32,
    /// In the protocol's words, null where the kind and the code are all there is.
    pub text: Option<String>,
}

/// A drive's or an adapter's last warning.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LastWarning {
    /// As the protocol gives it (CiA 402: EMCY error code | error register << 16; SLCAN: flags).
    pub code: u32,
    /// In the protocol's words.
    pub text: String,
}

/// One bus of `status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BusReport {
    #[serde(flatten)]
    pub link: LinkReport,
    /// The bus's name in the configuration.
    pub name: String,
    /// How it is reached (`socketcan`, `slcan`, `serial`, …).
    pub transport: String,
    /// Frames sent.
    pub sent: u64,
    /// Frames received.
    pub received: u64,
    /// Frames received that no drive of the bus takes.
    pub ignored: u64,
    /// Its drives by DOF name.
    pub drives: IndexMap<String, DriveReport>,
}

/// One drive of a bus.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DriveReport {
    #[serde(flatten)]
    pub link: LinkReport,
    /// Whose words its codes are in (`cia402`, `odrive`, `mit`, `dynamixel`, …).
    pub protocol: String,
}

/// `dump`: the flight recorder's ring, written now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DumpReply {
    /// The MCAP file written.
    pub path: String,
    /// Loop ticks it holds.
    pub ticks: usize,
    /// The time they span, seconds.
    pub seconds: f64,
    /// Its size.
    pub bytes: u64,
}

/// `drives`: every drive, and what drives the joints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DrivesReply {
    /// What drives the joints (`status`'s `backend`).
    pub backend: BackendKind,
    /// Every drive of the configuration, in its order.
    pub drives: Vec<DriveRow>,
}

/// One drive as `drives` reports it. What it reports is null until it reported something.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DriveRow {
    /// The DOF it drives.
    pub joint: String,
    /// Its bus (`sim` for the simulated motors).
    pub bus: String,
    /// Its drive family (`cia402`, `odrive`, `mit`, `dynamixel`, …, `sim`).
    pub family: String,
    /// Its id on the bus.
    pub id: u32,
    /// Where it is in its lifecycle (the simulated motors: the loop's view of them).
    pub state: LinkState,
    /// Its last fault, null when none.
    pub last_error: Option<LastFault>,
    /// Measured position.
    pub position: Option<f64>,
    /// Last setpoint.
    pub commanded: Option<f64>,
    /// Measured velocity.
    pub velocity: Option<f64>,
    /// Measured effort (torque or force), as the drive reports it.
    pub effort: Option<f64>,
    /// The drive's own status word as its protocol reports it.
    pub status_word: Option<u32>,
    /// The drive's fault bits as its protocol reports them.
    pub error_word: Option<u32>,
    /// Whether a fresh report arrived since the last read.
    pub fresh: Option<bool>,
}

/// `stream_open`: the stream is open; nothing moves until its first chunk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StreamOpenReply {
    /// The request's `group`, when it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// The DOFs each row gives, in order.
    pub joints: Vec<String>,
    /// The rows' nominal rate.
    pub rate_hz: f64,
    /// The buffering horizon, seconds.
    pub horizon_s: f64,
    /// The splice's look-ahead, loop ticks.
    pub lead_ticks: u64,
    /// The loop tick the stream's clock starts at.
    pub tick: u64,
}

/// `stream_chunk`: the rows were spliced into the path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ChunkReply {
    /// The chunk's `seq`.
    pub seq: u64,
    /// The playback that carries the path from here (`status` names it).
    pub motion_id: u32,
    /// The loop tick of the splice's first command.
    pub tick: u64,
    /// From the tick the chunk was taken up at to its first command.
    pub ticks_ahead: u64,
    /// The look-ahead the splice asked for, loop ticks.
    pub lead_ticks: u64,
    /// Stream time the path joins the chunk's rows at, seconds; null when it cannot before
    /// they end: it heads for the last row while they last and brakes at its time.
    pub join_s: Option<f64>,
    /// The chunk's rows the path passes before it joins them (all when it cannot).
    pub skipped_rows: usize,
    /// The chunk resumed a starved stream.
    pub resumed: bool,
    /// Stream time of the path's last row, seconds.
    pub end_s: f64,
}

/// A stream: one entry of `status`'s `streams`, and the reply to `stream_close`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StreamReport {
    /// Its group, when it streams one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Where it is.
    pub state: StreamState,
    /// Why it ended (with `state` `ended`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<String>,
    /// The connection that opened it: the only one whose chunks feed it and that closes it.
    pub owner: StreamOwner,
    /// The last accepted chunk's `seq`, null before the first.
    pub seq: Option<u64>,
    /// Stream time: seconds since it opened.
    pub time_s: f64,
    /// Chunks accepted.
    pub accepted: u64,
    /// Chunks refused as `late`.
    pub late: u64,
    /// Chunks refused as `stale`.
    pub stale: u64,
    /// Chunks refused because no path could make them safe (`invalid_motion`).
    pub refused: u64,
    /// Times a chunk resumed the stream after it starved.
    pub resumed: u64,
}

/// Who holds a stream: the connection that opened it, as the kernel saw it connect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct StreamOwner {
    pub uid: u32,
    /// Absent when the client lives in another PID namespace.
    pub pid: Option<i32>,
    /// The connection's number, counted from 1 as the daemon accepts them.
    pub connection: u64,
    /// The loop tick it opened the stream at.
    pub opened_tick: u64,
}

/// Where a stream is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StreamState {
    /// Open, no chunk accepted yet.
    Waiting,
    /// Its rows are being played.
    Streaming,
    /// Past its last row: braking or at rest.
    Starved,
    /// Something else took the slot (a stop, a fault, another motion).
    Ended,
}

/// Reads one reply line as the answer `T` to the request sent, or the daemon's refusal. `T`
/// ignores fields it does not know (`ok` among them), so a newer daemon's additions are read.
pub fn read<T: DeserializeOwned>(line: &str) -> Result<Result<T, ErrorBody>, serde_json::Error> {
    /// Which of the two a line is.
    #[derive(Deserialize)]
    struct Envelope {
        ok: bool,
    }
    if serde_json::from_str::<Envelope>(line)?.ok {
        serde_json::from_str(line).map(Ok)
    } else {
        serde_json::from_str::<ErrorReply>(line).map(|e| Err(e.error))
    }
}

/// Per-DOF numbers: null on the wire is a value that is not a number (serde_json writes NaN as
/// null), read back as NaN.
fn nan_for_null<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<IndexMap<String, f64>, D::Error> {
    let map = IndexMap::<String, Option<f64>>::deserialize(deserializer)?;
    Ok(map
        .into_iter()
        .map(|(k, v)| (k, v.unwrap_or(f64::NAN)))
        .collect())
}

/// Every word a unit-variant enum takes on the wire, as its JSON Schema lists them: derived
/// from the type, so a new variant is checked without anyone listing it.
#[cfg(test)]
pub(crate) fn wire_words<T: schemars::JsonSchema>() -> Vec<String> {
    let schema = serde_json::to_value(schemars::schema_for!(T)).unwrap();
    let variants = schema["oneOf"]
        .as_array()
        .cloned()
        .unwrap_or_else(|| vec![schema.clone()]);
    let words: Vec<String> = variants
        .iter()
        .flat_map(|v| match (&v["const"], &v["enum"]) {
            (serde_json::Value::String(word), _) => vec![word.clone()],
            (_, serde_json::Value::Array(words)) => words
                .iter()
                .map(|w| w.as_str().unwrap().to_string())
                .collect(),
            _ => panic!("not a unit variant: {v}"),
        })
        .collect();
    assert!(!words.is_empty(), "{schema}");
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_the_library_spelling_both_ways() {
        for state in State::ALL {
            let text = serde_json::to_string(&state).unwrap();
            assert_eq!(text, format!("\"{}\"", state.as_str()));
            assert_eq!(serde_json::from_str::<State>(&text).unwrap(), state);
        }
        for kind in FaultKind::ALL {
            let text = serde_json::to_string(&kind).unwrap();
            assert_eq!(serde_json::from_str::<FaultKind>(&text).unwrap(), kind);
        }
        for link in LINK_STATES {
            let text = serde_json::to_string(&link).unwrap();
            assert_eq!(serde_json::from_str::<LinkState>(&text).unwrap(), link);
        }
        let err = serde_json::from_str::<State>("\"dancing\"").unwrap_err();
        assert!(err.to_string().contains("expected one of idle"), "{err}");
        assert!(serde_json::from_str::<Bool<true>>("false").is_err());
    }

    #[test]
    fn library_entries_keep_their_order_and_read_back() {
        let entries = [
            r#"{"name":"wave","duration_s":4.0,"ok":true,"retimed":null,"clamped":[]}"#,
            r#"{"name":"bad","ok":false,"error":"bad.seq:3:7: x"}"#,
            r#"{"name":"long","ok":false,"loading":true,"error":"still loading"}"#,
        ];
        for line in entries {
            let entry: MotionEntry = serde_json::from_str(line).unwrap();
            assert_eq!(serde_json::to_string(&entry).unwrap(), line);
        }
        let failed: MotionEntry = serde_json::from_str(entries[1]).unwrap();
        assert!(matches!(failed.state, MotionState::Failed { .. }));
    }

    /// Every variant's word, as the derived schema lists them (none can be left out), reads
    /// back as that variant and is the word `as_str` gives.
    fn spelled_both_ways<T>(as_str: fn(T) -> &'static str)
    where
        T: JsonSchema + Serialize + serde::de::DeserializeOwned + Copy,
    {
        for word in wire_words::<T>() {
            let text = format!("\"{word}\"");
            let value: T = serde_json::from_str(&text).unwrap();
            assert_eq!(as_str(value), word);
            assert_eq!(serde_json::to_string(&value).unwrap(), text);
        }
    }

    #[test]
    fn enum_words_are_the_wire_words() {
        spelled_both_ways(BackendKind::as_str);
        spelled_both_ways(Outcome::as_str);
        spelled_both_ways(InputLevel::as_str);
    }

    #[test]
    fn a_line_reads_as_its_answer_or_the_refusal() {
        let ok = r#"{"ok":true,"pose":"home","approach_s":1.5,"later":1}"#;
        let answer = read::<RecoverReply>(ok).unwrap().unwrap();
        assert_eq!(answer.pose, "home");
        let refused = r#"{"ok":false,"error":{"code":"fault","message":"m"}}"#;
        let error = read::<RecoverReply>(refused).unwrap().unwrap_err();
        assert_eq!(error.code, ErrorCode::Fault);
        assert!(read::<RecoverReply>(r#"{"ok":true}"#).is_err());
        assert!(read::<DoneReply>("[]").is_err());
    }

    #[test]
    fn null_positions_read_as_nan() {
        let map = nan_for_null(&mut serde_json::Deserializer::from_str(
            r#"{"a":null,"b":1.5}"#,
        ))
        .unwrap();
        assert!(map["a"].is_nan());
        assert_eq!(map["b"], 1.5);
    }
}
