//! The bus backend: every configured CAN and serial bus behind one [`Backend`].

use std::io;

use crate::backend::can::{CanBus, FrameIo, SocketCanIo};
use crate::backend::serial::{DynamixelBus, Port, SlcanIo, open_port};
use crate::backend::{Backend, BackendError, Feedback, Readiness};
use crate::config::bus::{Bus, BusJoint, BusProblem, Transport, check_joints};
use crate::skel::Actuator;
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
    Config { problems: Vec<BusProblem> },
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

/// A CAN bus over any frame transport (SocketCAN, SLCAN, in-memory).
pub fn can_bus(bus: &Bus, joints: &JointSet, rate_hz: f64, io: Box<dyn FrameIo>) -> CanBus {
    CanBus::new(
        io,
        &bus_joints(bus, joints),
        rate_hz,
        timeout_ticks(bus, rate_hz),
    )
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
    DynamixelBus::new(
        port,
        &bus_joints(bus, joints),
        sync_read,
        timeout_ticks(bus, rate_hz),
        rate_hz,
    )
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
                let port =
                    open_port(device, baud.unwrap_or(115_200)).map_err(io_err(what.clone()))?;
                let io = SlcanIo::open(Box::new(port), *bitrate)
                    .map_err(io_err(what))?
                    .poll_status_every(status_poll_ticks(rate_hz));
                AnyBus::Can(can_bus(bus, joints, rate_hz, Box::new(io)))
            }
            Transport::Dynamixel { device, baud, .. } => {
                let port = open_port(device, *baud)
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
}

impl BusBackend {
    pub fn new(buses: Vec<AnyBus>) -> Self {
        Self { buses }
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

    fn feedback_timeout(&self, dof: usize) -> Option<std::time::Duration> {
        self.buses.iter().find_map(|b| match b {
            AnyBus::Can(c) => c.drives_dof(dof).then(|| c.feedback_timeout()),
            AnyBus::Dynamixel(d) => d.drives_dof(dof).then(|| d.feedback_timeout()),
        })
    }
}
