//! Every wire decoder on arbitrary bytes (what a drive, an adapter or line noise may send): CiA
//! 402, ODrive and MIT CAN payloads, the SLCAN line reader and the DYNAMIXEL packet parser. None
//! may panic; the stream parsers must always make progress and never report more than they got.
#![no_main]

use libfuzzer_sys::fuzz_target;
use motiond::backend::transport::slcan::codec as slcan;
use motiond::backend::{cia402, dynamixel, mit, odrive};

fuzz_target!(|data: &[u8]| {
    // CAN payloads are at most 8 bytes; every prefix is a frame someone may send.
    for len in 0..=data.len().min(8) {
        let payload = &data[..len];
        let _ = cia402::decode_tpdo1(payload);
        let _ = cia402::decode_heartbeat(payload);
        let _ = cia402::decode_emcy(payload);
        let _ = cia402::decode_sdo_reply(payload);
        let _ = odrive::decode_heartbeat(payload);
        let _ = odrive::decode_encoder_estimates(payload);
        let _ = mit::decode_reply(payload, &mit::Ranges::MINI_CHEETAH);
    }
    let _ = slcan::parse_line(data);
    let mut reader = slcan::LineReader::default();
    for &b in data {
        let _ = reader.push(b);
    }
    let mut params = [0u8; 64];
    let mut rest = data;
    while !rest.is_empty() {
        let consumed = match dynamixel::parse(rest, &mut params) {
            dynamixel::Parse::Packet { consumed, packet } => {
                assert!(consumed > 0 && packet.params <= params.len());
                consumed
            }
            dynamixel::Parse::Skip { consumed, .. } => {
                assert!(consumed > 0);
                consumed
            }
            dynamixel::Parse::Incomplete { consumed } => {
                // Nothing more can come: the unparsed tail stays.
                assert!(consumed <= rest.len());
                break;
            }
        };
        assert!(consumed <= rest.len());
        rest = &rest[consumed..];
    }
});
