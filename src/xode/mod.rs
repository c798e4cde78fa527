//! XODE → World (in progress).
use crate::diag::FileError;
use crate::skel::World;
use std::path::Path;
pub fn parse(text: &str, path: &Path) -> Result<World, FileError> {
    let mut ctx = crate::model::xml::Ctx::new(text, path);
    ctx.error(0, "XODE is not read yet");
    Err(ctx.into_error())
}
