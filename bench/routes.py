#!/usr/bin/env python3
"""What memory growth by route costs a request: a Hearth that measures it
against a Hearth of the release before, in the same run.

Each worker reads memory_get_usage() after a request and sends it in the
next response's last frame; Hearth folds each request's path and counts
the growth under its route (docs/memory.md). This runs the hello app
under both binaries, each with its own PHP library (the worker script of
its own source tree), on the PHP library's request startup and on the
Hearth extension (each tree's own, built by ext/build.sh), drives them
with wrk in interleaved rounds (before, after, before, ...), and reports
medians of req/s, p99 latency and the CPU per request of the front
(Hearth) and of the PHP workers, read from /proc around every round.

    git archive BASE | tar -x -C /tmp/base     # the release before
    (cd /tmp/base && cargo build --release -p hearth)
    sh /tmp/base/ext/build.sh /tmp/base-ext; sh ext/build.sh /tmp/after-ext
    python3 bench/routes.py --before /tmp/base --before-ext /tmp/base-ext/hearth-php8.2.so \\
        --after-ext /tmp/after-ext/hearth-php8.2.so [--rounds 5] [--duration 8]

--before is a source tree of the release before, with its binary under
target/release (or --before-bin). Without --before-ext and --after-ext the
extension cases are left out.
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
import importlib.util  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

BENCH = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("bench_http", BENCH / "http.py")
bh = importlib.util.module_from_spec(_spec)
sys.modules["bench_http"] = bh
_spec.loader.exec_module(bh)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--before", type=Path, required=True, help="source tree of the release before")
    p.add_argument("--before-bin", type=Path, help="its hearth (default: BEFORE/target/release/hearth)")
    p.add_argument("--after-bin", type=Path, default=bh.ROOT / "target/release/hearth")
    p.add_argument("--before-ext", type=Path, help="the release before's extension (.so)")
    p.add_argument("--after-ext", type=Path, help="this tree's extension (.so)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--duration", type=int, default=8, help="seconds per round")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--connections", type=int, default=64)
    p.add_argument("--wrk", default="wrk")
    args = p.parse_args()
    before_bin = args.before_bin or args.before / "target/release/hearth"
    for binary in (before_bin, args.after_bin):
        if not binary.exists():
            raise SystemExit(f"{binary} is missing: cargo build --release -p hearth")
    hello = bh.APPS["hello"]
    trees = {"before": (before_bin, args.before), "after": (args.after_bin, bh.ROOT)}
    exts = {"before": args.before_ext, "after": args.after_ext}
    state = Path(tempfile.mkdtemp(prefix="hearth-bench-routes-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(bh.HEARTH_ENV_PREFIXES)}
    cases: list[tuple[str, str, object]] = []
    for startup in ("library", "extension"):
        if startup == "extension" and not (args.before_ext and args.after_ext):
            continue
        for which in ("before", "after"):
            binary, tree = trees[which]
            app = dataclasses.replace(hello, worker=tree / "bench/apps/hello/worker.php")
            ext = ("--php-extension", "off") if startup == "library" else ("--php-extension", str(exts[which]))
            (state / f"{which}-{startup}").mkdir()
            port = bh.free_ports(1)[0]
            server = bh.HearthServer(binary, app, port, args.workers, state / f"{which}-{startup}",
                                     extra_args=ext)
            cases.append((startup, which, server))
    rounds: dict[tuple[str, str], list] = {(s, w): [] for s, w, _ in cases}
    cpu: dict[tuple[str, str], list[tuple[float, float]]] = {(s, w): [] for s, w, _ in cases}
    try:
        for _, _, server in cases:
            server.start(env)
        for index in range(0, args.rounds + 1):
            for startup, which, server in cases:
                before = bh.cpu_sample(server)
                r = bh.run_wrk(args.wrk, server.port, hello.path, args.connections,
                               args.duration if index else 2, "hello", f"{which} {startup}", index)
                after = bh.cpu_sample(server)
                failed = (r.errors_connect + r.errors_read + r.errors_write
                          + r.errors_timeout + r.errors_status)
                front = bh.cpu_seconds(before, after, "front") / max(r.requests, 1) * 1e6
                workers = bh.cpu_seconds(before, after, "workers") / max(r.requests, 1) * 1e6
                if index:
                    rounds[(startup, which)].append(r)
                    cpu[(startup, which)].append((front, workers))
                print(f"round {index or 'warm-up'} {which:6} {startup:9}: "
                      f"{r.requests / r.duration_s:,.0f} req/s, p99 {r.p99_us / 1000:.2f} ms, "
                      f"front {front:.1f} µs, workers {workers:.1f} µs, failed {failed}", flush=True)
    finally:
        for _, _, server in cases:
            server.stop()

    def rps(key) -> float:
        return statistics.median(r.requests / r.duration_s for r in rounds[key])

    lines = [
        "# What memory growth by route costs a request (hello)",
        "",
        f"`python3 bench/routes.py {' '.join(sys.argv[1:])}`: wrk -t1 -c{args.connections}, "
        f"{args.workers} workers, medians of {args.rounds} interleaved rounds; CPU per request "
        f"from /proc.",
        "",
        "| startup | hearth | req/s | vs before | p99 ms | front µs/req | workers µs/req | failed |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    failed_total = 0
    for startup, which, _ in cases:
        key = (startup, which)
        failed = sum(r.errors_connect + r.errors_read + r.errors_write + r.errors_timeout
                     + r.errors_status for r in rounds[key])
        failed_total += failed
        p99 = statistics.median(r.p99_us for r in rounds[key]) / 1000
        front = statistics.median(c[0] for c in cpu[key])
        workers = statistics.median(c[1] for c in cpu[key])
        lines.append(f"| {startup} | {which} | {rps(key):,.0f} | {rps(key) / rps((startup, 'before')):.3f}× | "
                     f"{p99:.2f} | {front:.1f} | {workers:.1f} | {failed} |")
    lines.append("")
    report = "\n".join(lines)
    print("\n" + report)
    stamp = time.strftime("%Y-%m-%d-%H%M%S")
    bh.RESULTS.mkdir(exist_ok=True)
    for name in (f"routes-{stamp}.md", "routes-latest.md"):
        (bh.RESULTS / name).write_text(report)
    shutil.rmtree(state, ignore_errors=True)
    return 1 if failed_total else 0


if __name__ == "__main__":
    sys.exit(main())
