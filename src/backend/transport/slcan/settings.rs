//! What a configuration says about an SLCAN adapter: its CAN bitrate.

use super::codec::{BITRATES, bitrate_command};

/// Why an adapter cannot be set to `bitrate` with `Sn`, if it cannot.
pub fn bitrate_problem(bitrate: u32) -> Option<String> {
    bitrate_command(bitrate).is_none().then(|| {
        format!(
            "SLCAN adapters are set to one of {} bit/s, got {bitrate}",
            BITRATES.map(|b| b.to_string()).join(", ")
        )
    })
}
