//! The Feetech part of the servo set-up at open ([`servo_setup`]): the registers LeRobot writes
//! when it connects an arm (`FeetechMotorsBus.configure_motors` and the SO followers'
//! `configure`, lerobot 0.6.2), where they sit on STS/SMS and SCS servos, and the packets.
//!
//! With a LeRobot calibration on the bus, LeRobot's values are the defaults: every servo gets
//! Return_Delay_Time 0, Acceleration 254 and on STS Maximum_Acceleration 254, Operating_Mode 0
//! (position), P/I/D_Coefficient 16/0/32 and the Phase register's bit 4 cleared (angle feedback
//! mode 0: positions within one turn); the motor named `gripper` on STS also Max_Torque_Limit 500,
//! Protection_Current 250 and Overload_Torque 25. Registers are written with torque off and
//! Lock 0 (EEPROM writes kept, as the SDK's `unLockEprom` and LeRobot's `disable_torque` do),
//! then Lock 1 (as LeRobot's `enable_torque` leaves it).

use super::calibration;
use super::codec::{self as ft, Fault, Series, reg};
use crate::backend::servo_registers::{Mismatch, ServoRegisters};
use crate::backend::servo_setup::{Place, Scan, ServoTable, Setting};

const fn byte(address: u8) -> Place {
    Place::whole(address as u16, 1)
}

const fn word(address: u8) -> Place {
    Place::whole(address as u16, 2)
}

pub const RETURN_DELAY_TIME: Setting = Setting {
    key: "servo.return_delay_time",
    register: "Return_Delay_Time",
    place: byte(reg::RETURN_DELAY),
    // 2 µs units (LeRobot writes 0, the factory 250).
    range: (0, 254),
};
pub const MAXIMUM_ACCELERATION: Setting = Setting {
    key: "servo.maximum_acceleration",
    register: "Maximum_Acceleration",
    place: byte(85),
    range: (0, 254),
};
/// RAM: lost when the servo loses power (see [`super::drive`], which writes it at every enable).
pub const ACCELERATION: Setting = Setting {
    key: "servo.acceleration",
    register: "Acceleration",
    place: byte(reg::ACCELERATION),
    // 100 counts/s² units (0: no ramp).
    range: (0, 254),
};
pub const ANGLE_FEEDBACK_MODE: Setting = Setting {
    key: "servo.angle_feedback_mode",
    register: "Phase bit 4",
    place: Place {
        address: 18,
        len: 1,
        mask: 0x10,
        shift: 4,
    },
    range: (0, 1),
};
pub const OPERATING_MODE: Setting = Setting {
    key: "servo.operating_mode",
    register: "Operating_Mode",
    place: byte(33),
    range: (0, 255),
};
pub const P_COEFFICIENT: Setting = Setting {
    key: "servo.p_coefficient",
    register: "P_Coefficient",
    place: byte(21),
    range: (0, 255),
};
pub const I_COEFFICIENT: Setting = Setting {
    key: "servo.i_coefficient",
    register: "I_Coefficient",
    place: byte(23),
    range: (0, 255),
};
pub const D_COEFFICIENT: Setting = Setting {
    key: "servo.d_coefficient",
    register: "D_Coefficient",
    place: byte(22),
    range: (0, 255),
};
pub const MAX_TORQUE_LIMIT: Setting = Setting {
    key: "servo.max_torque_limit",
    register: "Max_Torque_Limit",
    place: word(16),
    // 0.1 % of the stall torque.
    range: (0, 1000),
};
pub const PROTECTION_CURRENT: Setting = Setting {
    key: "servo.protection_current",
    register: "Protection_Current",
    place: word(28),
    range: (0, u16::MAX as u32),
};
pub const OVERLOAD_TORQUE: Setting = Setting {
    key: "servo.overload_torque",
    register: "Overload_Torque",
    place: byte(36),
    // % of the stall torque.
    range: (0, 100),
};

/// In the order they are written (LeRobot's).
pub static SETTINGS: [Setting; 11] = [
    RETURN_DELAY_TIME,
    MAXIMUM_ACCELERATION,
    ACCELERATION,
    ANGLE_FEEDBACK_MODE,
    OPERATING_MODE,
    P_COEFFICIENT,
    I_COEFFICIENT,
    D_COEFFICIENT,
    MAX_TORQUE_LIMIT,
    PROTECTION_CURRENT,
    OVERLOAD_TORQUE,
];

/// Settings STS servos have and SCS servos lack: LeRobot's `SCS_SERIES_CONTROL_TABLE` has no
/// Operating_Mode, Protection_Current, Overload_Torque or Maximum_Acceleration, and LeRobot
/// changes the Phase bit on the STS3215 only.
const STS_ONLY: [&Setting; 5] = [
    &MAXIMUM_ACCELERATION,
    &ANGLE_FEEDBACK_MODE,
    &OPERATING_MODE,
    &PROTECTION_CURRENT,
    &OVERLOAD_TORQUE,
];

/// Before a servo's registers are written: torque off, then Lock 0 (per series, in
/// [`Series`]' order).
static UNLOCK: [[(&str, u16, u8); 2]; 2] = [
    [
        ("Torque_Enable 0", reg::TORQUE_ENABLE as u16, 0),
        ("Lock 0", Series::Sts.lock() as u16, 0),
    ],
    [
        ("Torque_Enable 0", reg::TORQUE_ENABLE as u16, 0),
        ("Lock 0", Series::Scs.lock() as u16, 0),
    ],
];

/// After: Lock 1.
static RELOCK: [[(&str, u16, u8); 1]; 2] = [
    [("Lock 1", Series::Sts.lock() as u16, 1)],
    [("Lock 1", Series::Scs.lock() as u16, 1)],
];

impl ServoTable for Series {
    fn family(&self) -> &'static str {
        match self {
            Series::Sts => "feetech",
            Series::Scs => "feetech_scs",
        }
    }

    fn settings(&self) -> &'static [Setting] {
        &SETTINGS
    }

    fn has(&self, setting: &Setting) -> bool {
        *self == Series::Sts || !STS_ONLY.contains(&setting)
    }

    fn lacking(&self, setting: &Setting) -> String {
        format!(
            "{} servos have no {}: remove the key (or use protocol `feetech` for STS/SMS servos)",
            self.family(),
            setting.register
        )
    }

    /// motiond commands positions only.
    fn refuses(&self, setting: &Setting, value: u32) -> Option<String> {
        (*setting == OPERATING_MODE && value != 0).then(|| {
            format!(
                "motiond commands positions only: Operating_Mode must be 0 (position) or \
                 `keep`, got {value}"
            )
        })
    }

    fn lerobot(&self, setting: &Setting, motor: &str) -> Option<u32> {
        let sts = *self == Series::Sts;
        let gripper = motor == "gripper";
        match *setting {
            RETURN_DELAY_TIME => Some(0),
            ACCELERATION => Some(254),
            // The SO followers' `configure` (STS3215 arms).
            MAXIMUM_ACCELERATION if sts => Some(254),
            OPERATING_MODE | I_COEFFICIENT | ANGLE_FEEDBACK_MODE if sts => Some(0),
            P_COEFFICIENT if sts => Some(16),
            D_COEFFICIENT if sts => Some(32),
            MAX_TORQUE_LIMIT if sts && gripper => Some(500),
            PROTECTION_CURRENT if sts && gripper => Some(250),
            OVERLOAD_TORQUE if sts && gripper => Some(25),
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
        let mut buf = [0u8; 8];
        let n = ft::read(&mut buf, id, address as u8, len);
        out.extend_from_slice(buf.get(..n).unwrap_or_default());
    }

    fn write(&self, out: &mut Vec<u8>, id: u8, address: u16, data: &[u8]) {
        let mut buf = [0u8; 16];
        let n = ft::write(&mut buf, id, address as u8, data);
        out.extend_from_slice(buf.get(..n).unwrap_or_default());
    }

    fn scan(&self, input: &[u8]) -> Scan {
        match ft::scan(input) {
            ft::Scan::Status {
                id,
                error,
                params,
                len,
            } => Scan::Status {
                id,
                error,
                params: params.to_vec(),
                len,
            },
            ft::Scan::Corrupt { len } | ft::Scan::Skip(len) => Scan::Drop(len),
            ft::Scan::More => Scan::More,
        }
    }

    fn refusal(&self, error: u8) -> Option<String> {
        let faults: Vec<&str> = Fault::of(error).map(Fault::as_str).collect();
        (!faults.is_empty()).then(|| faults.join(", "))
    }

    fn decode(&self, bytes: &[u8]) -> u32 {
        match *bytes {
            [b] => u32::from(b),
            [a, b] => u32::from(self.unword([a, b])),
            _ => 0,
        }
    }

    fn encode(&self, value: u32, len: u8) -> Vec<u8> {
        if len == 1 {
            vec![value as u8]
        } else {
            self.word(value as u16).to_vec()
        }
    }

    fn unlock(&self) -> &'static [(&'static str, u16, u8)] {
        &UNLOCK[*self as usize]
    }

    fn relock(&self) -> &'static [(&'static str, u16, u8)] {
        &RELOCK[*self as usize]
    }

    fn calibration_blocks(&self) -> &'static [(u16, u8)] {
        &[(calibration::ADDRESS as u16, calibration::LEN)]
    }

    fn check_calibration(
        &self,
        motor: &ServoRegisters,
        blocks: &[Vec<u8>],
    ) -> Result<(), Mismatch> {
        calibration::check(*self, motor, blocks.first().map_or(&[][..], Vec::as_slice))
    }
}
