//! The flight recorder: the last seconds of the loop, written to an MCAP file when something
//! goes wrong — a fault, an E-stop, a guard intervention — or when an operator asks
//! (`motionctl dump`).
//!
//! The loop fills its preallocated ring ([`crate::rt::Trace`]) every tick and never waits for
//! anybody. A thread of its own here (off the loop, normal scheduling) copies the new rows a few
//! times a second into a history as long as the ring; on a trigger it writes the history up to
//! the triggering tick and its events ([`events`]) as MCAP ([`mcap`]) into the recorder's
//! folder, keeping at most so many files and bytes there (the oldest go first). Each file is
//! logged with its path. The history is the thread's own, so the seconds before a trigger are all
//! in its dump however late a loaded machine lets the thread come by: the loop, still ticking
//! after a fault, overwrites the ring's oldest rows meanwhile, not the history's.

pub mod events;
pub mod mcap;

use std::collections::VecDeque;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use crossbeam::channel::{self, Receiver, RecvTimeoutError, Sender};

pub use events::{Event, EventKind};

use crate::rt::{Trace, TraceRow};
use crate::trajectory::JointSet;

/// How often the recorder's thread looks at the new rows.
const POLL: Duration = Duration::from_millis(20);
/// Requests remembered for the dumps (far more than a ring's seconds hold in practice).
const REQUESTS_KEPT: usize = 1024;
/// A trigger this soon after the last automatic dump is in that dump's aftermath (the E-stop a
/// fault's quick stop runs into, the guard refusing again): not dumped again.
const HOLDOFF: Duration = Duration::from_secs(1);

/// Where and how much the recorder keeps (`recorder` in the configuration).
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Seconds of ticks the ring holds, and so each dump.
    pub seconds: f64,
    /// The folder dumps go to (made when missing).
    pub dir: PathBuf,
    /// At most this many dumps are kept there …
    pub max_files: usize,
    /// … holding at most this many bytes together; the oldest are removed first.
    pub max_bytes: u64,
}

/// A dump written.
#[derive(Debug, Clone, PartialEq)]
pub struct Dumped {
    pub path: PathBuf,
    /// `fault`, `estop`, `guard` or `dump`.
    pub reason: &'static str,
    /// Ticks it holds, and the time they span.
    pub ticks: usize,
    pub seconds: f64,
    pub bytes: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Says what to do: the folder's state where it explains the failure (missing, read-only),
    /// and room for a dump in recorder.dir.
    #[error("{}{ROOM}", crate::diag::output_failure(path, source))]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    // The MCAP writer's own words ("I/O error from writing, …") leave out why: its cause (a
    // full disk) is in the source chain.
    #[error("{}: {}{ROOM}", path.display(), with_causes(source))]
    Mcap { path: PathBuf, source: mcap::Error },
    #[error("the loop has recorded no tick yet")]
    Empty,
    #[error("the flight recorder is not running")]
    Stopped,
}

/// What to do when a dump cannot be written.
const ROOM: &str = "; recorder.dir must be a writable folder with room for a dump (free space there, \
                    or give recorder.dir another folder)";

/// `error` followed by each of its causes.
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

enum Ask {
    Dump(Sender<Result<Dumped, Error>>),
    Stop,
}

/// The recorder's thread and what the daemon tells it.
pub struct FlightRecorder {
    asks: Sender<Ask>,
    requests: Arc<Mutex<VecDeque<Event>>>,
    recent: Arc<Mutex<VecDeque<Event>>>,
    trace: Arc<Trace>,
}

/// What the recorder's thread works with.
struct Worker {
    trace: Arc<Trace>,
    joints: JointSet,
    rate_hz: f64,
    settings: Settings,
    requests: Arc<Mutex<VecDeque<Event>>>,
    recent: Arc<Mutex<VecDeque<Event>>>,
}

/// Events kept for [`FlightRecorder::recent`].
const RECENT_KEPT: usize = 32;

fn remember(q: &Mutex<VecDeque<Event>>, e: Event, kept: usize) {
    if let Ok(mut q) = q.lock() {
        if q.len() == kept {
            q.pop_front();
        }
        q.push_back(e);
    }
}

impl FlightRecorder {
    /// Starts watching `trace` (the loop's ring for `joints` at `rate_hz`).
    pub fn start(
        trace: Arc<Trace>,
        joints: JointSet,
        rate_hz: f64,
        settings: Settings,
    ) -> std::io::Result<FlightRecorder> {
        let (asks, inbox) = channel::bounded(8);
        let requests = Arc::new(Mutex::new(VecDeque::with_capacity(REQUESTS_KEPT)));
        let recent = Arc::new(Mutex::new(VecDeque::with_capacity(RECENT_KEPT)));
        // Triggers count from now: rows already written are history, dumped only when asked.
        let mut history = Vec::with_capacity(trace.capacity());
        let (from, _) = trace.rows_from(0, &mut history);
        let worker = Worker {
            trace: trace.clone(),
            joints,
            rate_hz,
            settings,
            requests: requests.clone(),
            recent: recent.clone(),
        };
        std::thread::Builder::new()
            .name("flight-recorder".into())
            .spawn(move || worker.run(&inbox, history.into(), from))?;
        Ok(FlightRecorder {
            asks,
            requests,
            recent,
            trace,
        })
    }

    /// Remembers a request the daemon answered (`uid` sent it), for the dumps.
    pub fn request(&self, uid: u32, text: String) {
        let tick = self.trace.latest(1).first().map_or(0, |r| r.tick);
        let event = Event::request(tick, uid, text);
        remember(&self.recent, event.clone(), RECENT_KEPT);
        remember(&self.requests, event, REQUESTS_KEPT);
    }

    /// The newest `n` events (state changes, requests, guard interventions, faults, E-stops),
    /// oldest first, with the loop's newest tick to tell their age by.
    pub fn recent(&self, n: usize) -> (Vec<Event>, u64) {
        let now = self.trace.latest(1).first().map_or(0, |r| r.tick);
        let mut events: Vec<Event> = self
            .recent
            .lock()
            .map(|q| q.iter().cloned().collect())
            .unwrap_or_default();
        // Requests arrive as they are answered, the loop's own events when the recorder's thread
        // comes by: in the loop's order, requests first within a tick.
        events.sort_by_key(|e| e.tick);
        let events = events.split_off(events.len().saturating_sub(n));
        (events, now)
    }

    /// Writes the ring now (`motionctl dump`) and says where.
    pub fn dump(&self, timeout: Duration) -> Result<Dumped, Error> {
        let (tx, rx) = channel::bounded(1);
        self.asks
            .try_send(Ask::Dump(tx))
            .map_err(|_| Error::Stopped)?;
        rx.recv_timeout(timeout).map_err(|_| Error::Stopped)?
    }
}

impl Drop for FlightRecorder {
    /// Tells the thread to end without waiting for it: a dump being written must not hold up
    /// the daemon's controlled stop (a `.part` file left by the exit is removed at the next
    /// start).
    fn drop(&mut self) {
        let _ = self.asks.try_send(Ask::Stop);
    }
}

impl Worker {
    /// `history`: the rows the ring held before row `from`, the first row triggers count from.
    fn run(self, inbox: &Receiver<Ask>, mut history: VecDeque<TraceRow>, from: u64) {
        // Below everything else the daemon does (a dump is seconds of JSON and compression):
        // nice 10 for this thread alone. Best effort; nothing depends on it.
        // SAFETY: plain syscalls on this thread's own id.
        unsafe {
            let tid = libc::gettid();
            libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 10);
        }
        if let Err(e) = std::fs::create_dir_all(&self.settings.dir) {
            tracing::warn!(
                "flight recorder: cannot make {}: {e}; dumps will fail (recorder.dir)",
                self.settings.dir.display()
            );
        }
        remove_parts(&self.settings.dir);
        let mut next = from;
        let mut last_auto: Option<std::time::Instant> = None;
        let mut rows: Vec<TraceRow> = Vec::new();
        let mut looked = false;
        loop {
            let asked = match inbox.recv_timeout(POLL) {
                Ok(Ask::Stop) | Err(RecvTimeoutError::Disconnected) => return,
                Ok(Ask::Dump(reply)) => Some(reply),
                Err(RecvTimeoutError::Timeout) => None,
            };
            // The new rows, after the newest one already seen (events are changes from it).
            let before = history.back().cloned();
            let had_before = before.is_some();
            rows.clear();
            rows.extend(before);
            (next, _) = self.trace.rows_from(next, &mut rows);
            // The first look restates the state the loop is in; later ones only say changes.
            let changes = events::from_rows(&rows, &self.joints);
            for e in changes.into_iter().skip(usize::from(had_before && looked)) {
                remember(&self.recent, e, RECENT_KEPT);
            }
            looked = true;
            // Rows after a trigger go into the history only once its dump is written: the rows
            // before it are what the dump is for.
            let trigger = events::first_trigger(&rows);
            let split = trigger.map_or(rows.len(), |(tick, _)| {
                rows.partition_point(|r| r.tick <= tick)
            });
            let mut fresh = rows.drain(usize::from(had_before)..);
            for row in fresh.by_ref().take(split - usize::from(had_before)) {
                keep(&mut history, row, self.trace.capacity());
            }
            if let Some((tick, kind)) = trigger
                && last_auto.is_none_or(|t| t.elapsed() >= HOLDOFF)
            {
                last_auto = Some(std::time::Instant::now());
                let reason = kind.as_str();
                match self.dump(history.make_contiguous(), reason, Some(tick)) {
                    Ok(d) => tracing::warn!(
                        "flight recorder: {reason} at tick {tick}: the last {:.1} s written to {}",
                        d.seconds,
                        d.path.display()
                    ),
                    Err(e) => tracing::error!("flight recorder: {reason} at tick {tick}: {e}"),
                }
            }
            for row in fresh {
                keep(&mut history, row, self.trace.capacity());
            }
            if let Some(reply) = asked {
                let _ = reply.send(self.dump(history.make_contiguous(), "dump", None));
            }
        }
    }

    /// Writes `history`'s rows (oldest first) up to tick `until` (all of them when `None`) with
    /// their events.
    fn dump(
        &self,
        history: &[TraceRow],
        reason: &'static str,
        until: Option<u64>,
    ) -> Result<Dumped, Error> {
        let rows = match until {
            Some(until) => &history[..history.partition_point(|r| r.tick <= until)],
            None => history,
        };
        let (Some(first), Some(newest)) = (rows.first(), rows.last()) else {
            return Err(Error::Empty);
        };
        let (first, newest) = (first.tick, newest.tick);
        let mut events: Vec<Event> = self
            .requests
            .lock()
            .map(|q| {
                q.iter()
                    .filter(|e| (first..=newest).contains(&e.tick))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        // Requests first within a tick, so a fault stays the last record of a fault's dump.
        events.extend(events::from_rows(rows, &self.joints));
        events.sort_by_key(|e| e.tick);
        let now = SystemTime::now();
        let now_ns = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        // The loop's tick 0, as near as the wall clock tells: the newest row is recent.
        let period_ns = 1e9 / self.rate_hz;
        let newest_row = self.trace.latest(1).first().map_or(newest, |r| r.tick);
        let epoch_ns = now_ns.saturating_sub((newest_row as f64 * period_ns) as u64);
        let meta = mcap::Meta {
            joints: &self.joints,
            rate_hz: self.rate_hz,
            epoch_ns,
            reason,
        };
        // Made at start; made again should someone have removed it since (the write then says
        // what is wrong if it still cannot be).
        let _ = std::fs::create_dir_all(&self.settings.dir);
        let path = free_name(&self.settings.dir, now, reason);
        let bytes = write_file(&path, &meta, rows, &events)?;
        prune(&self.settings, &path);
        Ok(Dumped {
            path,
            reason,
            ticks: rows.len(),
            seconds: (newest - first) as f64 / self.rate_hz,
            bytes,
        })
    }
}

/// Appends `row` to `history`, dropping its oldest row beyond `capacity`.
fn keep(history: &mut VecDeque<TraceRow>, row: TraceRow, capacity: usize) {
    if history.len() == capacity {
        history.pop_front();
    }
    history.push_back(row);
}

/// Writes an MCAP file at `path` (through a `.part` file renamed into place, so a reader never
/// sees half a file); returns its size.
pub fn write_file(
    path: &Path,
    meta: &mcap::Meta,
    rows: &[TraceRow],
    events: &[Event],
) -> Result<u64, Error> {
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut part = path.as_os_str().to_owned();
    part.push(".part");
    let part = PathBuf::from(part);
    let file = std::fs::File::create(&part).map_err(io)?;
    let written = mcap::write(BufWriter::new(file), meta, rows, events)
        .map_err(|source| Error::Mcap {
            path: path.to_path_buf(),
            source,
        })
        .and_then(|()| std::fs::rename(&part, path).map_err(io));
    if written.is_err() {
        let _ = std::fs::remove_file(&part);
    }
    written?;
    Ok(std::fs::metadata(path).map_err(io)?.len())
}

/// Removes the `.part` files a daemon killed while it wrote a dump left in `dir`.
fn remove_parts(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.filter_map(Result::ok) {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("motiond-") && name.ends_with(".mcap.part") {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// `motiond-2026-11-26T10-40-01.123Z-fault.mcap` in `dir`, not yet taken.
fn free_name(dir: &Path, at: SystemTime, reason: &str) -> PathBuf {
    let stamp = utc_stamp(at);
    let mut path = dir.join(format!("motiond-{stamp}-{reason}.mcap"));
    let mut n = 2;
    while path.exists() {
        path = dir.join(format!("motiond-{stamp}-{reason}-{n}.mcap"));
        n += 1;
    }
    path
}

/// UTC time with millisecond precision, sortable and safe in a file name.
fn utc_stamp(at: SystemTime) -> String {
    let ns = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128);
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(ns)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    format!(
        "{:04}-{:02}-{:02}T{:02}-{:02}-{:02}.{:03}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.millisecond()
    )
}

/// Removes the oldest dumps in the folder until at most `max_files` and `max_bytes` remain;
/// `keep` (the one just written) stays whatever its size.
fn prune(settings: &Settings, keep: &Path) {
    let Ok(entries) = std::fs::read_dir(&settings.dir) else {
        return;
    };
    let mut dumps: Vec<(PathBuf, u64)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let ours = name.starts_with("motiond-") && name.ends_with(".mcap");
            let size = e.metadata().ok()?.len();
            ours.then(|| (e.path(), size))
        })
        .collect();
    // Names start with the UTC time: sorted by name is oldest first.
    dumps.sort();
    let mut files = dumps.len();
    let mut bytes: u64 = dumps.iter().map(|d| d.1).sum();
    for (path, size) in dumps {
        if files <= settings.max_files && bytes <= settings.max_bytes {
            break;
        }
        if path == keep {
            continue;
        }
        match std::fs::remove_file(&path) {
            Ok(()) => {
                tracing::info!(
                    "flight recorder: removed {} (recorder.max_files, recorder.max_mib)",
                    path.display()
                );
                files -= 1;
                bytes -= size;
            }
            Err(e) => tracing::warn!("flight recorder: removing {}: {e}", path.display()),
        }
    }
}

#[cfg(test)]
mod tests;
