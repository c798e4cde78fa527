//! The table of configuration keys (`motiond::config::keys::KEYS`), which the manual page
//! motiond.yaml(5) is generated from, is the one the book shows and names exactly the keys the
//! parser takes: a key added to the parser and not to the table (or the other way round) fails
//! here.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use motiond::config::keys::{KEYS, Key};
use motiond::config::{Config, Error};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The table row the book shows for a key.
fn row(k: &Key) -> String {
    format!("| `{}` | {} | {} |", k.path, k.default, k.meaning)
}

#[test]
fn the_book_shows_the_table_of_keys() {
    let page = std::fs::read_to_string(root().join("docs/src/configuration.md")).unwrap();
    let shown: Vec<&str> = page.lines().filter(|l| l.starts_with("| `")).collect();
    let table: Vec<String> = KEYS.iter().map(row).collect();
    assert_eq!(
        shown,
        table,
        "docs/src/configuration.md's table differs from motiond::config::keys::KEYS; the table \
         from KEYS is:\n{}",
        table.join("\n")
    );
}

/// What the parser says it expects under `parent` when it finds an unknown key there.
fn expected_keys(yaml: &str) -> BTreeSet<String> {
    let err = match Config::parse(yaml, Path::new("k.yaml")) {
        Err(Error::Invalid(d)) => d.to_string(),
        other => panic!("{yaml}: no refusal: {other:?}"),
    };
    let line = err
        .lines()
        .find(|l| l.contains("zzz"))
        .unwrap_or_else(|| panic!("{yaml}: {err}"));
    let list = line
        .split_once("expected ")
        .unwrap_or_else(|| panic!("{line}"))
        .1;
    let list = list.strip_prefix("one of").unwrap_or(list);
    list.trim_start_matches([':', ' '])
        .trim_end_matches(')')
        .split(", ")
        .map(|k| k.trim().trim_matches('`').to_string())
        .collect()
}

/// The table's keys directly under `parent` (a prefix such as `robot.`).
fn documented(parent: &str) -> BTreeSet<String> {
    KEYS.iter()
        .filter_map(|k| k.path.strip_prefix(parent))
        .map(|rest| rest.split('.').next().unwrap().to_string())
        .collect()
}

#[test]
fn the_table_names_exactly_the_keys_the_parser_takes() {
    let cases = [
        ("", "zzz: 1\n"),
        ("robot.", "robot: {model: a.skel, zzz: 1}\n"),
        (
            "robot.limits.<dof>.",
            "robot: {model: a.skel, limits: {j: {zzz: 1}}}\n",
        ),
        ("motion.", "robot: {model: a.skel}\nmotion: {zzz: 1}\n"),
        ("control.", "robot: {model: a.skel}\ncontrol: {zzz: 1}\n"),
        ("rt.", "robot: {model: a.skel}\nrt: {zzz: 1}\n"),
        ("sim.", "robot: {model: a.skel}\nsim: {zzz: 1}\n"),
        ("daemon.", "robot: {model: a.skel}\ndaemon: {zzz: 1}\n"),
        ("estop.", "robot: {model: a.skel}\nestop: {zzz: 1}\n"),
        ("recorder.", "robot: {model: a.skel}\nrecorder: {zzz: 1}\n"),
    ];
    for (parent, yaml) in cases {
        let table: BTreeSet<String> = if parent.is_empty() {
            KEYS.iter()
                .map(|k| k.path.split('.').next().unwrap().to_string())
                .collect()
        } else {
            documented(parent)
        };
        assert_eq!(
            expected_keys(yaml),
            table,
            "keys under `{parent}`: the parser's (left) and motiond::config::keys::KEYS' (right)"
        );
    }
}
