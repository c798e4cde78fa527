//! The model dispatcher on arbitrary text: the root element picks the reader (SKEL, URDF, SDF,
//! XODE); whichever it is must return a model or a positioned refusal, never panic or hang.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = motiond::robot::parse(
        text,
        Path::new("fuzz.xml"),
        &motiond::robot::Options::default(),
    );
});
