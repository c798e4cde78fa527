//! The one rule by which a DYNAMIXEL servo's calibration registers are compared with its LeRobot
//! calibration file, as LeRobot's `is_calibrated` compares them: Drive_Mode's whole byte,
//! Homing_Offset (i32), the position limits (read as unsigned, as LeRobot decodes them). The bus
//! applies it when it opens, before it writes any setting (`backend::servo_setup`), and at every
//! enable before anything is written ([`super::drive`]).
//!
//! The three reads are told apart by the length of their replies, none of which is an Operating
//! Mode's (1 byte) or a position's (4), so a late reply on the loop is never taken for one: from
//! Drive_Mode 2 bytes (with Operating_Mode), from Homing_Offset 8 (with Moving_Threshold), from
//! Velocity_Limit 12 (with Max_Position_Limit and Min_Position_Limit). All defined registers,
//! adjacent.

use super::codec as dxl;
use crate::backend::servo_registers::{Mismatch, Register, ServoRegisters};

/// (address, bytes) of each read.
pub const BLOCKS: [(u16, u8); 3] = [
    (dxl::ADDR_DRIVE_MODE, 2),
    (dxl::ADDR_HOMING_OFFSET, 8),
    (dxl::ADDR_VELOCITY_LIMIT, 12),
];

/// Every read's bit: all came back and agree.
pub const ALL: u8 = 0b111;

/// One read's reply (told by its length) against the file's `motor`: its bit (a bit of [`ALL`];
/// 0 for a reply of no calibration read), or the first register that differs.
pub fn check(motor: &ServoRegisters, data: &[u8]) -> Result<u8, Mismatch> {
    let word = |at: usize| match data.get(at..at + 4) {
        Some(&[a, b, c, d]) => [a, b, c, d],
        _ => [0; 4],
    };
    let (bit, registers): (u8, [(Register, i64); 2]) = match data.len() {
        2 => {
            let mode = (
                Register::DriveMode,
                i64::from(data.first().copied().unwrap_or(0)),
            );
            (0b001, [mode, mode])
        }
        8 => {
            let offset = (
                Register::HomingOffset,
                i64::from(i32::from_le_bytes(word(0))),
            );
            (0b010, [offset, offset])
        }
        12 => (
            0b100,
            [
                (
                    Register::MaxPositionLimit,
                    i64::from(u32::from_le_bytes(word(4))),
                ),
                (
                    Register::MinPositionLimit,
                    i64::from(u32::from_le_bytes(word(8))),
                ),
            ],
        ),
        _ => return Ok(0),
    };
    for (register, read) in registers {
        if read != register.of(motor) {
            return Err(Mismatch { register, read });
        }
    }
    Ok(bit)
}
