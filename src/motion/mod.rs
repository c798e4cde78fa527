//! Motions: timed joint positions read from files. [`seq`] reads and writes Choreonoid .seq
//! files (fixed-rate or variable-interval) into a [`Motion`].

pub mod seq;

pub use seq::Motion;
