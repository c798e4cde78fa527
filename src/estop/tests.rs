//! The debounce as a property against a reference model, and the simulated input.

use std::time::Duration;

use proptest::prelude::*;

use super::*;

#[test]
fn polls_for_rounds_up_and_zero_is_immediate() {
    assert_eq!(Debounce::polls_for(Duration::from_millis(10), 1000.0), 10);
    assert_eq!(Debounce::polls_for(Duration::from_millis(10), 250.0), 3);
    assert_eq!(Debounce::polls_for(Duration::from_micros(2500), 1000.0), 3);
    assert_eq!(Debounce::polls_for(Duration::ZERO, 1000.0), 0);
    assert_eq!(Debounce::polls_for(Duration::from_millis(1), 8000.0), 8);
    assert_eq!(
        Debounce::polls_for(Duration::from_secs(1_000_000), 8000.0),
        u32::MAX
    );
}

#[test]
fn a_level_counts_once_it_has_held_for_the_debounce_time() {
    let mut d = Debounce::new(3, false);
    // A bounce shorter than the debounce time never gets through.
    for raw in [true, true, false, true, true, true, false] {
        assert!(!d.update(raw));
    }
    // Seen at the first poll and at 3 more: asserted at the fourth.
    assert!(!d.update(true));
    assert!(!d.update(true));
    assert!(!d.update(true));
    assert!(d.update(true));
    assert!(d.state());
    // Releasing debounces the same way.
    for _ in 0..3 {
        assert!(d.update(false));
    }
    assert!(!d.update(false));
    let mut now = Debounce::new(0, false);
    assert!(now.update(true));
    assert!(!now.update(false));
}

/// The level a debounce with `polls` reports after each reading: the last value that was seen
/// `polls + 1` times in a row.
fn model(polls: u32, initial: bool, raw: &[bool]) -> Vec<bool> {
    let mut state = initial;
    let need = polls as usize + 1;
    (0..raw.len())
        .map(|i| {
            if i + 1 >= need && raw[i + 1 - need..=i].iter().all(|&r| r == raw[i]) {
                state = raw[i];
            }
            state
        })
        .collect()
}

proptest! {
    #[test]
    fn debounce_matches_its_definition(
        polls in 0u32..6,
        initial in any::<bool>(),
        raw in proptest::collection::vec(any::<bool>(), 0..200),
    ) {
        let mut d = Debounce::new(polls, initial);
        let got: Vec<bool> = raw.iter().map(|&r| d.update(r)).collect();
        prop_assert_eq!(got, model(polls, initial, &raw));
    }

    /// However the input bounces, a level held for the debounce time always gets through.
    #[test]
    fn a_held_level_always_gets_through(
        polls in 0u32..6,
        bounces in proptest::collection::vec(any::<bool>(), 0..50),
        level in any::<bool>(),
    ) {
        let mut d = Debounce::new(polls, !level);
        for raw in bounces {
            d.update(raw);
        }
        let reached = (0..=polls).map(|_| d.update(level)).last();
        prop_assert_eq!(reached, Some(level));
    }
}

#[test]
fn the_simulated_switch_is_debounced_and_a_lost_line_is_an_error() {
    let (mut input, switch) = SimInput::new(2);
    assert_eq!(input.asserted(), Ok(false));
    switch.press();
    assert_eq!(input.asserted(), Ok(false));
    assert_eq!(input.asserted(), Ok(false));
    assert_eq!(input.asserted(), Ok(true));
    switch.lose_line();
    let err = input.asserted().unwrap_err();
    assert_eq!(err, EStopError::LineLost(libc::ENODEV));
    assert!(err.to_string().contains("treated as asserted"), "{err}");
    switch.release();
    assert_eq!(input.asserted(), Ok(true));
    assert_eq!(input.asserted(), Ok(true));
    assert_eq!(input.asserted(), Ok(false));
}

#[test]
fn no_gpio_line_configured_opens_nothing() {
    let settings = EStopSettings {
        gpio: None,
        debounce: Duration::from_millis(10),
        drive: true,
    };
    assert!(open(&settings, 1000.0).unwrap().is_none());
}

#[test]
fn open_errors_name_the_chip_and_say_what_to_do() {
    let line = |chip: &str, line| crate::config::GpioLine {
        chip: chip.into(),
        line,
        active: crate::config::ActiveLevel::Low,
    };
    let err = GpioInput::open(
        &line("/dev/gpiochip-motiond-none", 3),
        Duration::ZERO,
        1000.0,
    )
    .unwrap_err();
    assert!(matches!(err, OpenError::NoChip { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("/dev/gpiochip-motiond-none: no such GPIO chip")
    );
    // A file that exists but is no character device.
    let err = GpioInput::open(&line("/proc/self/status", 0), Duration::ZERO, 1000.0).unwrap_err();
    assert!(matches!(err, OpenError::NotAChip { .. }), "{err:?}");
    assert!(err.to_string().contains("not a character device"), "{err}");
}
