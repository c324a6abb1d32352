//! Field lists: the payload of `Ready` and `Error` frames.
//!
//! A field list is a sequence of entries, each a key and a value:
//! `u16 key length, key bytes, u32 value length, value bytes` (big-endian).
//! Keys are ASCII names; values are arbitrary bytes (a stack trace, a path).
//! Easy to write from PHP with `pack()`, easy to read here without a parser.

use bytes::{BufMut, Bytes, BytesMut};

use crate::Error;

/// Appends one entry to a field list being built in `dst`.
///
/// # Panics
/// If the key is longer than 65535 bytes or the value longer than 4 GiB.
pub fn put(dst: &mut BytesMut, key: &str, value: &[u8]) {
    let klen = u16::try_from(key.len()).expect("field key longer than u16");
    let vlen = u32::try_from(value.len()).expect("field value longer than u32");
    dst.reserve(6 + key.len() + value.len());
    dst.put_u16(klen);
    dst.put_slice(key.as_bytes());
    dst.put_u32(vlen);
    dst.put_slice(value);
}

/// A decoded field list, in the order it was sent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fields {
    entries: Vec<(String, Bytes)>,
}

impl Fields {
    /// Decodes a whole payload. Keys must be UTF-8; a truncated entry or
    /// trailing bytes make the payload malformed.
    pub fn decode(payload: &Bytes) -> Result<Fields, Error> {
        let mut entries = Vec::new();
        let mut at = 0usize;
        let data = &payload[..];
        while at < data.len() {
            let klen = read_u16(data, at).ok_or(Error::malformed("truncated field key length"))?;
            at += 2;
            let key = data
                .get(at..at + klen as usize)
                .ok_or(Error::malformed("truncated field key"))?;
            let key = std::str::from_utf8(key)
                .map_err(|_| Error::malformed("field key is not UTF-8"))?
                .to_owned();
            at += klen as usize;
            let vlen = read_u32(data, at).ok_or(Error::malformed("truncated field value length"))?
                as usize;
            at += 4;
            if data.len() - at < vlen {
                return Err(Error::malformed("truncated field value"));
            }
            entries.push((key, payload.slice(at..at + vlen)));
            at += vlen;
        }
        Ok(Fields { entries })
    }

    /// The value of the first entry called `key`.
    pub fn get(&self, key: &str) -> Option<&Bytes> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The value of `key` as text, with invalid UTF-8 replaced.
    pub fn get_str(&self, key: &str) -> Option<String> {
        self.get(key)
            .map(|v| String::from_utf8_lossy(v).into_owned())
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &Bytes)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

fn read_u16(data: &[u8], at: usize) -> Option<u16> {
    let b = data.get(at..at + 2)?;
    Some(u16::from_be_bytes([b[0], b[1]]))
}

fn read_u32(data: &[u8], at: usize) -> Option<u32> {
    let b = data.get(at..at + 4)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut buf = BytesMut::new();
        put(&mut buf, "pid", b"42");
        put(&mut buf, "trace", b"#0 {main}\n#1 x");
        put(&mut buf, "empty", b"");
        let fields = Fields::decode(&buf.freeze()).unwrap();
        assert_eq!(fields.len(), 3);
        assert_eq!(fields.get_str("pid").as_deref(), Some("42"));
        assert_eq!(fields.get("trace").unwrap().as_ref(), b"#0 {main}\n#1 x");
        assert_eq!(fields.get("empty").unwrap().len(), 0);
        assert!(fields.get("missing").is_none());
    }

    #[test]
    fn truncation_anywhere_is_malformed() {
        let mut buf = BytesMut::new();
        put(&mut buf, "key", b"value");
        let whole = buf.freeze();
        for cut in 1..whole.len() {
            let err = Fields::decode(&whole.slice(..cut)).unwrap_err();
            assert!(err.is_malformed(), "cut {cut}: {err}");
        }
    }
}
