#!/usr/bin/env python3
"""Latency under steady load while workers are recycled: Hearth and
nginx + php-fpm, same machine, same app, same run.

Each server's capacity is measured first, with oha itself at full speed
(the load generator shares the machine's 2 CPUs, so capacity is what the
server does next to it).
Then each server gets a constant request rate of 50% and 90% of its own
capacity from oha (a load generator that keeps a fixed rate and records
every latency, so a slow second shows in p99 instead of slowing the
sender), while workers are recycled about once a second: Hearth with
`--max-requests`, php-fpm with `pm.max_requests`, both set to the request
rate, so that each of the W workers is replaced every W seconds. Hearth
without recycling runs too, for reference. Rounds are interleaved and the
tables report medians.

    python3 bench/recycle.py [--app hello] [--rounds 3] [--duration 10]

oha is installed with `cargo install oha` if missing.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("bench_http", BENCH / "http.py")
bh = importlib.util.module_from_spec(_spec)
sys.modules["bench_http"] = bh
_spec.loader.exec_module(bh)

SERVERS = ("hearth", "hearth (no recycling)", "php-fpm")


def find_oha(path: str | None) -> str:
    if path:
        return path
    found = shutil.which("oha") or str(Path.home() / ".cargo/bin/oha")
    if Path(found).exists():
        return found
    print("oha not found: installing it with `cargo install oha --locked` (a few minutes)", flush=True)
    subprocess.run(["cargo", "install", "oha", "--locked"], check=True)
    return str(Path.home() / ".cargo/bin/oha")


def capacity(oha: str, port: int, path: str) -> float:
    r = oha_run(oha, port, path, 0, 5)
    if r["non_2xx"] or r["errors"]:
        raise bh.BenchError(f"failed requests while measuring capacity: {r}")
    return r["achieved"]


def oha_run(oha: str, port: int, path: str, rate: int, duration: int) -> dict:
    cmd = [oha, "--no-tui", "--output-format", "json", "-z", f"{duration}s", "-c", "64",
           f"http://127.0.0.1:{port}{path}"]
    if rate:
        # A fixed rate, latencies measured from when each request was due.
        cmd[1:1] = ["--latency-correction", "-q", str(rate)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 120)
    if out.returncode != 0:
        raise bh.BenchError(f"oha failed: {out.stderr or out.stdout}")
    data = json.loads(out.stdout)
    statuses = {int(k): v for k, v in data.get("statusCodeDistribution", {}).items()}
    # Requests still in flight when the run's time is up are not failures.
    errors = sum(v for k, v in data.get("errorDistribution", {}).items()
                 if "aborted due to deadline" not in k)
    pct = data["latencyPercentiles"]
    total = sum(statuses.values()) + errors
    return {
        "rate": rate,
        "requests": total,
        "achieved": data["summary"]["requestsPerSec"],
        "p50_ms": pct["p50"] * 1000,
        "p99_ms": pct["p99"] * 1000,
        "p99.9_ms": pct["p99.9"] * 1000,
        "max_ms": data["summary"]["slowest"] * 1000,
        "non_2xx": sum(v for k, v in statuses.items() if not 200 <= k < 300),
        "errors": errors,
    }


def start(kind: str, app, port: int, workers: int, state: Path, binary: Path, max_requests: int):
    if kind == "php-fpm":
        os.environ["FPM_MAX_REQUESTS"] = str(max_requests)
        server = bh.FpmServer(app, port, workers, state)
        server.start()
        return server
    # Info level, for the log lines that count the recycled workers.
    extra: tuple[str, ...] = ("--log-level", "info")
    if kind == "hearth" and max_requests:
        extra += ("--max-requests", str(max_requests))
    server = bh.HearthServer(binary, app, port, workers, state, extra_args=extra)
    env = {k: v for k, v in os.environ.items() if not k.startswith(bh.HEARTH_ENV_PREFIXES)}
    server.start(env)
    return server


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--app", default="hello", choices=sorted(bh.APPS))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--duration", type=int, default=10, help="seconds per measurement")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--loads", default="50,90", help="percent of each server's capacity")
    p.add_argument("--oha")
    p.add_argument("--hearth", default=str(bh.ROOT / "target/release/hearth"))
    args = p.parse_args()
    app = bh.APPS[args.app]
    oha = find_oha(args.oha)
    binary = Path(args.hearth)
    loads = [int(x) for x in args.loads.split(",")]
    state = Path(tempfile.mkdtemp(prefix="hearth-recycle-"))
    port = bh.free_ports(1)[0]

    caps: dict[str, float] = {}
    for kind in ("hearth", "php-fpm"):
        server = start(kind, app, port, args.workers, state, binary, 0)
        try:
            capacity(oha, port, app.path)  # warm-up
            caps[kind] = capacity(oha, port, app.path)
        finally:
            server.stop()
        print(f"capacity {kind}: {caps[kind]:.0f} req/s", flush=True)
    caps["hearth (no recycling)"] = caps["hearth"]

    results: dict[tuple[str, int], list[dict]] = {}
    for rnd in range(1, args.rounds + 1):
        order = SERVERS if rnd % 2 else tuple(reversed(SERVERS))
        for kind in order:
            for load in loads:
                rate = max(1, int(caps[kind] * load / 100))
                recycle = 0 if kind == "hearth (no recycling)" else rate
                server = start(kind, app, port, args.workers, state, binary, recycle)
                try:
                    oha_run(oha, port, app.path, rate, 2)  # warm-up
                    r = oha_run(oha, port, app.path, rate, args.duration)
                finally:
                    server.stop()
                if kind == "hearth" and recycle:
                    log = (state / "hearth.log").read_text(errors="replace")
                    r["recycles"] = log.count("(max_requests)")
                results.setdefault((kind, load), []).append(r)
                print(f"round {rnd} {kind:22} {load}% ({rate} req/s): p50 {r['p50_ms']:.2f} ms, "
                      f"p99 {r['p99_ms']:.2f} ms, p99.9 {r['p99.9_ms']:.2f} ms, "
                      f"non-2xx {r['non_2xx']}, errors {r['errors']}", flush=True)

    lines = [
        f"# Latency under load with workers recycled about once a second ({app.name})",
        "",
        f"`python3 bench/recycle.py --app {app.name} --rounds {args.rounds} --duration "
        f"{args.duration}`, {args.workers} workers each, medians of {args.rounds} rounds. "
        f"Capacity (oha, 64 connections): Hearth {caps['hearth']:.0f} req/s, "
        f"nginx + php-fpm {caps['php-fpm']:.0f} req/s. Rates are a share of each server's own "
        "capacity; recycling: `--max-requests` / `pm.max_requests` = the rate.",
        "",
        "| server | load | rate (req/s) | p50 ms | p99 ms | p99.9 ms | max ms | failed |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    failed_total = 0
    for kind in SERVERS:
        for load in loads:
            rs = results[(kind, load)]
            med = lambda key: statistics.median(r[key] for r in rs)  # noqa: E731
            failed = sum(r["non_2xx"] + r["errors"] for r in rs)
            failed_total += failed
            lines.append(f"| {kind} | {load}% | {rs[0]['rate']} | {med('p50_ms'):.2f} | "
                         f"{med('p99_ms'):.2f} | {med('p99.9_ms'):.2f} | {med('max_ms'):.1f} | {failed} |")
    recycles = [r.get("recycles", 0) for (k, _), rs in results.items() if k == "hearth" for r in rs]
    lines += ["", f"Hearth recycled {min(recycles)}–{max(recycles)} workers per "
              f"{args.duration + 2} s run (warm-up included).", ""]
    report = "\n".join(lines)
    print("\n" + report)
    stamp = time.strftime("%Y-%m-%d-%H%M%S")
    bh.RESULTS.mkdir(exist_ok=True)
    for name in (f"recycle-{stamp}.md", "recycle-latest.md"):
        (bh.RESULTS / name).write_text(report)
    shutil.rmtree(state, ignore_errors=True)
    return 1 if failed_total else 0


if __name__ == "__main__":
    sys.exit(main())
