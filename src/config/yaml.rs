//! Reading the YAML and wording what is wrong with it: syntax errors placed where serde_yaml
//! found them, nesting too deep to read, each top-level section deserialized on its own into its
//! [`raw`](super::raw) mirror with every unknown key and wrong type reported in people's words
//! (the key path, the value found, a "did you mean").

use std::path::Path;

use serde::de::DeserializeOwned;
use serde_yaml::Value;

use super::problems::Problems;
use super::raw::{RawConfig, SECTIONS};
use crate::diag::Diagnostic;

/// A YAML syntax error, placed where serde_yaml found it.
pub(crate) fn syntax(path: &Path, err: &serde_yaml::Error) -> Diagnostic {
    let mut message = err.to_string();
    let (line, col) = match err.location() {
        Some(loc) => {
            // The position is given as numbers; drop serde_yaml's prose copy of it.
            let suffix = format!(" at line {} column {}", loc.line(), loc.column());
            if let Some(cut) = message.find(&suffix) {
                message.replace_range(cut..cut + suffix.len(), "");
            }
            (to_u32(loc.line()), to_u32(loc.column()))
        }
        None => (1, 1),
    };
    let message = message.replace(" at line ", " starting at line ");
    let hint = yaml_hint(&message);
    Diagnostic::new(
        path,
        line.max(1),
        col.max(1),
        format!("YAML syntax error: {message}{hint}"),
    )
}

/// What usually causes a YAML syntax error, in words an operator acts on.
fn yaml_hint(message: &str) -> &'static str {
    const HINTS: &[(&str, &str)] = &[
        (
            "tab character",
            "; YAML indents with spaces only: replace the tab with spaces",
        ),
        (
            "did not find expected key",
            "; check this line's indentation against the lines above (each level indented by \
             the same number of spaces), and that every `[` and `{` is closed",
        ),
        (
            "mapping values are not allowed",
            "; a `key:` where none may start: check the indentation, or quote a value that holds \
             `: `",
        ),
        (
            "did not find expected ',' or ']'",
            "; a `[…]` list is not closed, or needs a comma",
        ),
        (
            "did not find expected ',' or '}'",
            "; a `{…}` mapping is not closed, or needs a comma",
        ),
        (
            "cannot start any token",
            "; quote the value (`@`, `` ` `` and `%` cannot start a plain one)",
        ),
        (
            "unexpected end of stream",
            "; a quote or bracket opened above is never closed",
        ),
        ("duplicate", "; give each key once"),
    ];
    HINTS
        .iter()
        .find(|(found, _)| message.contains(found))
        .map_or("", |(_, hint)| hint)
}

/// Flow collections (`[`, `{`) nested deeper than YAML's recursion limit would take libyaml time
/// quadratic in the depth before serde_yaml refuses them (minutes for a 300 KB file), so the
/// depth is measured first, in one pass. Quoted scalars and comments are skipped; a bracket inside
/// a plain scalar may count, which only matters past 64 unclosed ones.
pub(crate) fn too_deeply_nested(text: &str, path: &Path) -> Option<Diagnostic> {
    const MAX_DEPTH: usize = 64;
    let (mut depth, mut line, mut col) = (0usize, 1u32, 0u32);
    let mut quote: Option<char> = None;
    let mut comment = false;
    let mut prev = ' ';
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        col = col.saturating_add(1);
        if c == '\n' {
            (line, col, comment) = (line.saturating_add(1), 0, false);
        }
        match quote {
            _ if comment => {}
            Some(q) if c == q && q == '\'' && chars.peek() == Some(&'\'') => {
                // '' inside a single-quoted scalar is an escaped quote.
                chars.next();
                col = col.saturating_add(1);
            }
            Some('"') if c == '\\' && chars.peek() != Some(&'\n') => {
                chars.next();
                col = col.saturating_add(1);
            }
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None => match c {
                '\'' | '"' if matches!(prev, ' ' | '\t' | '\n' | '[' | '{' | ',' | ':' | '-') => {
                    quote = Some(c);
                }
                '#' if prev.is_whitespace() => comment = true,
                '[' | '{' => {
                    depth += 1;
                    if depth > MAX_DEPTH {
                        return Some(Diagnostic::new(
                            path,
                            line,
                            col,
                            format!(
                                "collections nested deeper than {MAX_DEPTH} levels; a \
                                 configuration needs a few (is this the right file?)"
                            ),
                        ));
                    }
                }
                ']' | '}' => depth = depth.saturating_sub(1),
                _ => {}
            },
        }
        prev = c;
    }
    None
}

fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

pub(super) fn read_sections(value: Value, p: &mut Problems) -> RawConfig {
    let mut raw = RawConfig::default();
    let map = match value {
        Value::Null => return raw,
        Value::Mapping(map) => map,
        other => {
            p.failed.extend(SECTIONS.map(String::from));
            p.value(
                "",
                format!(
                    "expected a mapping of sections ({}), found {}",
                    SECTIONS.join(", "),
                    describe(&other)
                ),
            );
            return raw;
        }
    };
    for (key, value) in map {
        let Some(name) = key.as_str() else {
            p.value(
                "",
                format!(
                    "unknown section {} (expected one of: {})",
                    describe(&key),
                    SECTIONS.join(", ")
                ),
            );
            continue;
        };
        match name {
            "robot" => section(name, value, p, &mut raw.robot),
            "motion" => section(name, value, p, &mut raw.motion),
            "control" => section(name, value, p, &mut raw.control),
            "rt" => section(name, value, p, &mut raw.rt),
            "backend" => section(name, value, p, &mut raw.backend),
            "sim" => section(name, value, p, &mut raw.sim),
            "buses" => section(name, value, p, &mut raw.buses),
            "daemon" => section(name, value, p, &mut raw.daemon),
            "groups" => section(name, value, p, &mut raw.groups),
            "estop" => section(name, value, p, &mut raw.estop),
            "recorder" => section(name, value, p, &mut raw.recorder),
            _ => p.key(
                name,
                format!(
                    "unknown section (expected one of: {}){}",
                    SECTIONS.join(", "),
                    closest(name, &SECTIONS)
                        .map(|near| format!("; did you mean `{near}`?"))
                        .unwrap_or_default()
                ),
            ),
        }
    }
    raw
}

/// Unknown keys one section may report before the reader stops looking for more.
const MAX_UNKNOWN_KEYS: usize = 64;

/// One step of a key path inside a section.
#[derive(PartialEq)]
enum Step {
    Key(String),
    Index(usize),
}

/// Deserializes one section into `slot`; an empty section (`rt:` with nothing under it) keeps
/// the defaults already there. serde stops at the first problem, so each unknown key and each value
/// of the wrong type is reported (in people's words), removed and the section read again: all of a
/// section's problems are reported together, and then the rest of it is validated as usual. A
/// problem that cannot be taken out (a missing required key, a bad list element) ends the section.
fn section<T: DeserializeOwned>(name: &str, mut value: Value, p: &mut Problems, slot: &mut T) {
    if value.is_null() {
        return;
    }
    // A value of the wrong type is reported and taken out like an unknown key, so the rest of
    // the section is still read and validated (the value taken out has its default, which is
    // valid): every problem of the file in one pass.
    let mut taken_out: Vec<String> = Vec::new();
    for _ in 0..=MAX_UNKNOWN_KEYS {
        let err = match serde_path_to_error::deserialize::<_, T>(value.clone()) {
            Ok(v) => {
                *slot = v;
                return;
            }
            Err(err) => err,
        };
        let mut steps = Vec::new();
        let mut complete = true;
        for segment in err.path().iter() {
            match segment {
                serde_path_to_error::Segment::Seq { index } => steps.push(Step::Index(*index)),
                serde_path_to_error::Segment::Map { key } => steps.push(Step::Key(key.clone())),
                serde_path_to_error::Segment::Enum { .. }
                | serde_path_to_error::Segment::Unknown => complete = false,
            }
        }
        let message = err.inner().to_string();
        let Some((field, expected)) = unknown_field(&message) else {
            let key = key_path(name, &steps);
            // A required value taken out for its type is missing now: already reported.
            let missing = message
                .strip_prefix("missing field `")
                .and_then(|rest| rest.split_once('`'))
                .map(|(f, _)| format!("{key}.{f}"));
            if missing.is_some_and(|m| taken_out.contains(&m) || p.unknown.contains(&m)) {
                break;
            }
            p.value(&key, humanize(&key, &message));
            // A missing required key cannot be taken out; anything else can.
            if message.starts_with("missing field") || !(complete && remove(&mut value, &steps)) {
                break;
            }
            // Its parent lost a key, as with an unknown one: no second complaint about it.
            p.unknown.push(key.clone());
            taken_out.push(key);
            continue;
        };
        // The path may or may not end with the unknown key itself.
        if steps.last() != Some(&Step::Key(field.to_owned())) {
            steps.push(Step::Key(field.to_owned()));
        }
        let key = key_path(name, &steps);
        let choices: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
        let near = closest(field, &choices)
            .map(|near| format!("; did you mean `{near}`?"))
            .unwrap_or_default();
        p.key(&key, format!("unknown key; {expected}{near}"));
        p.unknown.push(key);
        if !(complete && remove(&mut value, &steps)) {
            break;
        }
    }
    p.failed.push(name.to_owned());
}

/// `robot` + [limits, a, velocity] → `robot.limits.a.velocity`; indices as `[i]`.
fn key_path(section: &str, steps: &[Step]) -> String {
    let mut key = section.to_owned();
    for step in steps {
        match step {
            Step::Key(k) => {
                key.push('.');
                key.push_str(k);
            }
            Step::Index(i) => key.push_str(&format!("[{i}]")),
        }
    }
    key
}

/// Removes the mapping entry at `steps` (relative to `value`); false when it is not there.
fn remove(value: &mut Value, steps: &[Step]) -> bool {
    let Some((Step::Key(last), parents)) = steps.split_last() else {
        return false;
    };
    let mut node = value;
    for step in parents {
        let next = match step {
            Step::Key(k) => node.get_mut(k.as_str()),
            Step::Index(i) => node.get_mut(*i),
        };
        match next {
            Some(n) => node = n,
            None => return false,
        }
    }
    node.as_mapping_mut()
        .and_then(|m| m.remove(last.as_str()))
        .is_some()
}

/// Splits serde's "unknown field `x`, expected one of `a`, `b`" into `x` and the expectation.
fn unknown_field(message: &str) -> Option<(&str, &str)> {
    let rest = message.strip_prefix("unknown field `")?;
    let (field, rest) = rest.split_once('`')?;
    Some((field, rest.trim_start_matches([',', ' '])))
}

/// A serde message in people's words, for the value at `key`: `"fast" is not a number (Hz)`,
/// `"pchipp" is not one of hold, linear, pchip, cubic; did you mean pchip?`.
fn humanize(key: &str, message: &str) -> String {
    if let Some(rest) = message.strip_prefix("unknown variant `")
        && let Some((given, rest)) = rest.split_once('`')
    {
        let choices: Vec<&str> = rest.split('`').skip(1).step_by(2).collect();
        let mut text = format!("{given:?} is not one of {}", choices.join(", "));
        if let Some(near) = closest(given, &choices) {
            text.push_str(&format!("; did you mean {near}?"));
        }
        return text;
    }
    let (found, expected) = match message
        .strip_prefix("invalid type: ")
        .or_else(|| message.strip_prefix("invalid value: "))
        .and_then(|rest| rest.split_once(", expected "))
    {
        Some(parts) => parts,
        None => return message.to_string(),
    };
    let found = value_of(found);
    let unit = unit_of(key);
    let wanted = match expected {
        "f64" | "f32" => "a number",
        "u8" | "u16" | "u32" | "u64" | "usize" => "a whole number ≥ 0",
        "i8" | "i16" | "i32" | "i64" | "isize" | "integer" => "a whole number",
        "a boolean" => "true or false",
        "a string" => "text",
        "a sequence" => "a list",
        e if e.starts_with("struct ") || e == "a map" => "a mapping of keys",
        other => return format!("{found} is not {other}{unit}"),
    };
    format!("{found} is not {wanted}{unit}")
}

/// `string "fast"` → `"fast"`, ``integer `5` `` → `5`, `sequence` → `a list`.
fn value_of(found: &str) -> String {
    let quoted = |s: &str| s.trim_matches('`').to_string();
    if let Some(s) = found.strip_prefix("string ") {
        s.to_string()
    } else if let Some(s) = found.strip_prefix("floating point ") {
        // serde writes the float in full (`1e308` as 309 digits): shown short again.
        let digits = quoted(s);
        digits
            .parse::<f64>()
            .map_or(digits, |x| crate::diag::Num(x).to_string())
    } else if let Some(s) = found
        .strip_prefix("integer ")
        .or_else(|| found.strip_prefix("boolean "))
    {
        quoted(s)
    } else {
        match found {
            "sequence" => "a list".into(),
            "map" => "a mapping".into(),
            "unit value" => "nothing".into(),
            other => other.into(),
        }
    }
}

/// The unit a key's name promises, as ` (Hz)`.
fn unit_of(key: &str) -> &'static str {
    let last = key.rsplit('.').next().unwrap_or(key);
    if last.ends_with("_hz") {
        " (Hz)"
    } else if last.ends_with("_ms") {
        " (milliseconds)"
    } else if last.ends_with("_s") {
        " (seconds)"
    } else {
        ""
    }
}

/// The choice within two edits of `given`, if one is.
pub(super) fn closest<'a>(given: &str, choices: &[&'a str]) -> Option<&'a str> {
    choices
        .iter()
        .map(|c| (strsim::levenshtein(given, c), *c))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// How a YAML value is named in messages: its kind and, for scalars, the value.
fn describe(value: &Value) -> String {
    match value {
        Value::Null => "nothing".to_owned(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => format!("the string {s:?}"),
        Value::Sequence(_) => "a list".to_owned(),
        Value::Mapping(_) => "a mapping".to_owned(),
        Value::Tagged(t) => format!("a value tagged {}", t.tag),
    }
}
