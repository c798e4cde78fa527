//! The positioned document tree both YAML readers produce, and the one place numbers are read.
//!
//! Choreonoid keeps every scalar as an untyped string (tags and quoting do not matter), so the tree
//! does too. Frame data is the exception: a `frames` list of rows is held as [`Rows`] — the numbers
//! in one flat `Vec<f64>` with a few words of shape and position per row — because a generic node
//! per number would need ~10× the memory of the motion itself. The fast scanner builds `Rows`
//! directly; the general reader builds generic nodes and [`Rows::from_nodes`] compacts them, so the
//! semantic layer (`build`) only ever sees one representation of frame data.

/// 1-based line and column (columns count characters, as YAML parsers do).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Pos {
    pub line: u32,
    pub col: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Node {
    pub pos: Pos,
    pub kind: Kind,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Kind {
    Scalar(String),
    Seq(Vec<Node>),
    /// Entries in document order; duplicate keys are kept (lookups take the last, as Choreonoid).
    Map(Vec<(Key, Node)>),
    Rows(Rows),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Key {
    pub pos: Pos,
    /// `None` for a non-scalar key, which no .seq key can match.
    pub text: Option<String>,
}

impl Node {
    pub fn scalar(&self) -> Option<&str> {
        match &self.kind {
            Kind::Scalar(s) => Some(s),
            _ => None,
        }
    }

    /// The value of the last entry named `key`, with the position to report it at.
    pub fn get(&self, key: &str) -> Option<&Node> {
        match &self.kind {
            Kind::Map(entries) => entries
                .iter()
                .rev()
                .find(|(k, _)| k.text.as_deref() == Some(key))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn describe(&self) -> &'static str {
        match &self.kind {
            Kind::Scalar(_) => "a scalar",
            Kind::Seq(_) | Kind::Rows(_) => "a list",
            Kind::Map(_) => "a mapping",
        }
    }
}

/// A list of frame rows, compact.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Rows {
    /// Every number of every row in document order; a cell that is not a number holds NaN and is
    /// listed in `bad`.
    pub values: Vec<f64>,
    pub rows: Vec<Row>,
    /// Elements of nested rows (`[t, [x, y, z, …], …]`), `Row::shape` points into it.
    pub items: Vec<Item>,
    pub bad: Vec<BadCell>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Row {
    pub pos: Pos,
    /// Index of the row's first number in `Rows::values`.
    pub start: usize,
    /// How many numbers the row holds (nested ones included).
    pub len: usize,
    pub shape: Shape,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Shape {
    /// `[a, b, c]`
    Flat,
    /// Some element is a list: `Rows::items[first..first + count]` are the row's elements.
    Nested { first: usize, count: usize },
    /// Not a list of numbers and lists of numbers; `at` is the offending node.
    Malformed { at: Pos, found: &'static str },
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Item {
    pub pos: Pos,
    /// `None`: a number; `Some(n)`: a list of `n` numbers.
    pub list_len: Option<usize>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BadCell {
    pub row: usize,
    pub pos: Pos,
    pub text: String,
    pub problem: NumberProblem,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NumberProblem {
    NotANumber,
    NotFinite,
}

impl NumberProblem {
    pub fn describe(self, text: &str) -> String {
        match self {
            NumberProblem::NotANumber => format!("expected a number, found \"{text}\""),
            NumberProblem::NotFinite => format!("\"{text}\" is not a finite number"),
        }
    }
}

/// A complete, finite number. Stricter than Choreonoid's strtod prefix rule on purpose: `1.5abc`,
/// `0x10`, `nan` and `inf` would put a robot somewhere nobody wrote down.
pub(crate) fn number(text: &str) -> Result<f64, NumberProblem> {
    let t = text.trim_ascii();
    // Rust's parser also takes "infinity"/"nan" words; they fail the finiteness check below.
    match t.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        Ok(_) => Err(NumberProblem::NotFinite),
        Err(_) => Err(NumberProblem::NotANumber),
    }
}

impl Rows {
    /// Appends one cell of the current row.
    pub fn push_cell(&mut self, pos: Pos, text: &str) {
        match number(text) {
            Ok(v) => self.values.push(v),
            Err(problem) => {
                self.bad.push(BadCell {
                    row: self.rows.len(),
                    pos,
                    text: text.to_owned(),
                    problem,
                });
                self.values.push(f64::NAN);
            }
        }
    }

    /// Compacts a generic list of rows (the general reader's output) into the form the fast scanner
    /// produces directly.
    pub fn from_nodes(items: &[Node]) -> Rows {
        let mut rows = Rows::default();
        for row in items {
            rows.push_row(row);
        }
        rows
    }

    /// Appends one generic row node.
    pub fn push_row(&mut self, row: &Node) {
        let start = self.values.len();
        let first_item = self.items.len();
        let first_bad = self.bad.len();
        let shape = match &row.kind {
            Kind::Seq(cells) => self.push_row_cells(cells, first_item),
            other => Shape::Malformed {
                at: row.pos,
                found: kind_name(other),
            },
        };
        if matches!(shape, Shape::Malformed { .. }) {
            self.values.truncate(start);
            self.items.truncate(first_item);
            self.bad.truncate(first_bad);
        }
        self.rows.push(Row {
            pos: row.pos,
            start,
            len: self.values.len() - start,
            shape,
        });
    }

    fn push_row_cells(&mut self, cells: &[Node], first_item: usize) -> Shape {
        let nested = cells.iter().any(|c| !matches!(c.kind, Kind::Scalar(_)));
        for cell in cells {
            match &cell.kind {
                Kind::Scalar(text) => {
                    self.push_cell(cell.pos, text);
                    if nested {
                        self.items.push(Item {
                            pos: cell.pos,
                            list_len: None,
                        });
                    }
                }
                Kind::Seq(inner) => {
                    for leaf in inner {
                        match &leaf.kind {
                            Kind::Scalar(text) => self.push_cell(leaf.pos, text),
                            other => {
                                return Shape::Malformed {
                                    at: leaf.pos,
                                    found: kind_name(other),
                                };
                            }
                        }
                    }
                    self.items.push(Item {
                        pos: cell.pos,
                        list_len: Some(inner.len()),
                    });
                }
                other => {
                    return Shape::Malformed {
                        at: cell.pos,
                        found: kind_name(other),
                    };
                }
            }
        }
        if nested {
            Shape::Nested {
                first: first_item,
                count: cells.len(),
            }
        } else {
            Shape::Flat
        }
    }
}

fn kind_name(kind: &Kind) -> &'static str {
    match kind {
        Kind::Scalar(_) => "a scalar",
        Kind::Seq(_) | Kind::Rows(_) => "a list",
        Kind::Map(_) => "a mapping",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_must_be_complete_and_finite() {
        assert_eq!(number("1e-05"), Ok(1e-5));
        assert_eq!(number("-7.779e-005"), Ok(-7.779e-5));
        assert_eq!(number("+.5"), Ok(0.5));
        assert_eq!(number("1.5abc"), Err(NumberProblem::NotANumber));
        assert_eq!(number("0x10"), Err(NumberProblem::NotANumber));
        assert_eq!(number(".inf"), Err(NumberProblem::NotANumber));
        assert_eq!(number(""), Err(NumberProblem::NotANumber));
        assert_eq!(number("nan"), Err(NumberProblem::NotFinite));
        assert_eq!(number("inf"), Err(NumberProblem::NotFinite));
        assert_eq!(number("1e999"), Err(NumberProblem::NotFinite));
    }
}
