//! The fast scanner: the YAML subset .seq files are actually written in, at memory speed.
//!
//! A .seq file is almost entirely frame rows (`- [ 0.1, 0.2, … ]`), so this reader is built around
//! one tight loop that turns a block list of flow rows straight into [`Rows`] — no token stream,
//! no node per number, no copy of the text. Around it sits a small recursive-descent reader for what
//! Choreonoid writes and people type: block mappings and lists, flow lists and mappings (so plain
//! JSON too), plain and simple quoted scalars, comments, CRLF line ends.
//!
//! It is deliberately conservative: anything outside that subset — anchors, aliases, tags, block
//! scalars, multi-line plain scalars, escapes, tabs, document markers, non-ASCII outside comments,
//! and every syntax error — makes it return `None`, and the caller runs the general reader
//! (`general`) on the whole text. So YAML syntax is always judged by one full parser, and the fast
//! path only has to produce the same tree as the general reader where it answers at all; the
//! proptests in `seq::tests` check exactly that on generated files of many styles.

use super::general::MAX_DEPTH;
use super::tree::{Item, Key, Kind, Node, Pos, Row, Rows, Shape};

/// The positioned tree of `text`, or `None` when the text is outside the subset.
pub(crate) fn parse(text: &str) -> Option<Node> {
    let mut s = Scanner {
        text,
        s: text.as_bytes(),
        i: 0,
        line: 1,
        line_start: 0,
        elements: Vec::new(),
    };
    s.skip_blank_lines()?;
    if s.eof() {
        return None;
    }
    let root = match s.peek() {
        b'{' => {
            let node = s.flow_node(0, -1, false)?;
            s.end_of_line()?;
            node
        }
        _ if s.col0() == 0 => s.block_mapping(0, 0)?,
        _ => return None,
    };
    s.skip_blank_lines()?;
    s.eof().then_some(root)
}

struct Scanner<'a> {
    text: &'a str,
    s: &'a [u8],
    i: usize,
    line: u32,
    line_start: usize,
    /// Scratch for the row being read: each element's position and, for a nested list, its length.
    elements: Vec<(Pos, Option<usize>)>,
}

impl<'a> Scanner<'a> {
    fn eof(&self) -> bool {
        self.i >= self.s.len()
    }

    /// The current byte, 0 at the end (a NUL in the text is outside the subset anyway).
    fn peek(&self) -> u8 {
        self.s.get(self.i).copied().unwrap_or(0)
    }

    fn peek_at(&self, k: usize) -> u8 {
        self.s.get(self.i + k).copied().unwrap_or(0)
    }

    /// 0-based column; lines hold ASCII up to any token, so bytes are characters.
    fn col0(&self) -> usize {
        self.i - self.line_start
    }

    fn pos(&self) -> Pos {
        Pos {
            line: self.line,
            col: u32::try_from(self.col0() + 1).unwrap_or(u32::MAX),
        }
    }

    fn skip_spaces(&mut self) {
        while self.peek() == b' ' {
            self.i += 1;
        }
    }

    /// At a line end (after optional spaces and comment): moves to the next line's start.
    /// `None` if something else is there.
    fn end_of_line(&mut self) -> Option<()> {
        self.skip_spaces();
        if self.peek() == b'#' {
            if !self.at_comment() {
                return None;
            }
            // A lone CR is a line break to YAML; it is not one here, so it ends the subset.
            while !matches!(self.peek(), b'\n' | b'\r' | 0) {
                self.i += 1;
            }
        }
        match self.peek() {
            0 if self.eof() => Some(()),
            b'\n' => {
                self.newline();
                Some(())
            }
            b'\r' if self.peek_at(1) == b'\n' => {
                self.i += 1;
                self.newline();
                Some(())
            }
            _ => None,
        }
    }

    /// A `#` starts a comment only at a line start or after white space (`a#b` is a scalar).
    fn at_comment(&self) -> bool {
        self.i == self.line_start || matches!(self.s.get(self.i.wrapping_sub(1)), Some(b' '))
    }

    fn newline(&mut self) {
        self.i += 1;
        self.line += 1;
        self.line_start = self.i;
    }

    /// Skips empty and comment-only lines; stops at the first content character of a line.
    fn skip_blank_lines(&mut self) -> Option<()> {
        loop {
            self.skip_spaces();
            match self.peek() {
                b'#' | b'\n' | b'\r' => self.end_of_line()?,
                0 if self.eof() => return Some(()),
                b'\t' => return None,
                _ => {
                    let rest = &self.s[self.i..];
                    if self.col0() == 0 && (rest.starts_with(b"---") || rest.starts_with(b"...")) {
                        return None;
                    }
                    return Some(());
                }
            }
        }
    }

    /// A block mapping whose keys start at column `indent` (0-based); at its first key.
    fn block_mapping(&mut self, indent: usize, depth: usize) -> Option<Node> {
        if depth >= MAX_DEPTH {
            return None;
        }
        let mut entries: Vec<(Key, Node)> = Vec::new();
        loop {
            let key = self.block_key()?;
            self.skip_spaces();
            let value = if matches!(self.peek(), b'#' | b'\n' | b'\r' | 0) {
                self.end_of_line()?;
                self.block_value(indent, &key, depth)?
            } else {
                let frames = key.text.as_deref() == Some("frames");
                let node = match self.peek() {
                    b'[' | b'{' => self.flow_node(depth + 1, indent as isize, frames)?,
                    _ => self.block_scalar_value()?,
                };
                self.end_of_line()?;
                node
            };
            entries.push((key, value));
            self.skip_blank_lines()?;
            if self.eof() {
                break;
            }
            let col = self.col0();
            if col < indent {
                break;
            }
            if col > indent
                || self.peek() == b'-' && matches!(self.peek_at(1), b' ' | b'\n' | b'\r')
            {
                return None;
            }
        }
        let pos = entries.first().map(|(k, _)| k.pos)?;
        Some(Node {
            pos,
            kind: Kind::Map(entries),
        })
    }

    /// A mapping key on this line (plain word or simple quoted scalar) and its `:`.
    fn block_key(&mut self) -> Option<Key> {
        let pos = self.pos();
        let text = match self.peek() {
            b'"' | b'\'' => self.quoted()?,
            _ => {
                let start = self.i;
                while matches!(self.peek(), b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'.') {
                    self.i += 1;
                }
                if self.i == start {
                    return None;
                }
                std::str::from_utf8(&self.s[start..self.i]).ok()?.to_owned()
            }
        };
        if self.peek() != b':' || !matches!(self.peek_at(1), b' ' | b'\n' | b'\r' | 0) {
            return None;
        }
        self.i += 1;
        Some(Key {
            pos,
            text: Some(text),
        })
    }

    /// The value of `key:` when nothing follows on the key's line.
    fn block_value(&mut self, indent: usize, key: &Key, depth: usize) -> Option<Node> {
        self.skip_blank_lines()?;
        let col = self.col0();
        let dash = self.peek() == b'-' && matches!(self.peek_at(1), b' ' | b'\n' | b'\r');
        let frames = key.text.as_deref() == Some("frames");
        if self.eof() || col < indent || col == indent && !dash {
            // Nothing: an empty scalar, reported at its key.
            return Some(Node {
                pos: key.pos,
                kind: Kind::Scalar(String::new()),
            });
        }
        if dash {
            return self.block_seq(col, col == indent, frames, depth + 1);
        }
        match self.peek() {
            b'[' | b'{' => {
                let node = self.flow_node(depth + 1, indent as isize, frames)?;
                self.end_of_line()?;
                Some(node)
            }
            _ => self.block_mapping(col, depth + 1),
        }
    }

    /// A block list whose dashes are at column `indent`; at the first dash.
    fn block_seq(
        &mut self,
        indent: usize,
        indentless: bool,
        frames: bool,
        depth: usize,
    ) -> Option<Node> {
        // Rows nest two more levels (the row and its SE3 lists), counted as the general reader does.
        if depth + if frames { 2 } else { 0 } >= MAX_DEPTH {
            return None;
        }
        let dash_pos = self.pos();
        let mut items = Vec::new();
        let mut rows = Rows::default();
        let mut first_item_pos = None;
        loop {
            // At a dash in column `indent`.
            self.i += 1;
            self.skip_spaces();
            first_item_pos.get_or_insert(self.pos());
            if matches!(self.peek(), b'#' | b'\n' | b'\r' | 0) {
                // The item starts on a later line.
                if frames {
                    return None;
                }
                self.end_of_line()?;
                self.skip_blank_lines()?;
                let col = self.col0();
                if self.eof() || col <= indent {
                    return None;
                }
                let node = match self.peek() {
                    b'[' | b'{' => {
                        let n = self.flow_node(depth + 1, indent as isize, false)?;
                        self.end_of_line()?;
                        n
                    }
                    b'-' => return None,
                    _ => self.block_mapping(col, depth + 1)?,
                };
                items.push(node);
            } else if frames {
                if self.peek() != b'[' {
                    return None;
                }
                self.row(&mut rows)?;
                self.end_of_line()?;
                if rows.rows.len() == 1 {
                    self.reserve_rows(&mut rows);
                }
            } else {
                let node = match self.peek() {
                    b'[' | b'{' => {
                        let n = self.flow_node(depth + 1, indent as isize, false)?;
                        self.end_of_line()?;
                        n
                    }
                    b'-' if matches!(self.peek_at(1), b' ' | b'\n' | b'\r') => return None,
                    _ if self.looks_like_key() => self.block_mapping(self.col0(), depth + 1)?,
                    _ => {
                        let n = self.block_scalar_value()?;
                        self.end_of_line()?;
                        n
                    }
                };
                items.push(node);
            }
            self.skip_blank_lines()?;
            if self.eof() {
                break;
            }
            let col = self.col0();
            let dash = self.peek() == b'-' && matches!(self.peek_at(1), b' ' | b'\n' | b'\r');
            if col == indent && dash {
                continue;
            }
            if col < indent || col == indent && indentless {
                break;
            }
            return None;
        }
        // yaml-rust2 marks an indentless list at its first item, an indented one at its dash.
        let pos = if indentless {
            first_item_pos.unwrap_or(dash_pos)
        } else {
            dash_pos
        };
        if frames {
            if rows.values.capacity() > rows.values.len() + rows.values.len() / 4 {
                rows.values.shrink_to_fit();
            }
            Some(Node {
                pos,
                kind: Kind::Rows(rows),
            })
        } else {
            Some(Node {
                pos,
                kind: Kind::Seq(items),
            })
        }
    }

    /// After the first row: reserve for the rest of the text as if it were all rows like it, so
    /// that a 150 MB motion is not grown by doubling (which would briefly need 3× its size).
    fn reserve_rows(&self, rows: &mut Rows) {
        let row_bytes = (self.i - self.line_start_of_prev_row()).max(1);
        let per_row = rows.values.len().max(1);
        let remaining = self.s.len() - self.i;
        // Every number takes at least two bytes ("0,"), which bounds a wild guess.
        let estimate = (remaining / row_bytes * per_row + per_row).min(remaining / 2);
        rows.values.reserve(estimate);
        rows.rows.reserve(remaining / row_bytes + 1);
    }

    fn line_start_of_prev_row(&self) -> usize {
        // The row just read ended at the previous line break.
        let end = self.line_start.saturating_sub(1);
        self.s[..end]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |p| p + 1)
    }

    /// Whether a `word:` (or quoted key) starts here: the item of a list is then a mapping.
    fn looks_like_key(&self) -> bool {
        let mut k = self.i;
        match self.s.get(k) {
            Some(b'"' | b'\'') => {
                let q = self.s[k];
                k += 1;
                while let Some(&b) = self.s.get(k) {
                    if b == q || b == b'\n' {
                        break;
                    }
                    k += 1;
                }
                k += 1;
            }
            _ => {
                while matches!(
                    self.s.get(k),
                    Some(b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'.')
                ) {
                    k += 1;
                }
            }
        }
        k > self.i
            && self.s.get(k) == Some(&b':')
            && matches!(self.s.get(k + 1), Some(b' ' | b'\n' | b'\r') | None)
    }

    /// A plain or quoted scalar that is a whole block value (to the end of the line).
    fn block_scalar_value(&mut self) -> Option<Node> {
        let pos = self.pos();
        if matches!(self.peek(), b'"' | b'\'') {
            let text = self.quoted()?;
            return Some(Node {
                pos,
                kind: Kind::Scalar(text),
            });
        }
        if matches!(
            self.peek(),
            b'-' | b'?'
                | b':'
                | b'&'
                | b'*'
                | b'!'
                | b'|'
                | b'>'
                | b'%'
                | b'@'
                | b'`'
                | b'#'
                | b','
                | b'['
                | b']'
                | b'{'
                | b'}'
        ) && !(self.peek() == b'-'
            && self.peek_at(1).is_ascii_alphanumeric() | (self.peek_at(1) == b'.'))
        {
            return None;
        }
        let start = self.i;
        let mut end = self.i;
        loop {
            match self.peek() {
                b'\n' | b'\r' | 0 => break,
                b' ' if self.peek_at(1) == b'#' => break,
                b':' if matches!(self.peek_at(1), b' ' | b'\n' | b'\r' | 0) => return None,
                b'\t' | b'[' | b']' | b'{' | b'}' | b',' | b'"' | b'\'' | b'#' | 128..=255 => {
                    return None;
                }
                b' ' => self.i += 1,
                _ => {
                    self.i += 1;
                    end = self.i;
                }
            }
        }
        self.i = end;
        let text = std::str::from_utf8(&self.s[start..end]).ok()?.to_owned();
        Some(Node {
            pos,
            kind: Kind::Scalar(text),
        })
    }

    /// A single-line quoted scalar without escapes (`''` in single quotes is fine).
    fn quoted(&mut self) -> Option<String> {
        let q = self.peek();
        self.i += 1;
        let mut out = String::new();
        loop {
            let b = self.peek();
            match b {
                b'\n' | b'\r' | 0 | b'\\' | b'\t' | 128..=255 => return None,
                _ if b == q => {
                    if q == b'\'' && self.peek_at(1) == b'\'' {
                        out.push('\'');
                        self.i += 2;
                        continue;
                    }
                    self.i += 1;
                    return Some(out);
                }
                _ => {
                    out.push(char::from(b));
                    self.i += 1;
                }
            }
        }
    }

    /// Whitespace inside a flow collection: spaces, comments, line breaks (continuation lines must
    /// be indented past the enclosing block).
    fn flow_space(&mut self, block_indent: isize) -> Option<()> {
        let mut crossed_line = false;
        loop {
            self.skip_spaces();
            match self.peek() {
                b'#' => {
                    self.end_of_line()?;
                    crossed_line = true;
                }
                b'\n' | b'\r' => {
                    self.end_of_line()?;
                    crossed_line = true;
                }
                b'\t' => return None,
                _ => {
                    if crossed_line && (self.col0() as isize) <= block_indent {
                        return None;
                    }
                    return Some(());
                }
            }
        }
    }

    /// After a flow element: `Some(false)` past a `,` (more follow), `Some(true)` at `close`.
    fn flow_next(&mut self, close: u8, block_indent: isize) -> Option<bool> {
        self.flow_space(block_indent)?;
        match self.peek() {
            b',' => {
                self.i += 1;
                self.flow_space(block_indent)?;
                Some(false)
            }
            c if c == close => Some(true),
            _ => None,
        }
    }

    /// A flow node: `[…]`, `{…}`, a quoted or a plain scalar. With `frames`, a list's items are
    /// compacted into [`Rows`] as they complete.
    fn flow_node(&mut self, depth: usize, block_indent: isize, frames: bool) -> Option<Node> {
        if depth >= MAX_DEPTH {
            return None;
        }
        let pos = self.pos();
        match self.peek() {
            b'[' => {
                self.i += 1;
                let mut items = Vec::new();
                let mut rows = Rows::default();
                self.flow_space(block_indent)?;
                if self.peek() != b']' {
                    loop {
                        let item = self.flow_node(depth + 1, block_indent, false)?;
                        if frames {
                            rows.push_row(&item);
                        } else {
                            items.push(item);
                        }
                        if self.flow_next(b']', block_indent)? {
                            break;
                        }
                    }
                }
                self.i += 1;
                let kind = if frames {
                    Kind::Rows(rows)
                } else {
                    Kind::Seq(items)
                };
                Some(Node { pos, kind })
            }
            b'{' => {
                self.i += 1;
                let mut entries = Vec::new();
                self.flow_space(block_indent)?;
                if self.peek() != b'}' {
                    loop {
                        let key_pos = self.pos();
                        let quoted_key = matches!(self.peek(), b'"' | b'\'');
                        let key = match self.flow_node(depth + 1, block_indent, false)? {
                            Node {
                                kind: Kind::Scalar(s),
                                ..
                            } => s,
                            _ => return None,
                        };
                        self.flow_space(block_indent)?;
                        // `"a":1` is JSON; after a plain key YAML needs the space.
                        if self.peek() != b':' || !quoted_key && self.peek_at(1) != b' ' {
                            return None;
                        }
                        self.i += 1;
                        self.flow_space(block_indent)?;
                        if matches!(self.peek(), b',' | b'}') {
                            return None;
                        }
                        let is_frames = key == "frames";
                        let value = self.flow_node(depth + 1, block_indent, is_frames)?;
                        entries.push((
                            Key {
                                pos: key_pos,
                                text: Some(key),
                            },
                            value,
                        ));
                        if self.flow_next(b'}', block_indent)? {
                            break;
                        }
                    }
                }
                self.i += 1;
                let pos = entries.first().map_or(pos, |(k, _): &(Key, Node)| k.pos);
                Some(Node {
                    pos,
                    kind: Kind::Map(entries),
                })
            }
            b'"' | b'\'' => {
                let text = self.quoted()?;
                Some(Node {
                    pos,
                    kind: Kind::Scalar(text),
                })
            }
            _ => {
                let text = self.flow_word()?;
                Some(Node {
                    pos,
                    kind: Kind::Scalar(text.to_owned()),
                })
            }
        }
    }

    /// A plain scalar inside a flow collection, restricted to number-like words.
    fn flow_word(&mut self) -> Option<&'a str> {
        let start = self.i;
        while matches!(self.peek(), b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'.' | b'+' | b'-')
        {
            self.i += 1;
        }
        let word = self.text.get(start..self.i)?;
        if word.is_empty() || word == "-" {
            return None;
        }
        Some(word)
    }

    /// The hot loop: one flow row `[a, b, …]` or `[t, [x, …], …]` of plain words, straight into
    /// `rows`. Equivalent to building the row node and `Rows::push_row`, minus the node.
    fn row(&mut self, rows: &mut Rows) -> Option<()> {
        let row_pos = self.pos();
        let start = rows.values.len();
        self.i += 1;
        self.elements.clear();
        let mut nested = false;
        self.skip_spaces();
        if self.peek() != b']' {
            loop {
                let pos = self.pos();
                if self.peek() == b'[' {
                    nested = true;
                    self.i += 1;
                    self.skip_spaces();
                    let mut count = 0;
                    if self.peek() != b']' {
                        loop {
                            let cell_pos = self.pos();
                            let word = self.flow_word()?;
                            rows.push_cell(cell_pos, word);
                            count += 1;
                            self.skip_spaces();
                            match self.peek() {
                                b',' => {
                                    self.i += 1;
                                    self.skip_spaces();
                                }
                                b']' => break,
                                _ => return None,
                            }
                        }
                    }
                    self.i += 1;
                    self.elements.push((pos, Some(count)));
                } else {
                    let word = self.flow_word()?;
                    rows.push_cell(pos, word);
                    self.elements.push((pos, None));
                }
                self.skip_spaces();
                match self.peek() {
                    b',' => {
                        self.i += 1;
                        self.skip_spaces();
                    }
                    b']' => break,
                    _ => return None,
                }
            }
        }
        self.i += 1;
        let shape = if nested {
            let first = rows.items.len();
            rows.items.extend(
                self.elements
                    .iter()
                    .map(|&(pos, list_len)| Item { pos, list_len }),
            );
            Shape::Nested {
                first,
                count: self.elements.len(),
            }
        } else {
            Shape::Flat
        };
        rows.rows.push(Row {
            pos: row_pos,
            start,
            len: rows.values.len() - start,
            shape,
        });
        Some(())
    }
}
