#!/usr/bin/env python3
"""HTTP/2 requests to the hello app: Hearth against Hearth, so that a
change to the HTTP/2 path (such as hyper patched for 103 Early Hints,
vendor/hyper) is measured, not assumed.

Each binary given serves bench/apps/hello/worker.php with `--h2c` on a
free port; h2load (Debian's nghttp2-client) sends HTTP/2 with prior
knowledge over a few connections with many streams each. Rounds
alternate between the binaries; the table reports the median req/s and
p99 of each, and the ratio to the first binary. A second path, /hints,
sends a 103 with one Link line before the response (Hearth\\early_hints()),
to measure what a hint costs.

    python3 bench/http2.py --binary before=/tmp/old/hearth --binary after=target/release/hearth
        [--rounds 5] [--requests 100000] [--clients 8] [--streams 16]
"""

from __future__ import annotations

import os
import sys

# bench/http.py sits beside this file, and Python puts this directory first
# on the import path: without this, `import http.client` would find it.
if sys.path and os.path.realpath(sys.path[0]) == os.path.dirname(os.path.realpath(__file__)):
    del sys.path[0]

import argparse  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import urllib.request  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

WORKER = """<?php
require {autoload!r};
Hearth\\Worker::serve(static function (): void {{
    if (($_SERVER['REQUEST_URI'] ?? '') === '/hints') {{
        Hearth\\early_hints('</app.css>; rel=preload; as=style');
    }}
    echo 'Hello, world!';
}});
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_serving(port: int, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"hearth exited:\n{log.read_text(errors='replace')[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"hearth never served:\n{log.read_text(errors='replace')[-2000:]}")


def start(binary: str, script: Path, workers: int, tmp: Path, label: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    log = tmp / f"{label}.log"
    args = [binary, "serve", str(script), "--listen", f"127.0.0.1:{port}", "--h2c",
            "--workers", str(workers)]
    if os.geteuid() == 0:
        args += ["--user", "root"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log.open("w"),
                            env={**os.environ, "HEARTH_LOG": "warn"})
    wait_serving(port, proc, log)
    return proc, port


def h2load(port: int, path: str, args: argparse.Namespace) -> tuple[float, float]:
    out = subprocess.run(
        ["h2load", "-n", str(args.requests), "-c", str(args.clients), "-m", str(args.streams),
         f"http://127.0.0.1:{port}{path}"],
        capture_output=True, text=True, timeout=600, check=False,
    ).stdout
    done = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded", out)
    if not done or done.group(1) != done.group(2) or int(done.group(1)) != args.requests:
        raise SystemExit(f"h2load: not every request succeeded:\n{out}")
    rate = float(re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", out).group(1))
    # "time for request:  min  max  mean  sd  +/- sd"; no percentiles in
    # h2load's summary, so the max stands for the tail.
    line = re.search(r"time for request:\s+(\S+)\s+(\S+)\s+(\S+)", out)
    return rate, to_ms(line.group(3))


def to_ms(text: str) -> float:
    m = re.fullmatch(r"([\d.]+)(us|ms|s)", text)
    value, unit = float(m.group(1)), m.group(2)
    return value / 1000 if unit == "us" else value * 1000 if unit == "s" else value


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--binary", action="append", required=True, metavar="LABEL=PATH")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--requests", type=int, default=100_000)
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--streams", type=int, default=16)
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args()
    if not shutil.which("h2load"):
        raise SystemExit("h2load not found: apt-get install nghttp2-client")
    binaries = [b.split("=", 1) for b in args.binary]
    tmp = Path(tempfile.mkdtemp(prefix="hearth-h2-"))
    script = tmp / "worker.php"
    script.write_text(WORKER.format(autoload=str(ROOT / "php/autoload.php")))
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    try:
        for round_ in range(1, args.rounds + 1):
            for label, binary in binaries:
                proc, port = start(binary, script, args.workers, tmp, label)
                try:
                    h2load(port, "/", args)  # warm-up
                    for path in ("/", "/hints"):
                        got = h2load(port, path, args)
                        results.setdefault((label, path), []).append(got)
                        print(f"round {round_} {label:>8} {path:<6}: {got[0]:,.0f} req/s, mean {got[1]:.2f} ms",
                              file=sys.stderr)
                finally:
                    proc.send_signal(signal.SIGTERM)
                    proc.wait(timeout=30)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    load = os.getloadavg()
    print(f"# HTTP/2 (h2c) to the hello app\n\n`python3 bench/http2.py {' '.join(sys.argv[1:])}`; "
          f"h2load -n {args.requests} -c {args.clients} -m {args.streams}, {args.workers} workers, "
          f"{os.cpu_count()} CPUs, load {load[0]:.2f} at the end; medians of {args.rounds} interleaved rounds.\n")
    print("| binary | path | req/s | vs first | mean ms |\n|---|---|---:|---:|---:|")
    for path in ("/", "/hints"):
        first = statistics.median(r for r, _ in results[(binaries[0][0], path)])
        for label, _ in binaries:
            rates = [r for r, _ in results[(label, path)]]
            means = [m for _, m in results[(label, path)]]
            rate = statistics.median(rates)
            print(f"| {label} | `{path}` | {rate:,.0f} | {rate / first:.3f}x | {statistics.median(means):.2f} |")
    print("\nEach round's req/s:\n")
    for (label, path), got in results.items():
        print(f"- {label} `{path}`: {', '.join(f'{r:,.0f}' for r, _ in got)}")


if __name__ == "__main__":
    main()
