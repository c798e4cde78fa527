//! The limit proof: every sample of every commanded DOF against its position, velocity and
//! acceleration limits.
//!
//! Each segment is a cubic, so the extrema of position, velocity and acceleration over the whole
//! segment are found analytically (at the ends, or where the derivative vanishes). That bounds
//! every tick sample inside the segment — and the motion between ticks — at a cost that does not
//! grow with the control rate. What the interpolant itself does not show is added as the motors
//! see it at the control rate: hold's position steps (a step over one tick), linear's velocity
//! steps at the knots, and the step from rest into the first sample and back to rest after the
//! last one.

use crate::diag::Num;
use std::fmt;

use serde_json::{Value, json};

use super::interp::Extremes;
use super::track::Knots;
use super::{Cursor, DofLimits, Interpolation, JointSet, LimitPolicy};
use crate::robot::Limits;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantity {
    Position,
    Velocity,
    Acceleration,
    /// Only tightened by config; the proof has no effort to check.
    Effort,
    /// Where a quick stop at the quick-stop deceleration from a tick would end (stoppable
    /// everywhere: inside the position limits).
    QuickStop,
}

impl Quantity {
    pub fn as_str(self) -> &'static str {
        match self {
            Quantity::Position => "position",
            Quantity::Velocity => "velocity",
            Quantity::Acceleration => "acceleration",
            Quantity::Effort => "effort",
            Quantity::QuickStop => "quick stop",
        }
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A limit some sample crosses: the worst value and when, and when it first happens.
#[derive(Debug, Clone, PartialEq)]
pub struct Violation {
    pub dof: String,
    pub quantity: Quantity,
    /// Time of the worst value (seconds from the motion's start, as played).
    pub time_s: f64,
    pub value: f64,
    /// The bound crossed (lower or upper).
    pub limit: f64,
    /// Time the limit is first crossed.
    pub first_s: f64,
    /// Uniform slow-down that would fix every crossing of this limit (infinite when slowing down
    /// cannot help).
    retime_need: f64,
}

/// What the clamp policy changed on one DOF.
#[derive(Debug, Clone, PartialEq)]
pub struct Clamped {
    pub dof: String,
    /// Source samples moved onto the limit.
    pub samples: usize,
    pub first_s: f64,
    /// Largest distance a sample was moved.
    pub max_change: f64,
}

/// The range each quantity covers on one DOF over the whole motion.
#[derive(Debug, Clone, PartialEq)]
pub struct DofSummary {
    pub dof: String,
    /// Not driven by the motion: holds its initial position.
    pub held: bool,
    pub limits: DofLimits,
    pub position: Extremes,
    pub velocity: Extremes,
    pub acceleration: Extremes,
}

/// The outcome of the proof, for operators (`Display`) and scripts ([`ProofReport::to_json`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ProofReport {
    pub rate_hz: f64,
    pub interpolation: Interpolation,
    pub policy: LimitPolicy,
    pub speed: f64,
    /// Motion duration as played (last source sample), seconds.
    pub duration_s: f64,
    /// Ticks of the trajectory (0 when refused).
    pub ticks: u64,
    pub dofs: Vec<DofSummary>,
    /// Empty when the motion passed.
    pub violations: Vec<Violation>,
    pub clamped: Vec<Clamped>,
    /// The slow-down factor the retime policy applied (durations multiplied by it).
    pub retimed: Option<f64>,
}

/// What the build tells the proof besides the knots.
pub(super) struct Meta {
    pub rate_hz: f64,
    pub interpolation: Interpolation,
    pub policy: LimitPolicy,
    pub speed: f64,
    pub clamped: Vec<Clamped>,
    pub retimed: Option<f64>,
}

impl ProofReport {
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }

    /// One line for a motion list: `ok`, or the first violation and how many more.
    pub fn summary(&self) -> String {
        match self.violations.first() {
            None => {
                let mut s = "ok".to_string();
                if let Some(f) = self.retimed {
                    s.push_str(&format!(" (retimed ×{f:.4})"));
                }
                if !self.clamped.is_empty() {
                    s.push_str(&format!(" (clamped {} joints)", self.clamped.len()));
                }
                s
            }
            Some(v) => {
                let more = self.violations.len() - 1;
                if more == 0 {
                    v.to_string()
                } else {
                    format!("{v} (and {more} more)")
                }
            }
        }
    }

    pub fn to_json(&self) -> Value {
        let range = |e: &Extremes| json!([finite(e.min), finite(e.max)]);
        let limits = |l: &Limits| json!([finite(l.lower), finite(l.upper)]);
        json!({
            "ok": self.passed(),
            "rate_hz": self.rate_hz,
            "interpolation": self.interpolation.as_str(),
            "policy": self.policy.as_str(),
            "speed": self.speed,
            "duration_s": self.duration_s,
            "ticks": self.ticks,
            "retimed": self.retimed,
            "violations": self.violations.iter().map(|v| json!({
                "joint": v.dof,
                "quantity": v.quantity.as_str(),
                "time_s": v.time_s,
                "value": v.value,
                "limit": v.limit,
                "first_s": v.first_s,
            })).collect::<Vec<_>>(),
            "clamped": self.clamped.iter().map(|c| json!({
                "joint": c.dof,
                "samples": c.samples,
                "first_s": c.first_s,
                "max_change": c.max_change,
            })).collect::<Vec<_>>(),
            "joints": self.dofs.iter().map(|d| json!({
                "name": d.dof,
                "held": d.held,
                "position": range(&d.position),
                "velocity": range(&d.velocity),
                "acceleration": range(&d.acceleration),
                "limits": {
                    "position": limits(&d.limits.position),
                    "velocity": limits(&d.limits.velocity),
                    "acceleration": limits(&d.limits.acceleration),
                },
            })).collect::<Vec<_>>(),
        })
    }
}

/// JSON has no infinities: an unbounded side is `null`, as in inspect-json.md.
fn finite(x: f64) -> Value {
    if x.is_finite() { json!(x) } else { Value::Null }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let side = if self.value > self.limit {
            "above"
        } else {
            "below"
        };
        if self.quantity == Quantity::QuickStop {
            write!(
                f,
                "{}: a quick stop from the sample at t={:.4} s would end at {}, {side} the position limit {}",
                self.dof,
                self.time_s,
                number(self.value),
                self.limit
            )?;
            if self.first_s < self.time_s {
                write!(f, " (first from t={:.4} s)", self.first_s)?;
            }
            return Ok(());
        }
        write!(
            f,
            "{}: {} {} at t={:.4} s is {side} the limit {}",
            self.dof,
            self.quantity,
            number(self.value),
            self.time_s,
            self.limit
        )?;
        if self.first_s < self.time_s {
            write!(f, " (first crossed at t={:.4} s)", self.first_s)?;
        }
        Ok(())
    }
}

/// A playback speed for people: at most four decimals, trailing zeros dropped (`1.2615`, `0.5`,
/// `1`) — a retimed speed is a quotient whose last digits say nothing.
pub fn speed_text(speed: f64) -> String {
    let text = format!("{speed:.4}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text.is_empty() || text == "-" {
        "0".into()
    } else {
        text.into()
    }
}

impl ProofReport {
    /// What the policy changed: samples clamped, the motion slowed down.
    fn write_changes(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in &self.clamped {
            writeln!(
                f,
                "clamped: {}: {} samples moved onto the position limit (first at t={:.4} s, by up to {:.6})",
                c.dof,
                c.samples,
                Num(c.first_s),
                Num(c.max_change)
            )?;
        }
        if let Some(factor) = self.retimed {
            writeln!(
                f,
                "retimed: slowed down uniformly by ×{factor:.6} to meet the velocity and acceleration limits"
            )?;
        }
        Ok(())
    }
}

impl fmt::Display for ProofReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:.4} s at {} Hz ({} ticks), {} interpolation, speed {}, policy {}",
            self.duration_s,
            self.rate_hz,
            self.ticks,
            self.interpolation.as_str(),
            speed_text(self.speed),
            self.policy.as_str()
        )?;
        // A table: per quantity the range the motion uses and the limits, units in the header
        // (rad for turning joints, m for sliding ones).
        let range = |lo: f64, hi: f64, decimals: usize| {
            format!("{:.decimals$} … {:.decimals$}", Num(lo), Num(hi))
        };
        let limits = |l: Limits| match show(l).strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            Some(inner) => inner.replacen(", ", " … ", 1),
            None => show(l),
        };
        let rows: Vec<[String; 7]> = self
            .dofs
            .iter()
            .filter(|d| !d.held)
            .map(|d| {
                [
                    d.dof.clone(),
                    range(d.position.min, d.position.max, 4),
                    limits(d.limits.position),
                    range(d.velocity.min, d.velocity.max, 4),
                    limits(d.limits.velocity),
                    range(d.acceleration.min, d.acceleration.max, 3),
                    limits(d.limits.acceleration),
                ]
            })
            .collect();
        let header = [
            [
                "DOF",
                "position",
                "limits",
                "velocity",
                "limits",
                "acceleration",
                "limits",
            ],
            ["", "rad or m", "", "rad/s or m/s", "", "rad/s² or m/s²", ""],
        ];
        let mut widths = [0usize; 7];
        for row in header
            .iter()
            .map(|h| h.map(String::from))
            .chain(rows.iter().cloned())
        {
            for (w, cell) in widths.iter_mut().zip(&row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |f: &mut fmt::Formatter<'_>, cells: &[String; 7]| -> fmt::Result {
            let mut text = String::new();
            for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
                // Quantities apart by three spaces, a range and its limits by two.
                text.push_str(if i % 2 == 1 { "   " } else { "  " });
                text.push_str(cell);
                text.extend(std::iter::repeat_n(
                    ' ',
                    w.saturating_sub(cell.chars().count()),
                ));
            }
            writeln!(f, "{}", text.trim_end())
        };
        if !rows.is_empty() {
            for h in &header {
                line(f, &h.map(String::from))?;
            }
            for row in &rows {
                line(f, row)?;
            }
        }
        let width = self.dofs.iter().map(|d| d.dof.len()).max().unwrap_or(0);
        for d in self.dofs.iter().filter(|d| d.held) {
            writeln!(
                f,
                "  {:width$}  holds {:.6} (not in the motion)",
                d.dof,
                Num(d.position.min)
            )?;
        }
        self.write_changes(f)?;
        if self.passed() {
            write!(f, "ok: every sample is within the limits")
        } else {
            write!(f, "refused: {} limit(s) crossed", self.violations.len())?;
            for v in &self.violations {
                write!(f, "\n  {v}")?;
            }
            if self.policy == LimitPolicy::Retime
                && self.violations.iter().any(|v| v.retime_need.is_infinite())
            {
                write!(
                    f,
                    "\n  (slowing down cannot fix position limits or hold's steps)"
                )?;
            }
            Ok(())
        }
    }
}

/// Six decimals, or scientific notation where six decimals would hide the value.
fn number(x: f64) -> String {
    if x == 0.0 || (1e-3..1e7).contains(&x.abs()) {
        format!("{x:.6}")
    } else {
        format!("{x:.4e}")
    }
}

fn show(l: Limits) -> String {
    if l.is_unbounded() {
        "unbounded".to_string()
    } else {
        format!("[{}, {}]", Num(l.lower), Num(l.upper))
    }
}

/// Accumulates the proof of one DOF.
struct DofProof {
    summary: DofSummary,
    /// Per quantity and side (lower, upper): the violation so far.
    found: [[Option<Violation>; 2]; 5],
}

impl DofProof {
    fn new(name: &str, limits: DofLimits, held: bool, t: f64, position: f64) -> DofProof {
        DofProof {
            summary: DofSummary {
                dof: name.to_string(),
                held,
                limits,
                position: Extremes::at(t, position),
                velocity: Extremes::at(t, 0.0),
                acceleration: Extremes::at(t, 0.0),
            },
            found: Default::default(),
        }
    }

    /// Takes in the extremes `e` of `quantity` over an interval starting at `t0`. `exponent` says
    /// how the values scale when the motion is slowed down by `s`: by `s^-exponent` (0: not at all).
    #[inline]
    fn check(&mut self, quantity: Quantity, t0: f64, e: Extremes, exponent: i32) {
        self.check_scaled(quantity, t0, e, Scaling::Power(exponent));
    }

    #[inline]
    fn check_scaled(&mut self, quantity: Quantity, t0: f64, e: Extremes, scaling: Scaling) {
        let (limits, range) = match quantity {
            Quantity::Position => (self.summary.limits.position, &mut self.summary.position),
            Quantity::Velocity => (self.summary.limits.velocity, &mut self.summary.velocity),
            Quantity::Acceleration => (
                self.summary.limits.acceleration,
                &mut self.summary.acceleration,
            ),
            Quantity::Effort | Quantity::QuickStop => return,
        };
        range.include(t0 + e.min_at, e.min);
        range.include(t0 + e.max_at, e.max);
        // The common case, and false for NaN, which then gets reported below.
        if e.min >= limits.lower && e.max <= limits.upper {
            return;
        }
        let sides = [
            (e.min < limits.lower, e.min, t0 + e.min_at, limits.lower),
            (e.max > limits.upper, e.max, t0 + e.max_at, limits.upper),
        ];
        for (side, (crossed, value, t, limit)) in sides.into_iter().enumerate() {
            // NaN compares false: a NaN never passes silently either.
            if !(crossed || value.is_nan()) {
                continue;
            }
            let need = scaling.need(value, limit);
            self.breach(quantity, side, t, value, limit, need);
        }
    }

    /// `value` of `quantity` at `t` crosses `limit` on `side` (0 lower, 1 upper); slowing the
    /// motion down by `need` would fix it (infinite: it cannot).
    fn breach(
        &mut self,
        quantity: Quantity,
        side: usize,
        t: f64,
        value: f64,
        limit: f64,
        need: f64,
    ) {
        let Some(slot) = self
            .found
            .get_mut(quantity as usize)
            .and_then(|q| q.get_mut(side))
        else {
            return;
        };
        match slot {
            None => {
                *slot = Some(Violation {
                    dof: self.summary.dof.clone(),
                    quantity,
                    time_s: t,
                    value,
                    limit,
                    first_s: t,
                    retime_need: need,
                })
            }
            Some(v) => {
                if (value - limit).abs() > (v.value - v.limit).abs() {
                    v.value = value;
                    v.time_s = t;
                }
                v.retime_need = v.retime_need.max(need);
            }
        }
    }

    fn check_point(&mut self, quantity: Quantity, t: f64, value: f64, exponent: i32) {
        self.check(quantity, t, Extremes::at(0.0, value), exponent);
    }
}

/// How a checked value shrinks when the motion is slowed down uniformly by `f`.
#[derive(Clone, Copy)]
enum Scaling {
    /// As `f^-exponent` (0: not at all).
    Power(i32),
    /// A step of velocity over one tick plus what the acceleration adds within it:
    /// `step / f + (value − step) / f²`.
    StepAndCurve { step: f64 },
}

impl Scaling {
    /// The slow-down that brings `value` onto `limit` (infinite when slowing down cannot).
    fn need(self, value: f64, limit: f64) -> f64 {
        if limit == 0.0 || value.is_nan() || limit.signum() != value.signum() {
            return f64::INFINITY;
        }
        match self {
            Scaling::Power(0) => f64::INFINITY,
            Scaling::Power(exponent) => (value / limit).powf(1.0 / f64::from(exponent)),
            Scaling::StepAndCurve { step } => {
                // The larger root of L f² − s f − c = 0, signs taken along the limit's.
                let (l, s, c) = (
                    limit.abs(),
                    step * limit.signum(),
                    (value - step) * limit.signum(),
                );
                let disc = s * s + 4.0 * l * c;
                if disc < 0.0 {
                    1.0
                } else {
                    ((s + disc.sqrt()) / (2.0 * l)).max(1.0)
                }
            }
        }
    }
}

pub(super) fn prove(joints: &JointSet, k: &Knots, meta: &Meta) -> ProofReport {
    let mut proofs: Vec<Option<DofProof>> = (0..joints.len()).map(|_| None).collect();
    for &(i, p) in &k.held {
        if let Some(d) = joints.dofs.get(i) {
            let mut proof = DofProof::new(&d.name, d.limits, true, 0.0, p);
            proof.check_point(Quantity::Position, 0.0, p, 0);
            if let Some(slot) = proofs.get_mut(i) {
                *slot = Some(proof);
            }
        }
    }
    let rate = meta.rate_hz;
    let rows = k.rows();
    // One proof per column; walked row by row, in memory order, whatever the number of columns.
    let mut columns: Vec<(usize, DofProof)> = k
        .columns
        .iter()
        .enumerate()
        .filter_map(|(c, &i)| {
            let d = joints.dofs.get(i)?;
            let first = k.values[c];
            let mut proof = DofProof::new(&d.name, d.limits, false, 0.0, first);
            proof.check_point(Quantity::Position, 0.0, first, 0);
            Some((c, proof))
        })
        .collect();
    for seg in 0..rows.saturating_sub(1) {
        let t0 = k.times[seg];
        let t1 = k.times[seg + 1];
        let h = t1 - t0;
        let inv = 1.0 / h;
        for (c, proof) in &mut columns {
            let c = *c;
            let cubic = k.cubic_inv(seg, c, inv);
            let [position, velocity, acceleration] = cubic.ranges(h);
            proof.check(Quantity::Position, t0, position, 0);
            proof.check(Quantity::Velocity, t0, velocity, 1);
            proof.check(Quantity::Acceleration, t0, acceleration, 2);
        }
    }
    let ticks = super::track::ticks_until(k.duration(), rate);
    match k.interpolation {
        Interpolation::Hold | Interpolation::Linear => window_checks(k, rate, ticks, &mut columns),
        Interpolation::Pchip | Interpolation::Cubic => end_checks(k, rate, ticks, &mut columns),
    }
    stop_checks(joints, k, rate, ticks, &mut columns);
    for (c, proof) in columns {
        if let Some(slot) = k.columns.get(c).and_then(|&i| proofs.get_mut(i)) {
            *slot = Some(proof);
        }
    }
    let mut dofs = Vec::with_capacity(joints.len());
    let mut violations = Vec::new();
    for proof in proofs.into_iter().flatten() {
        for v in proof.found.into_iter().flatten().flatten() {
            violations.push(v);
        }
        dofs.push(proof.summary);
    }
    violations.sort_by(|a, b| a.first_s.total_cmp(&b.first_s));
    ProofReport {
        rate_hz: rate,
        interpolation: meta.interpolation,
        policy: meta.policy,
        speed: meta.speed,
        duration_s: k.duration(),
        // Counted here rather than by the caller so a refused motion's report has it too.
        ticks,
        dofs,
        violations,
        clamped: meta.clamped.clone(),
        retimed: meta.retimed,
    }
}

/// The motion as the drives see it: at rest at the first sample before it starts, and at rest at
/// the last tick's position after the last tick. Evaluated with the trajectory's own formulas.
#[derive(Clone)]
struct Extended<'a> {
    knots: &'a Knots,
    last_tick: f64,
    cursor: Cursor,
    first: Vec<f64>,
    last: Vec<f64>,
}

impl<'a> Extended<'a> {
    fn new(knots: &'a Knots, last_tick: f64) -> Extended<'a> {
        let cols = knots.cols();
        let mut e = Extended {
            knots,
            last_tick,
            cursor: Cursor::default(),
            first: Vec::new(),
            last: Vec::new(),
        };
        let (mut first, mut last, mut ignore) = (vec![0.0; cols], vec![0.0; cols], vec![0.0; cols]);
        e.at(0.0, &mut first, &mut ignore);
        e.at(last_tick, &mut last, &mut ignore);
        e.first = first;
        e.last = last;
        e.cursor = Cursor::default();
        e
    }

    /// Positions and velocity fields of every column at `t` (times in increasing order).
    fn at(&mut self, t: f64, position: &mut [f64], velocity: &mut [f64]) {
        if t < 0.0 && !self.first.is_empty() {
            position.copy_from_slice(&self.first);
            velocity.fill(0.0);
        } else if t > self.last_tick && !self.last.is_empty() {
            position.copy_from_slice(&self.last);
            velocity.fill(0.0);
        } else {
            self.knots
                .each_column(&mut self.cursor, t.max(0.0), |c, s| {
                    position[c] = s.position;
                    velocity[c] = s.velocity;
                });
        }
    }
}

/// Hold and linear, as the drives see them at any phase of the tick grid: for every time `τ`,
/// the finite differences `(p(τ) − p(τ−dt)) / dt`, `(p(τ+dt) − 2 p(τ) + p(τ−dt)) / dt²` and the
/// velocity field's step `(v(τ) − v(τ−dt)) / dt`, with the motion at rest before its start and
/// after its last tick. Each is piecewise linear (linear's differences of positions) or piecewise
/// constant (hold's, and linear's velocity steps) in `τ`, changing only where `τ` or `τ ± dt`
/// meets a knot: so the linear pieces are checked at those breakpoints and the constant ones
/// between each two (intervals shorter than a millionth of a tick, rounding's, are skipped).
/// Several steps or corners inside one tick add up, as they do on the wire.
fn window_checks(k: &Knots, rate: f64, ticks: u64, columns: &mut [(usize, DofProof)]) {
    let dt = 1.0 / rate;
    let last_tick = ticks.saturating_sub(1) as f64 / rate;
    let cols = k.cols();
    let hold = k.interpolation == Interpolation::Hold;
    // Slowing down separates a hold's steps but never shrinks one.
    let exponent = if hold { 0 } else { 1 };
    let knots = k.times.partition_point(|&t| t <= last_tick).max(1);
    let point = |i: usize| if i < knots { k.times[i] } else { last_tick };
    let count = knots + 1;
    let offsets = [-dt, 0.0, dt];
    let extended = Extended::new(k, last_tick);
    let mut views = [extended.clone(), extended.clone(), extended];
    let mut position = [vec![0.0; cols], vec![0.0; cols], vec![0.0; cols]];
    let mut velocity = [vec![0.0; cols], vec![0.0; cols], vec![0.0; cols]];
    let (rate2, eps) = (rate * rate, dt * 1e-6);
    let mut evaluate = |tau: f64, breakpoint: bool| {
        for (((view, p), v), offset) in views
            .iter_mut()
            .zip(&mut position)
            .zip(&mut velocity)
            .zip(offsets)
        {
            view.at(tau + offset, p, v);
        }
        let [behind, now, ahead] = &position;
        let [v_behind, v_now, _] = &velocity;
        for (c, proof) in columns.iter_mut() {
            let c = *c;
            if hold != breakpoint {
                let (b, n, a) = (behind[c], now[c], ahead[c]);
                proof.check_point(Quantity::Velocity, tau, (n - b) * rate, exponent);
                proof.check_point(
                    Quantity::Acceleration,
                    tau,
                    (a - 2.0 * n + b) * rate2,
                    exponent,
                );
            }
            if !hold && !breakpoint {
                let step = (v_now[c] - v_behind[c]) * rate;
                proof.check_point(Quantity::Acceleration, tau, step, 1);
            }
        }
    };
    // The breakpoints in increasing order: a merge of the knots shifted by -dt, 0 and +dt.
    let mut next = [0usize; 3];
    let mut previous = f64::NEG_INFINITY;
    loop {
        let mut best: Option<(f64, usize)> = None;
        for (j, (&i, offset)) in next.iter().zip(offsets).enumerate() {
            if i < count {
                let b = point(i) + offset;
                if best.is_none_or(|(x, _)| b < x) {
                    best = Some((b, j));
                }
            }
        }
        let Some((b, j)) = best else { break };
        next[j] += 1;
        if b <= previous {
            continue;
        }
        if previous.is_finite() && b - previous > eps {
            evaluate(0.5 * (previous + b), false);
        }
        if !hold {
            evaluate(b, true);
        }
        previous = b;
    }
}

/// Pchip and cubic: the analytic bounds cover every finite difference inside the motion; at its
/// ends the drives see it start from rest and come back to rest, one tick each way. Checked at the
/// tick times: the position steps into tick 1 and out of the last tick, and the velocity field's
/// steps from and to zero.
fn end_checks(k: &Knots, rate: f64, ticks: u64, columns: &mut [(usize, DofProof)]) {
    let dt = 1.0 / rate;
    let last_tick = ticks.saturating_sub(1) as f64 / rate;
    let cols = k.cols();
    let mut e = Extended::new(k, last_tick);
    let mut at = |t: f64| {
        let (mut p, mut v) = (vec![0.0; cols], vec![0.0; cols]);
        e.cursor = Cursor::default();
        e.at(t, &mut p, &mut v);
        (p, v)
    };
    let (p0, v0) = at(0.0);
    let (p1, _) = at(dt);
    let (p_before_last, _) = at(last_tick - dt);
    let (p_last, v_last) = at(last_tick);
    let rate2 = rate * rate;
    for (c, proof) in columns.iter_mut() {
        let c = *c;
        let a = Quantity::Acceleration;
        let (start, end) = (v0[c] * rate, -v_last[c] * rate);
        proof.check_point(a, 0.0, start, 1);
        proof.check_point(a, last_tick, end, 1);
        let mut steps = |t: f64, value: f64, step: f64| {
            let scaling = Scaling::StepAndCurve { step };
            proof.check_scaled(a, t, Extremes::at(0.0, value), scaling);
        };
        steps(0.0, (p1[c] - p0[c]) * rate2, start);
        steps(last_tick, (p_before_last[c] - p_last[c]) * rate2, end);
    }
}

/// Stoppable everywhere: from every tick of the motion as the drives see it, a quick stop at the
/// DOF's quick-stop deceleration ([`CommandedDof::quick_brakes`](super::CommandedDof)) ends inside
/// its position limits — computed as the loop's stop brakes, from the finite-difference velocity
/// into the tick ([`braking_distance`]), so the loop's guard never has to refuse what was proved.
/// A segment whose bound (its highest position plus the braking distance of the fastest velocity
/// in reach) is inside is passed whole; only the ticks of the others are evaluated, so the cost
/// follows the time spent near a limit, not the control rate.
fn stop_checks(
    joints: &JointSet,
    k: &Knots,
    rate: f64,
    ticks: u64,
    columns: &mut [(usize, DofProof)],
) {
    let dt = 1.0 / rate;
    let rows = k.rows();
    if rows < 2 || ticks == 0 {
        return;
    }
    let last_tick = (ticks - 1) as f64 / rate;
    let cols = k.cols();
    let mut e = Extended::new(k, last_tick);
    let (mut p, mut v) = (vec![0.0; cols], vec![0.0; cols]);
    let mut before = vec![0.0; cols];
    // Per column: the velocity range of each segment (for the windows reaching back one tick).
    let mut ranges = vec![(0.0f64, 0.0f64); (rows - 1) * cols];
    for seg in 0..rows - 1 {
        let h = k.times[seg + 1] - k.times[seg];
        for c in 0..cols {
            let [_, vel, _] = k.cubic_inv(seg, c, 1.0 / h).ranges(h);
            ranges[seg * cols + c] = (vel.min, vel.max);
        }
    }
    for (c, proof) in columns.iter_mut() {
        let c = *c;
        let Some(dof) = k.columns.get(c).and_then(|&i| joints.dofs.get(i)) else {
            continue;
        };
        let (brake_up, brake_down) = dof.quick_brakes();
        let limits = dof.limits.position;
        let sides = [
            (
                limits.lower.is_finite() && brake_down.is_finite(),
                brake_down,
            ),
            (limits.upper.is_finite() && brake_up.is_finite(), brake_up),
        ];
        if !sides[0].0 && !sides[1].0 {
            // Without a deceleration to respect, the stop halts at the limit at the latest.
            continue;
        }
        e.cursor = Cursor::default();
        let mut evaluated = f64::NEG_INFINITY;
        for seg in 0..rows - 1 {
            let (t0, t1) = (k.times[seg], k.times[seg + 1].min(last_tick));
            if t0 > last_tick {
                break;
            }
            let h = k.times[seg + 1] - k.times[seg];
            let [pos, _, _] = k.cubic_inv(seg, c, 1.0 / h).ranges(h);
            // The fastest the finite-difference velocity into a tick of this segment can be: the
            // velocity over the segment and the one tick before it (at rest before the start).
            let (mut vmin, mut vmax) = (0.0f64, 0.0f64);
            let mut j = seg;
            loop {
                let (lo, hi) = ranges[j * cols + c];
                (vmin, vmax) = (vmin.min(lo), vmax.max(hi));
                if j == 0 || k.times[j] <= t0 - dt {
                    break;
                }
                j -= 1;
            }
            let reach = |vel: f64, a: f64| vel * vel / (2.0 * a) + a * dt * dt / 8.0;
            let near_upper = sides[1].0 && pos.max + reach(vmax.max(0.0), brake_up) > limits.upper;
            let near_lower =
                sides[0].0 && pos.min - reach(vmin.min(0.0), brake_down) < limits.lower;
            if !(near_upper || near_lower) {
                continue;
            }
            let first = (t0 * rate).ceil().max(0.0) as u64;
            let last = ((t1 * rate).floor() as u64).min(ticks - 1);
            for tick in first..=last {
                let t = tick as f64 / rate;
                if t <= evaluated {
                    continue;
                }
                evaluated = t;
                e.at(t - dt, &mut before, &mut v);
                e.at(t, &mut p, &mut v);
                let at = p[c];
                let u = (at - before[c]) * rate;
                for (side, &(checked, a)) in sides.iter().enumerate() {
                    let moving = if side == 1 { u > 0.0 } else { u < 0.0 };
                    if !checked || !moving {
                        continue;
                    }
                    let travel = super::stop::braking_distance(u, a, rate);
                    let (end, limit) = if side == 1 {
                        (at + travel, limits.upper)
                    } else {
                        (at - travel, limits.lower)
                    };
                    let inside = if side == 1 {
                        end <= limit
                    } else {
                        end >= limit
                    };
                    if inside {
                        continue;
                    }
                    // Slowed down by f, the braking distance shrinks by f²; a sample at or past
                    // the limit cannot be fixed that way.
                    let room = (limit - at).abs();
                    let need = if (side == 1 && at < limit) || (side == 0 && at > limit) {
                        (u * u / (2.0 * a * room)).sqrt().max(1.0)
                    } else {
                        f64::INFINITY
                    };
                    proof.breach(Quantity::QuickStop, side, t, end, limit, need);
                }
            }
        }
    }
}

/// Relative margin the retime policy adds to the slow-down the limits ask for.
pub const RETIME_MARGIN: f64 = 1e-4;

/// The smallest uniform slow-down meeting every velocity and acceleration limit the report found
/// crossed, or `None` when slowing down cannot help (a position limit, hold's steps).
pub(super) fn retime_factor(report: &ProofReport) -> Option<f64> {
    let need = report
        .violations
        .iter()
        .map(|v| v.retime_need)
        .fold(1.0, f64::max);
    // A margin above the factor asked for: the drives' finite differences near a corner or an
    // end do not shrink exactly with it, and rounding in the rebuilt slopes must not land a
    // sample a few ulps over the limit.
    need.is_finite().then_some(need * (1.0 + RETIME_MARGIN))
}

/// Moves source samples outside their DOF's position limits onto the limit; reports per DOF.
pub(super) fn clamp(
    joints: &JointSet,
    columns: &[usize],
    times: &[f64],
    values: &mut [f64],
) -> Vec<Clamped> {
    let cols = columns.len();
    let mut out = Vec::new();
    for (c, &i) in columns.iter().enumerate() {
        let Some(d) = joints.dofs.get(i) else {
            continue;
        };
        let limits = d.limits.position;
        let mut record: Option<Clamped> = None;
        for (row, t) in times.iter().enumerate() {
            let v = &mut values[row * cols + c];
            // Not f64::clamp: that panics on a NaN bound.
            let clamped = v.max(limits.lower).min(limits.upper);
            if clamped != *v {
                let r = record.get_or_insert_with(|| Clamped {
                    dof: d.name.clone(),
                    samples: 0,
                    first_s: *t,
                    max_change: 0.0,
                });
                r.samples += 1;
                r.max_change = r.max_change.max((clamped - *v).abs());
                *v = clamped;
            }
        }
        out.extend(record);
    }
    out
}
