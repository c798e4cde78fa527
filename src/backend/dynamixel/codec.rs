//! DYNAMIXEL Protocol 2.0: instruction packets built in caller-provided buffers with byte stuffing
//! and CRC-16 (poly 0x8005, init 0), and a parser for status (or instruction) packets that
//! resynchronises on the header (protocols.md §4).

pub const HEADER: [u8; 4] = [0xFF, 0xFF, 0xFD, 0x00];
pub const BROADCAST: u8 = 0xFE;
/// Highest unicast id.
pub const MAX_ID: u8 = 0xFC;

pub const INST_PING: u8 = 0x01;
pub const INST_READ: u8 = 0x02;
pub const INST_WRITE: u8 = 0x03;
pub const INST_STATUS: u8 = 0x55;
pub const INST_REBOOT: u8 = 0x08;
pub const INST_SYNC_READ: u8 = 0x82;
pub const INST_SYNC_WRITE: u8 = 0x83;

/// The calibration registers LeRobot's DYNAMIXEL bus writes and compares (X series,
/// `lerobot/motors/dynamixel/tables.py`): Drive_Mode (1 byte), Homing_Offset (i32),
/// Max_Position_Limit and Min_Position_Limit (4 bytes each, at 48 and 52, after Velocity_Limit
/// at 44; Moving_Threshold, 4 bytes, follows Homing_Offset).
pub const ADDR_DRIVE_MODE: u16 = 10;
/// Return_Delay_Time (EEPROM), 2 µs units: factory 250 (500 µs), LeRobot writes 0.
pub const ADDR_RETURN_DELAY_TIME: u16 = 9;
pub const ADDR_HOMING_OFFSET: u16 = 20;
pub const ADDR_VELOCITY_LIMIT: u16 = 44;
pub const ADDR_OPERATING_MODE: u16 = 11;
pub const ADDR_TORQUE_ENABLE: u16 = 64;
pub const ADDR_HARDWARE_ERROR_STATUS: u16 = 70;
/// The position loop's gains (RAM, 2 bytes each; X series 0..=16383).
pub const ADDR_POSITION_D_GAIN: u16 = 80;
pub const ADDR_POSITION_I_GAIN: u16 = 82;
pub const ADDR_POSITION_P_GAIN: u16 = 84;
/// Bus Watchdog (RAM, X series): 1..=127 units of 20 ms; 0 off. When it expires the servo stops
/// (velocity 0, goal writes refused) until it is written 0.
pub const ADDR_BUS_WATCHDOG: u16 = 98;
pub const BUS_WATCHDOG_UNIT_MS: f64 = 20.0;
pub const BUS_WATCHDOG_MAX: u8 = 127;
pub const ADDR_GOAL_VELOCITY: u16 = 104;
pub const ADDR_GOAL_POSITION: u16 = 116;
pub const ADDR_PRESENT_POSITION: u16 = 132;

pub const OPERATING_MODE_VELOCITY: u8 = 1;
pub const OPERATING_MODE_POSITION: u8 = 3;
/// Extended position (multi-turn): ±256 revolutions.
pub const OPERATING_MODE_EXTENDED_POSITION: u8 = 4;
/// Current-based position: extended position with the current held to Goal_Current (LeRobot's
/// Koch gripper: it grasps without forcing).
pub const OPERATING_MODE_CURRENT_POSITION: u8 = 5;
/// Goal Position range in extended position mode.
pub const EXTENDED_POSITION_LIMIT: f64 = 1_048_575.0;

/// Bus Watchdog value for a timeout: whole 20 ms units, rounded up, 1..=127 (0: off).
pub fn bus_watchdog_units(timeout_ms: f64) -> u8 {
    if timeout_ms.is_nan() || timeout_ms <= 0.0 {
        return 0;
    }
    (timeout_ms / BUS_WATCHDOG_UNIT_MS)
        .ceil()
        .clamp(1.0, f64::from(BUS_WATCHDOG_MAX)) as u8
}

/// Status error byte bit 7: hardware alert.
pub const ERR_ALERT: u8 = 0x80;

/// Bytes of a Sync Write of `n` servos with `data_len` bytes each: 14 + n·(1 + data_len).
pub fn sync_write_len(n: usize, data_len: usize) -> usize {
    14 + n * (1 + data_len)
}

/// Bytes one tick puts on the line for `n` servos: the Sync Writes of Goal Position and Goal
/// Velocity (at most two), and with `sync_read` the Sync Read and `n` status packets.
pub fn tick_bytes(n: usize, sync_read: bool) -> usize {
    let mut bytes = sync_write_len(n, 4) + 14 * usize::from(n > 0);
    if sync_read {
        bytes += 14 + n + n * status_len(5);
    }
    bytes
}

/// Bytes of one status packet carrying `params` bytes (before stuffing): 11 + params.
pub fn status_len(params: usize) -> usize {
    11 + params
}

const fn crc_table() -> [u16; 256] {
    let mut table = [0u16; 256];
    let mut n = 0;
    while n < 256 {
        let mut crc = (n as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x8005
            } else {
                crc << 1
            };
            bit += 1;
        }
        table[n] = crc;
        n += 1;
    }
    table
}

static CRC_TABLE: [u16; 256] = crc_table();

/// CRC-16/BUYPASS as ROBOTIS computes it (`updateCRC` with `crc_accum = 0`).
pub fn crc16(bytes: &[u8]) -> u16 {
    bytes.iter().fold(0u16, |crc, &b| {
        (crc << 8) ^ CRC_TABLE[usize::from(((crc >> 8) as u8) ^ b)]
    })
}

/// Index of the instruction byte: the stuffed region starts here.
const INST_AT: usize = 7;

/// An instruction (or status) packet being written into a caller's buffer. Bytes that do not fit
/// mark the packet as overflowed, and [`Packet::finish`] then returns `None`.
pub struct Packet<'a> {
    buf: &'a mut [u8],
    len: usize,
    overflow: bool,
}

impl<'a> Packet<'a> {
    pub fn begin(buf: &'a mut [u8], id: u8, instruction: u8) -> Self {
        let mut p = Packet {
            buf,
            len: 0,
            overflow: false,
        };
        for b in HEADER {
            p.put(b);
        }
        p.put(id);
        p.put(0);
        p.put(0);
        p.push(instruction);
        p
    }

    fn put(&mut self, b: u8) {
        match self.buf.get_mut(self.len) {
            Some(slot) => {
                *slot = b;
                self.len += 1;
            }
            None => self.overflow = true,
        }
    }

    /// Appends one byte of the instruction/parameter region, stuffing `FF FF FD` → `FF FF FD FD`.
    pub fn push(&mut self, b: u8) {
        self.put(b);
        if b == 0xFD
            && self.len >= INST_AT + 3
            && self.buf.get(self.len - 3..self.len) == Some(&[0xFF, 0xFF, 0xFD][..])
        {
            self.put(0xFD);
        }
    }

    pub fn extend(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.push(b);
        }
    }

    pub fn push_u16(&mut self, v: u16) {
        self.extend(&v.to_le_bytes());
    }

    pub fn push_u32(&mut self, v: u32) {
        self.extend(&v.to_le_bytes());
    }

    /// Fills in LEN and the CRC; the finished packet, or `None` if the buffer was too small.
    pub fn finish(mut self) -> Option<&'a [u8]> {
        let len_field = u16::try_from(self.len + 2 - INST_AT).ok()?;
        let l = len_field.to_le_bytes();
        *self.buf.get_mut(5)? = l[0];
        *self.buf.get_mut(6)? = l[1];
        let crc = crc16(self.buf.get(..self.len)?).to_le_bytes();
        self.put(crc[0]);
        self.put(crc[1]);
        if self.overflow {
            return None;
        }
        let len = self.len;
        self.buf.get(..len)
    }
}

/// Reboot servo `id` (clears a hardware error alert; torque comes up off).
pub fn reboot(buf: &mut [u8], id: u8) -> Option<&[u8]> {
    Packet::begin(buf, id, INST_REBOOT).finish()
}

/// Write `data` at `addr` of servo `id`.
pub fn write<'a>(buf: &'a mut [u8], id: u8, addr: u16, data: &[u8]) -> Option<&'a [u8]> {
    let mut p = Packet::begin(buf, id, INST_WRITE);
    p.push_u16(addr);
    p.extend(data);
    p.finish()
}

/// A Read of `data_len` bytes at `addr` from servo `id`.
pub fn read(buf: &mut [u8], id: u8, addr: u16, data_len: u16) -> Option<&[u8]> {
    let mut p = Packet::begin(buf, id, INST_READ);
    p.push_u16(addr);
    p.push_u16(data_len);
    p.finish()
}

/// Starts a Sync Write: push `id` then `data_len` bytes per servo, then [`Packet::finish`].
pub fn sync_write_begin(buf: &mut [u8], addr: u16, data_len: u16) -> Packet<'_> {
    let mut p = Packet::begin(buf, BROADCAST, INST_SYNC_WRITE);
    p.push_u16(addr);
    p.push_u16(data_len);
    p
}

/// Sync Read of `data_len` bytes at `addr` from each of `ids`; each servo answers with a status packet.
pub fn sync_read<'a>(buf: &'a mut [u8], addr: u16, data_len: u16, ids: &[u8]) -> Option<&'a [u8]> {
    let mut p = Packet::begin(buf, BROADCAST, INST_SYNC_READ);
    p.push_u16(addr);
    p.push_u16(data_len);
    p.extend(ids);
    p.finish()
}

/// A packet found by [`parse`]: instruction (0x55 for status) and its unstuffed parameters
/// (for a status packet the first parameter is the error byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parsed {
    pub id: u8,
    pub instruction: u8,
    /// Number of unstuffed parameter bytes written to the caller's output buffer.
    pub params: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parse {
    /// A complete, CRC-checked packet; `consumed` bytes of input belong to it (and any junk before it).
    Packet { consumed: usize, packet: Parsed },
    /// `consumed` bytes are junk or a corrupt packet (bad CRC or length): drop them and parse again.
    Skip { consumed: usize, crc_error: bool },
    /// More bytes are needed; `consumed` leading bytes can be dropped (no header starts there).
    Incomplete { consumed: usize },
}

/// Parses the first packet of `input`, unstuffing its parameters into `params_out`.
pub fn parse(input: &[u8], params_out: &mut [u8]) -> Parse {
    let Some(start) = input.windows(4).position(|w| w == HEADER) else {
        // Keep a possible partial header at the end.
        return Parse::Incomplete {
            consumed: input.len().saturating_sub(3),
        };
    };
    if start > 0 {
        return Parse::Skip {
            consumed: start,
            crc_error: false,
        };
    }
    let (Some(&id), Some(&l0), Some(&l1)) = (input.get(4), input.get(5), input.get(6)) else {
        return Parse::Incomplete { consumed: 0 };
    };
    let len = usize::from(u16::from_le_bytes([l0, l1]));
    // At least instruction + CRC; a longer LEN than any buffer can hold is corruption.
    if len < 3 || id == 0xFF || id == 0xFD || len > params_out.len() + 8 {
        return Parse::Skip {
            consumed: 1,
            crc_error: false,
        };
    }
    let total = INST_AT + len;
    let Some(packet) = input.get(..total) else {
        return Parse::Incomplete { consumed: 0 };
    };
    let body_end = total - 2;
    let crc = u16::from_le_bytes([packet[body_end], packet[body_end + 1]]);
    if crc16(&packet[..body_end]) != crc {
        return Parse::Skip {
            consumed: 1,
            crc_error: true,
        };
    }
    let instruction = packet[INST_AT];
    let mut n = 0;
    for j in INST_AT + 1..body_end {
        let b = packet[j];
        // Drop the FD inserted after FF FF FD inside the stuffed region (instruction onwards).
        let stuffed =
            b == 0xFD && j >= INST_AT + 3 && packet.get(j - 3..j) == Some(&[0xFF, 0xFF, 0xFD][..]);
        if stuffed {
            continue;
        }
        let Some(slot) = params_out.get_mut(n) else {
            return Parse::Skip {
                consumed: total,
                crc_error: false,
            };
        };
        *slot = b;
        n += 1;
    }
    Parse::Packet {
        consumed: total,
        packet: Parsed {
            id,
            instruction,
            params: n,
        },
    }
}

/// A status packet's error byte in words: the alert bit (a hardware error; Hardware Error Status,
/// address 70, says which) and the error number of the instruction.
pub fn error_words(error: u8) -> String {
    let number = match error & 0x7F {
        0 => None,
        1 => Some("result fail"),
        2 => Some("instruction error"),
        3 => Some("CRC error"),
        4 => Some("data range error"),
        5 => Some("data length error"),
        6 => Some("data limit error"),
        7 => Some("access error"),
        _ => Some("unknown error number"),
    };
    let alert = (error & ERR_ALERT != 0)
        .then_some("hardware error alert (see Hardware Error Status, address 70)");
    let words: Vec<&str> = [alert, number].into_iter().flatten().collect();
    words.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hex(s: &str) -> Vec<u8> {
        s.split_whitespace()
            .map(|h| u8::from_str_radix(h, 16).unwrap())
            .collect()
    }

    #[test]
    fn crc_catalogue_check_and_table() {
        assert_eq!(crc16(b"123456789"), 0xFEE8);
        assert_eq!(
            &CRC_TABLE[..8],
            &[
                0x0000, 0x8005, 0x800F, 0x000A, 0x801B, 0x001E, 0x0014, 0x8011
            ]
        );
        assert_eq!(CRC_TABLE[255], 0x0202);
    }

    #[test]
    fn worked_packets() {
        let mut buf = [0u8; 64];
        let p = Packet::begin(&mut buf, 1, INST_PING).finish().unwrap();
        assert_eq!(p, hex("FF FF FD 00 01 03 00 01 19 4E"));
        let p = write(&mut buf, 1, ADDR_TORQUE_ENABLE, &[1]).unwrap();
        assert_eq!(p, hex("FF FF FD 00 01 06 00 03 40 00 01 DB 66"));
        let p = write(&mut buf, 1, ADDR_GOAL_POSITION, &512u32.to_le_bytes()).unwrap();
        assert_eq!(p, hex("FF FF FD 00 01 09 00 03 74 00 00 02 00 00 CA 89"));
        let p = write(&mut buf, 1, ADDR_GOAL_POSITION, &[0xFF, 0xFF, 0xFD, 0x00]).unwrap();
        assert_eq!(p, hex("FF FF FD 00 01 0A 00 03 74 00 FF FF FD FD 00 21 E7"));
    }

    fn sync_goal(buf: &mut [u8], goals: &[(u8, i32)]) -> Vec<u8> {
        let mut p = sync_write_begin(buf, ADDR_GOAL_POSITION, 4);
        for &(id, v) in goals {
            p.push(id);
            p.push_u32(v as u32);
        }
        p.finish().unwrap().to_vec()
    }

    #[test]
    fn sync_write_vectors() {
        let mut buf = [0u8; 128];
        assert_eq!(
            sync_goal(&mut buf, &[(1, 150), (2, 170)]),
            hex("FF FF FD 00 FE 11 00 83 74 00 04 00 01 96 00 00 00 02 AA 00 00 00 82 87")
        );
        let daemon = sync_goal(&mut buf, &[(1, 2048), (2, 3072)]);
        assert_eq!(
            daemon,
            hex("FF FF FD 00 FE 11 00 83 74 00 04 00 01 00 08 00 00 02 00 0C 00 00 3B CC")
        );
        assert_eq!(daemon.len(), sync_write_len(2, 4));
        let mut p = sync_write_begin(&mut buf, ADDR_TORQUE_ENABLE, 1);
        for id in 1..=3 {
            p.push(id);
            p.push(1);
        }
        assert_eq!(
            p.finish().unwrap(),
            hex("FF FF FD 00 FE 0D 00 83 40 00 01 00 01 01 02 01 03 01 97 D1")
        );
    }

    #[test]
    fn too_small_buffer_is_refused_not_a_panic() {
        let mut buf = [0u8; 12];
        assert_eq!(write(&mut buf, 1, ADDR_GOAL_POSITION, &[1, 2, 3, 4]), None);
    }

    #[test]
    fn parses_status_with_junk_split_and_stuffing() {
        let mut buf = [0u8; 64];
        let mut p = Packet::begin(&mut buf, 3, INST_STATUS);
        p.push(0); // error
        p.extend(&[0xFF, 0xFF, 0xFD, 0x00]);
        let status = p.finish().unwrap().to_vec();
        assert_eq!(status.len(), status_len(4) + 1); // one stuffed byte
        let mut input = vec![0x00, 0xFF, 0x12];
        input.extend_from_slice(&status);
        let mut out = [0u8; 16];
        assert_eq!(
            parse(&input, &mut out),
            Parse::Skip {
                consumed: 3,
                crc_error: false
            }
        );
        assert_eq!(
            parse(&input[3..input.len() - 1], &mut out),
            Parse::Incomplete { consumed: 0 }
        );
        let Parse::Packet { consumed, packet } = parse(&input[3..], &mut out) else {
            panic!("no packet");
        };
        assert_eq!(consumed, status.len());
        assert_eq!(
            (packet.id, packet.instruction, packet.params),
            (3, INST_STATUS, 5)
        );
        assert_eq!(&out[..5], &[0, 0xFF, 0xFF, 0xFD, 0x00]);
        let mut bad = status.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert_eq!(
            parse(&bad, &mut out),
            Parse::Skip {
                consumed: 1,
                crc_error: true
            }
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn any_params_round_trip(id in 0u8..=MAX_ID, params in proptest::collection::vec(any::<u8>(), 0..40)) {
            let mut buf = [0u8; 128];
            let mut p = Packet::begin(&mut buf, id, INST_WRITE);
            p.extend(&params);
            let packet = p.finish().unwrap().to_vec();
            let mut out = [0u8; 64];
            let parsed = parse(&packet, &mut out);
            prop_assert_eq!(parsed, Parse::Packet { consumed: packet.len(), packet: Parsed { id, instruction: INST_WRITE, params: params.len() } });
            prop_assert_eq!(&out[..params.len()], &params[..]);
        }

        #[test]
        fn parser_never_panics(input in proptest::collection::vec(any::<u8>(), 0..80)) {
            let mut out = [0u8; 16];
            let _ = parse(&input, &mut out);
        }
    }
}
