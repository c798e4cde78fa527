//! The bus tests' rig, written once: a `buses:` section from YAML (and what the configuration
//! refuses of it), one CAN bus whose drives sit on the far end of an in-memory link, its enable
//! stepped with the peer answering between ticks, and the real-time loop over a backend, stepped
//! on a manual clock (no threads: a test steps the loop and its peers in turn).

use motiond::backend::bus::check::check_joints;
use motiond::backend::bus::settings::BusSettings;
use motiond::backend::bus::{BusBackend, can_bus};
use motiond::backend::transport::memory::{MemoryIo, memory_pair};
use motiond::backend::{Backend, Readiness};
use motiond::config::bus::{RawBus, validate};
use motiond::rt::{Loop, LoopHandle, ManualClock, Settings};
use motiond::trajectory::JointSet;

/// The buses of `yaml` (a `buses:` list) for `joints`, validated at `rate_hz`.
pub fn buses(yaml: &str, joints: &JointSet, rate_hz: f64) -> Vec<BusSettings> {
    let raw: Vec<RawBus> = serde_yaml::from_str(yaml).unwrap();
    let names: Vec<&str> = joints.dofs.iter().map(|d| d.name.as_str()).collect();
    validate(&raw, &names, rate_hz).unwrap()
}

/// The first bus of `yaml` for `joints`, validated at `rate_hz` and passing the joint check the
/// daemon runs at start (a rig the daemon would refuse tests nothing).
pub fn bus(yaml: &str, joints: &JointSet, rate_hz: f64) -> BusSettings {
    let mut buses = buses(yaml, joints, rate_hz);
    let refused = check_joints(&buses, joints);
    assert!(
        refused.is_empty(),
        "the joint check refuses the rig: {refused:?}"
    );
    buses.remove(0)
}

/// What validating `yaml` at `rate_hz` and then the joint check refuse: a `key: message` line
/// each (empty when the daemon would start with it).
pub fn problems(yaml: &str, joints: &JointSet, rate_hz: f64) -> String {
    let raw: Vec<RawBus> = serde_yaml::from_str(yaml).unwrap();
    let names: Vec<&str> = joints.dofs.iter().map(|d| d.name.as_str()).collect();
    let problems = match validate(&raw, &names, rate_hz) {
        Ok(buses) => check_joints(&buses, joints),
        Err(p) => p,
    };
    problems
        .iter()
        .map(|p| format!("{}: {}\n", p.key, p.message))
        .collect()
}

/// The first bus of `yaml` (`bus`), a CAN bus, as the backend, on an in-memory link that holds
/// `queue` frames each way; and the drives' end of that link.
pub fn can_backend(
    yaml: &str,
    joints: &JointSet,
    rate_hz: f64,
    queue: usize,
) -> (BusBackend, MemoryIo) {
    let (host, drives) = memory_pair(queue);
    let backend = BusBackend::new(vec![Box::new(can_bus(
        &bus(yaml, joints, rate_hz),
        joints,
        rate_hz,
        Box::new(host),
    ))]);
    (backend, drives)
}

/// Steps `enable` until the backend is ready, `peer` answering between ticks; the ticks it took.
pub fn enable(b: &mut BusBackend, mut peer: impl FnMut(), max_ticks: usize) -> usize {
    for tick in 0..max_ticks {
        if b.enable().unwrap() == Readiness::Ready {
            return tick;
        }
        peer();
    }
    panic!("not ready after {max_ticks} ticks");
}

/// The loop with default settings (1 kHz) over `backend`, on a manual clock at 0: each
/// `step()` runs the next tick.
pub fn stepped_loop(
    backend: impl Backend + 'static,
    joints: &JointSet,
) -> (Loop<ManualClock>, LoopHandle) {
    Loop::new(
        &Settings::default(),
        Box::new(backend),
        None,
        joints,
        ManualClock::new(0),
    )
    .unwrap()
}
