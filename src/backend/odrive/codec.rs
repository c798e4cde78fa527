//! ODrive "CAN Simple": 11-bit ID = node << 5 | command, little-endian payloads (protocols.md §2).

use crate::backend::frame::{CanFrame, FrameLoad};

pub const HEARTBEAT: u8 = 0x01;
pub const ESTOP: u8 = 0x02;
pub const SET_AXIS_STATE: u8 = 0x07;
pub const GET_ENCODER_ESTIMATES: u8 = 0x09;
pub const SET_CONTROLLER_MODE: u8 = 0x0B;
pub const SET_INPUT_POS: u8 = 0x0C;
pub const SET_INPUT_VEL: u8 = 0x0D;
pub const CLEAR_ERRORS: u8 = 0x18;
/// 0.6: write/read an endpoint by its id in the firmware's flat_endpoints.json.
pub const RX_SDO: u8 = 0x04;
pub const TX_SDO: u8 = 0x05;

/// Firmware lines whose CAN Simple messages differ (the DBC files odrive-cansimple-0.5.6.dbc and
/// odrive-cansimple-0.6.10.dbc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Firmware {
    V05,
    V06,
}

pub const AXIS_STATE_IDLE: u32 = 1;
pub const AXIS_STATE_CLOSED_LOOP_CONTROL: u32 = 8;
pub const CONTROL_MODE_VELOCITY: i32 = 2;
pub const CONTROL_MODE_POSITION: i32 = 3;
pub const INPUT_MODE_PASSTHROUGH: i32 = 1;

/// Highest node id (6 bits).
pub const MAX_NODE: u8 = 0x3F;

pub fn can_id(node: u8, command: u8) -> u32 {
    (u32::from(node & MAX_NODE) << 5) | u32::from(command & 0x1F)
}

/// (node, command) of an arbitration ID.
pub fn split_id(id: u32) -> (u8, u8) {
    (((id >> 5) & 0x3F) as u8, (id & 0x1F) as u8)
}

fn two_words(node: u8, command: u8, a: [u8; 4], b: [u8; 4]) -> CanFrame {
    CanFrame::new(
        can_id(node, command),
        &[a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3]],
    )
}

/// Set_Axis_State, DLC 8 zero-padded as ODriveArduino sends it.
pub fn set_axis_state(node: u8, state: u32) -> CanFrame {
    two_words(node, SET_AXIS_STATE, state.to_le_bytes(), [0; 4])
}

pub fn set_controller_mode(node: u8, control_mode: i32, input_mode: i32) -> CanFrame {
    two_words(
        node,
        SET_CONTROLLER_MODE,
        control_mode.to_le_bytes(),
        input_mode.to_le_bytes(),
    )
}

/// A feed-forward in units of 0.001, rounded (not truncated like the C++ helper) and clamped to i16.
fn milli(value: f64) -> i16 {
    if value.is_nan() {
        return 0;
    }
    (value * 1000.0).round().clamp(-32768.0, 32767.0) as i16
}

/// Set_Input_Pos: position [turns] as f32, velocity [turns/s] and torque [N·m] feed-forward ×1000 as i16.
pub fn set_input_pos(node: u8, position: f32, velocity_ff: f64, torque_ff: f64) -> CanFrame {
    let v = milli(velocity_ff).to_le_bytes();
    let t = milli(torque_ff).to_le_bytes();
    two_words(
        node,
        SET_INPUT_POS,
        position.to_le_bytes(),
        [v[0], v[1], t[0], t[1]],
    )
}

/// Set_Input_Vel: velocity [turns/s] and torque feed-forward [N·m], both f32.
pub fn set_input_vel(node: u8, velocity: f32, torque_ff: f32) -> CanFrame {
    two_words(
        node,
        SET_INPUT_VEL,
        velocity.to_le_bytes(),
        torque_ff.to_le_bytes(),
    )
}

pub fn estop(node: u8) -> CanFrame {
    CanFrame::new(can_id(node, ESTOP), &[])
}

/// Clear_Errors: DLC 0 in 0.5; DLC 1 in 0.6, whose byte is Identify (0: do not blink the LED).
/// Whether a heartbeat's axis error says the axis was E-stopped (its ESTOP message or the
/// E-stop input), in the firmware's bit numbering (ESTOP_REQUESTED in the DBC files).
pub fn estop_requested(firmware: Firmware, axis_error: u32) -> bool {
    let bit = match firmware {
        Firmware::V05 => 0x4000,
        Firmware::V06 => 0x0200_0000,
    };
    axis_error & bit != 0
}

pub fn clear_errors(node: u8, firmware: Firmware) -> CanFrame {
    match firmware {
        Firmware::V05 => CanFrame::new(can_id(node, CLEAR_ERRORS), &[]),
        Firmware::V06 => CanFrame::new(can_id(node, CLEAR_ERRORS), &[0]),
    }
}

const OPCODE_WRITE: u8 = 1;

/// RxSdo write of a float endpoint (0.6): opcode, endpoint id u16, reserved, value.
pub fn write_endpoint(node: u8, endpoint: u16, value: f32) -> CanFrame {
    let e = endpoint.to_le_bytes();
    let v = value.to_le_bytes();
    CanFrame::new(
        can_id(node, RX_SDO),
        &[OPCODE_WRITE, e[0], e[1], 0, v[0], v[1], v[2], v[3]],
    )
}

/// RxSdo write of a boolean endpoint (0.6).
pub fn write_endpoint_bool(node: u8, endpoint: u16, value: bool) -> CanFrame {
    let e = endpoint.to_le_bytes();
    CanFrame::new(
        can_id(node, RX_SDO),
        &[OPCODE_WRITE, e[0], e[1], 0, u8::from(value), 0, 0, 0],
    )
}

/// CAN ids of node `node`: all 32 commands of its id block.
pub fn ids(node: u8) -> impl Iterator<Item = u32> {
    (0..32).map(move |c| can_id(node, c))
}

/// The axis heartbeat's default period (axis.config.can.heartbeat_msg_rate_ms).
pub const HEARTBEAT_MS: f64 = 100.0;

/// One axis's traffic per tick: the setpoint, encoder estimates (counted at the control rate:
/// they must be cyclic at least that fast), its heartbeat.
pub fn drive_load(period_ms: f64) -> [FrameLoad; 3] {
    [
        FrameLoad::each_tick(8),
        FrameLoad::each_tick(8),
        FrameLoad::every(8, HEARTBEAT_MS, period_ms),
    ]
}

/// Bytes 0–4 of the heartbeat, identical in firmware 0.5 and 0.6 (the rest is version dependent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heartbeat {
    pub axis_error: u32,
    pub axis_state: u8,
}

pub fn decode_heartbeat(d: &[u8]) -> Option<Heartbeat> {
    let b = d.get(0..5)?;
    Some(Heartbeat {
        axis_error: u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        axis_state: b[4],
    })
}

/// Encoder estimates: position [turns], velocity [turns/s].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EncoderEstimates {
    pub position: f32,
    pub velocity: f32,
}

pub fn decode_encoder_estimates(d: &[u8]) -> Option<EncoderEstimates> {
    let b = d.get(0..8)?;
    Some(EncoderEstimates {
        position: f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        velocity: f32::from_le_bytes([b[4], b[5], b[6], b[7]]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::transport::slcan::codec as slcan;

    use slcan::line_text as line;

    #[test]
    fn id_layout() {
        assert_eq!(can_id(1, 0x0C), 0x2C);
        assert_eq!(split_id(0x2C), (1, 0x0C));
    }

    #[test]
    fn vectors_node_1() {
        let f = set_controller_mode(1, CONTROL_MODE_POSITION, INPUT_MODE_PASSTHROUGH);
        assert_eq!((f.id, f.data()), (0x02B, &[3, 0, 0, 0, 1, 0, 0, 0][..]));
        assert_eq!(line(&f), "t02B80300000001000000\r");
        let f = set_axis_state(1, AXIS_STATE_CLOSED_LOOP_CONTROL);
        assert_eq!((f.id, f.data()), (0x027, &[8, 0, 0, 0, 0, 0, 0, 0][..]));
        assert_eq!(line(&f), "t02780800000000000000\r");
        let f = set_axis_state(1, AXIS_STATE_IDLE);
        assert_eq!(line(&f), "t02780100000000000000\r");
        let f = set_input_pos(1, 1.5, 0.5, -0.25);
        assert_eq!(
            (f.id, f.data()),
            (0x02C, &[0x00, 0x00, 0xC0, 0x3F, 0xF4, 0x01, 0x06, 0xFF][..])
        );
        assert_eq!(line(&f), "t02C80000C03FF40106FF\r");
        let f = set_input_pos(1, -0.25, 0.0, 0.0);
        assert_eq!(line(&f), "t02C8000080BE00000000\r");
        let f = estop(1);
        assert_eq!((f.id, f.len()), (0x022, 0));
        assert_eq!(line(&f), "t0220\r");
    }

    #[test]
    fn clear_errors_and_endpoint_writes_per_firmware() {
        assert_eq!(line(&clear_errors(1, Firmware::V05)), "t0380\r");
        assert_eq!(line(&clear_errors(1, Firmware::V06)), "t038100\r");
        // axis0.config.watchdog_timeout = 0.005 s at endpoint 200 of node 1.
        let f = write_endpoint(1, 200, 0.005);
        assert_eq!(f.id, 0x024);
        assert_eq!(f.data()[..4], [1, 200, 0, 0]);
        assert_eq!(f32::from_le_bytes(f.data()[4..].try_into().unwrap()), 0.005);
        assert_eq!(
            write_endpoint_bool(1, 201, true).data(),
            &[1, 201, 0, 0, 1, 0, 0, 0]
        );
    }

    #[test]
    fn feed_forward_is_clamped_to_its_range() {
        let f = set_input_pos(1, 0.0, 100.0, -100.0);
        assert_eq!(&f.data()[4..], &[0xFF, 0x7F, 0x00, 0x80]);
        let f = set_input_pos(1, 0.0, f64::NAN, 0.0);
        assert_eq!(&f.data()[4..6], &[0, 0]);
    }

    #[test]
    fn heartbeat_and_estimates() {
        assert_eq!(
            decode_heartbeat(&[0, 0, 0, 0, 8, 0, 1, 0]),
            Some(Heartbeat {
                axis_error: 0,
                axis_state: 8
            })
        );
        assert_eq!(decode_heartbeat(&[0, 0, 0]), None);
        let mut d = [0u8; 8];
        d[..4].copy_from_slice(&1.5f32.to_le_bytes());
        d[4..].copy_from_slice(&(-2.0f32).to_le_bytes());
        assert_eq!(
            decode_encoder_estimates(&d),
            Some(EncoderEstimates {
                position: 1.5,
                velocity: -2.0
            })
        );
        assert_eq!(decode_encoder_estimates(&d[..7]), None);
    }
}
