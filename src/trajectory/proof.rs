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

use std::fmt;

use serde_json::{Value, json};

use super::interp::Extremes;
use super::resample::Knots;
use super::{DofLimits, Interpolation, JointSet, LimitPolicy};
use crate::skel::Limits;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantity {
    Position,
    Velocity,
    Acceleration,
    /// Only tightened by config; the proof has no effort to check.
    Effort,
}

impl Quantity {
    pub fn as_str(self) -> &'static str {
        match self {
            Quantity::Position => "position",
            Quantity::Velocity => "velocity",
            Quantity::Acceleration => "acceleration",
            Quantity::Effort => "effort",
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

impl fmt::Display for ProofReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:.4} s at {} Hz ({} ticks), {} interpolation, speed {}, policy {}",
            self.duration_s,
            self.rate_hz,
            self.ticks,
            self.interpolation.as_str(),
            self.speed,
            self.policy.as_str()
        )?;
        let width = self.dofs.iter().map(|d| d.dof.len()).max().unwrap_or(0);
        for d in &self.dofs {
            if d.held {
                writeln!(
                    f,
                    "  {:width$}  holds {:.6} (not in the motion)",
                    d.dof, d.position.min
                )?;
                continue;
            }
            writeln!(
                f,
                "  {:width$}  position [{:.4}, {:.4}] of {}  velocity [{:.4}, {:.4}] of {}  acceleration [{:.3}, {:.3}] of {}",
                d.dof,
                d.position.min,
                d.position.max,
                show(d.limits.position),
                d.velocity.min,
                d.velocity.max,
                show(d.limits.velocity),
                d.acceleration.min,
                d.acceleration.max,
                show(d.limits.acceleration),
            )?;
        }
        for c in &self.clamped {
            writeln!(
                f,
                "clamped: {}: {} samples moved onto the position limit (first at t={:.4} s, by up to {:.6})",
                c.dof, c.samples, c.first_s, c.max_change
            )?;
        }
        if let Some(factor) = self.retimed {
            writeln!(
                f,
                "retimed: slowed down uniformly by ×{factor:.6} to meet the velocity and acceleration limits"
            )?;
        }
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
        format!("[{}, {}]", l.lower, l.upper)
    }
}

/// Accumulates the proof of one DOF.
struct DofProof {
    summary: DofSummary,
    /// Per quantity and side (lower, upper): the violation so far.
    found: [[Option<Violation>; 2]; 3],
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
        let (limits, range) = match quantity {
            Quantity::Position => (self.summary.limits.position, &mut self.summary.position),
            Quantity::Velocity => (self.summary.limits.velocity, &mut self.summary.velocity),
            Quantity::Acceleration => (
                self.summary.limits.acceleration,
                &mut self.summary.acceleration,
            ),
            Quantity::Effort => return,
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
            let need = if exponent == 0
                || limit == 0.0
                || value.is_nan()
                || limit.signum() != value.signum()
            {
                f64::INFINITY
            } else {
                (value / limit).powf(1.0 / f64::from(exponent))
            };
            let Some(slot) = self
                .found
                .get_mut(quantity as usize)
                .and_then(|q| q.get_mut(side))
            else {
                continue;
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
    }

    fn check_point(&mut self, quantity: Quantity, t: f64, value: f64, exponent: i32) {
        self.check(quantity, t, Extremes::at(0.0, value), exponent);
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
            match k.interpolation {
                // A step in position: the drive sees it as a velocity over one tick, and as an
                // acceleration into and out of that velocity.
                Interpolation::Hold => {
                    let step = cubic_end(k, seg, c) - cubic.c0;
                    proof.check_point(Quantity::Velocity, t1, step * rate, 0);
                    proof.check_point(Quantity::Acceleration, t1, step * rate * rate, 0);
                    proof.check_point(Quantity::Acceleration, t1, -step * rate * rate, 0);
                }
                // A step in velocity at the knot ahead, over one tick.
                Interpolation::Linear if seg + 2 < rows => {
                    let next = k.cubic(seg + 1, c).c1;
                    proof.check_point(Quantity::Acceleration, t1, (next - cubic.c1) * rate, 1);
                }
                _ => {}
            }
        }
    }
    // From rest into the first sample's velocity, and from the last one back to rest.
    if rows >= 2 {
        let last = rows - 2;
        let h = k.times[last + 1] - k.times[last];
        for (c, proof) in &mut columns {
            let start = k.cubic(0, *c).velocity(0.0);
            proof.check_point(Quantity::Acceleration, 0.0, start * rate, 1);
            let end = k.cubic(last, *c).velocity(h);
            proof.check_point(Quantity::Acceleration, k.duration(), -end * rate, 1);
        }
    }
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
        ticks: super::resample::ticks_until(k.duration(), rate),
        dofs,
        violations,
        clamped: meta.clamped.clone(),
        retimed: meta.retimed,
    }
}

/// The value of column `c` at the end of segment `seg`.
fn cubic_end(k: &Knots, seg: usize, c: usize) -> f64 {
    k.values[(seg + 1) * k.cols() + c]
}

/// The smallest uniform slow-down meeting every velocity and acceleration limit the report found
/// crossed, or `None` when slowing down cannot help (a position limit, hold's steps).
pub(super) fn retime_factor(report: &ProofReport) -> Option<f64> {
    let need = report
        .violations
        .iter()
        .map(|v| v.retime_need)
        .fold(1.0, f64::max);
    // A hair above the exact factor, so rounding in the rebuilt slopes cannot land a sample a few
    // ulps over the limit.
    need.is_finite().then_some(need * (1.0 + 1e-9))
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
