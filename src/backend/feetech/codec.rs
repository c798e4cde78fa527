//! Feetech SCS/STS serial servo packets in and out: `FF FF id len instr params… ~checksum` and
//! the registers motiond uses. Pure bytes: packets are encoded into buffers the caller prepared
//! and status packets are found in the caller's receive buffer, so the loop allocates nothing.
//!
//! The packet code follows Feetech's own SDK (PyPI `feetech-servo-sdk` 1.0.0,
//! `scservo_sdk/protocol_packet_handler.py`, the one LeRobot uses): `len` counts the instruction
//! (or error byte), the parameters and the checksum; the checksum is the complement of the byte
//! sum from the id to the last parameter; 0xFE is the broadcast id, to which no servo answers;
//! Sync Write (0x83) and Sync Read (0x82) carry a one-byte address and a one-byte data length.
//! Registers and encodings follow LeRobot's tables (`lerobot/motors/feetech/tables.py`): STS/SMS
//! store words little-endian with signed values in sign-magnitude (bit 15 for positions), 4096
//! counts a turn; SCS stores words big-endian, unsigned, 1024 counts a turn, and has no Sync Read.

/// The id every servo hears and none answers.
pub const BROADCAST: u8 = 0xFE;
/// Lowest and highest servo id (the SDK refuses 0xFE and up; 0xFD is never a servo's).
pub const IDS: (u8, u8) = (0, 0xFC);

/// Instructions.
pub mod inst {
    pub const PING: u8 = 0x01;
    pub const READ: u8 = 0x02;
    pub const WRITE: u8 = 0x03;
    pub const SYNC_READ: u8 = 0x82;
    pub const SYNC_WRITE: u8 = 0x83;
}

/// Control-table addresses shared by the STS/SMS and SCS series (Lock differs: [`Series::lock`]).
pub mod reg {
    /// Return_Delay_Time, 2 µs units (EEPROM; factory 250 = 500 µs, LeRobot writes 0).
    pub const RETURN_DELAY: u8 = 7;
    pub const MIN_POSITION_LIMIT: u8 = 9;
    pub const MAX_POSITION_LIMIT: u8 = 11;
    /// STS only: sign-magnitude with bit 11.
    pub const HOMING_OFFSET: u8 = 31;
    pub const TORQUE_ENABLE: u8 = 40;
    pub const ACCELERATION: u8 = 41;
    pub const GOAL_POSITION: u8 = 42;
    pub const PRESENT_POSITION: u8 = 56;
    /// The Status register: the fault bits of [`Fault`].
    pub const STATUS: u8 = 65;
}

/// A servo series: its control table's byte order, sign encoding, resolution and instructions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Series {
    /// STS/SMS (STS3215 of the SO-100/SO-101, STS3250, SM8512BL): little-endian,
    /// sign-magnitude positions, 4096 counts a turn, Sync Read.
    Sts,
    /// SCS (SCS0009 …): big-endian, unsigned positions, 1024 counts a turn, no Sync Read.
    Scs,
}

impl Series {
    pub const fn resolution(self) -> u32 {
        match self {
            Series::Sts => 4096,
            Series::Scs => 1024,
        }
    }

    /// The Lock register (1: EEPROM writes refused; LeRobot sets it with torque on).
    pub const fn lock(self) -> u8 {
        match self {
            Series::Sts => 55,
            Series::Scs => 48,
        }
    }

    pub const fn has_sync_read(self) -> bool {
        matches!(self, Series::Sts)
    }

    /// Goal positions the servo takes in position mode: one turn of counts.
    pub const fn position_range(self) -> (i32, i32) {
        (0, self.resolution() as i32 - 1)
    }

    /// A word in the series' byte order.
    pub const fn word(self, v: u16) -> [u8; 2] {
        match self {
            Series::Sts => v.to_le_bytes(),
            Series::Scs => v.to_be_bytes(),
        }
    }

    pub const fn unword(self, b: [u8; 2]) -> u16 {
        match self {
            Series::Sts => u16::from_le_bytes(b),
            Series::Scs => u16::from_be_bytes(b),
        }
    }

    /// Goal_Position's bytes for `counts`: STS sign-magnitude with bit 15, SCS unsigned; `None`
    /// when the register cannot hold it.
    pub fn encode_position(self, counts: i32) -> Option<[u8; 2]> {
        let raw = match self {
            Series::Sts if counts < 0 => {
                u16::try_from(-counts).ok().filter(|m| *m < 0x8000)? | 0x8000
            }
            Series::Sts => u16::try_from(counts).ok().filter(|m| *m < 0x8000)?,
            Series::Scs => u16::try_from(counts).ok()?,
        };
        Some(self.word(raw))
    }

    /// Present_Position's counts from its bytes: STS sign-magnitude with bit 15, SCS unsigned.
    pub fn decode_position(self, b: [u8; 2]) -> i32 {
        let raw = self.unword(b);
        match self {
            Series::Sts => sign_magnitude(raw, 15),
            Series::Scs => i32::from(raw),
        }
    }

    /// Homing_Offset's counts from its word: sign-magnitude with bit 11 (STS; SCS servos have
    /// no such register and LeRobot's files hold 0 for them).
    pub fn decode_homing_offset(self, raw: u16) -> i32 {
        sign_magnitude(raw, 11)
    }
}

/// The value of a sign-magnitude register whose sign is bit `sign_bit` (the bits below it the
/// magnitude, those above it unused).
pub const fn sign_magnitude(raw: u16, sign_bit: u32) -> i32 {
    let magnitude = (raw & ((1 << sign_bit) - 1)) as i32;
    if raw & (1 << sign_bit) != 0 {
        -magnitude
    } else {
        magnitude
    }
}

/// The complement of the byte sum of `body` (id through the last parameter).
pub fn checksum(body: &[u8]) -> u8 {
    !body.iter().fold(0u8, |s, b| s.wrapping_add(*b))
}

/// Bytes of a packet with `params` parameter bytes.
pub const fn packet_len(params: usize) -> usize {
    6 + params
}

/// Writes an instruction packet to `out`; returns its length. `out` must hold
/// [`packet_len`]`(params.len())` bytes and `params` at most 250 − 2.
pub fn packet(out: &mut [u8], id: u8, instruction: u8, params: &[u8]) -> usize {
    let n = packet_len(params.len());
    out[0] = 0xFF;
    out[1] = 0xFF;
    out[2] = id;
    out[3] = (params.len() + 2) as u8;
    out[4] = instruction;
    out[5..5 + params.len()].copy_from_slice(params);
    out[n - 1] = checksum(&out[2..n - 1]);
    n
}

pub fn ping(out: &mut [u8], id: u8) -> usize {
    packet(out, id, inst::PING, &[])
}

pub fn read(out: &mut [u8], id: u8, address: u8, len: u8) -> usize {
    packet(out, id, inst::READ, &[address, len])
}

/// Write of up to 4 data bytes at `address`.
pub fn write(out: &mut [u8], id: u8, address: u8, data: &[u8]) -> usize {
    let mut params = [0u8; 5];
    params[0] = address;
    params[1..1 + data.len()].copy_from_slice(data);
    packet(out, id, inst::WRITE, &params[..1 + data.len()])
}

/// Bytes of a Sync Write of `data_len` bytes to `servos` servos.
pub const fn sync_write_len(servos: usize, data_len: usize) -> usize {
    packet_len(2 + servos * (1 + data_len))
}

/// Writes a Sync Write of `data_len` bytes at `address` to `out`: `entries` gives each servo's
/// id and data. Returns its length.
pub fn sync_write<'a>(
    out: &mut [u8],
    address: u8,
    data_len: u8,
    entries: impl IntoIterator<Item = (u8, &'a [u8])>,
) -> usize {
    let mut at = 7;
    for (id, data) in entries {
        out[at] = id;
        out[at + 1..at + 1 + data.len()].copy_from_slice(data);
        at += 1 + data.len();
    }
    out[0] = 0xFF;
    out[1] = 0xFF;
    out[2] = BROADCAST;
    out[3] = (at - 4 + 1) as u8;
    out[4] = inst::SYNC_WRITE;
    out[5] = address;
    out[6] = data_len;
    out[at] = checksum(&out[2..at]);
    at + 1
}

/// Bytes of a Sync Read request to `servos` servos.
pub const fn sync_read_len(servos: usize) -> usize {
    packet_len(2 + servos)
}

/// Writes a Sync Read of `len` bytes at `address` from `ids` to `out`; each servo answers with
/// a status packet, in the order of `ids`. Returns its length.
pub fn sync_read(out: &mut [u8], address: u8, len: u8, ids: &[u8]) -> usize {
    let n = sync_read_len(ids.len());
    out[0] = 0xFF;
    out[1] = 0xFF;
    out[2] = BROADCAST;
    out[3] = (ids.len() + 4) as u8;
    out[4] = inst::SYNC_READ;
    out[5] = address;
    out[6] = len;
    out[7..7 + ids.len()].copy_from_slice(ids);
    out[n - 1] = checksum(&out[2..n - 1]);
    n
}

/// Bytes of a status packet carrying `params` bytes.
pub const fn status_len(params: usize) -> usize {
    packet_len(params)
}

/// What the start of a receive buffer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scan<'a> {
    /// A whole status packet of `len` bytes.
    Status {
        id: u8,
        /// The status byte: [`Fault`] bits.
        error: u8,
        params: &'a [u8],
        len: usize,
    },
    /// A packet whose checksum is wrong: drop its `len` bytes.
    Corrupt { len: usize },
    /// Bytes that start no packet (noise, a header with an impossible id, length or status
    /// byte, as the SDK's `rxPacket` rejects them): drop them.
    Skip(usize),
    /// The buffer holds the start of a packet; read more.
    More,
}

/// Finds the first status packet in `buf`, as the SDK's `rxPacket` does.
pub fn scan(buf: &[u8]) -> Scan<'_> {
    let Some(start) = buf.windows(2).position(|w| w == [0xFF, 0xFF]) else {
        // Keep a trailing 0xFF: it may be the first header byte.
        let keep = usize::from(buf.last() == Some(&0xFF));
        return if buf.len() > keep {
            Scan::Skip(buf.len() - keep)
        } else {
            Scan::More
        };
    };
    if start > 0 {
        return Scan::Skip(start);
    }
    if buf.len() < 6 {
        return Scan::More;
    }
    let (id, len, error) = (buf[2], usize::from(buf[3]), buf[4]);
    if id > 0xFD || !(2..=250).contains(&len) || error > 0x7F {
        return Scan::Skip(1);
    }
    let total = len + 4;
    if buf.len() < total {
        return Scan::More;
    }
    if checksum(&buf[2..total - 1]) != buf[total - 1] {
        return Scan::Corrupt { len: total };
    }
    Scan::Status {
        id,
        error,
        params: &buf[5..total - 1],
        len: total,
    }
}

/// A fault bit of the status byte and the Status register (65).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Bit 0: input voltage out of its limits.
    Voltage,
    /// Bit 1: the magnetic angle sensor.
    AngleSensor,
    /// Bit 2: over its temperature limit.
    Overheat,
    /// Bit 3: over its current limit.
    Overcurrent,
    /// Bit 4: the Status register's angle (position) error; the SDK names no status-byte bit 4.
    Angle,
    /// Bit 5: overload (torque held beyond Protection_Time).
    Overload,
}

impl Fault {
    pub const ALL: [Fault; 6] = [
        Fault::Voltage,
        Fault::AngleSensor,
        Fault::Overheat,
        Fault::Overcurrent,
        Fault::Angle,
        Fault::Overload,
    ];

    pub const fn bit(self) -> u8 {
        1 << self as u8
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            Fault::Voltage => "input voltage",
            Fault::AngleSensor => "angle sensor",
            Fault::Overheat => "overheat",
            Fault::Overcurrent => "overcurrent",
            Fault::Angle => "angle",
            Fault::Overload => "overload",
        }
    }

    /// The faults set in a status byte or Status register value.
    pub fn of(bits: u8) -> impl Iterator<Item = Fault> {
        Fault::ALL.into_iter().filter(move |f| bits & f.bit() != 0)
    }
}

/// Bytes one tick puts on the line for `servos` servos: the Sync Write of Goal_Position, and the
/// reads of Present_Position (STS: one Sync Read and a status packet from each servo; SCS: a Read
/// and its status packet per servo).
pub fn tick_bytes(series: Series, servos: usize) -> usize {
    if servos == 0 {
        return 0;
    }
    let reads = match series {
        Series::Sts => sync_read_len(servos) + servos * status_len(2),
        Series::Scs => servos * (packet_len(2) + status_len(2)),
    };
    sync_write_len(servos, 2) + reads
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter()
            .map(|x| format!("{x:02X}"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The vectors of `../shared/docs/protocols.md` §6.
    #[test]
    fn packets_are_byte_exact() {
        let mut b = [0u8; 64];
        let n = ping(&mut b, 1);
        assert_eq!(hex(&b[..n]), "FF FF 01 02 01 FB");
        let n = read(&mut b, 1, reg::PRESENT_POSITION, 2);
        assert_eq!(hex(&b[..n]), "FF FF 01 04 02 38 02 BE");
        let n = write(&mut b, 1, reg::TORQUE_ENABLE, &[1]);
        assert_eq!(hex(&b[..n]), "FF FF 01 04 03 28 01 CE");
        let pos = Series::Sts.encode_position(2048).unwrap();
        let n = write(&mut b, 1, reg::GOAL_POSITION, &pos);
        assert_eq!(hex(&b[..n]), "FF FF 01 05 03 2A 00 08 C4");
        let (a, c) = (
            Series::Sts.encode_position(2048).unwrap(),
            Series::Sts.encode_position(1024).unwrap(),
        );
        let n = sync_write(&mut b, reg::GOAL_POSITION, 2, [(1, &a[..]), (2, &c[..])]);
        assert_eq!(hex(&b[..n]), "FF FF FE 0A 83 2A 02 01 00 08 02 00 04 39");
        assert_eq!(n, sync_write_len(2, 2));
        let n = sync_read(&mut b, reg::PRESENT_POSITION, 2, &[1, 2, 3]);
        // LEN = 3 ids + 4; checksum ~(FE+07+82+38+02+01+02+03) = ~0xC7 (as the SDK's
        // syncReadTx builds it).
        assert_eq!(hex(&b[..n]), "FF FF FE 07 82 38 02 01 02 03 38");
        assert_eq!(n, sync_read_len(3));
    }

    #[test]
    fn positions_encode_per_series() {
        assert_eq!(Series::Sts.encode_position(-5), Some([0x05, 0x80]));
        assert_eq!(Series::Sts.decode_position([0x05, 0x80]), -5);
        assert_eq!(Series::Sts.encode_position(0x8000), None);
        assert_eq!(Series::Sts.decode_position([0xFF, 0x0F]), 4095);
        assert_eq!(Series::Scs.encode_position(1023), Some([0x03, 0xFF]));
        assert_eq!(Series::Scs.decode_position([0x03, 0xFF]), 1023);
        assert_eq!(Series::Scs.encode_position(-1), None);
        for c in [0, 1, 2047, 4095] {
            let b = Series::Sts.encode_position(c).unwrap();
            assert_eq!(Series::Sts.decode_position(b), c);
        }
        assert_eq!((Series::Sts.lock(), Series::Scs.lock()), (55, 48));
    }

    #[test]
    fn status_packets_are_found_in_a_stream() {
        // Status of servo 1 reading 2 bytes (2048), status byte 0.
        let status = [0xFF, 0xFF, 0x01, 0x04, 0x00, 0x00, 0x08, 0xF2];
        assert_eq!(checksum(&status[2..7]), 0xF2);
        let scan_ok = scan(&status);
        assert_eq!(
            scan_ok,
            Scan::Status {
                id: 1,
                error: 0,
                params: &[0x00, 0x08],
                len: 8
            }
        );
        let mut noisy = vec![0x12, 0x34];
        noisy.extend_from_slice(&status);
        assert_eq!(scan(&noisy), Scan::Skip(2));
        assert_eq!(scan(&status[..5]), Scan::More);
        assert_eq!(scan(&status[..7]), Scan::More);
        assert_eq!(scan(&[0x00, 0xFF]), Scan::Skip(1));
        assert_eq!(scan(&[0xFF]), Scan::More);
        let mut bad = status;
        bad[7] ^= 1;
        assert_eq!(scan(&bad), Scan::Corrupt { len: 8 });
        // An impossible status byte (bit 7) is not a header: skip a byte, as the SDK does.
        let mut high = status;
        high[4] = 0x80;
        assert_eq!(scan(&high), Scan::Skip(1));
        // Overload and overheat set.
        let mut fault = status;
        fault[4] = 0x24;
        fault[7] = checksum(&fault[2..7]);
        let Scan::Status { error, .. } = scan(&fault) else {
            panic!()
        };
        assert_eq!(
            Fault::of(error).collect::<Vec<_>>(),
            [Fault::Overheat, Fault::Overload]
        );
    }

    /// Per tick at 1 Mbit/s (10 bits a byte): STS 16 + 12n bytes, SCS 8 + 19n.
    #[test]
    fn tick_bytes_count_both_directions() {
        assert_eq!(tick_bytes(Series::Sts, 6), 16 + 12 * 6);
        assert_eq!(tick_bytes(Series::Scs, 6), 8 + 19 * 6);
        assert_eq!(tick_bytes(Series::Sts, 0), 0);
    }
}
