//! The moteus register protocol over CAN-FD (mjbots `docs/protocol/can.md`,
//! `docs/reference/registers.md`): a frame is a list of subframes (write, read, reply) on
//! registers — 0x000 mode, 0x001–0x003 measured position (revolutions), velocity (rev/s),
//! torque (N·m), 0x00F fault, 0x020–0x024 position, velocity, feed-forward torque, kp and kd scale,
//! 0x027 watchdog timeout — padded with NOP (0x50) to a CAN-FD length. The arbitration id is
//! `source << 8 | destination`, bit 15 asking for a reply (so commands are 29-bit frames).
//!
//! Encoding and decoding go through mjbots' own `moteus-protocol` crate: it is `no_std`, writes
//! into a 64-byte array on the stack and parses without allocating, so it runs on the loop as is.

use moteus_protocol::command::{PositionCommand, PositionFormat, StopCommand};
use moteus_protocol::query::{QueryFormat, QueryResult};
use moteus_protocol::{CanFdFrame, Resolution, calculate_arbitration_id, parse_arbitration_id};

use crate::backend::frame::{CanFrame, FrameLoad};

/// Modes (register 0x000) motiond writes or expects.
pub const MODE_STOPPED: u8 = 0;
pub const MODE_FAULT: u8 = 1;
pub const MODE_POSITION: u8 = 10;
pub const MODE_TIMEOUT: u8 = 11;

/// Servo ids (the destination's 7 bits; 0 is the host's).
pub const MAX_ID: u8 = 0x7F;

/// A position-mode command: everything in output revolutions, rev/s and N·m.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Command {
    /// NaN: "use the current position" (velocity control).
    pub position: f32,
    pub velocity: f32,
    pub feedforward_torque: f32,
    /// `None`: 1.0, the drive's own gains (nothing sent).
    pub kp_scale: Option<f32>,
    pub kd_scale: Option<f32>,
    /// `None`: the drive's configured limit.
    pub maximum_torque: Option<f32>,
    /// How long the command holds before the drive enters its timeout mode; NaN: no timeout.
    pub watchdog_timeout: f32,
}

/// What motiond queries with every command: mode, position, velocity, torque (floats) and the
/// fault code — moteus' default query without voltage and temperature, which would lengthen
/// every reply by a CAN-FD length step (20 → 24 bytes) for values motiond does not use.
fn query_format() -> QueryFormat {
    let mut q = QueryFormat::default();
    q.voltage = Resolution::Ignore;
    q.temperature = Resolution::Ignore;
    q
}

fn position_format() -> PositionFormat {
    // Floats throughout, as moteus' libraries send by default: no range limits on position.
    PositionFormat::default()
}

/// The arbitration id from host `source` to servo `id`, asking for a reply.
pub fn arbitration_id(source: u8, id: u8) -> u32 {
    calculate_arbitration_id(source as i8, id as i8, 0, true)
}

fn finish(source: u8, id: u8, mut f: CanFdFrame) -> CanFrame {
    query_format().serialize(&mut f);
    f.pad_to_dlc();
    CanFrame::new_fd(arbitration_id(source, id), true, f.payload())
}

/// Position mode with `c`, and the query.
pub fn position(source: u8, id: u8, c: &Command) -> CanFrame {
    let mut f = CanFdFrame::new();
    let mut cmd = PositionCommand::new();
    cmd.position = Some(c.position);
    cmd.velocity = Some(c.velocity);
    cmd.feedforward_torque = Some(c.feedforward_torque);
    cmd.kp_scale = c.kp_scale;
    cmd.kd_scale = c.kd_scale;
    cmd.maximum_torque = c.maximum_torque;
    cmd.watchdog_timeout = Some(c.watchdog_timeout);
    cmd.serialize(&mut f, &position_format());
    finish(source, id, f)
}

/// Mode stopped (motor unpowered; clears a fault), and the query.
pub fn stop(source: u8, id: u8) -> CanFrame {
    let mut f = CanFdFrame::new();
    StopCommand::serialize(&mut f);
    finish(source, id, f)
}

/// The query alone: the drive keeps its mode and reports.
pub fn query(source: u8, id: u8) -> CanFrame {
    finish(source, id, CanFdFrame::new())
}

/// What a servo reported.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reply {
    /// The servo that sent it.
    pub id: u8,
    pub mode: u8,
    /// Output revolutions.
    pub position: f32,
    /// Output rev/s.
    pub velocity: f32,
    /// N·m at the output.
    pub torque: f32,
    /// Register 0x00F: the fault when `mode` is fault; otherwise what limits the output (96–103).
    pub fault: u8,
}

/// The reply in `frame` when it is a servo's answer to host `source` (`None`: another frame);
/// `Some(Err(()))` for a reply without the registers motiond asked for.
pub fn decode_reply(frame: &CanFrame, source: u8) -> Option<Result<Reply, ()>> {
    let (from, to, prefix) = parse_arbitration_id(frame.id);
    // moteus answers in CAN-FD frames; commands (and other hosts' traffic) have the reply bit or
    // another destination.
    if !frame.fd || prefix != 0 || frame.id & 0x8000 != 0 || to as u8 != source || from == 0 {
        return None;
    }
    let data = frame.data();
    // A reply starts with a reply (0x2x) or an error (0x31) subframe.
    if !data.first().is_some_and(|b| b & 0xF0 == 0x20 || *b == 0x31) {
        return None;
    }
    let r = QueryResult::parse_data(data);
    if r.position.is_nan() {
        return Some(Err(()));
    }
    Some(Ok(Reply {
        id: from as u8,
        mode: u8::from(r.mode),
        position: r.position,
        velocity: r.velocity,
        torque: r.torque,
        fault: r.fault as u8,
    }))
}

/// One servo's traffic per tick: the command with its query (FD, 29-bit id), the reply.
pub fn drive_load(c: &Command) -> [FrameLoad; 2] {
    let command = position(0, 1, c).len();
    // The reply to `query_format`: mode int8, three floats, the fault int8, padded.
    let reply = crate::backend::frame::fd_len(3 + 2 + 12 + 3);
    [
        FrameLoad::each_tick(command).extended().fd(),
        FrameLoad::each_tick(reply).extended().fd(),
    ]
}

/// A fault code (register 0x00F, mode fault) in moteus' words (`docs/reference/registers.md`).
pub fn fault_words(code: u8) -> &'static str {
    match code {
        32 => "calibration fault: the encoder sensed no magnet during calibration",
        33 => {
            "motor driver fault: most often undervoltage (the supply could not give the current drawn); see the drv8323 diagnostics"
        }
        34 => {
            "over voltage: the bus voltage exceeded servo.max_voltage (regeneration into a supply that cannot sink it?)"
        }
        35 => "encoder fault: the readings are not consistent with a magnet",
        36 => "motor not configured: run moteus_tool --calibrate",
        37 => "pwm cycle overrun (internal firmware error)",
        38 => "over temperature",
        39 => "outside limit: position control started outside servopos.position_min/max",
        40 => "under voltage",
        41 => "config changed during operation",
        42 => "theta invalid: no valid commutation encoder",
        43 => "position invalid: no valid output encoder",
        44 => "driver enable fault: the MOSFET gate driver could not be enabled",
        45 => "stop position deprecated: used with velocity or acceleration limits",
        46 => "timing violation",
        47 => "bemf feedforward without an acceleration limit",
        48 => "invalid limits: servopos.position_min/max outside the available range",
        49 => "position control error over servo.fault_position_error",
        50 => "velocity control error over servo.fault_velocity_error",
        _ => "unknown fault code",
    }
}
