//! What the buses reported since the last look, for the journal: each new warning, fault and
//! reopen of a bus or drive once, in the words of the protocol that reported it. The daemon looks
//! every few hundred milliseconds, `motiond play` once at the end; `status` shows the counters.

use std::sync::Arc;

use crate::backend::family;
use crate::backend::status::{BusSnapshot, BusesStatus, LinkSnapshot};

/// How loud a [`BusEvent`] is in the journal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Info,
    Warn,
    Error,
}

/// One change, as the journal line says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BusEvent {
    pub level: Level,
    pub text: String,
}

impl BusEvent {
    /// Writes the event to the journal at its level.
    pub fn log(&self) {
        match self.level {
            Level::Info => tracing::info!("{}", self.text),
            Level::Warn => tracing::warn!("{}", self.text),
            Level::Error => tracing::error!("{}", self.text),
        }
    }
}

/// Keeps the counters last seen, so each change is reported once.
pub struct BusWatch {
    status: Arc<BusesStatus>,
    seen: Vec<BusSnapshot>,
}

impl BusWatch {
    /// Watches `status` from nothing: the first look reports everything counted so far.
    pub fn new(status: Arc<BusesStatus>) -> Self {
        Self {
            status,
            seen: Vec::new(),
        }
    }

    /// What changed since the last call, oldest bus first.
    pub fn changes(&mut self) -> Vec<BusEvent> {
        let now = self.status.snapshot();
        let mut events = Vec::new();
        for (b, bus) in now.iter().enumerate() {
            let before = self.seen.get(b);
            let where_ = format!("bus {}", bus.name);
            link_changes(
                &where_,
                bus.transport,
                &bus.link,
                before.map(|s| &s.link),
                &mut events,
            );
            for (d, drive) in bus.drives.iter().enumerate() {
                let old = before.and_then(|s| s.drives.get(d)).map(|s| &s.link);
                let where_ = format!("bus {}, {} ({})", bus.name, drive.dof, drive.protocol);
                link_changes(&where_, drive.protocol, &drive.link, old, &mut events);
            }
        }
        self.seen = now;
        events
    }
}

fn link_changes(
    where_: &str,
    protocol: &str,
    now: &LinkSnapshot,
    before: Option<&LinkSnapshot>,
    events: &mut Vec<BusEvent>,
) {
    let (warnings, faults, reopened) =
        before.map_or((0, 0, 0), |b| (b.warnings, b.faults, b.reopened));
    if now.warnings > warnings {
        let more = now.warnings - warnings;
        let earlier = if more > 1 {
            format!(" ({} more since the last report)", more - 1)
        } else {
            String::new()
        };
        events.push(BusEvent {
            level: Level::Warn,
            text: format!(
                "{where_}: warning: {}{earlier}; it keeps running",
                family::warning_words(protocol, now.last_warning)
            ),
        });
    }
    if now.faults > faults
        && let Some((kind, code)) = now.last_fault
    {
        let words = family::fault_words(protocol, kind, code)
            .map(|w| format!(": {w}"))
            .unwrap_or_default();
        events.push(BusEvent {
            level: Level::Error,
            text: format!("{where_}: {} (code {code:#x}){words}", kind.as_str()),
        });
    }
    if now.reopened > reopened {
        events.push(BusEvent {
            level: Level::Info,
            text: format!(
                "{where_}: opened again after it was lost (reopened {} so far)",
                now.reopened
            ),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::status::BusStatus;
    use crate::backend::{BackendError, FaultKind};

    #[test]
    fn each_warning_fault_and_reopen_is_reported_once_in_the_protocols_words() {
        let bus = Arc::new(BusStatus::new(
            "arm",
            "slcan",
            &[("base_yaw", "cia402"), ("wrist", "dynamixel")],
        ));
        let mut watch = BusWatch::new(Arc::new(BusesStatus {
            buses: vec![bus.clone()],
        }));
        assert!(watch.changes().is_empty());

        bus.drive("base_yaw").warning(0x0008_4210);
        let events = watch.changes();
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(events[0].level, Level::Warn);
        assert_eq!(
            events[0].text,
            "bus arm, base_yaw (cia402): warning: EMCY 0x4210 excess temperature of the device \
             (error register 0x08: temperature); it keeps running"
        );
        assert!(watch.changes().is_empty(), "reported once");

        bus.drive("base_yaw").warning(0x0008_4210);
        bus.drive("base_yaw").warning(0x0004_3220);
        bus.drive("wrist").fault(&BackendError {
            kind: FaultKind::DriveFault,
            dof: Some(1),
            code: 0x80,
        });
        bus.link.warning(0x44);
        bus.link.reopened();
        let texts: Vec<String> = watch.changes().into_iter().map(|e| e.text).collect();
        assert_eq!(
            texts,
            [
                "bus arm: warning: adapter status 0x44: error warning, arbitration lost; it keeps \
                 running",
                "bus arm: opened again after it was lost (reopened 1 so far)",
                "bus arm, base_yaw (cia402): warning: EMCY 0x3220 DC link under-voltage (error \
                 register 0x04: voltage) (1 more since the last report); it keeps running",
                "bus arm, wrist (dynamixel): drive_fault (code 0x80): status error 0x80: hardware \
                 error alert (see Hardware Error Status, address 70)",
            ]
        );
    }
}
