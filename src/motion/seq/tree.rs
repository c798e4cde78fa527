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
    if let Some(v) = short_decimal(text.as_bytes()) {
        return Ok(v);
    }
    let t = text.trim_ascii();
    // Rust's parser also takes "infinity"/"nan" words; they fail the finiteness check below.
    match t.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        Ok(_) => Err(NumberProblem::NotFinite),
        Err(_) => Err(NumberProblem::NotANumber),
    }
}

/// Exact powers of ten in f64.
const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// The common case of frame data, read without the general float parser: `[+-]digits[.digits]
/// [e[+-]digits]` with at most 15 significant digits and a decimal exponent within ±22. Both the
/// mantissa and the power of ten are then exact in f64, so one multiplication or division rounds
/// correctly (Clinger's fast path): the result is bit-identical to `str::parse`. Anything else
/// returns `None` and goes to the full parser.
fn short_decimal(b: &[u8]) -> Option<f64> {
    let (negative, mut i) = match b.first()? {
        b'-' => (true, 1),
        b'+' => (false, 1),
        _ => (false, 0),
    };
    let mut mantissa: u64 = 0;
    let mut significant = 0u32;
    let mut any_digit = false;
    let mut exponent: i32 = 0;
    let mut in_fraction = false;
    while let Some(&c) = b.get(i) {
        match c {
            b'0'..=b'9' => {
                any_digit = true;
                if mantissa != 0 || c != b'0' {
                    significant += 1;
                    if significant > 15 {
                        return None;
                    }
                }
                mantissa = mantissa * 10 + u64::from(c - b'0');
                if in_fraction {
                    exponent -= 1;
                }
            }
            b'.' if !in_fraction => in_fraction = true,
            _ => break,
        }
        i += 1;
    }
    if !any_digit {
        return None;
    }
    if let Some(b'e' | b'E') = b.get(i) {
        i += 1;
        let (exp_negative, skip) = match b.get(i) {
            Some(b'-') => (true, 1),
            Some(b'+') => (false, 1),
            _ => (false, 0),
        };
        i += skip;
        let digits_start = i;
        let mut e: i32 = 0;
        while let Some(&c @ b'0'..=b'9') = b.get(i) {
            if i - digits_start >= 4 {
                return None;
            }
            e = e * 10 + i32::from(c - b'0');
            i += 1;
        }
        if i == digits_start {
            return None;
        }
        exponent += if exp_negative { -e } else { e };
    }
    if i != b.len() {
        return None;
    }
    let magnitude = if mantissa == 0 {
        0.0
    } else {
        let m = mantissa as f64;
        let power = *POW10.get(usize::try_from(exponent.unsigned_abs()).ok()?)?;
        if exponent >= 0 { m * power } else { m / power }
    };
    Some(if negative { -magnitude } else { magnitude })
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
        assert_eq!(number("1."), Ok(1.0));
        assert_eq!(number(".5"), Ok(0.5));
        assert_eq!(number("-0").map(f64::is_sign_negative), Ok(true));
        assert_eq!(number("1e"), Err(NumberProblem::NotANumber));
        assert_eq!(number("."), Err(NumberProblem::NotANumber));
        assert_eq!(number("1.2.3"), Err(NumberProblem::NotANumber));
    }

    proptest::proptest! {
        /// The short path gives exactly what the full parser gives.
        #[test]
        fn short_decimals_are_exact(
            text in "[+-]?[0-9]{0,12}(\\.[0-9]{0,10})?([eE][+-]?[0-9]{1,3})?",
            v in proptest::num::f64::NORMAL,
        ) {
            let full = |t: &str| t.parse::<f64>().ok().filter(|x| x.is_finite());
            proptest::prop_assert_eq!(number(&text).ok().map(f64::to_bits), full(&text).map(f64::to_bits));
            for t in [format!("{v}"), format!("{v:e}"), format!("{v:.6}"), format!("{v:.9e}")] {
                proptest::prop_assert_eq!(number(&t).ok().map(f64::to_bits), full(&t).map(f64::to_bits), "{}", t);
            }
        }
    }
}
