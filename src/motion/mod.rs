//! Motion formats: LeRobot datasets in ([`lerobot`]).

pub mod lerobot;
