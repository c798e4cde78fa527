//! Motions: timed joint positions read from files. [`seq`] reads and writes Choreonoid .seq
//! files (fixed-rate or variable-interval) into a [`Motion`]; [`take`] keeps a teach-in
//! recording on disk as it is recorded.

pub mod seq;
pub mod take;

pub use seq::Motion;
