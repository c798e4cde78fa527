//! The control socket's request path on arbitrary bytes: framing never depends on how the bytes
//! arrive, no line exceeds the cap, and every frame parses to a request or a coded refusal.
#![no_main]

use libfuzzer_sys::fuzz_target;
use motiond::daemon::framing::{Frame, Framer};
use motiond::daemon::protocol::{MAX_REQUEST_BYTES, parse_request};

/// A small cap, so that over-long lines are reached by short inputs.
const CAP: usize = 64;

fn frames(chunks: &[&[u8]], cap: usize) -> (Vec<Frame>, Option<Frame>) {
    let mut framer = Framer::with_cap(cap);
    let mut out = Vec::new();
    for chunk in chunks {
        framer.push(chunk, &mut out);
    }
    (out, framer.finish())
}

fuzz_target!(|data: &[u8]| {
    let Some((&cut, bytes)) = data.split_first() else {
        return;
    };
    let cut = usize::from(cut).min(bytes.len());
    let whole = frames(&[bytes], CAP);
    assert_eq!(frames(&[&bytes[..cut], &bytes[cut..]], CAP), whole);
    for frame in &whole.0 {
        if let Frame::Line(line) = frame {
            assert!(line.len() <= CAP);
        }
    }
    // The real cap, and each line through the request parser.
    for frame in frames(&[bytes], MAX_REQUEST_BYTES).0 {
        if let Frame::Line(line) = frame {
            if let Ok(request) = parse_request(&line) {
                // What motionctl would send for it parses again.
                let again = request.to_line();
                assert!(parse_request(again.trim_end().as_bytes()).is_ok(), "{again}");
            }
        }
    }
});
