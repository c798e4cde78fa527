//! Pure encoders and decoders of the drives' wire formats, byte-exact to
//! `../shared/docs/protocols.md`. Encoders fill fixed-size frames or caller-provided buffers, so the
//! real-time path never allocates; decoders return `None` (or a typed parse result) on bytes that
//! do not fit, never panic.
//!
//! Each protocol also owns what a configuration says about it (`<protocol>::settings`: its YAML
//! keys as written, their defaults and validation, its id range and units), so `config` only
//! holds the validated data and delegates.

pub mod cia402;
pub mod dynamixel;
pub mod mit;
pub mod odrive;
pub mod slcan;

use crate::backend::FaultKind;

/// A classic CAN frame (at most 8 data bytes). `Copy`, so queues of frames never allocate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CanFrame {
    /// 11-bit standard or 29-bit extended identifier.
    pub id: u32,
    pub extended: bool,
    /// A remote transmission request: asks the node owning `id` to send; carries no data.
    pub rtr: bool,
    len: u8,
    bytes: [u8; 8],
}

impl CanFrame {
    /// A standard-ID frame; data beyond 8 bytes is cut off (no encoder here produces more).
    pub fn new(id: u32, data: &[u8]) -> Self {
        let mut bytes = [0u8; 8];
        let len = data.len().min(8);
        bytes[..len].copy_from_slice(&data[..len]);
        Self {
            id,
            extended: false,
            rtr: false,
            len: len as u8,
            bytes,
        }
    }

    /// A remote request for `id` (standard or extended); `dlc` is the requested length.
    pub fn new_remote(id: u32, extended: bool, dlc: u8) -> Self {
        Self {
            id,
            extended,
            rtr: true,
            len: dlc.min(8),
            bytes: [0; 8],
        }
    }

    pub fn new_extended(id: u32, data: &[u8]) -> Self {
        Self {
            extended: true,
            ..Self::new(id, data)
        }
    }

    /// The payload; empty for a remote request.
    pub fn data(&self) -> &[u8] {
        if self.rtr {
            return &[];
        }
        &self.bytes[..usize::from(self.len).min(8)]
    }

    /// The DLC field: the payload length, or the length a remote request asks for.
    pub fn dlc(&self) -> u8 {
        self.len.min(8)
    }

    pub fn len(&self) -> usize {
        self.data().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// A problem in one configured value: the key path (e.g. `buses[0].joints.base_yaw.mit.kp`) and
/// what is wrong with the value.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub key: String,
    pub message: String,
}

/// Problems found while validating, all reported together.
#[derive(Debug, Default)]
pub struct Problems(pub Vec<Problem>);

impl Problems {
    pub fn add(&mut self, key: impl Into<String>, message: impl Into<String>) {
        self.0.push(Problem {
            key: key.into(),
            message: message.into(),
        });
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Joint units (rad or m) ↔ drive units (counts, turns or motor rad): `drive = scale·joint + offset`,
/// with gear ratio and direction folded into `scale`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Units {
    pub scale: f64,
    pub offset: f64,
}

impl Units {
    pub fn to_drive(&self, joint: f64) -> f64 {
        self.scale * joint + self.offset
    }

    pub fn to_joint(&self, drive: f64) -> f64 {
        (drive - self.offset) / self.scale
    }

    /// Rates (velocity, acceleration) carry no offset.
    pub fn rate_to_drive(&self, joint_rate: f64) -> f64 {
        self.scale * joint_rate
    }

    pub fn rate_to_joint(&self, drive_rate: f64) -> f64 {
        drive_rate / self.scale
    }
}

/// How a protocol's drives count position: the key giving drive units per joint unit (before the
/// gear), its default, and the drive position at joint position 0 by default.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UnitKeys {
    /// `counts_per_unit`, `turns_per_unit`, or `None` when the drive takes joint units (MIT).
    pub per_unit: Option<&'static str>,
    pub default_per_unit: Option<f64>,
    pub default_zero_offset: f64,
}

/// A setting a robot model may state for a protocol: a `<ros2_control>` `<param name>` and the
/// configuration key it fills (below `buses[i]` or `buses[i].joints.<dof>`; `.` nests, as in
/// `mit.kp`). Each protocol's `settings` module lists its own, so what a param means is decided
/// where the protocol is understood.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Param {
    /// The `<param name>` as written in the URDF.
    pub name: &'static str,
    /// The configuration key it fills.
    pub key: &'static str,
    pub kind: ParamKind,
}

impl Param {
    /// A param named like the configuration key it fills.
    pub const fn same(key: &'static str, kind: ParamKind) -> Param {
        Param {
            name: key,
            key,
            kind,
        }
    }

    /// A param of a ros2_control hardware plugin's own name for a configuration key.
    pub const fn alias(name: &'static str, key: &'static str, kind: ParamKind) -> Param {
        Param { name, key, kind }
    }
}

/// What a setting's text must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamKind {
    /// A whole number (ids, bit rates).
    Integer,
    /// A finite decimal number.
    Number,
    /// Text as written, without surrounding whitespace.
    Text,
    /// `true` or `false`.
    Bool,
}

/// What a ros2_control hardware plugin says about its bus: the transport and drive protocol it
/// speaks, which a block naming it in `<hardware><plugin>` implies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plugin {
    pub name: &'static str,
    /// `can` or `serial`.
    pub transport: &'static str,
    /// The drives' protocol.
    pub protocol: &'static str,
}

/// Frames of one size a drive (or a bus's shared service) puts on the bus per control tick, in
/// both directions; fractional for messages slower than the tick (heartbeats).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FrameLoad {
    pub data_len: usize,
    pub per_tick: f64,
}

impl FrameLoad {
    pub const fn each_tick(data_len: usize) -> Self {
        Self {
            data_len,
            per_tick: 1.0,
        }
    }

    /// A frame every `every_ms` at a control period of `period_ms`.
    pub fn every(data_len: usize, every_ms: f64, period_ms: f64) -> Self {
        Self {
            data_len,
            per_tick: if every_ms > 0.0 {
                (period_ms / every_ms).min(1.0)
            } else {
                0.0
            },
        }
    }

    /// Worst-case CAN bits per tick.
    pub fn can_bits(&self) -> f64 {
        f64::from(frame_bits(self.data_len, false)) * self.per_tick
    }

    /// SLCAN characters per tick.
    pub fn slcan_bytes(&self) -> f64 {
        slcan::line_len(self.data_len, false) as f64 * self.per_tick
    }
}

/// Worst-case bits one classic frame occupies on the wire, including stuff bits and the 3-bit
/// interframe space: 8·n + 47 + ⌊(34 + 8·n − 1)/4⌋ for standard IDs (135 bits for 8 bytes, so
/// 1 Mbit/s carries ≥ 7 400 such frames per second), 8·n + 67 + ⌊(54 + 8·n − 1)/4⌋ for extended.
pub fn frame_bits(data_len: usize, extended: bool) -> u32 {
    let n = data_len.min(8) as u32 * 8;
    if extended {
        n + 67 + (54 + n - 1) / 4
    } else {
        n + 47 + (34 + n - 1) / 4
    }
}

/// A warning a drive or adapter reported (`LinkStatus` code), in its protocol's words.
pub fn warning_words(protocol: &str, code: u32) -> String {
    match protocol {
        "cia402" => cia402::emcy_text(code),
        "slcan" => slcan::status_words(code as u8),
        _ => format!("code {code:#x}"),
    }
}

/// A fault's code in the words of the protocol that reported it, where the code says more than
/// its kind; `None` where the kind and the hex code are all there is.
pub fn fault_words(protocol: &str, kind: FaultKind, code: u32) -> Option<String> {
    match (protocol, kind) {
        // EMCY errors carry the error register above the code; 0x6061 read-backs carry the index.
        ("cia402", FaultKind::DriveFault) if code >> 16 == 0x6061 => Some(format!(
            "the mode display 0x6061 shows mode {}, not 8 (cyclic synchronous position)",
            code & 0xFFFF
        )),
        ("cia402", FaultKind::DriveFault) if (0x1_0000..0x100_0000).contains(&code) => {
            Some(cia402::emcy_text(code))
        }
        ("cia402", FaultKind::SdoAbort) => Some(format!(
            "SDO abort {code:#010x}: {}",
            cia402::sdo_abort_words(code)
        )),
        ("dynamixel", FaultKind::DriveFault | FaultKind::Protocol) => Some(format!(
            "status error {code:#04x}: {}",
            dynamixel::error_words(code as u8)
        )),
        ("slcan", FaultKind::BusOff) => Some(slcan::status_words(code as u8)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worst_case_frame_bits_match_the_classic_can_rule_of_thumb() {
        assert_eq!(frame_bits(8, false), 135);
        assert_eq!(frame_bits(0, false), 55);
        // 1 Mbit/s: between 7 400 (worst-case stuffing) and 9 000 (none) 8-byte frames per second.
        assert_eq!(1_000_000 / frame_bits(8, false), 7407);
    }

    #[test]
    fn frames_keep_at_most_eight_bytes() {
        let f = CanFrame::new(0x123, &[1, 2, 3, 4, 5, 6, 7, 8, 9]);
        assert_eq!(f.data(), &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert!(CanFrame::new(0x80, &[]).is_empty());
    }
}
