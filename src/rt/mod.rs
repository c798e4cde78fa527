//! The real-time playback loop (issue 5).
