//! The one rule by which a Feetech servo's calibration registers are compared with its LeRobot
//! calibration file, as LeRobot's `is_calibrated` compares them: the position limits (unsigned
//! words), and on STS Homing_Offset (sign-magnitude, bit 11; SCS servos have none, protocol 1).
//! The bus applies it when it opens, before it writes any setting ([`super::setup`]), and at
//! every enable, before torque goes on ([`super::drive`]): a servo recalibrated or swapped in
//! between is caught then too. Both read the same block with one Read a servo.

use super::codec::{Series, reg};
use crate::backend::servo_registers::{Mismatch, Register, ServoRegisters};

/// The block read: Min_Position_Limit (9) to the end of Homing_Offset (31, 32).
pub const ADDRESS: u8 = reg::MIN_POSITION_LIMIT;
pub const LEN: u8 = reg::HOMING_OFFSET + 2 - reg::MIN_POSITION_LIMIT;

/// The registers compared on `series`, in the order they are compared.
fn compared(series: Series) -> impl Iterator<Item = Register> {
    let homing = series == Series::Sts;
    [
        Register::HomingOffset,
        Register::MinPositionLimit,
        Register::MaxPositionLimit,
    ]
    .into_iter()
    .filter(move |r| homing || *r != Register::HomingOffset)
}

/// The value of `register` in `block` ([`LEN`] bytes from [`ADDRESS`]); `None` for Drive_Mode,
/// which Feetech servos lack (LeRobot's Feetech bus applies drive_mode in software).
fn value(series: Series, block: &[u8], register: Register) -> Option<i64> {
    let word = |address: u8| {
        let at = usize::from(address - ADDRESS);
        match block.get(at..at + 2) {
            Some(&[lo, hi]) => series.unword([lo, hi]),
            _ => 0,
        }
    };
    match register {
        Register::MinPositionLimit => Some(i64::from(word(reg::MIN_POSITION_LIMIT))),
        Register::MaxPositionLimit => Some(i64::from(word(reg::MAX_POSITION_LIMIT))),
        Register::HomingOffset => Some(i64::from(
            series.decode_homing_offset(word(reg::HOMING_OFFSET)),
        )),
        Register::DriveMode => None,
    }
}

/// The first register of `block` that differs from what the file says of `motor`.
pub fn check(series: Series, motor: &ServoRegisters, block: &[u8]) -> Result<(), Mismatch> {
    for register in compared(series) {
        let Some(read) = value(series, block, register) else {
            continue;
        };
        if read != register.of(motor) {
            return Err(Mismatch { register, read });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(series: Series, limits: (u16, u16), homing: u16) -> Vec<u8> {
        let mut b = vec![0u8; usize::from(LEN)];
        let mut put = |address: u8, v: u16| {
            let at = usize::from(address - ADDRESS);
            b[at..at + 2].copy_from_slice(&series.word(v));
        };
        put(reg::MIN_POSITION_LIMIT, limits.0);
        put(reg::MAX_POSITION_LIMIT, limits.1);
        put(reg::HOMING_OFFSET, homing);
        b
    }

    #[test]
    fn homing_offset_is_compared_on_sts_only_and_read_as_sign_magnitude() {
        let motor = ServoRegisters {
            homing_offset: -1000,
            range_min: 700,
            range_max: 3400,
            drive_mode: 0,
        };
        let sts = block(Series::Sts, (700, 3400), 0x800 | 1000);
        assert_eq!(check(Series::Sts, &motor, &sts), Ok(()));
        let twos = block(Series::Sts, (700, 3400), (-1000i16) as u16);
        assert_eq!(
            check(Series::Sts, &motor, &twos).map_err(|m| m.register),
            Err(Register::HomingOffset)
        );
        let scs = block(Series::Scs, (700, 3400), 0);
        assert_eq!(check(Series::Scs, &motor, &scs), Ok(()));
        let narrowed = block(Series::Scs, (700, 3000), 0);
        assert_eq!(
            check(Series::Scs, &motor, &narrowed),
            Err(Mismatch {
                register: Register::MaxPositionLimit,
                read: 3000
            })
        );
    }
}
