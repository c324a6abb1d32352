#!/usr/bin/env python3
"""`hearth run` against GNU parallel and `xargs -P`, on parallel's command lines.

The same tasks, from the same standard input, run through three runners:

    hearth    target/release/hearth run ...      (or --hearth PATH)
    parallel  parallel --will-cite ...           (Debian's GNU parallel)
    xargs     xargs -P N -n 1 ...                (GNU findutils)

in four cases:

    spawn-jN  5,000 `true` (`seq 5000 | hearth run -jN true`), at -j 2 and -j 8
    output    200 tasks each writing 100 KB to stdout, which the runner prints
    template  1,000 paths through `echo "{.}" "{/}"` in the shell
    pipe      `--pipe --block 10M wc -l` over 200 MB (xargs has no equivalent)

Each run is one whole process, timed from start to exit; its peak RSS is
GNU time's %M. Rounds are interleaved (every case and runner in each round,
the runner order turned each round); medians are reported. Every timed
run's output is checked: a wrong output stops the benchmark.

    python3 bench/parallel.py            # 3 rounds (7 minutes on a busy 2-CPU machine)
    python3 bench/parallel.py --quick    # 1 round, a tenth of the sizes

Writes bench/results/parallel-<date>.md and parallel-latest.md (--quick:
parallel-quick-latest.md). Exits 0 when every output was right, 1 when one
was wrong (nothing is written then), 2 when the setup is broken (a runner is
missing, a run timed out), 130 on Ctrl-C, 143 on SIGTERM. See bench/README.md.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import selectors
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from machine_info import cpu_model, first_line, git_revision, loadavg

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
RESULTS = BENCH / "results"
GNU_TIME = Path("/usr/bin/time")
RUNNERS = ("hearth", "parallel", "xargs")

TARGET_VS_XARGS = 1.05     # hearth time / xargs time, at most
TARGET_VS_PARALLEL = 0.2   # hearth time / parallel time, at most (5x faster)
TARGET_RSS_MB = 32.0       # hearth's peak RSS (MiB), below

SIZES = {  # full run, --quick
    "spawn": (5000, 500),
    "output": (200, 20),
    "template": (1000, 100),
    "pipe_mb": (200, 20),
}
OUTPUT_BYTES = 100_000
PIPE_LINE = 100  # bytes per line of the --pipe input


class BenchError(Exception):
    """The benchmark could not run: a runner is missing, a run timed out."""


class WrongResult(Exception):
    """A runner failed or printed a wrong output: nothing is reported."""


class Interrupted(Exception):
    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def on_signal(signum, frame):
    raise Interrupted(signum)


@dataclass
class Case:
    key: str
    title: str
    jobs: int
    stdin: Path
    argv: dict[str, list[str] | None]        # None: the runner has no equivalent
    expect: Callable[[bytes], str | None]    # what is wrong with an output, or None
    # An untimed run first, whose output shows every task ran (for tasks that print nothing).
    check_argv: dict[str, list[str] | None] = field(default_factory=dict)
    check_expect: Callable[[bytes], str | None] | None = None
    unsupported: dict[str, str] = field(default_factory=dict)  # runner: why not measured


# ----------------------------------------------------------------- cases


def lines_expected(expected: list[str]) -> Callable[[bytes], str | None]:
    want = sorted(expected)

    def check(out: bytes) -> str | None:
        got = sorted(out.decode(errors="replace").splitlines())
        if got == want:
            return None
        missing = sorted(set(want) - set(got))[:3]
        return f"{len(got)} lines, {len(want)} expected; e.g. missing {missing}"
    return check


def zeros_expected(n: int) -> Callable[[bytes], str | None]:
    def check(out: bytes) -> str | None:
        if len(out) != n:
            return f"{len(out)} bytes, {n} expected"
        return "bytes other than NUL" if out.strip(b"\0") else None
    return check


def counts_expected(total: int) -> Callable[[bytes], str | None]:
    def check(out: bytes) -> str | None:
        try:
            counts = [int(w) for w in out.split()]
        except ValueError:
            return f"not line counts: {out[:200]!r}"
        return None if sum(counts) == total else f"{sum(counts)} lines counted in {len(counts)} blocks, {total} expected"
    return check


def make_cases(args: argparse.Namespace, tmp: Path) -> list[Case]:
    """The cases --cases asks for, with their inputs written in tmp."""
    h = [str(args.hearth), "run"]
    par = [args.parallel, "--will-cite"]
    n_spawn, n_out, n_tmpl, pipe_mb = (SIZES[k][1 if args.quick else 0]
                                       for k in ("spawn", "output", "template", "pipe_mb"))
    j = str(len(os.sched_getaffinity(0)))  # cases other than spawn run one task per CPU

    def wanted(key: str) -> bool:
        return key in args.case_list or key.split("-")[0] in args.case_list

    def numbers(name: str, n: int) -> Path:
        path = tmp / name
        path.write_text("".join(f"{k}\n" for k in range(1, n + 1)))
        return path

    cases = []
    for jobs in ("2", "8"):
        if not wanted(f"spawn-j{jobs}"):
            continue

        def spawn(prog: str) -> dict[str, list[str]]:
            return {"hearth": [*h, "-j", jobs, prog], "parallel": [*par, "-j", jobs, prog],
                    "xargs": ["xargs", "-P", jobs, "-n", "1", prog]}
        cases.append(Case(
            f"spawn-j{jobs}", f"{n_spawn:,} `true`", int(jobs), numbers("spawn.txt", n_spawn),
            spawn("true"), lines_expected([]),
            spawn("echo"), lines_expected([str(k) for k in range(1, n_spawn + 1)])))

    if wanted("output"):
        head = f"head -c {OUTPUT_BYTES} /dev/zero"
        cases.append(Case(
            "output", f"{n_out} tasks writing {OUTPUT_BYTES // 1000} KB each", int(j), numbers("output.txt", n_out),
            {"hearth": [*h, "-j", j, f"{head}; :"], "parallel": [*par, "-j", j, f"{head}; :"],
             "xargs": ["xargs", "-P", j, "-n", "1", "sh", "-c", f'{head}; : "$1"', "sh"]},
            zeros_expected(n_out * OUTPUT_BYTES)))

    if wanted("template"):
        paths = [f"srv/logs/d{k % 10}/access-{k}.log" for k in range(1, n_tmpl + 1)]
        listing = tmp / "paths.txt"
        listing.write_text("".join(p + "\n" for p in paths))
        template = 'echo "{.}" "{/}"'
        cases.append(Case(
            "template", f"{n_tmpl:,} paths through `{template}`", int(j), listing,
            {"hearth": [*h, "-j", j, template], "parallel": [*par, "-j", j, template],
             "xargs": ["xargs", "-P", j, "-n", "1", "sh", "-c", 'f=$1; echo "${f%.*}" "${f##*/}"', "sh"]},
            lines_expected([f"{p.rsplit('.', 1)[0]} {p.rsplit('/', 1)[1]}" for p in paths])))

    if wanted("pipe"):
        lines = pipe_mb * 1_000_000 // PIPE_LINE
        big = tmp / "pipe.txt"
        with big.open("wb") as f:
            for first in range(0, lines, 100_000):
                f.write(b"".join(b"%0*d\n" % (PIPE_LINE - 1, k) for k in range(first, min(first + 100_000, lines))))
        pipe = ["--pipe", "--block", "10M", "wc", "-l"]
        case = Case(
            "pipe", f"`--pipe --block 10M wc -l` over {pipe_mb} MB", int(j), big,
            {"hearth": [*h, "-j", j, *pipe], "parallel": [*par, "-j", j, *pipe], "xargs": None},
            counts_expected(lines))
        refused = pipe_refused(args)
        if refused:
            case.argv["hearth"] = None
            case.unsupported["hearth"] = refused
        cases.append(case)
    return cases


def pipe_refused(args: argparse.Namespace) -> str | None:
    """Why `hearth run --pipe` cannot be measured, or None when it runs."""
    out = subprocess.run([str(args.hearth), "run", "--pipe", "true"], stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, timeout=30, env=args.env)
    if out.returncode == 0:
        return None
    said = (out.stderr.strip().splitlines() or [""])[0][:200]
    return f"`hearth run --pipe true </dev/null` exits {out.returncode}: {said}"


# ----------------------------------------------------------------- running


@dataclass
class Run:
    seconds: float
    rss_kb: int
    out: bytes


def run_once(argv: list[str], stdin: Path, env: dict[str, str], timeout: float, tmp: Path) -> Run:
    """Runs a runner as one process in its own process group, killed on every path.

    Its peak RSS is GNU time's %M: ru_maxrss from wait4(), the largest peak
    of the runner and of the tasks it waited for (a few MB each here). Without
    GNU time, it is os.wait4's ru_maxrss, which exec inherits from the forking
    process: an upper bound that includes this script's own RSS.
    """
    rss_file = tmp / "rss"
    full = [str(GNU_TIME), "-f", "%M", "-o", str(rss_file), *argv] if GNU_TIME.exists() else argv
    with stdin.open("rb") as f:
        start = time.monotonic()
        proc = subprocess.Popen(full, stdin=f, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=env, start_new_session=True)
    status = None
    try:
        out, err = read_all(proc, timeout)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.monotonic() - start
    except subprocess.TimeoutExpired:
        raise BenchError(f"timed out after {timeout:.0f}s: {' '.join(argv)}")
    finally:
        kill_group(proc, reaped=status is not None)
    rc = os.waitstatus_to_exitcode(status)
    if rc != 0 or err.strip():
        raise WrongResult(f"`{' '.join(argv)}` exited {rc}: {err.decode(errors='replace').strip()[:500]}")
    rss = int(rss_file.read_text().split()[-1]) if GNU_TIME.exists() else usage.ru_maxrss
    return Run(seconds, rss, out)


def read_all(proc: subprocess.Popen, timeout: float) -> tuple[bytes, bytes]:
    """stdout and stderr to their end, without reaping the process (wait4 does)."""
    chunks = {proc.stdout: [], proc.stderr: []}
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        for stream in chunks:
            sel.register(stream, selectors.EVENT_READ)
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(proc.args, timeout)
            for key, _ in sel.select(left):
                data = os.read(key.fd, 1 << 20)
                if data:
                    chunks[key.fileobj].append(data)
                else:
                    sel.unregister(key.fileobj)
                    key.fileobj.close()
    return b"".join(chunks[proc.stdout]), b"".join(chunks[proc.stderr])


def kill_group(proc: subprocess.Popen, reaped: bool) -> None:
    """Kills what is left of the run's process group (stragglers, or all of it on an error)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if not reaped:
        os.waitpid(proc.pid, 0)
    proc.returncode = -1  # reaped here: Popen must not wait for it again


def check_runs(cases: list[Case], args: argparse.Namespace, tmp: Path) -> None:
    for case in cases:
        for runner, argv in case.check_argv.items():
            if argv and case.argv.get(runner):
                problem = case.check_expect(run_once(argv, case.stdin, args.env, args.timeout, tmp).out)
                if problem:
                    raise WrongResult(f"{case.key}, {runner} (`{' '.join(argv)}`): {problem}")
                print(f"  {case.key:<9} {runner:<8} `{' '.join(argv[1:] if runner == 'hearth' else argv)}`: "
                      "output ok", flush=True)


def measure(cases: list[Case], args: argparse.Namespace, tmp: Path) -> list[dict]:
    rows = []
    for rnd in range(1, args.rounds + 1):
        shift = (rnd - 1) % len(RUNNERS)
        order = RUNNERS[shift:] + RUNNERS[:shift]
        print(f"\n== round {rnd}/{args.rounds}: {', '.join(order)}", flush=True)
        for case in cases:
            for runner in order:
                argv = case.argv.get(runner)
                if not argv:
                    continue
                run = run_once(argv, case.stdin, args.env, args.timeout, tmp)
                problem = case.expect(run.out)
                if problem:
                    raise WrongResult(f"{case.key}, {runner} (`{' '.join(argv)}`): {problem}")
                rows.append({"round": rnd, "case": case.key, "runner": runner,
                             "seconds": run.seconds, "rss_kb": run.rss_kb})
                print(f"  {case.key:<9} {runner:<8} {run.seconds:8.3f}s  {run.rss_kb / 1024:6.1f} MiB  "
                      f"(output ok)", flush=True)
    return rows


# ----------------------------------------------------------------- report


def summarize(cases: list[Case], rows: list[dict]) -> dict:
    """{case: {runner: (median seconds, median RSS MiB, max RSS MiB)}}"""
    med = {}
    for case in cases:
        for runner in RUNNERS:
            got = [r for r in rows if r["case"] == case.key and r["runner"] == runner]
            if got:
                rss = [r["rss_kb"] / 1024 for r in got]
                med.setdefault(case.key, {})[runner] = (statistics.median(r["seconds"] for r in got),
                                                        statistics.median(rss), max(rss))
    return med


def ratio(med: dict, case: str, other: str) -> float | None:
    by = med.get(case, {})
    return by["hearth"][0] / by[other][0] if "hearth" in by and other in by else None


def cell(case: Case, med: dict, runner: str, index: int, fmt: str) -> str:
    if runner in med.get(case.key, {}):
        return fmt.format(med[case.key][runner][index])
    return "not supported" if runner in case.unsupported else "—"


def results_table(cases: list[Case], med: dict) -> str:
    lines = ["| case | -j | hearth (s) | parallel (s) | xargs (s) | hearth / xargs | hearth / parallel "
             "| xargs / parallel | hearth RSS (MiB) | parallel RSS (MiB) | xargs RSS (MiB) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for case in cases:
        rx, rp = ratio(med, case.key, "xargs"), ratio(med, case.key, "parallel")
        by = med.get(case.key, {})
        xp = by["xargs"][0] / by["parallel"][0] if "xargs" in by and "parallel" in by else None
        lines.append("| " + " | ".join([
            f"{case.key}: {case.title}", str(case.jobs),
            *(cell(case, med, r, 0, "{:.3f}") for r in RUNNERS),
            f"{rx:.2f}×" if rx else "—", f"{rp:.3f}×" if rp else "—", f"{xp:.3f}×" if xp else "—",
            *(cell(case, med, r, 1, "{:.1f}") for r in RUNNERS)]) + " |")
    return "\n".join(lines)


def targets_table(cases: list[Case], med: dict) -> tuple[str, bool]:
    lines = [f"| case | within {TARGET_VS_XARGS}× of xargs | ≥ 5× faster than parallel "
             f"(hearth ≤ {TARGET_VS_PARALLEL}× its time) | peak RSS < {TARGET_RSS_MB:.0f} MiB (largest round) |",
             "|---|---|---|---|"]
    all_met = True

    def verdict(value: float | None, met: bool, fmt: str) -> str:
        nonlocal all_met
        if value is None:
            return "—"
        all_met &= met
        return f"{'yes' if met else '**no**'} ({fmt.format(value)})"

    for case in cases:
        if "hearth" not in med.get(case.key, {}):
            lines.append(f"| {case.key} | hearth not supported | | |")
            continue
        rx, rp = ratio(med, case.key, "xargs"), ratio(med, case.key, "parallel")
        rss = med[case.key]["hearth"][2]
        lines.append(f"| {case.key} | {verdict(rx, rx is not None and rx <= TARGET_VS_XARGS, '{:.2f}×')} "
                     f"| {verdict(rp, rp is not None and rp <= TARGET_VS_PARALLEL, '{:.3f}×')} "
                     f"| {verdict(rss, rss < TARGET_RSS_MB, '{:.1f} MiB')} |")
    return "\n".join(lines), all_met


def machine(args: argparse.Namespace) -> dict[str, str]:
    built = datetime.datetime.fromtimestamp(args.hearth.stat().st_mtime).astimezone()
    return {
        "CPUs (nproc)": str(len(os.sched_getaffinity(0))),
        "CPU model": cpu_model(),
        "Kernel": f"{platform.system()} {platform.release()}",
        "Hearth": (f"{first_line([str(args.hearth), '--version'])} ({args.hearth}, built "
                   f"{built:%Y-%m-%d %H:%M %Z}; source tree at git {git_revision()})"),
        "GNU parallel": first_line([args.parallel, "--will-cite", "--version"]),
        "xargs": first_line(["xargs", "--version"]),
        "Peak RSS": ("GNU time's %M (wait4's ru_maxrss: the runner's peak, or a task's if larger)"
                     if GNU_TIME.exists() else "os.wait4's ru_maxrss without GNU time: an upper bound "
                     "that includes this script's RSS at the fork (install `time`)"),
    }


def report(cases: list[Case], rows: list[dict], args: argparse.Namespace, info: dict[str, str],
           started: datetime.datetime, load_before: str) -> str:
    med = summarize(cases, rows)
    targets, all_met = targets_table(cases, med)
    command = f"python3 bench/parallel.py {' '.join(args.argv)}".rstrip()
    unsupported = [f"- {c.key}: hearth not measured: {why}" for c in cases for why in c.unsupported.values()]
    text = "\n".join([
        "# `hearth run` against GNU parallel and `xargs -P`",
        "",
        f"Run {started:%Y-%m-%d %H:%M:%S %Z} with `{command}`.",
        "",
        *(f"- {k}: {v}" for k, v in info.items()),
        f"- Parameters: {args.rounds} round(s), interleaved (the runner order turned each round); "
        "medians over rounds; PARALLEL_SHELL=/bin/sh (parallel runs every task through it, "
        "hearth run the commands with shell syntax)",
        f"- Load average (1/5/15 min) before: {load_before}, after: {loadavg()}",
        "",
        "Whole-process wall time and peak RSS of each runner, medians over rounds (lower is better). "
        "Every run exited 0 with nothing on stderr, and its output was checked.",
        "",
        results_table(cases, med),
        "",
        *unsupported,
        *([""] if unsupported else []),
        "## Targets",
        "",
        targets,
        "",
        f"All targets met: {'yes' if all_met else '**no**'}.",
        "",
        "## Every round",
        "",
        "| round | case | runner | seconds | peak RSS (MiB) |",
        "|---:|---|---|---:|---:|",
        *(f"| {r['round']} | {r['case']} | {r['runner']} | {r['seconds']:.3f} | {r['rss_kb'] / 1024:.1f} |"
          for r in rows),
        "",
    ])
    return text


# -------------------------------------------------------------------- main


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, help="interleaved rounds (default: 3; --quick: 1)")
    p.add_argument("--cases", default="spawn,output,template,pipe",
                   help="comma-separated: spawn (both -j), spawn-j2, spawn-j8, output, template, pipe "
                        "(default: %(default)s)")
    p.add_argument("--hearth", type=Path, default=Path(os.environ.get("HEARTH_BIN") or ROOT / "target/release/hearth"),
                   help="hearth binary (default: $HEARTH_BIN or target/release/hearth)")
    p.add_argument("--parallel", default="parallel", help="GNU parallel (default: %(default)s)")
    p.add_argument("--timeout", type=float, default=300, help="seconds allowed per run (default: %(default)s)")
    p.add_argument("--quick", action="store_true", help="smoke test: 1 round, a tenth of every size")
    args = p.parse_args(argv)
    args.argv = argv
    args.rounds = args.rounds or (1 if args.quick else 3)
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    args.case_list = [c.strip() for c in args.cases.split(",") if c.strip()]
    known = {"spawn", "spawn-j2", "spawn-j8", "output", "template", "pipe"}
    if not args.case_list or set(args.case_list) - known:
        p.error(f"--cases: unknown {', '.join(sorted(set(args.case_list) - known)) or '(none given)'}")
    args.hearth = args.hearth.resolve()
    # Hearth runs with the defaults a user gets; the tasks run through /bin/sh under all three.
    args.env = {k: v for k, v in os.environ.items() if not k.startswith(("HEARTH_", "RUST_LOG", "PARALLEL"))}
    args.env["PARALLEL_SHELL"] = "/bin/sh"
    return args


def setup_problem(args: argparse.Namespace) -> str | None:
    if not os.access(args.hearth, os.X_OK):
        return f"{args.hearth} is not an executable (build it with `cargo build --release -p hearth`)"
    for tool in (args.parallel, "xargs"):
        if not shutil.which(tool):
            return f"{tool} is not installed (Debian: apt-get install parallel findutils)"
    out = subprocess.run([str(args.hearth), "run", "echo", ":::", "a"], capture_output=True, text=True,
                         timeout=30, env=args.env)
    if out.returncode != 0 or out.stdout != "a\n":
        return f"`hearth run echo ::: a` did not print a (exit {out.returncode}): {out.stderr.strip()[:300]}"
    return None


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    problem = setup_problem(args)
    if problem:
        print(f"bench/parallel.py: {problem}", file=sys.stderr)
        return 2
    if not GNU_TIME.exists():
        print("warning: /usr/bin/time is missing (apt-get install time): peak RSS is an upper bound",
              file=sys.stderr)
    started = datetime.datetime.now().astimezone()
    load_before = loadavg()
    info = machine(args)
    print("hearth run against GNU parallel and xargs -P")
    for k, v in info.items():
        print(f"  {k}: {v}")
    print(f"  load average: {load_before}")
    if float(load_before.split()[0] if load_before != "unknown" else 0) > 0.5:
        print("warning: the machine is busy (1-minute load average above 0.5); results will be noisy",
              file=sys.stderr)
    clock = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="hearth-bench-parallel-") as tmp:
            cases = make_cases(args, Path(tmp))
            for case in cases:
                for runner, why in case.unsupported.items():
                    print(f"note: {case.key}: {runner} not measured: {why}", file=sys.stderr)
            print("\n== checking every runner's output")
            check_runs(cases, args, Path(tmp))
            rows = measure(cases, args, Path(tmp))
    except WrongResult as e:
        print(f"\nWRONG RESULT, nothing written:\n  {e}", file=sys.stderr)
        return 1
    except BenchError as e:
        print(f"\nbench/parallel.py: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted (SIGINT); processes stopped, nothing written", file=sys.stderr)
        return 130
    except Interrupted as e:
        print(f"\ninterrupted ({e}); processes stopped, nothing written", file=sys.stderr)
        return 128 + e.signum

    text = report(cases, rows, args, info, started, load_before)
    RESULTS.mkdir(parents=True, exist_ok=True)
    prefix = "parallel-quick" if args.quick else "parallel"
    names = [f"{prefix}-latest"] + ([] if args.quick else [f"{prefix}-{started:%Y-%m-%d-%H%M%S}"])
    for name in names:
        (RESULTS / f"{name}.md").write_text(text)
    print("\n" + text[text.index("Whole-process"):text.index("## Every round")].rstrip())
    print(f"\nmeasured in {time.monotonic() - clock:.0f}s; wrote "
          + ", ".join(f"bench/results/{n}.md" for n in names))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
