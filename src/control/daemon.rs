//! What the daemon does with each request: the motion library on one side, the loop on the other.
//!
//! Everything that allocates or takes time (loading and proving motions, building the approach)
//! happens here, on the control side; the loop only receives a boxed, proved [`Playback`] over its
//! non-blocking channel and is read through its lock-free [`Status`] snapshot.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Map, Value, json};

use super::library::Library;
use super::protocol::{ErrorCode, Reply, Request, RequestError};
use super::server::Handler;
use crate::rt::{
    self, Clock, Command, LoopHandle, MonotonicClock, Outcome, Playback, Refusal, State, Status,
};
use crate::seq::{self, Motion};
use crate::trajectory::{self, ColumnMap, Cursor, JointSet, Options, Setpoint, Trajectory};

/// How long `play` waits for the loop to take the playback before answering.
const ACCEPT_TIMEOUT: Duration = Duration::from_millis(500);

/// Recent playbacks remembered (only the active one and a just-sent one are ever asked for).
const PLAYED_KEPT: usize = 16;

/// A playback sent to the loop.
#[derive(Debug)]
struct Played {
    id: u32,
    name: String,
    duration_s: f64,
    /// How it left the loop, once known.
    outcome: Option<Outcome>,
}

/// What the library needs to know about the robot to turn a `.seq` file into a trajectory.
#[derive(Debug, Clone)]
pub struct Robot {
    pub joints: JointSet,
    /// DOF names of the `.seq` columns (config `robot.joints`); `None`: the driven DOFs in order.
    pub columns: Option<Vec<String>>,
    /// Rate, interpolation and limit policy; `speed` is 1 for the library's own proof.
    pub options: Options,
}

/// A library motion, proved at speed 1 and kept as loaded so other speeds can be proved again.
#[derive(Debug)]
pub struct Prepared {
    motion: Motion,
    map: ColumnMap,
    trajectory: Trajectory,
}

impl Robot {
    /// Loads, maps, resamples and proves one file; the error names the file (and line when the
    /// file itself is at fault).
    pub fn prepare(&self, path: &Path) -> Result<Prepared, String> {
        let motion = seq::load(path).map_err(|err| err.to_string())?;
        let in_file = |err: &dyn std::fmt::Display| format!("{}: {err}", path.display());
        let num_parts = motion
            .joint_displacement()
            .map(|values| values.num_parts)
            .ok_or_else(|| in_file(&"no JointDisplacement component"))?;
        let map = match &self.columns {
            Some(names) => ColumnMap::by_name(&self.joints, names, num_parts),
            None => ColumnMap::in_dof_order(&self.joints, num_parts),
        }
        .map_err(|err| in_file(&err))?;
        let trajectory = trajectory::build(&self.joints, &motion, &map, &self.options)
            .map_err(|err| in_file(&err))?
            .trajectory;
        Ok(Prepared {
            motion,
            map,
            trajectory,
        })
    }

    /// The motion at `speed`, proved again (a faster motion may cross a limit the original
    /// respects).
    fn at_speed(&self, prepared: &Prepared, speed: f64) -> Result<Trajectory, String> {
        if speed == 1.0 {
            return Ok(prepared.trajectory.clone());
        }
        let options = Options {
            speed,
            ..self.options
        };
        trajectory::build(&self.joints, &prepared.motion, &prepared.map, &options)
            .map(|proved| proved.trajectory)
            .map_err(|err| format!("at speed {speed}: {err}"))
    }

    pub fn load_library(&self, dir: &Path) -> std::io::Result<Library<Prepared>> {
        Library::load(dir, |path| self.prepare(path))
    }
}

/// The daemon's request handler.
#[derive(Debug)]
pub struct Daemon {
    robot: Robot,
    library_dir: PathBuf,
    library: RwLock<Arc<Library<Prepared>>>,
    rt: Arc<LoopHandle>,
    next_id: AtomicU32,
    /// Recent playbacks, for naming the active one in `status` and reporting refusals.
    played: Mutex<VecDeque<Played>>,
}

impl Daemon {
    pub fn new(
        robot: Robot,
        library_dir: PathBuf,
        library: Library<Prepared>,
        rt: Arc<LoopHandle>,
    ) -> Self {
        Self {
            robot,
            library_dir,
            library: RwLock::new(Arc::new(library)),
            rt,
            next_id: AtomicU32::new(1),
            played: Mutex::new(VecDeque::new()),
        }
    }

    fn library(&self) -> Arc<Library<Prepared>> {
        match self.library.read() {
            Ok(library) => library.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn play(
        &self,
        name: &str,
        speed: Option<f64>,
        looped: bool,
        at: Option<f64>,
    ) -> Result<Reply, RequestError> {
        let received_ns = MonotonicClock.now_ns();
        let library = self.library();
        let entry = library.get(name).ok_or_else(|| {
            RequestError::new(
                ErrorCode::UnknownMotion,
                format!(
                    "no motion {name:?} in {} (`list` shows the library)",
                    self.library_dir.display()
                ),
            )
        })?;
        let prepared = entry.motion.as_ref().map_err(|err| {
            RequestError::new(
                ErrorCode::InvalidMotion,
                format!("{name} cannot be played: {err}"),
            )
        })?;
        let status = self.rt.status();
        check_can_play(&status)?;
        let speed = speed.unwrap_or(1.0);
        let motion = self
            .robot
            .at_speed(prepared, speed)
            .map_err(|err| RequestError::new(ErrorCode::InvalidMotion, format!("{name} {err}")))?;
        let mut first = vec![Setpoint::default(); motion.dofs()];
        motion.sample(&mut Cursor::default(), 0, &mut first);
        // The drives hold the commanded position, and the loop refuses an approach that does not
        // start there; the measured position is the fallback before anything was commanded.
        let from = if status.commanded.len() == first.len() {
            &status.commanded
        } else {
            &status.positions
        };
        let approach =
            trajectory::approach(&self.robot.joints, from, &first, self.robot.options.rate_hz)
                .map_err(|err| {
                    RequestError::new(
                        ErrorCode::Refused,
                        format!("cannot approach {name}'s first pose: {err}"),
                    )
                })?;
        let start_at = match at {
            None => None,
            Some(secs) => Some(
                Duration::try_from_secs_f64(secs)
                    .ok()
                    .and_then(|since| SystemTime::UNIX_EPOCH.checked_add(since))
                    .ok_or_else(|| {
                        RequestError::new(
                            ErrorCode::BadRequest,
                            format!("\"at\": {secs} is not a representable time"),
                        )
                    })?,
            ),
        };
        let duration_s = motion.duration_s();
        let approach_s = approach.duration_s();
        let motion_id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.remember(motion_id, name, duration_s);
        self.rt
            .send(Command::Play(Box::new(Playback {
                motion_id,
                approach,
                motion,
                looped,
                start_at,
            })))
            .map_err(loop_error)?;
        let accepted = self.await_acceptance(name, motion_id)?;
        let mut fields = Map::new();
        fields.insert("motion".into(), json!(name));
        fields.insert("motion_id".into(), json!(motion_id));
        fields.insert("duration_s".into(), json!(duration_s));
        fields.insert("approach_s".into(), json!(approach_s));
        fields.insert("speed".into(), json!(speed));
        fields.insert("loop".into(), json!(looped));
        if let Some(at) = at {
            fields.insert("at".into(), json!(at));
        }
        if let Some(ns) = accepted.first_command_ns {
            // From taking up the request to the motion's first command reaching the backend.
            let us = ns.saturating_sub(received_ns) as f64 / 1000.0;
            fields.insert("first_command_us".into(), json!(us));
        }
        Ok(Reply::ok_with(fields))
    }

    /// Waits (briefly, off the loop) until the loop runs playback `motion_id` or says why not,
    /// so the reply tells what really happened.
    fn await_acceptance(&self, name: &str, motion_id: u32) -> Result<Status, RequestError> {
        let deadline = Instant::now() + ACCEPT_TIMEOUT;
        loop {
            let status = self.rt.status();
            if status.motion_id == Some(motion_id) && status.first_command_ns.is_some() {
                return Ok(status);
            }
            self.collect_outcomes();
            match self.outcome_of(motion_id) {
                Some(Outcome::Refused(why)) => {
                    return Err(RequestError::new(
                        ErrorCode::Refused,
                        refusal_text(name, why, &self.robot.joints),
                    ));
                }
                // Over before we looked: it did start.
                Some(_) => return Ok(status),
                None => {}
            }
            if status.state == State::Fault {
                return Err(fault_error(&status));
            }
            if Instant::now() >= deadline {
                return Err(RequestError::new(
                    ErrorCode::Unavailable,
                    "the loop did not take the playback in time",
                ));
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// Collects how playbacks left the loop and logs each once.
    pub fn collect_outcomes(&self) {
        let Ok(mut played) = self.played.lock() else {
            return;
        };
        for (id, outcome) in self.rt.outcomes() {
            let entry = played.iter_mut().find(|p| p.id == id);
            let name = entry.as_ref().map_or("?", |p| p.name.as_str());
            match outcome {
                Outcome::Refused(why) => tracing::warn!(
                    "playback {id} refused: {}",
                    refusal_text(name, why, &self.robot.joints)
                ),
                Outcome::Faulted => tracing::warn!("playback {id} ({name}) ended by a fault"),
                Outcome::Stopped => tracing::info!("playback {id} ({name}) stopped"),
                Outcome::Finished => tracing::info!("playback {id} ({name}) finished"),
            }
            if let Some(entry) = entry {
                entry.outcome = Some(outcome);
            }
        }
    }

    fn outcome_of(&self, motion_id: u32) -> Option<Outcome> {
        let played = self.played.lock().ok()?;
        played
            .iter()
            .find(|p| p.id == motion_id)
            .and_then(|p| p.outcome)
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
                outcome: None,
            });
        }
    }

    fn motion_name(&self, motion_id: u32) -> Option<(String, f64)> {
        let played = self.played.lock().ok()?;
        played
            .iter()
            .find(|p| p.id == motion_id)
            .map(|p| (p.name.clone(), p.duration_s))
    }

    /// Sends a command that needs no trajectory, after checking it makes sense now.
    fn command(&self, request: &Request) -> Result<Reply, RequestError> {
        let status = self.rt.status();
        let state = status.state;
        let refuse = |message: &str| Err(RequestError::new(ErrorCode::Refused, message));
        let command = match request {
            Request::Stop => Command::Stop,
            Request::Pause => match state {
                State::Approaching | State::Playing => Command::Pause,
                _ => return refuse("nothing is playing"),
            },
            Request::Resume => match state {
                State::Paused => Command::Resume,
                _ => return refuse("nothing is paused"),
            },
            Request::Hold => match state {
                State::Fault => return Err(fault_error(&status)),
                State::Disabled => return refuse("the drives are disabled; enable them first"),
                _ => Command::Hold,
            },
            Request::Enable => match state {
                State::Fault => return Err(fault_error(&status)),
                _ => Command::Enable,
            },
            Request::Disable => Command::Disable,
            Request::ClearFault => match state {
                State::Fault => Command::ClearFault,
                _ => return refuse("there is no fault to clear"),
            },
            _ => return refuse("not a loop command"),
        };
        self.rt.send(command).map_err(loop_error)?;
        Ok(Reply::ok())
    }

    fn status(&self) -> Reply {
        let status = self.rt.status();
        let joints = &self.robot.joints;
        let by_name = |values: &[f64]| -> Map<String, Value> {
            joints
                .dofs
                .iter()
                .zip(values)
                .map(|(dof, v)| (dof.name.clone(), json!(v)))
                .collect()
        };
        let mut fields = Map::new();
        fields.insert("state".into(), json!(status.state.as_str()));
        if let Some(id) = status.motion_id {
            fields.insert("motion_id".into(), json!(id));
            if let Some((name, duration)) = self.motion_name(id) {
                fields.insert("motion".into(), json!(name));
                fields.insert("duration_s".into(), json!(duration));
            }
            fields.insert("progress".into(), json!(status.progress));
            fields.insert("time_s".into(), json!(status.time_s));
            if let Some(ns) = status.first_command_ns {
                // CLOCK_MONOTONIC, for measuring request-to-motion latency from outside.
                fields.insert("first_command_ns".into(), json!(ns));
            }
        }
        fields.insert("tick".into(), json!(status.tick));
        fields.insert(
            "positions".into(),
            Value::Object(by_name(&status.positions)),
        );
        fields.insert(
            "commanded".into(),
            Value::Object(by_name(&status.commanded)),
        );
        let l = &status.latency;
        fields.insert(
            "latency_us".into(),
            json!({"min": l.min, "p50": l.p50, "p99": l.p99, "p999": l.p999, "max": l.max}),
        );
        fields.insert("overruns".into(), json!(status.overruns));
        fields.insert("limit_violations".into(), json!(status.limit_violations));
        let faults: Vec<Value> = status.fault.iter().map(|f| fault_json(f, joints)).collect();
        fields.insert("faults".into(), Value::Array(faults));
        Reply::ok_with(fields)
    }

    fn list(library: &Library<Prepared>) -> Reply {
        let motions: Vec<Value> = library
            .iter()
            .map(|(name, entry)| match &entry.motion {
                Ok(prepared) => json!({"name": name, "duration_s": prepared.trajectory.duration_s(), "ok": true}),
                Err(err) => json!({"name": name, "ok": false, "error": err}),
            })
            .collect();
        let mut fields = Map::new();
        fields.insert("motions".into(), Value::Array(motions));
        Reply::ok_with(fields)
    }

    /// Loads the folder again and swaps the library in; playbacks already sent keep their own
    /// trajectories.
    pub fn reload(&self) -> Result<Reply, RequestError> {
        let library = self.robot.load_library(&self.library_dir).map_err(|err| {
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
    fn handle(&self, request: Request) -> Reply {
        let result = match &request {
            Request::Play {
                motion,
                speed,
                looped,
                at,
            } => self.play(motion, *speed, *looped, *at),
            Request::Status => Ok(self.status()),
            Request::List => Ok(Self::list(&self.library())),
            Request::Reload => self.reload(),
            _ => self.command(&request),
        };
        if let Err(err) = &result {
            // One line per event in the journal; the client got the whole message.
            let first = err.message.lines().next().unwrap_or_default();
            tracing::info!("request refused: {}: {first}", err.code.as_str());
        }
        result.into()
    }
}

/// Logs each motion that could not be loaded, and the count of those that were.
pub fn log_library(library: &Library<Prepared>) {
    let mut ok = 0;
    for (name, entry) in library.iter() {
        match &entry.motion {
            Ok(_) => ok += 1,
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

fn check_can_play(status: &Status) -> Result<(), RequestError> {
    match status.state {
        State::Idle | State::Holding => Ok(()),
        State::Fault => Err(fault_error(status)),
        State::Disabled => Err(RequestError::new(
            ErrorCode::Refused,
            "the drives are disabled; enable them first",
        )),
        state => Err(RequestError::new(
            ErrorCode::Refused,
            format!(
                "the robot is {}; stop the current motion first",
                state.as_str()
            ),
        )),
    }
}

fn fault_error(status: &Status) -> RequestError {
    let what = status
        .fault
        .map_or_else(|| "a fault".to_string(), |f| f.to_string());
    RequestError::new(
        ErrorCode::Fault,
        format!("the loop stopped on {what}; clear_fault first"),
    )
}

fn fault_json(fault: &crate::backend::BackendError, joints: &JointSet) -> Value {
    let joint = fault
        .dof
        .and_then(|d| joints.dofs.get(usize::from(d)))
        .map(|dof| dof.name.clone());
    json!({"kind": fault.kind.as_str(), "joint": joint, "code": fault.code})
}

fn loop_error(err: rt::Error) -> RequestError {
    RequestError::new(ErrorCode::Unavailable, format!("the loop: {err}"))
}

fn refusal_text(name: &str, why: Refusal, joints: &JointSet) -> String {
    let dof = |d: u16| {
        joints
            .dofs
            .get(usize::from(d))
            .map_or_else(|| format!("DOF {d}"), |dof| dof.name.clone())
    };
    match why {
        Refusal::Busy(state) => format!(
            "{name}: the robot is {}; stop the current motion first",
            state.as_str()
        ),
        Refusal::Mismatch => format!("{name}: the trajectory does not fit the loop's DOFs or rate"),
        Refusal::Jump { dof: d } => format!(
            "{name}: the approach would start away from where {} is held",
            dof(d)
        ),
        Refusal::NotLoopable { dof: d } => format!(
            "{name} does not end where it starts ({}), so it cannot loop",
            dof(d)
        ),
    }
}
