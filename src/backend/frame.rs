//! What flows through a CAN transport: frames (classic and FD) as `Copy` values, and what they
//! cost on the wire, for the bus budget.

/// Most data bytes a CAN-FD frame carries.
pub const FD_MAX_DATA: usize = 64;
/// Most data bytes a classic CAN frame carries.
pub const CLASSIC_MAX_DATA: usize = 8;

/// A CAN frame: classic (at most 8 data bytes) or FD (at most 64). `Copy`, so queues of frames
/// never allocate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CanFrame {
    /// 11-bit standard or 29-bit extended identifier.
    pub id: u32,
    pub extended: bool,
    /// A remote transmission request: asks the node owning `id` to send; carries no data.
    pub rtr: bool,
    /// A CAN-FD frame (up to 64 data bytes).
    pub fd: bool,
    /// CAN-FD: the data phase at the data bitrate (bit rate switch).
    pub brs: bool,
    len: u8,
    bytes: [u8; FD_MAX_DATA],
}

impl Default for CanFrame {
    fn default() -> Self {
        Self::new(0, &[])
    }
}

impl CanFrame {
    /// A classic standard-ID frame; data beyond 8 bytes is cut off (no classic encoder produces
    /// more).
    pub fn new(id: u32, data: &[u8]) -> Self {
        let mut bytes = [0u8; FD_MAX_DATA];
        let len = data.len().min(CLASSIC_MAX_DATA);
        bytes[..len].copy_from_slice(&data[..len]);
        Self {
            id,
            extended: false,
            rtr: false,
            fd: false,
            brs: false,
            len: len as u8,
            bytes,
        }
    }

    /// A remote request for `id` (standard or extended); `dlc` is the requested length.
    pub fn new_remote(id: u32, extended: bool, dlc: u8) -> Self {
        Self {
            extended,
            rtr: true,
            len: dlc.min(CLASSIC_MAX_DATA as u8),
            ..Self::new(id, &[])
        }
    }

    /// A classic extended-ID (29-bit) frame.
    pub fn new_extended(id: u32, data: &[u8]) -> Self {
        Self {
            extended: true,
            ..Self::new(id, data)
        }
    }

    /// A CAN-FD frame with the bit rate switch set; data beyond 64 bytes is cut off. The length
    /// is kept as given: padding to a length the DLC can express is the protocol's (moteus pads
    /// with its no-op byte), else the driver's (zeros).
    pub fn new_fd(id: u32, extended: bool, data: &[u8]) -> Self {
        let mut bytes = [0u8; FD_MAX_DATA];
        let len = data.len().min(FD_MAX_DATA);
        bytes[..len].copy_from_slice(&data[..len]);
        Self {
            id,
            extended,
            rtr: false,
            fd: true,
            brs: true,
            len: len as u8,
            bytes,
        }
    }

    /// The payload; empty for a remote request.
    pub fn data(&self) -> &[u8] {
        if self.rtr {
            return &[];
        }
        &self.bytes[..usize::from(self.len).min(FD_MAX_DATA)]
    }

    /// The DLC field of a classic frame: the payload length, or the length a remote request asks
    /// for.
    pub fn dlc(&self) -> u8 {
        self.len.min(CLASSIC_MAX_DATA as u8)
    }

    pub fn len(&self) -> usize {
        self.data().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The data lengths a CAN-FD DLC can express.
pub const FD_LENGTHS: [usize; 16] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24, 32, 48, 64];

/// The shortest CAN-FD frame length that holds `n` bytes (64 at most).
pub fn fd_len(n: usize) -> usize {
    FD_LENGTHS
        .iter()
        .copied()
        .find(|&l| l >= n)
        .unwrap_or(FD_MAX_DATA)
}

/// Frames of one size a drive (or a bus's shared service) puts on the bus per control tick, in
/// both directions; fractional for messages slower than the tick (heartbeats).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FrameLoad {
    pub data_len: usize,
    pub per_tick: f64,
    /// 29-bit identifiers.
    pub extended: bool,
    /// CAN-FD frames (data phase at the data bitrate).
    pub fd: bool,
}

impl FrameLoad {
    pub const fn each_tick(data_len: usize) -> Self {
        Self {
            data_len,
            per_tick: 1.0,
            extended: false,
            fd: false,
        }
    }

    /// A frame every `every_ms` at a control period of `period_ms`.
    pub fn every(data_len: usize, every_ms: f64, period_ms: f64) -> Self {
        Self {
            per_tick: if every_ms > 0.0 {
                (period_ms / every_ms).min(1.0)
            } else {
                0.0
            },
            ..Self::each_tick(data_len)
        }
    }

    /// The same frames with 29-bit identifiers.
    pub const fn extended(self) -> Self {
        Self {
            extended: true,
            ..self
        }
    }

    /// The same frames as CAN-FD frames with the bit rate switch.
    pub const fn fd(self) -> Self {
        Self { fd: true, ..self }
    }

    /// Worst-case seconds per tick on a bus at `bitrate` (arbitration) and `data_bitrate`
    /// (CAN-FD data phase).
    pub fn wire_seconds(&self, bitrate: u32, data_bitrate: u32) -> f64 {
        let (nominal, data) = if self.fd {
            fd_frame_bits(self.data_len, self.extended)
        } else {
            (frame_bits(self.data_len, self.extended), 0)
        };
        let seconds = f64::from(nominal) / f64::from(bitrate.max(1))
            + f64::from(data) / f64::from(data_bitrate.max(1));
        seconds * self.per_tick
    }

    /// Worst-case CAN bits per tick (classic frames).
    pub fn can_bits(&self) -> f64 {
        f64::from(frame_bits(self.data_len, self.extended)) * self.per_tick
    }
}

/// Worst-case bits one classic frame occupies on the wire, including stuff bits and the 3-bit
/// interframe space: 8·n + 47 + ⌊(34 + 8·n − 1)/4⌋ for standard IDs (135 bits for 8 bytes, so
/// 1 Mbit/s carries ≥ 7 400 such frames per second), 8·n + 67 + ⌊(54 + 8·n − 1)/4⌋ for extended.
pub fn frame_bits(data_len: usize, extended: bool) -> u32 {
    let n = data_len.min(CLASSIC_MAX_DATA) as u32 * 8;
    if extended {
        n + 67 + (54 + n - 1) / 4
    } else {
        n + 47 + (34 + n - 1) / 4
    }
}

/// Worst-case bits one CAN-FD frame with the bit rate switch occupies: (at the arbitration
/// bitrate, at the data bitrate), for `data_len` bytes padded to a CAN-FD length (ISO 11898-1:2015).
///
/// Arbitration phase: SOF, the identifier (11 bits; 29 with SRR and IDE), RRS, IDE, FDF, res and
/// BRS — 17 bits standard, 36 extended — with a stuff bit after every 4 in the worst case, then
/// the CRC delimiter, ACK slot and delimiter, EOF (7) and the interframe space (3): 13 bits.
/// Data phase: ESI and DLC (5 bits) and the data, with a stuff bit every 4 in the worst case,
/// then the stuff count (4 bits) and the CRC (17 bits up to 16 data bytes, 21 above) with
/// their fixed stuff bits (one every 4).
pub fn fd_frame_bits(data_len: usize, extended: bool) -> (u32, u32) {
    let head: u32 = if extended { 36 } else { 17 };
    let nominal = head + (head - 1) / 4 + 13;
    let n = fd_len(data_len) as u32 * 8;
    let crc: u32 = if fd_len(data_len) <= 16 { 17 } else { 21 };
    let data = 5 + n + (5 + n - 1) / 4 + 4 + crc + (4 + crc).div_ceil(4);
    (nominal, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worst_case_frame_bits_match_the_classic_can_rule_of_thumb() {
        assert_eq!(frame_bits(8, false), 135);
        assert_eq!(frame_bits(0, false), 55);
        // 1 Mbit/s: between 7 400 (worst-case stuffing) and 9 000 (none) 8-byte frames per second.
        assert_eq!(1_000_000 / frame_bits(8, false), 7407);
    }

    #[test]
    fn worst_case_fd_frames_at_1_and_5_mbit() {
        // A moteus command (32 bytes) and its reply (20 bytes), 29-bit ids.
        assert_eq!(fd_frame_bits(32, true), (57, 358));
        assert_eq!(fd_frame_bits(20, true), (57, 238));
        assert_eq!(fd_frame_bits(64, false), (34, 678));
        let us = |n| {
            FrameLoad::each_tick(n)
                .extended()
                .fd()
                .wire_seconds(1_000_000, 5_000_000)
                * 1e6
        };
        assert!(
            (us(32) + us(20) - 233.2).abs() < 1e-9,
            "{}",
            us(32) + us(20)
        );
        // A classic 8-byte frame costs what frame_bits says.
        let classic = FrameLoad::each_tick(8).wire_seconds(1_000_000, 5_000_000);
        assert!((classic - 135e-6).abs() < 1e-12);
    }

    #[test]
    fn frames_keep_at_most_eight_bytes_classic_and_sixty_four_fd() {
        let f = CanFrame::new(0x123, &[1, 2, 3, 4, 5, 6, 7, 8, 9]);
        assert_eq!(f.data(), &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert!(CanFrame::new(0x80, &[]).is_empty());
        let fd = CanFrame::new_fd(0x8001, true, &[7; 70]);
        assert_eq!(
            (fd.len(), fd.fd, fd.brs, fd.extended),
            (64, true, true, true)
        );
        assert_eq!(
            (fd_len(9), fd_len(13), fd_len(33), fd_len(64)),
            (12, 16, 48, 64)
        );
    }
}
