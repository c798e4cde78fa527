//! The registers a LeRobot calibration writes to a servo (`lerobot-calibrate`), as its file
//! records them, and one that a bus read back different ([`Mismatch`], the code of a
//! `calibration_mismatch` fault). Plain data: the bus settings, the buses' status and the
//! calibration reader all use it.

/// What a servo's calibration file says its registers hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServoRegisters {
    pub homing_offset: i64,
    pub range_min: i64,
    pub range_max: i64,
    pub drive_mode: i64,
}

/// A servo register a LeRobot calibration also writes to the servo, which the bus reads back
/// before torque goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Register {
    HomingOffset,
    MinPositionLimit,
    MaxPositionLimit,
    /// DYNAMIXEL's (direction and profile bits; LeRobot compares the whole byte).
    DriveMode,
}

impl Register {
    pub const ALL: [Register; 4] = [
        Register::HomingOffset,
        Register::MinPositionLimit,
        Register::MaxPositionLimit,
        Register::DriveMode,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Register::HomingOffset => "Homing_Offset",
            Register::MinPositionLimit => "Min_Position_Limit",
            Register::MaxPositionLimit => "Max_Position_Limit",
            Register::DriveMode => "Drive_Mode",
        }
    }

    /// The file's value of this register for `motor`.
    pub fn of(self, motor: &ServoRegisters) -> i64 {
        match self {
            Register::HomingOffset => motor.homing_offset,
            Register::MinPositionLimit => motor.range_min,
            Register::MaxPositionLimit => motor.range_max,
            Register::DriveMode => motor.drive_mode,
        }
    }
}

/// A servo's register read back different from its calibration file: which, and the value read
/// (the file's is the configuration's, [`ServoRegisters`]). Packed into a fault's 32-bit code
/// (the loop reports faults without allocating): bits 29–31 the register (1 + its index in
/// [`Register::ALL`]), bits 0–28 the value read, two's complement, saturated at ±2²⁸ (the
/// widest register, DYNAMIXEL's Homing_Offset, holds ±1 044 479).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mismatch {
    pub register: Register,
    pub read: i64,
}

const READ_BITS: u32 = 29;
const READ_MAX: i64 = (1 << (READ_BITS - 1)) - 1;
const READ_MIN: i64 = -(1 << (READ_BITS - 1));

impl Mismatch {
    pub fn code(self) -> u32 {
        let register = Register::ALL
            .iter()
            .position(|r| *r == self.register)
            .unwrap_or(0) as u32
            + 1;
        let read = (self.read.clamp(READ_MIN, READ_MAX) as i32 as u32) & ((1 << READ_BITS) - 1);
        register << READ_BITS | read
    }

    pub fn of_code(code: u32) -> Option<Mismatch> {
        let register = *Register::ALL.get(((code >> READ_BITS) as usize).checked_sub(1)?)?;
        let shift = 32 - READ_BITS;
        Some(Mismatch {
            register,
            read: i64::from(((code << shift) as i32) >> shift),
        })
    }

    /// The value read in words: a saturated one as the bound it passed.
    fn read_words(self) -> String {
        match self.read {
            READ_MAX => format!("{READ_MAX} or more"),
            READ_MIN => format!("{READ_MIN} or less"),
            v => v.to_string(),
        }
    }

    /// The register and the value read, for the drive's own line in `status` and the journal.
    pub fn words(self) -> String {
        format!(
            "{} reads {}, not what the LeRobot calibration file says",
            self.register.as_str(),
            self.read_words()
        )
    }

    /// In an operator's words: which servo (`servo`: its bus, its id and what its file says,
    /// when known; else only the joint), the register, both values and what to do.
    pub fn describe(
        self,
        joint: &str,
        servo: Option<(&str, u8, Option<ServoRegisters>)>,
    ) -> String {
        let register = self.register.as_str();
        let read = self.read_words();
        let (which, file) = match servo {
            Some((bus, id, file)) => (
                format!("bus {bus}, servo {id} ({joint})"),
                file.map(|f| self.register.of(&f)),
            ),
            None => (format!("the servo of {joint}"), None),
        };
        let file = match file {
            Some(v) => format!("the bus's LeRobot calibration file says {v}"),
            None => "not what the bus's LeRobot calibration file says".into(),
        };
        format!(
            "calibration_mismatch on {which}: its {register} reads {read}, {file}: the servo was \
             calibrated with another file or since; run `lerobot-calibrate` on this arm again, \
             or fix the bus's `lerobot_calibration` (point it at this arm's file) (nothing was \
             enabled)"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mismatch_survives_its_code() {
        for register in Register::ALL {
            for read in [-2047, 2047, 0, 4095, -1, -1_044_479, 1_044_479, 255] {
                let m = Mismatch { register, read };
                assert_eq!(Mismatch::of_code(m.code()), Some(m));
            }
        }
        let far = Mismatch {
            register: Register::MaxPositionLimit,
            read: i64::from(u32::MAX),
        };
        let back = Mismatch::of_code(far.code()).unwrap();
        assert_eq!(back.read, READ_MAX);
        assert!(back.describe("j", None).contains("reads 268435455 or more"));
        assert_eq!(Mismatch::of_code(0x20), None);
    }

    #[test]
    fn the_words_name_the_bus_the_servo_the_joint_both_values_and_what_to_do() {
        let m = Mismatch {
            register: Register::HomingOffset,
            read: -1303,
        };
        let file = ServoRegisters {
            homing_offset: -1003,
            range_min: 0,
            range_max: 4095,
            drive_mode: 0,
        };
        assert_eq!(
            m.describe("elbow_flex", Some(("arm", 3, Some(file)))),
            "calibration_mismatch on bus arm, servo 3 (elbow_flex): its Homing_Offset reads \
             -1303, the bus's LeRobot calibration file says -1003: the servo was calibrated \
             with another file or since; run `lerobot-calibrate` on this arm again, or fix the \
             bus's `lerobot_calibration` (point it at this arm's file) (nothing was enabled)"
        );
    }
}
