//! What the bus backends report about their buses and drives, readable from any thread while the
//! loop runs: plain atomics written by the loop thread (no lock, no allocation, no wait) and
//! read with [`BusesStatus::snapshot`] by whoever shows status (the control socket).
//!
//! Each value is independent (a counter, a last code), so relaxed atomics suffice: a reader may
//! see a fault's counter before its code, never a torn value.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, Ordering::Relaxed};

use crate::backend::servo_registers::ServoRegisters;
use crate::backend::{BackendError, FaultKind};

/// A drive's or bus's lifecycle as the backend sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkState {
    /// Not enabled (or not yet).
    Disabled,
    /// In its enable sequence.
    Enabling,
    /// Following setpoints.
    Ready,
    /// Faulted; held where it was commanded until enabled again.
    Fault,
}

impl LinkState {
    pub fn as_str(self) -> &'static str {
        match self {
            LinkState::Disabled => "disabled",
            LinkState::Enabling => "enabling",
            LinkState::Ready => "ready",
            LinkState::Fault => "fault",
        }
    }

    fn from_u8(v: u8) -> Self {
        match v {
            1 => LinkState::Enabling,
            2 => LinkState::Ready,
            3 => LinkState::Fault,
            _ => LinkState::Disabled,
        }
    }
}

/// One drive's (or one bus's) live counters.
#[derive(Debug, Default)]
pub struct LinkStatus {
    state: AtomicU8,
    faults: AtomicU32,
    /// [`FaultKind`] index + 1 of the last fault (0: none).
    last_fault_kind: AtomicU8,
    last_fault_code: AtomicU32,
    warnings: AtomicU32,
    last_warning: AtomicU32,
    /// Times the device was reopened after it was lost.
    reopened: AtomicU32,
}

impl LinkStatus {
    pub fn set_state(&self, state: LinkState) {
        self.state.store(state as u8, Relaxed);
    }

    pub fn fault(&self, e: &BackendError) {
        let kind = FaultKind::ALL
            .iter()
            .position(|k| *k == e.kind)
            .unwrap_or(0);
        self.faults.fetch_add(1, Relaxed);
        self.last_fault_kind.store(kind as u8 + 1, Relaxed);
        self.last_fault_code.store(e.code, Relaxed);
        self.set_state(LinkState::Fault);
    }

    /// A condition the drive reports but keeps running through (CiA 402 EMCY without the generic
    /// error bit, SLCAN adapter error warning): `code` as the protocol gives it.
    pub fn warning(&self, code: u32) {
        self.warnings.fetch_add(1, Relaxed);
        self.last_warning.store(code, Relaxed);
    }

    pub fn reopened(&self) {
        self.reopened.fetch_add(1, Relaxed);
    }

    pub fn snapshot(&self) -> LinkSnapshot {
        let kind = self.last_fault_kind.load(Relaxed);
        LinkSnapshot {
            state: LinkState::from_u8(self.state.load(Relaxed)),
            faults: self.faults.load(Relaxed),
            last_fault: kind
                .checked_sub(1)
                .and_then(|k| FaultKind::ALL.get(usize::from(k)).copied())
                .map(|kind| (kind, self.last_fault_code.load(Relaxed))),
            warnings: self.warnings.load(Relaxed),
            last_warning: self.last_warning.load(Relaxed),
            reopened: self.reopened.load(Relaxed),
        }
    }
}

/// A copy of one [`LinkStatus`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkSnapshot {
    pub state: LinkState,
    pub faults: u32,
    /// Kind and protocol code of the last fault.
    pub last_fault: Option<(FaultKind, u32)>,
    pub warnings: u32,
    /// The last warning's code (CiA 402: EMCY error code | error register << 16; SLCAN: flags).
    pub last_warning: u32,
    pub reopened: u32,
}

/// One drive of a bus: its DOF, protocol, id and live counters.
#[derive(Debug)]
pub struct DriveStatus {
    pub dof: String,
    /// `cia402`, `odrive`, `mit` or `dynamixel`: whose words its codes are in.
    pub protocol: &'static str,
    /// Its id on the bus (node, servo or motor id).
    pub id: u8,
    /// What its LeRobot calibration file says its registers hold (a `calibration_mismatch`
    /// names the file's value from here; the fault carries the value read).
    pub lerobot: Option<ServoRegisters>,
    pub link: Arc<LinkStatus>,
}

/// One bus: its own link status, frame counters, and its drives'.
#[derive(Debug)]
pub struct BusStatus {
    pub name: String,
    /// `can`, `slcan` or `serial`: whose words the bus's own codes are in.
    pub transport: &'static str,
    /// Where it is: the serial device and its baud rate, or the CAN interface (for messages;
    /// empty when not known).
    pub device: String,
    pub link: LinkStatus,
    pub sent: AtomicU64,
    pub received: AtomicU64,
    /// Remote requests and frames of nodes not on this bus's list, seen and ignored.
    pub ignored: AtomicU64,
    /// Per drive, in the bus's order.
    pub drives: Vec<DriveStatus>,
}

impl BusStatus {
    /// `drives`: (DOF name, protocol) in the bus's order.
    pub fn new(name: &str, transport: &'static str, drives: &[(&str, &'static str)]) -> Self {
        Self {
            name: name.to_string(),
            transport,
            device: String::new(),
            link: LinkStatus::default(),
            sent: AtomicU64::new(0),
            received: AtomicU64::new(0),
            ignored: AtomicU64::new(0),
            drives: drives
                .iter()
                .map(|&(dof, protocol)| DriveStatus {
                    dof: dof.to_string(),
                    protocol,
                    id: 0,
                    lerobot: None,
                    link: Arc::new(LinkStatus::default()),
                })
                .collect(),
        }
    }

    pub fn drive(&self, dof: &str) -> Arc<LinkStatus> {
        self.drives
            .iter()
            .find(|d| d.dof == dof)
            .map(|d| d.link.clone())
            .unwrap_or_default()
    }
}

/// Every bus of a backend.
#[derive(Debug, Default)]
pub struct BusesStatus {
    pub buses: Vec<Arc<BusStatus>>,
}

/// A copy of one drive's status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriveSnapshot {
    pub dof: String,
    pub protocol: &'static str,
    pub link: LinkSnapshot,
}

/// A copy of one bus's status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BusSnapshot {
    pub name: String,
    pub transport: &'static str,
    pub link: LinkSnapshot,
    pub sent: u64,
    pub received: u64,
    pub ignored: u64,
    pub drives: Vec<DriveSnapshot>,
}

impl BusesStatus {
    /// The bus and the drive of DOF `dof` (by name).
    pub fn drive_of(&self, dof: &str) -> Option<(&BusStatus, &DriveStatus)> {
        self.buses
            .iter()
            .find_map(|b| Some((&**b, b.drives.iter().find(|d| d.dof == dof)?)))
    }

    pub fn snapshot(&self) -> Vec<BusSnapshot> {
        self.buses
            .iter()
            .map(|b| BusSnapshot {
                name: b.name.clone(),
                transport: b.transport,
                link: b.link.snapshot(),
                sent: b.sent.load(Relaxed),
                received: b.received.load(Relaxed),
                ignored: b.ignored.load(Relaxed),
                drives: b
                    .drives
                    .iter()
                    .map(|d| DriveSnapshot {
                        dof: d.dof.clone(),
                        protocol: d.protocol,
                        link: d.link.snapshot(),
                    })
                    .collect(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_and_warnings_are_counted_and_kept() {
        let bus = BusStatus::new("arm", "can", &[("base_yaw", "cia402")]);
        let d = bus.drive("base_yaw");
        d.set_state(LinkState::Ready);
        d.warning(0x0008_4210);
        d.fault(&BackendError {
            kind: FaultKind::DriveFault,
            dof: Some(0),
            code: 0x0081_8611,
        });
        let s = BusesStatus {
            buses: vec![Arc::new(bus)],
        }
        .snapshot();
        let DriveSnapshot {
            dof,
            protocol,
            link: d,
        } = &s[0].drives[0];
        assert_eq!((dof.as_str(), *protocol), ("base_yaw", "cia402"));
        assert_eq!(d.state, LinkState::Fault);
        assert_eq!(d.last_fault, Some((FaultKind::DriveFault, 0x0081_8611)));
        assert_eq!((d.warnings, d.last_warning), (1, 0x0008_4210));
    }
}
