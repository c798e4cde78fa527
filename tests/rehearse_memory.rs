//! A rehearsal's memory does not grow with its script beyond the report's text: 20000 `status`
//! steps took 660 MB when every reply was kept parsed (a JSON tree is ten times its text) and the
//! report was formatted whole before it was printed. Measured by a counting allocator, so the
//! figure is the same on every run and machine.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use motiond::rehearse::{Rehearsal, Script};
use motiond::session::{Robot, RobotSpec};

/// Counts the bytes live and the most ever live at once.
struct Peak;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; the counters only observe.
unsafe impl GlobalAlloc for Peak {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(live, Ordering::Relaxed);
        // SAFETY: the caller's layout is passed on as given.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` came from `alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Peak = Peak;

/// The most bytes live at once while `steps` status requests, 1 ms apart, are rehearsed on the
/// demo arm and the report is written out (text and JSON).
fn peak_of(steps: usize) -> usize {
    let spec = RobotSpec {
        config: Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("config/motiond.yaml")),
        ..RobotSpec::default()
    };
    let robot = Robot::load(&spec).unwrap().unwrap();
    let mut text = String::from("steps:\n");
    for i in 0..steps {
        text.push_str(&format!(
            "- {{at: {}, request: {{cmd: status}}}}\n",
            i as f64 / 1000.0
        ));
    }
    let script = Script::parse(&text, Path::new("status.yaml"), &robot.joints).unwrap();
    drop(text);
    let joints = robot.joints.clone();
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let report = Rehearsal::new(robot, script).unwrap().run();
    report.write_text(&joints, &mut std::io::sink()).unwrap();
    report.write_json(&joints, &mut std::io::sink()).unwrap();
    assert_eq!(report.steps.len(), steps);
    assert!(report.steps.iter().all(|s| s.reply.is_some()));
    PEAK.load(Ordering::Relaxed) - base
}

#[test]
fn memory_per_step_is_about_the_reply_text() {
    let (few, many) = (200, 1000);
    let per_step = (peak_of(many).saturating_sub(peak_of(few))) / (many - few);
    // A status reply of the demo arm is about 1.3 KB of text; parsed it was over 10 KB.
    assert!(
        per_step < 4096,
        "{per_step} bytes per status step (the report keeps each reply as text)"
    );
}
