//! Manual pages: each binary's pages from its command line (clap_mangen) with an EXAMPLES
//! section taken from `docs/man/PAGE.md` (whose `console` examples the tests run, so they cannot
//! go stale), and motiond.yaml(5) from the table of configuration keys ([`crate::config::keys`]).

use std::io::Write;
use std::path::{Path, PathBuf};

use clap_mangen::Man;
use clap_mangen::roff::{Roff, bold, italic, roman};

use crate::config::keys::KEYS;

/// The EXAMPLES of every page that has them, by page name (`motiond-play`), in Markdown.
const EXAMPLES: &[(&str, &str)] = &[
    ("motiond", include_str!("../docs/man/motiond.md")),
    (
        "motiond-check",
        include_str!("../docs/man/motiond-check.md"),
    ),
    (
        "motiond-estop",
        include_str!("../docs/man/motiond-estop.md"),
    ),
    (
        "motiond-inspect",
        include_str!("../docs/man/motiond-inspect.md"),
    ),
    ("motiond-play", include_str!("../docs/man/motiond-play.md")),
    (
        "motiond-resample",
        include_str!("../docs/man/motiond-resample.md"),
    ),
    (
        "motiond-serve",
        include_str!("../docs/man/motiond-serve.md"),
    ),
    ("motionctl", include_str!("../docs/man/motionctl.md")),
    ("motiond.yaml", include_str!("../docs/man/motiond.yaml.md")),
];

/// The examples of a page, if it has any.
pub fn examples(page: &str) -> Option<&'static str> {
    EXAMPLES.iter().find(|(p, _)| *p == page).map(|(_, e)| *e)
}

/// One page: clap_mangen's sections, EXAMPLES before VERSION.
pub fn render(cmd: clap::Command, w: &mut dyn Write) -> std::io::Result<()> {
    let man = Man::new(cmd.clone());
    let page = cmd.get_display_name().unwrap_or(cmd.get_name()).to_string();
    man.render_title(w)?;
    man.render_name_section(w)?;
    man.render_synopsis_section(w)?;
    man.render_description_section(w)?;
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(w)?;
    }
    if cmd.get_subcommands().any(|s| !s.is_hide_set()) {
        man.render_subcommands_section(w)?;
    }
    if cmd.get_after_help().is_some() || cmd.get_after_long_help().is_some() {
        man.render_extra_section(w)?;
    }
    if let Some(text) = examples(&page) {
        let mut roff = Roff::new();
        roff.control("SH", ["EXAMPLES"]);
        markdown(&mut roff, text);
        roff.to_writer(w)?;
    }
    if cmd.get_version().is_some() {
        man.render_version_section(w)?;
    }
    Ok(())
}

/// Writes the page of `cmd` and of each of its subcommands (`NAME-SUB.1`, as clap_mangen names
/// them) into `dir`; the pages written.
pub fn write_pages(cmd: clap::Command, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let mut written = Vec::new();
    write_tree(cmd, dir, &mut written)?;
    Ok(written)
}

fn write_tree(cmd: clap::Command, dir: &Path, written: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned() {
        write_tree(sub, dir, written)?;
    }
    let page = cmd.get_display_name().unwrap_or(cmd.get_name()).to_string();
    let path = dir.join(format!("{page}.1"));
    let mut file = std::io::BufWriter::new(std::fs::File::create(&path)?);
    render(cmd, &mut file)?;
    file.flush()?;
    written.push(path);
    Ok(())
}

/// motiond.yaml(5): every key of [`KEYS`] with its default and meaning.
pub fn config_page(version: &str, w: &mut dyn Write) -> std::io::Result<()> {
    let mut roff = Roff::new();
    let source = format!("motiond {version}");
    roff.control("TH", ["motiond.yaml", "5", "", source.as_str(), ""]);
    roff.control("SH", ["NAME"]);
    roff.text([roman("motiond.yaml - the configuration of motiond")]);
    roff.control("SH", ["SYNOPSIS"]);
    roff.text([bold("/etc/motiond/motiond.yaml")]);
    roff.control("SH", ["DESCRIPTION"]);
    markdown(
        &mut roff,
        "One YAML file describes the robot and how motiond drives it. `serve`, `play`, `check` \
         and `resample` read `--config FILE`; without one they read `$MOTIOND_CONFIG` when set, \
         else `/etc/motiond/motiond.yaml` (for the installed binaries; in a checkout, \
         `config/motiond.yaml`). Paths in the file are relative to the file. Every key is \
         optional except `robot.model`.\n\n\
         Unknown keys, values of the wrong type and values out of range are refused, all of them \
         at once, one `FILE:LINE:COL: key.path: message` line each.",
    );
    roff.control("SH", ["KEYS"]);
    for key in KEYS {
        roff.control("TP", []);
        roff.text([bold(key.path)]);
        let mut text = inline(&key.meaning.replace("\\|", "|"));
        text.push(roman(format!(". Default: {}.", plain(key.default))));
        roff.text(text);
    }
    roff.control("SH", ["BUSES"]);
    markdown(
        &mut roff,
        "With `backend: buses`, each `buses:` entry is a CAN (SocketCAN or SLCAN) or serial bus \
         and each joint on it gets its protocol, id and unit conversion. Every bus key, per \
         protocol, is in the book: /usr/share/doc/motiond/book/buses.html.",
    );
    if let Some(text) = examples("motiond.yaml") {
        roff.control("SH", ["EXAMPLES"]);
        markdown(&mut roff, text);
    }
    roff.control("SH", ["SEE ALSO"]);
    roff.text([
        bold("motiond"),
        roman("(1), "),
        bold("motionctl"),
        roman("(1), the book: /usr/share/doc/motiond/book/configuration.html"),
    ]);
    roff.to_writer(w)
}

/// Markdown paragraphs and fenced blocks as roff: a paragraph per `.PP`, a block as indented
/// lines kept as written.
fn markdown(roff: &mut Roff, text: &str) {
    let mut paragraph = String::new();
    let mut lines = text.lines();
    let flush = |roff: &mut Roff, paragraph: &mut String| {
        if !paragraph.is_empty() {
            roff.control("PP", []);
            roff.text(inline(paragraph));
            paragraph.clear();
        }
    };
    while let Some(line) = lines.next() {
        if line.trim_start().starts_with("```") {
            flush(roff, &mut paragraph);
            roff.control("PP", [])
                .control("RS", ["4"])
                .control("nf", []);
            for code in lines.by_ref() {
                if code.trim_start().starts_with("```") {
                    break;
                }
                roff.text([roman(code)]);
            }
            roff.control("fi", []).control("RE", []);
        } else if line.trim().is_empty() {
            flush(roff, &mut paragraph);
        } else {
            if !paragraph.is_empty() {
                paragraph.push(' ');
            }
            paragraph.push_str(line.trim());
        }
    }
    flush(roff, &mut paragraph);
}

/// Inline Markdown: `code` in bold, *emphasis* in italics, links as their text.
fn inline(text: &str) -> Vec<clap_mangen::roff::Inline> {
    let text = plain_links(text);
    let mut out = Vec::new();
    for (i, part) in text.split('`').enumerate() {
        if i % 2 == 1 {
            out.push(bold(part));
        } else {
            for (j, piece) in part.split('*').enumerate() {
                if piece.is_empty() {
                    continue;
                }
                out.push(if j % 2 == 1 {
                    italic(piece)
                } else {
                    roman(piece)
                });
            }
        }
    }
    out
}

/// `[text](target)` → `text`.
fn plain_links(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find("](").map(|c| open + c) else {
            break;
        };
        let Some(end) = rest[close..].find(')').map(|e| close + e) else {
            break;
        };
        out.push_str(&rest[..open]);
        out.push_str(&rest[open + 1..close]);
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

/// Inline Markdown as plain text.
fn plain(text: &str) -> String {
    plain_links(text).replace('`', "")
}
