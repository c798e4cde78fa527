//! What happened, tick by tick, in words: the events the flight recorder keeps beside the rows —
//! state changes, faults, E-stops and guard interventions read off the loop's own rows, and the
//! requests the daemon took (with who sent them).

use crate::rt::{State, TraceRow};
use crate::session::{describe_estop, describe_fault};
use crate::trajectory::JointSet;

/// What kind of thing happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// The loop's state changed (or the record starts: the state it was in).
    State,
    /// A request over the control socket, with the uid that sent it.
    Request,
    /// The loop's guard intervened on a setpoint.
    Guard,
    Fault,
    EStop,
}

impl EventKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::State => "state",
            EventKind::Request => "request",
            EventKind::Guard => "guard",
            EventKind::Fault => "fault",
            EventKind::EStop => "estop",
        }
    }

    /// Severity in Foxglove's `foxglove.Log` levels: 2 info, 3 warning, 4 error.
    pub fn level(self) -> u8 {
        match self {
            EventKind::State | EventKind::Request => 2,
            EventKind::Guard => 3,
            EventKind::Fault | EventKind::EStop => 4,
        }
    }
}

/// One event at a loop tick.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub tick: u64,
    pub kind: EventKind,
    pub text: String,
    /// Who sent a request (its Unix uid).
    pub uid: Option<u32>,
    /// The state the loop entered, for a state change.
    pub state: Option<State>,
}

impl Event {
    fn new(tick: u64, kind: EventKind, text: String) -> Event {
        Event {
            tick,
            kind,
            text,
            uid: None,
            state: None,
        }
    }

    /// A request the daemon answered at `tick`: what it asked and how it went.
    pub fn request(tick: u64, uid: u32, text: String) -> Event {
        Event {
            uid: Some(uid),
            ..Event::new(tick, EventKind::Request, text)
        }
    }
}

/// The events in `rows` (consecutive ticks of one loop): the state the record starts in, then
/// each state change, guard intervention, fault and E-stop at the tick it shows. Within a tick
/// the state change comes first and a fault or E-stop last.
pub fn from_rows(rows: &[TraceRow], joints: &JointSet) -> Vec<Event> {
    let mut events = Vec::new();
    let mut before: Option<&TraceRow> = None;
    for row in rows {
        let t = row.tick;
        match before {
            None => events.push(Event {
                state: Some(row.state),
                ..Event::new(t, EventKind::State, format!("state {}", row.state.as_str()))
            }),
            Some(b) if b.state != row.state => events.push(Event {
                state: Some(row.state),
                ..Event::new(
                    t,
                    EventKind::State,
                    format!("state {} → {}", b.state.as_str(), row.state.as_str()),
                )
            }),
            Some(_) => {}
        }
        if let Some(b) = before {
            if row.guard > b.guard {
                events.push(Event::new(
                    t,
                    EventKind::Guard,
                    format!(
                        "the guard refused {} setpoint(s) outside the limits",
                        row.guard - b.guard
                    ),
                ));
            }
            if let (None, Some(f)) = (b.fault, row.fault) {
                events.push(Event::new(
                    t,
                    EventKind::Fault,
                    format!("fault: {}", describe_fault(&f, joints, None)),
                ));
            }
            if let (None, Some(cause)) = (b.estop.cause, row.estop.cause) {
                events.push(Event::new(
                    t,
                    EventKind::EStop,
                    format!("E-stop: {}", describe_estop(Some(cause), joints)),
                ));
            }
        }
        before = Some(row);
    }
    events
}

/// The first tick of `rows` at which something a flight recorder dumps for happened after the
/// first row: a fault, an E-stop or a guard intervention; with its event kind.
pub fn first_trigger(rows: &[TraceRow]) -> Option<(u64, EventKind)> {
    rows.windows(2).find_map(|w| {
        let (b, r) = (&w[0], &w[1]);
        if b.fault.is_none() && r.fault.is_some() {
            Some((r.tick, EventKind::Fault))
        } else if b.estop.cause.is_none() && r.estop.cause.is_some() {
            Some((r.tick, EventKind::EStop))
        } else if r.guard > b.guard {
            Some((r.tick, EventKind::Guard))
        } else {
            None
        }
    })
}
