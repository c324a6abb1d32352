#!/usr/bin/env python3
"""Task-runner benchmark: the TaskRunner.php seed's benchmark, plus Hearth.

A PHP process pads its heap to 0, 10, 50, 100 and 500 MB, then runs the same
N shell tasks through five methods (bench/tasks/padded.php):

    (a) exec-loop      shell_exec() per task, one after the other
    (b) proc-pool      a proc_open() pool inside the padded process (the seed's ProcessPool)
    (c) separate-pool  that pool in a small child PHP process (the seed's TaskRunner)
    (d) hearth         Hearth\\TaskRunner, i.e. `hearth run`
    (e) xargs          `xargs -P` started from the padded process, `sh -c` per task

for two tests: `spawn` (task i is `echo i`; the seed's -s0, pool 8) and
`sleep` (`sleep 0.001` ... `sleep 0.01` then `echo i`; the seed's -p16). Then
N PHP jobs in warm workers (Hearth\\TaskRunner::map) against one `php -r` per
job (bench/tasks/php-jobs.php). Rounds are interleaved; medians are reported.

    python3 bench/tasks.py                 # the full benchmark (about 8 minutes on 2 CPUs)
    python3 bench/tasks.py --quick         # a smoke test: N=100, 0 and 50 MB, 1 round

Writes bench/results/tasks-<date>.{md,json}, tasks-latest.{md,json} and
tasks.png (--quick: tasks-quick-latest.* and tasks-quick.png). Exits 0 when
every result was right, 1 when one was wrong (the run stops there), 2 when
the setup is broken, 130 on Ctrl-C. See bench/README.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from machine_info import cpu_model, first_line, git_revision, loadavg

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
TASKS = BENCH / "tasks"
RESULTS = BENCH / "results"
AUTOLOAD = ROOT / "php" / "autoload.php"
TASK_RUNNER_PHP = ROOT / "php" / "src" / "TaskRunner.php"


@dataclass(frozen=True)
class Method:
    key: str
    letter: str
    label: str


METHODS = {m.key: m for m in (
    Method("exec-loop", "a", "shell_exec loop"),
    Method("proc-pool", "b", "proc_open pool (in process)"),
    Method("separate-pool", "c", "separate-process pool"),
    Method("hearth", "d", "Hearth\\TaskRunner"),
    Method("xargs", "e", "xargs -P"),
)}
TESTS = {
    "spawn": "Raw spawn speed: `echo $i` (seed's -s0)",
    "sleep": "Concurrency: `sleep 0.00X && echo $i`, X = i % 10 + 1 (seed's default workload)",
}
JOB_METHODS = {"warm": "Hearth warm workers (TaskRunner::map)", "cold": "`php -r` per job (xargs -P)"}

# Like bench/http.py: Hearth runs with the defaults a user gets.
HEARTH_ENV_PREFIXES = ("HEARTH_", "RUST_LOG")

TARGET_FLAT = 1.10       # Hearth's max/min TPS across sizes
TARGET_VS_POOLS = 1.5    # Hearth / best of (b), (c), at every size
TARGET_WARM = 50.0       # warm jobs/s / php -r jobs/s


class BenchError(Exception):
    """The benchmark could not run: a tool is missing, a process hung."""


class WrongResult(Exception):
    """A method returned a wrong sum or a failed task: nothing is reported."""


class Interrupted(Exception):
    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def on_signal(signum, frame):
    raise Interrupted(signum)


# ----------------------------------------------------------------- running


def run_php(argv: list[str], env: dict[str, str], timeout: float) -> list[dict]:
    """Runs a PHP measurement script in its own process group; its JSON lines.

    On a timeout, an exception or a signal, the whole group is killed, so no
    task, pool child, xargs or hearth process outlives the benchmark.
    """
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=ROOT, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        raise BenchError(f"timed out after {timeout:.0f}s: {' '.join(argv)}")
    except BaseException:
        kill_group(proc)
        raise
    finally:
        kill_group(proc)  # stragglers of a finished run, if any
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    if proc.returncode == 1 and any(not m.get("ok", True) for m in lines):
        raise WrongResult(err.strip() or json.dumps(lines[-1]))
    if proc.returncode != 0:
        raise BenchError(f"exit {proc.returncode}: {' '.join(argv)}\n{err.strip()}\n{out.strip()[-2000:]}")
    if err.strip():
        print(f"  stderr: {err.strip()}", file=sys.stderr)
    return lines


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if proc.returncode is None:
        proc.wait()


def hearth_problem(binary: Path, env: dict[str, str]) -> str | None:
    """Why (d) and the PHP jobs cannot run yet, or None when they can."""
    if not os.access(binary, os.X_OK):
        return f"{binary} is not an executable (build it with `cargo build --release -p hearth`)"
    if not TASK_RUNNER_PHP.is_file():
        return f"{TASK_RUNNER_PHP.relative_to(ROOT)} does not exist"
    try:
        out = subprocess.run([str(binary), "run"], input='{"cmd":"echo 1"}\n', capture_output=True,
                             text=True, timeout=20, env=env)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"`hearth run` failed: {e}"
    try:
        result = json.loads(out.stdout.splitlines()[0])
        if result.get("stdout") == "1\n" and result.get("status") == 0:
            return None
    except (IndexError, ValueError, AttributeError):
        pass
    return f"`echo '{{\"cmd\":\"echo 1\"}}' | {binary} run` did not print a result line " \
           f"(exit {out.returncode}): {(out.stdout + out.stderr).strip()[:300]}"


def measure(args: argparse.Namespace, env: dict[str, str]) -> tuple[list[dict], list[dict]]:
    """All rounds, interleaved; returns (measurements, paddings)."""
    measurements: list[dict] = []
    paddings: list[dict] = []
    methods = args.method_list
    for rnd in range(1, args.rounds + 1):
        # Rotate the method order and alternate the size order between
        # rounds, so that no method or size always runs first or last.
        shift = (rnd - 1) % len(methods)
        order = methods[shift:] + methods[:shift]
        sizes = args.size_list if rnd % 2 else list(reversed(args.size_list))
        print(f"\n== round {rnd}/{args.rounds}: methods {', '.join(order)}")
        for mb in sizes:
            argv = ["php", str(TASKS / "padded.php"), "--mb", str(mb), "-n", str(args.n),
                    "--methods", ",".join(order), "--tests", "spawn,sleep",
                    "--spawn-pool", str(args.spawn_pool), "--sleep-pool", str(args.sleep_pool),
                    "--hearth", str(args.hearth), "--autoload", str(AUTOLOAD)]
            for line in run_php(argv, env, args.timeout):
                line["round"] = rnd
                if line["event"] == "padded":
                    paddings.append(line)
                    print(f"  {mb:>4} MB  padded: {line['rows']} rows in {line['seconds']:.2f}s, "
                          f"RSS {line['rss_mb']:.0f} MB", flush=True)
                else:
                    measurements.append(line)
                    print(f"  {mb:>4} MB  {line['test']:<6} ({METHODS[line['method']].letter}) "
                          f"{line['method']:<14} {line['tps']:>9.1f} tasks/s  "
                          f"({line['seconds']:.3f}s, sum ok)", flush=True)
        if args.php_jobs:
            jobs = ["warm", "cold"] if rnd % 2 else ["cold", "warm"]
            for method in jobs:
                argv = ["php", str(TASKS / "php-jobs.php"), "--method", method, "-n", str(args.php_jobs),
                        "-c", str(args.php_concurrency), "--hearth", str(args.hearth),
                        "--autoload", str(AUTOLOAD)]
                for line in run_php(argv, env, args.timeout):
                    line["round"] = rnd
                    line["mb"] = None
                    measurements.append(line)
                    print(f"  php jobs {method:<5} {line['tps']:>9.1f} jobs/s  ({line['seconds']:.3f}s, "
                          f"{line['n']} results ok)", flush=True)
    return measurements, paddings


# ----------------------------------------------------------------- numbers


def medians(measurements: list[dict]) -> dict:
    """{test: {method: {mb: median TPS}}}; the PHP jobs under mb None."""
    groups: dict = {}
    for m in measurements:
        groups.setdefault(m["test"], {}).setdefault(m["method"], {}).setdefault(m["mb"], []).append(m["tps"])
    return {t: {k: {mb: statistics.median(v) for mb, v in by_mb.items()} for k, by_mb in by_method.items()}
            for t, by_method in groups.items()}


def hearth_vs_pools(med: dict, test: str, mb: int) -> float | None:
    by = med.get(test, {})
    pools = [by[k][mb] for k in ("proc-pool", "separate-pool") if mb in by.get(k, {})]
    if "hearth" not in by or mb not in by["hearth"] or not pools:
        return None
    return by["hearth"][mb] / max(pools)


def flatness(values: dict) -> float:
    return max(values.values()) / min(values.values())


def targets(med: dict, args: argparse.Namespace) -> list[tuple[str, bool, str]]:
    """(target, met, what was measured) for each target that this run measured."""
    rows = []
    for test in TESTS:
        hearth = med.get(test, {}).get("hearth")
        if not hearth:
            continue
        if len(hearth) > 1:
            flat = flatness(hearth)
            rows.append((f"{test}: Hearth flat within 10% across sizes (max/min ≤ {TARGET_FLAT:.2f})",
                         flat <= TARGET_FLAT, f"max/min = {flat:.2f} ({min(hearth.values()):.0f} to "
                                              f"{max(hearth.values()):.0f} tasks/s)"))
        ratios = {mb: hearth_vs_pools(med, test, mb) for mb in args.size_list}
        ratios = {mb: r for mb, r in ratios.items() if r is not None}
        if ratios:
            worst = min(ratios, key=ratios.get)
            rows.append((f"{test}: Hearth ≥ {TARGET_VS_POOLS}× best of (b), (c) at every size",
                         ratios[worst] >= TARGET_VS_POOLS,
                         ", ".join(f"{mb} MB {r:.2f}×" for mb, r in ratios.items())
                         + f"; lowest {ratios[worst]:.2f}× at {worst} MB"))
    jobs = med.get("php-jobs", {})
    if "warm" in jobs and "cold" in jobs:
        ratio = jobs["warm"][None] / jobs["cold"][None]
        rows.append((f"PHP jobs: warm workers ≥ {TARGET_WARM:.0f}× `php -r` per job", ratio >= TARGET_WARM,
                     f"{ratio:.1f}×"))
    return rows


# ----------------------------------------------------------------- report


def method_header(m: Method) -> str:
    return f"({m.letter}) {m.label}"


def tps_table(med: dict, args: argparse.Namespace, test: str) -> str:
    by = med.get(test, {})
    methods = [METHODS[k] for k in args.method_list]
    ratio = "hearth" in by and ("proc-pool" in by or "separate-pool" in by)
    head = ["heap (MB)", *(method_header(m) for m in methods)] + (["Hearth / best of (b), (c)"] if ratio else [])
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    for mb in args.size_list:
        cells = [str(mb), *(f"{by[m.key][mb]:.0f}" for m in methods)]
        if ratio:
            r = hearth_vs_pools(med, test, mb)
            cells.append(f"**{r:.2f}×**" if r is not None else "n/a")
        lines.append("| " + " | ".join(cells) + " |")
    if len(args.size_list) > 1:
        cells = ["max/min across sizes", *(f"{flatness(by[m.key]):.2f}" for m in methods)]
        lines.append("| " + " | ".join(cells + ([""] if ratio else [])) + " |")
    return "\n".join(lines)


def jobs_table(med: dict, args: argparse.Namespace) -> str:
    jobs = med.get("php-jobs", {})
    lines = ["| method | jobs/s |", "|---|---:|"]
    for key, label in JOB_METHODS.items():
        if key in jobs:
            lines.append(f"| {label} | {jobs[key][None]:.0f} |")
    if "warm" in jobs and "cold" in jobs:
        lines.append(f"| **warm / php -r** | **{jobs['warm'][None] / jobs['cold'][None]:.1f}×** |")
    return "\n".join(lines)


def targets_table(rows: list[tuple[str, bool, str]]) -> str:
    lines = ["| target | met | measured |", "|---|:---:|---|"]
    lines += [f"| {name} | {'yes' if met else '**no**'} | {got} |" for name, met, got in rows]
    return "\n".join(lines)


def rounds_table(measurements: list[dict], paddings: list[dict]) -> str:
    lines = ["| round | heap (MB) | test | method | tasks/s | seconds | concurrency | RSS after (MB) |",
             "|---:|---:|---|---|---:|---:|---:|---:|"]
    for m in measurements:
        label = f"({METHODS[m['method']].letter}) {m['method']}" if m["method"] in METHODS else m["method"]
        lines.append(f"| {m['round']} | {'' if m['mb'] is None else m['mb']} | {m['test']} | {label} "
                     f"| {m['tps']:.1f} | {m['seconds']:.3f} | {m['concurrency']} | {m.get('rss_mb', '')} |")
    lines += ["", "| round | heap (MB) | padding rows | seconds to pad | RSS (MB) |", "|---:|---:|---:|---:|---:|"]
    lines += [f"| {p['round']} | {p['mb']} | {p['rows']} | {p['seconds']:.2f} | {p['rss_mb']} |" for p in paddings]
    return "\n".join(lines)


def machine(args: argparse.Namespace) -> dict[str, str]:
    info = {
        "CPUs (nproc)": str(len(os.sched_getaffinity(0))),
        "CPU model": cpu_model(),
        "Kernel": f"{platform.system()} {platform.release()}",
        "PHP": first_line(["php", "-v"]),
        "xargs": first_line(["xargs", "--version"]),
    }
    if args.hearth_used:
        built = datetime.datetime.fromtimestamp(args.hearth.stat().st_mtime).astimezone()
        info["Hearth"] = (f"{first_line([str(args.hearth), '--version'])} ({args.hearth}, built "
                          f"{built:%Y-%m-%d %H:%M %Z}; source tree at git {git_revision()})")
    return info


def write_chart(med: dict, args: argparse.Namespace, path: Path, subtitle: str) -> str | None:
    """TPS against heap size, one line per method, one panel per test; None if drawn."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (`pip install matplotlib`): no chart drawn, the tables are written"
    tests = [t for t in TESTS if t in med]
    fig, axes = plt.subplots(1, len(tests), figsize=(6.5 * len(tests), 4.8), squeeze=False)
    for ax, test in zip(axes[0], tests):
        for key in args.method_list:
            values = med[test].get(key, {})
            xs = [mb for mb in args.size_list if mb in values]
            ax.plot(xs, [values[mb] for mb in xs], marker="o", label=method_header(METHODS[key]),
                    linewidth=2.5 if key == "hearth" else 1.5)
        pool = args.spawn_pool if test == "spawn" else args.sleep_pool
        ax.set_title(f"{test}: {'echo $i' if test == 'spawn' else 'sleep 1-10 ms && echo $i'}, "
                     f"N={args.n}, pool {pool}", fontsize=10)
        ax.set_xscale("symlog", linthresh=10)
        ax.set_xticks(args.size_list)
        ax.set_xticklabels([str(s) for s in args.size_list])
        ax.set_xlabel("PHP heap of the calling process (MB)")
        ax.set_ylabel("tasks per second (median)")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"Task runners under a padded PHP process: {subtitle}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def write_report(measurements: list[dict], paddings: list[dict], args: argparse.Namespace,
                 info: dict[str, str], started: datetime.datetime, load_before: str) -> tuple[str, Path]:
    med = medians(measurements)
    goals = targets(med, args)
    command = f"python3 bench/tasks.py {' '.join(args.argv)}".rstrip()
    params = (f"N = {args.n} tasks per test; heap sizes {', '.join(map(str, args.size_list))} MB; "
              f"pool {args.spawn_pool} (spawn) and {args.sleep_pool} (sleep); {args.rounds} round(s), "
              "interleaved (every size and method in each round; method order rotated, size order "
              "alternated); medians over rounds")
    if args.php_jobs:
        params += f"; PHP jobs: N = {args.php_jobs}, concurrency {args.php_concurrency}"
    text = "\n".join([
        "# Task-runner benchmark: the TaskRunner.php seed's methods and Hearth",
        "",
        f"Run {started:%Y-%m-%d %H:%M:%S %Z} with `{command}`.",
        "",
        *(f"- {k}: {v}" for k, v in info.items()),
        f"- Parameters: {params}",
        f"- Load average (1/5/15 min) before: {load_before}, after: {loadavg()}",
        "",
        "Tasks per second, medians over rounds (higher is better). Every run's outputs summed "
        "to 0 + 1 + ... + (N - 1) and every task exited 0.",
        "",
        *(part for test, title in TESTS.items() if test in med
          for part in (f"## {title}", "", tps_table(med, args, test), "")),
        *((f"## PHP jobs: warm workers vs `php -r` per job (N = {args.php_jobs}, "
           f"concurrency {args.php_concurrency})", "", jobs_table(med, args), "") if "php-jobs" in med else ()),
        *(("## Targets", "", targets_table(goals), "") if goals else ()),
        "## Every round",
        "",
        rounds_table(measurements, paddings),
        "",
    ])
    RESULTS.mkdir(parents=True, exist_ok=True)
    prefix = "tasks-quick" if args.quick else "tasks"
    data = json.dumps({
        "started": started.isoformat(), "command": command, "machine": info, "parameters": params,
        "medians": {t: {k: {str(mb): v for mb, v in by.items()} for k, by in d.items()} for t, d in med.items()},
        "targets": [{"target": n, "met": m, "measured": g} for n, m, g in goals],
        "measurements": measurements, "paddings": paddings,
    }, indent=1)
    names = [f"{prefix}-latest"] + ([] if args.quick else [f"{prefix}-{started:%Y-%m-%d-%H%M%S}"])
    for name in names:
        (RESULTS / f"{name}.md").write_text(text)
        (RESULTS / f"{name}.json").write_text(data)
    chart = RESULTS / f"{prefix}.png"
    subtitle = f"{info['CPUs (nproc)']} CPUs, {info['PHP'].split('(')[0].strip()}"
    if "php-jobs" in med and {"warm", "cold"} <= med["php-jobs"].keys():
        j = med["php-jobs"]
        subtitle += (f"; PHP jobs: warm {j['warm'][None]:.0f}/s vs php -r {j['cold'][None]:.0f}/s "
                     f"({j['warm'][None] / j['cold'][None]:.0f}×)")
    problem = write_chart(med, args, chart, subtitle)
    if problem:
        print(f"\nnote: {problem}", file=sys.stderr)
    written = ", ".join(f"bench/results/{n}.{{md,json}}" for n in names)
    if not problem:
        written += f", {chart.relative_to(ROOT)}"
    return written, RESULTS / f"{prefix}-latest.md"


# -------------------------------------------------------------------- main


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, help="interleaved rounds (default: 3)")
    p.add_argument("--sizes", help="heap sizes in MB, comma-separated (default: 0,10,50,100,500)")
    p.add_argument("-n", type=int, help="tasks per test (default: 1000)")
    p.add_argument("--spawn-pool", type=int, default=8, help="concurrency, spawn test (default: %(default)s)")
    p.add_argument("--sleep-pool", type=int, default=16, help="concurrency, sleep test (default: %(default)s)")
    p.add_argument("--methods", default=",".join(METHODS),
                   help="comma-separated, in this order: %(default)s")
    p.add_argument("--php-jobs", type=int, help="PHP jobs per side, 0 to skip (default: 1000)")
    p.add_argument("--php-concurrency", type=int, default=len(os.sched_getaffinity(0)),
                   help="warm workers and `xargs -P` for the PHP jobs (default: CPUs, %(default)s)")
    p.add_argument("--hearth", type=Path, default=Path(os.environ.get("HEARTH_BIN") or ROOT / "target/release/hearth"),
                   help="hearth binary (default: $HEARTH_BIN or target/release/hearth)")
    p.add_argument("--timeout", type=float, help="seconds allowed per PHP process (default: 60 + N / 4)")
    p.add_argument("--quick", action="store_true",
                   help="smoke test: -n 100, --sizes 0,50, --rounds 1, --php-jobs 100 (flags given win)")
    args = p.parse_args(argv)
    args.argv = argv
    defaults = (dict(rounds=1, sizes="0,50", n=100, php_jobs=100) if args.quick
                else dict(rounds=3, sizes="0,10,50,100,500", n=1000, php_jobs=1000))
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    try:
        args.size_list = sorted({int(s) for s in args.sizes.split(",") if s.strip()})
    except ValueError:
        p.error(f"--sizes: not a list of integers: {args.sizes}")
    args.method_list = [k.strip() for k in args.methods.split(",") if k.strip()]
    unknown = [k for k in args.method_list if k not in METHODS]
    if unknown or not args.method_list:
        p.error(f"--methods: unknown {', '.join(unknown) or '(none given)'}; known: {', '.join(METHODS)}")
    for name in ("rounds", "n", "spawn_pool", "sleep_pool", "php_concurrency"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if not args.size_list or min(args.size_list) < 0:
        p.error("--sizes must list sizes of 0 MB or more")
    if args.php_jobs < 0:
        p.error("--php-jobs must be 0 (skip) or more")
    args.timeout = args.timeout or 60 + args.n / 4
    args.hearth = args.hearth.resolve()
    args.hearth_used = "hearth" in args.method_list or args.php_jobs > 0
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    env = {k: v for k, v in os.environ.items() if not k.startswith(HEARTH_ENV_PREFIXES)}
    if args.hearth_used:
        problem = hearth_problem(args.hearth, env)
        if problem:
            print(f"bench/tasks.py: {problem}.\nTo measure the other methods only: --methods "
                  f"exec-loop,proc-pool,separate-pool,xargs --php-jobs 0", file=sys.stderr)
            return 2
        built = args.hearth.stat().st_mtime
        stale = [p for p in [*(ROOT / "crates").rglob("*.rs")] if p.stat().st_mtime > built]
        if stale:
            print(f"warning: {len(stale)} Rust source file(s) changed after {args.hearth} was built "
                  f"(e.g. {stale[0].relative_to(ROOT)}); `make bench` rebuilds it first", file=sys.stderr)

    started = datetime.datetime.now().astimezone()
    load_before = loadavg()
    info = machine(args)
    print("Task-runner benchmark: the TaskRunner.php seed's methods and Hearth")
    for k, v in info.items():
        print(f"  {k}: {v}")
    print(f"  load average: {load_before}")
    if float(load_before.split()[0] if load_before != "unknown" else 0) > 0.5:
        print("warning: the machine is busy (1-minute load average above 0.5); results will be noisy",
              file=sys.stderr)
    clock = time.monotonic()
    try:
        measurements, paddings = measure(args, env)
    except WrongResult as e:
        print(f"\nWRONG RESULT, nothing written:\n  {e}", file=sys.stderr)
        return 1
    except BenchError as e:
        print(f"\nbench/tasks.py: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted (SIGINT); processes stopped, nothing written", file=sys.stderr)
        return 130
    except Interrupted as e:
        print(f"\ninterrupted ({e}); processes stopped, nothing written", file=sys.stderr)
        return 128 + e.signum

    written, latest = write_report(measurements, paddings, args, info, started, load_before)
    text = latest.read_text()
    print("\n" + text[text.index("Tasks per second"):text.index("## Every round")].rstrip())
    print(f"\nmeasured in {time.monotonic() - clock:.0f}s; wrote {written}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
