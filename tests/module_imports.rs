//! The library's modules import one way: no two modules at the same level of the tree depend on
//! each other, directly or through others (an import circle).
//!
//! Every path a library file names (`use` trees, paths in code and types, and `crate::…`/`super::…`
//! token runs inside macro calls) is resolved to the module it points into. At each depth of the
//! module tree the modules are collapsed to their ancestors at that depth and the import graph
//! among them is searched for strongly connected components. A module using its ancestor's items
//! or declaring its children is structure, not an import, and is left out.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

type Module = Vec<String>;

/// Every library module (src/bin excluded) and its file.
fn modules(src: &Path) -> BTreeMap<Module, PathBuf> {
    let mut found = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(src).unwrap();
            if rel.starts_with("bin") {
                continue;
            }
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let mut module: Module = rel
                .with_extension("")
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(module.last().map(String::as_str), Some("mod" | "lib")) {
                module.pop();
            }
            found.insert(module, path);
        }
    }
    found
}

/// Collects the absolute paths one file names.
struct Names<'a> {
    module: &'a [String],
    children: &'a BTreeSet<String>,
    found: Vec<Vec<String>>,
}

impl Names<'_> {
    /// `segments` as written in `self.module`, made absolute (`None`: not a path into the crate).
    fn absolute(&self, segments: &[String]) -> Option<Vec<String>> {
        let first = segments.first()?;
        let mut base: Vec<String> = match first.as_str() {
            "crate" => Vec::new(),
            "self" => self.module.to_vec(),
            "super" => {
                let mut base = self.module.to_vec();
                let mut rest = segments;
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop()?;
                    rest = &rest[1..];
                }
                base.extend(rest.iter().cloned());
                return Some(base);
            }
            // A child module named without `self::`.
            name if self.children.contains(name) => {
                let mut base = self.module.to_vec();
                base.extend(segments.iter().cloned());
                return Some(base);
            }
            _ => return None,
        };
        base.extend(segments.iter().skip(1).cloned());
        Some(base)
    }

    fn add(&mut self, segments: &[String]) {
        if let Some(path) = self.absolute(segments) {
            self.found.push(path);
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut full = prefix.clone();
                if n.ident != "self" {
                    full.push(n.ident.to_string());
                }
                self.add(&full);
            }
            syn::UseTree::Rename(r) => {
                let mut full = prefix.clone();
                if r.ident != "self" {
                    full.push(r.ident.to_string());
                }
                self.add(&full);
            }
            syn::UseTree::Glob(_) => {
                let full = prefix.clone();
                self.add(&full);
            }
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }

    /// `crate :: a :: b` (or `super :: …`) runs in a macro's tokens.
    fn tokens(&mut self, tokens: proc_macro2::TokenStream) {
        let mut run: Vec<String> = Vec::new();
        let mut colons = 0;
        for tt in tokens {
            match tt {
                proc_macro2::TokenTree::Ident(i) => {
                    let word = i.to_string();
                    if run.is_empty() {
                        if word == "crate" || word == "super" {
                            run.push(word);
                        }
                    } else if colons == 2 {
                        run.push(word);
                    } else {
                        self.flush(&mut run);
                        if word == "crate" || word == "super" {
                            run.push(word);
                        }
                    }
                    colons = 0;
                }
                proc_macro2::TokenTree::Punct(p) if p.as_char() == ':' && !run.is_empty() => {
                    colons += 1;
                }
                proc_macro2::TokenTree::Group(g) => {
                    self.flush(&mut run);
                    colons = 0;
                    self.tokens(g.stream());
                }
                _ => {
                    self.flush(&mut run);
                    colons = 0;
                }
            }
        }
        self.flush(&mut run);
    }

    fn flush(&mut self, run: &mut Vec<String>) {
        if run.len() > 1 {
            let segments = std::mem::take(run);
            self.add(&segments);
        }
        run.clear();
    }
}

impl<'ast> Visit<'ast> for Names<'_> {
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &u.tree);
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        self.add(&segments);
        syn::visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.tokens(m.tokens.clone());
        syn::visit::visit_macro(self, m);
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        // Inline modules (`mod tests { … }`) count as the file's own.
        syn::visit::visit_item_mod(self, m);
    }
}

/// The longest known module `path` points into.
fn target(known: &BTreeMap<Module, PathBuf>, path: &[String]) -> Module {
    (0..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|m| known.contains_key(m))
        .unwrap_or_default()
}

/// Which module imports which (ancestors and descendants left out), from the source.
fn imports(src: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let known = modules(src);
    let mut graph = BTreeMap::new();
    for (module, file) in &known {
        let text = std::fs::read_to_string(file).unwrap();
        let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let children: BTreeSet<String> = known
            .keys()
            .filter(|m| m.len() == module.len() + 1 && m.starts_with(module))
            .filter_map(|m| m.last().cloned())
            .collect();
        let mut names = Names {
            module,
            children: &children,
            found: Vec::new(),
        };
        names.visit_file(&ast);
        let targets: BTreeSet<Module> = names
            .found
            .iter()
            .map(|p| target(&known, p))
            .filter(|t| !t.starts_with(module) && !module.starts_with(t))
            .collect();
        graph.insert(module.clone(), targets);
    }
    graph
}

/// The circles among the modules collapsed to `depth` segments: each strongly connected
/// component of more than one module, with one edge of it to show where to cut.
fn circles(graph: &BTreeMap<Module, BTreeSet<Module>>, depth: usize) -> Vec<Vec<Module>> {
    let cut = |m: &Module| m[..m.len().min(depth)].to_vec();
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (from, tos) in graph {
        for to in tos {
            let (a, b) = (cut(from), cut(to));
            if a != b && !a.starts_with(&b) && !b.starts_with(&a) {
                edges.entry(a).or_default().insert(b);
            }
        }
    }
    // Tarjan's strongly connected components.
    struct Tarjan<'a> {
        edges: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<Module, (usize, usize)>,
        stack: Vec<Module>,
        on_stack: BTreeSet<Module>,
        next: usize,
        found: Vec<Vec<Module>>,
    }
    impl Tarjan<'_> {
        fn visit(&mut self, v: &Module) {
            self.index.insert(v.clone(), (self.next, self.next));
            self.next += 1;
            self.stack.push(v.clone());
            self.on_stack.insert(v.clone());
            for w in self.edges.get(v).into_iter().flatten() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.index[v].1.min(self.index[w].1);
                    self.index.get_mut(v).unwrap().1 = low;
                } else if self.on_stack.contains(w) {
                    let low = self.index[v].1.min(self.index[w].0);
                    self.index.get_mut(v).unwrap().1 = low;
                }
            }
            if self.index[v].0 == self.index[v].1 {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(&w);
                    let done = &w == v;
                    component.push(w);
                    if done {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut t = Tarjan {
        edges: &edges,
        index: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        found: Vec::new(),
    };
    let nodes: Vec<Module> = edges.keys().cloned().collect();
    for v in &nodes {
        if !t.index.contains_key(v) {
            t.visit(v);
        }
    }
    t.found
}

fn name(m: &Module) -> String {
    if m.is_empty() {
        "crate".into()
    } else {
        m.join("::")
    }
}

/// Circles being cut on other branches this round, each by the work that owns those modules
/// Circles being cut on other branches this round, each by the work that owns those modules; none
/// is left. An entry that is no longer a circle fails the test too: delete it.
const BEING_CUT: &[&str] = &[];

#[test]
fn the_library_has_no_import_circles() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = imports(&src);
    let depth = graph.keys().map(Vec::len).max().unwrap_or(1);
    let mut report = Vec::new();
    let mut seen = BTreeSet::new();
    let mut found = Vec::new();
    for d in 1..=depth {
        for component in circles(&graph, d) {
            if !seen.insert(component.clone()) {
                continue;
            }
            let members: BTreeSet<&Module> = component.iter().collect();
            let cut = |m: &Module| m[..m.len().min(d)].to_vec();
            let mut why = Vec::new();
            for (from, tos) in &graph {
                for to in tos {
                    let (a, b) = (cut(from), cut(to));
                    if a != b && members.contains(&a) && members.contains(&b) {
                        why.push(format!("{} → {}", name(from), name(to)));
                    }
                }
            }
            let members = component.iter().map(name).collect::<Vec<_>>().join(" ↔ ");
            found.push(members.clone());
            if !BEING_CUT.contains(&members.as_str()) {
                report.push(format!("{members}: {}", why.join(", ")));
            }
        }
    }
    println!(
        "{} modules, {} imports between them, {} circles: {found:?}",
        graph.len(),
        graph.values().map(BTreeSet::len).sum::<usize>(),
        found.len()
    );
    for cut in BEING_CUT {
        assert!(
            found.iter().any(|f| f == cut),
            "`{cut}` is no longer a circle: delete it from BEING_CUT"
        );
    }
    assert!(
        report.is_empty(),
        "import circles (cut one import of each):\n{}",
        report.join("\n")
    );
}

#[test]
fn a_circle_between_siblings_is_found_and_parent_child_is_not_one() {
    let m = |s: &str| -> Module { s.split("::").map(String::from).collect() };
    let graph: BTreeMap<Module, BTreeSet<Module>> = [
        (m("rt"), [m("rt::player")].into()),
        (m("rt::player"), [m("rt"), m("rt::slot")].into()),
        (m("rt::slot"), [m("rt::player"), m("trajectory")].into()),
        (m("trajectory"), BTreeSet::new()),
    ]
    .into();
    assert!(circles(&graph, 1).is_empty());
    assert_eq!(
        circles(&graph, 2),
        vec![vec![m("rt::player"), m("rt::slot")]]
    );
}
