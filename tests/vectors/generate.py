#!/usr/bin/env python3
"""Writes protocol.json: the test vectors of docs/protocol.md.

Both test suites decode this file (crates/hearth-proto/tests/vectors.rs and
php/tests/ProtocolVectorsTest.php). It is produced by this separate, small
implementation of the format so that neither side checks itself against
its own encoder. Run it again only when the protocol changes.
"""
import json
import struct
from pathlib import Path

VERSION = 1
KINDS = {"ready": 1, "request": 2, "body": 3, "end": 4, "head": 5, "error": 6, "stop": 7, "form": 8, "call": 9, "result": 10,
         "body_file": 11}
CLOSE, STREAM, DETACHED, REPORT = 0x0001, 0x0002, 0x0004, 0x0008


def frame(kind, payload=b"", request_id=0, flags=0, version=VERSION, kind_byte=None):
    k = KINDS[kind] if kind_byte is None else kind_byte
    return struct.pack(">BBHII", version, k, flags, request_id, len(payload)) + payload


def fields(pairs):
    out = b""
    for k, v in pairs:
        kb, vb = k.encode(), v if isinstance(v, bytes) else v.encode()
        out += struct.pack(">H", len(kb)) + kb + struct.pack(">I", len(vb)) + vb
    return out


def php_serialize(value):
    if isinstance(value, bool):
        return b"b:%d;" % value
    if isinstance(value, int):
        return b"i:%d;" % value
    if isinstance(value, float):
        return b"d:" + repr(value).encode() + b";"
    if isinstance(value, (str, bytes)):
        b = value.encode() if isinstance(value, str) else value
        return b"s:%d:\"" % len(b) + b + b"\";"
    if isinstance(value, list):
        return b"a:%d:{" % len(value) + b"".join(php_serialize(i) + php_serialize(v) for i, v in enumerate(value)) + b"}"
    if isinstance(value, dict):
        return b"a:%d:{" % len(value) + b"".join(php_serialize(k) + php_serialize(v) for k, v in value.items()) + b"}"
    raise TypeError(value)


def describe(kind, payload, request_id=0, flags=0):
    return {"kind": kind, "flags": flags, "request_id": request_id, "payload_hex": payload.hex()}


streams = []


def stream(name, parts):
    data = b"".join(frame(k, p, rid, f) for k, p, rid, f in parts)
    streams.append({"name": name, "hex": data.hex(), "frames": [describe(k, p, rid, f) for k, p, rid, f in parts]})


ready = fields([("protocol", "1"), ("pid", "4242"), ("php_version", "8.2.36"), ("sapi", "cgi-fcgi"),
                ("post_max_size", "8M"), ("upload_tmp_dir", "/tmp")])
server = php_serialize({"REQUEST_METHOD": "GET", "REQUEST_URI": "/a?b=1", "QUERY_STRING": "b=1",
                        "HTTP_HOST": "example.test", "REQUEST_TIME": 1700000000, "REQUEST_TIME_FLOAT": 1700000000.25})
head = struct.pack(">H", 404) + b"Content-type: text/plain\nSet-Cookie: a=1; path=/\nSet-Cookie: b=2"
error = fields([("kind", "exception"), ("class", "RuntimeException"), ("message", "boom\nsecond line"),
                ("code", "7"), ("file", "/srv/app.php"), ("line", "12"), ("trace", "#0 {main}")])
form = php_serialize([["title", "Hello"], ["doc", "a.txt", "text/plain", "/tmp/phpAbC123", 0, 5]])

stream("handshake", [("ready", ready, 0, 0)])
stream("GET without body", [("request", server, 1, 0), ("end", b"", 1, 0)])
stream("POST with a body in two chunks", [("request", server, 2, 0), ("body", b"a=1&b=", 2, 0),
                                          ("body", b"%C3%A9", 2, 0), ("end", b"", 2, 0)])
stream("multipart form", [("request", server, 3, 0), ("form", form, 3, 0), ("end", b"", 3, 0)])
stream("POST with its body in a file", [("request", server, 11, 0), ("body_file", b"/tmp/hearth-body-Xy12Ab", 11, 0),
                                        ("end", b"", 11, 0)])
stream("buffered response", [("head", head, 7, 0), ("body", b"not found", 7, 0), ("end", b"", 7, 0)])
stream("streamed response, worker exits after it",
       [("head", struct.pack(">H", 200), 8, STREAM), ("body", b"chunk 1\n", 8, 0), ("body", b"chunk 2\n", 8, 0),
        ("end", b"", 8, CLOSE)])
stream("error report then response", [("error", error, 9, 0), ("head", struct.pack(">H", 500), 9, 0), ("end", b"", 9, 0)])
stream("response sent early, request goes on (fastcgi_finish_request)",
       [("head", struct.pack(">H", 200), 10, 0), ("body", b"done", 10, 0), ("end", b"", 10, DETACHED),
        ("end", b"", 10, 0)])
report = fields([("memory", "2097152"), ("route", "users.show")])
report_unnamed = fields([("memory", "393216")])
stream("response with the worker's report (HEARTH_REPORT=1)",
       [("head", struct.pack(">H", 200), 12, 0), ("body", b"ok", 12, 0), ("end", report, 12, REPORT)])
stream("stop", [("stop", b"", 0, 0)])
stream("a job: call, then its result; the worker exits after it",
       [("call", fields([("function", b"App\\add"), ("args", b"[1,2]")]), 3, 0),
        ("result", fields([("json", b'{"status":0,"result":3}'), ("output", b"")]), 3, CLOSE)])
stream("unknown flag bits are kept", [("end", b"", 5, 0x8001)])
stream("binary body with every byte value", [("body", bytes(range(256)), 4, 0)])

errors = [
    {"name": "version 2", "hex": frame("end", version=2).hex(), "error": "version"},
    {"name": "version 0", "hex": frame("body", b"x", version=0).hex(), "error": "version"},
    {"name": "unknown kind 0", "hex": frame("end", kind_byte=0).hex(), "error": "unknown_kind"},
    {"name": "unknown kind 12", "hex": frame("end", kind_byte=12).hex(), "error": "unknown_kind"},
    {"name": "payload over the limit (header only)",
     "hex": struct.pack(">BBHII", VERSION, KINDS["body"], 0, 1, 1025).hex(), "error": "too_large"},
    {"name": "payload of 4 GiB - 1 (header only)",
     "hex": struct.pack(">BBHII", VERSION, KINDS["body"], 0, 1, 0xFFFFFFFF).hex(), "error": "too_large"},
]

vectors = {
    "comment": "Generated by tests/vectors/generate.py; see docs/protocol.md. Decoders use max_payload.",
    "protocol_version": VERSION,
    "max_payload": 1024,
    "streams": streams,
    "errors": errors,
    "fields": [
        {"name": "ready", "hex": ready.hex(), "entries": [["protocol", "1"], ["pid", "4242"], ["php_version", "8.2.36"],
                                                          ["sapi", "cgi-fcgi"], ["post_max_size", "8M"], ["upload_tmp_dir", "/tmp"]]},
        {"name": "error report", "hex": error.hex(), "entries": [["kind", "exception"], ["class", "RuntimeException"],
                                                                 ["message", "boom\nsecond line"], ["code", "7"],
                                                                 ["file", "/srv/app.php"], ["line", "12"], ["trace", "#0 {main}"]]},
        {"name": "empty", "hex": "", "entries": []},
    ],
    "end_reports": [
        {"name": "memory and a route name", "hex": report.hex(), "memory": 2097152, "route": "users.show"},
        {"name": "memory, no route name", "hex": report_unnamed.hex(), "memory": 393216, "route": None},
    ],
    "heads": [
        {"name": "404 with repeated Set-Cookie", "hex": head.hex(), "status": 404,
         "lines": ["Content-type: text/plain", "Set-Cookie: a=1; path=/", "Set-Cookie: b=2"]},
        {"name": "200 without headers", "hex": struct.pack(">H", 200).hex(), "status": 200, "lines": []},
    ],
    "requests": [
        {"name": "server variables", "hex": server.hex(),
         "server": {"REQUEST_METHOD": "GET", "REQUEST_URI": "/a?b=1", "QUERY_STRING": "b=1", "HTTP_HOST": "example.test",
                    "REQUEST_TIME": 1700000000, "REQUEST_TIME_FLOAT": 1700000000.25}},
        {"name": "binary-safe strings", "hex": php_serialize({"X": "a\"b;\x00c\u00e9"}).hex(),
         "server": {"X": "a\"b;\x00c\u00e9"}},
    ],
}
out = Path(__file__).with_name("protocol.json")
out.write_text(json.dumps(vectors, indent=2, ensure_ascii=False) + "\n")
print(f"wrote {out}")
