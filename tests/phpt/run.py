#!/usr/bin/env python3
"""PHP's own request-input tests, over HTTP, against nginx + php-fpm and
against Hearth's worker mode.

The tests are php-src's tests/basic/*.phpt and every test under ext/ and
sapi/ with a --GET--, --POST--, --POST_RAW--, --PUT--, --COOKIE--,
--GZIP_POST-- or --DEFLATE_POST-- section, at the PHP version the
distribution ships. Each is sent as the HTTP request run-tests.php would
describe to php-cgi (query string, Cookie header, body and content type),
with run-tests.php's ini settings and the test's --INI-- applied to both
servers (one nginx + php-fpm and one `hearth serve` per distinct --INI--),
and its output compared with --EXPECT--, --EXPECTF-- or --EXPECTREGEX-- as
run-tests.php compares it.

Under Hearth the worker script includes the test's --FILE-- inside the
handler it gives Hearth\\Worker::serve(), as a legacy front controller
would, one worker serving every test of an --INI-- set in turn.

Where the tests come from, in this order: --src DIR (a php-src tree);
$PHPT_SRC; the cache target/phpt/php-src-VERSION; the distribution's source
package (apt-get source, with deb-src entries made from the system's own
deb entries, into the cache). Where none can be had the run is skipped with
the reason, exit status 0.

Known failures: tests/phpt/known-failures.txt lists the tests that pass
under php-fpm and fail under Hearth, each with a one-line reason. With
--check, a test that passes under php-fpm and fails under Hearth without
being listed fails the run (exit 1); a listed test that passes is reported
as fixed.

Usage: tests/phpt/run.py [--check] [--filter SUBSTR] [--src DIR]
                         [--hearth BIN] [--crlf] [--verbose]
"""

import argparse
import glob
import gzip
import os
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CACHE = os.path.join(ROOT, "target", "phpt")
KNOWN = os.path.join(ROOT, "tests", "phpt", "known-failures.txt")
# The PHP library's own request startup (--php-extension off) has its own list.
KNOWN_FALLBACK = os.path.join(ROOT, "tests", "phpt", "known-failures-fallback.txt")
REFERENCE = os.path.join(ROOT, "bench", "reference", "nginx-fpm.sh")
REQUEST_SECTIONS = ("GET", "POST", "POST_RAW", "PUT", "COOKIE", "GZIP_POST", "DEFLATE_POST")
# Sections with no HTTP equivalent: such a test is skipped and says why.
UNSUPPORTED = ("ARGS", "STDIN", "CAPTURE_STDIO", "REDIRECTTEST", "PHPDBG",
               "FILE_EXTERNAL", "EXPECT_EXTERNAL", "EXPECTF_EXTERNAL",
               "EXPECTREGEX_EXTERNAL")
# run-tests.php's $ini_overwrites (PHP 8.2), under every test's own --INI--.
INI_OVERWRITES = """output_handler=
open_basedir=
disable_functions=
output_buffering=Off
error_reporting=32767
display_errors=1
display_startup_errors=1
log_errors=0
html_errors=0
report_memleaks=1
report_zend_debug=0
docref_root=
docref_ext=.html
error_prepend_string=
error_append_string=
auto_prepend_file=
auto_append_file=
ignore_repeated_errors=0
precision=14
serialize_precision=-1
memory_limit=128M
zend.assertions=1
zend.exception_ignore_args=0
zend.exception_string_param_max_len=15
short_open_tag=0
"""
TIMEOUT = 20.0


def log(*args):
    print(*args, flush=True)


# ---------------------------------------------------------------- sources

def php_version():
    out = subprocess.run(["php", "-r", "echo PHP_VERSION;"], capture_output=True, text=True)
    return out.stdout.strip()


def apt_options(state):
    return ["-o", "Dir::Etc::SourceList=/dev/null",
            "-o", "Dir::Etc::SourceParts=" + os.path.join(state, "sources"),
            "-o", "Dir::State::Lists=" + os.path.join(state, "lists"),
            "-o", "Dir::Cache=" + os.path.join(state, "cache"),
            "-o", "APT::Sandbox::User=root", "-q"]


def deb_src_entries():
    """deb-src twins of the system's own deb entries (both formats)."""
    entries = []
    for path in glob.glob("/etc/apt/sources.list.d/*.sources"):
        text = open(path).read()
        if "URIs:" in text:
            entries.append(("deb822", re.sub(r"(?m)^Types:\s*deb\s*$", "Types: deb-src", text)))
    lines = []
    for path in ["/etc/apt/sources.list"] + glob.glob("/etc/apt/sources.list.d/*.list"):
        if os.path.exists(path):
            for line in open(path):
                if line.startswith("deb "):
                    lines.append("deb-src " + line[4:])
    if lines:
        entries.append(("list", "".join(lines)))
    return entries


def fetch_source(version):
    """The orig tarball of the distribution's php source package, extracted
    (its test and include files only) under the cache. Returns the tree or
    raises RuntimeError with the reason."""
    if shutil.which("apt-get") is None:
        raise RuntimeError("apt-get not found: not a Debian system")
    minor = ".".join(version.split(".")[:2])
    package = "php" + minor
    state = os.path.join(CACHE, "apt")
    os.makedirs(os.path.join(state, "sources"), exist_ok=True)
    os.makedirs(os.path.join(state, "lists", "partial"), exist_ok=True)
    entries = deb_src_entries()
    if not entries:
        raise RuntimeError("no deb entries in /etc/apt to make deb-src entries from")
    for i, (kind, text) in enumerate(entries):
        ext = "sources" if kind == "deb822" else "list"
        with open(os.path.join(state, "sources", "src%d.%s" % (i, ext)), "w") as f:
            f.write(text)
    opts = apt_options(state)
    up = subprocess.run(["apt-get"] + opts + ["update"], capture_output=True, text=True)
    if up.returncode != 0:
        raise RuntimeError("apt-get update (deb-src) failed: " + up.stderr.strip()[-300:])
    show = subprocess.run(["apt-cache"] + opts + ["showsrc", package], capture_output=True, text=True)
    versions = re.findall(r"(?m)^Version: (\S+)", show.stdout)
    if not versions:
        raise RuntimeError("no source package %s in the archive" % package)
    installed = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package + "-common"],
                               capture_output=True, text=True).stdout.strip()

    def upstream(v):
        return v.split("-")[0].split(":")[-1]

    def key(v):
        return [int(x) for x in re.findall(r"\d+", upstream(v))]

    # The shipped version first, then the newest other release of the same
    # minor version (a mirror may lack the newest security upload's files).
    candidates = [v for v in versions if v == installed] + sorted(
        [v for v in versions if v != installed], key=key, reverse=True)
    dl = os.path.join(state, "download")
    errors = []
    for v in candidates:
        shutil.rmtree(dl, ignore_errors=True)
        os.makedirs(dl)
        got = subprocess.run(["apt-get"] + opts + ["source", "--download-only", "%s=%s" % (package, v)],
                             cwd=dl, capture_output=True, text=True)
        origs = glob.glob(os.path.join(dl, "*.orig.tar.*"))
        origs = [o for o in origs if not o.endswith(".asc")]
        if not origs:
            errors.append("%s: %s" % (v, (got.stderr.strip().splitlines() or ["no orig tarball"])[-1]))
            continue
        if v != installed:
            log("note: the source of the installed %s (%s) cannot be downloaded (%s); using %s"
                % (package, installed or "?", errors[-1] if errors else "not listed", v))
        target = os.path.join(CACHE, "php-src-" + upstream(v))
        tmp = target + ".partial"
        shutil.rmtree(tmp, ignore_errors=True)
        with tarfile.open(origs[0]) as tar:
            members = []
            for m in tar.getmembers():
                parts = m.name.split("/", 1)
                if len(parts) < 2 or not (m.isfile() or m.isdir()):
                    continue
                rel = parts[1]
                if rel.startswith(("tests/", "ext/", "sapi/")) and "/tests" in "/" + rel or rel == "run-tests.php":
                    m.name = rel
                    members.append(m)
            tar.extractall(tmp, members=members)
        os.rename(tmp, target)
        shutil.rmtree(dl, ignore_errors=True)
        return target
    raise RuntimeError("could not download %s's source: %s" % (package, "; ".join(errors)))


def find_source(args):
    version = php_version()
    if args.src:
        return args.src, version
    if os.environ.get("PHPT_SRC"):
        return os.environ["PHPT_SRC"], version
    minor = ".".join(version.split(".")[:2])
    cached = sorted(glob.glob(os.path.join(CACHE, "php-src-%s.*" % minor)))
    cached = [c for c in cached if not c.endswith(".partial")]
    exact = os.path.join(CACHE, "php-src-" + version)
    if os.path.isdir(exact):
        return exact, version
    if cached:
        return cached[-1], version
    return fetch_source(version), version


# ---------------------------------------------------------------- tests

def parse_phpt(path):
    sections = {}
    current = None
    with open(path, "rb") as f:
        for raw in f.read().decode("latin-1").splitlines(keepends=True):
            m = re.match(r"^--([_A-Z]+)--\r?\n?$", raw)
            if m:
                current = m.group(1)
                sections[current] = ""
            elif current is not None:
                sections[current] += raw
    if "FILEEOF" in sections:
        sections["FILE"] = sections.pop("FILEEOF").rstrip("\r\n")
    return sections


def collect(src):
    tests = sorted(glob.glob(os.path.join(src, "tests", "basic", "*.phpt")))
    for top in ("ext", "sapi"):
        for path in sorted(glob.glob(os.path.join(src, top, "**", "*.phpt"), recursive=True)):
            with open(path, "rb") as f:
                text = f.read().decode("latin-1")
            if any(re.search(r"(?m)^--%s--\r?$" % s, text) for s in REQUEST_SECTIONS if s != "PUT"):
                tests.append(path)
    return tests


def php_trim(s):
    return s.strip(" \t\n\r\0\x0b")


def raw_body(text):
    """POST_RAW/PUT as run-tests.php reads them: a leading Content-Type:
    line is the content type, the rest joined by LF."""
    content_type = None
    lines = []
    for line in php_trim(text).split("\n"):
        if content_type is None:
            m = re.match(r"(?i)^Content-Type:(.*)", line)
            if m:
                content_type = php_trim(m.group(1).replace("\r", ""))
                continue
        lines.append(line)
    return content_type, "\n".join(lines)


def build_request(sec, path, crlf):
    """(method, target, headers, body) as run-tests.php would describe it."""
    query = php_trim(sec.get("GET", ""))
    headers = [("Host", "localhost"), ("Connection", "close")]
    body = None
    method = "GET"
    content_type = None
    for line in sec.get("ENV", "").splitlines():
        if "=" in line:
            name, value = line.split("=", 1)
            if name.startswith("HTTP_"):
                headers.append((name[5:].replace("_", "-").title(), value))
            elif name == "CONTENT_TYPE":
                content_type = value
    if php_trim(sec.get("COOKIE", "")):
        # A header cannot hold line breaks; PHP skips the blanks they leave.
        headers.append(("Cookie", re.sub(r"\r?\n", " ", php_trim(sec["COOKIE"]))))
    if php_trim(sec.get("POST_RAW", "")) or php_trim(sec.get("PUT", "")):
        method = "POST" if php_trim(sec.get("POST_RAW", "")) else "PUT"
        ct, text = raw_body(sec.get("POST_RAW") or sec.get("PUT"))
        content_type = content_type or ct
        if crlf and content_type and "multipart" in content_type.lower():
            text = re.sub(r"\r?\n", "\r\n", text)
        body = text.encode("latin-1")
    elif php_trim(sec.get("POST", "")):
        method = "POST"
        body = php_trim(sec["POST"]).encode("latin-1")
        content_type = content_type or "application/x-www-form-urlencoded"
    elif php_trim(sec.get("GZIP_POST", "")):
        method = "POST"
        body = gzip.compress(php_trim(sec["GZIP_POST"]).encode("latin-1"), 9)
        headers.append(("Content-Encoding", "gzip"))
        content_type = "application/x-www-form-urlencoded"
    elif php_trim(sec.get("DEFLATE_POST", "")):
        method = "POST"
        body = zlib.compress(php_trim(sec["DEFLATE_POST"]).encode("latin-1"), 9)
        headers.append(("Content-Encoding", "deflate"))
        content_type = "application/x-www-form-urlencoded"
    if content_type:
        headers.append(("Content-Type", content_type))
    if body is not None:
        headers.append(("Content-Length", str(len(body))))
    target = "/" + path + ("?" + query if query else "")
    return method, target, headers, body


def http(port, method, target, headers, body):
    head = "%s %s HTTP/1.1\r\n" % (method, target)
    head += "".join("%s: %s\r\n" % h for h in headers) + "\r\n"
    data = head.encode("latin-1") + (body or b"")
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as s:
        s.sendall(data)
        chunks = []
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    raw = b"".join(chunks)
    head, _, rest = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1]) if lines and len(lines[0].split()) > 1 else 0
    hdrs = [tuple(x.strip() for x in line.split(":", 1)) for line in lines[1:] if ":" in line]
    if any(n.lower() == "transfer-encoding" and "chunked" in v.lower() for n, v in hdrs):
        out = b""
        while rest:
            size_line, _, rest = rest.partition(b"\r\n")
            size = int(size_line.split(b";")[0] or b"0", 16)
            if size == 0:
                break
            out += rest[:size]
            rest = rest[size + 2:]
        rest = out
    return status, hdrs, rest


def expectf_to_regex(wanted):
    """run-tests.php's EXPECTF: %r...%r is a regex, the rest quoted, then
    the placeholders replaced."""
    out = ""
    pos = 0
    n = len(wanted)
    while pos < n:
        start = wanted.find("%r", pos)
        if start != -1:
            end = wanted.find("%r", start + 2)
            if end == -1:
                start = end = n
        else:
            start = end = n
        out += quote(wanted[pos:start])
        if end > start:
            out += "(" + wanted[start + 2:end] + ")"
        pos = end + 2
    table = {
        "%e": "/", "%s": r"[^\r\n]+", "%S": r"[^\r\n]*", "%a": ".+", "%A": ".*",
        "%w": r"\s*", "%i": r"[+-]?\d+", "%d": r"\d+", "%x": "[0-9a-fA-F]+",
        "%f": r"[+-]?(?:\d+|(?=\.\d))(?:\.\d+)?(?:[Ee][+-]?\d+)?", "%c": ".", "%0": r"\x00",
    }
    # strtr(): longest match first, one left-to-right pass.
    return re.sub("|".join(re.escape(k) for k in table), lambda m: table[m.group(0)], out)


def quote(s):
    """preg_quote($s, '/'): "%" is not special and stays for the placeholders."""
    return re.sub(r"([.\\+*?\[^\]$(){}=!<>|:\-#/])", r"\\\1", s).replace("\0", "\\000")


def matches(sec, output):
    output = php_trim(output.replace("\r\n", "\n"))
    if "EXPECTF" in sec or "EXPECTREGEX" in sec:
        wanted = php_trim(sec.get("EXPECTF", sec.get("EXPECTREGEX")))
        pattern = wanted.replace("\r\n", "\n")
        if "EXPECTF" in sec:
            pattern = expectf_to_regex(pattern)
        try:
            return re.fullmatch(pattern, output, re.S) is not None or \
                re.fullmatch(pattern, output + "\n", re.S) is not None
        except re.error:
            return False
    return output == php_trim(sec.get("EXPECT", "")).replace("\r\n", "\n")


# ---------------------------------------------------------------- servers

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc=None, seconds=30):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


class Servers:
    """nginx + php-fpm and hearth serve, both reading the same extra ini
    file through PHP_INI_SCAN_DIR (a leading ":" appends it to the
    distribution's conf.d, so it wins)."""

    def __init__(self, src, ini, hearth_bin, work, extension=None):
        self.work = work
        self.conf = os.path.join(work, "conf.d")
        os.makedirs(self.conf, exist_ok=True)
        with open(os.path.join(self.conf, "zz-phpt.ini"), "w", encoding="latin-1") as f:
            f.write(INI_OVERWRITES + ini + "\n")
        env = dict(os.environ, PHP_INI_SCAN_DIR=":" + self.conf, CLIENT_MAX_BODY_SIZE="64m")
        self.fpm_state = os.path.join(work, "fpm")
        self.fpm_port = free_port()
        started = subprocess.run([REFERENCE, "start", self.fpm_state, src, "hearth-phpt-worker.php",
                                  str(self.fpm_port), "1"], env=env, capture_output=True, text=True)
        if started.returncode != 0:
            raise RuntimeError("nginx + php-fpm did not start: " + started.stderr)
        self.hearth_port = free_port()
        cmd = [hearth_bin, "serve", os.path.join(src, "hearth-phpt-worker.php"),
               "--listen", "127.0.0.1:%d" % self.hearth_port, "--workers", "1",
               "--max-body-size", "64M", "--request-timeout", "15s"]
        if extension:
            cmd += ["--php-extension", extension]
        if os.getuid() == 0:
            cmd += ["--user", "root"]
        self.hearth_log = open(os.path.join(work, "hearth.log"), "wb")
        self.hearth = subprocess.Popen(cmd, env=dict(env, HEARTH_LOG="warn"),
                                       stdout=self.hearth_log, stderr=subprocess.STDOUT)
        if not wait_port(self.hearth_port, self.hearth):
            self.stop()
            raise RuntimeError("hearth did not start, see " + self.hearth_log.name)

    def stop(self):
        subprocess.run([REFERENCE, "stop", self.fpm_state], capture_output=True)
        if self.hearth.poll() is None:
            self.hearth.terminate()
            try:
                self.hearth.wait(10)
            except subprocess.TimeoutExpired:
                self.hearth.kill()
                self.hearth.wait()
        self.hearth_log.close()


WORKER = """<?php
// Hearth's worker for PHP's own tests: each request includes the test
// file its path names, inside the handler, as a legacy front controller
// in worker mode would.
declare(strict_types=1);
require %r;
Hearth\\Worker::serve(static function (): void {
    // getenv() too: a test's variables_order may leave $_SERVER empty.
    $uri = $_SERVER['REQUEST_URI'] ?? getenv('REQUEST_URI');
    $file = __DIR__ . parse_url((string) $uri, PHP_URL_PATH);
    if (!str_ends_with($file, '.hearth-phpt.php') || !is_file($file)) {
        http_response_code(404);
        return;
    }
    include $file;
});
"""


# ---------------------------------------------------------------- run

def loaded_extensions():
    out = subprocess.run(["php", "-m"], capture_output=True, text=True).stdout
    return {line.strip().lower() for line in out.splitlines() if line.strip() and not line.startswith("[")}


def skip_reason(sec, path, ini, extensions):
    for name in UNSUPPORTED:
        if name in sec:
            return "--%s-- has no HTTP equivalent" % name
    for line in sec.get("ENV", "").splitlines():
        name = line.split("=", 1)[0]
        if name and not name.startswith("HTTP_") and name != "CONTENT_TYPE":
            return "--ENV-- sets %s, which a client cannot" % name
    missing = [e for e in sec.get("EXTENSIONS", "").split() if e.lower() not in extensions]
    if missing:
        return "extension missing: " + ", ".join(missing)
    if not any(k in sec for k in ("EXPECT", "EXPECTF", "EXPECTREGEX")):
        return "no --EXPECT-- section"
    if "SKIPIF" in sec:
        skipif = path[:-5] + ".hearth-phpt-skipif.php"
        with open(skipif, "w", encoding="latin-1") as f:
            f.write(sec["SKIPIF"])
        # run-tests.php runs a test with request sections, and its
        # SKIPIF, with php-cgi ("-q": no headers).
        cgi = shutil.which("php-cgi")
        cmd = [cgi, "-q"] if cgi else ["php"]
        for line in (INI_OVERWRITES + ini).splitlines():
            if line.strip() and not line.lstrip().startswith(";"):
                cmd += ["-d", line.strip()]
        out = subprocess.run(cmd + [skipif], capture_output=True, cwd=os.path.dirname(path),
                             timeout=60).stdout.decode("latin-1")
        os.unlink(skipif)
        if php_trim(out).lower().startswith("skip"):
            return "SKIPIF: " + php_trim(out)[:100]
    return None


def load_known(path=KNOWN):
    known = {}
    if os.path.exists(path):
        for line in open(path, encoding="utf-8"):
            line = line.strip()
            if line and not line.startswith("#"):
                name, _, reason = line.partition(" ")
                known[name] = reason.strip()
    return known


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", help="a php-src tree at the installed version")
    parser.add_argument("--hearth", default=os.path.join(ROOT, "target", "debug", "hearth"))
    parser.add_argument("--filter", default="", help="only tests whose path contains this")
    parser.add_argument("--check", action="store_true",
                        help="fail on a php-fpm pass that fails under Hearth and is not in known-failures.txt")
    parser.add_argument("--crlf", action="store_true", help="send multipart bodies with CRLF line ends")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--php-extension", default=None,
                        help="hearth serve's --php-extension (off: the PHP library's request startup, "
                             "checked against known-failures-fallback.txt)")
    args = parser.parse_args()

    try:
        src, version = find_source(args)
    except RuntimeError as e:
        log("skipped: PHP's tests cannot be had here: %s" % e)
        return 0
    if not os.path.exists(args.hearth):
        log("error: no hearth binary at %s (cargo build -p hearth)" % args.hearth)
        return 2
    log("PHP %s, tests from %s" % (version, src))
    paths = [p for p in collect(src) if args.filter in os.path.relpath(p, src)]
    extensions = loaded_extensions()
    with open(os.path.join(src, "hearth-phpt-worker.php"), "w") as f:
        f.write(WORKER % os.path.join(ROOT, "php", "autoload.php"))

    groups = {}
    results = {}
    for path in paths:
        rel = os.path.relpath(path, src)
        sec = parse_phpt(path)
        ini = sec.get("INI", "").replace("{PWD}", os.path.dirname(path)).replace("{TMP}", tempfile.gettempdir())
        ini = "\n".join(line.strip() for line in ini.splitlines() if line.strip())
        reason = skip_reason(sec, path, ini, extensions)
        if reason:
            results[rel] = ("skip", "skip", reason)
            continue
        groups.setdefault(ini, []).append((rel, path, sec))

    work = tempfile.mkdtemp(prefix="hearth-phpt-")
    try:
        for n, (ini, tests) in enumerate(sorted(groups.items())):
            servers = Servers(src, ini, args.hearth, os.path.join(work, "g%d" % n), args.php_extension)
            try:
                for rel, path, sec in tests:
                    script = path[:-5] + ".hearth-phpt.php"
                    with open(script, "w", encoding="latin-1") as f:
                        f.write(sec["FILE"])
                    method, target, headers, body = build_request(
                        sec, os.path.relpath(script, src), args.crlf)
                    outcome = []
                    for port in (servers.fpm_port, servers.hearth_port):
                        try:
                            status, _, out = http(port, method, target, headers, body)
                            ok = matches(sec, out.decode("latin-1"))
                            outcome.append(("pass" if ok else "fail", status, out))
                        except (OSError, ValueError, IndexError) as e:
                            outcome.append(("fail", 0, str(e).encode()))
                    os.unlink(script)
                    results[rel] = (outcome[0][0], outcome[1][0], "")
                    if args.verbose and outcome[0][0] != outcome[1][0]:
                        log("--- %s  fpm %s (%d), hearth %s (%d)" % (rel, outcome[0][0], outcome[0][1],
                                                                 outcome[1][0], outcome[1][1]))
                        log("php-fpm: " + outcome[0][2].decode("latin-1")[:600])
                        log("hearth:  " + outcome[1][2].decode("latin-1")[:600])
            finally:
                servers.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
        os.unlink(os.path.join(src, "hearth-phpt-worker.php"))

    ran = {k: v for k, v in results.items() if v[0] != "skip"}
    fpm_pass = sum(1 for v in ran.values() if v[0] == "pass")
    hearth_pass = sum(1 for v in ran.values() if v[1] == "pass")
    regressions = sorted(k for k, v in ran.items() if v[0] == "pass" and v[1] != "pass")
    skipped = sorted((k, v[2]) for k, v in results.items() if v[0] == "skip")
    log("")
    log("skipped (%d):" % len(skipped))
    for k, why in skipped:
        log("  %s: %s" % (k, why))
    known_file = KNOWN_FALLBACK if args.php_extension == "off" else KNOWN
    known = load_known(known_file)
    log("")
    log("passing under php-fpm, failing under Hearth (%d):" % len(regressions))
    for k in regressions:
        log("  %s%s" % (k, ("  [known: %s]" % known[k]) if k in known else "  [NEW]"))
    fixed = sorted(k for k in known if k in ran and ran[k][1] == "pass")
    if fixed:
        log("")
        log("listed in known-failures.txt but passing under Hearth now (%d):" % len(fixed))
        for k in fixed:
            log("  " + k)
    log("")
    log("%d tests from %s, %d run, %d skipped" % (len(results), os.path.basename(src), len(ran), len(skipped)))
    log("php-fpm: %d passed, %d failed" % (fpm_pass, len(ran) - fpm_pass))
    log("hearth:  %d passed, %d failed" % (hearth_pass, len(ran) - hearth_pass))
    new = [k for k in regressions if k not in known]
    if args.check and new:
        log("FAILED: %d test(s) pass under php-fpm and fail under Hearth without being listed in %s"
            % (len(new), os.path.relpath(known_file, ROOT)))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
