//! What the XML model readers (URDF, SDF, XODE) share: positioned diagnostics over one file's text,
//! element and attribute access with byte offsets, and DART's NameManager.

use std::collections::HashMap;
use std::path::Path;

use roxmltree::{Document, Node};

use crate::diag::{Diagnostic, Diagnostics, FileError, LineIndex};

/// Collects the problems (and warnings) of one file.
pub(crate) struct Ctx<'t> {
    pub(crate) path: &'t Path,
    pub(crate) text: &'t str,
    pub(crate) lines: LineIndex<'t>,
    pub(crate) diags: Vec<Diagnostic>,
}

impl<'t> Ctx<'t> {
    pub(crate) fn new(text: &'t str, path: &'t Path) -> Self {
        Ctx {
            path,
            text,
            lines: LineIndex::new(text),
            diags: Vec::new(),
        }
    }

    pub(crate) fn error(&mut self, at: usize, message: impl Into<String>) {
        let (line, col) = self.lines.line_col(at);
        self.diags
            .push(Diagnostic::new(self.path, line, col, message));
    }

    pub(crate) fn warn(&self, at: usize, message: &str) {
        let (line, col) = self.lines.line_col(at);
        tracing::warn!("{}:{line}:{col}: {message}", self.path.display());
    }

    pub(crate) fn line_col(&self, at: usize) -> (u32, u32) {
        self.lines.line_col(at)
    }

    pub(crate) fn failed(&self) -> bool {
        !self.diags.is_empty()
    }

    pub(crate) fn into_error(self) -> FileError {
        FileError::Invalid(Diagnostics(self.diags).sorted())
    }

    /// Parses the document, or reports where its XML is broken.
    pub(crate) fn parse<'i>(&mut self, text: &'i str) -> Option<Document<'i>> {
        let options = roxmltree::ParsingOptions {
            allow_dtd: true,
            ..Default::default()
        };
        match Document::parse_with_options(text, options) {
            Ok(doc) => Some(doc),
            Err(e) => {
                self.diags.push(syntax_error(self.path, &e));
                None
            }
        }
    }
}

/// Reads a model file as UTF-8 text, or says where the first invalid byte is.
pub(crate) fn read_text(path: &Path, what: &str) -> Result<String, FileError> {
    let bytes = crate::file::read(path).map_err(|source| FileError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    String::from_utf8(bytes).map_err(|e| {
        let valid = e
            .as_bytes()
            .get(..e.utf8_error().valid_up_to())
            .unwrap_or_default();
        let text = String::from_utf8_lossy(valid);
        let (line, col) = LineIndex::new(&text).line_col(text.len());
        FileError::Invalid(Diagnostics(vec![Diagnostic::new(
            path,
            line,
            col,
            format!("invalid UTF-8; expected {what} in UTF-8"),
        )]))
    })
}

/// An attribute's value and the offset of its first character.
#[derive(Clone, Copy)]
pub(crate) struct Attr<'a> {
    pub(crate) value: &'a str,
    pub(crate) at: usize,
}

pub(crate) fn attr<'a>(el: Node<'a, '_>, name: &str) -> Option<Attr<'a>> {
    let a = el.attribute_node(name)?;
    Some(Attr {
        value: a.value(),
        at: a.range_value().start,
    })
}

/// An attribute as TinyXML2 (urdfdom, DART) keeps it: as written, without XML's whitespace
/// normalisation (a tab stays a tab); a value with entity references is taken decoded.
pub(crate) fn raw_attr<'a>(text: &'a str, el: Node<'a, '_>, name: &str) -> Option<Attr<'a>> {
    let a = el.attribute_node(name)?;
    let range = a.range_value();
    let value = text
        .get(range.clone())
        .filter(|raw| !raw.contains('&'))
        .unwrap_or(a.value());
    Some(Attr {
        value,
        at: range.start,
    })
}

/// Child elements of `el` named `name`, in document order.
pub(crate) fn children<'a, 'i: 'a>(
    el: Node<'a, 'i>,
    name: &'a str,
) -> impl Iterator<Item = Node<'a, 'i>> + 'a {
    el.children()
        .filter(move |c| c.is_element() && c.tag_name().name() == name)
}

/// The first child element named `name` (TinyXML's `FirstChildElement`).
pub(crate) fn child<'a, 'i>(el: Node<'a, 'i>, name: &str) -> Option<Node<'a, 'i>> {
    el.children()
        .find(|c| c.is_element() && c.tag_name().name() == name)
}

/// The text of an element and its offset (whitespace included, as written).
pub(crate) fn text<'a>(el: Node<'a, '_>) -> Option<Attr<'a>> {
    let node = el.first_child().filter(|n| n.is_text())?;
    Some(Attr {
        value: node.text()?,
        at: node.range().start,
    })
}

pub(crate) fn start(el: Node) -> usize {
    el.range().start
}

/// A C-locale `stream >> double` that must consume the whole text (urdfdom's `strToDouble`).
/// Leading whitespace is skipped; anything after the number, `inf`, `nan`, hexadecimal and
/// values that overflow are refused.
pub(crate) fn c_number(s: &str) -> Option<f64> {
    let s = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let b = s.as_bytes();
    let mut i = 0;
    if matches!(b.first(), Some(b'+' | b'-')) {
        i += 1;
    }
    let int_start = i;
    while b.get(i).is_some_and(u8::is_ascii_digit) {
        i += 1;
    }
    let mut digits = i - int_start;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let frac_start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        digits += i - frac_start;
    }
    if digits == 0 {
        return None;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let exp_start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == exp_start {
            return None;
        }
    }
    if i != b.len() {
        return None;
    }
    s.parse::<f64>().ok().filter(|x| x.is_finite())
}

/// DART's NameManager: a name already taken is issued as `name(1)`, `name(2)`, …
#[derive(Default)]
pub(crate) struct Names {
    taken: HashMap<String, ()>,
}

impl Names {
    pub(crate) fn issue(&mut self, base: &str) -> String {
        let mut name = base.to_string();
        let mut n = 1u64;
        while self.taken.contains_key(&name) {
            name = format!("{base}({n})");
            n += 1;
        }
        self.taken.insert(name.clone(), ());
        name
    }
}

/// The name of the document's root element, found without parsing the whole file, so the right
/// reader (with its own messages) can be chosen even for a broken file.
pub(crate) fn root_element(text: &str) -> Option<&str> {
    let mut rest = text.trim_start_matches(['\u{feff}', ' ', '\t', '\r', '\n']);
    loop {
        if let Some(r) = rest.strip_prefix("<?") {
            rest = r.split_once("?>")?.1;
        } else if let Some(r) = rest.strip_prefix("<!--") {
            rest = r.split_once("-->")?.1;
        } else if let Some(r) = rest.strip_prefix("<!") {
            rest = skip_declaration(r)?;
        } else if let Some(r) = rest.strip_prefix('<') {
            let end = r
                .find(|c: char| c.is_whitespace() || c == '>' || c == '/')
                .unwrap_or(r.len());
            return r.get(..end).filter(|n| !n.is_empty());
        } else {
            return None;
        }
        rest = rest.trim_start_matches([' ', '\t', '\r', '\n']);
    }
}

/// Past a `<!DOCTYPE …>` whose internal subset may hold `[...]`.
fn skip_declaration(r: &str) -> Option<&str> {
    let mut depth = 0usize;
    for (i, c) in r.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            '>' if depth == 0 => return r.get(i + 1..),
            _ => {}
        }
    }
    None
}

/// roxmltree's error at its position, on one line: the character it stumbled on is shown escaped
/// (a raw newline would break the one-diagnostic-per-line output).
pub(crate) fn syntax_error(path: &std::path::Path, e: &roxmltree::Error) -> Diagnostic {
    let pos = e.pos();
    let message = e.to_string();
    let message = message
        .strip_suffix(&format!(" at {pos}"))
        .unwrap_or(&message);
    let message: String = message
        .chars()
        .flat_map(|c| {
            let escaped: Vec<char> = if c.is_control() {
                c.escape_default().collect()
            } else {
                vec![c]
            };
            escaped
        })
        .collect();
    Diagnostic::new(
        path,
        pos.row,
        pos.col,
        format!("XML syntax error: {message}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_root_element_past_prolog_comments_and_doctype() {
        assert_eq!(root_element("<robot name='a'/>"), Some("robot"));
        assert_eq!(
            root_element(
                "\u{feff}<?xml version='1.0'?>\n<!-- c -->\n<!DOCTYPE x [<!ENTITY a 'b'>]>\n<sdf>"
            ),
            Some("sdf")
        );
        assert_eq!(root_element("dofs 3"), None);
        assert_eq!(root_element("<!-- unterminated"), None);
    }

    #[test]
    fn names_are_issued_as_dart_renames_them() {
        let mut n = Names::default();
        assert_eq!(n.issue("default"), "default");
        assert_eq!(n.issue("default"), "default(1)");
        assert_eq!(n.issue("default"), "default(2)");
    }

    #[test]
    fn a_syntax_error_is_one_line_whatever_character_it_names() {
        let e = roxmltree::Document::parse("<a/\n>").unwrap_err();
        let d = syntax_error(std::path::Path::new("x.xml"), &e).to_string();
        assert!(!d.contains('\n') && d.starts_with("x.xml:1:"), "{d}");
    }
}
