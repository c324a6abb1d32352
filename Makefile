# Hearth: the two commands a newcomer needs are `make run` and `make test`.
# Each first installs the Debian/Ubuntu packages it needs (the list is
# packaging/deps.txt; packaging/deps.sh installs them, as root or through
# `sudo -n`, or stops before building and prints the command to run).

CARGO ?= cargo
PHPUNIT ?= phpunit
PHPCS ?= phpcs
DEPS ?= sh packaging/deps.sh

# Where cargo builds: CARGO_TARGET_DIR when set, as cargo reads it.
TARGET_DIR := $(abspath $(or $(CARGO_TARGET_DIR),target))
HEARTH_DEBUG := $(TARGET_DIR)/debug/hearth
HEARTH_RELEASE := $(TARGET_DIR)/release/hearth
PHPUNIT_LOG := $(TARGET_DIR)/phpunit-junit.xml

# Optional tools, probed when a recipe asks (not when the Makefile is read).
have = $(shell $(1) >/dev/null 2>&1 && echo yes)
HAVE_RUSTFMT = $(call have,$(CARGO) fmt --version)
HAVE_CLIPPY = $(call have,$(CARGO) clippy --version)
IS_ROOT = $(filter 0,$(shell id -u))

.PHONY: run test build ext deb test-rust test-php test-packaging test-phpt lint bench clean \
	deps-run deps-test deps-bench deps-deb

deps-run deps-test deps-bench deps-deb: deps-%:
	@$(DEPS) $*

## Serve the built-in demo on http://127.0.0.1:8080 (Ctrl-C to stop). Run
## as root, Hearth needs a user for PHP: the demo's workers run as www-data.
RUN_AS = $(if $(IS_ROOT),--user www-data,)
run: deps-run ext
	$(CARGO) run --release -p hearth -- serve --listen 127.0.0.1:8080 $(RUN_AS)

## The Debian package, target/debian/hearth_VERSION_ARCH.deb: the release
## binary (the one make run and make bench build), the PHP library in
## /usr/share/php/Hearth, the extension for the installed PHP, the unit
## hearth.service, /etc/hearth/hearth.toml and the man pages (see
## packaging/debian/build.sh and docs/getting-started.md).
deb: deps-deb ext
	$(CARGO) build --release -p hearth
	sh packaging/debian/build.sh $(HEARTH_RELEASE) $(TARGET_DIR)/php-ext $(TARGET_DIR)/debian

build: ext
	$(CARGO) build --workspace --all-targets

## The Hearth PHP extension (ext/hearth: PHP's own request startup in the
## workers) for the installed PHP, as target/php-ext/hearth-phpX.Y.so, where
## hearth serve finds it; skipped with a note when php-dev is missing.
ext:
	sh ext/build.sh $(TARGET_DIR)/php-ext

## Every test: Rust unit, property and integration tests (real php-cgi
## workers, and nginx + php-fpm for the differential test), the PHP
## library's PHPUnit suite, the linters, and the tests of packaging/; then
## a summary naming everything that was skipped.
test: lint test-rust test-php test-packaging
	@skipped=$$( \
		[ -n "$(HAVE_RUSTFMT)" ] || echo "cargo fmt --check: rustfmt is not installed (rustup component add rustfmt)"; \
		[ -n "$(HAVE_CLIPPY)" ] || echo "cargo clippy: clippy is not installed (rustup component add clippy)"; \
		[ -n "$(IS_ROOT)" ] || echo "tests/security.rs and tests/worker_isolation.rs, the tests needing root: run make test as root"; \
		[ -n "$(IS_ROOT)" ] || echo "packaging/tests/deb_test.sh's install, serve and removal of the Debian package (dpkg -i, dpkg -P), which need root: run make test as root"; \
		awk '/<testcase /{ match($$0, /name="[^"]*"/); t = substr($$0, RSTART + 6, RLENGTH - 7); \
			match($$0, /class="[^"]*"/); c = substr($$0, RSTART + 7, RLENGTH - 8) } \
			/<skipped/{ printf "%s::%s, skipped by PHPUnit (why: in its output above)\n", c, t }' $(PHPUNIT_LOG) \
	); \
	echo; echo "make test: passed."; \
	if [ -n "$$skipped" ]; then echo "Skipped:"; echo "$$skipped" | sed 's/^/  /'; else echo "Nothing skipped."; fi

## Tests that need root (switching the workers' user) are marked ignored,
## so that a run as another user lists them as such; as root they run too.
## Both runs select the whole workspace: with `-p hearth`, cargo unifies
## features over hearth alone and builds hyper, h2 and the workspace crates
## a second time (a minute and a half on a cold target). test-php, below,
## builds with the same selection for the same reason.
test-rust: deps-test ext
	$(CARGO) test --workspace
	@if [ "$$(id -u)" = 0 ]; then \
		$(CARGO) test --workspace --test security --test worker_isolation -- --ignored; \
	else \
		echo "tests needing root skipped (tests/security.rs, tests/worker_isolation.rs, shown as ignored above): run make test as root to run them"; \
	fi

## The hearth binary PHPUnit runs is the one cargo test builds (same
## features): after test-rust this builds nothing.
test-php: deps-test ext
	$(CARGO) test --workspace --no-run --quiet
	cd php && HEARTH_BIN=$(HEARTH_DEBUG) $(PHPUNIT) --verbose --log-junit $(PHPUNIT_LOG)

## The decisions of packaging/deps.sh, against fake dpkg and apt; and the
## Debian package, built from the release binary (the one make run builds;
## the first release build takes minutes) and, as root, installed on this
## machine, served and purged (packaging/tests/deb_test.sh).
test-packaging: deps-test ext
	sh packaging/tests/deps_test.sh
	$(CARGO) build --release -p hearth
	sh packaging/tests/deb_test.sh $(HEARTH_RELEASE) $(TARGET_DIR)/php-ext

## PHP's own request-input tests (php-src's tests/basic and the ext/ and
## sapi/ tests with request sections) over HTTP, against nginx + php-fpm and
## against Hearth's worker mode; fails on a test that passes under php-fpm
## and fails under Hearth without being listed in
## tests/phpt/known-failures.txt. Not in `make test`: it takes minutes and
## downloads the distribution's PHP source package once (see
## tests/phpt/run.py).
test-phpt: deps-test ext
	$(CARGO) build -p hearth
	python3 tests/phpt/run.py --check

## rustfmt and clippy are optional (named in make test's summary when
## missing); phpcs is not: packaging/deps.sh installs it for make test.
lint: deps-test
	@if [ -n "$(HAVE_RUSTFMT)" ]; then $(CARGO) fmt --all -- --check; else echo "rustfmt not installed: skipping cargo fmt --check (rustup component add rustfmt)"; fi
	@if [ -n "$(HAVE_CLIPPY)" ]; then $(CARGO) clippy --workspace --all-targets --all-features -- -D warnings; else echo "clippy not installed: skipping cargo clippy (rustup component add clippy)"; fi
	@for f in $$(git ls-files '*.php'); do php -l "$$f" >/dev/null || exit 1; done; echo "php -l: ok"
	$(PHPCS) --standard=PSR12 --ignore='*.blade.php' php/src php/tests php/autoload.php examples

## Hearth against nginx + php-fpm, same machine, same run; the dashboard's
## cost under load (open, closed, no --admin); then `hearth run`
## against the TaskRunner.php seed's process pools, `hearth run` against
## GNU parallel and xargs -P on parallel's command lines, Jobs::call() round trips
## against php -r per call, and `hearth work` against Symfony Messenger and
## Laravel queue workers, and a bursty workload against fixed and
## autoscaled pools (see bench/README.md).
bench: deps-bench ext
	$(CARGO) build --release -p hearth
	python3 bench/http.py
	python3 bench/recycle.py
	python3 bench/autoscale.py
	python3 bench/dashboard.py
	python3 bench/pools.py
	python3 bench/tasks.py
	python3 bench/parallel.py
	python3 bench/calls.py
	python3 bench/jobs.py

clean:
	$(CARGO) clean
