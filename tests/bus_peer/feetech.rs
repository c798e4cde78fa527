//! A line of Feetech servos in memory: motiond's end is a [`Port`], the servos' end decodes
//! every packet with motiond's codec (checksums, words in the series' byte order) and answers as
//! the SDK's servos do: Sync Write of Goal_Position and Torque_Enable, Sync Read (STS) and Read of
//! Present_Position, a status byte with fault bits.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::sync::{Arc, Mutex};

use motiond::backend::feetech::codec::{self as ft, Series, inst, reg};
use motiond::backend::transport::serial::Port;

/// A line whose motiond end never allocates (its buffer reserved).
pub fn feetech_line(series: Series, servos: Vec<FeetechServo>) -> (HostPort, FeetechServos) {
    let line = Arc::new(Mutex::new(Line {
        to_servos: Vec::with_capacity(1 << 16),
        to_host: VecDeque::with_capacity(1 << 16),
    }));
    let peer = FeetechServos {
        series,
        line: line.clone(),
        servos,
        log: Vec::new(),
    };
    (HostPort(line), peer)
}

/// Both ends of the line: what motiond wrote, what the servos answer.
#[derive(Default)]
pub struct Line {
    pub to_servos: Vec<u8>,
    pub to_host: VecDeque<u8>,
}

pub struct HostPort(pub Arc<Mutex<Line>>);

impl Read for HostPort {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut l = self.0.lock().unwrap();
        let n = buf.len().min(l.to_host.len());
        if n == 0 {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        for b in buf.iter_mut().take(n) {
            *b = l.to_host.pop_front().unwrap();
        }
        Ok(n)
    }
}

impl Write for HostPort {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().to_servos.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Port for HostPort {}

#[derive(Debug, Clone, PartialEq)]
pub struct FeetechServo {
    pub id: u8,
    pub position: i32,
    pub goal: Option<i32>,
    pub torque: bool,
    /// The status byte it answers with.
    pub error: u8,
    pub goals: Vec<i32>,
    /// Min/Max_Position_Limit and Homing_Offset, as `lerobot-calibrate` writes them.
    pub limits: (u16, u16),
    pub homing_offset: i32,
    /// Acceleration (RAM; 0 at power-on), as a Sync Write left it.
    pub acceleration: u8,
}

impl FeetechServo {
    pub fn new(id: u8, position: i32) -> Self {
        Self {
            id,
            position,
            goal: None,
            torque: false,
            error: 0,
            goals: Vec::new(),
            limits: (0, 4095),
            homing_offset: 0,
            acceleration: 0,
        }
    }
}

/// The instruction packets in `bytes`: (id, instruction, parameters).
pub fn feetech_packets(bytes: &[u8]) -> Vec<(u8, u8, Vec<u8>)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 6 <= bytes.len() {
        assert_eq!(
            bytes[at..at + 2],
            [0xFF, 0xFF],
            "a packet starts at {at}: {bytes:02x?}"
        );
        let len = usize::from(bytes[at + 3]);
        let end = at + len + 4;
        assert_eq!(
            ft::checksum(&bytes[at + 2..end - 1]),
            bytes[end - 1],
            "checksum"
        );
        out.push((
            bytes[at + 2],
            bytes[at + 4],
            bytes[at + 5..end - 1].to_vec(),
        ));
        at = end;
    }
    assert_eq!(at, bytes.len(), "no packet cut short");
    out
}

pub struct FeetechServos {
    pub series: Series,
    pub line: Arc<Mutex<Line>>,
    pub servos: Vec<FeetechServo>,
    /// Every packet motiond sent, in order.
    pub log: Vec<(u8, u8, Vec<u8>)>,
}

impl FeetechServos {
    fn status(&self, s: &FeetechServo) -> Vec<u8> {
        let mut out = [0u8; 16];
        let word = self
            .series
            .encode_position(s.position)
            .expect("a position the register holds");
        let n = ft::packet(&mut out, s.id, s.error, &word);
        out[..n].to_vec()
    }

    /// Its registers from Min_Position_Limit (9) to Homing_Offset (31, 32): the limits in the
    /// series' byte order, the offset sign-magnitude with bit 11.
    fn calibration(&self, s: &FeetechServo) -> Vec<u8> {
        let mut table = vec![0u8; usize::from(reg::HOMING_OFFSET + 2 - reg::MIN_POSITION_LIMIT)];
        table[0..2].copy_from_slice(&self.series.word(s.limits.0));
        table[2..4].copy_from_slice(&self.series.word(s.limits.1));
        let magnitude = s.homing_offset.unsigned_abs() as u16 & 0x7FF;
        let offset = if s.homing_offset < 0 {
            magnitude | 0x800
        } else {
            magnitude
        };
        let at = usize::from(reg::HOMING_OFFSET - reg::MIN_POSITION_LIMIT);
        table[at..at + 2].copy_from_slice(&self.series.word(offset));
        let mut out = [0u8; 64];
        let n = ft::packet(&mut out, s.id, s.error, &table);
        out[..n].to_vec()
    }

    /// Answers what motiond wrote since the last call; returns those packets.
    pub fn step(&mut self) -> Vec<(u8, u8, Vec<u8>)> {
        // Drained, not taken: the line keeps its capacity (motiond's writes never allocate).
        let bytes: Vec<u8> = self.line.lock().unwrap().to_servos.drain(..).collect();
        let got = feetech_packets(&bytes);
        for (id, instruction, params) in &got {
            match (*instruction, params.as_slice()) {
                (inst::SYNC_WRITE, [address, len, entries @ ..]) => {
                    for e in entries.chunks(usize::from(*len) + 1) {
                        let Some(s) = self.servos.iter_mut().find(|s| s.id == e[0]) else {
                            continue;
                        };
                        match *address {
                            reg::GOAL_POSITION => {
                                let g = self.series.decode_position([e[1], e[2]]);
                                s.goal = Some(g);
                                s.goals.push(g);
                            }
                            reg::TORQUE_ENABLE => s.torque = e[1] == 1,
                            reg::ACCELERATION => s.acceleration = e[1],
                            a => panic!("write to {a}"),
                        }
                        if s.torque {
                            s.position = s.goal.unwrap_or(s.position);
                        }
                    }
                }
                (inst::SYNC_READ, [reg::PRESENT_POSITION, 2, ids @ ..]) => {
                    assert!(self.series.has_sync_read());
                    for id in ids {
                        let reply = self
                            .servos
                            .iter()
                            .find(|s| s.id == *id)
                            .map(|s| self.status(s));
                        self.line.lock().unwrap().to_host.extend(reply.unwrap());
                    }
                }
                (inst::READ, [reg::PRESENT_POSITION, 2]) => {
                    let reply = self
                        .servos
                        .iter()
                        .find(|s| s.id == *id)
                        .map(|s| self.status(s));
                    self.line.lock().unwrap().to_host.extend(reply.unwrap());
                }
                (inst::READ, [reg::MIN_POSITION_LIMIT, len])
                    if *len == reg::HOMING_OFFSET + 2 - reg::MIN_POSITION_LIMIT =>
                {
                    let reply = self
                        .servos
                        .iter()
                        .find(|s| s.id == *id)
                        .map(|s| self.calibration(s));
                    self.line.lock().unwrap().to_host.extend(reply.unwrap());
                }
                other => panic!("unexpected packet to {id}: {other:02x?}"),
            }
        }
        self.log.extend(got.iter().cloned());
        got
    }
}
