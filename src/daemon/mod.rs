//! The control socket: operators' requests in, replies out, never in the loop's way.
//!
//! Wire format (see `../shared/docs/control-protocol.md`): a Unix stream socket carrying one JSON
//! object per line in each direction, one reply per request, in order.
//!
//! ```text
//! → {"cmd":"play","motion":"wave","speed":1.0}
//! ← {"ok":true,"motion":"wave","motion_id":3}
//! → {"cmd":"resume"}
//! ← {"ok":false,"error":{"code":"refused","message":"nothing is paused"}}
//! ```
//!
//! [`protocol`] turns bytes into a [`Request`](protocol::Request) and a
//! [`Reply`](protocol::Reply) into its line, [`reply`] has one type per reply (shared with
//! `motionctl`), [`framing`] cuts the byte stream into lines under the 64 KiB cap.

pub mod framing;
pub mod library;
pub mod protocol;
pub mod reply;
pub mod requests;
pub mod server;
pub mod socket;
mod stream;
pub mod systemd;
