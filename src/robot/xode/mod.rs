//! XODE (the ODE interchange draft) → [`World`], as PyODE 1.2.1's reader implements it, with the
//! project policy of ../shared/docs/xode-semantics.md.
//!
//! `read` walks the document with PyODE's per-element rules (which children each element takes,
//! transparent groups, vector and number syntax, axis parameters) and collects bodies and joints;
//! `build` resolves the links (postlink included) and makes one skeleton per `<world>`:
//! joints in document order, hinge → revolute, slider → prismatic, universal and hinge2 →
//! universal, ball, fixed → weld; `amotor` is validated but adds no DOF. `LoStop`/`HiStop` are the
//! position limits; nothing else of ODE's motor and solver parameters is a limit.

use std::path::Path;

use crate::diag::FileError;
use crate::robot::world::World;
use crate::robot::xml::{self, Ctx};

mod build;
mod read;
#[cfg(test)]
mod tests;

/// Reads an XODE file.
pub fn load(path: &Path) -> Result<World, FileError> {
    let text = xml::read_text(path, "an XODE document")?;
    parse(&text, path)
}

/// Parses XODE text; `path` is only used in messages.
pub fn parse(text: &str, path: &Path) -> Result<World, FileError> {
    let mut ctx = Ctx::new(text, path);
    let Some(doc) = ctx.parse(text) else {
        return Err(ctx.into_error());
    };
    let Some(document) = read::document(&mut ctx, &doc) else {
        return Err(ctx.into_error());
    };
    let skeletons = build::skeletons(&mut ctx, &document);
    if ctx.failed() {
        Err(ctx.into_error())
    } else {
        Ok(World { skeletons })
    }
}
