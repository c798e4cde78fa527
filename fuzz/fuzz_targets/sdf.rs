//! The sdf reader on arbitrary text: it must return a model or a positioned refusal, never panic
//! or hang.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = motiond::model::parse_as(
        motiond::model::Format::Sdf,
        text,
        Path::new("fuzz.sdf"),
        &motiond::model::Options::default(),
    );
});
