#!/usr/bin/env python3
"""HTTP benchmark: Hearth against the reference nginx + php-fpm stack.

For each worker app, starts three contenders on free 127.0.0.1 ports:
`hearth serve WORKER --workers N` (its workers load the Hearth PHP
extension), the same with `--php-extension off` (the PHP library's pure-PHP
request startup, what a user without the extension gets), and nginx +
php-fpm (bench/reference/nginx-fpm.sh, pm = static, pm.max_children = N).
For each framework app (the Symfony and Laravel examples, each on a fresh
copy deployed for production by its setup script in bench/reference/, one
copy per server), the same three: `hearth serve --config APP/hearth.toml`
(the example's own settings), again without the extension, and nginx +
php-fpm serving APP/public/index.php as the example's nginx.conf does.
For each classic app (an unmodified multi-script site such as Debian's
DokuWiki), two: `hearth serve --root SITE --workers N` (classic mode, its
own php-fpm pool of N children) and nginx + php-fpm with NGINX_SITE=classic,
each on a fresh copy of the site made by the app's setup script in
bench/reference/. Checks that all answer the measured URL with status 200
and the same body, then drives them with wrk in interleaved rounds
(hearth, hearth (no ext), php-fpm, hearth, ...) and reports medians of
req/s, latency, the CPU time per request of the front (Hearth itself, or
nginx) and of the PHP processes (php-cgi, or php-fpm), read from /proc
around every round, and their resident memory after every round.

For the apps bench/workerman/server.php serves (hello, symfony-micro), a
fourth contender: Workerman 5.2, read from ../shared/peers/workerman-5.2.2
(or --workerman DIR; skipped with a note when absent), N PHP processes
that accept and parse HTTP themselves. The report breaks each request's
CPU down: the front, the PHP processes, wrk, and the app alone in a warm
loop (bench/php/app-loop.php), with context switches (/proc), system calls
(an extra round under perf stat or strace -c) and memory per worker and
per server.

    python3 bench/http.py                      # the full comparison
    python3 bench/http.py --rounds 2 --duration 4 --apps slim
    python3 bench/http.py --apps dokuwiki      # classic mode only
    python3 bench/http.py --apps symfony,laravel --rounds 2 --duration 4
    python3 bench/http.py --no-fallback        # Hearth with the extension vs php-fpm only
    python3 bench/http.py --apps hello,symfony-micro --rounds 2 --duration 4   # with Workerman, ~2.5 min

Writes bench/results/http-<date>.md and bench/results/http-latest.md.
Exits 0 when every request succeeded and the bodies matched, 1 when a
request failed or the servers disagree, 2 when the setup is broken, 130 on
Ctrl-C. Standard library only; see bench/README.md for how to read it.
"""

from __future__ import annotations

import os
import sys

# This file is named http.py, and Python puts its directory first on the
# import path: without this, `import http.client` would find this script.
if sys.path and os.path.realpath(sys.path[0]) == os.path.dirname(os.path.realpath(__file__)):
    del sys.path[0]

import argparse  # noqa: E402
import datetime  # noqa: E402
import http.client  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import resource  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Callable  # noqa: E402

BENCH = Path(__file__).resolve().parent

# bench/ is off the import path (see above): its shared module comes by name.
sys.path.append(str(BENCH))
from machine_info import cpu_model, first_line, git_revision, loadavg  # noqa: E402

ROOT = BENCH.parent
NGINX_FPM = BENCH / "reference" / "nginx-fpm.sh"
REPORT_LUA = BENCH / "wrk" / "report.lua"
RESULTS = BENCH / "results"

HEARTH = "hearth"
HEARTH_NO_EXT = "hearth (no ext)"
FPM = "php-fpm"
WORKERMAN = "workerman"
CONTENDERS = (HEARTH, HEARTH_NO_EXT, FPM, WORKERMAN)
"""In the order of every round of interleaving."""
SERVER_LABELS = {HEARTH: "Hearth", HEARTH_NO_EXT: "Hearth (no ext)", FPM: "nginx + php-fpm",
                 WORKERMAN: "Workerman"}
CLASSIC_CONTENDERS = (HEARTH, FPM)
"""A classic app's: classic mode runs php-fpm, which has no Hearth
extension to turn off."""
NO_EXT_ARGS = ("--php-extension", "off")
"""What makes `hearth serve` run its workers without the Hearth extension."""
WORKERMAN_BRIDGE = BENCH / "workerman" / "server.php"
WORKERMAN_RELEASE = "workerman-5.2.2"
"""Workerman's release, read from the peers directory beside the checkout
(../shared/peers/), never copied into the repository."""
WORKERMAN_ENV = "BENCH_WORKERMAN"
"""The environment variable that gives Workerman's directory (--workerman wins)."""
APP_LOOP = BENCH / "php" / "app-loop.php"
WORKER_LOOP = BENCH / "php" / "worker-loop.py"

# Variables that would change what the Hearth process measures: RUST_LOG and
# HEARTH_LOG override --log-level, the other HEARTH_* ones are tuning and
# debugging knobs. The benchmark measures the defaults a user gets.
HEARTH_ENV_PREFIXES = ("HEARTH_", "RUST_LOG")


@dataclass(frozen=True)
class Check:
    """A request made before measuring, on both servers."""

    path: str
    status: int
    same_body: bool


@dataclass(frozen=True)
class App:
    name: str
    path: str
    """The measured URL path."""
    worker: Path | None = None
    """Hearth's worker script (a worker app)."""
    docroot: Path | None = None
    """php-fpm's document root (a worker app; a classic app's is its copy)."""
    script: str = "index.php"
    """php-fpm's front controller under the document root."""
    checks: tuple[Check, ...] = ()
    """Extra requests that must behave the same on both servers."""
    site_setup: Path | None = None
    """A classic or framework app's setup script: `SCRIPT DIR` makes a
    fresh copy of the site in DIR and prints, on its last line, its
    document root (a classic app) or the app's directory (a framework
    app). Each server gets a copy of its own. Hearth serves a classic
    app in classic mode (`hearth serve --root`), nginx + php-fpm with
    NGINX_SITE=classic."""
    hearth_config: str | None = None
    """A framework app's hearth.toml, under the directory its setup script
    printed: Hearth runs `hearth serve --config DIR/HEARTH_CONFIG` (the
    app's own worker script and settings), nginx + php-fpm serve
    DIR/public with `script` as the front controller."""
    cookie: bool = False
    """Whether wrk sends, with every request, the cookies the server set on
    a first visit to the measured URL (one returning visitor), instead of
    none (a new visitor per request). For an app that starts a session on
    every page (Laravel's `web` middleware), where a new visitor per
    request leaves a session file per request behind, which the app's
    session garbage collection (a 2% lottery in Laravel) then reads all
    of: the run would measure a directory growing with the requests each
    server answered, the faster one's the most."""
    connections: int | None = None
    """wrk's connections for this app, instead of --connections: a page
    that costs tens of milliseconds of PHP would queue past wrk's 2 s
    timeout with 64 connections on 2 PHP processes."""
    site_stop: bool = False
    """Whether the setup script started something (a database) that
    `SCRIPT stop DIR` ends once the app is measured."""
    normalize: Callable[[bytes], bytes] = lambda body: body
    """What is masked in a body before two servers' bodies are compared
    (a time the page shows, say)."""
    workerman: bool = False
    """Whether bench/workerman/server.php serves this app (its
    BENCH_WORKERMAN_APP is the app's name)."""
    loop_requests: int = 0
    """Iterations of bench/php/app-loop.php (the app's own time per request
    in a warm loop, without HTTP); 0: the loop does not know this app."""

    @property
    def classic(self) -> bool:
        return self.site_setup is not None and self.hearth_config is None

    @property
    def framework(self) -> bool:
        return self.hearth_config is not None

    def contenders(self, args: argparse.Namespace) -> tuple[str, ...]:
        return tuple(c for c in args.contenders
                     if (not self.classic or c in CLASSIC_CONTENDERS) and (c != WORKERMAN or self.workerman))


def dokuwiki_body(body: bytes) -> bytes:
    """Every DokuWiki page embeds its indexer as an image whose URL ends
    with the time of the request (`taskrunner.php?id=start&amp;TIME`)."""
    return re.sub(rb"(taskrunner\.php\?id=[^&\"]*&amp;)\d+", rb"\1TIME", body)


def wordpress_body(body: bytes) -> bytes:
    """A WordPress page shows when its post was written (each copy is
    installed on its own, a second apart at most) and its own URL
    percent-encoded in oEmbed links."""
    body = re.sub(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\+00:00)?", rb"TIME", body)
    return re.sub(rb"127\.0\.0\.1%3A\d+", rb"127.0.0.1%3APORT", body)


def symfony_body(body: bytes) -> bytes:
    """Symfony masks every CSRF token it puts in a form with a new random
    salt (the guestbook's form[_token])."""
    return re.sub(rb'(name="[^"]*_token\]?" value=")[^"]*"', rb'\1TOKEN"', body)


def laravel_body(body: bytes) -> bytes:
    """A Laravel form's CSRF token (Blade's @csrf) is its session's, and
    each server has its own sessions."""
    return re.sub(rb'(name="_token" value=")[^"]*"', rb'\1TOKEN"', body)


APPS = {
    "hello": App(
        name="hello",
        worker=BENCH / "apps" / "hello" / "worker.php",
        docroot=BENCH / "apps" / "hello",
        script="hello.php",
        path="/",
        workerman=True,
        loop_requests=200_000,
    ),
    # Symfony's MicroKernel with one JSON route, in prod mode: the kernel
    # booted once per worker (Hearth, Workerman) or per request (php-fpm),
    # handle() + terminate() + the services_resetter per request.
    "symfony-micro": App(
        name="symfony-micro",
        worker=BENCH / "apps" / "symfony-micro" / "worker.php",
        docroot=BENCH / "apps" / "symfony-micro",
        script="index.php",
        path="/hello/bench?lang=fr",
        checks=(
            Check("/hello/other", 200, same_body=True),
            Check("/nowhere", 404, same_body=True),
        ),
        workerman=True,
        loop_requests=5_000,
    ),
    "slim": App(
        name="slim",
        worker=BENCH / "apps" / "slim" / "worker.php",
        docroot=BENCH / "apps" / "slim",
        script="index.php",
        path="/",
        checks=(
            Check("/hello/bench", 200, same_body=True),
            Check("/no/such/page", 404, same_body=True),
        ),
    ),
    # Framework apps: the examples, unmodified, on a copy deployed for
    # production; Hearth with the example's hearth.toml, php-fpm with its
    # public/index.php (the example's nginx.conf).
    "symfony": App(
        name="symfony",
        # A Twig page (the layout, a translated message, three routes
        # generated) that starts no session for a new visitor.
        path="/fr/hello",
        site_setup=BENCH / "reference" / "symfony.sh",
        hearth_config="hearth.toml",
        normalize=symfony_body,
        checks=(
            Check("/en/hello", 200, same_body=True),
            Check("/guestbook", 200, same_body=True),
            Check("/nowhere", 404, same_body=True),
            Check("/robots.txt", 200, same_body=True),
        ),
    ),
    "laravel": App(
        name="laravel",
        # A Blade page (the layout, a translated message, three routes
        # generated, the session and the guest check the layout's @auth
        # makes); every page of the app starts a session.
        path="/fr/hello",
        site_setup=BENCH / "reference" / "laravel.sh",
        hearth_config="hearth.toml",
        cookie=True,
        # Some 5 ms of PHP a page under php-fpm: 64 connections on 2 PHP
        # processes would queue close to wrk's 2 s timeout on a busy machine.
        connections=16,
        normalize=laravel_body,
        checks=(
            # The guestbook: an Eloquent query to SQLite, and a form.
            Check("/guestbook", 200, same_body=True),
            Check("/no/such/page", 404, same_body=True),
            Check("/robots.txt", 200, same_body=True),
        ),
    ),
    # Classic apps: an unmodified site, a setup script, a URL.
    "dokuwiki": App(
        name="dokuwiki",
        path="/doku.php?id=start",
        site_setup=BENCH / "reference" / "dokuwiki.sh",
        normalize=dokuwiki_body,
        checks=(
            Check("/doku.php?id=wiki:welcome", 200, same_body=True),
            Check("/lib/tpl/dokuwiki/images/logo.png", 200, same_body=True),
        ),
    ),
    # Debian's WordPress, installed, on a MariaDB of its own per server.
    "wordpress": App(
        name="wordpress",
        path="/",
        site_setup=BENCH / "reference" / "wordpress-site.sh",
        site_stop=True,
        connections=8,
        normalize=wordpress_body,
        checks=(
            Check("/?p=1", 200, same_body=True),
            Check("/?rest_route=/wp/v2/posts", 200, same_body=True),
            Check("/wp-login.php", 200, same_body=False),
        ),
    ),
}


class BenchError(Exception):
    """The benchmark could not run: a server did not start, a tool is missing."""


@dataclass
class Round:
    app: str
    server: str
    index: int
    """1-based; 0 is the warm-up."""
    requests: int
    duration_s: float
    bytes: int
    p50_us: float
    p99_us: float
    mean_us: float
    max_us: float
    errors_connect: int
    errors_read: int
    errors_write: int
    errors_timeout: int
    errors_status: int
    front_cpu_s: float = 0.0
    """CPU time (user + system) the front spent during the round: Hearth's
    own process, or nginx's."""
    workers_cpu_s: float = 0.0
    """CPU time the PHP workers spent during the round: Hearth's php-cgi
    workers, or php-fpm's pool."""
    front_rss_kib: int = 0
    """Resident memory of the front at the end of the round: Hearth's
    process, or nginx's master and workers."""
    workers_rss_kib: int = 0
    """Resident memory of the PHP processes at the end of the round, summed:
    Hearth's php-cgi workers (or, in classic mode, its php-fpm master and
    children), or php-fpm's master and children."""
    workers_anon_kib: int = 0
    """The anonymous part of workers_rss_kib (RssAnon): heaps and stacks,
    without the mapped files and shared memory."""
    worker_rss_kib: float = 0.0
    """Mean resident memory of one PHP process that serves requests (no
    master): a Hearth php-cgi worker, a php-fpm child, a Workerman child."""
    worker_pss_kib: float = 0.0
    """The same in PSS (shared pages divided among the processes mapping them)."""
    server_pss_kib: int = 0
    """PSS of the whole server, front and every PHP process."""
    wrk_cpu_s: float = 0.0
    """CPU time wrk (the load generator) spent in the round."""
    front_csw: tuple[int, int] = (0, 0)
    """Voluntary and involuntary context switches of the front in the
    round, every thread of every process (/proc/PID/task/TID/status)."""
    workers_csw: tuple[int, int] = (0, 0)
    """The same for the PHP processes."""
    wrk_csw: tuple[int, int] = (0, 0)
    """The same for wrk (getrusage of the reaped child)."""

    @property
    def rps(self) -> float:
        return self.requests / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def front_us_per_req(self) -> float:
        return self.front_cpu_s * 1e6 / self.requests if self.requests else 0.0

    @property
    def workers_us_per_req(self) -> float:
        return self.workers_cpu_s * 1e6 / self.requests if self.requests else 0.0

    @property
    def wrk_us_per_req(self) -> float:
        return self.wrk_cpu_s * 1e6 / self.requests if self.requests else 0.0

    def per_req(self, count: int) -> float:
        return count / self.requests if self.requests else 0.0

    @property
    def socket_errors(self) -> int:
        return self.errors_connect + self.errors_read + self.errors_write + self.errors_timeout

    @property
    def failed(self) -> int:
        return self.socket_errors + self.errors_status


@dataclass
class AppResult:
    app: App
    warmups: list[Round] = field(default_factory=list)
    rounds: list[Round] = field(default_factory=list)
    extensions: dict[str, str | None] = field(default_factory=dict)
    """Per Hearth contender, the Hearth extension its workers have mapped
    (None: none), as /proc/PID/maps shows it."""
    loops: list[LoopRun] = field(default_factory=list)
    """The app's own time per request in a warm loop (bench/php/app-loop.php)."""
    worker_loops: dict[str, list[float]] = field(default_factory=dict)
    """Per Hearth contender, the CPU µs per request of one of its workers
    alone, fed requests ahead with no front (bench/php/worker-loop.py)."""
    syscalls: dict[str, SyscallCount] = field(default_factory=dict)
    """Per contender, the system calls of its short counting round."""

    def measured(self, server: str) -> list[Round]:
        return [r for r in self.rounds if r.server == server]

    def failed(self) -> int:
        return sum(r.failed for r in self.rounds + self.warmups)


# ---------------------------------------------------------------- processes


def free_ports(count: int) -> list[int]:
    """Ports the kernel says are free on 127.0.0.1, all distinct."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def fetch(port: int, path: str, timeout: float = 10.0,
          cookie: str | None = None) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path, headers={"Cookie": cookie} if cookie else {})
        response = conn.getresponse()
        body = response.read()
        headers = {k.lower(): v for k, v in response.getheaders()}
        return response.status, headers, body
    finally:
        conn.close()


def first_visit_cookie(port: int, path: str) -> str:
    """The Cookie header a browser would send back after a first GET of
    path: every cookie the response set, by name=value."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10.0)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        response.read()
        cookies = [c.split(";", 1)[0].strip() for c in response.msg.get_all("Set-Cookie") or []]
    except (OSError, http.client.HTTPException) as e:
        raise BenchError(f"GET {path} on 127.0.0.1:{port} for its cookies: {e}") from None
    finally:
        conn.close()
    if response.status != 200 or not cookies:
        raise BenchError(f"GET {path} on 127.0.0.1:{port} for its cookies: status {response.status}, "
                         f"{len(cookies)} cookie(s) set")
    return "; ".join(cookies)


def wait_until_serving(port: int, path: str, deadline_s: float, alive=lambda: True) -> None:
    """Waits until GET path answers at all (any status): workers are up."""
    deadline = time.monotonic() + deadline_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        if not alive():
            raise BenchError(f"server on port {port} exited while starting")
        try:
            fetch(port, path, timeout=5.0)
            return
        except (OSError, http.client.HTTPException) as e:
            last = e
            time.sleep(0.1)
    raise BenchError(f"nothing answered on 127.0.0.1:{port}{path} within {deadline_s:.0f}s: {last}")


def tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


# -------------------------------------------------------------- CPU time
#
# What a request costs in CPU, beside how fast it is answered: on a machine
# that serves other work too, the CPU a server does not use is the capacity
# it leaves. Read from /proc/PID/stat before and after every round, per
# process, and split in two: the front (what parses HTTP: Hearth itself, or
# nginx) and the PHP workers (what runs the app: php-cgi under Hearth, or
# php-fpm's pool).


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ProcStat:
    """One process's line of /proc/PID/stat, the parts the benchmark uses."""

    pid: int
    ppid: int
    start: int
    """Field 22, in clock ticks since boot: tells a reused pid apart."""
    ticks: int
    """utime + stime (fields 14 and 15): every thread of the process, not
    its reaped children."""


def read_stat(pid: int) -> ProcStat | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            line = f.read()
    except OSError:
        return None  # exited meanwhile
    # The command name (field 2) is in parentheses and may hold spaces or
    # parentheses itself: the numbered fields start after the last ")".
    rest = line[line.rfind(")") + 2:].split()
    # rest[0] is field 3, so field N is rest[N - 3].
    return ProcStat(pid=pid, ppid=int(rest[1]), start=int(rest[19]),
                    ticks=int(rest[11]) + int(rest[12]))


def proc_table() -> dict[int, ProcStat]:
    """Every process on the machine (/proc lists processes, not threads)."""
    table = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            stat = read_stat(int(name))
            if stat is not None:
                table[stat.pid] = stat
    return table


def descendants(table: dict[int, ProcStat], root: int) -> list[ProcStat]:
    """The processes below root, found by walking parent pids; not root."""
    children: dict[int, list[ProcStat]] = {}
    for stat in table.values():
        children.setdefault(stat.ppid, []).append(stat)
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child.pid)
    return found


CpuSample = dict[str, dict[tuple[int, int], tuple[int, int, int]]]
"""Per group ("front", "workers"), the ticks and the voluntary and
involuntary context switches of each process by (pid, start)."""


def context_switches(pid: int) -> tuple[int, int]:
    """Voluntary and involuntary context switches of every thread of a
    process: /proc/PID/status counts its main thread's only."""
    vol = invol = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0, 0
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches:"):
                        vol += int(line.split()[1])
                    elif line.startswith("nonvoluntary_ctxt_switches:"):
                        invol += int(line.split()[1])
        except (OSError, ValueError):
            continue  # the thread exited meanwhile
    return vol, invol


def cpu_sample(server: Server) -> CpuSample:
    table = proc_table()
    front, workers = server.cpu_groups(table)
    return {
        "front": {(p.pid, p.start): (p.ticks, *context_switches(p.pid)) for p in front},
        "workers": {(p.pid, p.start): (p.ticks, *context_switches(p.pid)) for p in workers},
    }


def csw_delta(before: CpuSample, after: CpuSample, group: str) -> tuple[int, int]:
    """Context switches (voluntary, involuntary) a group made between two
    samples, counted as cpu_seconds counts CPU time."""
    was = before[group]
    vol = sum(v - was.get(key, (0, 0, 0))[1] for key, (_, v, _) in after[group].items())
    invol = sum(i - was.get(key, (0, 0, 0))[2] for key, (_, _, i) in after[group].items())
    return vol, invol


def cpu_seconds(before: CpuSample, after: CpuSample, group: str) -> float:
    """CPU a group used between two samples. A process alive at both counts
    its difference; one started in between counts all its time, all of it
    spent during the round. A worker replaced during the round (recycled,
    or crashed) loses what it spent between the first sample and its exit,
    so the round undercounts: that does not happen here, where neither
    server recycles workers (no --max-requests, pm.max_requests = 0)."""
    was = before[group]
    return sum(ticks - was.get(key, (0, 0, 0))[0] for key, (ticks, _, _) in after[group].items()) / CLOCK_TICKS


def rss_kib(pids: list[int], field: str = "VmRSS") -> int:
    """A memory field of /proc/PID/status summed over these processes, in
    KiB. In VmRSS, pages shared between them (PHP's code, OPcache's shared
    memory) count once per process, as `ps` counts them; RssAnon is each
    one's own heap and stacks. Pss, from /proc/PID/smaps_rollup, shares
    each page among the processes that map it: summed over a server, it
    is the memory the server holds."""
    total = 0
    source = "smaps_rollup" if field == "Pss" else "status"
    for pid in pids:
        try:
            with open(f"/proc/{pid}/{source}") as f:
                for line in f:
                    if line.startswith(f"{field}:"):
                        total += int(line.split()[1])
                        break
        except (OSError, ValueError):
            continue  # exited meanwhile
    return total


def rss_sample(server: Server, r: Round) -> None:
    """The front's RSS, the PHP processes' RSS and their anonymous RSS, as
    cpu_groups splits the processes; the mean RSS and PSS of one PHP
    process that serves requests (masters left out); the whole server's
    PSS. Into the round."""
    table = proc_table()
    front, workers = server.cpu_groups(table)
    php = [p.pid for p in workers]
    serving = [p.pid for p in server.serving(table)]
    r.front_rss_kib, r.workers_rss_kib, r.workers_anon_kib = (
        rss_kib([p.pid for p in front]), rss_kib(php), rss_kib(php, "RssAnon"))
    r.worker_rss_kib = rss_kib(serving) / len(serving) if serving else 0.0
    r.worker_pss_kib = rss_kib(serving, "Pss") / len(serving) if serving else 0.0
    r.server_pss_kib = rss_kib([p.pid for p in front] + php, "Pss")


def hearth_extension(pids: list[int]) -> str | None:
    """The Hearth extension a PHP worker has mapped, from /proc/PID/maps:
    proof of which runtime a Hearth contender measures."""
    for pid in pids:
        try:
            with open(f"/proc/{pid}/maps") as f:
                for line in f:
                    parts = line.split(None, 5)
                    path = parts[5].strip() if len(parts) == 6 else ""
                    name = os.path.basename(path)
                    if name.startswith("hearth") and name.endswith(".so"):
                        resolved = Path(path)
                        return str(resolved.relative_to(ROOT)) if resolved.is_relative_to(ROOT) else path
        except OSError:
            continue
    return None


class HearthServer:
    """`hearth serve` in its own process group, so Ctrl-C on the benchmark
    does not reach it and its php-cgi workers are found for cleanup."""

    def __init__(self, binary: Path, app: App, port: int, workers: int, state: Path,
                 extra_args: tuple[str, ...] = (), site_root: Path | None = None,
                 config: Path | None = None):
        self.binary = binary
        self.extra_args = extra_args
        self.site_root = site_root
        """A classic app's copy: served with `--root` (classic mode)."""
        self.config = config
        """A framework app copy's hearth.toml: served with `--config`."""
        self.app = app
        self.port = port
        self.workers = workers
        self.log = state / "hearth.log"
        self.proc: subprocess.Popen | None = None

    def start(self, env: dict[str, str]) -> None:
        cmd = [
            str(self.binary), "--log-level", "warn", "serve",
            *(["--root", str(self.site_root)] if self.site_root
              else ["--config", str(self.config)] if self.config
              else [str(self.app.worker)]),
            "--listen", f"127.0.0.1:{self.port}", "--workers", str(self.workers),
            *self.extra_args,
        ]
        if os.geteuid() == 0:
            # Run as root, Hearth refuses to run PHP as root unless told to;
            # php-fpm runs as root here too (nginx-fpm.sh passes it -R).
            cmd += ["--user", "root"]
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env=env, cwd=ROOT, start_new_session=True,
            )
        try:
            wait_until_serving(self.port, self.app.path, 60.0, alive=lambda: self.proc.poll() is None)
        except BenchError as e:
            raise BenchError(f"hearth: {e}\n{tail(self.log)}") from None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def cpu_groups(self, table: dict[int, ProcStat]) -> tuple[list[ProcStat], list[ProcStat]]:
        """The front (Hearth's process, all its threads) and the PHP workers
        (the processes it started: php-cgi, or in classic mode php-fpm's
        master and children)."""
        if self.proc is None or self.proc.pid not in table:
            return [], []
        return [table[self.proc.pid]], descendants(table, self.proc.pid)

    def serving(self, table: dict[int, ProcStat]) -> list[ProcStat]:
        """The PHP processes that serve requests: the php-cgi workers, or
        in classic mode the children of Hearth's php-fpm master."""
        if self.proc is None or self.proc.pid not in table:
            return []
        below = descendants(table, self.proc.pid)
        return [p for p in below if p.ppid != self.proc.pid] if self.site_root else below

    def stop(self) -> None:
        """SIGTERM to Hearth, which stops its workers politely; SIGKILL to
        whatever is left of the process group after a grace period."""
        if self.proc is None:
            return
        pgid = self.proc.pid
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                pass
            except ProcessLookupError:
                pass
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self.proc = None


class FpmServer:
    """nginx + php-fpm through bench/reference/nginx-fpm.sh."""

    def __init__(self, app: App, port: int, workers: int, state: Path, docroot: Path,
                 env: dict[str, str] | None = None):
        self.app = app
        self.docroot = docroot
        self.env = env or {}
        """For nginx-fpm.sh: NGINX_SITE=classic for a classic app."""
        self.port = port
        self.workers = workers
        self.state = state / "nginx-fpm"
        self.started = False

    def start(self) -> None:
        self.started = True  # from here on, stop() has pid files to look for
        result = subprocess.run(
            [str(NGINX_FPM), "start", str(self.state), str(self.docroot), self.app.script,
             str(self.port), str(self.workers)],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, start_new_session=True,
            env={**os.environ, **self.env},
        )
        if result.returncode != 0:
            raise BenchError(f"nginx-fpm.sh start failed:\n{result.stdout}{result.stderr}"
                             f"{tail(self.state / 'nginx-error.log')}{tail(self.state / 'php-fpm.log')}")
        wait_until_serving(self.port, self.app.path, 30.0)

    def pid(self, name: str) -> int | None:
        """The master pid nginx-fpm.sh's nginx or php-fpm wrote in the state directory."""
        try:
            return int((self.state / f"{name}.pid").read_text().strip())
        except (OSError, ValueError):
            return None

    def alive(self) -> bool:
        for name in ("nginx", "php-fpm"):
            pid = self.pid(name)
            try:
                if pid is None:
                    return False
                os.kill(pid, 0)
            except OSError:
                return False
        return True

    def cpu_groups(self, table: dict[int, ProcStat]) -> tuple[list[ProcStat], list[ProcStat]]:
        """The front (nginx's master and workers) and the PHP workers
        (php-fpm's pool, with its master, which stays idle)."""
        groups = []
        for name in ("nginx", "php-fpm"):
            pid = self.pid(name)
            groups.append([table[pid], *descendants(table, pid)] if pid in table else [])
        return groups[0], groups[1]

    def serving(self, table: dict[int, ProcStat]) -> list[ProcStat]:
        """php-fpm's children, without their master."""
        pid = self.pid("php-fpm")
        return descendants(table, pid) if pid in table else []

    def stop(self) -> None:
        if not self.started:
            return
        try:
            subprocess.run([str(NGINX_FPM), "stop", str(self.state)], stdin=subprocess.DEVNULL,
                           capture_output=True, start_new_session=True, timeout=60)
        except subprocess.TimeoutExpired:
            print(f"warning: nginx-fpm.sh stop {self.state} timed out", file=sys.stderr)
        self.started = False


class WorkermanServer:
    """Workerman (bench/workerman/server.php) in its own process group, its
    master in the foreground: N PHP processes that each accept connections
    and parse HTTP themselves, with no front. OPcache is turned on for the
    CLI, as the other contenders' PHP (php-cgi, php-fpm) has it."""

    def __init__(self, source: Path, app: App, port: int, workers: int, state: Path):
        self.source = source
        self.app = app
        self.port = port
        self.workers = workers
        self.state = state / "workerman"
        self.log = self.state / "output.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.state.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "BENCH_WORKERMAN_DIR": str(self.source), "BENCH_WORKERMAN_APP": self.app.name,
               "BENCH_WORKERMAN_LISTEN": f"127.0.0.1:{self.port}", "BENCH_WORKERMAN_COUNT": str(self.workers),
               "BENCH_WORKERMAN_STATE": str(self.state)}
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [php_cli(), "-d", "opcache.enable_cli=1", str(WORKERMAN_BRIDGE), "start"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
                start_new_session=True,
            )
        try:
            wait_until_serving(self.port, self.app.path, 60.0, alive=lambda: self.proc.poll() is None)
        except BenchError as e:
            raise BenchError(f"workerman: {e}\n{tail(self.log)}\n{tail(self.state / 'workerman.log')}") from None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def cpu_groups(self, table: dict[int, ProcStat]) -> tuple[list[ProcStat], list[ProcStat]]:
        """No front; the PHP processes are the master (idle under load) and
        its children."""
        if self.proc is None or self.proc.pid not in table:
            return [], []
        return [], [table[self.proc.pid], *descendants(table, self.proc.pid)]

    def serving(self, table: dict[int, ProcStat]) -> list[ProcStat]:
        """The master's children, which accept and serve."""
        if self.proc is None or self.proc.pid not in table:
            return []
        return descendants(table, self.proc.pid)

    def stop(self) -> None:
        """SIGTERM to the master, which stops its children (within
        Workerman's stopTimeout, 2 s); SIGKILL to what is left."""
        if self.proc is None:
            return
        pgid = self.proc.pid
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
                self.proc.wait(timeout=10)
            except (subprocess.TimeoutExpired, ProcessLookupError):
                pass
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self.proc = None


Server = HearthServer | FpmServer | WorkermanServer


def php_cli() -> str:
    return shutil.which("php") or "php"


def find_workerman(given: str | None) -> tuple[Path | None, str]:
    """Workerman's release directory (holding src/Worker.php), and a note
    saying where it came from or why it is missing: --workerman DIR, else
    $BENCH_WORKERMAN, else ../shared/peers/workerman-5.2.2 beside this
    checkout or beside the main checkout of a git worktree."""
    if given == "none":
        return None, "skipped (--workerman none)"
    if given or os.environ.get(WORKERMAN_ENV):
        where = Path(given or os.environ[WORKERMAN_ENV]).expanduser().resolve()
        candidates = [where]
        origin = "--workerman" if given else f"${WORKERMAN_ENV}"
    else:
        candidates = [ROOT.parent / "shared" / "peers" / WORKERMAN_RELEASE]
        common = first_line(["git", "-C", str(ROOT), "rev-parse", "--path-format=absolute", "--git-common-dir"])
        if common.startswith("/"):
            candidates.append(Path(common).parent.parent / "shared" / "peers" / WORKERMAN_RELEASE)
        origin = "../shared/peers/"
    for candidate in candidates:
        if (candidate / "src" / "Worker.php").is_file():
            missing = [ext for ext in ("pcntl", "posix") if ext not in php_modules()]
            if missing:
                return None, (f"found in {candidate} but skipped: the PHP CLI lacks {', '.join(missing)} "
                              "(apt-get install php8.2-cli)")
            return candidate.resolve(), f"{candidate.resolve()} (from {origin})"
    return None, (f"not found ({', '.join(str(c) for c in dict.fromkeys(candidates))} has no src/Worker.php): "
                  f"the workerman contender is skipped; give its directory with --workerman DIR or ${WORKERMAN_ENV}")


def php_modules() -> set[str]:
    try:
        out = subprocess.run([php_cli(), "-m"], capture_output=True, text=True, timeout=20, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return set()
    return {line.strip().lower() for line in out.splitlines()}


# ---------------------------------------------------------------------- wrk


def run_wrk(wrk: str, port: int, path: str, connections: int, duration: int,
            app: str, server: str, index: int, cookie: str | None = None,
            wrap: list[str] | None = None) -> Round:
    """One wrk run, with wrk's own CPU time and context switches from the
    rusage of the reaped child (the only child the benchmark reaps while a
    round runs). wrap: a command wrk runs under (a syscall counter)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cmd = [*(wrap or []), wrk, "-t1", f"-c{connections}", f"-d{duration}s", "-s", str(REPORT_LUA),
           *(["-H", f"Cookie: {cookie}"] if cookie else []),
           f"http://127.0.0.1:{port}{path}"]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=duration + 60)
    except subprocess.TimeoutExpired:
        raise BenchError(f"wrk did not finish within {duration + 60}s") from None
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    report = next((line for line in out.splitlines() if line.startswith("hearth-bench-report ")), None)
    if proc.returncode != 0 or report is None:
        raise BenchError(f"wrk failed (exit {proc.returncode}):\n{out}")
    values = dict(item.split("=", 1) for item in report.split()[1:])
    n = {k: float(v) for k, v in values.items()}
    now = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = Round(
        app=app, server=server, index=index,
        requests=int(n["requests"]), duration_s=n["duration_us"] / 1e6, bytes=int(n["bytes"]),
        p50_us=n["p50_us"], p99_us=n["p99_us"], mean_us=n["mean_us"], max_us=n["max_us"],
        errors_connect=int(n["errors_connect"]), errors_read=int(n["errors_read"]),
        errors_write=int(n["errors_write"]), errors_timeout=int(n["errors_timeout"]),
        errors_status=int(n["errors_status"]),
        wrk_cpu_s=(now.ru_utime + now.ru_stime) - (usage.ru_utime + usage.ru_stime),
        wrk_csw=(now.ru_nvcsw - usage.ru_nvcsw, now.ru_nivcsw - usage.ru_nivcsw),
    )
    return r


# ---------------------------------------------------------- system calls
#
# System calls per request, counted in a short round of their own after the
# measured ones (a counter attached to a process slows it down): with
# `perf stat -e raw_syscalls:sys_enter` where the tracepoint is readable
# (root, or perf_event_paranoid -1 and a readable tracefs), else with
# `strace -c -f` (ptrace: any user's own processes, but every system call
# stops the process, so the round runs far slower and batching may
# differ), else not at all.

SYSCALL_EVENT = "raw_syscalls:sys_enter"


def syscall_tool(wanted: str = "auto") -> tuple[str | None, str]:
    """The counter that works here (wanted: auto, perf or strace), and a
    note for the report."""
    if wanted == "strace":
        if shutil.which("strace"):
            return "strace", ("`strace -c -f` (--syscall-tool strace; under strace every system call stops the "
                              "process, so the counting round is slower and may batch differently)")
        return None, "not counted (--syscall-tool strace, no strace)"
    if shutil.which("perf"):
        try:
            probe = subprocess.run(["perf", "stat", "-e", SYSCALL_EVENT, "-x,", "-o", "/dev/null", "--", "true"],
                                   capture_output=True, text=True, timeout=30, check=False)
            if probe.returncode == 0:
                return "perf", f"`perf stat -e {SYSCALL_EVENT}`"
            why = (probe.stderr.strip().splitlines() or ["failed"])[-1]
        except (OSError, subprocess.TimeoutExpired) as e:
            why = str(e)
        perf_note = f"perf cannot count {SYSCALL_EVENT} here ({why})"
    else:
        perf_note = "no perf"
    if wanted == "perf":
        return None, f"not counted ({perf_note})"
    if shutil.which("strace"):
        return "strace", (f"`strace -c -f` ({perf_note}; under strace every system call stops the "
                          "process, so the counting round is slower and may batch differently)")
    return None, f"not counted ({perf_note}, no strace)"


@dataclass
class SyscallCount:
    requests: int
    front: int | None
    """Over the front's processes; None: no front (Workerman) or the count failed."""
    workers: int | None
    """Over every PHP process (masters included)."""
    wrk: int | None
    serving: int
    """How many PHP processes serve requests."""
    failed: int = 0
    """Failed requests of the counting round (not counted as a measured
    round's: a counter slows the server down)."""

    def per_req(self, count: int | None) -> float | None:
        return count / self.requests if count is not None and self.requests else None


def counter_command(tool: str, output: Path) -> list[str]:
    if tool == "perf":
        return ["perf", "stat", "-e", SYSCALL_EVENT, "-x,", "-o", str(output)]
    return ["strace", "-c", "-f", "-q", "-o", str(output)]


def read_count(tool: str, output: Path) -> int | None:
    """The total a counter wrote: perf's CSV line for the event, or the
    calls column of strace -c's total line."""
    try:
        text = output.read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if tool == "perf" and SYSCALL_EVENT in line and not line.startswith("#"):
            value = line.split(",", 1)[0]
            return int(value) if value.isdigit() else None
        fields = line.split()
        if tool == "strace" and fields and fields[-1] == "total" and len(fields) >= 5:
            return int(fields[3]) if fields[3].isdigit() else None
    return None


def count_syscalls(tool: str, server: Server, state: Path, run: Callable[[list[str]], Round]) -> SyscallCount:
    """Attaches a counter to the front's processes and one to the PHP
    processes, runs wrk (under a third counter) through run(wrap), and
    stops the counters with SIGINT, which makes them write their totals."""
    table = proc_table()
    front, workers = server.cpu_groups(table)
    serving = len(server.serving(table))
    counters: dict[str, tuple[subprocess.Popen, Path]] = {}
    try:
        for group, procs in (("front", front), ("workers", workers)):
            if not procs:
                continue
            output = state / f"syscalls-{group}.txt"
            if tool == "perf":
                target = ["-p", ",".join(str(p.pid) for p in procs)]
            else:
                target = [arg for p in procs for arg in ("-p", str(p.pid))]
            counters[group] = (subprocess.Popen([*counter_command(tool, output), *target],
                                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                                stderr=subprocess.DEVNULL, start_new_session=True), output)
        time.sleep(0.5)  # attached before the first request
        wrk_output = state / "syscalls-wrk.txt"
        r = run(counter_command(tool, wrk_output) + (["--"] if tool == "perf" else []))
    finally:
        for proc, _ in counters.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    found = {group: read_count(tool, output) for group, (_, output) in counters.items()}
    return SyscallCount(requests=r.requests, front=found.get("front"), workers=found.get("workers"),
                        wrk=read_count(tool, wrk_output), serving=serving, failed=r.failed)


# ------------------------------------------------------------- app's own time


@dataclass
class LoopRun:
    wall_us: float
    cpu_us: float
    requests: int
    body: bytes


def app_loop(app: App, php_cgi: str) -> LoopRun:
    """bench/php/app-loop.php for this app, in php-cgi (the SAPI and php.ini
    of Hearth's workers): the app's own time per request, booted once,
    called in a loop, with no HTTP and no worker protocol."""
    env = {**os.environ, "BENCH_LOOP_APP": app.name, "BENCH_LOOP_N": str(app.loop_requests),
           "BENCH_LOOP_PATH": app.path}
    try:
        out = subprocess.run([php_cgi, "-q", str(APP_LOOP)], env=env, capture_output=True, text=True,
                             timeout=120, stdin=subprocess.DEVNULL, cwd=ROOT, check=False)
    except subprocess.TimeoutExpired:
        raise BenchError(f"{APP_LOOP.relative_to(ROOT)} for {app.name} did not finish within 120 s") from None
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("{")), None)
    if out.returncode != 0 or line is None:
        raise BenchError(f"{APP_LOOP.relative_to(ROOT)} for {app.name} failed (exit {out.returncode}):\n"
                         f"{out.stdout}{out.stderr}")
    data = json.loads(line)
    return LoopRun(wall_us=float(data["wall_us"]), cpu_us=float(data["cpu_us"]), requests=int(data["requests"]),
                   body=str(data["body"]).encode())


def worker_loop(app: App, args: argparse.Namespace, server: str, env: dict[str, str]) -> float:
    """bench/php/worker-loop.py for this app's worker: one Hearth worker,
    started as `hearth serve` starts it, fed the benchmark's request
    ahead of time through its channel, with no front and no HTTP, so it
    never waits for a request. Its CPU µs per request."""
    n = min(max(app.loop_requests, 20000), 100000)
    cmd = [sys.executable, str(WORKER_LOOP), str(app.worker), "--path", app.path, "-n", str(n),
           "--hearth", str(args.hearth)]
    if server == HEARTH_NO_EXT:
        cmd.append("--hearth-arg=" + "=".join(NO_EXT_ARGS))
    try:
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300,
                             stdin=subprocess.DEVNULL, cwd=ROOT, check=False)
    except subprocess.TimeoutExpired:
        raise BenchError(f"{WORKER_LOOP.relative_to(ROOT)} for {app.name} did not finish within 300 s") from None
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("{")), None)
    if out.returncode != 0 or line is None:
        raise BenchError(f"{WORKER_LOOP.relative_to(ROOT)} for {app.name} ({server}) failed "
                         f"(exit {out.returncode}):\n{out.stdout}{out.stderr}")
    return float(json.loads(line)["cpu_us"])


# ------------------------------------------------------------ verification


def verify(app: App, ports: dict[str, int], cookies: dict[str, str]) -> list[str]:
    """Problems found before measuring; empty when both servers agree.
    Each server is sent its cookies, if any (App.cookie)."""
    problems = []
    checks = (Check(app.path, 200, same_body=True),) + app.checks
    for check in checks:
        answers = {}
        for server, port in ports.items():
            try:
                answers[server] = fetch(port, check.path, cookie=cookies.get(server))
            except (OSError, http.client.HTTPException) as e:
                problems.append(f"{app.name}: GET {check.path} on {server}: {e}")
        if len(answers) != len(ports):
            continue
        for server, (status, _, _) in answers.items():
            if status != check.status:
                problems.append(f"{app.name}: GET {check.path} on {server}: status {status}, expected {check.status}")
        # A page that links to itself names the server's own address.
        bodies = {server: app.normalize(body).replace(f"127.0.0.1:{ports[server]}".encode(), b"127.0.0.1:PORT")
                  for server, (_, _, body) in answers.items()}
        if check.same_body and len(set(bodies.values())) > 1:
            first, *others = bodies.values()
            at = next((i for i, pair in enumerate(zip(first, others[0])) if pair[0] != pair[1]),
                      min(len(first), len(others[0])))
            shown = ", ".join(f"{s}: {b[max(0, at - 60):at + 60]!r} ({len(b)} bytes)" for s, b in bodies.items())
            problems.append(f"{app.name}: GET {check.path}: the bodies differ from byte {at}: {shown}")
        types = {server: headers.get("content-type", "") for server, (_, headers, _) in answers.items()}
        if len(set(types.values())) > 1:
            print(f"  note: GET {check.path}: Content-Type differs: {types}", file=sys.stderr)
        status = "/".join(str(a[0]) for a in answers.values())
        print(f"  checked GET {check.path}: status {status}"
              + (", same body" if check.same_body and len(set(bodies.values())) == 1 else "")
              + f" ({len(answers[HEARTH][2])} bytes)")
    return problems


# ----------------------------------------------------------------- running


def site_copy(app: App, directory: Path) -> Path:
    """A fresh copy of a classic or framework app's site, made by its setup
    script in directory; its document root (classic) or the app's
    directory (framework)."""
    try:
        result = subprocess.run([str(app.site_setup), str(directory)], stdin=subprocess.DEVNULL,
                                capture_output=True, text=True, start_new_session=True, timeout=300)
    except subprocess.TimeoutExpired:
        raise BenchError(f"{app.site_setup.relative_to(ROOT)} {directory} did not finish within 300s") from None
    lines = result.stdout.strip().splitlines()
    if result.returncode != 0 or not lines:
        raise BenchError(f"{app.site_setup.relative_to(ROOT)} {directory} failed (exit {result.returncode}):\n"
                         f"{result.stdout}{result.stderr}")
    return Path(lines[-1])


def bench_app(app: App, args: argparse.Namespace, hearth_env: dict[str, str],
              state_root: Path) -> AppResult:
    contenders = app.contenders(args)
    state = Path(tempfile.mkdtemp(prefix=f"{app.name}-", dir=state_root))
    # A classic or framework app's site, one fresh copy per server (each
    # writes its own sessions, caches and pages); a worker app's files,
    # shared.
    roots: dict[str, Path | None] = {}
    sites: list[Path] = []
    if app.site_setup:
        if app.classic:
            print(f"\n== {app.name}: hearth serve --root (classic mode) vs nginx + php-fpm, each on a copy "
                  f"made by {app.site_setup.relative_to(ROOT)}, GET {app.path}")
        else:
            print(f"\n== {app.name}: hearth serve --config APP/{app.hearth_config} vs php-fpm "
                  f"APP/public/{app.script}, each on a copy APP made by {app.site_setup.relative_to(ROOT)}, "
                  f"GET {app.path}" + (" (with the cookies of a first visit)" if app.cookie else ""))
        try:
            for server in contenders:
                sites.append(state / f"site-{server.replace(' ', '-')}")
                roots[server] = site_copy(app, sites[-1])
        except BaseException:
            stop_sites(app, sites)
            raise
    else:
        print(f"\n== {app.name}: hearth {app.worker.relative_to(ROOT)} vs php-fpm "
              f"{(app.docroot / app.script).relative_to(ROOT)}, GET {app.path}")
    result = AppResult(app)
    if app.loop_requests and args.loop_runs:
        # The first run also fills a framework app's cache, which every
        # server then shares.
        app_loop(app, args.php_cgi)
        for _ in range(args.loop_runs):
            result.loops.append(app_loop(app, args.php_cgi))
        print(f"  app's own time in a warm loop ({APP_LOOP.relative_to(ROOT)}, php-cgi, "
              f"{app.loop_requests} requests, {args.loop_runs} runs): "
              + ", ".join(f"{run.cpu_us:.2f}" for run in result.loops) + " µs CPU per request")
        if not app.classic and not app.framework:
            for server in (s for s in contenders if s in (HEARTH, HEARTH_NO_EXT)):
                runs = [worker_loop(app, args, server, hearth_env) for _ in range(args.loop_runs)]
                result.worker_loops[server] = runs
                print(f"  {server} worker alone ({WORKER_LOOP.relative_to(ROOT)}, requests fed ahead, "
                      f"{args.loop_runs} runs): " + ", ".join(f"{us:.2f}" for us in runs) + " µs CPU per request")
    ports = dict(zip(contenders, free_ports(len(contenders))))
    servers: dict[str, Server] = {}
    for server, port in ports.items():
        if server == WORKERMAN:
            servers[server] = WorkermanServer(args.workerman_dir, app, port, args.workers, state)
        elif server == FPM:
            docroot = roots[server] / "public" if app.framework else roots.get(server) or app.docroot
            servers[server] = FpmServer(app, port, args.workers, state, docroot,
                                        env={"NGINX_SITE": "classic"} if app.classic else None)
        else:
            # Each Hearth its own state directory, for its own hearth.log.
            own = state / ("hearth-no-ext" if server == HEARTH_NO_EXT else "hearth")
            own.mkdir()
            servers[server] = HearthServer(args.hearth, app, port, args.workers, own,
                                           extra_args=NO_EXT_ARGS if server == HEARTH_NO_EXT else (),
                                           site_root=roots.get(server) if app.classic else None,
                                           config=roots[server] / app.hearth_config if app.framework else None)
    try:
        for server in contenders:
            if isinstance(servers[server], HearthServer):
                servers[server].start(hearth_env)
            else:
                servers[server].start()
            print(f"  {server} on 127.0.0.1:{ports[server]}")
        # A returning visitor's cookies, one set per server (each has its
        # own sessions), sent with every request from here on.
        cookies = {server: first_visit_cookie(port, app.path) for server, port in ports.items()} if app.cookie else {}
        problems = verify(app, ports, cookies)
        if result.loops:
            # The loop must have measured the response the servers give.
            served = app.normalize(fetch(ports[contenders[0]], app.path)[2])
            if app.normalize(result.loops[0].body) != served:
                problems.append(f"{app.name}: {APP_LOOP.relative_to(ROOT)} answered {result.loops[0].body[:120]!r}, "
                                f"the servers {served[:120]!r}")
        if problems:
            raise VerificationFailed(problems)
        if not app.classic:
            check_extensions(servers, result)

        def one(server: str, index: int, duration: int) -> Round:
            if not servers[server].alive():
                raise BenchError(f"{server} is no longer running")
            before = cpu_sample(servers[server])
            r = run_wrk(args.wrk, ports[server], app.path, app.connections or args.connections, duration,
                        app.name, server, index, cookie=cookies.get(server))
            after = cpu_sample(servers[server])
            r.front_cpu_s = cpu_seconds(before, after, "front")
            r.workers_cpu_s = cpu_seconds(before, after, "workers")
            r.front_csw = csw_delta(before, after, "front")
            r.workers_csw = csw_delta(before, after, "workers")
            rss_sample(servers[server], r)
            label = "warm-up" if index == 0 else f"round {index}/{args.rounds}"
            print(f"  {label:<12} {server:<15} {r.rps:>8.0f} req/s  p50 {r.p50_us / 1000:6.2f} ms"
                  f"  p99 {r.p99_us / 1000:6.2f} ms  failed {r.failed}"
                  f"  CPU µs/req: front {r.front_us_per_req:5.1f}, workers {r.workers_us_per_req:5.1f}"
                  f", wrk {r.wrk_us_per_req:5.1f}"
                  f"  RSS MiB: front {r.front_rss_kib / 1024:5.1f}, PHP {r.workers_rss_kib / 1024:6.1f}",
                  flush=True)
            return r

        for server in contenders:
            result.warmups.append(one(server, 0, args.warmup))
        for index in range(1, args.rounds + 1):
            for server in contenders:
                result.rounds.append(one(server, index, args.duration))
        if args.syscall_tool:
            for server in contenders:
                if not servers[server].alive():
                    raise BenchError(f"{server} is no longer running")
                own = state / f"syscalls-{server.replace(' ', '-').replace('(', '').replace(')', '')}"
                own.mkdir()
                count = count_syscalls(
                    args.syscall_tool, servers[server], own,
                    lambda wrap, server=server: run_wrk(
                        args.wrk, ports[server], app.path, app.connections or args.connections,
                        args.syscall_seconds, app.name, server, -1, cookie=cookies.get(server), wrap=wrap))
                result.syscalls[server] = count
                shown = {k: count.per_req(getattr(count, k)) for k in ("front", "workers", "wrk")}
                print(f"  syscalls     {server:<15} {count.requests} requests; per request: "
                      + ", ".join(f"{k} {'—' if v is None else f'{v:.2f}'}" for k, v in shown.items())
                      + (f"; {count.failed} failed" if count.failed else ""),
                      flush=True)
        return result
    finally:
        for server in reversed(contenders):
            if server in servers:
                servers[server].stop()
        stop_sites(app, sites)


def stop_sites(app: App, sites: list[Path]) -> None:
    """Ends what the setup script started for each copy (its database)."""
    if not app.site_stop:
        return
    for site in sites:
        subprocess.run([str(app.site_setup), "stop", str(site)], stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=120)


def check_extensions(servers: dict[str, Server], result: AppResult) -> None:
    """Which runtime each Hearth contender's workers run, from their memory
    maps: without the extension built, hearth and hearth (no ext) would
    measure the same thing and the comparison would say nothing."""
    table = proc_table()
    for server, running in servers.items():
        if not isinstance(running, HearthServer):
            continue
        _, workers = running.cpu_groups(table)
        found = hearth_extension([w.pid for w in workers])
        result.extensions[server] = found
        print(f"  {server}: workers run "
              + (f"with the Hearth extension {found}" if found else "without the Hearth extension"))
        if server == HEARTH and not found:
            print("warning: hearth's workers did not load the Hearth extension (build it with "
                  "`make ext`); hearth measures the pure-PHP fallback too", file=sys.stderr)
        if server == HEARTH_NO_EXT and found:
            print(f"warning: hearth (no ext)'s workers loaded {found} despite "
                  f"{' '.join(NO_EXT_ARGS)} (a php.ini extension= line?)", file=sys.stderr)


class VerificationFailed(Exception):
    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


# ----------------------------------------------------------------- report


def find_fpm() -> str:
    for name in ("php-fpm8.2", "php-fpm8.3", "php-fpm8.1", "php-fpm"):
        for directory in ("/usr/sbin", "/usr/bin", "/usr/local/sbin"):
            if os.access(f"{directory}/{name}", os.X_OK):
                return f"{directory}/{name}"
    return "php-fpm"


def machine(args: argparse.Namespace) -> dict[str, str]:
    php_cgi = shutil.which("php-cgi") or "php-cgi"
    return {
        "CPUs (nproc)": str(len(os.sched_getaffinity(0))),
        "CPU model": cpu_model(),
        "Kernel": f"{platform.system()} {platform.release()}",
        "PHP (Hearth workers)": f"{first_line([php_cgi, '-v'])} ({php_cgi})",
        "PHP (php-fpm)": f"{first_line([find_fpm(), '-v'])} ({find_fpm()})",
        "nginx": first_line([shutil.which("nginx") or "/usr/sbin/nginx", "-v"]),
        "Hearth": f"{first_line([str(args.hearth), '--version'])} ({args.hearth}, built "
                  f"{datetime.datetime.fromtimestamp(args.hearth.stat().st_mtime).astimezone():%Y-%m-%d %H:%M %Z}; "
                  f"source tree at git {git_revision()})",
        "wrk": first_line([args.wrk, "--version"]),
        "Workerman": args.workerman_note,
        **({"PHP (Workerman)": f"{first_line([php_cli(), '-v'])} ({php_cli()}), `-d opcache.enable_cli=1`, "
                               f"event loop {'Event (ext-event)' if 'event' in php_modules() else 'Select (no ext-event)'}"}
           if args.workerman_dir else {}),
        "System calls counted with": args.syscall_note,
    }


def newer_sources(binary: Path) -> list[Path]:
    """Rust sources changed after the binary was built: it may be stale."""
    built = binary.stat().st_mtime
    sources = [ROOT / "Cargo.toml", ROOT / "Cargo.lock", *(ROOT / "crates").rglob("*.rs"),
               *(ROOT / "crates").rglob("Cargo.toml")]
    return [p for p in sources if p.exists() and p.stat().st_mtime > built]


def fmt_ms(us: float) -> str:
    return f"{us / 1000:.2f}"


def fmt_ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}×" if b else "n/a"


def fmt_us(us: float) -> str:
    return f"{us:.1f}"


def fmt_mib(kib: float) -> str:
    return f"{kib / 1024:.1f}"


def label(server: str, app: App) -> str:
    return "Hearth (classic mode)" if app.classic and server == HEARTH else SERVER_LABELS[server]


def summary_table(results: list[AppResult]) -> str:
    lines = [
        "| app | URL | server | req/s | p50 (ms) | p99 (ms) | failed requests | front CPU µs/req | workers CPU µs/req "
        "| front RSS (MiB) | PHP RSS (MiB) | PHP anon (MiB) |",
        "|-----|-----|--------|------:|---------:|---------:|----------------:|-----------------:|-------------------:"
        "|----------------:|--------------:|---------------:|",
    ]
    for res in results:
        med = {}
        for server in CONTENDERS:
            rounds = res.measured(server)
            if not rounds:
                continue  # hearth (no ext) under --no-fallback
            med[server] = dict(
                rps=statistics.median(r.rps for r in rounds),
                p50=statistics.median(r.p50_us for r in rounds),
                p99=statistics.median(r.p99_us for r in rounds),
                front=statistics.median(r.front_us_per_req for r in rounds),
                workers=statistics.median(r.workers_us_per_req for r in rounds),
                front_rss=statistics.median(r.front_rss_kib for r in rounds),
                workers_rss=statistics.median(r.workers_rss_kib for r in rounds),
                workers_anon=statistics.median(r.workers_anon_kib for r in rounds),
            )
            m = med[server]
            failed = sum(r.failed for r in rounds)
            lines.append(f"| {res.app.name} | `{res.app.path}` | {label(server, res.app)} | {m['rps']:.0f} "
                         f"| {fmt_ms(m['p50'])} | {fmt_ms(m['p99'])} | {failed} "
                         f"| {fmt_us(m['front'])} | {fmt_us(m['workers'])} "
                         f"| {fmt_mib(m['front_rss'])} | {fmt_mib(m['workers_rss'])} | {fmt_mib(m['workers_anon'])} |")
        h, f = med[HEARTH], med[FPM]
        if WORKERMAN in med:
            w = med[WORKERMAN]
            lines.append(f"| {res.app.name} | `{res.app.path}` | **Hearth / Workerman** "
                         f"| **{fmt_ratio(h['rps'], w['rps'])}** "
                         f"| {fmt_ratio(h['p50'], w['p50'])} | {fmt_ratio(h['p99'], w['p99'])} | "
                         f"| | {fmt_ratio(h['workers'], w['workers'])} "
                         f"| | {fmt_ratio(h['workers_rss'], w['workers_rss'])} "
                         f"| {fmt_ratio(h['workers_anon'], w['workers_anon'])} |")
        lines.append(f"| {res.app.name} | `{res.app.path}` | **Hearth / php-fpm** | **{fmt_ratio(h['rps'], f['rps'])}** "
                     f"| {fmt_ratio(h['p50'], f['p50'])} | {fmt_ratio(h['p99'], f['p99'])} | "
                     f"| {fmt_ratio(h['front'], f['front'])} | {fmt_ratio(h['workers'], f['workers'])} "
                     f"| {fmt_ratio(h['front_rss'], f['front_rss'])} | {fmt_ratio(h['workers_rss'], f['workers_rss'])} "
                     f"| {fmt_ratio(h['workers_anon'], f['workers_anon'])} |")
        if HEARTH_NO_EXT in med:
            n = med[HEARTH_NO_EXT]
            lines.append(f"| {res.app.name} | `{res.app.path}` | **Hearth / Hearth (no ext)** "
                         f"| **{fmt_ratio(h['rps'], n['rps'])}** | | | | "
                         f"| **{fmt_ratio(h['workers'], n['workers'])}** | | | |")
    return "\n".join(lines)


def fmt_opt(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def breakdown_table(results: list[AppResult]) -> str:
    """Where a request's CPU goes, per server: medians over the measured
    rounds, the app's own time from the warm loop, system calls from the
    counting round."""
    lines = [
        "| app | server | req/s | front µs | PHP µs | wrk µs | sum µs | app alone µs | PHP − app µs "
        "| worker alone µs "
        "| front cs/req (vol/invol) | PHP cs/req (vol/invol) | wrk cs/req (vol/invol) "
        "| front syscalls/req | PHP syscalls/req | wrk syscalls/req |",
        "|-----|--------|------:|---------:|-------:|-------:|-------:|-------------:|-------------:|-------------:"
        "|:---:|:---:|:---:|------:|------:|------:|",
    ]
    for res in results:
        app_us = statistics.median(run.cpu_us for run in res.loops) if res.loops else None
        for server in CONTENDERS:
            rounds = res.measured(server)
            if not rounds:
                continue
            front = statistics.median(r.front_us_per_req for r in rounds)
            php = statistics.median(r.workers_us_per_req for r in rounds)
            wrk = statistics.median(r.wrk_us_per_req for r in rounds)

            def csw(get, rounds=rounds) -> str:
                vol = statistics.median(r.per_req(get(r)[0]) for r in rounds)
                invol = statistics.median(r.per_req(get(r)[1]) for r in rounds)
                return f"{vol:.2f} / {invol:.2f}"

            count = res.syscalls.get(server)
            sys = [count.per_req(getattr(count, k)) if count else None for k in ("front", "workers", "wrk")]
            no_front = server == WORKERMAN
            alone = res.worker_loops.get(server)
            lines.append(
                f"| {res.app.name} | {label(server, res.app)} | {statistics.median(r.rps for r in rounds):.0f} "
                f"| {'—' if no_front else fmt_us(front)} | {fmt_us(php)} | {fmt_us(wrk)} | {fmt_us(front + php + wrk)} "
                f"| {fmt_opt(app_us)} | {fmt_opt(php - app_us if app_us is not None else None)} "
                f"| {fmt_opt(statistics.median(alone) if alone else None)} "
                f"| {'—' if no_front else csw(lambda r: r.front_csw)} | {csw(lambda r: r.workers_csw)} "
                f"| {csw(lambda r: r.wrk_csw)} "
                f"| {'—' if no_front else fmt_opt(sys[0], 2)} | {fmt_opt(sys[1], 2)} | {fmt_opt(sys[2], 2)} |")
    return "\n".join(lines)


def memory_table(results: list[AppResult]) -> str:
    lines = [
        "| app | server | PHP processes serving | RSS per PHP worker (MiB) | PHP RSS, all (MiB) | front RSS (MiB) "
        "| whole server RSS (MiB) | PSS per PHP worker (MiB) | whole server PSS (MiB) |",
        "|-----|--------|------:|------:|------:|------:|------:|------:|------:|",
    ]
    for res in results:
        for server in CONTENDERS:
            rounds = res.measured(server)
            if not rounds:
                continue
            per = statistics.median(r.worker_rss_kib for r in rounds)
            php = statistics.median(r.workers_rss_kib for r in rounds)
            front = statistics.median(r.front_rss_kib for r in rounds)
            total = statistics.median(r.workers_rss_kib + r.front_rss_kib for r in rounds)
            serving = res.syscalls[server].serving if server in res.syscalls else "—"
            pss = statistics.median(r.worker_pss_kib for r in rounds)
            pss_total = statistics.median(r.server_pss_kib for r in rounds)
            lines.append(f"| {res.app.name} | {label(server, res.app)} | {serving} | {fmt_mib(per)} | {fmt_mib(php)} "
                         f"| {'—' if server == WORKERMAN else fmt_mib(front)} | {fmt_mib(total)} "
                         f"| {fmt_mib(pss)} | {fmt_mib(pss_total)} |")
    return "\n".join(lines)


def loop_table(results: list[AppResult]) -> str:
    lines = ["| app | requests per run | CPU µs/req, each run | wall µs/req, each run |", "|---|---:|---|---|"]
    for res in results:
        if res.loops:
            lines.append(f"| {res.app.name} | {res.loops[0].requests} "
                         f"| {', '.join(f'{run.cpu_us:.2f}' for run in res.loops)} "
                         f"| {', '.join(f'{run.wall_us:.2f}' for run in res.loops)} |")
    return "\n".join(lines) if len(lines) > 2 else "(no app of this run has a warm loop)"


def raw_table(results: list[AppResult]) -> str:
    lines = [
        "| app | round | server | req/s | p50 (ms) | p99 (ms) | mean (ms) | max (ms) "
        "| front CPU µs/req | workers CPU µs/req | wrk CPU µs/req | front RSS (MiB) | PHP RSS (MiB) | PHP anon (MiB) | requests "
        "| seconds | bytes/req | connect/read/write/timeout errors | status ≥ 400 |",
        "|-----|------:|--------|------:|---------:|---------:|----------:|---------:"
        "|-----------------:|-------------------:|---------------:|----------------:|--------------:|---------------:|---------:"
        "|--------:|----------:|:---:|-------------:|",
    ]
    for res in results:
        for r in res.warmups + res.rounds:
            per = r.bytes / r.requests if r.requests else 0
            lines.append(
                f"| {res.app.name} | {'warm-up' if r.index == 0 else r.index} | {r.server} | {r.rps:.0f} "
                f"| {fmt_ms(r.p50_us)} | {fmt_ms(r.p99_us)} | {fmt_ms(r.mean_us)} | {fmt_ms(r.max_us)} "
                f"| {fmt_us(r.front_us_per_req)} | {fmt_us(r.workers_us_per_req)} | {fmt_us(r.wrk_us_per_req)} "
                f"| {fmt_mib(r.front_rss_kib)} | {fmt_mib(r.workers_rss_kib)} | {fmt_mib(r.workers_anon_kib)} "
                f"| {r.requests} | {r.duration_s:.2f} | {per:.0f} "
                f"| {r.errors_connect}/{r.errors_read}/{r.errors_write}/{r.errors_timeout} | {r.errors_status} |")
    return "\n".join(lines)


def extensions_seen(results: list[AppResult]) -> str:
    """What each Hearth contender's workers had loaded, over all apps."""
    parts = []
    for server in CONTENDERS:
        seen = sorted({res.extensions[server] or "none" for res in results if server in res.extensions})
        if seen:
            parts.append(f"{server}: {', '.join(f'`{s}`' if s != 'none' else s for s in seen)}")
    return "; ".join(parts)


def write_report(results: list[AppResult], args: argparse.Namespace, info: dict[str, str],
                 started: datetime.datetime, load_before: str, stripped: list[str]) -> str:
    wrk_line = (f"`wrk -t1 -c{args.connections} -d{args.duration}s -s bench/wrk/report.lua`, "
                f"{args.warmup}s warm-up per server, then {args.rounds} round{'' if args.rounds == 1 else 's'} per server, interleaved "
                f"{', '.join(args.contenders)}, {args.contenders[0]}, ..."
                + "".join(f"; {res.app.name} with -c{res.app.connections}"
                          for res in results if res.app.connections)
                + "".join(f"; {res.app.name} with `-H 'Cookie: ...'`, the cookies each server set on a first "
                          "visit (one returning visitor)" for res in results if res.app.cookie))
    contenders = ["hearth: `hearth serve`, its workers load the Hearth PHP extension"]
    if HEARTH_NO_EXT in args.contenders:
        contenders.append(f"hearth (no ext): `hearth serve {' '.join(NO_EXT_ARGS)}`, the PHP library's "
                          "pure-PHP fallback, what runs where the extension is not installed")
    contenders.append("php-fpm: nginx + php-fpm, Debian's defaults")
    if WORKERMAN in args.contenders:
        contenders.append(f"workerman: Workerman from {args.workerman_dir} through `bench/workerman/server.php` "
                          f"(`count = {args.workers}`, its PHP processes accept and "
                          "parse HTTP themselves, no front), for the apps it serves ("
                          + ", ".join(res.app.name for res in results if res.app.workerman) + ")")
    framework = [res.app for res in results if res.app.framework]
    if framework:
        contenders.append("for the framework apps (" + ", ".join(a.name for a in framework) + "), hearth is "
                          f"`hearth serve --config APP/hearth.toml --workers {args.workers}` (the example's own "
                          "settings) and php-fpm serves APP/public/index.php as the example's nginx.conf does, "
                          "each on a fresh copy APP of the example deployed for production by "
                          + ", ".join(f"`{a.site_setup.relative_to(ROOT)}`" for a in framework))
    classic = [res.app for res in results if res.app.classic]
    if classic:
        contenders.append("for the classic apps (" + ", ".join(a.name for a in classic) + "), hearth is "
                          f"`hearth serve --root SITE --workers {args.workers}` (classic mode: its own php-fpm "
                          f"pool, `pm = static`, {args.workers} children, Debian's fpm php.ini) and php-fpm is "
                          "nginx-fpm.sh with `NGINX_SITE=classic` (Debian's snippets/fastcgi-php.conf), each on "
                          "a fresh copy of the site made by "
                          + ", ".join(f"`{a.site_setup.relative_to(ROOT)}`" for a in classic))
    header = [
        "# HTTP benchmark: Hearth vs nginx + php-fpm and Workerman",
        "",
        f"Run {started:%Y-%m-%d %H:%M:%S %Z} with `python3 bench/http.py {' '.join(args.argv)}`".rstrip() + ".",
        "",
        *(f"- {k}: {v}" for k, v in info.items()),
        f"- wrk parameters: {wrk_line}",
        f"- N = {args.workers}: `hearth serve --workers {args.workers} --log-level warn`; "
        f"php-fpm `pm = static`, `pm.max_children = {args.workers}` behind nginx (`worker_processes auto`); "
        "access logs off on both",
        f"- Contenders: {'; '.join(contenders)}",
        f"- Hearth extension mapped by the workers (/proc/PID/maps): {extensions_seen(results)}",
        f"- Load average (1/5/15 min) before: {load_before}, after: {loadavg()}",
    ]
    if stripped:
        header.append(f"- Removed from Hearth's environment: {', '.join(stripped)}")
    text = "\n".join(header) + (
        "\n\n## Medians over rounds\n\n"
        "req/s: higher is better; latencies and CPU: lower is better. The ratio rows divide Hearth's "
        "median by php-fpm's, and by Hearth's without its extension (above 1× is faster for req/s, "
        "below 1× is faster for latency or cheaper in CPU). "
        "Failed requests: socket errors plus responses with status ≥ 400, over the measured rounds.\n\n"
        "CPU µs/req: user + system CPU time from /proc/PID/stat, read before and after each round, "
        "divided by the round's requests. Front: the hearth process (all its threads), or nginx's "
        "master and workers. Workers: the PHP processes, Hearth's php-cgi workers or php-fpm's master "
        "and pool. wrk's own CPU is in neither. req/s says how fast each server answers on this "
        "machine, where wrk, the front and the workers compete for the same cores; CPU µs/req says "
        "what each request costs the machine.\n\n"
        "RSS (MiB): resident memory (VmRSS from /proc/PID/status) at the end of each round, summed over "
        "the group's processes, median over the rounds. Front: the hearth process, or nginx's master and "
        "workers. PHP: Hearth's php-cgi workers, or in classic mode the php-fpm master and children Hearth "
        "started; php-fpm's master and children behind nginx. Pages shared between processes (PHP's code, "
        "OPcache's shared memory) count once per process, as `ps` shows them. PHP anon: the part of PHP RSS "
        "that is the processes' own heaps and stacks (RssAnon), without mapped files and shared memory: a "
        "php-fpm master that daemonized (nginx-fpm.sh's) no longer maps the php-fpm binary's pages its "
        "start touched, one in the foreground (Hearth's) does, which counts in RSS but costs no memory the "
        "page cache does not already hold.\n\n"
        + summary_table(results)
        + "\n\n## Per-request breakdown\n\n"
        "CPU µs per request, medians over the measured rounds: front (Hearth's process, or nginx; Workerman has "
        "none), PHP (every PHP process of the server), wrk (the load generator, from its rusage), and their sum. "
        "App alone: the median CPU µs per request of `bench/php/app-loop.php`, the same request handled by the "
        "app booted once in one php-cgi process, in a loop, without HTTP (see the warm loop table); PHP − app is "
        "what the server's PHP side adds to it. Worker alone (Hearth only): the median CPU µs per request of one "
        "Hearth worker, started as `hearth serve` starts it, fed the same request through its channel ahead of "
        "time by `bench/php/worker-loop.py`, with no front, no HTTP and never a wait for a request; PHP µs minus "
        "worker alone is what waiting, waking and sharing the CPUs with the front and wrk cost the workers. cs/req: voluntary / involuntary context switches per request, "
        "summed over every thread of every process of the group (/proc/PID/task/TID/status), medians over the "
        "rounds. Syscalls/req: system calls of the group per request, counted in one extra round per server "
        f"of {args.syscall_seconds} s with {args.syscall_note}, after the measured rounds; PHP counts every PHP "
        "process, so it is also what one worker makes per request it serves.\n\n"
        + breakdown_table(results)
        + "\n\n### The app alone, in a warm loop\n\n"
        + loop_table(results)
        + "\n\n## Memory\n\n"
        "VmRSS at the end of each round, medians over the rounds. RSS per PHP worker: the mean over the PHP "
        "processes that serve requests (Hearth's php-cgi workers, php-fpm's children, Workerman's children; "
        "masters left out). PHP RSS, all: every PHP process, masters included. Whole server: front and PHP "
        "together (Hearth and its workers; nginx's master and workers with php-fpm's master and children; "
        "Workerman's master and children). Shared pages count once per process in RSS, as `ps` shows them. PSS "
        "(/proc/PID/smaps_rollup) divides each shared page among the processes that map it: the whole "
        "server's PSS is the memory it holds, without counting PHP's code or OPcache's shared memory twice.\n\n"
        + memory_table(results)
        + "\n\n## Every round\n\n"
        + raw_table(results)
        + "\n"
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    dated = RESULTS / f"http-{started:%Y-%m-%d-%H%M%S}.md"
    dated.write_text(text)
    (RESULTS / "http-latest.md").write_text(text)
    return str(dated.relative_to(ROOT))


# -------------------------------------------------------------------- main


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--apps", default="hello,symfony-micro,slim,symfony,laravel,dokuwiki,wordpress",
                   help="comma-separated apps: %s (default: %%(default)s)" % ", ".join(APPS))
    p.add_argument("--rounds", type=int, default=5, help="measured rounds per server (default: %(default)s)")
    p.add_argument("--duration", type=int, default=10, help="seconds per round (default: %(default)s)")
    p.add_argument("--warmup", type=int, default=3, help="seconds of warm-up per server (default: %(default)s)")
    p.add_argument("--connections", type=int, default=64, help="wrk connections (default: %(default)s)")
    p.add_argument("--workers", type=int, default=2,
                   help="Hearth workers and php-fpm pm.max_children (default: %(default)s)")
    p.add_argument("--hearth", type=Path, default=ROOT / "target" / "release" / "hearth",
                   help="hearth binary (default: target/release/hearth)")
    p.add_argument("--wrk", default="wrk", help="wrk binary (default: %(default)s)")
    p.add_argument("--no-fallback", action="store_true",
                   help="skip hearth (no ext), Hearth with --php-extension off")
    p.add_argument("--workerman", metavar="DIR",
                   help=f"Workerman's release directory (with src/), or `none` to skip it (default: "
                        f"${WORKERMAN_ENV}, else ../shared/peers/{WORKERMAN_RELEASE} beside the checkout)")
    p.add_argument("--loop-runs", type=int, default=3,
                   help="runs of bench/php/app-loop.php per app, the app's own time (0 skips; default: %(default)s)")
    p.add_argument("--syscall-seconds", type=int, default=3,
                   help="seconds of the round per server that counts system calls (0 skips; default: %(default)s)")
    p.add_argument("--syscall-tool", choices=("auto", "perf", "strace"), default="auto",
                   help="what counts system calls: perf where it can, else strace (default: %(default)s)")
    args = p.parse_args(argv)
    args.argv = argv
    args.workerman_dir, args.workerman_note = find_workerman(args.workerman)
    args.contenders = tuple(c for c in CONTENDERS
                            if not (args.no_fallback and c == HEARTH_NO_EXT)
                            and not (c == WORKERMAN and args.workerman_dir is None))
    args.php_cgi = shutil.which("php-cgi") or "php-cgi"
    if args.loop_runs < 0 or args.syscall_seconds < 0:
        p.error("--loop-runs and --syscall-seconds must be 0 or more")
    args.syscall_tool, args.syscall_note = syscall_tool(args.syscall_tool) if args.syscall_seconds else (None, "skipped (--syscall-seconds 0)")
    names = [n.strip() for n in args.apps.split(",") if n.strip()]
    unknown = [n for n in names if n not in APPS]
    if unknown or not names:
        p.error(f"--apps: unknown app(s) {', '.join(unknown) or '(none given)'}; known: {', '.join(APPS)}")
    args.app_list = [APPS[n] for n in names]
    for name in ("rounds", "duration", "warmup", "connections", "workers"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be at least 1")
    args.hearth = args.hearth.resolve()
    if not os.access(args.hearth, os.X_OK):
        p.error(f"--hearth: {args.hearth} is not an executable (build it with `cargo build --release`)")
    if shutil.which(args.wrk) is None:
        p.error(f"--wrk: {args.wrk} not found (apt-get install wrk)")
    return args


class Interrupted(Exception):
    """SIGTERM or SIGHUP: unwinds like Ctrl-C so every server gets stopped."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def on_signal(signum, frame):
    raise Interrupted(signum)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)

    hearth_env = {k: v for k, v in os.environ.items() if not k.startswith(HEARTH_ENV_PREFIXES)}
    stripped = sorted(k for k in os.environ if k.startswith(HEARTH_ENV_PREFIXES))
    if stripped:
        print(f"note: running Hearth without {', '.join(stripped)} from the environment", file=sys.stderr)

    started = datetime.datetime.now().astimezone()
    load_before = loadavg()
    info = machine(args)
    print("HTTP benchmark: Hearth vs nginx + php-fpm and Workerman")
    if args.workerman_dir is None:
        print(f"note: Workerman {args.workerman_note}", file=sys.stderr)
    for k, v in info.items():
        print(f"  {k}: {v}")
    print(f"  load average: {load_before}")
    try:
        if float(load_before.split()[0]) > 0.5:
            print("warning: the machine is busy (1-minute load average above 0.5); "
                  "results will be noisy", file=sys.stderr)
    except ValueError:
        pass

    stale = newer_sources(args.hearth)
    if stale:
        print(f"warning: {len(stale)} Rust source file(s) changed after {args.hearth} was built "
              f"(e.g. {stale[0].relative_to(ROOT)}); `make bench` rebuilds it first", file=sys.stderr)

    results: list[AppResult] = []
    state_root = Path(tempfile.mkdtemp(prefix="hearth-bench-"))
    try:
        for app in args.app_list:
            results.append(bench_app(app, args, hearth_env, state_root))
    except VerificationFailed as e:
        print("\nthe servers disagree, nothing measured:", file=sys.stderr)
        for problem in e.problems:
            print(f"  {problem}", file=sys.stderr)
        return 1
    except BenchError as e:
        print(f"\nbench/http.py: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted (SIGINT); servers stopped, nothing written", file=sys.stderr)
        return 130
    except Interrupted as e:
        print(f"\ninterrupted ({e}); servers stopped, nothing written", file=sys.stderr)
        return 128 + e.signum
    finally:
        shutil.rmtree(state_root, ignore_errors=True)

    path = write_report(results, args, info, started, load_before, stripped)
    print("\n" + summary_table(results))
    print(f"\nwrote {path} and bench/results/http-latest.md")
    failed = sum(r.failed() for r in results)
    if failed:
        print(f"\n{failed} request(s) failed (see the per-round table)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
