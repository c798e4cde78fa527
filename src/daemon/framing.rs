//! Newline-delimited framing with a hard cap, independent of how bytes arrive.
//!
//! The buffer never grows past the cap: an over-long line is reported once as
//! [`Frame::TooLarge`] and the rest of it is skipped up to its newline, so the next request on the
//! same connection is read normally.

use super::protocol::MAX_REQUEST_BYTES;

/// What the byte stream yielded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// One complete line, newline (and a trailing `\r`) removed; blank lines included (they are
    /// answered as bad requests, not skipped).
    Line(Vec<u8>),
    /// A line longer than the cap.
    TooLarge,
    /// The stream ended in the middle of a line.
    Incomplete,
}

/// Splits a byte stream into [`Frame`]s.
#[derive(Debug)]
pub struct Framer {
    buf: Vec<u8>,
    cap: usize,
    /// Inside an over-long line already reported: drop bytes up to the next newline.
    skipping: bool,
}

impl Default for Framer {
    fn default() -> Self {
        Self::with_cap(MAX_REQUEST_BYTES)
    }
}

impl Framer {
    pub fn with_cap(cap: usize) -> Self {
        Self {
            buf: Vec::new(),
            cap,
            skipping: false,
        }
    }

    /// Feeds bytes and appends the frames they complete to `out`, in order.
    pub fn push(&mut self, mut bytes: &[u8], out: &mut Vec<Frame>) {
        while !bytes.is_empty() {
            let newline = bytes.iter().position(|&b| b == b'\n');
            let (chunk, rest) = match newline {
                Some(i) => (&bytes[..i], &bytes[i + 1..]),
                None => (bytes, &[][..]),
            };
            if !self.skipping {
                // A `\r` before the newline is not part of the request.
                let last = chunk.last().or(self.buf.last());
                let allowed = self.cap + usize::from(last == Some(&b'\r'));
                if self.buf.len() + chunk.len() > allowed {
                    self.buf.clear();
                    self.skipping = true;
                    out.push(Frame::TooLarge);
                } else {
                    self.buf.extend_from_slice(chunk);
                }
            }
            if newline.is_some() {
                if !self.skipping {
                    if self.buf.ends_with(b"\r") {
                        self.buf.pop();
                    }
                    out.push(Frame::Line(std::mem::take(&mut self.buf)));
                }
                self.skipping = false;
            }
            bytes = rest;
        }
    }

    /// Inside a line: bytes of it arrived (or are being skipped) but not its newline.
    pub fn mid_line(&self) -> bool {
        self.skipping || !self.buf.is_empty()
    }

    /// The stream ended: a partial line left over is [`Frame::Incomplete`].
    pub fn finish(&mut self) -> Option<Frame> {
        let partial = !self.skipping && !self.buf.iter().all(u8::is_ascii_whitespace);
        self.buf.clear();
        self.skipping = false;
        partial.then_some(Frame::Incomplete)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn frames(cap: usize, chunks: &[&[u8]]) -> (Vec<Frame>, Option<Frame>) {
        let mut framer = Framer::with_cap(cap);
        let mut out = Vec::new();
        for chunk in chunks {
            framer.push(chunk, &mut out);
        }
        (out, framer.finish())
    }

    fn line(text: &str) -> Frame {
        Frame::Line(text.as_bytes().to_vec())
    }

    #[test]
    fn splits_lines_across_chunks() {
        let (out, end) = frames(
            64,
            &[b"{\"cmd\":", b"\"stop\"}\n{\"cmd\"", b":\"status\"}\r\n"],
        );
        assert_eq!(
            out,
            vec![line("{\"cmd\":\"stop\"}"), line("{\"cmd\":\"status\"}")]
        );
        assert_eq!(end, None);
    }

    #[test]
    fn keeps_blank_lines() {
        let (out, end) = frames(64, &[b"\n\r\n  \nabc\n\n"]);
        assert_eq!(
            out,
            vec![line(""), line(""), line("  "), line("abc"), line("")]
        );
        assert_eq!(end, None);
    }

    #[test]
    fn knows_when_a_line_is_open() {
        let mut framer = Framer::with_cap(4);
        let mut out = Vec::new();
        assert!(!framer.mid_line());
        framer.push(b"ab", &mut out);
        assert!(framer.mid_line());
        framer.push(b"c\n", &mut out);
        assert!(!framer.mid_line());
        framer.push(b"abcdefgh", &mut out);
        assert!(framer.mid_line(), "skipping an over-long line");
        framer.push(b"\n", &mut out);
        assert!(!framer.mid_line());
    }

    #[test]
    fn over_long_line_is_reported_once_and_the_next_line_is_read() {
        let long = [b'x'; 100];
        let (out, end) = frames(10, &[&long[..40], &long[40..], b"yy\nok\n"]);
        assert_eq!(out, vec![Frame::TooLarge, line("ok")]);
        assert_eq!(end, None);
    }

    #[test]
    fn cap_is_inclusive() {
        let (out, _) = frames(3, &[b"abc\nabcd\nabc\r\n"]);
        assert_eq!(out, vec![line("abc"), Frame::TooLarge, line("abc")]);
    }

    #[test]
    fn partial_line_at_end_is_incomplete() {
        assert_eq!(frames(64, &[b"ok\n{\"cmd\""]).1, Some(Frame::Incomplete));
        // An over-long tail was already answered.
        assert_eq!(frames(2, &[b"abcdef"]).1, None);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// However the bytes are cut into chunks, the frames are the same, and never exceed the cap.
        #[test]
        fn chunking_does_not_change_frames(
            bytes in proptest::collection::vec(prop_oneof![Just(b'\n'), Just(b'a'), Just(b'\r')], 0..300),
            cuts in proptest::collection::vec(0usize..300, 0..10),
        ) {
            let whole = frames(16, &[&bytes]);
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(bytes.len())).collect();
            cuts.sort_unstable();
            let mut chunks = Vec::new();
            let mut start = 0;
            for cut in cuts {
                chunks.push(&bytes[start..cut]);
                start = cut;
            }
            chunks.push(&bytes[start..]);
            prop_assert_eq!(&frames(16, &chunks), &whole);
            for frame in whole.0 {
                if let Frame::Line(l) = frame {
                    prop_assert!(l.len() <= 16);
                }
            }
        }
    }
}
