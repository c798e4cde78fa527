//! The fast scanner for the YAML subset .seq files are written in. Not yet written: until it is,
//! every file takes the general reader (`None` means "outside the subset").
use super::tree::Node;

pub(crate) fn parse(_text: &str) -> Option<Node> {
    None
}
