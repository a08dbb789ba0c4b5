"""The API's connections price random reads as SSD storage has them (scheduler_project/wsgi.py
sets DATABASE_RANDOM_PAGE_COST, scheduler_project/postgresql applies it), so a task's latest runs
are read by a backward index scan, and keep one generic plan per prepared read
(DATABASE_PLAN_CACHE_MODE); the other roles, and 0 or empty, leave the server's settings."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, connections

from scheduler_project.database import databases
from tasks.db import connect
from tests.conftest import process_env

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[3]


def _shown(conn) -> str:
    with conn.cursor() as cursor:
        cursor.execute("SHOW random_page_cost")
        return cursor.fetchone()[0]


SHOWN = (
    "from django.db import connection; c = connection.cursor(); "
    "c.execute('SHOW random_page_cost'); a = c.fetchone()[0]; "
    "c.execute('SHOW plan_cache_mode'); print(a, c.fetchone()[0])"
)


def _in_process(prelude: str) -> str:
    env = process_env()
    env.pop("DATABASE_RANDOM_PAGE_COST", None)
    env.pop("DATABASE_PLAN_CACHE_MODE", None)
    env["DJANGO_SETTINGS_MODULE"] = "scheduler_project.settings"
    done = subprocess.run(
        [sys.executable, "-c", f"{prelude}; {SHOWN}"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


def test_the_api_sets_both_and_the_other_roles_leave_the_servers() -> None:
    assert _in_process("import scheduler_project.wsgi") == "1.1 force_generic_plan"
    assert (
        _in_process("import django; django.setup()")
        == f"{_servers()} {_servers('plan_cache_mode')}"
    )
    assert _shown(connection) == _servers()  # the tests run as a role would, not as the API


def _servers(name: str = "random_page_cost") -> str:
    with connect() as raw:  # a plain psycopg connection: the server's own setting
        return raw.execute(f"SHOW {name}").fetchone()[0]


def test_a_prepared_read_keeps_one_generic_plan_where_auto_planned_it_every_time() -> None:
    # `auto` plans each of the first five executions anew, and then keeps doing so while the
    # custom plans look cheaper than the generic one, as they did for the API's reads.
    statement = "SELECT count(*) FROM tasks_task WHERE id = ANY(%s::uuid[]) AND owner_id = %s"
    found = {}
    for mode in ("", "force_generic_plan"):
        wrapper = connections.create_connection("default")
        wrapper.settings_dict["PLAN_CACHE_MODE"] = mode
        try:
            wrapper.ensure_connection()
            raw = wrapper.connection
            raw.prepare_threshold = 0
            with psycopg.Cursor(raw) as cursor:  # server-side binding, as tasks.db's reads
                for _ in range(8):
                    cursor.execute(
                        statement, [["00000000-0000-0000-0000-000000000001"], 1], prepare=True
                    )
                found[mode] = cursor.execute(
                    "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
                ).fetchone()
        finally:
            wrapper.close()
    assert found["force_generic_plan"] == (8, 0)
    assert found[""][1] >= 5  # the server's `auto` planned anew


@pytest.mark.parametrize(("cost", "shown"), [(0.0, None), (2.5, "2.5")])
def test_the_setting_is_applied_to_new_connections(cost: float, shown: str | None) -> None:
    wrapper = connections.create_connection("default")
    wrapper.settings_dict["RANDOM_PAGE_COST"] = cost
    try:
        assert _shown(wrapper) == (shown or _servers())
    finally:
        wrapper.close()


def test_databases_carry_the_settings_to_the_replica_too() -> None:
    found = databases(
        "postgres://u@h/db",
        "postgres://u@r/db",
        conn_max_age=0,
        application_name="x",
        random_page_cost=1.1,
        plan_cache_mode="force_generic_plan",
    )
    assert found["default"]["RANDOM_PAGE_COST"] == found["replica"]["RANDOM_PAGE_COST"] == 1.1
    assert found["replica"]["PLAN_CACHE_MODE"] == "force_generic_plan"


@pytest.mark.parametrize("mode", ["generic", "force_generic_plan; DROP TABLE x", "AUTO"])
def test_an_unknown_plan_cache_mode_stops_the_process_naming_the_variable(mode: str) -> None:
    with pytest.raises(ImproperlyConfigured, match="DATABASE_PLAN_CACHE_MODE"):
        databases(
            "postgres://u@h/db", "", conn_max_age=0, application_name="x", plan_cache_mode=mode
        )
