#!/usr/bin/env python3
"""Static files: Hearth sending them with sendfile(2) (its default on plain
HTTP/1.x), Hearth reading them 64 KiB at a time (`--no-sendfile`), and
nginx with `sendfile on` (Debian's nginx.conf has it), in the same run.

Each server serves the same document root on a free 127.0.0.1 port: a
large file (--size, 256 MiB by default) and a small one (16 KiB), in the
page cache. Hearth runs `hearth serve --root DIR --classic off` with the
hello worker (which no request reaches), nginx a static-only server
(`root DIR; location / {}`, `tcp_nopush on`, access log off, Debian's
`worker_processes auto`), started by this script in a temporary
directory. All three must return the same bytes, whole and in a range,
before anything is measured. Then wrk drives them in interleaved rounds
(sendfile, read, nginx, sendfile, ...): the large file with -c4, the small
one with -c64; the report gives medians of MB/s (or req/s), p99, and the
front's CPU (Hearth's process, or nginx's master and workers, from /proc):
seconds per GiB sent for the large file, µs per request for the small one.

    cargo build --release -p hearth
    python3 bench/files.py [--rounds 5] [--duration 8] [--size 256]

Writes bench/results/files-<date>.md and files-latest.md. Exits 0 when
every request succeeded and the servers agreed, 1 when not, 2 when the
setup is broken.
"""

from __future__ import annotations

import os
import sys

# bench/http.py sits beside this file, and Python puts this directory first
# on the import path: without this, `import http.client` would find it.
if sys.path and os.path.realpath(sys.path[0]) == os.path.dirname(os.path.realpath(__file__)):
    del sys.path[0]

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import hashlib  # noqa: E402
import http.client  # noqa: E402
import importlib.util  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

BENCH = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("bench_http", BENCH / "http.py")
bh = importlib.util.module_from_spec(_spec)
sys.modules["bench_http"] = bh
_spec.loader.exec_module(bh)

BIG, SMALL = "/big.bin", "/small.bin"
SERVERS = ("sendfile", "read", "nginx")
LABELS = {"sendfile": "Hearth (sendfile)", "read": "Hearth (--no-sendfile)",
          "nginx": "nginx (sendfile on)"}


class NginxStatic:
    """nginx serving a directory as static files, in its own state directory."""

    def __init__(self, docroot: Path, port: int, state: Path):
        self.docroot, self.port, self.state = docroot, port, state
        self.conf = state / "nginx.conf"
        self.master: int | None = None

    def start(self) -> None:
        self.state.mkdir(parents=True, exist_ok=True)
        (self.state / "tmp").mkdir(exist_ok=True)
        user = "user root;" if os.geteuid() == 0 else ""
        temp = "\n".join(f"    {kind}_temp_path {self.state}/tmp/{kind};"
                         for kind in ("client_body", "fastcgi", "proxy", "uwsgi", "scgi"))
        self.conf.write_text(f"""worker_processes auto;
pid {self.state}/nginx.pid;
error_log {self.state}/nginx-error.log;
{user}
events {{
    worker_connections 768;
}}
http {{
    sendfile on;
    tcp_nopush on;
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    access_log off;
{temp}
    server {{
        listen 127.0.0.1:{self.port};
        root {self.docroot};
        location / {{
        }}
    }}
}}
""")
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        out = subprocess.run([nginx, "-p", str(self.state), "-c", str(self.conf),
                              "-e", str(self.state / "nginx-error.log")],
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise bh.BenchError(f"nginx did not start: {out.stderr}{bh.tail(self.state / 'nginx-error.log')}")
        bh.wait_until_serving(self.port, SMALL, 30.0)
        self.master = int((self.state / "nginx.pid").read_text().strip())

    def cpu_groups(self, table):
        if self.master is None or self.master not in table:
            return [], []
        return [table[self.master], *bh.descendants(table, self.master)], []

    def stop(self) -> None:
        if self.master is None:
            return
        try:
            os.kill(self.master, signal.SIGQUIT)
            for _ in range(100):
                os.kill(self.master, 0)
                time.sleep(0.05)
            os.kill(self.master, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.master = None


def digest(port: int, path: str, range_: str | None = None) -> tuple[int, str]:
    """The status and the SHA-256 of the body of GET path (with a Range)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("GET", path, headers={"Range": range_} if range_ else {})
        response = conn.getresponse()
        h = hashlib.sha256()
        while chunk := response.read(1 << 20):
            h.update(chunk)
        return response.status, h.hexdigest()
    finally:
        conn.close()


def write_file(path: Path, size: int) -> None:
    """size bytes that do not compress or repeat (so nothing is special)."""
    with open(path, "wb") as f:
        left = size
        while left:
            n = min(left, 1 << 20)
            f.write(os.urandom(n))
            left -= n


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hearth", type=Path, default=bh.ROOT / "target/release/hearth")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--duration", type=int, default=8, help="seconds per round and file")
    p.add_argument("--size", type=int, default=256, help="the large file, in MiB")
    p.add_argument("--wrk", default="wrk")
    args = p.parse_args()
    if not args.hearth.exists():
        raise SystemExit(f"{args.hearth} is missing: cargo build --release -p hearth")
    state = Path(tempfile.mkdtemp(prefix="hearth-bench-files-"))
    docroot = state / "public"
    docroot.mkdir()
    write_file(docroot / BIG[1:], args.size << 20)
    write_file(docroot / SMALL[1:], 16 << 10)
    for name in (BIG, SMALL):
        with open(docroot / name[1:], "rb") as f:
            while f.read(1 << 20):
                pass  # into the page cache
    env = {k: v for k, v in os.environ.items() if not k.startswith(bh.HEARTH_ENV_PREFIXES)}
    hello = dataclasses.replace(bh.APPS["hello"], path=SMALL)
    ports = dict(zip(SERVERS, bh.free_ports(len(SERVERS))))
    common = ("--root", str(docroot), "--classic", "off")
    servers = {
        "sendfile": bh.HearthServer(args.hearth, hello, ports["sendfile"], 1, state,
                                    extra_args=common),
        "read": bh.HearthServer(args.hearth, hello, ports["read"], 1, state,
                                extra_args=(*common, "--no-sendfile")),
        "nginx": NginxStatic(docroot, ports["nginx"], state / "nginx"),
    }
    for name in ("sendfile", "read"):
        servers[name].log = state / f"hearth-{name}.log"
    cases = [(BIG, 4), (SMALL, 64)]
    rounds: dict[tuple[str, str], list] = {(s, path): [] for s in SERVERS for path, _ in cases}
    cpu: dict[tuple[str, str], list[float]] = {(s, path): [] for s in SERVERS for path, _ in cases}
    failed = 0
    try:
        for name in SERVERS:
            if name == "nginx":
                servers[name].start()
            else:
                servers[name].start(env)
        for path, range_ in [(BIG, None), (BIG, "bytes=1000-5000000"), (BIG, "bytes=-70000"),
                             (SMALL, None)]:
            got = {name: digest(ports[name], path, range_) for name in SERVERS}
            if len(set(got.values())) != 1:
                print(f"the servers disagree on GET {path} {range_ or ''}: {got}", file=sys.stderr)
                return 1
        for index in range(0, args.rounds + 1):
            for path, connections in cases:
                for name in SERVERS:
                    server = servers[name]
                    before = bh.cpu_sample(server)
                    r = bh.run_wrk(args.wrk, ports[name], path, connections,
                                   args.duration if index else 2, path, name, index)
                    after = bh.cpu_sample(server)
                    front = bh.cpu_seconds(before, after, "front")
                    if index:
                        rounds[(name, path)].append(r)
                        cpu[(name, path)].append(front)
                    failed += r.failed
                    print(f"round {index or 'warm-up'} {path:10} {name:8}: {r.rps:,.1f} req/s, "
                          f"{r.bytes / r.duration_s / 1e6:,.0f} MB/s, front CPU {front:.2f} s, "
                          f"failed {r.failed}", flush=True)
    except bh.BenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    finally:
        for server in servers.values():
            server.stop()

    def med(values) -> float:
        return statistics.median(values)

    def mbps(key) -> float:
        return med(r.bytes / r.duration_s / 1e6 for r in rounds[key])

    def rps(key) -> float:
        return med(r.rps for r in rounds[key])

    def per_gib(key) -> float:
        return med(c / (r.bytes / (1 << 30)) for c, r in zip(cpu[key], rounds[key]))

    def per_req(key) -> float:
        return med(c * 1e6 / r.requests for c, r in zip(cpu[key], rounds[key]))

    def p99(key) -> float:
        return med(r.p99_us for r in rounds[key]) / 1000

    big_vs = ("nginx", BIG)
    small_vs = ("nginx", SMALL)
    lines = [
        "# Static files: sendfile, read, and nginx",
        "",
        f"`python3 bench/files.py {' '.join(sys.argv[1:])}` on {bh.cpu_model()} "
        f"({os.cpu_count()} CPUs, load {bh.loadavg()} at the end), hearth {bh.git_revision()}, "
        f"{bh.first_line([shutil.which('nginx') or '/usr/sbin/nginx', '-v'])}; medians of "
        f"{args.rounds} interleaved rounds of {args.duration} s (wrk -t1); the front's CPU from "
        f"/proc (Hearth's process; nginx's master and workers, worker_processes auto).",
        "",
        f"## {args.size} MiB file (wrk -c4)",
        "",
        "| server | MB/s | vs nginx | req/s | p99 ms | front CPU s per GiB | vs nginx |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name in SERVERS:
        key = (name, BIG)
        lines.append(f"| {LABELS[name]} | {mbps(key):,.0f} | {mbps(key) / mbps(big_vs):.2f}× | "
                     f"{rps(key):,.1f} | {p99(key):,.0f} | {per_gib(key):.3f} | "
                     f"{per_gib(key) / per_gib(big_vs):.2f}× |")
    lines += [
        "",
        "## 16 KiB file (wrk -c64)",
        "",
        "| server | req/s | vs nginx | p99 ms | front CPU µs per request | vs nginx |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name in SERVERS:
        key = (name, SMALL)
        lines.append(f"| {LABELS[name]} | {rps(key):,.0f} | {rps(key) / rps(small_vs):.2f}× | "
                     f"{p99(key):.2f} | {per_req(key):.1f} | {per_req(key) / per_req(small_vs):.2f}× |")
    lines += ["", f"Failed requests: {failed}.", ""]
    report = "\n".join(lines)
    print("\n" + report)
    stamp = time.strftime("%Y-%m-%d-%H%M%S")
    bh.RESULTS.mkdir(exist_ok=True)
    for name in (f"files-{stamp}.md", "files-latest.md"):
        (bh.RESULTS / name).write_text(report)
    shutil.rmtree(state, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
