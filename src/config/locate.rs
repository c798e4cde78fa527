//! Where each key of a YAML document sits: key path → line and column.
//!
//! serde keeps no positions in the values it produces, so problems found after deserialization
//! (a rate out of range, a bus setting the bus owner refuses) are placed with this index, built
//! from the positioned events of a second, span-aware parse of the same text. Paths are written as
//! `robot.limits.elbow_pitch.velocity` and `buses[0].joints.base_yaw`. A path that is not in the
//! index falls back to its nearest indexed ancestor, then to the start of the file, so a lookup
//! never fails.

use std::collections::HashMap;

use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::scanner::Marker;

/// A 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pos {
    pub line: u32,
    pub col: u32,
}

impl Pos {
    pub const START: Pos = Pos { line: 1, col: 1 };

    /// yaml-rust2 counts lines from 1 and columns from 0.
    fn from_marker(m: &Marker) -> Self {
        Pos {
            line: u32::try_from(m.line()).unwrap_or(u32::MAX).max(1),
            col: u32::try_from(m.col()).unwrap_or(u32::MAX).saturating_add(1),
        }
    }
}

/// Positions of the keys and values of one YAML document.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Locations {
    keys: HashMap<String, Pos>,
    values: HashMap<String, Pos>,
}

enum Frame {
    /// A mapping at `path`; `key` is the key whose value comes next, `None` while a key is expected.
    Map {
        path: String,
        key: Option<String>,
    },
    Seq {
        path: String,
        next: usize,
    },
    /// Inside a non-scalar mapping key (`? [a, b]: …`), which no key path can name.
    Skip {
        depth: usize,
    },
}

impl Locations {
    /// Indexes the first document of `text`. Stops quietly at a syntax error: the caller reports
    /// syntax errors from its own parse; what was indexed before the error is still useful.
    pub fn index(text: &str) -> Self {
        let mut index = Locations::default();
        let mut stack: Vec<Frame> = Vec::new();
        let mut parser = Parser::new_from_str(text);
        let mut in_document = false;
        while let Ok((event, mark)) = parser.next_token() {
            let pos = Pos::from_marker(&mark);
            match event {
                Event::StreamEnd => break,
                Event::DocumentStart if in_document => break,
                Event::DocumentStart => in_document = true,
                Event::DocumentEnd => break,
                Event::MappingStart(..) | Event::SequenceStart(..) => {
                    let is_map = matches!(event, Event::MappingStart(..));
                    if let Some(Frame::Skip { depth }) = stack.last_mut() {
                        *depth += 1;
                        continue;
                    }
                    // Block mappings start at their first key's colon, which is not where a reader
                    // looks for the value; lists start at their `[` or first `-`.
                    match index.place_node(&mut stack, pos, None, !is_map) {
                        Some(path) if is_map => stack.push(Frame::Map { path, key: None }),
                        Some(path) => stack.push(Frame::Seq { path, next: 0 }),
                        None => stack.push(Frame::Skip { depth: 1 }),
                    }
                }
                Event::MappingEnd | Event::SequenceEnd => match stack.last_mut() {
                    Some(Frame::Skip { depth }) if *depth > 1 => *depth -= 1,
                    _ => {
                        stack.pop();
                    }
                },
                Event::Scalar(text, ..) => {
                    if !matches!(stack.last(), Some(Frame::Skip { .. })) {
                        index.place_node(&mut stack, pos, Some(text), true);
                    }
                }
                Event::Alias(_) => {
                    if !matches!(stack.last(), Some(Frame::Skip { .. })) {
                        index.place_node(&mut stack, pos, None, true);
                    }
                }
                Event::StreamStart | Event::Nothing => {}
            }
        }
        index
    }

    /// Records a node starting at `pos` in the innermost container. Returns the node's path when
    /// it is a value (or the root), `None` when it is a mapping key. `scalar` is the node's text
    /// when it is a scalar; `pos_is_value` says whether `pos` is where a reader sees the value.
    fn place_node(
        &mut self,
        stack: &mut [Frame],
        pos: Pos,
        scalar: Option<String>,
        pos_is_value: bool,
    ) -> Option<String> {
        match stack.last_mut() {
            None => Some(String::new()),
            Some(Frame::Map { path, key }) => match key.take() {
                None => {
                    // A key. Non-scalar keys get a name no path lookup produces, so their values
                    // fall back to the mapping's own position.
                    let name = scalar.unwrap_or_else(|| "\u{0}complex".to_owned());
                    self.keys.entry(join(path, &name)).or_insert(pos);
                    *key = Some(name);
                    None
                }
                Some(name) => {
                    let child = join(path, &name);
                    if pos_is_value {
                        self.values.entry(child.clone()).or_insert(pos);
                    }
                    Some(child)
                }
            },
            Some(Frame::Seq { path, next }) => {
                let child = format!("{path}[{next}]");
                *next += 1;
                self.keys.entry(child.clone()).or_insert(pos);
                Some(child)
            }
            Some(Frame::Skip { .. }) => None,
        }
    }

    /// Where the key of `path` is written (for unknown or misplaced keys).
    pub fn key(&self, path: &str) -> Pos {
        self.lookup(path, &self.keys)
    }

    /// Where the value of `path` is written (for bad values); for a mapping, where its key is.
    pub fn value(&self, path: &str) -> Pos {
        self.lookup(path, &self.values)
    }

    fn lookup(&self, path: &str, primary: &HashMap<String, Pos>) -> Pos {
        let mut p = path;
        loop {
            if let Some(pos) = primary.get(p).or_else(|| self.keys.get(p)) {
                return *pos;
            }
            match parent(p) {
                Some(up) => p = up,
                None => return Pos::START,
            }
        }
    }
}

fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_owned()
    } else {
        format!("{parent}.{key}")
    }
}

/// `a.b[2]` → `a.b`, `a.b` → `a`, `a` → `` (the root), `` → none.
fn parent(path: &str) -> Option<&str> {
    if path.is_empty() {
        return None;
    }
    let cut = path.rfind(['.', '[']).unwrap_or(0);
    path.get(..cut)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
robot:
  skel: demo.skel
  joints: [a, b]
  limits:
    b: {velocity: 2.0}
buses:
  - name: can0
    joints:
      a: {id: 1}
";

    #[test]
    fn finds_keys_and_values_block_and_flow() {
        let l = Locations::index(TEXT);
        assert_eq!(l.key("robot"), Pos { line: 1, col: 1 });
        assert_eq!(l.key("robot.skel"), Pos { line: 2, col: 3 });
        assert_eq!(l.value("robot.skel"), Pos { line: 2, col: 9 });
        assert_eq!(l.value("robot.joints"), Pos { line: 3, col: 11 });
        assert_eq!(l.value("robot.joints[1]"), Pos { line: 3, col: 15 });
        assert_eq!(l.value("robot.limits"), Pos { line: 4, col: 3 });
        assert_eq!(l.value("buses"), Pos { line: 7, col: 3 });
        assert_eq!(l.key("robot.limits.b.velocity"), Pos { line: 5, col: 9 });
        assert_eq!(l.value("robot.limits.b.velocity"), Pos { line: 5, col: 19 });
        assert_eq!(l.value("buses[0].name"), Pos { line: 7, col: 11 });
        assert_eq!(l.key("buses[0].joints.a.id"), Pos { line: 9, col: 11 });
    }

    #[test]
    fn unknown_paths_fall_back_to_the_nearest_ancestor() {
        let l = Locations::index(TEXT);
        assert_eq!(l.value("robot.limits.b.effort"), l.value("robot.limits.b"));
        assert_eq!(l.value("buses[3].name"), l.value("buses"));
        assert_eq!(l.value("nowhere.at.all"), Pos::START);
        assert_eq!(Locations::index("").value("robot"), Pos::START);
    }

    #[test]
    fn broken_and_odd_documents_index_what_they_can() {
        let l = Locations::index("a: 1\nb: [\n");
        assert_eq!(l.value("a"), Pos { line: 1, col: 4 });
        let l = Locations::index("? [x, y]\n: 1\nz: &k 2\nw: *k\n");
        assert_eq!(l.key("z"), Pos { line: 3, col: 1 });
        assert_eq!(l.value("w"), Pos { line: 4, col: 4 });
        let l = Locations::index("a: 1\n---\nb: 2\n");
        assert_eq!(l.key("b"), Pos::START);
    }
}
