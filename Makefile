# The two commands of the README, and what they need. Everything installs itself on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The suite runs on the real services (CI and `make test`); the demo runs on the embedded default.
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/test
TEST_REDIS_URL ?= redis://127.0.0.1:6379/0
# What the SQLite leg runs again: the tests that use the database (the marker is assigned in
# tests/suite_layout.py) or the embedded default's other settings. The Django-free library, the
# fuzzing and Spark ran once, in `make test`. docs/testing.md.
SQLITE_LEG_MARKERS := (database or embedded) and not spark
# TEST_WORKERS: pytest-xdist workers for the tests that start no Spark (both legs); `make test` runs
# the Spark tests after them in one process (SPARK_TEST_WORKERS), .ci/suite-in-two-parts. A file
# whose tests share a fixture stays on one worker (its xdist_group, tests/suite_layout.py); each
# worker has its own test database, Redis names, Spark session and temp dirs. 0 runs in this
# process, serially (what --pdb needs). Serially the suite took 57 min here (2026-11-28), over its
# 45-minute budget; all of it on two workers was no faster and two Spark tests failed (2026-11-27).
# docs/testing.md, "Workers".
TEST_WORKERS ?= 2
SPARK_TEST_WORKERS ?= 0
XDIST_ARGS := -n $(TEST_WORKERS) --dist loadgroup

.PHONY: demo test test-sqlite lint bench-smoke fixtures fuzz

$(STAMP): requirements.txt requirements-spark.txt requirements-dev.txt
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements-dev.txt
	touch $(STAMP)

## Run the dashboard, a Celery worker, celery beat and live PySpark demo queries (Ctrl-C stops all).
demo: $(STAMP)
	$(BIN)/python manage.py demo

## The whole test suite on PostgreSQL + Redis, with real Spark, a real worker and a real browser.
test: $(STAMP)
	bash .ci/system-packages
	bash .ci/services
	CKPTWEB_DATABASE_URL=$(TEST_DATABASE_URL) CKPTWEB_REDIS_URL=$(TEST_REDIS_URL) TEST_WORKERS=$(TEST_WORKERS) \
		SPARK_TEST_WORKERS=$(SPARK_TEST_WORKERS) bash .ci/suite-in-two-parts $(BIN)/python $(PYTEST_ARGS)

## Again on the embedded default (SQLite, no Redis), the tests that depend on it; worker tests skip there.
test-sqlite: $(STAMP)
	bash .ci/system-packages
	$(BIN)/python -m pytest $(XDIST_ARGS) -m "$(SQLITE_LEG_MARKERS)" $(PYTEST_ARGS)

## The house rules that check themselves: the formatter, the linter (rules in pyproject.toml), dead code
## and function sizes (none over 40 lines at 88 columns).
lint: $(STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/python .ci/dead_code.py
	$(BIN)/python .ci/function_sizes.py --max 40

## Every benchmark in bench/ at a tiny size, so none stops running unseen (bench/smoke.py; the services as for `make test`).
bench-smoke: $(STAMP)
	bash .ci/system-packages
	bash .ci/services
	$(BIN)/python -m bench.smoke $(BENCH_SMOKE_ARGS)

## The deep fuzzing, outside the suite's budget: 20,000 new random cases per parser and shape
## (the suite sends the same 1,000 each run). About 35 minutes here. docs/reliability.md.
fuzz: $(STAMP)
	CKPTWEB_FUZZ_EXAMPLES=20000 CKPTWEB_FUZZ_RANDOM=1 $(BIN)/python -m pytest -q -p no:cacheprovider \
		tests/workers/checkpoint/test_fuzz_parsers.py

## Regenerate tests/fixtures with real PySpark.
fixtures: $(STAMP)
	$(BIN)/python -m pipelines.generate_fixtures tests/fixtures
