use bytes::{Buf, BytesMut};

use crate::frame::{Frame, Kind, HEADER_LEN, VERSION};
use crate::Error;

/// Cuts frames out of a byte buffer that fills up as reads arrive.
///
/// Like mini-redis' `Connection::parse_frame`: first check whether a whole
/// frame is buffered, then take it, then advance. Unlike it, the declared
/// length is checked against the maximum *before* any room is reserved for
/// the payload, so a corrupt or hostile header cannot make us allocate.
#[derive(Debug, Clone)]
pub struct FrameDecoder {
    max_payload: u32,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        FrameDecoder::new(crate::DEFAULT_MAX_PAYLOAD)
    }
}

impl FrameDecoder {
    /// A decoder that refuses payloads longer than `max_payload` bytes
    /// (itself capped at [`crate::MAX_PAYLOAD_LIMIT`]).
    pub fn new(max_payload: u32) -> Self {
        FrameDecoder {
            max_payload: max_payload.min(crate::MAX_PAYLOAD_LIMIT),
        }
    }

    pub fn max_payload(&self) -> u32 {
        self.max_payload
    }

    /// Takes the next whole frame off the front of `buf`.
    ///
    /// `Ok(None)` means more bytes are needed; `buf` is left untouched
    /// except that room may be reserved for the rest of the frame. An error
    /// means the stream is not this protocol and must be abandoned.
    pub fn decode(&self, buf: &mut BytesMut) -> Result<Option<Frame>, Error> {
        if buf.len() < HEADER_LEN {
            return Ok(None);
        }
        let version = buf[0];
        if version != VERSION {
            return Err(Error::version(version));
        }
        let kind = Kind::from_u8(buf[1]).ok_or_else(|| Error::unknown_kind(buf[1]))?;
        let flags = u16::from_be_bytes([buf[2], buf[3]]);
        let request_id = u32::from_be_bytes([buf[4], buf[5], buf[6], buf[7]]);
        let len = u32::from_be_bytes([buf[8], buf[9], buf[10], buf[11]]);
        if len > self.max_payload {
            return Err(Error::too_large(len, self.max_payload));
        }
        let total = HEADER_LEN + len as usize;
        if buf.len() < total {
            buf.reserve(total - buf.len());
            return Ok(None);
        }
        buf.advance(HEADER_LEN);
        let payload = buf.split_to(len as usize).freeze();
        Ok(Some(Frame {
            kind,
            flags,
            request_id,
            payload,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{encode_frame, flags};
    use bytes::{BufMut, Bytes};
    use proptest::prelude::*;

    fn sample_stream() -> (Vec<u8>, Vec<Frame>) {
        let frames = vec![
            Frame::new(
                Kind::Ready,
                0,
                Bytes::from_static(b"\x00\x03pid\x00\x00\x00\x0212"),
            ),
            Frame::new(Kind::Request, 7, Bytes::from_static(b"a:0:{}")),
            Frame::new(Kind::Body, 7, Bytes::new()),
            Frame::new(Kind::Body, 7, Bytes::from(vec![0u8; 300])),
            Frame::new(Kind::End, 7, Bytes::new()).with_flags(flags::CLOSE),
            Frame::new(Kind::Stop, 0, Bytes::new()),
        ];
        let mut buf = BytesMut::new();
        for f in &frames {
            f.encode(&mut buf);
        }
        (buf.to_vec(), frames)
    }

    fn decode_all(decoder: &FrameDecoder, chunks: &[&[u8]]) -> Result<Vec<Frame>, Error> {
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        for chunk in chunks {
            buf.put_slice(chunk);
            while let Some(frame) = decoder.decode(&mut buf)? {
                out.push(frame);
            }
        }
        assert!(buf.is_empty(), "bytes left over after the last frame");
        Ok(out)
    }

    /// Cut the stream at every byte offset, like hyper's decoder tests, and
    /// expect the same frames whatever the cut.
    #[test]
    fn every_split_point_yields_the_same_frames() {
        let (bytes, frames) = sample_stream();
        let decoder = FrameDecoder::default();
        for cut in 0..=bytes.len() {
            let (a, b) = bytes.split_at(cut);
            assert_eq!(
                decode_all(&decoder, &[a, b]).unwrap(),
                frames,
                "cut at {cut}"
            );
        }
        for a in 0..=bytes.len() {
            for b in a..=bytes.len() {
                let got = decode_all(&decoder, &[&bytes[..a], &bytes[a..b], &bytes[b..]]).unwrap();
                assert_eq!(got, frames, "cuts at {a} and {b}");
            }
        }
    }

    #[test]
    fn byte_at_a_time() {
        let (bytes, frames) = sample_stream();
        let chunks: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(
            decode_all(&FrameDecoder::default(), &chunks).unwrap(),
            frames
        );
    }

    #[test]
    fn oversize_frame_is_refused_from_its_header_alone() {
        let decoder = FrameDecoder::new(1024);
        let mut buf = BytesMut::new();
        buf.put_slice(&[VERSION, Kind::Body as u8, 0, 0, 0, 0, 0, 1]);
        buf.put_u32(1025);
        let capacity_before = buf.capacity();
        let err = decoder.decode(&mut buf).unwrap_err();
        assert!(err.is_too_large(), "{err}");
        assert!(
            buf.capacity() <= capacity_before,
            "no room reserved for a refused frame"
        );
    }

    #[test]
    fn a_frame_at_the_limit_is_accepted() {
        let decoder = FrameDecoder::new(1024);
        let mut buf = BytesMut::new();
        encode_frame(&mut buf, Kind::Body, 0, 1, &[7u8; 1024]);
        let frame = decoder.decode(&mut buf).unwrap().unwrap();
        assert_eq!(frame.payload.len(), 1024);
    }

    #[test]
    fn frames_written_in_place_get_their_length() {
        let mut buf = BytesMut::new();
        let at = crate::begin_frame(&mut buf, Kind::Request, 0, 9);
        buf.put_slice(b"payload written later");
        crate::end_frame(&mut buf, at);
        let frame = FrameDecoder::default().decode(&mut buf).unwrap().unwrap();
        assert_eq!(frame.kind, Kind::Request);
        assert_eq!(frame.request_id, 9);
        assert_eq!(&frame.payload[..], b"payload written later");
    }

    #[test]
    fn configured_limit_is_capped() {
        assert_eq!(
            FrameDecoder::new(u32::MAX).max_payload(),
            crate::MAX_PAYLOAD_LIMIT
        );
    }

    #[test]
    fn wrong_version_and_unknown_kind_are_errors() {
        let decoder = FrameDecoder::default();
        let mut buf = BytesMut::from(&[2u8, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0][..]);
        assert!(decoder.decode(&mut buf).unwrap_err().is_version());
        let mut buf = BytesMut::from(&[VERSION, 99, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0][..]);
        assert!(decoder.decode(&mut buf).unwrap_err().is_unknown_kind());
    }

    #[test]
    fn incomplete_header_and_payload_wait_for_more() {
        let decoder = FrameDecoder::default();
        let mut buf = BytesMut::from(&[VERSION, 3, 0][..]);
        assert_eq!(decoder.decode(&mut buf).unwrap(), None);
        let mut buf = BytesMut::new();
        encode_frame(&mut buf, Kind::Body, 0, 1, b"hello");
        buf.truncate(buf.len() - 1);
        assert_eq!(decoder.decode(&mut buf).unwrap(), None);
        assert_eq!(
            buf.len(),
            HEADER_LEN + 4,
            "nothing consumed while incomplete"
        );
    }

    fn arb_frame() -> impl Strategy<Value = Frame> {
        (
            1u8..=11,
            any::<u16>(),
            any::<u32>(),
            proptest::collection::vec(any::<u8>(), 0..600),
        )
            .prop_map(|(k, flags, id, payload)| Frame {
                kind: Kind::from_u8(k).expect("kind in range"),
                flags,
                request_id: id,
                payload: Bytes::from(payload),
            })
    }

    proptest! {
        /// Encoding then decoding gives the frames back, however the bytes
        /// are chunked on the way.
        #[test]
        fn round_trip_under_arbitrary_chunking(
            frames in proptest::collection::vec(arb_frame(), 0..12),
            cuts in proptest::collection::vec(any::<usize>(), 0..20),
        ) {
            let mut bytes = BytesMut::new();
            for f in &frames {
                f.encode(&mut bytes);
            }
            let bytes = bytes.to_vec();
            let mut offsets: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
            offsets.push(0);
            offsets.push(bytes.len());
            offsets.sort_unstable();
            let chunks: Vec<&[u8]> = offsets.windows(2).map(|w| &bytes[w[0]..w[1]]).collect();
            prop_assert_eq!(decode_all(&FrameDecoder::default(), &chunks).unwrap(), frames);
        }

        /// Garbage never panics the decoder: it yields frames, asks for more
        /// bytes, or returns an error.
        #[test]
        fn garbage_never_panics(data in proptest::collection::vec(any::<u8>(), 0..2048), max in 0u32..4096) {
            let decoder = FrameDecoder::new(max);
            let mut buf = BytesMut::from(&data[..]);
            while let Ok(Some(frame)) = decoder.decode(&mut buf) {
                prop_assert!(frame.payload.len() as u32 <= max);
            }
        }
    }
}
