//! No library function is longer than [`LIMIT`] lines: a longer one is split into named steps.
//!
//! The library is walked from `src/lib.rs` along its `mod` declarations (test modules, declared
//! `#[cfg(test)]`, are left out, inline or in their own file); every `fn` with a body — free,
//! in an `impl`, a trait's default, nested in another function — is measured from its `fn`
//! keyword's line to its closing brace's line, both counted (a function's doc comment and
//! attributes are not).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

use std::path::{Path, PathBuf};

use syn::spanned::Spanned;
use syn::visit::Visit;

/// The longest a library function may be, in lines.
const LIMIT: usize = 120;

/// Functions still over the limit, each being split on another branch: `(file, name)`. Only
/// ever shrinks; an entry whose function is within the limit (or gone) fails the test, so the
/// list is emptied as the splits land.
const BEING_SPLIT: &[(&str, &str)] = &[];

/// A function measured: where it is and how long.
#[derive(Debug, Clone, PartialEq)]
struct Measured {
    file: String,
    name: String,
    line: usize,
    lines: usize,
}

struct Functions<'a> {
    file: &'a str,
    found: Vec<Measured>,
}

impl Functions<'_> {
    fn measure(&mut self, name: &syn::Ident, fn_token: &syn::token::Fn, body: &syn::Block) {
        let first = fn_token.span().start().line;
        let last = body.brace_token.span.close().end().line;
        self.found.push(Measured {
            file: self.file.to_string(),
            name: name.to_string(),
            line: first,
            lines: last + 1 - first,
        });
    }
}

impl<'ast> Visit<'ast> for Functions<'_> {
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.measure(&f.sig.ident, &f.sig.fn_token, &f.block);
        syn::visit::visit_item_fn(self, f);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        self.measure(&f.sig.ident, &f.sig.fn_token, &f.block);
        syn::visit::visit_impl_item_fn(self, f);
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(body) = &f.default {
            self.measure(&f.sig.ident, &f.sig.fn_token, body);
        }
        syn::visit::visit_trait_item_fn(self, f);
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        // Inline test modules are not the library; file modules are walked by `library_files`.
        if !is_test(&m.attrs) {
            syn::visit::visit_item_mod(self, m);
        }
    }
}

/// `#[cfg(test)]` (alone: `cfg(any(test, …))` is library code too).
fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg") && a.parse_args::<syn::Ident>().is_ok_and(|i| i == "test")
    })
}

/// The library's files, from `src/lib.rs` along its `mod NAME;` declarations, test modules left
/// out, each with its syntax tree.
fn library_files(root: &Path) -> Vec<(PathBuf, syn::File)> {
    let mut found = Vec::new();
    // (file, the folder its child modules' files are in)
    let mut stack = vec![(root.join("src/lib.rs"), root.join("src"))];
    while let Some((file, children_dir)) = stack.pop() {
        let text =
            std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let tree = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let mut declared = Vec::new();
        collect_mods(&tree.items, &children_dir, &mut declared);
        for (name, dir) in declared {
            let flat = dir.join(format!("{name}.rs"));
            let nested = dir.join(&name).join("mod.rs");
            if flat.is_file() {
                stack.push((flat, dir.join(&name)));
            } else if nested.is_file() {
                stack.push((nested, dir.join(&name)));
            } else {
                panic!("{}: module {name} has no file", file.display());
            }
        }
        found.push((file, tree));
    }
    found
}

/// The file modules `items` declare (inline modules' own file modules too), with the folder
/// their files are in.
fn collect_mods(items: &[syn::Item], dir: &Path, out: &mut Vec<(String, PathBuf)>) {
    for item in items {
        let syn::Item::Mod(m) = item else { continue };
        if is_test(&m.attrs) {
            continue;
        }
        let name = m.ident.to_string();
        match &m.content {
            None => out.push((name, dir.to_path_buf())),
            Some((_, inner)) => collect_mods(inner, &dir.join(&name), out),
        }
    }
}

fn measure_library(root: &Path) -> Vec<Measured> {
    let mut all = Vec::new();
    for (file, tree) in library_files(root) {
        let rel = file
            .strip_prefix(root)
            .unwrap_or(&file)
            .display()
            .to_string();
        let mut functions = Functions {
            file: &rel,
            found: Vec::new(),
        };
        functions.visit_file(&tree);
        all.extend(functions.found);
    }
    all.sort_by(|a, b| b.lines.cmp(&a.lines).then(a.file.cmp(&b.file)));
    all
}

#[test]
fn no_library_function_is_longer_than_the_limit() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let all = measure_library(root);
    assert!(all.len() > 500, "only {} functions found", all.len());
    let listed = |m: &Measured| BEING_SPLIT.contains(&(m.file.as_str(), m.name.as_str()));
    let over: Vec<String> = all
        .iter()
        .filter(|m| m.lines > LIMIT && !listed(m))
        .map(|m| format!("{}:{}: fn {} is {} lines", m.file, m.line, m.name, m.lines))
        .collect();
    let done: Vec<String> = BEING_SPLIT
        .iter()
        .filter(|(file, name)| {
            !all.iter()
                .any(|m| m.file == *file && m.name == *name && m.lines > LIMIT)
        })
        .map(|(file, name)| format!("{file}: fn {name}"))
        .collect();
    let longest = all
        .iter()
        .find(|m| !listed(m))
        .map(|m| format!("{}:{} fn {} ({} lines)", m.file, m.line, m.name, m.lines));
    eprintln!("longest library function not being split: {longest:?}");
    assert!(
        over.is_empty(),
        "library functions over {LIMIT} lines (split them into named steps):\n{}",
        over.join("\n")
    );
    assert!(
        done.is_empty(),
        "within {LIMIT} lines now (or gone): delete from BEING_SPLIT:\n{}",
        done.join("\n")
    );
}

#[test]
fn the_measure_counts_from_fn_to_the_closing_brace_and_skips_tests() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("a")).unwrap();
    std::fs::write(
        src.join("lib.rs"),
        "mod a;\n#[cfg(test)]\nmod tests;\n\n/// Doc.\n#[inline]\npub fn three(\n    x: u8,\n) {\n}\n",
    )
    .unwrap();
    std::fs::write(src.join("tests.rs"), "fn not_library() {}\n").unwrap();
    std::fs::write(
        src.join("a/mod.rs"),
        "trait T {\n    fn bodiless(&self);\n    fn one(&self) {}\n}\nmod inner {\n    pub mod b;\n}\n\
         #[cfg(test)]\nmod t {\n    fn skipped() {\n    }\n}\n",
    )
    .unwrap();
    std::fs::create_dir_all(src.join("a/inner")).unwrap();
    std::fs::write(
        src.join("a/inner/b.rs"),
        "impl S {\n    async fn two() {\n    }\n}\n",
    )
    .unwrap();
    let mut got: Vec<(String, usize)> = measure_library(dir.path())
        .into_iter()
        .map(|m| (m.name, m.lines))
        .collect();
    got.sort();
    assert_eq!(
        got,
        [("one".into(), 1), ("three".into(), 4), ("two".into(), 2)]
    );
}
