#!/usr/bin/env python3
"""What the dashboard costs a server under load: throughput and latency
of one Hearth with `--admin`, its dashboard open and closed, and of the
same Hearth without `--admin` (no metrics recorded at all), in the same
run.

"Open" is what the page asks for, replayed from this script: the page,
its script and style once, then `GET /api/status` and every second
`GET /api/status?since=T`, as dashboard.js does; a browser would add its
own CPU to this 2-CPU machine, which is the browser's cost, not the
server's. Rounds alternate (off, closed, open, ...), the tables report
medians and the ratios to "closed".

    python3 bench/dashboard.py [--app hello] [--rounds 5] [--duration 8]
"""

from __future__ import annotations

import os
import sys

# bench/http.py sits beside this file, and Python puts this directory first
# on the import path: without this, `import http.client` would find it.
if sys.path and os.path.realpath(sys.path[0]) == os.path.dirname(os.path.realpath(__file__)):
    del sys.path[0]

import argparse  # noqa: E402
import http.client  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

BENCH = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("bench_http", BENCH / "http.py")
bh = importlib.util.module_from_spec(_spec)
sys.modules["bench_http"] = bh
_spec.loader.exec_module(bh)

CASES = ("no --admin", "dashboard closed", "dashboard open")


class Viewer(threading.Thread):
    """Asks what an open dashboard asks for, until stopped."""

    def __init__(self, port: int):
        super().__init__(daemon=True)
        self.port = port
        self.stop = threading.Event()
        self.polls = 0
        self.sizes: list[int] = []
        self.seconds: list[float] = []
        self.failures = 0

    def get(self, path: str) -> bytes:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            started = time.perf_counter()
            conn.request("GET", path)
            response = conn.getresponse()
            body = response.read()
            if response.status != 200:
                self.failures += 1
            if path.startswith("/api/status?"):
                self.seconds.append(time.perf_counter() - started)
                self.sizes.append(len(body))
                self.polls += 1
            return body
        finally:
            conn.close()

    def run(self) -> None:
        for path in ("/", "/dashboard.js", "/dashboard.css"):
            self.get(path)
        last = None
        while not self.stop.is_set():
            path = "/api/status" if last is None else f"/api/status?since={last}"
            data = json.loads(self.get(path))
            if data["history"]:
                last = data["history"][-1]["t"]
            self.stop.wait(1.0)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--app", default="hello", choices=sorted(bh.APPS))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--duration", type=int, default=8, help="seconds per round")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--connections", type=int, default=64)
    p.add_argument("--wrk", default="wrk")
    p.add_argument("--hearth", default=str(bh.ROOT / "target/release/hearth"))
    args = p.parse_args()
    binary = Path(args.hearth)
    if not binary.exists():
        raise SystemExit(f"{binary} is missing: cargo build --release -p hearth")
    app = bh.APPS[args.app]
    state = Path(tempfile.mkdtemp(prefix="hearth-bench-dashboard-"))
    port, admin_port, plain_port = bh.free_ports(3)
    env = {k: v for k, v in os.environ.items() if not k.startswith(bh.HEARTH_ENV_PREFIXES)}
    (state / "with").mkdir()
    (state / "without").mkdir()
    with_admin = bh.HearthServer(binary, app, port, args.workers, state / "with",
                                 extra_args=("--admin", f"127.0.0.1:{admin_port}"))
    without = bh.HearthServer(binary, app, plain_port, args.workers, state / "without")
    rounds: dict[str, list] = {case: [] for case in CASES}
    viewers: list[Viewer] = []
    try:
        with_admin.start(env)
        without.start(env)
        for index in range(0, args.rounds + 1):
            for case in CASES:
                target = plain_port if case == "no --admin" else port
                viewer = Viewer(admin_port) if case == "dashboard open" else None
                if viewer:
                    viewer.start()
                r = bh.run_wrk(args.wrk, target, app.path, args.connections,
                               args.duration if index else 2, app.name, case, index)
                if viewer:
                    viewer.stop.set()
                    viewer.join(15)
                    if index:
                        viewers.append(viewer)
                failed = (r.errors_connect + r.errors_read + r.errors_write
                          + r.errors_timeout + r.errors_status)
                if index:
                    rounds[case].append(r)
                print(f"round {index or 'warm-up'} {case:17}: {r.requests / r.duration_s:,.0f} req/s, "
                      f"p99 {r.p99_us / 1000:.2f} ms, failed {failed}", flush=True)
    finally:
        with_admin.stop()
        without.stop()

    def rps(case: str) -> float:
        return statistics.median(r.requests / r.duration_s for r in rounds[case])

    def p99(case: str) -> float:
        return statistics.median(r.p99_us for r in rounds[case]) / 1000

    closed = rps("dashboard closed")
    lines = [
        f"# The dashboard's cost under load ({app.name})",
        "",
        f"`python3 bench/dashboard.py --app {app.name} --rounds {args.rounds} --duration "
        f"{args.duration}`: wrk -t1 -c{args.connections}, {args.workers} workers, medians of "
        f"{args.rounds} interleaved rounds.",
        "",
        "| case | req/s | vs closed | p99 ms | failed |",
        "|---|---:|---:|---:|---:|",
    ]
    failed_total = 0
    for case in CASES:
        failed = sum(r.errors_connect + r.errors_read + r.errors_write + r.errors_timeout
                     + r.errors_status for r in rounds[case])
        failed_total += failed
        lines.append(f"| {case} | {rps(case):,.0f} | {rps(case) / closed:.3f}× | "
                     f"{p99(case):.2f} | {failed} |")
    polls = sum(v.polls for v in viewers)
    seconds = [s for v in viewers for s in v.seconds]
    sizes = [n for v in viewers for n in v.sizes]
    failures = sum(v.failures for v in viewers)
    failed_total += failures
    lines += [
        "",
        f"While open: {polls} status answers after the first of each round (which carries the "
        f"whole history), {statistics.median(sizes) / 1024:.1f} KiB each (median), answered in "
        f"{statistics.median(seconds) * 1000:.1f} ms (median) under load; {failures} failed.",
        "",
    ]
    report = "\n".join(lines)
    print("\n" + report)
    stamp = time.strftime("%Y-%m-%d-%H%M%S")
    bh.RESULTS.mkdir(exist_ok=True)
    for name in (f"dashboard-{stamp}.md", "dashboard-latest.md"):
        (bh.RESULTS / name).write_text(report)
    shutil.rmtree(state, ignore_errors=True)
    return 1 if failed_total else 0


if __name__ == "__main__":
    sys.exit(main())
