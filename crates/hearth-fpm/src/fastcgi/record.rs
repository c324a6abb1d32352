//! FastCGI records (the FastCGI 1.0 specification, section 3.3): encoding
//! what Hearth sends and decoding what php-fpm answers. No I/O.
//!
//! Written by hand rather than taken from `fastcgi-client` (0.12): that
//! crate sends the whole request body before it reads any of the
//! response, so a script that writes more than the socket buffers hold
//! before PHP has read the body deadlocks (PHP leaves a body larger than
//! `post_max_size` unread at startup; the test
//! `a_script_answering_without_reading_its_body_does_not_deadlock` stalls
//! with send-then-read); its params are a `HashMap` of UTF-8 strings
//! (no raw bytes, no order); and its response stream ends as if complete
//! when php-fpm closes the connection without FCGI_END_REQUEST (a child
//! killed by `request_terminate_timeout`), and reads 8 KiB per record it
//! yields, so many small records pile up in memory.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// The one request id used on each connection (no multiplexing, as nginx).
pub(crate) const REQUEST_ID: u16 = 1;
const VERSION: u8 = 1;
const HEADER_LEN: usize = 8;
/// The largest content a record can carry.
pub(crate) const MAX_CONTENT: usize = u16::MAX as usize;
/// A whole record at most: header, content and padding.
pub(crate) const MAX_RECORD: usize = HEADER_LEN + MAX_CONTENT + 255;

pub(crate) const BEGIN_REQUEST: u8 = 1;
pub(crate) const END_REQUEST: u8 = 3;
pub(crate) const PARAMS: u8 = 4;
pub(crate) const STDIN: u8 = 5;
pub(crate) const STDOUT: u8 = 6;
pub(crate) const STDERR: u8 = 7;

const ROLE_RESPONDER: u16 = 1;

/// One record as read from php-fpm.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) kind: u8,
    pub(crate) request_id: u16,
    pub(crate) content: Bytes,
}

/// Takes one whole record off the front of `buf`: `Ok(None)` when it is
/// not all there yet. A record declares at most 65,535 + 255 bytes, so a
/// buffer never holds more than one record plus one read.
pub(crate) fn decode(buf: &mut BytesMut) -> Result<Option<Record>, String> {
    if buf.len() < HEADER_LEN {
        return Ok(None);
    }
    if buf[0] != VERSION {
        return Err(format!("FastCGI version {} (expected 1)", buf[0]));
    }
    let kind = buf[1];
    let request_id = u16::from_be_bytes([buf[2], buf[3]]);
    let content_len = usize::from(u16::from_be_bytes([buf[4], buf[5]]));
    let padding = usize::from(buf[6]);
    if buf.len() < HEADER_LEN + content_len + padding {
        return Ok(None);
    }
    buf.advance(HEADER_LEN);
    let content = buf.split_to(content_len).freeze();
    buf.advance(padding);
    Ok(Some(Record {
        kind,
        request_id,
        content,
    }))
}

fn put_header(out: &mut BytesMut, kind: u8, content_len: usize) {
    debug_assert!(content_len <= MAX_CONTENT);
    out.put_u8(VERSION);
    out.put_u8(kind);
    out.put_u16(REQUEST_ID);
    out.put_u16(content_len as u16);
    out.put_u8(0); // padding: php-fpm does not need records aligned
    out.put_u8(0);
}

/// FCGI_BEGIN_REQUEST for the responder role, closing the connection
/// after the request (flags 0, as nginx without `fastcgi_keep_conn`).
pub(crate) fn begin_request(out: &mut BytesMut) {
    put_header(out, BEGIN_REQUEST, 8);
    out.put_u16(ROLE_RESPONDER);
    out.put_slice(&[0; 6]);
}

fn put_length(out: &mut BytesMut, len: usize) {
    if len < 128 {
        out.put_u8(len as u8);
    } else {
        out.put_u32(len as u32 | 0x8000_0000);
    }
}

/// The FCGI_PARAMS stream: name/value pairs in the caller's order, cut into
/// records, then the empty record that ends the stream.
pub(crate) fn params<N, V>(out: &mut BytesMut, pairs: &[(N, V)])
where
    N: AsRef<[u8]>,
    V: AsRef<[u8]>,
{
    let mut encoded = BytesMut::new();
    for (name, value) in pairs {
        let (name, value) = (name.as_ref(), value.as_ref());
        put_length(&mut encoded, name.len());
        put_length(&mut encoded, value.len());
        encoded.put_slice(name);
        encoded.put_slice(value);
    }
    stream(out, PARAMS, &encoded);
    put_header(out, PARAMS, 0);
}

/// `data` as records of `kind` (no end record: an empty `data` writes
/// nothing).
pub(crate) fn stream(out: &mut BytesMut, kind: u8, data: &[u8]) {
    for chunk in data.chunks(MAX_CONTENT) {
        put_header(out, kind, chunk.len());
        out.put_slice(chunk);
    }
}

/// The empty FCGI_STDIN record that ends the request body.
pub(crate) fn end_stdin(out: &mut BytesMut) {
    put_header(out, STDIN, 0);
}

/// FCGI_END_REQUEST's content: the app status and the protocol status.
pub(crate) fn end_request(content: &[u8]) -> Result<(u32, u8), String> {
    if content.len() < 5 {
        return Err(format!("END_REQUEST of {} bytes", content.len()));
    }
    let app = u32::from_be_bytes([content[0], content[1], content[2], content[3]]);
    Ok((app, content[4]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(kind: u8, content: &[u8], padding: u8) -> Vec<u8> {
        let mut out = vec![1, kind, 0, 1];
        out.extend_from_slice(&(content.len() as u16).to_be_bytes());
        out.push(padding);
        out.push(0);
        out.extend_from_slice(content);
        out.extend(std::iter::repeat_n(0xAA, usize::from(padding)));
        out
    }

    #[test]
    fn decoding_is_the_same_at_every_split_point() {
        let mut input = record(STDOUT, b"Status: 200\r\n\r\nhello", 3);
        input.extend(record(STDERR, b"PHP message: x", 0));
        input.extend(record(END_REQUEST, &[0, 0, 0, 0, 0, 0, 0, 0], 0));
        let whole = {
            let mut buf = BytesMut::from(&input[..]);
            let mut out = Vec::new();
            while let Some(r) = decode(&mut buf).expect("valid") {
                out.push(r);
            }
            assert!(buf.is_empty());
            out
        };
        assert_eq!(whole.len(), 3);
        assert_eq!(&whole[0].content[..], b"Status: 200\r\n\r\nhello");
        for cut in 0..=input.len() {
            let mut buf = BytesMut::new();
            let mut out = Vec::new();
            for part in [&input[..cut], &input[cut..]] {
                buf.extend_from_slice(part);
                while let Some(r) = decode(&mut buf).expect("valid") {
                    out.push(r);
                }
            }
            assert_eq!(out, whole, "cut at {cut}");
        }
    }

    #[test]
    fn a_wrong_version_is_an_error() {
        let mut buf = BytesMut::from(&[2u8, 6, 0, 1, 0, 0, 0, 0][..]);
        assert!(decode(&mut buf).is_err());
    }

    #[test]
    fn params_keep_order_and_raw_bytes_and_long_lengths() {
        let long = vec![b'v'; 200];
        let pairs: Vec<(&[u8], &[u8])> = vec![(b"B", b"\xff/raw"), (b"A", &long)];
        let mut out = BytesMut::new();
        params(&mut out, &pairs);
        let rec = decode(&mut out).expect("valid").expect("whole");
        assert_eq!(rec.kind, PARAMS);
        let c = &rec.content[..];
        assert_eq!(&c[..7], &[1, 5, b'B', 0xff, b'/', b'r', b'a']);
        let second = &c[8..];
        assert_eq!(second[0], 1);
        assert_eq!(&second[1..5], &(200u32 | 0x8000_0000).to_be_bytes());
        let end = decode(&mut out).expect("valid").expect("whole");
        assert_eq!((end.kind, end.content.len()), (PARAMS, 0));
        assert!(out.is_empty());
    }

    #[test]
    fn long_streams_are_cut_into_records() {
        let data = vec![7u8; MAX_CONTENT + 10];
        let mut out = BytesMut::new();
        stream(&mut out, STDIN, &data);
        let a = decode(&mut out).expect("valid").expect("whole");
        let b = decode(&mut out).expect("valid").expect("whole");
        assert_eq!((a.content.len(), b.content.len()), (MAX_CONTENT, 10));
    }
}
