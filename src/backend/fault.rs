//! Every fault the loop and its backends report, and the faults the simulated backend injects:
//! one place, so the loop, the configuration and the status all name them alike.

use serde::Deserialize;

/// The kinds of failure a bus or drive can report. `Copy`, so reporting never allocates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// The OS refused a write.
    Write,
    /// The transmit queue is full.
    QueueFull,
    /// The CAN controller went bus-off or reported error frames.
    BusOff,
    /// The serial device or CAN interface disappeared.
    DeviceLost,
    /// No feedback for the configured number of ticks.
    FeedbackMissing,
    /// The drive reported a fault (CiA 402 fault state, EMCY, ODrive error, Dynamixel alert).
    DriveFault,
    /// The drive does not follow its command (simulated stall, tracking error too large).
    Stall,
    /// A reply that does not parse.
    Protocol,
    /// Enabling did not complete in time.
    EnableTimeout,
    /// The loop's own guard found a setpoint outside the limits (`code`: 1 position,
    /// 2 velocity, 3 acceleration, 4 a step faster than the velocity limit).
    Limit,
    /// Too many consecutive control periods overran their deadline, or one woke up too late
    /// (`code`: how late, µs).
    Overrun,
    /// A drive's measured position strayed farther from its command than the configured
    /// tolerance (`code`: 1 while moving, 2 at the end of a motion).
    FollowingError,
    /// A CiA 402 drive's heartbeat stopped (or the drive left NMT operational).
    HeartbeatLost,
    /// A CiA 402 drive refused an SDO of its set-up (code: the SDO abort code).
    SdoAbort,
    /// A drive reports its own E-stop (CiA 402 quick stop active, ODrive's E-stop error; code:
    /// the statusword or error bits): with `estop.drive` the loop's E-stop, else this fault.
    DriveEStop,
    /// A servo's own calibration registers differ from its LeRobot calibration file (code:
    /// [`servo_registers::Mismatch`](crate::backend::servo_registers::Mismatch)).
    CalibrationMismatch,
}

impl FaultKind {
    pub const ALL: [FaultKind; 16] = [
        FaultKind::Write,
        FaultKind::QueueFull,
        FaultKind::BusOff,
        FaultKind::DeviceLost,
        FaultKind::FeedbackMissing,
        FaultKind::DriveFault,
        FaultKind::Stall,
        FaultKind::Protocol,
        FaultKind::EnableTimeout,
        FaultKind::Limit,
        FaultKind::Overrun,
        FaultKind::FollowingError,
        FaultKind::HeartbeatLost,
        FaultKind::SdoAbort,
        FaultKind::DriveEStop,
        FaultKind::CalibrationMismatch,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::Write => "write_error",
            FaultKind::QueueFull => "queue_full",
            FaultKind::BusOff => "bus_off",
            FaultKind::DeviceLost => "device_lost",
            FaultKind::FeedbackMissing => "feedback_missing",
            FaultKind::DriveFault => "drive_fault",
            FaultKind::Stall => "stall",
            FaultKind::Protocol => "protocol",
            FaultKind::EnableTimeout => "enable_timeout",
            FaultKind::Limit => "limit_violation",
            FaultKind::Overrun => "overrun",
            FaultKind::FollowingError => "following_error",
            FaultKind::HeartbeatLost => "heartbeat_lost",
            FaultKind::SdoAbort => "sdo_abort",
            FaultKind::DriveEStop => "drive_estop",
            FaultKind::CalibrationMismatch => "calibration_mismatch",
        }
    }
}

/// A backend failure: what, which DOF (index in the [`JointSet`](crate::trajectory::JointSet)) if known, and a protocol-specific
/// code (errno, EMCY error code, ODrive error bits, Dynamixel error byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackendError {
    pub kind: FaultKind,
    pub dof: Option<u16>,
    pub code: u32,
}

impl std::fmt::Display for BackendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.kind.as_str())?;
        if let Some(dof) = self.dof {
            write!(f, " on dof {dof}")?;
        }
        if self.code != 0 {
            write!(f, " (code {:#x})", self.code)?;
        }
        Ok(())
    }
}

impl std::error::Error for BackendError {}

impl BackendError {
    pub fn new(kind: FaultKind) -> Self {
        Self {
            kind,
            dof: None,
            code: 0,
        }
    }
}

/// A fault the simulated backend injects (`sim.fault.kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SimFaultKind {
    /// Writes fail with a drive fault (CiA 402 error code 0x2310, overcurrent).
    Error,
    /// The motor stops following its commands; the following error then reports a stall.
    Stall,
    /// Feedback stops arriving.
    NoFeedback,
    /// The drive reports its own E-stop (as a CiA 402 drive in quick stop active does): writes
    /// fail with a drive E-stop.
    Estop,
}

impl SimFaultKind {
    /// The backend fault the simulation reports for it.
    pub fn fault_kind(self) -> FaultKind {
        match self {
            SimFaultKind::Error => FaultKind::DriveFault,
            SimFaultKind::Stall => FaultKind::Stall,
            SimFaultKind::NoFeedback => FaultKind::FeedbackMissing,
            SimFaultKind::Estop => FaultKind::DriveEStop,
        }
    }
}
