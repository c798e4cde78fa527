//! Motions: timed joint positions read from files. [`seq`] reads and writes Choreonoid .seq
//! files (fixed-rate or variable-interval) into a [`Motion`]; [`lerobot`] reads an episode of a
//! LeRobot dataset as joint positions for a robot.

pub mod lerobot;
pub mod seq;

pub use seq::Motion;
