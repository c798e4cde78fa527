//! Minimal trajectory and stop types with the API `trajectory` is building (issue 4), so the loop
//! can be written and tested before that module lands. Replaced by `crate::trajectory` on merge.

use crate::trajectory::{Cursor, JointSet, Setpoint};

/// A dense table of setpoints at the control rate (tick-major).
#[derive(Debug, Clone)]
pub struct Trajectory {
    rate_hz: f64,
    dofs: usize,
    table: Vec<Setpoint>,
}

impl Trajectory {
    /// `table` holds `dofs` setpoints per tick; an empty table is one tick at rest at zero.
    pub fn from_table(rate_hz: f64, dofs: usize, mut table: Vec<Setpoint>) -> Self {
        if table.len() < dofs || dofs == 0 {
            table = vec![Setpoint::default(); dofs];
        }
        table.truncate(table.len() / dofs.max(1) * dofs);
        Self {
            rate_hz,
            dofs,
            table,
        }
    }

    pub fn rate_hz(&self) -> f64 {
        self.rate_hz
    }

    pub fn dofs(&self) -> usize {
        self.dofs
    }

    pub fn ticks(&self) -> u64 {
        (self.table.len() / self.dofs.max(1)) as u64
    }

    pub fn sample(&self, _cursor: &mut Cursor, tick: u64, out: &mut [Setpoint]) {
        let last = self.ticks().saturating_sub(1);
        let row = tick.min(last) as usize * self.dofs;
        if let Some(src) = self.table.get(row..row + self.dofs) {
            for (o, s) in out.iter_mut().zip(src) {
                *o = *s;
            }
        }
    }
}

/// Brings every DOF to rest at its acceleration limit (1 rad/s² when unbounded).
#[derive(Debug, Clone)]
pub struct Stop {
    rate_hz: f64,
    decel: Vec<f64>,
    from: Vec<Setpoint>,
    ticks: u64,
}

impl Stop {
    pub fn new(joints: &JointSet, rate_hz: f64) -> Self {
        let decel = joints
            .dofs
            .iter()
            .map(|d| {
                let a = d.limits.acceleration;
                let m = a.upper.min(-a.lower);
                if m.is_finite() && m > 0.0 { m } else { 1.0 }
            })
            .collect();
        Self {
            rate_hz,
            decel,
            from: vec![Setpoint::default(); joints.len()],
            ticks: 1,
        }
    }

    pub fn plan(&mut self, from: &[Setpoint]) {
        let mut longest = 0.0f64;
        for ((f, s), a) in self.from.iter_mut().zip(from).zip(&self.decel) {
            *f = *s;
            longest = longest.max(s.velocity.abs() / a);
        }
        self.ticks = (longest * self.rate_hz).ceil() as u64 + 1;
    }

    pub fn ticks(&self) -> u64 {
        self.ticks
    }

    pub fn sample(&self, tick: u64, out: &mut [Setpoint]) {
        let t = tick as f64 / self.rate_hz;
        for ((o, f), a) in out.iter_mut().zip(&self.from).zip(&self.decel) {
            let v0 = f.velocity;
            let t_stop = v0.abs() / a;
            let te = t.min(t_stop);
            let acc = -v0.signum() * a;
            *o = Setpoint {
                position: f.position + v0 * te + 0.5 * acc * te * te,
                velocity: v0 + acc * te,
                acceleration: if t < t_stop { acc } else { 0.0 },
            };
        }
    }
}
