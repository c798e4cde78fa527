//! The DYNAMIXEL part of the servo set-up at open ([`servo_setup`]): the X series' registers
//! LeRobot writes when it connects a Koch arm (`DynamixelMotorsBus.configure_motors` and
//! `KochFollower.configure`), where they sit (ROBOTIS' X-series control table, as LeRobot's
//! `motors/dynamixel/tables.py` gives it; protocols.md §4.5), and the Protocol 2.0 packets.
//!
//! With a LeRobot calibration on the bus, LeRobot's values are the defaults: every servo gets
//! Return_Delay_Time 0 and Operating_Mode 4 (extended position: "some mistake can happen while
//! assembling the arm, you could end up with a servo with a position 0 or 4095 at a crucial
//! point"), the motor named `gripper` Operating_Mode 5 (current-based position: it grasps
//! without forcing), and the motor named `elbow_flex` Position P/I/D gains 1500/0/600. Return
//! Delay Time and Operating Mode are EEPROM, writable only with torque off: a servo with a
//! register to change has its torque turned off first (the enable turns it on again at the
//! position it holds). X-series servos have no Lock register.
//!
//! The Operating Mode written here is also what the enable sequence keeps ([`super::drive`]):
//! a servo swapped while motiond runs is set to it again, with torque off, before it moves.

use super::calibration;
use super::codec as dxl;
use crate::backend::servo_registers::{Mismatch, ServoRegisters};
use crate::backend::servo_setup::{Place, Scan, ServoTable, Setting};

pub const RETURN_DELAY_TIME: Setting = Setting {
    key: "servo.return_delay_time",
    register: "Return_Delay_Time",
    place: Place::whole(dxl::ADDR_RETURN_DELAY_TIME, 1),
    // 2 µs units (the factory 250 = 500 µs).
    range: (0, 254),
};
pub const OPERATING_MODE: Setting = Setting {
    key: "servo.operating_mode",
    register: "Operating_Mode",
    place: Place::whole(dxl::ADDR_OPERATING_MODE, 1),
    range: (0, 16),
};
pub const POSITION_P_GAIN: Setting = Setting {
    key: "servo.position_p_gain",
    register: "Position_P_Gain",
    place: Place::whole(dxl::ADDR_POSITION_P_GAIN, 2),
    range: (0, 16383),
};
pub const POSITION_I_GAIN: Setting = Setting {
    key: "servo.position_i_gain",
    register: "Position_I_Gain",
    place: Place::whole(dxl::ADDR_POSITION_I_GAIN, 2),
    range: (0, 16383),
};
pub const POSITION_D_GAIN: Setting = Setting {
    key: "servo.position_d_gain",
    register: "Position_D_Gain",
    place: Place::whole(dxl::ADDR_POSITION_D_GAIN, 2),
    range: (0, 16383),
};

/// In the order they are written (LeRobot's).
pub static SETTINGS: [Setting; 5] = [
    RETURN_DELAY_TIME,
    OPERATING_MODE,
    POSITION_P_GAIN,
    POSITION_I_GAIN,
    POSITION_D_GAIN,
];

/// The RAM registers among them (X series: addresses from 64 on), which the enable sequence
/// writes again before torque goes on ([`super::drive`]).
pub const RAM: [&Setting; 3] = [&POSITION_P_GAIN, &POSITION_I_GAIN, &POSITION_D_GAIN];

/// The Operating Modes motiond commands: velocity for a velocity joint, position (one turn),
/// extended position or current-based position for the others.
pub const MODES: [u8; 4] = [
    dxl::OPERATING_MODE_VELOCITY,
    dxl::OPERATING_MODE_POSITION,
    dxl::OPERATING_MODE_EXTENDED_POSITION,
    dxl::OPERATING_MODE_CURRENT_POSITION,
];

/// X-series DYNAMIXEL servos.
pub struct XSeries;

static UNLOCK: [(&str, u16, u8); 1] = [("Torque_Enable 0", dxl::ADDR_TORQUE_ENABLE, 0)];

impl ServoTable for XSeries {
    fn family(&self) -> &'static str {
        "dynamixel"
    }

    fn settings(&self) -> &'static [Setting] {
        &SETTINGS
    }

    fn has(&self, _setting: &Setting) -> bool {
        true
    }

    fn lacking(&self, setting: &Setting) -> String {
        format!(
            "dynamixel servos have no {}: remove the key",
            setting.register
        )
    }

    fn refuses(&self, setting: &Setting, value: u32) -> Option<String> {
        (*setting == OPERATING_MODE && !MODES.iter().any(|m| u32::from(*m) == value)).then(|| {
            format!(
                "motiond commands Operating_Mode 1 (velocity), 3 (position), 4 (extended \
                 position) or 5 (current-based position), or `keep`; got {value}"
            )
        })
    }

    fn lerobot(&self, setting: &Setting, motor: &str) -> Option<u32> {
        match *setting {
            RETURN_DELAY_TIME => Some(0),
            OPERATING_MODE if motor == "gripper" => {
                Some(u32::from(dxl::OPERATING_MODE_CURRENT_POSITION))
            }
            OPERATING_MODE => Some(u32::from(dxl::OPERATING_MODE_EXTENDED_POSITION)),
            POSITION_P_GAIN if motor == "elbow_flex" => Some(1500),
            POSITION_I_GAIN if motor == "elbow_flex" => Some(0),
            POSITION_D_GAIN if motor == "elbow_flex" => Some(600),
            _ => None,
        }
    }

    fn return_delay(&self) -> Option<&'static Setting> {
        Some(&SETTINGS[0])
    }

    fn return_delay_unit_us(&self) -> u32 {
        2
    }

    fn read(&self, out: &mut Vec<u8>, id: u8, address: u16, len: u8) {
        let mut buf = [0u8; 32];
        if let Some(p) = dxl::read(&mut buf, id, address, u16::from(len)) {
            out.extend_from_slice(p);
        }
    }

    fn write(&self, out: &mut Vec<u8>, id: u8, address: u16, data: &[u8]) {
        let mut buf = [0u8; 32];
        if let Some(p) = dxl::write(&mut buf, id, address, data) {
            out.extend_from_slice(p);
        }
    }

    fn scan(&self, input: &[u8]) -> Scan {
        let mut params = [0u8; 64];
        match dxl::parse(input, &mut params) {
            dxl::Parse::Packet { consumed, packet } if packet.instruction == dxl::INST_STATUS => {
                match params.get(..packet.params) {
                    Some([error, data @ ..]) => Scan::Status {
                        id: packet.id,
                        error: *error,
                        params: data.to_vec(),
                        len: consumed,
                    },
                    _ => Scan::Drop(consumed),
                }
            }
            // An instruction echoed by a half-duplex adapter, junk, a corrupt packet.
            dxl::Parse::Packet { consumed, .. } | dxl::Parse::Skip { consumed, .. } => {
                Scan::Drop(consumed)
            }
            dxl::Parse::Incomplete { consumed } if consumed > 0 => Scan::Drop(consumed),
            dxl::Parse::Incomplete { .. } => Scan::More,
        }
    }

    /// The error number (bits 0–6); the alert bit alone is no refusal (the request was done;
    /// the enable sequence reboots a servo in alert).
    fn refusal(&self, error: u8) -> Option<String> {
        (error & !dxl::ERR_ALERT != 0).then(|| dxl::error_words(error))
    }

    fn decode(&self, bytes: &[u8]) -> u32 {
        bytes
            .iter()
            .rev()
            .fold(0u32, |v, b| (v << 8) | u32::from(*b))
    }

    fn encode(&self, value: u32, len: u8) -> Vec<u8> {
        value
            .to_le_bytes()
            .get(..usize::from(len))
            .unwrap_or_default()
            .to_vec()
    }

    fn unlock(&self) -> &'static [(&'static str, u16, u8)] {
        &UNLOCK
    }

    fn relock(&self) -> &'static [(&'static str, u16, u8)] {
        &[]
    }

    fn calibration_blocks(&self) -> &'static [(u16, u8)] {
        &calibration::BLOCKS
    }

    fn check_calibration(
        &self,
        motor: &ServoRegisters,
        blocks: &[Vec<u8>],
    ) -> Result<(), Mismatch> {
        blocks
            .iter()
            .try_for_each(|b| calibration::check(motor, b).map(drop))
    }
}
