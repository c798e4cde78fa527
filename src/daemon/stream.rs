//! Streams on the control socket: a client (a policy) sends chunks of timed positions while the
//! robot moves, and each one is spliced into the running path a few ticks ahead of the loop
//! ([`Session::splice`], [`crate::trajectory::splice_stream`]).
//!
//! The stream's clock starts when it opens; a row at stream time `t` plays at `t + horizon_s`
//! (the buffering horizon absorbs the client's jitter). Each accepted chunk's rows replace the
//! accepted rows from its first row's time on (newest wins) and extend the path; rows the path
//! can no longer reach in time are skipped (all of them when it cannot join any before the
//! last: it heads for the last row and brakes at its time), a chunk whose rows are all past is
//! `late`; a chunk whose `seq` is not
//! above the last one's is `stale`; one no path can make safe is refused with the reason, and the
//! path goes on as accepted. The path brakes to rest after its last row: a stream whose next
//! chunk does not come in time is `starved`, and the next chunk resumes it from where it is.
//!
//! A stream belongs to the connection that opened it: chunks and `stream_close` from any other
//! are `not_owner`, and so is another connection's `stream_open` on its slot until the owner
//! closes it, its connection ends (the stream is closed then: the accepted rows play out and the
//! path brakes past the last, as when starved) or a `stop` ends it. Two policies never feed one
//! stream, and none loses its stream without being told. A stream's first chunk does not take
//! over a motion it did not start (a library motion playing or paused, a teach-in): `refused`.

use std::collections::VecDeque;

use super::protocol::{Answer, ErrorCode, RequestError};
use super::reply::{ChunkReply, StreamOpenReply, StreamOwner, StreamReport, StreamState};
use super::server::Peer;
use crate::rt::{Outcome, State, Status};
use crate::session::{self, ErrorKind, Session, SessionError, Spliced};
use crate::trajectory::{JointSet, SpliceError, splice_stream};

/// The splice's least look-ahead (s): time to build and prove a piece before its tick. A stream
/// whose splices the loop misses looks further ahead (doubling), then comes back down by a tenth
/// a chunk.
const LEAD_S: f64 = 0.005;
/// Accepted rows kept before the splice, so the spline through them runs on smoothly.
const ROWS_BEFORE: usize = 2;
/// Rows a stream holds ahead of the loop at most (its memory bound).
const MAX_ROWS_AHEAD: usize = 10 * super::protocol::MAX_CHUNK_ROWS;
/// How far ahead of the robot (s, stream time, horizon included) a chunk's last row may be. The
/// splice samples and proves the path tick by tick up to its last row, so the span bounds the
/// request's time and memory: `t0: 1e9` asked for 144 TB and aborted the daemon, `t0: 10000`
/// held the control socket for 85 s. A minute is far beyond any policy's chunk (about a second)
/// and the longest horizon (10 s), and is proved in a fraction of a second.
const MAX_AHEAD_S: f64 = 60.0;

/// Where one of the slot's DOFs takes its position from in a row.
#[derive(Debug, Clone, Copy)]
enum Fill {
    /// The row's column.
    Column(usize),
    /// A mimic follower: `multiplier · leader + offset`, the leader a slot DOF.
    Mimic {
        leader: usize,
        multiplier: f64,
        offset: f64,
    },
    /// Not driven by a motion (locked): held where it was commanded at the open.
    Hold(f64),
}

/// Where a stream is.
#[derive(Debug, Clone, PartialEq)]
enum Phase {
    /// Open, no chunk accepted yet.
    Waiting,
    Streaming,
    /// Past its last row: braking or at rest.
    Starved,
    /// Something else took the slot (a stop, a fault, another motion).
    Ended(String),
}

impl Phase {
    fn state(&self) -> StreamState {
        match self {
            Phase::Waiting => StreamState::Waiting,
            Phase::Streaming => StreamState::Streaming,
            Phase::Starved => StreamState::Starved,
            Phase::Ended(_) => StreamState::Ended,
        }
    }
}

#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    accepted: u64,
    late: u64,
    stale: u64,
    refused: u64,
    resumed: u64,
}

#[derive(Debug)]
pub(super) struct Stream {
    /// The connection that opened it: the only one its chunks and close come from.
    owner: Peer,
    /// Why the daemon ended it (a `stop` on its slot), whatever the loop does.
    ended: Option<String>,
    /// The stream of another connection this one took the slot from, and why that had ended:
    /// that connection's next request on the slot is told.
    after: Option<(u64, String)>,
    group: Option<String>,
    joints: Vec<String>,
    fill: Vec<Fill>,
    slot_joints: JointSet,
    slot: usize,
    rate_hz: f64,
    horizon_s: f64,
    open_tick: u64,
    last_seq: Option<u64>,
    /// Accepted rows: playout time (s since the open) and one value per slot DOF.
    times: VecDeque<f64>,
    rows: VecDeque<Vec<f64>>,
    /// The playback of the piece last spliced in.
    piece: Option<u32>,
    counts: Counts,
    /// The look-ahead the next splice asks for (slot ticks).
    lead: u64,
}

/// The open streams, one a slot.
#[derive(Debug, Default)]
pub(super) struct Streams {
    open: Vec<Stream>,
    /// Per slot, the piece a stream spliced in last: a new stream's first chunk may take over
    /// from it (a closed or starved stream's tail), not from a motion no stream started.
    pieces: Vec<(usize, u32)>,
}

fn refused(message: String) -> RequestError {
    RequestError::new(ErrorCode::Refused, message)
}

fn session_error(err: SessionError) -> RequestError {
    let code = match err.kind {
        ErrorKind::Refused => ErrorCode::Refused,
        ErrorKind::Fault => ErrorCode::Fault,
        ErrorKind::InvalidMotion => ErrorCode::InvalidMotion,
        ErrorKind::Unavailable => ErrorCode::Unavailable,
    };
    RequestError::new(code, err.message)
}

fn group_name(group: Option<&str>) -> String {
    group.map_or_else(|| "the whole robot".into(), |g| format!("group {g}"))
}

impl Streams {
    pub fn open(
        &mut self,
        session: &Session,
        peer: &Peer,
        group: Option<&str>,
        joints: Option<&[String]>,
        rate_hz: Option<f64>,
        horizon_s: Option<f64>,
    ) -> Result<Answer, RequestError> {
        let slot = session.slot_index(group).map_err(session_error)?;
        let status = session.status();
        let mut after = None;
        if let Some(held) = self.open.iter().find(|s| s.slot == slot)
            && held.owner.connection != peer.connection
        {
            match held.phase(session, &status) {
                Phase::Ended(why) => after = Some((held.owner.connection, why)),
                _ => return Err(held.not_owner("stream_open", session, &status, peer)),
            }
        }
        let dofs = session.group_dofs(group).map_err(session_error)?;
        let slot_joints = session.group_joints(group).map_err(session_error)?;
        let all = session.joints();
        let driven: Vec<String> = all
            .driven()
            .filter(|(i, _)| dofs.contains(i))
            .map(|(_, d)| d.name.clone())
            .collect();
        let joints = joints.map_or_else(|| driven.clone(), <[String]>::to_vec);
        for (i, name) in joints.iter().enumerate() {
            if !driven.contains(name) {
                return Err(RequestError::new(
                    ErrorCode::BadRequest,
                    format!(
                        "stream_open: \"joints\"[{i}] {name:?} is not a DOF {} drives; expected some of {}",
                        group_name(group),
                        driven.join(", ")
                    ),
                ));
            }
            if joints[..i].contains(name) {
                return Err(RequestError::new(
                    ErrorCode::BadRequest,
                    format!("stream_open: \"joints\" names {name:?} twice"),
                ));
            }
        }
        let mut fill = Vec::with_capacity(dofs.len());
        for &d in &dofs {
            let dof = &all.dofs[d];
            let f = if let Some(c) = joints.iter().position(|n| *n == dof.name) {
                Fill::Column(c)
            } else if let Some(m) = dof.mimic {
                let leader = dofs.iter().position(|&x| x == m.leader).ok_or_else(|| {
                    refused(format!(
                        "stream_open: {} follows {}, which {} does not hold",
                        dof.name,
                        all.dofs[m.leader].name,
                        group_name(group)
                    ))
                })?;
                Fill::Mimic {
                    leader,
                    multiplier: m.multiplier,
                    offset: m.offset,
                }
            } else {
                Fill::Hold(status.commanded[d])
            };
            fill.push(f);
        }
        let rate_hz = rate_hz.unwrap_or(30.0);
        let horizon_s = horizon_s.unwrap_or(0.1);
        self.open.retain(|s| s.slot != slot);
        self.open.push(Stream {
            owner: *peer,
            ended: None,
            after,
            group: group.map(str::to_string),
            joints: joints.clone(),
            fill,
            slot_joints,
            slot,
            rate_hz,
            horizon_s,
            open_tick: status.tick,
            last_seq: None,
            times: VecDeque::new(),
            rows: VecDeque::new(),
            piece: None,
            counts: Counts::default(),
            lead: lead_ticks(session),
        });
        Ok(Answer::StreamOpen(StreamOpenReply {
            group: group.map(str::to_string),
            joints,
            rate_hz,
            horizon_s,
            lead_ticks: lead_ticks(session),
            tick: status.tick,
        }))
    }

    /// `group`'s stream, when `peer`'s connection holds it (`what` names the request).
    fn find(
        &mut self,
        session: &Session,
        peer: &Peer,
        group: Option<&str>,
        what: &str,
    ) -> Result<&mut Stream, RequestError> {
        let slot = session.slot_index(group).map_err(session_error)?;
        let stream = self
            .open
            .iter_mut()
            .find(|s| s.slot == slot)
            .ok_or_else(|| {
                refused(format!(
                    "{what}: no stream is open for {}; send stream_open first",
                    group_name(group)
                ))
            })?;
        if stream.owner.connection != peer.connection {
            return Err(stream.not_owner(what, session, &session.peek(), peer));
        }
        Ok(stream)
    }

    pub fn close(
        &mut self,
        session: &Session,
        peer: &Peer,
        group: Option<&str>,
    ) -> Result<Answer, RequestError> {
        let stream = self.find(session, peer, group, "stream_close")?;
        let report = stream.describe(session, &session.status());
        let slot = stream.slot;
        self.open.retain(|s| s.slot != slot);
        Ok(Answer::StreamClose(report))
    }

    #[allow(
        clippy::too_many_arguments,
        reason = "the request's fields, as they came"
    )]
    pub fn chunk(
        &mut self,
        session: &Session,
        peer: &Peer,
        group: Option<&str>,
        seq: u64,
        positions: &[Vec<f64>],
        t0: Option<f64>,
        dt: Option<f64>,
    ) -> Result<Answer, RequestError> {
        let slot = session.slot_index(group).map_err(session_error)?;
        let ours = self
            .pieces
            .iter()
            .find(|(s, _)| *s == slot)
            .map(|&(_, piece)| piece);
        let answer = self
            .find(session, peer, group, "stream_chunk")?
            .chunk(session, seq, positions, t0, dt, ours)?;
        if let Answer::StreamChunk(chunk) = &answer {
            self.pieces.retain(|(s, _)| *s != slot);
            self.pieces.push((slot, chunk.motion_id));
        }
        Ok(answer)
    }

    /// Closes the streams `peer`'s connection held (it has gone): their accepted rows play to
    /// the last and the path brakes to rest there, as a starved stream's does. Their reports.
    pub fn disconnected(&mut self, session: &Session, peer: &Peer) -> Vec<StreamReport> {
        let status = session.status();
        let (gone, kept) = std::mem::take(&mut self.open)
            .into_iter()
            .partition(|s| s.owner.connection == peer.connection);
        self.open = kept;
        gone.iter().map(|s| s.describe(session, &status)).collect()
    }

    /// Ends `group`'s stream (every stream with `None`) for `why`, whatever the loop does: its
    /// owner's next chunk is refused, and another connection may open one. How many it ended.
    pub fn end(&mut self, session: &Session, group: Option<&str>, why: &str) -> usize {
        let slot = match group {
            None => None,
            Some(_) => match session.slot_index(group) {
                Ok(slot) => Some(slot),
                Err(_) => return 0,
            },
        };
        let status = session.peek();
        let mut ended = 0;
        for stream in &mut self.open {
            if slot.is_none_or(|s| s == stream.slot)
                && !matches!(stream.phase(session, &status), Phase::Ended(_))
            {
                stream.ended = Some(why.to_string());
                ended += 1;
            }
        }
        ended
    }

    /// Each open stream for `status`: its group and state, and counts.
    pub fn describe(&self, session: &Session, status: &Status) -> Vec<StreamReport> {
        self.open
            .iter()
            .map(|s| s.describe(session, status))
            .collect()
    }

    /// The slots whose stream is starved.
    pub fn starved(&self, session: &Session, status: &Status) -> Vec<usize> {
        self.open
            .iter()
            .filter(|s| s.phase(session, status) == Phase::Starved)
            .map(|s| s.slot)
            .collect()
    }
}

/// The operator's command that stops `group` (and ends its stream).
fn stop_command(group: Option<&str>) -> String {
    group.map_or_else(
        || "motionctl stop".into(),
        |g| format!("motionctl stop --group {g}"),
    )
}

fn lead_ticks(session: &Session) -> u64 {
    (LEAD_S * session.rate_hz()).ceil().max(3.0) as u64
}

impl Stream {
    fn phase(&self, session: &Session, status: &Status) -> Phase {
        if let Some(why) = &self.ended {
            return Phase::Ended(why.clone());
        }
        let Some(motion_id) = self.piece else {
            return Phase::Waiting;
        };
        let Some(slot) = status.slots.get(self.slot) else {
            return Phase::Ended("the slot is gone".into());
        };
        if slot.motion_id == Some(motion_id) {
            // The loop says whether it is past the piece's last row.
            return match slot.state {
                State::Starved => Phase::Starved,
                _ => Phase::Streaming,
            };
        }
        match session.outcome(motion_id) {
            None => Phase::Streaming,
            Some(Outcome::Finished) if slot.motion_id.is_none() => Phase::Starved,
            Some(Outcome::Finished | Outcome::Replaced) => {
                Phase::Ended("another motion took over".into())
            }
            Some(Outcome::Stopped) => Phase::Ended("a stop ended it".into()),
            Some(Outcome::Faulted) => Phase::Ended("a fault ended it".into()),
            Some(Outcome::Refused(_)) => Phase::Ended("the loop refused its piece".into()),
        }
    }

    /// The refusal of `what` from `peer`, whose connection does not hold this stream: whose it
    /// is, since when, and how the slot becomes free.
    fn not_owner(
        &self,
        what: &str,
        session: &Session,
        status: &Status,
        peer: &Peer,
    ) -> RequestError {
        let ago = status.tick.saturating_sub(self.open_tick) as f64 / session.rate_hz();
        let stop = stop_command(self.group.as_deref());
        let yours = match &self.after {
            Some((connection, why)) if *connection == peer.connection => {
                format!("; this connection's stream there had ended ({why}) before it opened")
            }
            _ => String::new(),
        };
        let todo = if what == "stream_open" {
            "open yours once that connection sends stream_close or closes, or once an operator's \
             `stop` ends its stream"
        } else {
            "this connection's requests do not feed or close it: send stream_open once that \
             connection sends stream_close or closes, or once an operator's `stop` ends its stream"
        };
        RequestError::new(
            ErrorCode::NotOwner,
            format!(
                "{what}: the stream for {} belongs to another connection ({}), which opened it \
                 {ago:.1} s ago (loop tick {}){yours}; {todo} (`{stop}`)",
                group_name(self.group.as_deref()),
                self.owner,
                self.open_tick,
            ),
        )
    }

    fn describe(&self, session: &Session, status: &Status) -> StreamReport {
        let phase = self.phase(session, status);
        let c = self.counts;
        StreamReport {
            group: self.group.clone(),
            state: phase.state(),
            ended: match phase {
                Phase::Ended(why) => Some(why),
                _ => None,
            },
            owner: StreamOwner {
                uid: self.owner.uid,
                pid: self.owner.pid,
                connection: self.owner.connection,
                opened_tick: self.open_tick,
            },
            seq: self.last_seq,
            time_s: status.tick.saturating_sub(self.open_tick) as f64 / session.rate_hz(),
            accepted: c.accepted,
            late: c.late,
            stale: c.stale,
            refused: c.refused,
            resumed: c.resumed,
        }
    }

    fn chunk(
        &mut self,
        session: &Session,
        seq: u64,
        positions: &[Vec<f64>],
        t0: Option<f64>,
        dt: Option<f64>,
        ours: Option<u32>,
    ) -> Result<Answer, RequestError> {
        let status = session.peek();
        let phase = self.phase(session, &status);
        self.check(&phase, seq, positions)?;
        if phase == Phase::Waiting
            && let Some(slot) = status.slots.get(self.slot)
            && let Some(id) = slot.motion_id
            && Some(id) != ours
        {
            // As `play` is refused while something plays: a policy's first rows never silently
            // cut short a motion someone else started (`play --replace` is the explicit way).
            self.counts.refused += 1;
            return Err(refused(format!(
                "chunk {seq}: playback {id} is {} on {}, and a stream does not take over a motion \
                 it did not start; stop it (`{}`) or wait until it ends, then send the chunk again",
                slot.state.as_str(),
                group_name(self.group.as_deref()),
                stop_command(self.group.as_deref()),
            )));
        }
        self.last_seq = Some(seq);
        let rate = session.rate_hz();
        let now_s = status.tick.saturating_sub(self.open_tick) as f64 / rate;
        let dt = dt.unwrap_or(1.0 / self.rate_hz);
        let first = t0.unwrap_or(now_s) + self.horizon_s;
        let last_s = first + positions.len().saturating_sub(1) as f64 * dt;
        if last_s - now_s > MAX_AHEAD_S {
            self.counts.refused += 1;
            return Err(refused(format!(
                "chunk {seq}: its last row is due at {last_s:.4} s, {:.1} s ahead of the robot \
                 (stream time {now_s:.4} s, horizon included); at most {MAX_AHEAD_S} s ahead: \
                 send rows closer to their time (t0 is seconds since stream_open)",
                last_s - now_s
            )));
        }
        let starved = matches!(phase, Phase::Starved | Phase::Waiting);
        let (times, rows) = self.rows_with(positions, first, dt, starved);
        let ahead = times.iter().filter(|&&t| t >= now_s).count();
        if ahead > MAX_ROWS_AHEAD {
            self.counts.refused += 1;
            return Err(refused(format!(
                "chunk {seq} would hold {ahead} rows ahead of the robot; at most {MAX_ROWS_AHEAD}"
            )));
        }
        let (spliced, join_s, splice_s) = self.splice(session, seq, &times, &rows, dt)?;
        self.accepted(session, spliced, times, rows, splice_s);
        let resumed = starved && self.counts.accepted > 1;
        if resumed {
            self.counts.resumed += 1;
        }
        // The rows the path passes before it joins them: all when it cannot before they end.
        let skipped = (0..positions.len())
            .filter(|&i| join_s.is_none_or(|join| first + i as f64 * dt < join - 1e-9))
            .count();
        Ok(Answer::StreamChunk(ChunkReply {
            seq,
            motion_id: spliced.motion_id,
            tick: spliced.tick,
            // From the tick the chunk was taken up at to its first command.
            ticks_ahead: spliced.tick.saturating_sub(status.tick),
            lead_ticks: spliced.lead,
            join_s: join_s.map(|join| join - self.horizon_s),
            skipped_rows: skipped,
            resumed,
            end_s: self.times.back().map_or(0.0, |t| t - self.horizon_s),
        }))
    }

    /// Refuses a chunk for an ended stream, an old `seq` (`stale`, counted) or rows of the
    /// wrong width.
    fn check(
        &mut self,
        phase: &Phase,
        seq: u64,
        positions: &[Vec<f64>],
    ) -> Result<(), RequestError> {
        if let Phase::Ended(why) = phase {
            return Err(refused(format!(
                "the stream for {} has ended ({why}); send stream_open to start a new one",
                group_name(self.group.as_deref())
            )));
        }
        if let Some(last) = self.last_seq
            && seq <= last
        {
            self.counts.stale += 1;
            let what = if seq == last {
                "a duplicate"
            } else {
                "out of order"
            };
            return Err(RequestError::new(
                ErrorCode::Stale,
                format!(
                    "chunk {seq} is {what}: the last chunk was {last}; each chunk needs a higher seq"
                ),
            ));
        }
        let width = self.joints.len();
        if let Some((i, row)) = positions.iter().enumerate().find(|(_, r)| r.len() != width) {
            return Err(RequestError::new(
                ErrorCode::BadRequest,
                format!(
                    "stream_chunk: \"positions\" row {i} has {} values; the stream's joints are {} ({width})",
                    row.len(),
                    self.joints.join(", ")
                ),
            ));
        }
        Ok(())
    }

    /// The accepted rows with the chunk's (`positions`, the first at playout time `first`, `dt`
    /// apart) in: newest wins from its first row on; after starvation the path starts afresh.
    fn rows_with(
        &self,
        positions: &[Vec<f64>],
        first: f64,
        dt: f64,
        starved: bool,
    ) -> (Vec<f64>, Vec<Vec<f64>>) {
        let keep = if starved {
            0
        } else {
            self.times.partition_point(|&t| t < first - 1e-9)
        };
        let mut times: Vec<f64> = self.times.iter().take(keep).copied().collect();
        let mut rows: Vec<Vec<f64>> = self.rows.iter().take(keep).cloned().collect();
        for (i, row) in positions.iter().enumerate() {
            times.push(first + i as f64 * dt);
            rows.push(self.fill_row(row));
        }
        (times, rows)
    }

    /// Splices `times`/`rows` (a row period `dt`) into the slot a look-ahead from now: the piece
    /// taken, the stream time it reaches the rows and that of the splice tick; a chunk that
    /// cannot be spliced is `late` or refused with the reason (counted).
    fn splice(
        &mut self,
        session: &Session,
        seq: u64,
        times: &[f64],
        rows: &[Vec<f64>],
        dt: f64,
    ) -> Result<(Spliced, Option<f64>, f64), RequestError> {
        let rate = session.rate_hz();
        let mut planned = None;
        let mut failure = None;
        let open_tick = self.open_tick;
        let joints = &self.slot_joints;
        let spliced = session.splice(self.group.as_deref(), "stream", self.lead, &mut |join| {
            let splice_s = join.tick.saturating_sub(open_tick) as f64 / rate;
            let start = times
                .partition_point(|&t| t < splice_s)
                .saturating_sub(ROWS_BEFORE);
            let values: Vec<f64> = rows[start..].iter().flatten().copied().collect();
            match splice_stream(
                joints,
                &join.from,
                splice_s,
                &times[start..],
                &values,
                rate,
                join.recovering,
                // At least a row period: a chunk's difference from the path becomes a gentle
                // blend rather than a jerk spike (RMS jerk 3× lower in the benchmark).
                dt,
            ) {
                Ok(piece) => {
                    planned = Some((piece.join_s, splice_s));
                    Ok(session::Piece {
                        approach: piece.approach,
                        motion: piece.motion,
                        stream_tail: Some(piece.tail_tick),
                    })
                }
                Err(e) => {
                    let message = format!("chunk {seq}: {e}");
                    failure = Some(e);
                    Err(SessionError {
                        kind: ErrorKind::InvalidMotion,
                        message,
                    })
                }
            }
        });
        match spliced {
            Ok(s) => {
                let (join_s, splice_s) = planned.unwrap_or((None, 0.0));
                Ok((s, join_s, splice_s))
            }
            Err(err) => Err(match failure {
                Some(SpliceError::Late { .. }) => {
                    self.counts.late += 1;
                    RequestError::new(ErrorCode::Late, err.message)
                }
                _ => {
                    self.counts.refused += 1;
                    session_error(err)
                }
            }),
        }
    }

    /// Keeps what the piece `spliced` (from `splice_s`, stream time) was made of: the rows from
    /// a few before the splice on (the rows it has passed only shape the spline at its start).
    fn accepted(
        &mut self,
        session: &Session,
        spliced: Spliced,
        mut times: Vec<f64>,
        mut rows: Vec<Vec<f64>>,
        splice_s: f64,
    ) {
        let start = times
            .partition_point(|&t| t < splice_s)
            .saturating_sub(ROWS_BEFORE);
        self.times = times.drain(start..).collect();
        self.rows = rows.drain(start..).collect();
        self.piece = Some(spliced.motion_id);
        if !spliced.from_rest {
            self.lead = (spliced.lead - spliced.lead / 10).max(lead_ticks(session));
        }
        self.counts.accepted += 1;
    }

    /// A row of the stream's joints as one value per slot DOF.
    fn fill_row(&self, row: &[f64]) -> Vec<f64> {
        let mut out: Vec<f64> = self
            .fill
            .iter()
            .map(|f| match *f {
                Fill::Column(c) => row[c],
                Fill::Hold(p) => p,
                Fill::Mimic { .. } => 0.0,
            })
            .collect();
        for (i, f) in self.fill.iter().enumerate() {
            if let Fill::Mimic {
                leader,
                multiplier,
                offset,
            } = *f
            {
                out[i] = multiplier * out[leader] + offset;
            }
        }
        out
    }
}
