//! The configuration on arbitrary text: a `Config` or refusals that each point inside the text.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use motiond::config::{Config, Error};

fuzz_target!(|text: &str| {
    if let Err(Error::Invalid(problems)) = Config::parse(text, Path::new("fuzz.yaml")) {
        // Lines as YAML counts them: a lone CR ends a line too (str::lines would not split it).
        let breaks = text.replace("\r\n", "\n").matches(['\n', '\r']).count();
        let lines = u32::try_from(breaks + 1).unwrap_or(u32::MAX);
        for problem in problems.iter() {
            assert!(problem.line >= 1 && problem.line <= lines.saturating_add(1), "{problem}");
            assert!(problem.col >= 1, "{problem}");
        }
    }
});
