//! Polling an E-stop input, as the loop does once a tick, allocates nothing: a counting allocator
//! watches the polling thread through presses, bounces, releases and a lost line.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use motiond::estop::{Debounce, EStopInput, SimInput};

struct Counting;

thread_local! {
    static WATCHING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; only counts on the side.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if WATCHING.with(Cell::get) {
            ALLOCATIONS.with(|a| a.set(a.get() + 1));
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if WATCHING.with(Cell::get) {
            ALLOCATIONS.with(|a| a.set(a.get() + 1));
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

#[test]
fn polling_allocates_nothing() {
    let (input, switch) = SimInput::new(3);
    // The loop holds the input as a trait object.
    let mut input: Box<dyn EStopInput> = Box::new(input);
    let mut debounce = Debounce::new(2, false);
    let mut asserted = 0;
    ALLOCATIONS.with(|a| a.set(0));
    WATCHING.with(|w| w.set(true));
    for tick in 0..2000u32 {
        match tick % 400 {
            0 => switch.press(),
            5 | 7 => switch.release(),
            6 | 8 => switch.press(),
            200 => switch.release(),
            300 => switch.lose_line(),
            310 => switch.release(),
            _ => {}
        }
        // A lost line counts as asserted (the error is Copy and carries no text).
        if input.asserted().unwrap_or(true) {
            asserted += 1;
        }
        debounce.update(tick % 3 == 0);
    }
    WATCHING.with(|w| w.set(false));
    assert_eq!(ALLOCATIONS.with(Cell::get), 0);
    assert!(asserted > 0);
}
