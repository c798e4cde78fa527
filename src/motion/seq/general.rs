//! The general reader: any YAML, through yaml-rust2's event parser.
//!
//! serde_yaml cannot say where a node was written, and every .seq error must point at its line and
//! column, so this reader builds the positioned tree from parser events (each carries its marker).
//! It resolves what the fast scanner leaves out — anchors and aliases, merge keys (`<<`), tags,
//! block scalars, multi-line scalars, several documents (the first is used, as in Choreonoid) — and
//! compacts every `frames` list row by row as it goes, so a large file never exists as one node per
//! number.

use std::collections::HashMap;

use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

use super::tree::{Key, Kind, Node, Pos, Rows};

/// Deeper nesting than any .seq needs; bounded so that building and dropping the tree cannot
/// exhaust the stack.
pub(crate) const MAX_DEPTH: usize = 64;
/// Nodes that aliases may copy in total (defuses "billion laughs" documents).
const MAX_ALIAS_NODES: usize = 1_000_000;

/// A syntax-level problem: where and what.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SyntaxError {
    pub pos: Pos,
    pub message: String,
}

fn pos(m: &Marker) -> Pos {
    Pos {
        line: u32::try_from(m.line()).unwrap_or(u32::MAX),
        col: u32::try_from(m.col().saturating_add(1)).unwrap_or(u32::MAX),
    }
}

enum Open {
    Seq {
        pos: Pos,
        anchor: usize,
        items: Vec<Node>,
    },
    /// The value of a `frames` key: compacted row by row.
    Rows { pos: Pos, anchor: usize, rows: Rows },
    Map {
        pos: Pos,
        anchor: usize,
        entries: Vec<(Key, Node)>,
        key: Option<Key>,
    },
}

/// A completed node and whether it was an empty plain scalar (`key:` with nothing after it), which
/// is reported at its key's position: both readers agree on that, not on where "nothing" starts.
struct Done {
    node: Node,
    empty_plain: bool,
}

/// Parses the first document of `text` into the positioned tree. `Ok(None)`: no document at all.
pub(crate) fn parse(text: &str) -> Result<Option<Node>, SyntaxError> {
    let mut parser = Parser::new_from_str(text);
    let mut tree = Tree::default();
    loop {
        let (event, mark) = parser.next_token().map_err(|e| SyntaxError {
            pos: pos(e.marker()),
            message: format!("YAML syntax error: {}", e.info()),
        })?;
        let at = pos(&mark);
        let done = match event {
            Event::StreamEnd => return Ok(None),
            Event::Nothing | Event::StreamStart | Event::DocumentStart | Event::DocumentEnd => {
                continue;
            }
            Event::Scalar(value, style, anchor, _tag) => {
                let empty_plain = value.is_empty() && style == TScalarStyle::Plain;
                let node = Node {
                    pos: at,
                    kind: Kind::Scalar(value),
                };
                tree.remember(anchor, &node);
                Done { node, empty_plain }
            }
            Event::Alias(id) => tree.alias(id, at)?,
            Event::SequenceStart(anchor, _tag) => {
                tree.open_seq(anchor, at)?;
                continue;
            }
            Event::MappingStart(anchor, _tag) => {
                tree.open_map(anchor, at)?;
                continue;
            }
            Event::SequenceEnd | Event::MappingEnd => tree.close(at)?,
        };
        if let Some(root) = tree.attach(done) {
            return Ok(Some(root));
        }
    }
}

/// The collections open while the parser reads, innermost last, and the anchors seen so far.
#[derive(Default)]
struct Tree {
    stack: Vec<Open>,
    anchors: HashMap<usize, Node>,
    /// Nodes the aliases so far expand to (bounded: a billion-laughs file is refused).
    alias_nodes: usize,
}

impl Tree {
    fn remember(&mut self, anchor: usize, node: &Node) {
        if anchor != 0 {
            self.anchors.insert(anchor, node.clone());
        }
    }

    fn alias(&mut self, id: usize, at: Pos) -> Result<Done, SyntaxError> {
        let Some(node) = self.anchors.get(&id) else {
            return Err(SyntaxError {
                pos: at,
                message: "alias of an unknown anchor".into(),
            });
        };
        self.alias_nodes = self.alias_nodes.saturating_add(size(node));
        if self.alias_nodes > MAX_ALIAS_NODES {
            return Err(SyntaxError {
                pos: at,
                message: format!("aliases expand to more than {MAX_ALIAS_NODES} nodes; refusing"),
            });
        }
        Ok(Done {
            node: node.clone(),
            empty_plain: false,
        })
    }

    fn deeper(&self, at: Pos) -> Result<(), SyntaxError> {
        if self.stack.len() >= MAX_DEPTH {
            return Err(SyntaxError {
                pos: at,
                message: format!("nesting deeper than {MAX_DEPTH} levels"),
            });
        }
        Ok(())
    }

    /// A sequence starts; under a `frames` key it is a table of rows.
    fn open_seq(&mut self, anchor: usize, at: Pos) -> Result<(), SyntaxError> {
        self.deeper(at)?;
        let is_frames = matches!(
            self.stack.last(),
            Some(Open::Map { key: Some(k), .. }) if k.text.as_deref() == Some("frames")
        );
        self.stack.push(if is_frames {
            Open::Rows {
                pos: at,
                anchor,
                rows: Rows::default(),
            }
        } else {
            Open::Seq {
                pos: at,
                anchor,
                items: Vec::new(),
            }
        });
        Ok(())
    }

    fn open_map(&mut self, anchor: usize, at: Pos) -> Result<(), SyntaxError> {
        self.deeper(at)?;
        self.stack.push(Open::Map {
            pos: at,
            anchor,
            entries: Vec::new(),
            key: None,
        });
        Ok(())
    }

    /// The innermost collection ends: it becomes a node.
    fn close(&mut self, at: Pos) -> Result<Done, SyntaxError> {
        let (node, anchor) = match self.stack.pop() {
            Some(Open::Seq { pos, anchor, items }) => (
                Node {
                    pos,
                    kind: Kind::Seq(items),
                },
                anchor,
            ),
            Some(Open::Rows { pos, anchor, rows }) => (
                Node {
                    pos,
                    kind: Kind::Rows(rows),
                },
                anchor,
            ),
            Some(Open::Map {
                pos,
                anchor,
                entries,
                ..
            }) => (
                Node {
                    // yaml-rust2 marks a block mapping one column past its first key;
                    // the first key is where a reader looks anyway.
                    pos: entries.first().map_or(pos, |(k, _)| k.pos),
                    kind: Kind::Map(merge_keys(entries)),
                },
                anchor,
            ),
            None => {
                return Err(SyntaxError {
                    pos: at,
                    message: "unbalanced collection end".into(),
                });
            }
        };
        self.remember(anchor, &node);
        Ok(Done {
            node,
            empty_plain: false,
        })
    }

    /// A finished node goes into the collection around it; the root comes back.
    fn attach(&mut self, done: Done) -> Option<Node> {
        match self.stack.last_mut() {
            None => return Some(done.node),
            Some(Open::Seq { items, .. }) => items.push(done.node),
            Some(Open::Rows { rows, .. }) => rows.push_row(&done.node),
            Some(Open::Map { entries, key, .. }) => match key.take() {
                None => {
                    *key = Some(Key {
                        pos: done.node.pos,
                        text: match done.node.kind {
                            Kind::Scalar(s) => Some(s),
                            _ => None,
                        },
                    });
                }
                Some(k) => {
                    let mut value = done.node;
                    if done.empty_plain {
                        value.pos = k.pos;
                    }
                    entries.push((k, value));
                }
            },
        }
        None
    }
}

/// Nodes in a subtree (depth is bounded by `MAX_DEPTH`).
fn size(node: &Node) -> usize {
    match &node.kind {
        Kind::Scalar(_) => 1,
        Kind::Seq(items) => 1 + items.iter().map(size).sum::<usize>(),
        Kind::Map(entries) => 1 + entries.iter().map(|(_, v)| 1 + size(v)).sum::<usize>(),
        Kind::Rows(rows) => 1 + rows.rows.len() + rows.values.len(),
    }
}

/// Resolves YAML merge keys: `<<: *base` (or a list of them) supplies the keys the mapping does not
/// set itself; with a list, earlier mappings take precedence. Lookups take the last entry of a key,
/// so merged entries go first, lowest precedence first.
fn merge_keys(entries: Vec<(Key, Node)>) -> Vec<(Key, Node)> {
    if !entries.iter().any(|(k, _)| k.text.as_deref() == Some("<<")) {
        return entries;
    }
    let mut merged = Vec::new();
    let mut own = Vec::new();
    for (k, v) in entries {
        if k.text.as_deref() != Some("<<") {
            own.push((k, v));
            continue;
        }
        match v.kind {
            Kind::Map(m) => merged.push(m),
            Kind::Seq(items) => {
                let maps: Vec<_> = items
                    .into_iter()
                    .filter_map(|n| match n.kind {
                        Kind::Map(m) => Some(m),
                        _ => None,
                    })
                    .collect();
                merged.extend(maps.into_iter().rev());
            }
            // Not a merge source: keep it as an ordinary key, which nothing reads.
            kind => own.push((k, Node { pos: v.pos, kind })),
        }
    }
    let mut out: Vec<(Key, Node)> = merged.into_iter().flatten().collect();
    out.extend(own);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(line: u32, col: u32) -> Pos {
        Pos { line, col }
    }

    #[test]
    fn positions_are_one_based() {
        let n = parse("a: 1\nb:\n  - x\n").unwrap().unwrap();
        assert_eq!(n.pos, p(1, 1));
        assert_eq!(n.get("a").unwrap().pos, p(1, 4));
        let b = n.get("b").unwrap();
        assert_eq!(b.pos, p(3, 3));
    }

    #[test]
    fn empty_values_report_at_their_key() {
        let n = parse("a:\nb: 2\n").unwrap().unwrap();
        assert_eq!(n.get("a").unwrap().pos, p(1, 1));
        assert_eq!(n.get("a").unwrap().scalar(), Some(""));
    }

    #[test]
    fn aliases_and_merge_keys_resolve() {
        let n = parse("base: &b {x: 1, y: 2}\nm:\n  <<: *b\n  y: 3\n")
            .unwrap()
            .unwrap();
        let m = n.get("m").unwrap();
        assert_eq!(m.get("x").unwrap().scalar(), Some("1"));
        assert_eq!(m.get("y").unwrap().scalar(), Some("3"));
    }

    #[test]
    fn frames_are_compacted() {
        let n = parse("frames:\n  - [1, 2]\n  - [3, 4]\n").unwrap().unwrap();
        let Kind::Rows(rows) = &n.get("frames").unwrap().kind else {
            panic!("not rows")
        };
        assert_eq!(rows.values, vec![1.0, 2.0, 3.0, 4.0]);
        assert_eq!(rows.rows[1].pos, p(3, 5));
    }

    #[test]
    fn deep_nesting_is_refused() {
        let text = "[".repeat(10_000);
        assert!(parse(&text).is_err());
    }

    #[test]
    fn syntax_errors_have_positions() {
        let e = parse("a: [1, 2\nb: 3\n").unwrap_err();
        assert!(e.pos.line >= 1, "{e:?}");
    }
}
