//! What a configuration says about an SLCAN adapter: its CAN bitrate.

use super::codec::{BITRATES, bitrate_command};
use crate::backend::settings::Problems;

/// Refuses a bitrate the adapter cannot be set to with `Sn`.
pub fn check_bitrate(bitrate: u32, key: &str, p: &mut Problems) {
    if bitrate_command(bitrate).is_none() {
        p.add(
            format!("{key}.bitrate"),
            format!(
                "SLCAN adapters are set to one of {} bit/s, got {bitrate}",
                BITRATES.map(|b| b.to_string()).join(", ")
            ),
        );
    }
}
