//! SKEL (DART's XML robot description) → [`World`].
//!
//! The reader agrees with DART 6.20 wherever DART loads a file cleanly: the same joints, DOF names,
//! DOF order, limits, actuators and initial values. Where DART silently renames, drops, hangs or
//! crashes, the reader refuses with `FILE:LINE:COL: message` (see `../shared/docs/policy.md`).
//! This is the only module that knows XML.

use std::path::Path;

use crate::diag::{Diagnostic, Diagnostics};
use crate::robot::world::World;

mod assemble;
mod json;
mod read;
#[cfg(test)]
mod tests;

/// Why a SKEL file could not be used: unreadable, or every problem found in it.
pub use crate::diag::FileError as Error;

/// Reads and validates a SKEL file.
pub fn load(path: &Path) -> Result<World, Error> {
    let bytes = crate::file::read(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    match std::str::from_utf8(&bytes) {
        Ok(text) => parse(text, path),
        Err(e) => {
            // Report where the bad byte is rather than a bare I/O error.
            let valid = bytes.get(..e.valid_up_to()).unwrap_or_default();
            let text = String::from_utf8_lossy(valid);
            let (line, col) = crate::diag::LineIndex::new(&text).line_col(text.len());
            Err(Error::Invalid(Diagnostics(vec![Diagnostic::new(
                path,
                line,
                col,
                "invalid UTF-8; expected an XML SKEL file in UTF-8",
            )])))
        }
    }
}

/// Parses SKEL text; `path` is only used in messages.
pub fn parse(text: &str, path: &Path) -> Result<World, Error> {
    let mut ctx = read::Ctx::new(text, path);
    let start = text.len()
        - text
            .trim_start_matches(['\u{feff}', ' ', '\t', '\r', '\n'])
            .len();
    let rest = text.get(start..).unwrap_or_default();
    if !rest.is_empty() && !rest.starts_with('<') {
        let message = if rest.starts_with("dofs") {
            "this is a legacy (pre-XML, RTQL8) .skel file, which DART no longer reads; expected an \
             XML document with a <skel> root element"
                .to_string()
        } else {
            let found: String = rest.chars().take(12).collect();
            format!(
                "not an XML file: found '{found}'; expected an XML document with a <skel> root element"
            )
        };
        ctx.error(start, message);
        return Err(ctx.into_error());
    }
    let doc = match roxmltree::Document::parse(text) {
        Ok(doc) => doc,
        Err(e) => {
            ctx.diags.push(crate::robot::xml::syntax_error(path, &e));
            return Err(ctx.into_error());
        }
    };
    let raw = read::world(&mut ctx, &doc);
    let skeletons = assemble::world(&mut ctx, raw);
    if ctx.diags.is_empty() {
        Ok(World { skeletons })
    } else {
        Err(ctx.into_error())
    }
}

/// The `inspect skel` JSON shape of ../shared/docs/inspect-json.md.
pub fn inspect_json(world: &World) -> serde_json::Value {
    json::inspect(world)
}
