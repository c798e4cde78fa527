//! The bus backend: every configured CAN and serial bus behind one [`Backend`].

use std::io;
use std::path::Path;

use std::sync::Arc;

use crate::backend::can::{CanBus, CanSettings, FrameIo, SocketCanIo};
use crate::backend::proto::Problem;
use crate::backend::serial::{
    DynamixelBus, DynamixelSettings, Port, SerialDevice, ServoSpec, SlcanIo,
};
use crate::backend::status::{BusStatus, BusesStatus};
use crate::backend::{Backend, BackendError, Feedback, Readiness};
use crate::config::bus::{Bus, BusJoint, Transport, check_joints};
use crate::robot::Actuator;
use crate::trajectory::{JointSet, Setpoint};

/// What a drive is commanded with, following the SKEL actuator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// servo (and locked): position with velocity feed-forward.
    Position,
    /// velocity: velocity command.
    Velocity,
    /// force: position with torque feed-forward (or MIT gains).
    Force,
}

impl Mode {
    pub fn of(actuator: Actuator) -> Mode {
        match actuator {
            Actuator::Velocity => Mode::Velocity,
            Actuator::Force => Mode::Force,
            _ => Mode::Position,
        }
    }
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

/// One bus of any transport.
pub enum AnyBus {
    Can(CanBus),
    Dynamixel(DynamixelBus),
}

/// The drives of `bus` in JointSet terms: (index, command mode, settings).
pub(crate) fn bus_joints<'a>(bus: &'a Bus, joints: &JointSet) -> Vec<(usize, Mode, &'a BusJoint)> {
    bus.joints
        .iter()
        .filter_map(|j| {
            let index = joints.index_of(&j.dof)?;
            let dof = joints.dofs.get(index)?;
            Some((index, Mode::of(dof.actuator), j))
        })
        .collect()
}

fn timeout_ticks(bus: &Bus, rate_hz: f64) -> u32 {
    (bus.feedback_timeout_ms * rate_hz / 1000.0)
        .ceil()
        .clamp(1.0, 1e9) as u32
}

/// Ticks between SLCAN status polls: ten times a second.
fn status_poll_ticks(rate_hz: f64) -> u32 {
    (rate_hz / 10.0).round().clamp(1.0, 1e6) as u32
}

fn bus_status(bus: &Bus) -> Arc<BusStatus> {
    let transport = match bus.transport {
        Transport::Can { .. } => "can",
        Transport::Slcan { .. } => "slcan",
        Transport::Dynamixel { .. } => "serial",
    };
    let drives: Vec<(&str, &'static str)> = bus
        .joints
        .iter()
        .map(|j| (j.dof.as_str(), j.protocol.as_str()))
        .collect();
    Arc::new(BusStatus::new(&bus.name, transport, &drives))
}

/// A CAN bus over any frame transport (SocketCAN, SLCAN, in-memory).
pub fn can_bus(bus: &Bus, joints: &JointSet, rate_hz: f64, io: Box<dyn FrameIo>) -> CanBus {
    let settings = CanSettings {
        rate_hz,
        timeout_ticks: timeout_ticks(bus, rate_hz),
        watchdog_ms: bus.watchdog_ms,
        cia402: bus.cia402,
    };
    CanBus::new(io, &bus_joints(bus, joints), settings, bus_status(bus))
}

/// A Dynamixel bus over any byte port (serial device, pseudo-terminal, in-memory).
pub fn dynamixel_bus(
    bus: &Bus,
    joints: &JointSet,
    rate_hz: f64,
    port: Box<dyn Port>,
) -> DynamixelBus {
    let sync_read = matches!(
        bus.transport,
        Transport::Dynamixel {
            sync_read: true,
            ..
        }
    );
    let specs: Vec<ServoSpec> = bus_joints(bus, joints)
        .into_iter()
        .map(|(index, mode, j)| {
            let range = joints.dofs.get(index).map_or((0.0, 0.0), |d| {
                let (a, b) = (
                    j.units.to_drive(d.limits.position.lower),
                    j.units.to_drive(d.limits.position.upper),
                );
                (a.min(b), a.max(b))
            });
            ServoSpec::new(index, mode, j, range)
        })
        .collect();
    DynamixelBus::new(
        port,
        &specs,
        DynamixelSettings {
            sync_read,
            timeout_ticks: timeout_ticks(bus, rate_hz),
            rate_hz,
            watchdog_ms: bus.watchdog_ms,
        },
        bus_status(bus),
    )
}

/// Frames one tick sends on `bus` in one burst: a command per drive, the SYNC and a heartbeat
/// for CiA 402.
pub fn burst_frames(bus: &Bus) -> usize {
    let cia402 = bus
        .joints
        .iter()
        .any(|j| j.protocol == crate::config::bus::Protocol::Cia402);
    bus.joints.len() + 2 * usize::from(cia402)
}

/// Refuses a SocketCAN interface whose transmit queue is shorter than one tick's burst: the
/// kernel would drop the excess (Linux's default txqueuelen for CAN is 10). A length of 0 is a
/// virtual interface without a queue (vcan, vxcan: the `noqueue` discipline hands each frame
/// straight to the driver), which nothing overflows. `sysfs` is `/sys/class/net` (a folder of the
/// tests' making in tests).
pub fn check_tx_queue(bus: &Bus, interface: &str, sysfs: &Path) -> Result<(), OpenError> {
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

/// Opens every configured bus after checking the drives against the skeleton.
pub fn open(buses: &[Bus], joints: &JointSet, rate_hz: f64) -> Result<BusBackend, OpenError> {
    let problems = check_joints(buses, joints);
    if !problems.is_empty() {
        return Err(OpenError::Config { problems });
    }
    let mut opened = Vec::with_capacity(buses.len());
    for bus in buses {
        let io_err = |what: String| {
            let bus = bus.name.clone();
            move |source| OpenError::Io { bus, what, source }
        };
        opened.push(match &bus.transport {
            Transport::Can { interface, .. } => {
                check_tx_queue(bus, interface, Path::new("/sys/class/net"))?;
                let io = SocketCanIo::open(interface)
                    .map_err(io_err(format!("CAN interface `{interface}`")))?;
                AnyBus::Can(can_bus(bus, joints, rate_hz, Box::new(io)))
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
                AnyBus::Can(can_bus(bus, joints, rate_hz, Box::new(io)))
            }
            Transport::Dynamixel { device, baud, .. } => {
                let port = SerialDevice::open(device, *baud)
                    .map_err(io_err(format!("serial device {}", device.display())))?;
                AnyBus::Dynamixel(dynamixel_bus(bus, joints, rate_hz, Box::new(port)))
            }
        });
    }
    Ok(BusBackend::new(opened))
}

/// All buses as one backend. Every bus gets its share of each call even when another fails, so
/// one failing bus never starves the drives on the others; the first error is reported.
pub struct BusBackend {
    buses: Vec<AnyBus>,
    status: Arc<BusesStatus>,
}

impl BusBackend {
    pub fn new(buses: Vec<AnyBus>) -> Self {
        let status = Arc::new(BusesStatus {
            buses: buses
                .iter()
                .map(|b| match b {
                    AnyBus::Can(c) => c.status(),
                    AnyBus::Dynamixel(d) => d.status(),
                })
                .collect(),
        });
        Self { buses, status }
    }

    fn each(
        &mut self,
        mut f: impl FnMut(&mut AnyBus) -> Result<(), BackendError>,
    ) -> Result<(), BackendError> {
        let mut result = Ok(());
        for bus in &mut self.buses {
            let r = f(bus);
            result = result.and(r);
        }
        result
    }
}

impl Backend for BusBackend {
    fn enable(&mut self) -> Result<Readiness, BackendError> {
        let mut all = true;
        self.each(|b| {
            let r = match b {
                AnyBus::Can(c) => c.enable()?,
                AnyBus::Dynamixel(d) => d.enable()?,
            };
            all &= r == Readiness::Ready;
            Ok(())
        })?;
        Ok(if all {
            Readiness::Ready
        } else {
            Readiness::Pending
        })
    }

    fn disable(&mut self) -> Result<(), BackendError> {
        self.each(|b| match b {
            AnyBus::Can(c) => c.disable(),
            AnyBus::Dynamixel(d) => d.disable(),
        })
    }

    fn write(&mut self, tick: u64, setpoints: &[Setpoint]) -> Result<(), BackendError> {
        self.each(|b| match b {
            AnyBus::Can(c) => c.write(tick, setpoints),
            AnyBus::Dynamixel(d) => d.write(setpoints),
        })
    }

    fn read(&mut self, feedback: &mut [Feedback]) -> Result<(), BackendError> {
        self.each(|b| match b {
            AnyBus::Can(c) => c.read(feedback),
            AnyBus::Dynamixel(d) => d.read(feedback),
        })
    }

    fn hold(&mut self, tick: u64, setpoints: &[Setpoint]) -> Result<(), BackendError> {
        self.each(|b| match b {
            AnyBus::Can(c) => c.hold(tick, setpoints),
            AnyBus::Dynamixel(d) => d.hold(setpoints),
        })
    }

    fn taken(&self, dofs: &mut [bool]) {
        for bus in &self.buses {
            match bus {
                AnyBus::Can(c) => c.taken(dofs),
                AnyBus::Dynamixel(d) => d.taken(dofs),
            }
        }
    }

    fn compliant(&mut self, on: bool, dofs: &mut [bool]) -> Result<Readiness, BackendError> {
        dofs.iter_mut().for_each(|d| *d = false);
        let mut all = true;
        self.each(|b| {
            let r = match b {
                AnyBus::Can(c) => c.compliant(on, dofs)?,
                AnyBus::Dynamixel(d) => d.compliant(on, dofs)?,
            };
            all &= r == Readiness::Ready;
            Ok(())
        })?;
        Ok(if all {
            Readiness::Ready
        } else {
            Readiness::Pending
        })
    }

    fn status(&self) -> Option<Arc<BusesStatus>> {
        Some(self.status.clone())
    }

    fn feedback_timeout(&self, dof: usize) -> Option<std::time::Duration> {
        self.buses.iter().find_map(|b| match b {
            AnyBus::Can(c) => c.drives_dof(dof).then(|| c.feedback_timeout()),
            AnyBus::Dynamixel(d) => d.drives_dof(dof).then(|| d.feedback_timeout()),
        })
    }
}
