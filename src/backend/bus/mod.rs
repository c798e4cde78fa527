//! The bus backend: every configured bus behind one [`Backend`]. A CAN bus ([`can::CanBus`])
//! carries drives of any CAN families over one transport; a serial line is one serial family's
//! own [`Bus`].

pub mod budget;
pub mod can;
pub mod check;

use std::io;
use std::path::Path;
use std::sync::Arc;

use crate::backend::family::Mode;
use crate::backend::settings::{BusSettings, DriveSettings, Problem, Transport};
use crate::backend::status::{BusStatus, BusesStatus};
use crate::backend::transport::FrameIo;
use crate::backend::transport::serial::SerialDevice;
use crate::backend::transport::slcan::SlcanIo;
use crate::backend::transport::socketcan::SocketCanIo;
use crate::backend::{Backend, BackendError, Feedback, Readiness};
use crate::trajectory::{JointSet, Setpoint};

/// One bus of drives, as the bus backend drives it: the [`Backend`] calls, per bus. Implemented
/// by [`can::CanBus`] for every CAN family, and by each serial family for its line.
pub trait Bus: Send {
    fn enable(&mut self) -> Result<Readiness, BackendError>;
    fn disable(&mut self) -> Result<(), BackendError>;
    fn write(&mut self, tick: u64, setpoints: &[Setpoint]) -> Result<(), BackendError>;
    fn read(&mut self, feedback: &mut [Feedback]) -> Result<(), BackendError>;
    fn hold(&mut self, tick: u64, setpoints: &[Setpoint]) -> Result<(), BackendError>;
    /// Marks the DOFs it made compliant in `dofs` (and leaves the others as they are).
    fn compliant(&mut self, on: bool, dofs: &mut [bool]) -> Result<Readiness, BackendError>;
    /// How long DOF `dof` may go without feedback, when it is on this bus.
    fn feedback_timeout(&self, dof: usize) -> Option<std::time::Duration>;
    fn status(&self) -> Arc<BusStatus>;
}

#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{}", problems.iter().map(|p| format!("{}: {}", p.key, p.message)).collect::<Vec<_>>().join("\n"))]
    Config { problems: Vec<Problem> },
    #[error(
        "bus `{bus}`: one tick sends {burst} frames at once, but CAN interface `{interface}` \
         queues only {queue} (txqueuelen); frames past that are dropped by the kernel. Raise it: \
         `ip link set {interface} txqueuelen {suggested}` (or in the interface's systemd-networkd / \
         udev configuration)"
    )]
    TxQueue {
        bus: String,
        interface: String,
        burst: usize,
        queue: usize,
        suggested: usize,
    },
    #[error("bus `{bus}`: cannot open {what}: {source}")]
    Io {
        bus: String,
        what: String,
        source: io::Error,
    },
}

/// The drives of `bus` in JointSet terms: (index, command mode, settings).
pub fn bus_joints<'a>(
    bus: &'a BusSettings,
    joints: &JointSet,
) -> Vec<(usize, Mode, &'a DriveSettings)> {
    bus.joints
        .iter()
        .filter_map(|j| {
            let index = joints.index_of(&j.dof)?;
            let dof = joints.dofs.get(index)?;
            Some((index, Mode::of(dof.actuator), j))
        })
        .collect()
}

/// Ticks without feedback before a drive of `bus` faults.
pub fn timeout_ticks(bus: &BusSettings, rate_hz: f64) -> u32 {
    (bus.feedback_timeout_ms * rate_hz / 1000.0)
        .ceil()
        .clamp(1.0, 1e9) as u32
}

/// Ticks between SLCAN status polls: ten times a second.
fn status_poll_ticks(rate_hz: f64) -> u32 {
    (rate_hz / 10.0).round().clamp(1.0, 1e6) as u32
}

fn bus_status(bus: &BusSettings) -> Arc<BusStatus> {
    let drives: Vec<(&str, &'static str)> = bus
        .joints
        .iter()
        .map(|j| (j.dof.as_str(), j.family.name()))
        .collect();
    Arc::new(BusStatus::new(&bus.name, bus.transport.name(), &drives))
}

/// A CAN bus over any frame transport (SocketCAN, SLCAN, in-memory).
pub fn can_bus(
    bus: &BusSettings,
    joints: &JointSet,
    rate_hz: f64,
    io: Box<dyn FrameIo>,
) -> can::CanBus {
    can::CanBus::new(io, bus, &bus_joints(bus, joints), rate_hz, bus_status(bus))
}

/// A serial family's bus over any byte port (serial device, pseudo-terminal, in-memory); `None`
/// when the bus is not a serial one.
pub fn serial_bus(
    bus: &BusSettings,
    joints: &JointSet,
    rate_hz: f64,
    port: Box<dyn crate::backend::transport::serial::Port>,
) -> Option<Box<dyn Bus>> {
    let Transport::Serial { family, .. } = bus.transport else {
        return None;
    };
    family.serial_bus(port, bus, joints, rate_hz, bus_status(bus))
}

/// Frames one tick sends on `bus` in one burst: what each family present sends for its drives
/// (a command per drive; CiA 402 adds the SYNC and a heartbeat).
pub fn burst_frames(bus: &BusSettings) -> usize {
    let mut total = 0;
    let mut seen: Vec<&str> = Vec::new();
    for j in &bus.joints {
        let name = j.family.name();
        if !seen.contains(&name) {
            seen.push(name);
            let n = bus
                .joints
                .iter()
                .filter(|k| k.family.name() == name)
                .count();
            total += j.family.burst(n);
        }
    }
    total
}

/// Refuses a SocketCAN interface whose transmit queue is shorter than one tick's burst: the
/// kernel would drop the excess (Linux's default txqueuelen for CAN is 10). A length of 0 is a
/// virtual interface without a queue (vcan, vxcan: the `noqueue` discipline hands each frame
/// straight to the driver), which nothing overflows. `sysfs` is `/sys/class/net` (a folder of the
/// tests' making in tests).
pub fn check_tx_queue(bus: &BusSettings, interface: &str, sysfs: &Path) -> Result<(), OpenError> {
    let path = sysfs.join(interface).join("tx_queue_len");
    // An interface without the file is reported by the socket's own open just after.
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(());
    };
    let Ok(queue) = text.trim().parse::<usize>() else {
        return Ok(());
    };
    let burst = burst_frames(bus);
    if queue == 0 || burst <= queue {
        return Ok(());
    }
    Err(OpenError::TxQueue {
        bus: bus.name.clone(),
        interface: interface.to_string(),
        burst,
        queue,
        suggested: (2 * burst).next_power_of_two().max(64),
    })
}

/// Opens one configured bus.
fn open_bus(bus: &BusSettings, joints: &JointSet, rate_hz: f64) -> Result<Box<dyn Bus>, OpenError> {
    let io_err = |what: String| {
        let bus = bus.name.clone();
        move |source| OpenError::Io { bus, what, source }
    };
    Ok(match &bus.transport {
        Transport::Can { interface, .. } => {
            check_tx_queue(bus, interface, Path::new("/sys/class/net"))?;
            let io = SocketCanIo::open(interface)
                .map_err(io_err(format!("CAN interface `{interface}`")))?;
            Box::new(can_bus(bus, joints, rate_hz, Box::new(io)))
        }
        Transport::Slcan {
            device,
            baud,
            bitrate,
        } => {
            let what = format!("SLCAN adapter {}", device.display());
            let port = SerialDevice::open(device, baud.unwrap_or(115_200))
                .map_err(io_err(what.clone()))?;
            let io = SlcanIo::open(Box::new(port), *bitrate)
                .map_err(io_err(what))?
                .poll_status_every(status_poll_ticks(rate_hz));
            Box::new(can_bus(bus, joints, rate_hz, Box::new(io)))
        }
        Transport::Serial {
            device,
            baud,
            family,
        } => {
            let port = SerialDevice::open(device, *baud)
                .map_err(io_err(format!("serial device {}", device.display())))?;
            serial_bus(bus, joints, rate_hz, Box::new(port)).ok_or_else(|| OpenError::Config {
                problems: vec![Problem {
                    key: format!("buses.{}", bus.name),
                    message: format!("{} is not a serial family", family.name()),
                    about_key: false,
                }],
            })?
        }
    })
}

/// Opens every configured bus after checking the drives against the robot's DOFs.
pub fn open(
    buses: &[BusSettings],
    joints: &JointSet,
    rate_hz: f64,
) -> Result<BusBackend, OpenError> {
    let problems = check::check_joints(buses, joints);
    if !problems.is_empty() {
        return Err(OpenError::Config { problems });
    }
    let mut opened = Vec::with_capacity(buses.len());
    for bus in buses {
        opened.push(open_bus(bus, joints, rate_hz)?);
    }
    Ok(BusBackend::new(opened))
}

/// All buses as one backend. Every bus gets its share of each call even when another fails, so
/// one failing bus never starves the drives on the others; the first error is reported.
pub struct BusBackend {
    buses: Vec<Box<dyn Bus>>,
    status: Arc<BusesStatus>,
}

impl BusBackend {
    pub fn new(buses: Vec<Box<dyn Bus>>) -> Self {
        let status = Arc::new(BusesStatus {
            buses: buses.iter().map(|b| b.status()).collect(),
        });
        Self { buses, status }
    }

    fn each(
        &mut self,
        mut f: impl FnMut(&mut dyn Bus) -> Result<(), BackendError>,
    ) -> Result<(), BackendError> {
        let mut result = Ok(());
        for bus in &mut self.buses {
            let r = f(bus.as_mut());
            result = result.and(r);
        }
        result
    }

    /// Calls `f` on every bus; `Ready` when every bus is.
    fn each_ready(
        &mut self,
        mut f: impl FnMut(&mut dyn Bus) -> Result<Readiness, BackendError>,
    ) -> Result<Readiness, BackendError> {
        let mut all = true;
        self.each(|b| {
            all &= f(b)? == Readiness::Ready;
            Ok(())
        })?;
        Ok(if all {
            Readiness::Ready
        } else {
            Readiness::Pending
        })
    }
}

impl Backend for BusBackend {
    fn enable(&mut self) -> Result<Readiness, BackendError> {
        self.each_ready(|b| b.enable())
    }

    fn disable(&mut self) -> Result<(), BackendError> {
        self.each(|b| b.disable())
    }

    fn write(&mut self, tick: u64, setpoints: &[Setpoint]) -> Result<(), BackendError> {
        self.each(|b| b.write(tick, setpoints))
    }

    fn read(&mut self, feedback: &mut [Feedback]) -> Result<(), BackendError> {
        self.each(|b| b.read(feedback))
    }

    fn hold(&mut self, tick: u64, setpoints: &[Setpoint]) -> Result<(), BackendError> {
        self.each(|b| b.hold(tick, setpoints))
    }

    fn compliant(&mut self, on: bool, dofs: &mut [bool]) -> Result<Readiness, BackendError> {
        dofs.iter_mut().for_each(|d| *d = false);
        self.each_ready(|b| b.compliant(on, dofs))
    }

    fn status(&self) -> Option<Arc<BusesStatus>> {
        Some(self.status.clone())
    }

    fn feedback_timeout(&self, dof: usize) -> Option<std::time::Duration> {
        self.buses.iter().find_map(|b| b.feedback_timeout(dof))
    }
}
