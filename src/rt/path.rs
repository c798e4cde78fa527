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

    /// The setpoints the loop will send at ticks `k + 1 ..= k + ahead` for a playback at `path`
    /// after tick `k`, provided its path speed stays steady (`None` when it is not, or when the
    /// motion ends before then). Exactly the loop's own arithmetic, step by step.
    pub fn predict(
        &self,
        mut path: Path,
        k: u64,
        ahead: u64,
        rate_hz: f64,
    ) -> Option<Vec<Vec<Setpoint>>> {
        if !path.steady() {
            return None;
        }
        let n = self.motion.dofs();
        let mut cursor = Cursor::default();
        let mut ticks = Vec::with_capacity(ahead as usize);
        for i in 1..=ahead {
            let moved = if path.fresh {
                path
            } else {
                path.advanced(0.5 * (path.speed + path.speed))
            };
            path = match self.place(moved, k + i) {
                Place::At(p) => Path { fresh: false, ..p },
                Place::Finished => return None,
            };
            let mut out = vec![Setpoint::default(); n];
            self.sample(&mut cursor, &path, path.speed, 0.0, rate_hz, &mut out);
            ticks.push(out);
        }
        Some(ticks)
    }
}
