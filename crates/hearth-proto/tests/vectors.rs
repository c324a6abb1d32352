//! Decodes the shared protocol vectors (tests/vectors/protocol.json), the
//! same file the PHP library's test suite decodes.

use bytes::BytesMut;
use hearth_proto::fields::{self, Fields};
use hearth_proto::message::{EndReport, ResponseHead};
use hearth_proto::php::PhpArray;
use hearth_proto::{Frame, FrameDecoder, Kind};
use serde_json::Value;

fn vectors() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/vectors/protocol.json"
    );
    let text = std::fs::read_to_string(path).expect("tests/vectors/protocol.json");
    serde_json::from_str(&text).expect("valid JSON")
}

fn hex(v: &Value) -> Vec<u8> {
    let s = v.as_str().expect("hex string");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex digit"))
        .collect()
}

fn kind(name: &str) -> Kind {
    match name {
        "ready" => Kind::Ready,
        "request" => Kind::Request,
        "body" => Kind::Body,
        "end" => Kind::End,
        "head" => Kind::Head,
        "error" => Kind::Error,
        "stop" => Kind::Stop,
        "form" => Kind::Form,
        "call" => Kind::Call,
        "result" => Kind::Result,
        "body_file" => Kind::BodyFile,
        other => panic!("unknown kind {other} in vectors"),
    }
}

fn expected_frames(stream: &Value) -> Vec<Frame> {
    stream["frames"]
        .as_array()
        .expect("frames")
        .iter()
        .map(|f| Frame {
            kind: kind(f["kind"].as_str().expect("kind")),
            flags: f["flags"].as_u64().expect("flags") as u16,
            request_id: f["request_id"].as_u64().expect("request_id") as u32,
            payload: hex(&f["payload_hex"]).into(),
        })
        .collect()
}

fn decoder(v: &Value) -> FrameDecoder {
    FrameDecoder::new(v["max_payload"].as_u64().expect("max_payload") as u32)
}

#[test]
fn streams_decode_at_every_split_point() {
    let v = vectors();
    let decoder = decoder(&v);
    for stream in v["streams"].as_array().expect("streams") {
        let name = stream["name"].as_str().unwrap_or("?");
        let bytes = hex(&stream["hex"]);
        let expected = expected_frames(stream);
        for cut in 0..=bytes.len() {
            let mut buf = BytesMut::from(&bytes[..cut]);
            let mut got = Vec::new();
            while let Some(f) = decoder.decode(&mut buf).expect(name) {
                got.push(f);
            }
            buf.extend_from_slice(&bytes[cut..]);
            while let Some(f) = decoder.decode(&mut buf).expect(name) {
                got.push(f);
            }
            assert_eq!(got, expected, "{name}, cut at {cut}");
            assert!(buf.is_empty(), "{name}: bytes left over");
        }
    }
}

#[test]
fn streams_encode_to_the_same_bytes() {
    let v = vectors();
    for stream in v["streams"].as_array().expect("streams") {
        let mut out = BytesMut::new();
        for f in expected_frames(stream) {
            f.encode(&mut out);
        }
        assert_eq!(out.to_vec(), hex(&stream["hex"]), "{}", stream["name"]);
    }
}

#[test]
fn bad_headers_give_the_named_error() {
    let v = vectors();
    let decoder = decoder(&v);
    for case in v["errors"].as_array().expect("errors") {
        let mut buf = BytesMut::from(&hex(&case["hex"])[..]);
        let err = decoder
            .decode(&mut buf)
            .expect_err(case["name"].as_str().unwrap_or("?"));
        let ok = match case["error"].as_str().expect("error") {
            "version" => err.is_version(),
            "unknown_kind" => err.is_unknown_kind(),
            "too_large" => err.is_too_large(),
            other => panic!("unknown error kind {other}"),
        };
        assert!(ok, "{}: got {err}", case["name"]);
    }
}

#[test]
fn field_lists() {
    let v = vectors();
    for case in v["fields"].as_array().expect("fields") {
        let bytes = hex(&case["hex"]);
        let decoded = Fields::decode(&bytes.clone().into()).expect("decodes");
        let entries: Vec<(String, String)> = case["entries"]
            .as_array()
            .expect("entries")
            .iter()
            .map(|e| {
                (
                    e[0].as_str().unwrap_or("").to_owned(),
                    e[1].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect();
        let got: Vec<(String, String)> = decoded
            .iter()
            .map(|(k, v)| (k.to_owned(), String::from_utf8(v.to_vec()).expect("utf8")))
            .collect();
        assert_eq!(got, entries, "{}", case["name"]);
        let mut encoded = BytesMut::new();
        for (k, v) in &entries {
            fields::put(&mut encoded, k, v.as_bytes());
        }
        assert_eq!(encoded.to_vec(), bytes, "{}", case["name"]);
    }
}

#[test]
fn end_reports() {
    let v = vectors();
    for case in v["end_reports"].as_array().expect("end_reports") {
        let bytes = hex(&case["hex"]);
        let report = EndReport::decode(&bytes.clone().into()).expect("decodes");
        assert_eq!(report.memory, case["memory"].as_u64(), "{}", case["name"]);
        assert_eq!(
            report.route.as_deref(),
            case["route"].as_str().map(str::as_bytes),
            "{}",
            case["name"]
        );
        let mut encoded = BytesMut::new();
        report.encode(&mut encoded);
        assert_eq!(encoded.to_vec(), bytes, "{}", case["name"]);
    }
}

#[test]
fn response_heads() {
    let v = vectors();
    for case in v["heads"].as_array().expect("heads") {
        let head = ResponseHead::decode(&hex(&case["hex"]).into()).expect("decodes");
        assert_eq!(
            u64::from(head.status),
            case["status"].as_u64().expect("status")
        );
        let lines: Vec<String> = head
            .headers
            .iter()
            .map(|(n, v)| {
                format!(
                    "{}: {}",
                    String::from_utf8_lossy(n),
                    String::from_utf8_lossy(v)
                )
            })
            .collect();
        let expected: Vec<String> = case["lines"]
            .as_array()
            .expect("lines")
            .iter()
            .map(|l| l.as_str().unwrap_or("").to_owned())
            .collect();
        assert_eq!(lines, expected, "{}", case["name"]);
    }
}

#[test]
fn request_server_variables_serialize_as_php_does() {
    let v = vectors();
    for case in v["requests"].as_array().expect("requests") {
        let mut array = PhpArray::default();
        for (key, value) in case["server"].as_object().expect("server") {
            match value {
                Value::String(s) => array.str(key.as_bytes(), s.as_bytes()),
                Value::Number(n) if n.is_u64() => {
                    array.int(key.as_bytes(), n.as_i64().expect("int"))
                }
                Value::Number(n) => array.float(key.as_bytes(), n.as_f64().expect("float")),
                other => panic!("unexpected value {other}"),
            };
        }
        let mut out = BytesMut::new();
        array.finish(&mut out);
        assert_eq!(out.to_vec(), hex(&case["hex"]), "{}", case["name"]);
    }
}
