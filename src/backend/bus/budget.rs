//! The bus budget: what one control tick puts on each bus's wire, summed over the families of
//! its drives, against what the wire carries at the control rate. A bus over its maximum load is
//! refused, saying how many of its drives fit and up to which rate all of them do.
//!
//! Frames are counted at their worst case (every stuff bit): classic frames at the bitrate,
//! CAN-FD frames with their arbitration phase at the bitrate and their data phase at the data
//! bitrate ([`fd_frame_bits`](crate::backend::frame::fd_frame_bits)). On an SLCAN adapter the
//! serial line is budgeted too when its baud rate is given.

use std::fmt::Write as _;

use super::settings::{BusSettings, DriveSettings, Problems, Transport};
use crate::backend::frame::{FrameLoad, fd_frame_bits};
use crate::backend::transport::slcan;

/// Traffic of one tick on a bus: wire bits (CAN) and serial bytes.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Traffic {
    /// Worst-case bits per tick of classic frames (both ways, SYNC, heartbeats).
    pub can_bits: f64,
    /// Worst-case bits per tick of CAN-FD frames at the bitrate (arbitration phase) …
    pub fd_nominal_bits: f64,
    /// … and at the data bitrate (data phase).
    pub fd_data_bits: f64,
    /// Serial characters (8N1, 10 bits each) per tick both ways: SLCAN lines, or a serial
    /// family's packets.
    pub serial_bytes: f64,
}

impl Traffic {
    /// The traffic of these frames (on a CAN bus, or as SLCAN lines).
    pub fn of(loads: &[FrameLoad]) -> Self {
        let mut t = Traffic::default();
        for l in loads {
            if l.fd {
                let (nominal, data) = fd_frame_bits(l.data_len, l.extended);
                t.fd_nominal_bits += f64::from(nominal) * l.per_tick;
                t.fd_data_bits += f64::from(data) * l.per_tick;
            } else {
                t.can_bits += l.can_bits();
            }
            let line = slcan::codec::line_len(l.data_len, l.extended, l.fd);
            t.serial_bytes += line as f64 * l.per_tick;
        }
        t
    }

    fn add(&mut self, other: Traffic) {
        self.can_bits += other.can_bits;
        self.fd_nominal_bits += other.fd_nominal_bits;
        self.fd_data_bits += other.fd_data_bits;
        self.serial_bytes += other.serial_bytes;
    }

    /// Seconds of a CAN bus per tick at `bitrate` and `data_bitrate`.
    pub fn can_seconds(&self, bitrate: u32, data_bitrate: u32) -> f64 {
        (self.can_bits + self.fd_nominal_bits) / f64::from(bitrate.max(1))
            + self.fd_data_bits / f64::from(data_bitrate.max(1))
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

/// One limited medium of a bus at one tick's traffic: the share of each second it is busy at
/// `rate_hz`, and how that reads in a message.
struct Load {
    share: f64,
    /// "2893000 CAN bit/s (289% of 1000000 bit/s)" or the CAN-FD time.
    need: String,
}

/// Each limited medium of `bus` at `rate_hz` with traffic `t`.
fn loads(bus: &BusSettings, t: Traffic, rate_hz: f64) -> Vec<Load> {
    let bits = |bits: f64, cap: u32, what: &str| {
        let share = bits * rate_hz / f64::from(cap.max(1));
        Load {
            share,
            need: format!(
                "{:.0} {what} bit/s ({:.0}% of {cap} bit/s)",
                bits * rate_hz,
                share * 100.0
            ),
        }
    };
    let can = |bitrate: u32, data_bitrate: u32| {
        if t.fd_data_bits == 0.0 {
            return bits(t.can_bits, bitrate, "CAN");
        }
        let seconds = t.can_seconds(bitrate, data_bitrate);
        let share = seconds * rate_hz;
        Load {
            share,
            need: format!(
                "{:.1} µs of CAN a tick ({:.0}% of the {:.0} µs period at {bitrate} bit/s, data \
                 phase {data_bitrate} bit/s)",
                seconds * 1e6,
                share * 100.0,
                1e6 / rate_hz
            ),
        }
    };
    match &bus.transport {
        Transport::Can {
            bitrate,
            data_bitrate,
            ..
        } => vec![can(*bitrate, *data_bitrate)],
        Transport::Slcan {
            baud,
            bitrate,
            data_bitrate,
            ..
        } => {
            let mut m = vec![can(*bitrate, *data_bitrate)];
            if let Some(b) = baud {
                m.push(bits(t.serial_bytes * 10.0, *b, "serial"));
            }
            m
        }
        Transport::Serial { baud, .. } => vec![bits(t.serial_bytes * 10.0, *baud, "serial")],
    }
}

/// The busiest medium of `bus` with `joints` at `rate_hz`.
fn worst(bus: &BusSettings, joints: &[DriveSettings], rate_hz: f64) -> Option<Load> {
    loads(bus, traffic(bus, joints, rate_hz), rate_hz)
        .into_iter()
        .max_by(|a, b| a.share.total_cmp(&b.share))
}

/// Refuses a bus whose per-tick traffic at `rate_hz` exceeds `max_load` (at `key`, `buses[i]`),
/// saying what fits.
pub fn check(bus: &BusSettings, key: &str, rate_hz: f64, p: &mut Problems) {
    if !(rate_hz.is_finite() && rate_hz > 0.0) || bus.joints.is_empty() {
        return;
    }
    let share = |joints: &[DriveSettings]| worst(bus, joints, rate_hz).map_or(0.0, |l| l.share);
    let Some(load) = worst(bus, &bus.joints, rate_hz).filter(|l| l.share > bus.max_load) else {
        return;
    };
    let fitting = (0..bus.joints.len())
        .rev()
        .find(|&n| share(&bus.joints[..n]) <= bus.max_load)
        .unwrap_or(0);
    // Every medium's load is proportional to the rate.
    let max_rate = bus.max_load * rate_hz / load.share;
    let mut msg = format!(
        "bus `{}`: {} drives at {rate_hz} Hz need {}, over the maximum load of {:.0}%; ",
        bus.name,
        bus.joints.len(),
        load.need,
        bus.max_load * 100.0
    );
    let _ = write!(
        msg,
        "at {rate_hz} Hz this bus fits {fitting} of these drives, and all {} fit up to {:.0} Hz",
        bus.joints.len(),
        max_rate.floor()
    );
    if let Transport::Serial { family, .. } = bus.transport
        && let Some(advice) = family.budget_advice()
    {
        let _ = write!(msg, " ({advice})");
    }
    p.add(format!("{key}.joints"), msg);
}
