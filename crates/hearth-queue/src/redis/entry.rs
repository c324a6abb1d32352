//! Stream entries to jobs and back (the fields are listed in `scripts`).

use redis::Value;

use crate::backoff::Backoff;
use crate::job::{from_ms, to_ms, DeadReason, Job, JobId, JobInfo, JobResult, Outcome};
use crate::url::valid_name;

/// One stream entry: its id and its fields (`None` when its data was
/// deleted while it was pending).
#[derive(Debug)]
pub(crate) struct Entry {
    pub id: String,
    pub fields: Option<Vec<(Vec<u8>, Vec<u8>)>>,
}

pub(crate) fn bytes(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::BulkString(b) => Some(b.clone()),
        Value::SimpleString(s) => Some(s.clone().into_bytes()),
        Value::Int(i) => Some(i.to_string().into_bytes()),
        _ => None,
    }
}

pub(crate) fn string(v: &Value) -> Option<String> {
    bytes(v).and_then(|b| String::from_utf8(b).ok())
}

pub(crate) fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        other => string(other)?.parse().ok(),
    }
}

pub(crate) fn array(v: &Value) -> &[Value] {
    match v {
        Value::Array(a) | Value::Set(a) => a,
        _ => &[],
    }
}

/// An entry as XRANGE or XAUTOCLAIM give it: `[id, [f, v, ...] | nil]`.
pub(crate) fn entry(v: &Value) -> Option<Entry> {
    let parts = array(v);
    let id = string(parts.first()?)?;
    let fields = match parts.get(1) {
        Some(Value::Array(kv)) => Some(
            kv.chunks(2)
                .filter_map(|p| Some((bytes(p.first()?)?, bytes(p.get(1)?)?)))
                .collect(),
        ),
        _ => None,
    };
    Some(Entry { id, fields })
}

/// The entries of an XREAD or XREADGROUP reply (one stream).
pub(crate) fn read_reply(v: &Value) -> Vec<Entry> {
    let mut out = Vec::new();
    for stream in array(v) {
        if let Some(entries) = array(stream).get(1) {
            out.extend(array(entries).iter().filter_map(entry));
        }
    }
    out
}

fn field<'a>(fields: &'a [(Vec<u8>, Vec<u8>)], name: &str) -> Option<&'a [u8]> {
    fields
        .iter()
        .rev()
        .find(|(k, _)| k == name.as_bytes())
        .map(|(_, v)| v.as_slice())
}

fn number<T: std::str::FromStr>(fields: &[(Vec<u8>, Vec<u8>)], name: &str) -> Result<T, String> {
    let raw = field(fields, name).ok_or_else(|| format!("no field {name:?}"))?;
    std::str::from_utf8(raw)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| {
            format!(
                "field {name:?} is not a number: {:?}",
                String::from_utf8_lossy(raw)
            )
        })
}

fn text(fields: &[(Vec<u8>, Vec<u8>)], name: &str) -> Result<Option<String>, String> {
    match field(fields, name) {
        None => Ok(None),
        Some(raw) => String::from_utf8(raw.to_vec())
            .map(Some)
            .map_err(|_| format!("field {name:?} is not UTF-8")),
    }
}

/// The job an entry holds, delivered `deliveries` times; the error says
/// why the entry is malformed.
pub(crate) fn decode_job(e: &Entry, deliveries: u32) -> Result<Job, String> {
    let f = e.fields.as_deref().ok_or("the entry's data is gone")?;
    if let Some(m) = field(f, "malformed") {
        return Err(format!(
            "a delayed job could not be read ({} bytes)",
            m.len()
        ));
    }
    let id: u64 = number(f, "id")?;
    let payload = field(f, "payload").ok_or("no field \"payload\"")?.to_vec();
    let attempts: u32 = number(f, "attempts")?;
    let max: u32 = number(f, "max")?;
    if max == 0 {
        return Err("field \"max\" is 0".into());
    }
    let backoff = Backoff::from_ms(number(f, "backoff")?, number(f, "backoff_max")?);
    let at: u64 = number(f, "at")?;
    let reply_to = text(f, "reply")?;
    if let Some(r) = &reply_to {
        if !valid_name(r) {
            return Err(format!("field \"reply\" is not a channel name: {r:?}"));
        }
    }
    Ok(Job {
        id: JobId(id),
        payload,
        attempt: attempts.saturating_add(deliveries.max(1)),
        max_attempts: max,
        backoff,
        reply_to,
        enqueued_at: from_ms(at),
        last_error: text(f, "error")?,
        entry: e.id.clone(),
    })
}

/// The fields of `job` as it goes back to the queue after `attempts`
/// attempts (with `error`), or to the dead-letter store (`error` None: the
/// script adds it).
pub(crate) fn encode_job(job: &Job, attempts: u32, error: Option<&str>) -> Vec<Vec<u8>> {
    let mut f: Vec<Vec<u8>> = Vec::with_capacity(20);
    let mut put = |k: &str, v: Vec<u8>| {
        f.push(k.as_bytes().to_vec());
        f.push(v);
    };
    put("id", job.id.0.to_string().into_bytes());
    put("payload", job.payload.clone());
    put("attempts", attempts.to_string().into_bytes());
    put("max", job.max_attempts.to_string().into_bytes());
    put("backoff", job.backoff.base_ms().to_string().into_bytes());
    put("backoff_max", job.backoff.max_ms().to_string().into_bytes());
    put("at", to_ms(job.enqueued_at).to_string().into_bytes());
    if let Some(r) = &job.reply_to {
        put("reply", r.clone().into_bytes());
    }
    if let Some(e) = error {
        put("error", e.as_bytes().to_vec());
    }
    f
}

/// A ready or dead entry as `peek` shows it; what cannot be read is left
/// empty rather than hidden.
pub(crate) fn info(e: &Entry) -> JobInfo {
    let f = e.fields.as_deref().unwrap_or(&[]);
    let reason = text(f, "reason").ok().flatten();
    let payload = field(f, "payload")
        .or_else(|| field(f, "raw"))
        .or_else(|| field(f, "malformed"))
        .unwrap_or_default()
        .to_vec();
    JobInfo {
        id: JobId(number(f, "id").unwrap_or(0)),
        payload,
        attempts: number(f, "attempts").unwrap_or(0),
        max_attempts: number(f, "max").unwrap_or(0),
        reply_to: text(f, "reply").ok().flatten(),
        enqueued_at: from_ms(number(f, "at").unwrap_or(0)),
        last_error: text(f, "error").ok().flatten(),
        dead_reason: reason.as_deref().map(DeadReason::parse),
    }
}

/// A results stream entry.
pub(crate) fn decode_result(e: &Entry) -> Option<JobResult> {
    let f = e.fields.as_deref()?;
    let id = number(f, "id").ok()?;
    let attempt = number(f, "attempt").ok()?;
    let outcome = match field(f, "status")? {
        b"done" => Outcome::Done(field(f, "result").unwrap_or_default().to_vec()),
        _ => Outcome::Dead {
            reason: DeadReason::parse(&text(f, "reason").ok().flatten().unwrap_or_default()),
            error: text(f, "error").ok().flatten().unwrap_or_default(),
        },
    };
    let last_result = match outcome {
        Outcome::Done(_) => None,
        Outcome::Dead { .. } => field(f, "result").map(<[u8]>::to_vec),
    };
    Some(JobResult {
        id: JobId(id),
        attempt,
        outcome,
        last_result,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry_of(fields: Vec<Vec<u8>>) -> Entry {
        Entry {
            id: "1-0".into(),
            fields: Some(
                fields
                    .chunks(2)
                    .map(|p| (p[0].clone(), p[1].clone()))
                    .collect(),
            ),
        }
    }

    #[test]
    fn a_job_round_trips_through_its_fields() {
        let job = Job {
            id: JobId(7),
            payload: b"{\"a\":1}\0\xff".to_vec(),
            attempt: 2,
            max_attempts: 5,
            backoff: Backoff::from_ms(10, 500),
            reply_to: Some("batch-1".into()),
            enqueued_at: from_ms(1_700_000_000_123),
            last_error: None,
            entry: String::new(),
        };
        let back = decode_job(&entry_of(encode_job(&job, 2, Some("boom"))), 1).expect("decodes");
        assert_eq!((back.id, back.attempt, back.max_attempts), (JobId(7), 3, 5));
        assert_eq!(back.payload, job.payload);
        assert_eq!(back.backoff, job.backoff);
        assert_eq!(back.reply_to, job.reply_to);
        assert_eq!(back.enqueued_at, job.enqueued_at);
        assert_eq!(back.last_error.as_deref(), Some("boom"));
    }

    #[test]
    fn malformed_entries_say_what_is_wrong() {
        let bad = [
            vec![b"payload".to_vec(), b"x".to_vec()],
            vec![b"id".to_vec(), b"x1".to_vec()],
            vec![b"malformed".to_vec(), b"zz".to_vec()],
        ];
        for f in bad {
            assert!(decode_job(&entry_of(f), 1).is_err());
        }
        let gone = Entry {
            id: "1-0".into(),
            fields: None,
        };
        assert!(decode_job(&gone, 1).is_err());
    }
}
