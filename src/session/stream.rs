//! Splicing a streamed piece into a slot, as a replacement is: the setpoints the loop will send
//! up to a splice tick a little ahead are predicted, the piece is built and proved from them off
//! the loop, and the loop swaps it in at that tick (or, with nothing running there, starts it
//! from the commanded pose at rest).

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{ErrorKind, Session, SessionError, poisoned};
use crate::rt::{Ack, Command, Outcome, Playback, Refusal};
use crate::trajectory::{Setpoint, Setpoint3, Trajectory};

/// Where a piece joins the slot's stream of setpoints.
#[derive(Debug)]
pub struct Join {
    /// The setpoints two ticks before the splice, one tick before and at it (the piece's tick 0).
    pub from: Setpoint3,
    /// The loop tick of the splice.
    pub tick: u64,
    /// A position is outside its limits: the piece may only bring it back.
    pub recovering: bool,
    /// Nothing ran in the slot: the piece starts from the commanded pose at rest.
    pub from_rest: bool,
}

/// Builds a piece from where it joins: its approach (from the join's setpoints) and motion.
pub type Build<'b> = dyn FnMut(&Join) -> Result<(Trajectory, Trajectory), SessionError> + 'b;

/// A piece the loop took.
#[derive(Debug, Clone, Copy)]
pub struct Spliced {
    pub motion_id: u32,
    /// The loop tick of the splice (the piece's tick 0).
    pub tick: u64,
    pub from_rest: bool,
    /// The look-ahead the splice took, in slot ticks (more than asked for when the loop missed
    /// a closer one; 1 from rest).
    pub lead: u64,
}

impl Session {
    /// Splices the piece `build` makes from a [`Join`] (approach from the join's setpoints, then
    /// motion) into `group`'s slot, `lead` slot ticks ahead (more when the loop missed it).
    pub fn splice(
        &self,
        group: Option<&str>,
        name: &str,
        lead: u64,
        build: &mut Build,
    ) -> Result<Spliced, SessionError> {
        let slot = self.slot_of(group)?;
        let s = usize::from(slot);
        let dofs = {
            let slots = self.slots.lock().map_err(|_| poisoned())?;
            slots[s].dofs.clone()
        };
        let outside = |from: &[Setpoint]| {
            dofs.iter()
                .zip(from)
                .any(|(&d, s)| !self.joints.dofs[d].limits.position.contains(s.position))
        };
        let mut lead = lead.max(3);
        for _ in 0..5 {
            let status = self.handle().peek();
            let running = status.slots[s];
            if running.motion_id.is_none() {
                let status = self.ready_to_move(slot)?;
                let rest: Vec<Setpoint> = dofs
                    .iter()
                    .map(|&d| Setpoint {
                        position: status.commanded[d],
                        ..Setpoint::default()
                    })
                    .collect();
                let recovering = outside(&rest);
                // The loop sends a playback's tick 0 on the tick that takes it.
                let join = Join {
                    from: [rest.clone(), rest.clone(), rest],
                    tick: status.tick + 1,
                    recovering,
                    from_rest: true,
                };
                let (approach, motion) = build(&join)?;
                let motion_id = self.next_id.fetch_add(1, Ordering::Relaxed);
                let playback = Playback {
                    slot,
                    ..Playback::new(motion_id, approach, motion)
                };
                let route = playback.route.clone();
                match self.command(Command::Play(Box::new(playback)))? {
                    Ack::Done => {}
                    Ack::Refused(why) => return Err(self.refusal(name, why)),
                    Ack::Ignored(state) => {
                        return Err(SessionError::refused(format!(
                            "{name}: the robot is {}",
                            state.as_str()
                        )));
                    }
                }
                self.remember_route(slot, motion_id, route);
                let tick = self.handle().peek().slots[s]
                    .first_command_tick
                    .unwrap_or(join.tick);
                return Ok(Spliced {
                    motion_id,
                    tick,
                    from_rest: true,
                    lead: 1,
                });
            }
            let route = {
                let slots = self.slots.lock().map_err(|_| poisoned())?;
                slots[s]
                    .route
                    .as_ref()
                    .filter(|(id, _)| Some(*id) == running.motion_id)
                    .map(|(_, r)| r.clone())
            };
            let (Some(route), Some(path)) = (route, running.path) else {
                return Err(SessionError::refused(format!(
                    "{name}: the motion playing there was not started by this session; stop it first"
                )));
            };
            if !path.steady() {
                return Err(SessionError::refused(format!(
                    "{name}: the motion there is pausing or resuming; stream once it plays or rests"
                )));
            }
            // Counted in the slot's ticks, which a late loop delays but never skips.
            let Some(from) = route.predict(path, status.tick, lead, self.rate_hz) else {
                // What plays there comes to rest before the splice: start from rest after it.
                let wait = Duration::from_secs_f64(lead as f64 / self.rate_hz + 1.0);
                self.wait_for(wait, |st| st.slots[s].motion_id.is_none().then_some(()));
                continue;
            };
            let recovering = outside(&from[2]);
            let join = Join {
                from,
                tick: status.tick + lead,
                recovering,
                from_rest: false,
            };
            let (approach, motion) = build(&join)?;
            let motion_id = self.next_id.fetch_add(1, Ordering::Relaxed);
            let playback = Playback {
                slot,
                ..Playback::new(motion_id, approach, motion)
            };
            let new_route = playback.route.clone();
            match self.command(Command::Replace {
                playback: Box::new(playback),
                at_tick: running.ran + lead,
            })? {
                Ack::Done => {}
                Ack::Refused(Refusal::Missed) => {
                    lead *= 2;
                    continue;
                }
                Ack::Refused(why) => return Err(self.refusal(name, why)),
                Ack::Ignored(state) => {
                    return Err(SessionError::refused(format!(
                        "{name}: the robot is {}",
                        state.as_str()
                    )));
                }
            }
            // The loop says at the splice tick whether the piece took over.
            let wait = Duration::from_secs_f64(lead as f64 / self.rate_hz + 1.0);
            let taken = self.wait_for(wait, |st| {
                if st.slots[s].motion_id == Some(motion_id) {
                    return Some(true);
                }
                matches!(self.outcome(motion_id), Some(Outcome::Refused(_))).then_some(false)
            });
            match taken {
                Some(true) => {
                    self.remember_route(slot, motion_id, new_route);
                    return Ok(Spliced {
                        motion_id,
                        tick: join.tick,
                        from_rest: false,
                        lead,
                    });
                }
                Some(false) => {
                    lead *= 2;
                    continue;
                }
                None => {
                    return Err(SessionError::new(
                        ErrorKind::Unavailable,
                        format!("{name}: the loop did not report the splice"),
                    ));
                }
            }
        }
        Err(SessionError::refused(format!(
            "{name}: the loop kept missing the splice; send the chunk again with a new seq"
        )))
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
