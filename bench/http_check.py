#!/usr/bin/env python3
"""Self-check of the helpers bench/http.py measures with, without servers:
the parsing of perf's and strace's totals, the context-switch and CPU
deltas between two samples, where Workerman is looked for, and the frames
bench/php/worker-loop.py feeds a worker.

    python3 bench/http_check.py

Exits 0 when every check passed, 1 otherwise. The benchmark itself is
checked by running it.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent

# http.py takes bench/ off the import path (its name hides the standard
# library's http package) when it is loaded from there.
spec = importlib.util.spec_from_file_location("bench_http", BENCH / "http.py")
bench = importlib.util.module_from_spec(spec)
sys.modules["bench_http"] = bench
spec.loader.exec_module(bench)

failures: list[str] = []


def check(name: str, got, expected) -> None:
    if got != expected:
        failures.append(f"{name}: got {got!r}, expected {expected!r}")
    print(f"{'ok  ' if got == expected else 'FAIL'} {name}")


with tempfile.TemporaryDirectory() as tmp:
    out = Path(tmp) / "count.txt"

    out.write_text("# started on Thu Nov 26 05:18:10 2026\n\n123456,,raw_syscalls:sys_enter,906049,100.00,,\n")
    check("perf total", bench.read_count("perf", out), 123456)
    out.write_text("<not counted>,,raw_syscalls:sys_enter,0,100.00,,\n")
    check("perf not counted", bench.read_count("perf", out), None)
    out.write_text(
        "% time     seconds  usecs/call     calls    errors syscall\n"
        "------ ----------- ----------- --------- --------- ----------------\n"
        " 60.00    0.000600          10        60           read\n"
        " 40.00    0.000400          10        40         3 openat\n"
        "------ ----------- ----------- --------- --------- ----------------\n"
        "100.00    0.001000          10       100         3 total\n")
    check("strace total with errors", bench.read_count("strace", out), 100)
    out.write_text("100.00    0.001000          10       100           total\n")
    check("strace total without errors", bench.read_count("strace", out), 100)
    check("missing output", bench.read_count("perf", Path(tmp) / "none.txt"), None)

    # The real tools, where they run: a count of a process's system calls
    # is positive.
    if shutil.which("strace"):
        subprocess.run(["strace", "-c", "-f", "-q", "-o", str(out), "--", "true"], check=False)
        count = bench.read_count("strace", out)
        check("strace counts `true`", count is not None and count > 0, True)
    tool, note = bench.syscall_tool()
    print(f"     system calls here: {note}")
    if tool == "perf":
        subprocess.run(bench.counter_command("perf", out) + ["--", "true"], check=False)
        count = bench.read_count("perf", out)
        check("perf counts `true`", count is not None and count > 0, True)

    release = Path(tmp) / "workerman"
    (release / "src").mkdir(parents=True)
    (release / "src" / "Worker.php").write_text("<?php\n")
    found, _ = bench.find_workerman(str(release))
    if "pcntl" in bench.php_modules() and "posix" in bench.php_modules():
        check("--workerman DIR found", found, release.resolve())
    found, note = bench.find_workerman(str(Path(tmp) / "nowhere"))
    check("--workerman missing is skipped", (found, "not found" in note), (None, True))
    check("--workerman none", bench.find_workerman("none")[0], None)

# Two samples of a group: a process alive at both counts its difference,
# one that started in between all of its own.
before = {"front": {}, "workers": {(10, 1): (100, 50, 5)}}
after = {"front": {}, "workers": {(10, 1): (130, 80, 6), (11, 2): (20, 7, 1)}}
check("cpu_seconds", round(bench.cpu_seconds(before, after, "workers") * bench.CLOCK_TICKS), 50)
check("csw_delta", bench.csw_delta(before, after, "workers"), (37, 2))
vol, invol = bench.context_switches(os.getpid())
check("context_switches of this process", vol >= 0 and invol >= 0 and vol + invol > 0, True)

# worker-loop.py's $_SERVER is what PHP's unserialize() reads back, and
# its frames are the protocol's (docs/protocol.md, "Byte-level example").
spec = importlib.util.spec_from_file_location("worker_loop", BENCH / "php" / "worker-loop.py")
worker_loop = importlib.util.module_from_spec(spec)
spec.loader.exec_module(worker_loop)
server = {"REQUEST_URI": "/é?a=b", "EMPTY": ""}
php = shutil.which("php")
if php:
    out = subprocess.run([php, "-r", "echo json_encode(unserialize(stream_get_contents(STDIN)));"],
                         input=worker_loop.php_serialize(server), capture_output=True, check=False)
    check("worker-loop $_SERVER unserializes", out.stdout.decode(), '{"REQUEST_URI":"\\/\\u00e9?a=b","EMPTY":""}')
frames = worker_loop.request_frames(7, b"a:0:{}")
check("worker-loop REQUEST frame", frames[:12], bytes([1, 2, 0, 0, 0, 0, 0, 7, 0, 0, 0, 6]))
check("worker-loop END frame", frames[-12:], bytes([1, 4, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0]))

if failures:
    print("\n" + "\n".join(failures), file=sys.stderr)
    sys.exit(1)
print("\nall checks passed")
