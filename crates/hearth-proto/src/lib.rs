//! The protocol spoken between Hearth and its PHP workers.
//!
//! A worker talks to Hearth over a channel of its own (a socket on its
//! stdin), never over stdout, so nothing a PHP script prints can corrupt
//! the conversation. Everything on that socket is a [`Frame`]: a 12-byte
//! versioned header followed by a payload whose length the header declares.
//! `docs/protocol.md` is the specification; `tests/vectors/protocol.json`
//! holds the test vectors that both this crate and the PHP library decode.
//!
//! This crate does no I/O: it turns bytes into frames and messages into
//! bytes, so it can be tested at every split point and fuzzed.

mod codec;
mod error;
pub mod fields;
mod frame;
pub mod message;
pub mod php;

pub use codec::FrameDecoder;
pub use error::Error;
pub use frame::{
    begin_frame, encode_frame, encode_header, end_frame, flags, Frame, Kind, HEADER_LEN, VERSION,
};

/// The largest payload any frame may carry, whatever a peer configures.
pub const MAX_PAYLOAD_LIMIT: u32 = 64 * 1024 * 1024;

/// The payload limit used when nothing else is configured: large enough for
/// any request head and for body chunks, small enough that a corrupt length
/// cannot make Hearth allocate without bound.
pub const DEFAULT_MAX_PAYLOAD: u32 = 16 * 1024 * 1024;
