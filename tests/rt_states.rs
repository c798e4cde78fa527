//! The loop as a state machine, walked exhaustively (issue 21 item 3): from every phase of the
//! state table (`rt::table`) the loop reaches, every sequence of up to [`DEPTH`] inputs — every
//! command and event of the table — at a few timings, on the manual clock, against drives that
//! record what they receive. Checked on that stream:
//! - every setpoint each drive took is inside its limits as the drive sees consecutive setpoints
//!   (`trajectory::Envelope`, finite differences), compliant (teach-in) drives excepted;
//! - power is removed only at rest (the drives could hold their last setpoint from the next tick);
//! - "at rest" (`Status::moving` false) is reported only at rest;
//! - every command gets its acknowledgement, and every one acknowledged as done is honoured (a
//!   `disable` whatever follows, a `shutdown` ends the loop at rest, a playback's end is
//!   reported, an `enable`, `recover` or `clear-fault` takes unless something later undoes it);
//! - no panic, and everything settles within a bound (no hang).
//!
//! It prints the table's size, the start phases, the depth and timings, the sequences walked and
//! the worst share of each limit (`--nocapture`). One test per start phase, so they share the
//! machine's cores.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

use std::sync::{Arc, Mutex, MutexGuard};

use motiond::backend::{Backend, BackendError, FaultKind, Feedback, Readiness};
use motiond::estop::{SimInput, SimSwitch};
use motiond::motion::seq::{MultiValueSeq, Timing};
use motiond::robot::Limits;
use motiond::rt::table::{self, INPUTS, Input, PHASES, Phase};
use motiond::rt::{
    Ack, Command, Loop, LoopHandle, ManualClock, Outcome, Playback, Route, Scope, Settings, State,
    Status, Step,
};
use motiond::trajectory::{
    ColumnMap, DofLimits, Envelope, Interpolation, JointSet, Options, Setpoint, Stream, Trajectory,
    Usage, build_values,
};

const RATE: f64 = 25.0;
/// Every sequence of up to this many inputs (`MOTIOND_STATES_DEPTH` walks deeper: each input
/// more takes about 23 times as long).
const DEPTH: usize = 3;

fn depth() -> usize {
    std::env::var("MOTIOND_STATES_DEPTH")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(DEPTH)
}
/// Ticks between one input and the next: in the same tick, the next tick, mid-way through a stop.
const GAPS: [u64; 3] = [0, 1, 3];
/// Longest a run may take to settle after its last input (ticks): more is a hang.
const SETTLE_TICKS: u64 = 1500;
/// A drive no setpoint reached for this long (1 s, docs/src/loop.md) is left to its own watchdog:
/// the stop counts as over, and its stream restarts at rest where it was last reached.
const SILENT_TICKS: u64 = RATE as u64;

// ---------------------------------------------------------------------------------------------
// The drives: perfect followers that record what they took.

#[derive(Debug, Clone)]
enum Wire {
    /// Setpoints and which drives took them.
    Sent(Vec<Setpoint>, Vec<bool>),
    Enable,
    Disable,
    /// Teach-in on (which DOFs went compliant) or a compliant DOF following again.
    Compliant(Vec<bool>),
    Stiff(Vec<bool>),
}

#[derive(Debug, Default)]
struct Drives {
    enabled: bool,
    enable_calls: u32,
    measured: Vec<f64>,
    compliant: Vec<bool>,
    /// Polls of `compliant(false)` still to answer `Pending`.
    stiffening: u32,
    /// Where a hand holds each DOF while it is compliant.
    hand: Vec<f64>,
    /// The next write or hold fails (and which drives took it), and the next read; for one tick.
    fail: Option<BackendError>,
    /// Writes and holds the queue refuses whole (nothing taken), as a full transmit queue does.
    stuck: u32,
    fail_read: Option<BackendError>,
    /// What of each burst reaches the drives.
    bus: Bus,
    /// Bursts sent while the bus is [`Bus::Partial`].
    bursts: usize,
    taken: Vec<bool>,
    log: Vec<Wire>,
}

/// What the bus takes, an event beside the table's inputs: to the loop a bus that takes nothing
/// is a fault (`queue_full`) every tick it lasts, and a bus that takes frames again is nothing at
/// all — the drives just get what it sends from then on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Bus {
    /// Everything reaches the drives.
    #[default]
    Drains,
    /// Nothing reaches any drive, nor does any drive report (a transmit queue that stopped
    /// draining): no setpoint, enable, disable or stiffening gets through.
    Silent,
    /// DOF 1's drive (its own bus) takes and reports nothing; DOF 0's takes everything.
    OneSilent,
    /// Partial bursts: in turn only DOF 0's drive takes the burst, neither does, only DOF 1's
    /// does (a queue with room for a frame now and then); the reports come.
    Partial,
}

impl Bus {
    /// Which drives the `n`th burst on this bus reaches.
    fn reaches(self, n: usize) -> [bool; 2] {
        match self {
            Bus::Drains => [true, true],
            Bus::Silent => [false, false],
            Bus::OneSilent => [true, false],
            Bus::Partial => [[true, false], [false, false], [false, true]][n % 3],
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Bus::Drains => "the bus drains",
            Bus::Silent => "the bus takes nothing",
            Bus::OneSilent => "DOF 1's bus takes nothing",
            Bus::Partial => "the bus takes partial bursts",
        }
    }
}

struct TestDrives(Arc<Mutex<Drives>>);

fn lock(d: &Mutex<Drives>) -> MutexGuard<'_, Drives> {
    d.lock().unwrap_or_else(|e| e.into_inner())
}

impl TestDrives {
    fn send(&mut self, setpoints: &[Setpoint]) -> Result<(), BackendError> {
        let mut d = lock(&self.0);
        if !d.enabled {
            return Err(BackendError::new(FaultKind::DriveFault));
        }
        let (took, result) = match d.fail.take() {
            // DOF 0's drive takes it, DOF 1's does not.
            Some(e) => (vec![true, false], Err(e)),
            None if d.stuck > 0 => {
                d.stuck -= 1;
                (
                    vec![false, false],
                    Err(BackendError::new(FaultKind::QueueFull)),
                )
            }
            None => {
                let n = d.bursts;
                d.bursts += 1;
                let reached = d.bus.reaches(n);
                if reached.iter().all(|&r| r) {
                    (vec![true, true], Ok(()))
                } else {
                    (
                        reached.to_vec(),
                        Err(BackendError::new(FaultKind::QueueFull)),
                    )
                }
            }
        };
        for (j, sp) in setpoints.iter().enumerate() {
            if took[j] && !d.compliant[j] {
                d.measured[j] = sp.position;
            }
        }
        d.taken = took.clone();
        d.log.push(Wire::Sent(setpoints.to_vec(), took));
        result
    }
}

impl Backend for TestDrives {
    fn enable(&mut self) -> Result<Readiness, BackendError> {
        let mut d = lock(&self.0);
        if d.bus != Bus::Drains {
            // No drive answers all the enable steps: the loop's enable timeout ends it.
            return Ok(Readiness::Pending);
        }
        d.log.push(Wire::Enable);
        d.enable_calls += 1;
        if d.enable_calls < 3 {
            return Ok(Readiness::Pending);
        }
        d.enabled = true;
        Ok(Readiness::Ready)
    }

    fn disable(&mut self) -> Result<(), BackendError> {
        let mut d = lock(&self.0);
        if d.bus != Bus::Drains {
            // Not taken: the drives stay up, and the loop sends it again.
            return Err(BackendError::new(FaultKind::QueueFull));
        }
        d.log.push(Wire::Disable);
        d.enabled = false;
        d.enable_calls = 0;
        d.compliant.iter_mut().for_each(|c| *c = false);
        Ok(())
    }

    fn write(&mut self, _tick: u64, setpoints: &[Setpoint]) -> Result<(), BackendError> {
        self.send(setpoints)
    }

    fn hold(&mut self, _tick: u64, setpoints: &[Setpoint]) -> Result<(), BackendError> {
        if !lock(&self.0).enabled {
            return Ok(());
        }
        self.send(setpoints)
    }

    fn taken(&self, dofs: &mut [bool]) {
        dofs.copy_from_slice(&lock(&self.0).taken);
    }

    fn read(&mut self, feedback: &mut [Feedback]) -> Result<(), BackendError> {
        let mut d = lock(&self.0);
        if let Some(e) = d.fail_read.take() {
            return Err(e);
        }
        let reports = match d.bus {
            Bus::Silent => [false, false],
            Bus::OneSilent => [true, false],
            Bus::Drains | Bus::Partial => [true, true],
        };
        for (j, f) in feedback.iter_mut().enumerate() {
            if !reports[j] {
                f.valid = false;
                continue;
            }
            if d.compliant[j] {
                d.measured[j] = d.hand[j];
            }
            *f = Feedback {
                position: d.measured[j],
                velocity: 0.0,
                effort: 0.0,
                status: 0,
                error: 0,
                valid: true,
            };
        }
        Ok(())
    }

    fn compliant(&mut self, on: bool, dofs: &mut [bool]) -> Result<Readiness, BackendError> {
        let mut d = lock(&self.0);
        // DOF 0's drive (the one that goes compliant) must hear it.
        if !d.bus.reaches(d.bursts)[0] {
            if !on {
                dofs.iter_mut().for_each(|x| *x = false);
            }
            return Err(BackendError::new(FaultKind::QueueFull));
        }
        if on {
            // DOF 0 goes compliant; DOF 1 holds (a protocol without a torque-off mode).
            d.compliant = vec![true, false];
            d.hand[0] = d.measured[0];
            dofs.copy_from_slice(&d.compliant);
            d.log.push(Wire::Compliant(vec![true, false]));
            // Stiffening takes a few polls, as a CiA 402 or ODrive drive's does.
            d.stiffening = 3;
            return Ok(Readiness::Ready);
        }
        dofs.iter_mut().for_each(|x| *x = false);
        if !d.compliant.iter().any(|&c| c) {
            return Ok(Readiness::Ready);
        }
        if d.stiffening > 0 {
            d.stiffening -= 1;
            return Ok(Readiness::Pending);
        }
        let stiff = std::mem::replace(&mut d.compliant, vec![false, false]);
        d.log.push(Wire::Stiff(stiff));
        Ok(Readiness::Ready)
    }
}

// ---------------------------------------------------------------------------------------------
// The robot and its motions.

fn joints() -> JointSet {
    let mut js = JointSet::uniform(
        2,
        DofLimits {
            position: Limits::symmetric(1.0),
            velocity: Limits::symmetric(2.0),
            acceleration: Limits::symmetric(8.0),
            effort: Limits::UNBOUNDED,
        },
    );
    js.dofs[1].limits.position = Limits::symmetric(2.0);
    // A quick stop gentler than the acceleration limit (issue 21 F3).
    js.dofs[0].quick_stop_deceleration = Some(4.0);
    js
}

/// A smooth move through `(a, b)` positions sampled at 50 Hz over `secs`, proved.
fn motion(js: &JointSet, secs: f64, f: impl Fn(f64) -> (f64, f64)) -> Trajectory {
    let rows = (secs * 50.0).round() as usize + 1;
    let values = (0..rows)
        .flat_map(|i| {
            let (a, b) = f(i as f64 / 50.0);
            [a, b]
        })
        .collect();
    let seq = MultiValueSeq {
        num_parts: 2,
        timing: Timing::Fixed { frame_rate: 50.0 },
        values,
    };
    let map = ColumnMap::in_dof_order(js, 2).unwrap();
    let options = Options {
        rate_hz: RATE,
        interpolation: Interpolation::Cubic,
        ..Options::default()
    };
    build_values(js, &seq, &map, &options).unwrap().trajectory
}

struct World {
    js: JointSet,
    /// Per DOF, the one-DOF set its stream is checked against.
    single: Vec<JointSet>,
    /// Towards DOF 0's limit at speed, and back.
    swing: Arc<Trajectory>,
    /// What a replacement blends into.
    other: Arc<Trajectory>,
}

impl World {
    fn new() -> World {
        let js = joints();
        let cos = |t: f64, secs: f64| 0.5 * (1.0 - (std::f64::consts::TAU * t / secs).cos());
        let swing = motion(&js, 2.4, |t| (0.8 * cos(t, 2.4), -1.2 * cos(t, 2.4)));
        let other = motion(&js, 1.0, |t| (-0.4 * cos(t, 2.0), 0.6 * cos(t, 2.0)));
        let single = js
            .dofs
            .iter()
            .map(|d| JointSet {
                dofs: vec![d.clone()],
            })
            .collect();
        World {
            js,
            single,
            swing: Arc::new(swing),
            other: Arc::new(other),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The checks on what the drives took.

#[derive(Default, Clone, Copy)]
struct Worst {
    usage: Usage,
    position: f64,
}

impl Worst {
    fn max(self, o: Worst) -> Worst {
        Worst {
            usage: self.usage.max(o.usage),
            position: self.position.max(o.position),
        }
    }
}

/// Per DOF, the stream its drive took since it last came up (or stiffened).
struct DofStream {
    envelope: Envelope,
    prev: Option<Setpoint>,
    last: Option<Setpoint>,
}

struct Checker {
    streams: Vec<Option<DofStream>>,
    compliant: Vec<bool>,
    /// The loop tick of the events taken now, and per DOF the tick its drive last took a
    /// setpoint.
    now: u64,
    took_at: Vec<u64>,
    /// Per DOF, where its drive was when the loop reported the stop over: until a command that
    /// starts motion, every setpoint it takes holds there.
    frozen: Vec<Option<f64>>,
    worst: Worst,
}

impl Checker {
    fn new(n: usize) -> Checker {
        Checker {
            streams: (0..n).map(|_| None).collect(),
            compliant: vec![false; n],
            now: 0,
            took_at: vec![0; n],
            frozen: vec![None; n],
            worst: Worst::default(),
        }
    }

    /// DOF `j`'s drive has taken nothing for [`SILENT_TICKS`] by now (left to its watchdog).
    fn silent(&self, j: usize) -> bool {
        self.now.saturating_sub(self.took_at[j]) >= SILENT_TICKS
    }

    /// The loop reported the stop over: from now on the drives hold where they are.
    fn freeze(&mut self) {
        for (j, s) in self.streams.iter().enumerate() {
            if let (Some(DofStream { last: Some(l), .. }), false) = (s, self.compliant[j]) {
                self.frozen[j].get_or_insert(l.position);
            }
        }
    }

    /// A command that may start motion.
    fn thaw(&mut self) {
        self.frozen.iter_mut().for_each(|f| *f = None);
    }

    /// The drives of every active stream could hold their last setpoint from the next tick
    /// (a drive left to its watchdog excepted).
    fn at_rest(&self, w: &World) -> Result<(), String> {
        for (j, s) in self.streams.iter().enumerate() {
            let Some(s) = s else { continue };
            if self.silent(j) {
                continue;
            }
            let (Some(prev), Some(last)) = (s.prev, s.last) else {
                continue;
            };
            let hold = Setpoint {
                position: last.position,
                velocity: 0.0,
                acceleration: 0.0,
            };
            let stream = Stream {
                dt: 1.0 / RATE,
                history: 2,
                scale: 2.0,
                recovering: false,
            };
            if let Err((m, v, _)) =
                stream.judge(&w.js.dofs[j].limits, [&prev, &last, &hold], |_, _, _| {})
            {
                return Err(format!(
                    "DOF {j} is not at rest ({m} {v} to hold {last:?} after {prev:?})"
                ));
            }
        }
        Ok(())
    }

    fn end_streams(&mut self) {
        for s in &mut self.streams {
            if let Some(s) = s.take() {
                let u = s.envelope.usage();
                self.worst.usage = self.worst.usage.max(u);
            }
        }
    }

    fn take(&mut self, w: &World, event: &Wire) -> Result<(), String> {
        match event {
            Wire::Enable => self.end_streams(),
            Wire::Disable => {
                self.at_rest(w)
                    .map_err(|e| format!("power removed while moving: {e}"))?;
                self.end_streams();
                self.compliant.iter_mut().for_each(|c| *c = false);
            }
            Wire::Compliant(dofs) => {
                for (j, &c) in dofs.iter().enumerate() {
                    if c {
                        self.compliant[j] = true;
                        if let Some(s) = self.streams[j].take() {
                            self.worst.usage = self.worst.usage.max(s.envelope.usage());
                        }
                    }
                }
            }
            Wire::Stiff(dofs) => {
                for (j, &c) in dofs.iter().enumerate() {
                    if c {
                        self.compliant[j] = false;
                        // It holds where the hand left it.
                        self.frozen[j] = None;
                    }
                }
            }
            Wire::Sent(setpoints, took) => {
                for (j, sp) in setpoints.iter().enumerate() {
                    if !took[j] || self.compliant[j] {
                        continue;
                    }
                    if let Some(at) = self.frozen[j]
                        && (sp.position != at || sp.velocity != 0.0)
                    {
                        return Err(format!(
                            "DOF {j} took {sp:?} after the stop was reported over at {at}"
                        ));
                    }
                    // Left to its watchdog, the drive stopped where it was last reached: its
                    // stream restarts there, at rest.
                    if self.silent(j)
                        && let Some(old) = self.streams[j].take_if(|s| s.last.is_some())
                        && let Some(l) = old.last
                    {
                        self.worst.usage = self.worst.usage.max(old.envelope.usage());
                        let mut envelope = Envelope::new(&w.single[j], RATE);
                        let rest = Setpoint {
                            position: l.position,
                            velocity: 0.0,
                            acceleration: 0.0,
                        };
                        for _ in 0..2 {
                            envelope
                                .push(&[rest])
                                .map_err(|b| format!("DOF {j}: {b}"))?;
                        }
                        self.streams[j] = Some(DofStream {
                            envelope,
                            prev: Some(rest),
                            last: Some(rest),
                        });
                    }
                    self.took_at[j] = self.now;
                    let s = self.streams[j].get_or_insert_with(|| DofStream {
                        envelope: Envelope::new(&w.single[j], RATE),
                        prev: None,
                        last: None,
                    });
                    s.envelope
                        .push(std::slice::from_ref(sp))
                        .map_err(|b| format!("DOF {j} took {sp:?}: {b}"))?;
                    s.prev = s.last;
                    s.last = Some(*sp);
                    let limit = w.js.dofs[j].limits.position.upper;
                    self.worst.position = self.worst.position.max(sp.position.abs() / limit);
                }
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// One run: a start phase's prefix, then a sequence of inputs at a timing.

struct Entry {
    input: Input,
    ack: Option<Ack>,
    id: u32,
    tick: u64,
}

struct Run<'w> {
    w: &'w World,
    lp: Loop<ManualClock>,
    handle: LoopHandle,
    drives: Arc<Mutex<Drives>>,
    switch: SimSwitch,
    checker: Checker,
    ended: bool,
    stall: bool,
    next_id: u32,
    /// The playback last started (its route, for a replacement's prediction).
    route: Option<(u32, Route)>,
    /// Commands sent and not yet acknowledged (sequence number, index in `history`).
    unacked: Vec<(u64, usize)>,
    /// Every input, in order, with its acknowledgement (commands), the playback's id and the
    /// tick it reached the loop.
    history: Vec<Entry>,
    ticks: u64,
    /// When (`ticks`) a silent bus drains again.
    drain_at: Option<u64>,
    outcomes: Vec<(u32, Outcome)>,
    hand_t: f64,
}

impl<'w> Run<'w> {
    fn new(w: &'w World) -> Run<'w> {
        let n = w.js.len();
        let drives = Arc::new(Mutex::new(Drives {
            measured: vec![0.0; n],
            compliant: vec![false; n],
            hand: vec![0.0; n],
            taken: vec![true; n],
            ..Drives::default()
        }));
        let (input, switch) = SimInput::new(0);
        let settings = Settings {
            rate_hz: RATE,
            estop_drive: true,
            max_late_s: Some(0.1),
            ..Settings::default()
        };
        let (lp, handle) = Loop::new(
            &settings,
            Box::new(TestDrives(drives.clone())),
            Some(Box::new(input)),
            &w.js,
            ManualClock::new(0),
        )
        .unwrap();
        Run {
            w,
            lp,
            handle,
            drives,
            switch,
            checker: Checker::new(n),
            ended: false,
            stall: false,
            next_id: 1,
            route: None,
            unacked: Vec::new(),
            history: Vec::new(),
            ticks: 0,
            drain_at: None,
            outcomes: Vec::new(),
            hand_t: 0.0,
        }
    }

    fn status(&self) -> Status {
        self.handle.peek()
    }

    fn step(&mut self) -> Result<(), String> {
        if self.ended {
            return Ok(());
        }
        {
            // A hand sweeps DOF 0 at 1.5 times its velocity limit while it is compliant.
            let mut d = lock(&self.drives);
            self.hand_t += 1.0 / RATE;
            d.hand[0] = 0.6 * (self.hand_t * 5.0).sin();
        }
        if self.drain_at == Some(self.ticks) {
            self.unmute();
        }
        if std::mem::take(&mut self.stall) {
            self.lp.clock().advance(300_000_000);
        }
        let step = self.lp.step();
        self.ticks += 1;
        self.checker.now = self.status().tick;
        let log = {
            let mut d = lock(&self.drives);
            d.fail = None;
            d.fail_read = None;
            std::mem::take(&mut d.log)
        };
        for e in &log {
            self.checker.take(self.w, e)?;
        }
        for (seq, i) in std::mem::take(&mut self.unacked) {
            match self.handle.ack(seq) {
                Some(a) => self.history[i].ack = Some(a),
                None => {
                    let input = self.history[i].input.as_str();
                    return Err(format!("{input} was never acknowledged"));
                }
            }
        }
        self.outcomes.extend(self.handle.outcomes());
        let s = self.status();
        if !s.moving && !matches!(s.state, State::Recording | State::Disabled) {
            self.checker
                .at_rest(self.w)
                .map_err(|e| format!("reported at rest ({:?}) but {e}", s.phase))?;
        }
        if !s.moving
            && matches!(
                s.phase,
                Phase::Holding | Phase::Fault | Phase::EStop | Phase::EStopReleased
            )
        {
            self.checker.freeze();
        }
        if step == Step::Ended {
            self.ended = true;
            self.checker
                .at_rest(self.w)
                .map_err(|e| format!("the loop ended moving: {e}"))?;
        }
        Ok(())
    }

    fn steps(&mut self, n: u64) -> Result<(), String> {
        for _ in 0..n {
            self.step()?;
        }
        Ok(())
    }

    fn command(&mut self, input: Input, command: Command, id: u32) {
        self.history.push(Entry {
            input,
            ack: None,
            id,
            tick: self.ticks,
        });
        // An error (the loop has ended) is the caller's refusal.
        if let Ok(seq) = self.handle.send(command) {
            self.unacked.push((seq, self.history.len() - 1));
        }
    }

    fn play(&mut self) {
        let id = self.next_id;
        self.next_id += 1;
        let from = self.status().commanded;
        let motion = self.w.swing.clone();
        let approach =
            motiond::trajectory::approach(&self.w.js, &from, motion.first_setpoints(), RATE)
                .unwrap_or_else(|_| Trajectory::hold(&from, RATE));
        let pb = Playback {
            route: Route {
                approach: Arc::new(approach),
                motion,
            },
            ..Playback::new(
                id,
                Trajectory::hold(&from, RATE),
                Trajectory::hold(&from, RATE),
            )
        };
        self.route = Some((id, pb.route.clone()));
        self.command(Input::Play, Command::Play(Box::new(pb)), id);
    }

    fn replace(&mut self) {
        let id = self.next_id;
        self.next_id += 1;
        let s = self.status();
        let slot = s.slots[0];
        let lead = 4;
        let from = self
            .route
            .as_ref()
            .filter(|(rid, _)| Some(*rid) == slot.motion_id)
            .zip(slot.path)
            .and_then(|((_, route), path)| route.predict(path, s.tick, lead, RATE));
        let blend = from.and_then(|from| {
            motiond::trajectory::blend(&self.w.js, &from, &self.w.other, RATE, false).ok()
        });
        let here = Trajectory::hold(&s.commanded, RATE);
        let pb = match blend {
            Some(b) => Playback::new(id, b, (*self.w.other).clone()),
            None => Playback::new(id, here.clone(), here),
        };
        self.route = Some((id, pb.route.clone()));
        let replace = Command::Replace {
            playback: Box::new(pb),
            at_tick: slot.ran.saturating_add(lead),
        };
        self.command(Input::Replace, replace, id);
    }

    fn fail(&mut self, kind: FaultKind) {
        let e = BackendError {
            kind,
            dof: Some(0),
            code: 7,
        };
        let mut d = lock(&self.drives);
        d.fail = Some(e);
        d.fail_read = Some(e);
    }

    fn apply(&mut self, input: Input) {
        let all = Scope::All;
        if matches!(
            input,
            Input::Play
                | Input::Replace
                | Input::Resume
                | Input::Enable
                | Input::Recover
                | Input::Record
                | Input::RecordStop
        ) {
            self.checker.thaw();
        }
        match input {
            Input::Play => self.play(),
            Input::Replace => self.replace(),
            Input::Pause => self.command(input, Command::Pause(all), 0),
            Input::Resume => self.command(input, Command::Resume(all), 0),
            Input::Stop => self.command(input, Command::Stop(all), 0),
            Input::QuickStop => self.command(input, Command::QuickStop(all), 0),
            Input::Disable => self.command(input, Command::Disable, 0),
            Input::Enable => self.command(input, Command::Enable, 0),
            Input::Record => self.command(input, Command::Record(true), 0),
            Input::RecordStop => self.command(input, Command::Record(false), 0),
            Input::ClearFault => self.command(input, Command::ClearFault, 0),
            Input::Recover => self.command(input, Command::Recover, 0),
            Input::Shutdown => self.command(input, Command::Shutdown, 0),
            Input::SecondSignal => self.command(input, Command::ShutdownNow, 0),
            Input::EStopPress => self.switch.press(),
            Input::EStopRelease => self.switch.release(),
            Input::EStopLost => self.switch.lose_line(),
            Input::Fault => self.fail(FaultKind::DriveFault),
            Input::DriveEStop => self.fail(FaultKind::DriveEStop),
            Input::Stall => self.stall = true,
        }
        if !input.is_command() {
            self.history.push(Entry {
                input,
                ack: None,
                id: 0,
                tick: self.ticks,
            });
        }
    }

    /// The bus stops reaching drives as `silence` says (to the loop, a fault).
    fn mute(&mut self, silence: Silence) {
        {
            let mut d = lock(&self.drives);
            d.bus = silence.bus;
            d.bursts = 0;
        }
        self.drain_at = silence.ticks.map(|t| self.ticks + t);
        self.history.push(Entry {
            input: Input::Fault,
            ack: None,
            id: 0,
            tick: self.ticks,
        });
    }

    /// The bus drains. The silence was a fault to the loop as long as it lasted (an enable
    /// meanwhile times out): it counts as one until now.
    fn unmute(&mut self) {
        self.drain_at = None;
        lock(&self.drives).bus = Bus::Drains;
        self.history.push(Entry {
            input: Input::Fault,
            ack: None,
            id: 0,
            tick: self.ticks,
        });
    }

    /// Once settled with a silent bus: the silence runs its length, the bus drains, and the
    /// loop settles again with what the drives then take.
    fn drain(&mut self) -> Result<(), String> {
        if let Some(at) = self.drain_at {
            while self.ticks < at && !self.ended {
                self.step()?;
            }
        }
        if lock(&self.drives).bus == Bus::Drains {
            return Ok(());
        }
        self.unmute();
        self.steps(SILENT_TICKS)?;
        self.settle()
    }

    /// Steps until nothing is left to happen: the loop ended, or it rests in a phase only an
    /// input leaves (a paused playback counts).
    fn settle(&mut self) -> Result<(), String> {
        // A replacement's switch comes a few ticks after it was asked for.
        if self.history.iter().any(|e| e.input == Input::Replace) {
            self.steps(5)?;
        }
        for _ in 0..SETTLE_TICKS {
            if self.ended {
                return Ok(());
            }
            let s = self.status();
            // A playback in flight plays a proved motion: what it does next is no transition.
            let resting = matches!(
                s.phase,
                Phase::Disabled
                    | Phase::Holding
                    | Phase::Moving
                    | Phase::Recording
                    | Phase::Fault
                    | Phase::EStop
                    | Phase::EStopReleased
            );
            if resting && self.unacked.is_empty() {
                return Ok(());
            }
            self.step()?;
        }
        Err(format!(
            "did not settle within {SETTLE_TICKS} ticks: {:?}",
            self.status().phase
        ))
    }

    /// Every command acknowledged as done was honoured, unless a later input undid it.
    fn honoured(&self) -> Result<(), String> {
        let s = self.status();
        // What reached the loop in the same tick or after (within a tick the loop reads the
        // E-stop first, then the commands, then the drives).
        let later = |i: usize, inputs: &[Input]| {
            let at = self.history[i].tick;
            self.history.iter().enumerate().any(|(k, e)| {
                k != i
                    && e.tick >= at
                    && inputs.contains(&e.input)
                    && (!e.input.is_command() || e.ack == Some(Ack::Done))
            })
        };
        let stops_it = [
            Input::EStopPress,
            Input::EStopLost,
            Input::Fault,
            Input::DriveEStop,
            Input::Stall,
        ];
        for (i, Entry { input, ack, id, .. }) in self.history.iter().enumerate() {
            if *ack != Some(Ack::Done) {
                continue;
            }
            let ok = match input {
                Input::Disable => {
                    later(i, &[Input::Enable, Input::Recover])
                        || self.ended
                        || matches!(s.phase, Phase::Disabled)
                        || (matches!(s.phase, Phase::Fault | Phase::EStop | Phase::EStopReleased)
                            && !lock(&self.drives).enabled)
                }
                Input::Shutdown | Input::SecondSignal => self.ended,
                Input::Enable | Input::Recover => {
                    later(i, &stops_it)
                        || later(i, &[Input::Disable, Input::Shutdown, Input::SecondSignal])
                        || self.ended
                        || !matches!(
                            s.phase,
                            Phase::Disabled | Phase::Fault | Phase::EStop | Phase::EStopReleased
                        )
                }
                Input::ClearFault => {
                    later(i, &stops_it)
                        || self.ended
                        || !matches!(s.phase, Phase::Fault | Phase::EStop | Phase::EStopReleased)
                }
                Input::Play | Input::Replace => {
                    self.outcomes.iter().any(|(o, _)| o == id) || s.slots[0].motion_id == Some(*id)
                }
                _ => true,
            };
            if !ok {
                return Err(format!(
                    "{} was acknowledged but not honoured (ends {:?}, state {:?})",
                    input.as_str(),
                    s.phase,
                    s.state
                ));
            }
        }
        // Nothing acknowledged is dropped: every playback that left has an outcome.
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Start phases and the walk.

/// The start phases: a name, the phase it is, the inputs that reach it (each followed by the
/// ticks to let pass).
/// Inputs (or none), each followed by the ticks to let pass.
type Script = Vec<(Option<Input>, u64)>;

fn starts() -> Vec<(&'static str, Phase, Script)> {
    use Input as I;
    let up = vec![(Some(I::Enable), 1), (None, 5)];
    let with = |base: &[(Option<Input>, u64)], more: &[(Option<Input>, u64)]| {
        let mut v = base.to_vec();
        v.extend_from_slice(more);
        v
    };
    // 0.5 s into the swing: moving fast towards DOF 0's limit.
    let moving = with(&up, &[(Some(I::Play), 1), (None, 12)]);
    let recording = with(&up, &[(Some(I::Record), 1), (None, 8)]);
    vec![
        ("disabled", Phase::Disabled, vec![]),
        ("enabling", Phase::Enabling, vec![(Some(I::Enable), 1)]),
        ("holding", Phase::Holding, up.clone()),
        ("moving", Phase::Moving, moving.clone()),
        (
            "moving, paused",
            Phase::Moving,
            with(&moving, &[(Some(I::Pause), 20)]),
        ),
        (
            "stopping",
            Phase::Stopping,
            with(&moving, &[(Some(I::Stop), 3)]),
        ),
        (
            "disabling",
            Phase::Disabling,
            with(&moving, &[(Some(I::Disable), 3)]),
        ),
        (
            "ending",
            Phase::Ending,
            with(&moving, &[(Some(I::Shutdown), 3)]),
        ),
        ("recording", Phase::Recording, recording.clone()),
        (
            "fault, stopping",
            Phase::FaultStopping,
            with(&moving, &[(Some(I::Fault), 2)]),
        ),
        (
            "fault, stopping in teach-in",
            Phase::FaultStopping,
            with(&recording, &[(Some(I::Fault), 1)]),
        ),
        (
            "fault",
            Phase::Fault,
            with(&moving, &[(Some(I::Fault), 20)]),
        ),
        (
            "E-stop, stopping",
            Phase::EStopStopping,
            with(&moving, &[(Some(I::EStopPress), 2)]),
        ),
        (
            "E-stop released, stopping",
            Phase::EStopStoppingReleased,
            with(
                &moving,
                &[(Some(I::EStopPress), 2), (Some(I::EStopRelease), 1)],
            ),
        ),
        (
            "E-stop",
            Phase::EStop,
            with(&moving, &[(Some(I::EStopPress), 20)]),
        ),
        (
            "E-stop released",
            Phase::EStopReleased,
            with(
                &moving,
                &[(Some(I::EStopPress), 20), (Some(I::EStopRelease), 1)],
            ),
        ),
    ]
}

/// A silence a run begins with: which drives the bus stops reaching, and for how many ticks
/// (`None`: until the run has settled).
#[derive(Debug, Clone, Copy)]
struct Silence {
    bus: Bus,
    ticks: Option<u64>,
}

/// One run: the start's prefix, then `sequence` with `gap` ticks between inputs, then settling.
fn run(
    w: &World,
    prefix: &[(Option<Input>, u64)],
    phase: Phase,
    sequence: &[Input],
    gap: u64,
) -> Result<Worst, String> {
    run_silent(w, prefix, phase, None, sequence, gap)
}

/// [`run`], the bus silent as `silence` says from the start of `sequence` (drained once the
/// run has settled, and settled again).
fn run_silent(
    w: &World,
    prefix: &[(Option<Input>, u64)],
    phase: Phase,
    silence: Option<Silence>,
    sequence: &[Input],
    gap: u64,
) -> Result<Worst, String> {
    let mut r = Run::new(w);
    for &(input, ticks) in prefix {
        if let Some(i) = input {
            r.apply(i);
        }
        r.steps(ticks)?;
    }
    let at = r.status().phase;
    if at != phase {
        return Err(format!("the prefix reached {at:?}, not {phase:?}"));
    }
    r.history.clear();
    r.outcomes.clear();
    if let Some(silence) = silence {
        r.mute(silence);
    }
    for (n, &input) in sequence.iter().enumerate() {
        r.apply(input);
        if gap > 0 || n + 1 == sequence.len() {
            r.steps(gap.max(1))?;
        }
    }
    r.settle()?;
    r.drain()?;
    r.honoured()?;
    r.checker.end_streams();
    Ok(r.checker.worst)
}

/// Walks every sequence up to [`DEPTH`] from one start phase at every timing.
fn walk(start: usize) {
    let w = World::new();
    let (name, phase, prefix) = starts().swap_remove(start);
    let mut worst = Worst::default();
    // Per measure, the sequence that came closest to its limit (first of equals).
    let mut closest: [String; 5] = Default::default();
    let mut walked = 0u64;
    let depth = depth();
    let mut sequence = Vec::with_capacity(depth);
    fn each(depth: usize, sequence: &mut Vec<Input>, f: &mut dyn FnMut(&[Input])) {
        if !sequence.is_empty() {
            f(sequence);
        }
        if depth == 0 {
            return;
        }
        for i in INPUTS {
            sequence.push(i);
            each(depth - 1, sequence, f);
            sequence.pop();
        }
    }
    each(depth, &mut sequence, &mut |seq| {
        for gap in GAPS {
            // Sequences of one input have no gap to vary.
            if seq.len() == 1 && gap != GAPS[0] {
                continue;
            }
            match run(&w, &prefix, phase, seq, gap) {
                Ok(x) => {
                    let shares = |w: &Worst| {
                        [
                            w.position,
                            w.usage.step_velocity,
                            w.usage.step_acceleration,
                            w.usage.velocity,
                            w.usage.velocity_step,
                        ]
                    };
                    let (before, now) = (shares(&worst), shares(&x));
                    for (k, c) in closest.iter_mut().enumerate() {
                        if now[k] > before[k] {
                            let names: Vec<&str> = seq.iter().map(|i| i.as_str()).collect();
                            *c = format!("{names:?} {gap} ticks apart");
                        }
                    }
                    worst = worst.max(x);
                }
                Err(e) => {
                    let names: Vec<&str> = seq.iter().map(|i| i.as_str()).collect();
                    panic!("from {name}, {names:?} {gap} ticks apart: {e}");
                }
            }
            walked += 1;
        }
    });
    println!(
        "state table {}×{} ({} pairs); from {name} ({:?}): {walked} sequences of up to {depth} \
         inputs at gaps {GAPS:?} ticks; worst share of the limit: position {:.4} ({}), \
         finite-difference velocity {:.4} ({}), finite-difference acceleration {:.4} ({}), \
         velocity field {:.4} ({}), velocity field step {:.4} ({})",
        PHASES.len(),
        INPUTS.len(),
        PHASES.len() * INPUTS.len(),
        phase,
        worst.position,
        closest[0],
        worst.usage.step_velocity,
        closest[1],
        worst.usage.step_acceleration,
        closest[2],
        worst.usage.velocity,
        closest[3],
        worst.usage.velocity_step,
        closest[4],
    );
}

/// Every phase of the table is among the start phases (but the end, where nothing more
/// happens: every sequence with a shutdown reaches it).
#[test]
fn every_phase_of_the_table_is_walked_from() {
    let covered: Vec<Phase> = starts().iter().map(|s| s.1).collect();
    for p in PHASES {
        assert!(
            p == Phase::Ended || covered.contains(&p),
            "{p:?} is not a start phase"
        );
    }
    println!("{}", table::markdown());
}

macro_rules! walks {
    ($($name:ident: $i:expr,)*) => {$(
        #[test]
        fn $name() {
            walk($i);
        }
    )*};
}

walks! {
    from_disabled: 0,
    from_enabling: 1,
    from_holding: 2,
    from_moving: 3,
    from_paused: 4,
    from_stopping: 5,
    from_disabling: 6,
    from_ending: 7,
    from_recording: 8,
    from_a_fault_stopping: 9,
    from_a_fault_stopping_in_teach_in: 10,
    from_a_fault: 11,
    from_the_estop_stopping: 12,
    from_the_estop_released_stopping: 13,
    from_the_estop: 14,
    from_the_estop_released: 15,
}

// ---------------------------------------------------------------------------------------------
// Bus silences: from every start phase the bus stops reaching the drives (all of them, one of
// them, or in partial bursts) for below, exactly and above the loop's silence (1 s), or until
// everything has settled; meanwhile every sequence of inputs (up to `depth - 1` for the whole
// bus's silence that outlasts them, `depth - 2` for the others), then the bus drains. The checks are the walk's
// (`run`), and: once the loop reports a stop over, nothing a drive takes moves it until a
// command that starts motion; a drive left to its watchdog restarts at rest where it was last
// reached (`Checker`).

/// The silences' lengths in ticks: below, at and above [`SILENT_TICKS`], and until settled.
const SILENCES: [Option<u64>; 6] = [
    Some(1),
    Some(SILENT_TICKS - 1),
    Some(SILENT_TICKS),
    Some(SILENT_TICKS + 1),
    Some(3 * SILENT_TICKS),
    None,
];

fn silences(start: usize) {
    let w = World::new();
    let (name, phase, prefix) = starts().swap_remove(start);
    let mut worst = Worst::default();
    let mut walked = 0u64;
    let depth = depth();
    for bus in [Bus::Silent, Bus::OneSilent, Bus::Partial] {
        for ticks in SILENCES {
            let silence = Silence { bus, ticks };
            // Two inputs during the whole bus's silence that outlasts them; the other silences
            // take one (keeping the test phase's minutes: `MOTIOND_STATES_DEPTH` walks deeper).
            let during = if ticks.is_none() && bus == Bus::Silent {
                depth.saturating_sub(1)
            } else {
                depth.saturating_sub(2)
            };
            let mut sequences: Vec<Vec<Input>> = vec![Vec::new()];
            let mut longest = sequences.clone();
            for _ in 0..during {
                longest = longest
                    .iter()
                    .flat_map(|s| {
                        INPUTS.iter().map(move |&i| {
                            let mut s = s.clone();
                            s.push(i);
                            s
                        })
                    })
                    .collect();
                sequences.extend(longest.iter().cloned());
            }
            for seq in &sequences {
                for gap in GAPS {
                    if seq.len() <= 1 && gap != GAPS[0] {
                        continue;
                    }
                    match run_silent(&w, &prefix, phase, Some(silence), seq, gap) {
                        Ok(x) => worst = worst.max(x),
                        Err(e) => {
                            let names: Vec<&str> = seq.iter().map(|i| i.as_str()).collect();
                            panic!(
                                "from {name}, {} for {ticks:?} ticks, then {names:?} {gap} \
                                 ticks apart: {e}",
                                bus.as_str()
                            );
                        }
                    }
                    walked += 1;
                }
            }
        }
    }
    println!(
        "from {name} ({phase:?}): {walked} runs with a bus silent (all drives, one, partial \
         bursts) for {SILENCES:?} ticks (silent after {SILENT_TICKS}), up to {} inputs during \
         it; worst share of the limit: position {:.4}, finite-difference velocity {:.4}, \
         finite-difference acceleration {:.4}, velocity field {:.4}, velocity field step {:.4}",
        depth.saturating_sub(1),
        worst.position,
        worst.usage.step_velocity,
        worst.usage.step_acceleration,
        worst.usage.velocity,
        worst.usage.velocity_step,
    );
}

macro_rules! silent_walks {
    ($($name:ident: $i:expr,)*) => {$(
        #[test]
        fn $name() {
            silences($i);
        }
    )*};
}

silent_walks! {
    silent_from_disabled: 0,
    silent_from_enabling: 1,
    silent_from_holding: 2,
    silent_from_moving: 3,
    silent_from_paused: 4,
    silent_from_stopping: 5,
    silent_from_disabling: 6,
    silent_from_ending: 7,
    silent_from_recording: 8,
    silent_from_a_fault_stopping: 9,
    silent_from_a_fault_stopping_in_teach_in: 10,
    silent_from_a_fault: 11,
    silent_from_the_estop_stopping: 12,
    silent_from_the_estop_released_stopping: 13,
    silent_from_the_estop: 14,
    silent_from_the_estop_released: 15,
}

/// A shutdown (and a second signal) with a bus that never drains ends the loop within the
/// silence — the drives no bus reaches are left to their watchdogs, the others stop — or, when a
/// teach-in's drives stiffen through the enable steps, within the enable timeout (`Settings`'
/// 2 s).
#[test]
fn a_shutdown_ends_within_the_silence_with_a_bus_that_never_drains() {
    let w = World::new();
    let bound = SILENT_TICKS.max(2 * RATE as u64) + 2;
    let mut longest = 0;
    for (name, phase, prefix) in starts() {
        for bus in [Bus::Silent, Bus::OneSilent] {
            for exit in [Input::Shutdown, Input::SecondSignal] {
                let mut r = Run::new(&w);
                for &(input, ticks) in &prefix {
                    if let Some(i) = input {
                        r.apply(i);
                    }
                    r.steps(ticks).unwrap();
                }
                assert_eq!(r.status().phase, phase);
                r.mute(Silence { bus, ticks: None });
                r.apply(exit);
                let from = r.ticks;
                while !r.ended && r.ticks - from <= bound {
                    r.step()
                        .unwrap_or_else(|e| panic!("from {name}, {}: {e}", bus.as_str()));
                }
                assert!(
                    r.ended,
                    "from {name}, {}, {}: still {:?} {} ticks later",
                    bus.as_str(),
                    exit.as_str(),
                    r.status().phase,
                    r.ticks - from
                );
                longest = longest.max(r.ticks - from);
            }
        }
    }
    println!(
        "a shutdown with a bus that never drains ends within {longest} ticks (bound {bound}, \
         the silence {SILENT_TICKS})"
    );
}

// ---------------------------------------------------------------------------------------------
// The findings of issues 21 and 28, each as the sequence that showed it (the walk above covers
// them too; here they are named, with what they broke asserted).

/// A run from a start phase (by name) through `sequence`, `gap` ticks apart, settled and checked.
fn finding(start: &str, sequence: &[Input], gap: u64) -> Run<'static> {
    let w: &'static World = Box::leak(Box::new(World::new()));
    let (_, phase, prefix) = starts()
        .into_iter()
        .find(|s| s.0 == start)
        .expect("a start phase");
    let mut r = Run::new(w);
    for &(input, ticks) in &prefix {
        if let Some(i) = input {
            r.apply(i);
        }
        r.steps(ticks).unwrap();
    }
    assert_eq!(r.status().phase, phase);
    r.history.clear();
    for &input in sequence {
        r.apply(input);
        r.steps(gap.max(1)).unwrap();
    }
    r.settle().unwrap();
    r.honoured().unwrap();
    r
}

/// F2: the E-stop (or a fault) while a hand moves a compliant joint fast: the stop holds where
/// the joint is; the stiffened drive is never commanded on along the hand's motion.
#[test]
fn f2_a_stop_during_teach_in_holds_where_the_joint_is() {
    for event in [Input::EStopPress, Input::Fault] {
        let mut r = finding("recording", &[event], 1);
        let held = r.status().commanded[0];
        r.steps(20).unwrap();
        let s = r.status();
        assert_eq!(s.commanded[0], held, "{event:?}: {s:?}");
        assert!(s.commanded[0].abs() < 1.0);
    }
}

/// F4: shutdown during a fault's or the E-stop's quick stop: the loop ends at rest (`run`
/// checks the last setpoints could be held), never mid-stop.
#[test]
fn f4_shutdown_during_a_quick_stop_ends_at_rest() {
    for start in ["fault, stopping", "E-stop, stopping"] {
        for exit in [Input::Shutdown, Input::SecondSignal] {
            let r = finding(start, &[exit], 1);
            assert!(r.ended, "{start}, {exit:?}");
        }
    }
}

/// F5: `disable` during a fault's quick stop removes power at rest, not at speed (`run` checks
/// every disable the drives get is at rest).
#[test]
fn f5_disable_during_a_quick_stop_waits_for_rest() {
    for start in ["fault, stopping", "E-stop, stopping"] {
        let r = finding(start, &[Input::Disable], 1);
        assert!(!lock(&r.drives).enabled, "{start}");
    }
}

/// F13: an acknowledged `disable` followed by the E-stop or a fault: the drives stay disabled
/// when it is cleared.
#[test]
fn f13_an_acknowledged_disable_survives_an_estop_or_a_fault() {
    for event in [
        Input::EStopPress,
        Input::Fault,
        Input::DriveEStop,
        Input::Stall,
    ] {
        let mut r = finding("moving", &[Input::Disable, event], 1);
        for clear in [Input::EStopRelease, Input::ClearFault] {
            r.apply(clear);
            r.steps(3).unwrap();
        }
        r.settle().unwrap();
        r.honoured().unwrap();
        assert!(!lock(&r.drives).enabled, "{event:?}: {:?}", r.status());
        assert_eq!(r.status().phase, Phase::Disabled, "{event:?}");
    }
}

/// SIGTERM, then a drive's EMCY a few ticks later: the stop the shutdown began becomes the
/// fault's quick stop, and the loop still ends at rest.
#[test]
fn a_fault_during_the_shutdown_stop_still_ends_the_loop_at_rest() {
    for event in [Input::Fault, Input::EStopPress, Input::Stall] {
        let r = finding("moving", &[Input::Shutdown, event], 2);
        assert!(r.ended, "{event:?}");
    }
}

/// Issue 28: a full queue (nothing of a tick's setpoints taken) mid-motion, then drained: the
/// quick stop continues from the last setpoint the drives took, never jumping to where it would
/// have been (`run` checks every setpoint taken by finite differences).
#[test]
fn after_a_full_queue_the_stop_continues_from_what_the_drives_took() {
    for stuck in [1, 3, 12] {
        let mut r = finding("moving", &[], 1);
        lock(&r.drives).stuck = stuck;
        r.steps(u64::from(stuck) + 2).unwrap();
        assert_eq!(r.status().state, State::Fault, "queue full faults");
        r.settle().unwrap();
        r.checker.end_streams();
        assert!(r.checker.worst.usage.step_acceleration <= 1.0 + 1e-9);
    }
}
