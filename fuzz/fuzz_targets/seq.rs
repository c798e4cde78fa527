//! The .seq readers on arbitrary text: `parse` never panics or hangs, and wherever the fast
//! scanner answers it gives the same motion, or the same errors at the same positions, as the
//! general reader (the semantic layer is shared, so a disagreement is a reader bug).
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use motiond::motion::seq;

fuzz_target!(|text: &str| {
    let path = Path::new("fuzz.seq");
    let general = seq::parse_general(text, path).map_err(|e| e.to_string());
    if let Some(fast) = seq::parse_fast(text, path) {
        assert_eq!(fast.map_err(|e| e.to_string()), general, "readers disagree");
    }
    let _ = seq::parse(text, path);
});
