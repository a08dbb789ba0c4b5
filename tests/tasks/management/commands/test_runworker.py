"""runworker's connections keep one generic plan per prepared statement (generic_plans), unless
DATABASE_PLAN_CACHE_MODE says otherwise, and are kept past DATABASE_CONN_MAX_AGE's default
(kept_connections) unless it is set."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import process_env

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[4]

# One worker pass on an empty queue, then the mode its connection had.
SHOWN = (
    "import django; django.setup(); "
    "from django.core.management import call_command; "
    "from django.db import connection; "
    "call_command('runworker', '--once', '--concurrency', '1'); "
    "c = connection.cursor(); c.execute('SHOW plan_cache_mode'); print(c.fetchone()[0])"
)


# One worker pass, then whether its connection will be renewed at an age (close_at set).
AGED = (
    "import django; django.setup(); "
    "from django.core.management import call_command; "
    "from django.db import connection; "
    "call_command('runworker', '--once', '--concurrency', '1'); "
    "connection.ensure_connection(); print(connection.close_at is not None)"
)


def _worker_mode(**env: str) -> str:
    return _worker_prints(SHOWN, "DATABASE_PLAN_CACHE_MODE", **env)


def _worker_prints(script: str, variable: str, **env: str) -> str:
    environment = process_env(DJANGO_SETTINGS_MODULE="scheduler_project.settings", **env)
    if not env:
        environment.pop(variable, None)
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=environment,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


def test_the_workers_prepared_statements_keep_a_generic_plan() -> None:
    # The server's default is `auto`: five custom plans of each prepared statement on every new
    # connection (the worker renews its connection every DATABASE_CONN_MAX_AGE).
    assert _worker_mode() == "force_generic_plan"


def test_an_operators_plan_cache_mode_still_decides() -> None:
    assert _worker_mode(DATABASE_PLAN_CACHE_MODE="auto") == "auto"


def test_the_workers_connection_is_kept_past_the_default_age() -> None:
    # Renewed every 60 s, each new connection prepared and planned every variant of the claim
    # and the cycle again.
    assert _worker_prints(AGED, "DATABASE_CONN_MAX_AGE") == "False"


def test_an_operators_connection_age_still_decides() -> None:
    assert _worker_prints(AGED, "DATABASE_CONN_MAX_AGE", DATABASE_CONN_MAX_AGE="60") == "True"
