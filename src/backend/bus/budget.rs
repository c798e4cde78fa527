//! The bus budget: what one control tick puts on each bus's wire, summed over the families of
//! its drives, against what the wire carries at the control rate. A bus over its maximum load is
//! refused, saying how many of its drives fit and up to which rate all of them do.

use std::fmt::Write as _;

use crate::backend::frame::FrameLoad;
use crate::backend::settings::{BusSettings, DriveSettings, Problems, Transport};

/// Traffic of one tick on a bus: wire bits (CAN) and serial bytes.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Traffic {
    /// Worst-case CAN bits per tick (frames both ways, SYNC, heartbeats).
    pub can_bits: f64,
    /// Serial characters (8N1, 10 bits each) per tick both ways: SLCAN lines, or a serial
    /// family's packets.
    pub serial_bytes: f64,
}

impl Traffic {
    /// The traffic of these frames (on a CAN bus, or as SLCAN lines).
    pub fn of(loads: &[FrameLoad]) -> Self {
        let mut t = Traffic::default();
        for l in loads {
            t.can_bits += l.can_bits();
            t.serial_bytes += l.slcan_bytes();
        }
        t
    }

    fn add(&mut self, other: Traffic) {
        self.can_bits += other.can_bits;
        self.serial_bytes += other.serial_bytes;
    }
}

/// What one tick costs on `bus` with `joints` (a prefix of its joints: used to say what fits) at
/// `rate_hz`: the sum of what each family present reports for its drives.
pub fn traffic(bus: &BusSettings, joints: &[DriveSettings], rate_hz: f64) -> Traffic {
    let period_ms = 1000.0 / rate_hz;
    let mut t = Traffic::default();
    let mut seen: Vec<&str> = Vec::new();
    for j in joints {
        let family = j.family;
        if seen.contains(&family.name()) {
            continue;
        }
        seen.push(family.name());
        let mine: Vec<&DriveSettings> = joints
            .iter()
            .filter(|k| k.family.name() == family.name())
            .collect();
        t.add(family.traffic(&mine, bus, period_ms));
    }
    t
}

/// (bits per second of capacity, bits per tick, what is counted) for each limited medium of a bus.
fn media(bus: &BusSettings, t: Traffic) -> Vec<(u32, f64, &'static str)> {
    match &bus.transport {
        Transport::Can { bitrate, .. } => vec![(*bitrate, t.can_bits, "CAN")],
        Transport::Slcan { baud, bitrate, .. } => {
            let mut m = vec![(*bitrate, t.can_bits, "CAN")];
            if let Some(b) = baud {
                m.push((*b, t.serial_bytes * 10.0, "serial"));
            }
            m
        }
        Transport::Serial { baud, .. } => {
            vec![(*baud, t.serial_bytes * 10.0, "serial")]
        }
    }
}

/// Refuses a bus whose per-tick traffic at `rate_hz` exceeds `max_load` (at `key`, `buses[i]`),
/// saying what fits.
pub fn check(bus: &BusSettings, key: &str, rate_hz: f64, p: &mut Problems) {
    if !(rate_hz.is_finite() && rate_hz > 0.0) || bus.joints.is_empty() {
        return;
    }
    let load = |joints: &[DriveSettings]| {
        media(bus, traffic(bus, joints, rate_hz))
            .into_iter()
            .map(|(cap, bits, what)| (bits * rate_hz / f64::from(cap.max(1)), bits, cap, what))
            .fold((0.0f64, 0.0, 1, ""), |a, b| if b.0 > a.0 { b } else { a })
    };
    let (worst, bits, cap, what) = load(&bus.joints);
    if worst <= bus.max_load {
        return;
    }
    let fitting = (0..bus.joints.len())
        .rev()
        .find(|&n| load(&bus.joints[..n]).0 <= bus.max_load)
        .unwrap_or(0);
    let max_rate = bus.max_load * f64::from(cap) / bits;
    let mut msg = format!(
        "bus `{}`: {} drives at {rate_hz} Hz need {:.0} {what} bit/s ({:.0}% of {cap} bit/s), over \
         the maximum load of {:.0}%; ",
        bus.name,
        bus.joints.len(),
        bits * rate_hz,
        worst * 100.0,
        bus.max_load * 100.0
    );
    let _ = write!(
        msg,
        "at {rate_hz} Hz this bus fits {fitting} of these drives, and all {} fit up to {:.0} Hz",
        bus.joints.len(),
        max_rate.floor()
    );
    if matches!(bus.transport, Transport::Serial { .. }) {
        msg.push_str(" (a faster baud rate or sync_read: false also frees time)");
    }
    p.add(format!("{key}.joints"), msg);
}
