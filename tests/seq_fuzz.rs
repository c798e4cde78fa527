//! Mutated corpus files: no reader panics, and the two readers agree wherever the fast one answers.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

mod common;

use std::path::Path;

use motiond::motion::seq;
use proptest::prelude::*;

/// The head of a corpus file (its headers and first rows), cut at a line end; small enough to keep
/// the general reader quick in debug builds.
fn heads() -> Vec<String> {
    let Some(dir) = common::corpus() else {
        return Vec::new();
    };
    [
        "v2/SR1WalkPattern2.seq",
        "v1/SR1WalkPattern2.yaml",
        "timed/SR1WalkPattern3-irregular.seq",
    ]
    .iter()
    .map(|rel| {
        let text = std::fs::read_to_string(dir.join("seq").join(rel)).unwrap();
        let cut = text[..6000].rfind('\n').unwrap();
        text[..cut + 1].to_owned()
    })
    .collect()
}

fn agree(text: &str) {
    let path = Path::new("mutated.seq");
    let general = seq::parse_general(text, path).map_err(|e| e.to_string());
    if let Some(fast) = seq::parse_fast(text, path) {
        assert_eq!(fast.map_err(|e| e.to_string()), general, "{text}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn mutated_corpus_heads(
        which in 0usize..3,
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        truncate in any::<prop::sample::Index>(),
    ) {
        let heads = heads();
        let Some(head) = heads.get(which) else { return Ok(()) };
        let mut bytes = head.clone().into_bytes();
        for (at, b) in edits {
            let i = at.index(bytes.len());
            bytes[i] = b;
        }
        let keep = truncate.index(bytes.len()) + bytes.len() / 2;
        bytes.truncate(keep.min(bytes.len()));
        agree(&String::from_utf8_lossy(&bytes));
    }
}
