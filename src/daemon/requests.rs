//! What the daemon does with each request: the motion library on one side, the [`Session`] on
//! the other.
//!
//! Everything that allocates or takes time (loading and proving motions, building the approach)
//! happens on the control side, in the session; the loop only receives boxed, proved playbacks.

use std::collections::VecDeque;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use indexmap::IndexMap;

use super::library::Library;
use super::protocol::{
    Answer, DEFAULT_RECORD_RATE_HZ, ErrorCode, MAX_AT_AHEAD_S, Reply, Request, RequestError,
};
use super::reply::{
    BackendKind, BusReport, Clamped, DriveReport, DriveRow, DrivesReply, DumpReply, EStopReport,
    EventReport, FaultReport, GroupStatus, InputLevel, JointValue, LastFault, LastOutcome,
    LastWarning, Latency, LinkReport, ListReply, MotionEntry, MotionState, PlayReply, Playback,
    RecordReply, RecordStopReply, RecoverReply, RtReport, StatusReply, WakeupReport,
};
use super::server::{Handler, Peer};
use super::stream::Streams;
use crate::backend::status::{BusSnapshot, LinkSnapshot, LinkState};
use crate::backend::{FaultKind, family};
use crate::diag::Num;
use crate::motion::seq::write::WriteError;
use crate::motion::take::{self, Take};
use crate::recorder::FlightRecorder;
use crate::rt::{EStop, EStopCause, Outcome, Repeat, State};
use crate::session::{
    BusWatch, ErrorKind, GroupCommand, Overrides, PlayRequest, Prepared, Robot, Session,
    SessionError, Shutdown, Stopping, describe_estop, describe_fault, motion_from_text,
};
use crate::trajectory::{JointSet, Options, ProofReport};

/// The flight recorder's newest events `status` shows.
const EVENTS_IN_STATUS: usize = 5;

/// Longest a `dump` waits for the flight recorder to write its file.
const DUMP_TIMEOUT: Duration = Duration::from_secs(30);

/// Recent playbacks remembered (only the active one and a just-sent one are ever asked for).
const PLAYED_KEPT: usize = 16;

/// How far in the past a `play` start time may lie and still mean "now": the client's clock
/// reading and the request's transit.
const AT_LATENESS: Duration = Duration::from_secs(1);

/// A playback sent to the loop.
#[derive(Debug)]
struct Played {
    id: u32,
    name: String,
    duration_s: f64,
}

/// A teach-in under way, as the daemon knows it (its take is in the session), or ended but its
/// take not yet complete on disk.
#[derive(Debug)]
struct Recording {
    name: String,
    /// The take of a `record --stop` that could not complete it (the disk is full, …), and what
    /// had cut the teach-in short: the next `record --stop` tries again.
    unsaved: Option<(Take, Option<State>)>,
    /// Journalled already: the loop left the teach-in, the take reached its length, a write
    /// failed.
    told_interrupted: bool,
    told_capped: bool,
    told_error: bool,
}

/// The robot and how its library motions are read and proved (speed 1; `play` proves other
/// speeds).
pub struct Motions {
    pub robot: Robot,
    pub options: Options,
    /// Library files larger than this are refused unread (`motion.max_file_mib`).
    pub max_file_bytes: u64,
}

impl Motions {
    /// The robot's library settings from its configuration.
    pub fn new(robot: Robot) -> Motions {
        let options = robot.options(Overrides::default());
        let max_file_bytes = robot
            .config
            .as_ref()
            .map_or(DEFAULT_MAX_FILE_BYTES, |c| c.motion.max_file_bytes);
        Motions {
            robot,
            options,
            max_file_bytes,
        }
    }

    /// The `.seq` files of `dir`, each still loading ([`Motions::load`] fills them in).
    pub fn scan_library(&self, dir: &Path) -> std::io::Result<Library<Prepared>> {
        Library::scan(dir, self.max_file_bytes)
    }

    /// Loads and proves every entry of `library` still loading.
    pub fn load(&self, library: &Library<Prepared>) {
        library.load_all(|path, text| {
            let motion = motion_from_text(text, path).map_err(|e| e.to_string())?;
            self.robot
                .prepare_motion(path, motion, &self.options)
                .map_err(|e| e.to_string())
        });
    }

    /// Loads and proves every `.seq` file of `dir`.
    pub fn load_library(&self, dir: &Path) -> std::io::Result<Library<Prepared>> {
        let library = self.scan_library(dir)?;
        self.load(&library);
        Ok(library)
    }
}

/// `motion.max_file_mib`'s default, for a robot loaded without a configuration file.
const DEFAULT_MAX_FILE_BYTES: u64 = 256 << 20;

/// The daemon's request handler.
pub struct Daemon {
    motions: Arc<Motions>,
    library_dir: PathBuf,
    library: RwLock<Arc<Library<Prepared>>>,
    session: Arc<Session>,
    /// Recent playbacks, for naming the active one in `status` and in the journal.
    played: Mutex<VecDeque<Played>>,
    /// What drives the joints (for `status`).
    backend: BackendKind,
    /// The fault last written to the journal, so each is logged once, when it happens.
    logged_fault: Mutex<Option<crate::backend::BackendError>>,
    /// The E-stop as last written to the journal, so each change is logged once.
    logged_estop: Mutex<EStop>,
    /// The teach-in under way: the library name it is recorded into, what was journalled.
    recording: Mutex<Option<Recording>>,
    /// The buses' warnings, faults and reopens, each journalled once.
    bus_watch: Option<Mutex<BusWatch>>,
    /// The flight recorder: told every request, asked for `dump`.
    recorder: Option<FlightRecorder>,
    /// Every drive: its joint, bus, family and id (from the configuration as written, so a dry
    /// run names the drives it stands in for).
    drives: Vec<DriveInfo>,
    /// Open streams of timed positions, one a slot.
    streams: Mutex<Streams>,
}

/// What `drives` names a drive by.
#[derive(Debug, Clone, PartialEq)]
pub struct DriveInfo {
    pub joint: String,
    /// The bus's name (`sim` for the simulated motors).
    pub bus: String,
    /// `cia402`, `odrive`, `mit`, `dynamixel`, or `sim`.
    pub family: String,
    pub id: u32,
}

impl DriveInfo {
    /// The drives of `config` for `joints`: each bus joint, or one simulated motor per DOF.
    pub fn of(config: &crate::config::Config, joints: &JointSet) -> Vec<DriveInfo> {
        match &config.backend {
            crate::config::BackendConfig::Buses(buses) => buses
                .iter()
                .flat_map(|b| {
                    b.joints.iter().map(|j| DriveInfo {
                        joint: j.dof.clone(),
                        bus: b.name.clone(),
                        family: j.family.name().into(),
                        id: u32::from(j.id),
                    })
                })
                .collect(),
            crate::config::BackendConfig::Sim => DriveInfo::sim(joints),
        }
    }

    /// One simulated motor per DOF, numbered in DOF order.
    pub fn sim(joints: &JointSet) -> Vec<DriveInfo> {
        joints
            .dofs
            .iter()
            .enumerate()
            .map(|(i, d)| DriveInfo {
                joint: d.name.clone(),
                bus: "sim".into(),
                family: "sim".into(),
                id: i as u32,
            })
            .collect()
    }
}

impl Daemon {
    /// A daemon serving `library`, which may still be loading ([`Daemon::finish_loading`]).
    pub fn new(
        motions: Motions,
        library_dir: PathBuf,
        library: Library<Prepared>,
        session: Arc<Session>,
        backend: BackendKind,
    ) -> Self {
        let drives = match &motions.robot.config {
            Some(config) => DriveInfo::of(config, session.joints()),
            None => DriveInfo::sim(session.joints()),
        };
        Self {
            motions: Arc::new(motions),
            library_dir,
            library: RwLock::new(Arc::new(library)),
            played: Mutex::new(VecDeque::new()),
            backend,
            logged_fault: Mutex::new(None),
            logged_estop: Mutex::new(EStop::default()),
            recording: Mutex::new(None),
            bus_watch: session
                .buses()
                .map(|b| Mutex::new(BusWatch::new(b.clone()))),
            drives,
            session,
            recorder: None,
            streams: Mutex::new(Streams::default()),
        }
    }

    /// The daemon naming its drives as `drives` (e.g. the buses a dry run stands in for).
    pub fn with_drives(mut self, drives: Vec<DriveInfo>) -> Self {
        self.drives = drives;
        self
    }

    /// `drives`: every drive with its bus, family, id, state, last error and what it reports.
    fn drives(&self) -> DrivesReply {
        let status = self.session.status();
        let joints = self.joints();
        let row = self
            .session
            .trace_ring()
            .and_then(|r| r.latest(1).into_iter().next());
        let buses = self
            .session
            .buses()
            .map(|b| b.snapshot())
            .unwrap_or_default();
        let drives = self
            .drives
            .iter()
            .map(|d| {
                let j = joints.index_of(&d.joint);
                let link = buses
                    .iter()
                    .find(|b| b.name == d.bus)
                    .and_then(|b| b.drives.iter().find(|x| x.dof == d.joint));
                let feedback = j.and_then(|j| row.as_ref().and_then(|r| r.feedback.get(j)));
                let fault_here = status
                    .fault
                    .filter(|f| f.dof.map(usize::from) == j || f.dof.is_none());
                let (state, last_error) = match link {
                    Some(l) => (
                        l.link.state,
                        l.link.last_fault.map(|(kind, code)| LastFault {
                            kind,
                            code,
                            text: family::fault_words(l.protocol, kind, code),
                        }),
                    ),
                    // The simulated motors: the loop's view of them.
                    None => (
                        match status.state {
                            State::Fault | State::EStop if fault_here.is_some() => LinkState::Fault,
                            State::Disabled => LinkState::Disabled,
                            _ => LinkState::Ready,
                        },
                        fault_here.map(|f| LastFault {
                            kind: f.kind,
                            code: f.code,
                            text: Some(describe_fault(&f, joints, None)),
                        }),
                    ),
                };
                let pick = |v: &[f64]| j.and_then(|j| v.get(j).copied());
                DriveRow {
                    joint: d.joint.clone(),
                    bus: d.bus.clone(),
                    family: d.family.clone(),
                    id: d.id,
                    state,
                    last_error,
                    position: pick(&status.positions),
                    commanded: pick(&status.commanded),
                    velocity: feedback.map(|f| f.velocity),
                    effort: feedback.map(|f| f.effort),
                    status_word: feedback.map(|f| f.status),
                    error_word: feedback.map(|f| f.error),
                    fresh: feedback.map(|f| f.valid),
                }
            })
            .collect();
        DrivesReply {
            backend: self.backend,
            drives,
        }
    }

    /// The daemon with a flight recorder watching its loop.
    pub fn with_recorder(mut self, recorder: FlightRecorder) -> Self {
        self.recorder = Some(recorder);
        self
    }

    /// Writes the flight recorder's ring now: where, how much.
    fn dump(&self) -> Result<Answer, RequestError> {
        let Some(recorder) = &self.recorder else {
            return Err(RequestError::new(
                ErrorCode::Refused,
                "the flight recorder is off (recorder.seconds: 0 in the configuration)",
            ));
        };
        let dumped = recorder.dump(DUMP_TIMEOUT).map_err(|e| {
            RequestError::new(ErrorCode::Unavailable, format!("flight recorder: {e}"))
        })?;
        tracing::info!(
            "flight recorder: the last {:.1} s written to {} (asked for)",
            dumped.seconds,
            dumped.path.display()
        );
        Ok(Answer::Dump(DumpReply {
            path: dumped.path.display().to_string(),
            ticks: dumped.ticks,
            seconds: dumped.seconds,
            bytes: dumped.bytes,
        }))
    }

    /// Loads the motions of the current library that are still loading, and logs the library.
    /// Slow: call it off the start-up path, so the socket answers meanwhile.
    pub fn finish_loading(&self) {
        let library = self.library();
        self.motions.load(&library);
        log_library(&library);
    }

    fn joints(&self) -> &JointSet {
        self.session.joints()
    }

    fn library(&self) -> Arc<Library<Prepared>> {
        match self.library.read() {
            Ok(library) => library.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// A library motion that can be played, or why not.
    fn prepared<'a>(
        &self,
        library: &'a Library<Prepared>,
        name: &str,
    ) -> Result<&'a Prepared, RequestError> {
        let entry = library.get(name).ok_or_else(|| {
            RequestError::new(
                ErrorCode::UnknownMotion,
                format!(
                    "no motion {name:?} in {} (`list` shows the library)",
                    self.library_dir.display()
                ),
            )
        })?;
        let motion = entry.motion().ok_or_else(|| {
            RequestError::new(
                ErrorCode::Refused,
                format!(
                    "{name} is still loading (the library is read after the daemon starts); \
                     try again in a moment, `list` shows what is loading"
                ),
            )
        })?;
        motion.as_ref().map_err(|err| {
            RequestError::new(
                ErrorCode::InvalidMotion,
                format!("{name} cannot be played: {err}"),
            )
        })
    }

    fn play(
        &self,
        name: &str,
        speed: Option<f64>,
        looped: bool,
        at: Option<f64>,
        replace: bool,
        group: Option<&str>,
    ) -> Result<Answer, RequestError> {
        let received_ns = self.session.now_ns();
        let library = self.library();
        let prepared = self.prepared(&library, name)?;
        if let Some(secs) = at {
            let now = self
                .session
                .realtime()
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs_f64();
            let ago = now - secs;
            if -ago > MAX_AT_AHEAD_S {
                return Err(RequestError::new(
                    ErrorCode::BadRequest,
                    format!(
                        "\"at\": {} is {:.0} s ahead (now is {now:.3} s since the Unix epoch); \
                         a play is scheduled at most {MAX_AT_AHEAD_S} s (a day) ahead — is it in \
                         seconds, not milliseconds?",
                        Num(secs),
                        Num(-ago)
                    ),
                ));
            }
            if ago > AT_LATENESS.as_secs_f64() {
                return Err(RequestError::new(
                    ErrorCode::BadRequest,
                    format!(
                        "\"at\": {} is {:.1} s in the past (now is {now:.3} s since the Unix \
                         epoch); give a time to come, e.g. `motionctl play {name} --at +5`",
                        Num(secs),
                        Num(ago)
                    ),
                ));
            }
        }
        let start_at = match at {
            None => None,
            Some(secs) => Some(
                Duration::try_from_secs_f64(secs)
                    .ok()
                    .and_then(|since| SystemTime::UNIX_EPOCH.checked_add(since))
                    .ok_or_else(|| {
                        RequestError::new(
                            ErrorCode::BadRequest,
                            format!("\"at\": {} is not a representable time", Num(secs)),
                        )
                    })?,
            ),
        };
        let request = PlayRequest {
            name: name.to_string(),
            speed: speed.unwrap_or(1.0),
            repeat: if looped {
                Repeat::Forever
            } else {
                Repeat::Once
            },
            start_at,
            group: group.map(str::to_string),
        };
        let started = if replace {
            self.session.replace(prepared, &request)
        } else {
            self.session.play(prepared, &request)
        }
        .map_err(request_error)?;
        self.remember(started.motion_id, name, started.duration_s);
        let report = started.report.as_ref();
        tracing::info!(
            "playback {} ({name}) started at speed {}{}",
            started.motion_id,
            crate::trajectory::speed_text(started.speed),
            report.map(report_notes).unwrap_or_default()
        );
        Ok(Answer::Play(Box::new(PlayReply {
            motion: name.to_string(),
            motion_id: started.motion_id,
            duration_s: started.duration_s,
            approach_s: started.approach_s,
            speed: started.speed,
            requested_speed: started.requested_speed,
            retimed: report.and_then(|r| r.retimed),
            clamped: report.map(clamped).unwrap_or_default(),
            looped,
            group: group.map(str::to_string),
            replace,
            at,
            measured_offset: started
                .measured_offset
                .map(|(joint, value)| JointValue { joint, value }),
            // From taking up the request to the motion's first command reaching the backend.
            first_command_us: started
                .first_command_ns
                .map(|ns| ns.saturating_sub(received_ns) as f64 / 1000.0),
        })))
    }

    /// Logs a new fault of the loop once, as it is seen: kind, joint, code, in the words of
    /// `status` and the replies.
    fn streams(&self) -> std::sync::MutexGuard<'_, Streams> {
        match self.streams.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    pub fn log_fault(&self) {
        let fault = self.session.status().fault;
        let Ok(mut logged) = self.logged_fault.lock() else {
            return;
        };
        if fault != *logged {
            if let Some(f) = &fault {
                let joint = f
                    .dof
                    .and_then(|d| self.joints().dofs.get(usize::from(d)))
                    .map_or("-", |d| d.name.as_str());
                // An enable that timed out brought no drive up: none holds.
                let drives = if f.kind == FaultKind::EnableTimeout {
                    "the drives did not come up"
                } else {
                    "the drives hold"
                };
                tracing::error!(
                    "fault: {} (kind {}, joint {joint}, code {:#x}); {drives}, `motionctl \
                     recover` clears it",
                    self.session.describe_fault(f),
                    f.kind.as_str(),
                    f.code
                );
            }
            *logged = fault;
        }
    }

    /// Logs each change of the E-stop once: asserted (and by what), released, cleared.
    pub fn log_estop(&self) {
        let estop = self.session.status().estop;
        let Ok(mut logged) = self.logged_estop.lock() else {
            return;
        };
        let (was, now) = (*logged, estop);
        *logged = estop;
        if now.cause.is_some() && was.cause.is_none() {
            tracing::error!(
                "E-stop: {}; the robot stops quickly and stays stopped until it is released and \
                 cleared (`motionctl clear-fault`)",
                describe_estop(now.cause, self.joints())
            );
        } else if now.cause.is_some() && was.input == Some(true) && now.input == Some(false) {
            tracing::warn!("E-stop released; `motionctl clear-fault` brings the drives back");
        } else if was.cause.is_some() && now.cause.is_none() {
            tracing::info!("E-stop cleared");
        }
    }

    /// Logs what the buses reported since the last look: drive warnings (CiA 402 EMCY without
    /// the generic error bit, SLCAN adapter warnings), bus and drive faults in the protocol's
    /// words, devices opened again.
    pub fn log_buses(&self) {
        let Some(Ok(mut watch)) = self.bus_watch.as_ref().map(Mutex::lock) else {
            return;
        };
        for event in watch.changes() {
            event.log();
        }
    }

    /// Logs how playbacks left the loop, each once.
    pub fn log_outcomes(&self) {
        self.log_fault();
        self.log_estop();
        self.log_buses();
        self.watch_take();
        for (id, outcome) in self.session.take_outcomes() {
            let name = self
                .motion_name(id)
                .map_or_else(|| "?".to_string(), |(n, _)| n);
            match outcome {
                Outcome::Refused(why) => tracing::warn!("playback {id} ({name}) refused: {why:?}"),
                Outcome::Faulted => {
                    let fault = self.session.status().fault.map_or_else(
                        || "a fault".to_string(),
                        |f| self.session.describe_fault(&f),
                    );
                    tracing::warn!("playback {id} ({name}) ended by {fault}");
                }
                Outcome::Stopped => tracing::info!("playback {id} ({name}) stopped"),
                Outcome::Replaced => tracing::info!("playback {id} ({name}) replaced"),
                Outcome::Finished => tracing::info!("playback {id} ({name}) finished"),
            }
        }
    }

    /// The first SIGINT or SIGTERM: the motion decelerates to rest within the limits (the caller
    /// has closed the socket); [`poll_stop`](Self::poll_stop) follows the stop.
    pub fn begin_stop(&self, timeout: Duration) -> Stopping {
        tracing::info!("signal received: stopping the motion (a second signal stops it quickly)");
        self.log_outcomes();
        self.keep_take();
        self.session.begin_shutdown(timeout)
    }

    /// How the stop begun by [`begin_stop`](Self::begin_stop) stands (the loop runs meanwhile):
    /// `None` while stopping, then the daemon's exit status (0 stopped, 1 the loop did not end),
    /// each outcome journalled. `second_signal`: another signal arrived since the last call.
    pub fn poll_stop(&self, stopping: &mut Stopping, second_signal: bool) -> Option<u8> {
        let end = self.session.poll_shutdown(stopping, || {
            if second_signal {
                tracing::warn!("second signal: stopping quickly");
            }
            second_signal
        })?;
        self.log_outcomes();
        let safe = match self
            .motions
            .robot
            .config
            .as_ref()
            .map(|c| c.daemon.safe_state)
        {
            Some(crate::config::SafeState::Disable) => "disabled",
            _ => "holding",
        };
        // What the drives do now, as the loop had them when the stop began.
        let drives = match stopping.before() {
            (State::Fault, Some(f)) if f.kind == FaultKind::EnableTimeout => format!(
                "the drives never came up, nothing held them ({})",
                self.session.describe_fault(&f)
            ),
            (State::Fault, Some(f)) => format!(
                "drives {safe} after the fault ({})",
                self.session.describe_fault(&f)
            ),
            (State::Disabled, _) => "drives disabled (they were before the stop)".to_string(),
            _ => format!("drives {safe}"),
        };
        Some(match end {
            Ok(Shutdown::AtRest) => {
                tracing::info!("stopped at rest; {drives}");
                0
            }
            Ok(Shutdown::Quick) => {
                tracing::warn!(
                    "stopped quickly (second signal or daemon.shutdown_timeout_s); {drives}"
                );
                0
            }
            Err(err) => {
                tracing::error!("{err}");
                1
            }
        })
    }

    fn remember(&self, id: u32, name: &str, duration_s: f64) {
        if let Ok(mut played) = self.played.lock() {
            if played.len() == PLAYED_KEPT {
                played.pop_front();
            }
            played.push_back(Played {
                id,
                name: name.to_string(),
                duration_s,
            });
        }
    }

    /// How the newest playback that has ended left the loop.
    fn last_outcome(&self) -> Option<LastOutcome> {
        let recent: Vec<(u32, String)> = {
            let played = self.played.lock().ok()?;
            played
                .iter()
                .rev()
                .map(|p| (p.id, p.name.clone()))
                .collect()
        };
        recent.into_iter().find_map(|(id, name)| {
            use super::reply::Outcome as Said;
            let outcome = match self.session.outcome(id)? {
                Outcome::Finished => Said::Finished,
                Outcome::Stopped => Said::Stopped,
                Outcome::Faulted => Said::Faulted,
                Outcome::Replaced => Said::Replaced,
                Outcome::Refused(_) => Said::Refused,
            };
            Some(LastOutcome {
                motion_id: id,
                motion: name,
                outcome,
            })
        })
    }

    fn motion_name(&self, motion_id: u32) -> Option<(String, f64)> {
        let played = self.played.lock().ok()?;
        played
            .iter()
            .find(|p| p.id == motion_id)
            .map(|p| (p.name.clone(), p.duration_s))
    }

    /// The folder teach-in takes are written to (`motion.takes`).
    fn takes_dir(&self) -> PathBuf {
        self.motions.robot.config.as_ref().map_or_else(
            || self.library_dir.join(".takes"),
            |c| c.motion.takes.clone(),
        )
    }

    /// The longest take (`motion.max_take_s`).
    fn max_take(&self) -> Duration {
        self.motions
            .robot
            .config
            .as_ref()
            .map_or(Duration::from_secs(3600), |c| c.motion.max_take)
    }

    /// Starts a teach-in into library motion `name` (which must not exist yet: nothing is
    /// overwritten), every commanded DOF or `joints`, at `rate_hz` or the default, rounded to a
    /// whole number of loop ticks per frame. The frames go into a take file as they come.
    fn record_start(
        &self,
        name: &str,
        rate_hz: Option<f64>,
        joints: Option<&[String]>,
    ) -> Result<Answer, RequestError> {
        let mut recording = self
            .recording
            .lock()
            .map_err(|_| RequestError::new(ErrorCode::Unavailable, "the daemon is failing"))?;
        if let Some(under_way) = recording.as_ref() {
            let message = match &under_way.unsaved {
                Some((take, _)) => format!(
                    "the take of {} is not saved yet ({} frames held in memory could not be \
                     written to {}); make room there and `motionctl record --stop` again",
                    under_way.name,
                    take.held_frames(),
                    take.path().display()
                ),
                None => format!(
                    "already recording {}; `motionctl record --stop` ends it",
                    under_way.name
                ),
            };
            return Err(RequestError::new(ErrorCode::Refused, message));
        }
        let path = self.library_dir.join(format!("{name}.seq"));
        if self.library().get(name).is_some() || path.exists() {
            return Err(RequestError::new(
                ErrorCode::Refused,
                format!(
                    "{} exists; record into a new name (a recording never overwrites a motion)",
                    path.display()
                ),
            ));
        }
        let all = self.joints();
        let dofs: Vec<usize> = match joints {
            None => (0..all.len()).collect(),
            Some(names) => {
                let unknown: Vec<&str> = names
                    .iter()
                    .filter(|n| all.index_of(n).is_none())
                    .map(String::as_str)
                    .collect();
                if !unknown.is_empty() {
                    let known: Vec<&str> = all.dofs.iter().map(|d| d.name.as_str()).collect();
                    return Err(RequestError::new(
                        ErrorCode::BadRequest,
                        format!(
                            "record: not DOFs of this robot: {}; its DOFs: {}",
                            unknown.join(", "),
                            known.join(", ")
                        ),
                    ));
                }
                let mut dofs: Vec<usize> = names.iter().filter_map(|n| all.index_of(n)).collect();
                dofs.sort_unstable();
                dofs.dedup();
                dofs
            }
        };
        let loop_hz = self.session.rate_hz();
        // The request's rate is bounded (protocol::RECORD_RATE_HZ): a few thousand ticks a
        // frame at most.
        let wanted = rate_hz.unwrap_or(DEFAULT_RECORD_RATE_HZ).min(loop_hz);
        let every = (loop_hz / wanted).round().max(1.0) as u64;
        let frame_rate = loop_hz / every as f64;
        let names: Vec<String> = dofs.iter().map(|&d| all.dofs[d].name.clone()).collect();
        let max_frames = (self.max_take().as_secs_f64() * frame_rate).floor() as u64 + 1;
        let takes = self.takes_dir();
        let take = Take::create(&takes, name, frame_rate, names.clone(), max_frames)
            .map_err(|err| self.take_refused(name, &takes, &path, &err))?;
        let take_path = take.path().to_path_buf();
        self.session
            .record_start(dofs, every, take)
            .map_err(request_error)?;
        *recording = Some(Recording {
            name: name.to_string(),
            unsaved: None,
            told_interrupted: false,
            told_capped: false,
            told_error: false,
        });
        Ok(Answer::Record(RecordReply {
            motion: name.to_string(),
            rate_hz: frame_rate,
            joints: names,
            take: take_path.display().to_string(),
        }))
    }

    /// Why take `name` could not start in `takes` (`path`: where it would be saved), and what
    /// to do — found at `record`, not at `record --stop`.
    fn take_refused(
        &self,
        name: &str,
        takes: &Path,
        path: &Path,
        err: &WriteError,
    ) -> RequestError {
        let kept = takes.join(format!("{name}.seq"));
        let message = match err {
            // Not a file where the takes folder belongs: that is the folder's problem.
            WriteError::Io { error, .. }
                if error.kind() == io::ErrorKind::AlreadyExists && kept.is_file() =>
            {
                format!(
                    "an earlier take of {name} is kept at {} (a recording that was not saved \
                     into the library); move it into the library (`mv {} {}`, then `motionctl \
                     reload`) or away, or record under another name",
                    kept.display(),
                    kept.display(),
                    path.display()
                )
            }
            // The folder went away, became read-only or a file took its name after the start.
            _ => {
                let key = self.motions.robot.config.as_ref().map_or_else(
                    || "motion.takes".to_string(),
                    |c| {
                        let at = c.locations.value("motion.takes");
                        format!("motion.takes ({}:{}:{})", c.path.display(), at.line, at.col)
                    },
                );
                format!(
                    "cannot start the take of {name}: {err}; takes are written to {} as they \
                     are recorded: make it a folder the daemon can write, or set {key} to one \
                     and restart the daemon",
                    takes.display()
                )
            }
        };
        RequestError::new(ErrorCode::Refused, message)
    }

    /// Ends the teach-in (one the loop left by itself too), completes its take and saves it into
    /// the library under its name — never over a file there — and loads the library again, so
    /// the recording is proved like any motion and can be played. A take that cannot be saved
    /// stays where it was recorded, and the reply says where and how to keep it.
    fn record_stop(&self) -> Result<Answer, RequestError> {
        let mut recording = self
            .recording
            .lock()
            .map_err(|_| RequestError::new(ErrorCode::Unavailable, "the daemon is failing"))?;
        let Some(under_way) = recording.as_mut() else {
            return Err(RequestError::new(
                ErrorCode::Refused,
                "no recording under way; `motionctl record NAME` starts one",
            ));
        };
        let name = under_way.name.clone();
        let (mut take, interrupted) = match under_way.unsaved.take() {
            Some(unsaved) => unsaved,
            None => match self.session.record_stop() {
                Ok(ended) => (ended.take, ended.interrupted),
                Err(err) => {
                    *recording = None;
                    return Err(request_error(err));
                }
            },
        };
        let take_path = take.path().to_path_buf();
        let frames = take.frames();
        if frames < 2 {
            *recording = None;
            take.discard();
            return Err(RequestError::new(
                ErrorCode::Refused,
                format!("the recording of {name} has {frames} frame(s); nothing was kept"),
            ));
        }
        let closed = match take.close() {
            Ok(closed) => closed,
            Err(err) => {
                let held = take.held_frames();
                let folder = take_path.parent().unwrap_or(Path::new("."));
                let message = if folder.is_dir() {
                    format!(
                        "the take of {name} could not be completed: {err}; {} frames are in {} \
                         and {held} more are held in memory: make room there and `motionctl \
                         record --stop` again (the daemon keeps the take until then, or until \
                         it stops)",
                        frames - held,
                        take_path.display()
                    )
                } else {
                    format!(
                        "the take of {name} could not be completed: {err}; the takes folder {} \
                         was removed during the take, and all {frames} frames are held by the \
                         daemon (in the file it still has open): make it possible to create \
                         that folder again and `motionctl record --stop` again (the daemon keeps \
                         the take until then, or until it stops)",
                        folder.display()
                    )
                };
                tracing::error!("teach-in {name}: {message}");
                if let Some(r) = recording.as_mut() {
                    r.unsaved = Some((take, interrupted));
                }
                return Err(RequestError::new(ErrorCode::Refused, message));
            }
        };
        *recording = None;
        let path = self.library_dir.join(format!("{name}.seq"));
        let how = interrupted.map(|s| interruption(s, &self.session));
        if let Err(err) = take::publish(&closed.path, &path) {
            let why = if err.kind() == io::ErrorKind::AlreadyExists {
                format!(
                    "{} was created meanwhile (nothing is overwritten)",
                    path.display()
                )
            } else {
                format!("{}: {err}", path.display())
            };
            let free = self.library_dir.join(format!("{name}-2.seq"));
            let message = format!(
                "the take of {name} ({} frames, {:.2} s) could not be saved into the library: \
                 {why}; it is kept at {}: to keep it, move it into the library under a free name \
                 (`mv {} {}`, then `motionctl reload`)",
                closed.frames,
                closed.duration_s(),
                closed.path.display(),
                closed.path.display(),
                free.display()
            );
            tracing::warn!("teach-in {name}: {message}");
            return Err(RequestError::new(ErrorCode::Refused, message));
        }
        tracing::info!(
            "recorded {} frames at {} Hz into {}{}",
            closed.frames,
            closed.frame_rate,
            path.display(),
            how.as_ref()
                .map(|h| format!(" (the teach-in was cut short by {h})"))
                .unwrap_or_default()
        );
        let listed = self.reload_library()?;
        let library = listed.motions.into_iter().find(|m| m.name == name);
        Ok(Answer::RecordStop(Box::new(RecordStopReply {
            motion: name,
            path: path.display().to_string(),
            frames: closed.frames,
            rate_hz: closed.frame_rate,
            duration_s: closed.duration_s(),
            joints: closed.joints,
            interrupted,
            capped: closed.capped,
            lost_frames: closed.lost,
            library,
        })))
    }

    /// Journals what happened to a take under way, each once: the loop left the teach-in (the
    /// frames are on disk, `record --stop` saves them), it reached its length, a write failed.
    fn watch_take(&self) {
        let Some(progress) = self.session.take_progress() else {
            return;
        };
        let Ok(mut recording) = self.recording.lock() else {
            return;
        };
        let Some(r) = recording.as_mut() else {
            return;
        };
        let shown = progress.path.display();
        if let Some(state) = progress.interrupted
            && !r.told_interrupted
        {
            r.told_interrupted = true;
            tracing::error!(
                "teach-in {} interrupted by {} after {} frames: they are on disk in {shown}; \
                 `motionctl record --stop` saves them into the library as {}",
                r.name,
                interruption(state, &self.session),
                progress.frames,
                r.name
            );
        }
        if progress.capped && !r.told_capped {
            r.told_capped = true;
            tracing::warn!(
                "teach-in {} reached motion.max_take_s ({} s): later frames are not recorded; \
                 `motionctl record --stop` saves it",
                r.name,
                self.max_take().as_secs_f64()
            );
        }
        if let Some(err) = progress.error
            && !r.told_error
        {
            r.told_error = true;
            tracing::error!(
                "teach-in {}: {err}; the frames written before are in {shown}, the ones that \
                 follow are held in memory (at most motion.max_take_s) and written as soon as \
                 the disk takes them; make room there, then `motionctl record --stop` saves \
                 the take",
                r.name
            );
        }
    }

    /// At shutdown: a take under way (or one not saved yet) is completed where it was recorded
    /// and the journal says where and how to keep it.
    fn keep_take(&self) {
        let Some(r) = self.recording.lock().ok().and_then(|mut r| r.take()) else {
            return;
        };
        let Some(mut take) = r
            .unsaved
            .map(|(t, _)| t)
            .or_else(|| self.session.record_detach())
        else {
            return;
        };
        let path = take.path().to_path_buf();
        let library = self.library_dir.join(format!("{}.seq", r.name));
        match take.close() {
            Ok(closed) => tracing::warn!(
                "teach-in {} stopped by the signal after {} frames ({:.2} s): kept at {}; to \
                 keep it, `mv {} {}` (the library loads it at the next start or reload)",
                r.name,
                closed.frames,
                closed.duration_s(),
                path.display(),
                path.display(),
                library.display()
            ),
            Err(err) => tracing::error!(
                "teach-in {} stopped by the signal: {err}; {} of its {} frames are in {}; the \
                 last {} frames, which the disk did not take, are lost with the daemon",
                r.name,
                take.frames() - take.held_frames(),
                take.frames(),
                path.display(),
                take.held_frames()
            ),
        }
    }

    fn recover(&self, pose: Option<&str>) -> Result<Answer, RequestError> {
        let library = self.library();
        let target = pose
            .map(|name| self.prepared(&library, name).map(|p| (name, p)))
            .transpose()?;
        self.session.recover().map_err(request_error)?;
        let Some((name, prepared)) = target else {
            return Ok(Answer::Done(Default::default()));
        };
        let pose: Vec<f64> = prepared
            .trajectory
            .first_setpoints()
            .iter()
            .map(|s| s.position)
            .collect();
        let what = format!("{name}'s first pose");
        let started = self.session.go_to(&what, &pose).map_err(request_error)?;
        self.remember(started.motion_id, &what, started.duration_s);
        Ok(Answer::Recover(RecoverReply {
            pose: name.to_string(),
            approach_s: started.approach_s,
        }))
    }

    /// `stop` or `quick_stop` on `group` (the whole robot with `None`): the loop's, and the end
    /// of the streams there, so another connection may open one; done when either happened.
    fn stop(&self, what: GroupCommand, group: Option<&str>) -> Result<Answer, RequestError> {
        let stopped = self.session.for_group(what, group);
        let ended = self.streams().end(&self.session, group, "a stop ended it");
        match stopped {
            // Nothing moved, but a stream (waiting, or at rest past its last row) was ended.
            Err(err) if err.kind == ErrorKind::Refused && ended > 0 => {}
            other => other.map_err(request_error)?,
        }
        Ok(Answer::Done(Default::default()))
    }

    fn status(&self) -> StatusReply {
        let status = self.session.status();
        let joints = self.joints();
        let by_name = |values: &[f64]| -> IndexMap<String, f64> {
            joints
                .dofs
                .iter()
                .zip(values)
                .map(|(dof, v)| (dof.name.clone(), *v))
                .collect()
        };
        let (streams, starved) = {
            let streams = self.streams();
            (
                streams.describe(&self.session, &status),
                streams.starved(&self.session, &status),
            )
        };
        // A stream past its last row is `starved`, whatever the loop does meanwhile (braking,
        // holding).
        let state_of = |slot: usize, state: State| {
            if starved.contains(&slot) {
                State::Starved
            } else {
                state
            }
        };
        let groups = self
            .session
            .group_names()
            .into_iter()
            .zip(status.slots.iter().skip(1))
            .enumerate()
            .map(|(i, (name, slot))| {
                let group = GroupStatus {
                    state: state_of(i + 1, slot.state),
                    playback: self.playback(slot.motion_id, slot.progress, slot.time_s),
                };
                (name, group)
            })
            .collect();
        let l = &status.latency;
        StatusReply {
            state: state_of(0, status.state),
            backend: self.backend,
            rate_hz: self.session.rate_hz(),
            playback: self.playback(status.motion_id, status.progress, status.time_s),
            // CLOCK_MONOTONIC, for measuring request-to-motion latency from outside.
            first_command_ns: status.motion_id.and(status.first_command_ns),
            last_outcome: self.last_outcome(),
            groups,
            streams,
            tick: status.tick,
            moving: status.moving,
            positions: by_name(&status.positions),
            commanded: by_name(&status.commanded),
            following_error: by_name(&status.max_tracking_error),
            // Static, but small: lets a live view draw each position inside its limits.
            position_limits: joints
                .dofs
                .iter()
                .map(|d| {
                    let l = d.limits.position;
                    let side = |x: f64| x.is_finite().then_some(x);
                    (d.name.clone(), [side(l.lower), side(l.upper)])
                })
                .collect(),
            latency_us: Latency {
                min: l.min,
                p50: l.p50,
                p99: l.p99,
                p999: l.p999,
                max: l.max,
            },
            overruns: status.overruns,
            limit_violations: status.limit_violations,
            rt: self.rt_report(),
            faults: status
                .fault
                .iter()
                .map(|f| fault_report(f, &self.session))
                .collect(),
            estop: estop_report(status.estop, joints),
            events: self.events(),
            buses: self.session.buses().map(|b| bus_reports(&b.snapshot())),
        }
    }

    /// What the loop thread obtained of the real-time settings (fixed once it runs).
    fn rt_report(&self) -> RtReport {
        let o = self.session.obtained();
        RtReport {
            cpu: o.cpu,
            policy: o.policy.to_string(),
            priority: o.priority,
            memory_locked: o.memory_locked,
            cpu_wakeup_latency: o.cpu_wakeup_latency.as_ref().map(|w| WakeupReport {
                latency_us: w.latency_us,
                path: w.path.clone(),
            }),
            warnings: o.warnings.clone(),
        }
    }

    /// What the flight recorder holds, newest last: for `top` and scripts.
    fn events(&self) -> Option<Vec<EventReport>> {
        let recorder = self.recorder.as_ref()?;
        let (events, now) = recorder.recent(EVENTS_IN_STATUS);
        let rate = self.session.rate_hz();
        let events = events
            .iter()
            .map(|e| EventReport {
                tick: e.tick,
                kind: e.kind,
                text: e.text.clone(),
                ago_s: now.saturating_sub(e.tick) as f64 / rate,
            })
            .collect();
        Some(events)
    }

    /// The playback `motion_id` as `status` shows it, nothing when there is none.
    fn playback(&self, motion_id: Option<u32>, progress: f64, time_s: f64) -> Playback {
        let Some(id) = motion_id else {
            return Playback::default();
        };
        let (motion, duration_s) = self.motion_name(id).unzip();
        Playback {
            motion_id: Some(id),
            motion,
            duration_s,
            progress: Some(progress),
            time_s: Some(time_s),
        }
    }

    fn list(library: &Library<Prepared>) -> ListReply {
        let motions = library
            .iter()
            .map(|(name, entry)| MotionEntry {
                name: name.to_string(),
                state: match entry.motion() {
                    Some(Ok(prepared)) => MotionState::Ready {
                        duration_s: prepared.trajectory.duration_s(),
                        ok: Default::default(),
                        retimed: prepared.report.retimed,
                        clamped: clamped(&prepared.report),
                    },
                    Some(Err(err)) => MotionState::Failed {
                        ok: Default::default(),
                        error: err.clone(),
                    },
                    None => MotionState::Loading {
                        ok: Default::default(),
                        loading: Default::default(),
                        error: "still loading".into(),
                    },
                },
            })
            .collect();
        ListReply {
            motions,
            loading: library.loading(),
        }
    }

    /// Loads the folder again and swaps the library in; playbacks already sent keep their own
    /// trajectories.
    pub fn reload(&self) -> Result<Answer, RequestError> {
        self.reload_library().map(Answer::List)
    }

    fn reload_library(&self) -> Result<ListReply, RequestError> {
        let library = self
            .motions
            .load_library(&self.library_dir)
            .map_err(|err| {
                RequestError::new(
                    ErrorCode::Refused,
                    format!(
                        "cannot read {}: {err}; the library is unchanged",
                        self.library_dir.display()
                    ),
                )
            })?;
        log_library(&library);
        let reply = Self::list(&library);
        let library = Arc::new(library);
        match self.library.write() {
            Ok(mut slot) => *slot = library,
            Err(poisoned) => *poisoned.into_inner() = library,
        }
        Ok(reply)
    }
}

impl Handler for Daemon {
    fn handle(&self, peer: &Peer, request: Request) -> Reply {
        let s = &self.session;
        let done = |r: Result<(), SessionError>| {
            r.map(|()| Answer::Done(Default::default()))
                .map_err(request_error)
        };
        let result = match &request {
            Request::Play {
                motion,
                speed,
                looped,
                at,
                replace,
                group,
            } => self.play(motion, *speed, *looped, *at, *replace, group.as_deref()),
            Request::Status => Ok(Answer::Status(Box::new(self.status()))),
            Request::List => Ok(Answer::List(Self::list(&self.library()))),
            Request::Reload => self.reload(),
            Request::Stop { group } => self.stop(GroupCommand::Stop, group.as_deref()),
            Request::QuickStop { group } => self.stop(GroupCommand::QuickStop, group.as_deref()),
            Request::Pause { group } => done(s.for_group(GroupCommand::Pause, group.as_deref())),
            Request::Resume { group } => done(s.for_group(GroupCommand::Resume, group.as_deref())),
            Request::Record {
                motion: Some(name),
                rate_hz,
                joints,
                ..
            } => self.record_start(name, *rate_hz, joints.as_deref()),
            Request::Record { motion: None, .. } => self.record_stop(),
            Request::Enable => done(s.enable()),
            Request::Disable => done(s.disable()),
            Request::ClearFault => done(s.clear_fault()),
            Request::Recover { pose } => self.recover(pose.as_deref()),
            Request::Dump => self.dump(),
            Request::Drives => Ok(Answer::Drives(self.drives())),
            Request::StreamOpen {
                group,
                joints,
                rate_hz,
                horizon_s,
            } => self.streams().open(
                s,
                peer,
                group.as_deref(),
                joints.as_deref(),
                *rate_hz,
                *horizon_s,
            ),
            Request::StreamChunk {
                group,
                seq,
                positions,
                t0,
                dt,
            } => {
                let reply =
                    self.streams()
                        .chunk(s, peer, group.as_deref(), *seq, positions, *t0, *dt);
                if let Ok(Answer::StreamChunk(chunk)) = &reply {
                    let id = chunk.motion_id;
                    // The journal and `status` name each piece after its stream.
                    let name = match group {
                        Some(g) => format!("stream ({g})"),
                        None => "stream".into(),
                    };
                    self.remember(id, &name, 0.0);
                }
                reply
            }
            Request::StreamClose { group } => self.streams().close(s, peer, group.as_deref()),
        };
        // Every request that acts on the robot, once, with who sent it and its result; the
        // polls (`status`, `list`) and a stream's accepted chunks (up to 100 a second) would
        // drown the journal.
        let quiet = matches!(request, Request::Status | Request::List | Request::Drives)
            || (matches!(request, Request::StreamChunk { .. }) && result.is_ok());
        if !quiet {
            let what = describe_request(&request);
            let outcome = match &result {
                Ok(reply) => format!("ok{}", reply_note(reply)),
                // One line per event; the client got the whole message.
                Err(err) => format!(
                    "{}: {}",
                    err.code.as_str(),
                    err.message.lines().next().unwrap_or_default()
                ),
            };
            if result.is_ok() {
                tracing::info!("request {what} from {peer}: {outcome}");
            } else {
                tracing::warn!("request {what} from {peer}: {outcome}");
            }
            if let Some(recorder) = &self.recorder {
                recorder.request(
                    peer.uid,
                    format!("request {what} from uid {}: {outcome}", peer.uid),
                );
            }
        }
        result.into()
    }

    fn disconnected(&self, peer: &Peer) {
        let gone = self.streams().disconnected(&self.session, peer);
        for report in gone {
            let text = format!(
                "stream for {} closed: its connection ({peer}) went away; the accepted rows play \
                 to the last and the robot brakes to rest there",
                report
                    .group
                    .as_deref()
                    .map_or_else(|| "the whole robot".into(), |g| format!("group {g}"))
            );
            tracing::info!("{text}");
            if let Some(recorder) = &self.recorder {
                recorder.request(peer.uid, text);
            }
        }
    }
}

/// The buses' counters for `status`: per bus its link and frame counts, per drive (by DOF name)
/// its protocol, state, faults and warnings, the last of each in the protocol's words.
fn bus_reports(buses: &[BusSnapshot]) -> Vec<BusReport> {
    let link = |protocol: &str, l: &LinkSnapshot| LinkReport {
        state: l.state,
        faults: l.faults,
        last_fault: l.last_fault.map(|(kind, code)| LastFault {
            kind,
            code,
            text: family::fault_words(protocol, kind, code),
        }),
        warnings: l.warnings,
        last_warning: (l.warnings > 0).then(|| LastWarning {
            code: l.last_warning,
            text: family::warning_words(protocol, l.last_warning),
        }),
        reopened: l.reopened,
    };
    buses
        .iter()
        .map(|b| BusReport {
            link: link(b.transport, &b.link),
            name: b.name.clone(),
            transport: b.transport.to_string(),
            sent: b.sent,
            received: b.received,
            ignored: b.ignored,
            drives: b
                .drives
                .iter()
                .map(|d| {
                    let drive = DriveReport {
                        link: link(d.protocol, &d.link),
                        protocol: d.protocol.to_string(),
                    };
                    (d.dof.clone(), drive)
                })
                .collect(),
        })
        .collect()
}

/// The E-stop for `status`, when an input is watched or one holds the robot.
fn estop_report(e: EStop, joints: &JointSet) -> Option<EStopReport> {
    use super::reply::EStopCause as Cause;
    if e.input.is_none() && e.cause.is_none() {
        return None;
    }
    let (cause, joint) = match e.cause {
        None => (None, None),
        Some(EStopCause::Input) => (Some(Cause::Input), None),
        Some(EStopCause::InputLost) => (Some(Cause::InputLost), None),
        Some(EStopCause::Drive { dof }) => (
            Some(Cause::Drive),
            dof.and_then(|d| joints.dofs.get(usize::from(d)))
                .map(|d| d.name.clone()),
        ),
    };
    Some(EStopReport {
        input: e.input.map(|asserted| {
            if asserted {
                InputLevel::Asserted
            } else {
                InputLevel::Released
            }
        }),
        cause,
        joint,
        text: e.cause.map(|c| describe_estop(Some(c), joints)),
        reenable: e.reenable,
    })
}

/// A request as the journal names it: the command and its arguments.
fn describe_request(request: &Request) -> String {
    match request {
        Request::Play {
            motion,
            speed,
            looped,
            at,
            replace,
            group,
        } => {
            let mut text = format!("play {motion}");
            if let Some(g) = group {
                text.push_str(&format!(" --group {g}"));
            }
            if *replace {
                text.push_str(" --replace");
            }
            if let Some(s) = speed {
                text.push_str(&format!(" --speed {}", Num(*s)));
            }
            if *looped {
                text.push_str(" --loop");
            }
            if let Some(at) = at {
                text.push_str(&format!(" --at {}", Num(*at)));
            }
            text
        }
        Request::Recover { pose: Some(p) } => format!("recover --pose {p}"),
        Request::Stop { group: Some(g) } => format!("stop --group {g}"),
        Request::Pause { group: Some(g) } => format!("pause --group {g}"),
        Request::Resume { group: Some(g) } => format!("resume --group {g}"),
        Request::QuickStop { group: Some(g) } => format!("quick_stop --group {g}"),
        Request::Record {
            motion: Some(m), ..
        } => format!("record {m}"),
        Request::Record { motion: None, .. } => "record --stop".into(),
        other => other.cmd().to_string(),
    }
}

/// What an accepted request started, for its journal line.
fn reply_note(answer: &Answer) -> String {
    match answer {
        Answer::Play(play) => format!(" (playback {})", play.motion_id),
        _ => String::new(),
    }
}

/// Logs each motion that could not be loaded, the ones the proof changed, and the count.
pub fn log_library(library: &Library<Prepared>) {
    let mut ok = 0;
    for (name, entry) in library.iter() {
        let Some(motion) = entry.motion() else {
            continue;
        };
        match motion {
            Ok(prepared) => {
                ok += 1;
                let notes = report_notes(&prepared.report);
                if !notes.is_empty() {
                    tracing::warn!("motion {name} changed by the proof:{notes}");
                }
            }
            Err(err) => {
                // One journal line each, every one naming the motion.
                let mut lines = err.lines();
                tracing::warn!(
                    "motion {name} left out: {}",
                    lines.next().unwrap_or_default()
                );
                for line in lines {
                    tracing::warn!("motion {name}: {}", line.trim_start());
                }
            }
        }
    }
    tracing::info!(
        "library {}: {ok} of {} motions ready",
        library.dir().display(),
        library.len()
    );
}

/// What the proof changed, as ` (retimed ×F) (clamped: joint N samples …)`, empty when nothing.
pub fn report_notes(report: &ProofReport) -> String {
    let mut notes = String::new();
    if let Some(f) = report.retimed {
        notes.push_str(&format!(" (retimed: slowed ×{f:.4})"));
    }
    for c in &report.clamped {
        notes.push_str(&format!(
            " (clamped {}: {} samples, by up to {:.6})",
            c.dof, c.samples, c.max_change
        ));
    }
    notes
}

fn clamped(report: &ProofReport) -> Vec<Clamped> {
    report
        .clamped
        .iter()
        .map(|c| Clamped {
            joint: c.dof.clone(),
            samples: c.samples,
            max_change: c.max_change,
        })
        .collect()
}

/// What took the loop out of a teach-in, in words.
fn interruption(state: State, session: &Session) -> String {
    match state {
        State::EStop => "the E-stop".into(),
        State::Fault => match session.status().fault {
            Some(f) => format!("a fault ({})", session.describe_fault(&f)),
            None => "a fault".into(),
        },
        State::Disabled => "the drives being disabled".into(),
        other => format!("the loop leaving it ({})", other.as_str()),
    }
}

fn request_error(err: SessionError) -> RequestError {
    let code = match err.kind {
        ErrorKind::Refused => ErrorCode::Refused,
        ErrorKind::Fault => ErrorCode::Fault,
        ErrorKind::InvalidMotion => ErrorCode::InvalidMotion,
        ErrorKind::Unavailable => ErrorCode::Unavailable,
    };
    RequestError::new(code, err.message)
}

fn fault_report(fault: &crate::backend::BackendError, session: &Session) -> FaultReport {
    FaultReport {
        kind: fault.kind,
        joint: fault
            .dof
            .and_then(|d| session.joints().dofs.get(usize::from(d)))
            .map(|dof| dof.name.clone()),
        code: fault.code,
        text: session.describe_fault(fault),
    }
}
