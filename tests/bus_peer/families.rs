//! A Damiao motor and a Robstride motor on any CAN transport: they answer every frame addressed
//! to them as the motors do (Damiao: feedback with the state nibble on the master id, registers
//! behind 0x7FF; Robstride: type-2 feedback with mode and fault bits in the 29-bit id), follow
//! commands at once when enabled, and log what they received.

use std::collections::BTreeMap;

use motiond::backend::damiao::codec as dm;
use motiond::backend::frame::CanFrame;
use motiond::backend::mit;
use motiond::backend::robstride::codec as rs;
use motiond::backend::transport::FrameIo;

/// A Damiao motor in MIT mode.
pub struct DamiaoMotor {
    pub id: u8,
    pub master_id: u32,
    /// The motor's frames are CAN-FD (its CAN-FD mode set).
    pub fd: bool,
    /// Registers by RID, as their four little-endian bytes.
    pub registers: BTreeMap<u8, [u8; 4]>,
    /// 0 disabled, 1 enabled, 8..=E a latched error.
    pub state: u8,
    pub position: f32,
    /// Commands received while enabled, in order.
    pub commands: Vec<mit::Command>,
    /// Special frames received (last byte: FC enable, FD disable, FB clear, FE zero), in order.
    pub specials: Vec<u8>,
    /// Register requests received: (operation, RID, value).
    pub register_requests: Vec<(u8, u8, [u8; 4])>,
}

impl DamiaoMotor {
    /// A disabled motor at `position` whose PMAX/VMAX/TMAX registers hold `pvt`.
    pub fn new(id: u8, master_id: u32, pvt: (f32, f32, f32), position: f32) -> Self {
        let registers = BTreeMap::from([
            (dm::RID_TIMEOUT, [0; 4]),
            (dm::RID_CTRL_MODE, dm::CTRL_MODE_MIT.to_le_bytes()),
            (dm::RID_PMAX, pvt.0.to_le_bytes()),
            (dm::RID_VMAX, pvt.1.to_le_bytes()),
            (dm::RID_TMAX, pvt.2.to_le_bytes()),
        ]);
        Self {
            id,
            master_id,
            fd: false,
            registers,
            state: dm::STATE_DISABLED,
            position,
            commands: Vec::new(),
            specials: Vec::new(),
            register_requests: Vec::new(),
        }
    }

    fn register(&self, rid: u8) -> f32 {
        f32::from_le_bytes(self.registers.get(&rid).copied().unwrap_or_default())
    }

    /// The ranges its registers hold.
    pub fn ranges(&self) -> mit::Ranges {
        dm::ranges(
            self.register(dm::RID_PMAX),
            self.register(dm::RID_VMAX),
            self.register(dm::RID_TMAX),
        )
    }

    fn send(&self, io: &mut impl FrameIo, d: &[u8; 8]) {
        let f = if self.fd {
            CanFrame::new_fd(self.master_id, false, d)
        } else {
            CanFrame::new(self.master_id, d)
        };
        let _ = io.send(&f);
    }

    /// Its feedback: `id | state << 4`, position, velocity 0, torque 0, 30 °C twice.
    pub fn feedback(&self) -> [u8; 8] {
        let packed = mit::pack(
            &mit::Command {
                p: self.position,
                ..Default::default()
            },
            &self.ranges(),
        );
        let zero_t = mit::float_to_uint(0.0, -self.ranges().t_max, self.ranges().t_max, 12);
        [
            (self.id & 0x0F) | self.state << 4,
            packed[0],
            packed[1],
            packed[2],
            (packed[3] & 0xF0) | (zero_t >> 8) as u8,
            zero_t as u8,
            30,
            30,
        ]
    }

    /// Handles one received frame; frames for other motors are ignored.
    pub fn on_frame(&mut self, f: &CanFrame, io: &mut impl FrameIo) {
        let d = f.data();
        if f.extended || d.len() != 8 {
            return;
        }
        if f.id == dm::REGISTER_ID && d[0] == self.id && d[1] == 0 {
            let value = [d[4], d[5], d[6], d[7]];
            self.register_requests.push((d[2], d[3], value));
            if d[2] == dm::WRITE {
                self.registers.insert(d[3], value);
            }
            let v = self.registers.get(&d[3]).copied().unwrap_or_default();
            self.send(io, &[self.id, 0, d[2], d[3], v[0], v[1], v[2], v[3]]);
            return;
        }
        if f.id != u32::from(self.id) {
            return;
        }
        if d[..7] == [0xFF; 7] && (0xFB..=0xFE).contains(&d[7]) {
            self.specials.push(d[7]);
            match d[7] {
                0xFC if !dm::is_error(self.state) => self.state = dm::STATE_ENABLED,
                0xFD if !dm::is_error(self.state) => self.state = dm::STATE_DISABLED,
                0xFB => self.state = dm::STATE_DISABLED,
                _ => {}
            }
        } else if self.state == dm::STATE_ENABLED {
            let c = super::mit_command(d, &self.ranges());
            self.commands.push(c);
            // A compliant command (no gains) leaves the motor where the hand puts it.
            if c.kp > 0.0 {
                self.position = c.p;
            }
        }
        self.send(io, &self.feedback());
    }
}

/// A Robstride or CyberGear motor in motion mode.
pub struct RobstrideMotor {
    pub id: u8,
    pub ranges: rs::Ranges,
    /// 0 reset, 2 run.
    pub mode: u8,
    /// Feedback fault bits (id bits 16–21), cleared by a stop with data[0] = 1.
    pub faults: u8,
    pub position: f32,
    /// Parameters by index (their four bytes): `run_mode` 0 from the start, the ones written.
    pub params: BTreeMap<u16, [u8; 4]>,
    /// Motion commands received in run mode, in order (torque from the id).
    pub commands: Vec<rs::Motion>,
    /// Every frame's communication type, in order.
    pub kinds: Vec<u8>,
    /// The host id of the last frame (the feedback's target).
    pub host: u8,
}

impl RobstrideMotor {
    pub fn new(id: u8, ranges: rs::Ranges, position: f32) -> Self {
        Self {
            id,
            ranges,
            mode: rs::MODE_RESET,
            faults: 0,
            position,
            params: BTreeMap::from([(rs::PARAM_RUN_MODE, [rs::RUN_MODE_MOTION, 0, 0, 0])]),
            commands: Vec::new(),
            kinds: Vec::new(),
            host: 0,
        }
    }

    /// Its feedback frame to the host: mode and faults in the id, position, velocity and
    /// torque 0, 30.0 °C.
    pub fn feedback(&self) -> CanFrame {
        let r = &self.ranges;
        let p = mit::float_to_uint(self.position, -r.p_max, r.p_max, 16).to_be_bytes();
        let zero = |max: f32| mit::float_to_uint(0.0, -max, max, 16).to_be_bytes();
        let (v, t) = (zero(r.v_max), zero(r.t_max));
        let data =
            u16::from(self.mode) << 14 | u16::from(self.faults & 0x3F) << 8 | u16::from(self.id);
        CanFrame::new_extended(
            rs::ext_id(rs::FEEDBACK, data, self.host),
            &[p[0], p[1], v[0], v[1], t[0], t[1], 0x01, 0x2C],
        )
    }

    /// Decodes a motion frame.
    pub fn motion(&self, f: &CanFrame) -> rs::Motion {
        let (_, torque, _) = rs::split_id(f.id);
        let d = f.data();
        let r = &self.ranges;
        let word = |i: usize| u16::from_be_bytes([d[i], d[i + 1]]);
        rs::Motion {
            p: mit::uint_to_float(word(0), -r.p_max, r.p_max, 16),
            v: mit::uint_to_float(word(2), -r.v_max, r.v_max, 16),
            kp: mit::uint_to_float(word(4), 0.0, r.kp_max, 16),
            kd: mit::uint_to_float(word(6), 0.0, r.kd_max, 16),
            t: mit::uint_to_float(torque, -r.t_max, r.t_max, 16),
        }
    }

    /// Handles one received frame; frames for other motors are ignored.
    pub fn on_frame(&mut self, f: &CanFrame, io: &mut impl FrameIo) {
        let (kind, data, target) = rs::split_id(f.id);
        if !f.extended || target != self.id || f.len() != 8 {
            return;
        }
        self.kinds.push(kind);
        let d = f.data();
        match kind {
            rs::MOTION => {
                if self.mode == rs::MODE_RUN {
                    let c = self.motion(f);
                    self.commands.push(c);
                    if c.kp > 0.0 {
                        self.position = c.p;
                    }
                }
                // Type 1 carries the torque where the others carry the host id: the replies
                // go to the host of the last other frame.
            }
            rs::ENABLE if self.faults == 0 => {
                self.host = data as u8;
                self.mode = rs::MODE_RUN;
            }
            rs::STOP => {
                self.host = data as u8;
                self.mode = rs::MODE_RESET;
                if d[0] == 1 {
                    self.faults = 0;
                }
            }
            rs::WRITE_PARAM => {
                self.host = data as u8;
                self.params
                    .insert(u16::from_le_bytes([d[0], d[1]]), [d[4], d[5], d[6], d[7]]);
            }
            rs::READ_PARAM => {
                self.host = data as u8;
                let v = self.params.get(&u16::from_le_bytes([d[0], d[1]]));
                let v = v.copied().unwrap_or_default();
                let id = rs::ext_id(rs::READ_PARAM, u16::from(self.id), self.host);
                let reply = [d[0], d[1], 0, 0, v[0], v[1], v[2], v[3]];
                let _ = io.send(&CanFrame::new_extended(id, &reply));
                return;
            }
            _ => self.host = data as u8,
        }
        let _ = io.send(&self.feedback());
    }
}
