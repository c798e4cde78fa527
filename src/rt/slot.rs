//! One slot of the loop: a set of DOFs that plays one motion at a time — the whole robot, or one
//! joint group. The slot computes its DOFs' next setpoints (path, pause ramps, stops, a pending
//! replacement); the player around it checks them, writes them and handles faults for all.
//!
//! Nothing here allocates after [`Slot::new`].

use super::path::{Path, Place};
use super::{Outcome, Playback, Refusal, Repeat};
use crate::trajectory::{Cursor, DofLimits, JointSet, Setpoint, Stop, StopKind};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SlotState {
    /// Nothing played since the drives came up.
    Idle,
    Holding,
    Running,
    /// Then holding; what the player does at rest (disable, exit) is the player's.
    Stopping {
        tick: u64,
        quick: bool,
    },
}

/// A playback leaving the slot, to be retired by the player.
pub(crate) struct Leaving {
    pub playback: Box<Playback>,
    pub outcome: Outcome,
}

pub(crate) struct Slot {
    /// JointSet indices of the slot's DOFs, ascending.
    pub dofs: Vec<usize>,
    limits: Vec<DofLimits>,
    stop: Stop,
    pub state: SlotState,
    pub playback: Option<Box<Playback>>,
    pub path: Path,
    cursor: Cursor,
    /// A replacement and the slot tick ([`ran`](Self::ran)) it takes over at.
    pending: Option<(Box<Playback>, u64)>,
    /// Ticks this slot's playbacks have run: one per period of path, however late the loop
    /// (after an overrun loop ticks are skipped, path ticks never are), so a switch scheduled in
    /// these ticks lands exactly where the path was predicted to be.
    pub ran: u64,
    pub goal_deadline: Option<u64>,
    pub motion_start_tick: Option<u64>,
    pub first_command: Option<(u64, u64)>,
    pub awaiting_first_command: bool,
    /// The slot's DOFs: their next setpoints, and the last two sent (gathered each tick).
    pub next: Vec<Setpoint>,
    prev: Vec<Setpoint>,
    last: Vec<Setpoint>,
}

/// Whether a blend's first setpoint is exactly `now` in position and velocity (its acceleration
/// field is the blend's own: the switch tick sends `now`'s).
fn starts_at(first: &[Setpoint], now: &[Setpoint]) -> bool {
    first.len() == now.len()
        && first
            .iter()
            .zip(now)
            .all(|(f, n)| f.position == n.position && f.velocity == n.velocity)
}

impl Slot {
    /// A slot for `dofs` of `joints`.
    pub fn new(joints: &JointSet, dofs: Vec<usize>, rate_hz: f64) -> Slot {
        let sub = JointSet {
            dofs: dofs.iter().map(|&i| joints.dofs[i].clone()).collect(),
        };
        let n = dofs.len();
        Slot {
            limits: sub.dofs.iter().map(|d| d.limits).collect(),
            stop: Stop::new(&sub, rate_hz, &[]),
            dofs,
            state: SlotState::Idle,
            playback: None,
            path: Path::new(Repeat::Once, None),
            cursor: Cursor::default(),
            pending: None,
            ran: 0,
            goal_deadline: None,
            motion_start_tick: None,
            first_command: None,
            awaiting_first_command: false,
            next: vec![Setpoint::default(); n],
            prev: vec![Setpoint::default(); n],
            last: vec![Setpoint::default(); n],
        }
    }

    /// The running playback's last row, when it is a streamed piece.
    pub fn stream_tail(&self) -> Option<u64> {
        self.playback.as_ref().and_then(|p| p.stream_tail)
    }

    pub fn moving(&self) -> bool {
        matches!(self.state, SlotState::Running | SlotState::Stopping { .. })
    }

    pub fn overlaps(&self, other: &Slot) -> bool {
        self.dofs
            .iter()
            .any(|d| other.dofs.binary_search(d).is_ok())
    }

    /// The slot's DOFs' last two setpoints, from the whole robot's.
    pub fn gather(&mut self, prev: &[Setpoint], last: &[Setpoint]) {
        for ((&d, p), l) in self.dofs.iter().zip(&mut self.prev).zip(&mut self.last) {
            *p = prev[d];
            *l = last[d];
        }
    }

    /// The slot's next setpoints into the whole robot's.
    pub fn scatter(&self, out: &mut [Setpoint]) {
        for (&d, n) in self.dofs.iter().zip(&self.next) {
            out[d] = *n;
        }
    }

    /// Whether `next` may follow the last two setpoints on every DOF of the slot.
    fn fits(&self, dt: f64) -> bool {
        self.limits
            .iter()
            .zip(&self.prev)
            .zip(&self.last)
            .zip(&self.next)
            .all(|(((lim, p), l), n)| super::guard::violation(lim, p, l, n, dt).is_none())
    }

    /// Starts `pb` (already checked by the player).
    pub fn start(&mut self, pb: Box<Playback>, wait_until: Option<u64>) {
        self.path = Path::new(pb.repeat, wait_until);
        self.playback = Some(pb);
        self.cursor = Cursor::default();
        self.state = SlotState::Running;
        self.goal_deadline = None;
        self.awaiting_first_command = true;
        self.first_command = None;
        self.motion_start_tick = None;
    }

    /// Queues a replacement for the running playback at loop tick `at`; a replacement already
    /// waiting leaves, refused.
    pub fn queue_replacement(&mut self, pb: Box<Playback>, at: u64) -> Option<Leaving> {
        self.pending.replace((pb, at)).map(|(playback, _)| Leaving {
            playback,
            outcome: Outcome::Refused(Refusal::Superseded),
        })
    }

    /// The next setpoints of the running playback into `next`. The path moves on by the mean of
    /// this tick's and the next path speed; while the speed ramps (pause, resume) the largest
    /// change whose setpoints keep the stream within the limits is taken. A replacement due at
    /// this tick takes over when its first setpoint is exactly the one the old playback gives
    /// now (so the drives see no seam); otherwise it is refused. Returns the playbacks leaving.
    pub fn run(&mut self, k: u64, rate_hz: f64, ramp_step: f64) -> [Option<Leaving>; 2] {
        let mut leaving = [None, None];
        // This run's number: a switch at `ran + n` lands on the n-th run after a snapshot.
        self.ran += 1;
        let now = self.ran;
        let Some(pb) = self.playback.take() else {
            self.state = SlotState::Holding;
            return leaving;
        };
        let dt = 1.0 / rate_hz;
        let s = self.path.speed;
        let full = if self.path.fresh {
            0.0
        } else {
            (self.path.target_speed - s).clamp(-ramp_step, ramp_step)
        };
        let candidates = [s + full, s + 0.5 * full, s + 0.25 * full, s];
        let tries = if full == 0.0 { 1 } else { 4 };
        let mut finished = false;
        for (i, &next) in candidates[..tries].iter().enumerate() {
            let next = next.clamp(0.0, 1.0);
            let moved = if self.path.fresh {
                self.path
            } else {
                self.path.advanced(0.5 * (s + next))
            };
            match pb.route.place(moved, k) {
                Place::Finished => {
                    finished = true;
                    break;
                }
                Place::At(path) => {
                    let dspeed = (next - s) * rate_hz;
                    pb.route.sample(
                        &mut self.cursor,
                        &path,
                        next,
                        dspeed,
                        rate_hz,
                        &mut self.next,
                    );
                    if i + 1 == tries || self.fits(dt) {
                        self.path = Path {
                            speed: next,
                            fresh: false,
                            ..path
                        };
                        break;
                    }
                }
            }
        }
        if finished {
            // The motion's last sample, as played; the drives hold it from the next tick.
            let s = self.path.speed;
            for (o, l) in self.next.iter_mut().zip(pb.route.motion.last_setpoints()) {
                *o = Setpoint {
                    position: l.position,
                    velocity: s * l.velocity,
                    acceleration: s * s * l.acceleration,
                };
            }
            leaving[0] = Some(Leaving {
                playback: pb,
                outcome: Outcome::Finished,
            });
            if let Some((pending, _)) = self.pending.take() {
                leaving[1] = Some(Leaving {
                    playback: pending,
                    outcome: Outcome::Refused(Refusal::Ended),
                });
            }
            self.state = SlotState::Holding;
            return leaving;
        }
        if self.path.segment == super::path::Segment::Motion && self.motion_start_tick.is_none() {
            self.motion_start_tick = Some(k);
        }
        self.playback = Some(pb);
        if let Some((new, at)) = self.pending.take() {
            if now < at {
                self.pending = Some((new, at));
            } else if now == at && starts_at(new.route.approach.first_setpoints(), &self.next) {
                // The blend starts where the old playback is now: its tick 0 is this tick.
                leaving[0] = self.playback.take().map(|playback| Leaving {
                    playback,
                    outcome: Outcome::Replaced,
                });
                let wait = None;
                self.path = Path {
                    fresh: false,
                    ..Path::new(new.repeat, wait)
                };
                self.playback = Some(new);
                self.cursor = Cursor::default();
                self.motion_start_tick = None;
            } else {
                leaving[0] = Some(Leaving {
                    playback: new,
                    outcome: Outcome::Refused(Refusal::Missed),
                });
            }
        }
        leaving
    }

    /// Plans a stop from the slot's last two setpoints; the running playback leaves, stopped.
    pub fn begin_stop(&mut self, kind: StopKind) -> [Option<Leaving>; 2] {
        self.stop.plan(&self.prev, &self.last, kind);
        self.state = SlotState::Stopping {
            tick: 0,
            quick: kind == StopKind::Quick,
        };
        self.leave(Outcome::Stopped)
    }

    /// The stop's next setpoints into `next`; at rest the slot holds (returns true).
    pub fn stop_tick(&mut self) -> bool {
        let SlotState::Stopping { tick, quick } = self.state else {
            return false;
        };
        let tick = tick + 1;
        self.stop.sample(tick, &mut self.next);
        let rest = tick + 1 >= self.stop.ticks();
        self.state = if rest {
            SlotState::Holding
        } else {
            SlotState::Stopping { tick, quick }
        };
        rest
    }

    /// The running playback (and a pending replacement) leave with `outcome`.
    pub fn leave(&mut self, outcome: Outcome) -> [Option<Leaving>; 2] {
        let pending = self.pending.take().map(|(playback, _)| Leaving {
            playback,
            outcome: Outcome::Refused(Refusal::Ended),
        });
        let running = self
            .playback
            .take()
            .map(|playback| Leaving { playback, outcome });
        [running, pending]
    }

    /// Position in the motion, 0..1, and time into it (s), while the motion runs.
    pub fn progress(&self, rate_hz: f64) -> (f64, f64) {
        match (self.path.segment, self.playback.as_deref()) {
            (super::path::Segment::Motion, Some(pb)) if self.state == SlotState::Running => {
                let t = self.path.base as f64 + self.path.frac;
                let last = pb.route.motion.ticks().saturating_sub(1).max(1) as f64;
                ((t / last).min(1.0), t / rate_hz)
            }
            _ => (0.0, 0.0),
        }
    }
}
