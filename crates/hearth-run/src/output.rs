//! Result lines: one JSON object per finished task (see
//! `docs/task-runner.md` for the fields).
//!
//! Lines are written field by field into a reused `String` rather than
//! built as a `serde_json::Value`: the `id` and a PHP job's `result` are
//! already JSON text and go in as they are, and a million results should
//! not cost a million maps.

use std::fmt::Write as _;
use std::time::Duration;

use std::io::Write as _;

/// Output read from a task's stdout or stderr: what was kept, and how much
/// there was. The first bytes are in memory; past [`crate::exec::SPOOL_AT`],
/// the rest is in a temporary file, so that output of any size is kept
/// whole in bounded memory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captured {
    pub bytes: Vec<u8>,
    /// What was kept past `bytes`.
    pub spool: Option<Spool>,
    /// Everything the task wrote, kept or not.
    pub total: u64,
    /// The share of [`MEMORY_BUDGET`] `bytes` holds, given back when the
    /// last copy is dropped.
    pub held: Option<std::sync::Arc<Held>>,
}

/// The most task output the whole process keeps in memory: past it, more
/// output goes to temporary files, so that memory stays bounded however
/// many tasks wait to be written (`-k` behind a slow task).
pub const MEMORY_BUDGET: usize = 64 << 20;

/// Bytes of task output in memory now, counted against [`MEMORY_BUDGET`].
static IN_MEMORY: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Takes `n` bytes of [`MEMORY_BUDGET`]; false when they are not there.
pub fn reserve(n: usize) -> bool {
    use std::sync::atomic::Ordering;
    let before = IN_MEMORY.fetch_add(n, Ordering::AcqRel);
    if before + n > MEMORY_BUDGET {
        IN_MEMORY.fetch_sub(n, Ordering::AcqRel);
        return false;
    }
    true
}

/// Bytes of [`MEMORY_BUDGET`] taken, given back on drop.
#[derive(Debug)]
pub struct Held(pub usize);

impl Drop for Held {
    fn drop(&mut self) {
        IN_MEMORY.fetch_sub(self.0, std::sync::atomic::Ordering::AcqRel);
    }
}

impl PartialEq for Held {
    fn eq(&self, _: &Held) -> bool {
        true
    }
}

impl Eq for Held {}

/// Output kept in an unnamed temporary file (gone when the last handle
/// is).
#[derive(Debug, Clone)]
pub struct Spool {
    pub file: std::sync::Arc<std::fs::File>,
    pub len: u64,
}

impl PartialEq for Spool {
    fn eq(&self, other: &Spool) -> bool {
        std::sync::Arc::ptr_eq(&self.file, &other.file)
    }
}

impl Eq for Spool {}

impl Captured {
    /// Bytes kept, in memory and spooled.
    pub fn kept(&self) -> u64 {
        self.bytes.len() as u64 + self.spool.as_ref().map_or(0, |s| s.len)
    }

    pub fn truncated(&self) -> bool {
        self.total > self.kept()
    }

    /// Calls `f` with the first `len` kept bytes, in pieces: from memory,
    /// then from the spool file.
    pub fn for_each_piece(
        &self,
        len: u64,
        mut f: impl FnMut(&[u8]) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        let first = usize::try_from(len)
            .unwrap_or(usize::MAX)
            .min(self.bytes.len());
        if first > 0 {
            f(&self.bytes[..first])?;
        }
        let mut left = len - first as u64;
        if let Some(spool) = &self.spool {
            use std::os::unix::fs::FileExt as _;
            let mut buf = vec![0; 1 << 16];
            let mut at = 0u64;
            left = left.min(spool.len);
            while left > 0 {
                let want = usize::try_from(left.min(buf.len() as u64)).unwrap_or(buf.len());
                let n = spool.file.read_at(&mut buf[..want], at)?;
                if n == 0 {
                    break;
                }
                f(&buf[..n])?;
                at += n as u64;
                left -= n as u64;
            }
        }
        Ok(())
    }

    /// Everything kept, in memory (the spool read back).
    pub fn all(&self) -> std::borrow::Cow<'_, [u8]> {
        let Some(spool) = &self.spool else {
            return std::borrow::Cow::Borrowed(&self.bytes);
        };
        let mut all = self.bytes.clone();
        let start = all.len();
        all.resize(start + spool.len as usize, 0);
        use std::os::unix::fs::FileExt as _;
        if spool.file.read_exact_at(&mut all[start..], 0).is_err() {
            all.truncate(start);
        }
        std::borrow::Cow::Owned(all)
    }
}

/// How one attempt at a task ended.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Exit status; `None` when killed by a signal or never started.
    pub status: Option<i32>,
    /// The signal that ended it.
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub stdout: Captured,
    /// `None` for PHP jobs, whose errors are values (`error`).
    pub stderr: Option<Captured>,
    /// Why the task did not start or, for a PHP job, its error as JSON.
    pub error: Option<ErrorValue>,
    /// A PHP job's return value, as JSON text.
    pub result: Option<String>,
    /// The pid of the PHP worker that ran the job.
    pub worker: Option<u32>,
    pub duration: Duration,
    /// Seconds since the Unix epoch when the attempt started.
    pub started: f64,
    /// Stopped by the runner itself (`--halt now`, a second Ctrl-C): not a
    /// result of the task's own.
    pub interrupted: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorValue {
    /// A message, written as a JSON string.
    Message(String),
    /// A JSON object, written as it is.
    Json(String),
}

impl Outcome {
    /// Exit status 0, in time, with no error. (A task can exit 0 from its
    /// SIGTERM handler when its time is up: that is still a failure.)
    pub fn succeeded(&self) -> bool {
        self.status == Some(0) && self.error.is_none() && !self.timed_out
    }

    /// The job log's `Exitval`, as GNU parallel writes it: the exit
    /// status; 0 for a task a signal ended (the `Signal` column says
    /// which); -1 for one stopped for its time limit or by the runner, or
    /// that could not start.
    pub fn logged_exit(&self) -> i32 {
        if self.timed_out || self.interrupted {
            return -1;
        }
        match (self.status, self.signal) {
            (Some(0), _) if !self.succeeded() => -1,
            (Some(code), _) => code,
            (None, Some(_)) => 0,
            (None, None) => -1,
        }
    }

    /// An attempt that never started.
    pub fn not_started(why: String, started: f64) -> Outcome {
        Outcome {
            error: Some(ErrorValue::Message(why)),
            stderr: Some(Captured::default()),
            started,
            ..Outcome::default()
        }
    }
}

/// Appends a task's result line (with its newline) to `out`.
pub fn write_result(
    out: &mut String,
    id: &str,
    seq: u64,
    outcome: &Outcome,
    attempts: u32,
    max_output: usize,
) {
    let mut line = Vec::new();
    // Writing to a Vec fails only when a spool file cannot be read back:
    // what was written stands.
    let _ = write_result_to(&mut line, id, seq, outcome, attempts, max_output);
    out.push_str(&String::from_utf8_lossy(&line));
}

/// Writes a task's result line (with its newline) to `w`, its output read
/// piece by piece from memory and from its spool file: a result line of
/// any size costs no more memory than a piece.
pub fn write_result_to(
    w: &mut dyn std::io::Write,
    id: &str,
    seq: u64,
    outcome: &Outcome,
    attempts: u32,
    max_output: usize,
) -> std::io::Result<()> {
    let mut out = String::new();
    out.push_str("{\"id\":");
    out.push_str(id);
    let _ = write!(out, ",\"seq\":{seq},\"status\":");
    match outcome.status {
        Some(code) => {
            let _ = write!(out, "{code}");
        }
        None => out.push_str("null"),
    }
    out.push_str(",\"signal\":");
    match outcome.signal {
        Some(sig) => {
            out.push('"');
            out.push_str(&signal_name(sig));
            out.push('"');
        }
        None => out.push_str("null"),
    }
    if let Some(result) = &outcome.result {
        out.push_str(",\"result\":");
        out.push_str(result);
    }
    w.write_all(out.as_bytes())?;
    put_output(w, "stdout", &outcome.stdout, max_output)?;
    if let Some(stderr) = &outcome.stderr {
        put_output(w, "stderr", stderr, max_output)?;
    }
    out.clear();
    let _ = write!(
        out,
        ",\"duration_ms\":{:.3},\"attempts\":{attempts}",
        outcome.duration.as_secs_f64() * 1000.0
    );
    if outcome.timed_out {
        out.push_str(",\"timed_out\":true");
    }
    if let Some(pid) = outcome.worker {
        let _ = write!(out, ",\"worker\":{pid}");
    }
    match &outcome.error {
        Some(ErrorValue::Message(m)) => {
            out.push_str(",\"error\":");
            put_str(&mut out, m);
        }
        Some(ErrorValue::Json(json)) => {
            out.push_str(",\"error\":");
            out.push_str(json);
        }
        None => {}
    }
    out.push_str("}\n");
    w.write_all(out.as_bytes())
}

/// Appends the result of a job taken from a queue (`hearth work`): the
/// line [`write_result`] writes, with the job's id in the queue as `seq`
/// and its attempt as `attempts`, and also as `job` and `attempt`;
/// without a newline.
pub fn write_job_result(
    out: &mut String,
    id: &str,
    job: u64,
    attempt: u32,
    outcome: &Outcome,
    max_output: usize,
) {
    write_result(out, id, job, outcome, attempt, max_output);
    // write_result ends the object with "}\n".
    out.truncate(out.len() - 2);
    let _ = write!(out, ",\"job\":{job},\"attempt\":{attempt}}}");
}

/// Appends the result line of a task skipped by `--resume`: the job log's
/// verdict, no output.
pub fn write_skipped(out: &mut String, id: &str, seq: u64, status: i32, signal: i32) {
    out.push_str("{\"id\":");
    out.push_str(id);
    let _ = write!(out, ",\"seq\":{seq},\"status\":");
    if status < 0 || signal != 0 {
        // Logged without an exit status: killed, timed out or not started.
        out.push_str("null");
    } else {
        let _ = write!(out, "{status}");
    }
    if signal != 0 {
        out.push_str(",\"signal\":\"");
        out.push_str(&signal_name(signal));
        out.push('"');
    } else {
        out.push_str(",\"signal\":null");
    }
    out.push_str(",\"skipped\":true}\n");
}

/// Writes `,"name":"..."` with the kept bytes of one output stream, and
/// the markers for truncated or non-UTF-8 output: text when the bytes are
/// UTF-8 (cut before a character a truncation split), else base64.
fn put_output(
    w: &mut dyn std::io::Write,
    name: &str,
    captured: &Captured,
    max_output: usize,
) -> std::io::Result<()> {
    let kept = captured.kept().min(max_output as u64);
    let truncated = captured.total > kept;
    // First pass: is it text, and how much of it?
    let mut carry: Vec<u8> = Vec::new();
    let mut text = true;
    captured.for_each_piece(kept, |piece| {
        if !text {
            return Ok(());
        }
        carry.extend_from_slice(piece);
        match std::str::from_utf8(&carry) {
            Ok(_) => carry.clear(),
            Err(e) if e.error_len().is_none() => {
                carry.drain(..e.valid_up_to());
            }
            Err(_) => text = false,
        }
        Ok(())
    })?;
    // An incomplete character at the end is a cut one only when the
    // output was truncated.
    let text_len = if text && (carry.is_empty() || truncated) {
        Some(kept - carry.len() as u64)
    } else {
        None
    };
    write!(w, ",\"{name}\":\"")?;
    match text_len {
        Some(len) => {
            let mut carry: Vec<u8> = Vec::new();
            captured.for_each_piece(len, |piece| {
                carry.extend_from_slice(piece);
                let valid = match std::str::from_utf8(&carry) {
                    Ok(s) => s.len(),
                    Err(e) => e.valid_up_to(),
                };
                let chunk = std::str::from_utf8(&carry[..valid]).unwrap_or_default();
                // serde_json's escaping, without the quotes.
                let escaped = serde_json::to_string(chunk).unwrap_or_default();
                w.write_all(&escaped.as_bytes()[1..escaped.len() - 1])?;
                carry.drain(..valid);
                Ok(())
            })?;
            w.write_all(b"\"")?;
        }
        None => {
            {
                let mut encoder = base64::write::EncoderWriter::new(
                    &mut *w,
                    &base64::engine::general_purpose::STANDARD,
                );
                captured.for_each_piece(kept, |piece| encoder.write_all(piece))?;
                encoder.finish()?;
            }
            write!(w, "\",\"{name}_encoding\":\"base64\"")?;
        }
    }
    if truncated {
        write!(
            w,
            ",\"{name}_truncated\":true,\"{name}_bytes\":{}",
            captured.total
        )?;
    }
    Ok(())
}

/// Appends `s` as a JSON string.
fn put_str(out: &mut String, s: &str) {
    // serde_json's escaping; writing a str to a String cannot fail.
    let escaped = serde_json::to_string(s).unwrap_or_default();
    out.push_str(&escaped);
}

/// `SIGKILL` for 9: the names a user sees in `kill -l`.
pub fn signal_name(sig: i32) -> String {
    const NAMES: [&str; 32] = [
        "", "HUP", "INT", "QUIT", "ILL", "TRAP", "ABRT", "BUS", "FPE", "KILL", "USR1", "SEGV",
        "USR2", "PIPE", "ALRM", "TERM", "STKFLT", "CHLD", "CONT", "STOP", "TSTP", "TTIN", "TTOU",
        "URG", "XCPU", "XFSZ", "VTALRM", "PROF", "WINCH", "IO", "PWR", "SYS",
    ];
    match usize::try_from(sig).ok().and_then(|i| NAMES.get(i)) {
        Some(name) if !name.is_empty() => format!("SIG{name}"),
        _ => format!("SIG{sig}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;

    fn line(outcome: &Outcome, max: usize) -> serde_json::Value {
        let mut s = String::new();
        write_result(&mut s, "\"x\"", 3, outcome, 1, max);
        assert!(s.ends_with("}\n"));
        serde_json::from_str(&s).unwrap()
    }

    fn captured(bytes: &[u8]) -> Captured {
        Captured {
            bytes: bytes.to_vec(),
            total: bytes.len() as u64,
            spool: None,
            held: None,
        }
    }

    #[test]
    fn a_plain_result() {
        let o = Outcome {
            status: Some(0),
            stdout: captured(b"hi \"there\"\n"),
            stderr: Some(captured(b"")),
            duration: Duration::from_micros(1500),
            ..Outcome::default()
        };
        let v = line(&o, 100);
        assert_eq!(v["id"], "x");
        assert_eq!(v["seq"], 3);
        assert_eq!(v["status"], 0);
        assert_eq!(v["signal"], serde_json::Value::Null);
        assert_eq!(v["stdout"], "hi \"there\"\n");
        assert_eq!(v["stderr"], "");
        assert_eq!(v["duration_ms"], 1.5);
        assert_eq!(v["attempts"], 1);
        assert!(v.get("timed_out").is_none());
    }

    #[test]
    fn binary_output_is_base64() {
        let o = Outcome {
            stdout: captured(&[0xff, 0x00, b'a']),
            stderr: Some(captured(b"ok")),
            signal: Some(9),
            timed_out: true,
            ..Outcome::default()
        };
        let v = line(&o, 100);
        assert_eq!(v["stdout"], "/wBh");
        assert_eq!(v["stdout_encoding"], "base64");
        assert!(v.get("stderr_encoding").is_none());
        assert_eq!(v["status"], serde_json::Value::Null);
        assert_eq!(v["signal"], "SIGKILL");
        assert_eq!(v["timed_out"], true);
    }

    #[test]
    fn truncation_keeps_whole_characters() {
        let text = "ab€"; // € is three bytes
        let o = Outcome {
            stdout: Captured {
                bytes: text.as_bytes().to_vec(),
                total: 1000,
                spool: None,
                held: None,
            },
            ..Outcome::default()
        };
        let v = line(&o, 4);
        assert_eq!(v["stdout"], "ab");
        assert_eq!(v["stdout_truncated"], true);
        assert_eq!(v["stdout_bytes"], 1000);
        assert!(v.get("stdout_encoding").is_none());
    }

    #[test]
    fn php_job_fields_go_in_as_json() {
        let o = Outcome {
            status: Some(1),
            result: None,
            error: Some(ErrorValue::Json(r#"{"class":"E","line":3}"#.into())),
            worker: Some(42),
            ..Outcome::default()
        };
        let v = line(&o, 10);
        assert_eq!(v["error"]["class"], "E");
        assert_eq!(v["worker"], 42);
        assert!(v.get("stderr").is_none());
        let o = Outcome {
            status: Some(0),
            result: Some("[1,{\"a\":null}]".into()),
            ..Outcome::default()
        };
        assert_eq!(line(&o, 10)["result"][1]["a"], serde_json::Value::Null);
    }

    #[test]
    fn a_job_result_names_the_job_and_its_attempt() {
        let o = Outcome {
            status: Some(0),
            stdout: captured(b"hi\n"),
            stderr: Some(captured(b"")),
            ..Outcome::default()
        };
        let mut s = String::new();
        write_job_result(&mut s, "17", 17, 2, &o, 100);
        assert!(!s.ends_with('\n'));
        let v: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v["id"], 17);
        assert_eq!(v["seq"], 17);
        assert_eq!(v["job"], 17);
        assert_eq!(v["attempt"], 2);
        assert_eq!(v["attempts"], 2);
        assert_eq!(v["stdout"], "hi\n");
    }

    #[test]
    fn signal_names() {
        assert_eq!(signal_name(15), "SIGTERM");
        assert_eq!(signal_name(11), "SIGSEGV");
        assert_eq!(signal_name(40), "SIG40");
    }

    proptest::proptest! {
        #[test]
        fn any_output_round_trips(bytes: Vec<u8>, max in 0usize..64) {
            let o = Outcome { stdout: captured(&bytes), ..Outcome::default() };
            let v = line(&o, max);
            let field = v["stdout"].as_str().unwrap();
            let got = if v.get("stdout_encoding").is_some() {
                base64::engine::general_purpose::STANDARD.decode(field).unwrap()
            } else {
                field.as_bytes().to_vec()
            };
            proptest::prop_assert!(bytes.starts_with(&got));
            proptest::prop_assert_eq!(v.get("stdout_truncated").is_some(), bytes.len() > max);
            if bytes.len() <= max {
                proptest::prop_assert_eq!(got, bytes);
            }
        }
    }
}
