//! Feeds arbitrary bytes, in arbitrary chunks, to the frame decoder and the
//! message parsers: they may return errors but must never panic, never
//! yield a payload over the limit, and never lose or invent bytes.
//!
//!     cargo +nightly fuzz run decode

#![no_main]

use bytes::BytesMut;
use hearth_proto::message::{ErrorReport, Ready, ResponseHead};
use hearth_proto::{FrameDecoder, Kind, HEADER_LEN};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&split, rest)) = data.split_first() else { return };
    let max = 4096;
    let decoder = FrameDecoder::new(max);
    let cut = usize::from(split) % (rest.len() + 1);
    let mut buf = BytesMut::new();
    let mut consumed = 0usize;
    for part in [&rest[..cut], &rest[cut..]] {
        buf.extend_from_slice(part);
        loop {
            match decoder.decode(&mut buf) {
                Ok(Some(frame)) => {
                    assert!(frame.payload.len() <= max as usize);
                    consumed += HEADER_LEN + frame.payload.len();
                    match frame.kind {
                        Kind::Ready => drop(Ready::decode(&frame.payload)),
                        Kind::Head => drop(ResponseHead::decode(&frame.payload)),
                        Kind::Error => drop(ErrorReport::decode(&frame.payload)),
                        _ => {}
                    }
                }
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
    assert_eq!(consumed + buf.len(), rest.len());
});
