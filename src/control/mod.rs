//! The control socket protocol (issue 6).
