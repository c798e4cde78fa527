//! The configuration parser never panics, whatever it is given, and places every problem inside
//! the file.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

use std::path::Path;

use motiond::config::{self, Config, Error};
use proptest::prelude::*;

const SHIPPED: &str = include_str!("../config/motiond.yaml");

/// Parses and checks that every diagnostic points at a line of the text (or just past its end).
fn parse_checked(text: &str) -> Result<Config, Error> {
    let result = Config::parse(text, Path::new("fuzz.yaml"));
    if let Err(Error::Invalid(d)) = &result {
        assert!(!d.is_empty());
        let lines = u32::try_from(text.lines().count()).unwrap_or(u32::MAX);
        for diag in d.iter() {
            assert!(
                diag.line >= 1 && diag.line <= lines + 1,
                "{diag} in\n{text}"
            );
            assert!(diag.col >= 1, "{diag}");
        }
    }
    result
}

/// Text edits that keep the document mostly YAML-shaped, so the validator (not only the YAML
/// syntax check) is exercised.
#[derive(Debug, Clone)]
enum Edit {
    Delete { at: usize, len: usize },
    Insert { at: usize, text: String },
    ReplaceValue { line: usize, value: String },
}

fn edit() -> impl Strategy<Value = Edit> {
    let token = prop_oneof![
        Just(".nan".to_owned()),
        Just("-.inf".to_owned()),
        Just("1e400".to_owned()),
        Just("-0".to_owned()),
        Just("[]".to_owned()),
        Just("{}".to_owned()),
        Just("[1, 2, 3]".to_owned()),
        Just("~".to_owned()),
        Just("&a x".to_owned()),
        Just("*a".to_owned()),
        Just("!tag 3".to_owned()),
        Just("\"\"".to_owned()),
        any::<f64>().prop_map(|f| f.to_string()),
        any::<i64>().prop_map(|i| i.to_string()),
        "[a-z_:{}\\[\\], \\n-]{0,12}",
    ];
    prop_oneof![
        (any::<usize>(), 0usize..20).prop_map(|(at, len)| Edit::Delete { at, len }),
        (any::<usize>(), token.clone()).prop_map(|(at, text)| Edit::Insert { at, text }),
        (any::<usize>(), token).prop_map(|(line, value)| Edit::ReplaceValue { line, value }),
    ]
}

fn apply(text: &str, edit: &Edit) -> String {
    match edit {
        Edit::Delete { at, len } => {
            let chars: Vec<char> = text.chars().collect();
            let at = at % chars.len().max(1);
            let end = (at + len).min(chars.len());
            chars[..at].iter().chain(&chars[end..]).collect()
        }
        Edit::Insert { at, text: insert } => {
            let chars: Vec<char> = text.chars().collect();
            let at = at % (chars.len() + 1);
            let mut out: String = chars[..at].iter().collect();
            out.push_str(insert);
            out.extend(&chars[at..]);
            out
        }
        Edit::ReplaceValue { line, value } => {
            let lines: Vec<&str> = text.lines().collect();
            let target = line % lines.len().max(1);
            lines
                .iter()
                .enumerate()
                .map(|(i, l)| match l.split_once(": ") {
                    Some((key, _)) if i == target => format!("{key}: {value}\n"),
                    _ => format!("{l}\n"),
                })
                .collect()
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = parse_checked(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn mutated_shipped_config_never_panics(edits in proptest::collection::vec(edit(), 1..4)) {
        let text = edits.iter().fold(SHIPPED.to_owned(), |t, e| apply(&t, e));
        let _ = parse_checked(&text);
    }

    #[test]
    fn rate_is_accepted_exactly_inside_its_range(rate in prop_oneof![
        any::<f64>(),
        0.0f64..10_000.0,
        Just(f64::NAN),
        Just(f64::INFINITY),
    ]) {
        let text = format!("robot: {{skel: a.skel}}\ncontrol: {{rate_hz: {rate:?}}}\n");
        let text = text.replace("NaN", ".nan").replace("inf", ".inf");
        let result = parse_checked(&text);
        prop_assert_eq!(result.is_ok(), config::RATE_HZ_RANGE.contains(&rate), "{}", text);
        if let Ok(c) = result {
            // Duration resolves nanoseconds.
            let period = c.control.period.as_secs_f64();
            prop_assert!((period - 1.0 / rate).abs() <= 1e-9);
        }
    }
}
