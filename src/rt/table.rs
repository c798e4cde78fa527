//! The loop as an explicit state machine: one table of phases × inputs (commands and events) with
//! a defined [`Rule`] for every pair. The player looks each input up here ([`rule`]) and does
//! what the rule says; nothing else decides what a command or an event does.
//!
//! Obligations outlive the phase they were acknowledged in: a `disable` or a `shutdown`
//! acknowledged while something moves is honoured once it is at rest, whatever faults or E-stops
//! come meanwhile, and a `clear-fault` (or `recover`) acknowledged during a fault's quick stop
//! clears it at rest. At rest, pending obligations are met in this order: clear, enable
//! (`recover`), disable, exit.
//!
//! The book's state table (docs/src/loop.md) is [`markdown`] (a test keeps the two the same).

/// What the loop is doing, as far as the table is concerned: the rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Drives without power.
    Disabled,
    /// The enable sequence (also a teach-in's drives stiffening again).
    Enabling,
    /// Drives up, nothing moving.
    Holding,
    /// A slot plays (approaching, playing, streaming, starved, paused, resuming).
    Moving,
    /// Slots stop (planned or quick), then hold.
    Stopping,
    /// Slots stop for an acknowledged `disable`.
    Disabling,
    /// Slots stop for an acknowledged `shutdown`; the loop ends at rest.
    Ending,
    /// Teach-in: compliant drives follow a hand.
    Recording,
    /// A fault's quick stop, not yet at rest.
    FaultStopping,
    /// A fault, at rest: holding (or disabled) until cleared.
    Fault,
    /// The E-stop's quick stop, the input asserted.
    EStopStopping,
    /// The E-stop's quick stop, the input released meanwhile.
    EStopStoppingReleased,
    /// The E-stop at rest, the input asserted (or unreadable).
    EStop,
    /// The E-stop at rest, the input released: waiting for `clear-fault`.
    EStopReleased,
    /// The loop has ended (commands taken in the tick it ended in; later ones fail to send).
    Ended,
}

/// Every phase, in table order.
pub const PHASES: [Phase; 15] = [
    Phase::Disabled,
    Phase::Enabling,
    Phase::Holding,
    Phase::Moving,
    Phase::Stopping,
    Phase::Disabling,
    Phase::Ending,
    Phase::Recording,
    Phase::FaultStopping,
    Phase::Fault,
    Phase::EStopStopping,
    Phase::EStopStoppingReleased,
    Phase::EStop,
    Phase::EStopReleased,
    Phase::Ended,
];

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Disabled => "disabled",
            Phase::Enabling => "enabling",
            Phase::Holding => "holding",
            Phase::Moving => "moving",
            Phase::Stopping => "stopping",
            Phase::Disabling => "disabling",
            Phase::Ending => "ending",
            Phase::Recording => "recording",
            Phase::FaultStopping => "fault, stopping",
            Phase::Fault => "fault",
            Phase::EStopStopping => "E-stop, stopping",
            Phase::EStopStoppingReleased => "E-stop released, stopping",
            Phase::EStop => "E-stop",
            Phase::EStopReleased => "E-stop released",
            Phase::Ended => "ended",
        }
    }
}

/// What reaches the loop: the columns. Commands come from the control side, events from the
/// E-stop input, the drives and the loop's own clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Input {
    Play,
    Replace,
    Pause,
    Resume,
    Stop,
    QuickStop,
    Disable,
    Enable,
    Record,
    RecordStop,
    ClearFault,
    Recover,
    Shutdown,
    /// A second signal during a shutdown.
    SecondSignal,
    EStopPress,
    EStopRelease,
    /// The E-stop input cannot be read (counts as pressed).
    EStopLost,
    /// A drive, bus or feedback fault, or one the loop finds (following error, a setpoint the
    /// guard refused).
    Fault,
    /// A drive reports its own E-stop.
    DriveEStop,
    /// The loop woke too late, or overran too often.
    Stall,
}

/// Every input, in table order.
pub const INPUTS: [Input; 20] = [
    Input::Play,
    Input::Replace,
    Input::Pause,
    Input::Resume,
    Input::Stop,
    Input::QuickStop,
    Input::Disable,
    Input::Enable,
    Input::Record,
    Input::RecordStop,
    Input::ClearFault,
    Input::Recover,
    Input::Shutdown,
    Input::SecondSignal,
    Input::EStopPress,
    Input::EStopRelease,
    Input::EStopLost,
    Input::Fault,
    Input::DriveEStop,
    Input::Stall,
];

impl Input {
    pub fn as_str(self) -> &'static str {
        match self {
            Input::Play => "play",
            Input::Replace => "replace",
            Input::Pause => "pause",
            Input::Resume => "resume",
            Input::Stop => "stop",
            Input::QuickStop => "quick stop",
            Input::Disable => "disable",
            Input::Enable => "enable",
            Input::Record => "record",
            Input::RecordStop => "record stop",
            Input::ClearFault => "clear fault",
            Input::Recover => "recover",
            Input::Shutdown => "shutdown",
            Input::SecondSignal => "second signal",
            Input::EStopPress => "E-stop pressed",
            Input::EStopRelease => "E-stop released",
            Input::EStopLost => "E-stop lost",
            Input::Fault => "fault",
            Input::DriveEStop => "drive E-stop",
            Input::Stall => "stall",
        }
    }

    /// Whether the input is a command (acknowledged), not an event.
    pub fn is_command(self) -> bool {
        !matches!(
            self,
            Input::EStopPress
                | Input::EStopRelease
                | Input::EStopLost
                | Input::Fault
                | Input::DriveEStop
                | Input::Stall
        )
    }
}

/// What an input does in a phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rule {
    /// Refused: a command acknowledged as ignored (a playback as refused, busy), an event noted.
    Refuse,
    /// Acknowledged; it is so already.
    Already,
    /// Start the playback in its slot, if no slot it overlaps moves (else refused, busy).
    Start,
    /// Queue the replacement for the slot's running playback (refused when it does not run).
    Replace,
    /// Pause or resume the scope's running playbacks along their paths.
    PathSpeed,
    /// The scope's moving slots stop within the limits, then hold.
    Stop,
    /// The scope's moving slots stop at the quick-stop decelerations (cutting a stop short).
    QuickStop,
    /// Power off now: the drives are at rest.
    DisableNow,
    /// Every slot stops within the limits, then the drives are disabled.
    DisableAfterStop,
    /// The running stop goes on; at rest the drives are disabled (and stay so when cleared).
    DisableAtRest,
    /// Teach-in ends (the drives stiffen where they are), then power off.
    EndRecordingDisable,
    /// Start the enable sequence.
    Enable,
    /// Teach-in on (from rest).
    Record,
    /// Teach-in off: the drives stiffen and hold where they are.
    RecordStop,
    /// Leave the fault (or the released E-stop) now.
    Clear,
    /// Leave it once its quick stop is at rest.
    ClearAtRest,
    /// Clear now, then enable.
    RecoverNow,
    /// Clear once at rest, then enable.
    RecoverAtRest,
    /// The loop ends now, leaving the drives in the safe state (at rest already).
    ExitNow,
    /// Every slot stops within the limits; at rest the loop ends.
    ExitAfterStop,
    /// Every slot stops at the quick-stop decelerations; at rest the loop ends.
    QuickExit,
    /// The running stop goes on; at rest the loop ends.
    ExitAtRest,
    /// Teach-in ends (the drives stiffen where they are); then the loop ends.
    EndRecordingExit,
    /// The E-stop: a quick stop (one already running goes on; a teach-in stiffens where it is),
    /// then the safe state, until released and cleared. Pending disables and exits stay.
    EStop,
    /// Asserted again: a clear asked for meanwhile no longer counts.
    EStopAgain,
    /// The input is released: `clear-fault` may now end the E-stop.
    Released,
    /// The fault: a quick stop from what the drives have (a teach-in stiffens where it is), then
    /// hold. Pending disables and exits stay.
    Fault,
    /// The E-stop when `estop.drive` is set, else a fault.
    DriveEStop,
}

impl Rule {
    /// What the rule does, in words (the book table's legend).
    pub fn describe(self) -> &'static str {
        match self {
            Rule::Refuse => "refused (a command is answered with why; an event is noted)",
            Rule::Already => "acknowledged: it is so already",
            Rule::Start => "starts the playback in its slot when no slot it overlaps moves",
            Rule::Replace => "queues the replacement for the slot's running playback",
            Rule::PathSpeed => "slows the running playbacks to rest along their paths, or back up",
            Rule::Stop => "the moving slots stop within the limits, then hold",
            Rule::QuickStop => "the moving slots stop at the quick-stop decelerations",
            Rule::DisableNow => "power off now (at rest)",
            Rule::DisableAfterStop => "every slot stops within the limits, then power off",
            Rule::DisableAtRest => {
                "the running stop goes on; power off at rest (and after a clear)"
            }
            Rule::EndRecordingDisable => "teach-in ends, then power off",
            Rule::Enable => "the enable sequence starts",
            Rule::Record => "teach-in starts",
            Rule::RecordStop => "teach-in ends: the drives stiffen where they are",
            Rule::Clear => "leaves the fault or the released E-stop",
            Rule::ClearAtRest => "leaves it once the quick stop is at rest",
            Rule::RecoverNow => "clears, then enables",
            Rule::RecoverAtRest => "clears at rest, then enables",
            Rule::ExitNow => "the loop ends, drives in the safe state",
            Rule::ExitAfterStop => "every slot stops within the limits; the loop ends at rest",
            Rule::QuickExit => "every slot stops quickly; the loop ends at rest",
            Rule::ExitAtRest => "the running stop goes on; the loop ends at rest",
            Rule::EndRecordingExit => "teach-in ends (drives stiffen); the loop ends at rest",
            Rule::EStop => "E-stop: quick stop (a teach-in stiffens in place), then the safe state",
            Rule::EStopAgain => "asserted again: a pending clear no longer counts",
            Rule::Released => "released: clear-fault may end the E-stop",
            Rule::Fault => "fault: quick stop (a teach-in stiffens in place), then hold",
            Rule::DriveEStop => "the E-stop with estop.drive, else a fault",
        }
    }

    /// The short name used in the book's table.
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::Refuse => "refuse",
            Rule::Already => "already",
            Rule::Start => "start",
            Rule::Replace => "replace",
            Rule::PathSpeed => "path speed",
            Rule::Stop => "stop",
            Rule::QuickStop => "quick stop",
            Rule::DisableNow => "disable",
            Rule::DisableAfterStop => "stop, disable",
            Rule::DisableAtRest => "disable at rest",
            Rule::EndRecordingDisable => "end teach-in, disable",
            Rule::Enable => "enable",
            Rule::Record => "record",
            Rule::RecordStop => "end teach-in",
            Rule::Clear => "clear",
            Rule::ClearAtRest => "clear at rest",
            Rule::RecoverNow => "clear, enable",
            Rule::RecoverAtRest => "clear at rest, enable",
            Rule::ExitNow => "exit",
            Rule::ExitAfterStop => "stop, exit",
            Rule::QuickExit => "quick stop, exit",
            Rule::ExitAtRest => "exit at rest",
            Rule::EndRecordingExit => "end teach-in, exit",
            Rule::EStop => "E-stop",
            Rule::EStopAgain => "pressed again",
            Rule::Released => "released",
            Rule::Fault => "fault",
            Rule::DriveEStop => "E-stop or fault",
        }
    }
}

use Rule as R;

/// Inputs in [`INPUTS`] order, per phase in [`PHASES`] order.
#[rustfmt::skip]
const TABLE: [[Rule; 20]; 15] = [
    //            play         replace     pause         resume        stop      quick stop    disable                 enable     record     rec stop      clear           recover            shutdown              second signal         press          release       lost      fault     drive E-stop   stall
    /* disabled */ [R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::DisableNow, R::Enable, R::Refuse, R::Refuse, R::Refuse, R::Enable, R::ExitNow, R::ExitNow, R::EStop, R::Refuse, R::EStop, R::Refuse, R::Refuse, R::Refuse],
    /* enabling */ [R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::DisableNow, R::Already, R::Refuse, R::Refuse, R::Refuse, R::Already, R::ExitNow, R::ExitNow, R::EStop, R::Refuse, R::EStop, R::Fault, R::DriveEStop, R::Fault],
    /* holding */  [R::Start, R::Refuse, R::Refuse, R::Refuse, R::Already, R::Already, R::DisableNow, R::Already, R::Record, R::Refuse, R::Refuse, R::Already, R::ExitNow, R::ExitNow, R::EStop, R::Refuse, R::EStop, R::Fault, R::DriveEStop, R::Fault],
    /* moving */   [R::Start, R::Replace, R::PathSpeed, R::PathSpeed, R::Stop, R::QuickStop, R::DisableAfterStop, R::Already, R::Refuse, R::Refuse, R::Refuse, R::Already, R::ExitAfterStop, R::QuickExit, R::EStop, R::Refuse, R::EStop, R::Fault, R::DriveEStop, R::Fault],
    /* stopping */ [R::Start, R::Refuse, R::Refuse, R::Refuse, R::Already, R::QuickStop, R::DisableAfterStop, R::Already, R::Refuse, R::Refuse, R::Refuse, R::Already, R::ExitAfterStop, R::QuickExit, R::EStop, R::Refuse, R::EStop, R::Fault, R::DriveEStop, R::Fault],
    /* disabling */[R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::Already, R::QuickStop, R::Already, R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::ExitAfterStop, R::QuickExit, R::EStop, R::Refuse, R::EStop, R::Fault, R::DriveEStop, R::Fault],
    /* ending */   [R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::Already, R::QuickStop, R::DisableAtRest, R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::Already, R::QuickExit, R::EStop, R::Refuse, R::EStop, R::Fault, R::DriveEStop, R::Fault],
    /* recording */[R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::EndRecordingDisable, R::Already, R::Refuse, R::RecordStop, R::Refuse, R::Already, R::EndRecordingExit, R::EndRecordingExit, R::EStop, R::Refuse, R::EStop, R::Fault, R::DriveEStop, R::Fault],
    /* fault, stopping */ [R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::DisableAtRest, R::Refuse, R::Refuse, R::Refuse, R::ClearAtRest, R::RecoverAtRest, R::ExitAtRest, R::ExitAtRest, R::EStop, R::Refuse, R::EStop, R::Already, R::DriveEStop, R::Already],
    /* fault */    [R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::DisableNow, R::Refuse, R::Refuse, R::Refuse, R::Clear, R::RecoverNow, R::ExitNow, R::ExitNow, R::EStop, R::Refuse, R::EStop, R::Already, R::DriveEStop, R::Already],
    /* E-stop, stopping */ [R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::DisableAtRest, R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::ExitAtRest, R::ExitAtRest, R::Already, R::Released, R::Already, R::Already, R::Already, R::Already],
    /* E-stop released, stopping */ [R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::DisableAtRest, R::Refuse, R::Refuse, R::Refuse, R::ClearAtRest, R::RecoverAtRest, R::ExitAtRest, R::ExitAtRest, R::EStopAgain, R::Already, R::EStopAgain, R::Already, R::Already, R::Already],
    /* E-stop */   [R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::DisableNow, R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::ExitNow, R::ExitNow, R::Already, R::Released, R::Already, R::Already, R::Already, R::Already],
    /* E-stop released */ [R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::DisableNow, R::Refuse, R::Refuse, R::Refuse, R::Clear, R::RecoverNow, R::ExitNow, R::ExitNow, R::EStopAgain, R::Already, R::EStopAgain, R::Already, R::Already, R::Already],
    /* ended */    [R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::Already, R::Already, R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::Refuse, R::Refuse],
];

/// What `input` does in `phase`.
pub fn rule(phase: Phase, input: Input) -> Rule {
    TABLE[phase as usize][input as usize]
}

/// The table as Markdown: one row per phase, one column per input, then the legend.
pub fn markdown() -> String {
    let mut out = String::from("| phase \\ input |");
    for i in INPUTS {
        out.push_str(&format!(" {} |", i.as_str()));
    }
    out.push_str("\n|---|");
    out.push_str(&"---|".repeat(INPUTS.len()));
    out.push('\n');
    for p in PHASES {
        out.push_str(&format!("| **{}** |", p.as_str()));
        for i in INPUTS {
            out.push_str(&format!(" {} |", rule(p, i).as_str()));
        }
        out.push('\n');
    }
    out.push('\n');
    let mut seen = Vec::new();
    for p in PHASES {
        for i in INPUTS {
            let r = rule(p, i);
            if !seen.contains(&r) {
                seen.push(r);
            }
        }
    }
    for r in seen {
        out.push_str(&format!("- *{}*: {}\n", r.as_str(), r.describe()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_and_inputs_index_the_table_in_order() {
        for (i, p) in PHASES.iter().enumerate() {
            assert_eq!(*p as usize, i);
        }
        for (i, input) in INPUTS.iter().enumerate() {
            assert_eq!(*input as usize, i);
        }
    }

    /// Every pair has a rule that fits its input: a command never gets an event's rule and
    /// no event is acknowledged.
    #[test]
    fn every_rule_fits_its_input() {
        for p in PHASES {
            for i in INPUTS {
                let r = rule(p, i);
                let fits = match i {
                    Input::Play => matches!(r, R::Start | R::Refuse),
                    Input::Replace => matches!(r, R::Replace | R::Refuse),
                    Input::Pause | Input::Resume => matches!(r, R::PathSpeed | R::Refuse),
                    Input::Stop => matches!(r, R::Stop | R::Already | R::Refuse),
                    Input::QuickStop => matches!(r, R::QuickStop | R::Already | R::Refuse),
                    Input::Disable => matches!(
                        r,
                        R::DisableNow
                            | R::DisableAfterStop
                            | R::DisableAtRest
                            | R::EndRecordingDisable
                            | R::Already
                            | R::Refuse
                    ),
                    Input::Enable => matches!(r, R::Enable | R::Already | R::Refuse),
                    Input::Record => matches!(r, R::Record | R::Refuse),
                    Input::RecordStop => matches!(r, R::RecordStop | R::Refuse),
                    Input::ClearFault => matches!(r, R::Clear | R::ClearAtRest | R::Refuse),
                    Input::Recover => matches!(
                        r,
                        R::RecoverNow | R::RecoverAtRest | R::Enable | R::Already | R::Refuse
                    ),
                    Input::Shutdown | Input::SecondSignal => matches!(
                        r,
                        R::ExitNow
                            | R::ExitAfterStop
                            | R::QuickExit
                            | R::ExitAtRest
                            | R::EndRecordingExit
                            | R::Already
                    ),
                    Input::EStopPress | Input::EStopLost => {
                        matches!(r, R::EStop | R::EStopAgain | R::Already | R::Refuse)
                    }
                    Input::EStopRelease => matches!(r, R::Released | R::Already | R::Refuse),
                    Input::Fault | Input::Stall => matches!(r, R::Fault | R::Already | R::Refuse),
                    Input::DriveEStop => matches!(r, R::DriveEStop | R::Already | R::Refuse),
                };
                assert!(fits, "{} × {}: {r:?}", p.as_str(), i.as_str());
            }
        }
    }

    /// Nothing that moves is ever powered off at once, and nothing that moves ends at once.
    #[test]
    fn power_off_and_the_end_wait_for_rest() {
        for p in [
            Phase::Moving,
            Phase::Stopping,
            Phase::Disabling,
            Phase::Ending,
            Phase::FaultStopping,
            Phase::EStopStopping,
            Phase::EStopStoppingReleased,
        ] {
            for i in INPUTS {
                let r = rule(p, i);
                assert!(
                    !matches!(r, R::DisableNow | R::ExitNow),
                    "{} × {}: {r:?}",
                    p.as_str(),
                    i.as_str()
                );
            }
        }
    }

    /// The book's loop page shows this table.
    #[test]
    fn the_book_shows_the_table() {
        let page = include_str!("../../docs/src/loop.md");
        assert!(
            page.contains(&markdown()),
            "docs/src/loop.md's state table differs from rt::table::markdown():\n{}",
            markdown()
        );
    }
}
