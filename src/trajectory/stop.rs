//! Bringing a moving robot to rest within its limits, planned on the real-time loop.
//!
//! A stop starts from the state the drives have seen: the finite-difference velocity of the last
//! two setpoints written (`previous`, `last`) for the positions, and `last`'s velocity field for
//! the velocity feed-forward. Each decelerates at a constant rate to zero, tick by tick, so the
//! stream stays within the acceleration limits across the junction whatever interpolation came
//! before (a position drive sees the positions, a velocity drive the velocity field).
//!
//! - [`StopKind::Planned`]: all DOFs come to rest together on the line they were moving along,
//!   as slowly as the slowest DOF needs, when that keeps every DOF inside its position limits;
//!   otherwise each DOF brakes at its own maximum deceleration. Braking at the limit from the
//!   stream's own finite-difference velocity never goes further than the proved motion could
//!   have (its steps decelerate no faster), so it stays inside the limits the motion kept.
//! - [`StopKind::Quick`]: each DOF at its quick-stop deceleration (at most its acceleration
//!   limit): the fastest stop there is, never a step.
//!
//! A planned stop is sampled by its tick ([`Stop::sample`]), or stepped from whatever the drives
//! last received ([`Stop::step`]): each DOF's velocities one planned drop closer to zero, so a
//! drive that missed a setpoint (a failed write) continues its stop from what it has.
//!
//! A DOF without an acceleration limit stops within [`UNLIMITED_STOP_S`], sooner when that would
//! carry it past its position limit.
//! A mimic follower always stops with its leader (both take the longer of their two stops), so
//! the coupling the model states holds through every stop.

use super::{JointSet, Setpoint};
use crate::robot::Limits;

/// Stopping time used for a DOF with no acceleration limit (s).
pub const UNLIMITED_STOP_S: f64 = 0.05;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopKind {
    /// Coordinated when that stays inside the position limits, else each DOF at its limit.
    Planned,
    /// Each DOF at its quick-stop deceleration.
    Quick,
}

/// One DOF's stop: two ramps to zero, one for the positions' per-tick velocity and one for the
/// velocity field.
#[derive(Debug, Clone, Copy, Default)]
struct Track {
    start: Setpoint,
    /// Finite-difference velocity at the start (`(last − previous) / dt`) and how much it drops
    /// each tick (magnitude); `moving` ticks have a positive velocity.
    step_velocity: f64,
    step_drop: f64,
    moving: u64,
    /// Velocity field at the start and its drop per tick; zero after `field_ticks`.
    field: f64,
    field_drop: f64,
    field_ticks: u64,
}

/// A stop planner: allocates once in [`Stop::new`]; [`Stop::plan`] and [`Stop::sample`] never
/// allocate, lock or block, so the loop can plan a stop the moment it needs one.
#[derive(Debug, Clone)]
pub struct Stop {
    rate_hz: f64,
    /// Per DOF: the deceleration limits braking a positive and a negative velocity
    /// (magnitudes), the quick-stop deceleration, and the position limits.
    brake_positive: Vec<f64>,
    brake_negative: Vec<f64>,
    quick: Vec<f64>,
    position: Vec<Limits>,
    /// Per DOF, the DOF whose stop it shares: its mimic leader, else itself.
    family: Vec<usize>,
    /// Per family head, the longest ramp of the family, in ticks (scratch for `plan`).
    longest_steps: Vec<f64>,
    longest_fields: Vec<f64>,
    tracks: Vec<Track>,
    ticks: u64,
    coordinated: bool,
}

impl Stop {
    /// A planner for `joints` at `rate_hz` (a positive number). `quick_decel`: per DOF, the
    /// quick-stop deceleration magnitude; entries missing mean the DOF's own
    /// ([`CommandedDof::quick_stop_deceleration`](super::CommandedDof)); not positive or above
    /// the DOF's acceleration limit, the acceleration limit. Until planned, it holds zeros.
    pub fn new(joints: &JointSet, rate_hz: f64, quick_decel: &[f64]) -> Stop {
        let n = joints.len();
        let brake = |x: f64| if x > 0.0 { x } else { f64::INFINITY };
        Stop {
            rate_hz,
            brake_positive: joints
                .dofs
                .iter()
                .map(|d| brake(-d.limits.acceleration.lower))
                .collect(),
            brake_negative: joints
                .dofs
                .iter()
                .map(|d| brake(d.limits.acceleration.upper))
                .collect(),
            quick: joints
                .dofs
                .iter()
                .enumerate()
                .map(|(i, d)| {
                    quick_decel
                        .get(i)
                        .copied()
                        .or(d.quick_stop_deceleration)
                        .map_or(f64::INFINITY, brake)
                })
                .collect(),
            position: joints.dofs.iter().map(|d| d.limits.position).collect(),
            family: joints
                .dofs
                .iter()
                .enumerate()
                .map(|(i, d)| d.mimic.map_or(i, |m| m.leader))
                .collect(),
            longest_steps: vec![0.0; n],
            longest_fields: vec![0.0; n],
            tracks: vec![Track::default(); n],
            ticks: 1,
            coordinated: true,
        }
    }

    /// Plans a stop from `last` (the setpoints last written, JointSet order); `previous` are the
    /// ones written one period before (`last` again when there are none). Extra entries are
    /// ignored; DOFs missing from either stay where the previous plan left them.
    pub fn plan(&mut self, previous: &[Setpoint], last: &[Setpoint], kind: StopKind) {
        match kind {
            StopKind::Quick => {
                self.brake_alone(previous, last, true);
                self.keep_families_together();
                self.coordinated = false;
                self.settle();
            }
            StopKind::Planned => {
                self.brake_alone(previous, last, false);
                self.coordinate();
                self.settle();
                // Together only if every DOF stays inside its limits; otherwise each alone.
                let inside = (0..self.tracks.len()).all(|i| {
                    let (t, l) = (&self.tracks[i], self.position[i]);
                    l.contains(t.start.position)
                        && self.rest_position(i).is_some_and(|r| l.contains(r))
                });
                if !inside {
                    self.brake_alone(previous, last, false);
                    self.keep_families_together();
                    self.coordinated = false;
                    self.settle();
                }
            }
        }
    }

    /// Each DOF braking alone, at its acceleration limit or (`quick`) its quick-stop deceleration:
    /// the per-tick drops of both ramps.
    fn brake_alone(&mut self, previous: &[Setpoint], last: &[Setpoint], quick: bool) {
        let rate = self.rate_hz;
        let unlimited_ticks = (UNLIMITED_STOP_S * rate).ceil().max(1.0);
        for (i, (track, (p, l))) in self
            .tracks
            .iter_mut()
            .zip(previous.iter().zip(last))
            .enumerate()
        {
            let finite = |x: f64| if x.is_finite() { x } else { 0.0 };
            let step_velocity = finite((l.position - p.position) * rate);
            let field = finite(l.velocity);
            let decel = |v: f64| {
                let limit = if v > 0.0 {
                    self.brake_positive[i]
                } else {
                    self.brake_negative[i]
                };
                if quick {
                    limit.min(self.quick[i])
                } else {
                    limit
                }
            };
            let a = decel(step_velocity);
            let step_drop = if a.is_finite() {
                a / rate
            } else {
                // Without a limit: n ticks travel |v|·(n − 1)/(2·rate); no farther than the
                // position limit ahead (at once when it is there already).
                let room = if step_velocity > 0.0 {
                    self.position[i].upper - l.position
                } else {
                    l.position - self.position[i].lower
                };
                let reach = 2.0 * room * rate / step_velocity.abs() + 1.0;
                let ticks = if reach.is_nan() {
                    unlimited_ticks
                } else {
                    unlimited_ticks.min(reach.floor()).max(1.0)
                };
                step_velocity.abs() / ticks
            };
            let a = decel(field);
            let field_drop = if a.is_finite() {
                a / rate
            } else {
                field.abs() / unlimited_ticks
            };
            *track = Track {
                start: *l,
                step_velocity,
                step_drop,
                moving: 0,
                field,
                field_drop,
                field_ticks: 0,
            };
        }
    }

    /// Counts each ramp's ticks, and the stop's.
    fn settle(&mut self) {
        let mut rest = 0;
        for t in &mut self.tracks {
            t.moving = ramp_ticks(t.step_velocity, t.step_drop).saturating_sub(1);
            t.field_ticks = ramp_ticks(t.field, t.field_drop);
            let settle = u64::from(t.start.acceleration != 0.0);
            rest = rest.max(t.moving).max(t.field_ticks).max(settle);
        }
        self.ticks = rest + 1;
    }

    /// Stretches the ramps of each mimic leader and its followers to the family's longest, so
    /// they stop together and the coupling holds.
    fn keep_families_together(&mut self) {
        let ticks = |v: f64, drop: f64| if v == 0.0 { 0.0 } else { v.abs() / drop };
        self.longest_steps.iter_mut().for_each(|x| *x = 0.0);
        self.longest_fields.iter_mut().for_each(|x| *x = 0.0);
        for (t, &head) in self.tracks.iter().zip(&self.family) {
            let (s, f) = (
                &mut self.longest_steps[head],
                &mut self.longest_fields[head],
            );
            *s = s.max(ticks(t.step_velocity, t.step_drop));
            *f = f.max(ticks(t.field, t.field_drop));
        }
        for (t, &head) in self.tracks.iter_mut().zip(&self.family) {
            let (steps, fields) = (self.longest_steps[head], self.longest_fields[head]);
            if steps > 0.0 {
                t.step_drop = t.step_velocity.abs() / steps;
            }
            if fields > 0.0 {
                t.field_drop = t.field.abs() / fields;
            }
        }
    }

    /// Stretches every DOF's ramps to the slowest one's length (same line, same end).
    fn coordinate(&mut self) {
        let longest = |f: fn(&Track) -> (f64, f64)| {
            self.tracks
                .iter()
                .map(|t| {
                    let (v, drop) = f(t);
                    if v == 0.0 { 0.0 } else { v.abs() / drop }
                })
                .fold(0.0, f64::max)
        };
        let steps = longest(|t| (t.step_velocity, t.step_drop));
        let fields = longest(|t| (t.field, t.field_drop));
        for t in &mut self.tracks {
            if steps > 0.0 {
                t.step_drop = t.step_velocity.abs() / steps;
            }
            if fields > 0.0 {
                t.field_drop = t.field.abs() / fields;
            }
        }
        self.coordinated = true;
    }

    /// Ticks until rest (tick `ticks() - 1` is at rest). At least 1.
    pub fn ticks(&self) -> u64 {
        self.ticks
    }

    pub fn rate_hz(&self) -> f64 {
        self.rate_hz
    }

    /// Whether a quick stop from `last` (after `previous`) ends inside every DOF's position limits
    /// — stoppable everywhere, as drive safety functions reason about braking distance: the first
    /// DOF it would carry past a limit (or, already outside, farther out), and where it would end.
    /// Plans the quick stop (this planner's previous plan is replaced).
    pub fn unstoppable(
        &mut self,
        previous: &[Setpoint],
        last: &[Setpoint],
    ) -> Option<(usize, f64)> {
        self.plan(previous, last, StopKind::Quick);
        (0..self.tracks.len()).find_map(|j| {
            let rest = self.rest_position(j)?;
            let lim = self.position[j];
            let now = last.get(j)?.position;
            // As the stream's position check: its relative tolerance, and rounding at this scale.
            let tolerance = super::envelope::RELATIVE_TOLERANCE
                * super::envelope::position_scale(lim)
                + 4.0 * f64::EPSILON * now.abs().max(rest.abs());
            let beyond = |x: f64| (lim.lower - x).max(x - lim.upper);
            // NaN counts as outside.
            let inside = beyond(rest) <= beyond(now).max(0.0) + tolerance;
            (!inside).then_some((j, rest))
        })
    }

    /// Did the last `Planned` stop keep the DOFs together (false after a `Quick` one)?
    pub fn coordinated(&self) -> bool {
        self.coordinated
    }

    /// Where each DOF comes to rest.
    pub fn rest_position(&self, dof: usize) -> Option<f64> {
        let t = self.tracks.get(dof)?;
        Some(t.position(t.moving, self.rate_hz))
    }

    /// The stop's next setpoints from what the drives last received (`previous`, `last`): each
    /// DOF's finite-difference velocity and velocity field one planned drop closer to zero. From
    /// the setpoints planned from, this is [`sample`](Self::sample)'s tick 1; from its own
    /// output, the ticks after (up to rounding). A drive that missed a setpoint goes on from the
    /// one it has, with the deceleration planned: its stop is one tick later, never a step.
    pub fn step(&self, previous: &[Setpoint], last: &[Setpoint], out: &mut [Setpoint]) {
        let rate = self.rate_hz;
        for ((o, t), (p, l)) in out
            .iter_mut()
            .zip(&self.tracks)
            .zip(previous.iter().zip(last))
        {
            let u = (l.position - p.position) * rate;
            let u = if u.is_finite() { u } else { 0.0 };
            let speed = (u.abs() - t.step_drop).max(0.0);
            let f = if l.velocity.is_finite() {
                l.velocity
            } else {
                0.0
            };
            let field = (f.abs() - t.field_drop).max(0.0);
            let next = (field - t.field_drop).max(0.0);
            *o = Setpoint {
                position: l.position + u.signum() * speed / rate,
                velocity: f.signum() * field,
                acceleration: f.signum() * (next - field) * rate,
            };
        }
    }

    /// Tick `tick` of the stop (0 = `last` as planned from); ticks past the end are at rest.
    pub fn sample(&self, tick: u64, out: &mut [Setpoint]) {
        for (o, t) in out.iter_mut().zip(&self.tracks) {
            *o = if tick == 0 {
                t.start
            } else {
                let k = tick.min(t.field_ticks) as f64;
                let speed = (t.field.abs() - t.field_drop * k).max(0.0);
                let next = (speed - t.field_drop).max(0.0);
                Setpoint {
                    position: t.position(tick.min(t.moving), self.rate_hz),
                    velocity: t.field.signum() * speed,
                    acceleration: t.field.signum() * (next - speed) * self.rate_hz,
                }
            };
        }
    }
}

impl Track {
    /// Position after `k ≤ moving` ticks: the start plus the sum of the first `k` per-tick
    /// velocities `|u| − drop·j`, `j = 1..=k`.
    fn position(&self, k: u64, rate_hz: f64) -> f64 {
        let u = self.step_velocity;
        if u == 0.0 || k == 0 {
            return self.start.position;
        }
        let k = k as f64;
        let sum = k * u.abs() - self.step_drop * k * (k + 1.0) / 2.0;
        self.start.position + u.signum() * sum / rate_hz
    }
}

/// How far a stop from the finite-difference velocity `u` travels braking at `decel` (magnitude)
/// at `rate_hz`, as [`Stop`] brakes it tick by tick: the sum of the per-tick velocities
/// `|u| − drop·j` while positive (`drop = decel / rate_hz`). 0 without a finite deceleration.
pub fn braking_distance(u: f64, decel: f64, rate_hz: f64) -> f64 {
    let drop = decel / rate_hz;
    if !(drop.is_finite() && drop > 0.0 && u.is_finite()) {
        return 0.0;
    }
    let k = ramp_ticks(u, drop).saturating_sub(1) as f64;
    (k * u.abs() - drop * k * (k + 1.0) / 2.0) / rate_hz
}

/// Number of ticks `j ≥ 1` until `|v| − drop·j` reaches zero (0 when `v` is 0).
fn ramp_ticks(v: f64, drop: f64) -> u64 {
    let v = v.abs();
    if v == 0.0 || drop.is_nan() || drop <= 0.0 {
        return 0;
    }
    let ratio = (v / drop).ceil().max(1.0);
    // Past 2^53 ticks a float step is coarser than one tick, so the adjustment below would
    // not settle (and `n + 1` overflowed at u64::MAX: a motion file holding 1e20 rad hung
    // `check`). Such a stop is astronomically long; the cast saturates.
    if ratio >= 9_007_199_254_740_992.0 {
        return ratio as u64;
    }
    let mut n = ratio as u64;
    // Rounding can put the exact zero one tick either side.
    while n > 1 && v - drop * (n - 1) as f64 <= 0.0 {
        n -= 1;
    }
    while v - drop * n as f64 > 0.0 {
        n += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::robot::Limits;

    /// A velocity no stop tick count fits in (a motion file holding 1e20 rad) gives a distance
    /// at once: `ramp_ticks` overflowed `n + 1` and, wrapped in a release build, hung `check`.
    #[test]
    fn an_absurd_velocity_has_a_braking_distance_at_once() {
        for u in [1e20, -1e24, 1e300, f64::MAX] {
            let d = braking_distance(u, 20.0, 500.0);
            assert!(d > 1e10 || d.is_infinite(), "{u}: {d}");
        }
        assert_eq!(ramp_ticks(2.0, 1.0), 2);
    }
    use crate::trajectory::tests::demo_joints;
    use crate::trajectory::{DofLimits, Envelope};

    /// Moving at `velocity` (per DOF) for a while: the setpoints one period apart.
    fn cruising(at: &[f64], velocity: &[f64], rate: f64) -> (Vec<Setpoint>, Vec<Setpoint>) {
        let setpoint = |position: f64, velocity: f64| Setpoint {
            position,
            velocity,
            acceleration: 0.0,
        };
        let previous = at
            .iter()
            .zip(velocity)
            .map(|(&p, &v)| setpoint(p - v / rate, v))
            .collect();
        let last = at
            .iter()
            .zip(velocity)
            .map(|(&p, &v)| setpoint(p, v))
            .collect();
        (previous, last)
    }

    /// The stream a drive sees: the two setpoints before the stop, the stop, then rest.
    fn stream(stop: &Stop, previous: &[Setpoint]) -> Vec<Vec<Setpoint>> {
        let mut out = vec![previous.to_vec()];
        for k in 0..stop.ticks() + 2 {
            let mut s = vec![Setpoint::default(); previous.len()];
            stop.sample(k, &mut s);
            out.push(s);
        }
        out
    }

    fn within(joints: &JointSet, rate: f64, stream: &[Vec<Setpoint>]) {
        if let Err(b) = Envelope::check(joints, rate, stream.iter().map(Vec::as_slice)) {
            panic!("{b}");
        }
    }

    #[test]
    fn a_coordinated_stop_keeps_to_the_line_within_the_limits() {
        let joints = demo_joints();
        let rate = 1000.0;
        let mut stop = Stop::new(&joints, rate, &[]);
        let at = [0.2, -0.1, 0.0, 0.0, 0.0, 0.02, 0.25];
        let v = [1.6, -0.3, 0.0, 0.0, 0.0, 0.0, 0.0];
        let (previous, last) = cruising(&at, &v, rate);
        stop.plan(&previous, &last, StopKind::Planned);
        assert!(stop.coordinated());
        // base_yaw: 1.6 rad/s at 8 rad/s² → 0.2 s.
        assert!((199..=201).contains(&stop.ticks()), "{}", stop.ticks());
        let s = stream(&stop, &previous);
        within(&joints, rate, &s);
        let end = s.last().unwrap();
        assert_eq!(end[0].velocity, 0.0);
        // Same line: each DOF covered the same share of its velocity × duration.
        let d0 = (end[0].position - at[0]) / v[0];
        let d1 = (end[1].position - at[1]) / v[1];
        assert!(
            (d0 - d1).abs() < 1e-12 && (d0 - 0.1).abs() < 1e-3,
            "{d0} {d1}"
        );
        assert_eq!(stop.rest_position(0), Some(end[0].position));
        assert_eq!(end[2].position, 0.0);
    }

    /// Issue 10: c1 at 0.984 rad moving 0.243 rad/s next to its +1 rad limit, while a fast joint
    /// far from its limit sets the coordinated stop's duration. Together c1 would coast to 1.014;
    /// braking alone it stops inside.
    #[test]
    fn the_stop_next_to_a_limit_does_not_cross_it() {
        let dof = |p: f64, v: f64, a: f64| DofLimits {
            position: Limits::symmetric(p),
            velocity: Limits::symmetric(v),
            acceleration: Limits::symmetric(a),
            effort: Limits::UNBOUNDED,
        };
        let mut joints = JointSet::uniform(2, dof(2.8, 2.0, 8.0));
        joints.dofs[1].limits = dof(1.0, 1.0, 2.0);
        let rate = 100.0;
        let (previous, last) = cruising(&[0.0, 0.984], &[1.95, 0.243], rate);
        let mut stop = Stop::new(&joints, rate, &[]);
        stop.plan(&previous, &last, StopKind::Planned);
        assert!(!stop.coordinated());
        let rest = stop.rest_position(1).unwrap();
        assert!(rest < 1.0, "{rest}");
        // No further than braking at the limit in continuous time.
        assert!(rest <= 0.984 + 0.243 * 0.243 / 4.0 + 1e-12, "{rest}");
        within(&joints, rate, &stream(&stop, &previous));

        // Far from the limit the same state stops together.
        let (previous, last) = cruising(&[0.0, 0.5], &[1.95, 0.243], rate);
        stop.plan(&previous, &last, StopKind::Planned);
        assert!(stop.coordinated());
        within(&joints, rate, &stream(&stop, &previous));
    }

    /// After linear interpolation the last setpoint's velocity field is the next segment's slope,
    /// while the positions moved at the previous one: the stop starts from both as they were.
    #[test]
    fn starts_from_the_state_the_drive_saw() {
        let joints = JointSet::uniform(
            1,
            DofLimits {
                position: Limits::UNBOUNDED,
                velocity: Limits::symmetric(2.0),
                acceleration: Limits::symmetric(10.0),
                effort: Limits::UNBOUNDED,
            },
        );
        let rate = 100.0;
        for (step, field) in [(1.0, 0.9), (0.9, 1.0), (1.0, 1.0), (0.0, 0.1), (0.1, 0.0)] {
            let (previous, _) = cruising(&[0.0], &[step], rate);
            let last = [Setpoint {
                position: 0.0,
                velocity: field,
                acceleration: 0.0,
            }];
            for kind in [StopKind::Planned, StopKind::Quick] {
                let mut stop = Stop::new(&joints, rate, &[]);
                stop.plan(&previous, &last, kind);
                within(&joints, rate, &stream(&stop, &previous));
            }
        }
    }

    #[test]
    fn a_quick_stop_brakes_each_dof_at_its_quick_deceleration() {
        let joints = demo_joints();
        let rate = 1000.0;
        let at = [0.0, 0.0, 0.0, 0.0, 0.0, 0.02, 0.25];
        let v = [1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0];
        let (previous, last) = cruising(&at, &v, rate);
        // base_yaw at 2 rad/s² (below its limit), shoulder at its 6 rad/s² limit (asked 100).
        let mut stop = Stop::new(&joints, rate, &[2.0, 100.0]);
        stop.plan(&previous, &last, StopKind::Quick);
        assert!(!stop.coordinated());
        assert!((500..=502).contains(&stop.ticks()), "{}", stop.ticks());
        let rest0 = stop.rest_position(0).unwrap();
        let rest1 = stop.rest_position(1).unwrap();
        assert!((rest0 - 0.25).abs() < 1e-3, "{rest0}");
        assert!((rest1 - 1.0 / 12.0).abs() < 1e-3, "{rest1}");
        within(&joints, rate, &stream(&stop, &previous));
    }

    #[test]
    fn at_rest_is_one_tick_and_unlimited_dofs_stop_within_50_ms() {
        let joints = demo_joints();
        let mut stop = Stop::new(&joints, 1000.0, &[]);
        let rest = vec![Setpoint::default(); joints.len()];
        stop.plan(&rest, &rest, StopKind::Planned);
        assert_eq!(stop.ticks(), 1);
        let free = JointSet::unconstrained(2);
        let mut stop = Stop::new(&free, 1000.0, &[]);
        let (previous, last) = cruising(&[0.0, 0.0], &[3.0, -1.0], 1000.0);
        stop.plan(&previous, &last, StopKind::Quick);
        assert!((50..=52).contains(&stop.ticks()), "{}", stop.ticks());
    }

    #[test]
    fn a_mimic_follower_stops_with_its_leader() {
        let rate = 1000.0;
        let limits = DofLimits {
            position: Limits::symmetric(10.0),
            velocity: Limits::symmetric(4.0),
            acceleration: Limits::symmetric(20.0),
            effort: Limits::symmetric(10.0),
        };
        let mut joints = crate::trajectory::JointSet::uniform(2, limits);
        // The follower turns at half the leader's speed, so alone it would stop sooner.
        joints.dofs[1].mimic = Some(crate::trajectory::MimicOf {
            leader: 0,
            multiplier: 0.5,
            offset: 0.25,
        });
        let (previous, last) = cruising(&[1.0, 0.75], &[2.0, 1.0], rate);
        for kind in [StopKind::Quick, StopKind::Planned] {
            let mut stop = Stop::new(&joints, rate, &[20.0, 20.0]);
            stop.plan(&previous, &last, kind);
            let mut out = vec![Setpoint::default(); 2];
            for k in 0..stop.ticks() + 2 {
                stop.sample(k, &mut out);
                let coupled = 0.5 * out[0].position + 0.25;
                assert!(
                    (out[1].position - coupled).abs() < 1e-9,
                    "{kind:?} tick {k}: {out:?}"
                );
            }
        }
    }
}
