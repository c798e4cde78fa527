//! Motions: timed joint positions read from files. [`seq`] reads and writes Choreonoid .seq
//! files (fixed-rate or variable-interval) into a [`Motion`]; [`lerobot`] reads an episode of a
//! LeRobot dataset as joint positions for a robot; [`take`] keeps a teach-in recording on disk
//! as it is recorded.

pub mod lerobot;
pub mod seq;
pub mod take;

pub use seq::Motion;
