//! Every command example of the README and the book (`docs/src`) that shows its output runs here,
//! and its output is compared with what the page shows — so a page cannot go stale.
//!
//! The manual pages' EXAMPLES (`docs/man/*.md`) are run the same way.
//!
//! An example is a ```` ```console ```` block: `$ COMMAND` lines, each followed by the output it
//! prints (stdout and stderr as a terminal shows them, interleaved). A block runs as one bash
//! session (variables and files carry over between its commands) in a scratch copy of the
//! checkout's `config/` and `docs/examples/`, with `../shared` beside it, the binaries this test
//! built first on `PATH` (`cargo run --release --bin NAME --` runs that binary) and nothing but
//! the shell's own behaviour: no `pipefail`, so a pipeline's status is its last command's, as in a
//! reader's shell. Every command must exit 0; one that is meant to fail shows its status with
//! `; echo "exit $?"`. Where the output varies from run to run the page elides it: `…` on a line
//! of its own stands for any number of lines, `…` inside a line for any text on that line.
//!
//! Commands that need hardware, root or a long build go in ```` ```sh ```` blocks, which are shown
//! and not run.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

struct Example {
    page: PathBuf,
    line: usize,
    /// Each command with its expected output.
    steps: Vec<(String, String)>,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The pages: the README, every Markdown file of the book and the manual pages' examples.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![root().join("README.md")];
    let mut dirs = vec![root().join("docs/src"), root().join("docs/man")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                pages.push(path);
            }
        }
    }
    pages.sort();
    pages
}

fn examples(page: &Path) -> Vec<Example> {
    let text = std::fs::read_to_string(page).unwrap();
    let mut out = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((n, line)) = lines.next() {
        let fence = line.trim_start();
        if !fence.starts_with("```") {
            continue;
        }
        let console = fence.trim_start_matches('`').trim() == "console";
        let mut steps: Vec<(String, String)> = Vec::new();
        let mut continued = false;
        for (m, line) in lines.by_ref() {
            if line.trim_start().starts_with("```") {
                break;
            }
            if !console {
                continue;
            }
            if continued {
                let (cmd, _) = steps.last_mut().unwrap();
                cmd.push('\n');
                cmd.push_str(line);
                continued = line.ends_with('\\');
            } else if let Some(cmd) = line.strip_prefix("$ ") {
                steps.push((cmd.to_string(), String::new()));
                continued = cmd.ends_with('\\');
            } else if let Some((_, expected)) = steps.last_mut() {
                expected.push_str(line);
                expected.push('\n');
            } else {
                panic!(
                    "{}:{}: a console block's output before its first `$ ` command",
                    page.display(),
                    m + 1
                );
            }
        }
        if console {
            assert!(
                !steps.is_empty(),
                "{}:{}: a console block without a `$ ` command",
                page.display(),
                n + 1
            );
            out.push(Example {
                page: page.to_path_buf(),
                line: n + 1,
                steps,
            });
        }
    }
    out
}

/// The page's elisions in snapbox's words: a line `…` is `...`, `…` in a line is `[..]`.
fn pattern(expected: &str) -> String {
    if expected.is_empty() {
        return String::new();
    }
    expected
        .lines()
        .map(|l| {
            if l.trim() == "…" {
                "...".to_string()
            } else {
                l.replace('…', "[..]")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// A scratch checkout: copies of `config/` and `docs/examples/` (examples may write beside
/// them), `../shared` beside it.
fn scratch(corpus: Option<&Path>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let top = dir.path().join("motiond");
    for sub in ["config", "docs/examples"] {
        copy_tree(&root().join(sub), &top.join(sub));
    }
    if let Some(corpus) = corpus {
        std::fs::create_dir_all(dir.path().join("shared")).unwrap();
        std::os::unix::fs::symlink(corpus, dir.path().join("shared/corpus")).unwrap();
    }
    dir
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Runs the example's commands in one bash session; each command's output and status.
fn run(example: &Example, cwd: &Path) -> Vec<(String, i32)> {
    const MARK: &str = "\u{1}doc-example-status";
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_motiond"));
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // `cargo run [--release] --bin NAME -- ARGS` is the binary this test run built.
    let mut script = String::from(
        "exec 2>&1\n\
         cargo() {\n\
           [ \"$1\" = run ] || { echo \"doc examples run no cargo $1\"; return 2; }\n\
           shift; local bin=\n\
           while [ $# -gt 0 ]; do case \"$1\" in\n\
             --release) shift ;; --bin) bin=$2; shift 2 ;; --) shift; break ;;\n\
             *) echo \"doc examples: cargo run $1 is not supported\"; return 2 ;;\n\
           esac; done\n\
           \"$bin\" \"$@\"\n\
         }\n",
    );
    for (cmd, _) in &example.steps {
        script.push_str(cmd);
        script.push_str(&format!("\nprintf '\\n{MARK} %d\\n' $?\n"));
    }
    let out = Command::new("timeout")
        .args(["300", "bash", "--norc", "--noprofile", "-c", &script])
        .current_dir(cwd)
        .env("PATH", path)
        .env("LC_ALL", "C.UTF-8")
        .env("COLUMNS", "100")
        .env_remove("RUST_LOG")
        .env_remove("MOTIOND_CONFIG")
        .env_remove("RUST_BACKTRACE")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut results = Vec::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find(MARK) {
        let output = rest[..at].strip_suffix('\n').unwrap_or(&rest[..at]);
        let after = &rest[at + MARK.len()..];
        let end = after.find('\n').unwrap_or(after.len());
        let status: i32 = after[..end].trim().parse().unwrap();
        results.push((output.to_string(), status));
        rest = after.get(end + 1..).unwrap_or("");
    }
    assert_eq!(
        results.len(),
        example.steps.len(),
        "{}:{}: the session ended early ({}):\n{text}",
        example.page.display(),
        example.line,
        out.status
    );
    results
}

#[test]
fn every_console_example_prints_what_its_page_shows() {
    let corpus = common::corpus();
    let mut ran = 0;
    let mut failures = Vec::new();
    for page in pages() {
        for example in examples(&page) {
            let needs_corpus = example.steps.iter().any(|(c, _)| c.contains("../shared"));
            if needs_corpus && corpus.is_none() {
                continue;
            }
            let dir = scratch(corpus.as_deref());
            let results = run(&example, &dir.path().join("motiond"));
            let shown = example.page.strip_prefix(root()).unwrap().display();
            for ((cmd, expected), (actual, status)) in example.steps.iter().zip(&results) {
                let verdict = snapbox::Assert::new().action_env("DOC_EXAMPLES").try_eq(
                    None,
                    actual.clone().into(),
                    pattern(expected).into(),
                );
                if *status != 0 {
                    failures.push(format!(
                        "{shown}:{}: `{cmd}` exited {status}:\n{actual}",
                        example.line
                    ));
                } else if let Err(e) = verdict {
                    failures.push(format!("{shown}:{}: `{cmd}`:\n{e}", example.line));
                }
            }
            ran += 1;
        }
    }
    eprintln!("{ran} console examples run");
    assert!(
        failures.is_empty(),
        "{} example command(s) differ from their page:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// mdBook's id of a heading: its text without code marks, lower case, spaces as `-`, only
/// letters, digits, `-` and `_` kept.
fn anchor(heading: &str) -> String {
    heading
        .replace('`', "")
        .chars()
        .filter_map(|c| match c {
            c if c.is_whitespace() => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c.to_ascii_lowercase()),
            _ => None,
        })
        .collect()
}

fn anchors(page: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(page).unwrap();
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.push(anchor(line.trim_start_matches('#').trim()));
        }
    }
    out
}

#[test]
fn every_link_between_pages_resolves() {
    let mut broken = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let mut fenced = false;
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
            }
            if fenced {
                continue;
            }
            for link in line.split("](").skip(1) {
                let Some(target) = link.split(')').next() else {
                    continue;
                };
                if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                let (file, fragment) = target.split_once('#').unwrap_or((target, ""));
                let file = if file.is_empty() {
                    page.clone()
                } else {
                    page.parent().unwrap().join(file)
                };
                let shown = page.strip_prefix(root()).unwrap().display();
                if !file.exists() {
                    broken.push(format!("{shown}:{}: {target}: no such file", n + 1));
                } else if !fragment.is_empty() && !anchors(&file).iter().any(|a| a == fragment) {
                    broken.push(format!("{shown}:{}: {target}: no such heading", n + 1));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// A page the summary does not list is not in the book.
#[test]
fn every_page_of_the_book_is_in_its_summary() {
    let summary = std::fs::read_to_string(root().join("docs/src/SUMMARY.md")).unwrap();
    for page in pages() {
        let Ok(rel) = page.strip_prefix(root().join("docs/src")) else {
            continue;
        };
        let rel = rel.display().to_string();
        assert!(
            rel == "SUMMARY.md" || summary.contains(&format!("]({rel})")),
            "docs/src/{rel} is not in docs/src/SUMMARY.md"
        );
    }
}

/// Every manual page the package installs has its EXAMPLES, and motiond.yaml(5) every key.
#[test]
fn the_manual_pages_have_examples_and_every_configuration_key() {
    let dir = tempfile::tempdir().unwrap();
    for bin in [
        env!("CARGO_BIN_EXE_motiond"),
        env!("CARGO_BIN_EXE_motionctl"),
    ] {
        let out = Command::new(bin)
            .args(["man", "--dir"])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{bin} man: {out:?}");
    }
    for page in [
        "motiond.1",
        "motiond-check.1",
        "motiond-estop.1",
        "motiond-inspect.1",
        "motiond-play.1",
        "motiond-resample.1",
        "motiond-serve.1",
        "motionctl.1",
        "motiond.yaml.5",
    ] {
        let text = std::fs::read_to_string(dir.path().join(page)).unwrap();
        assert!(text.contains("\n.SH EXAMPLES\n"), "{page} has no EXAMPLES");
    }
    let yaml = std::fs::read_to_string(dir.path().join("motiond.yaml.5")).unwrap();
    for key in motiond::config::keys::KEYS {
        assert!(
            yaml.contains(&format!("\\fB{}\\fR", key.path.replace('-', "\\-"))),
            "motiond.yaml.5 does not describe {}",
            key.path
        );
    }
}
