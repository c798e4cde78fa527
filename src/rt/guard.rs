//! The one way to the drives: every setpoint the loop sends — motion, approach, blend, pause,
//! stop, quick stop, hold, teach-in, the fault's and the E-stop's stops — is judged here against
//! what each drive last received, as the drive sees consecutive setpoints.
//!
//! The guard keeps, per DOF, the last two setpoints its drive *took* (a write that failed for a
//! drive leaves that drive's history as it was), and judges a proposed setpoint by
//! - the stream limits ([`Stream::judge`]: position, velocity and acceleration fields, their
//!   finite differences, the velocity field's step), and
//! - stoppability: a quick stop at the quick-stop decelerations from the proposed setpoint ends
//!   inside the position limits (or, outside them, no farther out), as drive safety functions
//!   (SS1, SLP) reason about braking distance.
//!
//! Where the guard must intervene it never steps: it brakes, with the whole robot's quick stop
//! planned from what the drives have ([`Guard::plan_quick_stop`], [`Guard::brake`]). Each brake
//! step is inside the limits and keeps the state stoppable, so a stream the guard started from at
//! rest inside the limits stays inside them whatever is proposed.
//!
//! DOFs whose drives are compliant (teach-in) are told where the hand put them and are not judged;
//! when they stiffen their history restarts at rest where they are ([`Guard::resync`]).
//!
//! Nothing here allocates after [`Guard::new`].

use crate::trajectory::envelope::position_scale;
use crate::trajectory::{DofLimits, JointSet, Measure, Setpoint, Stop, StopKind, Stream};

/// `code` of a [`FaultKind::Limit`](crate::backend::FaultKind) fault: which check the setpoint
/// failed.
pub const LIMIT_POSITION: u32 = 1;
pub const LIMIT_VELOCITY: u32 = 2;
pub const LIMIT_ACCELERATION: u32 = 3;
/// Two consecutive positions farther apart than the velocity limit allows in one period.
pub const LIMIT_JUMP: u32 = 4;
/// Two consecutive velocities farther apart than the acceleration limit allows in one period.
pub const LIMIT_VELOCITY_STEP: u32 = 5;
/// Three consecutive positions bending harder than the acceleration limit allows.
pub const LIMIT_BEND: u32 = 6;
/// A quick stop from the setpoint would end past a position limit.
pub const LIMIT_STOPPABLE: u32 = 7;

/// Whether `next` may follow `prev`, `last` on a DOF with limits `lim` at period `dt`, as the
/// drive sees the stream (the one definition: [`Stream::judge`]): the code of the first check it
/// fails. Positions outside the position limits pass when they do not move farther out (a robot
/// that ends up outside can always be brought back).
pub(crate) fn violation(
    lim: &DofLimits,
    prev: &Setpoint,
    last: &Setpoint,
    next: &Setpoint,
    dt: f64,
) -> Option<u32> {
    let stream = Stream {
        dt,
        // After the drives come up both earlier setpoints are the pose they hold: always two.
        history: 2,
        scale: scale(lim, [prev, last, next]),
        recovering: true,
    };
    let (measure, _, _) = stream.judge(lim, [prev, last, next], |_, _, _| {}).err()?;
    Some(match measure {
        Measure::Position => LIMIT_POSITION,
        Measure::Velocity => LIMIT_VELOCITY,
        Measure::Acceleration => LIMIT_ACCELERATION,
        Measure::StepVelocity => LIMIT_JUMP,
        Measure::VelocityStep => LIMIT_VELOCITY_STEP,
        Measure::StepAcceleration => LIMIT_BEND,
    })
}

/// The magnitude positions are computed at (the rounding tolerance of [`Stream`]).
fn scale(lim: &DofLimits, points: [&Setpoint; 3]) -> f64 {
    points
        .iter()
        .fold(position_scale(lim.position), |m, p| m.max(p.position.abs()))
}

pub(crate) fn at_rest(position: f64) -> Setpoint {
    Setpoint {
        position,
        velocity: 0.0,
        acceleration: 0.0,
    }
}

pub(crate) struct Guard {
    dt: f64,
    limits: Vec<DofLimits>,
    /// What each drive took last (`last`) and the time before (`prev`).
    prev: Vec<Setpoint>,
    last: Vec<Setpoint>,
    /// Compliant drives: told where they are, not judged.
    free: Vec<bool>,
    /// The tick each drive last took a setpoint.
    took_at: Vec<u64>,
    /// The whole robot's quick stop, planned from the drives' history when one begins.
    stop: Stop,
    /// Where a quick stop from a proposed setpoint would end (scratch).
    probe: Stop,
}

impl Guard {
    /// A guard for `joints` at `rate_hz`, the drives' history at rest at `initial`.
    pub fn new(joints: &JointSet, rate_hz: f64, initial: &[f64]) -> Guard {
        let rest: Vec<Setpoint> = initial.iter().map(|&p| at_rest(p)).collect();
        Guard {
            dt: 1.0 / rate_hz,
            limits: joints.dofs.iter().map(|d| d.limits).collect(),
            prev: rest.clone(),
            last: rest,
            free: vec![false; joints.len()],
            took_at: vec![0; joints.len()],
            stop: Stop::new(joints, rate_hz, &[]),
            probe: Stop::new(joints, rate_hz, &[]),
        }
    }

    /// What each drive took one period before [`last`](Self::last).
    pub fn prev(&self) -> &[Setpoint] {
        &self.prev
    }

    /// What each drive took last.
    pub fn last(&self) -> &[Setpoint] {
        &self.last
    }

    /// The first DOF whose `out` the guard refuses, with the check it failed.
    pub fn judge(&mut self, out: &[Setpoint]) -> Option<(usize, u32)> {
        let dt = self.dt;
        let stream = self
            .limits
            .iter()
            .zip(&self.prev)
            .zip(&self.last)
            .zip(out)
            .zip(&self.free)
            .enumerate()
            .filter(|(_, (_, free))| !**free)
            .find_map(|(j, ((((lim, p), l), o), _))| violation(lim, p, l, o, dt).map(|c| (j, c)));
        if stream.is_some() {
            return stream;
        }
        // Where a quick stop from `out` would end, each DOF as the fault's stop would brake it.
        let (j, _) = self.probe.unstoppable(&self.last, out)?;
        (!self.free[j]).then_some((j, LIMIT_STOPPABLE))
    }

    /// Plans the whole robot's quick stop from what the drives have.
    pub fn plan_quick_stop(&mut self) {
        self.stop.plan(&self.prev, &self.last, StopKind::Quick);
    }

    /// The quick stop's next setpoints from what the drives have (see [`Stop::step`]).
    pub fn brake(&self, out: &mut [Setpoint]) {
        self.stop.step(&self.prev, &self.last, out);
    }

    /// `out` reached the drives marked in `taken` (every drive when `None`) at tick `k`.
    pub fn commit(&mut self, k: u64, out: &[Setpoint], taken: Option<&[bool]>) {
        for (j, (((p, l), o), at)) in self
            .prev
            .iter_mut()
            .zip(self.last.iter_mut())
            .zip(out)
            .zip(self.took_at.iter_mut())
            .enumerate()
        {
            if taken.is_none_or(|t| t.get(j).copied().unwrap_or(false)) {
                *p = *l;
                *l = *o;
                *at = k;
            }
        }
    }

    /// Its last two setpoints are one position at rest.
    fn still(&self, j: usize) -> bool {
        self.prev[j].position == self.last[j].position && self.last[j].velocity == 0.0
    }

    /// DOF `j`'s drive has taken nothing for `silent` ticks by tick `now`: no bus reaches it.
    pub fn silent(&self, j: usize, now: u64, silent: u64) -> bool {
        self.took_at
            .get(j)
            .is_some_and(|&at| now.saturating_sub(at) >= silent)
    }

    /// Every judged drive holds still, or has taken nothing for `silent` ticks by tick `now`
    /// (a bus that no longer reaches it: it is left to its own watchdog).
    pub fn stopped(&self, now: u64, silent: u64) -> bool {
        (0..self.last.len()).all(|j| self.free[j] || self.still(j) || self.silent(j, now, silent))
    }

    /// Drives that have taken nothing for `silent` ticks by tick `now` are at rest where they
    /// were last reached (their own watchdog, or the held target, stopped them long since): their
    /// history restarts there, so a bus that drains again brings them the hold, never the rest
    /// of a quick stop from the speed they had before the silence.
    pub fn settle_silent(&mut self, now: u64, silent: u64) {
        for j in 0..self.last.len() {
            if !self.free[j] && !self.still(j) && self.silent(j, now, silent) {
                self.resync(j, self.last[j].position);
            }
        }
    }

    /// DOF `j`'s history restarts at rest at `position` (the drive came up, or stiffened, there).
    pub fn resync(&mut self, j: usize, position: f64) {
        if let (Some(p), Some(l)) = (self.prev.get_mut(j), self.last.get_mut(j)) {
            *l = at_rest(position);
            *p = *l;
        }
    }

    /// DOF `j`'s drive is compliant (`true`: not judged) or stiff again.
    pub fn set_free(&mut self, j: usize, free: bool) {
        if let Some(f) = self.free.get_mut(j) {
            *f = free;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::robot::Limits;

    fn joints(quick: Option<f64>) -> JointSet {
        let mut js = JointSet::uniform(
            1,
            DofLimits {
                position: Limits::symmetric(1.0),
                velocity: Limits::symmetric(2.0),
                acceleration: Limits::symmetric(8.0),
                effort: Limits::UNBOUNDED,
            },
        );
        js.dofs[0].quick_stop_deceleration = quick;
        js
    }

    fn moving(p: f64, v: f64) -> Setpoint {
        Setpoint {
            position: p,
            velocity: v,
            acceleration: 0.0,
        }
    }

    /// Cruising at 1.6 rad/s towards the +1 limit: at 8 rad/s² the stop takes 0.16 rad, at a
    /// quick stop of 4 rad/s² 0.32 rad.
    #[test]
    fn a_setpoint_from_which_the_quick_stop_would_cross_a_limit_is_refused() {
        let rate = 1000.0;
        for (quick, at, refused) in [
            (None, 0.83, false),
            (None, 0.85, true),
            (Some(4.0), 0.67, false),
            (Some(4.0), 0.69, true),
        ] {
            let mut g = Guard::new(&joints(quick), rate, &[at - 2.0 * 1.6 / rate]);
            g.commit(0, &[moving(at - 1.6 / rate, 1.6)], None);
            g.commit(0, &[moving(at, 1.6)], None);
            let next = [moving(at + 1.6 / rate, 1.6)];
            let verdict = g.judge(&next);
            assert_eq!(verdict.is_some(), refused, "{quick:?} at {at}: {verdict:?}");
            if refused {
                assert_eq!(verdict, Some((0, LIMIT_STOPPABLE)));
            }
        }
    }

    /// The brake from a stoppable state stays inside every limit down to rest, and a drive
    /// that missed a step goes on from the one it has.
    #[test]
    fn braking_from_what_a_drive_took_is_inside_the_limits_even_after_a_missed_step() {
        let rate = 1000.0;
        let js = joints(Some(4.0));
        let mut g = Guard::new(&js, rate, &[0.0]);
        g.commit(0, &[moving(0.0, 1.6)], None);
        g.commit(0, &[moving(1.6 / rate, 1.6)], None);
        g.plan_quick_stop();
        let mut out = [Setpoint::default()];
        let mut stream = vec![g.prev()[0], g.last()[0]];
        for tick in 0..2000 {
            g.brake(&mut out);
            assert_eq!(g.judge(&out), None, "tick {tick}: {out:?}");
            // Every fifth write fails.
            if tick % 5 != 3 {
                g.commit(tick, &out, None);
                stream.push(out[0]);
            } else {
                g.commit(tick, &out, Some(&[false]));
            }
        }
        assert!(g.stopped(2000, u64::MAX));
        let stream: Vec<Vec<Setpoint>> = stream.into_iter().map(|s| vec![s]).collect();
        crate::trajectory::Envelope::check(&js, rate, stream.iter().map(Vec::as_slice)).unwrap();
        let end = g.last()[0].position;
        assert!(end < 1.0 && (end - 1.6 * 1.6 / 8.0).abs() < 0.01, "{end}");
    }
}
