//! Feetech STS/SCS serial servos (the SO-100/SO-101 arms' STS3215): the packet codec
//! ([`codec`]). The drive itself (settings, enable, faults, teach-in) comes on the drive-family
//! layer.
//!
//! These servos have no communication watchdog: a servo that hears nothing keeps holding its
//! last goal position with torque on, whatever happened to the host.
//!
//! The bus budget ([`codec::tick_bytes`]) at 1 Mbit/s, 10 bits a byte, with the bus's default
//! maximum load of 70 %: an STS tick (Sync Write of Goal_Position, Sync Read of
//! Present_Position and one status packet a servo) is 16 + 12·n bytes, 160 + 120·n µs, plus the
//! servos' Return_Delay_Time (2 µs units) once a servo. With a return delay of 0 (what LeRobot
//! writes) 57 servos fit at 100 Hz, 22 at 250 Hz and 10 at 500 Hz; with the factory 250
//! (500 µs) 11, 4 and 2. The SO-101's six take 880 µs a tick: 500 Hz fits (44 %), 1 kHz does not
//! (88 %). SCS servos have no Sync Read: 8 + 19·n bytes a tick (36, 14 and 6 servos), and each
//! servo's Read is a round trip through the USB adapter, whose latency then dominates.

pub mod codec;
