//! The control protocol's page is checked against the types the daemon and `motionctl` share:
//! the JSON Schema generated from them (schemars) is shipped as `docs/src/protocol.schema.json`,
//! the reference section of `docs/src/protocol.md` is rendered from that schema, and every JSON
//! example the page gives by hand must fit it (no unknown field, no unknown word, requests the
//! daemon's own parser takes). When a type changes, the test fails until the page says so:
//! `MOTIOND_BLESS=1 cargo test --test protocol_schema` rewrites the schema file and the
//! reference section (review the diff); examples written by hand are fixed by hand.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

use std::collections::BTreeSet;
use std::path::PathBuf;

use motiond::daemon::protocol::{Request, parse_request};
use motiond::daemon::reply::{
    ChunkReply, DoneReply, DrivesReply, DumpReply, ErrorReply, ListReply, PlayReply, RecordReply,
    RecordStopReply, RecoverReply, StatusReply, StreamOpenReply, StreamReport,
};
use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, SchemaGenerator};
use serde_json::{Map, Value, json};

const BEGIN: &str = "<!-- reference: generated from the request and reply types by tests/protocol_schema.rs; `MOTIOND_BLESS=1 cargo test --test protocol_schema` rewrites it -->";
const END: &str = "<!-- end of the generated reference -->";

/// What each command is answered with: the reply types its `{"ok":true,…}` carries (`record`
/// starts or stops a teach-in, `recover` may go to a pose).
fn replies(generator: &mut SchemaGenerator) -> Vec<(&'static str, Vec<Value>)> {
    fn of<T: JsonSchema>(generator: &mut SchemaGenerator) -> Value {
        generator.subschema_for::<T>().to_value()
    }
    let done = of::<DoneReply>(generator);
    let mut table = vec![
        ("play", vec![of::<PlayReply>(generator)]),
        ("status", vec![of::<StatusReply>(generator)]),
        ("list", vec![of::<ListReply>(generator)]),
        ("reload", vec![of::<ListReply>(generator)]),
        (
            "record",
            vec![
                of::<RecordReply>(generator),
                of::<RecordStopReply>(generator),
            ],
        ),
        ("recover", vec![done.clone(), of::<RecoverReply>(generator)]),
        ("dump", vec![of::<DumpReply>(generator)]),
        ("drives", vec![of::<DrivesReply>(generator)]),
        ("stream_open", vec![of::<StreamOpenReply>(generator)]),
        ("stream_chunk", vec![of::<ChunkReply>(generator)]),
        ("stream_close", vec![of::<StreamReport>(generator)]),
    ];
    for cmd in [
        "stop",
        "pause",
        "resume",
        "quick_stop",
        "enable",
        "disable",
        "clear_fault",
    ] {
        table.push((cmd, vec![done.clone()]));
    }
    table
}

/// The protocol as one JSON Schema document: a line is a request or a reply; `x-replies` says
/// which reply types answer each command.
fn schema() -> Value {
    // Requests as the daemon reads them, replies as it writes them: a reply's `Option` field
    // without `skip_serializing_if` is always there (null or a value).
    let mut reader = SchemaSettings::draft2020_12().into_generator();
    let request = reader.subschema_for::<Request>().to_value();
    let mut writer = SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator();
    let error = writer.subschema_for::<ErrorReply>().to_value();
    let mut answered = Map::new();
    for (cmd, types) in replies(&mut writer) {
        answered.insert(cmd.to_string(), Value::Array(types));
    }
    let mut defs = reader.take_definitions(true);
    defs.extend(writer.take_definitions(true));
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "motiond control protocol",
        "description": "One JSON object a line. A request is a `Request`; its reply is an `ErrorReply`, or `{\"ok\":true}` followed by the fields of one of the reply types `x-replies` gives for its `cmd`.",
        "anyOf": [request, error],
        "x-replies": answered,
        "$defs": defs,
    })
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn bless() -> bool {
    std::env::var_os("MOTIOND_BLESS").is_some_and(|v| v == "1")
}

/// `want` is what `path` must hold: written under `MOTIOND_BLESS=1`, else compared.
fn holds(path: &str, want: &str) {
    let file = root().join(path);
    let have = std::fs::read_to_string(&file).unwrap_or_default();
    if have == want {
        return;
    }
    if bless() {
        std::fs::write(&file, want).unwrap();
        return;
    }
    let line = have
        .lines()
        .zip(want.lines())
        .position(|(a, b)| a != b)
        .unwrap_or(have.lines().count().min(want.lines().count()));
    panic!(
        "{path}:{}: not what the request and reply types give (expected {:?}); if the types are \
         right, `MOTIOND_BLESS=1 cargo test --test protocol_schema` rewrites it — review the diff",
        line + 1,
        want.lines().nth(line).unwrap_or("the end of the file")
    );
}

#[test]
fn the_shipped_schema_is_the_types() {
    let text = serde_json::to_string_pretty(&schema()).unwrap() + "\n";
    holds("docs/src/protocol.schema.json", &text);
}

#[test]
fn every_command_has_its_replies() {
    let schema = schema();
    let commands: BTreeSet<String> = schema["$defs"]["Request"]["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            v["properties"]["cmd"]["const"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let answered: BTreeSet<String> = schema["x-replies"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(commands, answered);
}

#[test]
fn the_pages_reference_is_rendered_from_the_types() {
    let page = std::fs::read_to_string(root().join("docs/src/protocol.md")).unwrap();
    let (Some(begin), Some(end)) = (page.find(BEGIN), page.find(END)) else {
        panic!("docs/src/protocol.md: the reference markers are missing ({BEGIN} … {END})");
    };
    let mut want = String::new();
    want.push_str(&page[..begin]);
    want.push_str(BEGIN);
    want.push('\n');
    want.push_str(&render(&schema()));
    want.push_str(&page[end..]);
    holds("docs/src/protocol.md", &want);
}

#[test]
fn the_pages_examples_fit_the_types() {
    let page = std::fs::read_to_string(root().join("docs/src/protocol.md")).unwrap();
    let prose = match (page.find(BEGIN), page.find(END)) {
        (Some(b), Some(e)) => format!("{}{}", &page[..b], &page[e..]),
        _ => page.clone(),
    };
    let schema = schema();
    let mut checked = 0;
    for (line, example) in examples(&prose) {
        let where_ = format!("docs/src/protocol.md:{line}: {example}");
        let value: Value = serde_json::from_str(&example).unwrap_or_else(|e| {
            panic!(
                "{where_}: not JSON ({e}); write the example in full or with `…` only after a comma"
            )
        });
        checked += 1;
        if value.get("cmd").is_some() {
            if let Err(e) = parse_request(example.as_bytes()) {
                panic!("{where_}: the daemon refuses it: {e}");
            }
            continue;
        }
        let fits = |candidates: &[Value]| misfit(&schema, &value, candidates);
        let wrong = match value.get("ok") {
            Some(Value::Bool(false)) => fits(&[json!({"$ref": "#/$defs/ErrorReply"})]),
            Some(_) => {
                let mut answer = value.clone();
                answer.as_object_mut().unwrap().remove("ok");
                let types: Vec<Value> = schema["x-replies"]
                    .as_object()
                    .unwrap()
                    .values()
                    .flat_map(|t| t.as_array().unwrap().clone())
                    .collect();
                misfit(&schema, &answer, &types)
            }
            // A part of a reply: one of the types.
            None => {
                let defs: Vec<Value> = schema["$defs"]
                    .as_object()
                    .unwrap()
                    .keys()
                    .map(|name| json!({"$ref": format!("#/$defs/{name}")}))
                    .collect();
                fits(&defs)
            }
        };
        if let Some(why) = wrong {
            panic!("{where_}: fits no reply type ({why})");
        }
    }
    assert!(checked >= 10, "only {checked} examples found");
}

/// Why `value` fits none of `candidates` (`None` when one fits): the nearest miss, a wrong
/// value in a type that has every field, before a field no type has.
fn misfit(schema: &Value, value: &Value, candidates: &[Value]) -> Option<String> {
    let mut why = Vec::new();
    for candidate in candidates {
        match fit(schema, value, candidate) {
            Ok(()) => return None,
            Err(e) => why.push(e),
        }
    }
    // A wrong field value, then a wrong type, then an unknown field.
    why.sort_by_key(|e| match () {
        _ if e.contains("no field") => 2,
        _ if e.starts_with(['{', '[', '"']) => 1,
        _ => 0,
    });
    why.into_iter().next()
}

/// The JSON objects the page shows: inline code and code blocks that start with `{"`, with
/// the line they start on. `…` stands for more of the same (`,…` and `…,` are dropped).
fn examples(page: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut in_block = false;
    let mut block = String::new();
    let mut block_line = 0;
    let mut span: Option<(usize, String)> = None;
    for (i, line) in page.lines().enumerate() {
        if line.starts_with("```") {
            if in_block && block.trim_start().starts_with("{\"") {
                found.push((block_line, block.clone()));
            }
            in_block = !in_block;
            block.clear();
            block_line = i + 2;
            continue;
        }
        if in_block {
            block.push_str(line);
            continue;
        }
        // Inline code may run over lines.
        for (j, part) in line.split('`').enumerate() {
            if j > 0 {
                match span.take() {
                    Some((at, text)) => {
                        if text.starts_with("{\"") {
                            found.push((at, text));
                        }
                    }
                    None => span = Some((i + 1, String::new())),
                }
            }
            if let Some((_, text)) = span.as_mut() {
                text.push_str(part);
            }
        }
    }
    found
        .into_iter()
        .map(|(line, text)| {
            let text = text
                .replace(",…", "")
                .replace("…,", "")
                .replace("[…]", "[]");
            (line, text)
        })
        .collect()
}

/// Resolves a `$ref` into the document's `$defs`.
fn resolve<'a>(schema: &'a Value, s: &'a Value) -> &'a Value {
    match s.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let name = r.trim_start_matches("#/$defs/");
            resolve(schema, &schema["$defs"][name])
        }
        None => s,
    }
}

/// Whether `value` fits `s`: its type, every object key a property (or the map's values), every
/// word one the schema lists. Required properties are not asked for: examples show a part.
fn fit(schema: &Value, value: &Value, s: &Value) -> Result<(), String> {
    let s = resolve(schema, s);
    if s == &Value::Bool(true) {
        return Ok(());
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(options) = s.get(key).and_then(Value::as_array) {
            let mut why = Vec::new();
            for option in options {
                match fit(schema, value, &merged(schema, s, option)) {
                    Ok(()) => return Ok(()),
                    Err(e) => why.push(e),
                }
            }
            return Err(why.join("; or "));
        }
    }
    if let Some(all) = s.get("allOf").and_then(Value::as_array) {
        let mut whole = s.clone();
        whole.as_object_mut().unwrap().remove("allOf");
        for part in all {
            whole = merged(schema, &whole, part);
        }
        return fit(schema, value, &whole);
    }
    if let Some(c) = s.get("const")
        && c != value
    {
        return Err(format!("{value} is not {c}"));
    }
    if let Some(words) = s.get("enum").and_then(Value::as_array)
        && !words.contains(value)
    {
        return Err(format!(
            "{value} is not one of {}",
            Value::Array(words.clone())
        ));
    }
    if let Some(t) = s.get("type") {
        let types: Vec<&str> = match t {
            Value::String(t) => vec![t.as_str()],
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        let is = |t: &str| match t {
            "null" => value.is_null(),
            "boolean" => value.is_boolean(),
            "string" => value.is_string(),
            "integer" => value.is_u64() || value.is_i64(),
            "number" => value.is_number(),
            "array" => value.is_array(),
            "object" => value.is_object(),
            _ => false,
        };
        if !types.iter().any(|t| is(t)) {
            return Err(format!("{value} is not {}", types.join(" or ")));
        }
    }
    match value {
        Value::Object(fields) => {
            let properties = s.get("properties").and_then(Value::as_object);
            for (key, v) in fields {
                match (
                    properties.and_then(|p| p.get(key)),
                    s.get("additionalProperties"),
                ) {
                    (Some(p), _) => fit(schema, v, p).map_err(|e| format!("{key}: {e}"))?,
                    (None, Some(extra)) if extra != &Value::Bool(false) => {
                        fit(schema, v, extra).map_err(|e| format!("{key}: {e}"))?
                    }
                    _ => return Err(format!("no field {key:?}")),
                }
            }
        }
        Value::Array(items) => {
            let prefix = s.get("prefixItems").and_then(Value::as_array);
            for (i, item) in items.iter().enumerate() {
                let each = prefix.and_then(|p| p.get(i)).or_else(|| s.get("items"));
                if let Some(each) = each {
                    fit(schema, item, each).map_err(|e| format!("[{i}]: {e}"))?;
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// `base` (without its alternatives) with `part`'s properties added: a flattened part.
fn merged(schema: &Value, base: &Value, part: &Value) -> Value {
    let part = resolve(schema, part);
    let mut whole = base.clone();
    let object = whole.as_object_mut().unwrap();
    object.remove("anyOf");
    object.remove("oneOf");
    for (key, value) in part.as_object().into_iter().flatten() {
        match (key.as_str(), object.get_mut(key)) {
            ("properties", Some(Value::Object(mine))) => {
                for (k, v) in value.as_object().into_iter().flatten() {
                    mine.insert(k.clone(), v.clone());
                }
            }
            ("required", Some(Value::Array(mine))) => {
                mine.extend(value.as_array().into_iter().flatten().cloned());
            }
            _ => {
                object.insert(key.clone(), value.clone());
            }
        }
    }
    whole
}

/// The reference section: each request with its fields, then each type replies are made of.
fn render(schema: &Value) -> String {
    let mut out = String::new();
    out.push_str(
        "## Reference\n\nGenerated from the types the daemon and `motionctl` share \
         (`motiond::daemon::protocol::Request`, `motiond::daemon::reply`); the same as a JSON \
         Schema: [protocol.schema.json](protocol.schema.json). A field marked *optional* is \
         left out when it does not apply; every other field is always there (null where its \
         type says so). Clients ignore fields they do not know.\n\n### Requests\n\n",
    );
    let replies = schema["x-replies"].as_object().unwrap();
    for request in schema["$defs"]["Request"]["oneOf"].as_array().unwrap() {
        let cmd = request["properties"]["cmd"]["const"].as_str().unwrap();
        let answers: Vec<String> = replies[cmd]
            .as_array()
            .unwrap()
            .iter()
            .map(type_text)
            .collect();
        out.push_str(&format!(
            "**`{cmd}`**: {} Answered with {}.\n\n",
            sentence(request),
            answers.join(" or ")
        ));
        out.push_str(&fields_table(schema, request, &["cmd"]));
    }
    out.push_str("### Replies\n\n");
    let defs = schema["$defs"].as_object().unwrap();
    for (name, def) in defs {
        if name == "Request" {
            continue;
        }
        out.push_str(&format!("#### {name}\n\n"));
        let text = sentence(def);
        if !text.is_empty() {
            out.push_str(&format!("{text}\n\n"));
        }
        if let Some(list) = word_list(def) {
            out.push_str(&list);
        } else if let Some(words) = words(def) {
            out.push_str(&format!("One of {words}.\n\n"));
        } else if let Some(options) = def
            .get("anyOf")
            .or(def.get("oneOf"))
            .and_then(Value::as_array)
        {
            // The fields every variant has, then each variant's own.
            out.push_str(&fields_table(schema, def, &[]));
            for option in options {
                out.push_str(&format!("- {}\n", sentence(option)));
                out.push('\n');
                out.push_str(&fields_table(schema, option, &[]));
            }
        } else {
            out.push_str(&fields_table(schema, def, &[]));
        }
    }
    out
}

/// A schema's description on one line ("" when it has none), rustdoc's links as plain code.
fn sentence(s: &Value) -> String {
    let text = s["description"].as_str().unwrap_or("").replace('\n', " ");
    let mut out = String::new();
    let mut rest = text.trim();
    while let Some(at) = rest.find("[`") {
        let Some(end) = rest[at..].find("`]").map(|e| at + e) else {
            break;
        };
        out.push_str(&rest[..at]);
        out.push_str(&rest[at + 1..end + 1]);
        rest = &rest[end + 2..];
    }
    out.push_str(rest);
    out
}

/// A list of the words a schema allows, each with its meaning, when each has one.
fn word_list(s: &Value) -> Option<String> {
    let options = s.get("oneOf").and_then(Value::as_array)?;
    let mut list = String::new();
    for option in options {
        let word = option.get("const")?.as_str()?;
        let meaning = sentence(option);
        if meaning.is_empty() {
            return None;
        }
        list.push_str(&format!("- `{word}`: {meaning}\n"));
    }
    list.push('\n');
    Some(list)
}

/// `` `a`, `b` `` for a schema of words (an `enum`, or `const`s each with its meaning).
fn words(s: &Value) -> Option<String> {
    if let Some(words) = s.get("enum").and_then(Value::as_array) {
        let words: Vec<String> = words
            .iter()
            .map(|w| format!("`{}`", w.as_str().unwrap_or("?")))
            .collect();
        return Some(words.join(", "));
    }
    let options = s.get("oneOf").and_then(Value::as_array)?;
    let words: Option<Vec<String>> = options
        .iter()
        .map(|o| {
            let word = o.get("const")?.as_str()?;
            let meaning = sentence(o);
            Some(if meaning.is_empty() {
                format!("`{word}`")
            } else {
                format!("`{word}` ({meaning})")
            })
        })
        .collect();
    words.map(|w| w.join(", "))
}

/// A table of an object schema's fields (and its flattened parts'), `skip` left out.
fn fields_table(schema: &Value, s: &Value, skip: &[&str]) -> String {
    let mut whole = resolve(schema, s).clone();
    if let Some(all) = whole.get("allOf").and_then(Value::as_array).cloned() {
        whole.as_object_mut().unwrap().remove("allOf");
        for part in &all {
            whole = merged(schema, &whole, part);
        }
    }
    let required: BTreeSet<&str> = whole["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let Some(properties) = whole["properties"].as_object() else {
        return String::new();
    };
    let rows: Vec<String> = properties
        .iter()
        .filter(|(name, _)| !skip.contains(&name.as_str()))
        .map(|(name, p)| {
            let optional = if required.contains(name.as_str()) {
                ""
            } else {
                " *optional*"
            };
            // A `|` inside a cell would end it.
            format!(
                "| `{name}` | {}{optional} | {} |",
                type_text(p).replace('|', "\\|"),
                sentence(p).replace('|', "\\|")
            )
        })
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    format!("| field | type | |\n|---|---|---|\n{}\n\n", rows.join("\n"))
}

/// A type in words: `number`, `string or null`, `array of [Clamped](#clamped)`, …
fn type_text(s: &Value) -> String {
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        let name = r.trim_start_matches("#/$defs/");
        return format!("[{name}](#{})", name.to_lowercase());
    }
    if let Some(c) = s.get("const") {
        return format!("`{c}`");
    }
    if let Some(w) = words(s) {
        return format!("one of {w}");
    }
    if let Some(options) = s.get("anyOf").and_then(Value::as_array) {
        let texts: Vec<String> = options.iter().map(type_text).collect();
        return texts.join(" or ");
    }
    let types: Vec<&str> = match &s["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    };
    let texts: Vec<String> = types
        .iter()
        .map(|t| match *t {
            "array" => match (s.get("prefixItems"), s.get("items")) {
                (Some(Value::Array(p)), _) => format!(
                    "[{}]",
                    p.iter().map(type_text).collect::<Vec<_>>().join(", ")
                ),
                (_, Some(items)) => format!("array of {}", type_text(items)),
                _ => "array".into(),
            },
            "object" => match s.get("additionalProperties") {
                Some(v) if v.is_object() => format!("map of {} by name", type_text(v)),
                _ => "object".into(),
            },
            other => other.to_string(),
        })
        .collect();
    if texts.is_empty() {
        "any".into()
    } else {
        texts.join(" or ")
    }
}
