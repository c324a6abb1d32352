#!/usr/bin/env python3
"""Whether one pool's crash loop costs another pool anything: the default
pool's throughput and latency under wrk while a second pool of the same
server (`[[serve.pool]]`, `/api/`) serves, and while its worker script
cannot boot (a broken deploy: the worker killed, its replacement failing
at every attempt of the backoff), in the same run.

Rounds alternate (api healthy, api failing, ...); between them the api
script is fixed and the server reloaded (SIGHUP), or broken and its worker
killed. While it fails, the api pool must answer 503 with Retry-After.
The table reports medians and the ratio to "api healthy".

    python3 bench/pools.py [--app hello] [--rounds 5] [--duration 8]
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
import shutil  # noqa: E402
import signal  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

BENCH = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("bench_http", BENCH / "http.py")
bh = importlib.util.module_from_spec(_spec)
sys.modules["bench_http"] = bh
_spec.loader.exec_module(bh)

CASES = ("api healthy", "api failing")

GOOD = """<?php
require '{autoload}';
Hearth\\Worker::serve(static function (): void {{ echo 'api ' . getmypid(); }});
"""
BROKEN = """<?php
throw new RuntimeException('broken deploy (bench/pools.py)');
"""


def get(port: int, path: str) -> tuple[int, str, str | None]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read().decode(errors="replace"), response.getheader("Retry-After")
    finally:
        conn.close()


def write(path: Path, text: str) -> None:
    tmp = path.with_suffix(".new")
    tmp.write_text(text)
    tmp.rename(path)


def wait_for(what: str, check, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise SystemExit(f"timed out waiting for {what}")


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
    state = Path(tempfile.mkdtemp(prefix="hearth-bench-pools-"))
    api = state / "api.php"
    good = GOOD.format(autoload=bh.ROOT / "php" / "autoload.php")
    write(api, good)
    config = state / "hearth.toml"
    config.write_text(
        f'[serve]\nscript = "{app.worker}"\n\n'
        f'[[serve.pool]]\nname = "api"\npath = "/api/"\nscript = "{api}"\nworkers = 1\n'
    )
    (port,) = bh.free_ports(1)
    env = {k: v for k, v in os.environ.items() if not k.startswith(bh.HEARTH_ENV_PREFIXES)}
    server = bh.HearthServer(binary, app, port, args.workers, state, config=config)
    rounds: dict[str, list] = {case: [] for case in CASES}
    refused: list[tuple[int, str | None]] = []
    try:
        server.start(env)
        for index in range(0, args.rounds + 1):
            for case in CASES:
                if case == "api failing":
                    status, body, _ = get(port, "/api/x")
                    pid = int(body.split(" ")[1])
                    write(api, BROKEN)
                    os.kill(pid, signal.SIGKILL)
                    wait_for("the api pool's 503", lambda: get(port, "/api/x")[0] == 503)
                else:
                    write(api, good)
                    if server.proc is not None:
                        server.proc.send_signal(signal.SIGHUP)
                    wait_for("the api pool back", lambda: get(port, "/api/x")[0] == 200)
                r = bh.run_wrk(args.wrk, port, app.path, args.connections,
                               args.duration if index else 2, app.name, case, index)
                status, _, retry = get(port, "/api/x")
                if case == "api failing":
                    refused.append((status, retry))
                failed = (r.errors_connect + r.errors_read + r.errors_write
                          + r.errors_timeout + r.errors_status)
                if index:
                    rounds[case].append(r)
                print(f"round {index or 'warm-up'} {case:12}: {r.requests / r.duration_s:,.0f} req/s, "
                      f"p99 {r.p99_us / 1000:.2f} ms, failed {failed}; api answered {status}", flush=True)
    finally:
        server.stop()

    def rps(case: str) -> float:
        return statistics.median(r.requests / r.duration_s for r in rounds[case])

    def p99(case: str) -> float:
        return statistics.median(r.p99_us for r in rounds[case]) / 1000

    healthy = rps("api healthy")
    lines = [
        f"# One pool failing to boot, another under load ({app.name})",
        "",
        f"`python3 bench/pools.py --app {app.name} --rounds {args.rounds} --duration "
        f"{args.duration}`: wrk -t1 -c{args.connections} on the default pool ({args.workers} "
        f"workers) while the api pool (1 worker) serves or fails to boot; medians of "
        f"{args.rounds} interleaved rounds.",
        "",
        "| case | default pool req/s | vs healthy | p99 ms | failed |",
        "|---|---:|---:|---:|---:|",
    ]
    failed_total = 0
    for case in CASES:
        failed = sum(r.errors_connect + r.errors_read + r.errors_write + r.errors_timeout
                     + r.errors_status for r in rounds[case])
        failed_total += failed
        lines.append(f"| {case} | {rps(case):,.0f} | {rps(case) / healthy:.3f}× | "
                     f"{p99(case):.2f} | {failed} |")
    all_503 = all(status == 503 and retry for status, retry in refused)
    lines += [
        "",
        f"While failing, the api pool answered {', '.join(sorted({str(s) for s, _ in refused}))}"
        f"{' with Retry-After' if all_503 else ''} after each round.",
        "",
    ]
    report = "\n".join(lines)
    print("\n" + report)
    stamp = time.strftime("%Y-%m-%d-%H%M%S")
    bh.RESULTS.mkdir(exist_ok=True)
    for name in (f"pools-{stamp}.md", "pools-latest.md"):
        (bh.RESULTS / name).write_text(report)
    shutil.rmtree(state, ignore_errors=True)
    return 1 if failed_total or not all_503 else 0


if __name__ == "__main__":
    sys.exit(main())
