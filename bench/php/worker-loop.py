#!/usr/bin/env python3
"""A Hearth worker alone: its PHP CPU per request with no front, no HTTP
and no sleep between requests.

Starts `hearth serve SCRIPT` for a moment to read the command line and the
environment its first worker runs with (/proc/PID/cmdline, environ), stops
it, then starts that same command itself with one end of a socketpair as
the worker's standard input, Hearth's channel (docs/protocol.md). It
writes the worker REQUEST frames for one URL ahead of the worker, up to
DEPTH at a time, so the worker always finds its next request waiting and
never sleeps, reads the responses, and prints one JSON line:

    {"script": ..., "requests": N, "cpu_us": ..., "user_us": ..., "sys_us": ...,
     "body": "..."}

cpu_us is the worker's user + system CPU (/proc/PID/stat) per request over
the measured requests, after a warm-up of a tenth of them. Set beside
bench/php/app-loop.php (the app alone, in a loop in one process), the
difference is what Hearth's worker runtime adds per request: reading the
request, PHP's request startup, the output and header layers, the response
frames, putting back what the request changed. bench/http.py's breakdown
shows the rest: the front, and what the hop's sleeps and wake-ups cost.

    python3 bench/php/worker-loop.py bench/apps/symfony-micro/worker.php \\
        --path '/hello/bench?lang=fr' -n 20000

Every process it starts is stopped on every path.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

VERSION = 1
HEADER = struct.Struct(">BBHII")
READY, REQUEST, BODY, END, HEAD, ERROR, STOP = 1, 2, 3, 4, 5, 6, 7
FLAG_DETACHED = 0x0004
CLK_TCK = os.sysconf("SC_CLK_TCK")


def php_serialize(server: dict[str, str]) -> bytes:
    """$_SERVER as PHP's serialize() writes an array of strings."""
    out = [b"a:%d:{" % len(server)]
    for key, value in server.items():
        k, v = key.encode(), value.encode()
        out.append(b's:%d:"%s";s:%d:"%s";' % (len(k), k, len(v), v))
    out.append(b"}")
    return b"".join(out)


def request_frames(request_id: int, server: bytes) -> bytes:
    return (HEADER.pack(VERSION, REQUEST, 0, request_id, len(server)) + server
            + HEADER.pack(VERSION, END, 0, request_id, 0))


def server_variables(script: Path, path: str, port: int) -> dict[str, str]:
    """The CGI variables Hearth's front sends for a GET of `path`
    (crates/hearth-http/src/cgi.rs), for a client on 127.0.0.1."""
    uri_path, _, query = path.partition("?")
    name = "/" + script.name
    return {
        "PATH_INFO": "", "SCRIPT_FILENAME": str(script), "QUERY_STRING": query,
        "REQUEST_METHOD": "GET", "CONTENT_TYPE": "", "CONTENT_LENGTH": "",
        "SCRIPT_NAME": name, "REQUEST_URI": path, "DOCUMENT_URI": name,
        "DOCUMENT_ROOT": str(script.parent), "SERVER_PROTOCOL": "HTTP/1.1",
        "REQUEST_SCHEME": "http", "GATEWAY_INTERFACE": "CGI/1.1",
        "SERVER_SOFTWARE": "hearth", "REMOTE_ADDR": "127.0.0.1", "REMOTE_PORT": "40000",
        "REMOTE_USER": "", "SERVER_ADDR": "127.0.0.1", "SERVER_PORT": str(port),
        "SERVER_NAME": "localhost", "REDIRECT_STATUS": "200",
        "HTTP_HOST": f"127.0.0.1:{port}", "HTTP_ACCEPT": "*/*", "HTTP_USER_AGENT": "worker-loop",
        "PHP_SELF": name,
    }


def worker_command(hearth: Path, script: Path, extra: list[str]) -> tuple[list[str], dict[str, str]]:
    """The command line and environment `hearth serve` gives its workers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [str(hearth), "--log-level", "warn", "serve", str(script),
           "--listen", f"127.0.0.1:{port}", "--workers", "1", *extra]
    if os.geteuid() == 0:
        cmd += ["--user", "root"]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, cwd=ROOT, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
            pids = children.read_text().split() if children.exists() else []
            for pid in pids:
                # Hearth's first children may be probes of PHP: the worker
                # is the one that runs the script.
                try:
                    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
                    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")[:-1]
                except (FileNotFoundError, ProcessLookupError):
                    continue
                if argv and argv[-1] == str(script).encode() and any(e.startswith(b"HEARTH_") for e in environ):
                    env = dict(e.decode().split("=", 1) for e in environ if b"=" in e)
                    return [a.decode() for a in argv], env
            if proc.poll() is not None:
                raise SystemExit(f"worker-loop: hearth exited: {proc.stderr.read().decode()}")
            time.sleep(0.05)
        raise SystemExit("worker-loop: hearth started no worker within 30 s")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()


def cpu_ticks(pid: int) -> tuple[int, int]:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]), int(fields[12])


class Worker:
    def __init__(self, argv: list[str], env: dict[str, str]):
        self.sock, theirs = socket.socketpair()
        self.proc = subprocess.Popen(argv, stdin=theirs, stdout=subprocess.DEVNULL,
                                     env=env, cwd=ROOT, start_new_session=True)
        theirs.close()
        self.buf = b""

    def frame(self) -> tuple[int, int, int, bytes]:
        while True:
            if len(self.buf) >= HEADER.size:
                _, kind, flags, rid, length = HEADER.unpack_from(self.buf)
                if len(self.buf) >= HEADER.size + length:
                    payload = self.buf[HEADER.size:HEADER.size + length]
                    self.buf = self.buf[HEADER.size + length:]
                    return kind, flags, rid, payload
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise SystemExit("worker-loop: the worker closed its channel")
            self.buf += chunk

    def response(self) -> bytes:
        """One response's body, through its final END."""
        body = b""
        while True:
            kind, flags, _, payload = self.frame()
            if kind == BODY:
                body += payload
            elif kind == ERROR:
                raise SystemExit(f"worker-loop: the app failed: {payload[:500]!r}")
            elif kind == END and not flags & FLAG_DETACHED:
                return body

    def stop(self) -> None:
        """STOP, as Hearth asks a worker to end; killed if it has not
        exited 10 s later."""
        try:
            self.sock.sendall(HEADER.pack(VERSION, STOP, 0, 0, 0))
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        self.sock.close()


def run(worker: Worker, frames: bytes, n: int, depth: int) -> bytes:
    sent = received = 0
    body = b""
    while received < n:
        if sent < n and sent - received <= depth // 2:
            # A batch at a time: one write keeps the worker ahead.
            count = min(n - sent, depth - (sent - received))
            worker.sock.sendall(frames * count)
            sent += count
        body = worker.response()
        received += 1
    return body


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("script", type=Path)
    parser.add_argument("--path", default="/")
    parser.add_argument("-n", type=int, default=20000, help="measured requests")
    parser.add_argument("--depth", type=int, default=64, help="requests written ahead of the worker")
    parser.add_argument("--hearth", type=Path, default=ROOT / "target/release/hearth")
    parser.add_argument("--hearth-arg", action="append", default=[],
                        help="an extra `hearth serve` argument (e.g. --php-extension=off)")
    args = parser.parse_args()
    script = args.script.resolve()
    argv, env = worker_command(args.hearth, script, args.hearth_arg)
    worker = Worker(argv, env)
    try:
        kind, _, _, _ = worker.frame()
        if kind != READY:
            raise SystemExit(f"worker-loop: expected READY, got kind {kind}")
        frames = request_frames(1, php_serialize(server_variables(script, args.path, 8080)))
        run(worker, frames, max(1, args.n // 10), args.depth)
        u0, s0 = cpu_ticks(worker.proc.pid)
        body = run(worker, frames, args.n, args.depth)
        u1, s1 = cpu_ticks(worker.proc.pid)
    finally:
        worker.stop()
    per = 1e6 / CLK_TCK / args.n
    print(json.dumps({
        "script": str(args.script), "requests": args.n,
        "cpu_us": round(((u1 - u0) + (s1 - s0)) * per, 2),
        "user_us": round((u1 - u0) * per, 2), "sys_us": round((s1 - s0) * per, 2),
        "body": body.decode(errors="replace"),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
