#!/usr/bin/env python3
"""Jobs benchmark: Hearth's queue consumer against Symfony Messenger and Laravel's queue worker.

One private redis-server (a free port, a temporary directory, AOF on), the
same PHP job (bench/jobs/jobs.php), the same number of PHP consumer
processes (1, 2 and 4), three systems:

    hearth     `hearth work --queue redis://... -j N --php-bootstrap bench/jobs/hearth-bootstrap.php`
    messenger  N x `php bench/jobs/messenger/console.php messenger:consume redis` (Symfony 5.4, Redis transport)
    laravel    N x `php bench/jobs/laravel/artisan queue:work redis` (Laravel 8, phpredis)

Throughput: M jobs are pushed first (each system with its own producer API),
then the N consumers start; jobs per second is M over the time from the
earliest job start to the latest job end, as the jobs record them in Redis.
Two jobs: `trivial` (nothing but the report) and `invoice` (the task
benchmark's app prices an order). Every run checks that exactly M jobs ran
and that their values add up to what the producer computed.

Latency: one consumer process per system, idle; K jobs one at a time, each
pushed 20 ms after the previous one started; the time from just before the
push to the job's first line (microtime(true) on both sides).

Rounds are interleaved (the system order rotates); medians are reported.

    python3 bench/jobs.py              # the full benchmark (about 8 minutes on 2 CPUs)
    python3 bench/jobs.py --quick      # a smoke test (about 50 s)

Writes bench/results/jobs-<date>.{md,json} and jobs-latest.{md,json}
(--quick: jobs-quick-latest.*). Exits 0 when every result was right, 1 when
one was wrong (the run stops there, nothing is written), 2 when the setup is
broken, 130 on Ctrl-C. See bench/README.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine_info import cpu_model, first_line, git_revision, loadavg

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
JOBS = BENCH / "jobs"
RESULTS = BENCH / "results"

SYSTEMS = {
    "hearth": "Hearth (`hearth work`)",
    "messenger": "Symfony Messenger 5.4 (`messenger:consume`)",
    "laravel": "Laravel 8 (`queue:work`)",
}
KINDS = {
    "trivial": "trivial job (reports and returns)",
    "invoice": "invoice job (the task benchmark's app prices an order)",
}
# Like bench/http.py: Hearth runs with the defaults a user gets.
HEARTH_ENV_PREFIXES = ("HEARTH_", "RUST_LOG")
# Messenger polls: after an empty read (XREADGROUP ... BLOCK 1) a worker
# sleeps --sleep seconds (1 by default). 1 ms is its best latency; it only
# matters when the queue is empty, so it does not change the throughput runs.
MESSENGER_SLEEP = "0.001"

TARGET_RATIO = 3.0        # Hearth jobs/s over each other system's, same N
TARGET_LATENCY_P50 = 1.0  # ms, Hearth's enqueue-to-start p50


class BenchError(Exception):
    """The benchmark could not run: a tool is missing, a process died or hung."""


class WrongResult(Exception):
    """Jobs were lost, ran twice, or computed something else: nothing is reported."""


class Interrupted(Exception):
    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def on_signal(signum, frame):
    raise Interrupted(signum)


# ------------------------------------------------------------------- redis


class Redis:
    """The benchmark's own redis-server, and a minimal RESP client for it.

    By hand (a dozen lines) so that the benchmark needs nothing beyond
    Python's standard library; it only sends commands of a few words and
    reads integer, simple, bulk and array replies.
    """

    def __init__(self, tmp: Path):
        self.port = free_port()
        self.dir = tmp / "redis"
        self.dir.mkdir()
        self.log = tmp / "redis.log"
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir),
             "--save", "", "--appendonly", "yes", "--daemonize", "no", "--logfile", str(self.log)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        self.sock: socket.socket | None = None
        deadline = time.monotonic() + 10
        while True:
            try:
                self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
                self.file = self.sock.makefile("rb")
                if self.command("PING") == "PONG":
                    break
            except (OSError, BenchError):
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise BenchError(f"redis-server did not start on port {self.port}: see {self.log}")
            time.sleep(0.05)
        self.version = str(self.command("INFO", "server")).split("redis_version:")[1].split()[0]

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self, *words: str):
        out = f"*{len(words)}\r\n".encode()
        for w in words:
            b = str(w).encode()
            out += b"$%d\r\n%s\r\n" % (len(b), b)
        assert self.sock is not None
        self.sock.sendall(out)
        return self._reply()

    def _reply(self):
        line = self.file.readline()
        if not line:
            raise BenchError("redis-server closed the connection")
        kind, rest = line[:1], line[1:-2].decode()
        if kind == b"+":
            return rest
        if kind == b"-":
            raise BenchError(f"redis: {rest}")
        if kind == b":":
            return int(rest)
        if kind == b"$":
            if rest == "-1":
                return None
            data = self.file.read(int(rest) + 2)
            return data[:-2].decode()
        if kind == b"*":
            return [self._reply() for _ in range(int(rest))]
        raise BenchError(f"redis: unexpected reply {line!r}")

    def stop(self) -> None:
        if self.sock:
            self.sock.close()
        stop_group(self.proc)


def command_calls(redis: Redis) -> dict[str, int]:
    """{command: calls} from INFO commandstats (commands a script runs count too)."""
    calls = {}
    for line in str(redis.command("INFO", "commandstats")).splitlines():
        if line.startswith("cmdstat_"):
            name, rest = line[len("cmdstat_"):].split(":", 1)
            calls[name] = int(rest.split("calls=")[1].split(",")[0])
    return calls


def redis_cpu(redis: Redis) -> float:
    """Seconds of CPU redis-server used so far (user + system, all threads)."""
    info = dict(line.split(":", 1) for line in str(redis.command("INFO", "cpu")).splitlines() if ":" in line)
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def tree_cpu(roots: list[int]) -> tuple[float, float]:
    """Seconds of CPU used by the processes `roots` and their live descendants,
    and by the roots alone."""
    parent, ticks = {}, {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parent[int(d.name)] = int(fields[1])
            ticks[int(d.name)] = int(fields[11]) + int(fields[12])  # utime, stime
    total, todo = 0, list(roots)
    while todo:
        pid = todo.pop()
        total += ticks.get(pid, 0)
        todo += [c for c, pp in parent.items() if pp == pid]
    hz = os.sysconf("SC_CLK_TCK")
    return total / hz, sum(ticks.get(pid, 0) for pid in roots) / hz


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_group(proc: subprocess.Popen, grace: float = 5.0) -> None:
    """SIGTERM to the process group, then SIGKILL after `grace` seconds."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        if proc.poll() is not None:
            break
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            break
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
    try:  # whatever the group left behind (a consumer's children)
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if proc.returncode is None:
        proc.wait()


# ----------------------------------------------------------------- running


class Bench:
    def __init__(self, args: argparse.Namespace, tmp: Path, redis: Redis):
        self.args = args
        self.tmp = tmp
        self.redis = redis
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(HEARTH_ENV_PREFIXES)}
        self.env.update({
            "BENCH_REDIS": redis.address,
            # Laravel writes its service and package manifests here, not in bench/jobs/laravel.
            "APP_SERVICES_CACHE": str(tmp / "laravel-services.php"),
            "APP_PACKAGES_CACHE": str(tmp / "laravel-packages.php"),
        })

    def driver(self, *argv: str, timeout: float) -> dict:
        cmd = ["php", str(JOBS / "driver.php"), *argv]
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, env=self.env, cwd=ROOT,
                                 timeout=timeout, start_new_session=True)
        except subprocess.TimeoutExpired:
            raise BenchError(f"timed out after {timeout:.0f}s: {' '.join(cmd)}")
        if out.returncode == 1:
            raise WrongResult(f"{' '.join(cmd)}: {out.stderr.strip()}")
        if out.returncode != 0 or not out.stdout.strip():
            raise BenchError(f"exit {out.returncode}: {' '.join(cmd)}\n{out.stderr.strip()[-2000:]}")
        return json.loads(out.stdout.strip().splitlines()[-1])

    def consumers(self, system: str, n: int) -> list[subprocess.Popen]:
        """Starts the N consumer processes of a system (for Hearth, one hearth work -j N)."""
        if system == "hearth":
            argvs = [[str(self.args.hearth), "work", "--queue", f"redis://{self.redis.address}/bench",
                      "-j", str(n), "--php-bootstrap", str(JOBS / "hearth-bootstrap.php"),
                      "--log-level", "warn"]]
        elif system == "messenger":
            argvs = [["php", str(JOBS / "messenger/console.php"), "messenger:consume", "redis",
                      f"--sleep={MESSENGER_SLEEP}"] for _ in range(n)]
        else:
            argvs = [["php", str(JOBS / "laravel/artisan"), "queue:work", "redis", "--sleep=0"]
                     for _ in range(n)]
        procs = []
        for i, argv in enumerate(argvs):
            env = dict(self.env, MESSENGER_CONSUMER=f"consumer-{i}")
            log = open(self.tmp / f"{system}-{i}.log", "w")
            try:
                procs.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                              stderr=log, env=env, cwd=ROOT, start_new_session=True))
            except BaseException:
                for p in procs:
                    stop_group(p)
                raise
            finally:
                log.close()
        return procs

    def died(self, system: str, procs: list[subprocess.Popen]) -> str | None:
        for i, p in enumerate(procs):
            if p.poll() is not None:
                log = (self.tmp / f"{system}-{i}.log").read_text()[-2000:]
                return f"a {system} consumer exited with status {p.returncode}:\n{log}"
        return None

    def throughput(self, system: str, kind: str, n: int) -> dict:
        m = self.args.m
        self.redis.command("FLUSHALL")
        pushed = self.driver("--mode", "push", "--system", system, "--kind", kind, "-m", str(m),
                             timeout=self.args.timeout)
        calls_before, redis_cpu_before = command_calls(self.redis), redis_cpu(self.redis)
        started = time.time()
        procs = self.consumers(system, n)
        polls = 0
        try:
            deadline = time.monotonic() + self.args.timeout
            while True:
                polls += 1
                done = int(self.redis.command("GET", "bench:done") or 0)
                if done >= m:
                    observed = time.time()
                    break
                problem = self.died(system, procs)
                if problem:
                    raise BenchError(problem)
                if time.monotonic() > deadline:
                    raise BenchError(f"{system}, {kind}, N={n}: {done} of {m} jobs done after "
                                     f"{self.args.timeout:.0f}s")
                time.sleep(0.005)
            # A job run twice would show here: give a straggler time to report.
            time.sleep(0.2)
            done, total, first, last = self.redis.command("MGET", "bench:done", "bench:sum",
                                                          "bench:first", "bench:last")
            consumer_cpu, root_cpu = tree_cpu([p.pid for p in procs])
            redis_used = redis_cpu(self.redis) - redis_cpu_before
            calls = command_calls(self.redis)
        finally:
            for p in procs:
                stop_group(p)
        done, total = int(done), int(total)
        if done != m or total != pushed["expected_sum"]:
            raise WrongResult(f"{system}, {kind} job, N={n}: {done} jobs ran (pushed {m}), their values "
                              f"add up to {total} (expected {pushed['expected_sum']})")
        seconds = float(last) - float(first)
        # The benchmark's own commands: its polls (GET) and final MGET, and the INFO calls.
        ours = {"get": polls, "mget": 1, "info": 2}
        per_job = {c: (k - calls_before.get(c, 0) - ours.get(c, 0)) / m for c, k in calls.items()}
        return {"system": system, "kind": kind, "n": n, "jobs": m, "seconds": seconds,
                "jps": m / seconds, "wall_seconds": observed - started,
                "first_job_after": float(first) - started, "push_seconds": pushed["seconds"],
                "consumer_cpu_us_per_job": consumer_cpu / m * 1e6,
                # For Hearth, `hearth work` itself (the rest is its PHP workers).
                "front_cpu_us_per_job": root_cpu / m * 1e6 if system == "hearth" else None,
                "redis_cpu_us_per_job": redis_used / m * 1e6,
                "redis_calls_per_job": {c: round(v, 3) for c, v in sorted(per_job.items()) if v > 0}}

    def latency(self, system: str) -> list[float]:
        self.redis.command("FLUSHALL")
        procs = self.consumers(system, 1)
        try:
            got = self.driver("--mode", "latency", "--system", system, "-m", str(self.args.latency),
                              "--gap", str(self.args.gap), timeout=self.args.timeout)
            problem = self.died(system, procs)
            if problem:
                raise BenchError(problem)
        finally:
            for p in procs:
                stop_group(p)
        return got["samples"]


def measure(bench: Bench) -> tuple[list[dict], dict[str, list[dict]]]:
    args = bench.args
    runs: list[dict] = []
    latency: dict[str, list[dict]] = {s: [] for s in args.system_list}
    systems = args.system_list
    for rnd in range(1, args.rounds + 1):
        shift = (rnd - 1) % len(systems)
        order = systems[shift:] + systems[:shift]
        print(f"\n== round {rnd}/{args.rounds}: {', '.join(order)}", flush=True)
        for kind in args.kind_list:
            for n in args.n_list:
                for system in order:
                    r = bench.throughput(system, kind, n)
                    r["round"] = rnd
                    runs.append(r)
                    print(f"  {kind:<8} N={n}  {system:<10} {r['jps']:>9.0f} jobs/s  ({r['jobs']} jobs in "
                          f"{r['seconds']:.3f}s; first job {r['first_job_after']:.2f}s after start; "
                          f"count and sum ok)", flush=True)
        if args.latency:
            for system in order:
                samples = bench.latency(system)
                latency[system].append({"round": rnd, "samples": samples})
                ms = sorted(s * 1000 for s in samples)
                print(f"  latency  N=1  {system:<10} p50 {percentile(ms, 50):.3f} ms, "
                      f"p99 {percentile(ms, 99):.3f} ms ({len(ms)} jobs)", flush=True)
    return runs, latency


# ----------------------------------------------------------------- numbers


def percentile(sorted_values: list[float], p: float) -> float:
    """Nearest-rank percentile of an already sorted list."""
    if not sorted_values:
        return float("nan")
    rank = max(1, -(-len(sorted_values) * p // 100))
    return sorted_values[int(rank) - 1]


def medians(runs: list[dict]) -> dict:
    """{kind: {n: {system: median jobs/s}}}."""
    groups: dict = {}
    for r in runs:
        groups.setdefault(r["kind"], {}).setdefault(r["n"], {}).setdefault(r["system"], []).append(r["jps"])
    return {k: {n: {s: statistics.median(v) for s, v in by_s.items()} for n, by_s in by_n.items()}
            for k, by_n in groups.items()}


def latency_stats(latency: dict[str, list[dict]]) -> dict[str, dict]:
    """Per system: p50, p90, p99, max (ms) over every round's samples, pooled."""
    out = {}
    for system, rounds in latency.items():
        ms = sorted(s * 1000 for r in rounds for s in r["samples"])
        if ms:
            out[system] = {"n": len(ms), "p50": percentile(ms, 50), "p90": percentile(ms, 90),
                           "p99": percentile(ms, 99), "max": ms[-1]}
    return out


def targets(med: dict, lat: dict) -> list[tuple[str, bool, str]]:
    rows = []
    for other in ("messenger", "laravel"):
        ratios = [(kind, n, by[n]["hearth"] / by[n][other]) for kind, by in med.items() for n in sorted(by)
                  if "hearth" in by[n] and other in by[n]]
        if ratios:
            worst = min(ratios, key=lambda r: r[2])
            rows.append((f"Hearth ≥ {TARGET_RATIO:.0f}× {other}'s jobs/s at every N, both jobs",
                         worst[2] >= TARGET_RATIO,
                         "; ".join(f"{kind} N={n} {r:.2f}×" for kind, n, r in ratios)
                         + f"; lowest {worst[2]:.2f}× ({worst[0]}, N={worst[1]})"))
    if "hearth" in lat:
        p50 = lat["hearth"]["p50"]
        rows.append((f"Hearth enqueue-to-start p50 < {TARGET_LATENCY_P50:.0f} ms on an idle machine",
                     p50 < TARGET_LATENCY_P50, f"p50 {p50:.3f} ms, p99 {lat['hearth']['p99']:.3f} ms"))
    return rows


# ----------------------------------------------------------------- report


def throughput_table(med: dict, kind: str, args: argparse.Namespace) -> str:
    systems = args.system_list
    others = [s for s in ("messenger", "laravel") if s in systems and "hearth" in systems]
    head = ["N", *(SYSTEMS[s] for s in systems), *(f"Hearth / {s.capitalize()}" for s in others)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    for n in args.n_list:
        by = med[kind][n]
        cells = [str(n), *(f"{by[s]:.0f}" for s in systems),
                 *(f"**{by['hearth'] / by[s]:.2f}×**" for s in others)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def cost_table(runs: list[dict], kind: str, args: argparse.Namespace) -> str:
    """Medians over rounds of what a job costs: CPU and Redis commands."""
    lines = ["| N | system | consumers' CPU µs/job | of which `hearth work` | redis-server CPU µs/job "
             "| Redis commands/job | of which |", "|---:|---|---:|---:|---:|---:|---|"]
    for n in args.n_list:
        for system in args.system_list:
            rs = [r for r in runs if r["kind"] == kind and r["n"] == n and r["system"] == system]
            if not rs:
                continue
            calls: dict[str, float] = {}
            for c in {c for r in rs for c in r["redis_calls_per_job"]}:
                calls[c] = statistics.median(r["redis_calls_per_job"].get(c, 0) for r in rs)
            top = sorted(calls.items(), key=lambda kv: -kv[1])
            front = (f"{statistics.median(r['front_cpu_us_per_job'] for r in rs):.0f}"
                     if system == "hearth" else "")
            lines.append(
                f"| {n} | {system} | {statistics.median(r['consumer_cpu_us_per_job'] for r in rs):.0f} "
                f"| {front} | {statistics.median(r['redis_cpu_us_per_job'] for r in rs):.0f} "
                f"| {sum(calls.values()):.1f} | {', '.join(f'{c} {v:.2g}' for c, v in top if v >= 0.05)} |")
    return "\n".join(lines)


def latency_table(lat: dict) -> str:
    lines = ["| system | jobs | p50 ms | p90 ms | p99 ms | max ms |", "|---|---:|---:|---:|---:|---:|"]
    for s, v in lat.items():
        lines.append(f"| {SYSTEMS[s]} | {v['n']} | {v['p50']:.3f} | {v['p90']:.3f} | {v['p99']:.3f} "
                     f"| {v['max']:.3f} |")
    return "\n".join(lines)


def targets_table(rows: list[tuple[str, bool, str]]) -> str:
    lines = ["| target | met | measured |", "|---|:---:|---|"]
    lines += [f"| {name} | {'yes' if met else '**no**'} | {got} |" for name, met, got in rows]
    return "\n".join(lines)


def rounds_table(runs: list[dict]) -> str:
    lines = ["| round | job | N | system | jobs/s | jobs | seconds (first start → last end) "
             "| first job after start (s) | wall from start (s) | push (s) |",
             "|---:|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    for r in runs:
        lines.append(f"| {r['round']} | {r['kind']} | {r['n']} | {r['system']} | {r['jps']:.0f} | {r['jobs']} "
                     f"| {r['seconds']:.3f} | {r['first_job_after']:.3f} | {r['wall_seconds']:.3f} "
                     f"| {r['push_seconds']:.3f} |")
    return "\n".join(lines)


def machine(args: argparse.Namespace, redis_version: str) -> dict[str, str]:
    info = {
        "CPUs (nproc)": str(len(os.sched_getaffinity(0))),
        "CPU model": cpu_model(),
        "Kernel": f"{platform.system()} {platform.release()}",
        "PHP": first_line(["php", "-v"]),
        "phpredis": first_line(["php", "-r", "echo phpversion('redis');"]),
        "Redis": f"{redis_version} (private, AOF on, appendfsync everysec; no RDB snapshots)",
        "Symfony Messenger": first_line(["dpkg-query", "-W", "-f", "${Version}", "php-symfony-messenger"]),
        "Laravel": first_line(["dpkg-query", "-W", "-f", "${Version}", "php-laravel-framework"]),
    }
    if "hearth" in args.system_list:
        built = datetime.datetime.fromtimestamp(args.hearth.stat().st_mtime).astimezone()
        info["Hearth"] = (f"{first_line([str(args.hearth), '--version'])} ({args.hearth}, built "
                          f"{built:%Y-%m-%d %H:%M %Z}; source tree at git {git_revision()})")
    return info


def write_report(runs: list[dict], latency: dict, args: argparse.Namespace, info: dict[str, str],
                 started: datetime.datetime, load_before: str) -> tuple[str, Path]:
    med = medians(runs)
    lat = latency_stats(latency)
    goals = targets(med, lat)
    command = f"python3 bench/jobs.py {' '.join(args.argv)}".rstrip()
    params = (f"M = {args.m} jobs per run, pushed before the consumers start; consumer processes "
              f"N = {', '.join(map(str, args.n_list))}; {args.rounds} round(s), interleaved (every job, N "
              f"and system in each round; system order rotated); medians over rounds")
    if args.latency:
        params += (f"; latency: {args.latency} jobs per system and round, one at a time, each pushed "
                   f"{args.gap:g} ms after the previous one started, 1 consumer process")
    text = "\n".join([
        "# Jobs benchmark: Hearth, Symfony Messenger and Laravel queues on one Redis",
        "",
        f"Run {started:%Y-%m-%d %H:%M:%S %Z} with `{command}`.",
        "",
        *(f"- {k}: {v}" for k, v in info.items()),
        f"- Parameters: {params}",
        f"- Load average (1/5/15 min) before: {load_before}, after: {loadavg()}",
        "",
        "Jobs per second, medians over rounds (higher is better): M over the time from the earliest "
        "job start to the latest job end, as the jobs record them (microtime(true)) in Redis; the "
        "consumers' boot is not in it. In every run exactly M jobs ran and their values added up to "
        "what the producer computed.",
        "",
        *(part for kind in args.kind_list
          for part in (f"## {KINDS[kind].capitalize()}", "", throughput_table(med, kind, args), "")),
        *(("## Enqueue-to-start latency (idle, one job at a time, 1 consumer process)", "",
           "From just before the producer's push call to the job's first line (both microtime(true)); "
           "percentiles over every round's jobs.", "", latency_table(lat), "") if lat else ()),
        *(("## Targets", "", targets_table(goals), "") if goals else ()),
        "## What a job costs",
        "",
        "Medians over rounds. Consumers' CPU: user + system time of the consumer processes (for "
        "Hearth, `hearth work` and its PHP workers) over the run, their boot included, divided by M. "
        "redis-server's CPU and the commands Redis counted (`INFO commandstats`, commands run by "
        "scripts included) from the end of the push to the last job, divided by M. Every system's "
        "job reports through the same script: 1 EVALSHA running 2 GET, 1 INCR, 1 INCRBY and 0 to "
        "2 SET.",
        "",
        *(part for kind in args.kind_list
          for part in (f"### {KINDS[kind].capitalize()}", "", cost_table(runs, kind, args), "")),
        "## Every run",
        "",
        rounds_table(runs),
        "",
    ])
    RESULTS.mkdir(parents=True, exist_ok=True)
    prefix = "jobs-quick" if args.quick else "jobs"
    data = json.dumps({
        "started": started.isoformat(), "command": command, "machine": info, "parameters": params,
        "medians": {k: {str(n): by for n, by in d.items()} for k, d in med.items()},
        "latency_ms": lat, "targets": [{"target": n, "met": m, "measured": g} for n, m, g in goals],
        "runs": runs, "latency_samples_s": latency,
    }, indent=1)
    names = [f"{prefix}-latest"] + ([] if args.quick else [f"{prefix}-{started:%Y-%m-%d-%H%M%S}"])
    for name in names:
        (RESULTS / f"{name}.md").write_text(text)
        (RESULTS / f"{name}.json").write_text(data)
    return ", ".join(f"bench/results/{n}.{{md,json}}" for n in names), RESULTS / f"{prefix}-latest.md"


# -------------------------------------------------------------------- main


def setup_problem(args: argparse.Namespace, env: dict[str, str]) -> str | None:
    """What is missing to run the benchmark, or None."""
    if not shutil.which("redis-server"):
        return "redis-server is not installed (apt-get install redis-server)"
    if first_line(["php", "-r", "echo extension_loaded('redis') ? 'yes' : 'no';"]) != "yes":
        return "PHP's redis extension is not loaded (apt-get install php-redis)"
    if "messenger" in args.system_list and not Path(
            "/usr/share/php/Symfony/Component/Messenger/Bridge/Redis/autoload.php").is_file():
        return "Symfony Messenger's Redis transport is missing (apt-get install php-symfony-messenger " \
               "php-symfony-redis-messenger)"
    if "laravel" in args.system_list and not Path("/usr/share/php/Illuminate/autoload.php").is_file():
        return "Laravel is missing (apt-get install php-laravel-framework)"
    if "hearth" in args.system_list:
        if not os.access(args.hearth, os.X_OK):
            return f"{args.hearth} is not an executable (build it with `cargo build --release -p hearth`)"
        out = subprocess.run([str(args.hearth), "work", "--help"], capture_output=True, text=True, env=env)
        if out.returncode != 0 or "--php-bootstrap" not in out.stdout:
            return f"`{args.hearth} work --help` failed: this hearth has no `hearth work`"
    return None


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, help="interleaved rounds (default: 3)")
    p.add_argument("-m", type=int, help="jobs per throughput run (default: 7000)")
    p.add_argument("--processes", help="consumer process counts, comma-separated (default: 1,2,4)")
    p.add_argument("--jobs", default=",".join(KINDS), help="which jobs: %(default)s")
    p.add_argument("--systems", default=",".join(SYSTEMS), help="which systems: %(default)s")
    p.add_argument("--latency", type=int, help="latency jobs per system and round, 0 to skip (default: 200)")
    p.add_argument("--gap", type=float, default=20.0,
                   help="ms between a latency job's start and the next push (default: %(default)s)")
    p.add_argument("--hearth", type=Path, default=Path(os.environ.get("HEARTH_BIN") or ROOT / "target/release/hearth"),
                   help="hearth binary (default: $HEARTH_BIN or target/release/hearth)")
    p.add_argument("--timeout", type=float, default=120.0,
                   help="seconds allowed for one run, push or latency series (default: %(default)s)")
    p.add_argument("--quick", action="store_true",
                   help="smoke test: --rounds 1 -m 300 --processes 1,2 --latency 20 (flags given win)")
    args = p.parse_args(argv)
    args.argv = argv
    defaults = (dict(rounds=1, m=300, processes="1,2", latency=20) if args.quick
                else dict(rounds=3, m=7000, processes="1,2,4", latency=200))
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    try:
        args.n_list = sorted({int(s) for s in args.processes.split(",") if s.strip()})
    except ValueError:
        p.error(f"--processes: not a list of integers: {args.processes}")
    if not args.n_list or min(args.n_list) < 1:
        p.error("--processes must list counts of 1 or more")
    args.kind_list = [k.strip() for k in args.jobs.split(",") if k.strip()]
    args.system_list = [s.strip() for s in args.systems.split(",") if s.strip()]
    for name, given, known in (("jobs", args.kind_list, KINDS), ("systems", args.system_list, SYSTEMS)):
        unknown = [k for k in given if k not in known]
        if unknown or not given:
            p.error(f"--{name}: unknown {', '.join(unknown) or '(none given)'}; known: {', '.join(known)}")
    if args.rounds < 1 or args.m < 1:
        p.error("--rounds and -m must be at least 1")
    if args.latency < 0 or args.gap < 0:
        p.error("--latency and --gap must be 0 or more")
    args.hearth = args.hearth.resolve()
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    env = {k: v for k, v in os.environ.items() if not k.startswith(HEARTH_ENV_PREFIXES)}
    problem = setup_problem(args, env)
    if problem:
        print(f"bench/jobs.py: {problem}.", file=sys.stderr)
        return 2
    if "hearth" in args.system_list:
        built = args.hearth.stat().st_mtime
        stale = [p for p in (ROOT / "crates").rglob("*.rs") if p.stat().st_mtime > built]
        if stale:
            print(f"warning: {len(stale)} Rust source file(s) changed after {args.hearth} was built "
                  f"(e.g. {stale[0].relative_to(ROOT)}); `make bench` rebuilds it first", file=sys.stderr)

    started = datetime.datetime.now().astimezone()
    load_before = loadavg()
    clock = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="hearth-bench-jobs-"))
    redis = None
    try:
        redis = Redis(tmp)
        info = machine(args, redis.version)
        print("Jobs benchmark: Hearth, Symfony Messenger and Laravel queues on one Redis")
        for k, v in info.items():
            print(f"  {k}: {v}")
        print(f"  load average: {load_before}")
        if float(load_before.split()[0] if load_before != "unknown" else 0) > 0.5:
            print("warning: the machine is busy (1-minute load average above 0.5); results will be noisy",
                  file=sys.stderr)
        runs, latency = measure(Bench(args, tmp, redis))
    except WrongResult as e:
        print(f"\nWRONG RESULT, nothing written:\n  {e}", file=sys.stderr)
        return 1
    except BenchError as e:
        print(f"\nbench/jobs.py: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted (SIGINT); processes stopped, nothing written", file=sys.stderr)
        return 130
    except Interrupted as e:
        print(f"\ninterrupted ({e}); processes stopped, nothing written", file=sys.stderr)
        return 128 + e.signum
    finally:
        if redis:
            redis.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    written, latest = write_report(runs, latency, args, info, started, load_before)
    text = latest.read_text()
    print("\n" + text[text.index("Jobs per second"):text.index("## Every run")].rstrip())
    print(f"\nmeasured in {time.monotonic() - clock:.0f}s; wrote {written}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
