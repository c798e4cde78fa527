//! The robot: its model types ([`World`], [`Skeleton`], [`Joint`], [`Dof`], [`Limits`]) and the
//! readers that build them from a model file (SKEL, URDF, SDF or XODE). [`load`] is the one entry
//! point callers use.
//!
//! The format is chosen by the document's root element (`<skel>`, `<robot>`, `<sdf>`, `<xode>`),
//! not by the file name; the extension only decides which reader reports a file whose root
//! cannot be found. Every reader builds the same [`World`], so everything downstream (limits,
//! joint sets, mapping, proof, buses) does not know which format the robot came from.

use std::path::Path;

use crate::diag::{Diagnostic, Diagnostics, FileError};

pub mod sdf;
pub mod skel;
pub mod urdf;
mod world;
pub(crate) mod xml;
pub mod xode;

pub use world::*;

/// The robot model formats motiond reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Skel,
    Urdf,
    Sdf,
    Xode,
}

impl Format {
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Skel => "skel",
            Format::Urdf => "urdf",
            Format::Sdf => "sdf",
            Format::Xode => "xode",
        }
    }

    /// By root element name.
    fn of_root(name: &str) -> Option<Format> {
        match name {
            "skel" => Some(Format::Skel),
            "robot" => Some(Format::Urdf),
            "sdf" => Some(Format::Sdf),
            "xode" => Some(Format::Xode),
            _ => None,
        }
    }

    /// By file extension, for files whose root element cannot be read.
    fn of_path(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "skel" => Some(Format::Skel),
            "urdf" => Some(Format::Urdf),
            "sdf" | "world" => Some(Format::Sdf),
            "xode" => Some(Format::Xode),
            _ => None,
        }
    }
}

/// Reads a robot model file of any supported format.
pub fn load(path: &Path, options: &Options) -> Result<World, FileError> {
    let text = xml::read_text(path, "an XML robot model (.skel, .urdf, .sdf or .xode)")?;
    parse(&text, path, options)
}

/// [`load`] on text already read; `path` is used in messages and for the extension.
pub fn parse(text: &str, path: &Path, options: &Options) -> Result<World, FileError> {
    parse_as(detect(text, path)?, text, path, options)
}

/// Which format `text` is in.
pub fn detect(text: &str, path: &Path) -> Result<Format, FileError> {
    match xml::root_element(text) {
        Some(root) => match Format::of_root(root) {
            Some(f) => Ok(f),
            None => Err(refusal(
                text,
                path,
                root,
                format!(
                    "root element <{root}> is not a robot model; expected <skel> (DART SKEL), \
                     <robot> (URDF), <sdf> (SDF) or <xode> (XODE)"
                ),
            )),
        },
        // No element to go by (legacy SKEL, broken XML, not XML): the extension picks the reader
        // whose messages fit, SKEL by default (it recognises its own legacy format) — unless the
        // text is not XML at all, which no reader takes.
        None => match Format::of_path(path) {
            Some(f) => Ok(f),
            None => {
                let rest = text.trim_start_matches(['\u{feff}', ' ', '\t', '\r', '\n']);
                if rest.is_empty() || rest.starts_with('<') || rest.starts_with("dofs") {
                    return Ok(Format::Skel);
                }
                let found: String = rest.chars().take(12).collect();
                let at = text.len() - rest.len();
                let (line, col) = crate::diag::LineIndex::new(text).line_col(at);
                Err(FileError::Invalid(Diagnostics(vec![Diagnostic::new(
                    path,
                    line,
                    col,
                    format!(
                        "not an XML file: found '{found}'; expected a robot model: an XML \
                         document whose root element is <skel> (DART SKEL), <robot> (URDF), \
                         <sdf> (SDF) or <xode> (XODE)"
                    ),
                )])))
            }
        },
    }
}

/// Reads `text` as the given format.
pub fn parse_as(
    format: Format,
    text: &str,
    path: &Path,
    options: &Options,
) -> Result<World, FileError> {
    match format {
        Format::Skel => skel::parse(text, path),
        Format::Urdf => urdf::parse(text, path, options),
        Format::Sdf => sdf::parse(text, path),
        Format::Xode => xode::parse(text, path),
    }
}

fn refusal(text: &str, path: &Path, root: &str, message: String) -> FileError {
    let at = text.find(&format!("<{root}")).map_or(0, |i| i + 1);
    let (line, col) = crate::diag::LineIndex::new(text).line_col(at);
    FileError::Invalid(Diagnostics(vec![Diagnostic::new(path, line, col, message)]))
}

#[cfg(test)]
mod tests {
    #[test]
    fn text_that_is_not_xml_is_refused_naming_every_model_format() {
        let err = super::parse(
            "hello robot",
            std::path::Path::new("r.txt"),
            &super::Options::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.starts_with("r.txt:1:1: not an XML file: found 'hello robot'"),
            "{err}"
        );
        assert!(
            err.contains("<robot> (URDF), <sdf> (SDF) or <xode> (XODE)"),
            "{err}"
        );
    }

    use super::*;

    #[test]
    fn the_root_element_chooses_the_reader_whatever_the_extension() {
        let p = Path::new("robot.skel");
        assert_eq!(detect("<robot name='r'/>", p).unwrap(), Format::Urdf);
        assert_eq!(
            detect("<?xml version='1.0'?><sdf/>", p).unwrap(),
            Format::Sdf
        );
        assert_eq!(
            detect("<xode/>", Path::new("a.urdf")).unwrap(),
            Format::Xode
        );
        assert_eq!(
            detect("<skel/>", Path::new("a.urdf")).unwrap(),
            Format::Skel
        );
        assert_eq!(
            detect("garbage", Path::new("a.urdf")).unwrap(),
            Format::Urdf
        );
        assert_eq!(detect("dofs 3", Path::new("a.txt")).unwrap(), Format::Skel);
    }

    #[test]
    fn an_unknown_root_is_refused_at_its_element() {
        let e = detect("<?xml version='1.0'?>\n  <mujoco/>", Path::new("m.xml")).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("m.xml:2:4: root element <mujoco> is not a robot model"),
            "{e}"
        );
    }
}
