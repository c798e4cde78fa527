//! Splicing a proved path into a slot at a tick: the setpoints the loop will send up to a
//! switch tick a little ahead are predicted, the path is built and proved from them off the
//! loop, and the loop swaps it in at that tick — a replacement ([`Session::replace`]) and a
//! stream's pieces ([`Session::splice`]) alike. A stream's piece with nothing running in the
//! slot starts from the commanded pose at rest.

use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use super::{ErrorKind, Session, SessionError, poisoned};
use crate::rt::{Ack, Command, Outcome, Playback, Refusal, Repeat};
use crate::trajectory::{Setpoint, Setpoint3, Trajectory};

/// Times the loop may miss a switch tick (each miss doubles the look-ahead) before giving up.
const TRIES: usize = 6;

/// Where a path joins the slot's stream of setpoints.
#[derive(Debug)]
pub struct Join {
    /// The setpoints two ticks before the switch, one tick before and at it (the path's tick 0).
    pub from: Setpoint3,
    /// The loop tick of the switch.
    pub tick: u64,
    /// A position is outside its limits: the path may only bring it back.
    pub recovering: bool,
    /// Nothing ran in the slot: the path starts from the commanded pose at rest.
    pub from_rest: bool,
}

/// A path built from where it joins.
#[derive(Debug)]
pub struct Piece {
    /// From the join's setpoints into the motion.
    pub approach: Trajectory,
    pub motion: Trajectory,
    /// A streamed piece's last row ([`Playback::stream_tail`]).
    pub stream_tail: Option<u64>,
}

/// Builds (and proves) a path from a [`Join`].
pub type Build<'b> = dyn FnMut(&Join) -> Result<Piece, SessionError> + 'b;

/// A path the loop took.
#[derive(Debug, Clone, Copy)]
pub struct Spliced {
    pub motion_id: u32,
    /// The loop tick of the switch (the path's tick 0).
    pub tick: u64,
    pub from_rest: bool,
    /// The look-ahead the switch took, in slot ticks (more than asked for when the loop missed
    /// a closer one; 1 from rest).
    pub lead: u64,
}

/// How [`Session::splice_at`] went.
pub(super) enum Switch {
    Taken(Spliced),
    /// Nothing plays in the slot.
    Idle,
    /// What plays there comes to rest before the switch tick.
    EndsBefore,
}

impl Session {
    /// Whether any of `dofs`' positions in `from` (one per DOF) is outside its limits.
    fn outside(&self, dofs: &[usize], from: &[Setpoint]) -> bool {
        dofs.iter()
            .zip(from)
            .any(|(&d, s)| !self.joints.dofs[d].limits.position.contains(s.position))
    }

    /// Splices the path `build` makes into what plays in `slot`, `lead` slot ticks ahead (or at
    /// `at`, wall clock, when later), looking further ahead while the loop misses the tick. The
    /// playback plays `repeat` times.
    pub(super) fn splice_at(
        &self,
        slot: u8,
        name: &str,
        mut lead: u64,
        at: Option<SystemTime>,
        repeat: Repeat,
        build: &mut Build,
    ) -> Result<Switch, SessionError> {
        let s = usize::from(slot);
        for _ in 0..TRIES {
            let status = self.handle().peek();
            let running = status.slots[s];
            if running.motion_id.is_none() {
                return Ok(Switch::Idle);
            }
            let (dofs, route) = {
                let slots = self.slots.lock().map_err(|_| poisoned())?;
                let route = slots[s]
                    .route
                    .as_ref()
                    .filter(|(id, _)| Some(*id) == running.motion_id)
                    .map(|(_, r)| r.clone());
                (slots[s].dofs.clone(), route)
            };
            let (Some(route), Some(path)) = (route, running.path) else {
                return Err(SessionError::refused(format!(
                    "{name}: the motion playing there was not started by this session; stop it first"
                )));
            };
            if !path.steady() {
                return Err(SessionError::refused(format!(
                    "{name}: the motion there is pausing or resuming; try again once it plays or rests"
                )));
            }
            let ahead = match at {
                Some(t) => {
                    let ahead = t.duration_since(self.realtime()).map_err(|_| {
                        SessionError::refused(format!("{name}: the switch time has passed"))
                    })?;
                    // At most a day ahead (check_start_at); saturating all the same.
                    ((ahead.as_secs_f64() * self.rate_hz).ceil() as u64).max(lead)
                }
                None => lead,
            };
            // Counted in the slot's ticks, which a late loop delays but never skips; constant
            // memory and time however far ahead.
            let Some(from) = route.predict(path, status.tick, ahead, self.rate_hz) else {
                return Ok(Switch::EndsBefore);
            };
            let join = Join {
                recovering: self.outside(&dofs, &from[2]),
                from,
                tick: status.tick.saturating_add(ahead),
                from_rest: false,
            };
            let piece = build(&join)?;
            let motion_id = self.next_id.fetch_add(1, Ordering::Relaxed);
            let playback = Playback {
                repeat,
                slot,
                stream_tail: piece.stream_tail,
                ..Playback::new(motion_id, piece.approach, piece.motion)
            };
            let route = playback.route.clone();
            match self.command(Command::Replace {
                playback: Box::new(playback),
                at_tick: running.ran.saturating_add(ahead),
            })? {
                Ack::Done => {}
                Ack::Refused(Refusal::Missed) => {
                    lead = ahead.saturating_mul(2);
                    continue;
                }
                Ack::Refused(why) => return Err(self.refusal(name, why)),
                Ack::Ignored(state) => return Err(robot_is(name, state)),
            }
            // The loop says at the switch tick whether the path took over.
            let wait = Duration::try_from_secs_f64(ahead as f64 / self.rate_hz + 1.0)
                .unwrap_or(Duration::MAX);
            let taken = self.wait_for(wait, |st| {
                if st.slots[s].motion_id == Some(motion_id) {
                    return Some(true);
                }
                matches!(self.outcome(motion_id), Some(Outcome::Refused(_))).then_some(false)
            });
            match taken {
                Some(true) => {
                    self.remember_route(slot, motion_id, route);
                    return Ok(Switch::Taken(Spliced {
                        motion_id,
                        tick: join.tick,
                        from_rest: false,
                        lead: ahead,
                    }));
                }
                Some(false) => lead = ahead.saturating_mul(2),
                None => {
                    return Err(SessionError::new(
                        ErrorKind::Unavailable,
                        format!("{name}: the loop did not report the switch"),
                    ));
                }
            }
        }
        Err(SessionError::refused(format!(
            "{name}: the loop kept passing the switch tick (looking up to {lead} ticks ahead); try again"
        )))
    }

    /// Splices the piece `build` makes from a [`Join`] into `group`'s slot, `lead` slot ticks
    /// ahead (more when the loop missed it); with nothing running there, from the commanded pose
    /// at rest.
    pub fn splice(
        &self,
        group: Option<&str>,
        name: &str,
        lead: u64,
        build: &mut Build,
    ) -> Result<Spliced, SessionError> {
        let slot = self.slot_of(group)?;
        let lead = lead.max(3);
        for _ in 0..2 {
            match self.splice_at(slot, name, lead, None, Repeat::Once, build)? {
                Switch::Taken(spliced) => return Ok(spliced),
                Switch::Idle => return self.splice_from_rest(slot, name, build),
                Switch::EndsBefore => {
                    // What plays there comes to rest first: start from rest after it.
                    let wait = Duration::from_secs_f64(lead as f64 / self.rate_hz + 1.0);
                    let s = usize::from(slot);
                    self.wait_for(wait, |st| st.slots[s].motion_id.is_none().then_some(()));
                }
            }
        }
        Err(SessionError::refused(format!(
            "{name}: the motion playing there did not come to rest; try again"
        )))
    }

    /// Starts the piece `build` makes from the commanded pose of `slot`'s DOFs, at rest.
    fn splice_from_rest(
        &self,
        slot: u8,
        name: &str,
        build: &mut Build,
    ) -> Result<Spliced, SessionError> {
        let s = usize::from(slot);
        let status = self.ready_to_move(slot)?;
        let dofs = {
            let slots = self.slots.lock().map_err(|_| poisoned())?;
            slots[s].dofs.clone()
        };
        let rest: Vec<Setpoint> = dofs
            .iter()
            .map(|&d| Setpoint {
                position: status.commanded[d],
                ..Setpoint::default()
            })
            .collect();
        // The loop sends a playback's tick 0 on the tick that takes it.
        let join = Join {
            recovering: self.outside(&dofs, &rest),
            from: [rest.clone(), rest.clone(), rest],
            tick: status.tick + 1,
            from_rest: true,
        };
        let piece = build(&join)?;
        let motion_id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let playback = Playback {
            slot,
            stream_tail: piece.stream_tail,
            ..Playback::new(motion_id, piece.approach, piece.motion)
        };
        let route = playback.route.clone();
        match self.command(Command::Play(Box::new(playback)))? {
            Ack::Done => {}
            Ack::Refused(why) => return Err(self.refusal(name, why)),
            Ack::Ignored(state) => return Err(robot_is(name, state)),
        }
        self.remember_route(slot, motion_id, route);
        let tick = self.handle().peek().slots[s]
            .first_command_tick
            .unwrap_or(join.tick);
        Ok(Spliced {
            motion_id,
            tick,
            from_rest: true,
            lead: 1,
        })
    }

    /// The index of `group`'s slot in [`Status::slots`](crate::rt::Status::slots).
    pub fn slot_index(&self, group: Option<&str>) -> Result<usize, SessionError> {
        self.slot_of(group).map(usize::from)
    }

    /// JointSet indices of `group`'s DOFs (the whole robot's with `None`), ascending.
    pub fn group_dofs(&self, group: Option<&str>) -> Result<Vec<usize>, SessionError> {
        let slot = self.slot_of(group)?;
        let slots = self.slots.lock().map_err(|_| poisoned())?;
        Ok(slots[usize::from(slot)].dofs.clone())
    }
}

/// A command the loop ignored in `state`.
pub(super) fn robot_is(name: &str, state: crate::rt::State) -> SessionError {
    SessionError::refused(format!("{name}: the robot is {}", state.as_str()))
}
