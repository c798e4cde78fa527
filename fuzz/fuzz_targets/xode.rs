//! The xode reader on arbitrary text: it must return a model or a positioned refusal, never panic
//! or hang.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = motiond::robot::parse_as(
        motiond::robot::Format::Xode,
        text,
        Path::new("fuzz.xode"),
        &motiond::robot::Options::default(),
    );
});
