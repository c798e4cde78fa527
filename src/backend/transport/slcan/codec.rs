//! SLCAN (Lawicel / CANable ASCII): CAN frames as CR-terminated lines over a serial link
//! (protocols.md §5). Replies are never required (firmwares differ); `\r`, `z\r`, `Z\r` are
//! acknowledgements and BEL a refusal. CAN-FD frames go as the CANable 2.0 firmware (and
//! python-can's slcan driver) writes them: `d`/`D` (standard/extended id), `b`/`B` with the bit
//! rate switch, a hex DLC code 0–F and up to 64 data bytes; `Y2`/`Y5` set the data bitrate.

use crate::backend::frame::{CanFrame, FD_LENGTHS, FD_MAX_DATA, fd_len};

/// The longest line: `B` + 8 hex id + DLC + 128 hex data + 4 hex timestamp + `\r`.
pub const MAX_LINE: usize = 143;

pub const BEL: u8 = 0x07;
const CR: u8 = b'\r';
const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// The bitrates an adapter is set to with `Sn`, in the order of n. S7 is 750 kbit/s and S9
/// 83.3 kbit/s as CANable/candleLight firmwares and python-can's slcan driver have them (the
/// original Lawicel S7 was 800 kbit/s).
pub const BITRATES: [u32; 10] = [
    10_000, 20_000, 50_000, 100_000, 125_000, 250_000, 500_000, 750_000, 1_000_000, 83_300,
];

/// The `Sn` command for a bitrate.
pub fn bitrate_command(bitrate: u32) -> Option<&'static [u8]> {
    const COMMANDS: [&[u8]; 10] = [
        b"S0\r", b"S1\r", b"S2\r", b"S3\r", b"S4\r", b"S5\r", b"S6\r", b"S7\r", b"S8\r", b"S9\r",
    ];
    let n = BITRATES.iter().position(|&b| b == bitrate)?;
    COMMANDS.get(n).copied()
}

/// Asks the adapter for its status flags (`F` → `Fxx\r`).
pub const STATUS: &[u8] = b"F\r";

/// Status flags of an `Fxx` reply (Lawicel): what the adapter saw since the last poll.
pub mod status {
    pub const RX_FIFO_FULL: u8 = 1 << 0;
    pub const TX_FIFO_FULL: u8 = 1 << 1;
    pub const ERROR_WARNING: u8 = 1 << 2;
    pub const DATA_OVERRUN: u8 = 1 << 3;
    pub const ERROR_PASSIVE: u8 = 1 << 5;
    pub const ARBITRATION_LOST: u8 = 1 << 6;
    pub const BUS_ERROR: u8 = 1 << 7;
    /// Flags that mean frames were or will be lost: a fault. Error warning and arbitration
    /// lost are normal on a busy bus and only counted.
    pub const FAULTS: u8 = RX_FIFO_FULL | TX_FIFO_FULL | DATA_OVERRUN | ERROR_PASSIVE | BUS_ERROR;
}

/// The data bitrates of CAN-FD adapters (`Yn`), and their commands.
pub const DATA_BITRATES: [(u32, &[u8]); 2] = [(2_000_000, b"Y2\r"), (5_000_000, b"Y5\r")];

/// The `Yn` command for a CAN-FD data bitrate.
pub fn data_bitrate_command(bitrate: u32) -> Option<&'static [u8]> {
    DATA_BITRATES
        .iter()
        .find(|(b, _)| *b == bitrate)
        .map(|(_, c)| *c)
}

pub const OPEN: &[u8] = b"O\r";
pub const CLOSE: &[u8] = b"C\r";

/// Writes `frame` as a line into `out`; returns its length.
pub fn encode(frame: &CanFrame, out: &mut [u8; MAX_LINE]) -> usize {
    let mut n = 0;
    let mut put = |b: u8| {
        if let Some(slot) = out.get_mut(n) {
            *slot = b;
            n += 1;
        }
    };
    let kind = match (frame.fd, frame.brs, frame.extended, frame.rtr) {
        (true, true, false, _) => b'b',
        (true, true, true, _) => b'B',
        (true, false, false, _) => b'd',
        (true, false, true, _) => b'D',
        (false, _, true, false) => b'T',
        (false, _, true, true) => b'R',
        (false, _, false, false) => b't',
        (false, _, false, true) => b'r',
    };
    put(kind);
    let digits = if frame.extended { 8 } else { 3 };
    for shift in (0..digits).rev() {
        put(HEX[((frame.id >> (4 * shift)) & 0xF) as usize]);
    }
    let data = frame.data();
    if frame.fd {
        // The DLC code of the next CAN-FD length; the data padded to it with zeros.
        let len = fd_len(data.len());
        let code = FD_LENGTHS.iter().position(|&l| l == len).unwrap_or(15);
        put(HEX[code]);
        for i in 0..len {
            let b = data.get(i).copied().unwrap_or(0);
            put(HEX[usize::from(b >> 4)]);
            put(HEX[usize::from(b & 0xF)]);
        }
    } else {
        put(b'0' + frame.dlc());
        for &b in data {
            put(HEX[usize::from(b >> 4)]);
            put(HEX[usize::from(b & 0xF)]);
        }
    }
    put(CR);
    n
}

/// The line of `frame` as text (test vectors are written that way).
/// The adapter's status flags (`F` reply) in words.
pub fn status_words(flags: u8) -> String {
    const BITS: [&str; 8] = [
        "receive FIFO full",
        "transmit FIFO full",
        "error warning",
        "data overrun",
        "bit 4",
        "error passive",
        "arbitration lost",
        "bus error",
    ];
    let set: Vec<&str> = (0..8)
        .filter(|b| flags & (1 << b) != 0)
        .map(|b| BITS[b])
        .collect();
    format!("adapter status {flags:#04x}: {}", set.join(", "))
}

#[cfg(test)]
pub(crate) fn line_text(frame: &CanFrame) -> String {
    let mut buf = [0u8; MAX_LINE];
    let n = encode(frame, &mut buf);
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// Bytes of the line for a frame with `data_len` bytes.
pub fn line_len(data_len: usize, extended: bool, fd: bool) -> usize {
    let id = if extended { 8 } else { 3 };
    let data = if fd {
        fd_len(data_len)
    } else {
        data_len.min(8)
    };
    1 + id + 1 + 2 * data + 1
}

/// One unit of adapter output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    Frame(CanFrame),
    /// `\r`, `z\r` or `Z\r`.
    Ack,
    /// BEL: the adapter refused a command.
    Nak,
    /// `Fxx`: the adapter's status flags ([`status`]).
    Status(u8),
    /// A line that is not a frame or acknowledgement (version, status flags, garbage).
    Other,
}

fn hex_digit(c: u8) -> Option<u32> {
    (c as char).to_digit(16)
}

fn hex_value(digits: &[u8]) -> Option<u32> {
    digits
        .iter()
        .try_fold(0u32, |acc, &c| Some(acc << 4 | hex_digit(c)?))
}

/// Parses one line without its `\r`.
pub fn parse_line(line: &[u8]) -> Event {
    let Some((&kind, rest)) = line.split_first() else {
        return Event::Ack;
    };
    if let Some(f) = fd_kind(kind) {
        return parse_fd(f, rest).map_or(Event::Other, Event::Frame);
    }
    let (extended, remote, id_digits) = match kind {
        b't' => (false, false, 3),
        b'T' => (true, false, 8),
        b'r' => (false, true, 3),
        b'R' => (true, true, 8),
        b'z' | b'Z' if rest.is_empty() => return Event::Ack,
        b'F' if rest.len() == 2 => {
            return hex_value(rest).map_or(Event::Other, |v| Event::Status(v as u8));
        }
        _ => return Event::Other,
    };
    let parsed = (|| {
        let id = hex_value(rest.get(..id_digits)?)?;
        let dlc = hex_digit(*rest.get(id_digits)?)? as usize;
        if dlc > 8 || (!extended && id > 0x7FF) || id > 0x1FFF_FFFF {
            return None;
        }
        let body = rest.get(id_digits + 1..)?;
        let data_digits = if remote { 0 } else { 2 * dlc };
        // Optionally followed by a 4-digit timestamp.
        if body.len() != data_digits && body.len() != data_digits + 4 {
            return None;
        }
        let mut data = [0u8; 8];
        for (i, slot) in data.iter_mut().enumerate().take(data_digits / 2) {
            *slot = hex_value(body.get(2 * i..2 * i + 2)?)? as u8;
        }
        let frame = if remote {
            CanFrame::new_remote(id, extended, dlc as u8)
        } else if extended {
            CanFrame::new_extended(id, &data[..dlc])
        } else {
            CanFrame::new(id, &data[..dlc])
        };
        Some(frame)
    })();
    parsed.map_or(Event::Other, Event::Frame)
}

/// (extended, bit rate switch) of a CAN-FD line kind.
fn fd_kind(kind: u8) -> Option<(bool, bool)> {
    match kind {
        b'd' => Some((false, false)),
        b'D' => Some((true, false)),
        b'b' => Some((false, true)),
        b'B' => Some((true, true)),
        _ => None,
    }
}

/// A CAN-FD line after its kind: id, DLC code, data (optionally a 4-digit timestamp).
fn parse_fd((extended, brs): (bool, bool), rest: &[u8]) -> Option<CanFrame> {
    let id_digits = if extended { 8 } else { 3 };
    let id = hex_value(rest.get(..id_digits)?)?;
    let code = hex_digit(*rest.get(id_digits)?)? as usize;
    let len = *FD_LENGTHS.get(code)?;
    if (!extended && id > 0x7FF) || id > 0x1FFF_FFFF {
        return None;
    }
    let body = rest.get(id_digits + 1..)?;
    if body.len() != 2 * len && body.len() != 2 * len + 4 {
        return None;
    }
    let mut data = [0u8; FD_MAX_DATA];
    for (i, slot) in data.iter_mut().enumerate().take(len) {
        *slot = hex_value(body.get(2 * i..2 * i + 2)?)? as u8;
    }
    let mut frame = CanFrame::new_fd(id, extended, &data[..len]);
    frame.brs = brs;
    Some(frame)
}

/// Splits a byte stream from the adapter into lines in a fixed buffer; overlong lines are
/// discarded up to the next `\r` (resynchronisation).
#[derive(Debug)]
pub struct LineReader {
    buf: [u8; MAX_LINE],
    len: usize,
    overflow: bool,
}

impl Default for LineReader {
    fn default() -> Self {
        Self {
            buf: [0; MAX_LINE],
            len: 0,
            overflow: false,
        }
    }
}

impl LineReader {
    /// Feeds one byte; returns an event when a line (or a BEL) completes.
    pub fn push(&mut self, b: u8) -> Option<Event> {
        match b {
            BEL => Some(Event::Nak),
            CR => {
                let event = if self.overflow {
                    Event::Other
                } else {
                    parse_line(&self.buf[..self.len.min(MAX_LINE)])
                };
                self.len = 0;
                self.overflow = false;
                Some(event)
            }
            b'\n' => None,
            _ => {
                match self.buf.get_mut(self.len) {
                    Some(slot) => {
                        *slot = b;
                        self.len += 1;
                    }
                    None => self.overflow = true,
                }
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn line(f: &CanFrame) -> Vec<u8> {
        let mut buf = [0u8; MAX_LINE];
        let n = encode(f, &mut buf);
        buf[..n].to_vec()
    }

    #[test]
    fn can_fd_lines_as_the_canable_2_firmware_and_python_can_write_them() {
        // Extended id with the bit rate switch: `B`, 8 hex digits, the DLC code, the data.
        let f = CanFrame::new_fd(0x8001, true, &[0x01, 0x00, 0x0A]);
        assert_eq!(line(&f), b"B00008001301000A\r");
        // Nine bytes go as the next CAN-FD length, twelve (code 9), padded with zeros.
        let nine = CanFrame::new_fd(0x123, false, &[0xAB; 9]);
        let text = line(&nine);
        assert_eq!(&text[..5], b"b1239");
        assert_eq!(text.len(), 5 + 24 + 1);
        assert!(text.ends_with(b"AB000000\r"));
        // Without the bit rate switch: `d`/`D`; parsed back, with a timestamp too.
        let mut slow = CanFrame::new_fd(0x7FF, false, &[1, 2]);
        slow.brs = false;
        assert_eq!(line(&slow), b"d7FF20102\r");
        assert_eq!(parse_line(b"d7FF2010212AB"), Event::Frame(slow));
        let back = parse_line(&text[..text.len() - 1]);
        let mut padded = [0u8; 12];
        padded[..9].copy_from_slice(&[0xAB; 9]);
        assert_eq!(back, Event::Frame(CanFrame::new_fd(0x123, false, &padded)));
        // A full 64-byte frame fits the longest line.
        let full = CanFrame::new_fd(0x1FFF_FFFF, true, &[0x55; 64]);
        assert_eq!(line(&full).len(), MAX_LINE - 4);
        assert_eq!(parse_line(&line(&full)[..MAX_LINE - 5]), Event::Frame(full));
        assert_eq!(line_len(64, true, true), MAX_LINE - 4);
        assert_eq!(line_len(8, false, false), 22);
    }

    #[test]
    fn vectors() {
        let f = CanFrame::new(0x205, &[0x0F, 0x00, 0xA0, 0x86, 0x01, 0x00]);
        assert_eq!(line(&f), b"t20560F00A0860100\r");
        assert_eq!(line(&CanFrame::new(0x080, &[])), b"t0800\r");
        let f = CanFrame::new(0x02C, &[0x00, 0x00, 0xC0, 0x3F, 0xF4, 0x01, 0x06, 0xFF]);
        assert_eq!(line(&f), b"t02C80000C03FF40106FF\r");
        let f = CanFrame::new_extended(0x2C, &[0x08, 0, 0, 0]);
        assert_eq!(line(&f), b"T0000002C408000000\r");
        assert_eq!(line(&f).len(), line_len(4, true, false));
    }

    #[test]
    fn parses_frames_acks_timestamps_and_refusals() {
        let f = CanFrame::new(0x205, &[0x0F, 0x00, 0xA0, 0x86, 0x01, 0x00]);
        assert_eq!(parse_line(b"t20560F00A0860100"), Event::Frame(f));
        assert_eq!(parse_line(b"t20560f00a0860100"), Event::Frame(f));
        assert_eq!(parse_line(b"t20560F00A08601001234"), Event::Frame(f));
        assert_eq!(parse_line(b"z"), Event::Ack);
        assert_eq!(parse_line(b""), Event::Ack);
        assert_eq!(parse_line(b"t2059"), Event::Other);
        assert_eq!(parse_line(b"t20560F00A08601"), Event::Other);
        assert_eq!(parse_line(b"V1013"), Event::Other);
        let mut r = LineReader::default();
        let events: Vec<Event> = b"t0800\rZ\r\x07junk\rt2"
            .iter()
            .filter_map(|&b| r.push(b))
            .collect();
        assert_eq!(
            events,
            [
                Event::Frame(CanFrame::new(0x80, &[])),
                Event::Ack,
                Event::Nak,
                Event::Other
            ]
        );
    }

    #[test]
    fn bitrates() {
        assert_eq!(bitrate_command(1_000_000), Some(&b"S8\r"[..]));
        assert_eq!(bitrate_command(500_000), Some(&b"S6\r"[..]));
        assert_eq!(bitrate_command(750_000), Some(&b"S7\r"[..]));
        assert_eq!(bitrate_command(83_300), Some(&b"S9\r"[..]));
        assert_eq!(bitrate_command(800_000), None);
    }

    #[test]
    fn remote_requests_and_status_replies() {
        // Another host polls ODrive node 20's encoder estimates: a request, not a frame of data.
        let rtr = CanFrame::new_remote(0x298, false, 8);
        assert_eq!(parse_line(b"r2988"), Event::Frame(rtr));
        assert!(rtr.rtr && rtr.data().is_empty() && rtr.dlc() == 8);
        assert_eq!(line(&rtr), b"r2988\r");
        assert_eq!(
            parse_line(b"R0000002C0"),
            Event::Frame(CanFrame::new_remote(0x2C, true, 0))
        );
        assert_ne!(
            parse_line(b"r2988"),
            Event::Frame(CanFrame::new(0x298, &[]))
        );
        assert_eq!(parse_line(b"F00"), Event::Status(0));
        assert_eq!(parse_line(b"F88"), Event::Status(0x88));
        assert_eq!(parse_line(b"Fzz"), Event::Other);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn frames_round_trip(id in 0u32..0x800, ext_id in 0u32..0x2000_0000, extended: bool,
                             data in proptest::collection::vec(any::<u8>(), 0..=8)) {
            let f = if extended { CanFrame::new_extended(ext_id, &data) } else { CanFrame::new(id, &data) };
            let l = line(&f);
            let mut r = LineReader::default();
            let events: Vec<Event> = l.iter().filter_map(|&b| r.push(b)).collect();
            prop_assert_eq!(events, vec![Event::Frame(f)]);
        }

        #[test]
        fn reader_never_panics(input in proptest::collection::vec(any::<u8>(), 0..100)) {
            let mut r = LineReader::default();
            for b in input { let _ = r.push(b); }
        }
    }
}
