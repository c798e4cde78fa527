//! motiond: plays recorded robot motions on motors.
//!
//! The data flows through one module per concern:
//! SKEL file → [`skel`] → `World`; .seq file → [`seq`] → `Motion`; both → [`trajectory`] →
//! limit-proved `Trajectory`; [`rt`] plays it tick by tick on a [`backend`] (simulated, CAN or
//! serial); [`control`] takes operators' requests over a Unix socket; [`config`] turns the YAML
//! configuration into validated settings;
//! [`estop`] reads the E-stop input the loop polls.

pub mod backend;
pub mod config;
pub mod control;
pub mod diag;
pub mod estop;
pub mod hint;
pub mod model;
pub mod motion;
pub mod plot;
pub mod rt;
pub mod sdf;
pub mod seq;
pub mod session;
pub mod skel;
pub mod trajectory;
pub mod urdf;
pub mod xode;
