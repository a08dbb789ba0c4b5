# Every target creates the virtual environment it needs; `make help` lists them.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip -q --disable-pip-version-check
PYTEST_ARGS ?=
RUN_ARGS ?=
# What the SQL-semantics run covers (CI runs it on PostgreSQL 16 too): every read the API serves,
# the claim, planning.
SQL_TESTS := tests/tasks/api tests/notifications/api tests/tasks/transitions \
	tests/tasks/worker/test_worker_claim_ahead.py tests/tasks/test_occurrences.py \
	tests/scheduler_project/test_database_failover.py
# The API's tests through PgBouncer 1.18 in transaction pooling mode (`make test-pgbouncer`).
API_TESTS := tests/tasks/api tests/notifications/api tests/scheduler_project/web
# What an API behind PgBouncer before 1.21 is given (docs/operations.md, PgBouncer).
THROUGH_PGBOUNCER := SCHEDULER_TEST_PGBOUNCER=1 DATABASE_PREPARED_STATEMENTS=false \
	DATABASE_CONN_MAX_AGE=0 DATABASE_RANDOM_PAGE_COST=0 DATABASE_PLAN_CACHE_MODE=

.DEFAULT_GOAL := help

help: ## list the targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

$(VENV)/.runtime: requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -r requirements.txt
	touch $@

$(VENV)/.dev: $(VENV)/.runtime requirements-dev.txt cli/pyproject.toml
	$(PIP) install -r requirements-dev.txt
	$(PIP) install ./cli
	touch $@

install: $(VENV)/.runtime ## create .venv and install the runtime requirements

run: $(VENV)/.runtime ## run API + scheduler + worker + reviewer (embedded PostgreSQL unless DATABASE_URL is set)
	$(PY) manage.py migrate --no-input
	$(PY) manage.py ensureadmin
	$(PY) manage.py collectstatic --no-input -v 0
	$(PY) manage.py runall $(RUN_ARGS)

test: $(VENV)/.dev ## run the test suite (DATABASE_URL, or the embedded PostgreSQL when unset)
	$(PY) -m pytest -m "not chaos and not fuzz" $(PYTEST_ARGS)

test-sql: $(VENV)/.dev ## the SQL-semantics tests (API reads, claim, planning) alone
	$(PY) -m pytest -m "not chaos and not fuzz" $(PYTEST_ARGS) $(SQL_TESTS)

test-pgbouncer: $(VENV)/.dev ## the API's tests through PgBouncer in transaction mode (DATABASE_URL on TCP)
	$(THROUGH_PGBOUNCER) $(PY) -m pytest -m "not chaos and not fuzz" $(PYTEST_ARGS) $(API_TESTS)

test-chaos: $(VENV)/.dev ## kill workers, restart PostgreSQL and fail it over under load
	$(PY) -m pytest -m chaos $(PYTEST_ARGS)

test-fuzz: $(VENV)/.dev ## schemathesis against the OpenAPI schema (docs/security.md)
	$(PY) -m pytest -m fuzz -q -s $(PYTEST_ARGS)

lint: $(VENV)/.dev ## ruff check, ruff format --check, mypy, no missing migrations
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	SCHEDULER_TESTING=true $(VENV)/bin/mypy
	SCHEDULER_TESTING=true $(PY) manage.py makemigrations --check --dry-run

fmt: $(VENV)/.dev ## format and auto-fix
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

taskset-schema: $(VENV)/.dev ## rewrite the copies cli/schedctl ships (task set schema, cron parser)
	SCHEDULER_TESTING=true $(PY) manage.py tasksetschema

bench: $(VENV)/.dev ## the benchmark set (docs/benchmarks.md)
	$(PY) -m bench all

.PHONY: help install run test test-sql test-pgbouncer test-chaos test-fuzz lint fmt taskset-schema bench
