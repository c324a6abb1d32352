//! Writing values in PHP's `serialize()` format.
//!
//! Requests travel to workers as serialized PHP arrays because
//! `unserialize()` is implemented in C and builds the array in one call:
//! decoding a 30-entry `$_SERVER` costs the worker about a microsecond,
//! where a userland parser would cost several. Only the subset Hearth needs
//! is written: strings, integers, floats and arrays with string or integer
//! keys. Strings are length-prefixed byte strings, so no escaping is needed.

use bytes::{BufMut, BytesMut};
use std::io::Write as _;

/// Writes one PHP array, whose number of entries is known up front,
/// straight into a buffer.
#[derive(Debug)]
pub struct PhpArrayWriter<'a> {
    dst: &'a mut BytesMut,
    left: usize,
}

impl<'a> PhpArrayWriter<'a> {
    /// Starts an array of exactly `count` entries in `dst`.
    pub fn new(dst: &'a mut BytesMut, count: usize) -> PhpArrayWriter<'a> {
        dst.put_slice(b"a:");
        put_decimal(dst, count as u64);
        dst.put_slice(b":{");
        PhpArrayWriter { dst, left: count }
    }

    pub fn str(&mut self, key: &[u8], value: &[u8]) -> &mut Self {
        write_str(self.dst, key);
        write_str(self.dst, value);
        self.left -= 1;
        self
    }

    pub fn int(&mut self, key: &[u8], value: i64) -> &mut Self {
        write_str(self.dst, key);
        write_int(self.dst, value);
        self.left -= 1;
        self
    }

    pub fn float(&mut self, key: &[u8], value: f64) -> &mut Self {
        write_str(self.dst, key);
        write_float(self.dst, value);
        self.left -= 1;
        self
    }

    /// Closes the array.
    ///
    /// # Panics
    /// If fewer or more entries were written than announced.
    pub fn finish(self) {
        assert_eq!(self.left, 0, "PHP array entry count announced wrongly");
        self.dst.put_u8(b'}');
    }
}

/// Builds one PHP array whose entry count is only known at the end.
///
/// Entries are written to a scratch buffer and counted; [`finish`] writes
/// the `a:<count>:{...}` wrapper around them.
///
/// [`finish`]: PhpArray::finish
#[derive(Debug, Default)]
pub struct PhpArray {
    body: BytesMut,
    count: usize,
}

impl PhpArray {
    pub fn with_capacity(bytes: usize) -> PhpArray {
        PhpArray {
            body: BytesMut::with_capacity(bytes),
            count: 0,
        }
    }

    /// `$array[$key] = $value` for a string value.
    pub fn str(&mut self, key: &[u8], value: &[u8]) -> &mut Self {
        write_str(&mut self.body, key);
        write_str(&mut self.body, value);
        self.count += 1;
        self
    }

    /// `$array[$key] = $value` for an integer value.
    pub fn int(&mut self, key: &[u8], value: i64) -> &mut Self {
        write_str(&mut self.body, key);
        write_int(&mut self.body, value);
        self.count += 1;
        self
    }

    /// `$array[$key] = $value` for a float value.
    pub fn float(&mut self, key: &[u8], value: f64) -> &mut Self {
        write_str(&mut self.body, key);
        write_float(&mut self.body, value);
        self.count += 1;
        self
    }

    /// `$array[] = $value` for a nested array, keyed by position.
    pub fn push_array(&mut self, value: PhpArray) -> &mut Self {
        write_int(&mut self.body, self.count as i64);
        value.finish(&mut self.body);
        self.count += 1;
        self
    }

    /// `$array[] = $value` for a string, keyed by position.
    pub fn push_str(&mut self, value: &[u8]) -> &mut Self {
        write_int(&mut self.body, self.count as i64);
        write_str(&mut self.body, value);
        self.count += 1;
        self
    }

    /// `$array[] = $value` for an integer, keyed by position.
    pub fn push_int(&mut self, value: i64) -> &mut Self {
        write_int(&mut self.body, self.count as i64);
        write_int(&mut self.body, value);
        self.count += 1;
        self
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Writes the complete serialized array to `dst`.
    pub fn finish(self, dst: &mut BytesMut) {
        dst.reserve(self.body.len() + 24);
        dst.put_slice(b"a:");
        put_decimal(dst, self.count as u64);
        dst.put_slice(b":{");
        dst.put_slice(&self.body);
        dst.put_u8(b'}');
    }
}

/// Appends `s:<len>:"<bytes>";`.
pub fn write_str(dst: &mut BytesMut, value: &[u8]) {
    dst.reserve(value.len() + 16);
    dst.put_slice(b"s:");
    put_decimal(dst, value.len() as u64);
    dst.put_slice(b":\"");
    dst.put_slice(value);
    dst.put_slice(b"\";");
}

/// Appends `i:<value>;`.
pub fn write_int(dst: &mut BytesMut, value: i64) {
    dst.put_slice(b"i:");
    if value < 0 {
        dst.put_u8(b'-');
    }
    put_decimal(dst, value.unsigned_abs());
    dst.put_u8(b';');
}

/// Appends `d:<value>;` using the shortest representation that reads back
/// to the same float.
pub fn write_float(dst: &mut BytesMut, value: f64) {
    dst.put_slice(b"d:");
    if value.is_nan() {
        dst.put_slice(b"NAN");
    } else if value.is_infinite() {
        dst.put_slice(if value > 0.0 { b"INF" } else { b"-INF" });
    } else {
        let mut w = dst.writer();
        // Writing to a BytesMut cannot fail.
        let _ = write!(w, "{value:?}");
        return w.into_inner().put_u8(b';');
    }
    dst.put_u8(b';');
}

fn put_decimal(dst: &mut BytesMut, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    dst.put_slice(&digits[i..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(buf: BytesMut) -> String {
        String::from_utf8(buf.to_vec()).unwrap()
    }

    #[test]
    fn strings_are_length_prefixed_bytes() {
        let mut a = PhpArray::default();
        a.str(b"REQUEST_METHOD", b"GET").str(b"Q", b"a\"b;\0c");
        let mut out = BytesMut::new();
        a.finish(&mut out);
        assert_eq!(
            text(out),
            "a:2:{s:14:\"REQUEST_METHOD\";s:3:\"GET\";s:1:\"Q\";s:6:\"a\"b;\0c\";}"
        );
    }

    #[test]
    fn numbers_and_nesting() {
        let mut inner = PhpArray::default();
        inner.push_str(b"x").push_int(-12);
        let mut a = PhpArray::default();
        a.int(b"T", 1_700_000_000)
            .float(b"F", 1.5)
            .push_array(inner);
        let mut out = BytesMut::new();
        a.finish(&mut out);
        assert_eq!(
            text(out),
            "a:3:{s:1:\"T\";i:1700000000;s:1:\"F\";d:1.5;i:2;a:2:{i:0;s:1:\"x\";i:1;i:-12;}}"
        );
    }

    #[test]
    fn the_writer_matches_the_builder() {
        let mut built = PhpArray::default();
        built.str(b"A", b"x").int(b"B", -3).float(b"C", 2.5);
        let mut expected = BytesMut::new();
        built.finish(&mut expected);
        let mut written = BytesMut::new();
        let mut w = PhpArrayWriter::new(&mut written, 3);
        w.str(b"A", b"x").int(b"B", -3).float(b"C", 2.5);
        w.finish();
        assert_eq!(written, expected);
    }

    #[test]
    #[should_panic(expected = "entry count")]
    fn the_writer_refuses_a_wrong_count() {
        let mut out = BytesMut::new();
        let mut w = PhpArrayWriter::new(&mut out, 2);
        w.str(b"A", b"x");
        w.finish();
    }

    #[test]
    fn empty_array_and_zero() {
        let mut out = BytesMut::new();
        PhpArray::default().finish(&mut out);
        write_int(&mut out, 0);
        write_float(&mut out, 0.25);
        assert_eq!(text(out), "a:0:{}i:0;d:0.25;");
    }
}
