//! Bus and per-joint drive settings (issue 7).
