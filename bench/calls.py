#!/usr/bin/env python3
"""Calls benchmark: a round trip of Hearth\\Jobs::call() to warm workers.

One PHP process calls a function N times, one call after the other, by four
methods (bench/calls/roundtrip.php), for a trivial function (add two
integers) and the tasks benchmark's invoice job (bench/tasks/app):

    listener  Hearth\\Jobs::call() to `hearth work --listen` (2 warm workers)
    here      the function called directly, in the caller (booted there)
    fallback  Hearth\\Jobs::call() with no listener: it runs in the caller
    php-r     one `php -r` per call, booting the bootstrap each time

`listener` is what a php-fpm request does to hand a call to a booted app;
`php-r` is what it would do without Hearth (start a process); `here` and
`fallback` are the floor of running it in the caller. Rounds are
interleaved; medians are reported, with the issue's target (a trivial
round trip under 100 µs).

    python3 bench/calls.py            # 5 rounds (about 40 s)
    python3 bench/calls.py --quick    # 1 round, smaller N

Writes bench/results/calls-<date>.{md,json} and calls-latest.{md,json}
(--quick: calls-quick-latest.*). Exits 0 when every result was right, 1 when
one was wrong, 2 when the setup is broken.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine_info import cpu_model, first_line, git_revision, loadavg

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
RESULTS = BENCH / "results"
ROUNDTRIP = BENCH / "calls" / "roundtrip.php"
BOOTSTRAP = BENCH / "calls" / "jobs.php"

METHODS = ("listener", "here", "fallback", "php-r")
JOBS = {"add": "trivial: add(int, int)", "invoice": "the invoice job (bench/tasks/app)"}
TARGET_US = 100.0


def measure(method: str, job: str, n: int, socket: str) -> dict:
    out = subprocess.run(
        ["php", str(ROUNDTRIP), "--method", method, "--job", job, "-n", str(n), "--socket", socket],
        capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"{method} {job}: exit {out.returncode}: {out.stdout}{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def start_listener(hearth: Path, socket: Path, log: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HEARTH_", "RUST_LOG"))}
    proc = subprocess.Popen(
        [str(hearth), "work", "--listen", f"unix:{socket}", "--php-bootstrap", str(BOOTSTRAP), "-j", "2"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log.open("w"), env=env)
    deadline = time.monotonic() + 60
    while "taking calls" not in log.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"hearth work did not start:\n{log.read_text()}")
        time.sleep(0.05)
    return proc


def report(rows: list[dict], args: argparse.Namespace, started: datetime.datetime, load_before: str,
           hearth: Path) -> tuple[str, dict]:
    med = {job: {m: statistics.median(r["per_call_us"] for r in rows if r["job"] == job and r["method"] == m)
                 for m in METHODS if any(r["job"] == job and r["method"] == m for r in rows)}
           for job in JOBS}
    command = f"python3 bench/calls.py {' '.join(args.argv)}".rstrip()
    lines = [
        "# Calls benchmark: Hearth\\Jobs::call() round trips",
        "",
        f"Run {started:%Y-%m-%d %H:%M:%S %Z} with `{command}`.",
        "",
        f"- CPUs (nproc): {len(os.sched_getaffinity(0))}; CPU model: {cpu_model()}",
        f"- Kernel: {platform.system()} {platform.release()}; PHP: {first_line(['php', '-v'])}",
        f"- Hearth: {first_line([str(hearth), '--version'])} ({hearth}; source tree at git {git_revision()})",
        f"- Parameters: {args.rounds} round(s), interleaved; per round N = {args.n} calls "
        f"({args.n_cold} for php-r), one after the other from one PHP CLI process; "
        "`hearth work --listen` with 2 job workers; medians over rounds",
        f"- Load average (1/5/15 min) before: {load_before}, after: {loadavg()}",
        "",
        "Microseconds per call, medians over rounds (lower is better). Every value was checked "
        "against the same call made in the caller.",
        "",
        "| job | Jobs::call (listener) | in the caller | Jobs::call fallback (in the caller) "
        "| `php -r` per call | listener vs php -r |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for job, title in JOBS.items():
        m = med[job]
        lines.append(f"| {title} | {m['listener']:.1f} | {m['here']:.2f} | {m['fallback']:.1f} "
                     f"| {m['php-r']:.0f} | {m['php-r'] / m['listener']:.0f}x faster |")
    trivial = med["add"]["listener"]
    met = trivial < TARGET_US
    lines += [
        "",
        "## Target",
        "",
        "| target | met | measured |",
        "|---|---|---|",
        f"| a trivial round trip under {TARGET_US:.0f} µs | {'yes' if met else 'no'} | {trivial:.1f} µs |",
        "",
        "## Every round",
        "",
        "| round | job | method | N | µs per call |",
        "|---:|---|---|---:|---:|",
        *(f"| {r['round']} | {r['job']} | {r['method']} | {r['n']} | {r['per_call_us']:.2f} |" for r in rows),
        "",
    ]
    data = {"started": started.isoformat(), "command": command, "medians_us": med,
            "target": {"trivial_round_trip_us": TARGET_US, "met": met, "measured": trivial}, "rounds": rows}
    return "\n".join(lines), data


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("-n", type=int, default=5000, help="calls per round and method (default 5000)")
    p.add_argument("--n-cold", type=int, default=100, help="calls per round for php-r (default 100)")
    p.add_argument("--quick", action="store_true", help="1 round, N = 500, 20 for php-r")
    p.add_argument("--hearth", type=Path, default=Path(os.environ.get("HEARTH_BIN") or ROOT / "target/release/hearth"))
    args = p.parse_args(argv)
    args.argv = argv
    if args.quick:
        args.rounds, args.n, args.n_cold = 1, 500, 20
    if not os.access(args.hearth, os.X_OK):
        print(f"calls.py: {args.hearth} is not an executable (build it with `cargo build --release -p hearth`)",
              file=sys.stderr)
        return 2
    started = datetime.datetime.now().astimezone()
    load_before = loadavg()
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="hearth-bench-calls-") as tmp:
        socket = Path(tmp) / "jobs.sock"
        try:
            listener = start_listener(args.hearth, socket, Path(tmp) / "hearth.log")
        except RuntimeError as e:
            print(f"calls.py: {e}", file=sys.stderr)
            return 2
        try:
            for rnd in range(1, args.rounds + 1):
                # The method order turns each round, so no method always
                # runs first or last.
                order = METHODS[rnd % len(METHODS):] + METHODS[:rnd % len(METHODS)]
                for job in JOBS:
                    for method in order:
                        n = args.n_cold if method == "php-r" else args.n
                        try:
                            r = measure(method, job, n, f"unix:{socket}")
                        except RuntimeError as e:
                            print(f"calls.py: {e}", file=sys.stderr)
                            return 1
                        r["round"] = rnd
                        rows.append(r)
                        print(f"round {rnd} {job:8} {method:9} {r['per_call_us']:10.2f} µs per call",
                              file=sys.stderr)
        finally:
            listener.terminate()
            listener.wait(timeout=60)
    text, data = report(rows, args, started, load_before, args.hearth)
    RESULTS.mkdir(parents=True, exist_ok=True)
    prefix = "calls-quick" if args.quick else "calls"
    names = [f"{prefix}-latest"] + ([] if args.quick else [f"{prefix}-{started:%Y-%m-%d-%H%M%S}"])
    for name in names:
        (RESULTS / f"{name}.md").write_text(text)
        (RESULTS / f"{name}.json").write_text(json.dumps(data, indent=1))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
