use bytes::{BufMut, Bytes, BytesMut};

/// The protocol version written in every header.
pub const VERSION: u8 = 1;

/// Bytes in a frame header: version (1), kind (1), flags (2), request id
/// (4), payload length (4). Integers are big-endian.
pub const HEADER_LEN: usize = 12;

/// What a frame carries. The direction is part of the definition: a worker
/// never sends `Request`, Hearth never sends `Head`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Kind {
    /// Worker to Hearth, once, when the app has booted: a field list with
    /// `pid`, `php_version`, `sapi`, `protocol` and the PHP settings that
    /// decide how request bodies are handled.
    Ready = 1,
    /// Hearth to worker: a new request. The payload is the request's
    /// `$_SERVER` as a PHP `serialize()`d array.
    Request = 2,
    /// Either way: a chunk of the request body (to the worker) or of the
    /// response body (from it).
    Body = 3,
    /// Either way: the request body is complete, or the response is.
    End = 4,
    /// Worker to Hearth: the response status and header lines.
    Head = 5,
    /// Worker to Hearth, inside a request: a failure worth logging (an
    /// uncaught exception, a fatal error), as a field list.
    Error = 6,
    /// Hearth to worker: finish up and exit.
    Stop = 7,
    /// Hearth to worker: a parsed `multipart/form-data` body, its fields and
    /// spooled uploads, as a PHP `serialize()`d list. A large list is split
    /// over several `Form` frames, to be joined in order.
    Form = 8,
    /// Hearth to a job worker (`hearth run --php-bootstrap`): call a PHP
    /// function. A field list with `function` (a callable string) and
    /// `args` (a JSON array or object of arguments).
    Call = 9,
    /// Job worker to Hearth: the outcome of a `Call`, ending it. A field
    /// list with `json` (a JSON object: `status` 0 and `result`, or `status`
    /// 1 and `error`) and `output` (what the job printed). `CLOSE` when the
    /// worker exits after it.
    Result = 10,
    /// Hearth to worker, instead of `Body` frames: the request body is in
    /// the file whose absolute path is the payload. The worker reads it as
    /// php://input and leaves it alone; Hearth removes it once the request
    /// has ended. Sent only to workers whose `Ready` has `body_files=1`.
    BodyFile = 11,
}

impl Kind {
    /// Maps a header byte to a kind, if this version defines it.
    pub fn from_u8(v: u8) -> Option<Kind> {
        Some(match v {
            1 => Kind::Ready,
            2 => Kind::Request,
            3 => Kind::Body,
            4 => Kind::End,
            5 => Kind::Head,
            6 => Kind::Error,
            7 => Kind::Stop,
            8 => Kind::Form,
            9 => Kind::Call,
            10 => Kind::Result,
            11 => Kind::BodyFile,
            _ => return None,
        })
    }
}

/// Flag bits, all part of protocol version 1. Bits a receiver does not
/// know are ignored; a later flag that changes the conversation (as
/// `DETACHED` does) comes with a new version.
pub mod flags {
    /// On `End` from a worker: this worker exits after this request (the
    /// script called `exit`, hit a fatal error, or asked to be replaced).
    pub const CLOSE: u16 = 0x0001;
    /// On `Head`: the app flushed output before finishing, so the body
    /// arrives in `Body` frames as it is produced. Without it, the whole
    /// body and the `End` frame follow the head at once.
    pub const STREAM: u16 = 0x0002;
    /// On `End` from a worker: the response is complete, but the worker
    /// goes on with the request without a client (the app called
    /// `fastcgi_finish_request()`). A final `End` for the same request
    /// follows when it is done; until then the worker takes no request.
    pub const DETACHED: u16 = 0x0004;
    /// On `End` from a worker: the payload is a field list reporting on
    /// the worker ([`crate::message::EndReport`]): its memory once the
    /// previous request had been cleaned up, and the route the app named
    /// this request's. Sent only by workers Hearth started with
    /// `HEARTH_REPORT=1`; an `End` without it is empty, as before.
    pub const REPORT: u16 = 0x0008;
    /// On `Head` from a worker: an interim response (`103 Early Hints`),
    /// sent before the response proper, whose own `Head` follows. Like
    /// `DETACHED`, it changes the conversation: a `Head` follows a `Head`.
    pub const INTERIM: u16 = 0x0010;
    /// On `Form` from Hearth: the form had more parts than the worker's
    /// `max_multipart_body_parts` allows; those past it were not parsed.
    /// The worker raises PHP's warning for it.
    pub const PARTS_LIMIT: u16 = 0x0100;
    /// On `Form` from Hearth: files past the worker's `max_file_uploads`
    /// were dropped. The worker raises PHP's warning for it.
    pub const UPLOADS_LIMIT: u16 = 0x0200;
}

/// One decoded frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub kind: Kind,
    pub flags: u16,
    /// Ties frames to the request they belong to; `0` outside a request.
    pub request_id: u32,
    pub payload: Bytes,
}

impl Frame {
    pub fn new(kind: Kind, request_id: u32, payload: impl Into<Bytes>) -> Frame {
        Frame {
            kind,
            flags: 0,
            request_id,
            payload: payload.into(),
        }
    }

    pub fn with_flags(mut self, flags: u16) -> Frame {
        self.flags = flags;
        self
    }

    /// Whether a flag bit is set.
    pub fn has_flag(&self, flag: u16) -> bool {
        self.flags & flag != 0
    }

    /// Appends this frame, header and payload, to `dst`.
    pub fn encode(&self, dst: &mut BytesMut) {
        encode_frame(dst, self.kind, self.flags, self.request_id, &self.payload);
    }
}

/// Writes a frame header announcing `len` payload bytes. The caller writes
/// the payload right after it; used when the payload is produced in place.
///
/// # Panics
/// If `len` does not fit the 32-bit length field.
pub fn encode_header(dst: &mut BytesMut, kind: Kind, flags: u16, request_id: u32, len: usize) {
    let len = u32::try_from(len).expect("frame payload length exceeds u32");
    dst.reserve(HEADER_LEN);
    dst.put_u8(VERSION);
    dst.put_u8(kind as u8);
    dst.put_u16(flags);
    dst.put_u32(request_id);
    dst.put_u32(len);
}

/// Starts a frame whose payload is written straight into `dst` after this
/// call, for payloads whose length is only known once written. Returns the
/// frame's offset, for [`end_frame`].
pub fn begin_frame(dst: &mut BytesMut, kind: Kind, flags: u16, request_id: u32) -> usize {
    let at = dst.len();
    encode_header(dst, kind, flags, request_id, 0);
    at
}

/// Writes the payload length of the frame started at `at`.
///
/// # Panics
/// If the payload written since [`begin_frame`] does not fit in u32.
pub fn end_frame(dst: &mut BytesMut, at: usize) {
    let len = dst.len() - at - HEADER_LEN;
    let len = u32::try_from(len).expect("frame payload length exceeds u32");
    dst[at + 8..at + HEADER_LEN].copy_from_slice(&len.to_be_bytes());
}

/// Appends a whole frame to `dst`.
pub fn encode_frame(dst: &mut BytesMut, kind: Kind, flags: u16, request_id: u32, payload: &[u8]) {
    dst.reserve(HEADER_LEN + payload.len());
    encode_header(dst, kind, flags, request_id, payload.len());
    dst.put_slice(payload);
}
