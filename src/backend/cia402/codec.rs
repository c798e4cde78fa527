//! CANopen (CiA 301) with the CiA 402 drive profile in Cyclic Synchronous Position mode:
//! NMT, SYNC, SDO expedited downloads for the PDO mapping, RPDO1 = controlword + target position,
//! TPDO1 = statusword + actual position, heartbeat and EMCY (protocols.md §1).

use crate::backend::frame::{CanFrame, FrameLoad};

pub const NMT_START: u8 = 0x01;
pub const NMT_STOP: u8 = 0x02;
pub const NMT_PRE_OPERATIONAL: u8 = 0x80;
pub const NMT_RESET_NODE: u8 = 0x81;
pub const NMT_RESET_COMMUNICATION: u8 = 0x82;

pub const COB_SYNC: u32 = 0x080;
pub const COB_EMCY: u32 = 0x080;
pub const COB_TPDO1: u32 = 0x180;
pub const COB_RPDO1: u32 = 0x200;
pub const COB_SDO_RESPONSE: u32 = 0x580;
pub const COB_SDO_REQUEST: u32 = 0x600;
pub const COB_HEARTBEAT: u32 = 0x700;

/// Controlword (0x6040) commands (§1.6).
pub const CW_SHUTDOWN: u16 = 0x0006;
pub const CW_SWITCH_ON: u16 = 0x0007;
pub const CW_ENABLE_OPERATION: u16 = 0x000F;
pub const CW_DISABLE_VOLTAGE: u16 = 0x0000;
pub const CW_QUICK_STOP: u16 = 0x0002;
pub const CW_FAULT_RESET: u16 = 0x0080;

/// Statusword bit 12 in CSP: the drive follows the command value.
pub const SW_FOLLOWS_COMMAND: u16 = 1 << 12;
/// Statusword bit 13 in CSP: following error.
pub const SW_FOLLOWING_ERROR: u16 = 1 << 13;

/// Mode of operation 8 = Cyclic Synchronous Position.
pub const MODE_CSP: u8 = 8;

pub fn nmt(command: u8, node: u8) -> CanFrame {
    CanFrame::new(0x000, &[command, node])
}

pub fn sync() -> CanFrame {
    CanFrame::new(COB_SYNC, &[])
}

/// RPDO1 as mapped by [`setup`]: controlword u16 LE, target position i32 LE.
pub fn rpdo1(node: u8, controlword: u16, target: i32) -> CanFrame {
    let cw = controlword.to_le_bytes();
    let t = target.to_le_bytes();
    CanFrame::new(
        COB_RPDO1 + u32::from(node),
        &[cw[0], cw[1], t[0], t[1], t[2], t[3]],
    )
}

/// One expedited SDO download (write of 1, 2 or 4 bytes) to object `index:sub`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SdoWrite {
    pub index: u16,
    pub sub: u8,
    pub value: u32,
    /// 1, 2, 3 or 4 bytes.
    pub size: u8,
}

pub fn sdo_download(node: u8, w: SdoWrite) -> CanFrame {
    let size = w.size.clamp(1, 4);
    let cmd = 0x20 | 0x02 | 0x01 | ((4 - size) << 2);
    let i = w.index.to_le_bytes();
    let v = w.value.to_le_bytes();
    CanFrame::new(
        COB_SDO_REQUEST + u32::from(node),
        &[cmd, i[0], i[1], w.sub, v[0], v[1], v[2], v[3]],
    )
}

pub fn sdo_upload(node: u8, index: u16, sub: u8) -> CanFrame {
    let i = index.to_le_bytes();
    CanFrame::new(
        COB_SDO_REQUEST + u32::from(node),
        &[0x40, i[0], i[1], sub, 0, 0, 0, 0],
    )
}

/// 0x60C2 interpolation time period (value, exponent) for a control rate: period = value·10^exp s.
/// `None` when the period is not a whole number of 1..255 units of 1 ms down to 1 µs: the drive
/// cannot be told such a rate (1/300 s = 3.333… ms is one), and it is refused at start.
pub fn interpolation_period(rate_hz: f64) -> Option<(u8, i8)> {
    if !(rate_hz.is_finite() && rate_hz > 0.0) {
        return None;
    }
    let period = 1.0 / rate_hz;
    for exp in [-3i8, -4, -5, -6] {
        let units = period * 10f64.powi(-i32::from(exp));
        let rounded = units.round();
        if (units - rounded).abs() < 1e-6 && (1.0..=255.0).contains(&rounded) {
            return Some((rounded as u8, exp));
        }
    }
    None
}

/// The nearest whole rates below and above `rate_hz` whose period 0x60C2 can express.
pub fn nearest_periodic_rates(rate_hz: f64) -> (Option<u32>, Option<u32>) {
    let r = rate_hz.clamp(1.0, 1e6) as u32;
    let below = (1..=r)
        .rev()
        .find(|&x| interpolation_period(f64::from(x)).is_some());
    let above = (r + 1..=r.saturating_mul(4).max(r + 1))
        .find(|&x| interpolation_period(f64::from(x)).is_some());
    (below, above)
}

/// 0x6007 abort connection option code: what the drive does when it loses the master (its
/// heartbeat consumer expires).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnConnectionLoss {
    /// 1: fault (the drive's fault reaction, usually a quick stop, then FAULT).
    Fault,
    /// 2: disable voltage (power off; the axis coasts).
    DisableVoltage,
    /// 3: quick stop (decelerate to rest and hold).
    QuickStop,
}

impl OnConnectionLoss {
    pub const NAMES: [&str; 3] = ["fault", "disable_voltage", "quick_stop"];

    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "fault" => Self::Fault,
            "disable_voltage" => Self::DisableVoltage,
            "quick_stop" => Self::QuickStop,
            _ => return None,
        })
    }

    pub fn code(self) -> u16 {
        match self {
            Self::Fault => 1,
            Self::DisableVoltage => 2,
            Self::QuickStop => 3,
        }
    }
}

/// What the set-up tells a drive beyond the PDO mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// 0x60C2: the interpolation period ([`interpolation_period`]).
    pub period: (u8, i8),
    /// 0x1006: the SYNC period in µs.
    pub sync_period_us: u32,
    /// 0x1017: the drive's heartbeat period in ms.
    pub heartbeat_ms: u16,
    /// 0x1016:01: the master's node id and the drive's heartbeat consumer time in ms (0: off).
    pub master_node: u8,
    pub consumer_ms: u16,
    /// 0x6007.
    pub on_connection_loss: OnConnectionLoss,
}

/// One step of the set-up: an SDO download, or an upload whose value must match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Write(SdoWrite),
    /// Read `index:sub` and require `value` (0x6061 mode display after setting 0x6060).
    Expect {
        index: u16,
        sub: u8,
        value: u32,
    },
}

impl Step {
    pub fn object(&self) -> (u16, u8) {
        match *self {
            Step::Write(w) => (w.index, w.sub),
            Step::Expect { index, sub, .. } => (index, sub),
        }
    }

    pub fn request(&self, node: u8) -> CanFrame {
        match *self {
            Step::Write(w) => sdo_download(node, w),
            Step::Expect { index, sub, .. } => sdo_upload(node, index, sub),
        }
    }
}

/// COB-IDs of the PDOs the set-up leaves unused: RPDO2–4, TPDO2–4 (their predefined
/// connection set ids). They are disabled (bit 31), so they neither move the drive nor load the bus.
pub const UNUSED_RPDOS: [(u16, u32); 3] = [(0x1401, 0x300), (0x1402, 0x400), (0x1403, 0x500)];
pub const UNUSED_TPDOS: [(u16, u32); 3] = [(0x1801, 0x280), (0x1802, 0x380), (0x1803, 0x480)];

/// Number of steps in [`setup`].
pub const SETUP_LEN: usize = 28;

/// The PRE-OPERATIONAL configuration for CSP (§1.8): RPDO1 = controlword + target position applied
/// on each SYNC, TPDO1 = statusword + actual position sent on each SYNC, the other PDOs disabled,
/// mode 8 (read back from 0x6061), the interpolation and SYNC periods of the control rate, the
/// drive's heartbeat, its heartbeat consumer of the master, and what it does when the master is lost.
pub fn setup(node: u8, o: &Options) -> [Step; SETUP_LEN] {
    let n = u32::from(node);
    let w = |index, sub, value, size| {
        Step::Write(SdoWrite {
            index,
            sub,
            value,
            size,
        })
    };
    let off = |(index, base): (u16, u32)| w(index, 1, 0x8000_0000 | (base + n), 4);
    let period = o.period;
    [
        w(0x1400, 1, 0x8000_0000 | (COB_RPDO1 + n), 4),
        w(0x1400, 2, 0x01, 1),
        w(0x1600, 0, 0, 1),
        w(0x1600, 1, 0x6040_0010, 4),
        w(0x1600, 2, 0x607A_0020, 4),
        w(0x1600, 0, 2, 1),
        w(0x1400, 1, COB_RPDO1 + n, 4),
        w(0x1800, 1, 0x8000_0000 | (COB_TPDO1 + n), 4),
        w(0x1800, 2, 0x01, 1),
        w(0x1A00, 0, 0, 1),
        w(0x1A00, 1, 0x6041_0010, 4),
        w(0x1A00, 2, 0x6064_0020, 4),
        w(0x1A00, 0, 2, 1),
        w(0x1800, 1, COB_TPDO1 + n, 4),
        off(UNUSED_RPDOS[0]),
        off(UNUSED_RPDOS[1]),
        off(UNUSED_RPDOS[2]),
        off(UNUSED_TPDOS[0]),
        off(UNUSED_TPDOS[1]),
        off(UNUSED_TPDOS[2]),
        w(0x6060, 0, u32::from(MODE_CSP), 1),
        Step::Expect {
            index: 0x6061,
            sub: 0,
            value: u32::from(MODE_CSP),
        },
        w(0x60C2, 1, u32::from(period.0), 1),
        w(0x60C2, 2, u32::from(period.1 as u8), 1),
        w(0x1006, 0, o.sync_period_us, 4),
        w(0x1017, 0, u32::from(o.heartbeat_ms), 2),
        w(
            0x1016,
            1,
            u32::from(o.master_node) << 16 | u32::from(o.consumer_ms),
            4,
        ),
        w(0x6007, 0, u32::from(o.on_connection_loss.code()), 2),
    ]
}

/// CAN ids node `node` answers on or is addressed by (beyond the shared NMT and SYNC ids).
pub fn ids(node: u8) -> [u32; 6] {
    let n = u32::from(node);
    [
        COB_EMCY + n,
        COB_TPDO1 + n,
        COB_RPDO1 + n,
        COB_SDO_RESPONSE + n,
        COB_SDO_REQUEST + n,
        COB_HEARTBEAT + n,
    ]
}

/// One drive's traffic per tick: RPDO1 and TPDO1 (6 bytes each), its heartbeat.
pub fn drive_load(heartbeat_ms: f64, period_ms: f64) -> [FrameLoad; 3] {
    [
        FrameLoad::each_tick(6),
        FrameLoad::each_tick(6),
        FrameLoad::every(1, heartbeat_ms, period_ms),
    ]
}

/// What a bus with CiA 402 drives carries once for all of them: the SYNC, and motiond's
/// heartbeat three times per consumer time.
pub fn bus_load(watchdog_ms: f64, period_ms: f64) -> [FrameLoad; 2] {
    [
        FrameLoad::each_tick(0),
        FrameLoad::every(1, watchdog_ms / 3.0, period_ms),
    ]
}

/// The master's heartbeat (NMT state operational), which the drives' consumers watch.
pub fn master_heartbeat(master_node: u8) -> CanFrame {
    CanFrame::new(COB_HEARTBEAT + u32::from(master_node), &[0x05])
}

/// An EMCY that reports an error (generic error bit 0 of the error register set) faults the
/// drive; one without it is a warning the drive keeps running through; code 0 is "error reset".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmcyClass {
    Reset,
    Warning,
    Error,
}

pub const ERROR_REGISTER_GENERIC: u8 = 0x01;

pub fn classify_emcy(e: &Emcy) -> EmcyClass {
    if e.code == 0 {
        EmcyClass::Reset
    } else if e.register & ERROR_REGISTER_GENERIC != 0 {
        EmcyClass::Error
    } else {
        EmcyClass::Warning
    }
}

/// CiA 402 power state machine states, decoded from the statusword (§1.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    NotReadyToSwitchOn,
    SwitchOnDisabled,
    ReadyToSwitchOn,
    SwitchedOn,
    OperationEnabled,
    QuickStopActive,
    FaultReactionActive,
    Fault,
    Unknown,
}

pub fn state(statusword: u16) -> State {
    let (m4, m6) = (statusword & 0x4F, statusword & 0x6F);
    match (m4, m6) {
        (0x00, _) => State::NotReadyToSwitchOn,
        (0x40, _) => State::SwitchOnDisabled,
        (0x0F, _) => State::FaultReactionActive,
        (0x08, _) => State::Fault,
        (_, 0x21) => State::ReadyToSwitchOn,
        (_, 0x23) => State::SwitchedOn,
        (_, 0x27) => State::OperationEnabled,
        (_, 0x07) => State::QuickStopActive,
        _ => State::Unknown,
    }
}

/// TPDO1 as mapped by [`setup`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tpdo1 {
    pub statusword: u16,
    pub position: i32,
}

/// NMT state carried by a heartbeat (bit 7, the node-guarding toggle, masked off).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NmtState {
    BootUp,
    Stopped,
    Operational,
    PreOperational,
    Other(u8),
}

/// An emergency message: error code (0 = error reset), error register, 5 vendor bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Emcy {
    pub code: u16,
    pub register: u8,
    pub vendor: [u8; 5],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SdoReply {
    DownloadOk { index: u16, sub: u8 },
    UploadOk { index: u16, sub: u8, value: u32 },
    Abort { index: u16, sub: u8, code: u32 },
}

/// What a received frame means for the drive at `node`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Message {
    Tpdo1(Tpdo1),
    Heartbeat(NmtState),
    Emcy(Emcy),
    Sdo(SdoReply),
}

fn le32(d: &[u8], at: usize) -> Option<u32> {
    let b = d.get(at..at + 4)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

fn le16(d: &[u8], at: usize) -> Option<u16> {
    let b = d.get(at..at + 2)?;
    Some(u16::from_le_bytes([b[0], b[1]]))
}

pub fn decode_tpdo1(d: &[u8]) -> Option<Tpdo1> {
    Some(Tpdo1 {
        statusword: le16(d, 0)?,
        position: le32(d, 2)? as i32,
    })
}

pub fn decode_heartbeat(d: &[u8]) -> Option<NmtState> {
    Some(match d.first()? & 0x7F {
        0x00 => NmtState::BootUp,
        0x04 => NmtState::Stopped,
        0x05 => NmtState::Operational,
        0x7F => NmtState::PreOperational,
        other => NmtState::Other(other),
    })
}

pub fn decode_emcy(d: &[u8]) -> Option<Emcy> {
    let v = d.get(3..8)?;
    Some(Emcy {
        code: le16(d, 0)?,
        register: *d.get(2)?,
        vendor: [v[0], v[1], v[2], v[3], v[4]],
    })
}

pub fn decode_sdo_reply(d: &[u8]) -> Option<SdoReply> {
    let cmd = *d.first()?;
    let index = le16(d, 1)?;
    let sub = *d.get(3)?;
    let value = le32(d, 4)?;
    match cmd {
        0x60 => Some(SdoReply::DownloadOk { index, sub }),
        0x80 => Some(SdoReply::Abort {
            index,
            sub,
            code: value,
        }),
        c if c & 0xE3 == 0x43 => {
            let bytes = 4 - ((c >> 2) & 0x3);
            let mask = if bytes == 4 {
                u32::MAX
            } else {
                (1u32 << (8 * u32::from(bytes))) - 1
            };
            Some(SdoReply::UploadOk {
                index,
                sub,
                value: value & mask,
            })
        }
        _ => None,
    }
}

/// Classifies a frame addressed from `node`; `None` for frames of other nodes or that do not parse.
pub fn classify(frame: &CanFrame, node: u8) -> Option<Message> {
    if frame.extended {
        return None;
    }
    let n = u32::from(node);
    let d = frame.data();
    match frame.id.checked_sub(n)? {
        COB_TPDO1 => decode_tpdo1(d).map(Message::Tpdo1),
        COB_HEARTBEAT => decode_heartbeat(d).map(Message::Heartbeat),
        COB_EMCY => decode_emcy(d).map(Message::Emcy),
        COB_SDO_RESPONSE => decode_sdo_reply(d).map(Message::Sdo),
        _ => None,
    }
}

/// The error code class of an EMCY (CiA 301 §7.2.7.1, CiA 402 additions), for the journal and
/// `status`: the most specific words known for `code`.
pub fn emcy_words(code: u16) -> &'static str {
    match code {
        0x0000 => "error reset or no error",
        0x2310 => "continuous over-current",
        0x2320 => "short circuit or earth leakage",
        0x3210 => "DC link over-voltage",
        0x3220 => "DC link under-voltage",
        0x4210 => "excess temperature of the device",
        0x4310 => "excess temperature of the drive",
        0x5441 | 0x5442 => "enable or limit switch input",
        0x7121 => "motor blocked",
        0x7305 => "incremental sensor 1 fault",
        0x8110 => "CAN overrun, objects lost",
        0x8120 => "CAN in error passive mode",
        0x8130 => "life guard or heartbeat error",
        0x8140 => "recovered from bus off",
        0x8210 => "PDO not processed due to length error",
        0x8220 => "PDO length exceeded",
        0x8611 => "following error",
        0x8612 => "reference limit",
        _ => match code >> 8 {
            0x10 => "generic error",
            0x20..=0x23 => "current",
            0x30..=0x33 => "voltage",
            0x40..=0x43 => "temperature",
            0x50..=0x5F => "device hardware",
            0x60..=0x63 => "device software",
            0x70..=0x7F => "additional modules",
            0x80 | 0x81 => "monitoring, communication",
            0x82 => "monitoring, protocol error",
            0x83..=0x8F => "monitoring",
            0x90 => "external error",
            0xF0 => "additional functions",
            0xFF => "device specific",
            _ => "unknown error code",
        },
    }
}

/// The bits set in an EMCY's error register (0x1001), in words.
pub fn error_register_words(register: u8) -> String {
    const BITS: [&str; 8] = [
        "generic",
        "current",
        "voltage",
        "temperature",
        "communication",
        "device profile",
        "reserved",
        "manufacturer",
    ];
    let set: Vec<&str> = (0..8)
        .filter(|b| register & (1 << b) != 0)
        .map(|b| BITS[b])
        .collect();
    if set.is_empty() {
        "none".to_string()
    } else {
        set.join(", ")
    }
}

/// An EMCY as the fault and warning codes carry it (`code | register << 16`), in words:
/// `EMCY 0x4210 excess temperature of the device (error register 0x08: temperature)`.
pub fn emcy_text(packed: u32) -> String {
    let code = (packed & 0xFFFF) as u16;
    let register = (packed >> 16) as u8;
    format!(
        "EMCY {code:#06x} {} (error register {register:#04x}: {})",
        emcy_words(code),
        error_register_words(register)
    )
}

/// An SDO abort code (CiA 301 §7.2.4.3.17) in words.
pub fn sdo_abort_words(code: u32) -> &'static str {
    match code {
        0x0504_0000 => "SDO protocol timed out",
        0x0601_0000 => "unsupported access to an object",
        0x0601_0002 => "attempt to write a read-only object",
        0x0602_0000 => "object does not exist in the object dictionary",
        0x0604_0041 => "object cannot be mapped to the PDO",
        0x0604_0042 => "the objects to be mapped would exceed the PDO length",
        0x0607_0010 => "data type or length does not match",
        0x0609_0011 => "sub-index does not exist",
        0x0609_0030 => "value range of parameter exceeded",
        0x0800_0000 => "general error",
        0x0800_0020 => "data cannot be transferred or stored",
        0x0800_0022 => "data cannot be transferred or stored in the present device state",
        _ => "unknown abort code",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::transport::slcan::codec as slcan;

    use slcan::line_text as line;

    fn check(f: CanFrame, id: u32, data: &[u8], slcan_line: &str) {
        assert_eq!(f.id, id);
        assert_eq!(f.data(), data);
        assert_eq!(line(&f), slcan_line);
    }

    #[test]
    fn nmt_vectors() {
        check(nmt(NMT_START, 5), 0, &[0x01, 0x05], "t00020105\r");
        check(nmt(NMT_START, 0), 0, &[0x01, 0x00], "t00020100\r");
        check(nmt(NMT_PRE_OPERATIONAL, 5), 0, &[0x80, 0x05], "t00028005\r");
        check(nmt(NMT_RESET_NODE, 5), 0, &[0x81, 0x05], "t00028105\r");
        assert_eq!(nmt(NMT_STOP, 5).data(), &[0x02, 0x05]);
        assert_eq!(nmt(NMT_RESET_COMMUNICATION, 5).data(), &[0x82, 0x05]);
    }

    #[test]
    fn sync_vector() {
        check(sync(), 0x080, &[], "t0800\r");
    }

    fn options(rate_hz: f64) -> Options {
        Options {
            period: interpolation_period(rate_hz).unwrap(),
            sync_period_us: (1e6 / rate_hz).round() as u32,
            heartbeat_ms: 100,
            master_node: 0x7F,
            consumer_ms: 5,
            on_connection_loss: OnConnectionLoss::QuickStop,
        }
    }

    #[test]
    fn setup_sdo_vectors_for_node_5_at_1khz() {
        let period = interpolation_period(1000.0).unwrap();
        assert_eq!(period, (1, -3));
        let steps = setup(5, &options(1000.0));
        let lines: Vec<String> = steps.iter().map(|s| line(&s.request(5))).collect();
        // The vectors of §1.8, in the order the setup sends them (TPDO mapping in between).
        let expected = [
            (0, "t60582300140105020080\r"),
            (1, "t60582F00140201000000\r"),
            (2, "t60582F00160000000000\r"),
            (3, "t60582300160110004060\r"),
            (4, "t60582300160220007A60\r"),
            (5, "t60582F00160002000000\r"),
            (6, "t60582300140105020000\r"),
            (20, "t60582F60600008000000\r"),
            (22, "t60582FC2600101000000\r"),
            (23, "t60582FC26002FD000000\r"),
            (25, "t60582B17100064000000\r"),
        ];
        for (i, want) in expected {
            assert_eq!(lines[i], want, "setup step {i}");
        }
        assert_eq!(
            steps[0].request(5).data(),
            &[0x23, 0x00, 0x14, 0x01, 0x05, 0x02, 0x00, 0x80]
        );
        // TPDO1 analogously: 0x1A00:01 = 0x60410010, :02 = 0x60640020, COB-ID 0x185.
        assert_eq!(
            steps[10].request(5).data(),
            &[0x23, 0x00, 0x1A, 0x01, 0x10, 0x00, 0x41, 0x60]
        );
        assert_eq!(
            steps[13].request(5).data(),
            &[0x23, 0x00, 0x18, 0x01, 0x85, 0x01, 0x00, 0x00]
        );
        // RPDO2 (0x305) and TPDO4 (0x485) disabled with bit 31.
        assert_eq!(
            steps[14].request(5).data(),
            &[0x23, 0x01, 0x14, 0x01, 0x05, 0x03, 0x00, 0x80]
        );
        assert_eq!(
            steps[19].request(5).data(),
            &[0x23, 0x03, 0x18, 0x01, 0x85, 0x04, 0x00, 0x80]
        );
        // 0x6061 read back; SYNC period 1000 µs; consumer of node 0x7F at 5 ms; quick stop.
        assert_eq!(lines[21], "t60584061600000000000\r");
        assert_eq!(lines[24], "t605823061000E8030000\r");
        assert_eq!(
            steps[26].request(5).data(),
            &[0x23, 0x16, 0x10, 0x01, 0x05, 0x00, 0x7F, 0x00]
        );
        assert_eq!(lines[27], "t60582B07600003000000\r");
    }

    #[test]
    fn periods_the_drive_can_and_cannot_be_told() {
        assert_eq!(interpolation_period(250.0), Some((4, -3)));
        assert_eq!(interpolation_period(400.0), Some((25, -4)));
        assert_eq!(interpolation_period(800.0), Some((125, -5)));
        assert_eq!(interpolation_period(300.0), None);
        assert_eq!(nearest_periodic_rates(300.0), (Some(250), Some(400)));
        let s = setup(5, &options(400.0));
        assert!(s.contains(&Step::Write(SdoWrite {
            index: 0x1006,
            sub: 0,
            value: 2500,
            size: 4
        })));
    }

    #[test]
    fn emcy_classes() {
        let e = |code, register| Emcy {
            code,
            register,
            vendor: [0; 5],
        };
        assert_eq!(classify_emcy(&e(0, 0)), EmcyClass::Reset);
        assert_eq!(classify_emcy(&e(0x4210, 0x08)), EmcyClass::Warning);
        assert_eq!(classify_emcy(&e(0x8611, 0x81)), EmcyClass::Error);
        assert_eq!(master_heartbeat(0x7F).data(), &[0x05]);
        assert_eq!(master_heartbeat(0x7F).id, 0x77F);
    }

    #[test]
    fn sdo_upload_of_actual_position() {
        assert_eq!(
            sdo_upload(5, 0x6064, 0).data(),
            &[0x40, 0x64, 0x60, 0x00, 0, 0, 0, 0]
        );
    }

    #[test]
    fn interpolation_periods() {
        assert_eq!(interpolation_period(500.0), Some((2, -3)));
        assert_eq!(interpolation_period(2000.0), Some((5, -4)));
        assert_eq!(interpolation_period(3.0), None);
        assert_eq!(interpolation_period(0.0), None);
    }

    #[test]
    fn rpdo1_vectors() {
        check(
            rpdo1(5, CW_SHUTDOWN, 0),
            0x205,
            &[6, 0, 0, 0, 0, 0],
            "t2056060000000000\r",
        );
        check(
            rpdo1(5, CW_SWITCH_ON, 0),
            0x205,
            &[7, 0, 0, 0, 0, 0],
            "t2056070000000000\r",
        );
        check(
            rpdo1(5, CW_ENABLE_OPERATION, 100_000),
            0x205,
            &[0x0F, 0, 0xA0, 0x86, 0x01, 0x00],
            "t20560F00A0860100\r",
        );
        check(
            rpdo1(5, CW_ENABLE_OPERATION, -4096),
            0x205,
            &[0x0F, 0, 0x00, 0xF0, 0xFF, 0xFF],
            "t20560F0000F0FFFF\r",
        );
        check(
            rpdo1(5, CW_FAULT_RESET, 0),
            0x205,
            &[0x80, 0, 0, 0, 0, 0],
            "t2056800000000000\r",
        );
    }

    #[test]
    fn statusword_states() {
        assert_eq!(state(0x0240), State::SwitchOnDisabled);
        assert_eq!(state(0x0250), State::SwitchOnDisabled);
        assert_eq!(state(0x0231), State::ReadyToSwitchOn);
        assert_eq!(state(0x0233), State::SwitchedOn);
        assert_eq!(state(0x0237), State::OperationEnabled);
        assert_eq!(state(0x1237), State::OperationEnabled);
        assert_eq!(state(0x0007), State::QuickStopActive);
        assert_eq!(state(0x000F), State::FaultReactionActive);
        assert_eq!(state(0x0218), State::Fault);
        assert_eq!(state(0x0000), State::NotReadyToSwitchOn);
    }

    #[test]
    fn heartbeat_emcy_and_sdo_replies() {
        let hb = |b| classify(&CanFrame::new(0x705, &[b]), 5);
        assert_eq!(hb(0x00), Some(Message::Heartbeat(NmtState::BootUp)));
        assert_eq!(hb(0x04), Some(Message::Heartbeat(NmtState::Stopped)));
        assert_eq!(hb(0x85), Some(Message::Heartbeat(NmtState::Operational)));
        assert_eq!(hb(0x7F), Some(Message::Heartbeat(NmtState::PreOperational)));
        let emcy = CanFrame::new(0x085, &[0x10, 0x82, 0x11, 0, 0, 0, 0, 0]);
        assert_eq!(
            classify(&emcy, 5),
            Some(Message::Emcy(Emcy {
                code: 0x8210,
                register: 0x11,
                vendor: [0; 5]
            }))
        );
        let ok = CanFrame::new(0x585, &[0x60, 0x00, 0x16, 0x01, 0, 0, 0, 0]);
        assert_eq!(
            classify(&ok, 5),
            Some(Message::Sdo(SdoReply::DownloadOk {
                index: 0x1600,
                sub: 1
            }))
        );
        let abort = CanFrame::new(0x585, &[0x80, 0x00, 0x16, 0x01, 0x41, 0x00, 0x04, 0x06]);
        assert_eq!(
            classify(&abort, 5),
            Some(Message::Sdo(SdoReply::Abort {
                index: 0x1600,
                sub: 1,
                code: 0x0604_0041
            }))
        );
        let up = CanFrame::new(0x585, &[0x43, 0x64, 0x60, 0x00, 0xA0, 0x86, 0x01, 0x00]);
        assert_eq!(
            classify(&up, 5),
            Some(Message::Sdo(SdoReply::UploadOk {
                index: 0x6064,
                sub: 0,
                value: 100_000
            }))
        );
        let tpdo = CanFrame::new(0x185, &[0x37, 0x12, 0x00, 0xF0, 0xFF, 0xFF]);
        assert_eq!(
            classify(&tpdo, 5),
            Some(Message::Tpdo1(Tpdo1 {
                statusword: 0x1237,
                position: -4096
            }))
        );
        // Other nodes' frames and short frames are not ours.
        assert_eq!(classify(&tpdo, 6), None);
        assert_eq!(classify(&CanFrame::new(0x185, &[0x37]), 5), None);
        assert_eq!(classify(&CanFrame::new(0x001, &[0x37]), 5), None);
    }
}
