//! motiond: plays recorded robot motions on motors.
//!
//! The data flows through one module per concern:
//! robot model file (SKEL, URDF, SDF, XODE) → [`robot`] → `World`; .seq file → [`motion`] →
//! `Motion` (a LeRobot episode → [`motion::lerobot`] → .seq); both → [`trajectory`] →
//! limit-proved `Trajectory`; [`rt`] plays it tick by tick on a
//! [`backend`] (simulated, CAN or serial); [`session`] orchestrates load → prove → play;
//! [`daemon`] takes operators' requests over a Unix socket; [`config`] turns the YAML
//! configuration into validated settings; [`estop`] reads the E-stop input the loop polls;
//! [`doctor`] says whether the machine is ready for the loop; [`recorder`] writes the loop's last
//! seconds as MCAP when something goes wrong.
//! [`rehearse`] plays an operator session against the daemon offline, tick by tick; [`manual`]
//! renders the manual pages; [`file`] reads an input file whole, refusing a FIFO or a device.

pub mod backend;
pub mod config;
pub mod daemon;
pub mod diag;
pub mod doctor;
pub mod estop;
pub mod file;
pub mod manual;
pub mod motion;
pub mod recorder;
pub mod rehearse;
pub mod robot;
pub mod rt;
pub mod session;
pub mod trajectory;
