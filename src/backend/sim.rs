//! The simulated backend: per DOF a position servo driving a second-order motor model, saturated
//! in velocity, acceleration and effort by the skeleton's limits, with a configurable command
//! latency and injectable faults. Runs the same loop code as the real buses, so dry runs and
//! tests exercise everything but the wire.
//!
//! The model advances one control period per [`Backend::read`], using the command written
//! `latency_ticks` writes earlier. Every read while enabled appends commanded and simulated
//! positions to a [`Trace`] preallocated at construction.

use std::io::{self, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

pub use super::SimFaultKind;
use super::{Backend, BackendError, FaultKind, Feedback, Readiness};
use crate::robot::Limits;
use crate::trajectory::{JointSet, Setpoint};

/// `sim.bandwidth_hz` when not given: also the simulated backend's own default.
pub const DEFAULT_BANDWIDTH_HZ: f64 = 20.0;

/// The configuration's `sim:` section: per DOF a second-order motor model that saturates at the
/// skeleton's velocity, acceleration and effort limits, and a fault by DOF name.
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// Ticks between a command and the motor starting to follow it; at most one second of ticks.
    pub latency_ticks: u32,
    /// Natural frequency of the motor model; positive and finite. Any value is allowed at any
    /// control rate, so the model must be discretized exactly (not by forward Euler).
    pub bandwidth_hz: f64,
    /// Damping ratio of the motor model (1 = critically damped); in (0, 100].
    pub damping: f64,
    /// A fault the simulation raises, for tests and rehearsals.
    pub fault: Option<SimConfigFault>,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            latency_ticks: 1,
            bandwidth_hz: DEFAULT_BANDWIDTH_HZ,
            damping: 1.0,
            fault: None,
        }
    }
}

/// `sim.fault`: from tick `at_tick` on, the simulated drive of `dof` (every DOF when `None`)
/// misbehaves as `kind` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimConfigFault {
    pub kind: SimFaultKind,
    pub at_tick: u64,
    /// A DOF name; when `robot.joints` is given it is one of them.
    pub dof: Option<String>,
}

/// Motor model and fault injection.
#[derive(Debug, Clone, PartialEq)]
pub struct SimSettings {
    /// Ticks between a write and the motor acting on it.
    pub latency_ticks: u32,
    /// Position servo bandwidth (critically damped at `damping` = 1).
    pub bandwidth_hz: f64,
    pub damping: f64,
    /// Inertia seen by each motor (kg·m², or kg for prismatic DOFs): effort = inertia × acceleration.
    pub inertia: f64,
    /// Ticks the enable sequence takes before it reports ready.
    pub enable_ticks: u32,
    /// A DOF farther than this from its command reports a stall (the drive's following error).
    pub following_error: f64,
    pub faults: Vec<SimFault>,
    /// Trace rows preallocated (0: no trace).
    pub trace_ticks: usize,
}

impl SimSettings {
    /// The configuration's `sim:` section for `joints` (a fault's DOF name becomes its index).
    /// Trace rows are the caller's to size.
    ///
    /// # Errors
    /// A fault that names a DOF which is not commanded: injecting it nowhere would silently turn
    /// a fault test into a clean run.
    pub fn from_config(sim: &SimConfig, joints: &JointSet) -> Result<Self, UnknownFaultDof> {
        let faults = sim
            .fault
            .iter()
            .map(|f| {
                let dof = match f.dof.as_deref() {
                    Some(name) => Some(
                        joints
                            .index_of(name)
                            .ok_or_else(|| UnknownFaultDof(name.to_owned()))?,
                    ),
                    None => None,
                };
                let kind = f.kind;
                Ok(SimFault {
                    kind,
                    dof,
                    from_tick: f.at_tick,
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            latency_ticks: sim.latency_ticks,
            bandwidth_hz: sim.bandwidth_hz,
            damping: sim.damping,
            faults,
            ..Self::default()
        })
    }
}

/// `sim.fault.dof` names no commanded DOF.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not a commanded DOF")]
pub struct UnknownFaultDof(pub String);

impl Default for SimSettings {
    fn default() -> Self {
        Self {
            latency_ticks: 1,
            bandwidth_hz: DEFAULT_BANDWIDTH_HZ,
            damping: 1.0,
            inertia: 0.1,
            enable_ticks: 2,
            following_error: 0.2,
            faults: Vec::new(),
            trace_ticks: 0,
        }
    }
}

/// A fault the simulation injects from a loop tick on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimFault {
    pub kind: SimFaultKind,
    /// Index in the [`JointSet`]; `None`: every DOF.
    pub dof: Option<usize>,
    pub from_tick: u64,
}

/// The error code of an injected [`SimFaultKind::Error`].
pub const INJECTED_ERROR_CODE: u32 = 0x2310;

/// A hand moving the simulated robot while its drives are compliant (teach-in): per DOF the
/// position the hand holds it at (NaN: not held, the motor stays where it is).
#[derive(Debug)]
pub struct Hand(Box<[AtomicU64]>);

impl Hand {
    fn new(n: usize) -> Hand {
        Hand((0..n).map(|_| AtomicU64::new(f64::NAN.to_bits())).collect())
    }

    /// Moves DOF `dof` to `position` (while compliant).
    pub fn put(&self, dof: usize, position: f64) {
        if let Some(a) = self.0.get(dof) {
            a.store(position.to_bits(), Relaxed);
        }
    }

    fn at(&self, dof: usize) -> Option<f64> {
        let p = f64::from_bits(self.0.get(dof)?.load(Relaxed));
        (!p.is_nan()).then_some(p)
    }
}

/// A fault injected while the loop runs (rehearsals: `motiond play --fault`), shared with the
/// simulation; it acts from the next tick on.
#[derive(Debug, Default)]
pub struct Injector {
    /// 0: none; else 1 + the [`SimFaultKind`]'s index.
    kind: AtomicU64,
    /// The DOF index, or `u64::MAX` for every DOF.
    dof: AtomicU64,
}

impl Injector {
    pub fn inject(&self, kind: SimFaultKind, dof: Option<usize>) {
        self.dof.store(dof.map_or(u64::MAX, |d| d as u64), Relaxed);
        let k = match kind {
            SimFaultKind::Error => 1,
            SimFaultKind::Stall => 2,
            SimFaultKind::NoFeedback => 3,
            SimFaultKind::Estop => 4,
        };
        self.kind.store(k, std::sync::atomic::Ordering::Release);
    }

    /// The injected fault is gone (the drive was repaired).
    pub fn clear(&self) {
        self.kind.store(0, std::sync::atomic::Ordering::Release);
    }

    fn kind(&self) -> Option<SimFaultKind> {
        match self.kind.load(std::sync::atomic::Ordering::Acquire) {
            1 => Some(SimFaultKind::Error),
            2 => Some(SimFaultKind::Stall),
            3 => Some(SimFaultKind::NoFeedback),
            4 => Some(SimFaultKind::Estop),
            _ => None,
        }
    }

    /// The DOF of an injected fault of `kind`: `Some(None)` for every DOF.
    fn dof_of(&self, kind: SimFaultKind) -> Option<Option<usize>> {
        (self.kind() == Some(kind)).then(|| {
            let d = self.dof.load(Relaxed);
            (d != u64::MAX).then_some(d as usize)
        })
    }
}

#[derive(Debug, Clone, Copy)]
struct Motor {
    velocity: Limits,
    acceleration: Limits,
    effort: Limits,
    position: f64,
    speed: f64,
    effort_now: f64,
}

/// A simulated set of drives.
#[derive(Debug)]
pub struct Sim {
    dt: f64,
    kp: f64,
    kd: f64,
    /// The servo loop's exact discretisation over one period (zero-order hold on the command):
    /// `[p, v]' = phi · [p, v] + gamma · u` with `u = a_cmd + kp·p_cmd + kd·v_cmd`.
    phi: [[f64; 2]; 2],
    gamma: [f64; 2],
    inertia: f64,
    following_error: f64,
    enable_ticks: u32,
    faults: Vec<SimFault>,
    motors: Vec<Motor>,
    /// `latency_ticks + 1` rows of setpoints; `head` is the latest write.
    ring: Vec<Setpoint>,
    rows: usize,
    head: usize,
    enabled: bool,
    enable_steps: u32,
    tick: u64,
    trace: Arc<Trace>,
    injector: Arc<Injector>,
    hand: Arc<Hand>,
    /// Teach-in: the motors go where the hand puts them.
    compliant: bool,
}

fn clamp_to(l: Limits, x: f64) -> f64 {
    x.max(l.lower).min(l.upper)
}

impl Sim {
    pub fn new(joints: &JointSet, rate_hz: f64, settings: &SimSettings) -> Self {
        let n = joints.len();
        let dt = 1.0 / rate_hz;
        let omega = 2.0 * std::f64::consts::PI * settings.bandwidth_hz;
        let (kp, kd) = (omega * omega, 2.0 * settings.damping * omega);
        // exp([[A, B], [0, 0]]·dt) = [[Φ, Γ], [0, 1]]: exact at any bandwidth and rate.
        let m = nalgebra::Matrix3::new(0.0, 1.0, 0.0, -kp, -kd, 1.0, 0.0, 0.0, 0.0) * dt;
        let e = m.exp();
        let rows = settings.latency_ticks as usize + 1;
        let motors: Vec<Motor> = joints
            .dofs
            .iter()
            .map(|d| Motor {
                velocity: d.limits.velocity,
                acceleration: d.limits.acceleration,
                effort: d.limits.effort,
                position: d.initial_position,
                speed: 0.0,
                effort_now: 0.0,
            })
            .collect();
        let mut sim = Self {
            dt,
            kp,
            kd,
            phi: [[e[(0, 0)], e[(0, 1)]], [e[(1, 0)], e[(1, 1)]]],
            gamma: [e[(0, 2)], e[(1, 2)]],
            inertia: settings.inertia.max(1e-9),
            following_error: settings.following_error,
            enable_ticks: settings.enable_ticks,
            faults: settings.faults.clone(),
            motors,
            ring: vec![Setpoint::default(); rows * n],
            rows,
            head: 0,
            enabled: false,
            enable_steps: 0,
            tick: 0,
            trace: Arc::new(Trace::new(joints, rate_hz, settings.trace_ticks)),
            injector: Arc::new(Injector::default()),
            hand: Arc::new(Hand::new(n)),
            compliant: false,
        };
        sim.command_rest();
        sim
    }

    /// Puts a motor somewhere before the loop starts (the model otherwise starts at the DOF's
    /// initial position). Out-of-range indices are ignored.
    pub fn place(&mut self, dof: usize, position: f64) {
        if let Some(m) = self.motors.get_mut(dof) {
            m.position = position;
            m.speed = 0.0;
        }
        self.command_rest();
    }

    /// The trace, shared: read it while the loop runs or after it ended.
    pub fn trace(&self) -> Arc<Trace> {
        self.trace.clone()
    }

    /// The handle that injects faults while the loop runs.
    pub fn injector(&self) -> Arc<Injector> {
        self.injector.clone()
    }

    /// The hand that moves the robot while its drives are compliant.
    pub fn hand(&self) -> Arc<Hand> {
        self.hand.clone()
    }

    /// Every pending command becomes "stay where you are".
    fn command_rest(&mut self) {
        let n = self.motors.len();
        for row in self.ring.chunks_mut(n.max(1)) {
            for (s, m) in row.iter_mut().zip(&self.motors) {
                *s = Setpoint {
                    position: m.position,
                    velocity: 0.0,
                    acceleration: 0.0,
                };
            }
        }
    }

    fn fault_active(&self, kind: SimFaultKind, dof: usize) -> bool {
        let injected = self
            .injector
            .dof_of(kind)
            .map(|d| d.is_none_or(|d| d == dof));
        injected == Some(true)
            || self.faults.iter().any(|f| {
                f.kind == kind && f.dof.is_none_or(|d| d == dof) && self.tick >= f.from_tick
            })
    }

    /// The fault bits the simulated drive of DOF `dof` reports: 1 + the injected fault kind's
    /// index in [`SimFaultKind`] order (error, stall, no feedback, E-stop), 0 for none.
    fn injected_code(&self, dof: usize) -> u32 {
        [
            SimFaultKind::Error,
            SimFaultKind::Stall,
            SimFaultKind::NoFeedback,
            SimFaultKind::Estop,
        ]
        .iter()
        .position(|&k| self.fault_active(k, dof))
        .map_or(0, |i| i as u32 + 1)
    }

    fn row(&self, r: usize) -> &[Setpoint] {
        let n = self.motors.len();
        self.ring.get(r * n..(r + 1) * n).unwrap_or(&[])
    }

    fn step_model(&mut self) {
        let n = self.motors.len();
        if self.compliant {
            let dt = self.dt;
            for (j, m) in self.motors.iter_mut().enumerate() {
                let to = self.hand.at(j).unwrap_or(m.position);
                m.speed = (to - m.position) / dt;
                m.position = to;
                m.effort_now = 0.0;
            }
            return;
        }
        let applied = (self.head + 1) % self.rows;
        for j in 0..n {
            let stalled = self.fault_active(SimFaultKind::Stall, j);
            let Some(c) = self.ring.get(applied * n + j).copied() else {
                continue;
            };
            let (phi, gamma, inertia, dt) = (self.phi, self.gamma, self.inertia, self.dt);
            let u = c.acceleration + self.kp * c.position + self.kd * c.velocity;
            let Some(m) = self.motors.get_mut(j) else {
                continue;
            };
            if stalled {
                m.speed = 0.0;
                m.effort_now = 0.0;
                continue;
            }
            let (p, v) = (m.position, m.speed);
            let p_next = phi[0][0] * p + phi[0][1] * v + gamma[0] * u;
            let v_next = phi[1][0] * p + phi[1][1] * v + gamma[1] * u;
            // Saturation: the period's mean acceleration within the acceleration limits and what
            // the effort limits can produce, then the velocity within its limits.
            let wanted = (v_next - v) / dt;
            let a = clamp_to(m.acceleration, wanted);
            let effort = clamp_to(m.effort, inertia * a);
            let saturated = a != wanted || effort != inertia * a;
            m.effort_now = effort;
            let v_free = if saturated {
                v + effort / inertia * dt
            } else {
                v_next
            };
            let v_sat = clamp_to(m.velocity, v_free);
            if !saturated && v_sat == v_next {
                m.position = p_next;
            } else {
                m.position = p + 0.5 * (v + v_sat) * dt;
            }
            m.speed = v_sat;
        }
    }
}

impl Backend for Sim {
    fn enable(&mut self) -> Result<Readiness, BackendError> {
        if self.enabled {
            return Ok(Readiness::Ready);
        }
        self.enable_steps += 1;
        if self.enable_steps < self.enable_ticks {
            return Ok(Readiness::Pending);
        }
        self.enabled = true;
        self.command_rest();
        Ok(Readiness::Ready)
    }

    /// Torque off: the motors go where the hand puts them; back on, they hold where they are.
    fn compliant(&mut self, on: bool, dofs: &mut [bool]) -> Result<Readiness, BackendError> {
        self.compliant = on;
        dofs.iter_mut().for_each(|d| *d = on);
        if !on {
            for m in &mut self.motors {
                m.speed = 0.0;
            }
            self.command_rest();
        }
        Ok(Readiness::Ready)
    }

    fn disable(&mut self) -> Result<(), BackendError> {
        self.enabled = false;
        self.enable_steps = 0;
        for m in &mut self.motors {
            m.speed = 0.0;
            m.effort_now = 0.0;
        }
        Ok(())
    }

    fn write(&mut self, tick: u64, setpoints: &[Setpoint]) -> Result<(), BackendError> {
        self.tick = tick;
        if !self.enabled {
            return Err(BackendError {
                kind: FaultKind::DriveFault,
                dof: None,
                code: 1,
            });
        }
        for kind in [SimFaultKind::Error, SimFaultKind::Estop] {
            let configured = self
                .faults
                .iter()
                .find(|f| f.kind == kind && tick >= f.from_tick)
                .map(|f| f.dof);
            if let Some(dof) = self.injector.dof_of(kind).or(configured) {
                return Err(BackendError {
                    kind: kind.fault_kind(),
                    dof: dof.and_then(|d| u16::try_from(d).ok()),
                    code: if kind == SimFaultKind::Error {
                        INJECTED_ERROR_CODE
                    } else {
                        0
                    },
                });
            }
        }
        self.head = (self.head + 1) % self.rows;
        let n = self.motors.len();
        if let Some(row) = self.ring.get_mut(self.head * n..(self.head + 1) * n) {
            for (r, s) in row.iter_mut().zip(setpoints) {
                *r = *s;
            }
        }
        Ok(())
    }

    fn read(&mut self, feedback: &mut [Feedback]) -> Result<(), BackendError> {
        if self.enabled {
            self.step_model();
            self.trace
                .record(self.tick, self.row(self.head), &self.motors);
        }
        for (j, (f, m)) in feedback.iter_mut().zip(&self.motors).enumerate() {
            *f = Feedback {
                position: m.position,
                velocity: m.speed,
                effort: m.effort_now,
                status: u32::from(self.enabled),
                error: self.injected_code(j),
                valid: !self.fault_active(SimFaultKind::NoFeedback, j),
            };
        }
        if self.enabled {
            let applied = (self.head + 1) % self.rows;
            for (j, (c, m)) in self.row(applied).iter().zip(&self.motors).enumerate() {
                if (c.position - m.position).abs() > self.following_error {
                    return Err(BackendError {
                        kind: FaultKind::Stall,
                        dof: u16::try_from(j).ok(),
                        code: 0,
                    });
                }
            }
        }
        Ok(())
    }

    fn hold(&mut self, tick: u64, setpoints: &[Setpoint]) -> Result<(), BackendError> {
        // What is held goes through the command latency like any command: no step anywhere.
        self.tick = tick;
        if !self.enabled {
            return Ok(());
        }
        self.head = (self.head + 1) % self.rows;
        let n = self.motors.len();
        if let Some(row) = self.ring.get_mut(self.head * n..(self.head + 1) * n) {
            for (r, s) in row.iter_mut().zip(setpoints) {
                *r = *s;
            }
        }
        Ok(())
    }
}

/// Commanded and simulated positions per tick, preallocated; written by the loop, read by anyone.
#[derive(Debug)]
pub struct Trace {
    names: Vec<String>,
    rate_hz: f64,
    capacity: usize,
    len: AtomicUsize,
    dropped: AtomicU64,
    ticks: Box<[AtomicU64]>,
    /// Row-major: per row, per DOF, commanded then simulated position (f64 bits).
    values: Box<[AtomicU64]>,
}

/// One trace row.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceRow {
    pub tick: u64,
    pub commanded: Vec<f64>,
    pub simulated: Vec<f64>,
}

impl Trace {
    fn new(joints: &JointSet, rate_hz: f64, capacity: usize) -> Self {
        let n = joints.len();
        let atomics = |len: usize| (0..len).map(|_| AtomicU64::new(0)).collect();
        Self {
            names: joints.dofs.iter().map(|d| d.name.clone()).collect(),
            rate_hz,
            capacity,
            len: AtomicUsize::new(0),
            dropped: AtomicU64::new(0),
            ticks: atomics(capacity),
            values: atomics(capacity * 2 * n),
        }
    }

    fn record(&self, tick: u64, commanded: &[Setpoint], motors: &[Motor]) {
        let i = self.len.load(Relaxed);
        if i >= self.capacity {
            self.dropped.store(self.dropped.load(Relaxed) + 1, Relaxed);
            return;
        }
        let n = self.names.len();
        if let Some(t) = self.ticks.get(i) {
            t.store(tick, Relaxed);
        }
        if let Some(row) = self.values.get(i * 2 * n..(i + 1) * 2 * n) {
            for (pair, (c, m)) in row.chunks_exact(2).zip(commanded.iter().zip(motors)) {
                if let [a, b] = pair {
                    a.store(c.position.to_bits(), Relaxed);
                    b.store(m.position.to_bits(), Relaxed);
                }
            }
        }
        // Release: a reader that sees the new length sees the row.
        self.len.store(i + 1, std::sync::atomic::Ordering::Release);
    }

    pub fn rate_hz(&self) -> f64 {
        self.rate_hz
    }

    /// Rows recorded so far.
    pub fn len(&self) -> usize {
        self.len.load(std::sync::atomic::Ordering::Acquire)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Rows that did not fit.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Relaxed)
    }

    pub fn row(&self, i: usize) -> Option<TraceRow> {
        if i >= self.len() {
            return None;
        }
        let n = self.names.len();
        let row = self.values.get(i * 2 * n..(i + 1) * 2 * n)?;
        let get = |k: usize| f64::from_bits(row.get(k).map_or(0, |a| a.load(Relaxed)));
        Some(TraceRow {
            tick: self.ticks.get(i)?.load(Relaxed),
            commanded: (0..n).map(|j| get(2 * j)).collect(),
            simulated: (0..n).map(|j| get(2 * j + 1)).collect(),
        })
    }

    /// CSV: `tick,time,<dof>.commanded,<dof>.simulated,…`, one row per recorded tick.
    pub fn write_csv(&self, mut out: impl Write) -> io::Result<()> {
        write!(out, "tick,time")?;
        for name in &self.names {
            write!(out, ",{name}.commanded,{name}.simulated")?;
        }
        writeln!(out)?;
        for i in 0..self.len() {
            let Some(r) = self.row(i) else { break };
            write!(out, "{},{}", r.tick, r.tick as f64 / self.rate_hz)?;
            for (c, s) in r.commanded.iter().zip(&r.simulated) {
                write!(out, ",{c},{s}")?;
            }
            writeln!(out)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::robot::Actuator;
    use crate::trajectory::{CommandedDof, DofLimits};

    fn one_dof(v: f64, a: f64, e: f64) -> JointSet {
        JointSet {
            dofs: vec![CommandedDof {
                name: "j".into(),
                skeleton: 0,
                dof: 0,
                actuator: Actuator::Servo,
                limits: DofLimits {
                    position: Limits::symmetric(3.0),
                    velocity: Limits::symmetric(v),
                    acceleration: Limits::symmetric(a),
                    effort: Limits::symmetric(e),
                },
                initial_position: 0.0,
                mimic: None,
                quick_stop_deceleration: None,
            }],
        }
    }

    fn enabled(sim: &mut Sim) {
        while sim.enable().unwrap() == Readiness::Pending {}
    }

    fn step_to(sim: &mut Sim, target: f64, ticks: u64) -> Feedback {
        let mut fb = [Feedback::default()];
        for k in 0..ticks {
            let sp = [Setpoint {
                position: target,
                ..Setpoint::default()
            }];
            sim.write(k, &sp).unwrap();
            sim.read(&mut fb).unwrap();
        }
        fb[0]
    }

    #[test]
    fn the_motor_settles_on_a_step_command_within_its_limits() {
        let settings = SimSettings {
            following_error: 10.0,
            trace_ticks: 100,
            ..SimSettings::default()
        };
        let mut sim = Sim::new(&one_dof(2.0, 8.0, 100.0), 1000.0, &settings);
        assert_eq!(sim.enable().unwrap(), Readiness::Pending);
        enabled(&mut sim);
        let fb = step_to(&mut sim, 0.5, 3000);
        assert!((fb.position - 0.5).abs() < 1e-6, "{fb:?}");
        assert!(fb.valid);
        let trace = sim.trace();
        assert_eq!(trace.len(), 100);
        assert_eq!(trace.dropped(), 2900);
        let mut csv = Vec::new();
        trace.write_csv(&mut csv).unwrap();
        let text = String::from_utf8(csv).unwrap();
        assert!(text.starts_with("tick,time,j.commanded,j.simulated\n0,0,0.5,"));
    }

    #[test]
    fn any_bandwidth_is_stable_at_any_rate() {
        let settings = SimSettings {
            bandwidth_hz: 5_000.0,
            following_error: 10.0,
            ..SimSettings::default()
        };
        let mut sim = Sim::new(&one_dof(1e9, 1e9, 1e9), 100.0, &settings);
        enabled(&mut sim);
        let fb = step_to(&mut sim, 0.5, 100);
        assert!((fb.position - 0.5).abs() < 1e-9, "{fb:?}");
    }

    #[test]
    fn saturation_bounds_velocity_and_acceleration() {
        let settings = SimSettings {
            following_error: 10.0,
            ..SimSettings::default()
        };
        let mut sim = Sim::new(&one_dof(1.0, 4.0, 100.0), 1000.0, &settings);
        enabled(&mut sim);
        let mut fb = [Feedback::default()];
        let mut last_v = 0.0f64;
        for k in 0..2000 {
            sim.write(
                k,
                &[Setpoint {
                    position: 2.0,
                    ..Setpoint::default()
                }],
            )
            .unwrap();
            sim.read(&mut fb).unwrap();
            assert!(fb[0].velocity.abs() <= 1.0 + 1e-12);
            assert!((fb[0].velocity - last_v).abs() <= 4.0 * 1e-3 + 1e-12);
            last_v = fb[0].velocity;
        }
    }

    #[test]
    fn latency_delays_the_response_by_whole_ticks() {
        let settings = SimSettings {
            latency_ticks: 3,
            following_error: 10.0,
            ..SimSettings::default()
        };
        let mut sim = Sim::new(&one_dof(2.0, 8.0, 100.0), 1000.0, &settings);
        enabled(&mut sim);
        let mut fb = [Feedback::default()];
        for k in 0..4 {
            sim.write(
                k,
                &[Setpoint {
                    position: 1.0,
                    ..Setpoint::default()
                }],
            )
            .unwrap();
            sim.read(&mut fb).unwrap();
            assert_eq!(fb[0].position == 0.0, k < 3, "tick {k}");
        }
    }

    #[test]
    fn injected_faults_fire_from_their_tick() {
        let settings = |kind| SimSettings {
            faults: vec![SimFault {
                kind,
                dof: Some(0),
                from_tick: 5,
            }],
            following_error: 0.01,
            ..SimSettings::default()
        };
        let joints = one_dof(2.0, 8.0, 100.0);
        let sp = [Setpoint::default()];
        let mut fb = [Feedback::default()];

        let mut sim = Sim::new(&joints, 1000.0, &settings(SimFaultKind::Error));
        enabled(&mut sim);
        assert!(sim.write(4, &sp).is_ok());
        let e = sim.write(5, &sp).unwrap_err();
        assert_eq!(
            (e.kind, e.dof, e.code),
            (FaultKind::DriveFault, Some(0), INJECTED_ERROR_CODE)
        );

        let mut sim = Sim::new(&joints, 1000.0, &settings(SimFaultKind::NoFeedback));
        enabled(&mut sim);
        sim.write(4, &sp).unwrap();
        sim.read(&mut fb).unwrap();
        assert!(fb[0].valid);
        sim.write(5, &sp).unwrap();
        sim.read(&mut fb).unwrap();
        assert!(!fb[0].valid);

        let mut sim = Sim::new(&joints, 1000.0, &settings(SimFaultKind::Stall));
        enabled(&mut sim);
        let mut result = Ok(());
        for k in 0..200 {
            let p = k as f64 * 0.001;
            sim.write(
                k,
                &[Setpoint {
                    position: p,
                    velocity: 1.0,
                    acceleration: 0.0,
                }],
            )
            .unwrap();
            result = sim.read(&mut fb);
            if result.is_err() {
                break;
            }
        }
        assert_eq!(result.unwrap_err().kind, FaultKind::Stall);
    }

    #[test]
    fn a_disabled_drive_refuses_commands() {
        let mut sim = Sim::new(&one_dof(2.0, 8.0, 100.0), 1000.0, &SimSettings::default());
        assert!(sim.write(0, &[Setpoint::default()]).is_err());
    }
}
