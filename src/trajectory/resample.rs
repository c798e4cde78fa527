//! Motion samples → a [`Trajectory`] on the control rate, proved against the limits.

use super::approach::Profile;
use super::envelope::{Envelope, Measure};
use super::interp::{Cubic, natural_spline_slopes, pchip_slopes};
use super::mapping::ColumnMap;
use super::proof::{self, ProofReport};
use super::{Cursor, Interpolation, JointSet, LimitPolicy, Setpoint};
use crate::motion::seq::{Motion, MultiValueSeq, Timing};

/// Highest control rate accepted: far above any drive's, low enough that tick counts stay exact.
pub const MAX_RATE_HZ: f64 = 100_000.0;

/// Most rounds of slowing down the retime policy tries before it refuses.
const RETIME_ROUNDS: usize = 8;

/// Longest motion accepted (as played): a week, far beyond any recorded motion.
pub const MAX_DURATION_S: f64 = 7.0 * 24.0 * 3600.0;

/// How to turn a motion into a trajectory.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Options {
    /// Control rate (ticks per second).
    pub rate_hz: f64,
    pub interpolation: Interpolation,
    pub policy: LimitPolicy,
    /// Playback speed: 0.5 plays at half speed (twice as long), 2 at double speed. The proof
    /// applies to the motion as played.
    pub speed: f64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            rate_hz: 1000.0,
            interpolation: Interpolation::Pchip,
            policy: LimitPolicy::Reject,
            speed: 1.0,
        }
    }
}

/// A trajectory and the proof that every sample respects the limits.
#[derive(Debug, Clone)]
pub struct Proved {
    pub trajectory: Trajectory,
    pub report: ProofReport,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BuildError {
    #[error("the motion has no JointDisplacement component")]
    NoJointData,
    #[error("the control rate must be a number in (0, {MAX_RATE_HZ}] Hz, not {0}")]
    Rate(f64),
    #[error("the playback speed must be a positive number, not {0}")]
    Speed(f64),
    #[error("the motion has {num_parts} columns but the mapping names {mapped}")]
    Columns { num_parts: usize, mapped: usize },
    #[error("the motion would last {0} s; at most {MAX_DURATION_S} s is accepted")]
    TooLong(f64),
    #[error("the motion has no frames")]
    Empty,
    #[error("frame {row}: time {time} s does not come after the previous frame's")]
    Times { row: usize, time: f64 },
    #[error("frame {row}, column {column}: {value} is not a finite number")]
    NonFinite {
        row: usize,
        column: usize,
        value: f64,
    },
    /// The proof failed (after clamping or retiming when the policy asked for it).
    #[error("{0}")]
    Refused(Box<ProofReport>),
}

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
        "`{dof}` jumps where the loop closes: {measure} {value} from the last tick into the first is outside [{lower}, {upper}]; a looped motion must end where it starts, with the same velocity"
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

    /// Positions held after the last tick.
    pub fn final_positions(&self) -> &[f64] {
        &self.rest
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

/// Resamples `motion`'s joint displacement onto `options.rate_hz` and proves it.
pub fn build(
    joints: &JointSet,
    motion: &Motion,
    map: &ColumnMap,
    options: &Options,
) -> Result<Proved, BuildError> {
    let seq = motion.joint_displacement().ok_or(BuildError::NoJointData)?;
    build_values(joints, seq, map, options)
}

/// [`build`] for a bare `MultiValueSeq`.
pub fn build_values(
    joints: &JointSet,
    seq: &MultiValueSeq,
    map: &ColumnMap,
    options: &Options,
) -> Result<Proved, BuildError> {
    let rate = options.rate_hz;
    if !(rate > 0.0 && rate <= MAX_RATE_HZ) {
        return Err(BuildError::Rate(rate));
    }
    if !(options.speed > 0.0 && options.speed.is_finite()) {
        return Err(BuildError::Speed(options.speed));
    }
    let cols = seq.num_parts;
    if map.len() != cols {
        return Err(BuildError::Columns {
            num_parts: cols,
            mapped: map.len(),
        });
    }
    let rows = seq.values.len().checked_div(cols).unwrap_or(0);
    if rows == 0 {
        return Err(BuildError::Empty);
    }
    let values = seq.values[..rows * cols].to_vec();
    if let Some(at) = values.iter().position(|v| !v.is_finite()) {
        return Err(BuildError::NonFinite {
            row: at / cols,
            column: at % cols,
            value: values[at],
        });
    }
    let times = knot_times(&seq.timing, rows, options.speed)?;
    let mut report_meta = proof::Meta {
        rate_hz: rate,
        interpolation: options.interpolation,
        policy: options.policy,
        speed: options.speed,
        clamped: Vec::new(),
        retimed: None,
    };
    let mut values = values;
    if options.policy == LimitPolicy::Clamp {
        report_meta.clamped = proof::clamp(joints, map.columns(), &times, &mut values);
    }
    // Mimic followers get their columns from their leaders after any clamping, so a clamped
    // leader moves its followers and the proof sees every follower as commanded.
    let (columns, values) = super::mimic::extend(joints, map, values);
    let knots = |times: Vec<f64>, values: Vec<f64>| {
        Knots::new(
            options.interpolation,
            times,
            columns.clone(),
            values,
            joints,
        )
    };
    let mut k = knots(times, values);
    let mut report = proof::prove(joints, &k, &report_meta);
    if options.policy == LimitPolicy::Retime {
        // The factor each crossing needs is exact for the limits of the interpolant and close for
        // the steps the drives see at the ends and corners: slow down again until the proof
        // passes, a few rounds at most.
        let source_times = k.times.clone();
        let mut total = 1.0;
        for _ in 0..RETIME_ROUNDS {
            let Some(factor) = proof::retime_factor(&report) else {
                break;
            };
            if report.passed() {
                break;
            }
            total *= factor;
            let times = source_times.iter().map(|t| t * total).collect();
            let values = std::mem::take(&mut k.values);
            k = knots(times, values);
            report_meta.retimed = Some(total);
            report = proof::prove(joints, &k, &report_meta);
        }
    }
    if !report.passed() {
        return Err(BuildError::Refused(Box::new(report)));
    }
    let mut trajectory = Trajectory::from_knots(k, rate);
    trajectory.judge_seam(joints);
    debug_assert_eq!(report.ticks, trajectory.ticks());
    Ok(Proved { trajectory, report })
}

/// Knot times relative to the first frame, divided by the speed; strictly increasing.
fn knot_times(timing: &Timing, rows: usize, speed: f64) -> Result<Vec<f64>, BuildError> {
    let mut times = Vec::with_capacity(rows);
    match timing {
        Timing::Fixed { frame_rate } => {
            if !(*frame_rate > 0.0 && frame_rate.is_finite()) {
                return Err(BuildError::Times {
                    row: 1,
                    time: 1.0 / frame_rate,
                });
            }
            // i / (rate · speed) computed from i, like the ticks.
            let scaled = frame_rate * speed;
            times.extend((0..rows).map(|i| i as f64 / scaled));
        }
        Timing::Timed { times: stamps, .. } => {
            let first = stamps.first().copied().unwrap_or(0.0);
            for row in 0..rows {
                let Some(&stamp) = stamps.get(row) else {
                    return Err(BuildError::Times {
                        row,
                        time: f64::NAN,
                    });
                };
                let t = (stamp - first) / speed;
                if !t.is_finite() || times.last().is_some_and(|&p| t <= p) {
                    return Err(BuildError::Times { row, time: stamp });
                }
                times.push(t);
            }
        }
    }
    if let Some(&end) = times.last()
        && (end.is_nan() || end > MAX_DURATION_S)
    {
        return Err(BuildError::TooLong(end));
    }
    Ok(times)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trajectory::Quantity;
    use crate::trajectory::tests::demo_joints;

    /// A 6-column motion for the demo arm's driven DOFs: `f(t)` on column 0, rest at 0 (gripper
    /// at 0.02).
    fn motion(times: &[f64], f: impl Fn(f64) -> f64) -> MultiValueSeq {
        let mut values = Vec::new();
        for &t in times {
            values.extend([f(t), 0.0, 0.0, 0.0, 0.0, 0.02]);
        }
        MultiValueSeq {
            num_parts: 6,
            timing: Timing::Timed {
                times: times.to_vec(),
                frame_rate: None,
            },
            values,
        }
    }

    fn options(interpolation: Interpolation, policy: LimitPolicy) -> Options {
        Options {
            rate_hz: 1000.0,
            interpolation,
            policy,
            speed: 1.0,
        }
    }

    fn samples(t: &Trajectory) -> Vec<Vec<Setpoint>> {
        let mut cursor = Cursor::default();
        (0..t.ticks())
            .map(|k| {
                let mut out = vec![Setpoint::default(); t.dofs()];
                t.sample(&mut cursor, k, &mut out);
                out
            })
            .collect()
    }

    /// A smooth bump that starts and ends at rest.
    fn bump(t: f64) -> f64 {
        0.5 * (1.0 - (std::f64::consts::PI * t).cos())
    }

    /// The demo arm without velocity and acceleration limits, to test sampling alone.
    fn relaxed_joints() -> JointSet {
        let mut joints = demo_joints();
        for d in &mut joints.dofs {
            d.limits.velocity = crate::robot::Limits::UNBOUNDED;
            d.limits.acceleration = crate::robot::Limits::UNBOUNDED;
        }
        joints
    }

    #[test]
    fn passes_through_the_samples_and_holds_unmapped_dofs() {
        let joints = relaxed_joints();
        let map = ColumnMap::in_dof_order(&joints, 6).unwrap();
        let times: Vec<f64> = (0..=20).map(|i| i as f64 / 10.0).collect();
        let seq = motion(&times, bump);
        for interp in [
            Interpolation::Hold,
            Interpolation::Linear,
            Interpolation::Pchip,
            Interpolation::Cubic,
        ] {
            let mut o = options(interp, LimitPolicy::Reject);
            o.rate_hz = 100.0;
            let proved = build_values(&joints, &seq, &map, &o).unwrap();
            let s = samples(&proved.trajectory);
            assert_eq!(s.len(), 201);
            for &t in &times {
                let k = (t * 100.0).round() as usize;
                assert!(
                    (s[k][0].position - bump(t)).abs() < 1e-12,
                    "{interp:?} at {t}"
                );
            }
            // The locked brake holds its initial position; the gripper follows its column.
            assert_eq!(s[57][6].position, 0.25);
            assert_eq!(s[57][5].position, 0.02);
        }
    }

    #[test]
    fn column_positions_agree_with_full_samples() {
        let joints = JointSet::unconstrained(7);
        let map = ColumnMap::by_name(&joints, &["c6", "c0", "c1", "c2", "c3", "c4"], 6).unwrap();
        let times: Vec<f64> = (0..=30).map(|i| (i as f64 * 0.037).powf(1.2)).collect();
        let seq = motion(&times, |t| (3.0 * t).sin());
        for interp in [
            Interpolation::Hold,
            Interpolation::Linear,
            Interpolation::Pchip,
            Interpolation::Cubic,
        ] {
            let t = build_values(&joints, &seq, &map, &options(interp, LimitPolicy::Reject))
                .unwrap()
                .trajectory;
            let (mut c1, mut c2) = (Cursor::default(), Cursor::default());
            let mut full = vec![Setpoint::default(); t.dofs()];
            let mut cols = [0.0; 6];
            for k in 0..t.ticks() + 3 {
                t.sample(&mut c1, k, &mut full);
                t.column_positions(&mut c2, k, &mut cols).unwrap();
                for (c, &i) in map.columns().iter().enumerate() {
                    assert!(
                        (cols[c] - full[i].position).abs() < 1e-12,
                        "{interp:?} tick {k}"
                    );
                }
            }
        }
    }

    #[test]
    fn ticks_land_on_k_over_rate_and_the_end_is_at_rest() {
        let joints = demo_joints();
        let map = ColumnMap::in_dof_order(&joints, 6).unwrap();
        let seq = MultiValueSeq {
            num_parts: 6,
            timing: Timing::Fixed { frame_rate: 500.0 },
            values: (0..6701)
                .flat_map(|i| [bump(i as f64 / 6700.0) * 0.1, 0.0, 0.0, 0.0, 0.0, 0.02])
                .collect(),
        };
        let proved = build_values(
            &joints,
            &seq,
            &map,
            &options(Interpolation::Pchip, LimitPolicy::Reject),
        )
        .unwrap();
        // 6701 frames at 500 Hz end at 13.4 s: ticks 0..=13400.
        assert_eq!(proved.trajectory.ticks(), 13401);
        let mut out = vec![Setpoint::default(); 7];
        proved
            .trajectory
            .sample(&mut Cursor::default(), 1_000_000, &mut out);
        assert_eq!(out[0].velocity, 0.0);
        assert!((out[0].position - 0.1).abs() < 1e-12);
    }

    #[test]
    fn random_access_matches_in_order_sampling() {
        let joints = relaxed_joints();
        let map = ColumnMap::in_dof_order(&joints, 6).unwrap();
        let times: Vec<f64> = (0..=40).map(|i| (i as f64 * 0.05).powf(1.1)).collect();
        let proved = build_values(
            &joints,
            &motion(&times, |t| 0.3 * bump(t)),
            &map,
            &Options::default(),
        )
        .unwrap();
        let in_order = samples(&proved.trajectory);
        let mut cursor = Cursor::default();
        let mut out = vec![Setpoint::default(); 7];
        for k in [900u64, 3, 1500, 0, 1200, 1201, 17] {
            proved.trajectory.sample(&mut cursor, k, &mut out);
            assert_eq!(out, in_order[k as usize]);
        }
    }

    #[test]
    fn rejects_naming_joint_time_value_and_limit() {
        let joints = demo_joints();
        let map = ColumnMap::in_dof_order(&joints, 6).unwrap();
        let times: Vec<f64> = (0..=20).map(|i| i as f64 / 10.0).collect();
        // Peaks at 3.0 rad at t = 1 s: above base_yaw's 2.8.
        let err = build_values(
            &joints,
            &motion(&times, |t| 3.0 * bump(t)),
            &map,
            &options(Interpolation::Pchip, LimitPolicy::Reject),
        )
        .unwrap_err();
        let BuildError::Refused(report) = err else {
            panic!("{err:?}")
        };
        let v = report
            .violations
            .iter()
            .find(|v| v.quantity == Quantity::Position)
            .unwrap();
        assert_eq!(v.dof, "base_yaw");
        assert!((v.time_s - 1.0).abs() < 1e-9, "{v}");
        assert!((v.value - 3.0).abs() < 1e-9);
        assert_eq!(v.limit, 2.8);
        let text = report.to_string();
        assert!(
            text.contains("base_yaw: position 3.000000 at t=1.0000 s is above the limit 2.8"),
            "{text}"
        );
        assert_eq!(report.to_json()["violations"][0]["joint"], "base_yaw");
    }

    #[test]
    fn retime_slows_down_just_enough() {
        let joints = demo_joints();
        let map = ColumnMap::in_dof_order(&joints, 6).unwrap();
        let times: Vec<f64> = (0..=50).map(|i| i as f64 * 0.01).collect();
        // 2 rad in 0.5 s: peak velocity 2π rad/s, way above 2.
        let seq = motion(&times, |t| 2.0 * bump(2.0 * t) - 1.0);
        let refused = build_values(
            &joints,
            &seq,
            &map,
            &options(Interpolation::Pchip, LimitPolicy::Reject),
        );
        assert!(matches!(refused, Err(BuildError::Refused(_))));
        let proved = build_values(
            &joints,
            &seq,
            &map,
            &options(Interpolation::Pchip, LimitPolicy::Retime),
        )
        .unwrap();
        let factor = proved.report.retimed.unwrap();
        assert!(factor > 3.0 && factor < 4.0, "{factor}");
        let peak_v = proved.report.dofs[0].velocity.max;
        let peak_a = proved.report.dofs[0].acceleration.max;
        // The binding limit is met with (almost) no slack.
        assert!(
            (peak_v / 2.0).max(peak_a / 8.0) > 0.999,
            "{peak_v} {peak_a}"
        );
        assert!(proved.report.to_string().contains("retimed"));
    }

    #[test]
    fn clamp_reports_what_it_moved() {
        let joints = demo_joints();
        let map = ColumnMap::in_dof_order(&joints, 6).unwrap();
        let times: Vec<f64> = (0..=40).map(|i| i as f64 * 0.2).collect();
        let seq = motion(&times, |t| 2.9 * bump(t / 4.0));
        let proved = build_values(
            &joints,
            &seq,
            &map,
            &options(Interpolation::Pchip, LimitPolicy::Clamp),
        )
        .unwrap();
        let c = &proved.report.clamped[0];
        assert_eq!(c.dof, "base_yaw");
        assert!(c.samples > 0 && c.max_change > 0.0 && c.max_change <= 0.1 + 1e-12);
        assert!(proved.report.dofs[0].position.max <= 2.8);
    }

    #[test]
    fn speed_scales_time() {
        let joints = demo_joints();
        let map = ColumnMap::in_dof_order(&joints, 6).unwrap();
        let times: Vec<f64> = (0..=20).map(|i| i as f64 / 10.0).collect();
        let seq = motion(&times, |t| 0.2 * bump(t));
        let mut o = Options {
            speed: 0.5,
            ..Options::default()
        };
        let slow = build_values(&joints, &seq, &map, &o).unwrap();
        assert_eq!(slow.trajectory.ticks(), 4001);
        assert_eq!(slow.report.duration_s, 4.0);
        o.speed = 0.0;
        assert!(matches!(
            build_values(&joints, &seq, &map, &o),
            Err(BuildError::Speed(_))
        ));
    }

    #[test]
    fn starting_while_moving_is_a_step_the_proof_sees() {
        let joints = demo_joints();
        let map = ColumnMap::in_dof_order(&joints, 6).unwrap();
        let times: Vec<f64> = (0..=10).map(|i| i as f64 * 0.1).collect();
        // 0.1 rad/s from the first sample: a step of 100 rad/s² over one tick at 1 kHz.
        let err = build_values(
            &joints,
            &motion(&times, |t| 0.1 * t),
            &map,
            &options(Interpolation::Linear, LimitPolicy::Reject),
        )
        .unwrap_err();
        let BuildError::Refused(report) = err else {
            panic!()
        };
        assert_eq!(report.violations[0].quantity, Quantity::Acceleration);
        assert_eq!(report.violations[0].time_s, 0.0);
    }
}
