# Hearth: the two commands a newcomer needs are `make run` and `make test`.

CARGO ?= cargo
PHPUNIT ?= phpunit
PHPCS ?= phpcs

.PHONY: run test build test-rust test-php test-phpt lint bench clean

## Serve the built-in demo on http://127.0.0.1:8080 (Ctrl-C to stop). Run
## as root, Hearth needs a user for PHP: the demo's workers run as www-data.
RUN_AS := $(if $(filter 0,$(shell id -u)),--user www-data,)
run:
	$(CARGO) run --release -p hearth -- serve --listen 127.0.0.1:8080 $(RUN_AS)

build:
	$(CARGO) build --workspace --all-targets

## Every test: Rust unit, property and integration tests (real php-cgi
## workers, and nginx + php-fpm for the differential test), the PHP
## library's PHPUnit suite, and the linters.
test: lint test-rust test-php

## Tests that need root (switching the workers' user) are marked ignored,
## so that a run as another user lists them as such; as root they run too.
test-rust:
	$(CARGO) test --workspace
	@if [ "$$(id -u)" = 0 ]; then \
		$(CARGO) test -p hearth --test security -- --ignored && \
		$(CARGO) test -p hearth --test worker_isolation -- --ignored; \
	else \
		echo "tests needing root skipped (tests/security.rs, tests/worker_isolation.rs, shown as ignored above): run make test as root to run them"; \
	fi

test-php:
	$(CARGO) build -p hearth
	cd php && HEARTH_BIN=$(CURDIR)/target/debug/hearth $(PHPUNIT)

## PHP's own request-input tests (php-src's tests/basic and the ext/ and
## sapi/ tests with request sections) over HTTP, against nginx + php-fpm and
## against Hearth's worker mode; fails on a test that passes under php-fpm
## and fails under Hearth without being listed in
## tests/phpt/known-failures.txt. Not in `make test`: it takes minutes and
## downloads the distribution's PHP source package once (see
## tests/phpt/run.py).
test-phpt:
	$(CARGO) build -p hearth
	python3 tests/phpt/run.py --check

lint:
	@if $(CARGO) fmt --version >/dev/null 2>&1; then $(CARGO) fmt --all -- --check; else echo "rustfmt not installed: skipping cargo fmt --check"; fi
	@if $(CARGO) clippy --version >/dev/null 2>&1; then $(CARGO) clippy --workspace --all-targets --all-features -- -D warnings; else echo "clippy not installed: skipping cargo clippy"; fi
	@for f in $$(git ls-files '*.php'); do php -l "$$f" >/dev/null || exit 1; done; echo "php -l: ok"
	@if command -v $(PHPCS) >/dev/null 2>&1; then $(PHPCS) --standard=PSR12 php/src php/tests php/autoload.php examples; else echo "phpcs not installed: skipping PSR-12 check"; fi

## Hearth against nginx + php-fpm, same machine, same run; then `hearth run`
## against the TaskRunner.php seed's process pools (see bench/README.md).
bench:
	$(CARGO) build --release -p hearth
	python3 bench/http.py
	python3 bench/recycle.py
	python3 bench/tasks.py

clean:
	$(CARGO) clean
