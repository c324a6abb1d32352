#!/usr/bin/env python3
"""A bursty workload against a fixed and an autoscaled pool: latency
during the burst, memory when idle.

Each round starts Hearth fresh and runs: idle, then a burst of 200
concurrent slow requests (each usleep(50 ms) in PHP, one connection each,
all sent at once), then idle again, past `--scale-down-after`. Four
pools, same app, same run, rounds interleaved:

- `--workers 2` (fixed-2): the small pool;
- `--workers 16` (fixed-16): the pool sized for the burst;
- `--min-workers 2 --workers 16` (auto): grows for the burst, shrinks after;
- the same with `--max-booting 16` (auto, unstaggered): every extra
  worker boots at once, as before boots were staggered.

Latency is each request's, from the moment the burst starts to its
response's last byte, measured by this script's own client (asyncio, one
connection per request). Memory is the resident memory (VmRSS) of Hearth
and of every process under it, read from /proc once the pool is idle
(for auto, after its scale-down). The tables report medians of the
rounds; the targets: auto's burst p99 within 1.5x fixed-16's, auto's idle
memory within 1.2x fixed-2's.

    python3 bench/autoscale.py [--rounds 3] [--burst 200] [--sleep-ms 50]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
RESULTS = BENCH / "results"
HEARTH_ENV_PREFIXES = ("HEARTH_", "RUST_LOG")

POOLS = {
    "fixed-2": ["--workers", "2"],
    "fixed-16": ["--workers", "16"],
    "auto": ["--min-workers", "2", "--workers", "16"],
    "auto, unstaggered": ["--min-workers", "2", "--workers", "16", "--max-booting", "16"],
}

WORKER = """<?php
declare(strict_types=1);
require {autoload!r};
Hearth\\Worker::serve(static function (): void {{
    usleep((int) ($_GET['ms'] ?? 50) * 1000);
    echo 'ok';
}});
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port: int, path: str, timeout: float = 5.0) -> int:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else 0


def rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree(pid: int) -> list[int]:
    """`pid` and every process under it."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def memory_mib(pid: int) -> tuple[float, int]:
    """Hearth's and its workers' RSS in MiB, and how many processes."""
    pids = tree(pid)
    return sum(rss_kib(p) for p in pids) / 1024, len(pids)


async def one(port: int, path: str, start: float) -> tuple[float, int]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    await writer.drain()
    data = await reader.read()
    writer.close()
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else 0
    return (time.perf_counter() - start) * 1000, status


async def burst(port: int, n: int, sleep_ms: int) -> tuple[list[float], int, float]:
    start = time.perf_counter()
    results = await asyncio.gather(
        *(one(port, f"/?ms={sleep_ms}", start) for _ in range(n)), return_exceptions=True
    )
    took = time.perf_counter() - start
    latencies = [r[0] for r in results if not isinstance(r, BaseException) and r[1] == 200]
    failed = n - len(latencies)
    return sorted(latencies), failed, took


def pct(sorted_ms: list[float], p: float) -> float:
    if not sorted_ms:
        return float("nan")
    k = min(len(sorted_ms) - 1, max(0, round(p / 100 * len(sorted_ms) + 0.5) - 1))
    return sorted_ms[k]


class Hearth:
    def __init__(self, binary: Path, script: Path, port: int, args: list[str], log: Path):
        self.binary, self.script, self.port, self.args, self.log = binary, script, port, args, log

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(HEARTH_ENV_PREFIXES)}
        cmd = [str(self.binary), "serve", str(self.script), "--listen", f"127.0.0.1:{self.port}",
               "--scale-down-after", "2s", "--log-level", "info", *self.args]
        if os.geteuid() == 0:
            cmd += ["--user", "root"]
        self.out = open(self.log, "w")
        self.proc = subprocess.Popen(cmd, stdout=self.out, stderr=subprocess.STDOUT, env=env)
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                if get(self.port, "/?ms=0") == 200:
                    break
            except OSError:
                pass
            if self.proc.poll() is not None:
                raise SystemExit(f"hearth exited: {self.log.read_text()}")
            time.sleep(0.05)
        else:
            raise SystemExit("hearth did not answer within 60 s")
        # Every worker it boots at start booted.
        want = self.args[self.args.index("--workers") + 1] if "--min-workers" not in self.args \
            else self.args[self.args.index("--min-workers") + 1]
        while time.time() < deadline:
            if f"{want} of {want} worker" in self.log.read_text(errors="replace"):
                return
            time.sleep(0.05)
        raise SystemExit(f"workers not ready: {self.log.read_text()}")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.out.close()


def run_round(binary: Path, script: Path, state: Path, name: str, args: list[str],
              n: int, sleep_ms: int, idle: float) -> dict:
    port = free_port()
    server = Hearth(binary, script, port, args, state / f"{name.replace(', ', '-')}.log")
    server.start()
    try:
        time.sleep(idle)
        before, _ = memory_mib(server.proc.pid)
        latencies, failed, took = asyncio.run(burst(port, n, sleep_ms))
        # Idle again, past --scale-down-after (2 s) and the sweep.
        time.sleep(idle + 2.5)
        after, processes = memory_mib(server.proc.pid)
    finally:
        server.stop()
    return {
        "p50": pct(latencies, 50), "p99": pct(latencies, 99), "max": latencies[-1] if latencies else 0,
        "took": took, "failed": failed, "idle_before": before, "idle_after": after,
        "processes_after": processes,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--burst", type=int, default=200, help="concurrent requests in the burst")
    p.add_argument("--sleep-ms", type=int, default=50, help="each request's usleep in PHP")
    p.add_argument("--idle", type=float, default=2.0, help="seconds idle before the burst")
    p.add_argument("--php", default="php-cgi")
    p.add_argument("--hearth", default=str(ROOT / "target/release/hearth"))
    args = p.parse_args()
    binary = Path(args.hearth)
    if not binary.exists():
        raise SystemExit(f"{binary} not found: cargo build --release")
    state = Path(tempfile.mkdtemp(prefix="hearth-autoscale-"))
    script = state / "worker.php"
    script.write_text(WORKER.format(autoload=str(ROOT / "php/autoload.php")))
    results: dict[str, list[dict]] = {name: [] for name in POOLS}
    for rnd in range(1, args.rounds + 1):
        order = list(POOLS) if rnd % 2 else list(reversed(POOLS))
        for name in order:
            r = run_round(binary, script, state, name, [*POOLS[name], "--php", args.php],
                          args.burst, args.sleep_ms, args.idle)
            results[name].append(r)
            print(f"round {rnd} {name:18}: burst p50 {r['p50']:.0f} ms, p99 {r['p99']:.0f} ms, "
                  f"max {r['max']:.0f} ms, all in {r['took']:.2f} s, failed {r['failed']}; "
                  f"idle {r['idle_before']:.1f} MiB before, {r['idle_after']:.1f} MiB after "
                  f"({r['processes_after']} processes)", flush=True)

    med = {name: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for name, rs in results.items()}
    ratio_p99 = med["auto"]["p99"] / med["fixed-16"]["p99"]
    ratio_mem = med["auto"]["idle_after"] / med["fixed-2"]["idle_after"]
    stagger = med["auto"]["p99"] / med["auto, unstaggered"]["p99"]
    cpus = os.cpu_count()
    lines = [
        "# A bursty workload: fixed and autoscaled pools",
        "",
        f"`python3 bench/autoscale.py --rounds {args.rounds} --burst {args.burst} "
        f"--sleep-ms {args.sleep_ms}` on {cpus} CPUs, {time.strftime('%Y-%m-%d')}: "
        f"a burst of {args.burst} concurrent requests of {args.sleep_ms} ms each "
        f"(usleep in PHP) after {args.idle:.0f} s idle; memory is Hearth's and its "
        "workers' RSS, idle, after the burst (and after the scale-down, 2 s). Medians of "
        f"{args.rounds} rounds.",
        "",
        "| pool | burst p50 ms | burst p99 ms | burst max ms | burst took s | failed | "
        "idle RSS before MiB | idle RSS after MiB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name in POOLS:
        m = med[name]
        failed = sum(r["failed"] for r in results[name])
        lines.append(f"| {name} (`{' '.join(POOLS[name])}`) | {m['p50']:.0f} | {m['p99']:.0f} | "
                     f"{m['max']:.0f} | {m['took']:.2f} | {failed} | {m['idle_before']:.1f} | "
                     f"{m['idle_after']:.1f} |")
    lines += ["", "Burst p99 of each round, ms (in the order run):", ""]
    for name in POOLS:
        lines.append(f"- {name}: " + ", ".join(f"{r['p99']:.0f}" for r in results[name]))
    lines += [
        "",
        f"- auto's burst p99 / fixed-16's: **{ratio_p99:.2f}x** (target: at most 1.5x) — "
        + ("met" if ratio_p99 <= 1.5 else "missed"),
        f"- auto's idle memory / fixed-2's: **{ratio_mem:.2f}x** (target: at most 1.2x) — "
        + ("met" if ratio_mem <= 1.2 else "missed"),
        f"- auto's burst p99, staggered / unstaggered (`--max-booting 16`): **{stagger:.2f}x**",
        "",
    ]
    report = "\n".join(lines)
    print("\n" + report)
    stamp = time.strftime("%Y-%m-%d-%H%M%S")
    RESULTS.mkdir(exist_ok=True)
    for name in (f"autoscale-{stamp}.md", "autoscale-latest.md"):
        (RESULTS / name).write_text(report)
    shutil.rmtree(state, ignore_errors=True)
    return 1 if any(r["failed"] for rs in results.values() for r in rs) else 0


if __name__ == "__main__":
    sys.exit(main())
