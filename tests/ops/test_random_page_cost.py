"""The API's connections price random reads as SSD storage has them (scheduler_project/wsgi.py
sets DATABASE_RANDOM_PAGE_COST, scheduler_project/postgresql applies it), so a task's latest runs
are read by a backward index scan; the other roles, and 0, leave the server's setting."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection, connections

from scheduler_project.database import databases
from tasks.db import connect
from tests.conftest import process_env

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


def _shown(conn) -> str:
    with conn.cursor() as cursor:
        cursor.execute("SHOW random_page_cost")
        return cursor.fetchone()[0]


SHOWN = "from django.db import connection; c = connection.cursor(); "\
    "c.execute('SHOW random_page_cost'); print(c.fetchone()[0])"  # fmt: skip


def _in_process(prelude: str) -> str:
    env = process_env()
    env.pop("DATABASE_RANDOM_PAGE_COST", None)
    env["DJANGO_SETTINGS_MODULE"] = "scheduler_project.settings"
    done = subprocess.run([sys.executable, "-c", f"{prelude}; {SHOWN}"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


def test_the_api_prices_random_reads_as_ssd_and_the_other_roles_leave_the_servers() -> None:
    assert _in_process("import scheduler_project.wsgi") == "1.1"
    assert _in_process("import django; django.setup()") == _servers()
    assert _shown(connection) == _servers()  # the tests run as a role would, not as the API


def _servers() -> str:
    with connect() as raw:  # a plain psycopg connection: the server's own setting
        return raw.execute("SHOW random_page_cost").fetchone()[0]


@pytest.mark.parametrize(("cost", "shown"), [(0.0, None), (2.5, "2.5")])
def test_the_setting_is_applied_to_new_connections(cost: float, shown: str | None) -> None:
    wrapper = connections.create_connection("default")
    wrapper.settings_dict["RANDOM_PAGE_COST"] = cost
    try:
        assert _shown(wrapper) == (shown or _servers())
    finally:
        wrapper.close()


def test_databases_carry_the_setting_to_the_replica_too() -> None:
    found = databases("postgres://u@h/db", "postgres://u@r/db", conn_max_age=0,
                      application_name="x", random_page_cost=1.1)  # fmt: skip
    assert found["default"]["RANDOM_PAGE_COST"] == found["replica"]["RANDOM_PAGE_COST"] == 1.1
