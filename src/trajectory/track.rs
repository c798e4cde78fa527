//! [`Trajectory`]: a motion on the control rate, sampled tick by tick in constant time — from
//! the source samples in Hermite form ([`Knots`]) or from an approach's [`Profile`].

use crate::diag::Num;
use std::f64::consts::PI;

use super::envelope::{Envelope, Measure};
use super::interp::{Cubic, natural_spline_slopes, pchip_slopes};
use super::{Cursor, Interpolation, JointSet, Setpoint};

/// Highest control rate accepted: far above any drive's, low enough that tick counts stay exact.
pub const MAX_RATE_HZ: f64 = 100_000.0;

/// A motion on the control rate: tick `k` is at exactly `k / rate_hz` seconds (computed from `k`,
/// never accumulated). Sampling is constant time per tick in tick order and never allocates.
/// Memory is the source samples, their slopes and their times: at most 3× the samples' f64 size,
/// whatever the control rate.
#[derive(Debug, Clone)]
pub struct Trajectory {
    rate_hz: f64,
    ticks: u64,
    body: Body,
    /// Positions after the last tick: the last sample's, at rest.
    rest: Vec<f64>,
    /// Tick 0 and the last tick, kept so the loop can check a playback without sampling it.
    first: Vec<Setpoint>,
    last: Vec<Setpoint>,
    /// Whether playing it in a loop is continuous (see [`Trajectory::loop_seam`]).
    seam: Result<(), SeamError>,
}

/// Why a trajectory cannot be played in a loop.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SeamError {
    #[error("a loop needs at least 3 ticks; this motion has {0}")]
    TooShort(u64),
    #[error(
        "`{dof}` jumps where the loop closes: {measure} {} from the last tick into the first is outside [{}, {}]; a looped motion must end where it starts, with the same velocity", Num(*value), Num(*lower), Num(*upper)
    )]
    Jump {
        /// JointSet index and name of the DOF.
        index: usize,
        dof: String,
        measure: Measure,
        value: f64,
        lower: f64,
        upper: f64,
    },
}

#[derive(Debug, Clone)]
enum Body {
    Knots(Knots),
    Profile(Profile),
}

/// Source samples in Hermite form: values and (for the cubics) slopes at the knots.
#[derive(Debug, Clone)]
pub(super) struct Knots {
    pub interpolation: Interpolation,
    /// Knot times in trajectory seconds (first knot at 0, already divided by the speed).
    pub times: Vec<f64>,
    /// Column → JointSet index.
    pub columns: Vec<usize>,
    /// `rows × columns`, row-major.
    pub values: Vec<f64>,
    /// Same shape as `values` for pchip and cubic; empty for hold and linear.
    pub slopes: Vec<f64>,
    /// DOFs no column drives, with the position they hold.
    pub held: Vec<(usize, f64)>,
    pub dofs: usize,
}

/// Where a time falls: segment, its length, the time into it, and its two knot rows.
struct Span<'a> {
    seg: usize,
    h: f64,
    dt: f64,
    row0: &'a [f64],
    row1: &'a [f64],
}

impl Knots {
    pub fn new(
        interpolation: Interpolation,
        times: Vec<f64>,
        columns: Vec<usize>,
        values: Vec<f64>,
        joints: &JointSet,
    ) -> Knots {
        let cols = columns.len();
        let slopes = match interpolation {
            Interpolation::Hold | Interpolation::Linear => Vec::new(),
            Interpolation::Pchip => pchip_slopes(&times, &values, cols),
            Interpolation::Cubic => natural_spline_slopes(&times, &values, cols),
        };
        let held = joints
            .dofs
            .iter()
            .enumerate()
            .filter(|(i, _)| !columns.contains(i))
            .map(|(i, d)| (i, d.initial_position))
            .collect();
        Knots {
            interpolation,
            times,
            columns,
            values,
            slopes,
            held,
            dofs: joints.len(),
        }
    }

    /// Knots whose slopes are given (a blend sampled at every tick): cubic Hermite between them.
    pub fn hermite(
        times: Vec<f64>,
        columns: Vec<usize>,
        values: Vec<f64>,
        slopes: Vec<f64>,
        joints: &JointSet,
    ) -> Knots {
        Knots {
            slopes,
            ..Knots::new(Interpolation::Linear, times, columns, values, joints)
        }
        .with_interpolation(Interpolation::Cubic)
    }

    fn with_interpolation(mut self, interpolation: Interpolation) -> Knots {
        self.interpolation = interpolation;
        self
    }

    pub fn rows(&self) -> usize {
        self.times.len()
    }

    pub fn cols(&self) -> usize {
        self.columns.len()
    }

    pub fn duration(&self) -> f64 {
        self.times.last().copied().unwrap_or(0.0)
    }

    /// The cubic of segment `seg` (between knots `seg` and `seg + 1`) for column `c`, as played
    /// (hold and linear as their constant and straight pieces), given `1 / h` of the segment.
    #[inline]
    pub fn cubic_inv(&self, seg: usize, c: usize, inv: f64) -> Cubic {
        let cols = self.cols();
        let y0 = self.values[seg * cols + c];
        let y1 = self.values[(seg + 1) * cols + c];
        match self.interpolation {
            Interpolation::Hold => Cubic {
                c0: y0,
                c1: 0.0,
                c2: 0.0,
                c3: 0.0,
            },
            Interpolation::Linear => Cubic {
                c0: y0,
                c1: (y1 - y0) * inv,
                c2: 0.0,
                c3: 0.0,
            },
            Interpolation::Pchip | Interpolation::Cubic => Cubic::hermite(
                y0,
                y1,
                self.slopes[seg * cols + c],
                self.slopes[(seg + 1) * cols + c],
                inv,
            ),
        }
    }

    /// The segment holding `t` (at least two knots), found from the cursor and left in it.
    #[inline]
    fn span(&self, cursor: &mut Cursor, t: f64) -> Span<'_> {
        let cols = self.cols();
        let seg = self.segment(cursor.segment, t);
        cursor.segment = seg;
        let t0 = self.times[seg];
        Span {
            seg,
            h: self.times[seg + 1] - t0,
            dt: t - t0,
            row0: &self.values[seg * cols..(seg + 1) * cols],
            row1: &self.values[(seg + 1) * cols..(seg + 2) * cols],
        }
    }

    /// Index of the segment holding time `t`, starting the search at `hint`.
    #[inline]
    fn segment(&self, hint: usize, t: f64) -> usize {
        let last_seg = self.times.len().saturating_sub(2);
        let mut i = hint.min(last_seg);
        let search = |from: usize| {
            from + self.times[from..]
                .partition_point(|&s| s <= t)
                .saturating_sub(1)
                .min(last_seg - from)
        };
        if self.times.get(i).is_some_and(|&s| s > t) {
            return search(0);
        }
        // In tick order the next segment is this one or one of the next few; further away (a
        // jump to the end of a long motion) is a binary search, never a walk.
        for _ in 0..4 {
            if i < last_seg && self.times[i + 1] <= t {
                i += 1;
            } else {
                return i;
            }
        }
        if i < last_seg && self.times[i + 1] <= t {
            search(i)
        } else {
            i
        }
    }

    #[inline]
    fn sample(&self, cursor: &mut Cursor, t: f64, out: &mut [Setpoint]) {
        for &(i, p) in &self.held {
            if let Some(o) = out.get_mut(i) {
                *o = Setpoint {
                    position: p,
                    velocity: 0.0,
                    acceleration: 0.0,
                };
            }
        }
        self.each_column(cursor, t, |c, setpoint| {
            if let Some(o) = self.columns.get(c).and_then(|&i| out.get_mut(i)) {
                *o = setpoint;
            }
        });
    }

    /// Evaluates every column at `t` and hands `(column, setpoint)` to `put`: the one place the
    /// interpolation formulas live, so the resample tool writes exactly what the loop sends.
    /// Allocation-free (the closure is inlined).
    #[inline]
    pub(super) fn each_column(
        &self,
        cursor: &mut Cursor,
        t: f64,
        mut put: impl FnMut(usize, Setpoint),
    ) {
        let at_rest = |position| Setpoint {
            position,
            velocity: 0.0,
            acceleration: 0.0,
        };
        let cols = self.cols();
        if self.times.len() < 2 {
            for (c, &p) in self.values.iter().take(cols).enumerate() {
                put(c, at_rest(p));
            }
            return;
        }
        let Span {
            seg,
            h,
            dt,
            row0,
            row1,
        } = self.span(cursor, t);
        match self.interpolation {
            Interpolation::Hold => {
                let row = if dt >= h { row1 } else { row0 };
                for (c, &p) in row.iter().enumerate() {
                    put(c, at_rest(p));
                }
            }
            Interpolation::Linear => {
                let f = dt / h;
                for (c, (&y0, &y1)) in row0.iter().zip(row1).enumerate() {
                    put(
                        c,
                        Setpoint {
                            position: y0 + (y1 - y0) * f,
                            velocity: (y1 - y0) / h,
                            acceleration: 0.0,
                        },
                    );
                }
            }
            Interpolation::Pchip | Interpolation::Cubic => {
                let m0 = &self.slopes[seg * cols..(seg + 1) * cols];
                let m1 = &self.slopes[(seg + 1) * cols..(seg + 2) * cols];
                let inv = 1.0 / h;
                let knots = row0.iter().zip(row1).zip(m0.iter().zip(m1));
                for (c, ((&y0, &y1), (&s0, &s1))) in knots.enumerate() {
                    let d = (y1 - y0) * inv;
                    let c2 = (3.0 * d - 2.0 * s0 - s1) * inv;
                    let c3 = (s0 + s1 - 2.0 * d) * inv * inv;
                    put(
                        c,
                        Setpoint {
                            position: y0 + dt * (s0 + dt * (c2 + dt * c3)),
                            velocity: s0 + dt * (2.0 * c2 + 3.0 * dt * c3),
                            acceleration: 2.0 * c2 + 6.0 * c3 * dt,
                        },
                    );
                }
            }
        }
    }

    /// Positions only, for tools that write them out (`motiond resample`): `out` in column order.
    fn positions(&self, cursor: &mut Cursor, t: f64, out: &mut [f64]) {
        self.each_column(cursor, t, |c, setpoint| {
            if let Some(o) = out.get_mut(c) {
                *o = setpoint.position;
            }
        });
    }
}

impl Trajectory {
    pub(super) fn from_knots(knots: Knots, rate_hz: f64) -> Trajectory {
        let ticks = ticks_until(knots.duration(), rate_hz);
        let mut t = Trajectory {
            rate_hz,
            ticks,
            rest: vec![0.0; knots.dofs],
            first: Vec::new(),
            last: Vec::new(),
            seam: Err(SeamError::TooShort(ticks)),
            body: Body::Knots(knots),
        };
        t.settle();
        t
    }

    pub(super) fn from_profile(profile: Profile, rate_hz: f64) -> Trajectory {
        let ticks = ticks_until(profile.duration, rate_hz);
        let mut t = Trajectory {
            rate_hz,
            ticks,
            rest: vec![0.0; profile.start.len()],
            first: Vec::new(),
            last: Vec::new(),
            seam: Err(SeamError::TooShort(ticks)),
            body: Body::Profile(profile),
        };
        t.settle();
        t
    }

    /// Holds `positions` at rest for one tick (and after it): a trajectory for standing still.
    pub fn hold(positions: &[f64], rate_hz: f64) -> Trajectory {
        Trajectory::from_profile(Profile::at_rest(positions), rate_hz)
    }

    /// Records the first and last ticks, and the last tick's positions as the ones held after
    /// the end.
    fn settle(&mut self) {
        let n = self.rest.len();
        let mut first = vec![Setpoint::default(); n];
        self.sample_at(&mut Cursor::default(), 0.0, &mut first);
        let mut last = vec![Setpoint::default(); n];
        let end = self.tick_time(self.ticks.saturating_sub(1));
        self.sample_at(&mut Cursor::default(), end, &mut last);
        for (r, s) in self.rest.iter_mut().zip(&last) {
            *r = s.position;
        }
        self.first = first;
        self.last = last;
    }

    /// Judges the loop seam against `joints`' limits: played in a loop, tick 0 follows tick
    /// `ticks() - 2` where tick `ticks() - 1` would have come, and the stream
    /// `…, ticks() - 3, ticks() - 2, 0, 1, …` must stay within the [`Envelope`].
    pub(super) fn judge_seam(&mut self, joints: &JointSet) {
        self.seam = self.seam_against(joints);
    }

    fn seam_against(&self, joints: &JointSet) -> Result<(), SeamError> {
        if self.ticks < 3 {
            return Err(SeamError::TooShort(self.ticks));
        }
        let n = self.dofs();
        let mut envelope = Envelope::new(joints, self.rate_hz);
        let mut out = vec![Setpoint::default(); n];
        let mut cursor = Cursor::default();
        for tick in [self.ticks - 3, self.ticks - 2, 0, 1] {
            self.sample(&mut cursor, tick, &mut out);
            if let Err(b) = envelope.push(&out) {
                return Err(SeamError::Jump {
                    index: b.dof,
                    dof: joints
                        .dofs
                        .get(b.dof)
                        .map_or_else(|| b.dof.to_string(), |d| d.name.clone()),
                    measure: b.measure,
                    value: b.value,
                    lower: b.limits.lower,
                    upper: b.limits.upper,
                });
            }
        }
        Ok(())
    }

    /// Whether the trajectory can be played in a loop: judged when it was built (constant time).
    pub fn loop_seam(&self) -> Result<(), SeamError> {
        self.seam.clone()
    }

    /// Tick 0, as [`Trajectory::sample`] gives it (stored: no sampling on the loop).
    pub fn first_setpoints(&self) -> &[Setpoint] {
        &self.first
    }

    /// The last tick (`ticks() - 1`), as [`Trajectory::sample`] gives it.
    pub fn last_setpoints(&self) -> &[Setpoint] {
        &self.last
    }

    pub fn rate_hz(&self) -> f64 {
        self.rate_hz
    }

    /// Number of commanded DOFs (the JointSet's length): the length of every sample slice.
    pub fn dofs(&self) -> usize {
        self.rest.len()
    }

    /// Number of ticks: tick `k` is at `k / rate_hz`, the last one at or just before the end.
    pub fn ticks(&self) -> u64 {
        self.ticks
    }

    /// Time of the last tick, in seconds.
    pub fn duration_s(&self) -> f64 {
        self.tick_time(self.ticks.saturating_sub(1))
    }

    /// Heap memory the trajectory holds, in bytes: independent of the control rate.
    pub fn heap_bytes(&self) -> usize {
        let f = std::mem::size_of::<f64>();
        let body = match &self.body {
            Body::Knots(k) => {
                (k.times.capacity() + k.values.capacity() + k.slopes.capacity()) * f
                    + k.columns.capacity() * std::mem::size_of::<usize>()
                    + k.held.capacity() * std::mem::size_of::<(usize, f64)>()
            }
            Body::Profile(p) => (p.start.capacity() + p.delta.capacity()) * f,
        };
        let setpoints = (self.first.capacity() + self.last.capacity()) * size_of::<Setpoint>();
        body + self.rest.capacity() * f + setpoints
    }

    fn tick_time(&self, tick: u64) -> f64 {
        tick as f64 / self.rate_hz
    }

    /// Writes tick `tick` into `out` (JointSet order, `out.len() == dofs()`). Constant time when
    /// ticks come in order with the same cursor; never allocates. Ticks past the end give the last
    /// tick's positions at rest.
    #[inline]
    pub fn sample(&self, cursor: &mut Cursor, tick: u64, out: &mut [Setpoint]) {
        if tick >= self.ticks {
            for (o, &p) in out.iter_mut().zip(&self.rest) {
                *o = Setpoint {
                    position: p,
                    velocity: 0.0,
                    acceleration: 0.0,
                };
            }
            return;
        }
        self.sample_at(cursor, self.tick_time(tick), out);
    }

    /// The trajectory at any time `t_s` (seconds from tick 0), for sampling between ticks: before
    /// 0 as at 0; after the last tick at rest at its positions, as [`Trajectory::sample`].
    pub fn sample_at_time(&self, cursor: &mut Cursor, t_s: f64, out: &mut [Setpoint]) {
        let end = self.tick_time(self.ticks.saturating_sub(1));
        if t_s > end {
            return self.sample(cursor, self.ticks, out);
        }
        self.sample_at(cursor, t_s.max(0.0), out);
    }

    /// The positions of tick `tick` for each column of the motion (column order, `out.len()` =
    /// the motion's columns), for tools that write a resampled motion out; ticks past the end
    /// give the last tick's. `None` for trajectories not made from a motion (an approach).
    pub fn column_positions(&self, cursor: &mut Cursor, tick: u64, out: &mut [f64]) -> Option<()> {
        let Body::Knots(k) = &self.body else {
            return None;
        };
        let t = self.tick_time(tick.min(self.ticks.saturating_sub(1)));
        k.positions(cursor, t.min(k.duration()), out);
        Some(())
    }

    fn sample_at(&self, cursor: &mut Cursor, t: f64, out: &mut [Setpoint]) {
        match &self.body {
            Body::Knots(k) => k.sample(cursor, t.min(k.duration()), out),
            Body::Profile(p) => p.sample(t, out),
        }
    }
}

/// Ticks `k = 0, 1, …` with `k / rate ≤ duration`; a tick a rounding error past the end (13.4 s at
/// 1 kHz is 13399.999… ticks) still counts.
pub(super) fn ticks_until(duration: f64, rate_hz: f64) -> u64 {
    let x = duration * rate_hz;
    ((x + 1e-9 * x.max(1.0)).floor() as u64).saturating_add(1)
}

/// The approach's motion: `start + delta · s(t)` with the normalised profile `s` from 0 to 1.
#[derive(Debug, Clone)]
pub(super) struct Profile {
    pub start: Vec<f64>,
    pub delta: Vec<f64>,
    pub duration: f64,
    /// Length of each of the two ramps (≤ duration / 2).
    pub ramp: f64,
}

impl Profile {
    pub fn at_rest(positions: &[f64]) -> Profile {
        Profile {
            start: positions.to_vec(),
            delta: vec![0.0; positions.len()],
            duration: 0.0,
            ramp: 0.0,
        }
    }

    /// `(s, ds/dt, d²s/dt²)` at `t`.
    fn unit(&self, t: f64) -> (f64, f64, f64) {
        let (total, ramp) = (self.duration, self.ramp);
        if !(total > 0.0 && ramp > 0.0) || t >= total {
            return (1.0, 0.0, 0.0);
        }
        let t = t.max(0.0);
        let peak = 1.0 / (total - ramp);
        let up = |t: f64| {
            let w = 2.0 * PI / ramp;
            let k = peak / ramp;
            let (sin, cos) = (w * t).sin_cos();
            (
                k * (0.5 * t * t - (1.0 - cos) / (w * w)),
                k * (t - sin / w),
                k * (1.0 - cos),
            )
        };
        if t < ramp {
            up(t)
        } else if t <= total - ramp {
            (peak * (0.5 * ramp + (t - ramp)), peak, 0.0)
        } else {
            let (s, v, a) = up(total - t);
            (1.0 - s, v, -a)
        }
    }

    pub fn sample(&self, t: f64, out: &mut [Setpoint]) {
        let (s, v, a) = self.unit(t);
        for ((o, &p0), &d) in out.iter_mut().zip(&self.start).zip(&self.delta) {
            *o = Setpoint {
                position: p0 + d * s,
                velocity: d * v,
                acceleration: d * a,
            };
        }
    }
}
