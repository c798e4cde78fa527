//! The SKEL reader on arbitrary text: a model or a positioned refusal, never a panic or a hang.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = motiond::robot::skel::parse(text, Path::new("fuzz.skel"));
});
