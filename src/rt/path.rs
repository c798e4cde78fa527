//! Where a playback is along its path, and the setpoints there: the same code for the loop, which
//! steps it one tick at a time, and for the control side, which predicts what the loop will send
//! (a blend into a new motion must start exactly there).

use std::sync::Arc;

use super::Repeat;
use crate::trajectory::{Cursor, Setpoint, Trajectory};

/// The part of a playback the path runs through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Segment {
    Approach,
    /// At the motion's first sample until loop tick `until` (`start_at`).
    Wait {
        until: u64,
    },
    Motion,
}

/// A position along a playback: a segment, a position in it (in ticks: `base + frac`) and the
/// path speed (1 = as recorded) with the speed a pause or resume is heading for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Path {
    pub segment: Segment,
    pub base: u64,
    pub frac: f64,
    pub speed: f64,
    pub target_speed: f64,
    /// The playback's first tick is still to come (the path does not move before it).
    pub fresh: bool,
    /// Passes through the motion still to come after this one; `None`: forever.
    pub laps_left: Option<u32>,
    /// Loop tick before which the motion may not start (`start_at`).
    pub wait_until: Option<u64>,
}

impl Path {
    pub fn new(repeat: Repeat, wait_until: Option<u64>) -> Path {
        Path {
            segment: Segment::Approach,
            wait_until,
            base: 0,
            frac: 0.0,
            speed: 1.0,
            target_speed: 1.0,
            fresh: true,
            laps_left: match repeat {
                Repeat::Once => Some(0),
                Repeat::Times(n) => Some(n.saturating_sub(1)),
                Repeat::Forever => None,
            },
        }
    }

    /// Moved on by `step` ticks.
    pub fn advanced(mut self, step: f64) -> Path {
        let pos = self.frac + step;
        let whole = pos.floor();
        self.base += whole as u64;
        self.frac = pos - whole;
        self
    }

    /// Moving at a steady speed (full speed or paused at rest), so the ticks ahead are known.
    pub fn steady(&self) -> bool {
        self.speed == self.target_speed && (self.speed == 1.0 || self.speed == 0.0)
    }
}

/// The two trajectories a playback runs through.
#[derive(Debug, Clone)]
pub struct Route {
    /// From where the drives were commanded to be to the motion's first sample.
    pub approach: Arc<Trajectory>,
    pub motion: Arc<Trajectory>,
}

/// Where a path position falls once segment ends are resolved.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Place {
    At(Path),
    /// Past the end of the last lap.
    Finished,
}

impl Route {
    /// Where `path` falls once the ends of its segments are resolved at loop tick `k`: past the
    /// approach into the wait or the motion, past the motion's end into its next lap, or
    /// finished.
    pub fn place(&self, mut path: Path, k: u64) -> Place {
        loop {
            match path.segment {
                Segment::Approach => {
                    // The approach's last tick is the motion's first sample: the motion takes over.
                    let end = self.approach.ticks().saturating_sub(1);
                    if path.base < end {
                        return Place::At(path);
                    }
                    match path.wait_until {
                        Some(until) => {
                            path.segment = Segment::Wait { until };
                            path.base = 0;
                            path.frac = 0.0;
                        }
                        None => {
                            path.segment = Segment::Motion;
                            path.base -= end;
                        }
                    }
                }
                Segment::Wait { until } => {
                    path.base = 0;
                    path.frac = 0.0;
                    if k >= until {
                        path.segment = Segment::Motion;
                    }
                    return Place::At(path);
                }
                Segment::Motion => {
                    let end = self.motion.ticks().saturating_sub(1);
                    if path.base < end {
                        return Place::At(path);
                    }
                    match path.laps_left {
                        Some(0) => return Place::Finished,
                        _ if end == 0 => return Place::Finished,
                        laps => {
                            path.laps_left = laps.map(|l| l - 1);
                            path.base -= end;
                        }
                    }
                }
            }
        }
    }

    /// The setpoints at `path` with path speed `speed` changing at `dspeed` per second into
    /// `out`: velocity speed·v, acceleration speed²·a + dspeed·v.
    pub fn sample(
        &self,
        cursor: &mut Cursor,
        path: &Path,
        speed: f64,
        dspeed: f64,
        rate_hz: f64,
        out: &mut [Setpoint],
    ) {
        let traj = match path.segment {
            Segment::Wait { .. } => {
                for (o, f) in out.iter_mut().zip(self.motion.first_setpoints()) {
                    *o = Setpoint {
                        position: f.position,
                        velocity: 0.0,
                        acceleration: 0.0,
                    };
                }
                return;
            }
            Segment::Approach => &self.approach,
            Segment::Motion => &self.motion,
        };
        let t = (path.base as f64 + path.frac) / rate_hz;
        traj.sample_at_time(cursor, t, out);
        if speed != 1.0 || dspeed != 0.0 {
            for o in out {
                o.acceleration = speed * speed * o.acceleration + dspeed * o.velocity;
                o.velocity *= speed;
            }
        }
    }

    /// The last three setpoints the loop will send up to tick `k + ahead` (at ticks
    /// `k + ahead − 2 ..= k + ahead`) for a playback at `path` after tick `k`, provided its path
    /// speed stays steady (`None` when it does not, when the motion ends before then, or when
    /// `ahead` < 3). Exactly the loop's own arithmetic, in constant memory and time however far
    /// ahead: the steps where only the tick count changes are taken in bulk.
    pub fn predict(
        &self,
        mut path: Path,
        k: u64,
        ahead: u64,
        rate_hz: f64,
    ) -> Option<[Vec<Setpoint>; 3]> {
        if !path.steady() || ahead < 3 {
            return None;
        }
        let before = ahead - 3;
        let mut done = 0;
        // After one step that moved the path, its fraction no longer changes (a steady speed of 0
        // or 1 adds exactly 0 or 1): from there the steps may be taken in bulk.
        let mut settled = false;
        while done < before {
            let tick = k + done;
            if settled && let Some((bulk, n)) = self.skip(path, tick, before - done)? {
                path = bulk;
                done += n;
                continue;
            }
            settled |= !path.fresh;
            path = self.step(path, tick + 1)?;
            done += 1;
        }
        let n = self.motion.dofs();
        let mut cursor = Cursor::default();
        let mut out: [Vec<Setpoint>; 3] = std::array::from_fn(|_| vec![Setpoint::default(); n]);
        for (i, o) in out.iter_mut().enumerate() {
            path = self.step(path, k + before + i as u64 + 1)?;
            self.sample(&mut cursor, &path, path.speed, 0.0, rate_hz, o);
        }
        Some(out)
    }

    /// One tick of a steady path, as the loop steps it: `None` once it has finished.
    fn step(&self, path: Path, tick: u64) -> Option<Path> {
        let moved = if path.fresh {
            path
        } else {
            path.advanced(0.5 * (path.speed + path.speed))
        };
        match self.place(moved, tick) {
            Place::At(p) => Some(Path { fresh: false, ..p }),
            Place::Finished => None,
        }
    }

    /// Up to `left` steps of a settled steady path after tick `tick` at once, where they change
    /// nothing but the position along a segment (and the laps of a looped motion): the path after
    /// them and how many were taken, `Some(None)` when the next step must be taken alone (a
    /// segment ends), `None` when the motion ends within them.
    #[allow(clippy::option_option)]
    fn skip(&self, mut path: Path, tick: u64, left: u64) -> Option<Option<(Path, u64)>> {
        // Steps that keep the path where the previous one left it, but for the segment's clock.
        let within = |n: u64| (n >= 2).then_some(n.min(left));
        let n = match (path.segment, path.speed == 0.0) {
            (Segment::Wait { until }, _) => until.saturating_sub(tick).saturating_sub(1),
            (Segment::Approach | Segment::Motion, true) => left,
            (Segment::Approach, false) => {
                let end = self.approach.ticks().saturating_sub(1);
                end.saturating_sub(1).saturating_sub(path.base)
            }
            (Segment::Motion, false) => {
                let end = self.motion.ticks().saturating_sub(1);
                if end == 0 {
                    return Some(None);
                }
                // Laps wrap one at a time in the loop; in bulk, by division.
                let total = u128::from(path.base) + u128::from(left);
                let end = u128::from(end);
                let laps = total / end;
                if let Some(l) = path.laps_left {
                    if laps > u128::from(l) {
                        return None;
                    }
                    path.laps_left = Some(l - laps as u32);
                }
                path.base = (total % end) as u64;
                return Some(Some((path, left)));
            }
        };
        Some(within(n).map(|n| {
            if path.speed != 0.0 && !matches!(path.segment, Segment::Wait { .. }) {
                path.base += n;
            }
            (path, n)
        }))
    }
}
